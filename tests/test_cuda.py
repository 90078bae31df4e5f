"""CUDA backend: host-side pieces everywhere, CPU/GPU parity where a GPU is usable.

Without a GPU (or without nvcc at build time) the tests marked ``cuda`` skip;
what runs everywhere:

* the GPU's algorithm on the host -- fixed-point sums, the warp's scoring
  code run lane by lane (csrc/pbc_split.h via tests/oracles/_cuda_emulate.pyx,
  built at test time), the CUDA
  backend (packboost.backends.cuda) over the host kernels of
  tests/oracles/host_kernels.py, driven by the one driver -- against the CPU
  backend: same splits, same leaves, same predictions;
* the device parameter and the error a user gets without a GPU (CUDA's own
  message), and the build facts show_config reports.
"""

from __future__ import annotations

import contextlib

import numpy as np
import pytest

import packboost
from packboost import _device, _predict, _split, backends
from packboost._fixed_point import squared_gradient_scale, to_fixed_point
from packboost.backends.cpu import CpuBackend
from packboost.backends.cuda import CudaBackend
from packboost.grower import GrowerParams, grow_pack

from conftest import DEFAULT_SPLIT_PARAMS, make_binned_problem
from oracles import cuda_emulate
from oracles.host_kernels import HostKernels, quantize

CUDA = _device.cuda_available()

SPLIT_KEYS = ("feature", "threshold_bin", "missing_left", "left_child", "right_child")


def grower_params(max_depth=4, min_samples_leaf=1, **split):
    settings = dict(DEFAULT_SPLIT_PARAMS, min_samples_leaf=min_samples_leaf, **split)
    return GrowerParams(max_depth=max_depth, reg_lambda=settings["reg_lambda"],
                        reg_alpha=settings["reg_alpha"],
                        min_samples_leaf=min_samples_leaf,
                        min_child_weight=settings["min_child_weight"], min_split_gain=0.0,
                        max_delta_step=0.0, shrinkage=0.1, split=settings)


def grow(backend, data, gradients, hessians, samples, layers, masks, params):
    return grow_pack(backend, data, gradients, hessians, samples, layers, masks, params,
                     n_threads=1)


def grid_scale(values):
    """The power-of-two scale of the round's fixed-point grid for ``values``
    (docs/fixed-point.md), as the driver would choose it for one era."""
    values = np.ascontiguousarray(values, dtype=np.float64).ravel()
    return to_fixed_point(values, np.ones(len(values)),
                          np.array([0, len(values)])).gradient_scale


def pack_draws(data, pack_size, seed, max_depth, feature_fraction=0.7):
    """Per-tree row samples and per-depth features, as booster.draw_round makes them."""
    rng = np.random.default_rng(seed)
    samples = [np.flatnonzero(rng.random(data.n_rows) < 0.8).astype(np.int32)
               for _ in range(pack_size)]
    layers, masks = [], []
    for _ in range(max_depth):
        n_layer = max(1, round(feature_fraction * data.n_features))
        layers.append(np.sort(rng.choice(data.n_features, n_layer, replace=False))
                      .astype(np.int32))
        masks.append(rng.random((pack_size, n_layer)) < 0.8 if n_layer > 1 else None)
    return samples, layers, masks


def assert_same_splits(cpu_nodes, device_nodes):
    """Same split features, thresholds and missing sides, node for node.

    One exception, where the backends may legitimately part: an exact tie
    between two candidates that cut the node's rows the same way (in a node of
    a few rows, feature 2 <= 0 and feature 3 <= 1 may hold the same rows).
    docs/des.md §9 breaks it by the lower feature. Both backends sum the same
    fixed-point integers (docs/fixed-point.md), but the DES score built from
    them is float arithmetic in a different order on each (per-era terms, warp
    reductions), so the two tied scores can differ in the last bit and either
    backend may pick either. The
    first differing node must then be such a tie: same DES score to 1e-12,
    same child sizes; what grows below may differ, and so may predictions
    (the tied cuts agree on the node's sampled rows only).

    Returns True when the splits are identical, False when they parted at
    such a tie.
    """
    if len(cpu_nodes["feature"]) == len(device_nodes["feature"]):
        differ = np.zeros(len(cpu_nodes["feature"]), dtype=bool)
        for key in SPLIT_KEYS:
            differ |= cpu_nodes[key] != device_nodes[key]
        if not differ.any():
            return True
        first = int(np.argmax(differ))
    else:
        size = min(len(cpu_nodes["feature"]), len(device_nodes["feature"]))
        differ = np.zeros(size, dtype=bool)
        for key in SPLIT_KEYS:
            differ |= cpu_nodes[key][:size] != device_nodes[key][:size]
        assert differ.any(), "trees of different sizes with no differing split"
        first = int(np.argmax(differ))
    cpu_score, device_score = cpu_nodes["des_score"][first], device_nodes["des_score"][first]
    assert abs(cpu_score - device_score) <= 1e-12 * max(abs(cpu_score), abs(device_score)), (
        f"node {first}: the backends chose different splits that are not tied "
        f"(scores {cpu_score!r} and {device_score!r})")

    def child_sizes(nodes):
        return sorted(int(nodes["n_samples"][nodes[side][first]])
                      for side in ("left_child", "right_child"))

    assert child_sizes(cpu_nodes) == child_sizes(device_nodes), f"node {first}"
    return False


def pack_prediction(data, pack):
    """The pack on the training bins by a walk down every tree."""
    out = np.zeros(data.n_rows)
    nodes = pack.nodes
    _predict.predict_binned(data.X_binned, data.n_bins, nodes["feature"], nodes["threshold_bin"],
                            nodes["missing_left"], nodes["left_child"], nodes["right_child"],
                            nodes["value"], np.ascontiguousarray(pack.tree_offsets[:-1]), out, 1)
    return out


def assert_same_pack(cpu, device, data, rtol=1e-9):
    if not assert_same_splits(cpu.nodes, device.nodes):
        return  # parted at an exact tie
    np.testing.assert_allclose(pack_prediction(data, device), pack_prediction(data, cpu),
                               rtol=rtol, atol=1e-12)
    np.testing.assert_array_equal(cpu.tree_offsets, device.tree_offsets)
    np.testing.assert_array_equal(cpu.nodes["n_samples"], device.nodes["n_samples"])
    for key in ("value", "gain", "des_score", "sum_hessian"):
        np.testing.assert_allclose(device.nodes[key], cpu.nodes[key], rtol=rtol, atol=1e-12,
                                   err_msg=key)


# -- fixed point ------------------------------------------------------------------


# Up to the public boundary's bound on |y| and weights (_validation.MAX_MAGNITUDE).
@pytest.mark.parametrize("peak", [1e-200, 1e-6, 1.0, 3.7e5, 1e100])
def test_device_quantisation_of_the_rounded_gradients_is_exact(peak):
    """The one fixed-point grid (docs/fixed-point.md): the device's
    round(x * scale) of the driver's rounded values is exact, so its integer
    sums are the CPU's sums."""
    rng = np.random.default_rng(0)
    gradients = rng.uniform(-peak, peak, 1001)
    hessians = rng.uniform(0.5, 2.0, 1001)
    fixed = to_fixed_point(gradients, hessians, np.array([0, 400, 1001]))
    for values, scale in ((fixed.gradients, fixed.gradient_scale),
                          (fixed.hessians, fixed.hessian_scale)):
        units = quantize(values, scale)
        np.testing.assert_array_equal(units.astype(np.float64) / scale, values)
        assert np.abs(units).astype(float).sum() < 2.0**63
        assert units.sum() / scale == values.sum()
    scale_g2 = squared_gradient_scale(fixed.gradients)
    assert np.log2(scale_g2) == np.round(np.log2(scale_g2))  # a power of two
    squares = quantize(fixed.gradients * fixed.gradients, scale_g2)
    assert np.abs(squares).astype(float).sum() < 2.0**63
    if peak**2 > 1e-280:  # squares of smaller gradients underflow float64 itself
        assert np.abs(squares).max() > 2**40  # and precise


