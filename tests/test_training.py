"""The training loop: eval sets with eras, early stopping, callbacks, iteration ranges,
continued training, feature importances."""

import io

import numpy as np
import pytest

import packboost
from packboost import PackBoostClassifier, PackBoostRegressor
from packboost.callback import (
    EarlyStopping,
    LogEvaluation,
    ProgressBar,
    TrainingCallback,
    TrainingInfo,
)
from packboost.datasets import make_numerai_like
from packboost.metrics import era_summary, per_era_correlation

PARAMS = dict(max_depth=3, pack_size=2, random_state=0, n_jobs=1)


@pytest.fixture(scope="module")
def split():
    data = make_numerai_like(n_rows=3000, n_features=8, n_eras=20, signal=0.3,
                             random_state=0)
    return data.split_by_era(0.25)


@pytest.fixture(scope="module")
def full_model(split):
    train, test = split
    return PackBoostRegressor(n_estimators=12, **PARAMS).fit(
        train.X, train.y, era=train.era, eval_set=[(test.X, test.y, test.era)],
        eval_metric=["numerai_mean", "pearson_sharpe", "rmse", "spearman_max_drawdown"])


def test_evals_result_holds_per_round_era_metrics(split, full_model):
    _, test = split
    history = full_model.evals_result_["valid_0"]
    assert list(history) == ["numerai_mean", "pearson_sharpe", "rmse", "spearman_max_drawdown"]
    assert all(len(values) == 12 for values in history.values())
    # The last round's numbers are those of the final model.
    prediction = full_model.predict(test.X)
    _, numerai = per_era_correlation(test.y, prediction, test.era, method="numerai")
    _, pearson = per_era_correlation(test.y, prediction, test.era)
    assert history["numerai_mean"][-1] == pytest.approx(era_summary(numerai)["mean"], rel=1e-9)
    assert history["pearson_sharpe"][-1] == pytest.approx(era_summary(pearson)["sharpe"],
                                                          rel=1e-9)
    # ... and round k's those of the first k rounds.
    early = full_model.predict(test.X, iteration_range=(0, 5))
    _, numerai_5 = per_era_correlation(test.y, early, test.era, method="numerai")
    assert history["numerai_mean"][4] == pytest.approx(era_summary(numerai_5)["mean"], rel=1e-9)
    # Without early stopping: no best iteration, and best_score_ holds the last
    # round's scores (as LightGBM's).
    assert full_model.best_iteration_ is None
    assert full_model.best_score_ == {"valid_0": {name: values[-1]
                                                  for name, values in history.items()}}
    assert full_model.n_iter_ == 12


def test_default_metrics_and_names(split):
    train, test = split
    model = PackBoostRegressor(n_estimators=2, **PARAMS).fit(
        train.X, train.y, era=train.era, eval_set=[(train.X, train.y), (test.X, test.y, test.era)],
        eval_names=["train", "holdout"])
    assert list(model.evals_result_) == ["train", "holdout"]
    assert list(model.evals_result_["holdout"]) == ["pearson_mean", "pearson_sharpe", "rmse"]
    # Without eras an eval set is one era: its Sharpe is undefined.
    assert np.isnan(model.evals_result_["train"]["pearson_sharpe"]).all()
    plain = PackBoostRegressor(n_estimators=2, **PARAMS).fit(
        train.X, train.y, eval_set=[(test.X, test.y)])
    assert list(plain.evals_result_["valid_0"]) == ["rmse"]
    with pytest.raises(ValueError, match="eval_names"):
        PackBoostRegressor(n_estimators=1).fit(train.X, train.y, eval_set=[(test.X, test.y)],
                                               eval_names=["a", "b"])
    with pytest.raises(ValueError, match="eval_metric"):
        PackBoostRegressor(n_estimators=1).fit(train.X, train.y, eval_set=[(test.X, test.y)],
                                               eval_metric="auc")


