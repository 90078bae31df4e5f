"""Versioned, self-describing binary container for PackBoost models.

A model file holds a JSON-serialisable ``metadata`` dict (parameters, feature
names, bin mapper settings, ...) and a set of named numeric NumPy arrays (the
tree arrays, bin edges, per-depth feature subsets, ...); see
docs/model-file.md. What the metadata and arrays *mean* is up to the caller; this
module only stores and checks them.

The format is meant to be **safe to load from an untrusted source**: reading a
file never unpickles, evaluates or imports anything, every size in the file is
checked against the bytes actually present before anything is allocated, and
every problem with a file's content raises :class:`ModelFileError` (a
``ValueError``) with a message saying what is wrong.  The SHA-256 checksum
catches truncation and corruption; it is not a signature: whoever can write a
file can also recompute it, which is why the header is validated field by field
after the checksum matches.

Layout (format versions 1 and 2)
--------------------------------
All integers are little-endian::

    offset        size  field
    ------------  ----  ------------------------------------------------------
    0                8  magic  b"\\x89PKBOOST"  (never changes between versions)
    8                4  format_version, uint32   (never moves between versions)
    12               4  header_nbytes, uint32  (a multiple of 8)
    16               8  payload_nbytes, uint64 (a multiple of 8)
    24    header_nbytes  header: ASCII JSON, padded with spaces
    24 + header_nbytes  payload_nbytes  payload: the arrays' bytes
    end - 32        32  SHA-256 of every byte before it

so a file is exactly ``24 + header_nbytes + payload_nbytes + 32`` bytes long
and the payload starts 8-byte aligned.  The leading non-ASCII byte of the
magic keeps the file from being mistaken for text.

The header is a JSON object with exactly two keys::

    {"metadata": {...},
     "arrays": [{"name": str, "dtype": str, "shape": [int, ...],
                 "offset": int, "nbytes": int}, ...]}

* ``dtype`` is one of ``bool``, ``int8``, ``int16``, ``int32``, ``int64``,
  ``uint8``, ``uint16``, ``uint32``, ``uint64``, ``float32``, ``float64``;
  values are stored little-endian (``bool`` as one byte, 0 or 1) in C order.
* ``offset`` is relative to the start of the payload and a multiple of 8;
  ``nbytes == prod(shape) * itemsize``; arrays do not overlap and lie inside
  the payload.  The writer stores them in the order given, zero-padded to
  8 bytes.
* The header is at most :data:`MAX_HEADER_NBYTES` bytes, nests at most
  ``MAX_JSON_DEPTH`` deep, holds at most ``MAX_JSON_CONTAINERS`` lists and
  objects, and its parse may cost at most ``JSON_COST_PER_BYTE`` times its
  size plus ``JSON_COST_SLACK`` (estimated by a scan before parsing); the
  writer refuses metadata beyond these limits, the reader files.
* Non-finite floats in the metadata are allowed and written as the JSON
  extensions ``NaN``, ``Infinity`` and ``-Infinity`` (what Python's ``json``
  reads and writes by default); the header is then not strict RFC 8259 JSON.
  Tuples are refused rather than silently coming back as lists.

Versions
--------
Only the magic and the version field are fixed forever; everything after them
belongs to the version.  :func:`loads` reads the version and hands the bytes to
the reader registered for it in ``_READERS``.  A future format version 2 adds
``_read_v2``, registers it, bumps :data:`FORMAT_VERSION` and keeps ``_read_v1``
so that old files still load; :func:`dumps` always writes the newest version.
A file newer than this PackBoost says so instead of failing on its layout.
"""

from __future__ import annotations

import codecs
import errno
import hashlib
import json
import math
import os
import stat
import struct
import sys
from collections.abc import Callable, Mapping

import numpy as np

__all__ = [
    "FORMAT_VERSION",
    "MAX_HEADER_NBYTES",
    "ModelFileError",
    "dumps",
    "loads",
    "read_model_file",
    "write_model_file",
]

# Version 2 has version 1's layout; its files may hold categorical features
# (model_io: the "categorical" metadata and node_category_words), which a
# version-1 reader would load and misread (every set split as "all values
# right"), so they must not carry version 1.
FORMAT_VERSION = 2

