"""The ``objective`` parameter: built-in losses by name and user callables.

Gradients are checked against finite differences of the loss itself; fits
against what each loss is for (a quantile's coverage, Huber's robustness);
callables against bad output, and model files against both kinds.
"""

from __future__ import annotations

import numpy as np
import pytest

import packboost
from packboost import PackBoostClassifier, PackBoostRegressor
from packboost.cli import main
from packboost.objectives import (
    CustomObjective,
    Huber,
    Logistic,
    ObjectiveError,
    Quantile,
    SquaredError,
    make_objective,
    weighted_quantile,
)

# The losses themselves (per row), the oracle of the gradients.
LOSSES = {
    "squared_error": lambda y, f, alpha: 0.5 * (f - y) ** 2,
    "huber": lambda y, f, alpha: np.where(np.abs(f - y) <= alpha, 0.5 * (f - y) ** 2,
                                          alpha * (np.abs(f - y) - 0.5 * alpha)),
    "quantile": lambda y, f, alpha: np.where(y > f, alpha * (y - f), (1 - alpha) * (f - y)),
    "logistic": lambda y, f, alpha: np.logaddexp(0.0, f) - y * f,
}


def _objective(name, alpha):
    return make_objective(name, alpha=alpha, link=None)


@pytest.mark.parametrize("name", list(LOSSES))
@pytest.mark.parametrize("weighted", [False, True])
def test_gradients_are_the_derivatives_of_the_loss(name, weighted):
    rng = np.random.default_rng(0)
    n, alpha, step = 400, 0.7, 1e-6
    y = (rng.random(n) < 0.4).astype(float) if name == "logistic" else rng.normal(size=n)
    raw = rng.normal(size=n) * 2
    if name in ("huber", "quantile"):  # keep off the kinks, where no derivative exists
        kink = alpha if name == "huber" else 0.0
        away = np.abs(np.abs(raw - y) - kink) > 1e-3
        y, raw = y[away], raw[away]
        n = len(y)
    weight = rng.uniform(0.5, 2.0, n) if weighted else None
    g, h = np.empty(n), np.empty(n)
    _objective(name, alpha).gradients(y, raw, weight, g, h)
    loss = LOSSES[name]
    numeric = (loss(y, raw + step, alpha) - loss(y, raw - step, alpha)) / (2 * step)
    w = np.ones(n) if weight is None else weight
    np.testing.assert_allclose(g, w * numeric, rtol=1e-5, atol=1e-6)
    if name in ("squared_error", "logistic"):
        second = (loss(y, raw + 1e-4, alpha) - 2 * loss(y, raw, alpha)
                  + loss(y, raw - 1e-4, alpha)) / 1e-8
        np.testing.assert_allclose(h, w * second, rtol=1e-3, atol=1e-6)
    else:  # a unit hessian by design (objectives.Huber, objectives.Quantile)
        np.testing.assert_array_equal(h, w)


def test_base_scores():
    y = np.array([5.0, 1.0, 3.0, 100.0, 2.0])
    assert SquaredError.base_score(y, None) == pytest.approx(22.2)
    assert Huber(1.0).base_score(y, None) == 3.0                # the median
    assert Quantile(0.2).base_score(y, None) == 1.0
    assert Quantile(0.8).base_score(y, None) == 5.0
    weight = np.array([1.0, 1.0, 1.0, 10.0, 1.0])
    assert Quantile(0.5).base_score(y, weight) == 100.0
    assert weighted_quantile(np.zeros(0), None, 0.5) == 0.0
    assert Logistic.base_score(np.array([0.0, 1.0, 1.0, 1.0]), None) == pytest.approx(
        np.log(3.0))


