"""Which columns of a file the commands use: era, target(s), features.

Defaults follow Numerai's layout (``id``, ``era``, ``target``,
``feature_*``); ``--era``, ``--target`` and ``--features`` (names or shell
patterns), or ``--features-file`` (a JSON list, a Numerai ``features.json``
with ``--feature-set``, or one name per line) choose others.
"""

from __future__ import annotations

import os

import numpy as np

from packboost._files import duplicated_names
from packboost.cli._common import CommandError

# Columns never taken as features by default.
DEFAULT_ID_COLUMN = "id"
DEFAULT_ERA_COLUMN = "era"
DEFAULT_TARGET_COLUMN = "target"
DEFAULT_FEATURE_PATTERN = "feature*"
DEFAULT_PREDICTION_COLUMN = "prediction"


def add_column_arguments(command, *, targets: bool):
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


def split_list(text: str, option: str, what: str) -> list:
    """The comma-separated items of ``option``'s value; none (``","``, ``""``)
    is an error, never an empty selection."""
    items = [item.strip() for item in text.split(",") if item.strip()]
    if not items:
        raise CommandError(f"{option} {text!r} selects no {what}: give one or more "
                           f"comma-separated {what}s")
    return items


def choose_era_column(requested, available):
    if requested is None:
        return DEFAULT_ERA_COLUMN if DEFAULT_ERA_COLUMN in available else None
    if requested.lower() == "none":
        return None
    if requested not in available:
        raise CommandError(f"no era column {requested!r}; the columns start with "
                           f"{available[:8]}")
    return requested


def choose_target_columns(requested, available) -> list:
    from packboost import _files

    if requested is None:
        if DEFAULT_TARGET_COLUMN in available:
            return [DEFAULT_TARGET_COLUMN]
        candidates = [name for name in available if name.startswith("target")]
        if not candidates:
            raise CommandError("no target column: name one with --target")
        return candidates[:1]
    return _files.select_columns(available, split_list(requested, "--target",
                                                       "target column"))


def choose_feature_columns(args, available, *, exclude, model_features) -> list:
    from packboost import _files

    if getattr(args, "features_file", None):
        names = read_feature_file(args.features_file, args.feature_set)
        missing = [name for name in names if name not in available]
        if missing:
            raise CommandError(f"{len(missing)} features of {args.features_file} are not "
                               f"columns of the data, e.g. {missing[:3]}")
        return names
    if args.features is not None:
        return _files.select_columns(available, split_list(args.features, "--features",
                                                           "feature"))
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


def choose_model_feature_columns(model, requested, available) -> list:
    from packboost import _files

    if requested is not None:
        features = _files.select_columns(available, split_list(requested, "--features",
                                                               "feature"))
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


def read_text_file(path, option) -> str:
    """A small UTF-8 text file given with ``option`` (a byte-order mark is allowed)."""
    if not os.path.exists(path):
        raise CommandError(f"{option} {path}: no such file")
    if os.path.isdir(path):
        raise CommandError(f"{option} {path}: is a directory, not a file")
    with open(path, "rb") as handle:
        raw = handle.read()
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise CommandError(
            f"{option} {path}: not UTF-8 text (byte 0x{raw[error.start]:02x} at offset "
            f"{error.start}); save it as UTF-8") from None


