"""Categorical features: which columns are categories, their categories, their codes.

A categorical feature reaches the kernels as codes ``0 .. K-1`` (the index of
the row's category in the feature's stored category list) and NaN (missing,
or a category the fit never saw), binned one bin per category
(:func:`fit_bins`), so a bin code is the category's code. Splits on it send
a set of categories left (docs/guide/categorical.md).

Which columns: those of a categorical type (pandas ``category``, polars
``Categorical``/``Enum``, Arrow dictionary) and those named by
``categorical_features=`` (integer codes, or any values such as strings).
Category lists are learned at fit (:func:`learn`), stored with the model
(:class:`CategoryEncoder`, JSON-safe labels) and applied to every later input
(:meth:`CategoryEncoder.transform`). Nothing here imports pandas, polars or
pyarrow unless the input is one of theirs.
"""

from __future__ import annotations

import numbers

import numpy as np

from packboost import _inputs

ARGUMENT = "categorical_features"
# Categories per feature: one bin each, the missing one included, in uint16
# codes (whatever max_bins, which bounds the numeric features' bins).
MAX_CATEGORIES = 65535


def check_categorical_features(value) -> None:
    """None, or a list of distinct feature indices (int >= 0) or names (str)."""
    if value is None:
        return
    if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
        raise TypeError(f"{ARGUMENT} must be a list of feature indices or names, or None; "
                        f"got {value!r:.80}")
    entries = list(value)
    for entry in entries:
        if isinstance(entry, (bool, np.bool_)) or not isinstance(entry, (numbers.Integral, str)):
            raise TypeError(f"{ARGUMENT} holds feature indices (int) or names (str); got "
                            f"{entry!r:.80}")
        if isinstance(entry, numbers.Integral) and entry < 0:
            raise ValueError(f"{ARGUMENT} holds feature indices >= 0; got {entry}")
    if len(set(entries)) != len(entries):
        raise ValueError(f"{ARGUMENT} names a feature twice: {entries!r:.200}")


