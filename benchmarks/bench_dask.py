"""Distributed training on Dask against the local fit on the same cores.

    python benchmarks/bench_dask.py --sizes small medium --rounds 5 --workers 1 2 \
        --threads-per-worker 1 --repeats 3
    python benchmarks/bench_dask.py --sizes medium --rounds 10 --workers 1 2 \
        --threads-per-worker 2 1 --layout by-era     # two layouts of the same cores

For each size, fits the local :class:`packboost.PackBoostRegressor` with
``w x t`` threads (in a process of its own holding the rows, as a user's
would: :class:`LocalFitProcess`) and :class:`packboost.dask.DaskPackBoostRegressor` on a
``LocalCluster(n_workers=w, threads_per_worker=t, processes=True)`` (the
input persisted on the workers in 8 partitions: ``--layout shuffled``, the
rows shuffled so that every era is split across partitions and half of each
shard's rows cross between workers; ``--layout by-era``, the rows in era
order, as a Parquet data set sorted by era reads), alternating the two
``--repeats`` times (after a first Dask fit of one round on the new
cluster, which also imports packboost on the workers: ``dask_first_fit_s``),
on Numerai-like data (the last quarter of eras held
out). Reports the median fit
seconds of each and their ratio, the fit alone (the one task per worker,
after the data is placed and binned), whether trees and held-out predictions
are bit-identical to the local fit, each worker's seconds and CPU seconds in
its fit task, the bytes and messages the workers sent each other per round,
and the Dask tasks of a fit, and the seconds each worker computed in the
DES era pass; and the seconds of a round after the first, local and Dask,
and their ratio (``ratio_per_round``: what a fit of many rounds pays per
round, without the binning and loading). On a host whose memory is
fragmented, NumPy's huge-page advice stalls the first touch of large arrays
in whichever process makes them, the benchmark's own (the local fit's)
among them (docs/guide/troubleshooting.md): run it with
``NUMPY_MADVISE_HUGEPAGE=0`` (workers inherit the environment) to compare
the two fits without those stalls. ``--floor`` adds the machine's floor for ``w`` worker
processes (:func:`machine_floor`: each shard's eras fitted locally in its
own process, all at once, against each alone). Then extrapolates a
Numerai-scale round to 10 nodes from the measured per-row cost
(``extrapolate``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np

SIZES = {
    "tiny": dict(n_rows=20_000, n_features=50, n_eras=40),
    "small": dict(n_rows=200_000, n_features=200, n_eras=200),
    "medium": dict(n_rows=1_000_000, n_features=400, n_eras=400),
    # Numerai's width and era count; 2.0M training rows after the held-out quarter
    "numerai": dict(n_rows=2_700_000, n_features=500, n_eras=600),
}

# The era pass per scored candidate: N_TERMS float64 maxima, then N_TERMS
# int64 grid sums (_distributed.candidate_pass), each all-reduced.
ERA_PASS_BYTES = 2 * 3 * 8


def round_clock(cpu_clock=None):
    """A training callback noting when each round ends (``ends``, wall; with
    ``cpu_clock``, its reading too, ``cpu_ends``): a fit's rounds without its
    setup (binning, and for Dask the loading), the cost a long fit pays per
    round."""
    from packboost.callback import TrainingCallback

    class RoundClock(TrainingCallback):
        def __init__(self):
            self.ends, self.cpu_ends = [], []

        def after_iteration(self, info):
            self.ends.append(time.perf_counter())
            if cpu_clock is not None:
                self.cpu_ends.append(cpu_clock())
            return False

    return RoundClock()


def seconds_per_round(ends) -> float:
    """Seconds per round after the first (its setup excluded), from each
    round's end; NaN with fewer than two rounds."""
    return float((ends[-1] - ends[0]) / (len(ends) - 1)) if len(ends) > 1 else float("nan")


