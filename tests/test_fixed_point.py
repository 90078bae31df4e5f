"""Fixed-point gradients: rounding bounds, packing, overflow headroom."""

import numpy as np
import pytest

from packboost._fixed_point import (
    EXACT_SUM_BITS,
    PACKED_VALUE_BITS,
    GradientScaling,
    RoundBuffers,
    _peak,
    count_bits_for,
    to_fixed_point,
)


def era_offsets_of(sizes):
    return np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)


@pytest.mark.parametrize("magnitude", [1e-280, 1e-8, 1.0, 1e8, 1e300])
@pytest.mark.parametrize("sizes", [[1], [5, 0, 3], [1000, 1, 0, 4096]])
def test_rounding_is_within_half_a_unit_and_sums_cannot_overflow(magnitude, sizes):
    rng = np.random.default_rng(len(sizes))
    offsets = era_offsets_of(sizes)
    g = rng.standard_normal(offsets[-1]) * magnitude
    h = rng.uniform(0.5, 2.0, offsets[-1]) * magnitude
    fixed = to_fixed_point(g, h, offsets)
    units = fixed.gradients * fixed.gradient_scale
    np.testing.assert_array_equal(units, np.rint(units))  # on the grid
    assert np.all(np.abs(fixed.gradients - g) <= 0.5 / fixed.gradient_scale)
    # and the grid is as fine as its bounds allow (docs/fixed-point.md §2.1), at any
    # magnitude: no clamped, coarser scale
    largest_era = max(np.abs(g[start:end]).sum()
                      for start, end in zip(offsets[:-1], offsets[1:], strict=True))
    assert 1.0 / fixed.gradient_scale <= max(
        2.0 ** -(EXACT_SUM_BITS - 2) * np.abs(g).sum(),
        2.0 ** -(PACKED_VALUE_BITS - fixed.count_bits - 2) * largest_era)
    assert 1.0 / fixed.hessian_scale <= 2.0 ** -(EXACT_SUM_BITS - 2) * np.abs(h).sum()
    # every era's sum of |units| fits the packed cell's gradient bits, and
    # every sum over the data stays exact in float64
    for start, end in zip(offsets[:-1], offsets[1:], strict=True):
        assert np.abs(units[start:end]).sum() < 2.0 ** (PACKED_VALUE_BITS - fixed.count_bits)
    assert np.abs(units).sum() < 2.0 ** EXACT_SUM_BITS
    # Hessians are on their own grid too, constant or not (both backends sum
    # these integers, docs/fixed-point.md).
    hessian_units = fixed.hessians * fixed.hessian_scale
    np.testing.assert_array_equal(hessian_units, np.rint(hessian_units))
    assert np.all(np.abs(fixed.hessians - h) <= 0.5 / fixed.hessian_scale)
    assert np.abs(hessian_units).sum() < 2.0 ** EXACT_SUM_BITS
    if len(h) == 1:  # one row: its hessian is "constant"
        assert fixed.hessian_is_constant and fixed.constant_hessian == fixed.hessians[0]
        return
    assert not fixed.hessian_is_constant
    np.testing.assert_array_equal(fixed.hessian_fixed, hessian_units)


