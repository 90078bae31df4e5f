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
from dataclasses import dataclass, replace
from functools import cached_property

import numpy as np

# Sums over all rows stay below 2**EXACT_SUM_BITS: float64 adds them exactly.
EXACT_SUM_BITS = 52
# A packed cell is a signed int64: 63 value bits for gradient sum + count.
PACKED_VALUE_BITS = 62
# The largest power of two a float64 holds is 2**1023.
MAX_SCALE_EXPONENT = 1023


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
    # Each row's g * g on the grid of squared_scale (squared_gradient_scale):
    # any sum of them is exact in float64, so the node sums of squared
    # gradients are the same in any order, on any backend or shard.
    squared: np.ndarray         # (n_rows,) float64
    squared_scale: float
    # How many rows any tree may hold: to_fixed_point's counted_rows (None:
    # every row). Grids sized by a row count use it (squared_gradient_scale).
    counted_row_count: int | None = None

    @property
    def counts_every_row(self) -> bool:
        return self.counted_row_count is None

    @property
    def n_counted_rows(self) -> int:
        return len(self.gradients) if self.counted_row_count is None \
            else self.counted_row_count

    @property
    def hessian_is_constant(self) -> bool:
        return not math.isnan(self.constant_hessian)

    @cached_property
    def largest_gradient_units(self) -> int:
        """max |g_q| over the rows (at least 1): how many rows' packed values
        one int64 can sum (the node-ordered route's chunks). Computed once
        per round, not once per depth."""
        return int(np.max(np.abs(self.packed >> self.count_bits), initial=1))


@dataclass(frozen=True)
class OutputsFixedPoint:
    """Several outputs' gradients for one pack holding the trees of all of
    them (docs/packs.md §10, one pass for k outputs): tree ``t`` sums
    ``outputs[tree_output[t]]``. Each output keeps its own grid (scales), so
    its cells hold the integers of a one-output pack; the histogram cells of
    all outputs share one format (``same_format``)."""

    outputs: list               # FixedPointGradients, one per output
    tree_output: np.ndarray     # (n_trees,) int32, non-decreasing

    @staticmethod
    def same_format(outputs: list) -> bool:
        """Can these outputs share one pass: cells of one layout (constant
        hessian or not, the same count bits)."""
        first = outputs[0]
        return all(item.hessian_is_constant == first.hessian_is_constant
                   and item.count_bits == first.count_bits for item in outputs)

    @property
    def counts_every_row(self) -> bool:
        return all(item.counts_every_row for item in self.outputs)

    @property
    def hessian_is_constant(self) -> bool:
        return self.outputs[0].hessian_is_constant

    @property
    def count_bits(self) -> int:
        return self.outputs[0].count_bits

    @property
    def largest_gradient_units(self) -> int:
        """The largest of the outputs' (the node-ordered route's chunks)."""
        return max(item.largest_gradient_units for item in self.outputs)

    @cached_property
    def gradients(self) -> np.ndarray:
        """(n_outputs * n_rows,) the outputs' rounded gradients, output-major
        (the node sums' input, _partition.slot_sums(tree_output=...))."""
        return np.concatenate([item.gradients for item in self.outputs])

    @cached_property
    def hessians(self) -> np.ndarray:
        return np.concatenate([item.hessians for item in self.outputs])

    @cached_property
    def squared(self) -> np.ndarray:
        """The outputs' squared gradients on their grids, output-major."""
        return np.concatenate([item.squared for item in self.outputs])


def count_bits_for(era_offsets: np.ndarray) -> int:
    """Low bits of a packed cell that hold its row count: enough for the
    largest era (a cell never holds rows of two eras)."""
    sizes = np.diff(np.asarray(era_offsets, dtype=np.int64))
    largest = int(sizes.max()) if len(sizes) else 0
    return max(1, largest.bit_length())


