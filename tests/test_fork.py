"""Processes created by ``fork`` after the parent ran the kernels.

GNU libgomp's thread pool does not survive ``fork``: a parallel region of more
than one thread in the child waits forever for the parent's threads. This is
how joblib, ``multiprocessing`` pools and Dask's process workers use a model
fitted in the parent. Every child here runs under a timeout, so a hang fails
the test instead of blocking the run.
"""

from __future__ import annotations

import multiprocessing
import sys

import numpy as np
import pytest

from packboost import PackBoostClassifier, PackBoostRegressor, _openmp, _threads

TIMEOUT = 60

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="no fork on Windows")


def problem(seed=0, n_rows=2000, n_features=5):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n_rows, n_features))
    X[rng.random(X.shape) < 0.05] = np.nan
    y = np.nan_to_num(X[:, 0]) + rng.normal(size=n_rows)
    era = rng.integers(0, 10, size=n_rows)
    return X, y, era


def run_child(method, target, *args, timeout=TIMEOUT):
    """Run ``target(queue, *args)`` in a child process; return what it put."""
    context = multiprocessing.get_context(method)
    queue = context.Queue()
    process = context.Process(target=target, args=(queue, *args))
    process.start()
    try:
        result = queue.get(timeout=timeout)
    except Exception:  # queue.Empty: the child hung or died
        result = None
    process.join(timeout=timeout)
    alive = process.is_alive()
    if alive:
        process.kill()
        process.join(timeout=10)
    assert not alive, f"the {method} child hung"
    assert process.exitcode == 0, f"the {method} child exited with {process.exitcode}"
    assert result is not None
    if isinstance(result, BaseException):
        raise result
    return result


def _predict(queue, model, X):
    try:
        queue.put((model.predict(X), _threads.forked_child(), _threads.resolve_n_threads(None)))
    except BaseException as error:  # reported, not lost
        queue.put(error)


def _fit_and_predict(queue, params, X, y, era):
    try:
        model = PackBoostRegressor(**params).fit(X, y, era=era)
        queue.put(model.predict(X))
    except BaseException as error:
        queue.put(error)


def _predict_with_explicit_threads(queue, model, X):
    """Kernels given several threads by a route other than n_jobs run serially."""
    try:
        queue.put((model.ensemble_.predict_raw(X, 4), model.bin_mapper_.transform(X, n_threads=4),
                   _openmp.omp_max_active_levels()))
    except BaseException as error:
        queue.put(error)


@pytest.fixture(scope="module")
def fitted():
    X, y, era = problem()
    # Several threads in the parent: libgomp's pool now exists here.
    model = PackBoostRegressor(n_estimators=8, max_depth=4, random_state=0, n_jobs=2)
    return model.fit(X, y, era=era), X, y, era


def test_parent_is_not_a_forked_child():
    assert not _threads.forked_child()
    assert _threads.resolve_n_threads(None) == _threads.available_cpus()


@pytest.mark.parametrize("n_jobs", [None, 2, -1])
def test_forked_child_predicts(fitted, n_jobs):
    model, X, _, _ = fitted
    model = PackBoostRegressor(**{**model.get_params(), "n_jobs": n_jobs}).fit(*fitted[1:3],
                                                                               era=fitted[3])
    got, forked, n_threads = run_child("fork", _predict, model, X)
    np.testing.assert_array_equal(got, model.predict(X))
    assert forked and n_threads == 1


def test_forked_child_classifier_predicts(fitted):
    _, X, y, era = fitted
    model = PackBoostClassifier(n_estimators=5, random_state=0, n_jobs=2).fit(
        X, np.where(y > 0, "up", "down"), era=era)
    got, _, _ = run_child("fork", _predict, model, X)
    np.testing.assert_array_equal(got, model.predict(X))


def test_forked_child_fits_the_same_model(fitted):
    model, X, y, era = fitted
    params = {**model.get_params(), "n_jobs": None}
    got = run_child("fork", _fit_and_predict, params, X, y, era)
    np.testing.assert_array_equal(got, model.predict(X))


def test_forked_child_runs_explicit_thread_counts_serially(fitted):
    model, X, _, _ = fitted
    raw, binned, levels = run_child("fork", _predict_with_explicit_threads, model, X)
    np.testing.assert_array_equal(raw, model.predict(X))
    np.testing.assert_array_equal(binned, model.bin_mapper_.transform(X))
    if _openmp.openmp_enabled():
        assert levels == 0
        assert _openmp.omp_max_active_levels() >= 1  # the parent is untouched


def test_grandchild_of_a_fork_predicts(fitted):
    model, X, _, _ = fitted

    def child(queue):
        try:
            # Shorter: this child must end (and end its own child) first.
            queue.put(run_child("fork", _predict, model, X, timeout=TIMEOUT / 4))
        except BaseException as error:
            queue.put(error)

    got, forked, _ = run_child("fork", child)
    np.testing.assert_array_equal(got, model.predict(X))
    assert forked


@pytest.mark.slow
def test_spawned_child_uses_every_cpu(fitted):
    """For contrast: a spawned child is a fresh process, threads and all."""
    model, X, _, _ = fitted
    got, forked, n_threads = run_child("spawn", _predict, model, X)
    np.testing.assert_array_equal(got, model.predict(X))
    assert not forked and n_threads == _threads.available_cpus()
