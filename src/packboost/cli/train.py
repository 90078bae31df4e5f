"""``packboost train DATA``: fit an estimator on a file and save it.

Parameters come from a TOML ``--config`` and from one flag per estimator
parameter (built from the schema, :mod:`packboost._parameters`); an
optional ``--valid`` file is scored every round and enables early stopping.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from packboost import _parameters
from packboost.cli._common import CommandError, check_paths, positive_int
from packboost.cli.columns import (
    add_column_arguments,
    choose_era_column,
    choose_feature_columns,
    choose_target_columns,
    count_eras,
    feature_matrix,
    named,
    split_list,
    with_declared_categories,
)
from packboost.cli.predict import prediction_values


def add_parser(commands):
    train = commands.add_parser(
        "train", help="fit a model on a parquet or CSV file and save it",
        description=(
            "Fit PackBoostRegressor (or, with --classifier, PackBoostClassifier) on DATA and "
            "save the model. Parameters come from --config (a TOML file of name = value "
            "pairs, at the top level or under [params]) and from the flags below, which "
            "win. Rows with a missing target are skipped. A --target naming several columns "
            "(e.g. 'target_*') trains one model of several targets, each on the rows where "
            "it is known."
        ),
    )
    train.add_argument("data", help="training data (.parquet or .csv)")
    train.add_argument("-o", "--output", default="model.pbm",
                       help="where to save the model (default: model.pbm)")
    train.add_argument("--valid", default=None, metavar="PATH",
                       help="validation data with the same columns: scored every round")
    add_column_arguments(train, targets=True)
    train.add_argument("--classifier", action="store_true",
                       help="binary classification (the target holds two labels)")
    train.add_argument("--config", default=None, metavar="TOML",
                       help="TOML file of estimator parameters")
    train.add_argument("--early-stopping-rounds", type=positive_int, default=None, metavar="N",
                       help="stop when the first --eval-metric on --valid has not improved "
                            "for N rounds; keep the best rounds")
    train.add_argument("--eval-metric", default=None, metavar="NAMES",
                       help="comma-separated metrics recorded on --valid, e.g. "
                            "numerai_sharpe,rmse (default: pearson_mean,pearson_sharpe,rmse)")
    train.add_argument("--log-every", type=positive_int, default=None, metavar="N",
                       help="print the --valid metrics every N rounds")
    train.add_argument("--init-model", default=None, metavar="PATH",
                       help="continue training this saved model (n_estimators more rounds)")
    train.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                       help="progress bar on stderr (default: only in a terminal)")
    params = train.add_argument_group(
        "estimator parameters (see help(packboost.PackBoostRegressor))")
    _parameters.add_cli_flags(params)
    train.set_defaults(command_function=run, command_parser=train)


def run(args, parser) -> int:
    from packboost import PackBoostClassifier, PackBoostRegressor, backends
    from packboost.callback import LogEvaluation

    check_paths(parser, inputs=[("DATA", args.data), ("--valid", args.valid),
                                ("--config", args.config),
                                ("--features-file", args.features_file),
                                ("--init-model", args.init_model)],
                outputs=[("-o/--output", args.output)])
    estimator_class = PackBoostClassifier if args.classifier else PackBoostRegressor
    params = load_config(args.config, estimator_class) if args.config else {}
    params.update({key[len("param_"):]: value for key, value in vars(args).items()
                   if key.startswith("param_") and value is not None})
    columns = TrainColumns.resolve(args, args.data)
    # Categorical: the features named by --categorical-features and those the
    # file declares (parquet dictionary columns), read as their labels.
    columns.categorical = with_declared_categories(params, args.data, columns.features)
    model = estimator_class(**params)
    # Before reading any data: out-of-range parameters, and a device that cannot
    # run here (CudaError), fail now rather than after loading the files.
    backends.check_device(model._validated_params()["device"])

    X, y, era, names = columns.load(args.data, args.classifier)
    if args.classifier and len(np.unique(y)) > 2:
        # The command writes and scores one number per row (the probability of
        # classes_[1]), which a multiclass model does not have.
        raise CommandError(
            f"target {columns.target!r} has {len(np.unique(y))} labels: --classifier trains "
            "two classes; fit PackBoostClassifier in Python for more (softmax)")
    print(f"train: {args.data}: {X.shape[0]} rows x {X.shape[1]} features, "
          f"{count_eras(era)} eras, {columns.describe_targets()}")
    fit_kwargs = {"era": era}
    if args.valid is not None:
        X_valid, y_valid, era_valid, _ = columns.load(args.valid, args.classifier)
        print(f"valid: {args.valid}: {X_valid.shape[0]} rows, {count_eras(era_valid)} eras")
        fit_kwargs["eval_set"] = [(named(X_valid, names), y_valid, era_valid)]
        fit_kwargs["eval_names"] = ["valid"]
    elif args.early_stopping_rounds is not None:
        raise CommandError("--early-stopping-rounds needs --valid")
    if args.eval_metric is not None:
        fit_kwargs["eval_metric"] = split_list(args.eval_metric, "--eval-metric", "metric")
    callbacks = [LogEvaluation(args.log_every)] if args.log_every else []
    shown = ", ".join(f"{name}={value!r}" for name, value in sorted(params.items()))
    print(f"fit:   {estimator_class.__name__}({shown})")
    started = time.perf_counter()
    # Several targets are fitted by name: the model file keeps them (target_names_),
    # so that predict and evaluate name and match each output.
    model.fit(named(X, names), named(y, columns.targets) if y.ndim == 2 else y,
              early_stopping_rounds=args.early_stopping_rounds,
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
        from packboost.reports import era_report

        if len(columns.targets) > 1:
            predictions = np.asarray(model.predict(named(X_valid, names)))
            for index, target in enumerate(columns.targets):
                known = ~np.isnan(y_valid[:, index])
                report = era_report(y_valid[known, index], predictions[known, index],
                                    None if era_valid is None else np.asarray(era_valid)[known])
                print()
                print(f"valid per-era correlation, target {target!r} ({len(report.eras)} eras)")
                print(report.format_summary())
            return 0
        prediction = prediction_values(model, named(X_valid, names))
        score_target = y_valid if not args.classifier else \
            (np.asarray(y_valid) == model.classes_[1]).astype(np.float64)
        report = era_report(score_target, prediction, era_valid)
        print()
        print(f"valid per-era correlation ({len(report.eras)} eras)")
        print(report.format_summary())
    return 0


class TrainColumns:
    """Which columns of a file are the era, the target(s) and the features."""

    def __init__(self, era, targets, features):
        self.era, self.targets, self.features = era, list(targets), features
        self.target = self.targets[0]
        # Feature columns read as labels (categorical features), by name.
        self.categorical = []

    def describe_targets(self) -> str:
        if len(self.targets) == 1:
            return f"target {self.target!r}"
        shown = ", ".join(repr(name) for name in self.targets[:6])
        more = f", ... {len(self.targets) - 6} more" if len(self.targets) > 6 else ""
        return f"{len(self.targets)} targets ({shown}{more})"

    @classmethod
    def resolve(cls, args, path):
        from packboost import _files

        available = _files.list_file_columns(path)
        era = choose_era_column(args.era, available)
        targets = choose_target_columns(args.target, available)
        if len(targets) > 1 and args.classifier:
            raise CommandError(
                f"--target {args.target!r} names {len(targets)} columns ({targets[:5]}); "
                "--classifier trains one target: name one column")
        if era in targets:
            raise CommandError(f"the era column {era!r} cannot also be the target")
        features = choose_feature_columns(args, available, exclude={era, *targets},
                                          model_features=None)
        for role, name in [*(("target", target) for target in targets), ("era", era)]:
            if name in features:
                raise CommandError(f"the {role} column {name!r} is also among the features: "
                                   "a model would learn it; leave it out of the features")
        return cls(era, targets, features)

    def load(self, path, classifier):
        if len(self.targets) > 1:
            return self._load_targets(path)
        from packboost import _files

        wanted = [self.target] + ([self.era] if self.era else []) + self.features
        data = _files.read_columns(path, wanted)
        y = data[self.target]
        keep = None
        if y.dtype.kind == "f":
            keep = ~np.isnan(y)
        elif y.dtype == object:
            keep = np.array([not _is_missing(value) for value in y], dtype=bool)
        if keep is not None and y.size and not keep.any():
            raise CommandError(f"{path}: target column {self.target!r} is entirely missing "
                               f"(none of its {y.size} rows has a value)")
        if keep is not None and not keep.all():
            print(f"note:  {path}: {int((~keep).sum())} rows without a {self.target!r} "
                  "value are skipped")
        else:
            keep = None
        if keep is not None:
            data = {name: values[keep] for name, values in data.items()}
            y = data[self.target]
        X = feature_matrix(data, self.features, self.categorical)
        era = data[self.era] if self.era else None
        if not classifier and y.dtype.kind not in "biuf":
            raise CommandError(f"target {self.target!r} is not numeric (dtype {y.dtype}); "
                               "use --classifier for labels")
        return X, y, era, self.features


    def _load_targets(self, path):
        """Several targets as (n_rows, n_targets) float64, NaN where unknown:
        each is fitted on its known rows; rows with none are skipped."""
        from packboost import _files
        from packboost.cli.evaluate import numeric_column

        wanted = self.targets + ([self.era] if self.era else []) + self.features
        data = _files.read_columns(path, wanted)
        y = np.column_stack([numeric_column(data, name, path, "target")
                             for name in self.targets])
        for index, name in enumerate(self.targets):
            unknown = int(np.isnan(y[:, index]).sum())
            if y.size and unknown == len(y):
                raise CommandError(f"{path}: target column {name!r} is entirely missing "
                                   f"(none of its {len(y)} rows has a value)")
            if unknown:
                print(f"note:  {path}: target {name!r} is missing in {unknown} rows: "
                      "its trees and scores leave them out")
        keep = ~np.isnan(y).all(axis=1)
        if not keep.all():
            print(f"note:  {path}: {int((~keep).sum())} rows without any target value "
                  "are skipped")
            data = {name: values[keep] for name, values in data.items()}
            y = y[keep]
        X = feature_matrix(data, self.features, self.categorical)
        era = data[self.era] if self.era else None
        return X, y, era, self.features


def _is_missing(value) -> bool:
    return value is None or (isinstance(value, float) and value != value)


def load_config(path, estimator_class) -> dict:
    from packboost.cli.columns import read_text_file

    try:
        import tomllib
    except ImportError:  # Python 3.10
        from packboost._compat import import_optional
        tomllib = import_optional("tomli", "reading a TOML --config on Python 3.10")
    text = read_text_file(path, "--config")
    try:
        content = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise CommandError(f"--config {path}: not valid TOML: {error}") from None
    except RecursionError:
        raise CommandError(f"--config {path}: TOML nested too deeply") from None
    # Parameters are read from the top level and from [params], both: a key
    # the command would not use is refused, never skipped.
    sections = [("the top level", {key: value for key, value in content.items()
                                   if key != "params"})]
    if "params" in content:
        if not isinstance(content["params"], dict):
            raise CommandError(f"--config {path}: [params] must be a table of parameters")
        sections.append(("[params]", content["params"]))
    valid = set(estimator_class().get_params())
    params = {}
    for section, table in sections:
        for key, value in table.items():
            name = key.replace("-", "_")
            if name not in valid:
                if section == "the top level" and isinstance(value, dict):
                    raise CommandError(
                        f"--config {path}: unknown table [{key}]; parameters go at the top "
                        f"level or under [params], and the parameters are {sorted(valid)}")
                raise CommandError(f"--config {path}: unknown parameter {key!r} (in {section}); "
                                   f"the parameters are {sorted(valid)}")
            if name in params:
                raise CommandError(f"--config {path}: parameter {name!r} is given twice")
            params[name] = value
    return params
