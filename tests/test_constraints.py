"""Monotone and interaction constraints (docs/des.md §14, packboost/_constraints.py).

The kernel's constrained candidate rule against the oracle; fitted models
checked on grids (monotone) and path by path (interactions) for many seeds
and configurations; constraints that constrain nothing give the same trees;
bad input raises naming the parameter.
"""

import json

import numpy as np
import pytest
from test_split import PARAM_GRID, tile_histogram

from packboost import PackBoostClassifier, PackBoostRegressor, _constraints, _split
from packboost.model_io import load_model

from conftest import DEFAULT_SPLIT_PARAMS, make_binned_problem
from oracles import reference as _reference

# ----------------------------------------------------------------------------- kernel


def _bounds_around(hist, params, rng):
    """Bounds that clip: a random interval around or beside the node's value."""
    sum_g = hist["sum_gradients"].sum()
    sum_h = hist["sum_hessians"].sum()
    value = _reference.newton_value(sum_g, sum_h, params["reg_lambda"], params["reg_alpha"])
    kind = rng.integers(4)
    width = abs(value) + 0.1
    if kind == 0:
        return (-np.inf, np.inf)
    if kind == 1:
        return (value - 0.3 * width, value + 0.3 * width)
    if kind == 2:
        return (value - 0.1 * width, np.inf)
    return (-np.inf, value + 0.1 * width)


@pytest.mark.parametrize("params", PARAM_GRID[::3], ids=lambda p: "-".join(map(str, p.values())))
@pytest.mark.parametrize("shape", [(1, 1), (60, 7), (600, 30)])
def test_constrained_scoring_matches_reference(params, shape):
    """score_tile with bounds and a monotone direction picks the oracle's
    candidate, with the oracle's score and pooled gain (clipped values)."""
    n_rows, n_eras = shape
    rng = np.random.default_rng(n_rows + n_eras)
    for seed in range(4):
        split = {**DEFAULT_SPLIT_PARAMS, **params, "era_alpha": 3.0,
                 "reg_alpha": [0.0, 0.5][seed % 2], "era_std": ["total", "between"][seed % 2],
                 "min_samples_leaf": 1 if n_rows < 100 else 5}
        data, g, h = make_binned_problem(seed * 31 + n_rows, n_rows, 3, n_eras, n_bins=8)
        variance = float(rng.uniform(0, 2))
        for feature in range(3):
            hist = tile_histogram(data, g, h, feature)
            n_bins = int(data.n_bins[feature])
            for monotone in (-1, 0, 1):
                bounds = _bounds_around(hist, split, rng)
                got = _split.score_histogram(hist, n_bins, split, variance, *bounds, monotone)
                want = _reference.first_best(_reference.candidates(
                    hist["sum_gradients"], hist["sum_hessians"], hist["count"].astype(float),
                    n_bins, split, gradient_variance=variance, bounds=bounds,
                    monotone=monotone))
                if want is None:
                    assert got is None
                    continue
                assert got is not None
                assert (got["threshold"], got["missing_left"]) == (want["threshold"],
                                                                   want["missing_left"])
                for key in ("score", "gain", "mean"):
                    assert got[key] == pytest.approx(want[key], rel=1e-9, abs=1e-9), key


def test_monotone_candidate_orders_its_children():
    """Every candidate the kernel returns under +1 / -1 has ordered clipped
    children; an ordering the data contradicts leaves no candidate."""
    n_eras, n_bins = 3, 6
    hist = np.zeros((n_eras, n_bins + 1), dtype=_split.HIST_DTYPE)
    # y falls with the bin: gradients (-y) rise; so Newton values fall.
    for era in range(n_eras):
        hist[era, :n_bins]["sum_gradients"] = np.linspace(-2, 2, n_bins)
        hist[era, :n_bins]["sum_hessians"] = 1.0
        hist[era, :n_bins]["count"] = 10
    params = {**DEFAULT_SPLIT_PARAMS, "lambda_dro": 0.0, "lambda_dir": 0.0}
    assert _split.score_histogram(hist, n_bins, params, monotone=-1) is not None
    assert _split.score_histogram(hist, n_bins, params, monotone=1) is None
    # Unconstrained, the best split is the same as under the agreeing direction.
    free = _split.score_histogram(hist, n_bins, params)
    agree = _split.score_histogram(hist, n_bins, params, monotone=-1)
    assert free == agree


