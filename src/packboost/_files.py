"""Files in and out: parquet and CSV columns for the command line.

:func:`read_columns` and :func:`write_columns` move ``{name: 1-D array}``
between NumPy and a parquet file (pyarrow or polars) or a CSV file (pyarrow,
polars or pandas when installed, else Python's ``csv``); writes are atomic.
:func:`list_file_columns` reads a file's header only, and
:func:`select_columns` picks column names by exact name or shell pattern.
Tables already in memory go through :mod:`packboost._inputs`.
"""

from __future__ import annotations

import csv
import fnmatch
import os
from pathlib import Path

import numpy as np

from packboost._inputs import _arrow_to_numpy

__all__ = [
    "FileReadError",
    "atomic_path",
    "list_file_columns",
    "read_columns",
    "select_columns",
    "write_columns",
]


class FileReadError(ValueError):
    """A data file that cannot be read as a table: the message names the file."""


def _library_errors() -> tuple:
    """Exception classes a reading library raises on a bad file (those imported)."""
    import sys
    import zlib

    errors = [csv.Error, UnicodeError, EOFError, zlib.error]
    arrow = sys.modules.get("pyarrow")
    if arrow is not None and hasattr(arrow, "ArrowException"):
        errors.append(arrow.ArrowException)
    polars = sys.modules.get("polars")
    if polars is not None and hasattr(polars, "exceptions"):
        errors.append(polars.exceptions.PolarsError)
    return tuple(errors)


def _describe(error) -> str:
    if isinstance(error, UnicodeDecodeError):
        return (f"not UTF-8 text (byte 0x{error.object[error.start]:02x} at offset "
                f"{error.start}); save it as UTF-8")
    if isinstance(error, EOFError) or type(error).__name__ == "error":
        return f"truncated or corrupted ({error or type(error).__name__})"
    return str(error).strip() or type(error).__name__


def _reading(path):
    """Context manager: a library's error on reading ``path`` becomes a
    :class:`FileReadError` that names the file (other errors pass unchanged)."""
    import contextlib

    @contextlib.contextmanager
    def reading():
        try:
            yield
        except FileReadError:
            raise
        except _library_errors() as error:
            raise FileReadError(f"{path}: cannot read: {_describe(error)}") from error
        except (ValueError, TypeError, KeyError, IndexError) as error:
            # pyarrow and polars raise ValueError/TypeError subclasses on bad files.
            raise FileReadError(f"{path}: cannot read: {_describe(error)}") from error
        except OSError as error:
            if error.filename is not None:  # "[Errno 13] Permission denied: 'x.csv'"
                raise
            # e.g. pyarrow's "Truncated compressed stream" for a cut .csv.gz
            raise FileReadError(f"{path}: cannot read: {_describe(error)}") from error

    return reading()


def duplicated_names(names) -> list:
    """The names that occur more than once, each once, in order of first repeat."""
    seen, duplicated = set(), []
    for name in names:
        if name in seen and name not in duplicated:
            duplicated.append(name)
        seen.add(name)
    return duplicated


def _check_unique(path, names) -> list:
    duplicated = duplicated_names(names)
    if duplicated:
        raise FileReadError(
            f"{path}: duplicated column names {duplicated[:8]}: each column must have "
            "its own name (which one is meant would be a guess)")
    return list(names)


def _suffix(path) -> str:
    name = str(path).lower()
    for suffix in (".parquet", ".pq", ".csv", ".csv.gz", ".tsv"):
        if name.endswith(suffix):
            return suffix
    raise ValueError(
        f"cannot tell the format of {str(path)!r}: expected a .parquet or .csv file"
    )


def _is_parquet(path) -> bool:
    return _suffix(path) in (".parquet", ".pq")


def _parquet_library():
    """The first of pyarrow, polars that is installed (parquet needs one)."""
    for module in ("pyarrow.parquet", "polars"):
        try:
            return __import__(module, fromlist=["_"])
        except ImportError:
            continue
    raise ImportError(
        "reading or writing parquet files needs the optional package 'pyarrow' "
        "(or 'polars'): pip install pyarrow"
    )


