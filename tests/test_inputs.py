"""Inputs: NumPy, pandas, polars and pyarrow tables; files; optional dependencies."""

import builtins
import sys

import numpy as np
import pytest

from packboost import PackBoostRegressor, _files, _inputs
from packboost.datasets import make_numerai_like

FAST = dict(n_estimators=3, max_depth=3, random_state=0, n_jobs=1)


@pytest.fixture(scope="module")
def numerai_like():
    data = make_numerai_like(n_rows=2000, n_features=6, n_eras=10, random_state=0)
    names = [f"feature_{i}" for i in range(data.n_features)]
    X = np.asfortranarray(data.X.astype(np.int8))
    era = np.array([f"era{e:02d}" for e in data.era])
    return X, data.y.astype(np.float64), era, names


@pytest.fixture(scope="module")
def reference_prediction(numerai_like):
    X, y, era, _ = numerai_like
    return PackBoostRegressor(**FAST).fit(X, y, era=era).predict(X)


def _tables(X, era, names):
    """The same data as a pandas, a polars and a pyarrow table, era column included."""
    tables = {}
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame(X, columns=names)
    frame["era"] = era
    tables["pandas"] = frame
    try:
        import polars as pl

        tables["polars"] = pl.from_pandas(frame)
    except ImportError:
        pass
    try:
        import pyarrow as pa

        tables["pyarrow"] = pa.Table.from_pandas(frame, preserve_index=False)
    except ImportError:
        pass
    return tables


@pytest.mark.parametrize("kind", ["pandas", "polars", "pyarrow"])
def test_tables_fit_like_numpy_and_keep_feature_names(kind, numerai_like, reference_prediction):
    X, y, era, names = numerai_like
    tables = _tables(X, era, names)
    if kind not in tables:
        pytest.skip(f"{kind} is not installed")
    table = tables[kind]
    model = PackBoostRegressor(**FAST).fit(table, y, era="era")
    assert list(model.feature_names_in_) == names
    assert model.n_eras_ == 10
    assert model.bin_mapper_.prebinned_
    features = _inputs.drop_columns(table, ["era"])
    np.testing.assert_array_equal(model.predict(features), reference_prediction)
    # Names are checked again at predict time.
    renamed = _tables(X, era, [f"other_{i}" for i in range(len(names))])[kind]
    with pytest.raises(ValueError, match="feature names should match"):
        model.predict(_inputs.drop_columns(renamed, ["era"]))
    with pytest.warns(UserWarning, match="does not have valid feature names"):
        model.predict(X)


@pytest.mark.parametrize("kind", ["pandas", "polars", "pyarrow"])
def test_int8_tables_become_int8_matrices_without_a_float_copy(kind, numerai_like):
    X, _, era, names = numerai_like
    tables = _tables(X, era, names)
    if kind not in tables:
        pytest.skip(f"{kind} is not installed")
    matrix, feature_names = _inputs.as_matrix(_inputs.drop_columns(tables[kind], ["era"]))
    assert matrix.dtype == np.int8 and matrix.flags.f_contiguous
    assert list(feature_names) == names
    np.testing.assert_array_equal(matrix, X)


def test_pandas_int8_frame_is_used_in_place(numerai_like):
    """A consolidated int8 frame becomes bins without any copy at all."""
    pd = pytest.importorskip("pandas")
    X, y, _, names = numerai_like
    frame = pd.DataFrame(X, columns=names, copy=False)
    matrix, _ = _inputs.as_matrix(frame)
    model = PackBoostRegressor(**FAST)
    binned = model.fit(frame, y).bin_mapper_.transform(matrix)
    assert np.shares_memory(binned, matrix)


def test_mixed_and_nullable_columns():
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame({"a": np.array([0, 1, 2], dtype=np.int8),
                          "b": np.array([3, 4, 5], dtype=np.int16)})
    matrix, _ = _inputs.as_matrix(frame)
    assert matrix.dtype == np.int16  # integers stay integers
    frame["c"] = np.array([0.5, 1.5, 2.5], dtype=np.float32)
    assert _inputs.as_matrix(frame)[0].dtype == np.float64
    nullable = pd.DataFrame({"a": pd.array([1, None, 3], dtype="Int8")})
    matrix, _ = _inputs.as_matrix(nullable)
    assert matrix.dtype == np.float64 and np.isnan(matrix[1, 0])
    with pytest.raises(ValueError, match="non-numeric column 'text'"):
        _inputs.as_matrix(pd.DataFrame({"text": ["x", "y"]}))


def test_arrow_nulls_become_nan():
    pa = pytest.importorskip("pyarrow")
    table = pa.table({"a": pa.array([1, None, 3], type=pa.int8()), "b": [0.5, 1.0, None]})
    matrix, names = _inputs.as_matrix(table)
    assert list(names) == ["a", "b"]
    assert np.isnan(matrix[1, 0]) and np.isnan(matrix[2, 1])


