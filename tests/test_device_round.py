"""The round on the device (packboost/_device_round.py, cuda/round.cu).

The device computes a round's gradients, their fixed-point grid and the
trees' root slots; these must be the host's numbers exactly, or the trees
would not be the CPU backend's. Each property is checked twice: on the
naive oracle (tests/oracles/host_kernels.py) everywhere, and on the real
kernels where ``packboost._cuda`` runs (a GPU, or the host-thread stand-in
of ci/cuda_on_cpu.sh: ``ci/cuda_on_cpu.sh -k device_round``), on awkward
sizes: one row, one era, eras without rows, weights, Huber's clip, a fit
rescaled by a power of two, gradients all zero, and row subsamples that keep
nothing.
"""

from __future__ import annotations

import contextlib

import numpy as np
import pytest

import packboost
from packboost import _device, _partition, backends
from packboost._device_round import DEVICE_GRADIENTS, device_objective, kept_before
from packboost._fixed_point import GradientScaling, squared_gradient_scale, to_fixed_point
from packboost._samples import TreeSamples
from packboost.backends.cpu import CpuBackend
from packboost.backends.cuda import CudaBackend
from packboost.grower import TrainingData, grow_device_pack, grow_pack
from packboost.objectives import Huber, Quantile, SquaredError

from conftest import DEFAULT_SPLIT_PARAMS
from oracles.host_kernels import HostKernels, naive_scale, quantize

CUDA = _device.cuda_available()
KERNELS = ["oracle", pytest.param("device", marks=[
    pytest.mark.cuda, pytest.mark.skipif(not CUDA, reason="needs a usable CUDA GPU")])]


def make_kernels(kind, data, pack_size):
    if kind == "oracle":
        return HostKernels(data, pack_size)
    from packboost._cuda import CudaContext

    return CudaContext(data.X_binned, data.n_bins, data.row_era, data.n_eras, pack_size)


def round_problem(seed, n_rows, n_eras, *, weighted=False, empty_era=False, y_scale=1.0):
    """Binned data with era-sorted rows (era 1 left empty with ``empty_era``),
    targets, weights or None, and raw scores."""
    rng = np.random.default_rng(seed)
    eras = np.sort(rng.integers(0, n_eras, n_rows)).astype(np.int32)
    if empty_era and n_eras > 2:
        eras[eras == 1] = 2
    X = rng.integers(0, 4, (3, n_rows)).astype(np.uint8)
    data = TrainingData(X_binned=X, n_bins=np.full(3, 4, dtype=np.int32), row_era=eras,
                        n_eras=n_eras, cuts=[np.arange(3.0)] * 3)
    y = rng.normal(size=n_rows) * y_scale
    weight = rng.uniform(0.25, 3.0, n_rows) if weighted else None
    raw = rng.normal(size=n_rows) * 0.3 * y_scale
    return data, y, weight, raw


ROUND_CASES = [
    # seed, n_rows, n_eras, options
    (0, 1, 1, dict()),
    (1, 1, 1, dict(weighted=True, objective=Huber(0.1))),
    (2, 37, 5, dict(empty_era=True)),
    (3, 37, 5, dict(empty_era=True, weighted=True)),
    (4, 700, 3, dict(objective=Huber(0.4), weighted=True)),
    (5, 300, 7, dict(y_scale=2.0**90)),                   # rescaled: g * 2**-k on the device
    (6, 300, 7, dict(y_scale=2.0**-80, weighted=True)),
    (7, 64, 2, dict(zero=True)),                          # every gradient 0: scale 1
    (8, 513, 4, dict(objective=Huber(1e-300))),           # a clip below any |F - y|
]
CASE_IDS = [f"case{case[0]}" for case in ROUND_CASES]


def host_round(objective, y, weight, raw, scaling, era_offsets):
    """The round as the host computes it for the CPU backend (booster.train,
    to_fixed_point, squared_gradient_scale): its integers and scales."""
    gradients, hessians = np.empty_like(y), np.empty_like(y)
    objective.gradients(y, raw, weight, gradients, hessians)
    scaling.apply(gradients, hessians)
    fixed = to_fixed_point(gradients, hessians, era_offsets)
    scale_g2 = squared_gradient_scale(fixed.gradients)
    return ((quantize(fixed.gradients, fixed.gradient_scale),
             quantize(fixed.hessians, fixed.hessian_scale),
             quantize(fixed.gradients * fixed.gradients, scale_g2)),
            (fixed.gradient_scale, fixed.hessian_scale, scale_g2))


