"""Tables in, arrays out: NumPy, pandas, polars and pyarrow inputs.

Every public entry point takes its tables through here, so the estimators see
one thing: a 2-D NumPy array plus, for a table, its column names. None of the
optional libraries is imported unless the input is one of theirs (a type is
recognised by its module name), and a file reader that needs one names it.

Numerai's features are int8: a table whose feature columns share one integer
type becomes an integer matrix of that type (never a float copy), laid out
column-major so that the binner can use it as bins without another copy.

Files (parquet, CSV) are read and written by :mod:`packboost._files`; its
functions are still importable from here.
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "as_matrix",
    "column_names",
    "columns_to_matrix",
    "frame_kind",
    "get_column",
    "drop_columns",
    "NamedMatrix",
    "table_feature_names",
]


class NamedMatrix:
    """A 2-D array with column names: the smallest table (used by the CLI).

    The estimators treat it like a DataFrame: they keep and check the names.
    """

    def __init__(self, values: np.ndarray, names):
        self.values = values
        self.names = [str(name) for name in names]
        if values.ndim != 2 or values.shape[1] != len(self.names):
            raise ValueError(f"{len(self.names)} names for an array of shape {values.shape}")


def frame_kind(X) -> str | None:
    """``"pandas"``, ``"polars"`` or ``"pyarrow"`` for a table of that library, else None."""
    module = type(X).__module__
    name = type(X).__name__
    if module.startswith("pandas") and name == "DataFrame":
        return "pandas"
    if module.startswith("polars") and name in ("DataFrame", "LazyFrame"):
        return "polars"
    if module.startswith("pyarrow") and name in ("Table", "RecordBatch"):
        return "pyarrow"
    return None


def column_names(frame) -> list:
    kind = frame_kind(frame)
    if kind == "pandas":
        return list(frame.columns)
    if kind == "polars":
        return list(frame.collect_schema().names()) if hasattr(frame, "collect_schema") \
            else list(frame.columns)
    return list(frame.schema.names)


def get_column(frame, name) -> np.ndarray:
    """One column of a table as a NumPy array (strings become object or str arrays)."""
    kind = frame_kind(frame)
    if kind == "pandas":
        return frame[name].to_numpy()
    if kind == "polars":
        if type(frame).__name__ == "LazyFrame":
            frame = frame.select(name).collect()
        return frame.get_column(name).to_numpy()
    column = frame.column(name)
    return _arrow_to_numpy(column)


def drop_columns(frame, names):
    kind = frame_kind(frame)
    if kind == "pandas":
        return frame.drop(columns=list(names))
    if kind == "polars":
        return frame.drop(list(names))
    keep = [column for column in frame.schema.names if column not in set(names)]
    return frame.select(keep)


def frame_column(X, name, argument: str):
    """Column ``name`` of a table ``X`` as an array, and X without it."""
    if frame_kind(X) is None:
        raise TypeError(
            f"{argument}={name!r} is a column name, which needs X to be a table (a pandas "
            f"or polars DataFrame, or a pyarrow Table); got X of type {type(X).__name__}"
        )
    if name not in column_names(X):
        raise ValueError(f"{argument}={name!r} is not a column of X")
    return get_column(X, name), drop_columns(X, [name])


def table_feature_names(names) -> np.ndarray | None:
    """A table's column names as its feature names when every one is a string;
    None otherwise (the integer names of ``pd.DataFrame(array)`` are
    positions, and the features are then unnamed)."""
    names = list(names)
    if names and all(isinstance(name, str) for name in names):
        return np.asarray(names, dtype=object)
    return None


def as_matrix(X, *, argument: str = "X"):
    """A table or array-like as ``(2-D ndarray, column names or None)``.

    Tables keep their column names when every name is a string. Columns that
    share one dtype keep it (int8 stays int8, column-major); mixed integer
    columns take their common integer type, anything else float64. Nullable
    columns (pandas ``Int8``, arrow nulls) become float64 with NaN for
    missing values.
    """
    if isinstance(X, NamedMatrix):
        return X.values, np.asarray(X.names, dtype=object)
    kind = frame_kind(X)
    if kind is None:
        if isinstance(X, np.ndarray):
            return X, None
        try:
            return np.asarray(X), None
        except (ValueError, TypeError) as error:
            raise ValueError(f"{argument} cannot be converted to an array: {error}") from None
    if kind == "polars" and type(X).__name__ == "LazyFrame":
        X = X.collect()
    names = column_names(X)
    feature_names = table_feature_names(names)
    if kind == "pandas":
        return _pandas_matrix(X, argument), feature_names
    columns = [get_column(X, name) for name in names]
    return columns_to_matrix(columns, names, argument=argument), feature_names


def columns_to_matrix(columns: list, names: list, *, argument: str = "X") -> np.ndarray:
    """Stack 1-D columns into one column-major matrix of their common dtype."""
    n_rows = len(columns[0]) if columns else 0
    for name, column in zip(names, columns, strict=True):
        if column.dtype == object or column.dtype.kind in "USVMm":
            raise ValueError(non_numeric_message(argument, name, column.dtype))
    dtype = _common_dtype([column.dtype for column in columns])
    matrix = np.empty((n_rows, len(columns)), dtype=dtype, order="F")
    for index, column in enumerate(columns):
        matrix[:, index] = column
    return matrix


def non_numeric_message(argument: str, name, dtype) -> str:
    """The error of a column that is neither numeric nor categorical."""
    from packboost._categories import non_numeric_message as message

    return message(argument, name, dtype)


def _common_dtype(dtypes):
    if not dtypes:
        return np.dtype(np.float64)
    unique = set(dtypes)
    if len(unique) == 1:
        dtype = unique.pop()
        return np.dtype(np.uint8) if dtype == np.bool_ else dtype
    if all(dtype.kind in "biu" for dtype in unique):
        return np.result_type(*[np.uint8 if dtype == np.bool_ else dtype for dtype in unique])
    return np.dtype(np.float64)


def _pandas_matrix(frame, argument):
    dtypes = list(frame.dtypes)
    numpy_dtypes = []
    nullable = False
    for name, dtype in zip(frame.columns, dtypes, strict=True):
        if isinstance(dtype, np.dtype):
            if dtype.kind not in "biuf":
                raise ValueError(non_numeric_message(argument, name, dtype))
            numpy_dtypes.append(dtype)
            continue
        # pandas extension dtypes: nullable Int8/Float32/boolean, category, strings.
        numpy_type = getattr(dtype, "numpy_dtype", None)
        if numpy_type is None or np.dtype(numpy_type).kind not in "biuf":
            raise ValueError(non_numeric_message(argument, name, dtype))
        nullable = True
        numpy_dtypes.append(np.dtype(numpy_type))
    if nullable:
        return frame.to_numpy(dtype=np.float64, na_value=np.nan)
    dtype = _common_dtype(numpy_dtypes)
    matrix = frame.to_numpy(dtype=dtype)
    if not matrix.flags.f_contiguous and matrix.shape[1] > 1 and len(set(numpy_dtypes)) > 1:
        matrix = np.asfortranarray(matrix)
    return matrix


def _arrow_to_numpy(column) -> np.ndarray:
    """An arrow (chunked) array as NumPy; nulls become NaN in numeric columns."""
    if column.null_count:
        import pyarrow as pa

        if pa.types.is_integer(column.type) or pa.types.is_floating(column.type) \
                or pa.types.is_boolean(column.type):
            return column.cast(pa.float64()).to_numpy(zero_copy_only=False)
    return column.to_numpy(zero_copy_only=False) if hasattr(column, "to_numpy") \
        else np.asarray(column)


# The file functions, moved to packboost._files, still importable from here
# (imported on first use: _files builds on this module).
_MOVED_TO_FILES = ("list_file_columns", "read_columns", "write_columns", "select_columns")


def __getattr__(name):
    if name in _MOVED_TO_FILES:
        from packboost import _files

        return getattr(_files, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
