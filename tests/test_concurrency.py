"""Several Python threads at once: predicting with one model, fitting two models.

The kernels release the GIL (and run their own OpenMP teams), so these
threads really overlap; a fitted model is read-only during ``predict`` and a
fit keeps all its state in locals until it ends, so results must equal the
serial ones exactly.
"""

from __future__ import annotations

import threading
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