def read_feature_file(path, feature_set) -> list:
    """Feature names of a ``--features-file``: a JSON list, a JSON dict of
    feature sets (a Numerai ``features.json``, ``{"feature_sets": {...}}``,
    chosen with ``--feature-set``), or a text file of one name per line.
    Anything else is a :class:`CommandError` naming the file."""
    import json

    text = read_text_file(path, "--features-file")
    where = f"--features-file {path}"
    if not path.lower().endswith(".json"):
        if "\x00" in text:
            raise CommandError(f"{where}: not a text file of feature names")
        names = [line.strip() for line in text.splitlines() if line.strip()]
        return _check_feature_names(names, where)
    try:
        content = json.loads(text)
    except json.JSONDecodeError as error:
        raise CommandError(f"{where}: not valid JSON: {error.msg} at line {error.lineno} "
                           f"column {error.colno}") from None
    except RecursionError:
        raise CommandError(f"{where}: JSON nested too deeply") from None
    if isinstance(content, dict):
        sets = content.get("feature_sets", content)
        if not isinstance(sets, dict) or not sets:
            raise CommandError(f"{where}: expected a dict of feature sets (name: list of "
                               f"feature names), got {_kind(sets)}")
        names = sorted(str(name) for name in sets)
        if feature_set is None:
            raise CommandError(f"{where} holds feature sets {names[:8]}: choose one with "
                               "--feature-set")
        if feature_set not in sets:
            raise CommandError(f"{where} has no feature set {feature_set!r}; it has "
                               f"{names[:8]}")
        content = sets[feature_set]
        where = f"{where}, feature set {feature_set!r},"
    elif feature_set is not None:
        raise CommandError(f"{where} holds {_kind(content)}, not feature sets: drop "
                           "--feature-set")
    if not isinstance(content, list):
        raise CommandError(f"{where}: expected a list of feature names, got {_kind(content)}")
    bad = [name for name in content if not isinstance(name, str)]
    if bad:
        raise CommandError(f"{where}: expected a list of feature names (strings), found "
                           f"{_kind(bad[0])} {str(bad[0])[:40]}")
    return _check_feature_names(content, where)


def _kind(value) -> str:
    return {dict: "a dict", list: "a list", str: "a string", bool: "a boolean",
            int: "a number", float: "a number", type(None): "null"}.get(
        type(value), type(value).__name__)


def _check_feature_names(names, where) -> list:
    if not names:
        raise CommandError(f"{where}: no feature names")
    empty = [name for name in names if not name.strip()]
    if empty:
        raise CommandError(f"{where}: empty feature name")
    duplicated = duplicated_names(names)
    if duplicated:
        raise CommandError(f"{where}: duplicated feature names {duplicated[:5]}")
    return names


def feature_matrix(data, features, categorical=()):
    """The feature columns as the estimators take them: one numeric matrix;
    or, when some are ``categorical`` (names), a table (pyarrow, pandas or
    polars, whichever is installed) in which those keep their labels."""
    from packboost import _inputs

    if not categorical:
        return _inputs.columns_to_matrix([data[name] for name in features], features,
                                         argument="the feature columns")
    return _table({name: _labels(data[name]) if name in categorical else data[name]
                   for name in features})


def _labels(values):
    """A categorical column's labels; an empty text field (CSV) is missing."""
    if values.dtype != object:
        return values
    return np.array([None if value == "" else value for value in values.tolist()],
                    dtype=object)


def _table(columns: dict):
    try:
        import pyarrow as pa
    except ImportError:
        pa = None
    if pa is not None:
        return pa.table({name: pa.array(values, from_pandas=True)
                         for name, values in columns.items()})
    try:
        import pandas as pd
    except ImportError:
        pd = None
    if pd is not None:
        return pd.DataFrame(columns)
    from packboost._compat import import_optional

    polars = import_optional("polars", "categorical feature columns")
    return polars.DataFrame({name: polars.Series(name, values)
                             for name, values in columns.items()})


def categorical_names(model, features) -> list:
    """The names of a fitted model's categorical features (none: [])."""
    encoder = getattr(model, "category_encoder_", None)
    if encoder is None:
        return []
    return [features[k] for k in encoder.features.tolist()]


def with_declared_categories(params: dict, path, features) -> list:
    """``params`` with the feature columns that ``path`` declares categorical
    (parquet dictionary columns: pandas ``category``, polars ``Categorical``)
    added to ``categorical_features``; returns the categorical names."""
    from packboost import _files

    listed = params.get("categorical_features") or []
    names = [features[entry] if isinstance(entry, int) and entry < len(features) else entry
             for entry in listed]
    declared = [name for name in _files.dictionary_columns(path)
                if name in features and name not in names]
    if declared:
        by_index = bool(listed) and all(isinstance(entry, int) for entry in listed)
        params["categorical_features"] = list(listed) + [
            features.index(name) if by_index else name for name in declared]
        print(f"note:  {path}: categorical by type: {', '.join(map(repr, declared))}")
    return [name for name in names if isinstance(name, str)] + declared


def named(X, names):
    """``X`` with its column names, so that the model keeps and checks them
    (a table has its own)."""
    from packboost._inputs import NamedMatrix

    if not isinstance(X, np.ndarray):
        return X
    return NamedMatrix(X, names)


def count_eras(era) -> int:
    return 1 if era is None else int(np.unique(era).size)