def test_squared_gradient_scale_edges():
    assert squared_gradient_scale(np.zeros(0)) == 1.0
    assert squared_gradient_scale(np.zeros(3)) == 1.0
    with pytest.raises(FloatingPointError):
        squared_gradient_scale(np.array([1.0, np.inf]))


# -- the warp's scoring, run on the host --------------------------------------------


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("era_gain", ["realized", "newton"])
@pytest.mark.parametrize("era_std", ["total", "between"])
def test_emulated_tile_scoring_matches_cpu_score_tile(seed, era_gain, era_std):
    """One tile: the GPU's fixed-point scoring picks the CPU's candidate."""
    rng = np.random.default_rng(seed)
    n_eras, n_bins = int(rng.integers(1, 70)), int(rng.integers(1, 9))
    counts = rng.integers(0, 6, size=(n_eras, n_bins + 1))
    counts[rng.random(n_eras) < 0.2] = 0  # absent eras
    gradients = rng.normal(size=counts.shape) * counts
    hessians = rng.uniform(0.5, 1.5, size=counts.shape) * counts
    params = dict(DEFAULT_SPLIT_PARAMS, era_gain=era_gain, era_std=era_std,
                  era_weighting=["equal", "count"][seed % 2], era_alpha=1.0,
                  dir_tanh_scale=[1.0, 0.0][seed % 2], reg_alpha=[0.0, 0.0, 2.0][seed % 3])
    variance = float(rng.uniform(0.1, 2.0))
    scale_g = grid_scale(gradients)
    scale_h = grid_scale(hessians)
    fixed = np.stack([quantize(gradients, scale_g), quantize(hessians, scale_h),
                      counts.astype(np.int64)], axis=-1)
    # The CPU scores the same (quantised) sums, so only rounding order differs.
    hist = np.zeros((n_eras, n_bins + 1), dtype=_split.HIST_DTYPE)
    hist["sum_gradients"] = fixed[..., 0] / scale_g
    hist["sum_hessians"] = fixed[..., 1] / scale_h
    hist["count"] = counts
    expected = _split.score_histogram(hist, n_bins, params, variance)
    got = cuda_emulate().score_tiles(np.ascontiguousarray(fixed[np.newaxis]),
                                     np.array([n_bins], dtype=np.int32),
                                     np.ones(1, dtype=np.uint8), params, scale_g, scale_h,
                                     gradient_variance=np.array([variance]))
    if expected is None:
        assert not got["found"][0]
        return
    assert got["found"][0]
    assert got["threshold"][0] == expected["threshold"]
    assert bool(got["missing_left"][0]) == expected["missing_left"]
    np.testing.assert_allclose(got["score"][0], expected["score"], rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(got["gain"][0], expected["gain"], rtol=1e-9, atol=1e-12)


def test_emulated_tile_scoring_skips_closed_tiles_and_checks_shapes():
    fixed = np.zeros((2, 3, 4, 3), dtype=np.int64)
    fixed[..., 2] = 1
    got = cuda_emulate().score_tiles(fixed, np.array([3, 3], dtype=np.int32),
                                     np.array([0, 0], dtype=np.uint8), DEFAULT_SPLIT_PARAMS,
                                     1.0, 1.0)
    assert not got["found"].any()
    with pytest.raises(ValueError, match="width"):
        cuda_emulate().score_tiles(fixed, np.array([4, 3], dtype=np.int32),
                                   np.ones(2, dtype=np.uint8), DEFAULT_SPLIT_PARAMS, 1.0, 1.0)
    with pytest.raises(ValueError, match="int64"):
        cuda_emulate().score_tiles(fixed.astype(np.float64), np.array([3, 3], dtype=np.int32),
                                   np.ones(2, dtype=np.uint8), DEFAULT_SPLIT_PARAMS, 1.0, 1.0)


# -- the GPU driver with host kernels vs the CPU engine -------------------------------

PACK_CASES = [
    # seed, n_rows, n_features, n_eras, n_bins, pack_size, extra
    (0, 300, 5, 7, 5, {}),
    (1, 257, 3, 1, 4, {"lambda_dro": 0.0, "lambda_dir": 0.0}),
    (2, 500, 6, 40, 9, {"era_gain": "newton"}),
    (3, 130, 4, 3, 2, {"era_weighting": "count", "era_alpha": 3.0, "dir_tanh_scale": 0.0}),
    (4, 400, 5, 11, 17, {"duplicate_feature": True}),
    (5, 350, 4, 8, 6, {"one_sided_eras": True, "min_samples_leaf": 7}),
    (6, 64, 2, 33, 3, {"min_child_weight": 2.0}),
    (7, 450, 5, 12, 5, {"era_std": "between"}),
    (8, 300, 4, 30, 8, {"era_std": "between", "lambda_dro": 1.0, "lambda_dir": 0.0}),
    (9, 300, 4, 9, 6, {"reg_alpha": 2.0, "era_std": "between"}),
    (10, 200, 3, 5, 4, {"reg_alpha": 0.7, "era_gain": "newton"}),
    # per-row hessians (the others are one value: the kernels count rows instead)
    (11, 300, 4, 9, 5, {"weighted": True, "lambda_dir": 0.3}),
]


@pytest.mark.parametrize("seed, n_rows, n_features, n_eras, n_bins, extra", PACK_CASES)
@pytest.mark.parametrize("pack_size", [1, 3])
def test_host_kernels_grow_the_cpu_pack(seed, n_rows, n_features, n_eras, n_bins, extra,
                                        pack_size):
    extra = dict(extra)
    problem = {key: extra.pop(key) for key in ("duplicate_feature", "one_sided_eras",
                                               "weighted") if key in extra}
    data, gradients, hessians = make_binned_problem(seed, n_rows, n_features, n_eras,
                                                    n_bins=n_bins, **problem)
    min_samples_leaf = extra.pop("min_samples_leaf", 1)
    params = grower_params(max_depth=4, min_samples_leaf=min_samples_leaf, **extra)
    samples, layers, masks = pack_draws(data, pack_size, seed, params.max_depth)
    cpu_backend = CpuBackend(data, pack_size, 1)
    host_backend = CudaBackend(HostKernels(data, pack_size))
    cpu = grow(cpu_backend, data, gradients, hessians, samples, layers, masks, params)
    device = grow(host_backend, data, gradients, hessians, samples, layers, masks, params)
    assert_same_pack(cpu, device, data)
    if assert_same_splits(cpu.nodes, device.nodes):
        # Both backends record every training row's leaf (sampled or not) and
        # update the scores by the same lookup, bit for bit.
        np.testing.assert_array_equal(host_backend.kernels.leaf_of_row,
                                      cpu_backend.training_leaves())
        start = np.linspace(-1.0, 1.0, data.n_rows)
        by_cpu, by_device = start.copy(), start.copy()
        cpu_backend.add_pack(cpu, by_cpu)
        host_backend.add_pack(device, by_device)
        np.testing.assert_array_equal(by_device, by_cpu)


@contextlib.contextmanager
def host_kernels_for_fit(monkeypatch):
    """Route estimator fits through the CUDA backend over host kernels."""
    monkeypatch.setattr(backends, "open_backend", lambda device, data, pack_size, n_threads:
                        contextlib.closing(CudaBackend(HostKernels(data, pack_size), data=data,
                                                       n_threads=n_threads)))
    yield


def random_problem(seed, n_rows, n_features, n_eras, nan_rate=0.1):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n_rows, n_features))
    X[rng.random(X.shape) < nan_rate] = np.nan
    era = rng.integers(0, n_eras, n_rows)
    y = (np.nan_to_num(X[:, 0]) * np.where(era % 3 == 0, -1.0, 1.0)
         + np.nan_to_num(X[:, 1]) ** 2 + rng.normal(size=n_rows))
    weight = rng.uniform(0.5, 2.0, n_rows)
    return X, y, era, weight


