"""Where does ``fit`` spend its time? A phase profile of PackBoost's engine.

    python benchmarks/profile_fit.py --size medium --feature-fraction 0.1

Runs one fit with ``n_jobs=1`` (so phase times add up to the wall time) and
wraps every kernel the CPU backend and the booster call with a timer:

* histogram + scoring (``_split.find_best_splits``), split afterwards into its
  two parts by re-running the histogram pass alone on the same inputs;
* routing rows to children (``_partition.route_rows``), active-row lists,
  node sums (leaves), the prediction update, gradients, random draws;
* "Python and NumPy glue": the rest of the fit's time;

and a second table gives ``find_best_splits``' time per depth (depth 0: the
pack's roots, whose eras the trees share) and the share of the (slot,
feature) tiles whose per-era cells were read and scored: the pooled bounds
leave the others unread.

Times are the process's CPU time (``time.process_time``): with one thread they
add up to the fit, and they stay meaningful on a machine shared with other
jobs, where wall time stretches with the other jobs' share of the cores.
"""

from __future__ import annotations

import argparse
import time
from collections import defaultdict

import numpy as np
from bench_histogram import kept_cell_buffer

from packboost import PackBoostRegressor, _histogram, _partition, _split, booster, grower
from packboost.backends.cpu import CpuBackend
from packboost.datasets import make_numerai_like

SIZES = {
    "small": dict(n_rows=200_000, n_features=200, n_eras=200),
    "medium": dict(n_rows=1_000_000, n_features=400, n_eras=400),
    "numerai": dict(n_rows=2_700_000, n_features=500, n_eras=600),
}
PHASES = defaultdict(float)
BY_DEPTH = defaultdict(float)   # find_best_splits CPU s per depth, every pack
# (tiles whose era cells were read, tiles its slot's tree may split on) per depth
TILES = defaultdict(lambda: [0, 0])
DEPTH = [0]                     # depth of the next find_best_splits call in the pack


def timed(name, function, totals=PHASES, clock=time.process_time):
    """``function`` adding the ``clock`` seconds of each call to ``totals[name]``."""
    def wrapper(*args, **kwargs):
        start = clock()
        try:
            return function(*args, **kwargs)
        finally:
            totals[name] = totals.get(name, 0.0) + clock() - start
    return wrapper


