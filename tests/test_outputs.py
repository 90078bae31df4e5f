"""Models of several outputs: several targets at once (a 2-D y) and multiclass
softmax (docs/packs.md §10)."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from packboost import PackBoostClassifier, PackBoostRegressor, load_model
from packboost.datasets import make_numerai_like
from packboost.model_file import ModelFileError, read_model_file, write_model_file
from packboost.objectives import Softmax, softmax

PARAMS = dict(n_estimators=6, max_depth=4, pack_size=3, random_state=7, n_jobs=1)


@pytest.fixture(scope="module")
def numerai():
    data = make_numerai_like(n_rows=3_000, n_features=12, n_eras=15, random_state=2)
    rng = np.random.default_rng(2)
    X = data.X.astype(np.float64)
    X[rng.random(X.shape) < 0.05] = np.nan
    # Three targets of different scales and shapes (one of them a constant shift).
    Y = np.column_stack([data.y, -3.0 * data.y + rng.normal(0, 0.2, len(data.y)),
                         np.round(data.X[:, 0] / 4.0) + 10.0])
    return X, Y, data.era


@pytest.fixture(scope="module")
def blobs():
    """Three well separated classes (string labels) in 5 features, 10 eras."""
    rng = np.random.default_rng(0)
    n_rows = 1_500
    codes = rng.integers(0, 3, n_rows)
    centres = np.array([[-3.0, 0, 0, 0, 0], [3.0, 3.0, 0, 0, 0], [3.0, -3.0, 0, 0, 0]])
    X = centres[codes] + rng.normal(0, 0.7, (n_rows, 5))
    labels = np.array(["cat", "dog", "eel"])[codes]
    era = np.repeat(np.arange(10), n_rows // 10)
    return X, labels, era


def _tree_arrays(ensemble):
    return {name: values.copy() for name, values in ensemble.nodes.items()}


# -- several targets ----------------------------------------------------------------


@pytest.mark.parametrize("objective", ["squared_error", "huber", "quantile"])
@pytest.mark.parametrize("weighted", [False, True])
def test_k_targets_are_k_separate_fits_bit_for_bit(numerai, objective, weighted):
    """Each target's trees are those of a fit on that target alone with the same
    seed: the round's draws are shared, the gradients and their rescaling are
    the target's own (docs/packs.md §10)."""
    X, Y, era = numerai
    weight = np.random.default_rng(1).uniform(0.5, 2.0, len(X)) if weighted else None
    params = dict(PARAMS, objective=objective, row_subsample=0.8, tree_feature_fraction=0.5)
    joint = PackBoostRegressor(**params).fit(X, Y, era=era, sample_weight=weight)
    prediction = joint.predict(X)
    assert prediction.shape == (len(X), Y.shape[1])
    assert joint.ensemble_.n_outputs == Y.shape[1]
    assert joint.n_iter_ == params["n_estimators"]
    for target in range(Y.shape[1]):
        alone = PackBoostRegressor(**params).fit(X, Y[:, target], era=era,
                                                 sample_weight=weight)
        own = joint.ensemble_.output_ensemble(target)
        for name, values in alone.ensemble_.nodes.items():
            np.testing.assert_array_equal(own.nodes[name], values, err_msg=name)
        np.testing.assert_array_equal(prediction[:, target], alone.predict(X))
        np.testing.assert_array_equal(joint.predict(X, iteration_range=(1, 4))[:, target],
                                      alone.predict(X, iteration_range=(1, 4)))


def test_tree_output_map_is_the_round_layout(numerai):
    X, Y, era = numerai
    model = PackBoostRegressor(**dict(PARAMS, n_estimators=2)).fit(X, Y, era=era)
    ensemble = model.ensemble_
    pack_size, k = PARAMS["pack_size"], Y.shape[1]
    expected = np.tile(np.repeat(np.arange(k), pack_size), 2)
    np.testing.assert_array_equal(ensemble.tree_outputs(), expected)
    assert ensemble.n_trees == 2 * pack_size * k and ensemble.n_rounds == 2