def test_callable_metric(split):
    train, test = split
    seen = []

    def share_positive(y_true, y_pred, era):
        seen.append(era is not None)
        _, correlations = per_era_correlation(y_true, y_pred, era)
        return "share_positive", float(np.mean(correlations > 0)), True

    model = PackBoostRegressor(n_estimators=3, **PARAMS).fit(
        train.X, train.y, era=train.era, eval_set=[(test.X, test.y, test.era)],
        eval_metric=[share_positive, "rmse"], early_stopping_rounds=10)
    assert list(model.evals_result_["valid_0"]) == ["share_positive", "rmse"]
    assert all(seen) and len(seen) == 3
    with pytest.raises(TypeError, match="must return"):
        PackBoostRegressor(n_estimators=1).fit(train.X, train.y, eval_set=[(test.X, test.y)],
                                               eval_metric=lambda y, p, era: 0.5)


@pytest.mark.parametrize("metric", ["numerai_mean", "rmse"])
def test_early_stopping_keeps_the_best_rounds(split, full_model, metric):
    train, test = split
    model = PackBoostRegressor(n_estimators=12, **PARAMS).fit(
        train.X, train.y, era=train.era, eval_set=[(test.X, test.y, test.era)],
        eval_metric=[metric], early_stopping_rounds=2)
    history = full_model.evals_result_["valid_0"][metric]
    values = history if metric == "numerai_mean" else [-v for v in history]
    best, grown = 0, len(values)
    for index in range(1, len(values)):  # patience 2, as a person would check it
        if values[index] > values[best]:
            best = index
        elif index - best >= 2:
            grown = index + 1
            break
    assert model.best_iteration_ == best + 1
    assert model.n_iter_ == best + 1
    assert len(model.evals_result_["valid_0"][metric]) == grown
    np.testing.assert_allclose(model.evals_result_["valid_0"][metric], history[:grown],
                               rtol=1e-12)
    assert model.best_score_["valid_0"][metric] == pytest.approx(history[best], rel=1e-12)
    # Stopping changes no draw: the model is the full model's first rounds.
    np.testing.assert_array_equal(model.predict(test.X),
                                  full_model.predict(test.X, iteration_range=(0, best + 1)))


def test_early_stopping_callback_options(split):
    train, test = split
    stopper = EarlyStopping(1, metric="rmse", data_name="train", restore_best=False)
    model = PackBoostRegressor(n_estimators=6, **PARAMS).fit(
        train.X, train.y, era=train.era,
        eval_set=[(train.X, train.y, train.era), (test.X, test.y, test.era)],
        eval_names=["train", "valid"], callbacks=[stopper])
    # The training error keeps falling: no stop, every round kept.
    assert model.n_iter_ == 6 and model.best_iteration_ == 6
    with pytest.raises(ValueError, match="eval_set"):
        PackBoostRegressor(n_estimators=2).fit(train.X, train.y, early_stopping_rounds=1)
    with pytest.raises(ValueError, match="not recorded"):
        PackBoostRegressor(n_estimators=2).fit(train.X, train.y, eval_set=[(test.X, test.y)],
                                               callbacks=[EarlyStopping(1, metric="mae")])
    with pytest.raises(ValueError, match="positive int"):
        EarlyStopping(0)


def test_custom_callbacks_see_every_round_and_can_stop(split):
    train, test = split
    events = []

    class Recorder(TrainingCallback):
        def before_training(self, info):
            events.append(("before", info.begin_iteration, info.end_iteration))

        def after_iteration(self, info):
            assert isinstance(info, TrainingInfo) and info.model is not None
            events.append(("round", info.iteration, info.latest(metric="rmse")))
            return False

        def after_training(self, info):
            events.append(("after", info.iteration))

    def stop_after_three(info):
        return info.rounds_done >= 3

    model = PackBoostRegressor(n_estimators=10, **PARAMS).fit(
        train.X, train.y, era=train.era, eval_set=[(test.X, test.y)],
        callbacks=[Recorder(), stop_after_three])
    assert events[0] == ("before", 0, 10)
    assert [event[1] for event in events[1:-1]] == [0, 1, 2]
    assert events[-1] == ("after", 2)
    assert model.n_iter_ == 3  # no early stopping: every grown round is kept
    with pytest.raises(TypeError, match="callback"):
        PackBoostRegressor(n_estimators=1).fit(train.X, train.y, callbacks=[42])