def start_round(kind, case, pack_size=1, samples=None):
    seed, n_rows, n_eras, options = case
    options = dict(options)
    objective = options.pop("objective", SquaredError)
    zero = options.pop("zero", False)
    data, y, weight, raw = round_problem(seed, n_rows, n_eras, **options)
    if zero:
        raw = y.copy()
    base_g, base_h = np.empty_like(y), np.empty_like(y)
    objective.gradients(y, np.full_like(y, y.mean()), weight, base_g, base_h)
    scaling = GradientScaling.for_gradients(base_g, base_h)
    backend = CudaBackend(make_kernels(kind, data, pack_size), data=data)
    assert backend.start_device_rounds(objective, y, weight, raw, scaling, data)
    if samples is None:
        samples = TreeSamples(np.ones((pack_size, n_eras), dtype=np.uint8), [None] * pack_size,
                              data.era_offsets)
    backend.begin_pack(DEVICE_GRADIENTS, samples)
    backend.slot_sums(pack_size)
    return backend, data, (objective, y, weight, raw, scaling)


@pytest.mark.parametrize("kind", KERNELS)
@pytest.mark.parametrize("case", ROUND_CASES, ids=CASE_IDS)
def test_device_round_gives_the_hosts_integers_and_scales(kind, case):
    backend, data, (objective, y, weight, raw, scaling) = start_round(kind, case)
    if case[3].get("y_scale", 1.0) != 1.0:
        assert not scaling.is_identity  # the case exercises the rescaling
    expected, scales = host_round(objective, y, weight, raw, scaling, data.era_offsets)
    for got, want in zip(backend.kernels.read_fixed_gradients(), expected, strict=True):
        np.testing.assert_array_equal(got, want)
    assert backend.kernels.round_scales() == scales
    assert backend.inverse_scales == tuple(1.0 / scale for scale in scales)


@pytest.mark.parametrize("kind", KERNELS)
def test_device_round_follows_the_predictions_round_after_round(kind):
    """Round 2's gradients are those of the scores after round 1's pack,
    updated in place on the device (no copy of the rows' scores)."""
    case = (11, 400, 6, dict(weighted=True))
    backend, data, (objective, y, weight, raw, scaling) = start_round(kind, case, pack_size=2)
    values = np.linspace(-0.5, 0.5, 7)
    leaf = np.random.default_rng(0).integers(0, 3, (data.n_rows, 2)).astype(np.int32)
    # Route every row to a leaf of its tree: the roots do not split.
    backend.route_rows(np.full(2, -1, np.int32), np.zeros(2, np.int32), np.zeros(2, np.uint8),
                       np.full(2, -1, np.int32), np.array([0, 0], np.int32))
    pack = type("Pack", (), {})()
    pack.nodes = {"value": values}
    pack.tree_offsets = np.array([0, 3, 7])
    backend.add_pack(pack, np.zeros(0))
    expected_raw = raw + values[0] + values[3]  # each tree's root is its leaf, in tree order
    stride = 7
    np.testing.assert_array_equal(backend.read_predictions(stride), expected_raw[::stride])
    np.testing.assert_array_equal(backend.read_predictions(), expected_raw)
    del leaf
    samples = TreeSamples(np.ones((2, data.n_eras), dtype=np.uint8), [None, None],
                          data.era_offsets)
    backend.begin_pack(DEVICE_GRADIENTS, samples)
    backend.slot_sums(2)
    expected, scales = host_round(objective, y, weight, expected_raw, scaling, data.era_offsets)
    for got, want in zip(backend.kernels.read_fixed_gradients(), expected, strict=True):
        np.testing.assert_array_equal(got, want)
    assert backend.kernels.round_scales() == scales


