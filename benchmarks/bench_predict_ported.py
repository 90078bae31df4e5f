"""Prediction time of the ported Numerai example against LightGBM's.

    python benchmarks/bench_predict_ported.py

LightGBM as the official example model (2,000 trees, learning rate 0.01,
depth 5, 31 leaves, ``colsample_bytree=0.1``) against PackBoost ported by the
README's table (defaults, ``layer_feature_fraction=0.1``, depth 5) at the
rounds it fits in about half LightGBM's time (benchmarks/RESULTS.md, 2026-11-25
8d88aa8: 1,156-2,044 trees there, 1,200 here), and the same with
``feature_sampling="pack"``; both on ``make_numerai_like`` 100k x 100 (the
``era_robustness.py --size ablation`` data), 2 threads. Each model predicts
the held-out quarter (25k rows) and ten copies of it (250k rows); medians of
``--repeats`` calls.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from packboost import PackBoostRegressor
from packboost.datasets import make_numerai_like


def median_seconds(function, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=300, help="PackBoost rounds of 4 trees")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    import lightgbm

    data = make_numerai_like(100_000, 100, 200, random_state=0)
    train, test = data.split_by_era(0.25)
    inputs = {"25k held-out rows": test.X, "250k rows": np.tile(test.X, (10, 1))}
    peer = lightgbm.LGBMRegressor(n_estimators=2000, learning_rate=0.01, max_depth=5,
                                  num_leaves=31, colsample_bytree=0.1, n_jobs=args.threads,
                                  verbose=-1).fit(train.X, train.y)
    print("| PackBoost | trees | rows | LightGBM (2000 trees) s | PackBoost s | ratio |")
    print("| --- | ---: | --- | ---: | ---: | ---: |")
    for sampling in ("depth", "pack"):
        model = PackBoostRegressor(n_estimators=args.rounds, max_depth=5,
                                   layer_feature_fraction=0.1, feature_sampling=sampling,
                                   n_jobs=args.threads, random_state=0)
        model.fit(train.X, train.y, era=train.era)
        for name, X in inputs.items():
            theirs = median_seconds(lambda X=X: peer.predict(X), args.repeats)
            ours = median_seconds(lambda X=X, model=model: model.predict(X), args.repeats)
            print(f"| feature_sampling={sampling!r} | {args.rounds * model.pack_size} | {name} "
                  f"| {theirs:.3f} | {ours:.3f} | {theirs / ours:.1f}x |")


if __name__ == "__main__":
    main()