def power_of_two_exponent(bound_bits: int, magnitude: float) -> int:
    """``floor(bound_bits - log2(magnitude))`` exactly, for a finite
    ``magnitude > 0``: with ``magnitude = m * 2**e``, ``m`` in [0.5, 1)
    (frexp, exact), ``log2(magnitude)`` lies in [e - 1, e) and equals ``e - 1``
    only for ``m = 0.5``. ``math.log2`` rounds: just above a power of two it
    returned the power's exponent, a scale twice too large (magnitude *
    scale a hair above 2**bound_bits). The CUDA backend computes the same
    integer on the device (cuda/round.cu, pbc_power_of_two_exponent)."""
    mantissa, exponent = math.frexp(magnitude)
    return bound_bits - exponent + (1 if mantissa == 0.5 else 0)


def _power_of_two_scale(bound_bits: int, magnitude: float) -> float:
    """Largest power of two s with magnitude * s <= 2**bound_bits (1 for 0).

    Raises ``FloatingPointError`` when that power of two is not a float64
    (magnitudes below about 2**(bound_bits - 1023)): a clamped, coarser grid
    would round such values away silently. The training loop never gets
    here: it rescales every round's gradients to about 1 first
    (:class:`GradientScaling`).
    """
    if not math.isfinite(magnitude):
        raise FloatingPointError("gradients or hessians are not finite")
    if magnitude == 0.0:
        return 1.0
    exponent = power_of_two_exponent(bound_bits, magnitude)
    if exponent > MAX_SCALE_EXPONENT:
        raise FloatingPointError(
            f"gradients or hessians too small for the fixed-point grid (sum of magnitudes "
            f"{magnitude:.3g}; the grid needs a scale of 2**{exponent}, beyond float64): "
            "rescale them by a power of two first (GradientScaling)")
    return math.ldexp(1.0, exponent)


class RoundBuffers:
    """The per-row arrays of one output's :class:`FixedPointGradients`,
    made once per fit and rewritten every round (:func:`to_fixed_point`'s
    ``buffers``): the round loop would otherwise ask the allocator for four
    or five fresh (n_rows,) arrays a round (64 MB at Numerai scale). Fresh
    pages are not free: on a host whose memory is fragmented, NumPy's
    huge-page advice makes each first touch wait for the kernel to compact
    memory (~0.06 s of a ~0.25 s Numerai-scale round on a 2-core VM,
    benchmarks/RESULTS.md). A round's FixedPointGradients is therefore
    valid until the next call with the same buffers."""

    def __init__(self):
        self._arrays = {}

    def take(self, name: str, n_rows: int, dtype) -> np.ndarray:
        """The (n_rows,) ``dtype`` array kept as ``name`` (made on first use
        or when the shape or type changes); its old values are garbage."""
        array = self._arrays.get(name)
        if array is None or array.shape != (n_rows,) or array.dtype != dtype:
            array = self._arrays[name] = np.empty(n_rows, dtype=dtype)
        return array


