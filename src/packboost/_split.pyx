# cython: language_level=3
"""Split finding: per-era histograms of a pack's open nodes, scored by DES.

# Notes:
The work of one depth of a pack is a grid of (slot, feature): a *slot* is an
open node of one of the pack's trees (its index in the frontier), a feature is
one of the depth's shared subset K_d. Features are taken in blocks of up to
``features_per_pass``, one block after another; the threads share each
block, first by eras, then by tiles:

    one pass over each era's rows        --build_pack_histograms (a thread per era)-->
        cells[era, slot, feature, bin] for every slot of every tree (docs/cpu-kernels.md §3),
        fixed-point int64 sums (src/packboost/_fixed_point.py)
    each (slot, feature) whose tree may split on it (a thread per tile):
        cells[:, slot, feature, :]  --unpack_tile-->  float (g, h, count) per-era prefix sums
                                    --score_tile-->   best (threshold, missing side)

and only each (slot, feature)'s best candidate is kept. The block's buffer
holds features_per_pass x n_eras x slots x bins cells; when that exceeds the
threads' ``histogram_budget_bytes`` the slots are taken in groups, one pass
per group. Cell sums are exact integer sums and every (slot, feature) is
scored by one thread in a fixed order, so results depend neither on the
thread count nor on the blocking (docs/packs.md §7: a model is a pure
function of data, params and seed).

Scoring a tile (docs/des.md §9) sweeps thresholds t = 0 .. n_bins-1 (left = bins
<= t) and, for each, the missing bin on the left then on the right; a
candidate is scored only if both children meet min_samples_leaf and
min_child_weight (pooled). Every partition is scored once: missing-right is
skipped when the node has no missing rows, and "missing alone on the left" is
left to its mirror, missing-right at the last threshold. The per-era math
lives in csrc/des.h, shared with the CUDA backend. Ties keep the first
candidate seen: lower feature, lower threshold, missing-left before right.

Constraints (docs/des.md §14), when the driver passes them: a slot with value
bounds scores its candidates at Newton values clipped to them
(des_candidate_begin_bounded, des_bounded_gain), a candidate of a feature with
a monotone constraint must order its children's clipped values, and a (slot,
feature) pair that interaction constraints forbid is not scored. Slots
without bounds take the unconstrained code, bit for bit.

With best_per_slot (what a fit asks for), realized gains and equal era
weights, each slot's tiles are first bounded from their cells summed over
eras (bound_slot_tiles), scored highest bound first, and a tile whose bound is
below its slot's best score so far is never unpacked (docs/cpu-kernels.md §5).

Costs per candidate: the realized mean is closed-form (no pass over eras);
one pass over the eras computes the spread (skipped when lambda_dro = 0) and
the direction vote (skipped when lambda_dir = 0); newton gains need one more
pass for their mean.
"""

import numpy as np

from cython.parallel cimport prange, threadid
from libc.math cimport INFINITY, NAN, fabs
from libc.stdint cimport int8_t, uint8_t, int32_t, int64_t, uint64_t

from packboost.tree cimport bin_code_t, feature_index_t, bin_index_t, node_index_t
from packboost._types cimport gradient_t, row_index_t, offset_t, hist_entry
from packboost._tasks cimport ROWS_PER_TASK
from packboost._histogram cimport (__builtin_prefetch, MAX_PACK_SIZE, MAX_FEATURES_PER_PASS, PAIR_SCRATCH_CELLS,
                                   fixed_point_rows, rows_of_tree, view_outputs,
                                   view_fixed_point, era_tree_flags, block_cell_offsets,
                                   tree_cell_offsets, build_pack_histograms, derive_slots,
                                   unpack_tile, add_to_pooled,
                                   SLOT_SKIP, SLOT_BUILD, SLOT_DERIVE)
from packboost._pooled cimport pb_pool_layout, pb_pool_rows
from packboost._histogram import HIST_DTYPE
from packboost._split_params cimport (pb_split_params, make_split_params, candidate_is_scored,
                                      monotone_order_holds,
                                      DES_ERA_GAIN_NEWTON,
                                      DES_ERA_GAIN_REALIZED, PB_ERA_WEIGHTING_COUNT,
                                      PB_ERA_WEIGHTING_EQUAL)
from packboost._des cimport (des_candidate_t, des_result_t, des_pooled_gain,
                             des_candidate_begin, des_candidate_begin_bounded, des_clip,
                             des_leaf_value, des_bounded_gain, des_era_gain,
                             des_realized_mean,
                             des_candidate_set_mean, des_candidate_set_noise,
                             des_era_terms_t, des_grid_t, des_grid_sums_t,
                             des_candidate_era_terms, des_terms_max, des_grid_of,
                             des_era_weight_bound,
                             des_grid_exponent, des_grid_inverse_step, des_to_grid,
                             des_from_grid, des_grid_sum, des_grid_sums_of,
                             des_weight_total,
                             des_weight_squares, des_candidate_set_sums,
                             des_candidate_finish)


# Default cap on one thread's histogram buffer; more slots are done in groups.
# Each group is one more pass over the rows and their codes from memory: at
# Numerai scale, 2 threads, 64 -> 128 MiB put depths 4-5 in one group each
# and took 9-16% off them (1 thread, 64 -> 256 MiB: 18-21%; RESULTS.md,
# 2026-11-26 6d337fc) for ~60 MB more at depth 5.
DEFAULT_HISTOGRAM_BUDGET_BYTES = 128 * 1024 * 1024
# Features histogrammed in one pass over the rows (see build_pack_histograms):
# all a block can hold. Wider blocks read a row's slot and gradient once for
# more updates; at Numerai scale (50 features per depth) one block of 50 ran
# 0.33-0.34 s/tree against 0.40 for two of 25 (benchmarks/RESULTS.md).
DEFAULT_FEATURES_PER_PASS = MAX_FEATURES_PER_PASS
# find_best_splits(cells_only, pooled_cells) sums a block's cells over the
# eras a chunk of eras at a time, while that chunk's cells are still in cache
# (about a core's L2): eras of at most this many bytes of cells. Pooled after
# all eras, a deep depth's cells were read back from memory (at 375k rows x
# 400, 150 eras: 0.10 s of the deepest depth's 0.26 s, 0.06 s in chunks of
# 1-2 MB; benchmarks/RESULTS.md 2026-11-29).
POOL_CHUNK_BYTES = 1024 * 1024
# find_best_splits lays a slot's run out for its tree's features only where it
# can (tree_cell_offsets); False keeps the block-wide runs everywhere. The
# splits are the same either way (tests compare both).
RUNS_PER_TREE = True
# Histogram work items per thread at least (an item is an era, or a part of
# its features when eras are few), for the dynamic schedule to balance.
cdef enum:
    ITEMS_PER_THREAD = 4
# Slots per thread at least for scoring a slot's tiles on one thread (pooled
# bounds); with fewer the tiles are shared out.
cdef enum:
    SLOTS_PER_THREAD = 2
# Eras ahead whose runs bound_slot_tiles asks for.
cdef enum:
    BOUND_PREFETCH_ERAS = 6

# Per-era scratch arrays of one thread, each of length n_eras, for the eras
# with rows in the tile, compacted.
cdef enum:
    SCRATCH_WEIGHT = 0
    SCRATCH_G
    SCRATCH_H
    SCRATCH_COUNT
    SCRATCH_MISSING_G
    SCRATCH_MISSING_H
    SCRATCH_MISSING_COUNT
    SCRATCH_SQUARE            # a candidate's era terms (des_candidate_era_terms),
    SCRATCH_NOISE             # kept between the pass that finds their largest
    SCRATCH_DIRECTION         # magnitudes and the one that adds them on the grid
    N_SCRATCH

# find_best_splits' slot_left record: score, candidate position, left sums.
cdef enum:
    SLOT_LEFT_FIELDS = 5

# Per-threshold and per-candidate scratch of score_tile, each of n_bins
# doubles: 5 per threshold, 3 x 2 per candidate (two per threshold).
cdef enum:
    N_CANDIDATE_SCRATCH = 11


cdef struct tile_best:
    double score
    double gain
    double mean
    double std
    double direction
    bin_index_t threshold
    uint8_t missing_left
    uint8_t found
    # the left child's pooled sums (missing rows included when they go
    # left): exact, so the children's node sums need no pass over the rows
    double left_g
    double left_h
    double left_count


# The struct's codes for the parameters' strings (tests; the struct is filled
# by _split_params.make_split_params).
ERA_GAIN_CODES = {"realized": DES_ERA_GAIN_REALIZED, "newton": DES_ERA_GAIN_NEWTON}
ERA_WEIGHTING_CODES = {"equal": PB_ERA_WEIGHTING_EQUAL, "count": PB_ERA_WEIGHTING_COUNT}


def split_params_as_dict(dict params):
    """The split kernels' struct (csrc/split_params.h) filled from ``params``,
    read back as a dict: what the kernels actually receive (tests)."""
    return make_split_params(params)


cdef inline double candidate_bound(double mean, double lambda_dir) noexcept nogil:
    # DES = mu - lambda_dro sigma + lambda_dir |mu| D is at most mu + lambda_dir |mu|
    # (sigma >= 0, |D| <= 1): what a candidate can score before its era pass.
    return mean + lambda_dir * fabs(mean)


cdef inline void begin_candidate(
        des_candidate_t* state, Py_ssize_t bin_idx, bint missing_goes_left,
        const double* at_p_g, const double* at_p_h,      # pooled left sums per threshold
        double p_missing_g, double p_missing_h, double sum_g, double sum_h,
        const pb_split_params* params, bint with_direction,
        bint bounded, double lower, double upper,        # the node's value bounds, if any
        double* cand_g, double* cand_h,                  # OUT the left child's pooled sums
) noexcept nogil:
    """Start the DES state of candidate (threshold ``bin_idx``, missing side)."""
    cand_g[0] = at_p_g[bin_idx] + p_missing_g if missing_goes_left else at_p_g[bin_idx]
    cand_h[0] = at_p_h[bin_idx] + p_missing_h if missing_goes_left else at_p_h[bin_idx]
    if bounded:
        des_candidate_begin_bounded(state, sum_g, sum_h, cand_g[0], cand_h[0], lower, upper,
                                    params.reg_lambda, params.reg_alpha, params.era_gain,
                                    params.dir_tanh_scale, with_direction)
    else:
        des_candidate_begin(state, sum_g, sum_h, cand_g[0], cand_h[0], params.reg_lambda,
                            params.reg_alpha, params.era_gain, params.dir_tanh_scale,
                            with_direction)


cdef inline Py_ssize_t list_candidates(
        Py_ssize_t n_bins,
        const double* at_p_g, const double* at_p_h, const double* at_p_count,
        double p_missing_g, double p_missing_h, double p_missing_count,
        double sum_g, double sum_h, double sum_count,       # the node's pooled sums
        const pb_split_params* params,
        int monotone, double lower, double upper,
        double* candidate_code,                              # OUT 2 t + side per candidate
) noexcept nogil:
    """The candidates of a tile worth scoring, from its pooled sums: thresholds
    t = 0 .. n_bins - 1 (left = bins <= t), each missing side, that meet
    min_samples_leaf, min_child_weight and the monotone order (docs/des.md
    §9). Returns their number."""
    cdef Py_ssize_t bin_idx, n_candidates = 0
    cdef int side
    cdef bint missing_goes_left
    cdef double bin_count, p_left_h, p_left_count, cand_h, cand_count
    for bin_idx in range(n_bins):
        bin_count = at_p_count[bin_idx] - (at_p_count[bin_idx - 1] if bin_idx > 0 else 0.0)
        if bin_count == 0.0:
            # An empty bin leaves the partition (and every sum) of the previous
            # threshold unchanged: its candidates would tie it and lose. Small
            # nodes of many-bin features skip most thresholds here.
            continue
        p_left_h = at_p_h[bin_idx]
        p_left_count = at_p_count[bin_idx]
        for side in range(2):
            missing_goes_left = side == 0
            cand_h = p_left_h + p_missing_h if missing_goes_left else p_left_h
            cand_count = p_left_count + p_missing_count if missing_goes_left else p_left_count
            if not candidate_is_scored(params, missing_goes_left, p_left_count,
                                       p_missing_count, cand_count, cand_h, sum_count, sum_h):
                continue
            if monotone != 0 and not monotone_order_holds(
                    monotone,
                    at_p_g[bin_idx] + p_missing_g if missing_goes_left else at_p_g[bin_idx],
                    cand_h, sum_g, sum_h, lower, upper, params):
                continue
            candidate_code[n_candidates] = 2 * bin_idx + side
            n_candidates += 1
    return n_candidates


cdef inline void realized_candidate_means(
        Py_ssize_t n_candidates, const double* candidate_code,
        const double* at_p_g, const double* at_p_h,      # pooled left sums per threshold
        const double* at_w_g, const double* at_w_h,      # era-weighted left sums
        double p_missing_g, double p_missing_h, double w_missing_g, double w_missing_h,
        double sum_g, double sum_h, double w_sum_g, double w_sum_h, double weight_total,
        const pb_split_params* params,
        double lower, double upper, int monotone,
        double* candidate_mean, double* candidate_ub,    # OUT per candidate
) noexcept nogil:
    """Closed-form means of realized era gains (docs/des.md §5) and the bound
    on each candidate's score (candidate_bound)."""
    cdef Py_ssize_t k, bin_idx
    cdef int code
    cdef bint missing_goes_left
    cdef bint bounded = monotone != 0 or lower > -INFINITY or upper < INFINITY
    cdef double cand_g, cand_h, cand_w_g, cand_w_h, mean
    cdef des_candidate_t state
    for k in range(n_candidates):
        code = <int>candidate_code[k]
        bin_idx = code >> 1
        missing_goes_left = (code & 1) == 0
        begin_candidate(&state, bin_idx, missing_goes_left, at_p_g, at_p_h, p_missing_g,
                        p_missing_h, sum_g, sum_h, params, params.lambda_dir != 0.0, bounded,
                        lower, upper, &cand_g, &cand_h)
        cand_w_g = at_w_g[bin_idx] + w_missing_g if missing_goes_left else at_w_g[bin_idx]
        cand_w_h = at_w_h[bin_idx] + w_missing_h if missing_goes_left else at_w_h[bin_idx]
        mean = des_realized_mean(&state, w_sum_g, w_sum_h, cand_w_g, cand_w_h, weight_total)
        candidate_mean[k] = mean
        candidate_ub[k] = candidate_bound(mean, params.lambda_dir)


cdef inline void era_weighted_sums(
        const hist_entry* hist, Py_ssize_t era_stride, const int32_t* era_ids,
        Py_ssize_t n_present, Py_ssize_t n_bins, const double* era_weight,
        const double* era_g, const double* era_h, const double* missing_g,
        const double* missing_h,
        double* at_w_g, double* at_w_h,                  # OUT per threshold t
        double* w_sum_g, double* w_sum_h, double* w_missing_g, double* w_missing_h,  # OUT
) noexcept nogil:
    """Count weights' era-weighted sums of a tile, order-free (docs/des.md
    §6.3): sum_e w_e x_e for x the era's left sums at each threshold (its
    prefix cells), its totals and its missing bin, each term rounded once to
    a grid given by the largest |w_e x_e| of the tile (one for gradients,
    one for hessians) and added as int64 -- the numbers the CUDA warp and
    the Dask shards add in their own orders."""
    cdef Py_ssize_t i, bin_idx
    cdef double w, largest_g = 0.0, largest_h = 0.0, inverse_g, inverse_h
    cdef long long units_g, units_h, missing_units_g, missing_units_h
    cdef int exponent_g, exponent_h
    cdef const hist_entry* row
    for i in range(n_present):
        w = era_weight[i]
        largest_g = max(largest_g, fabs(w * era_g[i]), fabs(w * missing_g[i]))
        largest_h = max(largest_h, fabs(w * era_h[i]), fabs(w * missing_h[i]))
        row = hist + era_ids[i] * era_stride
        for bin_idx in range(n_bins):
            largest_g = max(largest_g, fabs(w * row[bin_idx].sum_gradients))
            largest_h = max(largest_h, fabs(w * row[bin_idx].sum_hessians))
    exponent_g = des_grid_exponent(largest_g, <double>n_present)
    exponent_h = des_grid_exponent(largest_h, <double>n_present)
    inverse_g = des_grid_inverse_step(exponent_g)
    inverse_h = des_grid_inverse_step(exponent_h)
    units_g = units_h = missing_units_g = missing_units_h = 0
    for i in range(n_present):
        w = era_weight[i]
        units_g += des_to_grid(w * era_g[i], inverse_g)
        units_h += des_to_grid(w * era_h[i], inverse_h)
        missing_units_g += des_to_grid(w * missing_g[i], inverse_g)
        missing_units_h += des_to_grid(w * missing_h[i], inverse_h)
    w_sum_g[0] = des_from_grid(units_g, exponent_g)
    w_sum_h[0] = des_from_grid(units_h, exponent_h)
    w_missing_g[0] = des_from_grid(missing_units_g, exponent_g)
    w_missing_h[0] = des_from_grid(missing_units_h, exponent_h)
    for bin_idx in range(n_bins):
        units_g = units_h = 0
        for i in range(n_present):
            row = hist + era_ids[i] * era_stride
            units_g += des_to_grid(era_weight[i] * row[bin_idx].sum_gradients, inverse_g)
            units_h += des_to_grid(era_weight[i] * row[bin_idx].sum_hessians, inverse_h)
        at_w_g[bin_idx] = des_from_grid(units_g, exponent_g)
        at_w_h[bin_idx] = des_from_grid(units_h, exponent_h)