def test_packed_cells_decode_to_sums_and_counts():
    rng = np.random.default_rng(1)
    offsets = era_offsets_of([300, 7, 0, 129])
    g = rng.standard_normal(offsets[-1])
    fixed = to_fixed_point(g, np.ones_like(g), offsets)
    assert fixed.hessian_is_constant and fixed.constant_hessian == 1.0
    assert len(fixed.hessian_fixed) == 0
    for start, end in zip(offsets[:-1], offsets[1:], strict=True):
        for subset in (slice(start, end), slice(start, start + (end - start) // 3)):
            cell = int(fixed.packed[subset].sum())
            count = cell & ((1 << fixed.count_bits) - 1)
            units = cell >> fixed.count_bits
            assert count == len(g[subset])
            assert units / fixed.gradient_scale == fixed.gradients[subset].sum()


def test_count_bits_fit_the_largest_era():
    assert count_bits_for(era_offsets_of([0])) == 1
    assert count_bits_for(era_offsets_of([1])) == 1
    assert count_bits_for(era_offsets_of([3, 4])) == 3
    assert count_bits_for(era_offsets_of([4095, 4096])) == 13


def test_zero_gradients_are_exact():
    fixed = to_fixed_point(np.zeros(4), np.ones(4), era_offsets_of([4]))
    assert not fixed.gradients.any() and not (fixed.packed >> fixed.count_bits).any()


@pytest.mark.parametrize("gradients", [[], [0.0, 0.0], [0.5, -3.0, 2.0], [-1e-9, 7.0]])
def test_largest_gradient_units_is_the_largest_magnitude_on_the_grid(gradients):
    """max |g_q| (at least 1, also with no rows or only zeros), in grid
    units: the bound the node-ordered route sizes its chunks by."""
    g = np.asarray(gradients, dtype=np.float64)
    fixed = to_fixed_point(g, np.ones_like(g), era_offsets_of([len(g)]))
    expected = max([1] + [abs(round(v * fixed.gradient_scale)) for v in fixed.gradients])
    assert fixed.largest_gradient_units == expected
    assert fixed.largest_gradient_units == fixed.largest_gradient_units   # cached, the same


def test_bad_inputs_are_rejected():
    offsets = era_offsets_of([3])
    with pytest.raises(FloatingPointError, match="not finite"):
        to_fixed_point(np.array([1.0, np.nan, 0.0]), np.ones(3), offsets)
    with pytest.raises(ValueError, match="one length"):
        to_fixed_point(np.ones(3), np.ones(2), offsets)
    with pytest.raises(ValueError, match="era_offsets"):
        to_fixed_point(np.ones(3), np.ones(3), era_offsets_of([2]))


@pytest.mark.parametrize("magnitude", [1e-300, 5e-324])
def test_values_too_small_for_a_float64_grid_are_refused(magnitude):
    """The grid's scale would have to exceed 2**1023: refusing beats a coarser
    grid that rounds the values away (the training loop rescales first)."""
    g = np.full(3, magnitude)
    with pytest.raises(FloatingPointError, match="too small for the fixed-point grid"):
        to_fixed_point(g, np.ones(3), era_offsets_of([3]))
    with pytest.raises(FloatingPointError, match="too small for the fixed-point grid"):
        to_fixed_point(np.ones(3), g, era_offsets_of([3]))


# -- the fit's power-of-two rescaling (GradientScaling) ---------------------------------


@pytest.mark.parametrize("peak", [0.0, 2.0**-64, 1e-6, 1.0, 3.7e5, 2.0**64])
def test_ordinary_magnitudes_are_not_rescaled(peak):
    g = np.array([peak, -peak / 3, 0.0])
    scaling = GradientScaling.for_gradients(g, np.ones(3))
    assert scaling.is_identity
    params = grower_params_for_test(max_delta_step=0.5, min_split_gain=0.25)
    assert scaling.grower_params(params) is params
    nodes = {"value": g.copy(), "sum_hessian": np.ones(3)}
    scaling.restore(nodes)
    np.testing.assert_array_equal(nodes["value"], g)


@pytest.mark.parametrize("peak", [5e-324, 1e-300, 2.0**-65, 2.0**65, 1e150, 1.7e308])
def test_rescaling_is_exact_and_brings_the_peak_to_one(peak):
    rng = np.random.default_rng(2)
    g = rng.uniform(-1, 1, 50) * peak
    g[7] = -peak
    h = rng.uniform(0.25, 1, 50) * peak
    scaling = GradientScaling.for_gradients(g, h)
    g2, h2 = g.copy(), h.copy()
    scaling.apply(g2, h2)
    assert 1.0 <= np.abs(g2).max() < 2.0 and 1.0 <= np.abs(h2).max() < 2.0
    # exact: scaling back returns every value bit for bit (subnormals included,
    # since they are scaled up)
    np.testing.assert_array_equal(np.ldexp(g2, scaling.gradient_exponent), g)
    np.testing.assert_array_equal(np.ldexp(h2, scaling.hessian_exponent), h)
    to_fixed_point(g2, h2, era_offsets_of([20, 30]))  # and they go on the grid


def grower_params_for_test(**kwargs):
    from packboost.grower import GrowerParams

    values = dict(max_depth=3, reg_lambda=1.0, reg_alpha=0.0, min_samples_leaf=1,
                  min_child_weight=1e-3,
                  min_split_gain=0.0, max_delta_step=0.0, shrinkage=0.1,
                  split=dict(reg_lambda=1.0, min_child_weight=1e-3, lambda_dro=1.0))
    values.update(kwargs)
    values["split"] = dict(values["split"], reg_lambda=values["reg_lambda"],
                           min_child_weight=values["min_child_weight"])
    return GrowerParams(**values)


def test_absolute_parameters_follow_the_units_of_the_rescaled_fit():
    """reg_lambda, min_child_weight: hessians (h); max_delta_step: leaf values
    (g / h); min_split_gain: gains (g^2 / h). Leaf values and hessian sums come back."""
    scaling = GradientScaling(gradient_exponent=-700, hessian_exponent=100)
    params = grower_params_for_test(reg_lambda=3.0, min_child_weight=0.5,
                                    max_delta_step=0.25, min_split_gain=2.0)
    scaled = scaling.grower_params(params)
    assert scaled.reg_lambda == scaled.split["reg_lambda"] == 3.0 * 2.0**-100
    assert scaled.min_child_weight == scaled.split["min_child_weight"] == 0.5 * 2.0**-100
    assert scaled.max_delta_step == 0.25 * 2.0**800
    assert scaled.min_split_gain == np.inf  # 2 * 2**1500: no split can gain that much
    assert scaled.split["lambda_dro"] == 1.0 and scaled.shrinkage == 0.1
    # a threshold that would underflow stays a threshold
    tiny = GradientScaling(gradient_exponent=600, hessian_exponent=0).grower_params(
        grower_params_for_test(min_split_gain=1e-10))
    assert tiny.min_split_gain > 0
    nodes = {"value": np.array([1.0, -0.5]), "sum_hessian": np.array([4.0, 2.0])}
    scaling.restore(nodes)
    np.testing.assert_array_equal(nodes["value"], [2.0**-800, -(2.0**-801)])
    np.testing.assert_array_equal(nodes["sum_hessian"], [2.0**102, 2.0**101])


def test_reg_lambda_beyond_float64_in_hessian_units_is_refused():
    scaling = GradientScaling(gradient_exponent=0, hessian_exponent=-1000)
    with pytest.raises(ValueError, match="reg_lambda=1e\\+20 is too large"):
        scaling.grower_params(grower_params_for_test(reg_lambda=1e20))


def test_counted_rows_size_the_squared_gradient_grid_as_a_fit_on_them():
    # The CUDA backend sums squared gradients on a grid sized by the rows any
    # tree may hold: an output trained on the rows where its target is known
    # (the others zero) gets the grid of a fit on those rows alone.
    from packboost._fixed_point import squared_gradient_scale

    rng = np.random.default_rng(5)
    n_rows = 1000
    era_offsets = np.array([0, 300, 650, n_rows])
    known = rng.random(n_rows) < 0.3
    gradients = np.where(known, rng.normal(size=n_rows), 0.0)
    hessians = np.where(known, 1.0, 0.0)
    fixed = to_fixed_point(gradients, hessians, era_offsets, counted_rows=known)
    assert fixed.n_counted_rows == known.sum()
    assert to_fixed_point(gradients, np.ones(n_rows), era_offsets).n_counted_rows == n_rows
    alone = squared_gradient_scale(fixed.gradients[known])
    assert squared_gradient_scale(fixed.gradients, fixed.n_counted_rows) == alone
    assert fixed.squared_scale == alone     # the grid to_fixed_point rounds the squares to
    assert squared_gradient_scale(fixed.gradients) < alone   # 1000 rows: a coarser grid


@pytest.mark.parametrize("bound_bits", [20, 51, 61])
def test_power_of_two_scale_is_the_largest_within_the_bound(bound_bits):
    """Exactly the largest power of two s with magnitude * s <= 2**bound_bits,
    also a hair above a power of two, where a rounded log2 gave twice it."""
    from packboost._fixed_point import _power_of_two_scale

    rng = np.random.default_rng(bound_bits)
    magnitudes = [2.0**40, np.nextafter(2.0**40, np.inf), np.nextafter(2.0**40, 0.0),
                  np.nextafter(2.0**-30, np.inf), 3.0, 1e-250, 1e300,
                  *rng.lognormal(0.0, 20.0, 200).tolist()]
    for magnitude in magnitudes:
        scale = _power_of_two_scale(bound_bits, float(magnitude))
        assert scale == 2.0 ** round(np.log2(scale))
        # Exact comparisons: products by powers of two, as Python ints and fractions.
        from fractions import Fraction
        product = Fraction(float(magnitude)) * Fraction(scale)
        assert product <= 2**bound_bits, magnitude
        assert 2 * product > 2**bound_bits, magnitude


@pytest.mark.parametrize("hessians_vary", [False, True])
def test_round_buffers_hold_the_numbers_of_fresh_arrays_and_are_reused(hessians_vary):
    rng = np.random.default_rng(3)
    buffers = RoundBuffers()
    kept = None
    # Two rounds on one row count, then another count (the buffers are remade).
    for n_rows in (500, 500, 37):
        gradients = rng.normal(size=n_rows)
        hessians = rng.uniform(0.5, 2.0, n_rows) if hessians_vary else np.full(n_rows, 0.25)
        offsets = era_offsets_of([n_rows // 3, 0, n_rows - n_rows // 3])
        fresh = to_fixed_point(gradients, hessians, offsets)
        reused = to_fixed_point(gradients, hessians, offsets, buffers=buffers)
        for name in ("gradients", "hessians", "packed", "hessian_fixed", "squared"):
            np.testing.assert_array_equal(getattr(reused, name), getattr(fresh, name))
        for name in ("count_bits", "gradient_scale", "hessian_scale", "squared_scale"):
            assert getattr(reused, name) == getattr(fresh, name)
        if kept is not None and n_rows == len(kept.gradients):
            # The same memory as the previous round's (which it overwrote).
            for name in ("gradients", "hessians", "packed", "squared"):
                assert np.shares_memory(getattr(reused, name), getattr(kept, name))
        kept = reused


@pytest.mark.parametrize("values", [
    [], [0.0], [-0.0], [-0.0, 0.0], [-3.0, 2.0], [1.0, 5.0], [-7.0, -2.0], [np.inf, 1.0],
    [-np.inf, 1.0], [1.0, np.nan, -2.0], [np.nan]])
def test_peak_is_the_largest_magnitude(values):
    values = np.asarray(values, dtype=np.float64)
    expected = float(np.max(np.abs(values))) if len(values) else 0.0
    peak = _peak(values)
    assert peak == expected or (np.isnan(peak) and np.isnan(expected))
    assert not np.signbit(peak) or np.isnan(peak)