def list_file_columns(path) -> list:
    """Column names of a parquet or CSV file, in file order.

    Raises :class:`FileReadError` (a ``ValueError`` naming the file) when the
    file cannot be read, has no header, or repeats a column name.
    """
    path = _existing(path)
    parquet = _is_parquet(path)
    with _reading(path):
        if parquet:
            library = _parquet_library()
            if library.__name__ == "pyarrow.parquet":
                schema = library.read_schema(path)
                names = [name for name in schema.names
                         if not name.startswith("__index_level_")]
            else:
                names = list(library.scan_parquet(path).collect_schema().names())
        else:
            with _open_text(path) as handle:
                reader = csv.reader(handle, delimiter=_delimiter(path))
                names = next(reader, None)
            if names is None:
                raise FileReadError(f"{path}: empty file: expected a header line of "
                                    "column names")
    return _check_unique(path, names)


def dictionary_columns(path) -> list:
    """Names of the dictionary-encoded columns of a parquet file (what pandas
    ``category`` and polars ``Categorical`` columns are saved as); none for
    a CSV file."""
    path = _existing(path)
    if not _is_parquet(path):
        return []
    with _reading(path):
        library = _parquet_library()
        if library.__name__ == "pyarrow.parquet":
            import pyarrow as pa

            schema = library.read_schema(path)
            return [field.name for field in schema if pa.types.is_dictionary(field.type)]
        schema = library.scan_parquet(path).collect_schema()
        return [name for name, dtype in schema.items()
                if type(dtype).__name__ in ("Categorical", "Enum")]


def read_columns(path, columns=None) -> dict:
    """Columns of a parquet or CSV file as ``{name: 1-D ndarray}`` (file order).

    Parquet needs pyarrow or polars. CSV uses pyarrow, polars or pandas when
    one is installed, else Python's ``csv`` module (numbers are parsed as
    int64 where every value is an integer, else float64; empty fields are NaN).
    """
    path = _existing(path)
    available = list_file_columns(path)
    if columns is None:
        columns = available
    columns = list(dict.fromkeys(columns))
    missing = [name for name in columns if name not in available]
    if missing:
        raise ValueError(f"{path}: no column(s) {missing[:5]}; the file has {available[:8]}...")
    parquet = _is_parquet(path)
    with _reading(path):
        if parquet:
            library = _parquet_library()
            if library.__name__ == "pyarrow.parquet":
                table = library.read_table(path, columns=columns)
                data = {name: _arrow_column(path, table.column(name), name)
                        for name in columns}
            else:
                frame = library.read_parquet(path, columns=columns)
                data = {name: frame.get_column(name).to_numpy() for name in columns}
        else:
            data = _read_csv(path, columns)
    lengths = {len(values) for values in data.values()}
    if len(lengths) > 1:
        raise FileReadError(f"{path}: columns of different lengths {sorted(lengths)}")
    return data


def _arrow_column(path, column, name, *, text=False):
    """An arrow column as NumPy: a column with no value at all (arrow's null
    type, what an all-empty CSV column becomes) is all-NaN float64; in a CSV,
    bytes that are not UTF-8 are refused."""
    import pyarrow as pa

    if pa.types.is_null(column.type):
        return np.full(len(column), np.nan)
    if pa.types.is_dictionary(column.type):
        # Labels, None where null (a dictionary column's own to_numpy can
        # give a label for a null).
        column = column.cast(column.type.value_type)
    if text and (pa.types.is_binary(column.type) or pa.types.is_large_binary(column.type)):
        raise FileReadError(f"{path}: column {name!r} is not UTF-8 text; save the file "
                            "as UTF-8")
    return _arrow_to_numpy(column)


def _read_csv(path, columns):
    try:
        import pyarrow.csv as pacsv
    except ImportError:
        pacsv = None
    if pacsv is not None:
        table = pacsv.read_csv(
            path, parse_options=pacsv.ParseOptions(delimiter=_delimiter(path)),
            convert_options=pacsv.ConvertOptions(include_columns=columns))
        return {name: _arrow_column(path, table.column(name), name, text=True)
                for name in columns}
    with _open_text(path) as handle:
        reader = csv.reader(handle, delimiter=_delimiter(path))
        header = next(reader)
        positions = [header.index(name) for name in columns]
        cells = [[] for _ in columns]
        for line_number, row in enumerate(reader, start=2):
            if not row:
                continue
            if len(row) != len(header):
                raise FileReadError(f"{path}:{line_number}: {len(row)} fields, header has "
                                    f"{len(header)}")
            for values, position in zip(cells, positions, strict=True):
                values.append(row[position])
    return {name: _parse_csv_column(values) for name, values in zip(columns, cells, strict=True)}