def test_per_target_eval_metrics_and_their_mean(numerai):
    X, Y, era = numerai
    train, valid = era < 10, era >= 10
    model = PackBoostRegressor(**PARAMS).fit(
        X[train], Y[train], era=era[train],
        eval_set=[(X[valid], Y[valid], era[valid])])
    history = model.evals_result_["valid_0"]
    names = ["pearson_mean", "pearson_sharpe", "rmse"]
    assert list(history)[:3] == names  # the means first: early stopping's default
    for name in names:
        per_target = np.array([history[f"{name}[{j}]"] for j in range(3)])
        np.testing.assert_allclose(history[name], per_target.mean(axis=0))
    # Each target's history is that target's fit's.
    alone = PackBoostRegressor(**PARAMS).fit(
        X[train], Y[train, 1], era=era[train],
        eval_set=[(X[valid], Y[valid, 1], era[valid])])
    for name in names:
        assert history[f"{name}[1]"] == alone.evals_result_["valid_0"][name]


def test_early_stopping_watches_the_mean_or_a_named_target(numerai):
    X, Y, era = numerai
    train, valid = era < 10, era >= 10
    params = dict(PARAMS, n_estimators=40, learning_rate=0.5)
    model = PackBoostRegressor(**params).fit(
        X[train], Y[train], eval_set=[(X[valid], Y[valid])], early_stopping_rounds=2)
    rmse = np.array(model.evals_result_["valid_0"]["rmse"])
    assert model.best_iteration_ == int(np.argmin(rmse)) + 1
    assert model.n_iter_ == model.best_iteration_

    from packboost.callback import EarlyStopping

    model = PackBoostRegressor(**params).fit(
        X[train], Y[train], eval_set=[(X[valid], Y[valid])],
        callbacks=[EarlyStopping(2, metric="rmse[2]")])
    rmse_2 = np.array(model.evals_result_["valid_0"]["rmse[2]"])
    assert model.best_iteration_ == int(np.argmin(rmse_2)) + 1


def test_contributions_per_target_sum_to_the_prediction(numerai):
    X, Y, era = numerai
    model = PackBoostRegressor(**dict(PARAMS, n_estimators=3)).fit(X, Y, era=era)
    contributions = model.predict(X[:50], pred_contrib=True)
    assert contributions.shape == (50, Y.shape[1], X.shape[1] + 1)
    np.testing.assert_allclose(contributions.sum(axis=2), model.predict(X[:50]), atol=1e-9)


def test_continued_training_keeps_the_targets(numerai, tmp_path):
    X, Y, era = numerai
    first = PackBoostRegressor(**dict(PARAMS, n_estimators=2)).fit(X, Y, era=era)
    more = PackBoostRegressor(**dict(PARAMS, n_estimators=3)).fit(X, Y, era=era,
                                                                   init_model=first)
    assert more.n_iter_ == 5 and more.predict(X).shape == Y.shape
    np.testing.assert_array_equal(more.predict(X, iteration_range=(0, 2)), first.predict(X))
    with pytest.raises(ValueError, match="init_model was trained on 3 targets"):
        PackBoostRegressor(**PARAMS).fit(X, Y[:, :2], era=era, init_model=first)


@pytest.mark.parametrize("bad, message", [
    (lambda Y: Y[:-1], "rows but X has"),
    (lambda Y: Y[:, :, np.newaxis], "1-dimensional or 2-dimensional"),
    (lambda Y: np.where(np.arange(Y.size).reshape(Y.shape) == 7, np.inf, Y),
     r"y\[:, 1\] contains infinity \(inf at row 2\)"),
    (lambda Y: np.where(np.arange(Y.shape[1]) == 2, np.nan, Y), r"y\[:, 2\] is NaN in every row"),
    (lambda Y: Y[:, :0], "no target column"),
    (lambda Y: Y.astype(str).astype(object) + "x", "must be numeric"),
])
def test_bad_targets_are_refused(numerai, bad, message):
    X, Y, era = numerai
    with pytest.raises(ValueError, match=message):
        PackBoostRegressor(**PARAMS).fit(X, bad(Y), era=era)