def _find(data, g, h, n_slots, **extra):
    from packboost._fixed_point import to_fixed_point

    fixed = to_fixed_point(g, h, data.era_offsets, 1)
    rng = np.random.default_rng(n_slots)
    node_of_row = rng.integers(0, n_slots, size=(data.n_rows, 1)).astype(np.int32)
    features = np.arange(data.n_features, dtype=np.int32)
    return _split.find_best_splits(
        data.X_binned, fixed, data.all_rows, data.era_offsets, node_of_row,
        np.zeros(n_slots, np.int32), np.ones(n_slots, np.uint8), features,
        np.ones((len(features), 1), np.uint8), data.n_bins, dict(DEFAULT_SPLIT_PARAMS), 2,
        **extra)


def test_find_best_splits_without_effective_constraints_is_unchanged():
    """Infinite bounds, no monotone feature and every pair allowed: the same
    arrays, bit for bit, as no constraint arguments at all."""
    data, g, h = make_binned_problem(3, 500, 4, 6)
    n_slots = 3
    plain = _find(data, g, h, n_slots)
    same = _find(data, g, h, n_slots,
                 slot_bounds=np.tile([-np.inf, np.inf], (n_slots, 1)),
                 feature_monotone=np.zeros(4, np.int8),
                 slot_allows_feature=np.ones((n_slots, 4), np.uint8))
    for key, value in plain.items():
        assert np.array_equal(value, same[key]), key


def test_disallowed_pairs_are_not_scored():
    data, g, h = make_binned_problem(4, 500, 4, 6)
    n_slots = 3
    plain = _find(data, g, h, n_slots)
    allows = np.random.default_rng(0).integers(0, 2, size=(n_slots, 4)).astype(np.uint8)
    masked = _find(data, g, h, n_slots, slot_allows_feature=allows)
    assert not masked["found"][allows == 0].any()
    kept = allows == 1
    for key, value in plain.items():
        if key == "slot_left":
            continue  # per slot, not per (slot, feature): the best over the allowed ones
        assert np.array_equal(value[kept], masked[key][kept]), key


def test_find_best_splits_checks_constraint_shapes():
    data, g, h = make_binned_problem(5, 50, 2, 2)
    with pytest.raises(ValueError, match="slot_bounds"):
        _find(data, g, h, 2, slot_bounds=np.zeros((3, 2)))
    with pytest.raises(ValueError, match="feature_monotone"):
        _find(data, g, h, 2, feature_monotone=np.zeros(3, np.int8))
    with pytest.raises(ValueError, match="slot_allows_feature"):
        _find(data, g, h, 2, slot_allows_feature=np.ones((2, 3), np.uint8))


def test_child_bounds_split_at_the_midpoint():
    parent = np.array([[-np.inf, np.inf], [0.0, 1.0], [0.0, 1.0]])
    values = np.array([1.0, 3.0, -5.0, 0.5, 0.2, 0.9])
    bounds = _constraints.child_bounds(parent, np.array([1, -1, 0]), values)
    assert bounds.tolist() == [[-np.inf, 2.0], [2.0, np.inf],        # +1: mid of 1, 3
                               [0.25, 1.0], [0.0, 0.25],             # -1: clip(-5)=0, 0.5
                               [0.0, 1.0], [0.0, 1.0]]               # free: inherited


def test_allowed_features_follow_the_sets():
    sets = _constraints.resolve_interactions([[0, 1], [1, 2]], 4, None)
    path = np.zeros((4, 4), bool)
    path[1, 0] = True            # used 0: only {0, 1}
    path[2, 1] = True            # used 1: {0, 1} | {1, 2}
    path[3, 3] = True            # used 3 (no set): only itself
    allowed = _constraints.allowed_features(path, sets)
    assert allowed.tolist() == [[True, True, True, True], [True, True, False, False],
                                [True, True, True, False], [False, False, False, True]]


# ----------------------------------------------------------------------------- fitted models


