"""predict(X, pred_contrib=True): exact TreeSHAP against brute-force Shapley values."""

from __future__ import annotations

import numpy as np
import pytest

from packboost import PackBoostClassifier, PackBoostRegressor, _contributions

from oracles.shap_reference import shapley_contributions


def problem(seed, n_rows=600, n_features=5, nan_rate=0.1):
    rng = np.random.default_rng(seed)
    X = rng.integers(0, 5, size=(n_rows, n_features)).astype(np.float64)
    X[rng.random(X.shape) < nan_rate] = np.nan
    era = rng.integers(0, 6, n_rows)
    y = (np.nan_to_num(X[:, 0]) - 2 * (np.nan_to_num(X[:, 1]) > 2) + np.nan_to_num(X[:, 2]) % 2
         + rng.normal(size=n_rows))
    return X, y, era


@pytest.mark.parametrize("seed, params", [
    (0, dict(max_depth=3)),
    (1, dict(max_depth=5, row_subsample=0.7, lambda_dro=0.0)),       # repeated features
    (2, dict(max_depth=4, pack_size=1, era_subsample=1.0, lambda_dro=0.0)),
])
@pytest.mark.parametrize("kernel", ["tabled", "recursive", "tabled-in-chunks"])
def test_contributions_equal_brute_force_shapley_values(monkeypatch, seed, params, kernel):
    X, y, era = problem(seed)
    model = PackBoostRegressor(n_estimators=3, random_state=seed, n_jobs=2, min_samples_leaf=5,
                               **params).fit(X, y, era=era)
    assert (model.ensemble_.nodes["feature"] >= 0).sum() > 5  # real trees
    if kernel == "recursive":
        monkeypatch.setattr(_contributions, "MAX_TABLED_PATH_FEATURES", 0)
    elif kernel == "tabled-in-chunks":
        monkeypatch.setattr(_contributions, "TABLE_BUDGET_ENTRIES", 200)  # some recursive too
    rows = X[:12]
    got = model.predict(rows, pred_contrib=True)
    nodes = model.ensemble_.nodes
    want = shapley_contributions(nodes, model.ensemble_.tree_roots(),
                                 model.ensemble_.base_score, rows)
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)
    # local accuracy: the contributions add up to the prediction
    np.testing.assert_allclose(got.sum(axis=1), model.predict(rows), rtol=1e-9, atol=1e-12)


def test_contributions_properties_on_more_rows_and_threads(monkeypatch):
    X, y, era = problem(3, n_rows=2_000, n_features=8)
    model = PackBoostRegressor(n_estimators=10, max_depth=6, random_state=0, n_jobs=2,
                               lambda_dro=0.0).fit(X, y, era=era)
    contributions = model.predict(X, pred_contrib=True)
    assert contributions.shape == (2_000, 9)
    np.testing.assert_allclose(contributions.sum(axis=1), model.predict(X), rtol=1e-9,
                               atol=1e-9)
    # same expected value for every row; features never split on get 0
    assert np.all(contributions[:, -1] == contributions[0, -1])
    unused = np.setdiff1d(np.arange(8), model.ensemble_.nodes["feature"])
    assert np.all(contributions[:, unused] == 0.0)
    one_thread = model.set_params(n_jobs=1).predict(X, pred_contrib=True)
    np.testing.assert_array_equal(one_thread, contributions)
    monkeypatch.setattr(_contributions, "MAX_TABLED_PATH_FEATURES", 0)  # the recursive kernel
    np.testing.assert_allclose(model.predict(X, pred_contrib=True), contributions, rtol=1e-9,
                               atol=1e-12)
    # iteration_range: the first rounds' trees only
    first = model.predict(X[:50], iteration_range=(0, 3), pred_contrib=True)
    np.testing.assert_allclose(first.sum(axis=1), model.predict(X[:50], iteration_range=(0, 3)),
                               rtol=1e-9, atol=1e-9)


def test_classifier_contributions_are_in_log_odds():
    X, y, era = problem(4)
    model = PackBoostClassifier(n_estimators=4, random_state=0, n_jobs=1).fit(
        X, y > np.median(y), era=era)
    contributions = model.predict(X, pred_contrib=True)
    np.testing.assert_allclose(contributions.sum(axis=1), model.decision_function(X),
                               rtol=1e-9, atol=1e-9)


def test_contributions_of_a_model_without_splits_and_bad_input():
    X, y, era = problem(5, n_rows=50)
    model = PackBoostRegressor(n_estimators=2, max_depth=0, random_state=0).fit(X, y, era=era)
    contributions = model.predict(X, pred_contrib=True)
    assert np.all(contributions[:, :-1] == 0.0)
    np.testing.assert_allclose(contributions[:, -1], model.predict(X))
    with pytest.raises(ValueError, match="features"):
        model.predict(X[:, :2], pred_contrib=True)
    with pytest.raises(Exception, match="not fitted"):
        PackBoostRegressor().predict(X, pred_contrib=True)