def benchmark_data(size, layout):
    """The benchmark's rows: (X, y, era) of the training eras in the
    ``layout``'s order, and the held-out split. The same arrays in every
    process that calls it (fixed seeds)."""
    from packboost.datasets import make_numerai_like

    data = make_numerai_like(**SIZES[size], random_state=0)
    train, test = data.split_by_era(0.25)
    perm = (np.random.default_rng(0).permutation(len(train.y)) if layout == "shuffled"
            else np.argsort(np.asarray(train.era), kind="stable"))
    return train.X[perm], train.y[perm], np.asarray(train.era)[perm], test


def _timed_local_fit(data, params, threads) -> tuple:
    """One local fit of ``data`` (benchmark_data's): (seconds, seconds a
    round, the model's nodes, its held-out predictions)."""
    from packboost import PackBoostRegressor

    X, y, era, test = data
    clock = round_clock()
    start = time.perf_counter()
    model = PackBoostRegressor(**params, n_jobs=threads).fit(X, y, era=era, callbacks=[clock])
    seconds = time.perf_counter() - start
    return seconds, seconds_per_round(clock.ends), model.ensemble_.nodes, model.predict(test.X)


def _local_fits(connection, size, layout, params):
    """The local fits, in a process of their own holding the rows as a
    user's would (not the Dask client and scheduler besides, whose memory
    made this VM's compaction stalls fall on the local fit's rounds): one
    fit (_timed_local_fit) on each request of a thread count; None ends."""
    data = benchmark_data(size, layout)
    # A first fit of one round: the timed fits then pay no import, as the
    # Dask fits after the cluster's first (run).
    _timed_local_fit(data, dict(params, n_estimators=1), 1)
    connection.send("ready")
    while (threads := connection.recv()) is not None:
        connection.send(_timed_local_fit(data, params, threads))
    connection.close()


class LocalFitProcess:
    """A spawned process running :func:`_local_fits` (``fit(threads)`` one
    fit; the rows made once for every worker count).
    Where no process can be spawned (a main module spawn cannot import),
    the fits run in this process instead, said on stderr and in
    ``where`` ("own process" or "client process")."""

    def __init__(self, size, layout, params):
        import multiprocessing

        self.process = None
        self.where = "own process"
        try:
            context = multiprocessing.get_context("spawn")
            self.connection, child = context.Pipe()
            self.process = context.Process(target=_local_fits,
                                           args=(child, size, layout, params))
            self.process.start()
            child.close()
            if self.connection.recv() != "ready":
                raise RuntimeError("the local fit's process did not start")
        except (EOFError, OSError, RuntimeError, AttributeError) as error:
            print(f"bench_dask: local fits in this process ({error!r})", file=sys.stderr)
            if self.process is not None and self.process.is_alive():
                self.process.terminate()
            self.process, self.where = None, "client process"
            self.in_process = (benchmark_data(size, layout), params)

    def fit(self, threads):
        if self.process is None:
            data, params = self.in_process
            return _timed_local_fit(data, params, threads)
        self.connection.send(threads)
        return self.connection.recv()

    def close(self):
        if self.process is not None:
            self.connection.send(None)
            self.process.join()


def _fit_eras(X, y, era, params, threads, barrier, results):
    """One process of the floor (:func:`machine_floor`): the local fit of
    its eras, begun with the others (``barrier``); puts its fit seconds.
    The second fit is timed: a fresh process's first pays for its imports
    and first page faults, which a worker running fit after fit does not."""
    from packboost import PackBoostRegressor

    for _ in range(2):
        model = PackBoostRegressor(**params, n_jobs=threads)
        if barrier is not None:
            barrier.wait()
        start = time.perf_counter()
        model.fit(X, y, era=era)
        seconds = time.perf_counter() - start
    results.put(seconds)


