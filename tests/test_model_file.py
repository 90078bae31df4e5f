"""Tests for packboost.model_file: round trips, the documented layout, and that
every malformed byte string raises ModelFileError (never anything else)."""

import hashlib
import json
import math
import os
import pathlib
import pickle
import stat as stat_module
import struct
import tracemalloc

import numpy as np
import pytest

from packboost import model_file
from packboost.model_file import (
    FORMAT_VERSION,
    ModelFileError,
    dumps,
    loads,
    read_model_file,
    write_model_file,
)

MAGIC = b"\x89PKBOOST"
HEADER_OFFSET = 24
CHECKSUM_NBYTES = 32

DTYPES = [
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
]
SHAPES = [(), (0,), (1,), (7,), (3, 5), (0, 4), (4, 0, 2), (2, 3, 4)]


# ----------------------------------------------------------------------------- helpers


def random_array(rng, dtype, shape):
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        return np.asarray(rng.random(shape) < 0.5)
    if dtype.kind == "f":
        values = rng.standard_normal(shape).astype(dtype)
        if values.size > 2:
            values.flat[0] = np.nan
            values.flat[1] = -np.inf
        return values
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, size=shape, dtype=dtype, endpoint=True)


def assert_arrays_equal(loaded, expected):
    assert list(loaded) == list(expected)
    for name, array in expected.items():
        got = loaded[name]
        assert isinstance(got, np.ndarray)
        assert got.dtype == array.dtype.newbyteorder("=")
        assert got.shape == array.shape
        assert got.flags.c_contiguous
        assert got.flags.writeable
        assert got.flags.owndata or got.base is not None  # a real array, not a view of input
        np.testing.assert_array_equal(got, array)


def same_json(left, right):
    """Equality that treats NaN as equal to NaN and 1 as different from 1.0."""
    return json.dumps(left) == json.dumps(right)


def forge(header, payload=b"", version=1, header_nbytes=None):
    """Build a file with a *valid* checksum around an arbitrary header and payload.

    Independent of the module's writer, so it also pins the documented layout.
    """
    if not isinstance(header, bytes):
        header = json.dumps(header).encode("ascii")
    header += b" " * (-len(header) % 8)
    if header_nbytes is None:
        header_nbytes = len(header)
    body = MAGIC + struct.pack("<IIQ", version, header_nbytes, len(payload)) + header + payload
    return body + hashlib.sha256(body).digest()


def resign(data):
    """Recompute the trailing checksum of a (possibly modified) file."""
    body = data[:-CHECKSUM_NBYTES]
    return body + hashlib.sha256(body).digest()


def small_file():
    metadata = {"objective": "squared_error", "n_rounds": 3, "names": ["a", "b"]}
    arrays = {
        "feature": np.array([0, 1, -1], dtype=np.int32),
        "value": np.array([0.5, -0.25], dtype=np.float64),
        "flag": np.array(True),
    }
    return dumps(metadata, arrays)


# ----------------------------------------------------------------------------- round trips


@pytest.mark.parametrize("dtype", DTYPES)
def test_round_trip_every_dtype_and_shape(dtype):
    rng = np.random.default_rng(0)
    arrays = {f"a{i}": random_array(rng, dtype, shape) for i, shape in enumerate(SHAPES)}
    metadata, loaded = loads(dumps({"dtype": dtype}, arrays))
    assert metadata == {"dtype": dtype}
    assert_arrays_equal(loaded, arrays)


def test_round_trip_extreme_values():
    arrays = {
        "i64": np.array([np.iinfo(np.int64).min, np.iinfo(np.int64).max, 0], dtype=np.int64),
        "u64": np.array([0, np.iinfo(np.uint64).max], dtype=np.uint64),
        "f32": np.array([np.finfo(np.float32).tiny, -0.0, np.inf, np.nan], dtype=np.float32),
        "f64": np.array([5e-324, np.finfo(np.float64).max, -np.inf], dtype=np.float64),
    }
    _, loaded = loads(dumps({}, arrays))
    assert_arrays_equal(loaded, arrays)
    assert np.signbit(loaded["f32"][1])


def test_round_trip_non_contiguous_and_fortran_inputs():
    base = np.arange(60, dtype=np.float64).reshape(6, 10)
    arrays = {
        "strided": base[::2, 1::3],
        "transposed": base.T,
        "fortran": np.asfortranarray(base),
        "negative_stride": base[::-1, ::-2],
        "broadcast": np.broadcast_to(np.arange(3, dtype=np.int16), (4, 3)),
    }
    _, loaded = loads(dumps({}, arrays))
    assert_arrays_equal(loaded, arrays)