class _RowsOnTheBackend:
    """What CudaBackend.keep_rows returns, on the host: each round's pack
    added to the scores as the driver adds it otherwise; records its calls."""

    def __init__(self, X, calls):
        self.X, self.calls = X, calls

    def add_predictions(self, ensemble, out):
        self.calls.append(("add", out.shape))
        out += ensemble.predict_raw(self.X, 1)

    def close(self):
        self.calls.append(("close", None))


def test_a_backend_keeping_the_eval_rows_scores_them_each_round(split, full_model,
                                                                monkeypatch):
    """The driver hands each round's pack to the rows a backend keeps
    (keep_rows: a GPU fit's eval sets on the device), one call a round and
    set, closes them at the end, and the scores are the host's."""
    from packboost.backends.cpu import CpuBackend

    train, test = split
    calls = []
    monkeypatch.setattr(CpuBackend, "keep_rows",
                        lambda self, X: _RowsOnTheBackend(X, calls), raising=False)
    model = PackBoostRegressor(n_estimators=12, **PARAMS).fit(
        train.X, train.y, era=train.era, eval_set=[(test.X, test.y, test.era)],
        eval_metric=["numerai_mean", "pearson_sharpe", "rmse", "spearman_max_drawdown"])
    assert calls == [("add", (len(test.y),))] * 12 + [("close", None)]
    assert model.evals_result_ == full_model.evals_result_


def test_log_evaluation_and_progress_bar_output(split):
    train, test = split
    log, bar = io.StringIO(), io.StringIO()
    PackBoostRegressor(n_estimators=5, **PARAMS).fit(
        train.X, train.y, era=train.era, eval_set=[(test.X, test.y, test.era)],
        early_stopping_rounds=50,
        callbacks=[LogEvaluation(2, stream=log), ProgressBar(delay=0.0, refresh=0.0, stream=bar)])
    lines = log.getvalue().splitlines()
    assert [line.split()[0] for line in lines[:3]] == ["[2/5]", "[4/5]", "[5/5]"]
    assert "valid_0 pearson_mean=" in lines[0]
    assert lines[-1].startswith("best iteration: ")
    drawn = bar.getvalue()
    assert drawn.count("\r") >= 5 and "5/5 rounds" in drawn and drawn.endswith("\n")


@pytest.mark.parametrize("columns", [80, 40])
def test_progress_bar_stays_one_line_in_a_narrow_terminal(split, monkeypatch, columns):
    """Every draw fits the terminal (a wrapped line would make "\r" scroll) and
    covers the previous one."""
    monkeypatch.setenv("COLUMNS", str(columns))
    train, test = split
    bar = io.StringIO()
    PackBoostRegressor(n_estimators=4, **PARAMS).fit(
        train.X, train.y, era=train.era, eval_set=[(test.X, test.y, test.era)],
        eval_metric=["numerai_sharpe"], callbacks=[ProgressBar(delay=0.0, refresh=0.0,
                                                               stream=bar)])
    draws = bar.getvalue().rstrip("\n").split("\r")[1:]
    assert len(draws) >= 4 and "\n" not in "".join(draws)
    assert all(len(draw) <= columns - 1 for draw in draws)
    assert all(len(later) >= len(earlier.rstrip())
               for earlier, later in zip(draws, draws[1:], strict=False))


def test_progress_bar_is_off_when_not_interactive(split, capsys):
    train, _ = split
    PackBoostRegressor(n_estimators=2, **PARAMS).fit(train.X, train.y)
    assert capsys.readouterr().err == ""


