"""Several targets, some NaN in some rows (packboost._unknown_targets): each
target is fitted, and scored, on its known rows only."""

from __future__ import annotations

import numpy as np
import pytest

from packboost import PackBoostRegressor
from packboost.datasets import make_numerai_like

# Every sampling off: a target's trees are then those of a fit on its known rows.
NO_SAMPLING = dict(n_estimators=6, max_depth=4, pack_size=3, random_state=7, era_subsample=1.0,
                   row_subsample=1.0, tree_feature_fraction=1.0, layer_feature_fraction=1.0)


@pytest.fixture(scope="module")
def numerai():
    """Three targets: complete, unknown in the first eras (an auxiliary target
    that starts later), unknown in scattered rows and in the whole last era.
    X holds Numerai-style codes 0..4, every value in every target's known
    rows, so a fit on any of those row sets bins X alike."""
    data = make_numerai_like(n_rows=3_000, n_features=12, n_eras=15, random_state=2)
    rng = np.random.default_rng(2)
    era = np.asarray(data.era)
    y = np.asarray(data.y, dtype=np.float64)
    Y = np.column_stack([y, -3.0 * y + rng.normal(0, 0.2, len(y)), y ** 2])
    Y[era < 3, 1] = np.nan
    Y[rng.random(len(Y)) < 0.2, 2] = np.nan
    Y[era == 14, 2] = np.nan
    return np.asarray(data.X), Y, era


def _assert_same_trees(ensemble, alone):
    for name, values in alone.nodes.items():
        np.testing.assert_array_equal(ensemble.nodes[name], values, err_msg=name)


def _single_target_fits(params, X, Y, era, weight):
    """Per target: a one-target fit on its known rows (and their weights)."""
    for target in range(Y.shape[1]):
        known = ~np.isnan(Y[:, target])
        yield target, PackBoostRegressor(**params).fit(
            X[known], Y[known, target], era=era[known],
            sample_weight=None if weight is None else weight[known])


@pytest.mark.parametrize("objective", ["squared_error", "huber", "quantile"])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("n_jobs", [1, 2])
def test_each_target_is_a_fit_on_its_known_rows(numerai, objective, weighted, n_jobs):
    X, Y, era = numerai
    weight = np.random.default_rng(1).uniform(0.5, 2.0, len(X)) if weighted else None
    params = dict(NO_SAMPLING, objective=objective, n_jobs=n_jobs)
    joint = PackBoostRegressor(**params).fit(X, Y, era=era, sample_weight=weight)
    prediction = joint.predict(X)
    assert joint.n_eras_ == 15
    for target, alone in _single_target_fits(params, X, Y, era, weight):
        _assert_same_trees(joint.ensemble_.output_ensemble(target), alone.ensemble_)
        np.testing.assert_array_equal(prediction[:, target], alone.predict(X))


def test_with_sampling_the_draws_stay_shared(numerai):
    """A complete target's trees do not depend on the NaN of the others (the
    round's draws are made over every row), and no tree of a target holds a
    row where it is unknown."""
    X, Y, era = numerai
    params = dict(NO_SAMPLING, era_subsample=0.6, row_subsample=0.7, tree_feature_fraction=0.5,
                  n_jobs=1)
    joint = PackBoostRegressor(**params).fit(X, Y, era=era)
    alone = PackBoostRegressor(**params).fit(X, Y[:, 0], era=era)
    _assert_same_trees(joint.ensemble_.output_ensemble(0), alone.ensemble_)
    complete = PackBoostRegressor(**params).fit(X, np.nan_to_num(Y, nan=0.0), era=era)
    for target in (1, 2):
        nodes = joint.ensemble_.output_ensemble(target).nodes
        roots = nodes["n_samples"][_roots(joint.ensemble_.output_ensemble(target))]
        all_roots = complete.ensemble_.output_ensemble(target)
        assert np.all(roots <= (~np.isnan(Y[:, target])).sum())
        assert np.all(roots <= all_roots.nodes["n_samples"][_roots(all_roots)])
        assert roots.sum() < all_roots.nodes["n_samples"][_roots(all_roots)].sum()
    assert np.isfinite(joint.predict(X)).all()


def _roots(ensemble):
    return np.asarray(ensemble.tree_offsets[:-1], dtype=np.intp)