@pytest.mark.parametrize("dtype", ["int16", "int32", "int64", "uint32", "float32", "float64"])
def test_big_endian_input_comes_back_with_equal_values(dtype):
    native = random_array(np.random.default_rng(1), dtype, (3, 4))
    big = native.astype(np.dtype(dtype).newbyteorder(">"))
    _, loaded = loads(dumps({}, {"x": big, "scalar": big[:1, :1].reshape(())}))
    assert loaded["x"].dtype == np.dtype(dtype)
    assert loaded["x"].dtype.isnative
    np.testing.assert_array_equal(loaded["x"], native)
    np.testing.assert_array_equal(loaded["scalar"], native[0, 0])


def test_bool_array_with_non_canonical_bytes_is_stored_as_true():
    raw = np.array([0, 1, 2, 255], dtype=np.uint8).view(np.bool_)
    _, loaded = loads(dumps({}, {"b": raw}))
    assert loaded["b"].tolist() == [False, True, True, True]
    assert loaded["b"].view(np.uint8).tolist() == [0, 1, 1, 1]


def test_round_trip_nested_metadata():
    metadata = {
        "params": {"learning_rate": 0.1, "max_depth": 6, "pack_size": 8, "seed": None},
        "feature_names": ["feature_\u00e9", "f\u00fc\u00fc", "\U0001f332", "", "lone \udc80"],
        "flags": [True, False, None],
        "floats": [1.0, -0.0, 1e-310, 1.7976931348623157e308, math.nan, math.inf, -math.inf],
        "ints": [0, -1, 2**63 - 1, 2**64 + 5, -(2**70)],
        "nested": {"a": [{"b": [[], {}]}], "empty": {}},
        "numpy_float": np.float64(0.25),
    }
    loaded, arrays = loads(dumps(metadata, {}))
    assert arrays == {}
    assert same_json(loaded, metadata)
    assert list(loaded) == list(metadata)  # key order kept
    assert type(loaded["floats"][0]) is float
    assert math.copysign(1.0, loaded["floats"][1]) == -1.0
    assert math.isnan(loaded["floats"][4])


def test_empty_model_round_trip():
    assert loads(dumps({}, {})) == ({}, {})


def test_array_names_and_order_are_kept():
    names = ["z", "", "\u00e9", "a"]
    arrays = {name: np.arange(i + 1, dtype=np.int8) for i, name in enumerate(names)}
    _, loaded = loads(dumps({}, arrays))
    assert list(loaded) == names
    assert_arrays_equal(loaded, arrays)


def test_loads_accepts_bytes_like_and_arrays_do_not_share_its_memory():
    data = bytearray(dumps({}, {"x": np.arange(4, dtype=np.int64)}))
    _, from_bytearray = loads(data)
    _, from_memoryview = loads(memoryview(data))
    data[:] = b"\0" * len(data)
    from_bytearray["x"][0] = 10
    np.testing.assert_array_equal(from_bytearray["x"], [10, 1, 2, 3])
    np.testing.assert_array_equal(from_memoryview["x"], [0, 1, 2, 3])


def test_loads_rejects_non_bytes_argument():
    with pytest.raises(TypeError, match="bytes-like"):
        loads("not bytes")


def test_dumps_is_deterministic():
    arrays = {"x": np.arange(5, dtype=np.float32), "y": np.eye(2, dtype=bool)}
    assert dumps({"a": 1}, arrays) == dumps({"a": 1}, arrays)


# ----------------------------------------------------------------------------- layout


def test_documented_layout():
    arrays = {"a": np.arange(3, dtype=np.int8), "b": np.array([1.5, 2.5])}
    data = dumps({"k": "v"}, arrays)
    assert data[:8] == MAGIC
    version, header_nbytes, payload_nbytes = struct.unpack_from("<IIQ", data, 8)
    assert version == FORMAT_VERSION == 2  # version 1's layout (model_file's notes)
    assert header_nbytes % 8 == 0 and payload_nbytes % 8 == 0
    assert len(data) == HEADER_OFFSET + header_nbytes + payload_nbytes + CHECKSUM_NBYTES
    assert data[-CHECKSUM_NBYTES:] == hashlib.sha256(data[:-CHECKSUM_NBYTES]).digest()
    raw_header = data[HEADER_OFFSET : HEADER_OFFSET + header_nbytes]
    raw_header.decode("ascii")
    header = json.loads(raw_header)
    assert header == {
        "metadata": {"k": "v"},
        "arrays": [
            {"name": "a", "dtype": "int8", "shape": [3], "offset": 0, "nbytes": 3},
            {"name": "b", "dtype": "float64", "shape": [2], "offset": 8, "nbytes": 16},
        ],
    }
    payload = data[HEADER_OFFSET + header_nbytes : -CHECKSUM_NBYTES]
    assert payload == bytes([0, 1, 2, 0, 0, 0, 0, 0]) + struct.pack("<2d", 1.5, 2.5)