MAGIC = b"\x89PKBOOST"
# Preamble common to all versions: magic, then the uint32 format version.
_VERSION_STRUCT = struct.Struct("<I")
_VERSION_OFFSET = len(MAGIC)
# Version 1 preamble after the magic: version, header_nbytes, payload_nbytes.
_V1_PREAMBLE = struct.Struct("<IIQ")
_V1_HEADER_OFFSET = len(MAGIC) + _V1_PREAMBLE.size  # 24
_CHECKSUM_NBYTES = hashlib.sha256().digest_size  # 32
_ALIGNMENT = 8
# Limits on the JSON header, the same for the writer (which refuses to write
# what the reader would refuse) and the reader (which checks them *before*
# parsing, so that a forged header cannot make json.loads allocate many times
# the file's size: an empty list costs 3 bytes of JSON and ~64 of Python).
# A model's metadata (parameters, feature names, bin mapper settings) is far
# below them; anything big belongs in the arrays.
MAX_HEADER_NBYTES = 64 << 20
MAX_JSON_DEPTH = 64
MAX_JSON_CONTAINERS = 10_000
# The parsed header may cost at most JSON_COST_PER_BYTE * header_nbytes +
# JSON_COST_SLACK bytes of Python objects, as estimated by _json_cost (an upper
# bound of CPython's cost).
JSON_COST_PER_BYTE = 8
JSON_COST_SLACK = 4 << 20
# NumPy 1.x allows at most 32 dimensions; keep files readable by both 1.x and 2.x.
_MAX_NDIM = 32

# Canonical dtype name -> little-endian NumPy dtype.  The only dtypes a file may hold.
_DTYPES = {
    name: np.dtype(name).newbyteorder("<")
    for name in (
        "bool",
        "int8",
        "int16",
        "int32",
        "int64",
        "uint8",
        "uint16",
        "uint32",
        "uint64",
        "float32",
        "float64",
    )
}
# (kind, itemsize) -> canonical name, to classify any input dtype whatever its byte order.
_DTYPE_NAMES = {(dtype.kind, dtype.itemsize): name for name, dtype in _DTYPES.items()}
_ARRAY_ENTRY_KEYS = frozenset({"name", "dtype", "shape", "offset", "nbytes"})


class ModelFileError(ValueError):
    """The bytes given are not a valid PackBoost model file.

    Raised for every problem with a file's *content*: wrong magic, a format
    version this PackBoost cannot read, truncation, a checksum mismatch or an
    invalid header.  Problems with the arguments of the writing functions raise
    ``TypeError``/``ValueError``; operating-system errors pass through.
    """


# --------------------------------------------------------------------------------------
# Writing
# --------------------------------------------------------------------------------------


def dumps(metadata: dict, arrays: Mapping[str, np.ndarray]) -> bytes:
    """Serialise ``metadata`` and ``arrays`` to the bytes of a model file.

    Parameters
    ----------
    metadata : dict
        JSON-serialisable: ``str`` keys; values ``None``, ``bool``, ``int``,
        ``float`` (NaN and infinities allowed), ``str``, ``list`` or ``dict``.
    arrays : mapping of str to numpy.ndarray
        Numeric arrays of any shape (0-d and empty included), memory layout
        and byte order; dtype one of bool, int8-int64, uint8-uint64, float32,
        float64.  NumPy scalars (``np.float64(1.0)``) are stored as 0-d arrays.

    Returns
    -------
    bytes
        A file in the newest format version, :data:`FORMAT_VERSION` (the
        version-1 layout of the module docstring).

    Raises
    ------
    TypeError
        A metadata value or key that cannot be stored, naming it; an array name
        that is not a ``str``; an array that is not an ``ndarray`` or has an
        unsupported dtype, naming the array.
    ValueError
        An array with more than 32 dimensions, or metadata nested too deeply.
    """
    if not isinstance(metadata, dict):
        raise TypeError(f"metadata must be a dict, got {type(metadata).__name__}")
    try:
        _check_metadata(metadata, "metadata", set())
    except RecursionError:
        raise ValueError("metadata is nested too deeply to be stored") from None
    if not isinstance(arrays, Mapping):
        raise TypeError(f"arrays must be a mapping of str to ndarray, got {type(arrays).__name__}")

    entries = []
    chunks = []
    payload_nbytes = 0
    for name, array in arrays.items():
        if not isinstance(name, str):
            raise TypeError(f"array names must be str, got {name!r}")
        data = _array_bytes(name, array)
        entries.append(
            {
                "name": name,
                "dtype": _DTYPE_NAMES[(array.dtype.kind, array.dtype.itemsize)],
                "shape": [int(dim) for dim in array.shape],
                "offset": payload_nbytes,
                "nbytes": len(data),
            }
        )
        chunks.append(data)
        padding = _padding(len(data))
        if padding:
            chunks.append(b"\0" * padding)
        payload_nbytes += len(data) + padding

    try:
        header = json.dumps(
            {"metadata": metadata, "arrays": entries},
            ensure_ascii=True,
            allow_nan=True,
            separators=(",", ":"),
        ).encode("ascii")
    except RecursionError:
        raise ValueError("metadata is nested too deeply to be stored") from None
    header += b" " * _padding(len(header))
    # Refuse what the reader would refuse: a file that cannot be loaded back.
    problem = _header_limit_problem(header)
    if problem is not None:
        raise ValueError(f"metadata cannot be stored in a model file: {problem}; "
                         "store large data as arrays")

    hasher = hashlib.sha256()
    parts = [MAGIC, _V1_PREAMBLE.pack(FORMAT_VERSION, len(header), payload_nbytes), header]
    parts.extend(chunks)
    for part in parts:
        hasher.update(part)
    parts.append(hasher.digest())
    return b"".join(parts)