def to_fixed_point(gradients: np.ndarray, hessians: np.ndarray,
                   era_offsets: np.ndarray, n_threads: int = 1, *,
                   counted_rows: np.ndarray | None = None,
                   shard=None, buffers: RoundBuffers | None = None) -> FixedPointGradients:
    """Round a round's gradients and hessians and pack them for the kernel.

    ``era_offsets`` (n_eras + 1) delimit the eras of the era-sorted rows.
    ``counted_rows`` (bool per row, or None for all): the only rows any tree
    of the pack may hold (a target's known rows, packboost._unknown_targets;
    the others have zero gradients and hessians). The row counts are sized,
    a constant hessian judged and the squared gradients' grid sized on them,
    so the grids and the sums are those of a fit on those rows alone.
    ``shard`` (a :class:`packboost._row_shard.RowShard`): these rows are one
    shard of whole eras of the training rows; the grids are then chosen
    from the bounds of all shards' rows
    (:meth:`RowShard.grid_bounds`), the very numbers one machine holding
    every row computes, so every shard rounds to the grid of the
    single-machine fit (docs/distributed.md §3).
    ``buffers`` (a :class:`RoundBuffers`, or None: new arrays): where the
    result's per-row arrays are written; the previous result written there
    is then overwritten.
    """
    gradients = np.ascontiguousarray(gradients, dtype=np.float64)
    hessians = np.ascontiguousarray(hessians, dtype=np.float64)
    era_offsets = np.ascontiguousarray(era_offsets, dtype=np.int64)
    if gradients.shape != hessians.shape or gradients.ndim != 1:
        raise ValueError("gradients and hessians must be 1-d arrays of one length, got "
                         f"{gradients.shape} and {hessians.shape}")
    if len(era_offsets) == 0 or era_offsets[-1] != len(gradients):
        raise ValueError("era_offsets must end at the number of rows")
    from packboost import _histogram  # the kernel (Cython) of this format

    bounds = grid_bounds_of_rows(gradients, hessians, era_offsets, counted_rows)
    grid = combine_grid_bounds([bounds]) if shard is None else shard.grid_bounds(bounds)
    (count_bits, largest_era, total, hessian_total, constant, first_hessian, peak,
     counted_total) = grid
    if count_bits > 31:
        raise ValueError(f"an era of {2 ** (count_bits - 1)}+ rows is too large for the "
                         "fixed-point histograms (at most 2**31 - 1 rows per era)")

    # One spare bit each for the rounding (at most half a unit per row).
    gradient_scale = min(
        _power_of_two_scale(PACKED_VALUE_BITS - count_bits - 1, largest_era),
        _power_of_two_scale(EXACT_SUM_BITS - 1, total))
    take = (RoundBuffers() if buffers is None else buffers).take   # None: new arrays
    n_rows = len(gradients)
    rounded_gradients = take("gradients", n_rows, np.float64)
    packed = take("packed", n_rows, np.int64)
    _histogram.round_to_grid(gradients, gradient_scale, rounded_gradients, packed, count_bits,
                             n_threads)

    # Hessians get their own grid, constant or not, so that both backends
    # (docs/fixed-point.md) sum the same integers; a constant hessian is
    # still one value (the CPU kernel then needs no hessian word per cell).
    hessian_scale = _power_of_two_scale(EXACT_SUM_BITS - 1, hessian_total)
    if constant:
        constant_hessian = float(np.rint(first_hessian * hessian_scale) / hessian_scale)
        rounded_hessians = take("hessians", n_rows, np.float64)
        rounded_hessians.fill(constant_hessian)
        hessian_fixed = np.zeros(0, dtype=np.int64)
    else:
        rounded_hessians = take("hessians", n_rows, np.float64)
        hessian_fixed = take("hessian_fixed", n_rows, np.int64)
        _histogram.round_to_grid(hessians, hessian_scale, rounded_hessians, hessian_fixed, 0,
                                 n_threads)
        constant_hessian = math.nan
    # The squared gradients' grid from the largest rounded |g| (rounding is
    # monotone: the rounded largest raw |g|) and the counted rows of all
    # shards, so every shard takes one machine's grid.
    squared_scale = _squared_scale(float(np.rint(peak * gradient_scale) / gradient_scale),
                                   counted_total)
    return FixedPointGradients(
        gradients=rounded_gradients, hessians=rounded_hessians, packed=packed,
        hessian_fixed=hessian_fixed, count_bits=count_bits, gradient_scale=gradient_scale,
        hessian_scale=hessian_scale, constant_hessian=constant_hessian,
        counted_row_count=None if counted_rows is None else int(np.count_nonzero(counted_rows)),
        squared=rounded_squares(rounded_gradients, squared_scale, n_threads,
                                out=take("squared", n_rows, np.float64)),
        squared_scale=squared_scale)