def _label(value):
    """A category label as the model file stores it (a JSON scalar)."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, (str, bool, int, float)):
        return value
    raise TypeError(f"category {value!r:.80} of type {type(value).__name__} cannot be stored "
                    "in a model file; use str or numeric categories")


class CategoryEncoder:
    """The categorical features of a model and the categories of each.

    ``features``: (n_categorical,) int64 feature indices, ascending;
    ``categories``: per such feature, its labels in code order (code ``c`` is
    ``categories[i][c]``); ``n_features``: the width of ``X``.
    """

    def __init__(self, features, categories, n_features: int):
        self.features = np.asarray(features, dtype=np.int64)
        self.categories = [list(labels) for labels in categories]
        self.n_features = int(n_features)
        if len(self.categories) != len(self.features):
            raise ValueError("one category list per categorical feature")
        if len(self.features) and (np.any(np.diff(self.features) <= 0)
                                   or self.features[0] < 0
                                   or self.features[-1] >= self.n_features):
            raise ValueError(f"categorical features must be ascending indices below "
                             f"{self.n_features}")
        self._lookups = [_Lookup(labels) for labels in self.categories]

    def mask(self) -> np.ndarray:
        """(n_features,) bool: is feature k categorical?"""
        mask = np.zeros(self.n_features, dtype=bool)
        mask[self.features] = True
        return mask

    def n_categories(self) -> np.ndarray:
        return np.array([len(labels) for labels in self.categories], dtype=np.int64)

    # -- model files ------------------------------------------------------------

    def to_json(self) -> dict:
        return {"features": self.features.tolist(), "categories": self.categories,
                "n_features": self.n_features}

    @classmethod
    def from_json(cls, value) -> CategoryEncoder:
        """From a model file (checked: lists of JSON scalars, distinct labels)."""
        if not isinstance(value, dict) or set(value) != {"features", "categories", "n_features"}:
            raise ValueError("categorical features: expected an object with features, "
                             "categories and n_features")
        features, categories = value["features"], value["categories"]
        if (not isinstance(features, list) or not isinstance(categories, list)
                or not all(isinstance(k, int) and not isinstance(k, bool) for k in features)
                or not isinstance(value["n_features"], int)):
            raise ValueError("categorical features: features must be a list of ints")
        for labels in categories:
            if not isinstance(labels, list) or not all(
                    isinstance(label, (str, int, float)) for label in labels):
                raise ValueError("categorical features: each category list must be a list "
                                 "of strings or numbers")
            if len(set(labels)) != len(labels):
                raise ValueError("categorical features: a category is listed twice")
        return cls(features, categories, value["n_features"])

    # -- inputs -----------------------------------------------------------------

    def transform(self, X, *, argument: str = "X"):
        """``X`` with every categorical column replaced by its codes (float64,
        NaN for missing or unseen categories): a NamedMatrix for a table, an
        ndarray otherwise. The other columns must be numeric."""
        columns, names = _columns(X, argument)
        if len(columns) != self.n_features:
            raise ValueError(f"{argument} has {len(columns)} features, but the model "
                             f"expects {self.n_features}")
        position = {int(k): i for i, k in enumerate(self.features)}
        out = np.empty((len(columns[0]) if columns else 0, len(columns)), dtype=np.float64,
                       order="F")
        for k, column in enumerate(columns):
            if k in position:
                out[:, k] = self._lookups[position[k]].codes(column)
            else:
                out[:, k] = _numeric(column, names, k, argument)
        if names is not None:
            return _inputs.NamedMatrix(out, names)
        return out


class _Lookup:
    """Labels -> codes for one feature (NaN where unseen)."""

    def __init__(self, labels):
        self.labels = labels
        self.index = {label: code for code, label in enumerate(labels)}
        numeric = [label for label in labels if isinstance(label, (int, float))
                   and not isinstance(label, bool)]
        self.numeric = len(numeric) == len(labels)
        if self.numeric:
            values = np.asarray(labels, dtype=np.float64)
            self.order = np.argsort(values, kind="stable")
            self.sorted = values[self.order]

    def codes(self, column) -> np.ndarray:
        if isinstance(column, _Dictionary):
            # Codes of the column's own dictionary, mapped once per label.
            table = np.array([self.index.get(_label(label), np.nan) if not _missing(label)
                              else np.nan for label in column.labels] + [np.nan])
            return table[np.where(column.codes < 0, len(column.labels), column.codes)]
        if column.dtype.kind in "biuf" and self.numeric:
            values = column.astype(np.float64)
            out = np.full(len(values), np.nan)
            if len(self.sorted):
                at = np.minimum(np.searchsorted(self.sorted, values), len(self.sorted) - 1)
                found = self.sorted[at] == values
                out[found] = self.order[at[found]]
            return out
        return np.array([self.index.get(_label(value), np.nan) if not _missing(value)
                         else np.nan for value in column.tolist()], dtype=np.float64)


class _Dictionary:
    """A dictionary-encoded column: codes (-1 missing) into its own labels."""

    def __init__(self, codes, labels):
        self.codes = np.asarray(codes, dtype=np.int64)
        self.labels = list(labels)

    def __len__(self):
        return len(self.codes)


def _missing(value) -> bool:
    """None, NaN, or pandas' NA / NaT (told by type name: pandas is not imported)."""
    return (value is None or (isinstance(value, float) and value != value)
            or type(value).__name__ in ("NAType", "NaTType"))


def _numeric(column, names, k, argument) -> np.ndarray:
    if isinstance(column, _Dictionary) or column.dtype == object or column.dtype.kind in "USVMm":
        name = names[k] if names is not None else k
        dtype = "categorical" if isinstance(column, _Dictionary) else column.dtype
        raise ValueError(non_numeric_message(argument, name, dtype))
    return column


def non_numeric_message(argument: str, name, dtype) -> str:
    """The error of a column that is neither numeric nor categorical."""
    return (f"{argument} has non-numeric column {name!r} (dtype {dtype}); drop it, or pass "
            f"it as a categorical feature ({ARGUMENT}=[{name!r}])")


def _is_categorical_type(column) -> bool:
    return isinstance(column, _Dictionary)