def _pseudo_huber(y_true, y_pred):
    """A custom objective: the pseudo-Huber loss sqrt(1 + r^2) - 1."""
    residual = y_pred - y_true
    scale = np.sqrt(1.0 + residual * residual)
    return residual / scale, 1.0 / scale**3


FIT_CASES = [
    (0, 400, 6, 9, dict(), True),
    (1, 333, 4, 1, dict(era_gain="newton", lambda_dir=0.5), False),
    (2, 500, 5, 25, dict(era_weighting="count", era_alpha=2.0, lambda_dro=1.0), True),
    (3, 300, 7, 5, dict(max_bins=12, lambda_dir=1.0, dir_tanh_scale=0.0,
                        layer_feature_fraction=0.5, row_subsample=0.7), True),
    (4, 280, 3, 4, dict(max_bins=300), False),  # uint16 bins
    (5, 360, 4, 10, dict(era_std="total", lambda_dro=0.5), True),
    # Gradients are computed on the host for both backends: every objective
    # reaches the GPU kernels as the same g, h.
    (6, 400, 5, 8, dict(objective="huber", alpha=0.5), True),
    (7, 400, 5, 8, dict(objective="quantile", alpha=0.3), False),
    (8, 400, 5, 8, dict(objective=_pseudo_huber), True),
    (9, 400, 5, 8, dict(reg_alpha=2.0, lambda_dir=0.5), True),
    (10, 360, 4, 6, dict(reg_alpha=0.5, era_gain="newton"), False),
]


@pytest.mark.parametrize("seed, n_rows, n_features, n_eras, extra, weighted", FIT_CASES)
def test_fit_through_the_gpu_driver_matches_cpu(monkeypatch, seed, n_rows, n_features,
                                                n_eras, extra, weighted):
    X, y, era, weight = random_problem(seed, n_rows, n_features, n_eras)
    weight = weight if weighted else None
    params = dict(n_estimators=4, pack_size=3, max_depth=4, min_samples_leaf=5,
                  random_state=seed, n_jobs=1, **extra)
    cpu = packboost.PackBoostRegressor(**params).fit(X, y, era=era, sample_weight=weight)
    with host_kernels_for_fit(monkeypatch):
        emulated = packboost.PackBoostRegressor(**params).fit(X, y, era=era,
                                                              sample_weight=weight)
    if assert_same_splits(cpu.ensemble_.nodes, emulated.ensemble_.nodes):
        np.testing.assert_allclose(emulated.predict(X), cpu.predict(X), rtol=1e-5, atol=1e-12)


def test_classifier_through_the_gpu_driver_matches_cpu(monkeypatch):
    X, y, era, _ = random_problem(7, 300, 4, 6)
    labels = (y > np.median(y)).astype(int)
    params = dict(n_estimators=3, pack_size=2, max_depth=3, random_state=1, n_jobs=1)
    cpu = packboost.PackBoostClassifier(**params).fit(X, labels, era=era)
    with host_kernels_for_fit(monkeypatch):
        emulated = packboost.PackBoostClassifier(**params).fit(X, labels, era=era)
    if assert_same_splits(cpu.ensemble_.nodes, emulated.ensemble_.nodes):
        np.testing.assert_allclose(emulated.predict_proba(X), cpu.predict_proba(X), rtol=1e-5)


# -- several outputs (targets, NaN targets, classes; docs/packs.md §10) -------------------

# Every sampling off: each target's trees are then those of a one-target fit
# on its known rows (docs/guide/many-targets.md).
OUTPUT_PARAMS = dict(n_estimators=2, pack_size=2, max_depth=3, min_samples_leaf=3,
                     random_state=3, n_jobs=1, era_subsample=1.0, row_subsample=1.0,
                     tree_feature_fraction=1.0, layer_feature_fraction=1.0)


def several_targets(seed, n_rows, n_features, n_eras, unknown):
    """Codes 0..4 in every column (so any row subset bins X alike) and three
    targets; with ``unknown``, target 1 is NaN in the first two eras (it
    starts later), target 2 in scattered rows and the whole last era."""
    rng = np.random.default_rng(seed)
    X = rng.integers(0, 5, size=(n_rows, n_features)).astype(np.float64)
    era = rng.integers(0, n_eras, n_rows)
    y = X[:, 0] * np.where(era % 2 == 0, 1.0, -0.5) + 0.3 * X[:, 1] + rng.normal(size=n_rows)
    Y = np.column_stack([y, -3.0 * y + rng.normal(0, 0.5, n_rows), (y - y.mean()) ** 2])
    if unknown:
        Y[era < 2, 1] = np.nan
        Y[rng.random(n_rows) < 0.2, 2] = np.nan
        Y[era == n_eras - 1, 2] = np.nan
    for target in range(Y.shape[1]):
        known = ~np.isnan(Y[:, target])
        assert all(len(np.unique(X[known, column])) == 5 for column in range(n_features))
    return X, Y, era


def assert_each_target_is_its_own_fit(fit, X, Y, era, weight):
    """``fit(X, y, era, weight)`` of several targets: every output's trees
    and predictions are bit for bit those of a one-target ``fit`` on the
    rows where that target is known."""
    joint = fit(X, Y, era, weight)
    prediction = joint.predict(X)
    for target in range(Y.shape[1]):
        known = ~np.isnan(Y[:, target])
        alone = fit(X[known], Y[known, target], era[known],
                    None if weight is None else weight[known])
        expected = alone.ensemble_.nodes
        got = joint.ensemble_.output_ensemble(target).nodes
        for name, values in expected.items():
            np.testing.assert_array_equal(got[name], values, err_msg=f"{target}: {name}")
        np.testing.assert_array_equal(prediction[:, target], alone.predict(X))
    return joint


# A callable objective of several targets takes and returns (n_rows, n_targets),
# NaN where a target is unknown (the driver clears them): its gradients are
# computed on the host for every device.
OUTPUT_CASES = [(False, {}), (True, {}), (True, {"objective": _pseudo_huber})]
OUTPUT_IDS = ["complete", "nan-targets", "nan-targets-callable"]


