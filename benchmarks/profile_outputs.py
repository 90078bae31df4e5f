"""Where does a fit of k targets spend its time, against one target's fit?

    python benchmarks/profile_outputs.py --rows 400000 --features 200 --targets 1 4

A phase profile of ``fit`` on one thread (so the phases add up to the fit):
each kernel the CPU backend and the booster call is wrapped with a timer of
the process's CPU time, for one target and for k targets (one pass for the k
outputs, docs/packs.md §10), same data and parameters as
``bench_outputs.py``. The table gives each phase's seconds for k targets
beside k times one target's, so the ratio says where the joint fit shares
work (below 1) and where it does not. ``find_best_splits`` (histogram pass
and split scoring, one call a depth) is also given per depth (depth 0: the
packs' roots). The rest of the split of ``find_best_splits`` between its
histogram updates and its scoring needs a sampling profiler (perf): the
kernels are inlined into one OpenMP region.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from bench_outputs import targets

# One set of phase timers for both profiles (profile_fit's timed adds to its PHASES).
from profile_fit import BY_DEPTH, DEPTH, PHASES, timed

from packboost import PackBoostRegressor, _partition, _split, booster, grower
from packboost.backends.cpu import CpuBackend
from packboost.datasets import make_numerai_like


def install_timers() -> None:
    find_best_splits = _split.find_best_splits

    def split_finder(*args, **kwargs):
        start = time.process_time()
        try:
            return find_best_splits(*args, **kwargs)
        finally:
            seconds = time.process_time() - start
            PHASES["find_best_splits (histograms, scoring)"] += seconds
            BY_DEPTH[DEPTH[0]] += seconds
            DEPTH[0] += 1

    _split.find_best_splits = split_finder
    _partition.route_rows = timed("route_rows", _partition.route_rows)
    _partition.slot_sums = timed("slot_sums", _partition.slot_sums)
    _partition.root_sums = timed("slot_sums", _partition.root_sums)
    _partition.children_sums = timed("children_sums", _partition.children_sums)
    _partition.active_rows = timed("active_rows", _partition.active_rows)
    _partition.start_pack_eras = timed("begin_pack (table of the roots)",
                                       _partition.start_pack_eras)
    CpuBackend.add_pack = timed("prediction update", CpuBackend.add_pack)
    CpuBackend.add_output_pack = timed("prediction update", CpuBackend.add_output_pack)
    grower.to_fixed_point = timed("to_fixed_point", grower.to_fixed_point)
    booster.draw_round = timed("draw_round", booster.draw_round)
    booster._round_gradients = timed("objective gradients", booster._round_gradients)
    grow = grower._grow

    def timed_grow(*args, **kwargs):
        DEPTH[0] = 0
        start = time.process_time()
        try:
            return grow(*args, **kwargs)
        finally:
            PHASES["_grow (all of a pack's depths)"] += time.process_time() - start

    grower._grow = timed_grow


def profile(data, y, params) -> dict:
    PHASES.clear()
    BY_DEPTH.clear()
    start = time.process_time()
    PackBoostRegressor(**params).fit(data.X, y, era=data.era)
    total = time.process_time() - start
    phases = dict(PHASES)
    inside = sum(seconds for name, seconds in phases.items()
                 if name in ("find_best_splits (histograms, scoring)", "route_rows", "slot_sums",
                             "children_sums", "active_rows", "begin_pack (table of the roots)"))
    phases["grower and backend glue (Python, NumPy)"] = \
        phases.pop("_grow (all of a pack's depths)") - inside
    phases["the rest (binning, validation, booster)"] = total - sum(phases.values())
    phases["fit"] = total
    return dict(phases=phases, depths=dict(BY_DEPTH))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=400_000)
    parser.add_argument("--features", type=int, default=200)
    parser.add_argument("--eras", type=int, default=100)
    parser.add_argument("--targets", type=int, nargs=2, default=[1, 4],
                        metavar=("ONE", "K"))
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=3,
                        help="alternating fits; each phase's median is reported")
    args = parser.parse_args()
    data = make_numerai_like(n_rows=args.rows, n_features=args.features, n_eras=args.eras,
                             random_state=0)
    params = dict(n_estimators=args.rounds, max_depth=6, pack_size=4, random_state=0,
                  n_jobs=1)
    PackBoostRegressor(**dict(params, n_estimators=1)).fit(data.X, data.y, era=data.era)
    install_timers()
    one, k = args.targets
    Y = targets(data.y, k)
    runs = {one: [], k: []}
    for repeat in range(args.repeats):
        for count in ((one, k) if repeat % 2 == 0 else (k, one)):
            runs[count].append(profile(data, Y[:, 0] if count == 1 else Y[:, :count], params))

    def median(count, table, name):
        return float(np.median([run[table].get(name, 0.0) for run in runs[count]]))

    print(f"# {args.rows} rows x {args.features} uint8 features, {args.eras} eras, "
          f"{args.rounds} rounds x pack 4, depth 6, 1 thread; CPU s, medians of "
          f"{args.repeats}")
    print(f"| phase | {one} target{'s' * (one > 1)} | {k} targets | {k // one} x {one} "
          f"| {k} / ({k // one} x {one}) |")
    print("| --- | ---: | ---: | ---: | ---: |")
    names = list(runs[k][0]["phases"])
    for name in names:
        single, joint = median(one, "phases", name), median(k, "phases", name)
        scaled = single * k / one
        print(f"| {name} | {single:.3f} | {joint:.3f} | {scaled:.3f} "
              f"| {joint / scaled if scaled else float('nan'):.2f} |")
    print("\n| depth | find_best_splits, " + f"{one} | {k} | {k // one} x {one} | ratio |")
    print("| ---: | ---: | ---: | ---: | ---: |")
    for depth in sorted(runs[k][0]["depths"]):
        single, joint = median(one, "depths", depth), median(k, "depths", depth)
        scaled = single * k / one
        print(f"| {depth} | {single:.3f} | {joint:.3f} | {scaled:.3f} "
              f"| {joint / scaled if scaled else float('nan'):.2f} |")


if __name__ == "__main__":
    main()
