"""Fixed-point gradients: rounding bounds, packing, overflow headroom."""

import numpy as np
import pytest

from packboost._fixed_point import (
    EXACT_SUM_BITS,
    PACKED_VALUE_BITS,
    count_bits_for,
    to_fixed_point,
)


def era_offsets_of(sizes):
    return np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)


@pytest.mark.parametrize("magnitude", [1e-300, 1e-8, 1.0, 1e8, 1e300])
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


def test_bad_inputs_are_rejected():
    offsets = era_offsets_of([3])
    with pytest.raises(FloatingPointError, match="not finite"):
        to_fixed_point(np.array([1.0, np.nan, 0.0]), np.ones(3), offsets)
    with pytest.raises(ValueError, match="one length"):
        to_fixed_point(np.ones(3), np.ones(2), offsets)
    with pytest.raises(ValueError, match="era_offsets"):
        to_fixed_point(np.ones(3), np.ones(3), era_offsets_of([2]))