def test_forge_helper_builds_loadable_files():
    header = {
        "metadata": {"x": 1},
        "arrays": [{"name": "v", "dtype": "uint16", "shape": [2], "offset": 0, "nbytes": 4}],
    }
    metadata, arrays = loads(forge(header, struct.pack("<2H", 7, 65535) + b"\0" * 4))
    assert metadata == {"x": 1}
    assert arrays["v"].tolist() == [7, 65535]


# ----------------------------------------------------------------------------- malformed files


def test_truncation_at_every_prefix_length():
    data = small_file()
    for length in range(len(data)):
        with pytest.raises(ModelFileError) as info:
            loads(data[:length])
        message = str(info.value)
        if length < len(MAGIC):
            assert "not a PackBoost model file" in message
        else:
            assert "truncated" in message, (length, message)


def test_trailing_data():
    with pytest.raises(ModelFileError, match="trailing data"):
        loads(small_file() + b"\0")


def test_every_single_bit_flip_is_detected():
    data = small_file()
    for position in range(len(data)):
        for bit in range(8):
            corrupted = bytearray(data)
            corrupted[position] ^= 1 << bit
            with pytest.raises(ModelFileError):
                loads(bytes(corrupted))


def test_bit_flip_in_body_reports_checksum_mismatch():
    data = bytearray(small_file())
    data[-CHECKSUM_NBYTES - 1] ^= 0x10  # last payload byte
    with pytest.raises(ModelFileError, match=r"corrupted \(checksum mismatch\)"):
        loads(bytes(data))
    data = bytearray(small_file())
    data[-1] ^= 0x01  # in the checksum itself
    with pytest.raises(ModelFileError, match="checksum mismatch"):
        loads(bytes(data))


def test_bit_flips_in_header_with_recomputed_checksum_never_crash():
    """Forged headers (checksum fixed up): either a clean load or ModelFileError."""
    data = small_file()
    header_nbytes = struct.unpack_from("<I", data, 12)[0]
    rng = np.random.default_rng(2)
    for position in range(HEADER_OFFSET, HEADER_OFFSET + header_nbytes):
        for bit in rng.choice(8, size=3, replace=False):
            corrupted = bytearray(data)
            corrupted[position] ^= 1 << int(bit)
            try:
                metadata, arrays = loads(resign(bytes(corrupted)))
            except ModelFileError:
                continue
            assert isinstance(metadata, dict)
            assert all(isinstance(array, np.ndarray) for array in arrays.values())


def test_wrong_magic():
    data = bytearray(small_file())
    data[1:3] = b"XX"
    with pytest.raises(ModelFileError, match="not a PackBoost model file"):
        loads(bytes(data))
    for junk in [b"", b"\x89", b"PK\x03\x04 a zip file", b"\x93NUMPY" + b"\0" * 100]:
        with pytest.raises(ModelFileError, match="not a PackBoost model file"):
            loads(junk)


def test_newer_format_version_is_reported_as_such():
    data = bytearray(small_file())
    data[8:12] = struct.pack("<I", 3)
    expected = r"written by a newer packboost \(format version 3, this one reads up to 2\)"
    with pytest.raises(ModelFileError, match=expected):
        loads(resign(bytes(data)))
    # The version is checked before the layout, which a newer version may change.
    with pytest.raises(ModelFileError, match="newer packboost"):
        loads(MAGIC + struct.pack("<I", 7) + b"whatever layout v7 has")


def test_version_zero_is_unsupported():
    data = bytearray(small_file())
    data[8:12] = struct.pack("<I", 0)
    with pytest.raises(ModelFileError, match="unsupported model file format version 0"):
        loads(resign(bytes(data)))


def test_readers_dispatch_by_version(monkeypatch):
    """A future version registers a reader; older files keep loading."""
    current = small_file()  # written in this packboost's newest version
    calls = []

    def read_v3(view):
        calls.append(bytes(view))
        return {"v": 3}, {}

    monkeypatch.setattr(model_file, "FORMAT_VERSION", 3)
    monkeypatch.setitem(model_file._READERS, 3, read_v3)
    v3_file = MAGIC + struct.pack("<I", 3) + b"new layout"
    assert loads(v3_file) == ({"v": 3}, {})
    assert calls == [v3_file]
    metadata, arrays = loads(current)
    assert metadata["n_rounds"] == 3 and set(arrays) == {"feature", "value", "flag"}
    version_1 = bytearray(current)
    version_1[8:12] = struct.pack("<I", 1)
    assert loads(resign(bytes(version_1)))[0]["n_rounds"] == 3


def array_entry(**overrides):
    entry = {"name": "x", "dtype": "float64", "shape": [2], "offset": 0, "nbytes": 16}
    entry.update(overrides)
    return entry


PAYLOAD_16 = b"\0" * 16

