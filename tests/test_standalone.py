"""model.standalone_predictor(): NumPy only, pickles by value, equals predict bit for bit."""

from __future__ import annotations

import pickle
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from packboost import PackBoostClassifier, PackBoostRegressor
from packboost.datasets import make_numerai_like


def data_with_nan(seed=0, n_rows=3_000, n_features=8):
    data = make_numerai_like(n_rows=n_rows, n_features=n_features, n_eras=20,
                             random_state=seed)
    X = data.X.astype(np.float64)
    X[np.random.default_rng(seed).random(X.shape) < 0.1] = np.nan
    return X, data.y, data.era


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int8, np.uint8, np.int64])
def test_regressor_predictor_equals_predict_bit_for_bit(dtype):
    X, y, era = data_with_nan()
    if not np.issubdtype(dtype, np.floating):
        X = np.nan_to_num(X, nan=0).astype(dtype)
    else:
        X = X.astype(dtype)
    model = PackBoostRegressor(n_estimators=6, max_depth=5, random_state=0, n_jobs=1)
    model.fit(X, y, era=era)
    predictor = model.standalone_predictor()
    np.testing.assert_array_equal(predictor(X), model.predict(X))
    np.testing.assert_array_equal(predictor(X[:1]), model.predict(X[:1]))
    assert predictor(X[:0]).shape == (0,)


def test_small_blocks_give_the_same_result():
    X, y, era = data_with_nan(1)
    model = PackBoostRegressor(n_estimators=4, random_state=1, n_jobs=1).fit(X, y, era=era)
    predictor = model.standalone_predictor()
    predictor.CELLS_PER_BLOCK = 7  # many row blocks
    np.testing.assert_array_equal(predictor(X), model.predict(X))


def test_classifier_predictor_labels_and_probabilities():
    X, y, era = data_with_nan(2)
    labels = np.where(y > np.median(y), "up", "down")
    model = PackBoostClassifier(n_estimators=5, random_state=0, n_jobs=1).fit(X, labels,
                                                                              era=era)
    predictor = model.standalone_predictor()
    np.testing.assert_array_equal(predictor(X), model.predict(X))
    np.testing.assert_array_equal(predictor.predict_proba(X), model.predict_proba(X))


def test_frames_are_read_by_column_name():
    pd = pytest.importorskip("pandas")
    X, y, era = data_with_nan(3)
    frame = pd.DataFrame(X, columns=[f"feature_{i}" for i in range(X.shape[1])])
    model = PackBoostRegressor(n_estimators=3, random_state=0, n_jobs=1).fit(frame, y, era=era)
    predictor = model.standalone_predictor()
    shuffled = frame[frame.columns[::-1]].assign(era="x", id=np.arange(len(frame)))
    np.testing.assert_array_equal(predictor(shuffled), model.predict(frame))
    with pytest.raises(ValueError, match="feature columns"):
        predictor(frame.drop(columns="feature_0"))


def test_bad_input_and_unfitted_model():
    X, y, era = data_with_nan(4)
    model = PackBoostRegressor(n_estimators=2, random_state=0, n_jobs=1)
    with pytest.raises(ValueError, match="not fitted"):
        model.standalone_predictor()
    predictor = model.fit(X, y, era=era).standalone_predictor()
    with pytest.raises(ValueError, match="features"):
        predictor(X[:, :3])
    with pytest.raises(ValueError, match="2-D"):
        predictor(X[0])
    with pytest.raises(TypeError, match="numbers"):
        predictor(np.full(X.shape, "a"))
    with pytest.raises(AttributeError, match="regressor"):
        predictor.predict_proba(X)


UPLOAD = textwrap.dedent("""
    import sys
    sys.modules["packboost"] = None          # import packboost now fails, as on Numerai
    import pickle
    import numpy as np
    try:
        import packboost  # noqa: F401
        raise SystemExit("packboost imported")
    except ImportError:
        pass
    loader = {loader!r}
    if loader == "cloudpickle":
        import cloudpickle as loader_module
    else:
        loader_module = pickle
    with open(sys.argv[1], "rb") as handle:
        predict = loader_module.load(handle)
    X = np.load(sys.argv[2])
    np.save(sys.argv[3], predict(X))
    pickle.dumps(predict)  # and it pickles again there
""")


@pytest.mark.parametrize("loader", ["pickle", "cloudpickle"])
def test_numerai_upload_recipe_runs_without_packboost(tmp_path, loader):
    """The README recipe: pickle the predictor, load and run it where
    ``import packboost`` fails."""
    if loader == "cloudpickle":
        serializer = pytest.importorskip("cloudpickle")
    else:
        serializer = pickle
    X, y, era = data_with_nan(5)
    model = PackBoostRegressor(n_estimators=4, random_state=0, n_jobs=1).fit(X, y, era=era)
    predict = model.standalone_predictor()
    blob = serializer.dumps(predict)
    assert b"packboost.standalone" not in blob and b"packboost.sklearn" not in blob
    (tmp_path / "predict.pkl").write_bytes(blob)
    np.save(tmp_path / "X.npy", X)
    script = tmp_path / "upload.py"
    script.write_text(UPLOAD.format(loader=loader))
    subprocess.run([sys.executable, str(script), str(tmp_path / "predict.pkl"),
                    str(tmp_path / "X.npy"), str(tmp_path / "out.npy")], check=True,
                   timeout=120, cwd=tmp_path)
    np.testing.assert_array_equal(np.load(tmp_path / "out.npy"), model.predict(X))
    # Small: the arrays, not the library.
    assert len(blob) < 50_000 + 64 * len(model.ensemble_.nodes["feature"])