def write_model_file(
    path: str | os.PathLike, metadata: dict, arrays: Mapping[str, np.ndarray]
) -> None:
    """Write a model file to ``path`` atomically.

    The bytes go to a new temporary file in the same directory, are flushed and
    fsync'ed, and the temporary file is then renamed onto ``path`` with
    ``os.replace``.  A reader therefore sees either the old file or the complete
    new one; if anything fails (including serialising the arguments, which
    happens before touching the disk) the temporary file is removed and an
    existing file at ``path`` is left untouched.

    The result is what writing the file in place would give, except for the
    atomicity: a symbolic link is followed and its target replaced (the link
    stays a link); an existing file keeps its permission bits (and, where
    the OS allows, its owner and group), a new one gets ``0o666`` less the
    umask.  An existing file that is not a regular file (``/dev/null``, a
    FIFO) is written to directly; a directory raises ``IsADirectoryError``.
    Other hard links to a replaced file keep its old content.

    Parameters
    ----------
    path : str or os.PathLike
        Destination; its directory must exist.
    metadata, arrays
        As for :func:`dumps`, which raises the same errors.
    """
    data = dumps(metadata, arrays)
    path = _write_target(os.fsdecode(os.fspath(path)))
    try:
        existing = os.stat(path)
    except FileNotFoundError:
        existing = None
    if existing is not None and stat.S_ISDIR(existing.st_mode):
        raise IsADirectoryError(errno.EISDIR, "Is a directory", path)
    if existing is not None and not stat.S_ISREG(existing.st_mode):
        # A device or a FIFO: nothing to rename over, write to it as open() would.
        with open(path, "wb") as file:
            file.write(data)
        return
    directory, basename = os.path.split(path)
    tmp_path, fd = _create_temporary_file(directory, basename)
    try:
        with os.fdopen(fd, "wb") as file:
            if existing is not None:
                _copy_ownership_and_mode(fd, existing)
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        os.replace(tmp_path, path)
    except BaseException:
        try:
            os.unlink(tmp_path)
        except OSError:
            pass
        raise
    _fsync_directory(directory)


def _write_target(path: str) -> str:
    """The absolute path that writing ``path`` replaces: symbolic links followed.

    ``os.replace`` onto a link would replace the link itself; resolving it first
    writes through to its target, as ``open(path, "wb")`` does (a dangling link
    creates its target).
    """
    target = os.path.realpath(os.path.abspath(path))
    if os.path.islink(target):  # realpath gives up on a cycle of links
        raise OSError(errno.ELOOP, "Too many levels of symbolic links", path)
    return target