def test_eval_set_targets_must_match(numerai):
    X, Y, era = numerai
    with pytest.raises(ValueError, match=r"eval_set\[0\] y must have shape \(100, 3\)"):
        PackBoostRegressor(**PARAMS).fit(X, Y, eval_set=[(X[:100], Y[:100, 0])])
    with pytest.raises(ValueError, match=r"eval_set\[0\] y must have shape \(100, 3\)"):
        PackBoostRegressor(**PARAMS).fit(X, Y, eval_set=[(X[:100], Y[:100, :2])])
    with pytest.raises(ValueError, match=r"eval_set\[0\] y must be 1-dimensional"):
        PackBoostRegressor(**PARAMS).fit(X, Y[:, 0], eval_set=[(X[:100], Y[:100])])


def test_a_callable_objective_of_several_targets_takes_rows_by_targets(numerai):
    """The function gets (n_rows, n_targets) in the caller's row order and
    returns that shape; each target's trees are those of a one-target fit of
    the same function on its column."""
    X, Y, era = numerai
    era = era[::-1].copy()          # rows not in era order: the caller's order is kept
    shapes = []

    def pseudo_huber(y_true, y_pred):
        shapes.append(y_true.shape)
        residual = y_pred - y_true
        scale = np.sqrt(1.0 + residual * residual)
        return residual / scale, 1.0 / scale ** 3

    params = dict(PARAMS, objective=pseudo_huber, row_subsample=0.8)
    weight = np.random.default_rng(4).uniform(0.5, 2.0, len(X))
    joint = PackBoostRegressor(**params).fit(X, Y, era=era, sample_weight=weight)
    assert set(shapes) == {Y.shape}
    for target in range(Y.shape[1]):
        alone = PackBoostRegressor(**params).fit(X, Y[:, target], era=era,
                                                 sample_weight=weight)
        for name, values in alone.ensemble_.nodes.items():
            np.testing.assert_array_equal(joint.ensemble_.output_ensemble(target).nodes[name],
                                          values, err_msg=name)
        np.testing.assert_array_equal(joint.predict(X)[:, target], alone.predict(X))

    def wrong_shape(y_true, y_pred):
        return (y_pred - y_true)[:, 0], np.ones(len(y_true))

    with pytest.raises(ValueError, match=r"expected \(3000, 3\), one value per training row "
                                         "and target"):
        PackBoostRegressor(**dict(PARAMS, objective=wrong_shape)).fit(X, Y, era=era)


def test_targets_as_a_data_frame(numerai):
    pd = pytest.importorskip("pandas")
    X, Y, era = numerai
    frame = pd.DataFrame(Y, columns=["target_a", "target_b", "target_c"])
    model = PackBoostRegressor(**dict(PARAMS, n_estimators=2))
    np.testing.assert_array_equal(model.fit(X, frame, era=era).predict(X),
                                  model.fit(X, Y, era=era).predict(X))


# -- multiclass --------------------------------------------------------------------


def _softmax_loss(raw, codes):
    return -np.log(softmax(raw, axis=0)[codes, np.arange(len(codes))])


def test_softmax_gradients_match_a_numeric_oracle():
    rng = np.random.default_rng(3)
    k, n = 4, 7
    raw = rng.normal(0, 2, (k, n))
    codes = rng.integers(0, k, n)
    weight = rng.uniform(0.5, 2, n)
    g, h = np.empty((k, n)), np.empty((k, n))
    Softmax(k).gradients(codes.astype(np.float64), raw, weight, g, h)
    step = 1e-4
    for c in range(k):
        bump = np.zeros((k, n))
        bump[c] = step
        up, mid, down = (_softmax_loss(raw + bump, codes), _softmax_loss(raw, codes),
                         _softmax_loss(raw - bump, codes))
        np.testing.assert_allclose(g[c], weight * (up - down) / (2 * step), rtol=1e-6,
                                   atol=1e-9)
        np.testing.assert_allclose(h[c], weight * (up - 2 * mid + down) / step**2,
                                   rtol=1e-4, atol=1e-7)