BAD_HEADERS = {
    "not json": (b"{not json", "invalid model file header"),
    "not utf-8": (b'{"metadata": {"\xff": 1}, "arrays": []}', "invalid model file header"),
    "top level list": ([], "keys 'metadata' and 'arrays'"),
    "missing arrays": ({"metadata": {}}, "keys 'metadata' and 'arrays'"),
    "extra key": ({"metadata": {}, "arrays": [], "x": 1}, "keys 'metadata' and 'arrays'"),
    "duplicate key": (b'{"metadata": {}, "metadata": {}, "arrays": []}', "duplicate key"),
    "duplicate nested key": (
        b'{"metadata": {"a": 1, "a": 2}, "arrays": []}',
        "duplicate key",
    ),
    "metadata not object": ({"metadata": [1], "arrays": []}, "'metadata' must be"),
    "arrays not list": ({"metadata": {}, "arrays": {}}, "'arrays' must be"),
    "entry not object": ({"metadata": {}, "arrays": [1]}, "array entry 0"),
    "entry missing key": (
        {"metadata": {}, "arrays": [{"name": "x", "dtype": "float64", "shape": [2]}]},
        "array entry 0",
    ),
    "entry extra key": ({"metadata": {}, "arrays": [array_entry(order="F")]}, "array entry 0"),
    "name not str": ({"metadata": {}, "arrays": [array_entry(name=3)]}, "non-str name"),
    "object dtype": ({"metadata": {}, "arrays": [array_entry(dtype="object")]}, "dtype"),
    "numpy dtype string": ({"metadata": {}, "arrays": [array_entry(dtype="<f8")]}, "dtype"),
    "float16": ({"metadata": {}, "arrays": [array_entry(dtype="float16")]}, "dtype"),
    "dtype not str": ({"metadata": {}, "arrays": [array_entry(dtype=["f8"])]}, "dtype"),
    "negative dim": ({"metadata": {}, "arrays": [array_entry(shape=[-2])]}, "invalid shape"),
    "float dim": ({"metadata": {}, "arrays": [array_entry(shape=[2.0])]}, "invalid shape"),
    "bool dim": (
        {"metadata": {}, "arrays": [array_entry(shape=[True, True], nbytes=8)]},
        "invalid shape",
    ),
    "shape not list": ({"metadata": {}, "arrays": [array_entry(shape=2)]}, "invalid shape"),
    "too many dims": ({"metadata": {}, "arrays": [array_entry(shape=[1] * 33)]}, "invalid shape"),
    "nbytes mismatch": ({"metadata": {}, "arrays": [array_entry(nbytes=8)]}, "does not match"),
    "negative offset": ({"metadata": {}, "arrays": [array_entry(offset=-8)]}, "invalid offset"),
    "unaligned offset": (
        {"metadata": {}, "arrays": [array_entry(dtype="int8", offset=3, nbytes=2)]},
        "not a multiple of 8",
    ),
    "past payload": ({"metadata": {}, "arrays": [array_entry(offset=8)]}, "past the end"),
    "overlap": (
        {
            "metadata": {},
            "arrays": [
                array_entry(),
                array_entry(name="y", dtype="int32", shape=[1], offset=8, nbytes=4),
            ],
        },
        "overlap",
    ),
    "duplicate name": (
        {
            "metadata": {},
            "arrays": [
                array_entry(shape=[1], nbytes=8),
                array_entry(shape=[1], nbytes=8, offset=8),
            ],
        },
        "duplicate array name",
    ),
    "huge shape": (
        {"metadata": {}, "arrays": [array_entry(shape=[2**40, 2**40], nbytes=2**83)]},
        "too large",
    ),
    "large shape": (
        {"metadata": {}, "arrays": [array_entry(shape=[2**20, 2**20], nbytes=2**43)]},
        "past the end",
    ),
    "huge shape, small nbytes": (
        {"metadata": {}, "arrays": [array_entry(shape=[2**62, 2**62], nbytes=16)]},
        "does not match",
    ),
    "empty but huge dims": (
        {"metadata": {}, "arrays": [array_entry(shape=[0, 2**62, 2**62], nbytes=0)]},
        "too large",
    ),
    "empty but dim past int64": (
        {"metadata": {}, "arrays": [array_entry(shape=[0, 2**64], nbytes=0)]},
        "too large",
    ),
    "integer too long": (b'{"metadata": {"a": ' + b"9" * 5000 + b'}, "arrays": []}', "header"),
    "deep nesting": (b'{"metadata": {"a": ' + b"[" * 100_000 + b"]" * 100_000 + b"}}", "header"),
}


@pytest.mark.parametrize("case", list(BAD_HEADERS))
def test_invalid_header_with_valid_checksum(case):
    header, message = BAD_HEADERS[case]
    with pytest.raises(ModelFileError, match=message):
        loads(forge(header, PAYLOAD_16))


def test_bool_payload_bytes_must_be_0_or_1():
    header = {"metadata": {}, "arrays": [array_entry(dtype="bool", shape=[3], nbytes=3)]}
    with pytest.raises(ModelFileError, match="other than 0 and 1"):
        loads(forge(header, bytes([1, 0, 2]) + b"\0" * 5))