def _copy_ownership_and_mode(fd: int, existing: os.stat_result) -> None:
    """Give the new file the replaced file's owner, group and permission bits.

    The owner and group are kept where the OS lets this process set them (root,
    or a group it belongs to) and left as created otherwise; the mode is set
    after them because ``chown`` may clear the set-id bits.
    """
    if hasattr(os, "fchown"):
        try:
            os.fchown(fd, existing.st_uid, existing.st_gid)
        except OSError:
            try:
                os.fchown(fd, -1, existing.st_gid)
            except OSError:
                pass
    if hasattr(os, "fchmod"):
        os.fchmod(fd, stat.S_IMODE(existing.st_mode))


def _create_temporary_file(directory: str, basename: str) -> tuple[str, int]:
    """Create and open a new, uniquely named file next to the target.

    ``os.open`` with mode 0o666 lets the process umask set the permissions, as
    for a file written with ``open(path, "wb")`` (``tempfile.mkstemp`` would
    make it 0o600).
    """
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
    for _ in range(100):
        tmp_path = os.path.join(directory, f".{basename}.{os.urandom(6).hex()}.tmp")
        try:
            return tmp_path, os.open(tmp_path, flags, 0o666)
        except FileExistsError:
            continue
    raise FileExistsError(f"could not create a temporary file in {directory!r}")


def _fsync_directory(directory: str) -> None:
    """Make the rename durable where the OS supports it (POSIX); best effort."""
    if os.name != "posix":
        return
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _padding(nbytes: int) -> int:
    return -nbytes % _ALIGNMENT


def _array_bytes(name: str, array: np.ndarray) -> bytes:
    """Validate one input array and return its little-endian C-order bytes."""
    if isinstance(array, np.generic):
        array = np.asarray(array)  # a NumPy scalar is stored as a 0-d array
    if not isinstance(array, np.ndarray):
        raise TypeError(f"array {name!r} must be a numpy.ndarray, got {type(array).__name__}")
    dtype_name = _DTYPE_NAMES.get((array.dtype.kind, array.dtype.itemsize))
    if dtype_name is None or array.dtype.fields is not None:
        raise TypeError(
            f"array {name!r} has unsupported dtype {array.dtype}; "
            f"supported: {', '.join(_DTYPES)}"
        )
    if array.ndim > _MAX_NDIM:
        raise ValueError(f"array {name!r} has {array.ndim} dimensions, at most {_MAX_NDIM} allowed")
    if dtype_name == "bool":
        # A bool array built by a view may hold bytes other than 0 and 1; store 0/1 only.
        array = array.view(np.uint8) != 0
    return array.astype(_DTYPES[dtype_name], copy=False).tobytes(order="C")