def test_iteration_range(split, full_model):
    _, test = split
    full = full_model.predict(test.X)
    np.testing.assert_array_equal(full_model.predict(test.X, iteration_range=(0, None)), full)
    head = full_model.predict(test.X, iteration_range=(0, 4))
    tail = full_model.predict(test.X, iteration_range=(4, 12))
    base = full_model.ensemble_.base_score
    np.testing.assert_allclose(head + tail - base, full, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(full_model.predict(test.X, iteration_range=(3, 3)),
                                  np.full(len(test.y), base))
    for bad, error in [((0, 13), ValueError), ((5, 4), ValueError), ((0.5, 2), TypeError),
                       (3, TypeError)]:
        with pytest.raises(error, match="iteration_range"):
            full_model.predict(test.X, iteration_range=bad)


def test_classifier_eval_metrics_and_iteration_range(split):
    train, test = split
    labels = np.where(train.y > 0.5, "up", "down")
    test_labels = np.where(test.y > 0.5, "up", "down")
    model = PackBoostClassifier(n_estimators=6, **PARAMS).fit(
        train.X, labels, era=train.era, eval_set=[(test.X, test_labels, test.era)],
        eval_metric=["logloss", "numerai_mean"], early_stopping_rounds=3)
    history = model.evals_result_["valid_0"]
    assert list(history) == ["logloss", "numerai_mean"]
    proba = model.predict_proba(test.X, iteration_range=(0, 2))
    assert proba.shape == (len(test.y), 2)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    final = -np.mean(np.log(np.where(test_labels == "up", model.predict_proba(test.X)[:, 1],
                                     model.predict_proba(test.X)[:, 0])))
    assert history["logloss"][model.n_iter_ - 1] == pytest.approx(final, rel=1e-9)


def test_continued_training_from_a_file_and_an_estimator(split, tmp_path):
    train, test = split
    first = PackBoostRegressor(n_estimators=4, **PARAMS).fit(train.X, train.y, era=train.era)
    first.save_model(tmp_path / "first.pbm")
    more = PackBoostRegressor(n_estimators=3, learning_rate=0.05, **PARAMS)
    more.fit(train.X, train.y, era=train.era, init_model=tmp_path / "first.pbm",
             eval_set=[(test.X, test.y, test.era)])
    assert more.n_iter_ == 7 and more.ensemble_.n_rounds == 7
    assert more.bin_mapper_ is not first.bin_mapper_
    np.testing.assert_array_equal(more.bin_mapper_.n_bins_, first.bin_mapper_.n_bins_)
    # The old rounds are kept as they were; the new ones start from their scores.
    np.testing.assert_array_equal(more.predict(test.X, iteration_range=(0, 4)),
                                  first.predict(test.X))
    assert len(more.evals_result_["valid_0"]["rmse"]) == 3
    final_rmse = np.sqrt(np.mean((more.predict(test.X) - test.y) ** 2))
    assert more.evals_result_["valid_0"]["rmse"][-1] == pytest.approx(final_rmse, rel=1e-9)
    # From a fitted estimator, same result; continuing is deterministic.
    again = PackBoostRegressor(n_estimators=3, learning_rate=0.05, **PARAMS)
    again.fit(train.X, train.y, era=train.era, init_model=first)
    np.testing.assert_array_equal(again.predict(test.X), more.predict(test.X))
    # The continued model round-trips through a file.
    more.save_model(tmp_path / "more.pbm")
    loaded = packboost.load_model(tmp_path / "more.pbm")
    np.testing.assert_array_equal(loaded.predict(test.X), more.predict(test.X))
    np.testing.assert_array_equal(loaded.ensemble_.round_layer_offsets,
                                  more.ensemble_.round_layer_offsets)
    assert loaded.ensemble_.truncate(4).n_rounds == 4


def test_continued_training_on_a_table_keeps_names(split, recwarn):
    pd = pytest.importorskip("pandas")
    train, _ = split
    frame = pd.DataFrame(train.X, columns=[f"feature_{i}" for i in range(train.n_features)])
    first = PackBoostRegressor(n_estimators=2, **PARAMS).fit(frame, train.y, era=train.era)
    more = PackBoostRegressor(n_estimators=2, **PARAMS).fit(frame, train.y, era=train.era,
                                                            init_model=first)
    assert list(more.feature_names_in_) == list(frame.columns)
    assert not [w for w in recwarn if "feature names" in str(w.message)]
    with pytest.raises(ValueError, match="another order"):
        PackBoostRegressor(n_estimators=1, **PARAMS).fit(frame[frame.columns[::-1]], train.y,
                                                         init_model=first)


def test_continued_training_checks_compatibility(split):
    train, _ = split
    first = PackBoostRegressor(n_estimators=2, **PARAMS).fit(train.X, train.y)
    with pytest.raises(ValueError, match="pack_size"):
        PackBoostRegressor(n_estimators=1, pack_size=3).fit(train.X, train.y, init_model=first)
    with pytest.raises(ValueError, match="features"):
        PackBoostRegressor(n_estimators=1, **PARAMS).fit(train.X[:, :5], train.y,
                                                         init_model=first)
    with pytest.raises(TypeError, match="init_model"):
        PackBoostClassifier(n_estimators=1, **PARAMS).fit(train.X, train.y > 0.5,
                                                          init_model=first)
    labels = train.y > 0.5
    classifier = PackBoostClassifier(n_estimators=2, **PARAMS).fit(train.X, labels)
    continued = PackBoostClassifier(n_estimators=2, **PARAMS).fit(train.X, labels,
                                                                  init_model=classifier)
    assert continued.n_iter_ == 4 and list(continued.classes_) == [False, True]


def test_early_stopping_survives_a_model_file(split, tmp_path):
    train, test = split
    model = PackBoostRegressor(n_estimators=12, **PARAMS).fit(
        train.X, train.y, era=train.era, eval_set=[(test.X, test.y, test.era)],
        eval_metric="numerai_mean", early_stopping_rounds=1)
    assert model.best_iteration_ < 12
    model.save_model(tmp_path / "m.pbm")
    loaded = packboost.load_model(tmp_path / "m.pbm")
    assert loaded.best_iteration_ == model.best_iteration_ == loaded.n_iter_
    np.testing.assert_array_equal(loaded.predict(test.X), model.predict(test.X))


def test_feature_importances(split, full_model):
    train, _ = split
    ensemble = full_model.ensemble_
    internal = ensemble.nodes["feature"] >= 0
    splits = full_model.get_feature_importance("split")
    assert splits.sum() == internal.sum()
    np.testing.assert_array_equal(splits, np.bincount(ensemble.nodes["feature"][internal],
                                                      minlength=train.n_features))
    gain = full_model.get_feature_importance("gain")
    assert gain.sum() == pytest.approx(ensemble.nodes["gain"][internal].sum())
    des = full_model.get_feature_importance("des", normalize=True)
    assert des.sum() == pytest.approx(1.0) and (des >= 0).all()
    np.testing.assert_allclose(full_model.feature_importances_, gain / gain.sum())
    # The informative features of the synthetic data lead.
    assert set(np.argsort(-gain)[:1]) <= set(train.informative_features)
    # Ranges of rounds add up.
    first, rest = (full_model.get_feature_importance("split", iteration_range=r)
                   for r in [(0, 5), (5, 12)])
    np.testing.assert_array_equal(first + rest, splits)
    by_type = PackBoostRegressor(n_estimators=12, importance_type="split", **PARAMS)
    by_type.fit(train.X, train.y, era=train.era)
    np.testing.assert_allclose(by_type.feature_importances_, splits / splits.sum())
    with pytest.raises(ValueError, match="importance_type"):
        full_model.get_feature_importance("cover")
    with pytest.raises(AttributeError):
        PackBoostRegressor().feature_importances_  # noqa: B018


def test_progress_default_follows_the_session(monkeypatch):
    from packboost import sklearn as estimators

    model = PackBoostRegressor()
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.setattr(estimators, "_interactive_terminal", lambda: True)
    assert any(isinstance(c, ProgressBar) for c in model._build_callbacks(None, None, None))
    assert not any(isinstance(c, ProgressBar)
                   for c in model._build_callbacks([LogEvaluation(5)], None, None))
    assert not model._build_callbacks(None, None, False)
    monkeypatch.setattr(estimators, "_interactive_terminal", lambda: False)
    assert not model._build_callbacks(None, None, None)
    bars = model._build_callbacks(None, 3, True)
    assert isinstance(bars[0], EarlyStopping) and isinstance(bars[1], ProgressBar)
    monkeypatch.setenv("CI", "true")
    assert estimators._interactive_terminal() is False


# -- extreme scales ------------------------------------------------------------------
#
# Squared error is scale-equivariant: for y * c the gradients are g * c and
# the hessians unchanged, so the same splits win and every leaf value is
# multiplied by c. reg_lambda and min_child_weight are in hessian units
# (sample-weight units), so scaling the weights with them changes nothing
# either. Powers of two are exact in binary floating point, so there the
# trees must be bit-identical and the predictions exactly scaled, down to the
# smallest and up to the largest magnitudes the inputs may have.

SCALE_PARAMS = dict(n_estimators=6, max_depth=3, pack_size=2, random_state=0, n_jobs=1,
                    lambda_dir=0.5, min_samples_leaf=10)
STRUCTURE = ("feature", "threshold_bin", "missing_left", "left_child", "right_child",
             "n_samples")


@pytest.fixture(scope="module")
def scale_data():
    data = make_numerai_like(n_rows=1500, n_features=8, n_eras=10, signal=0.3,
                             random_state=4)
    weights = np.random.default_rng(0).uniform(0.25, 4.0, len(data.y))
    return data.X, data.y.astype(np.float64), data.era, weights


def _fit_scaled(scale_data, y_scale=1.0, weight_scale=None, estimator=PackBoostRegressor,
                **params):
    X, y, era, weights = scale_data
    if estimator is PackBoostClassifier:
        y = (y > 0.5).astype(int)
    else:
        y = y * y_scale
    sample_weight = None if weight_scale is None else weights * weight_scale
    return estimator(**{**SCALE_PARAMS, **params}).fit(X, y, era=era,
                                                      sample_weight=sample_weight)


def _assert_same_trees(model, reference, rtol=0.0):
    for name in STRUCTURE:
        np.testing.assert_array_equal(model.ensemble_.nodes[name],
                                      reference.ensemble_.nodes[name], err_msg=name)
    assert (reference.ensemble_.nodes["feature"] >= 0).sum() > 10  # it did split
    np.testing.assert_allclose(model.feature_importances_, reference.feature_importances_,
                               rtol=rtol, atol=0)


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("exponent", [-1000, -600, -70, -20, 30, 80, 300])
def test_power_of_two_target_scales_give_identical_trees(scale_data, exponent, weighted):
    weight_scale = 1.0 if weighted else None
    reference = _fit_scaled(scale_data, weight_scale=weight_scale)
    scale = 2.0**exponent
    model = _fit_scaled(scale_data, scale, weight_scale=weight_scale)
    _assert_same_trees(model, reference)
    np.testing.assert_array_equal(model.ensemble_.nodes["value"],
                                  reference.ensemble_.nodes["value"] * scale)
    np.testing.assert_array_equal(model.predict(scale_data[0]),
                                  reference.predict(scale_data[0]) * scale)


@pytest.mark.parametrize("scale", [1e-200, 1e-150, 1e-30, 1e40, 1e80, 1e99])
def test_decimal_target_scales_give_the_same_trees(scale_data, scale):
    """Not a power of two: y * c rounds, so only exact ties could part."""
    reference = _fit_scaled(scale_data)
    model = _fit_scaled(scale_data, scale)
    _assert_same_trees(model, reference, rtol=1e-9)
    np.testing.assert_allclose(model.predict(scale_data[0]) / scale,
                               reference.predict(scale_data[0]), rtol=1e-9)


@pytest.mark.parametrize("exponent", [-300, 200])
def test_absolute_thresholds_scale_with_the_target(scale_data, exponent):
    """max_delta_step is in leaf-value units (y), min_split_gain in gain units (y^2)."""
    scale = 2.0**exponent
    params = dict(max_delta_step=0.002, min_split_gain=1e-3)
    reference = _fit_scaled(scale_data, **params)
    model = _fit_scaled(scale_data, scale, max_delta_step=0.002 * scale,
                        min_split_gain=1e-3 * scale**2)
    _assert_same_trees(model, reference)
    np.testing.assert_array_equal(model.ensemble_.nodes["value"],
                                  reference.ensemble_.nodes["value"] * scale)
    assert np.abs(reference.ensemble_.nodes["value"]).max() == pytest.approx(
        0.002 * SCALE_PARAMS["pack_size"] ** -1 * 0.1)  # the clip is active


@pytest.mark.parametrize("estimator", [PackBoostRegressor, PackBoostClassifier])
@pytest.mark.parametrize("exponent", [-900, -200, 250])
def test_weights_scale_with_the_hessian_parameters(scale_data, estimator, exponent):
    """Weights are in hessian units: w * c with reg_lambda * c and
    min_child_weight * c is the same fit (hessian-dependent values exactly)."""
    reference = _fit_scaled(scale_data, weight_scale=1.0, estimator=estimator)
    scale = 2.0**exponent
    model = _fit_scaled(scale_data, weight_scale=scale, estimator=estimator,
                        reg_lambda=scale, min_child_weight=1e-3 * scale)
    _assert_same_trees(model, reference)
    np.testing.assert_array_equal(model.ensemble_.nodes["value"],
                                  reference.ensemble_.nodes["value"])
    np.testing.assert_array_equal(model.ensemble_.nodes["sum_hessian"],
                                  reference.ensemble_.nodes["sum_hessian"] * scale)


# -- early stopping on NaN -----------------------------------------------------------


def _metric_from(values):
    """A callable eval metric returning ``values`` round after round (higher is better)."""
    rounds = iter(values)

    def scripted(y_true, y_pred, era):
        return "scripted", next(rounds), True

    return scripted


def test_early_stopping_on_a_metric_that_is_always_nan_warns(split):
    """LightGBM and XGBoost stop after the patience and silently keep round 1;
    here the fit says why it has no best iteration, and keeps what it grew."""
    train, test = split
    with pytest.warns(UserWarning, match=r"'scripted' on 'valid_0' was NaN in all 3 rounds"):
        model = PackBoostRegressor(n_estimators=8, **PARAMS).fit(
            train.X, train.y, eval_set=[(test.X, test.y)],
            eval_metric=_metric_from([np.nan] * 8), early_stopping_rounds=3)
    assert model.best_iteration_ is None and model.n_iter_ == 3


def test_nan_rounds_are_never_an_improvement(split, recwarn):
    train, test = split
    nan = np.nan
    model = PackBoostRegressor(n_estimators=10, **PARAMS).fit(
        train.X, train.y, eval_set=[(test.X, test.y)],
        eval_metric=_metric_from([nan, 0.1, nan, 0.3, nan, nan, 0.2, 0.9, 0.9, 0.9]),
        early_stopping_rounds=3)
    # best 0.3 at round 4; rounds 5, 6, 7 do not beat it (NaN, NaN, 0.2): stop
    assert model.best_iteration_ == 4 and model.n_iter_ == 4
    assert model.best_score_["valid_0"]["scripted"] == 0.3
    assert len(model.evals_result_["valid_0"]["scripted"]) == 7
    assert not [w for w in recwarn if "NaN" in str(w.message)]


def test_two_eval_metrics_of_one_name_are_refused(split):
    """Two metrics of one name would share one history list (two entries per
    round) and early stopping would read both as one."""
    train, test = split
    fit = dict(eval_set=[(test.X, test.y)], early_stopping_rounds=3)
    with pytest.raises(ValueError, match=r"eval_metric.*'rmse'.*twice"):
        PackBoostRegressor(n_estimators=2, **PARAMS).fit(train.X, train.y,
                                                         eval_metric=["rmse", "rmse"], **fit)

    def rmse(y_true, y_pred, era):  # a callable that reports the built-in's name
        return "rmse", float(np.mean(np.abs(y_true - y_pred))), False

    for metrics in ([rmse, "rmse"], ["rmse", rmse], [rmse, rmse]):
        with pytest.raises(ValueError, match=r"eval_metric.*'rmse'.*twice"):
            PackBoostRegressor(n_estimators=2, **PARAMS).fit(train.X, train.y,
                                                             eval_metric=metrics, **fit)
    # Distinct names are kept apart: one entry per round each.
    def mae(y_true, y_pred, era):
        return "my_mae", float(np.mean(np.abs(y_true - y_pred))), False

    model = PackBoostRegressor(n_estimators=4, **PARAMS).fit(
        train.X, train.y, eval_metric=[mae, "rmse"], **fit)
    assert {name: len(values) for name, values in model.evals_result_["valid_0"].items()} \
        == {"my_mae": 4, "rmse": 4}


@pytest.mark.parametrize("value", [np.array([0.1, 0.2]), "0.5", None, [0.5]])
def test_callable_metric_value_that_is_not_a_number_is_named(split, value):
    train, test = split

    def broken(y_true, y_pred, era):
        return "broken", value, True

    with pytest.raises(TypeError, match=r"eval_metric function 'broken'.*number"):
        PackBoostRegressor(n_estimators=1, **PARAMS).fit(
            train.X, train.y, eval_set=[(test.X, test.y)], eval_metric=[broken])


def _squared_error(y_true, y_pred):
    return y_pred - y_true, np.ones(len(y_true))


@pytest.mark.parametrize("learning_rate", [3.0, 10.0, 1e10, 1e300])
@pytest.mark.parametrize("objective", ["squared_error", "quantile", "logistic", "softmax",
                                       "two targets", "callable"])
def test_a_diverging_learning_rate_stops_the_fit_naming_it(objective, learning_rate):
    """Rates of 2 and more overshoot until the predictions reach 1e18 .. 1e197:
    the fit stops with an error that names learning_rate (not y, sample_weight
    or reg_lambda), before any overflow warning."""
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(500, 5)), rng.normal(size=500)
    params = dict(n_estimators=60, learning_rate=learning_rate, random_state=0, n_jobs=1)
    if objective in ("logistic", "softmax"):
        model = PackBoostClassifier(**params)
        y = (y > 0).astype(int) if objective == "logistic" else np.digitize(y, [-0.5, 0.5])
    else:
        model = PackBoostRegressor(**params, **(
            {"objective": "quantile", "alpha": 0.9} if objective == "quantile" else
            {"objective": _squared_error} if objective == "callable" else {}))
        if objective == "two targets":
            y = np.column_stack([y, X[:, 0] + y])
    import warnings

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="learning_rate=", category=UserWarning)
        warnings.simplefilter("error", RuntimeWarning)
        with pytest.raises(FloatingPointError, match=r"training diverged in round \d+: .*"
                                                     r"lower learning_rate \(now "):
            model.fit(X, y)
    assert not hasattr(model, "ensemble_")


