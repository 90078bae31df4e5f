"""The estimators: scikit-learn's own checks, the fit/predict contract, eras."""

import pickle

import numpy as np
import pytest

import packboost
from packboost import PackBoostClassifier, PackBoostRegressor
from packboost.datasets import make_numerai_like
from packboost.metrics import era_summary, per_era_correlation

sklearn = pytest.importorskip("sklearn")
from sklearn.base import clone  # noqa: E402
from sklearn.utils.estimator_checks import parametrize_with_checks  # noqa: E402

FAST = dict(n_estimators=8, random_state=0)


@parametrize_with_checks([PackBoostRegressor(**FAST), PackBoostClassifier(**FAST)])
def test_sklearn_compatible_estimator(estimator, check):
    check(estimator)


def era_problem(seed=0, n_rows=3000, n_features=8, n_eras=30):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n_rows, n_features))
    X[rng.random(X.shape) < 0.05] = np.nan
    era = rng.integers(0, n_eras, size=n_rows)
    flip = np.where(rng.random(n_eras) < 0.3, -1.0, 1.0)
    y = (0.5 * np.nan_to_num(X[:, 0]) + 0.8 * flip[era] * np.nan_to_num(X[:, 1])
         + rng.normal(size=n_rows))
    return X, y, era


def test_openmp_is_compiled_in():
    assert packboost.openmp_enabled()
    assert packboost.show_config()["openmp"] is True


def test_thread_count_does_not_change_the_model():
    X, y, era = era_problem()
    models = [PackBoostRegressor(n_estimators=10, n_jobs=n_jobs, random_state=3)
              .fit(X, y, era=era) for n_jobs in (1, 2)]
    for name, values in models[0].ensemble_.nodes.items():
        np.testing.assert_array_equal(values, models[1].ensemble_.nodes[name], err_msg=name)
    np.testing.assert_array_equal(models[0].predict(X), models[1].predict(X))


def test_same_seed_same_model_other_seed_other_model():
    X, y, era = era_problem()
    a = PackBoostRegressor(n_estimators=5, random_state=1).fit(X, y, era=era).predict(X)
    b = PackBoostRegressor(n_estimators=5, random_state=1).fit(X, y, era=era).predict(X)
    c = PackBoostRegressor(n_estimators=5, random_state=2).fit(X, y, era=era).predict(X)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)


def test_trees_in_a_pack_differ_with_default_sampling():
    X, y, era = era_problem()
    model = PackBoostRegressor(n_estimators=2, random_state=0).fit(X, y, era=era)
    ensemble = model.ensemble_
    assert ensemble.n_trees == 2 * model.pack_size
    signatures = set()
    for tree in range(model.pack_size):
        start, end = ensemble.tree_offsets[tree], ensemble.tree_offsets[tree + 1]
        signatures.add((tuple(ensemble.nodes["feature"][start:end]),
                        tuple(ensemble.nodes["threshold_bin"][start:end])))
    assert len(signatures) == model.pack_size


def test_input_order_does_not_matter_beyond_summation_order():
    """Rows are sorted by era inside fit; shuffling whole eras gives the same
    era-sorted matrix, so the same model."""
    X, y, era = era_problem(n_eras=12)
    order = np.argsort(era, kind="stable")
    shuffled = np.random.default_rng(0).permutation(len(y))
    reordered = shuffled[np.argsort(era[shuffled], kind="stable")]
    a = PackBoostRegressor(n_estimators=5, random_state=0).fit(X[order], y[order],
                                                                era=era[order])
    b = PackBoostRegressor(n_estimators=5, random_state=0).fit(X, y, era=era)
    np.testing.assert_array_equal(a.predict(X), b.predict(X))
    c = PackBoostRegressor(n_estimators=5, random_state=0).fit(X[reordered], y[reordered],
                                                                era=era[reordered])
    np.testing.assert_allclose(a.predict(X), c.predict(X), rtol=1e-6, atol=1e-6)


def test_era_as_column_name_and_string_labels():
    pd = pytest.importorskip("pandas")
    X, y, era = era_problem()
    frame = pd.DataFrame(X, columns=[f"f{i}" for i in range(X.shape[1])])
    frame["era"] = [f"era{e:03d}" for e in era]
    model = PackBoostRegressor(n_estimators=4, random_state=0).fit(frame, y, era="era")
    assert model.n_features_in_ == X.shape[1]
    assert list(model.feature_names_in_) == [f"f{i}" for i in range(X.shape[1])]
    assert model.n_eras_ == len(np.unique(era))
    reference = PackBoostRegressor(n_estimators=4, random_state=0).fit(X, y, era=era)
    np.testing.assert_array_equal(model.predict(frame.drop(columns="era")), reference.predict(X))
    with pytest.raises(ValueError, match="not a column"):
        PackBoostRegressor(n_estimators=1).fit(frame, y, era="missing")
    with pytest.raises(TypeError, match="DataFrame"):
        PackBoostRegressor(n_estimators=1).fit(X, y, era="era")