@pytest.mark.parametrize("unknown, extra", OUTPUT_CASES, ids=OUTPUT_IDS)
def test_several_targets_through_the_gpu_driver_match_cpu(monkeypatch, unknown, extra):
    X, Y, era = several_targets(11, 240, 3, 6, unknown)
    weight = np.random.default_rng(0).uniform(0.5, 2.0, len(X))
    params = dict(OUTPUT_PARAMS, **extra)
    cpu = packboost.PackBoostRegressor(**params).fit(X, Y, era=era, sample_weight=weight)

    def fit(X, y, era, weight):
        return packboost.PackBoostRegressor(**params).fit(X, y, era=era, sample_weight=weight)

    with host_kernels_for_fit(monkeypatch):
        emulated = assert_each_target_is_its_own_fit(fit, X, Y, era, weight)
    assert emulated.ensemble_.n_outputs == 3
    if assert_same_splits(cpu.ensemble_.nodes, emulated.ensemble_.nodes):
        np.testing.assert_array_equal(emulated.predict(X), cpu.predict(X))


# With sampling on, the round's draws are still shared by the targets and
# cut to each one's known rows: the same cut on both backends.
SAMPLED_OUTPUTS = dict(OUTPUT_PARAMS, n_estimators=3, era_subsample=0.6, row_subsample=0.7,
                       layer_feature_fraction=0.7, tree_feature_fraction=0.8)


def test_sampled_nan_targets_through_the_gpu_driver_match_cpu(monkeypatch):
    X, Y, era = several_targets(12, 240, 4, 6, unknown=True)
    cpu = packboost.PackBoostRegressor(**SAMPLED_OUTPUTS).fit(X, Y, era=era)
    with host_kernels_for_fit(monkeypatch):
        emulated = packboost.PackBoostRegressor(**SAMPLED_OUTPUTS).fit(X, Y, era=era)
    assert_same_model_as_cpu(cpu, emulated, X, "predict")


def test_multiclass_through_the_gpu_driver_matches_cpu(monkeypatch):
    X, y, era, _ = random_problem(4, 300, 4, 6)
    labels = np.digitize(y, np.quantile(y, [0.33, 0.66]))
    params = dict(n_estimators=3, pack_size=2, max_depth=3, random_state=1, n_jobs=1)
    cpu = packboost.PackBoostClassifier(**params).fit(X, labels, era=era)
    with host_kernels_for_fit(monkeypatch):
        emulated = packboost.PackBoostClassifier(**params).fit(X, labels, era=era)
    assert emulated.ensemble_.n_outputs == 3
    if assert_same_splits(cpu.ensemble_.nodes, emulated.ensemble_.nodes):
        np.testing.assert_array_equal(emulated.predict_proba(X), cpu.predict_proba(X))


def category_problem(seed, n_rows, n_eras):
    """A pandas table: a 9-category driver whose effect flips in some eras
    (with missing labels), a category column of few categories, two
    numeric columns with NaN."""
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(seed)
    era = rng.integers(0, n_eras, n_rows)
    sector = rng.integers(0, 9, n_rows)
    x = rng.normal(size=(n_rows, 2))
    flip = np.where(era % 4 == 1, -1.0, 1.0)
    y = (flip * np.where(np.isin(sector, [1, 4, 6]), 1.0, -0.5) + 0.3 * x[:, 0]
         + rng.normal(size=n_rows))
    x[rng.random(x.shape) < 0.05] = np.nan
    labels = np.array([f"s{k}" for k in range(9)], dtype=object)[sector]
    labels[rng.random(n_rows) < 0.05] = None
    X = pd.DataFrame({"x0": x[:, 0], "sector": pd.Categorical(labels),
                      "side": pd.Categorical(rng.choice(["a", "b", "c"], n_rows)),
                      "x1": x[:, 1]})
    return X, y, era


@pytest.mark.parametrize("n_eras, extra", [
    (6, {}),
    (1, {}),                                               # one era
    (8, dict(era_subsample=0.6, row_subsample=0.8)),       # eras a tree leaves empty
    (8, dict(cat_order="pooled", lambda_dir=0.3, era_gain="newton")),
    (6, dict(cat_search_steps=6, max_cat_to_onehot=2)),    # the search beyond prefixes
])
def test_categorical_fit_through_the_gpu_driver_matches_cpu(monkeypatch, n_eras, extra):
    # Category splits on device='cuda': the rows' slots read from the device,
    # cells and scores by the CPU code, set rows moved on the host and
    # written back: the CPU's trees.
    X, y, era = category_problem(3, 600, n_eras)
    params = dict(n_estimators=4, pack_size=3, max_depth=4, min_samples_leaf=5,
                  min_data_per_group=10, random_state=1, n_jobs=1, **extra)
    cpu = packboost.PackBoostRegressor(**params).fit(X, y, era=era)
    assert np.any(cpu.ensemble_.nodes["threshold_bin"] == -1)   # it split by sets
    with host_kernels_for_fit(monkeypatch):
        emulated = packboost.PackBoostRegressor(**params).fit(X, y, era=era)
    if assert_same_splits(cpu.ensemble_.nodes, emulated.ensemble_.nodes):
        np.testing.assert_array_equal(emulated.ensemble_.nodes["category_words"],
                                      cpu.ensemble_.nodes["category_words"])
        unseen = X.assign(sector=["never-seen"] * len(X))
        for rows in (X, unseen, X.iloc[:1]):
            np.testing.assert_allclose(emulated.predict(rows), cpu.predict(rows), rtol=1e-5,
                                       atol=1e-12)


def test_host_kernels_read_and_write_the_rows_slots():
    data, gradients, hessians = make_binned_problem(2, 50, 3, 4)
    kernels = HostKernels(data, 2)
    kernels.begin_round(gradients, hessians, [np.arange(0, 50, 2), np.arange(50)],
                        1.0, 1.0, 1.0)
    codes = kernels.read_node_of_row()
    assert codes.shape == (50, 2) and codes[1, 0] == -2 and codes[1, 1] == 1
    codes[:, 1] = 7
    assert kernels.node_of_row[0, 1] == 1      # a copy, not the state
    kernels.write_node_of_row(codes)
    np.testing.assert_array_equal(kernels.read_node_of_row(), codes)


@pytest.mark.cuda
@pytest.mark.skipif(not CUDA, reason="needs a usable CUDA GPU")
def test_gpu_reads_and_writes_the_rows_slots():
    from packboost._cuda import CudaContext

    data, gradients, hessians = make_binned_problem(2, 50, 3, 4)
    samples = [np.arange(0, 50, 2), np.arange(50)]
    host = HostKernels(data, 2)
    host.begin_round(gradients, hessians, samples, 1.0, 1.0, 1.0)
    context = CudaContext(data.X_binned, data.n_bins, data.row_era, data.n_eras, 2, 0, 1 << 20)
    try:
        context.begin_round(gradients, hessians, samples, 1.0, 1.0, 1.0)
        np.testing.assert_array_equal(context.read_node_of_row(), host.read_node_of_row())
        codes = np.ascontiguousarray(np.arange(100, dtype=np.int32).reshape(50, 2) % 5)
        context.write_node_of_row(codes)
        np.testing.assert_array_equal(context.read_node_of_row(), codes)
        with pytest.raises(ValueError, match="node_of_row must be"):
            context.write_node_of_row(codes[:10])
    finally:
        context.close()