def grid_bounds_of_rows(gradients: np.ndarray, hessians: np.ndarray,
                        era_offsets: np.ndarray, counted_rows: np.ndarray | None = None) -> dict:
    """What chooses the grid, of these rows (whole eras): each era's sum of
    |g| and of |h|, the row-count bits of the largest era (its counted rows),
    the number of counted rows, the largest |g|, the first counted hessian (None without any)
    and whether every counted hessian equals it. :func:`combine_grid_bounds`
    takes these of one machine's rows or of every shard's."""
    from packboost import _histogram

    if counted_rows is None:
        counted_offsets, counted_hessians = era_offsets, hessians
    else:
        running = np.concatenate(([0], np.cumsum(counted_rows, dtype=np.int64)))
        counted_offsets, counted_hessians = running[era_offsets], hessians[counted_rows]
    return dict(
        gradient_sums=_histogram.era_magnitude_sums(gradients, era_offsets),
        hessian_sums=_histogram.era_magnitude_sums(hessians, era_offsets),
        count_bits=count_bits_for(counted_offsets), counted=int(counted_offsets[-1]),
        peak=_peak(gradients),
        first_hessian=float(counted_hessians[0]) if len(counted_hessians) else None,
        constant=len(counted_hessians) == 0 or bool(np.all(counted_hessians
                                                            == counted_hessians[0])))


def combine_grid_bounds(parts: list, era_sums: dict | None = None) -> tuple:
    """(count bits, largest era sum of |g|, sum of |g|, sum of |h|, is the
    hessian of every counted row one constant, that constant or NaN, the
    largest |g|, the counted rows) of the
    rows of ``parts`` (:func:`grid_bounds_of_rows`, eras in order): the
    per-era sums are taken and added in era order, so every shard of a
    distributed fit chooses one machine's grid. ``era_sums``: the parts'
    ``gradient_sums`` and ``hessian_sums`` already put in era order (shards
    whose eras interleave, RowShard.grid_bounds); else the parts' in turn."""
    if era_sums is None:
        era_sums = {name: np.concatenate([part[name] for part in parts])
                    for name in ("gradient_sums", "hessian_sums")}
    largest, total = largest_and_total(era_sums["gradient_sums"])
    hessian_total = largest_and_total(era_sums["hessian_sums"])[1]
    firsts = [part["first_hessian"] for part in parts if part["first_hessian"] is not None]
    constant = all(part["constant"] for part in parts) and len(set(firsts)) == 1
    return (max(part["count_bits"] for part in parts), largest, total, hessian_total,
            constant, firsts[0] if constant else math.nan,
            max(part["peak"] for part in parts), sum(part["counted"] for part in parts))


def largest_and_total(era_sums) -> tuple[float, float]:
    """The largest per-era sum of magnitudes (``_histogram.era_magnitude_sums``)
    and their total, added in era order."""
    largest = total = 0.0
    for era_sum in np.asarray(era_sums, dtype=np.float64).tolist():
        largest = era_sum if era_sum > largest else largest
        total += era_sum
    return largest, total


# Sums of the squared gradients on their grid stay below 2**SQUARED_SUM_BITS:
# exact in float64 (the CPU's sums) and in int64 (the CUDA backend's).
SQUARED_SUM_BITS = EXACT_SUM_BITS


def squared_gradient_scale(gradients: np.ndarray, n_rows: int | None = None) -> float:
    """Largest power of two ``s`` with ``n * max(g * g) * s <= 2**52``: the grid
    of the squared gradients (rounded_squares). ``n_rows``: the rows any tree
    may hold (FixedPointGradients.n_counted_rows; default: all of
    ``gradients``), so that an output trained on the rows where its target
    is known gets the grid of a fit on those rows alone.

    Squared gradients only enter a node's gradient variance (the sampling
    noise of era_std="between", docs/des.md), never a histogram. On their
    own grid every sum of them is exact: the node's variance is the same
    whatever the order of the rows, the threads, the shards or the backend.
    """
    if len(gradients) == 0:
        return 1.0
    peak = max(float(np.max(gradients)), -float(np.min(gradients)))
    return _squared_scale(peak, len(gradients) if n_rows is None else n_rows)