cdef tile_best score_tile(
        hist_entry* hist,                # IN  cell (era, bin) at hist[era * era_stride + bin]:
                                         #     non-missing bin t the era's sum over bins <= t
                                         #     (unpack_tile's prefix), the missing bin its own
        Py_ssize_t era_stride,
        Py_ssize_t n_eras,
        Py_ssize_t n_bins,               # non-missing bins; missing bin = n_bins
        const pb_split_params* params,
        double gradient_variance,        # per-row variance of the node's gradients
        double lower, double upper,      # bounds on the node's value (-inf, inf: none)
        int monotone,                    # the feature's constraint: -1, 0 or +1
        double score_floor,              # a score some candidate of the node reached
                                         # (-inf: none): candidates that cannot beat it
                                         # skip their era pass (find_best_splits)
        int32_t* era_ids,                # scratch (n_eras,)
        double* scratch,                 # scratch (N_SCRATCH, n_eras)
        double* candidates,              # scratch (N_CANDIDATE_SCRATCH, n_bins)
) noexcept nogil:
    # Returned by value: inside prange an assigned variable is thread-private,
    # a struct written through a pointer would be shared by every thread.
    cdef Py_ssize_t era, bin_idx, i, n_present = 0, n_candidates = 0, k, first
    cdef double* era_weight = scratch + SCRATCH_WEIGHT * n_eras
    cdef double* era_g = scratch + SCRATCH_G * n_eras
    cdef double* era_h = scratch + SCRATCH_H * n_eras
    cdef double* era_count = scratch + SCRATCH_COUNT * n_eras
    cdef double* missing_g = scratch + SCRATCH_MISSING_G * n_eras
    cdef double* missing_h = scratch + SCRATCH_MISSING_H * n_eras
    cdef double* missing_count = scratch + SCRATCH_MISSING_COUNT * n_eras
    cdef double* term_square = scratch + SCRATCH_SQUARE * n_eras
    cdef double* term_noise = scratch + SCRATCH_NOISE * n_eras
    cdef double* term_direction = scratch + SCRATCH_DIRECTION * n_eras
    # per threshold t (left = bins <= t): pooled and era-weighted left sums
    cdef double* at_p_g = candidates
    cdef double* at_p_h = at_p_g + n_bins
    cdef double* at_p_count = at_p_h + n_bins
    cdef double* at_w_g = at_p_count + n_bins
    cdef double* at_w_h = at_w_g + n_bins
    # per candidate (up to two per threshold): code 2 t + side, mean, bound
    cdef double* candidate_code = at_w_h + n_bins
    cdef double* candidate_mean = candidate_code + 2 * n_bins
    cdef double* candidate_ub = candidate_mean + 2 * n_bins
    cdef hist_entry* row
    cdef hist_entry* cell
    # pooled (p), era-weighted (w) sums of the node, of its missing rows, and
    # of the non-missing bins left of the threshold
    cdef double sum_g = 0.0, sum_h = 0.0, sum_count = 0.0, weight_total, weight_squares
    cdef double count_squares = 0.0, largest_era_rows = 0.0
    cdef des_era_terms_t terms, terms_max
    cdef des_grid_t grid
    cdef des_grid_sums_t grid_sums
    cdef double w_sum_g = 0.0, w_sum_h = 0.0
    cdef double p_missing_g = 0.0, p_missing_h = 0.0, p_missing_count = 0.0
    cdef double w_missing_g = 0.0, w_missing_h = 0.0
    cdef double cand_g, cand_h, g, h, c, w, mean
    cdef double era_left_g, era_left_h, era_left_count
    cdef int missing_goes_left, code
    cdef bint with_direction = params.lambda_dir != 0.0
    # Unconstrained nodes take the plain Newton path, bit for bit.
    cdef bint bounded = monotone != 0 or lower > -INFINITY or upper < INFINITY
    cdef bint needs_pass = (params.lambda_dro != 0.0 or with_direction
                            or params.era_gain == DES_ERA_GAIN_NEWTON)
    cdef des_candidate_t state
    cdef des_result_t result
    cdef tile_best best
    cdef int best_code = 0

    best.found = 0
    best.score = -INFINITY

    # One pass over the eras: the eras with rows in the node, their totals and
    # weights (docs/des.md §4), and the pooled left sums per threshold. A tile
    # row holds the era's left sums per threshold already (unpack_tile's
    # prefix sums), so an era's total is its last prefix plus its missing bin.
    # Pooled sums are exact in any order (grid values, docs/fixed-point.md):
    # the same numbers as a bin-by-bin scan.
    for bin_idx in range(n_bins):
        at_p_g[bin_idx] = 0.0
        at_p_h[bin_idx] = 0.0
        at_p_count[bin_idx] = 0.0
    for era in range(n_eras):
        row = hist + era * era_stride
        g = row[n_bins].sum_gradients
        h = row[n_bins].sum_hessians
        c = row[n_bins].count
        if n_bins > 0:
            g = row[n_bins - 1].sum_gradients + g
            h = row[n_bins - 1].sum_hessians + h
            c = row[n_bins - 1].count + c
        if c == 0.0:
            continue
        w = params.era_alpha + c if params.era_weighting == PB_ERA_WEIGHTING_COUNT else 1.0
        era_ids[n_present] = <int32_t>era
        era_g[n_present] = g
        era_h[n_present] = h
        era_count[n_present] = c
        era_weight[n_present] = w
        missing_g[n_present] = row[n_bins].sum_gradients
        missing_h[n_present] = row[n_bins].sum_hessians
        missing_count[n_present] = row[n_bins].count
        sum_g += g
        sum_h += h
        sum_count += c
        count_squares += c * c
        largest_era_rows = max(largest_era_rows, c)
        p_missing_g += missing_g[n_present]
        p_missing_h += missing_h[n_present]
        p_missing_count += missing_count[n_present]
        for bin_idx in range(n_bins):
            at_p_g[bin_idx] += row[bin_idx].sum_gradients
            at_p_h[bin_idx] += row[bin_idx].sum_hessians
            at_p_count[bin_idx] += row[bin_idx].count
        n_present += 1

    # The era weights' totals from integers, exact in any order (csrc/des.h).
    weight_total = des_weight_total(params.era_weighting == PB_ERA_WEIGHTING_COUNT,
                                    <double>n_present, sum_count, params.era_alpha)
    weight_squares = des_weight_squares(params.era_weighting == PB_ERA_WEIGHTING_COUNT,
                                        <double>n_present, sum_count, count_squares,
                                        params.era_alpha)

    # Era-weighted sums: with equal weights the pooled ones; with count
    # weights on grids, order-free (era_weighted_sums).
    if params.era_weighting == PB_ERA_WEIGHTING_COUNT:
        era_weighted_sums(hist, era_stride, era_ids, n_present, n_bins, era_weight, era_g,
                          era_h, missing_g, missing_h, at_w_g, at_w_h, &w_sum_g, &w_sum_h,
                          &w_missing_g, &w_missing_h)
    else:
        w_sum_g = sum_g
        w_sum_h = sum_h
        w_missing_g = p_missing_g
        w_missing_h = p_missing_h
        at_w_g = at_p_g
        at_w_h = at_p_h

    n_candidates = list_candidates(n_bins, at_p_g, at_p_h, at_p_count, p_missing_g,
                                   p_missing_h, p_missing_count, sum_g, sum_h, sum_count,
                                   params, monotone, lower, upper, candidate_code)
    # Means and bounds of every candidate (realized: closed form; newton: a
    # pass over the eras).
    if params.era_gain == DES_ERA_GAIN_NEWTON:
        for k in range(n_candidates):
            code = <int>candidate_code[k]
            bin_idx = code >> 1
            missing_goes_left = (code & 1) == 0
            begin_candidate(&state, bin_idx, missing_goes_left, at_p_g, at_p_h, p_missing_g,
                            p_missing_h, sum_g, sum_h, params, with_direction, bounded, lower,
                            upper, &cand_g, &cand_h)
            # sum_e w_e gain_e on a grid (csrc/des.h des_grid_sum)
            for i in range(n_present):
                cell = hist + era_ids[i] * era_stride + bin_idx
                era_left_g = cell.sum_gradients + missing_g[i] if missing_goes_left \
                    else cell.sum_gradients
                era_left_h = cell.sum_hessians + missing_h[i] if missing_goes_left \
                    else cell.sum_hessians
                term_square[i] = era_weight[i] * des_era_gain(&state, era_g[i], era_h[i],
                                                              era_left_g, era_left_h)
            mean = des_grid_sum(term_square, n_present) / weight_total
            candidate_mean[k] = mean
            candidate_ub[k] = candidate_bound(mean, params.lambda_dir)
    else:
        realized_candidate_means(n_candidates, candidate_code, at_p_g, at_p_h, at_w_g, at_w_h,
                                 p_missing_g, p_missing_h, w_missing_g, w_missing_h,
                                 sum_g, sum_h, w_sum_g, w_sum_h, weight_total, params,
                                 lower, upper, monotone, candidate_mean, candidate_ub)

    # Best first: the candidate with the highest bound gets its era pass
    # first, so that the others are compared with a strong score and most
    # skip theirs (a candidate whose bound cannot beat the best -- ties keep
    # the lower code: lower threshold, missing-left first -- is skipped).
    # The result is the first maximum in code order, as a plain scan finds.
    first = 0
    for k in range(1, n_candidates):
        if candidate_ub[k] > candidate_ub[first]:
            first = k
    for i in range(n_candidates + 1):
        if i == 0:
            k = first
        else:
            k = i - 1
            if k == first:
                continue
        if n_candidates == 0:
            break
        code = <int>candidate_code[k]
        if best.found and (candidate_ub[k] < best.score
                           or (candidate_ub[k] == best.score and code > best_code)):
            continue
        if candidate_ub[k] < score_floor:
            continue  # strictly below another tile's score: it cannot win the node
        bin_idx = code >> 1
        missing_goes_left = (code & 1) == 0
        begin_candidate(&state, bin_idx, missing_goes_left, at_p_g, at_p_h, p_missing_g,
                        p_missing_h, sum_g, sum_h, params, with_direction, bounded, lower,
                        upper, &cand_g, &cand_h)
        des_candidate_set_mean(&state, candidate_mean[k])
        if params.era_std_between:
            des_candidate_set_noise(&state, gradient_variance)
        if needs_pass:
            # The era terms and their largest magnitudes, then their sums on
            # the grids those give (order-free: csrc/des.h, docs/des.md §6.3).
            terms_max.square = 0.0
            terms_max.noise = 0.0
            terms_max.direction = 0.0
            for i in range(n_present):
                cell = hist + era_ids[i] * era_stride + bin_idx
                era_left_g = cell.sum_gradients
                era_left_h = cell.sum_hessians
                era_left_count = cell.count
                if missing_goes_left:
                    era_left_g = era_left_g + missing_g[i]
                    era_left_h = era_left_h + missing_h[i]
                    era_left_count = era_left_count + missing_count[i]
                terms = des_candidate_era_terms(&state, era_weight[i], era_g[i], era_h[i],
                                                era_left_g, era_left_h, era_left_count,
                                                era_count[i] - era_left_count, 1)
                term_square[i] = terms.square
                term_noise[i] = terms.noise
                term_direction[i] = terms.direction
                des_terms_max(&terms_max, &terms)
            grid = des_grid_of(&terms_max, des_era_weight_bound(
                params.era_weighting == PB_ERA_WEIGHTING_COUNT, largest_era_rows,
                params.era_alpha), <double>n_present)
            grid_sums = des_grid_sums_of(term_square, term_noise, term_direction, n_present,
                                         &grid)
            des_candidate_set_sums(&state, weight_total, weight_squares, &grid_sums, &grid)
        result = des_candidate_finish(&state, params.lambda_dro, params.lambda_dir)
        if result.score > best.score or (best.found and result.score == best.score
                                          and code < best_code):
            best.found = 1
            best_code = code
            best.score = result.score
            best.mean = result.mean
            best.std = result.std
            best.direction = result.direction
            if bounded:
                best.gain = des_bounded_gain(&state, sum_g, sum_h, cand_g, cand_h)
            else:
                best.gain = des_pooled_gain(sum_g, sum_h, cand_g, cand_h,
                                            params.reg_lambda, params.reg_alpha)
            best.threshold = <bin_index_t>bin_idx
            best.missing_left = <uint8_t>missing_goes_left
            best.left_g = cand_g
            best.left_h = cand_h
            best.left_count = (at_p_count[bin_idx] + p_missing_count if missing_goes_left
                               else at_p_count[bin_idx])
    return best



cdef double pooled_tile_bound(
        const int64_t* gradient_sums,    # IN  (width,) the tile's cells summed over eras:
        const int64_t* counts,           #     g_q sums, row counts and (NULL: constant
        const int64_t* hessian_sums,     #     hessian) h_q sums; bin n_bins is the missing one
        Py_ssize_t n_bins,
        double n_present,                # eras with rows in the node
        const fixed_point_rows* rows,
        const pb_split_params* params,
        double lower, double upper, int monotone,
        double* candidates,              # scratch (N_CANDIDATE_SCRATCH, n_bins)
) noexcept nogil:
    """The highest bound (candidate_bound) of any candidate of a tile, from its
    pooled sums alone, for realized gains with equal era weights: -inf when
    it has no candidate.

    The same numbers as score_tile's: its pooled and era-weighted sums are
    sums over eras of exact grid values, equal to these sums of integers
    turned to floats (docs/fixed-point.md), and the candidates and their
    means come from the same functions. So a tile whose bound is below a
    score its slot reached has no candidate that score_tile would pass to
    its era pass, and can be left unread."""
    cdef double* at_p_g = candidates
    cdef double* at_p_h = at_p_g + n_bins
    cdef double* at_p_count = at_p_h + n_bins
    cdef double* candidate_code = at_p_count + 3 * n_bins
    cdef double* candidate_mean = candidate_code + 2 * n_bins
    cdef double* candidate_ub = candidate_mean + 2 * n_bins
    cdef double inverse_gradient_scale = rows.inverse_gradient_scale
    cdef double inverse_hessian_scale = rows.inverse_hessian_scale
    cdef int64_t running_g = 0, running_count = 0, running_h = 0
    cdef Py_ssize_t bin_idx, k, n_candidates
    cdef double p_missing_g, p_missing_h, p_missing_count, sum_g, sum_h, sum_count
    cdef double best = -INFINITY
    for bin_idx in range(n_bins):
        running_g = running_g + gradient_sums[bin_idx]
        running_count = running_count + counts[bin_idx]
        at_p_g[bin_idx] = running_g * inverse_gradient_scale
        at_p_count[bin_idx] = <double>running_count
        if hessian_sums == NULL:
            at_p_h[bin_idx] = at_p_count[bin_idx] * rows.constant_hessian
        else:
            running_h = running_h + hessian_sums[bin_idx]
            at_p_h[bin_idx] = running_h * inverse_hessian_scale
    p_missing_g = gradient_sums[n_bins] * inverse_gradient_scale
    p_missing_count = <double>counts[n_bins]
    p_missing_h = (p_missing_count * rows.constant_hessian if hessian_sums == NULL
                   else hessian_sums[n_bins] * inverse_hessian_scale)
    sum_g = p_missing_g
    sum_h = p_missing_h
    sum_count = p_missing_count
    if n_bins > 0:
        sum_g = at_p_g[n_bins - 1] + p_missing_g
        sum_h = at_p_h[n_bins - 1] + p_missing_h
        sum_count = at_p_count[n_bins - 1] + p_missing_count
    n_candidates = list_candidates(n_bins, at_p_g, at_p_h, at_p_count, p_missing_g,
                                   p_missing_h, p_missing_count, sum_g, sum_h, sum_count,
                                   params, monotone, lower, upper, candidate_code)
    # Equal weights: the era-weighted sums are the pooled ones, the weight
    # total the number of eras present.
    realized_candidate_means(n_candidates, candidate_code, at_p_g, at_p_h, at_p_g, at_p_h,
                             p_missing_g, p_missing_h, p_missing_g, p_missing_h,
                             sum_g, sum_h, sum_g, sum_h, n_present, params,
                             lower, upper, monotone, candidate_mean, candidate_ub)
    for k in range(n_candidates):
        if candidate_ub[k] > best:
            best = candidate_ub[k]
    return best