def test_eval_metrics_score_each_target_on_its_known_rows(numerai):
    X, Y, era = numerai
    train, valid = era < 10, era >= 10
    params = dict(NO_SAMPLING, n_jobs=1)
    joint = PackBoostRegressor(**params).fit(
        X[train], Y[train], era=era[train], eval_set=[(X[valid], Y[valid], era[valid])],
        eval_metric=["pearson_mean", "rmse"])
    history = joint.evals_result_["valid_0"]
    for target in (1, 2):
        known_train = train & ~np.isnan(Y[:, target])
        known_valid = valid & ~np.isnan(Y[:, target])
        alone = PackBoostRegressor(**params).fit(
            X[known_train], Y[known_train, target], era=era[known_train],
            eval_set=[(X[known_valid], Y[known_valid, target], era[known_valid])],
            eval_metric=["pearson_mean", "rmse"])
        for name in ("pearson_mean", "rmse"):
            assert history[f"{name}[{target}]"] == alone.evals_result_["valid_0"][name]
            assert np.isfinite(history[name]).all()


def test_unknown_values_are_refused_where_a_target_cannot_be_unknown(numerai):
    X, Y, era = numerai
    with pytest.raises(ValueError, match="contains NaN"):
        PackBoostRegressor(**NO_SAMPLING).fit(X, Y[:, 1], era=era)   # one target: drop rows
    with pytest.raises(ValueError, match=r"y\[:, 1\] is NaN in every row"):
        PackBoostRegressor(**NO_SAMPLING).fit(X, np.column_stack([Y[:, 0], np.full(len(X),
                                                                                 np.nan)]))


def test_a_callable_objective_gets_the_nan_and_its_values_there_are_not_used(numerai):
    X, Y, era = numerai

    unknown_seen = []

    def squared(y_true, y_pred):
        unknown_seen.append(int(np.isnan(y_true).sum()))
        return y_pred - y_true, np.ones_like(y_true)      # NaN where y_true is NaN

    params = dict(NO_SAMPLING, objective=squared, n_jobs=1)
    joint = PackBoostRegressor(**params).fit(X, Y, era=era)
    assert set(unknown_seen) == {int(np.isnan(Y).sum())}
    for target in (1, 2):
        known = ~np.isnan(Y[:, target])
        alone = PackBoostRegressor(**params).fit(X[known], Y[known, target], era=era[known])
        _assert_same_trees(joint.ensemble_.output_ensemble(target), alone.ensemble_)


@pytest.mark.parametrize("weighted", [False, True])
def test_awkward_eras_one_row_and_no_known_row_for_a_target(weighted):
    """Eras of one row, and eras where a target has no known row (absent for
    it alone): each target is still the fit on its known rows, bit for bit."""
    data = make_numerai_like(n_rows=600, n_features=6, n_eras=6, random_state=5)
    rng = np.random.default_rng(5)
    X = np.asarray(data.X)
    era = np.asarray(data.era).astype(np.int64)
    y = np.asarray(data.y, dtype=np.float64)
    # Three one-row eras after the others (rows stay era-sorted).
    X = np.vstack([X, X[[3, 100, 400]]])
    era = np.concatenate([era, [10, 11, 12]])
    y = np.concatenate([y, [0.25, 0.75, 0.5]])
    Y = np.column_stack([y, y + rng.normal(0, 0.1, len(y)), 1.0 - y])
    Y[era == 11, 0] = np.nan                  # a one-row era unknown for target 0
    Y[era == 2, 1] = np.nan                   # a whole era unknown for target 1
    Y[(era == 4) & (rng.random(len(y)) < 0.5), 2] = np.nan
    Y[era == 10, 2] = np.nan
    weight = rng.uniform(0.5, 2.0, len(y)) if weighted else None
    params = dict(NO_SAMPLING, max_depth=3, n_jobs=2)
    joint = PackBoostRegressor(**params).fit(X, Y, era=era, sample_weight=weight)
    for target, alone in _single_target_fits(params, X, Y, era, weight):
        _assert_same_trees(joint.ensemble_.output_ensemble(target), alone.ensemble_)


