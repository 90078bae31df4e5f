"""Several Python threads at once: predicting with one model, fitting two models,
refitting one model while other threads predict with it, save it or set its
parameters.

The kernels release the GIL (and run their own OpenMP teams), so these
threads really overlap; a fitted model is read-only during ``predict`` and a
fit keeps all its state in locals until it publishes it in one step, so
results must equal the serial ones exactly, and a call that overlaps a refit
answers with the old model or the new one, never a mix (nor a crash).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import packboost
from packboost import PackBoostClassifier, PackBoostRegressor

N_THREADS = 8


def problem(seed, n_rows=3000, n_features=6):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n_rows, n_features))
    X[rng.random(X.shape) < 0.05] = np.nan
    y = np.nan_to_num(X[:, 0]) * np.sign(np.nan_to_num(X[:, 1])) + rng.normal(size=n_rows)
    era = rng.integers(0, 20, size=n_rows)
    return X, y, era


def run_together(function, arguments):
    """Call ``function`` on every argument in its own thread, all released at once."""
    barrier = threading.Barrier(len(arguments))

    def task(argument):
        barrier.wait()
        return function(argument)

    with ThreadPoolExecutor(max_workers=len(arguments)) as pool:
        return list(pool.map(task, arguments))


@pytest.mark.parametrize("n_jobs", [1, 2])
def test_predict_from_many_threads_equals_serial(n_jobs):
    X, y, era = problem(0)
    model = PackBoostRegressor(n_estimators=20, max_depth=4, random_state=0, n_jobs=n_jobs)
    model.fit(X, y, era=era)
    chunks = [X[index::N_THREADS] for index in range(N_THREADS)]
    serial = [model.predict(chunk) for chunk in chunks]
    for _ in range(3):
        together = run_together(model.predict, chunks + [X] * 2)
        for expected, got in zip(serial, together[:N_THREADS], strict=True):
            np.testing.assert_array_equal(got, expected)
        for got in together[N_THREADS:]:
            np.testing.assert_array_equal(got, model.predict(X))


def test_classifier_and_loaded_model_predict_from_many_threads(tmp_path):
    X, y, era = problem(1)
    model = PackBoostClassifier(n_estimators=10, random_state=0, n_jobs=2).fit(X, y > 0,
                                                                              era=era)
    model.save_model(tmp_path / "clf.pbm")
    serial = model.predict_proba(X)

    def load_and_predict(_):
        return packboost.load_model(tmp_path / "clf.pbm").predict_proba(X)

    for got in run_together(load_and_predict, range(N_THREADS)):
        np.testing.assert_array_equal(got, serial)
    for got in run_together(model.predict_proba, [X] * N_THREADS):
        np.testing.assert_array_equal(got, serial)


@pytest.mark.parametrize("n_jobs", [1, 2])
def test_fitting_two_models_in_two_threads(n_jobs):
    problems = [problem(2), problem(3, n_features=4)]
    params = dict(n_estimators=8, max_depth=3, random_state=5, n_jobs=n_jobs)

    def fit(data):
        X, y, era = data
        return PackBoostRegressor(**params).fit(X, y, era=era, eval_set=[(X, y, era)])

    serial = [fit(data) for data in problems]
    together = run_together(fit, problems)
    for expected, got, (X, _, _) in zip(serial, together, problems, strict=True):
        for name, values in expected.ensemble_.nodes.items():
            np.testing.assert_array_equal(got.ensemble_.nodes[name], values, err_msg=name)
        np.testing.assert_array_equal(got.predict(X), expected.predict(X))
        assert got.evals_result_ == expected.evals_result_


def test_fit_in_one_thread_while_another_predicts():
    X, y, era = problem(4)
    fitted = PackBoostRegressor(n_estimators=10, random_state=0, n_jobs=1).fit(X, y, era=era)
    expected = fitted.predict(X)

    def work(which):
        if which == 0:
            return PackBoostRegressor(n_estimators=10, random_state=1, n_jobs=1).fit(
                X, y, era=era).predict(X)
        return [fitted.predict(X) for _ in range(5)]

    new_model, predictions = run_together(work, [0, 1])
    for got in predictions:
        np.testing.assert_array_equal(got, expected)
    assert np.isfinite(new_model).all()


# -- one estimator refitted while other threads use it ----------------------------------
#
# A refit builds its whole fitted state aside and publishes it in one step;
# predict, predict_proba, decision_function, feature_importances_ and
# save_model each read one snapshot. So a reader sees the old model or the
# new one -- never the new trees with the old classes, round count or width.

RACE_SECONDS = 1.5
JOIN_TIMEOUT = 60


def race(writes, read):
    """Call ``read()`` in a loop in another thread while this one calls the
    ``writes`` (refits, cycled) for RACE_SECONDS; return what the reads returned."""
    stop = threading.Event()
    results, errors = [], []

    def reader():
        while not stop.is_set():
            try:
                results.append(read())
            except Exception as error:  # noqa: BLE001 -- reported below
                errors.append(error)
                return

    thread = threading.Thread(target=reader, daemon=True)
    thread.start()
    deadline = time.monotonic() + RACE_SECONDS
    n_writes = 0
    try:
        while time.monotonic() < deadline or n_writes < 2 * len(writes):
            writes[n_writes % len(writes)]()
            n_writes += 1
    finally:
        stop.set()
        thread.join(timeout=JOIN_TIMEOUT)
    assert not thread.is_alive(), "the reading thread hung"
    assert not errors, f"a read during a refit raised {errors[0]!r}"
    assert results
    return results


def small_problem(seed, n_rows=400, n_features=4):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n_rows, n_features))
    y = X[:, 0] + X[:, -1] * rng.normal() + rng.normal(size=n_rows)
    return X, y


def matches_one(got, candidates):
    return any(np.array_equal(got, candidate) for candidate in candidates)


SMALL = dict(max_depth=3, min_samples_leaf=5, random_state=0, n_jobs=1)


def two_regressors():
    """Refits of one estimator between two models of 2 and 9 rounds (so an old
    round count never fits the new trees), and those models fitted apart."""
    (X, y), (X2, y2) = small_problem(0), small_problem(1)
    estimator = PackBoostRegressor(n_estimators=2, **SMALL).fit(X, y)
    writes = [lambda: estimator.set_params(n_estimators=2).fit(X, y),
              lambda: estimator.set_params(n_estimators=9).fit(X2, y2)]
    models = [PackBoostRegressor(n_estimators=2, **SMALL).fit(X, y),
              PackBoostRegressor(n_estimators=9, **SMALL).fit(X2, y2)]
    return estimator, writes, models, X


def test_regressor_refit_while_predicting_sees_old_or_new():
    estimator, writes, models, X = two_regressors()
    expected = [model.predict(X) for model in models]
    for got in race(writes, lambda: estimator.predict(X)):
        assert matches_one(got, expected)


def test_refit_with_another_width_while_predicting_never_crashes(tmp_path):
    """Models of 6 and 3 features in turn, predict on 3: the new model's wider
    trees must never meet the old model's width check (that read out of bounds
    and killed the interpreter). Run in a child so a crash is a clear failure."""
    code = textwrap.dedent(f"""
        import threading, time
        import numpy as np
        from packboost import PackBoostRegressor
        rng = np.random.default_rng(0)
        X6 = rng.normal(size=(400, 6))
        y = X6[:, 5] + X6[:, 0] + rng.normal(size=400)
        X3 = np.ascontiguousarray(X6[:, :3])
        params = dict(n_estimators=6, max_depth=3, min_samples_leaf=5, random_state=0,
                      n_jobs=1, tree_feature_fraction=1.0)
        expected = PackBoostRegressor(**params).fit(X3, y).predict(X3)
        model = PackBoostRegressor(**params).fit(X3, y)
        stop, bad = threading.Event(), []
        def reader():
            while not stop.is_set():
                try:
                    got = model.predict(X3)
                except ValueError as error:  # the 6-feature model refuses 3 features
                    if "features" not in str(error):
                        bad.append(repr(error))
                    continue
                except Exception as error:
                    bad.append(repr(error))
                    continue
                if not np.array_equal(got, expected):
                    bad.append("mixed prediction")
        thread = threading.Thread(target=reader, daemon=True)
        thread.start()
        deadline = time.monotonic() + {RACE_SECONDS}
        while time.monotonic() < deadline:
            model.fit(X6, y)
            model.fit(X3, y)
        stop.set()
        thread.join({JOIN_TIMEOUT})
        assert not thread.is_alive()
        assert not bad, bad[:3]
        print("ok")
    """)
    # cwd: not the source tree, whose uncompiled packboost/ would shadow the install.
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, cwd=tmp_path)
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    assert done.stdout.strip() == "ok"


def test_classifier_refit_with_other_labels_while_predicting():
    X, y = small_problem(2)
    labels = [np.where(y > 0, "up", "down"), np.where(y > 0, 7, 3)]
    params = dict(SMALL, n_estimators=3)
    estimator = PackBoostClassifier(**params).fit(X, labels[0])
    writes = [lambda label=label: estimator.fit(X, label) for label in labels]
    models = [PackBoostClassifier(**params).fit(X, label) for label in labels]
    expected_labels = [model.predict(X) for model in models]
    expected_proba = [model.predict_proba(X) for model in models]
    expected_raw = [model.decision_function(X) for model in models]

    def read():
        return estimator.predict(X), estimator.predict_proba(X), estimator.decision_function(X)

    for got_labels, got_proba, got_raw in race(writes, read):
        assert matches_one(got_labels, expected_labels)
        assert matches_one(got_proba, expected_proba)
        assert matches_one(got_raw, expected_raw)


def test_importances_and_set_params_during_refit():
    estimator, writes, models, _ = two_regressors()
    expected = {kind: [model.get_feature_importance(kind) for model in models]
                for kind in ("gain", "split")}
    expected_normalised = [model.feature_importances_ for model in models]
    kinds = iter(range(10**9))

    def read():
        kind = ("gain", "split")[next(kinds) % 2]
        estimator.set_params(importance_type=kind)  # parameters change while others read
        return kind, estimator.get_feature_importance(kind), estimator.feature_importances_

    for kind, got, normalised in race(writes, read):
        assert matches_one(got, expected[kind])
        assert matches_one(normalised, expected_normalised + [
            values / values.sum() for values in expected["split"]])


def test_save_model_during_refit(tmp_path):
    estimator, writes, models, X = two_regressors()
    expected = [model.predict(X) for model in models]
    path = tmp_path / "model.pbm"

    def read():
        estimator.save_model(path)
        loaded = packboost.load_model(path)
        return loaded.predict(X), loaded.n_iter_, loaded.get_params()["n_estimators"]

    for got, n_iter, _ in race(writes, read):
        assert matches_one(got, expected)
        assert n_iter in (2, 9)


# The same, made deterministic: a refit lands exactly between two reads of one
# call (the patched step refits the estimator the first time it runs). The
# call must answer with the model it started with.


def refit_on_first_call(monkeypatch, owner, name, refit):
    original = getattr(owner, name)
    calls = []

    def patched(*args, **kwargs):
        if not calls:
            calls.append(name)
            refit()
        return original(*args, **kwargs)

    monkeypatch.setattr(owner, name, patched)
    return calls


@pytest.mark.parametrize("method", ["predict", "predict_proba", "decision_function"])
def test_classifier_call_keeps_its_model_when_refitted_midway(monkeypatch, method):
    X, y = small_problem(2)
    params = dict(SMALL, n_estimators=3)
    estimator = PackBoostClassifier(**params).fit(X, np.where(y > 0, "up", "down"))
    expected = getattr(estimator, method)(X)
    calls = refit_on_first_call(monkeypatch, packboost.backends, "predict_raw",
                                lambda: estimator.fit(X[:, ::-1], np.where(y < 0, 7, 3)))
    np.testing.assert_array_equal(getattr(estimator, method)(X), expected)
    assert calls and list(estimator.classes_) == [3, 7]  # the refit did land


def test_predict_keeps_its_width_when_refitted_midway(monkeypatch):
    X, y = small_problem(5, n_features=3)
    X6 = np.column_stack([X, X])
    estimator = PackBoostRegressor(n_estimators=3, **SMALL).fit(X, y)
    expected = estimator.predict(X)
    calls = refit_on_first_call(monkeypatch, packboost.sklearn._validation, "check_X",
                                lambda: estimator.fit(X6, y))
    np.testing.assert_array_equal(estimator.predict(X), expected)
    assert calls and estimator.n_features_in_ == 6


def test_importances_keep_their_model_when_refitted_midway(monkeypatch):
    estimator, writes, models, _ = two_regressors()
    writes[1]()  # the 9-round model
    expected = estimator.get_feature_importance("gain", iteration_range=(1, None))
    calls = refit_on_first_call(monkeypatch, packboost.ensemble.TreeEnsemble,
                                "feature_importance", writes[0])
    got = estimator.get_feature_importance("gain", iteration_range=(1, None))
    np.testing.assert_array_equal(got, expected)
    assert calls and estimator.n_iter_ == 2


def test_save_model_keeps_its_model_when_refitted_midway(monkeypatch, tmp_path):
    pd = pytest.importorskip("pandas")
    X, y = small_problem(6)
    frame = pd.DataFrame(X, columns=list("abcd"))
    estimator = PackBoostClassifier(n_estimators=3, **SMALL).fit(frame, y > 0)
    expected = estimator.predict_proba(frame)
    calls = refit_on_first_call(
        monkeypatch, packboost.binning.BinMapper, "to_metadata",
        lambda: estimator.fit(X[:, :2], np.where(y > 0, "up", "down")))
    estimator.save_model(tmp_path / "model.pbm")
    assert calls and estimator.n_features_in_ == 2
    loaded = packboost.load_model(tmp_path / "model.pbm")
    assert list(loaded.classes_) == [False, True]
    assert list(loaded.feature_names_in_) == list("abcd")
    np.testing.assert_array_equal(loaded.predict_proba(frame), expected)


def test_fitted_attribute_assigned_by_hand_is_used():
    X, y = small_problem(7)
    estimator = PackBoostClassifier(n_estimators=2, **SMALL).fit(X, y > 0)
    labels = estimator.predict(X)
    estimator.classes_ = np.array(["no", "yes"])
    np.testing.assert_array_equal(estimator.predict(X), np.where(labels, "yes", "no"))