def _squared_scale(peak: float, n_rows: int) -> float:
    """squared_gradient_scale's power of two, within float64's normal
    powers: squares below about 2**-1000 round to the grid of 2**-1023 (the
    bound still holds); |g| above about 1e154 has no finite square at all.
    The training loop never meets either: it rescales every round's
    gradients to about 1 (GradientScaling)."""
    if not math.isfinite(peak):
        raise FloatingPointError("gradients are not finite")
    magnitude = peak * peak
    if magnitude == 0.0:
        return 1.0
    exponent = (power_of_two_exponent(squared_sum_bound_bits(n_rows), magnitude)
                if math.isfinite(magnitude) else -1022)
    return math.ldexp(1.0, max(-1022, min(MAX_SCALE_EXPONENT, exponent)))


def rounded_squares(gradients: np.ndarray, scale: float, n_threads: int = 1, *,
                    out: np.ndarray | None = None) -> np.ndarray:
    """Each ``g * g`` rounded to a multiple of ``1 / scale`` (half to even),
    into ``out`` (float64, one per gradient) where given."""
    from packboost import _histogram

    if out is None:
        out = np.empty(len(gradients))
    _histogram.round_squares_to_grid(np.ascontiguousarray(gradients, dtype=np.float64), scale,
                                     out, n_threads)
    return out


def squared_sum_bound_bits(n_rows: int) -> int:
    """``SQUARED_SUM_BITS - ceil(log2(n_rows))``: the bound of one row's
    fixed-point g * g (exact: ``(n - 1).bit_length()`` is ``ceil(log2(n))``)."""
    return SQUARED_SUM_BITS - (max(1, n_rows) - 1).bit_length()


# -- scale -----------------------------------------------------------------------------

# Gradients (and hessians) whose largest magnitude is within 2**-ORDINARY_EXPONENT ..
# 2**ORDINARY_EXPONENT are used as they are; a fit outside is rescaled.
ORDINARY_EXPONENT = 64
_SMALLEST_POSITIVE = math.ulp(0.0)  # 2**-1074


def _peak(values: np.ndarray) -> float:
    """max |values| (0 for none; NaN where one is NaN), as max(max, -min):
    no (n_rows,) array of magnitudes is made."""
    if not len(values):
        return 0.0
    largest, smallest = float(np.max(values)), float(np.min(values))
    if math.isnan(largest) or math.isnan(smallest):
        return math.nan
    return abs(max(largest, -smallest))   # never negative (not -0.0 for zeros)


def _rescaling_exponent(peak: float) -> int:
    """0 for values of ordinary magnitude (largest |value| ``peak``; or all
    zero), else the k with ``peak * 2**-k`` in [1, 2)."""
    if not math.isfinite(peak):
        raise FloatingPointError("gradients or hessians are not finite")
    if peak == 0.0 or 2.0**-ORDINARY_EXPONENT <= peak <= 2.0**ORDINARY_EXPONENT:
        return 0
    return math.frexp(peak)[1] - 1


def _rescaled(value: float, exponent: int) -> float:
    """``value * 2**exponent``, where a nonzero value stays nonzero (it may
    become inf: a threshold nothing can pass, or a clip that never binds)."""
    try:
        scaled = math.ldexp(value, exponent)
    except OverflowError:
        return math.copysign(math.inf, value)
    if scaled == 0.0 and value != 0.0:
        return math.copysign(_SMALLEST_POSITIVE, value)
    return scaled