def _shifted_problem(seed, n_rows, n_eras=40):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n_rows, 5))
    era = np.repeat(np.arange(n_eras), n_rows // n_eras)
    y = np.sin(X[:, 0]) + 0.5 * X[:, 1] + rng.normal(scale=0.5, size=n_rows)
    return X, y, era


@pytest.mark.parametrize("alpha", [0.1, 0.2, 0.8, 0.9])
def test_a_quantile_fit_covers_alpha_of_held_out_rows(alpha):
    X, y, era = _shifted_problem(0, 8000)
    X_test, y_test, _ = _shifted_problem(1, 4000)
    # At the default rate: with leaves refitted to their residuals' quantile
    # (packboost._leaf_refit) 60 rounds get there. Newton leaves of unit
    # hessians did not (they move at most learning_rate per round): coverage
    # 0.052, 0.156, 0.844, 0.939 for these alphas, now 0.096, 0.202, 0.802, 0.893.
    model = PackBoostRegressor(objective="quantile", alpha=alpha, n_estimators=60,
                               max_depth=3, learning_rate=0.1, random_state=0, n_jobs=1)
    model.fit(X, y, era=era)
    coverage = np.mean(y_test <= model.predict(X_test))
    assert abs(coverage - alpha) < 0.02, coverage
    # and it is a conditional quantile, not just a shifted mean
    assert np.corrcoef(model.predict(X_test), np.sin(X_test[:, 0]))[0, 1] > 0.5


@pytest.mark.parametrize("weighted", [False, True])
def test_quantile_leaves_are_the_quantile_of_their_residuals(weighted):
    """One tree, every row: each leaf moves the base score by learning_rate x the
    weighted alpha-quantile of its rows' residuals (LightGBM's refit)."""
    X, y, era = _shifted_problem(5, 3000)
    weights = np.random.default_rng(6).uniform(0.0, 2.0, len(y)) if weighted else None
    alpha, rate = 0.3, 0.5
    model = PackBoostRegressor(objective="quantile", alpha=alpha, n_estimators=1, pack_size=1,
                               max_depth=3, learning_rate=rate, era_subsample=1.0,
                               tree_feature_fraction=1.0, random_state=0, n_jobs=1)
    model.fit(X, y, era=era, sample_weight=weights)
    base = weighted_quantile(y, weights, alpha)
    step = model.predict(X) - base
    leaves = np.unique(step)
    assert len(leaves) >= 4
    for value in leaves:
        rows = step == value
        expected = weighted_quantile(y[rows] - base, None if weights is None else weights[rows],
                                     alpha)
        assert value == pytest.approx(rate * expected, rel=1e-12, abs=1e-12)


def test_grouped_weighted_quantile_matches_one_group_at_a_time():
    from packboost._leaf_refit import grouped_weighted_quantile

    rng = np.random.default_rng(7)
    for n_rows, n_groups in [(1, 1), (5, 3), (200, 7), (1000, 40)]:
        group = rng.integers(0, n_groups, n_rows)
        values = rng.integers(-3, 4, n_rows).astype(float)   # ties
        weights = rng.choice([0.0, 0.5, 1.0, 3.0], n_rows)     # zero weights too
        for q in (0.0, 0.1, 0.5, 0.9, 1.0):
            quantile, has_weight = grouped_weighted_quantile(group, values, weights, q,
                                                             n_groups)
            for g in range(n_groups):
                rows = (group == g) & (weights > 0)
                assert has_weight[g] == rows.any()
                if rows.any():
                    # Zero-weight rows never reach q of the total before a weighted one.
                    assert quantile[g] == weighted_quantile(values[rows], weights[rows], q) \
                        or q == 0.0, (n_rows, g, q)


def test_grid_quantile_is_the_weighted_quantile_on_grid_weights():
    """grouped_grid_quantile against weighted_quantile one group at a time,
    on weights the grid holds exactly (dyadic: both rules add them exactly),
    and the same whatever order the rows come in."""
    from packboost._leaf_refit import (
        grouped_grid_quantile,
        weight_grid_exponent,
        weight_units,
    )

    rng = np.random.default_rng(11)
    for n_rows, n_groups in [(1, 1), (5, 3), (200, 7), (1000, 40)]:
        group = rng.integers(0, n_groups, n_rows)
        values = rng.integers(-3, 4, n_rows).astype(float)   # ties
        weights = rng.choice([0.0, 0.25, 1.0, 3.0], n_rows)    # zero weights too
        units = weight_units(weights, weight_grid_exponent(n_rows, weights.max()))
        for q in (0.0, 0.1, 0.5, 0.9, 1.0):
            quantile, has_weight = grouped_grid_quantile(group, values, units, q, n_groups)
            shuffled = rng.permutation(n_rows)
            again = grouped_grid_quantile(group[shuffled], values[shuffled],
                                          units[shuffled], q, n_groups)
            np.testing.assert_array_equal(again[0], quantile)
            for g in range(n_groups):
                rows = (group == g) & (weights > 0)
                assert has_weight[g] == rows.any()
                if q == 0.0 and rows.any():   # the smallest value, even of weight 0
                    assert quantile[g] == values[group == g].min()
                elif rows.any():
                    assert quantile[g] == weighted_quantile(values[rows], weights[rows], q), \
                        (n_rows, g, q)


@pytest.mark.parametrize("n_rows, max_weight", [(1, 1.0), (3, 1e-300), (2_700_000, 7.5),
                                                (2**31, 1e300), (10, 0.0)])
def test_weight_grid_sums_stay_exact(n_rows, max_weight):
    from packboost._leaf_refit import GRID_SUM_BITS, weight_grid_exponent, weight_units

    exponent = weight_grid_exponent(n_rows, max_weight)
    largest = int(weight_units(np.array([max_weight]), exponent)[0])
    assert largest * n_rows <= 2**GRID_SUM_BITS
    if max_weight > 0:   # the grid is not needlessly coarse: within a factor 4 of the bound
        assert 4 * largest * n_rows > 2**GRID_SUM_BITS


def test_huber_resists_outliers_that_pull_squared_error():
    X, y, era = _shifted_problem(2, 6000)
    X_test, y_test, _ = _shifted_problem(3, 3000)
    rng = np.random.default_rng(4)
    dirty = y.copy()
    outliers = rng.random(len(y)) < 0.05
    dirty[outliers] += rng.choice([-1, 1], outliers.sum()) * rng.uniform(20, 60,
                                                                         outliers.sum())
    params = dict(n_estimators=60, max_depth=3, learning_rate=0.1, random_state=0, n_jobs=1)
    errors = {}
    for objective in ("squared_error", "huber"):
        model = PackBoostRegressor(objective=objective, alpha=1.0, **params)
        model.fit(X, dirty, era=era)
        errors[objective] = np.sqrt(np.mean((model.predict(X_test) - y_test) ** 2))
    assert errors["huber"] < 0.8 * errors["squared_error"], errors


def test_objective_none_is_the_estimators_own_and_names_are_checked_per_estimator():
    X, y, era = _shifted_problem(5, 800, n_eras=8)
    params = dict(n_estimators=3, random_state=0, n_jobs=1)
    default = PackBoostRegressor(**params).fit(X, y, era=era)
    named = PackBoostRegressor(objective="squared_error", **params).fit(X, y, era=era)
    np.testing.assert_array_equal(default.predict(X), named.predict(X))
    with pytest.raises(ValueError, match="objective of PackBoostRegressor.*'logistic'"):
        PackBoostRegressor(objective="logistic").fit(X, y)
    with pytest.raises(ValueError, match="objective of PackBoostClassifier.*'huber'"):
        PackBoostClassifier(objective="huber").fit(X, y > 0)
    with pytest.raises(ValueError, match="objective of PackBoostRegressor must be"):
        PackBoostRegressor(objective="l2").fit(X, y)
    with pytest.raises(ValueError, match=r"alpha must be in \(0, 1\) for objective='quantile'"):
        PackBoostRegressor(objective="quantile", alpha=1.5).fit(X, y)
    with pytest.raises(ValueError, match="alpha"):
        PackBoostRegressor(objective="huber", alpha=0.0).fit(X, y)


def _squared_error(y_true, y_pred):
    return y_pred - y_true, np.ones_like(y_true)


def test_a_callable_sees_the_rows_in_the_order_of_X_and_its_gradients_are_weighted():
    X, y, _ = _shifted_problem(6, 900, n_eras=9)
    era = np.random.default_rng(0).integers(0, 9, len(y))  # rows not sorted by era
    seen = []

    def objective(y_true, y_pred):
        seen.append((y_true.copy(), y_pred.copy()))
        return y_pred - y_true, np.ones_like(y_true)

    model = PackBoostRegressor(objective=objective, n_estimators=4, random_state=0, n_jobs=1)
    model.fit(X, y, era=era)
    assert len(seen) == 5  # the scaling probe at the start, then one call per round
    for y_true, _ in seen:
        np.testing.assert_array_equal(y_true, y)
    np.testing.assert_array_equal(seen[0][1], 0.0)  # a callable starts from 0
    # round 3's raw scores are the model's first 3 rounds, row for row
    np.testing.assert_allclose(seen[4][1], model.predict(X, iteration_range=(0, 3)),
                               rtol=1e-12, atol=1e-12)
    # sample_weight multiplies what the callable returns
    weight = np.random.default_rng(1).uniform(0.5, 2.0, len(y))
    custom = CustomObjective(_squared_error, link=None)
    g, h = np.empty(len(y)), np.empty(len(y))
    custom.gradients(y, np.zeros(len(y)), weight, g, h)
    np.testing.assert_array_equal(g, -y * weight)
    np.testing.assert_array_equal(h, weight)


def test_a_callable_squared_error_learns_like_the_built_in():
    X, y, era = _shifted_problem(7, 4000)
    params = dict(n_estimators=40, max_depth=3, random_state=0, n_jobs=1)
    built_in = PackBoostRegressor(**params).fit(X, y, era=era).predict(X)
    custom = PackBoostRegressor(objective=_squared_error, **params).fit(X, y, era=era)
    assert custom.ensemble_.base_score == 0.0
    assert np.corrcoef(custom.predict(X), built_in)[0, 1] > 0.95


def test_a_callable_classifier_reads_raw_scores_as_log_odds():
    X, y, era = _shifted_problem(8, 3000)
    labels = np.where(y > 0, "up", "down")

    def logistic(y_true, y_pred):
        p = 1.0 / (1.0 + np.exp(-y_pred))
        return p - y_true, p * (1.0 - p)

    model = PackBoostClassifier(objective=logistic, n_estimators=20, random_state=0, n_jobs=1)
    model.fit(X, labels, era=era)
    proba = model.predict_proba(X)
    np.testing.assert_allclose(proba[:, 1], 1.0 / (1.0 + np.exp(-model.decision_function(X))))
    assert np.mean(model.predict(X) == labels) > 0.7


def _bad(kind, from_round=0):
    calls = []

    def objective(y_true, y_pred):
        calls.append(None)
        grad, hess = y_pred - y_true, np.ones_like(y_true)
        if len(calls) - 1 < from_round + 1:  # call 0 is the probe, call k + 1 is round k
            return grad, hess
        if kind == "shape":
            return grad[:-1], hess
        if kind == "2d":
            return grad[:, None], hess
        if kind == "nan":
            grad[3] = np.nan
        if kind == "inf":
            hess[5] = np.inf
        if kind == "negative":
            hess[0] = -1.0
        if kind == "tuple":
            return grad
        if kind == "text":
            return ["a"] * len(grad), hess
        if kind == "huge grad":
            grad = np.where(grad > 0, 1e307, -1e307)   # finite; their sum is not
        if kind == "huge hess":
            hess = np.full_like(hess, 1e307)
        return grad, hess

    return objective


@pytest.mark.parametrize("kind, message", [
    ("shape", r"grad of shape \(599,\); expected \(600,\)"),
    ("2d", r"grad of shape \(600, 1\)"),
    ("nan", r"grad that is not finite \(nan at row 3"),
    ("inf", r"hess that is not finite \(inf at row 5"),
    ("negative", r"negative hess \(-1.0 at row 0\)"),
    ("tuple", r"must return a \(grad, hess\) tuple"),
    ("text", r"grad that is not numeric"),
    ("huge grad", r"grad too large: the sum of its magnitudes over the 600 rows overflows"),
    ("huge hess", r"hess too large: the sum of its magnitudes over the 600 rows overflows"),
])
def test_a_bad_callable_stops_the_fit_naming_the_round_and_keeps_the_model(kind, message):
    X, y, era = _shifted_problem(9, 600, n_eras=6)
    model = PackBoostRegressor(n_estimators=3, random_state=0, n_jobs=1).fit(X, y, era=era)
    before = model.predict(X)
    fitted = dict(vars(model))
    model.set_params(objective=_bad(kind, from_round=2), n_estimators=5)
    with pytest.raises(ObjectiveError, match=f"round 2: objective 'objective' .*{message}"):
        model.fit(X, y, era=era)
    assert isinstance(ObjectiveError("x"), ValueError)
    np.testing.assert_array_equal(model.predict(X), before)
    assert model.ensemble_ is fitted["ensemble_"] and model.n_iter_ == 3


def test_a_callable_that_fails_at_once_is_reported_at_round_0():
    X, y, era = _shifted_problem(10, 300, n_eras=3)
    with pytest.raises(ObjectiveError, match="round 0: .*not finite"):
        PackBoostRegressor(objective=lambda t, p: (p * np.nan, np.ones_like(t)),
                           n_estimators=2).fit(X, y, era=era)
    model = PackBoostRegressor(objective=_bad("nan"), n_estimators=2)
    with pytest.raises(ObjectiveError):
        model.fit(X, y, era=era)
    assert not hasattr(model, "ensemble_")


def test_model_files_store_a_built_in_objective_by_name(tmp_path):
    X, y, era = _shifted_problem(11, 1200, n_eras=12)
    model = PackBoostRegressor(objective="quantile", alpha=0.25, n_estimators=5,
                               random_state=0, n_jobs=1).fit(X, y, era=era)
    model.save_model(tmp_path / "q.pbm")
    loaded = packboost.load_model(tmp_path / "q.pbm")
    assert (loaded.objective, loaded.alpha) == ("quantile", 0.25)
    np.testing.assert_array_equal(loaded.predict(X), model.predict(X))
    # continued training keeps the loss
    more = PackBoostRegressor(objective="quantile", alpha=0.25, n_estimators=2, random_state=0,
                              n_jobs=1).fit(X, y, era=era, init_model=tmp_path / "q.pbm")
    assert more.n_iter_ == 7


def test_a_model_trained_with_a_callable_saves_and_predicts_without_it(tmp_path):
    from packboost.model_file import read_model_file

    X, y, era = _shifted_problem(12, 1200, n_eras=12)
    model = PackBoostRegressor(objective=_squared_error, n_estimators=5, random_state=0,
                               n_jobs=1).fit(X, y, era=era)
    model.save_model(tmp_path / "custom.pbm")
    metadata, _ = read_model_file(tmp_path / "custom.pbm")
    assert metadata["params"]["objective"] == "custom"
    assert "_squared_error" in metadata["custom_objective"]
    assert "do not store" in metadata["custom_objective"]
    with pytest.warns(UserWarning, match="custom objective function, which model files do "
                                         "not store"):
        loaded = packboost.load_model(tmp_path / "custom.pbm")
    np.testing.assert_array_equal(loaded.predict(X), model.predict(X))
    assert loaded.objective == "custom"
    with pytest.raises(ValueError, match=r"set_params\(objective=your_function\)"):
        loaded.fit(X, y, era=era)
    loaded.set_params(objective=_squared_error, n_estimators=2)
    assert loaded.fit(X, y, era=era, init_model=model).n_iter_ == 7
    # a file's objective is checked like fit checks it
    assert PackBoostClassifier(objective=None)._validated_params()["objective"] == "logistic"


def test_the_command_line_takes_objective_and_alpha(tmp_path, capsys):
    X, y, era = _shifted_problem(13, 1200, n_eras=12)
    lines = ["era," + ",".join(f"feature_{k}" for k in range(5)) + ",target"]
    lines += [f"{e}," + ",".join(f"{v:.6f}" for v in row) + f",{t:.6f}"
              for e, row, t in zip(era, X, y, strict=True)]
    (tmp_path / "train.csv").write_text("\n".join(lines) + "\n")
    assert main(["train", str(tmp_path / "train.csv"), "--objective", "quantile", "--alpha",
                 "0.3", "--n-estimators", "3", "--seed", "0", "-o",
                 str(tmp_path / "m.pbm")]) == 0
    loaded = packboost.load_model(tmp_path / "m.pbm")
    assert (loaded.objective, loaded.alpha) == ("quantile", 0.3)
    assert main(["train", str(tmp_path / "train.csv"), "--objective", "logistic",
                 "-o", str(tmp_path / "x.pbm")]) != 0
    assert "objective" in capsys.readouterr().err
    assert main(["train", str(tmp_path / "train.csv"), "--objective", "l1"]) == 2
    assert "invalid choice: 'l1'" in capsys.readouterr().err


def test_huber_and_quantile_fits_report_their_own_loss():
    """As LightGBM's default metric follows its objective: a huber or quantile
    fit records its loss (delta / level alpha) on eval sets, checked against
    the loss written out; squared error keeps rmse; bad alpha is refused."""
    from packboost._eval_metrics import pooled_metric, resolve_eval_metric

    rng = np.random.default_rng(7)
    X = rng.integers(0, 5, size=(600, 4)).astype(np.uint8)
    y = X[:, 0] + rng.normal(size=600)
    era = np.repeat(np.arange(6), 100)
    for objective, alpha in (("huber", 1.5), ("quantile", 0.2)):
        model = PackBoostRegressor(objective=objective, alpha=alpha, n_estimators=3,
                                   random_state=0, n_jobs=1)
        model.fit(X, y, era=era, eval_set=[(X, y)])
        assert list(model.evals_result_["valid_0"]) == [objective]
        prediction = model.predict(X)
        residual = y - prediction
        if objective == "huber":
            want = np.mean(np.where(np.abs(residual) <= alpha, 0.5 * residual**2,
                                    alpha * (np.abs(residual) - 0.5 * alpha)))
        else:
            want = np.mean(np.maximum(alpha * residual, (alpha - 1) * residual))
        np.testing.assert_allclose(model.evals_result_["valid_0"][objective][-1], want,
                                   rtol=1e-12)
    plain = PackBoostRegressor(n_estimators=2, random_state=0, n_jobs=1)
    plain.fit(X, y, era=era, eval_set=[(X, y)])
    assert list(plain.evals_result_["valid_0"]) == ["rmse"]
    assert pooled_metric("quantile", np.array([1.0, 3.0]), None, np.array([2.0, 2.0]),
                         alpha=0.25) == pytest.approx((0.75 * 1.0 + 0.25 * 1.0) / 2)
    with pytest.raises(ValueError, match="alpha"):
        resolve_eval_metric("quantile", objective_name="squared_error", alpha=1.5)


def test_losses_are_the_eval_metrics_of_the_same_name():
    """Each objective's training loss (what the divergence check watches) is
    its eval metric's pooled loss, and a weighted mean with weights."""
    from packboost._eval_metrics import pooled_metric
    from packboost.objectives import MultiTarget, Softmax

    rng = np.random.default_rng(3)
    n = 101
    y, raw = rng.normal(size=n), rng.normal(scale=2.0, size=n)
    labels = (rng.random(n) < 0.3).astype(np.float64)
    classes = rng.integers(0, 3, size=n).astype(np.float64)
    raw3 = rng.normal(size=(3, n))
    rmse = pooled_metric("rmse", y, raw, raw)
    assert SquaredError.loss(y, raw, None) == pytest.approx(0.5 * rmse * rmse)
    assert Huber(0.7).loss(y, raw, None) == pytest.approx(
        pooled_metric("huber", y, raw, raw, 0.7))
    assert Quantile(0.2).loss(y, raw, None) == pytest.approx(
        pooled_metric("quantile", y, raw, raw, 0.2))
    assert Logistic.loss(labels, raw, None) == pytest.approx(
        pooled_metric("logloss", labels, raw, None))
    assert Softmax(3).loss(classes, raw3, None) == pytest.approx(
        pooled_metric("multi_logloss", classes, raw3.T, None))
    both = np.stack([y, -y])
    assert MultiTarget(SquaredError, 2).loss(both, np.stack([raw, raw]), None) == \
        pytest.approx(0.5 * (SquaredError.loss(y, raw, None) + SquaredError.loss(-y, raw, None)))
    # Weights: integer weights are repeated rows.
    weight = rng.integers(1, 4, size=n).astype(np.float64)
    repeat = np.repeat(np.arange(n), weight.astype(int))
    for objective in (SquaredError, Huber(0.7), Quantile(0.2)):
        assert objective.loss(y, raw, weight) == pytest.approx(
            objective.loss(y[repeat], raw[repeat], None))
    # Overflow is +inf, never NaN or a warning.
    with np.errstate(all="raise"):
        assert SquaredError.loss(y, np.full(n, 1e300), None) == np.inf
        assert Huber(0.7).loss(y, np.full(n, 1e308), None) == np.inf


def test_order_keys_sort_as_the_floats_and_come_back():
    """packboost._leaf_refit.order_keys: uint64 keys in the floats' order
    (negatives, zeros, infinities, subnormals), inverted exactly."""
    from packboost import _leaf_refit

    rng = np.random.default_rng(5)
    values = np.concatenate([rng.normal(size=200) * 10.0 ** rng.integers(-300, 300, 200),
                             [0.0, -np.inf, np.inf, 5e-324, -5e-324, 1.0, -1.0, 0.0]])
    keys = _leaf_refit.order_keys(values)
    assert keys.dtype == np.uint64
    np.testing.assert_array_equal(np.argsort(keys, kind="stable"),
                                  np.argsort(values, kind="stable"))
    np.testing.assert_array_equal(_leaf_refit.from_order_keys(keys).view(np.uint64),
                                  values.view(np.uint64))


@pytest.mark.parametrize("q", [0.0, 0.1, 0.3, 0.5, 0.9, 1.0])
def test_quantile_ranks_pick_what_the_weighted_quantile_picks(q):
    """The Dask refit's rank rule against grouped_weighted_quantile with unit
    weights: groups of 0, 1, 2 and many rows, ties."""
    from packboost import _leaf_refit

    rng = np.random.default_rng(int(q * 10))
    counts = np.array([0, 1, 2, 7, 0, 40, 3])
    group = np.repeat(np.arange(len(counts)), counts)
    values = rng.integers(0, 5, size=len(group)).astype(np.float64)
    quantile, has = _leaf_refit.grouped_weighted_quantile(group, values, np.ones(len(group)), q,
                                                          len(counts))
    rank = _leaf_refit.quantile_ranks(counts, q)
    for g in np.flatnonzero(counts):
        assert np.sort(values[group == g])[rank[g]] == quantile[g]
    np.testing.assert_array_equal(has, counts > 0)
