"""The host's work per boosting round outside the backend's kernels: the
round's random draws (``booster.draw_round``: per-tree eras and rows, per-depth
features), the objective's gradients and their fixed-point rounding
(``to_fixed_point``), and the start of a pack from the draw (row lists for
the CUDA and Dask backends, the CPU backend's table from era flags; the
"before" line is the CPU's start from row lists that this replaced). On the
CPU backend it is a few percent of a round; on the GPU it is a third of one
at Numerai scale (benchmarks/RESULTS.md, 2026-11-25
7c6acaf), and it runs on the host whichever backend grows the trees.

    python benchmarks/bench_host_round.py                    # 2.7M rows, 600 eras, pack 8
    python benchmarks/bench_host_round.py --rows 150000 --eras 150 --threads 2

Each step is timed as a round sees it: its arrays are allocated afresh and the
previous round's are still alive until the next round replaces them (medians
of ``--repeats`` rounds, wall time, ms).
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from packboost import _partition, booster
from packboost._fixed_point import to_fixed_point
from packboost._samples import TreeSamples
from packboost.grower import TrainingData
from packboost.objectives import SquaredError


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2_700_000)
    parser.add_argument("--eras", type=int, default=600)
    parser.add_argument("--features", type=int, default=2376)
    parser.add_argument("--pack-size", type=int, default=8)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args(argv)

    rng = np.random.default_rng(0)
    row_era = np.sort(rng.integers(0, args.eras, size=args.rows)).astype(np.int32)
    # The draws read only the table's shape: one byte per row and feature is not needed.
    X_binned = np.lib.stride_tricks.as_strided(np.zeros(1, dtype=np.uint8),
                                               shape=(args.features, args.rows), strides=(0, 0))
    data = TrainingData(X_binned=X_binned, n_bins=np.full(args.features, 5, dtype=np.int32),
                        row_era=row_era, n_eras=args.eras, cuts=[])
    params = dict(pack_size=args.pack_size, era_subsample=0.75, row_subsample=1.0,
                  max_depth=6, feature_sampling="depth", layer_feature_fraction=0.1,
                  tree_feature_fraction=0.5)
    y, raw = rng.random(args.rows), rng.random(args.rows)
    gradients, hessians = np.empty(args.rows), np.empty(args.rows)
    objective = SquaredError()
    era_offsets = data.era_offsets

    drawn = booster.draw_round(rng, data, params).tree_samples
    table = np.empty((args.rows, args.pack_size), dtype=np.int32)

    def row_lists():
        return list(TreeSamples(drawn.era_keep, drawn.row_keep, drawn.era_offsets))

    steps = {
        "draw_round": lambda: booster.draw_round(rng, data, params),
        "gradients": lambda: objective.gradients(y, raw, None, gradients, hessians),
        "to_fixed_point": lambda: to_fixed_point(gradients, hessians, era_offsets,
                                                 args.threads),
        # What the backends do with the draw: the CUDA and Dask backends take
        # row lists; the CPU backend writes its table from the era flags.
        "row lists (CUDA, Dask backends)": row_lists,
        "CPU pack start from era flags": lambda: _partition.start_pack_eras(
            table, drawn.era_keep, era_offsets, args.threads),
        "(before: CPU pack start from row lists)": lambda: _partition.start_pack(
            table, row_lists(), args.threads),
    }
    print(f"# {args.rows} rows, {args.eras} eras, pack {args.pack_size}, "
          f"{args.threads} thread(s): ms per round (median of {args.repeats})")
    print("| step | ms |\n| --- | ---: |")
    total = cpu_excluded = 0.0
    for name, step in steps.items():
        alive = step()  # the previous round's arrays stay alive, as in a fit
        times = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            result = step()
            times.append(time.perf_counter() - start)
            alive = result  # noqa: F841 (replaced only after the next round is drawn)
        median = 1e3 * statistics.median(times)
        total += median
        if name.startswith(("row lists", "(before")):
            cpu_excluded += median
        print(f"| {name} | {median:.1f} |")
    print(f"| total (CPU backend: without the row lists and the before line) | "
          f"{total - cpu_excluded:.1f} |")


if __name__ == "__main__":
    main()
