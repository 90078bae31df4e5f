"""The Dask fit's collective alone: microseconds per allreduce between worker
processes of one machine, by message size (packboost._collective).

    python benchmarks/bench_collective.py                  # 2 ranks
    python benchmarks/bench_collective.py --ranks 3 --sizes 24 3200000
    python benchmarks/bench_collective.py --transports unix tcp --rounds 5

A depth of a distributed fit makes a handful of small exchanges (maxima and
grid sums of the era pass, slot sums: tens of bytes) and one large one (the
pooled cells: ~0.5 MB at 750k x 400 with a pack of 4, ~3 MB at Numerai's
full width). Each rank is a spawned process connected to the others as the
fit task connects them; rank 0's wall and CPU time per call are printed
(medians of ``--repeats`` timed batches), next to a plain copy of the same
bytes (the machine's memory bound for moving the array once). The machine is
shared and noisy: compare rows of one run.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import statistics
import time

import numpy as np

from packboost import _collective


def _rank_main(rank, addresses, results, sizes, calls, repeats, transport="unix"):
    # "unix": the ranks of one machine connect through Unix sockets (where
    # the platform has them), as a fit's do; "tcp": over TCP's loopback.
    listener = _collective.listen("127.0.0.1", local=transport == "unix")
    addresses[rank] = _collective.address_of(listener)
    while any(address is None for address in addresses[:]):
        time.sleep(0.01)
    collective = _collective.Collective.connect(rank, list(addresses), listener)
    timings = {}
    for size in sizes:
        array = np.arange(max(1, size // 8), dtype=np.int64)
        n_calls = max(3, calls * 24 // max(24, size // 64))   # fewer of the large ones
        for _ in range(5):
            collective.allreduce(array, "sum")
        wall, cpu = [], []
        for _ in range(repeats):
            start, start_cpu = time.perf_counter(), time.process_time()
            for _ in range(n_calls):
                collective.allreduce(array, "sum")
            wall.append((time.perf_counter() - start) / n_calls)
            cpu.append((time.process_time() - start_cpu) / n_calls)
        copy = []
        for _ in range(repeats):
            start = time.perf_counter()
            array.copy()
            copy.append(time.perf_counter() - start)
        timings[size] = (statistics.median(wall), statistics.median(cpu),
                         statistics.median(copy))
    collective.close()
    results[rank] = timings


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--sizes", type=int, nargs="+",
                        default=[24, 8_000, 512_000, 3_200_000], help="bytes per array")
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--transports", choices=["unix", "tcp"], nargs="+", default=["unix"],
                        help="how the ranks connect; several: each in turn, --rounds times")
    parser.add_argument("--rounds", type=int, default=1,
                        help="runs of every transport, alternating (medians reported)")
    args = parser.parse_args(argv)
    if args.ranks < 2:
        parser.error("--ranks must be at least 2")
    runs = {transport: [] for transport in args.transports}
    for _ in range(args.rounds):
        for transport in args.transports:
            runs[transport].append(_run(args, transport))
    report = {"ranks": args.ranks}
    for transport, timings in runs.items():
        report[transport] = [
            {"bytes": size,
             **{name: round(statistics.median(run[size][k] for run in timings) * 1e6, 1)
                for k, name in enumerate(("wall_us", "cpu_us", "copy_us"))}}
            for size in sorted(timings[0])]
    print(json.dumps(report, indent=1))


def _run(args, transport) -> dict:
    """Rank 0's (wall, CPU, copy) seconds per call by size, one set of ranks."""
    context = multiprocessing.get_context("spawn")
    with context.Manager() as manager:
        addresses = manager.list([None] * args.ranks)
        results = manager.dict()
        processes = [context.Process(target=_rank_main,
                                     args=(rank, addresses, results, args.sizes, args.calls,
                                           args.repeats, transport))
                     for rank in range(args.ranks)]
        for process in processes:
            process.start()
        for process in processes:
            process.join()
        if any(process.exitcode for process in processes):
            raise SystemExit("a rank failed")
        return dict(results[0])


if __name__ == "__main__":
    main()