def machine_floor(X, y, era, params, workers, threads_per_worker, repeats):
    """What ``workers`` processes cost this machine before any exchange: the
    local fit of each shard's eras (the Dask shard plan) in its own process,
    all at once, ``threads_per_worker`` threads each, against each alone.
    Each process does a shard's work on its rows (binning and the rounds)
    and nothing else: a Dask fit with as many worker processes takes at
    least its time, however little it exchanges. ``contention`` = together
    / alone: what the processes cost each other (shared caches and memory
    bandwidth; the local fit's threads share one copy of the rows instead)."""
    import multiprocessing

    from packboost._validation import encode_eras
    from packboost.dask import shard_plan

    codes, _ = encode_eras(era, len(y))
    plan = shard_plan(np.bincount(codes), workers)
    shards = [np.flatnonzero((codes >= first) & (codes < end)) for first, end in plan]
    context = multiprocessing.get_context("spawn")   # no fork of a process with OpenMP threads

    def fits(together):
        results = context.Queue()
        groups = [shards] if together else [[rows] for rows in shards]
        seconds = []
        for group in groups:
            barrier = context.Barrier(len(group)) if together else None
            processes = [context.Process(target=_fit_eras, args=(
                X[rows], y[rows], codes[rows], params, threads_per_worker, barrier, results))
                for rows in group]
            for process in processes:
                process.start()
            seconds += [results.get() for _ in group]
            for process in processes:
                process.join()
        return max(seconds)

    together, alone = [], []
    for _ in range(repeats):
        together.append(fits(True))
        alone.append(fits(False))
    return {"together_s": float(np.median(together)), "alone_s": float(np.median(alone)),
            "contention": float(np.median(together) / np.median(alone))}


