"""PackBoost vs LightGBM, XGBoost and scikit-learn on Numerai-like era data.

    python benchmarks/bench_speed.py --size small --feature-fraction 0.1 1.0
    python benchmarks/bench_speed.py --size medium --repeats 3
    python benchmarks/bench_speed.py --size numerai --libraries packboost --trees 40 \
        --feature-fraction 0.1

Every (library, feature fraction, repeat) is one fresh subprocess, run in
alternating order, so that peak memory can be read per fit (``VmHWM`` after
resetting it once the data exist) and no library's threads or caches leak
into another's timing. Data come from :func:`packboost.datasets.make_numerai_like`
(deterministic) and the last quarter of eras is held out. Settings are matched:
depth 6, the same number of trees (PackBoost: rounds x pack_size), the same
learning rate, ``--threads`` threads, and the feature fraction applied per
depth where the library can (PackBoost ``layer_feature_fraction``, XGBoost
``colsample_bylevel``) else per tree (LightGBM ``feature_fraction``) or per
split (scikit-learn ``max_features``).

The report gives medians over repeats and the ratio of each library's trees per
second to PackBoost's. This machine is shared and noisy: compare within a run.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

SIZES = {
    "tiny": dict(n_rows=20_000, n_features=50, n_eras=40),
    "small": dict(n_rows=200_000, n_features=200, n_eras=200),
    "medium": dict(n_rows=1_000_000, n_features=400, n_eras=400),
    # Numerai's width and era count (2.0M training rows after the held-out quarter)
    "numerai": dict(n_rows=2_700_000, n_features=500, n_eras=600),
}
LIBRARIES = ("packboost", "lightgbm", "xgboost", "sklearn")


def _reset_peak_rss() -> None:
    # Writing 5 to clear_refs resets VmHWM (Linux >= 4.0).
    with open("/proc/self/clear_refs", "w") as handle:
        handle.write("5")


def _rss_kib(field: str) -> int:
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def _make_model(library, config):
    depth, trees, threads = config["depth"], config["trees"], config["threads"]
    fraction, rate = config["feature_fraction"], config["learning_rate"]
    if library == "packboost":
        from packboost import PackBoostRegressor

        return PackBoostRegressor(
            n_estimators=trees // config["pack_size"], pack_size=config["pack_size"],
            max_depth=depth, learning_rate=rate, layer_feature_fraction=fraction,
            n_jobs=threads, random_state=0,
            **({} if config["lambda_dro"] is None else {"lambda_dro": config["lambda_dro"]}))
    if library == "lightgbm":
        import lightgbm

        return lightgbm.LGBMRegressor(
            n_estimators=trees, max_depth=depth, num_leaves=2**depth, learning_rate=rate,
            feature_fraction=fraction, min_child_samples=20, n_jobs=threads, verbose=-1,
            random_state=0)
    if library == "xgboost":
        import xgboost

        return xgboost.XGBRegressor(
            n_estimators=trees, max_depth=depth, learning_rate=rate, tree_method="hist",
            colsample_bylevel=fraction, n_jobs=threads, random_state=0)
    if library == "sklearn":
        from sklearn.ensemble import HistGradientBoostingRegressor

        return HistGradientBoostingRegressor(
            max_iter=trees, max_depth=depth, max_leaf_nodes=None, learning_rate=rate,
            max_features=fraction, early_stopping=False, random_state=0)
    raise ValueError(library)


def run_one(config: dict) -> dict:
    """Child process: generate the data, fit one model, report."""
    if config["library"] == "sklearn":
        # scikit-learn has no n_jobs here; its OpenMP team follows this.
        os.environ["OMP_NUM_THREADS"] = str(config["threads"])
    import numpy as np

    from packboost.datasets import make_numerai_like
    from packboost.metrics import era_summary, per_era_correlation

    data = make_numerai_like(**SIZES[config["size"]], random_state=0)
    train, test = data.split_by_era(0.25)
    del data
    model = _make_model(config["library"], config)
    _reset_peak_rss()
    rss_before = _rss_kib("VmRSS")
    start = time.perf_counter()
    if config["library"] == "packboost":
        model.fit(train.X, train.y, era=train.era)
    else:
        model.fit(train.X, train.y)
    fit_seconds = time.perf_counter() - start
    n_nodes = (len(model.ensemble_.nodes["feature"]) if config["library"] == "packboost"
               else None)
    peak_kib = _rss_kib("VmHWM") - rss_before
    start = time.perf_counter()
    prediction = model.predict(test.X)
    predict_seconds = time.perf_counter() - start
    _, correlations = per_era_correlation(test.y, np.asarray(prediction, dtype=float), test.era)
    summary = era_summary(correlations)
    return dict(config, fit_seconds=fit_seconds, packboost_nodes=n_nodes,
                predict_seconds=predict_seconds,
                predict_rows=int(test.X.shape[0]), fit_peak_mib=peak_kib / 1024,
                train_matrix_mib=train.X.nbytes / 2**20, **{f"corr_{k}": v
                                                            for k, v in summary.items()})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=SIZES, default="small")
    parser.add_argument("--feature-fraction", type=float, nargs="+", default=[0.1, 1.0])
    parser.add_argument("--libraries", nargs="+", choices=LIBRARIES, default=list(LIBRARIES))
    parser.add_argument("--trees", type=int, default=200)
    parser.add_argument("--pack-size", type=int, default=4)
    parser.add_argument("--depth", type=int, default=6)
    parser.add_argument("--learning-rate", type=float, default=0.05)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--lambda-dro", type=float, default=None,
                        help="PackBoost's DES risk weight (default: the library's)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", help="also write every run to this JSON file")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(run_one(json.loads(args.child))))
        return

    runs = []
    print(f"# {time.strftime('%Y-%m-%d')} {platform.node()} {os.cpu_count()} cpus | "
          f"python {sys.argv[0]} " + " ".join(sys.argv[1:]), flush=True)
    for repeat in range(args.repeats):
        for fraction in args.feature_fraction:
            for library in args.libraries:
                config = dict(library=library, size=args.size, feature_fraction=fraction,
                              trees=args.trees, pack_size=args.pack_size, depth=args.depth,
                              learning_rate=args.learning_rate, threads=args.threads,
                              lambda_dro=args.lambda_dro, repeat=repeat)
                done = subprocess.run([sys.executable, __file__, "--child", json.dumps(config)],
                                      capture_output=True, text=True)
                if done.returncode != 0:
                    print(f"{library} failed: {done.stderr[-500:]}", file=sys.stderr)
                    continue
                runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
                print(f"  {library:9s} ff={fraction:<4} repeat {repeat}: "
                      f"fit {runs[-1]['fit_seconds']:.2f} s", flush=True)
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(runs, handle, indent=1)
    report(runs)


def report(runs: list) -> None:
    def median(library, fraction, key):
        values = [r[key] for r in runs
                  if r["library"] == library and r["feature_fraction"] == fraction]
        return statistics.median(values) if values else float("nan")

    for fraction in sorted({r["feature_fraction"] for r in runs}):
        print(f"\nfeature fraction {fraction}: medians of "
              f"{max(r['repeat'] for r in runs) + 1} runs; PackBoost trees have "
              f"{median('packboost', fraction, 'packboost_nodes'):.0f} nodes in all")
        print("| library | fit s | trees/s | PackBoost speed-up | predict s | fit peak MiB |"
              " corr mean | corr std | Sharpe | worst era |")
        print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
        packboost_rate = None
        for library in LIBRARIES:
            fit = median(library, fraction, "fit_seconds")
            if fit != fit:
                continue
            trees = next(r["trees"] for r in runs if r["library"] == library)
            rate = trees / fit
            if library == "packboost":
                packboost_rate = rate
            speedup = packboost_rate / rate if packboost_rate else float("nan")
            print(f"| {library} | {fit:.2f} | {rate:.1f} | {speedup:.2f}x | "
                  f"{median(library, fraction, 'predict_seconds'):.3f} | "
                  f"{median(library, fraction, 'fit_peak_mib'):.0f} | "
                  f"{median(library, fraction, 'corr_mean'):.4f} | "
                  f"{median(library, fraction, 'corr_std'):.4f} | "
                  f"{median(library, fraction, 'corr_sharpe'):.2f} | "
                  f"{median(library, fraction, 'corr_worst'):.4f} |")


if __name__ == "__main__":
    main()