@pytest.mark.parametrize("learning_rate", [0.1, 1.0, 1.9])
def test_converging_fits_are_not_taken_for_diverging_ones(learning_rate):
    """Below 2 the overshoot dies out, even where the loss first rises (1%
    positives at 1.9 went to 17 times the starting loss before converging).
    Softmax steps on the diagonal of its Hessian, longer than Newton's: from
    a rate of 1.5 its loss stays 50 to 900 times the starting loss, which
    is divergence."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(2000, 5))
    y = X[:, 0] + rng.normal(size=2000)
    params = dict(n_estimators=60, max_depth=4, learning_rate=learning_rate, random_state=0,
                  n_jobs=1)
    import warnings

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="learning_rate=", category=UserWarning)
        PackBoostRegressor(**params).fit(X, y)
        PackBoostRegressor(objective="quantile", alpha=0.9, **params).fit(X, y)
        PackBoostRegressor(objective=_squared_error, **params).fit(X, y)
        PackBoostClassifier(**params).fit(X, y > 2.2)
        if learning_rate <= 1.0:
            PackBoostClassifier(**params).fit(X, np.digitize(y, [-0.5, 0.5]))
        else:
            with pytest.raises(FloatingPointError, match="learning_rate"):
                PackBoostClassifier(**params).fit(X, np.digitize(y, [-0.5, 0.5]))
