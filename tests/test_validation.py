"""Bad input at every public entry: ``fit``, ``predict``, ``load_model`` and the CLI.

One table per entry; each case names the call, the error type and a pattern
of its message, which must name the offending argument and, where there is
one, its value. Edge cases that are *valid* (one row, one era, eras as
strings, categoricals, floats or dates, non-contiguous and read-only arrays,
object dtypes) are tested to fit and predict.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

import packboost
from packboost import PackBoostClassifier, PackBoostRegressor
from packboost.cli import main as cli_main
from packboost.model_file import FORMAT_VERSION, ModelFileError
from packboost.sklearn import _PARAMETER_RULES

N_ROWS, N_FEATURES = 60, 3
FAST = dict(n_estimators=2, max_depth=2, min_samples_leaf=5, random_state=0, n_jobs=1)


def problem(seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(N_ROWS, N_FEATURES))
    y = X[:, 0] + rng.normal(size=N_ROWS)
    era = np.repeat([0, 1, 2], N_ROWS // 3)
    return X, y, era


X0, Y0, ERA0 = problem()


def with_value(array, index, value):
    array = np.array(array, dtype=object if isinstance(value, str) or value is None else None)
    array[index] = value
    return array


@pytest.fixture(scope="module")
def fitted():
    return PackBoostRegressor(**FAST).fit(X0, Y0, era=ERA0)


# ----------------------------------------------------------------------------- fit

FIT_CASES = [
    # (id, keyword arguments of fit (X, y default to X0, Y0), error, message pattern)
    ("X None", dict(X=None), TypeError, r"X must be array-like, got None"),
    ("X 1-D", dict(X=X0[:, 0]), ValueError, r"Expected 2D array for X, got 1D .*shape=\(60,\)"),
    ("X 3-D", dict(X=X0[None]), ValueError, r"Expected 2D array for X, got 3D"),
    ("X no rows", dict(X=X0[:0], y=Y0[:0]), ValueError, r"0 sample\(s\) \(shape=\(0, 3\)\)"),
    ("X no features", dict(X=X0[:, :0]), ValueError, r"0 feature\(s\) \(shape=\(60, 0\)\)"),
    ("X +inf", dict(X=with_value(X0, (5, 1), np.inf)), ValueError,
     r"Input X contains infinity \(inf at row 5, column 1\)"),
    ("X -inf", dict(X=with_value(X0, (7, 2), -np.inf)), ValueError,
     r"Input X contains infinity \(-inf at row 7, column 2\)"),
    ("X strings", dict(X=np.full((N_ROWS, 2), "a", dtype=object)), ValueError,
     r"X must be numeric; converting dtype object to float failed.*'a'"),
    ("X complex", dict(X=X0 + 1j), ValueError, r"Complex data not supported: X has dtype"),
    ("X dates", dict(X=np.zeros((N_ROWS, 2), dtype="datetime64[D]")), TypeError,
     r"X must be numeric, got dtype datetime64\[D\]"),
    ("X ragged", dict(X=[[1.0, 2.0], [3.0]]), ValueError, r"X cannot be converted to an array"),
    ("y None", dict(y=None), ValueError, r"fit requires y to be passed"),
    ("y string", dict(y="target"), TypeError, r"y must be array-like, got str 'target'"),
    ("y too short", dict(y=Y0[:-1]), ValueError, r"y has 59 rows but X has 60"),
    ("y 3-D", dict(y=np.c_[Y0, Y0][:, :, np.newaxis]), ValueError,
     r"y must be 1-dimensional or 2-dimensional \(rows x targets\), got shape \(60, 2, 1\)"),
    ("y NaN", dict(y=with_value(Y0, 7, np.nan)), ValueError,
     r"Input y contains NaN \(first at row 7\)"),
    ("y inf", dict(y=with_value(Y0, 3, -np.inf)), ValueError,
     r"Input y contains infinity \(-inf at row 3\)"),
    ("y None label", dict(y=with_value(Y0, 2, None)), ValueError,
     r"Input y contains NaN or another missing value \(None at row 2\)"),
    ("y text", dict(y=np.array(["a"] * N_ROWS)), ValueError, r"y must be numeric, got dtype <U1"),
    ("y dates", dict(y=np.zeros(N_ROWS, dtype="datetime64[D]")), ValueError,
     r"y must be numeric, got dtype datetime64\[D\]"),
    ("y huge", dict(y=with_value(Y0, 0, 1e200)), ValueError,
     r"y has values up to 1e\+200 \(row 0\), beyond 1e\+100 in magnitude"),
    ("era too short", dict(era=ERA0[:-1]), ValueError,
     r"era must have shape \(60,\) like X's rows, got \(59,\)"),
    ("era 2-D", dict(era=ERA0[:, None]), ValueError, r"era must have shape \(60,\).*\(60, 1\)"),
    ("era NaN", dict(era=with_value(ERA0.astype(float), 4, np.nan)), ValueError,
     r"era contains NaN or another missing label \(nan at row 4\)"),
    ("era None", dict(era=with_value(ERA0.astype(str), 9, None)), ValueError,
     r"era contains NaN or another missing label \(None at row 9\)"),
    ("era NaT", dict(era=with_value(np.datetime64("2024-01-05") + ERA0.astype("m8[D]"), 1,
                                    np.datetime64("NaT"))), ValueError,
     r"era contains NaN or another missing label \(NaT at row 1\)"),
    ("era mixed types", dict(era=np.array([1, "a"] * (N_ROWS // 2), dtype=object)), ValueError,
     r"era labels cannot be ordered: '<' not supported"),
    ("era complex", dict(era=ERA0 + 1j), TypeError,
     r"era labels must be sortable scalars, got dtype complex128"),
    ("era column of an array", dict(era="era"), TypeError,
     r"era='era' is a column name, which needs X to be a table"),
    ("weights too short", dict(sample_weight=np.ones(5)), ValueError,
     r"sample_weight must have shape \(60,\) like X's rows, got \(5,\)"),
    ("weights NaN", dict(sample_weight=with_value(np.ones(N_ROWS), 1, np.nan)), ValueError,
     r"sample_weight contains NaN \(first at row 1\)"),
    ("weights inf", dict(sample_weight=with_value(np.ones(N_ROWS), 8, np.inf)), ValueError,
     r"sample_weight contains infinity \(inf at row 8\)"),
    ("weights negative", dict(sample_weight=with_value(np.ones(N_ROWS), 2, -1.0)), ValueError,
     r"sample_weight must be non-negative; found negative weights \(-1.0 at row 2\)"),
    ("weights zero", dict(sample_weight=np.zeros(N_ROWS)), ValueError,
     r"sample_weight sums to zero"),
    ("weights text", dict(sample_weight="w"), TypeError,
     r"sample_weight must be array-like or a number, got str 'w'"),
    ("weights objects", dict(sample_weight=np.array([{}] * N_ROWS)), TypeError,
     r"sample_weight must be numeric, got dtype object"),
    ("weights huge", dict(sample_weight=with_value(np.ones(N_ROWS), 3, 1e150)), ValueError,
     r"sample_weight has values up to 1e\+150 \(row 3\)"),
    ("y x weights overflow", dict(y=with_value(Y0, 0, 1e60),
                                  sample_weight=np.full(N_ROWS, 1e60)), ValueError,
     r"y times sample_weight reaches 1e\+120"),
    ("early_stopping_rounds 0", dict(early_stopping_rounds=0), ValueError,
     r"early_stopping_rounds must be at least 1, got 0"),
    ("early_stopping_rounds text", dict(early_stopping_rounds="5"), TypeError,
     r"early_stopping_rounds must be an int or None, got '5'"),
    ("progress text", dict(progress="yes"), TypeError,
     r"progress must be True, False or None, got 'yes'"),
    ("eval_set item", dict(eval_set=[X0]), ValueError,
     r"eval_set\[0\] must be an \(X, y\) or \(X, y, era\) tuple, got ndarray"),
    ("eval_set width", dict(eval_set=[(X0[:, :2], Y0)]), ValueError,
     r"eval_set\[0\] X has 2 features, but PackBoostRegressor is expecting 3"),
    ("eval_set y NaN", dict(eval_set=[(X0, with_value(Y0, 0, np.nan))]), ValueError,
     r"Input eval_set\[0\] y contains NaN \(first at row 0\)"),
    ("eval_names", dict(eval_set=[(X0, Y0)], eval_names=["a", "b"]), ValueError,
     r"eval_names must hold 1 distinct names.*\['a', 'b'\]"),
    ("eval_metric", dict(eval_metric="r2"), ValueError,
     r"eval_metric must be a callable or one of .* got 'r2'"),
    ("callback", dict(callbacks=[42]), TypeError,
     r"a callback must be a TrainingCallback or a function, got 42"),
    ("init_model", dict(init_model=3.5), TypeError,
     r"init_model must be a fitted PackBoostRegressor or the path of its model file, got float"),
]


@pytest.mark.parametrize("kwargs, error, pattern", [case[1:] for case in FIT_CASES],
                         ids=[case[0] for case in FIT_CASES])
def test_fit_rejects_bad_input(kwargs, error, pattern):
    kwargs = dict(kwargs)
    X, y = kwargs.pop("X", X0), kwargs.pop("y", Y0)
    model = PackBoostRegressor(**FAST)
    with pytest.raises(error, match=pattern):
        model.fit(X, y, **kwargs)
    assert not model.__sklearn_is_fitted__()


CLASSIFIER_CASES = [
    ("one class", np.zeros(N_ROWS), r"y has 1 class \(\[0.0\]\); a classifier needs at least two"),
    ("two label columns", np.c_[np.arange(N_ROWS) % 3, np.arange(N_ROWS) % 2],
     r"y must have shape \(60,\)"),
    ("continuous", Y0, r"Unknown label type: continuous"),
    ("NaN label", with_value((Y0 > 0).astype(float), 4, np.nan),
     r"Input y contains NaN or infinity \(nan at row 4\)"),
    ("None label", with_value(np.where(Y0 > 0, "up", "down"), 6, None),
     r"Input y contains NaN or another missing label \(None at row 6\)"),
]


@pytest.mark.parametrize("y, pattern", [case[1:] for case in CLASSIFIER_CASES],
                         ids=[case[0] for case in CLASSIFIER_CASES])
def test_classifier_rejects_bad_labels(y, pattern):
    with pytest.raises(ValueError, match=pattern):
        PackBoostClassifier(**FAST).fit(X0, y)


def _bad_values(name, rule):
    """(value, error) pairs that each parameter must refuse."""
    if rule[0] not in ("int", "real"):
        return [("no-such-choice", ValueError), (3, ValueError)]
    kind, low, high, low_closed, _ = rule
    cases = [("1", TypeError), (True, TypeError)]
    if kind == "int":
        cases.append((2.5, TypeError))
    else:
        cases += [(float("nan"), ValueError), (float("inf"), ValueError)]
    if low is not None:
        cases.append((low - 1 if low_closed else low, ValueError))
    if high is not None:
        cases.append((high + 1, ValueError))
    return cases


PARAMETER_CASES = [(name, value, error) for name, rule in _PARAMETER_RULES.items()
                   for value, error in _bad_values(name, rule)]
PARAMETER_CASES += [("n_jobs", 0, ValueError), ("n_jobs", "all", TypeError),
                    ("n_jobs", 1.5, TypeError), ("n_jobs", 2**31, ValueError),
                    ("random_state", -1, ValueError),
                    ("random_state", "seed", TypeError), ("pack_size", 65, ValueError)]


@pytest.mark.parametrize("name, value, error", PARAMETER_CASES,
                         ids=[f"{name}={value!r}" for name, value, _ in PARAMETER_CASES])
def test_bad_parameter_values_name_themselves_and_the_value(name, value, error):
    params = dict(FAST)
    params[name] = value
    with pytest.raises(error) as info:
        PackBoostRegressor(**params).fit(X0, Y0)
    message = str(info.value)
    assert name in message, message
    shown = "0" if name == "n_jobs" and value == 0 else repr(value)
    assert shown in message, message


# ----------------------------------------------------------------------------- valid edges


def _check_fits(X, y, **kwargs):
    model = PackBoostRegressor(**FAST).fit(X, y, **kwargs)
    prediction = model.predict(X)
    assert prediction.shape == (len(y),) and np.isfinite(prediction).all()
    return model


@pytest.mark.parametrize("era, n_eras", [
    (None, 1),
    (np.zeros(N_ROWS), 1),
    (ERA0.astype(str), 3),
    (np.char.add("era", ERA0.astype(str)).astype(object), 3),
    (ERA0.astype(np.float32) + 0.5, 3),
    (ERA0.astype(np.int8), 3),
    (ERA0.astype(bool), 2),
    (np.datetime64("2024-01-05") + ERA0.astype("m8[W]"), 3),
    (ERA0.astype("S4"), 3),
    (list(ERA0), 3),
], ids=["None", "one era", "strings", "objects", "floats", "int8", "bools", "dates", "bytes",
        "list"])
def test_eras_of_every_kind(era, n_eras):
    model = _check_fits(X0, Y0, era=era)
    assert model.n_eras_ == n_eras
    reference = PackBoostRegressor(**FAST).fit(X0, Y0, era=None if era is None else
                                               np.unique(era, return_inverse=True)[1].ravel())
    np.testing.assert_array_equal(model.predict(X0), reference.predict(X0))


@pytest.mark.parametrize("n_eras", [1, 3, 600, 65_536, 70_000])
@pytest.mark.parametrize("n_rows", [0, 1, 257, 5_000])
def test_era_order_is_the_stable_sort_of_the_codes(n_eras, n_rows):
    """The era order (radix sort of 16-bit codes) is the stable sort's:
    each era's rows contiguous, in their original order, also with codes
    past 16 bits and with eras that have no rows."""
    from packboost._validation import era_order

    codes = np.random.default_rng(n_rows).integers(0, n_eras, n_rows).astype(np.int32)
    if n_rows:
        codes[-1] = n_eras - 1     # the largest code present
    order = era_order(codes)
    np.testing.assert_array_equal(order, np.argsort(codes, kind="stable"))
    assert order.dtype == np.intp


def test_eras_from_pandas_categoricals_polars_and_arrow():
    pd = pytest.importorskip("pandas")
    labels = np.char.add("era", ERA0.astype(str))
    reference = PackBoostRegressor(**FAST).fit(X0, Y0, era=labels).predict(X0)
    eras = [pd.Categorical(labels), pd.Series(labels, dtype="category"), pd.Series(labels)]
    try:
        import polars as pl
        eras.append(pl.Series(labels))
    except ImportError:  # pragma: no cover
        pass
    try:
        import pyarrow as pa
        eras.append(pa.array(labels))
    except ImportError:  # pragma: no cover
        pass
    for era in eras:
        np.testing.assert_array_equal(
            PackBoostRegressor(**FAST).fit(X0, Y0, era=era).predict(X0), reference)
    with pytest.raises(ValueError, match=r"era contains NaN or another missing label"):
        PackBoostRegressor(**FAST).fit(X0, Y0, era=pd.Categorical(with_value(labels, 3, None)))
    missing_at_2 = r"era contains NaN or another missing label \((nan|<NA>) at row 2\)"
    with pytest.raises(ValueError, match=missing_at_2):
        PackBoostRegressor(**FAST).fit(X0, Y0,
                                       era=pd.Series(with_value(ERA0, 2, None)).astype("Int64"))


def test_one_row_gives_the_constant_model():
    model = _check_fits(X0[:1], Y0[:1])
    np.testing.assert_array_equal(model.predict(X0), np.full(N_ROWS, Y0[0]))
    assert model.ensemble_.nodes["feature"].max() == -1  # no split


@pytest.mark.parametrize("estimator_class", [PackBoostRegressor, PackBoostClassifier])
def test_training_further_from_itself(estimator_class):
    y = Y0 if estimator_class is PackBoostRegressor else Y0 > 0
    model = estimator_class(**FAST).fit(X0, y)
    model.fit(X0, y, init_model=model)
    assert model.n_iter_ == 2 * FAST["n_estimators"]
    assert np.isfinite(model.predict(X0).astype(float)).all()


def test_one_era_and_one_row_per_era():
    _check_fits(X0, Y0, era=np.zeros(N_ROWS, dtype=int))
    _check_fits(X0, Y0, era=np.arange(N_ROWS))


def test_non_contiguous_and_read_only_inputs_give_the_same_model():
    X = np.asfortranarray(X0)
    reference = PackBoostRegressor(**FAST).fit(X0, Y0, era=ERA0).predict(X0)
    wide = np.zeros((N_ROWS * 2, N_FEATURES * 2))
    wide[::2, ::2] = X0
    strided = wide[::2, ::2]
    assert not strided.flags.c_contiguous and not strided.flags.f_contiguous
    y_strided, era_strided = np.repeat(Y0, 2)[::2], np.repeat(ERA0, 2)[::2]
    read_only = [array.copy() for array in (X0, Y0, ERA0)]
    for array in read_only:
        array.flags.writeable = False
    for args in [(X, Y0, ERA0), (strided, y_strided, era_strided), tuple(read_only)]:
        model = PackBoostRegressor(**FAST).fit(args[0], args[1], era=args[2],
                                               sample_weight=np.ones(N_ROWS)[::1])
        np.testing.assert_array_equal(model.predict(X0), reference)
        np.testing.assert_array_equal(model.predict(args[0]), reference)


def test_read_only_int8_numerai_features_are_used_without_a_copy():
    rng = np.random.default_rng(1)
    X = np.asfortranarray(rng.integers(0, 5, size=(N_ROWS, N_FEATURES)).astype(np.int8))
    X.flags.writeable = False
    model = PackBoostRegressor(**FAST).fit(X, Y0, era=ERA0)
    np.testing.assert_array_equal(model.predict(X), model.predict(X.astype(np.float64)))


def test_object_and_other_dtypes_of_numbers_are_converted():
    reference = PackBoostRegressor(**FAST).fit(X0, Y0).predict(X0)
    for X in [X0.astype(object), X0.tolist(), X0.astype(">f8")]:
        np.testing.assert_array_equal(PackBoostRegressor(**FAST).fit(X, Y0).predict(X0),
                                      reference)
    with_none = X0.astype(object)
    with_none[0, 0] = None  # None in an object matrix is a missing value, like NaN
    with_nan = X0.copy()
    with_nan[0, 0] = np.nan
    np.testing.assert_array_equal(PackBoostRegressor(**FAST).fit(with_none, Y0).predict(X0),
                                  PackBoostRegressor(**FAST).fit(with_nan, Y0).predict(X0))
    y_text = Y0.astype(str).astype(object)  # numbers as text convert too
    np.testing.assert_allclose(PackBoostRegressor(**FAST).fit(X0, y_text).predict(X0),
                               reference, rtol=1e-12)


# ----------------------------------------------------------------------------- predict


def _frame(X, names):
    pd = pytest.importorskip("pandas")
    return pd.DataFrame(X, columns=names)


PREDICT_CASES = [
    ("too few features", lambda: X0[:, :2], ValueError,
     r"X has 2 features, but PackBoostRegressor is expecting 3 features"),
    ("too many features", lambda: np.c_[X0, X0], ValueError,
     r"X has 6 features, but PackBoostRegressor is expecting 3 features"),
    ("1-D", lambda: X0[0], ValueError, r"Expected 2D array for X, got 1D"),
    ("no rows", lambda: X0[:0], ValueError, r"0 sample\(s\)"),
    ("inf", lambda: with_value(X0, (2, 0), np.inf), ValueError,
     r"Input X contains infinity \(inf at row 2, column 0\)"),
    ("strings", lambda: np.full((4, N_FEATURES), "x"), ValueError, r"X must be numeric"),
    ("None", lambda: None, TypeError, r"X must be array-like, got None"),
]


@pytest.mark.parametrize("make_X, error, pattern", [case[1:] for case in PREDICT_CASES],
                         ids=[case[0] for case in PREDICT_CASES])
def test_predict_rejects_bad_input(fitted, make_X, error, pattern):
    with pytest.raises(error, match=pattern):
        fitted.predict(make_X())


def test_predict_checks_feature_names():
    names = ["a", "b", "c"]
    model = PackBoostRegressor(**FAST).fit(_frame(X0, names), Y0)
    with pytest.raises(ValueError, match=r"missing \['c'\], unexpected \['z'\]"):
        model.predict(_frame(X0, ["a", "b", "z"]))
    with pytest.raises(ValueError, match=r"same names in another order"):
        model.predict(_frame(X0[:, ::-1], names[::-1]))
    with pytest.warns(UserWarning, match=r"X does not have valid feature names"):
        model.predict(X0)


@pytest.mark.parametrize("iteration_range, error, pattern", [
    ((0, 9), ValueError, r"iteration_range must satisfy 0 <= start <= end <= 2 .*\(0, 9\)"),
    ((2, 1), ValueError, r"got \(2, 1\)"),
    (5, TypeError, r"iteration_range must be a \(start, end\) pair of rounds, got 5"),
    ((0.5, 1), TypeError, r"iteration_range must hold ints, got \(0.5, 1\)"),
])
def test_predict_checks_iteration_range(fitted, iteration_range, error, pattern):
    with pytest.raises(error, match=pattern):
        fitted.predict(X0, iteration_range=iteration_range)


def test_predict_before_fit():
    with pytest.raises(ValueError, match=r"This PackBoostRegressor instance is not fitted yet"):
        PackBoostRegressor().predict(X0)


# ----------------------------------------------------------------------------- load_model


def _flip(data: bytes, position: int) -> bytes:
    data = bytearray(data)
    data[position] ^= 0x04
    return bytes(data)


LOAD_CASES = [
    ("text file", lambda good: b"tree 0: feature_1 <= 0.5\n", ModelFileError,
     r"not a PackBoost model file \(the magic bytes do not match\)"),
    ("empty file", lambda good: b"", ModelFileError, r"not a PackBoost model file \(too short"),
    ("pickle", lambda good: b"\x80\x04\x95" + b"\0" * 64, ModelFileError,
     r"not a PackBoost model file"),
    ("truncated", lambda good: good[: len(good) // 2], ModelFileError,
     r"model file is truncated: \d+ bytes, expected \d+"),
    ("bit flip in the header", lambda good: _flip(good, 40), ModelFileError,
     r"model file is corrupted \(checksum mismatch\)"),
    ("bit flip in the trees", lambda good: _flip(good, len(good) - 100), ModelFileError,
     r"checksum mismatch"),
    ("newer version",
     lambda good: good[:8] + (FORMAT_VERSION + 1).to_bytes(4, "little") + good[12:],
     ModelFileError,
     rf"written by a newer packboost \(format version {FORMAT_VERSION + 1}, this one reads up "
     rf"to {FORMAT_VERSION}\)"),
    ("version 0", lambda good: good[:8] + b"\0\0\0\0" + good[12:], ModelFileError,
     r"unsupported model file format version 0"),
    ("trailing bytes", lambda good: good + b"\n", ModelFileError, r"trailing data"),
]


@pytest.mark.parametrize("make_bytes, error, pattern", [case[1:] for case in LOAD_CASES],
                         ids=[case[0] for case in LOAD_CASES])
def test_load_model_rejects_bad_files(tmp_path, fitted, make_bytes, error, pattern):
    good_path = tmp_path / "good.pbm"
    fitted.save_model(good_path)
    path = tmp_path / "bad.pbm"
    path.write_bytes(make_bytes(good_path.read_bytes()))
    with pytest.raises(error, match=pattern) as info:
        packboost.load_model(path)
    assert "bad.pbm" in str(info.value)  # the message names the file


@pytest.mark.parametrize("path, error, pattern", [
    (3, TypeError, r"load_model takes the path of a model file \(str or os.PathLike\), got int"),
    (None, TypeError, r"got NoneType"),
    ("no/such/model.pbm", FileNotFoundError, r"no/such/model.pbm"),
])
def test_load_model_rejects_bad_paths(path, error, pattern):
    with pytest.raises(error, match=pattern):
        packboost.load_model(path)


def test_load_model_of_a_directory(tmp_path):
    with pytest.raises(IsADirectoryError):
        packboost.load_model(tmp_path)


# ----------------------------------------------------------------------------- CLI


@pytest.fixture
def csv_files(tmp_path, monkeypatch):
    """train.csv (era, target, features), bad variants, and a saved model."""
    from packboost._inputs import write_columns

    monkeypatch.chdir(tmp_path)
    columns = {"era": ERA0, "target": Y0}
    columns.update({f"feature_{k}": X0[:, k] for k in range(N_FEATURES)})
    write_columns("train.csv", columns)
    write_columns("inf.csv", {**columns, "feature_1": with_value(X0[:, 1], 4, np.inf)})
    write_columns("text.csv", {**columns, "feature_2": np.array(["x"] * N_ROWS)})
    PackBoostRegressor(**FAST).fit(X0, Y0).save_model("model.pbm")
    good = (tmp_path / "model.pbm").read_bytes()
    (tmp_path / "flipped.pbm").write_bytes(_flip(good, len(good) // 2))
    (tmp_path / "params.toml").write_text('max_depth = "five"\n')
    return tmp_path


CLI_CASES = [
    (["train", "train.csv", "--max-depth", "-2"], r"max_depth must be in \[-1, 30\], got -2"),
    (["train", "train.csv", "--learning-rate", "0"],
     r"learning_rate must be in \(0.0, inf\], got 0.0"),
    (["train", "train.csv", "--config", "params.toml"], r"max_depth must be an int, got 'five'"),
    (["train", "inf.csv"], r"contains infinity"),
    (["train", "text.csv"], r"non-numeric column 'feature_2'"),
    (["predict", "flipped.pbm", "train.csv", "-o", "out.csv", "--features", "feature_*"],
     r"flipped.pbm'?: model file is corrupted \(checksum mismatch\)"),
    (["predict", "train.csv", "train.csv", "-o", "out.csv"], r"not a PackBoost model file"),
    (["predict", "model.pbm", "train.csv", "-o", "out.csv", "--features", "feature_0"],
     r"1 feature columns selected, the model expects 3"),
    (["evaluate", "train.csv", "--model", "flipped.pbm", "--features", "feature_*"],
     r"checksum mismatch"),
]


@pytest.mark.parametrize("args, pattern", CLI_CASES, ids=[" ".join(args[:2]) + f" #{index}"
                                                          for index, (args, _) in
                                                          enumerate(CLI_CASES)])
def test_cli_reports_bad_input_and_exits_1(csv_files, capsys, args, pattern):
    assert cli_main(args) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"packboost {args[0]}: error: "), err
    assert re.search(pattern, err), err
    assert not (csv_files / "out.csv").exists()


# ----------------------------------------------------------------------------- scale


@pytest.mark.parametrize("learning_rate", [1.5, 10.0, 1e10])
def test_a_learning_rate_above_one_warns_at_fit(learning_rate):
    """Allowed (as in LightGBM), but each round then overshoots the Newton step.
    At 1.5 the overshoot dies out and the fit converges; at 10 the predictions
    of this fit reached ~1e5, at 1e10 ~1e94: divergence, an error naming
    learning_rate (packboost._divergence), and no model."""
    model = PackBoostRegressor(**{**FAST, "learning_rate": learning_rate})
    with pytest.warns(UserWarning, match=rf"learning_rate={learning_rate!r} is above 1"):
        if learning_rate < 2:
            model.fit(X0, Y0, era=ERA0)
        else:
            with pytest.raises(FloatingPointError, match="training diverged.*learning_rate"):
                model.fit(X0, Y0, era=ERA0)
    assert model.__sklearn_is_fitted__() == (learning_rate < 2)


@pytest.mark.parametrize("learning_rate", [0.1, 1.0])
def test_usual_learning_rates_do_not_warn(learning_rate, recwarn):
    PackBoostRegressor(**{**FAST, "learning_rate": learning_rate}).fit(X0, Y0, era=ERA0)
    assert not [w for w in recwarn if "learning_rate" in str(w.message)]


@pytest.mark.parametrize("scale", [1e-300, 1e-200, 1e-100, 1e50, 1e100])
def test_targets_of_any_accepted_magnitude_give_the_same_model(scale):
    """Up to the bound on |y| (1e100) and down to the smallest float64s: the
    same splits, predictions scaled (tests/test_training.py tests it in depth)."""
    reference = PackBoostRegressor(**FAST).fit(X0, Y0 / np.abs(Y0).max(), era=ERA0)
    model = PackBoostRegressor(**FAST).fit(X0, Y0 / np.abs(Y0).max() * scale, era=ERA0)
    np.testing.assert_array_equal(model.ensemble_.nodes["feature"],
                                  reference.ensemble_.nodes["feature"])
    assert (reference.ensemble_.nodes["feature"] >= 0).any()
    np.testing.assert_allclose(model.predict(X0) / scale, reference.predict(X0), rtol=1e-9)
