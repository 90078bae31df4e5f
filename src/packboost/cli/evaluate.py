"""``packboost evaluate DATA``: the per-era report of a model or a prediction column."""

from __future__ import annotations

import numpy as np

from packboost.cli._common import (
    CommandError,
    check_image_output,
    check_paths,
    check_table_output,
    save_figure,
)
from packboost.cli.columns import (
    DEFAULT_TARGET_COLUMN,
    add_column_arguments,
    categorical_names,
    choose_era_column,
    choose_feature_columns,
    choose_model_feature_columns,
    choose_target_columns,
    feature_matrix,
    named,
    split_list,
)
from packboost.cli.predict import prediction_values

CORRELATION_CHOICES = ("pearson", "spearman", "numerai")


def add_parser(commands):
    evaluate = commands.add_parser(
        "evaluate", help="per-era report of predictions against targets",
        description=(
            "Score predictions era by era: those of --model on DATA, or a column of DATA "
            "(--prediction-column). Prints one row per era and a summary (mean, std, "
            "Sharpe, worst era, max drawdown) per correlation and target, then, for "
            "several targets, one table of them all."
        ),
    )
    evaluate.add_argument("data", help="data with era and target columns (.parquet or .csv)")
    source = evaluate.add_mutually_exclusive_group(required=True)
    source.add_argument("--model", default=None, help="a saved model to predict DATA with")
    source.add_argument("--prediction-column", default=None, metavar="COLUMN",
                        help="a column of DATA holding the predictions")
    add_column_arguments(evaluate, targets=False)
    evaluate.add_argument("--target", default=None, metavar="NAMES",
                          help="comma-separated target columns or patterns, e.g. 'target*' "
                               f"(default: {DEFAULT_TARGET_COLUMN!r}, else the first target*); "
                               "for a --model of several targets, those it was trained on")
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
    evaluate.set_defaults(command_function=run, command_parser=evaluate)


