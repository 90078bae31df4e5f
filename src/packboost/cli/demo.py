"""``packboost demo``: PackBoost against a linear baseline on synthetic era data."""

from __future__ import annotations

import argparse
import os
import sys
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


def add_parser(commands):
    demo = commands.add_parser(
        "demo",
        help="train on built-in synthetic era data",
        description=(
            "Generate Numerai-like era data, hold out the last quarter of eras, fit "
            "PackBoostRegressor on the rest and report held-out per-era correlation "
            "against a least-squares linear baseline."
        ),
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    demo.add_argument("--rows", type=positive_int, default=200_000, help="number of rows")
    demo.add_argument("--features", type=positive_int, default=100, help="number of features")
    demo.add_argument("--eras", type=positive_int, default=200, help="number of eras")
    demo.add_argument("--rounds", type=positive_int, default=100,
                      help="boosting rounds (packs of trees)")
    demo.add_argument("--pack-size", type=positive_int, default=4, help="trees per round")
    # Depth 4 and half the features per depth: a demo that finishes in well under a
    # minute on 2 cores and still beats the linear baseline (benchmarks/RESULTS.md).
    demo.add_argument("--max-depth", type=positive_int, default=4, help="depth of each tree")
    demo.add_argument("--layer-feature-fraction", type=positive_float, default=0.5,
                      help="fraction of the features drawn per depth (shared by a pack)")
    demo.add_argument("--learning-rate", type=positive_float, default=0.1,
                      help="shrinkage of each round's update")
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
    from packboost.datasets import make_numerai_like
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

    print(f"packboost demo: synthetic era data (make_numerai_like, seed {args.seed})")
    started = time.perf_counter()
    data = make_numerai_like(args.rows, args.features, args.eras, random_state=args.seed)
    train, test = data.split_by_era(DEMO_HOLDOUT_FRACTION)
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
    fit_seconds = time.perf_counter() - started
    shown = ", ".join(f"{name}={value}" for name, value in params.items())
    print(f"fit:   PackBoostRegressor({shown}) in {fit_seconds:.1f} s")
    predictions = {
        "PackBoost": np.asarray(model.predict(test.X), dtype=np.float64),
        "linear (lstsq)": least_squares_predict(train.X, train.y, test.X),
    }

    print()
    print(f"held-out per-era Pearson correlation ({test.n_eras} eras)")
    columns = ("mean", "std", "sharpe", "worst", "max_drawdown")
    print(f"{'model':<16}" + "".join(f"{name:>13}" for name in columns))
    for name, prediction in predictions.items():
        _, correlations = per_era_correlation(test.y, prediction, test.era)
        summary = era_summary(correlations)
        print(f"{name:<16}" + "".join(f"{summary[column]:>13.4f}" for column in columns))
    if args.output is not None:
        model.save_model(args.output)
        print(f"saved: {args.output}")
    if args.png is not None:
        from packboost.plotting import plot_era_correlation

        save_figure(lambda path: plot_era_correlation(
            test.y, predictions["PackBoost"], test.era, path=path,
            title="PackBoost, held-out eras: Pearson correlation per era"), args.png)
        print(f"wrote {args.png}")
    return 0


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