def _parse_csv_column(values):
    try:
        return np.array([int(value) for value in values], dtype=np.int64)
    except ValueError:
        pass
    try:
        return np.array([float(value) if value.strip() else np.nan for value in values],
                        dtype=np.float64)
    except ValueError:
        return np.array(values, dtype=object)


def write_columns(path, columns: dict) -> None:
    """Write ``{name: 1-D array}`` as parquet (pyarrow or polars) or CSV (no dependency).

    Atomically: the file is written next to ``path`` under a temporary name,
    flushed to disk and renamed onto it once complete, so an interrupted or
    failed write leaves the old file (or none), never half a file that a
    scheduled upload would pick up.
    """
    names = list(columns)
    for name in names:
        if not isinstance(name, str) or not name:
            raise ValueError(f"column names must be non-empty strings, got {name!r}")
    lengths = {len(np.asarray(values)) for values in columns.values()}
    if len(lengths) > 1:
        raise ValueError(f"columns of different lengths {sorted(lengths)} for {str(path)!r}")
    parquet = _is_parquet(path)
    library = _parquet_library() if parquet else None
    with atomic_path(path) as temporary:
        if parquet:
            _write_parquet(library, temporary, columns)
        else:
            _write_csv(temporary, path, columns)


class atomic_path:  # noqa: N801 (used as a context manager, like open)
    """``with atomic_path(path) as temporary:`` write ``temporary`` (a name next
    to ``path`` with the same suffix); on success it is fsync'ed and renamed
    onto ``path``, on any exception (Ctrl-C included) it is removed and
    ``path`` is left as it was."""

    def __init__(self, path):
        self.path = Path(path)
        self.temporary = self.path.with_name(
            f".{self.path.stem}.{os.urandom(6).hex()}.tmp{self.path.suffix}")

    def __enter__(self) -> Path:
        return self.temporary

    def __exit__(self, kind, error, traceback) -> bool:
        if kind is None:
            try:
                _fsync(self.temporary)
                os.replace(self.temporary, self.path)
                return False
            except BaseException:
                self._remove()
                raise
        self._remove()
        return False

    def _remove(self):
        try:
            os.unlink(self.temporary)
        except OSError:
            pass


def _fsync(path):
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def _write_parquet(library, path, columns):
    if library.__name__ == "pyarrow.parquet":
        import pyarrow as pa

        table = pa.table({name: np.asarray(values) for name, values in columns.items()})
        library.write_table(table, path)
    else:
        library.DataFrame({name: np.asarray(values) for name, values in columns.items()}
                          ).write_parquet(path)


def _write_csv(path, target, columns):
    names = list(columns)
    arrays = [np.asarray(columns[name]) for name in names]
    if str(target).lower().endswith(".gz"):
        import gzip

        handle = gzip.open(path, "wt", newline="", encoding="utf-8")
    else:
        handle = open(path, "w", newline="", encoding="utf-8")
    with handle:
        writer = csv.writer(handle, delimiter=_delimiter(target))
        writer.writerow(names)
        for row in zip(*(array.tolist() for array in arrays), strict=True):
            writer.writerow([repr(value) if isinstance(value, float) else value
                             for value in row])


def select_columns(available: list, patterns: list) -> list:
    """Columns matching any of ``patterns`` (exact names or shell globs), in file order."""
    selected = []
    for pattern in patterns:
        matched = [name for name in available if fnmatch.fnmatchcase(name, pattern)]
        if not matched:
            raise ValueError(f"no column matches {pattern!r}; the columns are "
                             f"{available[:8]}{'...' if len(available) > 8 else ''}")
        selected.extend(name for name in matched if name not in selected)
    order = {name: index for index, name in enumerate(available)}
    return sorted(selected, key=order.__getitem__)


def _existing(path) -> str:
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"no such file: {path}")
    if os.path.isdir(path):
        raise IsADirectoryError(f"{path} is a directory, not a data file")
    return path


def _delimiter(path) -> str:
    return "\t" if str(path).lower().endswith(".tsv") else ","


def _open_text(path):
    if str(path).lower().endswith(".gz"):
        import gzip

        return gzip.open(path, "rt", newline="", encoding="utf-8-sig")
    return open(path, newline="", encoding="utf-8-sig")