def test_header_and_payload_sizes_must_be_aligned():
    with pytest.raises(ModelFileError, match="multiples of 8"):
        loads(forge(b'{"metadata":{},"arrays":[]}', b"\0" * 3))
    body = MAGIC + struct.pack("<IIQ", 1, 3, 0) + b"{} "
    with pytest.raises(ModelFileError, match="multiples of 8"):
        loads(body + hashlib.sha256(body).digest())


def test_zero_size_arrays_may_sit_at_the_payload_end():
    header = {
        "metadata": {},
        "arrays": [array_entry(), array_entry(name="e", shape=[0, 3], offset=16, nbytes=0)],
    }
    _, arrays = loads(forge(header, PAYLOAD_16))
    assert arrays["e"].shape == (0, 3)


def test_forged_huge_sizes_do_not_allocate():
    cases = [
        # header_nbytes field claims 4 GiB
        forge(b'{"metadata":{},"arrays":[]}', header_nbytes=2**32 - 8),
        # payload_nbytes field claims 2**63 bytes
        MAGIC + struct.pack("<IIQ", 1, 0, 2**63) + b"\0" * 32,
        forge({"metadata": {}, "arrays": [array_entry(shape=[2**31, 2**31], nbytes=2**65)]}),
        forge({"metadata": {}, "arrays": [array_entry(shape=[0, 2**40, 2**40], nbytes=0)]}),
    ]
    tracemalloc.start()
    try:
        for data in cases:
            with pytest.raises(ModelFileError):
                loads(data)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20


def test_random_junk_never_raises_anything_but_model_file_error():
    rng = np.random.default_rng(3)
    prefixes = [
        b"",
        MAGIC,
        MAGIC + struct.pack("<I", 1),
        MAGIC + struct.pack("<IIQ", 1, 8, 0),
        MAGIC + struct.pack("<IIQ", 1, 8, 8),
    ]
    for trial in range(2000):
        prefix = prefixes[trial % len(prefixes)]
        junk = prefix + rng.bytes(int(rng.integers(0, 200)))
        with pytest.raises(ModelFileError):
            loads(junk)
        if len(junk) >= HEADER_OFFSET + CHECKSUM_NBYTES:
            # Same junk with a valid checksum reaches the header parser.
            try:
                loads(resign(junk))
            except ModelFileError:
                pass


def test_random_json_headers_never_crash():
    rng = np.random.default_rng(4)
    values = [None, True, -1, 0, 8, 16, 2**70, 1.5, "x", "float64", "bool", [], [2], [0, 3], {}]
    for _ in range(500):
        entry = {
            key: values[int(rng.integers(len(values)))]
            for key in ["name", "dtype", "shape", "offset", "nbytes"]
            if rng.random() < 0.9
        }
        header = {"metadata": {}, "arrays": [entry]}
        try:
            _, arrays = loads(forge(header, PAYLOAD_16))
        except ModelFileError:
            continue
        assert len(arrays) == 1


# ----------------------------------------------------------------------------- writer errors


@pytest.mark.parametrize(
    ("metadata", "where"),
    [
        ({"a": {1, 2}}, r"metadata\['a'\]"),
        ({"a": {"b": [1, object()]}}, r"metadata\['a'\]\['b'\]\[1\]"),
        ({"a": (1, 2)}, "use a list"),
        ({"a": np.int64(3)}, r"metadata\['a'\]"),
        ({"a": np.arange(3)}, r"metadata\['a'\]"),
        ({"a": b"bytes"}, r"metadata\['a'\]"),
        ({1: "int key"}, "key 1"),
        ({"a": {None: 1}}, r"metadata\['a'\] has a key None"),
    ],
)
def test_non_serialisable_metadata_raises_type_error_naming_key(metadata, where):
    with pytest.raises(TypeError, match=where):
        dumps(metadata, {})


def test_metadata_must_be_dict_and_acyclic():
    with pytest.raises(TypeError, match="metadata must be a dict"):
        dumps([1, 2], {})
    cyclic = {"a": []}
    cyclic["a"].append(cyclic)
    with pytest.raises(TypeError, match="circular reference"):
        dumps(cyclic, {})
    shared = [1]
    loaded, _ = loads(dumps({"a": shared, "b": shared}, {}))  # shared, not cyclic: fine
    assert loaded == {"a": [1], "b": [1]}


@pytest.mark.parametrize(
    "array",
    [
        np.array([object(), 1], dtype=object),
        np.array(["a", "b"]),
        np.array([b"a"]),
        np.array([1 + 2j]),
        np.array([1.0], dtype=np.float16),
        np.array(["2020-01-01"], dtype="datetime64[D]"),
        np.array([1], dtype="timedelta64[s]"),
        np.zeros(2, dtype=[("a", "<i4"), ("b", "<f8")]),
        np.zeros(2, dtype=[("a", "<i8")]),
        np.zeros(2, dtype="V8"),
    ],
    ids=lambda array: str(array.dtype),
)
def test_unsupported_array_dtype_raises_type_error_naming_array(array):
    with pytest.raises(TypeError, match="'bad_array'"):
        dumps({}, {"ok": np.zeros(2), "bad_array": array})