def persisted_input(client, X, y, era) -> list:
    """``X``, ``y`` and ``era`` as Dask arrays of 8 row partitions, persisted
    on ``client``'s workers. The targets and eras too, as columns of the
    same input would be: not numpy arrays in the graph, shipped at every fit."""
    import dask.array as da

    chunk = -(-len(y) // 8)
    return client.persist([da.from_array(X, chunks=(chunk, -1)),
                           da.from_array(y, chunks=chunk),
                           da.from_array(era, chunks=chunk)])


def run(size, rounds, layouts, repeats, pack_size, max_depth, feature_fraction,
        layout="shuffled", floor=False, pause=3.0):
    """Each (workers, threads_per_worker) of ``layouts`` against the local fit
    on workers x threads_per_worker threads, on ``size``'s data."""
    from distributed import Client, LocalCluster, get_task_stream

    from packboost.dask import DaskPackBoostRegressor

    X, y, era, test = benchmark_data(size, layout)
    params = dict(n_estimators=rounds, pack_size=pack_size, max_depth=max_depth,
                  layer_feature_fraction=feature_fraction, random_state=0)
    results = {"size": size, "layout": layout, "rows": int(len(y)), "features": int(X.shape[1]),
               "eras": int(len(np.unique(era))), "params": params, "runs": []}
    local_fits = LocalFitProcess(size, layout, params)
    for workers, threads_per_worker in layouts:
        threads = workers * threads_per_worker
        local_times, dask_times, fit_task_times = [], [], []
        local_rounds, dask_rounds = [], []
        with LocalCluster(n_workers=workers, threads_per_worker=threads_per_worker,
                          processes=True, dashboard_address=None) as cluster, \
                Client(cluster) as client:
            dX, dy, dera = persisted_input(client, X, y, era)
            # A fresh cluster's first fit also imports packboost on every
            # worker (~2 s on a 2-core VM): timed apart (``dask_first_fit_s``),
            # as a user's first fit on a new cluster; the repeats are the
            # fits after it, what every later fit costs.
            time.sleep(pause)
            start = time.perf_counter()
            first = DaskPackBoostRegressor(**dict(params, n_estimators=1),
                                           n_jobs=threads_per_worker)
            first.client = client
            first.fit(dX, dy, era=dera)
            first_fit = time.perf_counter() - start
            for _ in range(repeats):
                # Each fit after a pause: on two cores the workers' cleanup
                # after a Numerai-scale fit (freeing their shards) slowed the
                # next local fit's rounds from 0.23 to 0.36 s.
                time.sleep(pause)
                seconds, per_round, local_nodes, local_prediction = local_fits.fit(threads)
                local_times.append(seconds)
                local_rounds.append(per_round)
                model = DaskPackBoostRegressor(**params, n_jobs=threads_per_worker)
                model.client = client
                time.sleep(pause)
                start = time.perf_counter()
                with get_task_stream(client) as stream:
                    model.fit(dX, dy, era=dera)
                dask_times.append(time.perf_counter() - start)
                stats = model.worker_stats_
                fit_task_times.append(max(item["seconds"] for item in stats))
                # The ranks end each round together (rank 0 tells the others
                # whether to stop): any rank's clock is the fit's.
                dask_rounds.append(seconds_per_round(stats[0]["round_ends"]))
        same = all(np.array_equal(local_nodes[k], model.ensemble_.nodes[k], equal_nan=True)
                   for k in local_nodes)
        same_prediction = np.array_equal(model.to_local().predict(test.X), local_prediction)
        if floor:
            floor_run = machine_floor(X, y, era, params, workers, threads_per_worker, repeats)
            floor_run["ratio"] = floor_run["together_s"] / float(np.median(local_times))
        results["runs"].append({
            "workers": workers, "threads_per_worker": threads_per_worker,
            "local_threads": threads,
            "local_fit_s": float(np.median(local_times)),
            "dask_fit_s": float(np.median(dask_times)),
            "dask_first_fit_s": first_fit,
            "dask_fit_task_s": float(np.median(fit_task_times)),
            "ratio": float(np.median(dask_times) / np.median(local_times)),
            "ratio_fit_task": float(np.median(fit_task_times) / np.median(local_times)),
            # A round after the first, without the setup: what a long fit
            # pays per round (the 10-40 round fits here weigh the setup more).
            "local_round_s": float(np.median(local_rounds)),
            "dask_round_s": float(np.median(dask_rounds)),
            "ratio_per_round": float(np.median(dask_rounds) / np.median(local_rounds)),
            "same_trees": bool(same), "same_predictions": bool(same_prediction),
            "local_fit_in": local_fits.where,
            "worker_s": [round(item["seconds"], 3) for item in stats],
            "worker_cpu_s": [round(item["cpu_seconds"], 3) for item in stats],
            "worker_waiting_s": [round(item["seconds_waiting"], 3) for item in stats],
            "worker_era_pass_s": [round(item.get("era_pass_seconds", 0.0), 3)
                                  for item in stats],
            "bytes_sent_per_round": [item["bytes_sent"] // rounds for item in stats],
            "messages_per_round": [item["messages_sent"] / rounds for item in stats],
            "tasks_per_fit": len(stream.data),
            "task_compute_s": _task_seconds(stream.data),
            **({"machine_floor": floor_run} if floor else {}),
        })
    local_fits.close()
    return results


def _task_seconds(tasks) -> dict:
    """Compute seconds of a fit's Dask tasks by function (the loading steps
    and the fit task), summed over workers."""
    from dask.utils import key_split

    seconds = {}
    for task in tasks:
        name = key_split(task["key"])
        for part in task.get("startstops", ()):
            if part["action"] == "compute":
                seconds[name] = seconds.get(name, 0.0) + part["stop"] - part["start"]
    return {name: round(value, 3) for name, value in sorted(seconds.items())}


def extrapolate(seconds_per_row_round, nodes=10, gbit=10.0, rows=2_700_000,
                features=238, bins=5, pack_size=4, max_depth=6, latency_ms=0.1,
                era_pass_seconds_per_row_round=0.0, scored_fraction=0.05,
                era_pass_rounds=2):
    """A Numerai-scale round on ``nodes`` workers: compute (the measured
    seconds per row and round of one worker, rows split evenly; a shard
    computes its era-pass terms for the maxima and rounds them (or the
    votes again) on the grid, so half of the shards' measured era-pass
    seconds, ``era_pass_seconds_per_row_round``, is added), network (``gbit``
    Gb/s) and message latency, every depth summed (every node splitting:
    slots double per depth). Each allreduce as the collective does it: an
    array of at least RING_MIN_BYTES around a ring (each link carries
    2 (n - 1) / n of it, 2 (n - 1) hops), a smaller one sent by every rank to
    every other (n - 1 copies from each rank, one hop). Per depth: the
    pooled cells, the children's squared gradients, and per round of the
    era pass (``era_pass_rounds`` a depth: about 2 measured at 400k x 400,
    the first round 4 candidates a slot) its maxima and its grid sums, for
    the ``scored_fraction`` of the candidates the best-first rounds score
    (6% at 400k x 400, pack 4, layer fraction 0.1)."""
    from packboost._collective import RING_MIN_BYTES

    link = gbit * 1e9 / 8
    width = bins + 1
    compute = (seconds_per_row_round + era_pass_seconds_per_row_round / 2) * rows / nodes
    network = latency = 0.0

    def allreduce(size):
        nonlocal network, latency
        if size >= RING_MIN_BYTES and nodes > 2:
            network += 2 * (nodes - 1) / nodes * size / link
            latency += 2 * (nodes - 1) * latency_ms * 1e-3
        else:
            network += (nodes - 1) * size / link
            latency += latency_ms * 1e-3

    for depth in range(max_depth):
        slots = pack_size * 2 ** depth
        candidates = slots * features * (bins - 1)
        allreduce(slots * features * width * 3 * 8)      # pooled cells
        allreduce(slots * 2 * 8)                          # children's squared gradients
        for _ in range(2 * era_pass_rounds):               # maxima, then grid sums
            allreduce(ERA_PASS_BYTES / 2 * scored_fraction * candidates / era_pass_rounds)
    return {"nodes": nodes, "gbit_s": gbit, "rows": rows, "features_per_depth": features,
            "pack_size": pack_size, "max_depth": max_depth,
            "round_compute_s": compute, "round_network_s": network,
            "round_latency_s": latency, "round_s": compute + network + latency,
            "single_node_round_s": seconds_per_row_round * rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", choices=SIZES, nargs="+", default=["small"])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--threads-per-worker", type=int, nargs="+", default=[1],
                        help="one count for every --workers entry, or one for each "
                             "(--workers 1 2 --threads-per-worker 2 1: one worker of two "
                             "threads, then two of one)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--pack-size", type=int, default=4)
    parser.add_argument("--max-depth", type=int, default=6)
    parser.add_argument("--feature-fraction", type=float, default=0.1)
    parser.add_argument("--layout", choices=["shuffled", "by-era"], default="shuffled")
    parser.add_argument("--pause", type=float, default=3.0,
                        help="seconds of rest before each fit, so that neither fit runs "
                             "into the other's cleanup")
    parser.add_argument("--floor", action="store_true",
                        help="also the machine's floor: each shard's local fit in its own "
                             "process, all at once and each alone (machine_floor)")
    args = parser.parse_args()
    threads = args.threads_per_worker
    if len(threads) == 1:
        threads = threads * len(args.workers)
    if len(threads) != len(args.workers):
        parser.error(f"--threads-per-worker takes one count or one for each of the "
                     f"{len(args.workers)} --workers entries, got {len(threads)}")
    layouts = list(zip(args.workers, threads, strict=True))
    report = []
    for size in args.sizes:
        results = run(size, args.rounds, layouts, args.repeats, args.pack_size,
                      args.max_depth, args.feature_fraction, args.layout, args.floor,
                      args.pause)
        one = results["runs"][0]
        per_row_round = (one["local_fit_s"] * one["local_threads"]
                         / (results["rows"] * args.rounds))
        # The era pass's work, all shards of the largest fit together.
        widest = results["runs"][-1]
        era_pass_per_row_round = (sum(widest["worker_era_pass_s"])
                                  / (results["rows"] * args.rounds))
        results["extrapolation"] = extrapolate(
            per_row_round, era_pass_seconds_per_row_round=era_pass_per_row_round)
        report.append(results)
        print(json.dumps(results, indent=1, default=str), flush=True)


if __name__ == "__main__":
    main()