def _check_metadata(value: object, where: str, active: set[int]) -> None:
    """Raise TypeError naming ``where`` if ``value`` cannot round-trip through JSON."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return
    if isinstance(value, (dict, list)):
        if id(value) in active:
            raise TypeError(f"{where} contains a circular reference")
        active.add(id(value))
        if isinstance(value, dict):
            for key, item in value.items():
                if not isinstance(key, str):
                    raise TypeError(
                        f"{where} has a key {key!r} of type {type(key).__name__}; "
                        "metadata keys must be str"
                    )
                _check_metadata(item, f"{where}[{key!r}]", active)
        else:
            for index, item in enumerate(value):
                _check_metadata(item, f"{where}[{index}]", active)
        active.discard(id(value))
        return
    hint = "; use a list" if isinstance(value, tuple) else ""
    raise TypeError(
        f"{where} is of type {type(value).__name__}, which cannot be stored in a model file "
        f"(allowed: None, bool, int, float, str, list, dict){hint}"
    )


# --------------------------------------------------------------------------------------
# Reading
# --------------------------------------------------------------------------------------


def loads(data: bytes) -> tuple[dict, dict[str, np.ndarray]]:
    """Parse the bytes of a model file.

    Parameters
    ----------
    data : bytes, bytearray or memoryview
        The whole file.

    Returns
    -------
    metadata : dict
    arrays : dict of str to numpy.ndarray
        New, writeable, C-contiguous arrays in native byte order, in the order
        they were written.

    Raises
    ------
    ModelFileError
        For any content that is not a valid model file this PackBoost can read.
    TypeError
        If ``data`` is not a bytes-like object.
    """
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError(f"data must be bytes-like, got {type(data).__name__}")
    view = memoryview(data).cast("B")
    if len(view) < len(MAGIC):
        raise ModelFileError(f"not a PackBoost model file (too short: {len(view)} bytes)")
    if view[: len(MAGIC)] != MAGIC:
        raise ModelFileError("not a PackBoost model file (the magic bytes do not match)")
    if len(view) < _VERSION_OFFSET + _VERSION_STRUCT.size:
        raise ModelFileError(
            f"model file is truncated: {len(view)} bytes, too short to hold a format version"
        )
    (version,) = _VERSION_STRUCT.unpack_from(view, _VERSION_OFFSET)
    if version > FORMAT_VERSION:
        raise ModelFileError(
            f"model file was written by a newer packboost (format version {version}, "
            f"this one reads up to {FORMAT_VERSION}); upgrade packboost to read it"
        )
    reader = _READERS.get(version)
    if reader is None:
        raise ModelFileError(
            f"unsupported model file format version {version} "
            f"(this packboost reads versions {', '.join(map(str, sorted(_READERS)))})"
        )
    return reader(view)


def read_model_file(path: str | os.PathLike) -> tuple[dict, dict[str, np.ndarray]]:
    """Read a model file written by :func:`write_model_file`.

    The preamble is read first: a file of another kind, of a version this
    PackBoost cannot read, whose sizes disagree with its length or whose header
    exceeds :data:`MAX_HEADER_NBYTES` is refused before the rest is read.  At
    most the file's own bytes are read into memory.

    Raises
    ------
    FileNotFoundError, OSError
        From opening or reading ``path``, unchanged.
    ModelFileError
        If the content is not a valid model file; the message names ``path``.
    """
    path = os.fspath(path)
    try:
        with open(path, "rb") as file:
            data = _read_bounded(file)
        return loads(data)
    except ModelFileError as exc:
        raise ModelFileError(f"{os.fsdecode(path)!r}: {exc}") from None


def _read_bounded(file) -> bytes:
    """The bytes of ``file``, refused as early as its preamble allows."""
    # Look at the magic first: a large file of another kind (a parquet file
    # passed by mistake) is refused without being read into memory.
    data = file.read(len(MAGIC))
    if data != MAGIC:
        return data
    data += file.read(_V1_PREAMBLE.size)
    if len(data) < _V1_HEADER_OFFSET:
        return data
    (version,) = _VERSION_STRUCT.unpack_from(data, _VERSION_OFFSET)
    if version not in (1, 2):  # loads() says what is wrong from these bytes alone
        return data
    expected_nbytes = _v1_check_preamble(data, None)
    size = _regular_file_size(file)
    if size is not None:
        # The declared sizes must match the bytes present before they are read.
        _v1_check_preamble(data, size)
        return data + file.read(expected_nbytes - len(data))
    # A pipe or device: read what is there, never more than one byte past the end.
    chunks = [data]
    remaining = expected_nbytes + 1 - len(data)
    while remaining > 0:
        chunk = file.read(min(remaining, 1 << 24))
        if not chunk:
            break
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def _regular_file_size(file) -> int | None:
    try:
        info = os.fstat(file.fileno())
    except (OSError, AttributeError, ValueError):
        return None
    return info.st_size if stat.S_ISREG(info.st_mode) else None


def _v1_check_preamble(view, file_nbytes: int | None) -> int:
    """Check the sizes a version 1 preamble declares; return the file's expected length.

    ``file_nbytes``, when known, is the length the file actually has.
    """
    _, header_nbytes, payload_nbytes = _V1_PREAMBLE.unpack_from(view, len(MAGIC))
    expected_nbytes = _V1_HEADER_OFFSET + header_nbytes + payload_nbytes + _CHECKSUM_NBYTES
    if file_nbytes is not None:
        if file_nbytes < expected_nbytes:
            raise ModelFileError(
                f"model file is truncated: {file_nbytes} bytes, expected {expected_nbytes}"
            )
        if file_nbytes > expected_nbytes:
            raise ModelFileError(
                f"model file has {file_nbytes - expected_nbytes} bytes of trailing data "
                f"after its end (expected {expected_nbytes} bytes, got {file_nbytes})"
            )
    if header_nbytes > MAX_HEADER_NBYTES:
        raise ModelFileError(
            f"invalid model file: header of {header_nbytes} bytes exceeds the limit of "
            f"{MAX_HEADER_NBYTES} bytes"
        )
    return expected_nbytes


def _read_v1(view: memoryview) -> tuple[dict, dict[str, np.ndarray]]:
    """Read a format version 1 file (layout in the module docstring)."""
    if len(view) < _V1_HEADER_OFFSET + _CHECKSUM_NBYTES:
        raise ModelFileError(
            f"model file is truncated: {len(view)} bytes, shorter than the smallest "
            f"possible file ({_V1_HEADER_OFFSET + _CHECKSUM_NBYTES} bytes)"
        )
    _, header_nbytes, payload_nbytes = _V1_PREAMBLE.unpack_from(view, len(MAGIC))
    payload_offset = _V1_HEADER_OFFSET + header_nbytes
    expected_nbytes = _v1_check_preamble(view, len(view))
    checksum_offset = expected_nbytes - _CHECKSUM_NBYTES
    if hashlib.sha256(view[:checksum_offset]).digest() != view[checksum_offset:]:
        raise ModelFileError("model file is corrupted (checksum mismatch)")

    # From here on the bytes are what some writer meant to write, but not
    # necessarily this module: check everything before trusting it.
    if header_nbytes % _ALIGNMENT or payload_nbytes % _ALIGNMENT:
        raise ModelFileError(
            f"invalid model file: header ({header_nbytes} bytes) and payload "
            f"({payload_nbytes} bytes) sizes must be multiples of {_ALIGNMENT}"
        )
    header = _parse_header(view[_V1_HEADER_OFFSET:payload_offset])
    metadata = header["metadata"]
    entries = header["arrays"]
    if not isinstance(metadata, dict):
        raise ModelFileError("invalid model file header: 'metadata' must be a JSON object")
    if not isinstance(entries, list):
        raise ModelFileError("invalid model file header: 'arrays' must be a JSON array")
    entries = [_check_array_entry(index, entry) for index, entry in enumerate(entries)]
    _check_array_layout(entries, payload_nbytes)

    payload = view[payload_offset:checksum_offset]
    arrays = {}
    for name, dtype_name, shape, offset, nbytes in entries:
        dtype = _DTYPES[dtype_name]
        flat = np.frombuffer(payload, dtype=dtype, count=nbytes // dtype.itemsize, offset=offset)
        if dtype_name == "bool" and nbytes and flat.view(np.uint8).max() > 1:
            raise ModelFileError(
                f"invalid model file: bool array {name!r} holds bytes other than 0 and 1"
            )
        # Copy: detaches from the file's buffer, aligns and makes it writeable.
        arrays[name] = flat.astype(dtype.newbyteorder("="), copy=True).reshape(shape)
    return metadata, arrays


# The reader for each format version this PackBoost can read; see "Versions" above.
_READERS: dict[int, Callable[[memoryview], tuple[dict, dict[str, np.ndarray]]]] = {
    1: _read_v1, 2: _read_v1}


def _parse_header(raw: memoryview) -> dict:
    """Decode the JSON header strictly: ASCII/UTF-8, no duplicate keys, exact top-level keys.

    The header's structure is checked against the limits (depth, containers,
    estimated size of the parsed objects) before ``json.loads`` sees it.
    """
    problem = _header_limit_problem(raw)
    if problem is not None:
        raise ModelFileError(f"invalid model file header: {problem}")
    try:
        text = codecs.decode(raw, "utf-8")  # one copy, straight from the file's buffer
    except ValueError as exc:
        raise ModelFileError(f"invalid model file header: {exc}") from None
    try:
        header = json.loads(text, object_pairs_hook=_object_without_duplicates)
    except (ValueError, RecursionError) as exc:
        # ValueError covers JSONDecodeError, duplicate keys and integers too
        # long to convert.
        message = str(exc) if not isinstance(exc, RecursionError) else "nested too deeply"
        raise ModelFileError(f"invalid model file header: {message}") from None
    if not isinstance(header, dict) or set(header) != {"metadata", "arrays"}:
        raise ModelFileError(
            "invalid model file header: expected a JSON object with keys 'metadata' and 'arrays'"
        )
    return header


_SCAN_CHUNK = 1 << 16  # bytes of header scanned at a time: bounds the scan's memory


def _header_limit_problem(raw) -> str | None:
    """What makes the JSON bytes ``raw`` exceed the header limits, or None.

    Linear in the bytes, in bounded memory and without parsing them: a scan
    that tells JSON strings (escapes included) from structure counts the
    strings, the lists and objects, their depth and the commas and colons.
    Fed to ``json.loads``, a header within the limits costs at most
    :func:`_json_cost` of those counts.
    """
    data = np.frombuffer(raw, dtype=np.uint8)
    if len(data) > MAX_HEADER_NBYTES:
        return f"header of {len(data)} bytes exceeds the limit of {MAX_HEADER_NBYTES} bytes"
    counts = dict.fromkeys(("strings", "string_nbytes", "containers", "commas", "colons"), 0)
    in_string = False
    backslash_run_odd = False  # the previous chunk ended in an odd run of backslashes
    depth = deepest = 0
    for start in range(0, len(data), _SCAN_CHUNK):
        chunk = data[start:start + _SCAN_CHUNK]
        index = np.arange(len(chunk), dtype=np.int32)
        backslash = chunk == ord("\\")
        # Last non-backslash at or before each position; a character is escaped
        # when the run of backslashes right before it has odd length.
        last_other = np.maximum.accumulate(np.where(backslash, np.int32(-1), index))
        run = index[:-1] - last_other[:-1]
        run_odd = np.empty(len(chunk), dtype=bool)
        run_odd[0] = backslash_run_odd
        run_odd[1:] = (run % 2).astype(bool) ^ ((last_other[:-1] < 0) & backslash_run_odd)
        last_run = len(chunk) - 1 - int(last_other[-1])
        backslash_run_odd = bool(last_run % 2) ^ (int(last_other[-1]) < 0 and backslash_run_odd)
        quote = (chunk == ord('"')) & ~run_odd
        del last_other, run, run_odd, backslash
        # Inside a string after each character: the parity of the quotes so far.
        inside = (np.cumsum(quote, dtype=np.int32) + in_string) % 2 == 1
        in_string = bool(inside[-1])
        counts["strings"] += int(np.count_nonzero(quote & inside))
        counts["string_nbytes"] += int(np.count_nonzero(inside))
        outside = ~inside & ~quote
        del inside, quote
        opens = outside & ((chunk == ord("[")) | (chunk == ord("{")))
        closes = outside & ((chunk == ord("]")) | (chunk == ord("}")))
        counts["containers"] += int(np.count_nonzero(opens))
        counts["commas"] += int(np.count_nonzero(outside & (chunk == ord(","))))
        counts["colons"] += int(np.count_nonzero(outside & (chunk == ord(":"))))
        if counts["containers"] > MAX_JSON_CONTAINERS:
            return (f"more than {MAX_JSON_CONTAINERS} JSON lists and objects (the limit)")
        steps = opens.astype(np.int8) - closes.astype(np.int8)
        levels = np.cumsum(steps, dtype=np.int32) + depth
        if len(levels):
            if levels.min() < 0:
                return "unbalanced JSON brackets"
            deepest = max(deepest, int(levels.max()))
            depth = int(levels[-1])
        if deepest > MAX_JSON_DEPTH:
            return f"JSON nested more than {MAX_JSON_DEPTH} deep (the limit)"
    cost = _json_cost(
        nbytes=len(data),
        string_nbytes=counts["string_nbytes"],
        n_strings=counts["strings"],
        n_containers=counts["containers"],
        n_commas=counts["commas"],
        n_colons=counts["colons"],
    )
    limit = JSON_COST_PER_BYTE * len(data) + JSON_COST_SLACK
    if cost > limit:
        return (f"parsing it would take about {cost} bytes of memory, over the limit of "
                f"{limit} bytes ({JSON_COST_PER_BYTE} x its size + {JSON_COST_SLACK})")
    return None


def _json_cost(*, nbytes, string_nbytes, n_strings, n_containers, n_commas, n_colons) -> int:
    """An upper bound of the bytes CPython's ``json.loads`` allocates for a document.

    Per value a list slot (8); a string its object (64 with rounding) plus up
    to 4 bytes per character (one character beyond U+FFFF widens them all);
    any other scalar (int, float) 40; a container 128; an object
    member a hash-table entry and the (key, value) pair of ``object_pairs_hook``
    (120); plus the text once for long numbers.  A document has at most
    ``n_commas + n_containers + 1`` values besides its keys (``n_colons``).
    """
    n_values = n_commas + n_containers + 1
    n_other_scalars = max(0, n_values - (n_strings - n_colons))
    return (8 * n_values + 64 * n_strings + 4 * string_nbytes + 40 * n_other_scalars
            + 120 * n_colons + 128 * n_containers + nbytes)


def _object_without_duplicates(pairs: list[tuple[str, object]]) -> dict:
    result = dict(pairs)
    if len(result) != len(pairs):
        seen = set()
        for key, _ in pairs:
            if key in seen:
                raise ValueError(f"duplicate key {key!r}")
            seen.add(key)
    return result


def _check_array_entry(index: int, entry: object) -> tuple[str, str, tuple[int, ...], int, int]:
    """Validate one header entry on its own; return (name, dtype, shape, offset, nbytes)."""
    if not isinstance(entry, dict) or set(entry) != _ARRAY_ENTRY_KEYS:
        raise ModelFileError(
            f"invalid model file header: array entry {index} must be an object with keys "
            f"{sorted(_ARRAY_ENTRY_KEYS)}"
        )
    name = entry["name"]
    if not isinstance(name, str):
        raise ModelFileError(f"invalid model file header: array entry {index} has a non-str name")
    where = f"invalid model file header: array {name!r}"
    dtype_name = entry["dtype"]
    if not isinstance(dtype_name, str) or dtype_name not in _DTYPES:
        raise ModelFileError(f"{where} has unsupported dtype {dtype_name!r}")
    shape = entry["shape"]
    if (
        not isinstance(shape, list)
        or len(shape) > _MAX_NDIM
        or not all(_is_count(dim) for dim in shape)
    ):
        raise ModelFileError(
            f"{where} has invalid shape {_short_repr(shape)} "
            f"(expected a list of at most {_MAX_NDIM} non-negative integers)"
        )
    offset = entry["offset"]
    nbytes = entry["nbytes"]
    if not _is_count(offset) or not _is_count(nbytes):
        raise ModelFileError(f"{where} has an invalid offset or nbytes")
    itemsize = _DTYPES[dtype_name].itemsize
    # Python integers: no overflow however large the forged dimensions are.
    if math.prod(shape) * itemsize != nbytes:
        raise ModelFileError(
            f"{where}: nbytes {nbytes} does not match shape {_short_repr(shape)} "
            f"of {dtype_name} ({itemsize} bytes per item)"
        )
    # NumPy refuses shapes whose non-zero dimensions multiply past the index
    # range even when a zero dimension makes the array empty.
    if math.prod(max(dim, 1) for dim in shape) * itemsize > sys.maxsize:
        raise ModelFileError(f"{where} has a shape too large for this platform")
    return name, dtype_name, tuple(shape), offset, nbytes


def _check_array_layout(entries: list[tuple], payload_nbytes: int) -> None:
    """Check names are unique and arrays are aligned, in the payload and disjoint."""
    names = set()
    for name, _, _, offset, nbytes in entries:
        if name in names:
            raise ModelFileError(f"invalid model file header: duplicate array name {name!r}")
        names.add(name)
        if offset % _ALIGNMENT:
            raise ModelFileError(
                f"invalid model file header: array {name!r} offset {offset} "
                f"is not a multiple of {_ALIGNMENT}"
            )
        if offset + nbytes > payload_nbytes:
            raise ModelFileError(
                f"invalid model file header: array {name!r} (offset {offset}, {nbytes} bytes) "
                f"extends past the end of the {payload_nbytes}-byte payload"
            )
    previous_end = 0
    previous_name = None
    for name, _, _, offset, nbytes in sorted(entries, key=lambda entry: (entry[3], entry[4])):
        if offset < previous_end:
            raise ModelFileError(
                f"invalid model file header: arrays {previous_name!r} and {name!r} overlap"
            )
        previous_end = offset + nbytes
        previous_name = name


def _is_count(value: object) -> bool:
    """A JSON non-negative integer (``true``/``false`` are not integers here)."""
    return type(value) is int and value >= 0


def _short_repr(value: object, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