def test_numpy_scalars_are_stored_as_0d_arrays():
    _, loaded = loads(dumps({}, {"s": np.float32(1.5), "b": np.bool_(True)}))
    assert loaded["s"].shape == () and loaded["s"].dtype == np.float32 and loaded["s"] == 1.5
    assert loaded["b"].shape == () and loaded["b"].dtype == np.bool_ and loaded["b"]


def test_array_values_and_names_are_checked():
    with pytest.raises(TypeError, match="'x' must be a numpy.ndarray"):
        dumps({}, {"x": [1, 2, 3]})
    with pytest.raises(TypeError, match="names must be str"):
        dumps({}, {0: np.zeros(2)})
    with pytest.raises(TypeError, match="arrays must be a mapping"):
        dumps({}, [np.zeros(2)])


def test_arrays_with_more_than_32_dimensions_are_refused():
    try:
        array = np.zeros((1,) * 33)
    except ValueError:
        pytest.skip("this NumPy cannot make 33-d arrays")
    with pytest.raises(ValueError, match="'deep'"):
        dumps({}, {"deep": array})


# ----------------------------------------------------------------------------- files


def test_file_round_trip_with_str_and_pathlike(tmp_path):
    arrays = {"x": np.arange(6, dtype=np.int32).reshape(2, 3)}
    for path in [tmp_path / "model.pbm", str(tmp_path / "model2.pbm")]:
        write_model_file(path, {"a": 1}, arrays)
        metadata, loaded = read_model_file(path)
        assert metadata == {"a": 1}
        assert_arrays_equal(loaded, arrays)
    assert sorted(os.listdir(tmp_path)) == ["model.pbm", "model2.pbm"]


def test_write_replaces_existing_file(tmp_path):
    path = tmp_path / "model.pbm"
    write_model_file(path, {"v": 1}, {})
    write_model_file(path, {"v": 2}, {"x": np.ones(3)})
    assert read_model_file(path)[0] == {"v": 2}
    assert os.listdir(tmp_path) == ["model.pbm"]


def test_write_relative_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write_model_file("relative.pbm", {}, {})
    assert read_model_file("relative.pbm") == ({}, {})
    assert os.listdir(tmp_path) == ["relative.pbm"]


@pytest.mark.skipif(os.name != "posix", reason="POSIX permission bits")
def test_written_file_permissions_follow_umask(tmp_path):
    umask = os.umask(0o022)
    os.umask(umask)
    path = tmp_path / "model.pbm"
    write_model_file(path, {}, {})
    assert path.stat().st_mode & 0o777 == 0o666 & ~umask