def test_softmax_is_finite_for_extreme_scores():
    raw = np.array([[800.0, -800.0, 0.0], [-800.0, 800.0, 0.0], [0.0, 0.0, 1e-300]])
    codes = np.array([0.0, 0.0, 2.0])
    g, h = np.empty((3, 3)), np.empty((3, 3))
    Softmax(3).gradients(codes, raw, None, g, h)
    assert np.isfinite(g).all() and np.isfinite(h).all() and (h > 0).all()
    np.testing.assert_allclose(g[:, 0], [0.0, 0.0, 0.0], atol=1e-300)   # certain and right
    np.testing.assert_allclose(g[:, 1], [-1.0, 1.0, 0.0])               # certain and wrong
    probability = Softmax.transform(raw.T)
    np.testing.assert_allclose(probability.sum(axis=1), 1.0)


def test_softmax_starts_at_the_class_frequencies():
    codes = np.array([0, 0, 0, 1, 2, 2], dtype=np.float64)
    base = Softmax(3).base_score(codes, None)
    np.testing.assert_allclose(softmax(base[np.newaxis, :], axis=1)[0], [0.5, 1 / 6, 1 / 3])
    assert abs(base.sum()) < 1e-12


def test_multiclass_separates_three_classes(blobs):
    X, labels, era = blobs
    model = PackBoostClassifier(n_estimators=30, max_depth=3, random_state=0, n_jobs=1)
    model.fit(X[:1000], labels[:1000], era=era[:1000])
    np.testing.assert_array_equal(model.classes_, ["cat", "dog", "eel"])
    assert model.ensemble_.n_outputs == 3
    probability = model.predict_proba(X[1000:])
    assert probability.shape == (500, 3)
    np.testing.assert_allclose(probability.sum(axis=1), 1.0)
    predicted = model.predict(X[1000:])
    np.testing.assert_array_equal(predicted, model.classes_[np.argmax(probability, axis=1)])
    assert np.mean(predicted == labels[1000:]) > 0.97
    assert model.decision_function(X[:5]).shape == (5, 3)
    contributions = model.predict(X[:20], pred_contrib=True)
    assert contributions.shape == (20, 3, X.shape[1] + 1)
    np.testing.assert_allclose(contributions.sum(axis=2), model.decision_function(X[:20]),
                               atol=1e-9)


def test_multiclass_eval_metrics(blobs):
    X, labels, era = blobs
    model = PackBoostClassifier(n_estimators=8, max_depth=3, random_state=0, n_jobs=1)
    model.fit(X[:1000], labels[:1000], eval_set=[(X[1000:], labels[1000:], era[1000:])],
              eval_metric=["multi_logloss", "multi_error"], early_stopping_rounds=3)
    history = model.evals_result_["valid_0"]
    assert list(history) == ["multi_logloss", "multi_error"]
    probability = model.predict_proba(X[1000:], iteration_range=(0, len(history["multi_error"])))
    truth = np.searchsorted(model.classes_, labels[1000:])
    assert history["multi_error"][-1] == pytest.approx(
        np.mean(np.argmax(probability, axis=1) != truth))
    assert history["multi_logloss"][-1] == pytest.approx(
        -np.mean(np.log(probability[np.arange(len(truth)), truth])))
    default = PackBoostClassifier(n_estimators=2, random_state=0, n_jobs=1).fit(
        X, labels, eval_set=[(X, labels, era)])
    assert list(default.evals_result_["valid_0"]) == ["multi_logloss"]
    for metric, message in (("logloss", "multi_logloss"), ("pearson_mean", "multiclass"),
                            ("rmse", "multiclass")):
        with pytest.raises(ValueError, match=message):
            PackBoostClassifier(n_estimators=2).fit(X, labels, eval_set=[(X, labels, era)],
                                                    eval_metric=metric)


