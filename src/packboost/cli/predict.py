"""``packboost predict MODEL DATA``: a saved model's predictions for a file."""

from __future__ import annotations

import time

import numpy as np

from packboost.cli._common import CommandError, check_paths, check_table_output
from packboost.cli.columns import (
    DEFAULT_ID_COLUMN,
    DEFAULT_PREDICTION_COLUMN,
    categorical_names,
    choose_model_feature_columns,
    feature_matrix,
    named,
)


def add_parser(commands):
    predict = commands.add_parser(
        "predict", help="predict a parquet or CSV file with a saved model",
        description=(
            "Predict DATA with MODEL and write the predictions (with the id column when "
            "DATA has one) to OUTPUT, as CSV or parquet by its extension. A classifier "
            "writes the probability of its second class. A model of several targets writes "
            "one column per target, PREDICTION_<target> (or only --target's output, in "
            "--prediction-column); a classifier of several classes, one probability per "
            "class, PREDICTION_<class>."
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
    predict.add_argument("--target", default=None, metavar="NAME",
                         help="for a model of several targets: write only this target's "
                              "output, in --prediction-column (a target's name; for a "
                              "model saved without target names, its index: 0, 1, ...)")
    group = predict.add_argument_group("columns")
    group.add_argument("--features", default=None, metavar="NAMES",
                       help="feature columns, for a model saved without feature names")
    predict.set_defaults(command_function=run, command_parser=predict)


def run(args, parser) -> int:
    from packboost import _files, load_model

    check_paths(parser, inputs=[("MODEL", args.model), ("DATA", args.data)],
                outputs=[("-o/--output", args.output)])
    check_table_output(parser, "-o/--output", args.output)
    if not args.prediction_column.strip():
        parser.error("--prediction-column: empty name")
    if args.id_column is not None and args.id_column == args.prediction_column:
        parser.error(f"--id-column and --prediction-column are both {args.id_column!r}: "
                     "the predictions would replace the ids; choose another "
                     "--prediction-column")
    model = load_model(args.model)
    outputs = output_names(model)
    if args.target is not None:
        if outputs is None or hasattr(model, "predict_proba"):
            parser.error(f"--target {args.target!r}: the model has one target; leave "
                         "--target out")
        target_index = _target_index(args.target, outputs)
    available = _files.list_file_columns(args.data)
    features = choose_model_feature_columns(model, args.features, available)
    id_column = args.id_column
    if id_column is None:
        if DEFAULT_ID_COLUMN in available:
            id_column = DEFAULT_ID_COLUMN
        else:
            print(f"note: {args.data} has no {DEFAULT_ID_COLUMN!r} column (name one with "
                  "--id-column): the predictions are written in row order, without ids")
    elif id_column not in available:
        raise CommandError(f"{args.data}: no id column {id_column!r}; the columns start "
                           f"with {available[:8]}")
    several = outputs is not None and args.target is None
    columns = ([f"{args.prediction_column}_{name}" for name in outputs] if several
               else [args.prediction_column])
    if len(set(columns)) != len(columns):
        raise CommandError(f"the model's outputs would write two columns of one name "
                           f"({columns[:6]}); write one with --target")
    if id_column is not None and id_column in columns:
        parser.error(f"the id column of {args.data} is named {id_column!r}, like a "
                     "prediction column: the predictions would replace the ids; name the "
                     "output column with --prediction-column")
    wanted = features + ([id_column] if id_column and id_column not in features else [])
    data = _files.read_columns(args.data, wanted)
    X = feature_matrix(data, features, categorical_names(model, features))
    started = time.perf_counter()
    output = {}
    if id_column:
        output[id_column] = data[id_column]
    if outputs is None:
        output[args.prediction_column] = prediction_values(model, named(X, features))
    else:
        predictions = output_values(model, named(X, features))
        if several:
            output.update(zip(columns, predictions.T, strict=True))
        else:
            output[args.prediction_column] = predictions[:, target_index]
    _files.write_columns(args.output, output)
    print(f"predict: {X.shape[0]} rows in {time.perf_counter() - started:.1f} s -> "
          f"{args.output}")
    return 0


def output_names(model) -> list | None:
    """A model of several outputs: a name per output (its targets' names, the
    classes of a multiclass classifier, else the output indices); None for
    one output."""
    n_outputs = int(getattr(model.ensemble_, "n_outputs", 1))
    if n_outputs == 1:
        return None
    if hasattr(model, "predict_proba"):
        return [str(label) for label in np.asarray(model.classes_).tolist()]
    names = getattr(model, "target_names_", None)
    return [str(j) for j in range(n_outputs)] if names is None else [str(n) for n in names]


def output_values(model, X) -> np.ndarray:
    """(n_rows, n_outputs): every target's prediction, or every class's probability."""
    if hasattr(model, "predict_proba"):
        return np.asarray(model.predict_proba(X), dtype=np.float64)
    return np.asarray(model.predict(X), dtype=np.float64)


def _target_index(requested: str, outputs: list) -> int:
    if requested in outputs:
        return outputs.index(requested)
    raise CommandError(f"--target {requested!r} is not one of the model's targets "
                       f"{outputs[:10]}")


def prediction_values(model, X) -> np.ndarray:
    """Regressor: predictions; classifier: probability of ``classes_[1]``."""
    if getattr(model.ensemble_, "n_outputs", 1) > 1:
        raise CommandError(
            f"the model has {model.ensemble_.n_outputs} outputs (targets or classes), and "
            "this command scores one prediction column; write them all with "
            "'packboost predict', or predict in Python (model.predict or predict_proba)")
    if hasattr(model, "predict_proba"):
        return model.predict_proba(X)[:, 1]
    return np.asarray(model.predict(X), dtype=np.float64)
