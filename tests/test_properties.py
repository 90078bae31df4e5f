"""Property tests (hypothesis): random shapes, eras, NaN patterns and parameters.

* fit + predict never crash, and predictions are finite (probabilities in [0, 1]);
* a fit is a pure function of (data, parameters, seed): bit-identical twice,
  whatever ``n_jobs``;
* the order of the rows does not change the model beyond float summation
  order: fit sorts rows by era (stably), so a permutation changes only the
  order in which sums over a node's rows are accumulated. Predictions then
  agree to ``ROW_ORDER_RTOL`` of the target's scale (the differences
  observed are ~1e-15: the last bits of sums; a split choice could only
  change at an exact near-tie of two candidates, which continuous random
  data does not produce). This holds with ``row_subsample=1``: row sampling
  draws per era-sorted position, so a permutation inside an era changes
  which rows a tree samples (era sampling is unaffected);
* a constant target gives a constant model: no split anywhere, the same
  prediction for every row, equal to the target up to the rounding of its
  mean.

Examples are derandomized by default so that the suite is reproducible; set
``HYPOTHESIS_PROFILE=explore`` for a longer randomized search.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from packboost import PackBoostClassifier, PackBoostRegressor  # noqa: E402

settings.register_profile(
    "default", max_examples=100, deadline=None, derandomize=True, print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.register_profile(
    "explore", max_examples=500, deadline=None, print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))

# Predictions of a row-permuted fit agree to this, relative to max(1, max |y|).
ROW_ORDER_RTOL = 1e-9


@st.composite
def era_problems(draw, *, max_rows=80):
    """(X, y, era, sample_weight) with awkward shapes, eras, NaN patterns, dtypes."""
    n_rows = draw(st.integers(1, max_rows))
    n_features = draw(st.integers(1, 5))
    n_eras = draw(st.integers(1, 8))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    kind = draw(st.sampled_from(["normal", "int8 bins", "few values", "heavy tails"]))
    if kind == "normal":
        X = rng.normal(size=(n_rows, n_features))
    elif kind == "int8 bins":
        X = rng.integers(0, 5, size=(n_rows, n_features)).astype(np.int8)
    elif kind == "few values":
        X = rng.integers(-2, 3, size=(n_rows, n_features)).astype(np.float32)
    else:
        X = rng.standard_cauchy(size=(n_rows, n_features)) * 1e6
    if X.dtype.kind == "f":
        pattern = draw(st.sampled_from(["none", "random", "whole column", "everything"]))
        if pattern == "random":
            X[rng.random(X.shape) < draw(st.floats(0.0, 0.9))] = np.nan
        elif pattern == "whole column":
            X[:, rng.integers(n_features)] = np.nan
        elif pattern == "everything":
            X[:] = np.nan
    era = rng.integers(0, n_eras, size=n_rows)
    if draw(st.booleans()):
        era = np.array([f"era{value:02d}" for value in era])
    y = rng.normal(size=n_rows) * draw(st.sampled_from([1e-6, 1.0, 1e4]))
    y += (np.nan_to_num(X[:, 0].astype(np.float64), posinf=0.0, neginf=0.0) > 0) * 0.5
    weights = None
    if draw(st.booleans()):
        weights = rng.uniform(0.0, 3.0, size=n_rows)
        weights[rng.random(n_rows) < 0.2] = 0.0
        weights[rng.integers(n_rows)] = 1.0  # a positive sum
    return X, y, era, weights


@st.composite
def parameters(draw):
    return dict(
        n_estimators=draw(st.integers(1, 4)),
        pack_size=draw(st.integers(1, 4)),
        max_depth=draw(st.integers(0, 4)),
        learning_rate=draw(st.floats(0.01, 1.0)),
        reg_lambda=draw(st.sampled_from([0.0, 1e-3, 1.0, 10.0])),
        min_samples_leaf=draw(st.integers(1, 8)),
        min_child_weight=draw(st.sampled_from([0.0, 1e-3, 0.5])),
        min_split_gain=draw(st.sampled_from([0.0, 1e-6])),
        max_delta_step=draw(st.sampled_from([0.0, 0.5])),
        max_bins=draw(st.sampled_from([2, 3, 16, 255, 300])),
        layer_feature_fraction=draw(st.sampled_from([0.3, 1.0])),
        tree_feature_fraction=draw(st.sampled_from([0.5, 1.0])),
        era_subsample=draw(st.sampled_from([0.3, 0.75, 1.0])),
        row_subsample=draw(st.sampled_from([0.5, 1.0])),
        era_gain=draw(st.sampled_from(["realized", "newton"])),
        lambda_dro=draw(st.sampled_from([0.0, 0.25, 2.0])),
        lambda_dir=draw(st.sampled_from([0.0, 0.5, 3.0])),
        dir_tanh_scale=draw(st.sampled_from([0.0, 1.0])),
        era_weighting=draw(st.sampled_from(["equal", "count"])),
        era_alpha=draw(st.sampled_from([0.0, 5.0])),
        random_state=draw(st.integers(0, 2**31 - 1)),
        n_jobs=draw(st.sampled_from([1, 2])),
    )


def nodes_equal(a, b):
    return all(np.array_equal(a.ensemble_.nodes[name], b.ensemble_.nodes[name], equal_nan=True)
               for name in a.ensemble_.nodes)


@given(problem=era_problems(), params=parameters())
def test_random_problems_never_crash_and_predict_finite_values(problem, params):
    X, y, era, weights = problem
    model = PackBoostRegressor(**params).fit(X, y, era=era, sample_weight=weights)
    prediction = model.predict(X)
    assert prediction.shape == (len(y),)
    assert np.isfinite(prediction).all()
    assert np.isfinite(model.predict(np.full((3, X.shape[1]), np.nan))).all()
    assert np.isfinite(model.feature_importances_).all()


@given(problem=era_problems(), params=parameters())
def test_random_classification_problems_give_probabilities(problem, params):
    X, y, era, weights = problem
    labels = y > np.median(y)
    if labels.all() or not labels.any():
        labels[0] = not labels[0]
        if len(labels) == 1:
            return  # one row cannot hold two classes
    model = PackBoostClassifier(**params).fit(X, labels, era=era, sample_weight=weights)
    proba = model.predict_proba(X)
    assert np.isfinite(proba).all() and (proba >= 0).all() and (proba <= 1).all()
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)


@given(problem=era_problems(), params=parameters(), other_n_jobs=st.sampled_from([1, 2, 3]))
def test_fit_is_deterministic_for_a_seed_whatever_the_threads(problem, params, other_n_jobs):
    X, y, era, weights = problem
    first = PackBoostRegressor(**params).fit(X, y, era=era, sample_weight=weights)
    second = PackBoostRegressor(**{**params, "n_jobs": other_n_jobs}).fit(
        X, y, era=era, sample_weight=weights)
    assert nodes_equal(first, second)
    np.testing.assert_array_equal(first.predict(X), second.predict(X))


@settings(suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow])
@given(problem=era_problems(), params=parameters(), permutation_seed=st.integers(0, 1000))
def test_row_order_changes_the_model_only_by_summation_order(problem, params,
                                                            permutation_seed):
    X, y, era, weights = problem
    X = X.astype(np.float64)
    y = y + np.random.default_rng(permutation_seed).normal(size=len(y)) * 1e-3 * np.std(y)
    params = {**params, "row_subsample": 1.0}
    order = np.random.default_rng(permutation_seed).permutation(len(y))
    original = PackBoostRegressor(**params).fit(X, y, era=era, sample_weight=weights)
    permuted = PackBoostRegressor(**params).fit(
        X[order], y[order], era=era[order],
        sample_weight=None if weights is None else weights[order])
    scale = max(1.0, float(np.max(np.abs(y))))
    np.testing.assert_allclose(permuted.predict(X), original.predict(X), rtol=0,
                               atol=ROW_ORDER_RTOL * scale)


@given(problem=era_problems(), params=parameters(),
       value=st.sampled_from([0.0, 1.0, -3.5, 0.1, 1e-7, 12345.678]))
def test_a_constant_target_gives_a_constant_model(problem, params, value):
    X, _, era, weights = problem
    y = np.full(len(era), value)
    model = PackBoostRegressor(**params).fit(X, y, era=era, sample_weight=weights)
    assert (model.ensemble_.nodes["feature"] == -1).all(), "a split on a constant target"
    prediction = model.predict(X)
    assert np.ptp(prediction) == 0.0
    np.testing.assert_allclose(prediction, value, rtol=1e-12, atol=1e-12)