def test_multiclass_bad_labels(blobs):
    X, labels, era = blobs
    with pytest.raises(ValueError, match="1 class"):
        PackBoostClassifier(n_estimators=2).fit(X, np.full(len(X), "cat"))
    with pytest.raises(ValueError, match="shape"):
        PackBoostClassifier(n_estimators=2).fit(X, np.column_stack([labels, labels]))
    with pytest.raises(ValueError, match="rows|shape"):
        PackBoostClassifier(n_estimators=2).fit(X, labels[:-1])
    bad = labels.astype(object)
    bad[5] = None
    with pytest.raises(ValueError, match="missing label"):
        PackBoostClassifier(n_estimators=2).fit(X, bad)
    model = PackBoostClassifier(n_estimators=2, n_jobs=1).fit(X, labels)
    with pytest.raises(ValueError, match="labels not seen in fit"):
        model.fit(X, np.where(labels == "eel", "fox", labels), init_model=model)

    def logistic(y_true, y_pred):
        p = 1 / (1 + np.exp(-y_pred))
        return p - y_true, p * (1 - p)

    with pytest.raises(ValueError, match="callable objective trains two classes"):
        PackBoostClassifier(n_estimators=2, objective=logistic).fit(X, labels)


def test_integer_labels_and_a_missing_class_in_eval(blobs):
    X, labels, era = blobs
    codes = np.searchsorted(["cat", "dog", "eel"], labels) * 10  # 0, 10, 20
    model = PackBoostClassifier(n_estimators=4, random_state=1, n_jobs=1)
    model.fit(X, codes, eval_set=[(X[codes < 20], codes[codes < 20])])
    np.testing.assert_array_equal(model.classes_, [0, 10, 20])
    assert set(np.unique(model.predict(X))) <= {0, 10, 20}


def test_sklearn_clone_and_cross_val_score(blobs):
    sklearn = pytest.importorskip("sklearn")
    from sklearn.base import clone
    from sklearn.model_selection import cross_val_score

    X, labels, era = blobs
    model = PackBoostClassifier(n_estimators=10, max_depth=3, random_state=0, n_jobs=1)
    assert clone(model).get_params() == model.get_params()
    scores = cross_val_score(model, X, labels, cv=3)
    assert scores.min() > 0.95, (scores, sklearn.__version__)
    log_loss = cross_val_score(model, X, labels, cv=3, scoring="neg_log_loss")
    assert np.all(log_loss < 0)


# -- model files and the standalone predictor --------------------------------------------


@pytest.fixture(scope="module")
def fitted(numerai, blobs):
    X, Y, era = numerai
    Xb, labels, era_b = blobs
    return {
        "targets": (PackBoostRegressor(**PARAMS).fit(X, Y, era=era), X),
        "classes": (PackBoostClassifier(**PARAMS).fit(Xb, labels, era=era_b), Xb),
    }


@pytest.mark.parametrize("kind", ["targets", "classes"])
def test_model_file_round_trip(fitted, kind, tmp_path):
    model, X = fitted[kind]
    path = tmp_path / "model.pbm"
    model.save_model(path)
    loaded = load_model(path)
    assert loaded.ensemble_.n_outputs == model.ensemble_.n_outputs
    np.testing.assert_array_equal(loaded.predict(X), model.predict(X))
    if kind == "classes":
        np.testing.assert_array_equal(loaded.predict_proba(X), model.predict_proba(X))
        np.testing.assert_array_equal(loaded.classes_, model.classes_)
    metadata, _ = read_model_file(path)
    assert metadata["n_outputs"] == 3 and len(metadata["base_score"]) == 3