def histogram_only(X_binned, fixed, rows, era_offsets, node_of_row, slot_tree,
                   slot_open, features, tree_uses_feature, n_bins, params, n_threads,
                   budget, features_per_pass, *args, era_tree_rows=None):
    """Time the histogram passes of one find_best_splits call on their own
    (same blocks of features, every slot, the same (era, tree) skipped; no
    scoring)."""
    start = time.process_time()
    width = int(n_bins[features].max()) + 1 if len(features) else 1
    # find_best_splits' blocks (this profile runs one thread)
    features_per_pass, _ = _split.feature_blocks(len(features), features_per_pass)
    for first in range(0, len(features), features_per_pass):
        block = slice(first, first + features_per_pass)
        call = (X_binned, features[block], fixed, None, rows, era_offsets, node_of_row,
                tree_uses_feature[block], len(slot_tree), width)
        words = 1 if fixed.hessian_is_constant else 2
        cells = (len(era_offsets) - 1) * len(slot_tree) * len(features[block]) * width * words
        # As find_best_splits runs it (kept buffer, shared roots, feature
        # pairs, the eras a tree did not draw skipped), or as far as an older
        # build can (compare_builds.py).
        for options in (dict(cell_buffer=kept_cell_buffer(cells), share_equal_rows=True,
                             slot_tree=np.ascontiguousarray(slot_tree, dtype=np.int32),
                             era_tree_rows=era_tree_rows),
                        dict(cell_buffer=kept_cell_buffer(cells), share_equal_rows=True,
                             slot_tree=np.ascontiguousarray(slot_tree, dtype=np.int32)),
                        dict(cell_buffer=kept_cell_buffer(cells), share_equal_rows=True),
                        dict(cell_buffer=kept_cell_buffer(cells)), {}):
            try:
                _histogram.build_histograms(*call, unpack=False, **options)
                break
            except TypeError:
                continue
    PHASES["  histogram passes (re-run alone)"] += time.process_time() - start


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=SIZES, default="small")
    parser.add_argument("--feature-fraction", type=float, default=0.1)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--pack-size", type=int, default=4)
    parser.add_argument("--depth", type=int, default=6)
    parser.add_argument("--lambda-dro", type=float, default=1.0)
    parser.add_argument("--feature-sampling", choices=["depth", "pack"], default="depth")
    parser.add_argument("--tree-feature-fraction", type=float, default=0.5)
    parser.add_argument("--weights", action="store_true",
                        help="random sample weights (0.5-2): hessians then differ between "
                             "rows and the histogram cells have two words")
    args = parser.parse_args()

    data = make_numerai_like(**SIZES[args.size], random_state=0)
    train, _ = data.split_by_era(0.25)
    find_best_splits = _split.find_best_splits

    def split_and_histogram(*call_args, **options):
        start = time.process_time()
        result = find_best_splits(*call_args, **options)
        seconds = time.process_time() - start
        PHASES["histogram + scoring (find_best_splits)"] += seconds
        BY_DEPTH[DEPTH[0]] += seconds
        # How many (slot, feature) tiles the pooled bounds left to score: the
        # rest were never unpacked (docs/cpu-kernels.md §5).
        slot_tree, slot_open, tree_uses_feature = call_args[5], call_args[6], call_args[8]
        is_open = np.asarray(slot_open) != 0
        TILES[DEPTH[0]][0] += int(np.asarray(result["unpacked"])[is_open].sum())
        TILES[DEPTH[0]][1] += int(np.asarray(tree_uses_feature)[:, np.asarray(slot_tree)]
                                  [:, is_open].sum())
        DEPTH[0] += 1
        # A subtracting depth's passes cannot be re-run alone (its cells come
        # from the parent's); the other keywords (cell_buffer, best_per_slot,
        # constraints) leave the passes as they are.
        if options.get("depth_cells") is None:
            histogram_only(*call_args, era_tree_rows=options.get("era_tree_rows"))
        else:
            PHASES["  histogram passes (re-run alone)"] += 0.0
        return result

    # The CPU backend calls the kernels through these modules.
    _split.find_best_splits = split_and_histogram
    _partition.route_rows = timed("route rows to children", _partition.route_rows)
    _partition.active_rows = timed("active row lists", _partition.active_rows)
    _partition.slot_sums = timed("node sums (leaf values)", _partition.slot_sums)
    CpuBackend.add_pack = timed("prediction update", CpuBackend.add_pack)
    booster.draw_round = timed("random draws", booster.draw_round)
    timed_grow_pack = timed("grow_pack total", grower.grow_pack)

    def grow_pack(*call_args, **options):
        DEPTH[0] = 0
        return timed_grow_pack(*call_args, **options)

    booster.grow_pack = grow_pack

    model = PackBoostRegressor(n_estimators=args.rounds, pack_size=args.pack_size,
                               max_depth=args.depth, layer_feature_fraction=args.feature_fraction,
                               lambda_dro=args.lambda_dro,
                               tree_feature_fraction=args.tree_feature_fraction,
                               n_jobs=1, random_state=0,
                               # only when asked: builds before it existed run the rest
                               **({} if args.feature_sampling == "depth"
                                  else {"feature_sampling": args.feature_sampling}))
    start = time.process_time()
    weights = (np.random.default_rng(0).uniform(0.5, 2.0, len(train.y)) if args.weights
               else None)
    model.fit(train.X, train.y, era=train.era, sample_weight=weights)
    wall = time.process_time() - start
    histogram = PHASES.pop("  histogram passes (re-run alone)")
    wall_fit = wall - histogram  # the re-run is not part of a real fit
    split_total = PHASES["histogram + scoring (find_best_splits)"]
    grow_total = PHASES.pop("grow_pack total")
    in_grow = sum(PHASES[k] for k in ("histogram + scoring (find_best_splits)",
                                      "route rows to children", "active row lists",
                                      "node sums (leaf values)"))
    PHASES["grower glue (Python/NumPy)"] = grow_total - histogram - in_grow
    rest = wall_fit - sum(PHASES.values())
    print(f"# {args} | {train.X.shape[0]} rows x {train.X.shape[1]} features, "
          f"{model.ensemble_.n_trees} trees, {len(model.ensemble_.nodes['feature'])} nodes, "
          f"1 thread, fit {wall_fit:.2f} CPU s")
    print("| phase | seconds | share |")
    print("| --- | ---: | ---: |")
    rows = dict(PHASES)
    rows["  of which histogram passes"] = min(histogram, split_total)
    rows["  of which scoring (the rest)"] = max(0.0, split_total - histogram)
    rows["booster glue, binning, validation"] = rest
    for name, seconds in rows.items():
        print(f"| {name} | {seconds:.2f} | {100 * seconds / wall_fit:.0f}% |")
    print("\n| depth | find_best_splits CPU s | share of the fit | tiles scored |")
    print("| ---: | ---: | ---: | ---: |")
    for depth, seconds in sorted(BY_DEPTH.items()):
        scored, tiles = TILES[depth]
        print(f"| {depth} | {seconds:.3f} | {100 * seconds / wall_fit:.0f}% "
              f"| {100 * scored / max(tiles, 1):.1f}% of {tiles:,} |")
    np.testing.assert_(wall_fit > 0)


if __name__ == "__main__":
    main()
