"""Shared fixtures: small random era-structured problems in binned form."""

from __future__ import annotations

import signal

import numpy as np
import pytest

from packboost.grower import TrainingData

DEFAULT_SPLIT_PARAMS = dict(
    reg_lambda=1.0, reg_alpha=0.0, era_gain="realized", era_weighting="equal", era_alpha=0.0,
    lambda_dro=0.25, lambda_dir=0.5, dir_tanh_scale=1.0, min_samples_leaf=1,
    min_child_weight=0.0, era_std="total",
)


def make_binned_problem(seed, n_rows, n_features, n_eras, *, n_bins=5, missing_rate=0.1,
                        weighted=True, duplicate_feature=False, one_sided_eras=False):
    """Random binned data with era-sorted rows.

    Eras are drawn at random, so small problems have absent eras; the
    target depends on feature 0 with an era-dependent sign, so DES matters.
    ``one_sided_eras`` makes feature 1 constant inside every other era, so
    those eras have rows on one side of any split of it only.
    """
    rng = np.random.default_rng(seed)
    n_bins_per_feature = rng.integers(max(1, n_bins - 2), n_bins + 1, size=n_features)
    X = np.stack([rng.integers(0, k, size=n_rows) for k in n_bins_per_feature])
    X = X.astype(np.uint8)
    missing = rng.random(X.shape) < missing_rate
    X[missing] = np.broadcast_to(n_bins_per_feature[:, None], X.shape)[missing]
    row_era = np.sort(rng.integers(0, n_eras, size=n_rows)).astype(np.int32)
    if duplicate_feature and n_features > 2:
        X[2] = X[0]
        n_bins_per_feature[2] = n_bins_per_feature[0]
    if one_sided_eras and n_features > 1:
        constant_era = row_era % 2 == 0
        X[1, constant_era] = 0
    sign = np.where(rng.random(n_eras) < 0.8, 1.0, -1.0)
    signal = np.where(X[0] < n_bins_per_feature[0], X[0], 0).astype(float)
    y = 0.5 * sign[row_era] * signal + rng.normal(size=n_rows)
    gradients = -y
    hessians = rng.uniform(0.2, 2.0, size=n_rows) if weighted else np.ones(n_rows)
    if weighted:
        gradients = gradients * hessians
    cuts = [np.arange(k - 1, dtype=np.float64) for k in n_bins_per_feature]
    data = TrainingData(X_binned=np.ascontiguousarray(X),
                        n_bins=n_bins_per_feature.astype(np.int32), row_era=row_era,
                        n_eras=n_eras, cuts=cuts)
    return data, np.ascontiguousarray(gradients), np.ascontiguousarray(hessians)


@pytest.fixture
def split_params():
    return dict(DEFAULT_SPLIT_PARAMS)


# A Dask test that waits longer than this fails instead of hanging the suite
# (a lost result once made a fit wait forever; CI must end either way).
DASK_HANG_SECONDS = 180


@pytest.fixture
def fail_instead_of_hanging():
    """The Dask test modules' guard (``pytestmark = pytest.mark.usefixtures(...)``):
    a TimeoutError after DASK_HANG_SECONDS instead of a suite that never ends."""
    def expire(signum, frame):
        raise TimeoutError(f"no result within {DASK_HANG_SECONDS} s: the Dask fit hangs")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(DASK_HANG_SECONDS)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


@pytest.fixture(scope="module")
def client():
    """A LocalCluster of 2 worker processes for the Dask tests of one module
    (tests/test_dask.py, tests/test_dask_inputs.py); closed with the module,
    so that no cluster thread runs beside the other tests."""
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        yield client


@pytest.fixture(params=["as placed", "eras interleaved"])
def era_placement(request, monkeypatch):
    """Each Dask fit of the test twice: with the eras placed as the input
    lies (contiguous ranges for shuffled input), and with every shard's eras
    interleaved with the others' (even eras on the second worker's shard,
    odd eras on the first's: as input partitioned by era places them), the
    ranks in another order than the workers'."""
    if request.param == "eras interleaved":
        import packboost.dask as packboost_dask

        def interleaved(era_rows, held):
            eras = np.arange(len(era_rows))
            if held.shape[0] < 2 or len(eras) < 2:
                return [eras], [0]
            return [eras[eras % 2 == 0], eras[eras % 2 == 1]], [1, 0]

        monkeypatch.setattr(packboost_dask, "place_eras", interleaved)
    return request.param


def assert_same_model(local, distributed_model):
    """Every node array and the base score of a Dask model are the local fit's."""
    a, b = local.ensemble_.nodes, distributed_model.ensemble_.nodes
    for name in a:
        np.testing.assert_array_equal(a[name], b[name], err_msg=name)
    np.testing.assert_array_equal(local.ensemble_.base_score,
                                  distributed_model.ensemble_.base_score)

