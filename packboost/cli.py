"""The ``packboost`` command line.

Subcommands:

``train DATA``
    Fit a model on a parquet or CSV file (era, target and feature columns
    chosen by name) and save it; parameters from flags or a TOML file;
    optional validation file with early stopping.
``predict MODEL DATA``
    Write the model's predictions for a file (id column kept) as CSV or parquet.
``evaluate DATA``
    Per-era report (Pearson, Spearman, Numerai correlation, optionally
    feature-neutral) of a model's predictions or of a prediction column, as
    a table, and optionally as CSV and PNG.
``demo``
    Train on built-in synthetic era data (:func:`packboost.datasets.make_numerai_like`),
    hold out the last quarter of eras and compare PackBoost with a
    least-squares linear baseline on held-out per-era correlation.

Run ``packboost --help`` or ``python -m packboost --help``. :func:`main`
returns the exit status: 0 on success, 2 on a usage error (argparse's
convention), 1 when the run itself fails (a missing file or column, bad
data, a corrupted model file, too little memory, a missing optional
package), with the reason on stderr, and 130 when interrupted (Ctrl-C).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

__all__ = ["main"]

# Fraction of eras (the last ones) held out by the demo.
DEMO_HOLDOUT_FRACTION = 0.25
# Columns never taken as features by default.
DEFAULT_ID_COLUMN = "id"
DEFAULT_ERA_COLUMN = "era"
DEFAULT_TARGET_COLUMN = "target"
DEFAULT_FEATURE_PATTERN = "feature*"
DEFAULT_PREDICTION_COLUMN = "prediction"
CORRELATION_CHOICES = ("pearson", "spearman", "numerai")


class CommandError(Exception):
    """A failed run: the message is printed and the exit status is 1."""


def main(argv: list[str] | None = None) -> int:
    """Run the command line with ``argv`` (default: ``sys.argv[1:]``).

    Returns
    -------
    int
        Exit status: 0 on success, 2 on a usage error, 1 on a failed run.
    """
    from packboost.model_file import ModelFileError

    parser = _build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse exits on --help (0) and usage errors (2)
        if exc.code is None or isinstance(exc.code, int):
            return int(exc.code or 0)
        print(exc.code, file=sys.stderr)
        return 1
    try:
        return int(args.command_function(args, parser))
    except BrokenPipeError:  # e.g. "packboost evaluate ... | head": stop quietly
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1
    except SystemExit as exc:  # parser.error inside a command
        return int(exc.code or 0) if exc.code is None or isinstance(exc.code, int) else 1
    except KeyboardInterrupt:
        # Ctrl-C: nothing half-written is left (models and outputs are written
        # atomically, once complete); 130 = 128 + SIGINT, as shells report it.
        print(f"packboost {args.command}: interrupted", file=sys.stderr)
        return 130
    except (CommandError, ValueError, TypeError, OSError, ImportError, KeyError,
            MemoryError, ArithmeticError, ModelFileError) as error:
        message = error.args[0] if isinstance(error, KeyError) and error.args else error
        print(f"packboost {args.command}: error: {message}", file=sys.stderr)
        return 1


# ----------------------------------------------------------------------------- parser


def _build_parser() -> argparse.ArgumentParser:
    from packboost._version import __version__

    parser = argparse.ArgumentParser(
        prog="packboost",
        description="PackBoost: gradient-boosted trees for era-structured data.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(title="commands", dest="command", metavar="COMMAND")
    commands.required = True
    _add_train_parser(commands)
    _add_predict_parser(commands)
    _add_evaluate_parser(commands)
    _add_demo_parser(commands)
    return parser


def _add_column_arguments(command, *, targets: bool):
    group = command.add_argument_group("columns")
    group.add_argument("--era", default=None, metavar="COLUMN",
                       help=f"era column (default: {DEFAULT_ERA_COLUMN!r} if the file has it, "
                            "else every row is one era)")
    if targets:
        group.add_argument("--target", default=None, metavar="COLUMN",
                           help=f"target column (default: {DEFAULT_TARGET_COLUMN!r}, else the "
                                "first column named target*)")
    group.add_argument("--features", default=None, metavar="NAMES",
                       help="comma-separated feature columns or shell patterns, e.g. "
                            f"'feature_*' (default: the model's features, else "
                            f"{DEFAULT_FEATURE_PATTERN!r}, else every other numeric column)")
    group.add_argument("--features-file", default=None, metavar="PATH",
                       help="feature names from a JSON list, a Numerai features.json "
                            "(with --feature-set) or a text file with one name per line")
    group.add_argument("--feature-set", default=None, metavar="NAME",
                       help="feature set of a Numerai features.json (e.g. small, medium)")


def _add_train_parser(commands):
    from packboost.sklearn import _PARAMETER_RULES

    train = commands.add_parser(
        "train", help="fit a model on a parquet or CSV file and save it",
        description=(
            "Fit PackBoostRegressor (or, with --classifier, PackBoostClassifier) on DATA and "
            "save the model. Parameters come from --config (a TOML file of name = value "
            "pairs, at the top level or under [params]) and from the flags below, which "
            "win. Rows with a missing target are skipped."
        ),
    )
    train.add_argument("data", help="training data (.parquet or .csv)")
    train.add_argument("-o", "--output", default="model.pbm",
                       help="where to save the model (default: model.pbm)")
    train.add_argument("--valid", default=None, metavar="PATH",
                       help="validation data with the same columns: scored every round")
    _add_column_arguments(train, targets=True)
    train.add_argument("--classifier", action="store_true",
                       help="binary classification (the target holds two labels)")
    train.add_argument("--config", default=None, metavar="TOML",
                       help="TOML file of estimator parameters")
    train.add_argument("--early-stopping-rounds", type=_positive_int, default=None, metavar="N",
                       help="stop when the first --eval-metric on --valid has not improved "
                            "for N rounds; keep the best rounds")
    train.add_argument("--eval-metric", default=None, metavar="NAMES",
                       help="comma-separated metrics recorded on --valid, e.g. "
                            "numerai_sharpe,rmse (default: pearson_mean,pearson_sharpe,rmse)")
    train.add_argument("--log-every", type=_positive_int, default=None, metavar="N",
                       help="print the --valid metrics every N rounds")
    train.add_argument("--init-model", default=None, metavar="PATH",
                       help="continue training this saved model (n_estimators more rounds)")
    train.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                       help="progress bar on stderr (default: only in a terminal)")
    params = train.add_argument_group(
        "estimator parameters (see help(packboost.PackBoostRegressor))")
    for name, rule in _PARAMETER_RULES.items():
        flag = "--" + name.replace("_", "-")
        if rule[0] == "int":
            params.add_argument(flag, dest=f"param_{name}", type=int, default=None, metavar="INT")
        elif rule[0] == "real":
            params.add_argument(flag, dest=f"param_{name}", type=float, default=None,
                                metavar="FLOAT")
        else:
            params.add_argument(flag, dest=f"param_{name}", choices=rule, default=None)
    params.add_argument("--n-jobs", dest="param_n_jobs", type=int, default=None, metavar="INT")
    params.add_argument("--seed", "--random-state", dest="param_random_state", type=int,
                        default=None, metavar="INT", help="seed of every random draw")
    train.set_defaults(command_function=_run_train)


def _add_predict_parser(commands):
    predict = commands.add_parser(
        "predict", help="predict a parquet or CSV file with a saved model",
        description=(
            "Predict DATA with MODEL and write the predictions (with the id column when "
            "DATA has one) to OUTPUT, as CSV or parquet by its extension. A classifier "
            "writes the probability of its second class."
        ),
    )
    predict.add_argument("model", help="a model saved by 'packboost train' or save_model")
    predict.add_argument("data", help="data to predict (.parquet or .csv)")
    predict.add_argument("-o", "--output", required=True,
                         help="predictions file (.csv or .parquet)")
    predict.add_argument("--id-column", default=None, metavar="COLUMN",
                         help=f"row id column copied to the output (default: "
                              f"{DEFAULT_ID_COLUMN!r} if present)")
    predict.add_argument("--prediction-column", default=DEFAULT_PREDICTION_COLUMN,
                         metavar="NAME", help="name of the output column (default: prediction)")
    group = predict.add_argument_group("columns")
    group.add_argument("--features", default=None, metavar="NAMES",
                       help="feature columns, for a model saved without feature names")
    predict.set_defaults(command_function=_run_predict)


def _add_evaluate_parser(commands):
    evaluate = commands.add_parser(
        "evaluate", help="per-era report of predictions against targets",
        description=(
            "Score predictions era by era: those of --model on DATA, or a column of DATA "
            "(--prediction-column). Prints one row per era and a summary (mean, std, "
            "Sharpe, worst era, max drawdown) per correlation and target."
        ),
    )
    evaluate.add_argument("data", help="data with era and target columns (.parquet or .csv)")
    source = evaluate.add_mutually_exclusive_group(required=True)
    source.add_argument("--model", default=None, help="a saved model to predict DATA with")
    source.add_argument("--prediction-column", default=None, metavar="COLUMN",
                        help="a column of DATA holding the predictions")
    _add_column_arguments(evaluate, targets=False)
    evaluate.add_argument("--target", default=None, metavar="NAMES",
                          help="comma-separated target columns or patterns, e.g. 'target*' "
                               f"(default: {DEFAULT_TARGET_COLUMN!r}, else the first target*)")
    evaluate.add_argument("--methods", default="pearson,spearman,numerai", metavar="NAMES",
                          help="comma-separated correlations among "
                               f"{', '.join(CORRELATION_CHOICES)} (default: all three)")
    evaluate.add_argument("--feature-neutral", action="store_true",
                          help="add the feature-neutral Numerai correlation (one least-squares "
                               "fit per era on the features: slow with many features)")
    evaluate.add_argument("--png", default=None, metavar="PATH",
                          help="save per-era bar charts with cumulative lines (needs matplotlib)")
    evaluate.add_argument("--csv", default=None, metavar="PATH",
                          help="save the per-era table as CSV")
    evaluate.add_argument("--summary-only", action="store_true",
                          help="print the summary without the per-era rows")
    evaluate.set_defaults(command_function=_run_evaluate)


def _add_demo_parser(commands):
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
    # Depth 4 and half the features per depth: a demo that finishes in well under a
    # minute on 2 cores and still beats the linear baseline (benchmarks/RESULTS.md).
    demo.add_argument("--max-depth", type=_positive_int, default=4, help="depth of each tree")
    demo.add_argument("--layer-feature-fraction", type=_positive_float, default=0.5,
                      help="fraction of the features drawn per depth (shared by a pack)")
    demo.add_argument("--learning-rate", type=_positive_float, default=0.1,
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
    demo.set_defaults(command_function=_run_demo)


# ----------------------------------------------------------------------------- train


def _run_train(args, parser) -> int:
    from packboost import PackBoostClassifier, PackBoostRegressor
    from packboost.callback import LogEvaluation

    estimator_class = PackBoostClassifier if args.classifier else PackBoostRegressor
    params = _load_config(args.config, estimator_class) if args.config else {}
    params.update({key[len("param_"):]: value for key, value in vars(args).items()
                   if key.startswith("param_") and value is not None})
    model = estimator_class(**params)

    columns = _TrainColumns.resolve(args, args.data)
    X, y, era, names = columns.load(args.data, args.classifier)
    print(f"train: {args.data}: {X.shape[0]} rows x {X.shape[1]} features, "
          f"{_count_eras(era)} eras, target {columns.target!r}")
    fit_kwargs = {"era": era}
    if args.valid is not None:
        X_valid, y_valid, era_valid, _ = columns.load(args.valid, args.classifier)
        print(f"valid: {args.valid}: {X_valid.shape[0]} rows, {_count_eras(era_valid)} eras")
        fit_kwargs["eval_set"] = [(_named(X_valid, names), y_valid, era_valid)]
        fit_kwargs["eval_names"] = ["valid"]
    elif args.early_stopping_rounds is not None:
        raise CommandError("--early-stopping-rounds needs --valid")
    if args.eval_metric is not None:
        fit_kwargs["eval_metric"] = _split_list(args.eval_metric)
    callbacks = [LogEvaluation(args.log_every)] if args.log_every else []
    shown = ", ".join(f"{name}={value!r}" for name, value in sorted(params.items()))
    print(f"fit:   {estimator_class.__name__}({shown})")
    started = time.perf_counter()
    model.fit(_named(X, names), y, early_stopping_rounds=args.early_stopping_rounds,
              callbacks=callbacks, init_model=args.init_model, progress=args.progress,
              **fit_kwargs)
    elapsed = time.perf_counter() - started
    grown = max((len(values) for metrics in model.evals_result_.values()
                 for values in metrics.values()), default=model.n_iter_)
    kept = "" if model.best_iteration_ is None else \
        f"; kept the best {model.n_iter_} (best_iteration {model.best_iteration_})"
    print(f"done:  {grown} rounds in {elapsed:.1f} s{kept}")
    model.save_model(args.output)
    print(f"saved: {args.output}")
    if args.valid is not None:
        from packboost.metrics import era_report

        prediction = _prediction_values(model, _named(X_valid, names))
        score_target = y_valid if not args.classifier else \
            (np.asarray(y_valid) == model.classes_[1]).astype(np.float64)
        report = era_report(score_target, prediction, era_valid)
        print()
        print(f"valid per-era correlation ({len(report.eras)} eras)")
        print(report.format_summary())
    return 0


class _TrainColumns:
    """Which columns of a file are the era, the target and the features."""

    def __init__(self, era, target, features):
        self.era, self.target, self.features = era, target, features

    @classmethod
    def resolve(cls, args, path):
        from packboost import _inputs

        available = _inputs.list_file_columns(path)
        era = _era_column(args.era, available)
        target = _target_columns(args.target, available)[0]
        features = _feature_columns(args, available, exclude={era, target},
                                    model_features=None)
        return cls(era, target, features)

    def load(self, path, classifier):
        from packboost import _inputs

        wanted = [self.target] + ([self.era] if self.era else []) + self.features
        data = _inputs.read_columns(path, wanted)
        y = data[self.target]
        keep = None
        if y.dtype.kind == "f":
            keep = ~np.isnan(y)
        elif y.dtype == object:
            keep = np.array([value is not None for value in y])
        if keep is not None and not keep.all():
            print(f"note:  {path}: {int((~keep).sum())} rows without a {self.target!r} "
                  "value are skipped")
        else:
            keep = None
        X = _feature_matrix(data, self.features)
        era = data[self.era] if self.era else None
        if keep is not None:
            X, y = X[keep], y[keep]
            era = era[keep] if era is not None else None
        if not classifier and y.dtype.kind not in "biuf":
            raise CommandError(f"target {self.target!r} is not numeric (dtype {y.dtype}); "
                               "use --classifier for labels")
        return X, y, era, self.features


def _load_config(path, estimator_class) -> dict:
    try:
        import tomllib
    except ImportError:  # Python 3.10
        from packboost._compat import import_optional
        tomllib = import_optional("tomli", "reading a TOML --config on Python 3.10")
    with open(path, "rb") as handle:
        try:
            content = tomllib.load(handle)
        except tomllib.TOMLDecodeError as error:
            raise CommandError(f"{path}: not valid TOML: {error}") from None
    if isinstance(content.get("params"), dict):
        content = content["params"]
    valid = set(estimator_class().get_params())
    params = {}
    for key, value in content.items():
        name = key.replace("-", "_")
        if name not in valid:
            raise CommandError(f"{path}: unknown parameter {key!r}; the parameters are "
                               f"{sorted(valid)}")
        params[name] = value
    return params


# ----------------------------------------------------------------------------- predict


def _run_predict(args, parser) -> int:
    from packboost import _inputs, load_model

    model = load_model(args.model)
    available = _inputs.list_file_columns(args.data)
    features = _model_feature_columns(model, args.features, available)
    id_column = args.id_column
    if id_column is None and DEFAULT_ID_COLUMN in available:
        id_column = DEFAULT_ID_COLUMN
    elif id_column is not None and id_column not in available:
        raise CommandError(f"{args.data}: no id column {id_column!r}")
    wanted = features + ([id_column] if id_column and id_column not in features else [])
    data = _inputs.read_columns(args.data, wanted)
    X = _feature_matrix(data, features)
    started = time.perf_counter()
    prediction = _prediction_values(model, _named(X, features))
    output = {}
    if id_column:
        output[id_column] = data[id_column]
    output[args.prediction_column] = prediction
    _inputs.write_columns(args.output, output)
    print(f"predict: {X.shape[0]} rows in {time.perf_counter() - started:.1f} s -> "
          f"{args.output}")
    return 0


def _prediction_values(model, X) -> np.ndarray:
    """Regressor: predictions; classifier: probability of ``classes_[1]``."""
    if hasattr(model, "predict_proba"):
        return model.predict_proba(X)[:, 1]
    return np.asarray(model.predict(X), dtype=np.float64)


# ----------------------------------------------------------------------------- evaluate


def _run_evaluate(args, parser) -> int:
    from packboost import _inputs, load_model
    from packboost.metrics import era_report

    methods = _split_list(args.methods)
    for method in methods:
        if method not in CORRELATION_CHOICES:
            parser.error(f"--methods: {method!r} is not one of {', '.join(CORRELATION_CHOICES)}")
    available = _inputs.list_file_columns(args.data)
    era_column = _era_column(args.era, available)
    targets = _target_columns(args.target, available)
    model = load_model(args.model) if args.model else None
    if model is not None:
        features = _model_feature_columns(model, args.features, available)
    else:
        if args.prediction_column not in available:
            raise CommandError(f"{args.data}: no prediction column {args.prediction_column!r}")
        features = (_feature_columns(args, available,
                                     exclude={era_column, *targets, args.prediction_column},
                                     model_features=None)
                    if args.feature_neutral else [])
    wanted = list(dict.fromkeys(targets + ([era_column] if era_column else []) + features
                                + ([args.prediction_column] if model is None else [])))
    data = _inputs.read_columns(args.data, wanted)
    X = _feature_matrix(data, features) if features else None
    if model is not None:
        prediction = _prediction_values(model, _named(X, features))
        source = f"model {args.model}"
    else:
        prediction = np.asarray(data[args.prediction_column], dtype=np.float64)
        source = f"column {args.prediction_column!r}"
    era = data[era_column] if era_column else None

    reports = {}
    for target in targets:
        y = np.asarray(data[target], dtype=np.float64)
        keep = ~np.isnan(y)
        if not keep.all():
            print(f"note: {int((~keep).sum())} rows without a {target!r} value are skipped")
        report = era_report(
            y[keep], prediction[keep], era[keep] if era is not None else None,
            methods=methods,
            features=X[keep] if args.feature_neutral and X is not None else None)
        reports[target] = report
        print(f"{source} on {args.data}, target {target!r}: {int(keep.sum())} rows, "
              f"{len(report.eras)} eras")
        if not args.summary_only:
            print(report.format_table())
            print()
        print(report.format_summary())
        print()

    if args.csv is not None:
        columns = {}
        for target, report in reports.items():
            table = report.to_dict()
            columns.setdefault("era", table.pop("era"))
            columns.setdefault("n_rows", table.pop("n_rows"))
            prefix = "" if len(reports) == 1 else f"{target}_"
            columns.update({f"{prefix}{name}": values for name, values in table.items()
                            if name not in ("era", "n_rows")})
        if len({len(values) for values in columns.values()}) > 1:
            raise CommandError("targets cover different eras; write one --csv per target")
        _inputs.write_columns(args.csv, columns)
        print(f"wrote {args.csv}")
    if args.png is not None:
        _save_report_png(reports, args.png)
        print(f"wrote {args.png}")
    return 0


def _save_report_png(reports, path):
    from packboost.metrics import EraReport
    from packboost.plotting import plot_era_report

    if len(reports) == 1:
        report = next(iter(reports.values()))
    else:
        first = next(iter(reports.values()))
        report = EraReport(eras=first.eras, n_rows=first.n_rows, scores={
            f"{target} {name}": values for target, item in reports.items()
            for name, values in item.scores.items() if len(item.eras) == len(first.eras)})
    plot_era_report(report, path=path)


# ----------------------------------------------------------------------------- columns


def _split_list(text: str) -> list:
    return [item.strip() for item in text.split(",") if item.strip()]


def _era_column(requested, available):
    if requested is None:
        return DEFAULT_ERA_COLUMN if DEFAULT_ERA_COLUMN in available else None
    if requested.lower() == "none":
        return None
    if requested not in available:
        raise CommandError(f"no era column {requested!r}; the columns start with "
                           f"{available[:8]}")
    return requested


def _target_columns(requested, available) -> list:
    from packboost import _inputs

    if requested is None:
        if DEFAULT_TARGET_COLUMN in available:
            return [DEFAULT_TARGET_COLUMN]
        candidates = [name for name in available if name.startswith("target")]
        if not candidates:
            raise CommandError("no target column: name one with --target")
        return candidates[:1]
    return _inputs.select_columns(available, _split_list(requested))


def _feature_columns(args, available, *, exclude, model_features) -> list:
    from packboost import _inputs

    if getattr(args, "features_file", None):
        names = _read_feature_file(args.features_file, args.feature_set)
        missing = [name for name in names if name not in available]
        if missing:
            raise CommandError(f"{len(missing)} features of {args.features_file} are not "
                               f"columns of the data, e.g. {missing[:3]}")
        return names
    if args.features is not None:
        return _inputs.select_columns(available, _split_list(args.features))
    if model_features is not None:
        return model_features
    excluded = {name for name in exclude if name} | {DEFAULT_ID_COLUMN}
    pattern = [name for name in available if name.startswith(DEFAULT_FEATURE_PATTERN[:-1])
               and name not in excluded]
    if pattern:
        return pattern
    others = [name for name in available if name not in excluded
              and not name.startswith("target") and name != DEFAULT_PREDICTION_COLUMN]
    if not others:
        raise CommandError("no feature columns: name them with --features")
    return others


def _model_feature_columns(model, requested, available) -> list:
    from packboost import _inputs

    if requested is not None:
        features = _inputs.select_columns(available, _split_list(requested))
    else:
        names = getattr(model, "feature_names_in_", None)
        if names is None:
            raise CommandError("the model was saved without feature names: name the feature "
                               "columns with --features")
        features = [str(name) for name in names]
    missing = [name for name in features if name not in available]
    if missing:
        raise CommandError(f"the data lacks {len(missing)} of the model's features, e.g. "
                           f"{missing[:3]}")
    if len(features) != model.n_features_in_:
        raise CommandError(f"{len(features)} feature columns selected, the model expects "
                           f"{model.n_features_in_}")
    return features


def _read_feature_file(path, feature_set):
    import json

    with open(path) as handle:
        text = handle.read()
    if path.lower().endswith(".json"):
        content = json.loads(text)
        if isinstance(content, dict):
            sets = content.get("feature_sets", content)
            if feature_set is None:
                raise CommandError(f"{path} holds feature sets {sorted(sets)[:8]}: choose one "
                                   "with --feature-set")
            if feature_set not in sets:
                raise CommandError(f"{path} has no feature set {feature_set!r}; it has "
                                   f"{sorted(sets)[:8]}")
            content = sets[feature_set]
        if not isinstance(content, list) or not all(isinstance(n, str) for n in content):
            raise CommandError(f"{path}: expected a list of feature names")
        return content
    return [line.strip() for line in text.splitlines() if line.strip()]


def _feature_matrix(data, features) -> np.ndarray:
    from packboost import _inputs

    return _inputs.columns_to_matrix([data[name] for name in features], features,
                                     argument="the feature columns")


def _named(X, names):
    """``X`` with its column names, so that the model keeps and checks them."""
    from packboost._inputs import NamedMatrix

    return NamedMatrix(X, names)


def _count_eras(era) -> int:
    return 1 if era is None else int(np.unique(era).size)


# ----------------------------------------------------------------------------- demo


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
    if args.export is not None:
        _export_demo_data(args.export, args.export_format, train, test)

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
    if args.output is not None:
        model.save_model(args.output)
        print(f"saved: {args.output}")
    if args.png is not None:
        from packboost.plotting import plot_era_correlation

        plot_era_correlation(test.y, predictions["PackBoost"], test.era, path=args.png,
                             title="PackBoost, held-out eras: Pearson correlation per era")
        print(f"wrote {args.png}")
    return 0


def _export_demo_data(directory, file_format, train, test):
    """Write the demo's eras as Numerai lays its files out: id, era, feature_*, target."""
    from packboost import _inputs

    os.makedirs(directory, exist_ok=True)
    parts = {"train": (train, True), "validation": (test, True), "live": (test, False)}
    offsets = {"train": 0, "validation": train.n_rows, "live": train.n_rows}
    for name, (part, with_target) in parts.items():
        first = offsets[name]
        columns = {"id": np.array([f"n{row:07d}" for row in range(first, first + part.n_rows)]),
                   "era": np.array([f"{era + 1:04d}" for era in part.era])}
        columns.update({f"feature_{index:03d}": part.X[:, index].astype(np.int8)
                        for index in range(part.n_features)})
        if with_target:
            columns["target"] = part.y
        path = os.path.join(directory, f"{name}.{file_format}")
        _inputs.write_columns(path, columns)
        print(f"wrote: {path} ({part.n_rows} rows)")


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