@dataclass(frozen=True)
class GradientScaling:
    """A fit's power-of-two rescaling of gradients and hessians (docs/fixed-point.md §9).

    Squared error is scale-equivariant: for ``y * c`` the gradients are
    ``g * c``, the same splits win and the leaf values are ``c`` times
    larger. Float64 arithmetic is not: split gains are ``G**2 / H``, the
    variances of era gains ``G**4 / H**2``, so targets of ``1e-150`` made
    every gain underflow to 0 (no split at all) and targets of ``1e80``
    made the DES variances overflow (other splits). The training loop
    therefore grows every round on

        g' = g * 2**-gradient_exponent,   h' = h * 2**-hessian_exponent

    of magnitude about 1, with the absolute parameters in the same units
    (:meth:`grower_params`), and turns the leaf values back
    (:meth:`restore`). Multiplying by a power of two is exact in binary
    floating point, and every quantity of the grower and of ``des.h`` is a
    product of powers of ``g`` and ``h`` (gains ``g^2/h``, values ``g/h``,
    variances ``g^4/h^2``, the direction vote ``g^0``), so the rescaled
    fit makes exactly the decisions of the unscaled one wherever that one
    neither overflows nor underflows. Both exponents are 0 for data of
    ordinary magnitude (``ORDINARY_EXPONENT``): such fits are unchanged,
    bit for bit.

    The exponents are chosen once per fit (from the gradients at the base
    score), so the split gains and DES scores of all its rounds share one
    unit: the loss reduction times ``2**(hessian_exponent - 2 *
    gradient_exponent)`` (the loss reduction itself when both are 0).
    """

    gradient_exponent: int = 0
    hessian_exponent: int = 0

    @classmethod
    def for_gradients(cls, gradients: np.ndarray, hessians: np.ndarray, *,
                      shard=None) -> GradientScaling:
        """The rescaling for these gradients; with ``shard``
        (:class:`packboost._row_shard.RowShard`), for the gradients of all
        its shards (the largest magnitudes are exact maxima)."""
        gradient_peak, hessian_peak = _peak(gradients), _peak(hessians)
        if shard is not None:
            gradient_peak, hessian_peak = shard.maximum([gradient_peak, hessian_peak])
        return cls(_rescaling_exponent(gradient_peak), _rescaling_exponent(hessian_peak))

    @property
    def is_identity(self) -> bool:
        return self.gradient_exponent == 0 and self.hessian_exponent == 0

    def apply(self, gradients: np.ndarray, hessians: np.ndarray) -> None:
        """Rescale one round's gradients and hessians in place."""
        if self.gradient_exponent:
            np.ldexp(gradients, -self.gradient_exponent, out=gradients)
        if self.hessian_exponent:
            np.ldexp(hessians, -self.hessian_exponent, out=hessians)

    def grower_params(self, params):
        """``params`` (a :class:`packboost.grower.GrowerParams`) in rescaled units.

        ``reg_lambda`` and ``min_child_weight`` are hessian sums, ``reg_alpha`` a
        gradient sum, ``max_delta_step`` a leaf value (``g / h``),
        ``min_split_gain`` a gain (``g^2 / h``).
        """
        if self.is_identity:
            return params
        a, b = self.gradient_exponent, self.hessian_exponent
        reg_lambda = _rescaled(params.reg_lambda, -b)
        if not math.isfinite(reg_lambda):
            raise ValueError(
                f"reg_lambda={params.reg_lambda!r} is too large for hessians of magnitude "
                f"2**{b} (sample_weight): reg_lambda / hessian exceeds float64; lower "
                "reg_lambda or scale it with sample_weight")
        min_child_weight = _rescaled(params.min_child_weight, -b)
        reg_alpha = _rescaled(params.reg_alpha, -a)
        split = dict(params.split, reg_lambda=reg_lambda, min_child_weight=min_child_weight,
                     reg_alpha=reg_alpha)
        return replace(params, reg_lambda=reg_lambda, min_child_weight=min_child_weight,
                       reg_alpha=reg_alpha,
                       min_split_gain=_rescaled(params.min_split_gain, b - 2 * a),
                       max_delta_step=_rescaled(params.max_delta_step, b - a), split=split)

    def restore(self, nodes: dict, value_bounds: np.ndarray | None = None) -> None:
        """Turn a pack's node values and hessian sums (and the bounds on its
        values, :attr:`packboost.grower.Pack.value_bounds`) back to the fit's
        units, in place."""
        if self.gradient_exponent != self.hessian_exponent:
            np.ldexp(nodes["value"], self.gradient_exponent - self.hessian_exponent,
                     out=nodes["value"])
            if value_bounds is not None:
                np.ldexp(value_bounds, self.gradient_exponent - self.hessian_exponent,
                         out=value_bounds)
        if self.hessian_exponent:
            np.ldexp(nodes["sum_hessian"], self.hessian_exponent, out=nodes["sum_hessian"])