def _columns(X, argument):
    """The columns of ``X`` (arrays, or _Dictionary for categorical types) and
    its names (None for an array)."""
    if isinstance(X, _inputs.NamedMatrix):
        return [X.values[:, k] for k in range(X.values.shape[1])], list(X.names)
    kind = _inputs.frame_kind(X)
    if kind is None:
        array = np.asarray(X) if not isinstance(X, np.ndarray) else X
        if array.ndim != 2:
            raise ValueError(f"Expected 2D array for {argument}, got {array.ndim}D array")
        return [array[:, k] for k in range(array.shape[1])], None
    if kind == "polars" and type(X).__name__ == "LazyFrame":
        X = X.collect()
    names = _inputs.column_names(X)
    return [_column(X, kind, name) for name in names], names


def _column(frame, kind, name):
    if kind == "pandas":
        series = frame[name]
        dtype = series.dtype
        if type(dtype).__name__ == "CategoricalDtype":
            return _Dictionary(series.cat.codes.to_numpy(), list(dtype.categories))
        numpy_type = getattr(dtype, "numpy_dtype", None)
        if not isinstance(dtype, np.dtype) and numpy_type is not None \
                and np.dtype(numpy_type).kind in "biuf":
            # nullable Int8, Float32, boolean: NaN for the missing values
            return series.to_numpy(dtype=np.float64, na_value=np.nan)
        return _inputs.get_column(frame, name)
    if kind == "polars":
        series = frame.get_column(name)
        if type(series.dtype).__name__ in ("Categorical", "Enum") or str(series.dtype) in (
                "Categorical", "Enum"):
            return _arrow_dictionary(series.to_arrow())
        return _inputs.get_column(frame, name)
    column = frame.column(name)
    import pyarrow as pa

    if pa.types.is_dictionary(column.type):
        return _arrow_dictionary(column)
    return _inputs.get_column(frame, name)


def _arrow_dictionary(column):
    import pyarrow as pa

    if isinstance(column, pa.ChunkedArray):
        column = column.unify_dictionaries().combine_chunks() if column.num_chunks else \
            pa.array([], type=column.type)
    if not pa.types.is_dictionary(column.type):
        column = column.dictionary_encode()
    codes = column.indices.cast(pa.int64()).fill_null(-1).to_numpy(zero_copy_only=False)
    return _Dictionary(codes, column.dictionary.to_pylist())


def _feature_positions(value, n_features: int, names) -> list:
    positions = []
    for entry in value or ():
        if isinstance(entry, str):
            if names is None or entry not in names:
                raise ValueError(f"{ARGUMENT} names {entry!r}, which is not a column of X")
            positions.append(list(names).index(entry))
        else:
            if entry >= n_features:
                raise ValueError(f"{ARGUMENT} holds feature {entry}, but X has {n_features} "
                                 f"features (indices 0 .. {n_features - 1})")
            positions.append(int(entry))
    return positions


def learn(X, categorical_features, *, argument: str = "X"):
    """The categorical features of a training ``X`` and their categories.

    Returns ``(encoder, X)``: ``(None, X)`` unchanged when ``X`` has no
    categorical feature, else the encoder and ``X`` encoded by it.
    """
    encoder, X = _learn_encoder(X, categorical_features, argument)
    if encoder is None:
        return None, X
    return encoder, encoder.transform(X, argument=argument)


def learn_encoder(X, categorical_features, *, argument: str = "X"):
    """:func:`learn`'s encoder alone (None without categorical features):
    what a part of a distributed table learns, for :func:`combine`."""
    return _learn_encoder(X, categorical_features, argument)[0]


def combine(encoders: list):
    """One encoder from those learned on the parts of one table (rows cut
    into parts; :func:`learn_encoder` on each, None where it had none).

    Per feature, the categories every part lists alike (a categorical
    type's declared categories, the same in every part), else the sorted
    union of the parts' lists: :func:`learn`'s sorted distinct values of
    the whole column. Categories that cannot be ordered together raise."""
    encoders = [encoder for encoder in encoders if encoder is not None]
    if not encoders:
        return None
    first = encoders[0]
    for encoder in encoders[1:]:
        if (not np.array_equal(encoder.features, first.features)
                or encoder.n_features != first.n_features):
            raise ValueError("the parts of X do not have the same categorical features "
                             "(a column is categorical in some partitions only)")
    categories = []
    for position, k in enumerate(first.features.tolist()):
        lists = [encoder.categories[position] for encoder in encoders]
        if all(labels == lists[0] for labels in lists[1:]):
            categories.append(list(lists[0]))
            continue
        try:
            union = sorted({label for labels in lists for label in labels})
        except TypeError:
            raise TypeError(f"categorical feature {k} mixes categories that cannot be "
                            f"ordered (e.g. strings and numbers)") from None
        if len(union) > MAX_CATEGORIES:
            raise ValueError(f"categorical feature {k} has {len(union)} categories, more "
                             f"than the {MAX_CATEGORIES} a feature may have")
        categories.append(union)
    return CategoryEncoder(first.features, categories, first.n_features)