def test_eval_set_era_column_name(numerai_like):
    X, y, era, names = numerai_like
    tables = _tables(X, era, names)
    table = tables["pandas"]
    model = PackBoostRegressor(**FAST).fit(table, y, era="era",
                                           eval_set=[(table, y, "era")])
    assert set(model.evals_result_["valid_0"]) == {"pearson_mean", "pearson_sharpe", "rmse"}


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_file_round_trip(tmp_path, suffix):
    if suffix == ".parquet":
        pytest.importorskip("pyarrow")
    columns = {"id": np.array(["a", "b", "c"], dtype=object),
               "feature_1": np.array([0, 4, 2], dtype=np.int64),
               "target": np.array([0.25, np.nan, 1.0])}
    path = tmp_path / f"data{suffix}"
    _files.write_columns(path, columns)
    assert _files.list_file_columns(path) == ["id", "feature_1", "target"]
    read = _files.read_columns(path, ["target", "feature_1"])
    assert list(read) == ["target", "feature_1"]
    np.testing.assert_array_equal(read["feature_1"], [0, 4, 2])
    np.testing.assert_array_equal(read["target"], [0.25, np.nan, 1.0])
    with pytest.raises(ValueError, match="no column"):
        _files.read_columns(path, ["missing"])


def _block_imports(monkeypatch, *names):
    """Make ``import NAME`` (and submodules) fail, as if the package were absent."""
    real_import = builtins.__import__

    def fake_import(name, *args, **kwargs):
        if name.split(".")[0] in names:
            raise ImportError(f"No module named {name!r}")
        return real_import(name, *args, **kwargs)

    for module in list(sys.modules):
        if module.split(".")[0] in names:
            monkeypatch.delitem(sys.modules, module)
    monkeypatch.setattr(builtins, "__import__", fake_import)


def test_csv_needs_no_optional_package(tmp_path, monkeypatch):
    path = tmp_path / "data.csv"
    path.write_text("era,feature_a,target\nera1,1,0.5\nera1,2,\nera2,3,1.0\n")
    _block_imports(monkeypatch, "pyarrow", "polars", "pandas")
    read = _files.read_columns(path)
    assert read["era"].tolist() == ["era1", "era1", "era2"]
    assert read["feature_a"].dtype == np.int64
    np.testing.assert_array_equal(read["target"], [0.5, np.nan, 1.0])


def test_missing_parquet_library_is_named(tmp_path, monkeypatch):
    path = tmp_path / "data.parquet"
    path.write_bytes(b"PAR1")
    _block_imports(monkeypatch, "pyarrow", "polars")
    with pytest.raises(ImportError, match="pip install pyarrow"):
        _files.read_columns(path)


def test_unknown_file_type(tmp_path):
    path = tmp_path / "data.xlsx"
    path.write_bytes(b"")
    with pytest.raises(ValueError, match="parquet or .csv"):
        _files.read_columns(path)
    with pytest.raises(FileNotFoundError):
        _files.read_columns(tmp_path / "absent.csv")


def test_select_columns_patterns():
    available = ["era", "feature_b", "feature_a", "target", "target_x"]
    assert _files.select_columns(available, ["feature_*"]) == ["feature_b", "feature_a"]
    assert _files.select_columns(available, ["target_x", "target*"]) == ["target", "target_x"]
    with pytest.raises(ValueError, match="no column matches 'nope'"):
        _files.select_columns(available, ["nope"])


@pytest.mark.parametrize("blocked", [(), ("pyarrow", "polars", "pandas")])
def test_file_reading_refuses_ambiguous_or_undecodable_csv(tmp_path, monkeypatch, blocked):
    (tmp_path / "twice.csv").write_text("era,target,target\n1,0.5,0.7\n")
    (tmp_path / "latin.csv").write_bytes("era,target\nf\u00e9,0.5\n".encode("latin-1"))
    (tmp_path / "empty_target.csv").write_text("era,target\n1,\n2,\n")
    (tmp_path / "bom.csv").write_bytes(b"\xef\xbb\xbfid,target\na,0.5\n")
    _block_imports(monkeypatch, *blocked)
    with pytest.raises(ValueError, match=r"twice.csv: duplicated column names \['target'\]"):
        _files.read_columns(tmp_path / "twice.csv", ["era"])
    with pytest.raises(ValueError, match="latin.csv: .*not UTF-8"):
        _files.read_columns(tmp_path / "latin.csv")
    empty = _files.read_columns(tmp_path / "empty_target.csv")["target"]
    assert empty.dtype == np.float64 and np.isnan(empty).all()  # all missing, not "text"
    assert _files.list_file_columns(tmp_path / "bom.csv") == ["id", "target"]
    assert list(_files.read_columns(tmp_path / "bom.csv")["id"]) == ["a"]


def test_gzipped_csv_round_trip_leaves_no_temporary_file(tmp_path):
    columns = {"id": np.array(["a", "b"], dtype=object), "target": np.array([0.5, np.nan])}
    _files.write_columns(tmp_path / "out.csv.gz", columns)
    read = _files.read_columns(tmp_path / "out.csv.gz")
    assert list(read["id"]) == ["a", "b"]
    np.testing.assert_array_equal(read["target"], [0.5, np.nan])
    assert [path.name for path in tmp_path.iterdir()] == ["out.csv.gz"]
    with pytest.raises(ValueError, match="non-empty strings"):
        _files.write_columns(tmp_path / "bad.csv", {"": np.zeros(2)})
    assert [path.name for path in tmp_path.iterdir()] == ["out.csv.gz"]
