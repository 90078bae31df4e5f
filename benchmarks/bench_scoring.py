"""Split scoring's cost per (slot, feature) tile, next to the histogram pass.

    python benchmarks/bench_scoring.py                         # 150k rows, 150 eras
    python benchmarks/bench_scoring.py --rows 900000 --eras 600 --depths 3 5

One depth of a pack, one thread, process CPU time (robust on a shared
machine), medians of ``--repeats``: ``_histogram.build_histograms`` (the pass
alone) and ``_split.find_best_splits`` (pass + unpack + DES scoring) on the
same inputs; their difference over the number of tiles is the scoring cost
per tile, and "tiles read" the share of tiles whose era cells were unpacked
(the others pruned by their pooled bounds, docs/cpu-kernels.md §5). Rows go
to slots at random; each tree uses half the features (the default
``tree_feature_fraction``). Scoring is timed for the default DES
(``lambda_dro=1``, between-era std), for ``lambda_dro=0`` (no era pass) and
with ``lambda_dir=0.5`` (a direction vote per era).
"""

from __future__ import annotations

import argparse
import time
from functools import partial

import numpy as np
from bench_histogram import _median_seconds, kept_cell_buffer

from packboost import _histogram, _split
from packboost._fixed_point import to_fixed_point
from packboost.datasets import make_numerai_like

SPLIT_PARAMS = dict(reg_lambda=1.0, reg_alpha=0.0, era_gain="realized", era_weighting="equal",
                    era_alpha=0.0, lambda_dro=1.0, lambda_dir=0.0, dir_tanh_scale=1.0,
                    min_samples_leaf=20, min_child_weight=0.0, era_std="between")
VARIANTS = {"default": {}, "lambda_dro=0": {"lambda_dro": 0.0, "era_std": "total"},
            "lambda_dir=0.5": {"lambda_dir": 0.5}}


def cpu_seconds(function, repeats: int) -> float:
    return _median_seconds(function, repeats, clock=time.process_time)


def histogram_passes(X_binned, features, fixed, rows, era_offsets, node_of_row, uses, n_slots,
                     width, slot_tree) -> None:
    """The depth's histogram passes, in find_best_splits' blocks of features
    (the kernel's entry point takes at most MAX_FEATURES_PER_PASS at once),
    with its layout: a root era summed once for the trees that share it,
    and below the roots each slot's run holding its tree's features only."""
    below_roots = n_slots > node_of_row.shape[1]
    per_pass, n_blocks = _split.feature_blocks(len(features), _split.DEFAULT_FEATURES_PER_PASS)
    words = 1 if fixed.hessian_is_constant else 2
    buffer = kept_cell_buffer((len(era_offsets) - 1) * n_slots * per_pass * width * words)
    for block in range(n_blocks):
        part = slice(block * per_pass, (block + 1) * per_pass)
        _histogram.build_histograms(X_binned, features[part], fixed, None, rows, era_offsets,
                                    node_of_row, np.ascontiguousarray(uses[part]), n_slots,
                                    width, unpack=False, cell_buffer=buffer, slot_tree=slot_tree,
                                    share_equal_rows=not below_roots, runs_per_tree=below_roots)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=150_000)
    parser.add_argument("--eras", type=int, default=150)
    parser.add_argument("--features", type=int, default=20, help="features of the depth")
    parser.add_argument("--pack-size", type=int, default=8)
    parser.add_argument("--depths", type=int, nargs="+", default=[2, 4, 5])
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args(argv)

    data = make_numerai_like(args.rows, args.features, args.eras, random_state=0)
    X_binned = np.ascontiguousarray(data.X.T, dtype=np.uint8)
    _, era_sizes = np.unique(data.era, return_counts=True)
    era_offsets = np.concatenate([[0], np.cumsum(era_sizes)]).astype(np.int64)
    gradients = data.y - data.y.mean()
    fixed = to_fixed_point(gradients, np.ones(args.rows), era_offsets)
    rows = np.arange(args.rows, dtype=np.int32)
    features = np.arange(args.features, dtype=np.int32)
    rng = np.random.default_rng(0)
    uses = (rng.random((args.features, args.pack_size)) < 0.5).astype(np.uint8)
    # Codes 0 .. max are bins; the missing code is n_bins (none here).
    n_bins = np.asarray(X_binned.max(axis=1), dtype=np.int32) + 1
    width = int(n_bins.max()) + 1

    print(f"{args.rows:,} rows, {args.eras} eras, {args.features} features, pack "
          f"{args.pack_size}, one thread, CPU ms (medians of {args.repeats})")
    print("| depth | tiles | histogram pass ms | " + " | ".join(
        f"find_best_splits {name} ms | scoring us/tile | tiles read" for name in VARIANTS)
        + " |")
    print("| ---: | ---: | ---: |" + " ---: | ---: | ---: |" * len(VARIANTS))
    for depth in args.depths:
        per_tree = 2 ** depth
        n_slots = per_tree * args.pack_size
        node_of_row = np.ascontiguousarray(
            rng.integers(0, per_tree, size=(args.rows, args.pack_size))
            + np.arange(args.pack_size) * per_tree, dtype=np.int32)
        slot_tree = np.repeat(np.arange(args.pack_size, dtype=np.int32), per_tree)
        slot_open = np.ones(n_slots, dtype=np.uint8)
        variance = np.full(n_slots, float(np.var(gradients)))
        histogram = cpu_seconds(partial(
            histogram_passes, X_binned, features, fixed, rows, era_offsets, node_of_row, uses,
            n_slots, width, slot_tree), args.repeats)
        tiles = int(uses.sum()) * per_tree
        cells = [f"| {depth} | {tiles} | {histogram * 1e3:.1f} |"]
        for override in VARIANTS.values():
            params = {**SPLIT_PARAMS, **override}
            # As the CPU backend calls it: each slot's best over its features
            # (cross-tile pruning) into a block buffer kept from call to call.
            call = partial(
                _split.find_best_splits, X_binned, fixed, rows, era_offsets, node_of_row,
                slot_tree, slot_open, features, uses, n_bins, params, 1,
                slot_gradient_variance=variance, best_per_slot=True,
                cell_buffer=kept_cell_buffer(_split.block_buffer_cells(
                    features, n_bins, uses, n_slots, len(era_offsets) - 1, 1, 1)[1]))
            seconds = cpu_seconds(call, args.repeats)
            # tiles whose era cells were read (the rest pruned by pooled bounds)
            read = int(call()["unpacked"].sum())
            cells.append(f" {seconds * 1e3:.1f} | {(seconds - histogram) / tiles * 1e6:.1f} "
                         f"| {read / tiles:.0%} |")
        print("".join(cells))


if __name__ == "__main__":
    main()
