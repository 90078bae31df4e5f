"""The ``packboost`` command line.

Subcommands:

``demo``
    Train on built-in synthetic era data (:func:`packboost.datasets.make_numerai_like`),
    hold out the last quarter of eras and compare PackBoost with a
    least-squares linear baseline on held-out per-era correlation.

Run ``packboost --help`` or ``python -m packboost --help``. :func:`main`
returns the exit status: 0 on success, 2 on a usage error (argparse's
convention), 1 when the run itself fails.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

__all__ = ["main"]

# Fraction of eras (the last ones) held out by the demo.
DEMO_HOLDOUT_FRACTION = 0.25


def main(argv: list[str] | None = None) -> int:
    """Run the command line with ``argv`` (default: ``sys.argv[1:]``).

    Returns
    -------
    int
        Exit status: 0 on success, 2 on a usage error, 1 on a failed run.
    """
    parser = _build_parser()
    try:
        args = parser.parse_args(argv)
        return int(args.command_function(args, parser))
    except SystemExit as exc:  # argparse exits on --help (0) and usage errors (2)
        if exc.code is None or isinstance(exc.code, int):
            return int(exc.code or 0)
        print(exc.code, file=sys.stderr)
        return 1


def _build_parser() -> argparse.ArgumentParser:
    from packboost._version import __version__

    parser = argparse.ArgumentParser(
        prog="packboost",
        description="PackBoost: gradient-boosted trees for era-structured data.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(title="commands", dest="command", metavar="COMMAND")
    commands.required = True

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
    demo.add_argument("--rows", type=_positive_int, default=200_000, help="number of rows")
    demo.add_argument("--features", type=_positive_int, default=100, help="number of features")
    demo.add_argument("--eras", type=_positive_int, default=200, help="number of eras")
    demo.add_argument("--rounds", type=_positive_int, default=100,
                      help="boosting rounds (packs of trees)")
    demo.add_argument("--pack-size", type=_positive_int, default=4, help="trees per round")
    demo.add_argument("--max-depth", type=_positive_int, default=5, help="depth of each tree")
    demo.add_argument("--learning-rate", type=_positive_float, default=0.1,
                      help="shrinkage of each round's update")
    demo.add_argument("--n-jobs", type=int, default=None,
                      help="threads for fitting (default: the library's choice)")
    demo.add_argument("--seed", type=int, default=0, help="seed of the data and of the model")
    demo.set_defaults(command_function=_run_demo)
    return parser


def _run_demo(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from packboost.datasets import make_numerai_like
    from packboost.metrics import era_summary, per_era_correlation

    if args.eras < 2:
        parser.error(f"--eras must be at least 2 to hold eras out, got {args.eras}")
    if args.rows < args.eras:
        parser.error(f"--rows ({args.rows}) must be at least --eras ({args.eras})")
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

    params = {
        "n_estimators": args.rounds,
        "pack_size": args.pack_size,
        "max_depth": args.max_depth,
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
        "linear (lstsq)": _least_squares_predict(train.X, train.y, test.X),
    }

    print()
    print(f"held-out per-era Pearson correlation ({test.n_eras} eras)")
    columns = ("mean", "std", "sharpe", "worst", "max_drawdown")
    print(f"{'model':<16}" + "".join(f"{name:>13}" for name in columns))
    for name, prediction in predictions.items():
        _, correlations = per_era_correlation(test.y, prediction, test.era)
        summary = era_summary(correlations)
        print(f"{name:<16}" + "".join(f"{summary[column]:>13.4f}" for column in columns))
    return 0


def _least_squares_predict(X_train, y_train, X_test) -> np.ndarray:
    """Predictions of an ordinary least-squares fit with an intercept."""
    design = np.empty((X_train.shape[0], X_train.shape[1] + 1), dtype=np.float64)
    design[:, :-1] = X_train
    design[:, -1] = 1.0
    coef, *_ = np.linalg.lstsq(design, np.asarray(y_train, dtype=np.float64), rcond=None)
    return X_test @ coef[:-1] + coef[-1]


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not value > 0 or not np.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a positive number, got {value}")
    return value