cdef void bound_slot_tiles(
        const int64_t* run_cells,        # IN  the slot's run of era 0 in the block's cells
        Py_ssize_t era_stride,           #     int64 entries from one era's run to the next
        Py_ssize_t n_eras,
        Py_ssize_t n_block,
        const Py_ssize_t* member_offset, # IN  (n_block,) first cell of each feature in the run
        const feature_index_t* block_features,
        const bin_index_t* n_bins,       # IN  (n_features,)
        const uint8_t* member_scored,    # IN  (n_block,) will the tile be scored at all?
        const fixed_point_rows* rows,
        const pb_split_params* params,
        double lower, double upper,      # the slot's value bounds
        const int8_t* monotone,          # IN  (n_block,) or NULL
        int64_t* sums,                   # scratch (3, run length)
        double* candidates,              # scratch (N_CANDIDATE_SCRATCH, max width)
        double* member_bound,            # OUT (n_block,) pooled_tile_bound, -inf: not scored
        int32_t* member_order,           # OUT (n_block,) members by bound, highest first
        const uint8_t* era_has_rows,     # IN  era e's flag at era_has_rows[e * flag_stride]:
        Py_ssize_t flag_stride,          #     0 if the slot's tree has no row in it (its
                                         #     cells are zero: not read), or NULL
) noexcept nogil:
    """Bounds on the best score of each tile of a slot from its cells summed
    over eras, and the order to score them in (find_best_splits).

    Summing a run of packed cells over eras is a few integer operations per
    cell -- a fraction of unpacking and scanning a tile -- and a tile whose
    bound cannot reach the slot's best score is never unpacked. Scored
    highest bound first, the slot's best score is usually found by its first
    tiles."""
    cdef Py_ssize_t words = rows.words, era, member, bin_idx, width, first_member = -1
    cdef Py_ssize_t n_segments = 0, segment, i, j, start, end
    cdef Py_ssize_t segment_start[MAX_FEATURES_PER_PASS]
    cdef Py_ssize_t segment_end[MAX_FEATURES_PER_PASS]
    cdef int count_bits = rows.count_bits
    cdef uint64_t mask = ((<uint64_t>1) << count_bits) - 1
    cdef uint64_t sign_bit = (<uint64_t>1) << 63
    cdef uint64_t cell, era_rows, shift_excess
    cdef uint64_t* gradient_sums = <uint64_t*>sums
    cdef uint64_t* counts
    cdef uint64_t* hessian_sums
    cdef const uint64_t* source
    cdef double n_present = 0.0, key
    cdef Py_ssize_t n_summed = 0      # eras whose cells were added (shift_excess)
    cdef int32_t moving
    # The scored features as runs of consecutive cells (all of the block when
    # every feature is used).
    for member in range(n_block):
        member_bound[member] = -INFINITY
        member_order[member] = <int32_t>member
        if not member_scored[member]:
            continue
        if first_member < 0:
            first_member = member
        width = n_bins[block_features[member]] + 1
        if n_segments > 0 and segment_end[n_segments - 1] == member_offset[member]:
            segment_end[n_segments - 1] = member_offset[member] + width
        else:
            segment_start[n_segments] = member_offset[member]
            segment_end[n_segments] = member_offset[member] + width
            n_segments += 1
    if first_member < 0:
        return
    counts = gradient_sums + segment_end[n_segments - 1]
    hessian_sums = counts + segment_end[n_segments - 1]
    for segment in range(n_segments):
        for j in range(segment_start[segment], segment_end[segment]):
            gradient_sums[j] = 0
            counts[j] = 0
            hessian_sums[j] = 0
    # An arithmetic shift of a packed cell, x >> count_bits, is the logical
    # shift of x + 2**63 minus 2**(63 - count_bits): the offsets are
    # subtracted once at the end (modulo 2**64; the true sums fit an int64),
    # and the loop is a logical shift, an and and two adds per cell, which
    # the compiler vectorises.
    for era in range(n_eras):
        source = <const uint64_t*>run_cells + era * era_stride
        # An era's run is a slot group's runs away from the last one's (100s
        # of KiB deep in a pack): ask for every line of the run some eras
        # ahead, or each era waits on memory. Before the skip below, so that
        # every era read has been asked for, whether or not this one is.
        if era + BOUND_PREFETCH_ERAS < n_eras and (
                era_has_rows == NULL
                or era_has_rows[(era + BOUND_PREFETCH_ERAS) * flag_stride]):
            for segment in range(n_segments):
                for j in range(segment_start[segment] * words, segment_end[segment] * words, 8):
                    __builtin_prefetch(source + BOUND_PREFETCH_ERAS * era_stride + j)
                __builtin_prefetch(source + BOUND_PREFETCH_ERAS * era_stride
                                   + segment_end[segment] * words - 1)
        # An era the tree did not draw adds zeros and is not present (a
        # quarter of the eras at the default era_subsample).
        if era_has_rows != NULL and not era_has_rows[era * flag_stride]:
            continue
        n_summed += 1
        for segment in range(n_segments):
            start = segment_start[segment]
            end = segment_end[segment]
            if words == 1:
                for j in range(start, end):
                    cell = source[j]
                    gradient_sums[j] += (cell ^ sign_bit) >> count_bits
                    counts[j] += cell & mask
            else:
                for j in range(start, end):
                    cell = source[2 * j]
                    gradient_sums[j] += (cell ^ sign_bit) >> count_bits
                    counts[j] += cell & mask
                    hessian_sums[j] += source[2 * j + 1]
        # Every row of the node is in one bin of every feature: the era is
        # present if any bin of one feature holds rows.
        era_rows = 0
        width = n_bins[block_features[first_member]] + 1
        for bin_idx in range(width):
            era_rows |= source[(member_offset[first_member] + bin_idx) * words] & mask
        if era_rows != 0:
            n_present += 1.0
    shift_excess = <uint64_t>n_summed * (sign_bit >> count_bits)
    for segment in range(n_segments):
        for j in range(segment_start[segment], segment_end[segment]):
            gradient_sums[j] -= shift_excess
    for member in range(first_member, n_block):
        if not member_scored[member]:
            continue
        j = member_offset[member]
        member_bound[member] = pooled_tile_bound(
            <int64_t*>gradient_sums + j, <int64_t*>counts + j,
            <int64_t*>hessian_sums + j if words == 2 else NULL,
            n_bins[block_features[member]], n_present, rows, params, lower, upper,
            monotone[member] if monotone != NULL else 0, candidates)
    # Insertion sort by bound, highest first (ties keep the feature order).
    for i in range(1, n_block):
        moving = member_order[i]
        key = member_bound[moving]
        j = i - 1
        while j >= 0 and member_bound[member_order[j]] < key:
            member_order[j + 1] = member_order[j]
            j -= 1
        member_order[j + 1] = moving


cdef struct split_table:
    # find_best_splits' (n_slots, n_candidates) result arrays, row-major
    double* score
    double* gain
    double* mean
    double* std
    double* direction
    bin_index_t* threshold
    uint8_t* missing_left
    uint8_t* found
    uint8_t* unpacked
    # Per thread and slot, the best tile it scored (the highest score, then
    # the lowest candidate position: the table's first maximum) and that
    # candidate's left child: (score, position, gradient, hessian, count
    # sums) at slot_left[(thread * n_slots + slot) * SLOT_LEFT_FIELDS]
    double* slot_left
    Py_ssize_t n_slots
    Py_ssize_t n_candidates


cdef double store_tile_best(split_table* table, Py_ssize_t slot, Py_ssize_t position,
                            const tile_best* best, double* record) noexcept nogil:
    """A scored tile's best candidate into ``table`` at (slot, position), and
    into the slot's ``record`` (its slot_left fields) when it beats it: the
    highest score, then the lowest position. Returns its score (-inf: none
    found)."""
    cdef Py_ssize_t index = slot * table.n_candidates + position
    table.unpacked[index] = 1
    table.found[index] = best.found
    if not best.found:
        return -INFINITY
    table.score[index] = best.score
    table.gain[index] = best.gain
    table.mean[index] = best.mean
    table.std[index] = best.std
    table.direction[index] = best.direction
    table.threshold[index] = best.threshold
    table.missing_left[index] = best.missing_left
    if best.score > record[0] or (best.score == record[0] and position < record[1]):
        record[0] = best.score
        record[1] = <double>position
        record[2] = best.left_g
        record[3] = best.left_h
        record[4] = best.left_count
    return best.score


cdef struct scoring_block:
    # what scoring a tile of one (block, slot group) of find_best_splits reads
    const int64_t* cells                 # the block's cells (era, group slot, run)
    Py_ssize_t group_start
    Py_ssize_t n_group
    Py_ssize_t slot_stride               # cells in one (era, slot) run
    Py_ssize_t n_eras
    Py_ssize_t first                     # the block's first candidate position
    const Py_ssize_t* member_offset      # (n_block,) each feature's first cell in a run, or
                                         # tree t's at member_offset + t * offset_stride
    Py_ssize_t offset_stride             # 0 (one table) or MAX_FEATURES_PER_PASS (per tree)
    const feature_index_t* features      # (n_candidates,)
    const bin_index_t* n_bins            # (n_features,)
    const fixed_point_rows* rows         # slot s reads rows_of_tree(rows, slot_tree[s])
    const pb_split_params* params
    const double* slot_noise             # (n_slots,) gradient variance per slot
    const double* slot_bounds            # (n_slots, 2) or NULL
    const int8_t* feature_monotone       # (n_candidates,) or NULL
    Py_ssize_t n_candidates
    Py_ssize_t n_block                   # features in the block
    Py_ssize_t pack_size
    const uint8_t* slot_open             # (n_slots,)
    const int32_t* slot_tree             # (n_slots,)
    const uint8_t* tree_uses_feature     # (n_candidates, pack_size)
    const uint8_t* allows                # (n_slots, n_candidates) or NULL
    double* bound                        # (group slots, >= n_block) pooled tile bounds
    int32_t* order                       # (group slots, >= n_block) tiles by bound
    Py_ssize_t bound_stride
    double* slot_floor                   # (n_threads, n_slots) best score seen per slot
    const uint8_t* era_tree_rows         # (n_eras, pack_size) find_best_splits', or NULL
    Py_ssize_t n_threads
    Py_ssize_t n_slots


cdef struct scratch_pool:
    # per-thread scratch of find_best_splits: thread t's at base + t * stride
    hist_entry* tile                     # (n_eras, max width) unpacked tile
    Py_ssize_t tile_stride
    int32_t* era_ids                     # (n_eras,)
    Py_ssize_t era_ids_stride
    double* scratch                      # (N_SCRATCH, n_eras)
    Py_ssize_t scratch_stride
    double* candidates                   # (N_CANDIDATE_SCRATCH, max width)
    Py_ssize_t candidates_stride
    uint8_t* member_scored               # (features per pass,)
    Py_ssize_t member_scored_stride
    int64_t* run_sums                    # (3, features per pass x max width)
    Py_ssize_t run_sums_stride


cdef inline bint tile_is_scored(const scoring_block* block, Py_ssize_t slot,
                                Py_ssize_t member) noexcept nogil:
    """Is (slot, the block's feature ``member``) scored at all: an open slot,
    a feature its tree uses and that constraints allow it?"""
    cdef Py_ssize_t position = block.first + member
    return (block.slot_open[slot]
            and block.tree_uses_feature[position * block.pack_size + block.slot_tree[slot]]
            and (block.allows == NULL
                 or block.allows[slot * block.n_candidates + position]))


cdef double score_block_tile(
        const scoring_block* block,
        Py_ssize_t slot,
        Py_ssize_t member,               # the feature's index in the block
        double floor,                    # a score the slot reached (-inf: none)
        const scratch_pool* pool,
        Py_ssize_t thread,
        split_table* table,              # OUT the tile's best candidate, if any
) noexcept nogil:
    """Unpack and score one (slot, feature) tile of a block in the thread's
    scratch; record its best candidate in ``table``. Returns its score (-inf:
    none found)."""
    cdef hist_entry* tile = pool.tile + thread * pool.tile_stride
    cdef Py_ssize_t position = block.first + member
    cdef feature_index_t feature = block.features[position]
    cdef Py_ssize_t width = block.n_bins[feature] + 1
    cdef Py_ssize_t words = block.rows.words
    cdef int monotone = block.feature_monotone[position] if block.feature_monotone != NULL else 0
    cdef double lower = block.slot_bounds[2 * slot] if block.slot_bounds != NULL else -INFINITY
    cdef double upper = block.slot_bounds[2 * slot + 1] if block.slot_bounds != NULL else INFINITY
    cdef tile_best best
    unpack_tile(block.cells + ((slot - block.group_start) * block.slot_stride
                               + block.member_offset[block.slot_tree[slot] * block.offset_stride
                                                     + member]) * words,
                block.n_group * block.slot_stride, block.n_eras, width,
                rows_of_tree(block.rows, block.slot_tree[slot]), tile, width, True)
    best = score_tile(tile, width, block.n_eras, block.n_bins[feature], block.params,
                      block.slot_noise[slot], lower, upper, monotone, floor,
                      pool.era_ids + thread * pool.era_ids_stride,
                      pool.scratch + thread * pool.scratch_stride,
                      pool.candidates + thread * pool.candidates_stride)
    return store_tile_best(table, slot, position, &best,
                           table.slot_left + (thread * table.n_slots + slot) * SLOT_LEFT_FIELDS)


cdef void bound_block_slot(
        const scoring_block* block,
        const scratch_pool* pool,
        Py_ssize_t thread,
        Py_ssize_t slot,
) noexcept nogil:
    """bound_slot_tiles for one slot of a block (the tiles tile_is_scored
    admits), into the block's bound and order rows of the slot."""
    cdef Py_ssize_t member, row = slot - block.group_start
    cdef uint8_t* member_scored = pool.member_scored + thread * pool.member_scored_stride
    for member in range(block.n_block):
        member_scored[member] = tile_is_scored(block, slot, member)
    bound_slot_tiles(block.cells + row * block.slot_stride * block.rows.words,
                     block.n_group * block.slot_stride * block.rows.words, block.n_eras,
                     block.n_block,
                     block.member_offset + block.slot_tree[slot] * block.offset_stride,
                     block.features + block.first,
                     block.n_bins, member_scored,
                     rows_of_tree(block.rows, block.slot_tree[slot]), block.params,
                     block.slot_bounds[2 * slot] if block.slot_bounds != NULL else -INFINITY,
                     block.slot_bounds[2 * slot + 1] if block.slot_bounds != NULL
                     else INFINITY,
                     block.feature_monotone + block.first if block.feature_monotone != NULL
                     else NULL,
                     pool.run_sums + thread * pool.run_sums_stride,
                     pool.candidates + thread * pool.candidates_stride,
                     block.bound + row * block.bound_stride,
                     block.order + row * block.bound_stride,
                     block.era_tree_rows + block.slot_tree[slot]
                     if block.era_tree_rows != NULL else NULL,
                     block.pack_size)