def test_int8_numerai_features_train_and_predict():
    data = make_numerai_like(n_rows=4000, n_features=20, n_eras=20, random_state=0)
    X = data.X.astype(np.int8)  # Numerai ships int8
    model = PackBoostRegressor(n_estimators=5, random_state=0).fit(X, data.y, era=data.era)
    assert model.bin_mapper_.prebinned_
    np.testing.assert_array_equal(model.predict(X), model.predict(X.astype(np.float64)))


def test_sample_weight_zero_is_like_dropping_rows():
    """Zero-weight rows add nothing to any sum; integer features keep the bins
    identical, so the model matches one fitted without those rows."""
    rng = np.random.default_rng(0)
    X = rng.integers(0, 5, size=(2000, 6)).astype(np.uint8)
    y = X[:, 0] * 0.3 - X[:, 1] * 0.2 + rng.normal(size=2000)
    weight = rng.uniform(0.5, 2.0, size=2000)
    weight[::3] = 0.0
    X[1::3][:, 0] = X[1::3][:, 0].clip(max=3)  # keep the column max at 4 in both fits
    params = dict(n_estimators=5, random_state=0, min_samples_leaf=1, min_child_weight=1e-9)
    weighted = PackBoostRegressor(**params).fit(X, y, sample_weight=weight)
    keep = weight > 0
    dropped = PackBoostRegressor(**params).fit(X[keep], y[keep], sample_weight=weight[keep])
    # Equal up to summation order (the base score is a weighted mean over a
    # different number of terms), which may flip an exact near-tie in a tiny node.
    difference = np.abs(weighted.predict(X) - dropped.predict(X))
    assert np.median(difference) < 1e-12
    assert np.mean(difference > 1e-9) < 0.01
    assert weighted.predict(X).std() > 0


def test_pickle_round_trip():
    X, y, era = era_problem()
    model = PackBoostRegressor(n_estimators=4, random_state=0).fit(X, y, era=era)
    restored = pickle.loads(pickle.dumps(model))
    np.testing.assert_array_equal(restored.predict(X), model.predict(X))
    assert clone(model).get_params() == model.get_params()


def test_eval_set_records_a_falling_training_curve():
    X, y, era = era_problem()
    model = PackBoostRegressor(n_estimators=15, random_state=0, lambda_dro=0.0)
    model.fit(X[:2000], y[:2000], era=era[:2000], eval_set=[(X[2000:], y[2000:])])
    curve = model.evals_result_["valid_0"]["rmse"]
    assert len(curve) == 15
    assert curve[-1] < curve[0]
    final = np.sqrt(np.mean((model.predict(X[2000:]) - y[2000:]) ** 2))
    assert curve[-1] == pytest.approx(final, rel=1e-12)


def test_classifier_probabilities():
    X, y, era = era_problem()
    labels = np.where(y > 0, "up", "down")
    model = PackBoostClassifier(n_estimators=10, random_state=0).fit(X, labels, era=era)
    assert list(model.classes_) == ["down", "up"]
    proba = model.predict_proba(X)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    assert ((model.predict(X) == "up") == (proba[:, 1] > 0.5)).all()
    assert (model.predict(X) == labels).mean() > 0.6


def test_des_beats_the_mean_on_held_out_eras():
    """Real signal, held-out eras: positive per-era correlation in most eras."""
    data = make_numerai_like(n_rows=30_000, n_features=30, n_eras=60, drift=0.0,
                             signal=0.3, random_state=1)
    train, test = data.split_by_era(0.25)
    model = PackBoostRegressor(n_estimators=30, max_depth=4, random_state=0)
    model.fit(train.X, train.y, era=train.era)
    prediction = model.predict(test.X)
    _, correlations = per_era_correlation(test.y, prediction, test.era)
    summary = era_summary(correlations)
    assert summary["mean"] > 0.05
    assert (correlations > 0).mean() > 0.8
    # ... and it beats the constant "mean" model in squared error.
    mse_model = np.mean((prediction - test.y) ** 2)
    mse_mean = np.mean((np.mean(train.y) - test.y) ** 2)
    assert mse_model < mse_mean


PARAM_ERRORS = [
    ("n_estimators", -1, ValueError), ("n_estimators", 2.5, TypeError),
    ("pack_size", 0, ValueError), ("max_depth", -2, ValueError),
    ("learning_rate", 0.0, ValueError), ("reg_lambda", -1.0, ValueError),
    ("min_samples_leaf", 0, ValueError), ("max_bins", 1, ValueError),
    ("max_bins", 70000, ValueError), ("layer_feature_fraction", 0.0, ValueError),
    ("tree_feature_fraction", 1.5, ValueError), ("row_subsample", 0.0, ValueError),
    ("era_subsample", 2.0, ValueError), ("era_gain", "pooled", ValueError),
    ("era_weighting", "size", ValueError), ("lambda_dro", -0.1, ValueError),
    ("lambda_dir", float("nan"), ValueError), ("dir_tanh_scale", -1.0, ValueError),
    ("device", "tpu", ValueError), ("n_jobs", 0, ValueError), ("n_jobs", "all", TypeError),
    ("random_state", "seed", TypeError), ("min_child_weight", "x", TypeError),
]


