"""``reg_alpha``: L1 regularisation of leaf values (csrc/des.h, des_threshold_l1).

The kernels' gains with L1 are checked against the NumPy oracle in
test_split.py and test_grower.py, and across backends in test_cuda.py; here:
what a user sees, the units of the rescaled fit, and that ``reg_alpha = 0``
grows the very trees of before it existed.
"""

from __future__ import annotations

import hashlib
import platform

import numpy as np
import pytest
from test_cuda import FIT_CASES, random_problem

from packboost import PackBoostClassifier, PackBoostRegressor
from packboost.grower import leaf_values


def test_leaf_values_are_soft_thresholded():
    sum_g = np.array([-5.0, -1.0, 0.0, 0.5, 1.0, 3.0])
    sum_h = np.full(6, 3.0)
    np.testing.assert_array_equal(leaf_values(sum_g, sum_h, 1.0, 0.0, reg_alpha=1.0),
                                  [1.0, 0.0, 0.0, 0.0, 0.0, -0.5])
    np.testing.assert_array_equal(leaf_values(sum_g, sum_h, 1.0, 0.0, reg_alpha=0.0),
                                  -sum_g / 4.0)
    # max_delta_step clips after the threshold
    np.testing.assert_array_equal(leaf_values(sum_g, sum_h, 1.0, 0.25, reg_alpha=1.0),
                                  [0.25, 0.0, 0.0, 0.0, 0.0, -0.25])