@pytest.mark.parametrize("failing", ["fsync", "replace", "write"])
def test_failed_write_leaves_old_file_intact_and_no_temporary_file(tmp_path, monkeypatch, failing):
    path = tmp_path / "model.pbm"
    write_model_file(path, {"version": "old"}, {"x": np.arange(3)})
    old_bytes = path.read_bytes()

    def fail(*args, **kwargs):
        raise OSError("simulated failure")

    if failing == "write":
        real_fdopen = os.fdopen

        class FailingFile:
            def __init__(self, fd, mode):
                self._file = real_fdopen(fd, mode)

            def __enter__(self):
                return self

            def __exit__(self, *exc):
                self._file.close()

            def write(self, data):
                self._file.write(data[: len(data) // 2])  # part of it lands on disk
                raise OSError("disk full")

        monkeypatch.setattr(os, "fdopen", FailingFile)
    else:
        monkeypatch.setattr(os, failing, fail)

    with pytest.raises(OSError):
        write_model_file(path, {"version": "new"}, {"x": np.arange(1000)})
    monkeypatch.undo()
    assert path.read_bytes() == old_bytes
    assert os.listdir(tmp_path) == ["model.pbm"]
    assert read_model_file(path)[0] == {"version": "old"}


def test_invalid_arguments_do_not_touch_the_disk(tmp_path):
    path = tmp_path / "model.pbm"
    with pytest.raises(TypeError):
        write_model_file(path, {"a": object()}, {})
    assert os.listdir(tmp_path) == []


def test_read_missing_file_and_os_errors_pass_through(tmp_path):
    with pytest.raises(FileNotFoundError):
        read_model_file(tmp_path / "missing.pbm")
    with pytest.raises(OSError):
        read_model_file(tmp_path)  # a directory
    with pytest.raises(FileNotFoundError):
        write_model_file(tmp_path / "no_such_dir" / "model.pbm", {}, {})


def test_read_bad_content_names_the_path(tmp_path):
    path = tmp_path / "junk.pbm"
    path.write_bytes(b"hello, not a model")
    with pytest.raises(ModelFileError, match="junk.pbm.*not a PackBoost model file"):
        read_model_file(path)
    path.write_bytes(small_file()[:-1])
    with pytest.raises(ModelFileError, match="truncated"):
        read_model_file(pathlib.Path(path))


def test_loading_never_unpickles(tmp_path, monkeypatch):
    path = tmp_path / "model.pbm"
    write_model_file(path, {"a": [1, 2]}, {"x": np.arange(4.0), "b": np.array([True])})

    def forbidden(*args, **kwargs):
        raise AssertionError("pickle used while loading a model file")

    for name in ["loads", "load", "Unpickler"]:
        monkeypatch.setattr(pickle, name, forbidden)
    monkeypatch.setattr(np, "load", forbidden)
    metadata, arrays = read_model_file(path)
    assert metadata == {"a": [1, 2]}
    np.testing.assert_array_equal(arrays["x"], [0.0, 1.0, 2.0, 3.0])


# ----------------------------------------------------------------------------- allocation bounds


def _nested(depth):
    return b'{"metadata":{"a":' + b"[" * depth + b"]" * depth + b'},"arrays":[]}'


FORGED_HEADERS = {
    "many empty lists": {"metadata": {"x": [[] for _ in range(200_000)]}, "arrays": []},
    "many empty objects": {"metadata": {"x": [{} for _ in range(200_000)]}, "arrays": []},
    "many short strings": {"metadata": {"x": ["ab"] * 300_000}, "arrays": []},
    "many floats": {"metadata": {"x": [0.5] * 600_000}, "arrays": []},
    "huge object": {"metadata": {f"k{i}": 0 for i in range(200_000)}, "arrays": []},
    "deep nesting": _nested(model_file.MAX_JSON_DEPTH + 1),
    "very deep nesting": _nested(100_000),
}


@pytest.mark.parametrize("header", FORGED_HEADERS.values(), ids=FORGED_HEADERS)
def test_forged_json_headers_are_refused_before_parsing(header):
    """A valid checksum around a header whose parse would cost many times its size."""
    data = forge(header)
    tracemalloc.start()
    try:
        with pytest.raises(ModelFileError, match="invalid model file header: .*limit"):
            loads(data)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # json.loads of these costs 8-25x the file; the refusal costs the scan,
    # which works through the header in chunks of bounded size.
    assert peak < 2 * len(data) + (2 << 20), (peak, len(data))
    if not isinstance(header, bytes):
        with pytest.raises(ValueError, match="cannot be stored in a model file.*limit"):
            dumps(header["metadata"], {})  # the writer refuses what the reader would


ACCEPTED_HEADERS = {
    "floats": [0.5] * 50_000,
    "ints": list(range(10**6, 10**6 + 50_000)),
    "feature names": [f"feature_{i}" for i in range(30_000)],
    "long string": "x" * (4 << 20),
    "wide string": "\U0001f600" + "a" * (1 << 20),
    "escapes": '\\"[{,:}]' * 100_000,
}


@pytest.mark.parametrize("value", ACCEPTED_HEADERS.values(), ids=ACCEPTED_HEADERS)
def test_headers_within_the_limits_cost_at_most_the_documented_bound(value):
    data = dumps({"x": value}, {"a": np.arange(10)})
    tracemalloc.start()
    try:
        metadata, _ = loads(data)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert metadata == {"x": value}
    header_nbytes = struct.unpack_from("<I", data, 12)[0]
    bound = (model_file.JSON_COST_PER_BYTE * header_nbytes + model_file.JSON_COST_SLACK
             + 2 * len(data))
    assert peak < bound, (peak, bound)


def test_brackets_and_quotes_inside_strings_are_not_structure():
    """The scan reads strings as JSON does, escapes and chunk boundaries included."""
    metadata = {
        "brackets": ["[{[{" * 5 for _ in range(model_file.MAX_JSON_CONTAINERS)],
        "escapes": ["\\", '"', '\\"', "\\\\", '"]}', "\\" * 70_001 + '"' + "[" * 100],
        "across a chunk": "a" * (model_file._SCAN_CHUNK - 7) + '\\"[[[' + "\\" * 3,
    }
    for name in ["brackets", "escapes", "across a chunk"]:
        assert loads(dumps({name: metadata[name]}, {}))[0] == {name: metadata[name]}
    # An escaped quote does not end the string: the brackets after it are text.
    hidden = b'{"metadata":{"a":"\\\\\\"' + b"[" * 100 + b'"},"arrays":[]}'
    assert loads(forge(hidden))[0] == {"a": '\\"' + "[" * 100}


def test_unbalanced_brackets_are_refused():
    for header in [b'{"metadata":{}]]]]]]]],"arrays":[]}', b'{"metadata":{"a":[[[[},"arrays":[]}']:
        with pytest.raises(ModelFileError, match="invalid model file header"):
            loads(forge(header))


def test_declared_sizes_are_checked_against_the_file_before_it_is_read(tmp_path):
    path = tmp_path / "claims.pbm"
    # A 4 MiB file whose preamble claims a 1 TiB payload: refused from the preamble.
    path.write_bytes(MAGIC + struct.pack("<IIQ", 1, 8, 1 << 40) + b" " * (4 << 20))
    big_header = tmp_path / "big_header.pbm"
    with open(big_header, "wb") as file:  # sparse: the header claims more than the limit
        header_nbytes = model_file.MAX_HEADER_NBYTES + 8
        file.write(MAGIC + struct.pack("<IIQ", 1, header_nbytes, 0))
        file.truncate(HEADER_OFFSET + header_nbytes + CHECKSUM_NBYTES)
    tracemalloc.start()
    try:
        with pytest.raises(ModelFileError, match="truncated"):
            read_model_file(path)
        with pytest.raises(ModelFileError, match="exceeds the limit"):
            read_model_file(big_header)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 256 << 10


def test_reading_from_a_pipe_reads_at_most_one_byte_past_the_declared_end(tmp_path):
    if not os.path.isdir("/dev/fd"):
        pytest.skip("needs /dev/fd")
    data = small_file()
    read_end, write_end = os.pipe()
    try:
        os.write(write_end, data + b"extra bytes")
        os.close(write_end)
        write_end = None
        with pytest.raises(ModelFileError, match="trailing data"):
            read_model_file(f"/dev/fd/{read_end}")
    finally:
        os.close(read_end)
        if write_end is not None:
            os.close(write_end)


# ----------------------------------------------------------------------------- writing in place


@pytest.mark.skipif(not hasattr(os, "symlink"), reason="symbolic links")
def test_writing_through_a_symlink_replaces_its_target_and_keeps_the_link(tmp_path):
    real_dir = tmp_path / "real"
    real_dir.mkdir()
    target = real_dir / "model.pbm"
    write_model_file(target, {"v": 1}, {})
    link = tmp_path / "current.pbm"
    link.symlink_to(os.path.relpath(target, tmp_path))
    chain = tmp_path / "chain.pbm"
    chain.symlink_to(link)
    write_model_file(link, {"v": 2}, {})
    assert link.is_symlink() and read_model_file(target)[0] == {"v": 2}
    write_model_file(chain, {"v": 3}, {})
    assert chain.is_symlink() and link.is_symlink() and read_model_file(target)[0] == {"v": 3}
    # No temporary file left beside the link or the target.
    assert sorted(os.listdir(tmp_path)) == ["chain.pbm", "current.pbm", "real"]
    assert os.listdir(real_dir) == ["model.pbm"]
    dangling = tmp_path / "dangling.pbm"
    dangling.symlink_to(real_dir / "new.pbm")
    write_model_file(dangling, {"v": 4}, {})
    assert dangling.is_symlink() and read_model_file(real_dir / "new.pbm")[0] == {"v": 4}
    loop = tmp_path / "loop.pbm"
    loop.symlink_to(loop)
    with pytest.raises(OSError):
        write_model_file(loop, {}, {})
    assert loop.is_symlink()


@pytest.mark.skipif(os.name != "posix", reason="POSIX permission bits")
@pytest.mark.parametrize("mode", [0o600, 0o640, 0o644, 0o755, 0o444])
def test_overwriting_keeps_the_existing_file_mode(tmp_path, mode):
    path = tmp_path / "model.pbm"
    write_model_file(path, {"v": 1}, {})
    os.chmod(path, mode)
    write_model_file(path, {"v": 2}, {"x": np.ones(3)})
    assert read_model_file(path)[0] == {"v": 2}
    assert path.stat().st_mode & 0o7777 == mode
    assert os.listdir(tmp_path) == ["model.pbm"]


def test_a_directory_is_not_replaced(tmp_path):
    (tmp_path / "model.pbm").mkdir()
    with pytest.raises(IsADirectoryError):
        write_model_file(tmp_path / "model.pbm", {}, {})
    assert os.listdir(tmp_path) == ["model.pbm"] and (tmp_path / "model.pbm").is_dir()


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_a_fifo_is_written_to_not_replaced(tmp_path):
    """Not /dev/null itself: a regression would replace the device (as root)."""
    fifo = tmp_path / "model.pbm"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # so that opening to write won't block
    try:
        write_model_file(fifo, {"v": 1}, {"x": np.arange(3)})
        received = os.read(reader, 1 << 16)
    finally:
        os.close(reader)
    assert received == dumps({"v": 1}, {"x": np.arange(3)})
    assert stat_module.S_ISFIFO(os.lstat(fifo).st_mode)
    assert os.listdir(tmp_path) == ["model.pbm"]
