"""A round's gradients in fixed point, the form the histogram kernel adds.

Why: the CPU histogram pass is one read-modify-write per (row, tree, feature)
at every depth, and it is most of ``fit``. Three float fields per cell (sum of
gradients, of hessians, row count) cost three dependent float adds on 24 bytes;
one int64 that holds the gradient sum in its high bits and the row count in
its low bits costs one integer add on 8 bytes (measured 2.5-3x faster
together with the kernel's tree-major loop, benchmarks/RESULTS.md). When every
row has the same hessian (squared error without sample weights: the usual era
workload) the hessian sum is that hessian times the count and needs no field;
otherwise a second int64 per cell holds the fixed-point hessian sum.

How: each value is rounded once per round to a multiple of ``1 / scale``
(``scale`` a power of two), and every consumer -- node sums, leaf values, the
histogram kernel, the NumPy oracle -- uses the rounded values. The scale is
chosen so that

* one era's gradient sum always fits the high bits of a packed cell, whatever
  rows a cell holds (per-era sums of |g| bound every cell of that era), and
* any sum over the whole data stays below 2**53, so that float sums of the
  rounded values are exact: the engine's integer sums, turned back to floats,
  equal the oracle's float sums bit for bit, in any order.

The rounding step is ``2**-52`` of the sum of |g| over all rows: for 1M rows
with |g| ~ 1 about 2e-10 per row -- far below float32, and nothing like the
few-bit gradients of LightGBM's quantized training.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

# Sums over all rows stay below 2**EXACT_SUM_BITS: float64 adds them exactly.
EXACT_SUM_BITS = 52
# A packed cell is a signed int64: 63 value bits for gradient sum + count.
PACKED_VALUE_BITS = 62


@dataclass(frozen=True)
class FixedPointGradients:
    """One round's gradients and hessians, rounded and packed.

    ``gradients``/``hessians`` are the rounded values as float64 (use them,
    not the raw ones, for node sums); ``packed[row] = g_q << count_bits | 1``
    with ``g_q = gradients[row] * gradient_scale`` (an integer); hessians are
    ``constant_hessian`` for every row (``hessian_fixed`` is then empty) or
    ``hessian_fixed[row] / hessian_scale``.
    """

    gradients: np.ndarray       # (n_rows,) float64 on the 1/gradient_scale grid
    hessians: np.ndarray        # (n_rows,) float64 on the 1/hessian_scale grid
    packed: np.ndarray          # (n_rows,) int64
    hessian_fixed: np.ndarray   # (n_rows,) int64, or (0,) when the hessian is constant
    count_bits: int
    gradient_scale: float
    hessian_scale: float
    constant_hessian: float     # NaN when hessians differ between rows

    @property
    def hessian_is_constant(self) -> bool:
        return not math.isnan(self.constant_hessian)


def count_bits_for(era_offsets: np.ndarray) -> int:
    """Low bits of a packed cell that hold its row count: enough for the
    largest era (a cell never holds rows of two eras)."""
    sizes = np.diff(np.asarray(era_offsets, dtype=np.int64))
    largest = int(sizes.max()) if len(sizes) else 0
    return max(1, largest.bit_length())


def _power_of_two_scale(bound_bits: int, magnitude: float) -> float:
    """Largest power of two s with magnitude * s <= 2**bound_bits (1 for 0)."""
    if not math.isfinite(magnitude):
        raise FloatingPointError("gradients or hessians are not finite")
    if magnitude == 0.0:
        return 1.0
    exponent = math.floor(bound_bits - math.log2(magnitude))
    return math.ldexp(1.0, max(-1000, min(1000, exponent)))


def to_fixed_point(gradients: np.ndarray, hessians: np.ndarray,
                   era_offsets: np.ndarray, n_threads: int = 1) -> FixedPointGradients:
    """Round a round's gradients and hessians and pack them for the kernel.

    ``era_offsets`` (n_eras + 1) delimit the eras of the era-sorted rows.
    """
    gradients = np.ascontiguousarray(gradients, dtype=np.float64)
    hessians = np.ascontiguousarray(hessians, dtype=np.float64)
    era_offsets = np.ascontiguousarray(era_offsets, dtype=np.int64)
    if gradients.shape != hessians.shape or gradients.ndim != 1:
        raise ValueError("gradients and hessians must be 1-d arrays of one length, got "
                         f"{gradients.shape} and {hessians.shape}")
    if len(era_offsets) == 0 or era_offsets[-1] != len(gradients):
        raise ValueError("era_offsets must end at the number of rows")
    count_bits = count_bits_for(era_offsets)
    if count_bits > 31:
        raise ValueError(f"an era of {2 ** (count_bits - 1)}+ rows is too large for the "
                         "fixed-point histograms (at most 2**31 - 1 rows per era)")

    from packboost import _histogram  # the kernels (Cython) of this format

    largest_era, total = _histogram.magnitude_sums(gradients, era_offsets)
    # One spare bit each for the rounding (at most half a unit per row).
    gradient_scale = min(
        _power_of_two_scale(PACKED_VALUE_BITS - count_bits - 1, largest_era),
        _power_of_two_scale(EXACT_SUM_BITS - 1, total))
    rounded_gradients = np.empty_like(gradients)
    packed = np.empty(len(gradients), dtype=np.int64)
    _histogram.round_to_grid(gradients, gradient_scale, rounded_gradients, packed, count_bits,
                             n_threads)

    # Hessians get their own grid, constant or not, so that both backends
    # (docs/fixed-point.md) sum the same integers; a constant hessian is
    # still one value (the CPU kernel then needs no hessian word per cell).
    hessian_scale = _power_of_two_scale(EXACT_SUM_BITS - 1,
                                        _histogram.magnitude_sums(hessians, era_offsets)[1])
    constant = len(hessians) > 0 and bool(np.all(hessians == hessians[0]))
    if constant:
        constant_hessian = float(np.rint(hessians[0] * hessian_scale) / hessian_scale)
        rounded_hessians = np.full_like(hessians, constant_hessian)
        hessian_fixed = np.zeros(0, dtype=np.int64)
    else:
        rounded_hessians = np.empty_like(hessians)
        hessian_fixed = np.empty(len(hessians), dtype=np.int64)
        _histogram.round_to_grid(hessians, hessian_scale, rounded_hessians, hessian_fixed, 0,
                                 n_threads)
        constant_hessian = math.nan
    return FixedPointGradients(
        gradients=rounded_gradients, hessians=rounded_hessians, packed=packed,
        hessian_fixed=hessian_fixed, count_bits=count_bits, gradient_scale=gradient_scale,
        hessian_scale=hessian_scale, constant_hessian=constant_hessian)


# The CUDA backend's int64 sums of g * g stay below 2**SQUARED_SUM_BITS.
SQUARED_SUM_BITS = 62


def squared_gradient_scale(gradients: np.ndarray) -> float:
    """Largest power of two ``s`` with ``n * max(g * g) * s <= 2**62``: the grid
    of the squared gradients the CUDA backend sums in int64.

    Squared gradients only enter a node's gradient variance (the sampling
    noise of era_std="between", docs/des.md), never a histogram, so they are
    not on the gradients' exact grid: the CPU sums them as floats.
    """
    if len(gradients) == 0:
        return 1.0
    peak = max(float(np.max(gradients)), -float(np.min(gradients)))
    return _power_of_two_scale(SQUARED_SUM_BITS - math.ceil(math.log2(len(gradients))),
                               peak * peak)