cdef void score_slot_in_order(
        const scoring_block* block,
        const scratch_pool* pool,
        Py_ssize_t thread,
        Py_ssize_t slot,
        split_table* table,
) noexcept nogil:
    """A slot's tiles of a block on one thread: bounded, then scored highest
    bound first until the next bound is below the slot's best score (the
    runs just summed are still in cache for the few tiles read)."""
    cdef Py_ssize_t rank, member, other, row = slot - block.group_start
    cdef const double* bound = block.bound + row * block.bound_stride
    cdef const int32_t* order = block.order + row * block.bound_stride
    cdef double floor = -INFINITY
    bound_block_slot(block, pool, thread, slot)
    for other in range(block.n_threads):   # no other thread writes this slot's floors now
        floor = max(floor, block.slot_floor[other * block.n_slots + slot])
    for rank in range(block.n_block):
        member = order[rank]
        if bound[member] == -INFINITY or bound[member] < floor:
            break  # and so are the next ones'
        floor = max(floor, score_block_tile(block, slot, member, floor, pool, thread, table))
    block.slot_floor[thread * block.n_slots + slot] = floor

def feature_blocks(Py_ssize_t n_candidates, Py_ssize_t features_per_pass):
    """How find_best_splits cuts ``n_candidates`` features into blocks.

    Blocks of at most ``features_per_pass`` features (and
    MAX_FEATURES_PER_PASS), all but the last of equal size. Every thread
    works on every block (eras, then tiles, are shared out), so blocks are as
    wide as allowed: a row's slot and gradient are read once per block and
    tree, whatever the thread count. Returns ``(features_per_pass,
    n_blocks)`` as used; also read by the memory estimate and the profiler.
    """
    if n_candidates <= 0:
        return 1, 0
    features_per_pass = max(1, min(features_per_pass, MAX_FEATURES_PER_PASS, n_candidates))
    cdef Py_ssize_t n_blocks = (n_candidates + features_per_pass - 1) // features_per_pass
    features_per_pass = (n_candidates + n_blocks - 1) // n_blocks
    n_blocks = (n_candidates + features_per_pass - 1) // features_per_pass
    return features_per_pass, n_blocks


def empty_split_result(Py_ssize_t n_slots, Py_ssize_t n_candidates, Py_ssize_t n_threads):
    """A split finder's result before any tile is scored -- (n_slots,
    n_candidates) arrays, no candidate found -- and the threads' slot_left
    records (n_threads, n_slots, SLOT_LEFT_FIELDS), none yet."""
    shape = (n_slots, n_candidates)
    result = dict(score=np.full(shape, -np.inf), gain=np.zeros(shape), mean=np.zeros(shape),
                  std=np.zeros(shape), direction=np.zeros(shape),
                  threshold=np.zeros(shape, dtype=np.int32),
                  missing_left=np.zeros(shape, dtype=np.uint8),
                  found=np.zeros(shape, dtype=np.uint8), unpacked=np.zeros(shape, dtype=np.uint8))
    records = np.zeros((n_threads, n_slots, SLOT_LEFT_FIELDS))
    records[:, :, 0] = -np.inf
    records[:, :, 1] = np.inf
    return result, records


cdef split_table split_table_of(dict result, records) except *:
    """Pointers into empty_split_result's arrays (which must outlive them)."""
    cdef double[:, ::1] score = result["score"], gain = result["gain"], mean = result["mean"]
    cdef double[:, ::1] std = result["std"], direction = result["direction"]
    cdef bin_index_t[:, ::1] threshold = result["threshold"]
    cdef uint8_t[:, ::1] missing_left = result["missing_left"], found = result["found"]
    cdef uint8_t[:, ::1] unpacked = result["unpacked"]
    cdef double[:, :, ::1] slot_left = records
    cdef bint cells = score.shape[0] * score.shape[1] > 0
    cdef split_table table
    table.score = &score[0, 0] if cells else NULL
    table.gain = &gain[0, 0] if cells else NULL
    table.mean = &mean[0, 0] if cells else NULL
    table.std = &std[0, 0] if cells else NULL
    table.direction = &direction[0, 0] if cells else NULL
    table.threshold = &threshold[0, 0] if cells else NULL
    table.missing_left = &missing_left[0, 0] if cells else NULL
    table.found = &found[0, 0] if cells else NULL
    table.unpacked = &unpacked[0, 0] if cells else NULL
    table.slot_left = &slot_left[0, 0, 0] if slot_left.shape[1] > 0 else NULL
    table.n_slots = score.shape[0]
    table.n_candidates = score.shape[1]
    return table


def slot_noise_of(slot_gradient_variance, Py_ssize_t n_slots):
    """The split finders' per-slot gradient variance as contiguous float64
    (zeros when None); ValueError unless it has one entry per slot."""
    if slot_gradient_variance is None:
        return np.zeros(n_slots)
    noise = np.ascontiguousarray(slot_gradient_variance, dtype=np.float64)
    if noise.ndim != 1 or noise.shape[0] != n_slots:
        raise ValueError(f"slot_gradient_variance must have {n_slots} entries, "
                         f"got shape {noise.shape}")
    return noise


def check_constraint_shapes(Py_ssize_t n_slots, Py_ssize_t n_candidates, slot_bounds,
                            feature_monotone, slot_allows_feature):
    """ValueError unless the split finders' constraint arrays (each optional)
    match the slots and candidates."""
    if slot_bounds is not None and (slot_bounds.shape[0] != n_slots
                                    or slot_bounds.shape[1] != 2):
        raise ValueError(f"slot_bounds must have shape ({n_slots}, 2)")
    if feature_monotone is not None and feature_monotone.shape[0] != n_candidates:
        raise ValueError(f"feature_monotone must have {n_candidates} entries")
    if slot_allows_feature is not None and (slot_allows_feature.shape[0] != n_slots
                                            or slot_allows_feature.shape[1] != n_candidates):
        raise ValueError(f"slot_allows_feature must have shape ({n_slots}, {n_candidates})")


