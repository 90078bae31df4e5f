"""``packboost demo``: what era-robust splitting buys, on synthetic era-shift data.

PackBoost (DES), LightGBM (when installed) and a least-squares baseline are fitted
on the first three quarters of the eras and scored era by era on the rest. The
default case, ``make_sign_flip``, is the one DES is for: a few strong features
that pay in most eras and reverse in the others, next to weak stable ones.
"""

from __future__ import annotations

import argparse
import os
import sys
import textwrap
import time

import numpy as np

from packboost.cli._common import (
    check_image_output,
    check_paths,
    positive_float,
    positive_int,
    save_figure,
)

# Fraction of eras (the last ones) held out by the demo.
DEMO_HOLDOUT_FRACTION = 0.25
# The synthetic cases of packboost.datasets the demo can generate.
DEMO_CASES = ("sign_flip", "smooth_drift", "numerai_like")


def add_parser(commands):
    demo = commands.add_parser(
        "demo",
        help="train on built-in synthetic era data",
        description=(
            "Generate era data whose signal shifts between eras (by default: strong "
            "features that flip sign in some eras), hold out the last quarter of eras, "
            "fit PackBoostRegressor, LightGBM (when installed) and a least-squares "
            "linear baseline on the rest, and report each one's held-out per-era "
            "correlation: mean, std, Sharpe, worst era, drawdown."
        ),
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    demo.add_argument("--data", choices=DEMO_CASES, default="sign_flip",
                      help="synthetic case (packboost.datasets.make_<case>)")
    demo.add_argument("--rows", type=positive_int, default=100_000, help="number of rows")
    demo.add_argument("--features", type=positive_int, default=100, help="number of features")
    demo.add_argument("--eras", type=positive_int, default=200, help="number of eras")
    demo.add_argument("--rounds", type=positive_int, default=100,
                      help="boosting rounds (packs of trees; LightGBM grows as many trees)")
    demo.add_argument("--pack-size", type=positive_int, default=4, help="trees per round")
    # Depth 4 and half the features per depth: the demo finishes in well under a
    # minute on 2 cores, LightGBM included (benchmarks/RESULTS.md).
    demo.add_argument("--max-depth", type=positive_int, default=4, help="depth of each tree")
    demo.add_argument("--layer-feature-fraction", type=positive_float, default=0.5,
                      help="fraction of the features drawn per depth (shared by a pack)")
    demo.add_argument("--learning-rate", type=positive_float, default=0.1,
                      help="shrinkage of each round's update (LightGBM's too)")
    demo.add_argument("--lightgbm", action=argparse.BooleanOptionalAction, default=True,
                      help="also fit LightGBM at the same depth, rounds and rate "
                           "(skipped with a note when it is not installed)")
    demo.add_argument("--n-jobs", type=int, default=None,
                      help="threads for fitting (default: the library's choice)")
    demo.add_argument("--seed", type=int, default=0, help="seed of the data and of the model")
    demo.add_argument("--png", default=None, metavar="PATH",
                      help="save the held-out per-era correlation chart (needs matplotlib)")
    demo.add_argument("--output", default=None, metavar="PATH", help="save the fitted model")
    demo.add_argument("--export", default=None, metavar="DIR",
                      help="also write the data as Numerai-style files to DIR: train, "
                           "validation (held-out eras) and live (validation without targets)")
    demo.add_argument("--export-format", choices=("parquet", "csv"), default="parquet",
                      help="file format of --export (parquet needs pyarrow or polars)")
    demo.set_defaults(command_function=run, command_parser=demo)


def run(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from packboost.metrics import era_summary, per_era_correlation

    if args.eras < 2:
        parser.error(f"--eras must be at least 2 to hold eras out, got {args.eras}")
    if args.rows < args.eras:
        parser.error(f"--rows ({args.rows}) must be at least --eras ({args.eras})")
    outputs = [("--output", args.output), ("--png", args.png)]
    if args.export is not None:
        if os.path.exists(args.export) and not os.path.isdir(args.export):
            parser.error(f"--export {args.export!r} is a file, not a directory")
        try:
            os.makedirs(args.export, exist_ok=True)
        except OSError as error:
            parser.error(f"--export {args.export!r}: cannot create the directory: "
                         f"{error.strerror or error}")
        outputs += [(f"--export ({os.path.basename(path)})", path)
                    for path in export_paths(args.export, args.export_format).values()]
    check_paths(parser, inputs=[], outputs=outputs)
    check_image_output(parser, "--png", args.png)
    if args.export is not None and args.export_format == "parquet":
        from packboost._files import _parquet_library

        _parquet_library()  # before any work: parquet needs pyarrow or polars
    try:
        from packboost import PackBoostRegressor
    except ImportError as exc:
        print(f"packboost demo: cannot import PackBoostRegressor: {exc}", file=sys.stderr)
        return 1

    started = time.perf_counter()
    data, description = make_demo_data(args.data, args.rows, args.features, args.eras,
                                       args.seed)
    train, test = data.split_by_era(DEMO_HOLDOUT_FRACTION)
    print(f"packboost demo: packboost.datasets.make_{args.data} (seed {args.seed})")
    print(textwrap.fill(description(train, test), width=78, initial_indent="  ",
                        subsequent_indent="  "))
    print(
        f"data:  {data.n_rows} rows x {data.n_features} features, {args.eras} eras "
        f"(generated in {time.perf_counter() - started:.1f} s)"
    )
    print(
        f"split: train {train.n_eras} eras ({train.n_rows} rows), "
        f"held out last {test.n_eras} eras ({test.n_rows} rows)"
    )
    if args.export is not None:
        export_demo_data(args.export, args.export_format, train, test)

    params = {
        "n_estimators": args.rounds,
        "pack_size": args.pack_size,
        "max_depth": args.max_depth,
        "layer_feature_fraction": args.layer_feature_fraction,
        "learning_rate": args.learning_rate,
        "n_jobs": args.n_jobs,
        "random_state": args.seed,
    }
    model = PackBoostRegressor(**params)
    started = time.perf_counter()
    model.fit(train.X, train.y, era=train.era)
    print_fit("PackBoostRegressor", params, time.perf_counter() - started)
    predictions = {"PackBoost (DES)": np.asarray(model.predict(test.X), dtype=np.float64)}
    if args.lightgbm:
        lightgbm_prediction = fit_lightgbm(args, train, test)
        if lightgbm_prediction is not None:
            predictions["LightGBM"] = lightgbm_prediction
    predictions["linear (lstsq)"] = least_squares_predict(train.X, train.y, test.X)

    print()
    print(f"held-out per-era Pearson correlation ({test.n_eras} eras)")
    columns = ("mean", "std", "sharpe", "worst", "max_drawdown")
    print(f"{'model':<15}" + "".join(f"{name:>13}" for name in columns))
    summaries = {}
    for name, prediction in predictions.items():
        _, correlations = per_era_correlation(test.y, prediction, test.era)
        summaries[name] = summary = era_summary(correlations)
        print(f"{name:<15}" + "".join(f"{summary[column]:>13.4f}" for column in columns))
    best = max(summaries, key=lambda name: summaries[name]["sharpe"])
    print(f"sharpe: mean / std over the eras (best: {best}); worst: the worst era;")
    print("max_drawdown: the deepest fall of the running sum of the correlations")
    if args.output is not None:
        model.save_model(args.output)
        print(f"saved: {args.output}")
    if args.png is not None:
        from packboost.plotting import plot_era_correlation

        save_figure(lambda path: plot_era_correlation(
            test.y, predictions["PackBoost (DES)"], test.era, path=path,
            title="PackBoost, held-out eras: Pearson correlation per era"), args.png)
        print(f"wrote {args.png}")
    return 0


def make_demo_data(case, n_rows, n_features, n_eras, seed):
    """``(data, describe)``: the case's dataset and a function of ``(train, test)``
    returning one line on what shifts between its eras."""
    from packboost import datasets

    if case == "sign_flip":
        n_strong = max(1, n_features // 50)
        n_stable = min(max(1, n_features // 10), n_features - n_strong)
        data = datasets.make_sign_flip(n_rows, n_features, n_eras, n_strong=n_strong,
                                       n_stable=n_stable, random_state=seed)
        # All strong features flip together; most eras are not flipped.
        strong_sign = np.sign(data.coefficients[:, 0])
        usual = 1.0 if np.sum(strong_sign > 0) >= np.sum(strong_sign < 0) else -1.0
        flipped = strong_sign != usual

        def describe(train, test):
            shares = [np.mean(flipped[np.unique(part.era)]) for part in (train, test)]
            strong = f"{n_strong} strong feature" + ("s" if n_strong > 1 else "")
            stable = f"{n_stable} weak one" + ("s are" if n_stable > 1 else " is")
            verb = "reverse" if n_strong > 1 else "reverses"
            return (f"{strong} {verb} their effect in {shares[0]:.0%} of the training "
                    f"eras and {shares[1]:.0%} of the held-out ones; {stable} stable. "
                    "A model that leans on the strong ones wins on most eras and loses "
                    "on the flipped ones; one that trusts only what holds in every era "
                    "is steadier.")
        return data, describe
    if case == "smooth_drift":
        data = datasets.make_smooth_drift(n_rows, n_features, n_eras, random_state=seed)
        return data, lambda train, test: (
            "half the informative features' effects drift along a line over time; "
            "the held-out eras continue the trend")
    data = datasets.make_numerai_like(n_rows, n_features, n_eras, random_state=seed)
    return data, lambda train, test: (
        "a weak signal; a quarter of its features fade and a quarter flip late, "
        "mostly in the held-out eras")


def print_fit(estimator, params, seconds) -> None:
    """``fit:   Estimator(params) in N s``, wrapped to 78 columns."""
    shown = ", ".join(f"{name}={value}" for name, value in params.items())
    print(textwrap.fill(f"fit:   {estimator}({shown}) in {seconds:.1f} s", width=78,
                        subsequent_indent="         "))


def fit_lightgbm(args, train, test):
    """LightGBM's held-out predictions at the demo's depth, rounds and rate, or
    None (with a note) when it is not installed."""
    try:
        import lightgbm
    except ImportError:
        print("fit:   LightGBM skipped: not installed (pip install lightgbm to compare)")
        return None
    params = {
        "n_estimators": args.rounds,
        "max_depth": args.max_depth,
        "num_leaves": 2 ** args.max_depth,
        "learning_rate": args.learning_rate,
        "colsample_bytree": args.layer_feature_fraction,
        "n_jobs": args.n_jobs if args.n_jobs is not None else 0,
        "random_state": args.seed,
        "verbose": -1,
    }
    model = lightgbm.LGBMRegressor(**params)
    started = time.perf_counter()
    model.fit(np.asarray(train.X, dtype=np.float32), train.y)
    print_fit("LGBMRegressor", {name: value for name, value in params.items()
                                if name not in ("verbose", "n_jobs")},
              time.perf_counter() - started)
    return np.asarray(model.predict(np.asarray(test.X, dtype=np.float32)), dtype=np.float64)


def export_demo_data(directory, file_format, train, test):
    """Write the demo's eras as Numerai lays its files out: id, era, feature_*, target."""
    from packboost import _files

    os.makedirs(directory, exist_ok=True)
    parts = {"train": (train, True), "validation": (test, True), "live": (test, False)}
    offsets = {"train": 0, "validation": train.n_rows, "live": train.n_rows}
    paths = export_paths(directory, file_format)
    for name, (part, with_target) in parts.items():
        first = offsets[name]
        columns = {"id": np.array([f"n{row:07d}" for row in range(first, first + part.n_rows)]),
                   "era": np.array([f"{era + 1:04d}" for era in part.era])}
        columns.update({f"feature_{index:03d}": part.X[:, index].astype(np.int8)
                        for index in range(part.n_features)})
        if with_target:
            columns["target"] = part.y
        path = paths[name]
        _files.write_columns(path, columns)
        print(f"wrote: {path} ({part.n_rows} rows)")


def export_paths(directory, file_format) -> dict:
    """The files ``--export`` writes: train, validation and live."""
    return {name: os.path.join(directory, f"{name}.{file_format}")
            for name in ("train", "validation", "live")}


def least_squares_predict(X_train, y_train, X_test) -> np.ndarray:
    """Predictions of an ordinary least-squares fit with an intercept."""
    design = np.empty((X_train.shape[0], X_train.shape[1] + 1), dtype=np.float64)
    design[:, :-1] = X_train
    design[:, -1] = 1.0
    coef, *_ = np.linalg.lstsq(design, np.asarray(y_train, dtype=np.float64), rcond=None)
    return X_test @ coef[:-1] + coef[-1]