def _learn_encoder(X, categorical_features, argument):
    """(encoder or None, X with a lazy polars frame collected)."""
    check_categorical_features(categorical_features)
    kind = _inputs.frame_kind(X)
    if kind is None and not isinstance(X, _inputs.NamedMatrix) and not categorical_features:
        return None, X
    if kind is not None:
        if kind == "polars" and type(X).__name__ == "LazyFrame":
            X = X.collect()
        if not categorical_features and not _has_categorical_type(X, kind):
            return None, X
    columns, names = _columns(X, argument)
    listed = set(_feature_positions(categorical_features, len(columns), names))
    features, categories = [], []
    for k, column in enumerate(columns):
        if not (k in listed or _is_categorical_type(column)):
            continue
        features.append(k)
        labels = _labels_of(column, names[k] if names is not None else k, argument)
        if len(labels) > MAX_CATEGORIES:
            name = names[k] if names is not None else k
            raise ValueError(f"categorical feature {name!r} has {len(labels)} categories, "
                             f"more than the {MAX_CATEGORIES} a feature may have")
        categories.append(labels)
    if not features:
        return None, X
    return CategoryEncoder(features, categories, len(columns)), X


def _has_categorical_type(frame, kind) -> bool:
    if kind == "pandas":
        return any(type(dtype).__name__ == "CategoricalDtype" for dtype in frame.dtypes)
    if kind == "polars":
        return any(type(dtype).__name__ in ("Categorical", "Enum")
                   or str(dtype) in ("Categorical", "Enum") for dtype in frame.dtypes)
    import pyarrow as pa

    return any(pa.types.is_dictionary(field.type) for field in frame.schema)


def _labels_of(column, name, argument) -> list:
    """The categories of a training column, in code order: a categorical
    type's own (declared) categories; sorted distinct values otherwise."""
    if isinstance(column, _Dictionary):
        return [_label(label) for label in column.labels]
    if column.dtype.kind in "biuf":
        values = column.astype(np.float64)
        values = np.unique(values[~np.isnan(values)])
        if np.isinf(values).any():
            raise ValueError(f"{argument} has infinity in categorical column {name!r}")
        return [int(value) if float(value).is_integer() else float(value)
                for value in values.tolist()]
    distinct = {_label(value) for value in column.tolist() if not _missing(value)}
    try:
        return sorted(distinct)
    except TypeError:
        raise TypeError(f"categorical column {name!r} mixes categories that cannot be "
                        f"ordered (e.g. strings and numbers)") from None


def fit_bins(mapper, X, encoder, row_order, n_threads):
    """Fit ``mapper`` on ``X`` with one bin per category of every categorical
    feature (codes 0 .. K-1 are their own bins, NaN the missing bin), and bin
    ``X``."""
    mapper.fit(X)
    set_category_bins(mapper, encoder)
    return mapper.transform(X, row_order=row_order, n_threads=n_threads)


def set_category_bins(mapper, encoder) -> None:
    """A fitted ``mapper`` with one bin per category of every categorical
    feature of ``encoder`` (None: unchanged)."""
    if encoder is None:
        return
    for k, labels in zip(encoder.features.tolist(), encoder.categories, strict=True):
        mapper.cuts_[k] = np.arange(max(len(labels) - 1, 0), dtype=np.float64) + 0.5
        mapper.n_bins_[k] = max(len(labels), 1)
    from packboost.binning import _binned_dtype

    mapper.binned_dtype_ = _binned_dtype(mapper.n_bins_)