def find_best_splits(
        const bin_code_t[:, ::1] X_binned,       # IN  (n_features, n_rows), rows era-sorted
        fixed,                                    # IN  _fixed_point.FixedPointGradients
        const row_index_t[::1] active_rows,         # IN  rows in an open slot, ascending
        const offset_t[::1] era_offsets,          # IN  (n_eras + 1,) into active_rows
        const node_index_t[:, ::1] node_of_row,     # IN  (n_rows, pack_size) slot or -1
        const int32_t[::1] slot_tree,             # IN  (n_slots,) tree of each slot
        const uint8_t[::1] slot_open,             # IN  (n_slots,) may the slot split?
        const feature_index_t[::1] features,        # IN  (n_candidates,) K_d, ascending
        const uint8_t[:, ::1] tree_uses_feature,  # IN  (n_candidates, pack_size)
        const bin_index_t[::1] n_bins,              # IN  (n_features,) non-missing bins
        dict params,
        int n_threads,
        Py_ssize_t histogram_budget_bytes=DEFAULT_HISTOGRAM_BUDGET_BYTES,
        Py_ssize_t features_per_pass=DEFAULT_FEATURES_PER_PASS,
        slot_gradient_variance=None,
        int64_t[::1] depth_cells=None,
        const int64_t[::1] parent_cells=None,
        const uint8_t[::1] slot_kind=None,
        const int32_t[::1] slot_parent=None,
        const uint8_t[:, ::1] tree_extra_feature=None,
        const double[:, ::1] slot_bounds=None,
        const int8_t[::1] feature_monotone=None,
        const uint8_t[:, ::1] slot_allows_feature=None,
        cell_buffer=None,
        bint best_per_slot=False,
        bint share_equal_rows=True,
        era_tree_rows=None,
        bint scattered_samples=False,
        bint cells_only=False,
        int64_t[:, ::1] cell_origin=None,
        int64_t[::1] cell_stride=None,
        bint cells_per_tree=False,
        int64_t[::1] pooled_cells=None,
):
    """Best DES candidate of every (slot, candidate feature).

    ``fixed`` holds the round's gradients and hessians in fixed point (see
    packboost/_fixed_point.py); the histograms are their exact sums.
    ``slot_gradient_variance`` (n_slots,) is the per-row variance of each
    slot's gradients, used by ``era_std="between"`` (None: zeros, the total
    std).

    **Histogram subtraction** (``depth_cells`` given; docs/cpu-kernels.md
    §3): every slot's cells are kept in ``depth_cells`` (``depth_cells_size``
    int64), all slots in one group, so that the next depth can derive from
    them. ``slot_kind`` (n_slots,) says per slot SLOT_BUILD (sum its rows),
    SLOT_DERIVE (``parent_cells`` of ``slot_parent`` minus the built sibling
    ``slot ^ 1``; only the features the parent's tree did not use,
    ``tree_extra_feature`` (n_candidates, pack_size), are summed) or
    SLOT_SKIP (no cells: not scored). Cells are exact integers, so the
    splits are the same as without subtraction.

    **Constraints** (docs/des.md §14; all None without them):
    ``slot_bounds`` (n_slots, 2) are the [lower, upper] bounds on each slot's
    value (monotone constraints: the values and gains of its candidates use
    Newton values clipped to them), ``feature_monotone`` (n_candidates,) int8
    the constraint of each candidate feature (-1, 0, +1: a split must order
    its children's clipped values), ``slot_allows_feature`` (n_slots,
    n_candidates) uint8 which (slot, feature) pairs are scored at all
    (interaction constraints). Histograms are built as without them.

    ``cell_buffer``: an int64 array of at least ``block_buffer_cells(...)``
    entries to hold a block's cells (without subtraction), which a fit keeps
    from depth to depth so that no depth faults in fresh pages (the kernel
    clearing them was 4% of a small fit); None: a new one.

    ``best_per_slot``: only each slot's best candidate over the features
    will be used (BestSplits.of_table), so a candidate whose bound is below a
    score an earlier tile of its slot reached (on the same thread) skips its
    era pass; the table then holds each slot's winner as without it, while a
    losing (slot, feature) may show a lower candidate or none. Each slot's
    first maximum, and so the tree, is the same (tests/test_split.py): only a
    candidate strictly below an achieved score is skipped. With realized
    gains and equal era weights whole tiles are bounded first from their
    cells summed over eras (bound_slot_tiles), scored highest bound first,
    and those that cannot reach their slot's best are never unpacked.

    ``share_equal_rows``: an era whose rows have the same codes in every
    tree (a pack's roots when the trees sample whole eras) is summed once for
    all the trees holding it (build_pack_histograms); False sums it per
    tree (the same cells of every feature a tree uses; benchmarks).

    ``era_tree_rows``: (n_eras, pack_size) uint8, 0 where a tree has no row
    in an era (the trees' era flags, TreeSamples): the
    pass does not list those (era, tree) at all, nor do the pooled bounds
    read their (zero) cells; None: every one is listed.

    ``scattered_samples``: the trees sample rows one by one (a row
    subsample), not whole eras: the era pass then finds each row's cells
    without a branch on its code (build_pack_histograms). The same results.

    ``cells_only`` (with ``depth_cells``): fill ``depth_cells`` and score
    nothing: every (slot, feature) is returned not found. For a caller that
    scores the cells itself (a shard of a distributed fit scores the sums
    over every shard's eras, backends/dask.py).

    ``cell_origin`` (n_candidates, pack_size) and ``cell_stride``
    (n_candidates,), int64, with ``depth_cells``: where the cells went. The
    cell of (era, slot, candidate, bin) is ``depth_cells[cell_origin[
    candidate, slot_tree[slot]] + (era * n_slots + slot) *
    cell_stride[candidate] + bin * words]``. With them, ``cells_only``,
    ``cells_per_tree`` (the caller derives no child from these cells) and no slot derived
    here, a block may lay a slot's run out for its tree's features only
    (tree_cell_offsets), as full passes do: with a pack of p trees each
    using a p-th of a depth's features (layer_feature_fraction) the cells
    cleared, written and read afterwards are about p times fewer. Otherwise
    the layout is block-wide (depth_cells_size's, which a next depth's
    subtraction reads).

    ``pooled_cells`` (with ``cells_only``): also every open slot's cells
    summed over the eras, per cell the gradient units, the rows and the
    hessian units (without a constant hessian), int64, slot after slot, the
    features' cells in their order (``pooled_cells_size`` entries; zeros for a
    closed slot or a feature its tree does not use) -- taken block by block
    right after the block is summed, while its cells are in cache (a pass over
    all of a depth's cells afterwards read them from memory again).

    Returns a dict of (n_slots, n_candidates) arrays: ``score`` (-inf when no
    candidate meets the constraints), ``gain`` (pooled Newton gain),
    ``mean``, ``std`` (0 when lambda_dro = 0 with realized gains),
    ``direction`` (0 when lambda_dir = 0), ``threshold``, ``missing_left``,
    ``found``, ``unpacked``: 1 where the tile's era cells were read and
    scored (not for a feature its slot's tree does not use, a forbidden
    pair, or a tile the pooled bounds pruned); and ``slot_left`` (n_slots,
    4): per slot the candidate position of the table's first maximum
    (highest score, then lowest position) and its left child's pooled sums
    (gradient, hessian, count; missing rows included when they go left),
    NaN without a candidate. Exact, so the CPU backend takes the children's
    node sums from them (``BestSplits.of_table``). Each thread keeps its own
    best per slot while scoring (nothing of size slots x candidates more).
    """
    cdef Py_ssize_t n_slots = slot_tree.shape[0]
    cdef Py_ssize_t n_candidates = features.shape[0]
    cdef Py_ssize_t n_eras = era_offsets.shape[0] - 1
    cdef Py_ssize_t max_width = 1, position, thread, group_start, group_end, slot
    cdef Py_ssize_t group_size, width
    cdef pb_split_params c_params = make_split_params(params)
    cdef tile_best best
    cdef feature_index_t feature
    cdef bint any_open
    cdef double lower, upper
    cdef int monotone
    cdef const double* bounds_pointer = NULL
    cdef const int8_t* monotone_pointer = NULL
    cdef const uint8_t* allows_pointer = NULL

    n_threads = max(1, n_threads)
    result, records = empty_split_result(n_slots, n_candidates, n_threads)
    if n_slots == 0 or n_candidates == 0 or n_eras == 0 or not np.any(slot_open):
        result["slot_left"] = slot_first_maximum(records)
        return result
    cdef const double[::1] slot_noise = slot_noise_of(slot_gradient_variance, n_slots)

    check_constraint_shapes(n_slots, n_candidates, slot_bounds, feature_monotone,
                            slot_allows_feature)
    if slot_bounds is not None:
        bounds_pointer = &slot_bounds[0, 0]
    if feature_monotone is not None:
        monotone_pointer = &feature_monotone[0]
    if slot_allows_feature is not None:
        allows_pointer = &slot_allows_feature[0, 0]

    if node_of_row.shape[1] > MAX_PACK_SIZE:
        raise ValueError(f"pack_size must be at most {MAX_PACK_SIZE}, "
                         f"got {node_of_row.shape[1]}")
    # One view per output (tree t sums its output's gradients, rows_of_tree);
    # rows is the first.
    cdef fixed_point_rows output_rows[MAX_PACK_SIZE]
    view_outputs(fixed, node_of_row.shape[0], node_of_row.shape[1], &output_rows[0])
    cdef fixed_point_rows* rows = &output_rows[0]
    cdef Py_ssize_t words = rows.words
    cdef Py_ssize_t n_blocks
    features_per_pass, n_blocks = feature_blocks(n_candidates, features_per_pass)
    cdef Py_ssize_t block, first, n_block, member, buffer_cells, n_group, slot_stride
    cdef Py_ssize_t era, tile, n_tiles, tile_slot, tile_member
    cdef Py_ssize_t item, n_parts, part_width, part_start, part_size
    cdef Py_ssize_t era_chunk, chunk_start, chunk_end
    # module attribute (the tests set it), read once outside the nogil block
    cdef Py_ssize_t pool_chunk_bytes = POOL_CHUNK_BYTES
    cdef Py_ssize_t pack_size = node_of_row.shape[1], n_parent_slots = 0, tree
    cdef bint subtracting = depth_cells is not None
    cdef bint tree_runs, runs_per_tree_allowed = RUNS_PER_TREE
    cdef const uint8_t* kind_pointer = NULL
    cdef const uint8_t* extra_pointer = NULL
    cdef const int64_t* parent_pointer = NULL
    cdef const int64_t* block_parent = NULL
    cdef int64_t* block_cells
    cdef const uint8_t* era_tree_pointer = era_tree_flags(era_tree_rows, n_eras, pack_size)
    width_prefix = np.zeros(n_candidates + 1, dtype=np.intp)
    np.cumsum(np.asarray(n_bins)[np.asarray(features)] + 1, out=width_prefix[1:])
    cdef const Py_ssize_t[::1] width_prefix_view = width_prefix
    if cells_only and not subtracting:
        raise ValueError("cells_only needs depth_cells (the cells to fill)")
    cdef bint reports_layout = cell_origin is not None
    if reports_layout != (cell_stride is not None) or (reports_layout and not subtracting):
        raise ValueError("cell_origin and cell_stride go together, with depth_cells")
    if reports_layout and (cell_origin.shape[0] != n_candidates
                           or cell_origin.shape[1] != node_of_row.shape[1]
                           or cell_stride.shape[0] != n_candidates):
        raise ValueError(f"cell_origin must be ({n_candidates}, {node_of_row.shape[1]}) and "
                         f"cell_stride ({n_candidates},)")
    if subtracting:
        if slot_kind is None or slot_parent is None or tree_extra_feature is None:
            raise ValueError("depth_cells needs slot_kind, slot_parent and tree_extra_feature")
        if depth_cells.shape[0] != n_eras * n_slots * width_prefix[n_candidates] * words:
            raise ValueError("depth_cells must have depth_cells_size(...) entries")
        if slot_kind.shape[0] != n_slots or slot_parent.shape[0] != n_slots:
            raise ValueError(f"slot_kind and slot_parent must have {n_slots} entries")
        if tree_extra_feature.shape[0] != n_candidates or tree_extra_feature.shape[1] != pack_size:
            raise ValueError("tree_extra_feature must be (n_candidates, pack_size)")
        kind_pointer = &slot_kind[0]
        kinds = np.asarray(slot_kind)
        derived = np.flatnonzero(kinds == SLOT_DERIVE)
        if np.any((np.asarray(slot_open) != 0) & (kinds == SLOT_SKIP)):
            raise ValueError("an open slot has slot_kind SLOT_SKIP (no cells to score)")
        if len(derived) and (parent_cells is None
                             or np.any(kinds[derived ^ 1] != SLOT_BUILD)
                             or np.any(np.asarray(slot_parent)[derived] < 0)):
            raise ValueError("a SLOT_DERIVE slot needs parent_cells, a parent and a "
                             "SLOT_BUILD sibling")
        if parent_cells is not None and parent_cells.shape[0] > 0:
            n_parent_slots = parent_cells.shape[0] // (n_eras * width_prefix[n_candidates] * words)
            if parent_cells.shape[0] != n_eras * n_parent_slots * width_prefix[n_candidates] * words:
                raise ValueError("parent_cells do not match the features' cells")
            parent_pointer = &parent_cells[0]
        if len(derived) == 0:
            # Every slot summed from its rows, as in full passes: no kinds, so
            # the era pass may take its list-free route (build_pack_histograms),
            # and with a reported layout, runs per tree.
            kind_pointer = NULL
            parent_pointer = NULL
    cdef bint compact_cells = (cells_only and cells_per_tree and reports_layout
                               and kind_pointer == NULL)
    cdef int64_t* pooled_pointer = NULL
    cdef Py_ssize_t pooled_width = words + 1
    if pooled_cells is not None:
        if not cells_only:
            raise ValueError("pooled_cells go with cells_only")
        if pooled_cells.shape[0] != n_slots * width_prefix[n_candidates] * pooled_width:
            raise ValueError("pooled_cells must have pooled_cells_size(...) entries")
        pooled_cells[:] = 0
        pooled_pointer = &pooled_cells[0] if pooled_cells.shape[0] else NULL
    cdef int64_t block_origin = 0
    for position in range(n_candidates):
        max_width = max(max_width, n_bins[features[position]] + 1)
    # One buffer for a (block, slot group), shared by the threads: they split
    # its eras while summing, then its tiles while scoring. Its cap is the
    # per-thread budget times the threads (the memory the per-thread buffers
    # of a feature-parallel split would take).
    group_size, buffer_cells = block_buffer_cells(features, n_bins, tree_uses_feature, n_slots,
                                                  n_eras, words, n_threads,
                                                  histogram_budget_bytes, features_per_pass,
                                                  share_equal_rows)
    if subtracting:
        buffer_cells = 0  # the cells live in depth_cells
    # Buffers allocated by NumPy so that a failure is a MemoryError; scoring
    # scratch per thread.
    if cell_buffer is None or cell_buffer.dtype != np.int64 or cell_buffer.size < buffer_cells:
        cell_buffer = np.empty(buffer_cells, dtype=np.int64)
    # Each feature's first cell in an (era, slot) run: one table for the
    # block, or one per tree (tree_cell_offsets).
    feature_offset = np.empty(pack_size * MAX_FEATURES_PER_PASS, dtype=np.intp)
    tile_buffers = np.empty((n_threads, n_eras * max_width), dtype=HIST_DTYPE)
    scratch_buffers = np.empty((n_threads, N_SCRATCH * n_eras), dtype=np.float64)
    candidate_buffers = np.empty((n_threads, N_CANDIDATE_SCRATCH * max_width), dtype=np.float64)
    era_id_buffers = np.empty((n_threads, n_eras), dtype=np.int32)
    pair_buffers = np.empty((n_threads, PAIR_SCRATCH_CELLS), dtype=np.int64)
    cdef int64_t[:, ::1] pair_view = pair_buffers
    # Pooled bounds (bound_slot_tiles): each tile's bound and each slot's
    # scoring order, for one (block, slot group); per-thread sums of a run.
    cdef bint pooled_bounds = (best_per_slot and c_params.era_gain == DES_ERA_GAIN_REALIZED
                               and c_params.era_weighting == PB_ERA_WEIGHTING_EQUAL)
    cdef Py_ssize_t bound_slots = (n_slots if subtracting else group_size) if pooled_bounds else 0
    tile_bounds = np.empty((bound_slots, features_per_pass))
    tile_orders = np.empty((bound_slots, features_per_pass), dtype=np.int32)
    member_scored_buffers = np.empty((n_threads, features_per_pass), dtype=np.uint8)
    run_sum_buffers = np.empty((n_threads if pooled_bounds else 0,
                                3 * features_per_pass * max_width), dtype=np.int64)
    cdef double[:, ::1] tile_bound_view = tile_bounds
    cdef int32_t[:, ::1] tile_order_view = tile_orders
    cdef uint8_t[:, ::1] member_scored_view = member_scored_buffers
    cdef int64_t[:, ::1] run_sum_view = run_sum_buffers
    cdef Py_ssize_t group_slot
    # The best score each thread has seen per slot (best_per_slot), over blocks.
    slot_floor = np.full((n_threads, n_slots), -np.inf)
    cdef double[:, ::1] slot_floor_view = slot_floor
    cdef double floor
    cdef int64_t[::1] cell_view = cell_buffer
    cdef Py_ssize_t[::1] offset_view = feature_offset
    cdef hist_entry[:, ::1] tile_view = tile_buffers
    cdef double[:, ::1] scratch_view = scratch_buffers
    cdef double[:, ::1] candidate_view = candidate_buffers
    cdef int32_t[:, ::1] era_id_view = era_id_buffers

    cdef double tile_score
    cdef split_table table = split_table_of(result, records)
    cdef scoring_block block_view
    block_view.n_eras = n_eras
    block_view.member_offset = &offset_view[0]
    block_view.features = &features[0] if n_candidates else NULL
    block_view.n_bins = &n_bins[0]
    block_view.rows = rows
    block_view.params = &c_params
    block_view.slot_noise = &slot_noise[0] if n_slots else NULL
    block_view.slot_bounds = bounds_pointer
    block_view.feature_monotone = monotone_pointer
    block_view.n_candidates = n_candidates
    block_view.pack_size = pack_size
    block_view.slot_open = &slot_open[0] if n_slots else NULL
    block_view.slot_tree = &slot_tree[0] if n_slots else NULL
    block_view.tree_uses_feature = &tree_uses_feature[0, 0] if n_candidates else NULL
    block_view.allows = allows_pointer
    block_view.bound = &tile_bound_view[0, 0] if tile_bounds.size else NULL
    block_view.order = &tile_order_view[0, 0] if tile_orders.size else NULL
    block_view.bound_stride = features_per_pass
    block_view.slot_floor = &slot_floor_view[0, 0] if n_slots else NULL
    block_view.era_tree_rows = era_tree_pointer
    block_view.n_threads = n_threads
    block_view.n_slots = n_slots
    cdef scratch_pool pool
    pool.tile = &tile_view[0, 0]
    pool.tile_stride = tile_view.shape[1]
    pool.era_ids = &era_id_view[0, 0]
    pool.era_ids_stride = era_id_view.shape[1]
    pool.scratch = &scratch_view[0, 0]
    pool.scratch_stride = scratch_view.shape[1]
    pool.candidates = &candidate_view[0, 0]
    pool.candidates_stride = candidate_view.shape[1]
    pool.member_scored = &member_scored_view[0, 0]
    pool.member_scored_stride = member_scored_view.shape[1]
    pool.run_sums = &run_sum_view[0, 0] if run_sum_buffers.size else NULL
    pool.run_sums_stride = run_sum_view.shape[1]
    # Blocks and slot groups in turn; within one, the threads split the eras
    # (an era's cells are its own: no two threads write a cell), then the
    # (slot, feature) tiles. Splitting eras rather than features keeps a
    # block as wide as one thread would have it: a row's slot and gradient
    # are read once per (block, tree) whatever the thread count, which
    # matters when a depth has few features (layer_feature_fraction 0.1).
    with nogil:
        for block in range(n_blocks):
            first = block * features_per_pass
            n_block = min(features_per_pass, n_candidates - first)
            # Work items (era, part of the block's features).
            n_parts = feature_parts(n_block, n_threads, n_eras)
            part_width = (n_block + n_parts - 1) // n_parts
            tree_runs = takes_runs_per_tree(runs_per_tree_allowed,
                                            subtracting and not compact_cells, n_parts,
                                            share_equal_rows, n_slots, pack_size)
            if tree_runs:
                slot_stride = tree_cell_offsets(&features[first], n_block, n_bins,
                                                &tree_uses_feature[first, 0], pack_size,
                                                &offset_view[0])
            else:
                slot_stride = block_cell_offsets(&features[first], n_block, n_bins,
                                                 &offset_view[0])
            block_view.offset_stride = MAX_FEATURES_PER_PASS if tree_runs else 0
            if kind_pointer != NULL:
                extra_pointer = &tree_extra_feature[first, 0]
            if reports_layout:
                for member in range(n_block):
                    cell_stride[first + member] = slot_stride * words
                    for tree in range(pack_size):
                        cell_origin[first + member, tree] = block_origin + words * offset_view[
                            tree * block_view.offset_stride + member]
            group_start = 0
            while group_start < n_slots:
                if subtracting:
                    group_end = n_slots
                    # blocks one after another (block-wide runs: width_prefix's offsets)
                    block_cells = &depth_cells[0] + block_origin
                else:
                    group_end = min(group_start + group_size, n_slots)
                    block_cells = &cell_view[0]
                n_group = group_end - group_start
                any_open = False
                for slot in range(group_start, group_end):
                    for member in range(n_block):
                        any_open = any_open or (
                            slot_open[slot]
                            and tree_uses_feature[first + member, slot_tree[slot]])
                if not any_open:
                    group_start = group_end
                    continue
                if parent_pointer != NULL:
                    block_parent = (parent_pointer + n_eras * n_parent_slots * words
                                    * width_prefix_view[first])
                # Eras in chunks when pooled (each chunk's cells summed over its
                # eras while in cache); else all at once.
                era_chunk = n_eras
                if cells_only and pooled_pointer != NULL:
                    era_chunk = max(1, pool_chunk_bytes // max(1, n_group * slot_stride * words * 8))
                chunk_start = 0
                while chunk_start < n_eras:
                    chunk_end = min(chunk_start + era_chunk, n_eras)
                    for item in prange((chunk_end - chunk_start) * n_parts, schedule='dynamic',
                                       num_threads=n_threads):
                        era = chunk_start + item // n_parts
                        part_start = (item % n_parts) * part_width
                        part_size = min(part_width, n_block - part_start)
                        build_pack_histograms(X_binned, &features[first + part_start], part_size,
                                              n_bins, rows, active_rows, era_offsets, era, era + 1,
                                              node_of_row, &tree_uses_feature[first + part_start, 0],
                                              group_start, group_end, n_slots,
                                              &offset_view[part_start],
                                              block_view.offset_stride, slot_stride, kind_pointer,
                                              extra_pointer + part_start * pack_size
                                              if extra_pointer != NULL else NULL,
                                              share_equal_rows and not tree_runs, block_cells,
                                              &pair_view[threadid(), 0], &slot_tree[0],
                                              era_tree_pointer, scattered_samples)
                        if block_parent != NULL:
                            derive_slots(block_parent, n_parent_slots, block_cells, n_slots,
                                         era, era + 1, slot_stride, words, kind_pointer,
                                         &slot_parent[0], &slot_tree[0], pack_size,
                                         &features[first + part_start], part_size, n_bins,
                                         &offset_view[part_start],
                                         &tree_uses_feature[first + part_start, 0],
                                         extra_pointer + part_start * pack_size)
                    if cells_only and pooled_pointer != NULL:
                        for slot in prange(n_slots, schedule='dynamic',
                                           num_threads=n_threads):
                            pool_block_slot(block_cells, chunk_start, chunk_end, n_slots, slot,
                                            slot_stride * words, &offset_view[0],
                                            block_view.offset_stride, slot_tree[slot],
                                            slot_open[slot], &tree_uses_feature[first, 0],
                                            pack_size, &width_prefix_view[first], n_block,
                                            width_prefix_view[n_candidates], words,
                                            rows.count_bits, pooled_pointer)
                    chunk_start = chunk_end
                if cells_only:
                    group_start = group_end
                    continue
                block_view.cells = block_cells
                block_view.group_start = group_start
                block_view.n_group = n_group
                block_view.slot_stride = slot_stride
                block_view.first = first
                block_view.n_block = n_block
                if pooled_bounds and n_group >= SLOTS_PER_THREAD * n_threads:
                    # Work items are slots (score_slot_in_order).
                    for group_slot in prange(n_group, schedule='dynamic', num_threads=n_threads):
                        score_slot_in_order(&block_view, &pool, threadid(),
                                            group_start + group_slot, &table)
                    group_start = group_end
                    continue
                if pooled_bounds:
                    for group_slot in prange(n_group, schedule='dynamic', num_threads=n_threads):
                        bound_block_slot(&block_view, &pool, threadid(), group_start + group_slot)
                # Few slots for the threads: the tiles are shared out instead.
                n_tiles = n_group * n_block
                for tile in prange(n_tiles, schedule='dynamic', num_threads=n_threads):
                    thread = threadid()
                    tile_slot = group_start + tile // n_block
                    tile_member = tile % n_block
                    floor = slot_floor_view[thread, tile_slot] if best_per_slot else -INFINITY
                    if pooled_bounds:
                        # Each slot's tiles highest bound first; a tile whose
                        # bound is below the best score its slot reached on
                        # this thread has no candidate that could win.
                        tile_member = tile_order_view[tile // n_block, tile_member]
                        if (tile_bound_view[tile // n_block, tile_member] == -INFINITY
                                or tile_bound_view[tile // n_block, tile_member] < floor):
                            continue
                    if not tile_is_scored(&block_view, tile_slot, tile_member):
                        continue
                    tile_score = score_block_tile(&block_view, tile_slot, tile_member, floor,
                                                  &pool, thread, &table)
                    if tile_score > floor:
                        slot_floor_view[thread, tile_slot] = tile_score
                group_start = group_end
            if subtracting:
                block_origin += n_eras * n_slots * slot_stride * words
    result["slot_left"] = slot_first_maximum(records)
    return result


cdef void pool_block_slot(
        const int64_t* block_cells,      # IN  a block's cells: (era, slot) runs
        Py_ssize_t era_start,            # eras [era_start, era_end) are added
        Py_ssize_t era_end,
        Py_ssize_t n_slots,
        Py_ssize_t slot,
        Py_ssize_t run_entries,          # IN  int64 per (era, slot) run
        const Py_ssize_t* feature_offset,   # IN  the block's offsets (tree tables
        Py_ssize_t offset_stride,        #     offset_stride apart, or one table)
        Py_ssize_t tree,
        bint is_open,
        const uint8_t* tree_uses_feature,   # IN  (n_block, pack_size) of the block
        Py_ssize_t pack_size,
        const Py_ssize_t* feature_prefix,   # IN  (n_block,) each feature's first pooled cell
        Py_ssize_t n_block,
        Py_ssize_t slot_cells,           # IN  pooled cells per slot (all features)
        Py_ssize_t words,
        int count_bits,
        int64_t* pooled,                 # IN/OUT find_best_splits' pooled_cells
) noexcept nogil:
    """One slot's cells of one block summed over the eras into its pooled
    cells (find_best_splits' ``pooled_cells``): era by era, each (era, slot)
    run read front to back."""
    if not is_open:
        return
    cdef Py_ssize_t pw = words + 1, era, member
    cdef const int64_t* run
    for era in range(era_start, era_end):
        run = block_cells + (era * n_slots + slot) * run_entries
        for member in range(n_block):
            if tree_uses_feature[member * pack_size + tree]:
                add_to_pooled(run + feature_offset[tree * offset_stride + member] * words,
                              feature_prefix[member + 1] - feature_prefix[member], words,
                              count_bits,
                              pooled + (slot * slot_cells + feature_prefix[member]) * pw)


def slot_first_maximum(records):
    """Per slot, of the threads' records (n_threads, n_slots, 5: score,
    candidate position, left sums), the one of the table's first maximum
    (highest score, then lowest position): (n_slots, 4) of position and the
    left child's gradient, hessian and count sums; NaN where no tile was
    found. The same whatever the threads and their share of the tiles.
    A typed loop (it ran at every depth; the NumPy expressions cost more
    than the search)."""
    cdef const double[:, :, ::1] record = np.ascontiguousarray(records, dtype=np.float64)
    cdef Py_ssize_t n_threads = record.shape[0], n_slots = record.shape[1]
    cdef Py_ssize_t slot, thread, chosen, field
    cdef double top, position
    cdef bint undefined
    out = np.empty((n_slots, 4))
    cdef double[:, ::1] out_view = out
    for slot in range(n_slots):
        # the highest score (NaN anywhere: no maximum, as np.max gives NaN)
        top = -INFINITY
        undefined = False
        for thread in range(n_threads):
            if record[thread, slot, 0] != record[thread, slot, 0]:
                undefined = True
            elif record[thread, slot, 0] > top:
                top = record[thread, slot, 0]
        # of the records at it, the lowest position (the first such thread)
        chosen = 0
        position = INFINITY
        if not undefined:
            for thread in range(n_threads):
                if record[thread, slot, 0] == top and record[thread, slot, 1] < position:
                    position = record[thread, slot, 1]
                    chosen = thread
        for field in range(4):
            out_view[slot, field] = record[chosen, slot, field + 1] if n_threads else NAN
        if not (out_view[slot, 0] - out_view[slot, 0] == 0.0):     # not finite
            for field in range(4):
                out_view[slot, field] = NAN
    return out


cdef inline Py_ssize_t feature_parts(Py_ssize_t n_block, Py_ssize_t n_threads,
                                     Py_ssize_t n_eras) noexcept nogil:
    """Into how many parts find_best_splits cuts a block's features: work
    items are (era, part), at least ITEMS_PER_THREAD per thread, so with few
    eras (one, for data without eras) the features are split too; items
    never share a cell."""
    cdef Py_ssize_t n_parts = 1, part_width
    if n_threads > 1:
        n_parts = min(n_block, (ITEMS_PER_THREAD * n_threads + n_eras - 1) // n_eras)
    part_width = (n_block + n_parts - 1) // n_parts
    return (n_block + part_width - 1) // part_width


cdef inline bint takes_runs_per_tree(bint allowed, bint subtracting, Py_ssize_t n_parts,
                                     bint share_equal_rows, Py_ssize_t n_slots,
                                     Py_ssize_t pack_size) noexcept nogil:
    """Does a block lay a slot's run out for its tree's features only
    (tree_cell_offsets)? Wherever nothing needs the block-wide layout: kept
    cells for subtraction, a feature part's stretch of every run, and the
    roots' era sharing (one run copied between trees) all do."""
    return (allowed and not subtracting and n_parts == 1
            and not (share_equal_rows and n_slots <= pack_size))


def block_buffer_cells(features, n_bins, const uint8_t[:, ::1] tree_uses_feature,
                       Py_ssize_t n_slots, Py_ssize_t n_eras, Py_ssize_t words,
                       Py_ssize_t n_threads,
                       Py_ssize_t histogram_budget_bytes=DEFAULT_HISTOGRAM_BUDGET_BYTES,
                       Py_ssize_t features_per_pass=DEFAULT_FEATURES_PER_PASS,
                       bint share_equal_rows=True):
    """``(slots per group, int64 entries)`` of the block buffer that
    find_best_splits, given these arguments and no subtraction, fills for one
    (block, slot group): runs as long as its longest (each tree's features
    only where a block takes runs per tree), the group as many slots as
    ``n_threads`` budgets hold (at least one). Shorter runs mean larger
    groups: every group is a pass over its trees' rows (at Numerai scale,
    depths 4-5 took a fifth less time in one group fewer).
    Typed loops: called every depth, where NumPy's took ~40 us (RESULTS.md,
    2026-11-27 fd68a67)."""
    cdef const feature_index_t[::1] feature_view = np.ascontiguousarray(features, dtype=np.int32)
    cdef const bin_index_t[::1] bins_view = np.ascontiguousarray(n_bins, dtype=np.int32)
    cdef Py_ssize_t n_candidates = feature_view.shape[0]
    cdef Py_ssize_t pack_size = tree_uses_feature.shape[1]
    cdef Py_ssize_t n_blocks, tree, member, tree_run
    features_per_pass, n_blocks = feature_blocks(n_candidates, features_per_pass)
    cdef Py_ssize_t run = 0, block, first, n_block
    for block in range(n_blocks):
        first = block * features_per_pass
        n_block = min(features_per_pass, n_candidates - first)
        if takes_runs_per_tree(RUNS_PER_TREE, False, feature_parts(n_block, n_threads, n_eras),
                               share_equal_rows, n_slots, pack_size):
            for tree in range(pack_size):
                tree_run = 0
                for member in range(first, first + n_block):
                    if tree_uses_feature[member, tree]:
                        tree_run += bins_view[feature_view[member]] + 1
                run = max(run, tree_run)
        else:
            tree_run = 0
            for member in range(first, first + n_block):
                tree_run += bins_view[feature_view[member]] + 1
            run = max(run, tree_run)
    cdef Py_ssize_t slot_bytes = run * n_eras * words * sizeof(int64_t)
    cdef Py_ssize_t group_size = max(1, min(n_slots, max(1, n_threads) * histogram_budget_bytes
                                            // max(1, slot_bytes)))
    return group_size, n_eras * group_size * run * words


def best_of_table(found):
    """BestSplits.of_table's arrays from a split finder's (n_slots,
    n_candidates) table: per slot the first maximum over the features (in
    their order; -1 without a candidate), its score (-inf without one),
    gain, threshold and missing side, and -- where the table has
    ``slot_left`` -- the winner's left sums (NaN where the record is not the
    winner's). One typed pass: the dozen NumPy expressions it replaces took
    ~50 us per depth, a small fit's glue (RESULTS.md, 2026-11-27 fd68a67)."""
    cdef const double[:, ::1] score = found["score"]
    cdef const double[:, ::1] gain = found["gain"]
    cdef const bin_index_t[:, ::1] threshold = found["threshold"]
    cdef const uint8_t[:, ::1] missing_left = found["missing_left"]
    cdef const uint8_t[:, ::1] has = found["found"]
    column = best_candidate_per_slot(score, has)
    cdef Py_ssize_t n_slots = score.shape[0], slot, chosen
    cdef const int64_t[::1] column_view = column
    best_score = np.empty(n_slots)
    best_gain = np.empty(n_slots)
    best_threshold = np.empty(n_slots, dtype=np.int32)
    best_missing = np.empty(n_slots, dtype=np.uint8)
    cdef double[::1] score_out = best_score, gain_out = best_gain
    cdef int32_t[::1] threshold_out = best_threshold
    cdef uint8_t[::1] missing_out = best_missing
    for slot in range(n_slots):
        chosen = column_view[slot]
        if chosen < 0:
            score_out[slot] = -INFINITY
            gain_out[slot] = 0.0
            threshold_out[slot] = 0
            missing_out[slot] = 0
        else:
            score_out[slot] = score[slot, chosen]
            gain_out[slot] = gain[slot, chosen]
            threshold_out[slot] = threshold[slot, chosen]
            missing_out[slot] = missing_left[slot, chosen]
    out = dict(column=column, score=best_score, gain=best_gain, threshold=best_threshold,
               missing_left=best_missing)
    if "slot_left" not in found:
        return out
    cdef const double[:, ::1] first = np.ascontiguousarray(found["slot_left"], dtype=np.float64)
    cdef Py_ssize_t field
    left = np.empty((3, n_slots))
    cdef double[:, ::1] left_out = left
    for slot in range(n_slots):
        # the record is the winner's when it names the winning column
        chosen = column_view[slot]
        for field in range(3):
            left_out[field, slot] = (first[slot, field + 1]
                                     if chosen >= 0 and first[slot, 0] == chosen else NAN)
    out.update(left_gradients=left[0], left_hessians=left[1], left_count=left[2])
    return out


def depth_cells_size(Py_ssize_t n_eras, Py_ssize_t n_slots, features, n_bins,
                     Py_ssize_t words):
    """Entries of find_best_splits' ``depth_cells`` for this depth: every
    slot's cells of every feature (widths ``n_bins + 1``) in every era."""
    widths = int(np.sum(np.asarray(n_bins)[np.asarray(features)] + 1, dtype=np.int64))
    return n_eras * n_slots * widths * words


def best_candidate_per_slot(const double[:, ::1] score, const uint8_t[:, ::1] found):
    """Column of the best candidate feature of each slot (-1 when none).

    Columns are the candidate features in ascending order, so keeping the
    first maximum implements the lower-feature-index tie break.
    """
    cdef Py_ssize_t n_slots = score.shape[0], n_candidates = score.shape[1]
    best = np.full(n_slots, -1, dtype=np.int64)
    cdef int64_t[::1] best_view = best
    cdef Py_ssize_t slot, position
    for slot in range(n_slots):
        for position in range(n_candidates):
            if found[slot, position] and (
                    best_view[slot] < 0 or score[slot, position] > score[slot, best_view[slot]]):
                best_view[slot] = position
    return best


def score_histogram(hist, Py_ssize_t n_bins, dict params, double gradient_variance=0.0,
                    double lower=-INFINITY, double upper=INFINITY, int monotone=0):
    """Best candidate of one per-era histogram (test entry point of score_tile).

    ``hist`` is a structured array (n_eras, n_bins + 1) of HIST_DTYPE, the
    missing bin last; ``gradient_variance`` as in find_best_splits; ``lower``,
    ``upper`` the node's value bounds and ``monotone`` the feature's
    constraint (docs/des.md §14). Returns a dict (score, gain, mean, std, direction,
    threshold, missing_left) or None when no candidate meets the constraints.
    """
    hist = np.array(hist, dtype=HIST_DTYPE, order="C", copy=True)
    if hist.ndim != 2 or hist.shape[1] != n_bins + 1:
        raise ValueError("hist must have shape (n_eras, n_bins + 1)")
    # score_tile reads per-era prefix sums of the non-missing bins, as
    # unpack_tile(prefix=True) writes them (a sequential running sum).
    for field in ("sum_gradients", "sum_hessians", "count"):
        hist[field][:, :n_bins] = np.cumsum(hist[field][:, :n_bins], axis=1)
    cdef Py_ssize_t n_eras = hist.shape[0]
    if n_eras == 0:
        return None
    cdef hist_entry[:, ::1] hist_view = hist
    cdef pb_split_params c_params = make_split_params(params)
    cdef tile_best best
    era_ids = np.empty(n_eras, dtype=np.int32)
    scratch = np.empty(N_SCRATCH * n_eras)
    candidates = np.empty(N_CANDIDATE_SCRATCH * max(n_bins, 1))
    cdef int32_t[::1] era_view = era_ids
    cdef double[::1] scratch_view = scratch
    cdef double[::1] candidate_view = candidates
    if monotone not in (-1, 0, 1):
        raise ValueError(f"monotone must be -1, 0 or 1, got {monotone}")
    best = score_tile(&hist_view[0, 0], n_bins + 1, n_eras, n_bins, &c_params,
                      gradient_variance, lower, upper, monotone, -INFINITY, &era_view[0],
                      &scratch_view[0], &candidate_view[0])
    if not best.found:
        return None
    return dict(score=best.score, gain=best.gain, mean=best.mean, std=best.std,
                direction=best.direction, threshold=best.threshold,
                missing_left=bool(best.missing_left), left_gradient=best.left_g,
                left_hessian=best.left_h, left_count=best.left_count)


# ---------------------------------------------------------------------------
# Pooled first over node-ordered rows (docs/cpu-kernels.md §3, "The
# node-ordered route"). Deep in a pack a (slot, era) holds few rows, while a
# slot's per-era cells are n_eras x (every feature's bins): most of them are
# cleared, filled and summed over eras only for the pooled bounds, which then
# leave ~98% of the tiles unread when every feature is scanned.
# find_best_splits_by_node sums each slot's cells over all its eras directly
# -- slot by slot from the slot's own rows, each row's codes one contiguous
# run of a row-major copy -- bounds every tile from them, and builds the
# per-era cells of the few tiles that pass from the same rows. Pooled cells
# are a few KiB per slot, so the larger child of a split is its parent's
# minus its sibling's at every depth. A pooled cell is two int64 words
# (gradient sum, row count) or three (and the hessian sum, with two-word era
# cells): it cannot pack the count beside the gradient as an era's cell does,
# its count field holds one era's rows (docs/fixed-point.md §3).

# find_best_splits_by_node cuts a built slot's rows into pieces summed by
# different threads when there are fewer than POOL_PIECES_PER_THREAD pieces of
# POOL_MIN_PIECE_ROWS rows per thread: a piece's extra cost, clearing and
# adding one slot's pooled cells, is a few microseconds. (Module attributes:
# the tests cut small problems into pieces.)
POOL_PIECES_PER_THREAD = 2
POOL_MIN_PIECE_ROWS = 2048


def slot_pieces(built, lengths, Py_ssize_t n_threads):
    """find_best_splits_by_node's pooled-pass work items: each built slot
    (``built``, in schedule order, of ``lengths`` rows) in pieces of about
    equal rows, so that there are POOL_PIECES_PER_THREAD pieces of at least
    POOL_MIN_PIECE_ROWS rows per thread where the rows allow. Returns
    (item_slot, item_piece, item_pieces, item_partial): per item its slot,
    its piece and the slot's pieces, and for pieces past the first the
    partial cells it sums into (consecutive for a slot's pieces)."""
    lengths = np.asarray(lengths, dtype=np.intp)
    piece_rows = max(POOL_MIN_PIECE_ROWS,
                     -(-int(lengths.sum()) // (max(1, n_threads) * POOL_PIECES_PER_THREAD)))
    pieces = np.maximum(1, -(-lengths // piece_rows)).astype(np.intp)
    item_slot = np.repeat(np.asarray(built, dtype=np.intp), pieces)
    item_piece = np.arange(len(item_slot), dtype=np.intp) - np.repeat(np.cumsum(pieces) - pieces,
                                                                      pieces)
    item_pieces = np.repeat(pieces, pieces)
    item_partial = (np.cumsum(item_piece > 0) - 1).astype(np.intp)   # read when piece > 0
    return item_slot, item_piece, item_pieces, item_partial


cdef void pool_rows(
        const uint8_t* X_rows,            # IN  (n_rows, n_columns) codes, row-major
        Py_ssize_t n_columns,
        const fixed_point_rows* rows,
        const row_index_t* slot_rows,     # IN  the slot's rows, ascending
        Py_ssize_t n_slot_rows,
        const feature_index_t* columns,   # IN  (n_members,) columns of X_rows to sum
        const Py_ssize_t* cell_of,        # IN  (n_members,) each one's first pooled cell
        const bin_index_t* n_bins,        # IN  non-missing bins of each column
        Py_ssize_t n_members,
        Py_ssize_t chunk_rows,            # IN  rows whose packed values an int64 can sum
        int64_t* chunk,                   # scratch (slot cells, era-cell words), zero, left zero
        int64_t* pooled,                  # IN/OUT the slot's pooled cells, added to
) noexcept nogil:
    """Add a slot's rows into its pooled cells, for the listed features.

    Rows' packed values (gradient and a count of one, as an era's cells hold
    them) are summed in ``chunk`` by pb_pool_rows (_pooled.pxd) -- one
    read-modify-write per update, the chunk's cells in L1 -- and every
    ``chunk_rows`` rows the chunk is added into the pooled cells' separate
    words: so many rows cannot overflow a packed cell's fields
    (find_best_splits_by_node)."""
    if n_members == 0:
        return
    cdef Py_ssize_t j, done = 0, first_column = columns[0]
    cdef pb_pool_layout layout
    layout.columns = columns
    layout.cell_of = cell_of
    layout.n_members = n_members
    layout.first_column = first_column
    layout.codes_span = columns[n_members - 1] - first_column + 1
    layout.uniform_width = (n_bins[first_column] + 1
                            if layout.codes_span == n_members else 0)
    layout.column_width = n_bins[first_column] + 1
    for j in range(n_members):
        if layout.uniform_width > 0 and (n_bins[columns[j]] + 1 != layout.uniform_width
                                         or cell_of[j] != cell_of[0] + j * layout.uniform_width):
            layout.uniform_width = 0
        if layout.column_width > 0 and (n_bins[columns[j]] + 1 != layout.column_width
                                        or cell_of[j] != columns[j] * layout.column_width):
            layout.column_width = 0
    while done < n_slot_rows:
        pb_pool_rows(X_rows, n_columns, slot_rows, done, min(done + chunk_rows, n_slot_rows),
                     n_slot_rows, rows.packed, rows.hessian_fixed if rows.words == 2 else NULL,
                     &layout, chunk)
        done = min(done + chunk_rows, n_slot_rows)
        fold_chunk(chunk, cell_of, columns, n_bins, n_members, rows, pooled)


cdef void fold_chunk(
        int64_t* chunk, const Py_ssize_t* cell_of, const feature_index_t* columns,
        const bin_index_t* n_bins, Py_ssize_t n_members, const fixed_point_rows* rows,
        int64_t* pooled,
) noexcept nogil:
    """pool_rows' chunk of packed sums into the pooled cells' words; the
    chunk is left zero."""
    cdef Py_ssize_t j, c, words = rows.words, pw = 2 if rows.words == 1 else 3
    cdef int count_bits = rows.count_bits
    cdef int64_t mask = ((<int64_t>1) << count_bits) - 1
    cdef int64_t cell
    for j in range(n_members):
        for c in range(cell_of[j], cell_of[j] + n_bins[columns[j]] + 1):
            cell = chunk[c * words]
            pooled[c * pw] += cell >> count_bits
            pooled[c * pw + 1] += cell & mask
            chunk[c * words] = 0
            if words == 2:
                pooled[c * pw + 2] += chunk[c * 2 + 1]
                chunk[c * 2 + 1] = 0


cdef void list_slot_rows(
        const node_index_t* node_of_row,  # IN  (n_rows, pack_size)
        Py_ssize_t pack_size,
        Py_ssize_t row_start, Py_ssize_t row_end,
        const uint8_t* listed,            # IN  (n_slots,) list this slot's rows?
        int64_t* next_entry,              # IN/OUT (n_slots,) where each slot's next row goes;
                                          #     NULL: count them into slot_count instead
        int64_t* slot_count,
        row_index_t* slot_rows,           # OUT
) noexcept nogil:
    cdef Py_ssize_t row, tree
    cdef node_index_t slot
    for row in range(row_start, row_end):
        for tree in range(pack_size):
            slot = node_of_row[row * pack_size + tree]
            if slot < 0 or not listed[slot]:
                continue
            if next_entry == NULL:
                slot_count[slot] += 1
            else:
                slot_rows[next_entry[slot]] = <row_index_t>row
                next_entry[slot] += 1


cdef struct node_pass:
    # what find_best_splits_by_node's per-slot steps read
    const uint8_t* X_binned
    Py_ssize_t n_rows
    const int32_t* era_of_row
    Py_ssize_t n_eras
    const fixed_point_rows* rows
    const pb_split_params* params
    const row_index_t* slot_rows
    const int64_t* slot_start            # (n_slots + 1,)
    const int32_t* slot_tree
    const feature_index_t* features      # (n_candidates,)
    const Py_ssize_t* cell_of            # (n_candidates,) first pooled cell of each
    Py_ssize_t n_candidates
    Py_ssize_t slot_cells                # pooled cells of a slot
    Py_ssize_t pooled_words
    const bin_index_t* n_bins
    const double* slot_noise
    const double* slot_bounds            # (n_slots, 2) or NULL
    const int8_t* feature_monotone       # (n_candidates,) or NULL
    const uint8_t* scored                # (n_slots, n_candidates)
    int64_t* pooled                      # (n_slots, slot_cells, pooled_words)


cdef double score_slot_by_node(
        const node_pass* work,
        Py_ssize_t slot,
        double* bound,                   # scratch (n_candidates,)
        int64_t* sums,                   # scratch (3, max width)
        int64_t* era_cells,              # scratch (n_eras, max width, words)
        hist_entry* tile,                # scratch (n_eras, max width)
        int32_t* era_ids, double* scratch, double* candidates,
        split_table* table,
        double* record,                  # OUT the slot's slot_left record
) noexcept nogil:
    """Bound every tile of a slot from its pooled cells, then score them
    highest bound first (lowest position on ties) until the next bound is
    below the best score found; each scored tile's per-era cells are summed
    from the slot's rows. Returns the slot's best score (-inf: none)."""
    cdef const fixed_point_rows* rows = rows_of_tree(work.rows, work.slot_tree[slot])
    cdef Py_ssize_t position, best_position, bin_idx, width, entry, words = rows.words
    cdef Py_ssize_t pw = work.pooled_words, era, last_era = -1
    cdef const int64_t* pooled = work.pooled + slot * work.slot_cells * pw
    cdef const int64_t* cell
    cdef const row_index_t* slot_rows = work.slot_rows + work.slot_start[slot]
    cdef Py_ssize_t n_slot_rows = work.slot_start[slot + 1] - work.slot_start[slot]
    cdef int64_t* counts
    cdef int64_t* hessian_sums
    cdef int64_t* target
    cdef const uint8_t* column
    cdef double floor = -INFINITY, best_bound, n_present = 0.0
    cdef double lower = work.slot_bounds[2 * slot] if work.slot_bounds != NULL else -INFINITY
    cdef double upper = work.slot_bounds[2 * slot + 1] if work.slot_bounds != NULL else INFINITY
    cdef feature_index_t feature
    cdef int monotone
    cdef tile_best best
    cdef row_index_t row
    # Eras with rows in the node (rows ascending: eras non-decreasing).
    for entry in range(n_slot_rows):
        era = work.era_of_row[slot_rows[entry]]
        if era != last_era:
            n_present += 1.0
            last_era = era
    for position in range(work.n_candidates):
        bound[position] = -INFINITY
        if not work.scored[slot * work.n_candidates + position]:
            continue
        width = work.n_bins[work.features[position]] + 1
        counts = sums + width
        hessian_sums = counts + width
        for bin_idx in range(width):
            cell = pooled + (work.cell_of[position] + bin_idx) * pw
            sums[bin_idx] = cell[0]
            counts[bin_idx] = cell[1]
            if pw == 3:
                hessian_sums[bin_idx] = cell[2]
        bound[position] = pooled_tile_bound(
            sums, counts, hessian_sums if pw == 3 else NULL, width - 1, n_present, rows,
            work.params, lower, upper,
            work.feature_monotone[position] if work.feature_monotone != NULL else 0,
            candidates)
    while True:
        best_position = -1
        best_bound = -INFINITY
        for position in range(work.n_candidates):
            if bound[position] > best_bound:
                best_bound = bound[position]
                best_position = position
        if best_position < 0 or best_bound < floor:
            break  # no tile left that could reach the slot's best
        bound[best_position] = -INFINITY
        feature = work.features[best_position]
        width = work.n_bins[feature] + 1
        for entry in range(work.n_eras * width * words):
            era_cells[entry] = 0
        column = work.X_binned + feature * work.n_rows
        if words == 1:
            for entry in range(n_slot_rows):
                row = slot_rows[entry]
                era_cells[work.era_of_row[row] * width + column[row]] += rows.packed[row]
        else:
            for entry in range(n_slot_rows):
                row = slot_rows[entry]
                target = era_cells + (work.era_of_row[row] * width + column[row]) * 2
                target[0] += rows.packed[row]
                target[1] += rows.hessian_fixed[row]
        unpack_tile(era_cells, width, work.n_eras, width, rows, tile, width, True)
        monotone = (work.feature_monotone[best_position] if work.feature_monotone != NULL
                    else 0)
        best = score_tile(tile, width, work.n_eras, width - 1, work.params,
                          work.slot_noise[slot], lower, upper, monotone, floor, era_ids,
                          scratch, candidates)
        floor = max(floor, store_tile_best(table, slot, best_position, &best, record))
    return floor


def pooled_cells_size(Py_ssize_t n_slots, features, n_bins, fixed):
    """int64 entries of find_best_splits_by_node's pooled cells for
    ``n_slots`` slots over ``features``."""
    words = 2 if fixed.hessian_is_constant else 3
    return n_slots * int(np.sum(np.asarray(n_bins)[np.asarray(features)] + 1)) * words


def find_best_splits_by_node(
        const uint8_t[:, ::1] X_rows,             # IN  (n_rows, n_candidates) the candidate
                                                  #     features' codes, row-major
        const uint8_t[:, ::1] X_binned,           # IN  (n_features, n_rows) every feature's codes
        fixed,                                    # IN  _fixed_point.FixedPointGradients
        const int32_t[::1] era_of_row,            # IN  (n_rows,) non-decreasing
        Py_ssize_t n_eras,
        const node_index_t[:, ::1] node_of_row,   # IN  (n_rows, pack_size) slot or < 0
        const int32_t[::1] slot_tree,             # IN  (n_slots,) tree of each slot
        const uint8_t[::1] slot_open,             # IN  (n_slots,) may the slot split?
        const feature_index_t[::1] features,      # IN  (n_candidates,) K_d, ascending
        const uint8_t[:, ::1] tree_uses_feature,  # IN  (n_candidates, pack_size)
        const bin_index_t[::1] n_bins,            # IN  (n_features,) non-missing bins
        dict params,
        int n_threads,
        slot_gradient_variance=None,
        int64_t[::1] pooled_cells=None,
        const int64_t[::1] parent_pooled=None,
        const uint8_t[::1] slot_kind=None,
        const int32_t[::1] slot_parent=None,
        const uint8_t[:, ::1] tree_extra_feature=None,
        const double[:, ::1] slot_bounds=None,
        const int8_t[::1] feature_monotone=None,
        const uint8_t[:, ::1] slot_allows_feature=None,
):
    """``find_best_splits(..., best_per_slot=True)`` by the pooled-first route
    over node-ordered rows, for realized era gains with equal era weights
    (what pooled bounds need): every slot's winner, its ``slot_left`` and so
    the tree are the same (tests/test_node_route.py).

    Each open slot's rows are listed (ascending, so era by era); a slot's
    cells pooled over eras (``pooled_cells``: ``pooled_cells_size`` int64,
    kept by the caller for the next depth) are summed from its rows' codes in
    ``X_rows`` (the candidates' codes, gathered row-major by the caller: a
    row's codes are one contiguous run) -- or, for a SLOT_DERIVE slot, taken
    as ``parent_pooled`` of ``slot_parent`` minus its SLOT_BUILD sibling
    ``slot ^ 1``'s, summing only the ``tree_extra_feature`` its parent's tree
    did not use. Every tile is
    bounded from its pooled cells (pooled_tile_bound, as bound_slot_tiles
    does from per-era cells) and tiles are scored highest bound first, each
    one's per-era cells summed from the slot's rows, until the next bound is
    below the slot's best score. Returns find_best_splits' dict."""
    cdef Py_ssize_t n_slots = slot_tree.shape[0]
    cdef Py_ssize_t n_candidates = features.shape[0]
    cdef Py_ssize_t n_rows = node_of_row.shape[0], pack_size = node_of_row.shape[1]
    cdef pb_split_params c_params = make_split_params(params)
    if (c_params.era_gain != DES_ERA_GAIN_REALIZED
            or c_params.era_weighting != PB_ERA_WEIGHTING_EQUAL):
        raise ValueError("find_best_splits_by_node needs era_gain='realized' and "
                         "era_weighting='equal' (pooled bounds)")
    n_threads = max(1, n_threads)
    result, records = empty_split_result(n_slots, n_candidates, n_threads)
    if n_slots == 0 or n_candidates == 0 or n_eras == 0 or not np.any(slot_open):
        result["slot_left"] = slot_first_maximum(records)
        return result
    if X_rows.shape[0] != n_rows or X_rows.shape[1] != n_candidates or X_binned.shape[1] != n_rows:
        raise ValueError(f"X_rows must be ({n_rows}, {n_candidates}) and X_binned have {n_rows} "
                         "rows")
    if era_of_row.shape[0] != n_rows:
        raise ValueError(f"era_of_row must have {n_rows} entries")
    if tree_uses_feature.shape[0] != n_candidates or tree_uses_feature.shape[1] != pack_size:
        raise ValueError(f"tree_uses_feature must be ({n_candidates}, {pack_size})")
    cdef const double[::1] slot_noise = slot_noise_of(slot_gradient_variance, n_slots)
    check_constraint_shapes(n_slots, n_candidates, slot_bounds, feature_monotone,
                            slot_allows_feature)
    # One view per output: a slot's rows are summed and scored with its
    # tree's output's (rows_of_tree).
    cdef fixed_point_rows output_rows[MAX_PACK_SIZE]
    view_outputs(fixed, n_rows, pack_size, &output_rows[0])
    cdef fixed_point_rows* rows = &output_rows[0]
    cdef Py_ssize_t pw = 2 if rows.words == 1 else 3

    feature_array = np.asarray(features, dtype=np.intp)
    widths = np.asarray(n_bins)[feature_array].astype(np.intp) + 1
    cell_of = np.zeros(n_candidates, dtype=np.intp)
    np.cumsum(widths[:n_candidates - 1], out=cell_of[1:])
    cdef Py_ssize_t slot_cells = int(widths.sum())
    cdef Py_ssize_t max_width = int(widths.max())
    if pooled_cells is None:
        pooled_cells = np.empty(n_slots * slot_cells * pw, dtype=np.int64)
    if pooled_cells.shape[0] < n_slots * slot_cells * pw:
        raise ValueError("pooled_cells must have pooled_cells_size(...) entries")
    open_mask = np.asarray(slot_open) != 0
    kinds = (np.asarray(slot_kind) if slot_kind is not None
             else np.where(open_mask, SLOT_BUILD, SLOT_SKIP).astype(np.uint8))
    if kinds.shape[0] != n_slots:
        raise ValueError(f"slot_kind must have {n_slots} entries")
    if np.any(open_mask & (kinds == SLOT_SKIP)):
        raise ValueError("an open slot has slot_kind SLOT_SKIP (no cells to score)")
    derived = np.flatnonzero(kinds == SLOT_DERIVE)
    cdef Py_ssize_t n_parent_slots = 0
    if len(derived):
        if (parent_pooled is None or slot_parent is None or tree_extra_feature is None
                or np.any(kinds[derived ^ 1] != SLOT_BUILD)
                or np.any(np.asarray(slot_parent)[derived] < 0)):
            raise ValueError("a SLOT_DERIVE slot needs parent_pooled, a parent, a SLOT_BUILD "
                             "sibling and tree_extra_feature")
        n_parent_slots = parent_pooled.shape[0] // (slot_cells * pw)
        if (parent_pooled.shape[0] != n_parent_slots * slot_cells * pw
                or np.asarray(slot_parent)[derived].max() >= n_parent_slots):
            raise ValueError("parent_pooled does not match the features' cells")
    uses = np.asarray(tree_uses_feature).T != 0                 # (pack_size, n_candidates)
    scored = (uses[np.asarray(slot_tree)] & open_mask[:, None]).astype(np.uint8)
    if slot_allows_feature is not None:
        scored &= np.asarray(slot_allows_feature) != 0

    # Each listed slot's rows, ascending: the threads count their parts' rows
    # per slot, then write them where the counts say (parts in row order;
    # a few per thread, taken as they come: docs/cpu-kernels.md §9).
    listed = (open_mask | (kinds == SLOT_BUILD)).astype(np.uint8)
    cdef const uint8_t[::1] listed_view = listed
    cdef Py_ssize_t n_parts = max(1, min(4 * n_threads, n_rows // ROWS_PER_TASK + 1)), part
    part_rows = np.linspace(0, n_rows, n_parts + 1).astype(np.intp)
    cdef const Py_ssize_t[::1] part_view = part_rows
    part_counts = np.zeros((n_parts, n_slots), dtype=np.int64)
    cdef int64_t[:, ::1] part_count_view = part_counts
    for part in prange(n_parts, nogil=True, schedule='dynamic', num_threads=n_threads):
        list_slot_rows(&node_of_row[0, 0], pack_size, part_view[part], part_view[part + 1],
                       &listed_view[0], NULL, &part_count_view[part, 0], NULL)
    slot_start = np.zeros(n_slots + 1, dtype=np.int64)
    np.cumsum(part_counts.sum(axis=0), out=slot_start[1:])
    next_entry = np.ascontiguousarray(slot_start[:n_slots][None, :] + np.cumsum(part_counts, axis=0)
                                      - part_counts)
    cdef int64_t[:, ::1] next_view = next_entry
    slot_rows = np.empty(max(1, int(slot_start[n_slots])), dtype=np.int32)
    cdef row_index_t[::1] slot_row_view = slot_rows
    for part in prange(n_parts, nogil=True, schedule='dynamic', num_threads=n_threads):
        list_slot_rows(&node_of_row[0, 0], pack_size, part_view[part], part_view[part + 1],
                       &listed_view[0], &next_view[part, 0], NULL, &slot_row_view[0])

    # Per tree, the features it uses (and, for a derived slot, those its
    # parent's tree did not) as columns of X_rows and first pooled cells.
    column_bins = np.ascontiguousarray(np.asarray(n_bins)[feature_array], dtype=np.int32)
    cdef const bin_index_t[::1] column_bin_view = column_bins
    tree_columns = np.zeros((2, pack_size, max(1, n_candidates)), dtype=np.int32)
    tree_cells = np.zeros((2, pack_size, max(1, n_candidates)), dtype=np.intp)
    tree_count = np.zeros((2, pack_size), dtype=np.intp)
    extra = (np.asarray(tree_extra_feature).T != 0 if tree_extra_feature is not None
             else np.zeros_like(uses))
    for tree in range(pack_size):
        for which, mask in ((0, uses[tree]), (1, uses[tree] & extra[tree])):
            used = np.flatnonzero(mask)
            tree_columns[which, tree, :len(used)] = used
            tree_cells[which, tree, :len(used)] = cell_of[used]
            tree_count[which, tree] = len(used)
    cdef const int32_t[:, :, ::1] column_view = tree_columns
    cdef const Py_ssize_t[:, :, ::1] tree_cell_view = tree_cells
    cdef const Py_ssize_t[:, ::1] tree_count_view = tree_count
    cdef const uint8_t[::1] kind_view = kinds
    cdef const int64_t[::1] start_view = slot_start
    cdef const Py_ssize_t[::1] cell_of_view = cell_of
    cdef const uint8_t[:, ::1] scored_view = scored
    cdef const int32_t[::1] parent_view = (slot_parent if slot_parent is not None
                                           else np.zeros(n_slots, dtype=np.int32))
    cdef const int64_t* parent_pointer = (&parent_pooled[0] if n_parent_slots > 0 else NULL)
    cdef int64_t* pooled_pointer = &pooled_cells[0]
    cdef Py_ssize_t slot, tree_of_slot, j, cell_index, slot_size = slot_cells * pw
    cdef const int64_t* from_parent
    cdef const int64_t* from_sibling
    cdef const int64_t* from_piece
    cdef int64_t* target
    # Rows a chunk of packed sums can take: fewer than 2**count_bits (the
    # count field) and few enough that their gradients' magnitudes add up to
    # less than an era's may (docs/fixed-point.md §3), whichever rows they are.
    largest = fixed.largest_gradient_units
    cdef Py_ssize_t chunk_rows = max(1, min((1 << int(rows.count_bits)) - 1,
                                            (1 << (61 - int(rows.count_bits))) // max(1, largest)))
    chunks = np.zeros((n_threads, slot_cells * rows.words), dtype=np.int64)
    cdef int64_t[:, ::1] chunk_view = chunks
    # Built slots first (largest first for the dynamic schedule), then the
    # derived ones from them. A built slot's rows are cut into pieces when
    # the slots are too few to keep the threads busy (near the roots: a
    # pack's 8 smaller children at depth 1): piece 0 sums into the slot's
    # pooled cells, the others into partial cells added to them after.
    order = np.argsort(-np.diff(slot_start), kind="stable").astype(np.intp)
    cdef const Py_ssize_t[::1] order_view = order
    built = order[kinds[order] == SLOT_BUILD]
    item_slot, item_piece, item_pieces, item_partial = slot_pieces(
        built, np.diff(slot_start)[built], n_threads)
    partials = np.empty(max(1, int(np.sum(item_piece > 0))) * slot_size, dtype=np.int64)
    cdef const Py_ssize_t[::1] item_slot_view = item_slot
    cdef const Py_ssize_t[::1] item_piece_view = item_piece
    cdef const Py_ssize_t[::1] item_pieces_view = item_pieces
    cdef const Py_ssize_t[::1] item_partial_view = item_partial
    cdef int64_t[::1] partial_view = partials
    cdef int64_t* partial_pointer = &partial_view[0]
    cdef Py_ssize_t n_items = item_slot.shape[0]
    cdef Py_ssize_t rank, item, piece, n_pieces, n_slot_rows, low, high
    for item in prange(n_items, nogil=True, schedule='dynamic', num_threads=n_threads):
        slot = item_slot_view[item]
        piece = item_piece_view[item]
        n_pieces = item_pieces_view[item]
        tree_of_slot = slot_tree[slot]
        n_slot_rows = start_view[slot + 1] - start_view[slot]
        low = start_view[slot] + n_slot_rows * piece // n_pieces
        high = start_view[slot] + n_slot_rows * (piece + 1) // n_pieces
        target = (pooled_pointer + slot * slot_size if piece == 0
                  else partial_pointer + item_partial_view[item] * slot_size)
        for cell_index in range(slot_size):
            target[cell_index] = 0
        pool_rows(&X_rows[0, 0], n_candidates, rows_of_tree(rows, tree_of_slot),
                  &slot_row_view[low], high - low,
                  &column_view[0, tree_of_slot, 0], &tree_cell_view[0, tree_of_slot, 0],
                  &column_bin_view[0], tree_count_view[0, tree_of_slot],
                  chunk_rows, &chunk_view[threadid(), 0], target)
    for item in prange(n_items, nogil=True, schedule='static', num_threads=n_threads):
        if item_piece_view[item] != 0 or item_pieces_view[item] == 1:
            continue
        # the slot's pieces 1.. are its next items, their partials consecutive
        target = pooled_pointer + item_slot_view[item] * slot_size
        for piece in range(1, item_pieces_view[item]):
            from_piece = partial_pointer + item_partial_view[item + piece] * slot_size
            for cell_index in range(slot_size):
                target[cell_index] = target[cell_index] + from_piece[cell_index]
    for rank in prange(n_slots, nogil=True, schedule='dynamic', num_threads=n_threads):
        slot = order_view[rank]
        if kind_view[slot] != SLOT_DERIVE:
            continue
        tree_of_slot = slot_tree[slot]
        target = pooled_pointer + slot * slot_size
        from_parent = parent_pointer + parent_view[slot] * slot_size
        from_sibling = pooled_pointer + (slot ^ 1) * slot_size
        for cell_index in range(slot_size):
            target[cell_index] = from_parent[cell_index] - from_sibling[cell_index]
        if tree_count_view[1, tree_of_slot] > 0:
            for j in range(tree_count_view[1, tree_of_slot]):
                for cell_index in range(tree_cell_view[1, tree_of_slot, j] * pw,
                                        (tree_cell_view[1, tree_of_slot, j]
                                         + column_bin_view[column_view[1, tree_of_slot, j]]
                                         + 1) * pw):
                    target[cell_index] = 0
            pool_rows(&X_rows[0, 0], n_candidates, rows_of_tree(rows, tree_of_slot),
                      &slot_row_view[start_view[slot]],
                      start_view[slot + 1] - start_view[slot], &column_view[1, tree_of_slot, 0],
                      &tree_cell_view[1, tree_of_slot, 0], &column_bin_view[0],
                      tree_count_view[1, tree_of_slot], chunk_rows, &chunk_view[threadid(), 0],
                      target)

    cdef node_pass work
    work.X_binned = &X_binned[0, 0]
    work.n_rows = n_rows
    work.era_of_row = &era_of_row[0]
    work.n_eras = n_eras
    work.rows = rows
    work.params = &c_params
    work.slot_rows = &slot_row_view[0]
    work.slot_start = &start_view[0]
    work.slot_tree = &slot_tree[0]
    work.features = &features[0]
    work.cell_of = &cell_of_view[0]
    work.n_candidates = n_candidates
    work.slot_cells = slot_cells
    work.pooled_words = pw
    work.n_bins = &n_bins[0]
    work.slot_noise = &slot_noise[0]
    work.slot_bounds = &slot_bounds[0, 0] if slot_bounds is not None else NULL
    work.feature_monotone = &feature_monotone[0] if feature_monotone is not None else NULL
    work.scored = &scored_view[0, 0]
    work.pooled = pooled_pointer

    bound_buffers = np.empty((n_threads, n_candidates))
    sum_buffers = np.empty((n_threads, 3 * max_width), dtype=np.int64)
    era_cell_buffers = np.empty((n_threads, n_eras * max_width * rows.words), dtype=np.int64)
    tile_buffers = np.empty((n_threads, n_eras * max_width), dtype=HIST_DTYPE)
    era_id_buffers = np.empty((n_threads, n_eras), dtype=np.int32)
    scratch_buffers = np.empty((n_threads, N_SCRATCH * n_eras), dtype=np.float64)
    candidate_buffers = np.empty((n_threads, N_CANDIDATE_SCRATCH * max_width), dtype=np.float64)
    cdef double[:, ::1] bound_view = bound_buffers
    cdef int64_t[:, ::1] sum_view = sum_buffers
    cdef int64_t[:, ::1] era_cell_view = era_cell_buffers
    cdef hist_entry[:, ::1] tile_view = tile_buffers
    cdef int32_t[:, ::1] era_id_view = era_id_buffers
    cdef double[:, ::1] scratch_view = scratch_buffers
    cdef double[:, ::1] candidate_view = candidate_buffers
    cdef double[:, :, ::1] record_view = records
    cdef split_table table = split_table_of(result, records)
    cdef Py_ssize_t thread
    for rank in prange(n_slots, nogil=True, schedule='dynamic', num_threads=n_threads):
        slot = order_view[rank]
        if not slot_open[slot]:
            continue
        thread = threadid()
        score_slot_by_node(&work, slot, &bound_view[thread, 0], &sum_view[thread, 0],
                           &era_cell_view[thread, 0], &tile_view[thread, 0],
                           &era_id_view[thread, 0], &scratch_view[thread, 0],
                           &candidate_view[thread, 0], &table, &record_view[thread, slot, 0])
    result["slot_left"] = slot_first_maximum(records)
    return result


def pool_era_cells(const int64_t[::1] depth_cells, Py_ssize_t n_eras, Py_ssize_t n_slots,
                   features, n_bins, Py_ssize_t features_per_pass, fixed,
                   int64_t[::1] pooled, int n_threads):
    """find_best_splits' kept per-era cells (``depth_cells``, of ``features``
    in the blocks ``features_per_pass`` made) summed over eras into
    find_best_splits_by_node's pooled cells: the parents of a depth that
    takes the node-ordered route after one that did not. Cells of a closed
    slot hold whatever the buffer did (nothing reads them); the sums wrap
    rather than trap."""
    # Each block's first pooled cell: its cells in depth_cells are (era,
    # slot, the block's features' cells).
    widths = np.asarray(n_bins)[np.asarray(features, dtype=np.intp)].astype(np.intp) + 1
    per_pass, n_feature_blocks = feature_blocks(len(widths), features_per_pass)
    block_bounds = np.zeros(n_feature_blocks + 1, dtype=np.intp)
    ends = np.minimum(np.arange(1, n_feature_blocks + 1) * per_pass, len(widths))
    block_bounds[1:] = np.cumsum(widths)[ends - 1]
    cdef const Py_ssize_t[::1] block_start = block_bounds
    cdef Py_ssize_t n_blocks = block_start.shape[0] - 1
    cdef Py_ssize_t slot_cells = block_start[n_blocks]
    cdef int count_bits = int(fixed.count_bits)
    cdef Py_ssize_t words = 1 if fixed.hessian_is_constant else 2
    cdef Py_ssize_t pw = words + 1
    if depth_cells.shape[0] != n_eras * n_slots * slot_cells * words:
        raise ValueError("depth_cells do not match the slots' cells")
    if pooled.shape[0] < n_slots * slot_cells * pw:
        raise ValueError("pooled must have pooled_cells_size(...) entries")
    cdef Py_ssize_t slot, block, era, c, stride
    cdef int64_t* target
    if n_slots == 0 or slot_cells == 0:
        return
    for slot in prange(n_slots, nogil=True, schedule='dynamic', num_threads=max(1, n_threads)):
        target = &pooled[slot * slot_cells * pw]
        for c in range(slot_cells * pw):
            target[c] = 0
        for block in range(n_blocks):
            stride = block_start[block + 1] - block_start[block]
            for era in range(n_eras):
                add_to_pooled(&depth_cells[0] + block_start[block] * n_eras * n_slots * words
                              + (era * n_slots + slot) * stride * words, stride, words,
                              count_bits, target + block_start[block] * pw)
