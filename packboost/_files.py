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
    "list_file_columns",
    "read_columns",
    "select_columns",
    "write_columns",
]


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
    """Column names of a parquet or CSV file, in file order."""
    path = _existing(path)
    if _is_parquet(path):
        library = _parquet_library()
        if library.__name__ == "pyarrow.parquet":
            schema = library.read_schema(path)
            return [name for name in schema.names if not name.startswith("__index_level_")]
        return list(library.scan_parquet(path).collect_schema().names())
    with _open_text(path) as handle:
        reader = csv.reader(handle, delimiter=_delimiter(path))
        return next(reader, [])


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
    missing = [name for name in columns if name not in available]
    if missing:
        raise ValueError(f"{path}: no column(s) {missing[:5]}; the file has {available[:8]}...")
    if _is_parquet(path):
        library = _parquet_library()
        if library.__name__ == "pyarrow.parquet":
            table = library.read_table(path, columns=list(columns))
            return {name: _arrow_to_numpy(table.column(name)) for name in columns}
        frame = library.read_parquet(path, columns=list(columns))
        return {name: frame.get_column(name).to_numpy() for name in columns}
    return _read_csv(path, list(columns))


def _read_csv(path, columns):
    try:
        import pyarrow.csv as pacsv

        table = pacsv.read_csv(
            path, parse_options=pacsv.ParseOptions(delimiter=_delimiter(path)),
            convert_options=pacsv.ConvertOptions(include_columns=columns))
        return {name: _arrow_to_numpy(table.column(name)) for name in columns}
    except ImportError:
        pass
    with _open_text(path) as handle:
        reader = csv.reader(handle, delimiter=_delimiter(path))
        header = next(reader)
        positions = [header.index(name) for name in columns]
        cells = [[] for _ in columns]
        for line_number, row in enumerate(reader, start=2):
            if not row:
                continue
            if len(row) != len(header):
                raise ValueError(f"{path}:{line_number}: {len(row)} fields, header has "
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

    Atomically: the file is written next to ``path`` under a temporary name and
    renamed onto it once complete, so an interrupted or failed write leaves
    the old file (or none), never half a file that a scheduled upload would
    pick up.
    """
    path = Path(path)
    parquet = _is_parquet(path)
    library = _parquet_library() if parquet else None
    temporary = path.with_name(f".{path.name}.{os.urandom(6).hex()}.tmp")
    try:
        if parquet:
            _write_parquet(library, temporary, columns)
        else:
            _write_csv(temporary, path, columns)
        os.replace(temporary, path)
    except BaseException:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        raise


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
    with open(path, "w", newline="") as handle:
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
    return path


def _delimiter(path) -> str:
    return "\t" if str(path).lower().endswith(".tsv") else ","


def _open_text(path):
    if str(path).lower().endswith(".gz"):
        import gzip

        return gzip.open(path, "rt", newline="")
    return open(path, newline="")