@pytest.mark.parametrize("change, message", [
    (lambda meta: meta.update(n_outputs=2), "round_layer_offsets|number of trees"),
    (lambda meta: meta.update(n_outputs=0), "out of range"),
    (lambda meta: meta.update(base_score=[0.0, 1.0]), "base_score must hold 3"),
    (lambda meta: meta.update(base_score=[0.0, "a", 1.0]), "base_score must hold 3"),
    (lambda meta: meta.update(base_score=[0.0, float("nan"), 1.0]), "finite"),
    (lambda meta: meta.update(base_score=0.5), "wrong type"),
    (lambda meta: meta.pop("n_outputs"), "round_layer_offsets|wrong type"),
])
def test_forged_output_metadata_is_refused(fitted, change, message, tmp_path):
    model, _ = fitted["targets"]
    path = tmp_path / "model.pbm"
    model.save_model(path)
    metadata, arrays = read_model_file(path)
    change(metadata)
    write_model_file(path, metadata, arrays)
    with pytest.raises(ModelFileError, match=message):
        load_model(path)


def test_a_classifier_file_must_have_one_output_per_class(fitted, tmp_path):
    model, _ = fitted["classes"]
    path = tmp_path / "model.pbm"
    model.save_model(path)
    metadata, arrays = read_model_file(path)
    metadata["classes"] = metadata["classes"][:2]  # two classes: one output, not three
    write_model_file(path, metadata, arrays)
    with pytest.raises(ModelFileError, match="output"):
        load_model(path)


@pytest.mark.parametrize("kind", ["targets", "classes"])
def test_standalone_predictor_is_bit_identical(fitted, kind):
    model, X = fitted[kind]
    predictor = pickle.loads(pickle.dumps(model.standalone_predictor()))
    predictor.CELLS_PER_BLOCK = 1000  # several row blocks
    np.testing.assert_array_equal(predictor.predict(X), model.predict(X))
    np.testing.assert_array_equal(predictor.raw_predict(X[:0]).shape,
                                  (0, model.ensemble_.n_outputs))
    if kind == "classes":
        np.testing.assert_array_equal(predictor.predict_proba(X), model.predict_proba(X))


# -- target names -------------------------------------------------------------------------


def test_a_table_of_targets_names_the_outputs_and_the_file_keeps_them(numerai, tmp_path):
    pd = pytest.importorskip("pandas")
    X, Y, era = numerai
    names = ["target", "target_neg", "target_codes"]
    model = PackBoostRegressor(**dict(PARAMS, n_estimators=2)).fit(
        X, pd.DataFrame(Y, columns=names), era=era)
    assert list(model.target_names_) == names
    same = PackBoostRegressor(**dict(PARAMS, n_estimators=2)).fit(X, Y, era=era)
    assert not hasattr(same, "target_names_")  # an array has no names
    np.testing.assert_array_equal(model.predict(X), same.predict(X))
    path = tmp_path / "model.pbm"
    model.save_model(path)
    assert read_model_file(path)[0]["target_names"] == names
    assert list(load_model(path).target_names_) == names
    # Continued training on an array keeps the names of the model it continues.
    more = PackBoostRegressor(**dict(PARAMS, n_estimators=1)).fit(X, Y, era=era,
                                                                  init_model=path)
    assert list(more.target_names_) == names
    # A refit on an array drops them.
    model.fit(X, Y, era=era)
    assert not hasattr(model, "target_names_")
    same.save_model(path)
    assert "target_names" not in read_model_file(path)[0]


@pytest.mark.parametrize("kind, names", [
    ("targets", ["a", "b"]),
    ("targets", ["a", "b", 3]),
    ("targets", "abc"),
    ("classes", ["a", "b", "c"]),
])
def test_forged_target_names_are_refused(fitted, kind, names, tmp_path):
    model, _ = fitted[kind]
    path = tmp_path / "model.pbm"
    model.save_model(path)
    metadata, arrays = read_model_file(path)
    metadata["target_names"] = names
    write_model_file(path, metadata, arrays)
    with pytest.raises(ModelFileError, match="target_names"):
        load_model(path)