@pytest.mark.skipif(CUDA, reason="checks the error without a GPU")
def test_without_a_gpu_the_device_is_refused_not_the_categories():
    X, y, era = category_problem(1, 200, 4)
    with pytest.raises(packboost.CudaError) as raised:
        packboost.PackBoostRegressor(n_estimators=1, device="cuda").fit(X, y, era=era)
    assert "categor" not in str(raised.value)


@pytest.mark.cuda
@pytest.mark.skipif(not CUDA, reason="needs a usable CUDA GPU")
def test_gpu_categorical_fit_matches_cpu():
    X, y, era = category_problem(3, 400, 6)
    # few bins on the numeric features: the host-thread stand-in stays quick
    X = X.assign(x0=np.clip(np.round(X["x0"]), -2, 2), x1=np.clip(np.round(X["x1"]), -2, 2))
    params = dict(n_estimators=3, pack_size=2, max_depth=3, min_samples_leaf=5,
                  min_data_per_group=10, random_state=0, n_jobs=1)
    cpu = packboost.PackBoostRegressor(**params).fit(X, y, era=era)
    gpu = packboost.PackBoostRegressor(device="cuda", **params).fit(X, y, era=era)
    assert np.any(cpu.ensemble_.nodes["threshold_bin"] == -1)
    if assert_same_splits(cpu.ensemble_.nodes, gpu.ensemble_.nodes):
        np.testing.assert_array_equal(gpu.ensemble_.nodes["category_words"],
                                      cpu.ensemble_.nodes["category_words"])
        np.testing.assert_allclose(gpu.predict(X), cpu.predict(X), rtol=1e-5, atol=1e-12)


# -- device parameter, availability, errors without a GPU --------------------------------


def test_cuda_available_is_a_bool_and_build_info_says_why():
    assert isinstance(packboost.cuda_available(), bool)
    info = _device.cuda_build_info()
    assert set(info) >= {"built", "available", "arch", "runtime_version", "driver_version",
                         "devices", "error"}
    assert info["available"] == packboost.cuda_available()
    assert info["built"] == _device.cuda_built()
    if not info["available"]:
        assert info["error"]
    if info["built"] and info["driver_version"] == 0:  # a machine without NVIDIA's driver
        assert info["error"] == "no GPU: no NVIDIA driver is installed"


@pytest.mark.skipif(CUDA, reason="checks the error raised without a usable GPU")
def test_fit_on_cuda_without_gpu_raises_cuda_error_with_cudas_message():
    X, y, era, _ = random_problem(0, 120, 3, 4)
    model = packboost.PackBoostRegressor(device="cuda", n_estimators=2)
    with pytest.raises(packboost.CudaError) as raised:
        model.fit(X, y, era=era)
    message = str(raised.value)
    assert "device='cuda'" in message or "CUDA backend" in message
    if _device.cuda_built():
        from packboost import _cuda

        # CUDA's own text for its code, e.g. 35 "CUDA driver version is
        # insufficient for CUDA runtime version" or 100 "no CUDA-capable device".
        assert raised.value.code is not None and raised.value.code > 0
        assert _cuda.error_string(raised.value.code) in message
    assert not hasattr(model, "ensemble_")  # all or nothing


@pytest.mark.skipif(CUDA, reason="checks the error raised without a usable GPU")
def test_predict_on_cuda_without_gpu_raises_cuda_error():
    X, y, era, _ = random_problem(1, 120, 3, 4)
    model = packboost.PackBoostRegressor(n_estimators=2, random_state=0).fit(X, y, era=era)
    expected = model.predict(X)
    model.set_params(device="cuda")
    with pytest.raises(packboost.CudaError, match="CUDA"):
        model.predict(X)
    model.set_params(device="cpu")
    np.testing.assert_array_equal(model.predict(X), expected)


def test_device_must_be_cpu_or_cuda():
    X, y, _, _ = random_problem(2, 50, 2, 2)
    with pytest.raises(ValueError, match="device"):
        packboost.PackBoostRegressor(device="gpu").fit(X, y)
    assert isinstance(packboost.CudaError("x"), RuntimeError)


@pytest.mark.skipif(not _device.cuda_built(), reason="CUDA backend not built")
def test_c_api_error_strings_and_build_facts():
    from packboost import _cuda

    assert _cuda.api_version() == 6
    assert "sm_" in _cuda.build_arch() or "compute_" in _cuda.build_arch()
    assert "invalid argument" in _cuda.error_string(-1)
    assert _cuda.error_string(2) == "out of memory"
    assert _cuda.runtime_version() >= 12000
    assert _cuda.MAX_PACK_SIZE == 64


@pytest.mark.skipif(CUDA or not _device.cuda_built(), reason="needs the backend, no GPU")
def test_context_creation_without_gpu_raises():
    from packboost import _cuda

    data, _, _ = make_binned_problem(0, 50, 2, 3)
    with pytest.raises(packboost.CudaError, match="CUDA error"):
        _cuda.CudaContext(data.X_binned, data.n_bins, data.row_era, data.n_eras, 2)
    with pytest.raises(ValueError, match="uint8 or uint16"):
        _cuda.CudaContext(data.X_binned.astype(np.float32), data.n_bins, data.row_era,
                          data.n_eras, 2)
    with pytest.raises(ValueError, match="match"):
        _cuda.CudaContext(data.X_binned, data.n_bins[:1], data.row_era, data.n_eras, 2)
    tree = dict(feature=np.array([-1], dtype=np.int32), threshold=np.zeros(1),
                missing_left=np.zeros(1, dtype=np.uint8),
                left_child=np.array([-1], dtype=np.int32),
                right_child=np.array([-1], dtype=np.int32), value=np.ones(1))
    out = np.zeros(4)
    with pytest.raises(packboost.CudaError, match="CUDA error"):
        _cuda.predict_raw(np.zeros((4, 2)), *tree.values(), np.zeros(1, dtype=np.int64), out)
    with pytest.raises(ValueError, match="2-D"):
        _cuda.predict_raw(np.zeros((4, 2), dtype=np.int64), *tree.values(),
                          np.zeros(1, dtype=np.int64), out)
    # Several outputs: trees grouped by output, out (n_rows, n_outputs).
    roots = np.zeros(2, dtype=np.int64)
    for starts in ([0, 1], [0, 2, 1, 2], [1, 2]):
        with pytest.raises(ValueError, match="output_tree_starts"):
            _cuda.predict_raw(np.zeros((4, 2)), *tree.values(), roots, np.zeros((4, 2)),
                              output_tree_starts=np.array(starts))
    with pytest.raises(ValueError, match=r"shape \(4, 2\)"):
        _cuda.predict_raw(np.zeros((4, 2)), *tree.values(), roots, out,
                          output_tree_starts=np.array([0, 1, 2]))


# -- on a GPU -------------------------------------------------------------------------------


