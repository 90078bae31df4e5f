"""Time of exact TreeSHAP contributions (``predict(X, pred_contrib=True)``).

    python benchmarks/bench_shap.py --rows 100000 --features 100 --rounds 50 \
        --pack-size 4 --depth 6 --threads 2 --model /tmp/shap-model.pbm

Fits one model on :func:`packboost.datasets.make_numerai_like` data (the fit is
not timed), then times ``predict(X, pred_contrib=True)`` and plain ``predict``
on the same rows, and extrapolates the contribution time linearly in rows x
trees (the kernel's cost per row and tree is independent of both) to
1M rows x 1,000 trees. ``--check`` also verifies that each row's contributions
sum to the raw prediction.
"""

from __future__ import annotations

import argparse
import os
import platform
import time

import numpy as np


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--features", type=int, default=100)
    parser.add_argument("--eras", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=50)
    parser.add_argument("--pack-size", type=int, default=4)
    parser.add_argument("--depth", type=int, default=6)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--check", action="store_true")
    parser.add_argument("--model", default=None,
                        help="load the model from this file if it exists, else save it there")
    args = parser.parse_args()

    from packboost import PackBoostRegressor, load_model
    from packboost.datasets import make_numerai_like

    data = make_numerai_like(n_rows=args.rows, n_features=args.features,
                             n_eras=args.eras, random_state=0)
    X = data.X.astype(np.float32)
    start = time.perf_counter()
    if args.model is not None and os.path.exists(args.model):
        model = load_model(args.model, n_jobs=args.threads)
    else:
        model = PackBoostRegressor(n_estimators=args.rounds, pack_size=args.pack_size,
                                   max_depth=args.depth, min_samples_leaf=5,
                                   n_jobs=args.threads, random_state=0)
        model.fit(X, data.y, era=data.era, progress=False)
        if args.model is not None:
            model.save_model(args.model)
    fit_s = time.perf_counter() - start
    n_trees = model.n_iter_ * args.pack_size

    start = time.perf_counter()
    raw = model.predict(X)
    predict_s = time.perf_counter() - start
    times, cpu_times = [], []
    for _ in range(args.repeats):
        start, cpu_start = time.perf_counter(), time.process_time()
        contributions = model.predict(X, pred_contrib=True)
        times.append(time.perf_counter() - start)
        cpu_times.append(time.process_time() - cpu_start)
    shap_s = min(times)
    # CPU seconds over all threads: on a shared machine, wall time / cpu time
    # shows how much of the cores this process actually had.
    cpu_s = cpu_times[times.index(shap_s)]
    if args.check:
        error = np.max(np.abs(contributions.sum(axis=1) - raw))
        print(f"max |sum(contributions) - prediction| = {error:.2e}")

    per_row_tree_us = shap_s / (args.rows * n_trees) * 1e6
    full_s = per_row_tree_us * 1e-6 * 1_000_000 * 1_000
    print(f"# {platform.node()} {os.cpu_count()} CPUs, {args.threads} threads, "
          f"{args.rows} rows x {args.features} features, {n_trees} trees of depth "
          f"{args.depth} (fit or load {fit_s:.1f} s)")
    print(f"predict:      {predict_s:8.2f} s")
    print(f"pred_contrib: {shap_s:8.2f} s  ({per_row_tree_us:.3f} us per row and tree; "
          f"min of {args.repeats}; {cpu_s:.2f} CPU s over all threads)")
    print(f"1M rows x 1,000 trees, extrapolated: {full_s:.0f} s ({full_s / 60:.1f} min); "
          f"on {args.threads} unshared cores (CPU time / threads): "
          f"{full_s * cpu_s / shap_s / args.threads / 60:.1f} min")


if __name__ == "__main__":
    main()
