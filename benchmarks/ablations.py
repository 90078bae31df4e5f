"""One-parameter ablations of PackBoost's DES and pack settings.

Starting from the defaults (or ``--base JSON``), changes one parameter at a
time and reports held-out per-era correlation (mean, std, Sharpe, worst) and
fit time, on the era-shift data of ``packboost.datasets`` (held-out = last
quarter of eras). The defaults of ``PackBoostRegressor`` are chosen from
these tables (benchmarks/RESULTS.md, "Era robustness").

Usage::

    python benchmarks/ablations.py --case sign_flip --size small --rounds 100
    python benchmarks/ablations.py --case numerai_like --only lambda_dro era_std
"""

from __future__ import annotations

import argparse
import json
import time

from era_robustness import GENERATORS, SIZES, summarise

from packboost import PackBoostRegressor

# parameter -> values tried (the default is always run once, as "base")
GRID = {
    "era_std": ["total"],
    "era_gain": ["newton"],
    "lambda_dro": [0.0, 0.25, 1.0, 2.0],
    "lambda_dir": [0.5, 1.0],
    "dir_tanh_scale": [0.0],
    "era_weighting": ["count"],
    "pack_size": [1, 8],
    "era_subsample": [0.5, 1.0],
    "row_subsample": [0.5],
    "tree_feature_fraction": [0.5, 1.0],
    "layer_feature_fraction": [0.1, 0.5],
    "max_depth": [4, 8],
}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--case", default="sign_flip", choices=list(GENERATORS))
    parser.add_argument("--size", default="small", choices=list(SIZES))
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--base", type=json.loads, default={}, metavar="JSON",
                        help="parameters every run shares, e.g. '{\"learning_rate\": 0.05}'")
    parser.add_argument("--only", nargs="*", default=None, help="parameters of GRID to vary")
    parser.add_argument("--n-jobs", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)

    n_rows, n_features, n_eras = SIZES[args.size]
    train, test = GENERATORS[args.case](n_rows, n_features, n_eras,
                                        random_state=args.seed).split_by_era(0.25)
    print(f"ablations: {args.case}/{args.size}, {args.rounds} rounds, base {args.base}, "
          f"{time.strftime('%Y-%m-%d %H:%M')}", flush=True)
    runs = [("base", None, None)]
    for name, values in GRID.items():
        if args.only is None or name in args.only:
            runs += [(name, name, value) for value in values]
    rows = []
    for label, name, value in runs:
        params = dict(args.base)
        if name is not None:
            params[name] = value
        model = PackBoostRegressor(n_estimators=args.rounds, n_jobs=args.n_jobs,
                                   random_state=args.seed, **params)
        start = time.perf_counter()
        model.fit(train.X, train.y, era=train.era)
        seconds = time.perf_counter() - start
        summary, _ = summarise(test, model.predict(test.X))
        nodes = int(model.ensemble_.tree_offsets[-1])
        shown = label if name is None else f"{name}={value}"
        print(f"  {shown:<28s} {seconds:7.1f} s {nodes:7d} nodes  mean {summary['mean']:+.4f}  "
              f"std {summary['std']:.4f}  sharpe {summary['sharpe']:+.2f}  "
              f"worst {summary['worst']:+.3f}", flush=True)
        rows.append(dict(run=shown, seconds=seconds, nodes=nodes, **summary))
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(rows, handle, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
