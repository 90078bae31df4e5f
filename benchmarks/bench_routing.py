"""``route_rows`` alone: ns per (row, tree) to move every row to its child and
sum the next frontier's slots, as a depth of a pack does.

    python benchmarks/bench_routing.py                     # 90k rows x 200, pack 8
    python benchmarks/bench_routing.py --rows 2700000 --features 500 --threads 2

Per depth, each tree's rows are spread at random over its ``2**depth`` slots,
and every slot splits; the split features are either one feature for every
slot (``same``: the table is read in memory order, as at shallow depths) or
drawn at random per slot (``random``: each row reads a different column per
tree, as at depth 5 of a pack). Medians of ``--repeats`` calls, wall time.
The machine is shared and noisy: compare rows of one run, or builds
alternately (benchmarks/compare_builds.py).
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from packboost import _partition


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=90_000)
    parser.add_argument("--features", type=int, default=200)
    parser.add_argument("--pack-size", type=int, default=8)
    parser.add_argument("--depths", type=int, nargs="+", default=[0, 3, 5])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=50)
    args = parser.parse_args(argv)

    rng = np.random.default_rng(0)
    n_rows, n_features, pack = args.rows, args.features, args.pack_size
    X_binned = rng.integers(0, 5, size=(n_features, n_rows), dtype=np.uint8)
    n_bins = np.full(n_features, 5, dtype=np.int32)
    gradients = rng.standard_normal(n_rows)
    hessians = np.ones(n_rows)
    leaf_of_row = np.empty((n_rows, pack), dtype=np.int32)
    print(f"{n_rows:,} rows x {n_features} features, pack {pack}, {args.threads} thread(s)")
    print("| depth | split features | ms per call | ns per (row, tree) x threads |")
    print("| ---: | --- | ---: | ---: |")
    for depth in args.depths:
        per_tree = 2 ** depth
        n_slots = pack * per_tree
        start = (rng.integers(0, per_tree, size=(n_rows, pack))
                 + np.arange(pack) * per_tree).astype(np.int32)
        threshold = rng.integers(0, 4, n_slots).astype(np.int32)
        missing_left = np.zeros(n_slots, dtype=np.uint8)
        left_child = (2 * np.arange(n_slots)).astype(np.int32)
        slot_node = np.arange(n_slots, dtype=np.int32)
        for kind in ("same", "random"):
            feature = (np.zeros(n_slots) if kind == "same"
                       else rng.integers(0, n_features, n_slots)).astype(np.int32)
            times = []
            for _ in range(args.repeats):
                node_of_row = start.copy()
                begin = time.perf_counter()
                _partition.route_rows(X_binned, node_of_row, feature, threshold, missing_left,
                                      left_child, n_bins, slot_node, leaf_of_row,
                                      args.threads, gradients, hessians, 2 * n_slots)
                times.append(time.perf_counter() - begin)
            seconds = statistics.median(times)
            print(f"| {depth} | {kind} | {seconds * 1e3:.2f} "
                  f"| {seconds / (n_rows * pack) * 1e9 * args.threads:.2f} |")


if __name__ == "__main__":
    main()
