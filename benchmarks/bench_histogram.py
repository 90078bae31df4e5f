"""The per-era pack histogram kernel alone, in ns per update, next to the machine's bounds.

    python benchmarks/bench_histogram.py                      # Numerai-like era sizes
    python benchmarks/bench_histogram.py --rows 2700000 --eras 600 --threads 2

An *update* is one (row, tree, feature) cell addition: the kernel's unit of
work (docs/cpu-kernels.md §3). The kernel is timed through
``_histogram.build_histograms`` (one pass over the rows for a block of
features, then the cells unpacked to float) at depth 0 (one slot per tree),
3 and 5 (8 and 32 slots per tree, rows spread over them at random), every row
in every tree. Next to it, on the same data and machine:

* **bandwidth bound**: the bytes the pass must read from memory (the block's
  columns once, the packed gradients and the slot table once per block) at
  the speed NumPy copies a large array (``np.copyto``), per update;
* **add bound**: ``np.add.reduce`` over an in-cache int64 array, per element:
  what one dependent-free integer add costs here.

Medians of ``--repeats`` runs. The machine is shared and noisy: compare rows
of one run, not across runs.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from packboost import _histogram
from packboost._fixed_point import to_fixed_point

_KEPT = [np.empty(0, dtype=np.int64)]


def kept_cell_buffer(size: int) -> np.ndarray:
    """An int64 buffer of at least ``size`` entries, kept from call to call
    as a fit keeps its block buffer, so that no timed pass faults in fresh
    pages (the kernel clearing them is not what a fit pays)."""
    if _KEPT[0].size < size:
        _KEPT[0] = np.empty(size, dtype=np.int64)
    return _KEPT[0]


def _median_seconds(function, repeats: int, clock=time.perf_counter) -> float:
    """Median over ``repeats`` calls of ``function``, timed by ``clock``
    (wall time; ``time.process_time`` for CPU time)."""
    times = []
    for _ in range(repeats):
        start = clock()
        function()
        times.append(clock() - start)
    return statistics.median(times)


def bandwidth_bytes_per_second(repeats: int) -> float:
    source = np.ones(256 * 2**20, dtype=np.uint8)
    target = np.empty_like(source)
    seconds = _median_seconds(lambda: np.copyto(target, source), repeats)
    return 2 * source.nbytes / seconds  # read + write


def add_seconds_per_element(repeats: int) -> float:
    values = np.ones(4096, dtype=np.int64)  # 32 KiB: stays in L1/L2

    def many_sums():
        for _ in range(2000):
            np.add.reduce(values)

    return _median_seconds(many_sums, repeats) / (2000 * values.size)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=900_000)
    parser.add_argument("--eras", type=int, default=200)
    parser.add_argument("--features", type=int, default=32, help="features per pass")
    parser.add_argument("--pack-size", type=int, default=8)
    parser.add_argument("--bins", type=int, default=5, help="non-missing bins per feature")
    parser.add_argument("--depths", type=int, nargs="+", default=[0, 3, 5])
    parser.add_argument("--threads", type=int, default=1,
                        help="(the kernel entry point is one thread; recorded for the label)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--with-unpack", action="store_true",
                        help="time the cells' unpacking to float too (runs on builds "
                             "older than the raw-cells entry point)")
    parser.add_argument("--hessians", action="store_true",
                        help="rows with different hessians (two int64 per cell)")
    args = parser.parse_args(argv)

    rng = np.random.default_rng(0)
    n_rows, n_eras, pack = args.rows, args.eras, args.pack_size
    X_binned = rng.integers(0, args.bins + 1, size=(args.features, n_rows), dtype=np.uint8)
    era_offsets = np.linspace(0, n_rows, n_eras + 1).astype(np.int64)
    gradients = rng.normal(size=n_rows)
    hessians = rng.uniform(0.5, 1.5, size=n_rows) if args.hessians else np.ones(n_rows)
    fixed = to_fixed_point(gradients, hessians, era_offsets)
    rows = np.arange(n_rows, dtype=np.int32)
    features = np.arange(args.features, dtype=np.int32)
    uses = np.ones((args.features, pack), dtype=np.uint8)

    bandwidth = bandwidth_bytes_per_second(args.repeats)
    add_ns = add_seconds_per_element(args.repeats) * 1e9
    print(f"{n_rows:,} rows, {n_eras} eras, {args.features} features per pass, pack {pack}, "
          f"{args.bins} bins + missing, {'two' if args.hessians else 'one'} int64 per cell")
    print(f"machine: copy bandwidth {bandwidth / 1e9:.1f} GB/s, int64 add {add_ns:.2f} ns")
    print("| depth | slots | kernel ms | ns/update | bandwidth bound ns/update "
          "| add bound ns/update |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: |")
    for depth in args.depths:
        n_slots_per_tree = 2 ** depth
        n_slots = n_slots_per_tree * pack
        slot_in_tree = rng.integers(0, n_slots_per_tree, size=(n_rows, pack))
        node_of_row = np.ascontiguousarray(
            slot_in_tree + np.arange(pack) * n_slots_per_tree, dtype=np.int32)
        call = (X_binned, features, fixed, None, rows, era_offsets, node_of_row, uses, n_slots,
                args.bins + 2)
        cells = n_eras * n_slots * args.features * (args.bins + 2) * (2 if args.hessians else 1)
        # slot -> tree as find_best_splits has it (slots grouped by tree)
        options = {"cell_buffer": kept_cell_buffer(cells),
                   "slot_tree": np.repeat(np.arange(pack), n_slots_per_tree)}
        if not args.with_unpack:
            options["unpack"] = False
        try:  # builds before feature pairs take no slot_tree
            _histogram.build_histograms(*call, **options)
        except TypeError:
            del options["slot_tree"]
        seconds = _median_seconds(
            lambda call=call, options=options: _histogram.build_histograms(*call, **options),
            args.repeats)
        updates = n_rows * pack * args.features
        read_bytes = (X_binned.nbytes + fixed.packed.nbytes + node_of_row.nbytes
                      + rows.nbytes + (fixed.hessian_fixed.nbytes if args.hessians else 0))
        print(f"| {depth} | {n_slots} | {seconds * 1e3:.1f} | {seconds / updates * 1e9:.2f} "
              f"| {read_bytes / bandwidth / updates * 1e9:.3f} | {add_ns:.2f} |")


if __name__ == "__main__":
    main()