def _problem(seed=0, n_rows=3000):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n_rows, 6))
    era = np.repeat(np.arange(30), n_rows // 30)
    y = X[:, 0] + 0.5 * X[:, 1] * X[:, 2] + rng.normal(size=n_rows)
    return X, y, era


def test_a_larger_reg_alpha_shrinks_the_leaves_and_a_huge_one_stops_every_split():
    X, y, era = _problem()
    params = dict(n_estimators=5, max_depth=4, random_state=0, n_jobs=1)
    magnitude = []
    for reg_alpha in (0.0, 5.0, 50.0):
        model = PackBoostRegressor(reg_alpha=reg_alpha, **params).fit(X, y, era=era)
        nodes = model.ensemble_.nodes
        magnitude.append(np.abs(nodes["value"][nodes["feature"] < 0]).sum())
    assert magnitude[0] > magnitude[1] > magnitude[2]
    flat = PackBoostRegressor(reg_alpha=1e9, **params).fit(X, y, era=era)
    assert (flat.ensemble_.nodes["feature"] == -1).all()
    np.testing.assert_array_equal(flat.predict(X), flat.ensemble_.base_score)


def test_reg_alpha_is_in_gradient_units_of_the_rescaled_fit():
    """For y * c, c a power of two, reg_alpha * c grows the same trees (values * c):
    the rescaled fit (docs/fixed-point.md §9) turns reg_alpha into its units."""
    X, y, era = _problem(1, 1500)
    params = dict(n_estimators=3, max_depth=3, random_state=0, n_jobs=1)
    base = PackBoostRegressor(reg_alpha=4.0, **params).fit(X, y, era=era)
    for exponent in (-300, 200):
        scaled = PackBoostRegressor(reg_alpha=np.ldexp(4.0, exponent), **params)
        scaled.fit(X, np.ldexp(y, exponent), era=era)
        for field in ("feature", "threshold_bin", "missing_left"):
            np.testing.assert_array_equal(scaled.ensemble_.nodes[field],
                                          base.ensemble_.nodes[field])
        np.testing.assert_array_equal(scaled.predict(X), np.ldexp(base.predict(X), exponent))


def test_the_classifier_takes_reg_alpha():
    X, y, era = _problem(2, 2100)
    labels = y > 0
    params = dict(n_estimators=5, random_state=0, n_jobs=1)
    plain = PackBoostClassifier(**params).fit(X, labels, era=era)
    l1 = PackBoostClassifier(reg_alpha=20.0, **params).fit(X, labels, era=era)
    assert np.abs(l1.decision_function(X) - l1.ensemble_.base_score).mean() < \
        np.abs(plain.decision_function(X) - plain.ensemble_.base_score).mean()


def test_reg_alpha_has_lightgbms_name_for_it():
    with pytest.raises(TypeError, match="'lambda_l1' is not a PackBoost parameter; use "
                                        "reg_alpha"):
        PackBoostRegressor(lambda_l1=1.0)
    with pytest.raises(ValueError, match="reg_alpha"):
        PackBoostRegressor(reg_alpha=-1.0).fit(np.zeros((10, 1)), np.zeros(10))


def _digest(model):
    digest = hashlib.sha256()
    for name in sorted(model.ensemble_.nodes):
        digest.update(name.encode())
        digest.update(np.ascontiguousarray(model.ensemble_.nodes[name]).tobytes())
    digest.update(np.float64(model.ensemble_.base_score).tobytes())
    return digest.hexdigest()[:16]


# SHA-256 of every node array of these fits, taken on x86_64 Linux (NumPy
# 2.x, GCC) at the commit before reg_alpha existed (b727bfe), re-taken when
# the DES era pass's sums went on a grid (docs/des.md §6.3: every score moved
# in its last bits by design; the reg_alpha = 0 path was checked equal to
# the commit before that one, then re-recorded), and again when the squared
# gradients went on a grid of their own (docs/fixed-point.md §8: the
# between-era noise term moved in its last bits; cases 1, 5 and the
# classifier unchanged).
DIGESTS_BEFORE_REG_ALPHA = {
    0: "f6913d19cc53f6ab", 1: "d285d7b1dbe75717", 2: "8621755acea7ad97",
    3: "0c4597dcbcee9cae", 4: "29ea274a8349b83f", 5: "59cf32770232c350",
    6: "1cf757c452060a7e", "classifier": "39029c4019e298aa",
}
# Case 7 (objective="quantile", 4e2dcec03fe74780 then) changed by design when
# quantile leaves became refitted to their residuals' quantile
# (packboost._leaf_refit); its first round's splits are checked unchanged by
# test_quantile_refit_keeps_the_first_round_splits below.


@pytest.mark.skipif(platform.machine() != "x86_64" or platform.system() != "Linux",
                    reason="digests recorded on x86_64 Linux")
def test_reg_alpha_zero_grows_the_trees_of_before_it_existed():
    """des_threshold_l1 is skipped, not evaluated, at reg_alpha = 0: bit for bit."""
    for seed, n_rows, n_features, n_eras, extra, weighted in FIT_CASES:
        if seed not in DIGESTS_BEFORE_REG_ALPHA:
            continue
        X, y, era, weight = random_problem(seed, n_rows, n_features, n_eras)
        model = PackBoostRegressor(n_estimators=4, pack_size=3, max_depth=4,
                                   min_samples_leaf=5, random_state=seed, n_jobs=1, **extra)
        model.fit(X, y, era=era, sample_weight=weight if weighted else None)
        assert _digest(model) == DIGESTS_BEFORE_REG_ALPHA[seed], (seed, extra)
    X, y, era, _ = random_problem(7, 300, 4, 6)
    model = PackBoostClassifier(n_estimators=3, pack_size=2, max_depth=3, random_state=1,
                                n_jobs=1).fit(X, (y > np.median(y)).astype(int), era=era)
    assert _digest(model) == DIGESTS_BEFORE_REG_ALPHA["classifier"]


def test_quantile_refit_keeps_the_first_round_splits():
    """The refit changes leaf values only: the first round (grown from the
    same gradients) has the same splits as Newton leaves would give, and its
    leaves are each tree's rows' residual quantiles, not the Newton values."""
    seed, n_rows, n_features, n_eras, extra, weighted = next(
        case for case in FIT_CASES if case[4].get("objective") == "quantile")
    X, y, era, weight = random_problem(seed, n_rows, n_features, n_eras)
    common = dict(n_estimators=1, pack_size=3, max_depth=4, min_samples_leaf=5,
                  random_state=seed, n_jobs=1)
    quantile = PackBoostRegressor(**common, **extra).fit(X, y, era=era)
    # The same first-round gradients with Newton leaves: a custom objective
    # returning the pinball gradient (custom fits start from a raw score of 0,
    # the built-in one from the alpha-quantile of y: added back here).
    alpha = extra["alpha"]
    base = quantile.ensemble_.base_score

    def pinball(y_true, y_pred):
        return np.where(y_pred + base >= y_true, 1.0 - alpha, -alpha), np.ones_like(y_true)

    newton = PackBoostRegressor(**common, objective=pinball).fit(X, y, era=era)
    for name in ("feature", "threshold", "left_child", "right_child", "missing_left"):
        np.testing.assert_array_equal(quantile.ensemble_.nodes[name],
                                      newton.ensemble_.nodes[name])
    leaves = quantile.ensemble_.nodes["feature"] < 0
    assert not np.array_equal(quantile.ensemble_.nodes["value"][leaves],
                              newton.ensemble_.nodes["value"][leaves])