def _count_shared_passes(monkeypatch):
    """Record, per call of booster.grow_output_packs, whether it grew the
    outputs as one pack (True) or left them to be grown one by one (False)."""
    from packboost import booster

    grown = []
    grow = booster.grow_output_packs

    def counted(*args, **kwargs):
        packs = grow(*args, **kwargs)
        grown.append(packs is not None)
        return packs

    monkeypatch.setattr(booster, "grow_output_packs", counted)
    return grown


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("n_jobs", [1, 2])
@pytest.mark.parametrize("n_rows", [211, 1_337])
def test_targets_with_unknown_rows_share_one_pass(weighted, n_jobs, n_rows, monkeypatch):
    """Targets NaN in some rows (scattered, a whole era, the first eras) are
    grown as one pack for all outputs (grower.grow_output_packs with their
    known rows), and each output's trees are bit for bit those of the
    outputs grown one by one and of a one-target fit on its known rows."""
    from packboost.backends.cpu import CpuBackend

    data = make_numerai_like(n_rows=n_rows, n_features=7, n_eras=9, random_state=n_rows)
    rng = np.random.default_rng(n_rows)
    X, era = np.asarray(data.X), np.asarray(data.era)
    y = np.asarray(data.y, dtype=np.float64)
    Y = np.column_stack([y, y + rng.normal(0, 0.1, len(y)), 1.0 - y, y * y])
    Y[era == 4, 0] = np.nan                            # an era with no known row
    Y[era < 2, 1] = np.nan                             # a target that starts later
    Y[rng.random(len(y)) < 0.1, 2] = np.nan            # scattered unknown rows
    Y[(era == 8) & (rng.random(len(y)) < 0.5), 3] = np.nan
    weight = rng.uniform(0.5, 2.0, len(y)) if weighted else None
    params = dict(NO_SAMPLING, max_depth=5, pack_size=3, n_jobs=n_jobs)
    grown = _count_shared_passes(monkeypatch)
    joint = PackBoostRegressor(**params).fit(X, Y, era=era, sample_weight=weight)
    assert grown == [True] * params["n_estimators"]
    monkeypatch.setattr(CpuBackend, "grows_outputs_in_one_pass", False)
    one_by_one = PackBoostRegressor(**params).fit(X, Y, era=era, sample_weight=weight)
    assert len(grown) == params["n_estimators"]
    _assert_same_trees(joint.ensemble_, one_by_one.ensemble_)
    for target, alone in _single_target_fits(params, X, Y, era, weight):
        _assert_same_trees(joint.ensemble_.output_ensemble(target), alone.ensemble_)
        assert alone.ensemble_.nodes["feature"].max() >= 0      # the trees split


def test_unknown_rows_with_sampling_share_one_pass(numerai, monkeypatch):
    """With era, row and feature draws the shared pass grows what the
    outputs grown one by one grow (the draws cut to each target's known
    rows), over the one-pass size limit too (two passes per round)."""
    from packboost.backends.cpu import CpuBackend

    X, Y, era = numerai
    params = dict(NO_SAMPLING, era_subsample=0.6, row_subsample=0.7, tree_feature_fraction=0.5,
                  pack_size=24, n_jobs=2, n_estimators=3)
    grown = _count_shared_passes(monkeypatch)
    joint = PackBoostRegressor(**params).fit(X, Y, era=era)
    assert grown == [True] * params["n_estimators"]     # outputs 0-1 shared, 2 alone
    monkeypatch.setattr(CpuBackend, "grows_outputs_in_one_pass", False)
    one_by_one = PackBoostRegressor(**params).fit(X, Y, era=era)
    _assert_same_trees(joint.ensemble_, one_by_one.ensemble_)
    np.testing.assert_array_equal(joint.predict(X), one_by_one.predict(X))


def test_targets_whose_counts_need_fewer_bits_are_grown_one_by_one(monkeypatch):
    """A target known in under half of every era's rows has fewer row-count
    bits in its cells than a complete one (a cell layout of its own): the
    round's packs are then grown one after the other, and each target is
    still its fit on its known rows."""
    data = make_numerai_like(n_rows=1_200, n_features=6, n_eras=6, random_state=3)
    X, era = np.asarray(data.X), np.asarray(data.era)
    y = np.asarray(data.y, dtype=np.float64)
    Y = np.column_stack([y, 1.0 - y])
    Y[np.arange(len(y)) % 3 != 0, 1] = np.nan       # 200 rows an era -> about 67 known
    params = dict(NO_SAMPLING, n_jobs=1, n_estimators=3)
    grown = _count_shared_passes(monkeypatch)
    joint = PackBoostRegressor(**params).fit(X, Y, era=era)
    assert grown == [False] * params["n_estimators"]
    for target, alone in _single_target_fits(params, X, Y, era, None):
        _assert_same_trees(joint.ensemble_.output_ensemble(target), alone.ensemble_)