@pytest.mark.cuda
@pytest.mark.skipif(not CUDA, reason="needs a usable CUDA GPU")
@pytest.mark.parametrize("seed, n_rows, n_features, n_eras, n_bins, extra", PACK_CASES)
@pytest.mark.parametrize("pack_size", [1, 4])
def test_gpu_grows_the_cpu_pack(seed, n_rows, n_features, n_eras, n_bins, extra, pack_size):
    from packboost._cuda import CudaContext

    extra = dict(extra)
    problem = {key: extra.pop(key) for key in ("duplicate_feature", "one_sided_eras",
                                               "weighted") if key in extra}
    data, gradients, hessians = make_binned_problem(seed, n_rows, n_features, n_eras,
                                                    n_bins=n_bins, **problem)
    min_samples_leaf = extra.pop("min_samples_leaf", 1)
    params = grower_params(max_depth=5, min_samples_leaf=min_samples_leaf, **extra)
    samples, layers, masks = pack_draws(data, pack_size, seed, params.max_depth)
    cpu = grow(CpuBackend(data, pack_size, 1), data, gradients, hessians, samples, layers,
               masks, params)
    host = grow(CudaBackend(HostKernels(data, pack_size)), data, gradients, hessians, samples,
                layers, masks, params)
    context = CudaContext(data.X_binned, data.n_bins, data.row_era, data.n_eras, pack_size)
    try:
        gpu = grow(CudaBackend(context), data, gradients, hessians, samples, layers, masks,
                   params)
    finally:
        context.close()
    assert_same_pack(cpu, gpu, data)
    # The host run of the warp algorithm is the GPU's arithmetic (tanh aside):
    # same trees, exact ties included, and the same scores.
    for key in SPLIT_KEYS:
        np.testing.assert_array_equal(gpu.nodes[key], host.nodes[key], err_msg=key)
    np.testing.assert_allclose(gpu.nodes["des_score"], host.nodes["des_score"], rtol=1e-13)
    np.testing.assert_array_equal(gpu.nodes["value"], host.nodes["value"])


# Sizes the small cases never reach (issue 14): Numerai's 600 eras with packs of
# 8 at depth 6 (hundreds of slots, many items a block), 255 bins (a tree's slots
# split over several items: 4 slots of 256 bins fill a block), and a histogram
# budget of 1 byte (one candidate feature per chunk).
SCALE_CASES = [
    # id, seed, n_rows, n_features, n_eras, n_bins, pack_size, max_depth, budget
    ("600-eras-pack-8-depth-6", 0, 60_000, 12, 600, 5, 8, 6, 1 << 30),
    ("255-bins", 1, 20_000, 6, 40, 255, 4, 6, 1 << 30),
    ("one-feature-per-chunk", 2, 10_000, 10, 30, 9, 8, 5, 1),
]


@pytest.mark.cuda
@pytest.mark.skipif(not CUDA, reason="needs a usable CUDA GPU")
@pytest.mark.parametrize("case", SCALE_CASES, ids=[case[0] for case in SCALE_CASES])
def test_gpu_grows_the_cpu_pack_at_scale(case):
    _, seed, n_rows, n_features, n_eras, n_bins, pack_size, max_depth, budget = case
    data, gradients, hessians = make_binned_problem(seed, n_rows, n_features, n_eras,
                                                    n_bins=n_bins)
    params = grower_params(max_depth=max_depth, min_samples_leaf=5, era_std="between",
                           lambda_dro=1.0)
    samples, layers, masks = pack_draws(data, pack_size, seed, max_depth)
    cpu = grow(CpuBackend(data, pack_size, 2), data, gradients, hessians, samples, layers,
               masks, params)
    gpu_backend = CudaBackend.on_gpu(data, pack_size, histogram_budget_bytes=budget)
    try:
        gpu = grow(gpu_backend, data, gradients, hessians, samples, layers, masks, params)
        start = np.linspace(-1.0, 1.0, data.n_rows)
        by_gpu = start.copy()
        gpu_backend.add_pack(gpu, by_gpu)
    finally:
        gpu_backend.close()
    assert (cpu.nodes["feature"] >= 0).sum() > 4 * pack_size  # real trees
    assert_same_pack(cpu, gpu, data)
    if assert_same_splits(cpu.nodes, gpu.nodes):
        by_cpu = start + pack_prediction(data, cpu)
        np.testing.assert_allclose(by_gpu, by_cpu, rtol=1e-12, atol=1e-12)


def deep_pack_problem():
    """Depth 10, pack 8: more than 1,536 slots at the deep depths, where the
    slot sums no longer fit shared memory (cuda/partition.cu) and a tree's
    slots need several histogram items -- what Numerai's deep recipe runs."""
    data, gradients, hessians = make_binned_problem(5, 30_000, 8, 16, n_bins=31)
    params = grower_params(max_depth=10, min_samples_leaf=3)
    samples, layers, masks = pack_draws(data, 8, 5, params.max_depth)
    return data, gradients, hessians, samples, layers, masks, params


def grow_counting_slots(backend, problem):
    """The pack, and the most slots one depth summed."""
    data, gradients, hessians, samples, layers, masks, params = problem
    seen = []
    slot_sums = backend.slot_sums
    backend.slot_sums = lambda n_slots: (seen.append(n_slots), slot_sums(n_slots))[1]
    return grow(backend, data, gradients, hessians, samples, layers, masks, params), max(seen)


def test_the_deep_pack_problem_reaches_a_wide_frontier():
    problem = deep_pack_problem()
    _, widest = grow_counting_slots(CpuBackend(problem[0], 8, 1), problem)
    assert widest > 1536


@pytest.mark.cuda
@pytest.mark.skipif(not CUDA, reason="needs a usable CUDA GPU")
def test_gpu_grows_the_deep_cpu_pack():
    problem = deep_pack_problem()
    data = problem[0]
    cpu, _ = grow_counting_slots(CpuBackend(data, 8, 2), problem)
    gpu_backend = CudaBackend.on_gpu(data, 8)
    try:
        gpu, widest = grow_counting_slots(gpu_backend, problem)
    finally:
        gpu_backend.close()
    assert widest > 1536
    assert_same_pack(cpu, gpu, data)
    assert_same_splits(cpu.nodes, gpu.nodes)


@pytest.mark.cuda
@pytest.mark.skipif(not CUDA, reason="needs a usable CUDA GPU")
@pytest.mark.parametrize("seed, n_rows, n_features, n_eras, extra, weighted", FIT_CASES)
def test_gpu_fit_matches_cpu(seed, n_rows, n_features, n_eras, extra, weighted):
    X, y, era, weight = random_problem(seed, n_rows, n_features, n_eras)
    weight = weight if weighted else None
    params = dict(n_estimators=5, pack_size=4, max_depth=5, min_samples_leaf=5,
                  random_state=seed, n_jobs=1, **extra)
    cpu = packboost.PackBoostRegressor(**params).fit(X, y, era=era, sample_weight=weight)
    gpu = packboost.PackBoostRegressor(device="cuda", **params).fit(X, y, era=era,
                                                                    sample_weight=weight)
    if assert_same_splits(cpu.ensemble_.nodes, gpu.ensemble_.nodes):
        np.testing.assert_allclose(gpu.predict(X), cpu.predict(X), rtol=1e-5, atol=1e-12)
    again = packboost.PackBoostRegressor(device="cuda", **params).fit(X, y, era=era,
                                                                      sample_weight=weight)
    np.testing.assert_array_equal(again.ensemble_.nodes["value"], gpu.ensemble_.nodes["value"])