def run(args, parser) -> int:
    from packboost import _files, load_model
    from packboost.reports import era_report, format_target_summaries

    check_paths(parser, inputs=[("DATA", args.data), ("--model", args.model),
                                ("--features-file", args.features_file)],
                outputs=[("--csv", args.csv), ("--png", args.png)])
    check_table_output(parser, "--csv", args.csv)
    check_image_output(parser, "--png", args.png)
    methods = split_list(args.methods, "--methods", "correlation method")
    for method in methods:
        if method not in CORRELATION_CHOICES:
            parser.error(f"--methods: {method!r} is not one of {', '.join(CORRELATION_CHOICES)}")
    available = _files.list_file_columns(args.data)
    era_column = choose_era_column(args.era, available)
    model = load_model(args.model) if args.model else None
    trained_on = _target_names(model)
    if args.target is None and trained_on is not None:
        # A model of named targets is scored on them by default.
        missing = [name for name in trained_on if name not in available]
        if missing:
            raise CommandError(f"{args.data}: no column of the model's targets {missing[:5]}; "
                               "name the targets to score with --target")
        targets = list(trained_on)
    else:
        targets = choose_target_columns(args.target, available)
    if model is not None:
        features = choose_model_feature_columns(model, args.features, available)
    else:
        if args.prediction_column not in available:
            raise CommandError(f"{args.data}: no prediction column {args.prediction_column!r}")
        features = (choose_feature_columns(args, available,
                                           exclude={era_column, *targets,
                                                    args.prediction_column},
                                           model_features=None)
                    if args.feature_neutral else [])
    wanted = list(dict.fromkeys(targets + ([era_column] if era_column else []) + features
                                + ([args.prediction_column] if model is None else [])))
    data = _files.read_columns(args.data, wanted)
    categorical = categorical_names(model, features)
    X = feature_matrix(data, features, categorical) if features else None
    # Neutralized against the numeric features (a category's codes measure nothing).
    numeric = [name for name in features if name not in categorical]
    neutral = feature_matrix(data, numeric) if args.feature_neutral and numeric else None
    prediction_of = {}
    if model is not None and _target_outputs(model) > 1:
        # A model of several targets ('packboost train --target' of several
        # columns): each output is scored on its target, found by name (the
        # model file's target names), else output j on the j-th target.
        if trained_on is not None:
            unknown = [name for name in targets if name not in trained_on]
            if unknown:
                raise CommandError(f"the model was trained on the targets {trained_on[:10]}; "
                                   f"--target names others: {unknown[:5]}")
            output_of = {target: trained_on.index(target) for target in targets}
        elif len(targets) != _target_outputs(model):
            raise CommandError(
                f"the model has {_target_outputs(model)} targets: --target must name as many "
                f"columns, those it was trained on, got {len(targets)} ({targets[:5]})")
        else:
            output_of = {target: index for index, target in enumerate(targets)}
        predictions = np.asarray(model.predict(named(X, features)), dtype=np.float64)
        prediction_of = {target: predictions[:, output] for target, output in output_of.items()}
        prediction = None
        source = f"model {args.model}"
    elif model is not None:
        prediction = prediction_values(model, named(X, features))
        source = f"model {args.model}"
    else:
        prediction = numeric_column(data, args.prediction_column, args.data, "prediction")
        source = f"column {args.prediction_column!r}"
    era = data[era_column] if era_column else None

    reports = {}
    for target in targets:
        y = numeric_column(data, target, args.data, "target")
        keep = ~np.isnan(y)
        if not keep.any():
            raise CommandError(f"{args.data}: target column {target!r} is entirely missing "
                               f"(none of its {y.size} rows has a value)")
        if not keep.all():
            print(f"note: {int((~keep).sum())} rows without a {target!r} value are skipped")
        predicted = prediction_of.get(target, prediction)
        report = era_report(
            y[keep], predicted[keep], era[keep] if era is not None else None,
            methods=methods,
            features=neutral[keep] if neutral is not None else None)
        reports[target] = report
        output = (f" (output {output_of[target]})" if prediction_of else "")
        print(f"{source}{output} on {args.data}, target {target!r}: {int(keep.sum())} rows, "
              f"{len(report.eras)} eras")
        if not args.summary_only:
            print(report.format_table())
            print()
        print(report.format_summary())
        print()

    if len(reports) > 1:
        print(f"summary over {len(reports)} targets")
        print(format_target_summaries(reports))
        print()
    first = next(iter(reports.values()))
    if (args.csv is not None or args.png is not None) and any(
            not np.array_equal(report.eras, first.eras) for report in reports.values()):
        raise CommandError("the targets cover different eras (missing values): write "
                           "--csv and --png for one --target at a time")
    if args.csv is not None:
        columns = {"era": first.to_dict()["era"], "n_rows": first.n_rows.tolist()}
        for target, report in reports.items():
            table = report.to_dict()
            del table["era"]
            if np.array_equal(report.n_rows, first.n_rows):
                del table["n_rows"]
            prefix = "" if len(reports) == 1 else f"{target}_"
            for name, values in table.items():
                column = f"{prefix}{name}"
                if column in columns:
                    raise CommandError(f"--csv: two columns would be named {column!r} "
                                       "(targets whose names overlap); write one --csv "
                                       "per target")
                columns[column] = values
        _files.write_columns(args.csv, columns)
        print(f"wrote {args.csv}")
    if args.png is not None:
        save_figure(lambda path: save_report_png(reports, path), args.png)
        print(f"wrote {args.png}")
    return 0


def save_report_png(reports, path):
    from packboost.plotting import plot_era_report
    from packboost.reports import EraReport

    if len(reports) == 1:
        report = next(iter(reports.values()))
    else:
        first = next(iter(reports.values()))
        report = EraReport(eras=first.eras, n_rows=first.n_rows, scores={
            f"{target} {name}": values for target, item in reports.items()
            for name, values in item.scores.items()})
    plot_era_report(report, path=path)


def _target_names(model) -> list | None:
    """The names of a model's targets (model files of several named targets), else None."""
    names = None if model is None else getattr(model, "target_names_", None)
    return None if names is None else [str(name) for name in names]


def _target_outputs(model) -> int:
    """A regressor's number of targets (1 for a classifier: its classes are
    one column, or refused by prediction_values)."""
    if hasattr(model, "predict_proba"):
        return 1
    return int(getattr(model.ensemble_, "n_outputs", 1))


def numeric_column(data, name, path, role) -> np.ndarray:
    """Column ``name`` as float64 (missing values NaN), or a CommandError naming it."""
    values = np.asarray(data[name])
    if values.dtype.kind in "biuf":
        return values.astype(np.float64)
    if values.dtype == object:
        converted = np.full(values.shape, np.nan)
        for index, value in enumerate(values):
            if value is None:
                continue
            if isinstance(value, (bool, int, float, np.number)) and not isinstance(value, str):
                converted[index] = float(value)
            else:
                break
        else:
            return converted
    raise CommandError(f"{path}: {role} column {name!r} is not numeric (dtype {values.dtype})")