@pytest.mark.parametrize("kind", KERNELS)
def test_device_round_refuses_gradients_the_grid_cannot_hold(kind):
    case = (12, 50, 3, dict())
    seed, n_rows, n_eras, _ = case
    data, y, weight, raw = round_problem(seed, n_rows, n_eras)
    raw[17] = np.inf
    backend = CudaBackend(make_kernels(kind, data, 1), data=data)
    assert backend.start_device_rounds(SquaredError, y, weight, raw, GradientScaling(), data)
    samples = TreeSamples(np.ones((1, n_eras), dtype=np.uint8), [None], data.era_offsets)
    with pytest.raises(FloatingPointError, match="not finite"):
        backend.begin_pack(DEVICE_GRADIENTS, samples)
        backend.slot_sums(1)


def sample_flags(seed, data, pack_size):
    """Era flags with a tree keeping no era and one keeping every era, and
    row flags that keep nothing, some rows, or are absent."""
    rng = np.random.default_rng(seed)
    era_keep = (rng.random((pack_size, data.n_eras)) < 0.6).astype(np.uint8)
    era_keep[0] = 0
    era_keep[-1] = 1
    row_keep = []
    for tree in range(pack_size):
        n_kept = int(np.diff(data.era_offsets)[era_keep[tree] != 0].sum())
        choice = tree % 3
        row_keep.append(None if choice == 0 else np.zeros(n_kept, dtype=bool) if choice == 1
                        else rng.random(n_kept) < 0.5)
    return TreeSamples(era_keep, row_keep, data.era_offsets)


@pytest.mark.parametrize("kind", KERNELS)
@pytest.mark.parametrize("n_rows, n_eras, pack_size", [(1, 1, 1), (1, 3, 4), (45, 6, 5),
                                                        (300, 1, 3), (333, 9, 7)])
def test_samples_from_flags_are_the_cpus_rows(kind, n_rows, n_eras, pack_size):
    """pbc_start_samples: the root slots the CPU's start_pack_eras writes."""
    data, _, _, _ = round_problem(n_rows + n_eras, n_rows, n_eras, empty_era=True)
    samples = sample_flags(n_rows, data, pack_size)
    kernels = make_kernels(kind, data, pack_size)
    kernels.start_samples(samples.era_keep, kept_before(samples.era_keep, data.era_offsets),
                          samples.row_keep)
    expected = np.empty((n_rows, pack_size), dtype=np.int32)
    _partition.start_pack_eras(expected, samples.era_keep, data.era_offsets, 1,
                               samples.row_keep)
    np.testing.assert_array_equal(kernels.read_node_of_row(), expected)
    # ... which are the rows the tree lists say.
    for tree in range(pack_size):
        np.testing.assert_array_equal(np.flatnonzero(expected[:, tree] >= 0), samples[tree])


def test_naive_scale_is_the_grid_rule():
    assert naive_scale(51, 0.0) == 1.0
    assert naive_scale(51, 2.0**10) == 2.0**41
    assert naive_scale(51, np.nextafter(2.0**10, np.inf)) == 2.0**40
    assert naive_scale(3, 3.0) == 2.0
    with pytest.raises(FloatingPointError):
        naive_scale(51, np.nan)


def test_device_objectives_and_their_fallbacks():
    assert device_objective(SquaredError) == ("squared_error", 0.0)
    assert device_objective(Huber(0.5)) == ("huber", 0.5)
    assert device_objective(Quantile(0.3)) is None
    # The CPU backend has no device: the driver computes the gradients.
    assert not getattr(CpuBackend, "computes_round_gradients", False)


def grower_settings(max_depth=3):
    from packboost.grower import GrowerParams

    return GrowerParams(max_depth=max_depth, reg_lambda=1.0, reg_alpha=0.0,
                        min_samples_leaf=2, min_child_weight=0.0, min_split_gain=0.0,
                        max_delta_step=0.0, shrinkage=0.1, split=dict(DEFAULT_SPLIT_PARAMS))


