"""Fit and predict timing of PackBoost on Numerai-like era data, with LightGBM
as the same-run peer when it is installed.

    python benchmarks/bench_fit.py --rows 200000 --features 200 --eras 200

Runs alternate between the libraries (``--repeats`` each) and the report gives
medians and the PackBoost/LightGBM ratio, because this machine is shared and
noisy: only comparisons inside one run mean anything. Trees are counted as
rounds x pack_size for PackBoost.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time

from packboost import PackBoostRegressor
from packboost.datasets import make_numerai_like
from packboost.metrics import era_summary, per_era_correlation


def fit_packboost(train, args, lambda_dro):
    model = PackBoostRegressor(
        n_estimators=args.trees // args.pack_size, pack_size=args.pack_size,
        max_depth=args.depth, learning_rate=args.learning_rate, lambda_dro=lambda_dro,
        layer_feature_fraction=args.feature_fraction, n_jobs=args.threads, random_state=0)
    start = time.perf_counter()
    model.fit(train.X, train.y, era=train.era)
    return model, time.perf_counter() - start


def fit_lightgbm(train, args):
    import lightgbm

    model = lightgbm.LGBMRegressor(
        n_estimators=args.trees, max_depth=args.depth, num_leaves=2**args.depth,
        learning_rate=args.learning_rate, colsample_bytree=args.feature_fraction,
        min_child_samples=20, n_jobs=args.threads, verbose=-1, random_state=0)
    start = time.perf_counter()
    model.fit(train.X, train.y)
    return model, time.perf_counter() - start


def held_out(model, test):
    start = time.perf_counter()
    prediction = model.predict(test.X)
    seconds = time.perf_counter() - start
    _, correlations = per_era_correlation(test.y, prediction, test.era)
    return seconds, era_summary(correlations)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--features", type=int, default=200)
    parser.add_argument("--eras", type=int, default=200)
    parser.add_argument("--trees", type=int, default=80)
    parser.add_argument("--pack-size", type=int, default=4)
    parser.add_argument("--depth", type=int, default=6)
    parser.add_argument("--learning-rate", type=float, default=0.1)
    parser.add_argument("--feature-fraction", type=float, default=1.0)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    data = make_numerai_like(n_rows=args.rows, n_features=args.features, n_eras=args.eras,
                             random_state=0)
    train, test = data.split_by_era(0.25)
    print(f"# {platform.node()} {platform.processor()} | {args}")
    runs = {}
    for _ in range(args.repeats):
        for name, fit in (("packboost (DES, lambda_dro=0.25)",
                           lambda: fit_packboost(train, args, 0.25)),
                          ("packboost (lambda_dro=0: full-depth trees)",
                           lambda: fit_packboost(train, args, 0.0)),
                          ("lightgbm", lambda: fit_lightgbm(train, args))):
            try:
                model, seconds = fit()
            except ImportError:
                continue
            runs.setdefault(name, {"fit": [], "model": model})["fit"].append(seconds)
    print(f"{'model':44s} {'fit s (median)':>15s} {'trees/s':>9s} {'predict s':>10s} "
          f"{'corr mean':>10s} {'sharpe':>8s}")
    for name, run in runs.items():
        fit_seconds = statistics.median(run["fit"])
        predict_seconds, summary = held_out(run["model"], test)
        print(f"{name:44s} {fit_seconds:15.2f} {args.trees / fit_seconds:9.1f} "
              f"{predict_seconds:10.3f} {summary['mean']:10.4f} {summary['sharpe']:8.2f}")


if __name__ == "__main__":
    main()