@pytest.mark.cuda
@pytest.mark.skipif(not CUDA, reason="needs a usable CUDA GPU")
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int8, np.uint8, np.int32])
def test_gpu_predict_matches_cpu(dtype):
    rng = np.random.default_rng(0)
    X = rng.integers(0, 5, size=(700, 6)).astype(dtype)
    if np.issubdtype(dtype, np.floating):
        X[rng.random(X.shape) < 0.1] = np.nan
    y = rng.normal(size=700) + np.nan_to_num(X[:, 0].astype(float))
    model = packboost.PackBoostRegressor(n_estimators=4, random_state=0).fit(X, y)
    expected = model.predict(X)
    model.set_params(device="cuda")
    np.testing.assert_allclose(model.predict(X), expected, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(model.predict(np.asfortranarray(X)[:3]), expected[:3],
                               rtol=1e-12, atol=1e-12)


@pytest.mark.cuda
@pytest.mark.skipif(not CUDA, reason="needs a usable CUDA GPU")
def test_gpu_classifier_matches_cpu():
    X, y, era, _ = random_problem(7, 600, 5, 12)
    labels = (y > np.median(y)).astype(int)
    params = dict(n_estimators=4, pack_size=4, max_depth=4, random_state=1)
    cpu = packboost.PackBoostClassifier(**params).fit(X, labels, era=era)
    gpu = packboost.PackBoostClassifier(device="cuda", **params).fit(X, labels, era=era)
    if assert_same_splits(cpu.ensemble_.nodes, gpu.ensemble_.nodes):
        np.testing.assert_allclose(gpu.predict_proba(X), cpu.predict_proba(X), rtol=1e-5)


@pytest.mark.cuda
@pytest.mark.skipif(not CUDA, reason="needs a usable CUDA GPU")
@pytest.mark.parametrize("n_outputs", [1, 3])
def test_gpu_fit_scores_its_eval_sets_on_the_gpu_as_on_the_host(monkeypatch, n_outputs):
    """A GPU fit keeps its eval sets' rows on the GPU and walks each round's
    pack there (one device call a round and set, the rows sent once): the
    same per-round scores, bit for bit, as the same fit predicting them on
    the host; a one-row eval set and NaN rows included."""
    from packboost.backends import cuda as cuda_backend

    X, y, era, _ = random_problem(3, 400, 5, 8)
    X_val, y_val, era_val, _ = random_problem(4, 157, 5, 3)
    X_val[::9, 2] = np.nan
    if n_outputs > 1:
        y, y_val = (np.column_stack([v, -2.0 * v, v * v]) for v in (y, y_val))
    eval_set = [(X_val, y_val, era_val), (X_val[:1], y_val[:1])]
    params = dict(n_estimators=3, pack_size=2, max_depth=3, max_bins=7, random_state=2,
                  device="cuda")
    calls = []
    add = cuda_backend.KeptRows.add_predictions

    def counted(self, ensemble, out):
        calls.append(out.shape)
        return add(self, ensemble, out)

    monkeypatch.setattr(cuda_backend.KeptRows, "add_predictions", counted)
    kept = packboost.PackBoostRegressor(**params).fit(X, y, era=era, eval_set=eval_set)
    assert len(calls) == 2 * 3
    assert calls[0] == ((157,) if n_outputs == 1 else (157, n_outputs))
    monkeypatch.setattr(cuda_backend.CudaBackend, "keep_rows", lambda self, X: None)
    calls.clear()
    host = packboost.PackBoostRegressor(**params).fit(X, y, era=era, eval_set=eval_set)
    assert calls == []
    np.testing.assert_array_equal(kept.ensemble_.nodes["value"], host.ensemble_.nodes["value"])
    np.testing.assert_equal(kept.evals_result_, host.evals_result_)
    first_set = next(iter(kept.evals_result_.values()))
    assert len(next(iter(first_set.values()))) == 3


@pytest.mark.cuda
@pytest.mark.skipif(not CUDA, reason="needs a usable CUDA GPU")
def test_gpu_predicts_several_outputs():
    X, y, era, _ = random_problem(8, 600, 5, 12)
    Y = np.column_stack([y, -2.0 * y])
    params = dict(n_estimators=3, pack_size=2, max_depth=3, random_state=1)
    cpu = packboost.PackBoostRegressor(**params).fit(X, Y, era=era)
    expected = cpu.predict(X)
    cpu.set_params(device="cuda")  # predicts each output's trees on the GPU
    np.testing.assert_allclose(cpu.predict(X), expected, rtol=1e-12, atol=1e-12)


@pytest.mark.cuda
@pytest.mark.skipif(not CUDA, reason="needs a usable CUDA GPU")
def test_gpu_predicts_every_output_on_one_copy_of_x(monkeypatch):
    """A model of several outputs predicts on the GPU with one call of the
    device predictor per block of X (one copy of X to the device for every
    output, API version 5), each output's scores bit for bit those of a
    one-output model of its trees, for any range of rounds."""
    from packboost import _cuda
    from packboost.backends import cuda as cuda_backend

    X, y, era, _ = random_problem(9, 300, 5, 6)
    X[::7, 1] = np.nan
    Y = np.column_stack([y, -2.0 * y, y * y])
    model = packboost.PackBoostRegressor(n_estimators=4, pack_size=2, max_depth=3,
                                         random_state=1).fit(X, Y, era=era)
    ensemble = model.ensemble_
    calls = []
    predict = _cuda.predict_raw

    def counted(block, *args, **kwargs):
        calls.append(len(block))
        return predict(block, *args, **kwargs)

    monkeypatch.setattr(_cuda, "predict_raw", counted)
    every_round = None
    for n_rounds, start_round in ((None, 0), (3, 1)):
        calls.clear()
        together = cuda_backend.predict_raw_on_gpu(ensemble, X, n_rounds, start_round)
        every_round = together if every_round is None else every_round
        assert calls == [len(X)]
        assert together.shape == (len(X), 3)
        for output in range(3):
            alone = cuda_backend.predict_raw_on_gpu(ensemble.output_ensemble(output), X,
                                                    n_rounds, start_round)
            np.testing.assert_array_equal(together[:, output], alone)
        np.testing.assert_allclose(together, ensemble.predict_raw(X, 1, n_rounds, start_round),
                                   rtol=1e-12, atol=1e-12)
    # Blocks of X: one call per block, every output in it.
    monkeypatch.setattr(cuda_backend, "PREDICT_CHUNK_BYTES", 100 * X.shape[1] * 8)
    calls.clear()
    blocks = cuda_backend.predict_raw_on_gpu(ensemble, X)
    assert calls == [100, 100, 100]
    np.testing.assert_array_equal(blocks, every_round)
    model.set_params(device="cuda")
    np.testing.assert_array_equal(model.predict(X), every_round)


@pytest.mark.cuda
@pytest.mark.skipif(not CUDA, reason="needs a usable CUDA GPU")
@pytest.mark.parametrize("unknown, extra", OUTPUT_CASES, ids=OUTPUT_IDS)
def test_gpu_fits_several_targets_as_the_cpu(unknown, extra):
    """k targets on the GPU: the CPU's model (up to the ties of
    assert_same_splits), and each target's trees bit for bit those of a
    one-target GPU fit on the rows where it is known."""
    X, Y, era = several_targets(11, 160, 3, 5, unknown)
    weight = np.random.default_rng(0).uniform(0.5, 2.0, len(X))
    params = dict(OUTPUT_PARAMS, **extra)

    def fit(X, y, era, weight):
        return packboost.PackBoostRegressor(device="cuda", **params).fit(
            X, y, era=era, sample_weight=weight)

    gpu = assert_each_target_is_its_own_fit(fit, X, Y, era, weight)
    cpu = packboost.PackBoostRegressor(**params).fit(X, Y, era=era, sample_weight=weight)
    assert_same_model_as_cpu(cpu, gpu, X, "predict")


def assert_same_model_as_cpu(cpu, gpu, X, method):
    """Same splits (up to assert_same_splits' ties); then the same leaves bit
    for bit, so the same predictions on the CPU, and on the GPU to rounding
    (docs/cuda-kernels.md §10)."""
    if not assert_same_splits(cpu.ensemble_.nodes, gpu.ensemble_.nodes):
        return
    for name in ("value", "n_samples", "sum_hessian"):
        np.testing.assert_array_equal(gpu.ensemble_.nodes[name], cpu.ensemble_.nodes[name],
                                      err_msg=name)
    expected = getattr(cpu, method)(X)
    np.testing.assert_allclose(getattr(gpu, method)(X), expected, rtol=1e-12, atol=1e-12)
    gpu.set_params(device="cpu")
    np.testing.assert_array_equal(getattr(gpu, method)(X), expected)


@pytest.mark.cuda
@pytest.mark.skipif(not CUDA, reason="needs a usable CUDA GPU")
def test_gpu_fits_sampled_nan_targets_as_the_cpu():
    X, Y, era = several_targets(12, 160, 4, 5, unknown=True)
    cpu = packboost.PackBoostRegressor(**SAMPLED_OUTPUTS).fit(X, Y, era=era)
    gpu = packboost.PackBoostRegressor(device="cuda", **SAMPLED_OUTPUTS).fit(X, Y, era=era)
    assert_same_model_as_cpu(cpu, gpu, X, "predict")


@pytest.mark.cuda
@pytest.mark.skipif(not CUDA, reason="needs a usable CUDA GPU")
def test_gpu_fit_of_several_targets_copies_X_to_the_device_once(monkeypatch):
    """One device context per fit, whatever the number of outputs: X goes to
    the device once, and each output's round only uploads its gradients."""
    from packboost import _cuda

    created, rounds = [], []

    class CountingContext(_cuda.CudaContext):
        def __init__(self, X_binned, *args):
            created.append(X_binned.shape)

        def begin_round(self, gradients, *args):
            rounds.append(len(gradients))
            return super().begin_round(gradients, *args)

    monkeypatch.setattr(_cuda, "CudaContext", CountingContext)
    X, Y, era = several_targets(5, 120, 3, 4, unknown=True)
    packboost.PackBoostRegressor(device="cuda", **OUTPUT_PARAMS).fit(X, Y, era=era)
    assert created == [(3, 120)]
    assert rounds == [120] * (OUTPUT_PARAMS["n_estimators"] * Y.shape[1])


@pytest.mark.cuda
@pytest.mark.skipif(not CUDA, reason="needs a usable CUDA GPU")
def test_gpu_multiclass_matches_cpu():
    X, y, era, _ = random_problem(4, 200, 3, 5)
    labels = np.digitize(y, np.quantile(y, [0.33, 0.66]))
    params = dict(n_estimators=2, pack_size=2, max_depth=3, max_bins=8, random_state=1,
                  n_jobs=1)
    cpu = packboost.PackBoostClassifier(**params).fit(X, labels, era=era)
    gpu = packboost.PackBoostClassifier(device="cuda", **params).fit(X, labels, era=era)
    assert gpu.ensemble_.n_outputs == 3
    assert_same_model_as_cpu(cpu, gpu, X, "predict_proba")


@pytest.mark.cuda
@pytest.mark.skipif(not CUDA, reason="needs a usable CUDA GPU")
def test_gpu_context_kernels_match_host_kernels():
    from packboost._cuda import CudaContext

    data, gradients, hessians = make_binned_problem(3, 2000, 4, 9, n_bins=7)
    pack_size = 3
    samples, _, _ = pack_draws(data, pack_size, 0, 1)
    fixed = to_fixed_point(gradients, hessians, data.era_offsets)
    args = (fixed.gradients, fixed.hessians, samples, fixed.gradient_scale, fixed.hessian_scale,
            squared_gradient_scale(fixed.gradients))
    host = HostKernels(data, pack_size)
    gpu = CudaContext(data.X_binned, data.n_bins, data.row_era, data.n_eras, pack_size)
    gpu.set_timing(True)
    host.begin_round(*args)
    gpu.begin_round(*args)
    for got, expected in zip(gpu.slot_sums(pack_size), host.slot_sums(pack_size), strict=True):
        np.testing.assert_array_equal(got, expected)
    times = gpu.read_timers()
    assert set(times) >= {"histogram", "score", "route"} and times["slot_sums"] >= 0
    # A tree's slots must be consecutive (the grower numbers them so): the
    # histogram plan refuses anything else rather than misplace a tile.
    n_candidates = data.n_features
    with pytest.raises(packboost.CudaError, match="invalid argument"):
        gpu.find_splits(np.array([1, 0, 1], dtype=np.int32), np.ones(3, dtype=np.uint8),
                        np.arange(n_candidates, dtype=np.int32),
                        np.ones((n_candidates, pack_size), dtype=np.uint8), np.zeros(3),
                        grower_params().split)
    gpu.close()
    with pytest.raises(ValueError, match="closed"):
        gpu.slot_sums(1)


@pytest.mark.cuda
@pytest.mark.skipif(not CUDA, reason="needs a usable CUDA GPU")
def test_gpu_context_kernels_sum_a_wide_frontier():
    # Every slot splits at every depth: 4 trees reach 2,048 slots, past the
    # 1,536 whose sums fit shared memory (then they are added in global memory).
    from packboost._cuda import CudaContext

    data, gradients, hessians = make_binned_problem(4, 3000, 5, 7, n_bins=9)
    pack_size = 4
    samples, _, _ = pack_draws(data, pack_size, 1, 1)
    fixed = to_fixed_point(gradients, hessians, data.era_offsets)
    args = (fixed.gradients, fixed.hessians, samples, fixed.gradient_scale, fixed.hessian_scale,
            squared_gradient_scale(fixed.gradients))
    host = HostKernels(data, pack_size)
    gpu = CudaContext(data.X_binned, data.n_bins, data.row_era, data.n_eras, pack_size)
    rng = np.random.default_rng(0)
    try:
        host.begin_round(*args)
        gpu.begin_round(*args)
        n_slots = pack_size
        for _ in range(10):
            for got, expected in zip(gpu.slot_sums(n_slots), host.slot_sums(n_slots),
                                     strict=True):
                np.testing.assert_array_equal(got, expected)
            split = (rng.integers(0, data.n_features, n_slots).astype(np.int32),
                     rng.integers(0, 8, n_slots).astype(np.int32),
                     rng.integers(0, 2, n_slots).astype(np.uint8),
                     2 * np.arange(n_slots, dtype=np.int32), np.zeros(n_slots, dtype=np.int32))
            host.route_rows(*split)
            gpu.route_rows(*split)
            n_slots *= 2
        assert n_slots // 2 == 2048
    finally:
        gpu.close()


def test_open_backend_is_the_one_device_switch():
    data, _, _ = make_binned_problem(0, 40, 2, 3)
    with backends.open_backend("cpu", data, 4, 1) as backend:
        assert isinstance(backend, CpuBackend)
    backends.check_device("cpu")  # never raises
    with pytest.raises(ValueError, match="device"):
        backends.open_backend("gpu", data, 4, 1)
    if not CUDA:
        with pytest.raises(packboost.CudaError):
            backends.open_backend("cuda", data, 4, 1)