@pytest.mark.parametrize("kind", KERNELS)
def test_device_pack_is_the_cpu_pack(kind):
    """grow_device_pack on the device's gradients grows the CPU backend's
    pack from the host's gradients, node for node."""
    case = (13, 600, 8, dict(weighted=True, empty_era=True))
    pack_size = 3
    seed, n_rows, n_eras, options = case
    data, y, weight, raw = round_problem(seed, n_rows, n_eras, **options)
    samples = sample_flags(5, data, pack_size)
    rng = np.random.default_rng(1)
    layers = [np.sort(rng.choice(3, 2, replace=False)).astype(np.int32) for _ in range(3)]
    masks = [None] * 3
    params = grower_settings()
    gradients, hessians = np.empty_like(y), np.empty_like(y)
    SquaredError.gradients(y, raw, weight, gradients, hessians)
    cpu = grow_pack(CpuBackend(data, pack_size, 1), data, gradients, hessians, samples, layers,
                    masks, params, 1)
    backend = CudaBackend(make_kernels(kind, data, pack_size), data=data)
    assert backend.start_device_rounds(SquaredError, y, weight, raw, GradientScaling(), data)
    device = grow_device_pack(backend, data, samples, layers, masks, params)
    for key in ("feature", "threshold_bin", "missing_left", "left_child", "n_samples"):
        np.testing.assert_array_equal(device.nodes[key], cpu.nodes[key], err_msg=key)
    np.testing.assert_allclose(device.nodes["value"], cpu.nodes["value"], rtol=1e-12,
                               atol=1e-15)


@contextlib.contextmanager
def counting_device_rounds(monkeypatch, kind):
    """Fits through the CUDA backend over ``kind`` kernels, counting the
    rounds started on the device."""
    calls = []
    if kind == "oracle":
        original = HostKernels.device_gradients

        def counted(self):
            calls.append(1)
            original(self)

        monkeypatch.setattr(HostKernels, "device_gradients", counted)
        monkeypatch.setattr(backends, "open_backend",
                            lambda device, data, pack_size, n_threads: contextlib.closing(
                                CudaBackend(HostKernels(data, pack_size), data=data,
                                            n_threads=n_threads)))
    else:
        original = CudaBackend.begin_pack

        def counted(self, fixed, tree_samples):
            calls.append(fixed is DEVICE_GRADIENTS)
            original(self, fixed, tree_samples)

        monkeypatch.setattr(CudaBackend, "begin_pack", counted)
    yield calls


FIT_CASES = [
    (0, dict(), False),
    (1, dict(era_subsample=0.6, row_subsample=0.7), True),
    (2, dict(objective="huber", alpha=0.4), True),
    (3, dict(learning_rate=0.5, era_subsample=0.5), False),
]


@pytest.mark.parametrize("kind", KERNELS)
@pytest.mark.parametrize("seed, extra, weighted", FIT_CASES)
def test_fit_with_the_round_on_the_device_is_the_cpu_fit(monkeypatch, kind, seed, extra,
                                                         weighted):
    rng = np.random.default_rng(seed)
    n_rows = 360
    X = rng.normal(size=(n_rows, 4))
    era = rng.integers(0, 6, n_rows)
    y = X[:, 0] * np.where(era % 2, 1.0, -1.0) + 0.5 * rng.normal(size=n_rows)
    weight = rng.uniform(0.5, 2.0, n_rows) if weighted else None
    params = dict(n_estimators=4, pack_size=2, max_depth=3, min_samples_leaf=5,
                  random_state=seed, n_jobs=1, **extra)
    cpu = packboost.PackBoostRegressor(**params).fit(X, y, era=era, sample_weight=weight,
                                                     eval_set=[(X[:50], y[:50])])
    with counting_device_rounds(monkeypatch, kind) as calls:
        device = packboost.PackBoostRegressor(
            **params, **({} if kind == "oracle" else {"device": "cuda"})).fit(
            X, y, era=era, sample_weight=weight, eval_set=[(X[:50], y[:50])])
    assert calls and all(calls), "the rounds did not start on the device"
    for key in ("feature", "threshold_bin", "missing_left", "left_child", "right_child"):
        np.testing.assert_array_equal(device.ensemble_.nodes[key], cpu.ensemble_.nodes[key])
    np.testing.assert_allclose(device.predict(X), cpu.predict(X), rtol=1e-12, atol=1e-12)
    assert device.evals_result_ == cpu.evals_result_