@pytest.mark.parametrize("name, value, error", PARAM_ERRORS)
def test_bad_parameters_name_themselves(name, value, error):
    X, y, _ = era_problem(n_rows=50)
    with pytest.raises(error, match=name):
        PackBoostRegressor(**{name: value}).fit(X, y)


def test_max_depth_minus_one_means_no_limit_as_in_lightgbm(tmp_path):
    """LightGBM's ``max_depth=-1`` passed the constructor and failed at fit: it is
    the engine's deepest tree, grown until the leaf constraints stop it."""
    X, y, era = era_problem(n_rows=2000)
    params = dict(n_estimators=3, min_samples_leaf=5, lambda_dro=0.0, random_state=0)
    unlimited = PackBoostRegressor(max_depth=-1, **params).fit(X, y, era=era)
    deepest = PackBoostRegressor(max_depth=30, **params).fit(X, y, era=era)
    assert unlimited.get_params()["max_depth"] == -1
    roots = unlimited.ensemble_.tree_roots()
    assert unlimited.ensemble_.max_depth(roots) > 6      # deeper than the default
    assert np.array_equal(unlimited.predict(X), deepest.predict(X))
    unlimited.save_model(tmp_path / "m.pbm")
    assert packboost.load_model(tmp_path / "m.pbm").get_params()["max_depth"] == -1
    with pytest.raises(ValueError, match=r"max_depth must be in \[-1, 30\], got -2"):
        PackBoostRegressor(max_depth=-2).fit(X, y)


@pytest.mark.parametrize("bad, message", [
    (dict(y=np.ones(10)), "rows"),
    (dict(era=np.zeros(10)), "era"),
    (dict(sample_weight=-np.ones(50)), "non-negative"),
    (dict(sample_weight=np.zeros(50)), "zero"),
    (dict(era=np.r_[np.nan, np.zeros(49)]), "NaN"),
])
def test_bad_fit_arguments(bad, message):
    X, y, _ = era_problem(n_rows=50)
    kwargs = dict(y=y, era=None, sample_weight=None, **{})
    kwargs.update(bad)
    with pytest.raises(ValueError, match=message):
        PackBoostRegressor(n_estimators=1).fit(X, **kwargs)


def test_predict_checks_feature_count():
    X, y, era = era_problem()
    model = PackBoostRegressor(n_estimators=2).fit(X, y, era=era)
    with pytest.raises(ValueError, match="expecting 8 features"):
        model.predict(X[:, :5])
    with pytest.raises(ValueError, match="infinity"):
        model.predict(np.full_like(X, np.inf))


def test_a_frame_keeps_its_era_column_at_predict(tmp_path):
    """Fitted with era="era", the model predicts the same frame, era column and
    all; other columns that are not features are still an error naming them."""
    pd = pytest.importorskip("pandas")
    from packboost import load_model

    rng = np.random.default_rng(0)
    frame = pd.DataFrame(rng.integers(0, 5, size=(600, 4)), columns=list("abcd"))
    frame["era"] = np.repeat([f"{i:04d}" for i in range(6)], 100)
    y = frame["a"] * 0.1 + rng.normal(size=600)
    model = PackBoostRegressor(n_estimators=3, random_state=0, n_jobs=1).fit(frame, y,
                                                                             era="era")
    assert model.era_column_ == "era" and list(model.feature_names_in_) == list("abcd")
    expected = model.predict(frame[list("abcd")])
    np.testing.assert_array_equal(model.predict(frame), expected)
    np.testing.assert_array_equal(model.predict(frame[["era", *"abcd"]]), expected)
    with pytest.raises(ValueError, match="unexpected \\['id'\\]") as extra:
        model.predict(frame.assign(id=1))
    assert "missing" not in str(extra.value)    # nothing is missing: it said "missing []"
    assert "X[model.feature_names_in_]" in str(extra.value)
    # Every unknown column is named, strings included (checked before the dtypes,
    # so an id of strings is not reported as a "non-numeric feature").
    ids = [f"n{row:05d}" for row in range(600)]
    with pytest.raises(ValueError, match=r"unexpected \['id', 'target'\] \(columns that are "
                                         r"not features of the model: drop them"):
        model.predict(frame.assign(id=ids, target=y))
    model.save_model(tmp_path / "m.pbm")
    np.testing.assert_array_equal(load_model(tmp_path / "m.pbm").predict(frame), expected)
    plain = PackBoostRegressor(n_estimators=1, random_state=0).fit(frame[list("abcd")], y)
    assert not hasattr(plain, "era_column_")
