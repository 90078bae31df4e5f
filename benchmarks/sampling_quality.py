"""Per-depth or per-pack feature draws: held-out quality at equal trees and equal time.

``feature_sampling="pack"`` (draw the feature fractions once per pack, as
LightGBM's ``feature_fraction`` draws per tree) lets the CPU derive half of
each depth's histograms by subtraction; ``"depth"`` (the default) draws afresh
at every depth. Is the faster one as good? For each case of
``era_robustness.py``, seed and fraction setting, both samplings are fitted
with the same seed on the same data; the held-out per-era Sharpe is compared
pairwise at checkpoints of equal rounds (equal trees) and at the time the
``"depth"`` fit took (equal time: the rounds the ``"pack"`` fit had finished
by then). Paired differences across seeds give a mean and its standard error.

Usage::

    python benchmarks/sampling_quality.py                       # 3 cases x 2 settings x 5 seeds
    python benchmarks/sampling_quality.py --cases numerai_like --seeds 0 1 --size tiny
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
from era_robustness import GENERATORS, SIZES, RoundClock, load_case, summarise

from packboost import PackBoostRegressor

# The fraction settings users run: the defaults, and LightGBM's
# colsample_bytree = 0.1 ported by the README table.
SETTINGS = {
    "defaults (layer 1.0, tree 0.5)": dict(),
    "ported (layer 0.1, tree 0.5)": dict(layer_feature_fraction=0.1),
}
SAMPLINGS = ("depth", "pack")


def fit_timed(train, params: dict, rounds: int, seed: int, n_jobs: int):
    model = PackBoostRegressor(n_estimators=rounds, random_state=seed, n_jobs=n_jobs, **params)
    clock = RoundClock(time.perf_counter(), None)
    model.fit(train.X, train.y, era=train.era, callbacks=[clock])
    return model, np.asarray(clock.elapsed)


def sharpe_at(model, test, rounds: int) -> float:
    prediction = model.predict(test.X, iteration_range=(0, rounds))
    return summarise(test, prediction)[0]["sharpe"]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cases", nargs="+", default=list(GENERATORS), choices=list(GENERATORS))
    parser.add_argument("--size", default="ablation", choices=list(SIZES))
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2, 3, 4])
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--checkpoints", nargs="+", type=int, default=[25, 50, 100])
    parser.add_argument("--n-jobs", type=int, default=1)
    parser.add_argument("--json", help="write every fit's numbers here")
    args = parser.parse_args(argv)
    checkpoints = [c for c in args.checkpoints if c <= args.rounds]
    rows = []
    for case in args.cases:
        for seed in args.seeds:
            train, test = load_case(case, args.size, seed, None)
            for setting, params in SETTINGS.items():
                fits = {}
                for sampling in SAMPLINGS:
                    # "pack" gets twice the rounds, to be scored at "depth"'s fit time
                    rounds = args.rounds if sampling == "depth" else 2 * args.rounds
                    model, elapsed = fit_timed(train, {**params, "feature_sampling": sampling},
                                               rounds, seed, args.n_jobs)
                    fits[sampling] = (model, elapsed)
                depth_seconds = fits["depth"][1][-1]
                pack_rounds = max(1, int(np.searchsorted(fits["pack"][1], depth_seconds,
                                                         side="right")))
                row = dict(case=case, seed=seed, setting=setting,
                           seconds={s: float(fits[s][1][args.rounds - 1]) for s in SAMPLINGS},
                           equal_trees={s: {c: sharpe_at(fits[s][0], test, c) for c in checkpoints}
                                        for s in SAMPLINGS},
                           equal_time=dict(pack_rounds=pack_rounds,
                                           depth=sharpe_at(fits["depth"][0], test, args.rounds),
                                           pack=sharpe_at(fits["pack"][0], test, pack_rounds)))
                rows.append(row)
                print(json.dumps(row), flush=True)
    report(rows, checkpoints)
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(rows, handle, indent=1)


def paired(values: list[float]) -> str:
    values = np.asarray(values)
    se = values.std(ddof=1) / np.sqrt(len(values)) if len(values) > 1 else float("nan")
    return f"{values.mean():+.3f} ± {se:.3f}"


def report(rows: list[dict], checkpoints: list[int]) -> None:
    print("\n| case | setting | rounds | Sharpe depth | Sharpe pack | pack - depth (mean ± se) "
          "| fit s depth / pack |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
    for case in dict.fromkeys(r["case"] for r in rows):
        for setting in SETTINGS:
            group = [r for r in rows if r["case"] == case and r["setting"] == setting]
            if not group:
                continue
            seconds = {s: np.median([r["seconds"][s] for r in group]) for s in SAMPLINGS}
            for c in checkpoints:
                depth = [r["equal_trees"]["depth"][c] for r in group]
                pack = [r["equal_trees"]["pack"][c] for r in group]
                print(f"| {case} | {setting} | {c} | {np.mean(depth):.3f} | {np.mean(pack):.3f} "
                      f"| {paired(np.subtract(pack, depth))} "
                      f"| {seconds['depth']:.1f} / {seconds['pack']:.1f} |")
    print("\nEqual time: \"pack\" scored at the rounds it had finished when \"depth\" "
          "finished its own.")
    print("| case | setting | pack rounds (median) | Sharpe depth | Sharpe pack "
          "| pack - depth (mean ± se) |")
    print("| --- | --- | ---: | ---: | ---: | ---: |")
    for case in dict.fromkeys(r["case"] for r in rows):
        for setting in SETTINGS:
            group = [r["equal_time"] for r in rows if r["case"] == case and r["setting"] == setting]
            if not group:
                continue
            depth = [g["depth"] for g in group]
            pack = [g["pack"] for g in group]
            print(f"| {case} | {setting} | {np.median([g['pack_rounds'] for g in group]):.0f} "
                  f"| {np.mean(depth):.3f} | {np.mean(pack):.3f} "
                  f"| {paired(np.subtract(pack, depth))} |")
    print(f"\n{len(rows)} paired fits; seeds are data and model seeds together.")


if __name__ == "__main__":
    main()