def _problem(seed, n_rows=1500, n_features=5, nan_rate=0.05):
    """A target that is not monotone in any feature, with eras, NaN and weights."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n_rows, n_features))
    era = np.repeat(np.arange(10), n_rows // 10 + 1)[:n_rows]
    y = (np.sin(2 * X[:, 0]) + 0.5 * X[:, 1] * X[:, 2] - np.abs(X[:, 3])
         + 0.3 * rng.normal(size=n_rows))
    X[rng.random(X.shape) < nan_rate] = np.nan
    weight = rng.uniform(0.5, 2.0, n_rows)
    return X, y, era, weight


def _grid_predictions(model, X, feature, n_rows=25, seed=0):
    """Predictions of sampled rows as ``feature`` runs over every bin (one
    value per bin: the cuts, and one beyond the last): (rows, grid)."""
    rng = np.random.default_rng(seed)
    cuts = model.bin_mapper_.cuts_[feature]
    grid = np.concatenate([cuts, [cuts[-1] + 1.0]]) if len(cuts) else np.array([0.0])
    rows = X[rng.choice(len(X), size=n_rows, replace=False)]
    batch = np.repeat(rows, len(grid), axis=0)
    batch[:, feature] = np.tile(grid, n_rows)
    if getattr(model, "feature_names_in_", None) is not None:
        import pandas as pd

        batch = pd.DataFrame(batch, columns=model.feature_names_in_)
    predict = model.predict_proba if isinstance(model, PackBoostClassifier) else model.predict
    out = predict(batch)
    out = out[:, 1] if out.ndim == 2 else out
    return out.reshape(n_rows, len(grid))


def _assert_monotone(model, X, monotone):
    for feature, direction in enumerate(monotone):
        if direction == 0:
            continue
        steps = np.diff(_grid_predictions(model, X, feature), axis=1)
        assert (direction * steps >= 0).all(), (feature, direction, steps.min(), steps.max())


MONOTONE_CONFIGS = [
    dict(),
    dict(pack_size=1, max_depth=2),
    dict(pack_size=3, max_depth=5, lambda_dro=0.0),
    dict(lambda_dir=1.0, lambda_dro=0.5),
    dict(era_gain="newton", lambda_dro=0.2),
    dict(era_std="total", reg_alpha=0.5, max_delta_step=0.2),
    dict(feature_sampling="pack", tree_feature_fraction=1.0, max_depth=6),
    dict(layer_feature_fraction=0.6, row_subsample=0.7, era_weighting="count",
         era_alpha=5.0),
]


@pytest.mark.parametrize("config", MONOTONE_CONFIGS, ids=lambda c: "-".join(map(str, c.values()))
                         or "default")
def test_fitted_models_are_monotone_on_grids(config):
    monotone = [1, -1, 1, 0, -1]
    used = 0
    for seed in range(4):
        X, y, era, weight = _problem(seed)
        model = PackBoostRegressor(n_estimators=8, min_samples_leaf=10, random_state=seed,
                                   n_jobs=1, monotone_constraints=monotone, **config)
        model.fit(X, y, era=era, sample_weight=weight if seed % 2 else None)
        _assert_monotone(model, X, monotone)
        used += int((model.ensemble_.nodes["feature"] == 0).sum())
    assert used > 0   # the constrained features are split on, not avoided


def test_unconstrained_models_fail_the_grid_check():
    """The grid check can fail: without the constraint the model follows
    sin(2 x0), which is not monotone."""
    X, y, era, _ = _problem(0)
    model = PackBoostRegressor(n_estimators=8, min_samples_leaf=10, random_state=0,
                               n_jobs=1).fit(X, y, era=era)
    with pytest.raises(AssertionError):
        _assert_monotone(model, X, [1, 0, 0, 0, 0])


def test_classifier_and_dict_by_name_are_monotone():
    pd = pytest.importorskip("pandas")
    X, y, era, weight = _problem(7)
    frame = pd.DataFrame(X, columns=[f"f{k}" for k in range(X.shape[1])])
    model = PackBoostClassifier(n_estimators=8, min_samples_leaf=10, random_state=1, n_jobs=1,
                                monotone_constraints={"f0": 1, "f3": -1})
    model.fit(frame, y > np.median(y), era=era, sample_weight=weight)
    _assert_monotone(model, frame.to_numpy(), [1, 0, 0, -1, 0])


def _paths(ensemble):
    """The features used on every root-to-leaf path of every tree."""
    nodes = ensemble.nodes
    feature, left, right = nodes["feature"], nodes["left_child"], nodes["right_child"]
    for root in ensemble.tree_roots():
        stack = [(int(root), frozenset())]
        while stack:
            node, used = stack.pop()
            if feature[node] < 0:
                yield used
                continue
            used = used | {int(feature[node])}
            stack.extend([(int(left[node]), used), (int(right[node]), used)])


INTERACTION_CONFIGS = [
    dict(),
    dict(pack_size=2, max_depth=5, lambda_dir=1.0),
    dict(era_gain="newton", feature_sampling="pack", tree_feature_fraction=1.0),
    dict(layer_feature_fraction=0.5, max_depth=4),
]


@pytest.mark.parametrize("config", INTERACTION_CONFIGS,
                         ids=lambda c: "-".join(map(str, c.values())) or "default")
def test_every_path_stays_in_one_interaction_set(config):
    sets = [[0, 1], [1, 2, 3]]           # 4 and 5 in no set: alone on their paths
    allowed = [set(group) for group in sets]
    seen_pairs = 0
    for seed in range(4):
        X, y, era, weight = _problem(seed, n_features=6)
        model = PackBoostRegressor(n_estimators=6, min_samples_leaf=10, random_state=seed,
                                   n_jobs=1, interaction_constraints=sets, **config)
        model.fit(X, y, era=era, sample_weight=weight)
        for used in _paths(model.ensemble_):
            assert (len(used) <= 1 or any(used <= group for group in allowed)), used
            seen_pairs += len(used) > 1
    assert seen_pairs > 0   # interactions within a set do happen


def test_both_constraints_together():
    X, y, era, weight = _problem(11, n_features=5)
    monotone = [1, 0, 0, -1, 0]
    model = PackBoostRegressor(n_estimators=8, min_samples_leaf=10, random_state=3, n_jobs=1,
                               max_depth=5, monotone_constraints=monotone,
                               interaction_constraints=[[0, 1], [2, 3]])
    model.fit(X, y, era=era, sample_weight=weight)
    _assert_monotone(model, X, monotone)
    for used in _paths(model.ensemble_):
        assert len(used) <= 1 or used <= {0, 1} or used <= {2, 3}
    # Clipped leaf values are still what contributions add up to.
    contributions = model.predict(X[:50], pred_contrib=True)
    assert np.allclose(contributions.sum(axis=1), model.predict(X[:50]))


@pytest.mark.parametrize("constraints", [
    dict(monotone_constraints=[0, 0, 0, 0, 0]),
    dict(monotone_constraints={}),
    dict(interaction_constraints=[[0, 1, 2, 3, 4]]),
    dict(interaction_constraints=[[2, 0], [4, 3, 2, 1, 0]]),
    dict(interaction_constraints=[]),
])
def test_constraints_that_constrain_nothing_give_the_same_trees(constraints):
    X, y, era, weight = _problem(5)
    params = dict(n_estimators=4, min_samples_leaf=10, random_state=2, n_jobs=1,
                  lambda_dir=0.5)
    plain = PackBoostRegressor(**params).fit(X, y, era=era, sample_weight=weight)
    same = PackBoostRegressor(**params, **constraints).fit(X, y, era=era, sample_weight=weight)
    for name, values in plain.ensemble_.nodes.items():
        assert np.array_equal(values, same.ensemble_.nodes[name]), name


def test_model_file_keeps_the_constraints(tmp_path):
    X, y, era, _ = _problem(6, n_rows=400)
    model = PackBoostRegressor(n_estimators=2, random_state=0, n_jobs=1,
                               monotone_constraints=np.array([1, 0, 0, 0, -1]),
                               interaction_constraints=((0, 1), [2, np.int64(3)]))
    model.fit(X, y, era=era)
    path = tmp_path / "model.pb"
    model.save_model(path)
    loaded = load_model(path)
    assert loaded.monotone_constraints == [1, 0, 0, 0, -1]
    assert loaded.interaction_constraints == [[0, 1], [2, 3]]
    assert np.array_equal(loaded.predict(X), model.predict(X))
    # A model file written before the parameters existed loads with None.
    from packboost import model_io

    params = model_io._checked_params(PackBoostRegressor(), {"n_estimators": 3})
    assert params["monotone_constraints"] is None
    assert params["interaction_constraints"] is None


def test_cli_flags_take_json():
    import argparse

    from packboost import _parameters

    parser = argparse.ArgumentParser()
    _parameters.add_cli_flags(parser)
    args = parser.parse_args(["--monotone-constraints", '{"age": 1}',
                              "--interaction-constraints", '[[0, 1], ["a", "b"]]'])
    assert args.param_monotone_constraints == {"age": 1}
    assert args.param_interaction_constraints == [[0, 1], ["a", "b"]]
    with pytest.raises(SystemExit):
        parser.parse_args(["--monotone-constraints", "[1, 0"])
    assert json.loads(json.dumps(args.param_interaction_constraints))


# ----------------------------------------------------------------------------- bad input


@pytest.mark.parametrize("value, error, match", [
    ([1, 0, 0], ValueError, "3 entries, but X has 5 features"),
    ([1, 0, 0, 0, 0, 0], ValueError, "6 entries"),
    ([2, 0, 0, 0, 0], ValueError, "-1, 0 or 1"),
    ([0.5, 0, 0, 0, 0], ValueError, "-1, 0 or 1"),
    ([True, 0, 0, 0, 0], ValueError, "-1, 0 or 1"),
    (np.ones((5, 1), int), ValueError, "1-D"),
    ({"f9": 1}, ValueError, "no feature names|does not have"),
    ({0: 1}, TypeError, "feature names"),
    ("increasing", TypeError, "monotone_constraints must be"),
])
def test_bad_monotone_constraints(value, error, match):
    X, y, era, _ = _problem(0, n_rows=200)
    with pytest.raises(error, match="monotone_constraints") as info:
        PackBoostRegressor(n_estimators=1, monotone_constraints=value).fit(X, y, era=era)
    assert info.match(match)


@pytest.mark.parametrize("value, error, match", [
    ([[0, 7]], ValueError, "uses feature 7, but X has 5 features"),
    ([[0, "age"]], ValueError, "no feature names"),
    ([[]], ValueError, "empty"),
    ([[0, 1.5]], TypeError, "index"),
    ([[0, -1]], ValueError, "non-negative"),
    ([0, 1], TypeError, "list of lists"),
    ({"a": [0]}, TypeError, "interaction_constraints must be"),
])
def test_bad_interaction_constraints(value, error, match):
    X, y, era, _ = _problem(0, n_rows=200)
    with pytest.raises(error, match="interaction_constraints") as info:
        PackBoostRegressor(n_estimators=1, interaction_constraints=value).fit(X, y, era=era)
    assert info.match(match)


def test_unknown_feature_names_are_named():
    pd = pytest.importorskip("pandas")
    X, y, era, _ = _problem(0, n_rows=200)
    frame = pd.DataFrame(X, columns=list("abcde"))
    with pytest.raises(ValueError, match="'z', which X does not have"):
        PackBoostRegressor(n_estimators=1, monotone_constraints={"z": 1}).fit(frame, y, era=era)
    with pytest.raises(ValueError, match="'z', which X does not have"):
        PackBoostRegressor(n_estimators=1,
                           interaction_constraints=[["a", "z"]]).fit(frame, y, era=era)
    model = PackBoostRegressor(n_estimators=2, min_samples_leaf=5, random_state=0,
                               interaction_constraints=[["a", "b"], ["c", "d", "e"]])
    model.fit(frame, y, era=era)
    for used in _paths(model.ensemble_):
        assert used <= {0, 1} or used <= {2, 3, 4}


def test_backends_without_constraints_raise():
    params = dict(device="cuda", monotone_constraints=[1, 0],
                  interaction_constraints=None)
    with pytest.raises(ValueError, match="monotone_constraints and interaction_constraints "
                                         "are not supported with device='cuda'"):
        _constraints.resolve_for_fit(params, 2, None)
    # Nothing constrained: any backend.
    assert _constraints.resolve_for_fit({**params, "monotone_constraints": [0, 0]}, 2,
                                        None)["monotone_constraints"] is None
    from packboost.backends.cuda import CudaBackend

    backend = CudaBackend.__new__(CudaBackend)
    with pytest.raises(ValueError, match="device='cuda'"):
        backend.find_splits(None, None, None, None, None, None,
                            constraints={"slot_bounds": None})


@pytest.mark.parametrize("alpha", [0.5, 0.9])
def test_quantile_leaf_refit_keeps_the_monotone_bounds(alpha):
    """The quantile objective replaces leaf values by residual quantiles after
    a tree is grown; the replacement stays inside each leaf's monotone bounds."""
    monotone = [1, -1, 1, 0, -1]
    used = 0
    for seed in range(3):
        X, y, era, weight = _problem(seed)
        model = PackBoostRegressor(objective="quantile", alpha=alpha, n_estimators=8,
                                   min_samples_leaf=10, random_state=seed, n_jobs=1,
                                   monotone_constraints=monotone)
        model.fit(X, y, era=era, sample_weight=weight if seed % 2 else None)
        _assert_monotone(model, X, monotone)
        used += int((model.ensemble_.nodes["feature"] == 0).sum())
    assert used > 0