@pytest.mark.parametrize("params", [
    dict(era_subsample=0.75, tree_feature_fraction=0.5),                  # whole eras drawn
    dict(era_subsample=1.0, row_subsample=0.7, tree_feature_fraction=0.5),  # rows drawn
    dict(era_subsample=1.0, tree_feature_fraction=1.0, pack_size=2),      # trees alike
    dict(era_subsample=0.75, tree_feature_fraction=0.5, era_gain="newton"),  # era-major only
])
def test_k_targets_equal_single_fits_where_every_cpu_path_runs(params):
    """At a size where the CPU backend takes its feature pairs and shared
    root eras (many rows per era and slot, Numerai's 5 codes) and, below the
    roots, the node-ordered route (realized gains) or the era-major pass with
    histogram subtraction (newton gains), on two threads, the targets' packs
    grown as one: each target's trees are still its single fit's."""
    data = make_numerai_like(n_rows=12_000, n_features=16, n_eras=12, random_state=4)
    rng = np.random.default_rng(4)
    Y = np.column_stack([data.y, data.y + rng.normal(0, np.std(data.y), len(data.y)),
                         rng.normal(0, 1, len(data.y))])
    settings = dict(dict(n_estimators=3, max_depth=5, pack_size=4, random_state=3, n_jobs=2,
                         lambda_dro=0.0), **params)
    joint = PackBoostRegressor(**settings).fit(data.X, Y, era=data.era)
    for target in range(Y.shape[1]):
        alone = PackBoostRegressor(**settings).fit(data.X, Y[:, target], era=data.era)
        own = joint.ensemble_.output_ensemble(target)
        for name, values in alone.ensemble_.nodes.items():
            np.testing.assert_array_equal(own.nodes[name], values, err_msg=name)
        assert own.nodes["feature"].max() >= 0      # the trees split


@pytest.mark.parametrize("kind", ["targets in two passes", "classes"])
def test_one_pass_for_the_outputs_grows_what_one_pack_at_a_time_grows(numerai, blobs, kind,
                                                                      monkeypatch):
    """A round's packs grown as one pack (docs/packs.md §10) are the packs
    grown one after the other, bit for bit: several targets whose trees
    exceed one pass (3 x 24 > 64 trees: two outputs, then one) and the
    classes of a softmax (gradients coupled through the scores)."""
    from packboost import booster
    from packboost.backends.cpu import CpuBackend

    if kind == "classes":
        X, y, era = blobs
        make = lambda: PackBoostClassifier(**dict(PARAMS, n_jobs=2))  # noqa: E731
    else:
        X, y, era = numerai
        make = lambda: PackBoostRegressor(**dict(PARAMS, pack_size=24, n_jobs=2))  # noqa: E731
    passes = []
    grow = booster.grow_output_packs

    def counted(backend, data, gradients, *args, **kwargs):
        passes.append(len(gradients))
        return grow(backend, data, gradients, *args, **kwargs)

    monkeypatch.setattr(booster, "grow_output_packs", counted)
    one_pass = make().fit(X, y, era=era)
    # Per round: the three classes in one pass; two targets in one, the third alone.
    assert passes == [3 if kind == "classes" else 2] * PARAMS["n_estimators"]
    monkeypatch.setattr(CpuBackend, "grows_outputs_in_one_pass", False)
    passes.clear()
    one_by_one = make().fit(X, y, era=era)
    assert passes == []
    for name, values in one_by_one.ensemble_.nodes.items():
        np.testing.assert_array_equal(one_pass.ensemble_.nodes[name], values, err_msg=name)
    np.testing.assert_array_equal(one_pass.predict_proba(X) if kind == "classes"
                                  else one_pass.predict(X),
                                  one_by_one.predict_proba(X) if kind == "classes"
                                  else one_by_one.predict(X))
