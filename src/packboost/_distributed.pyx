# cython: language_level=3
"""Kernels of distributed training: one shard's share of a depth (docs/distributed.md).

A shard is a contiguous range of whole eras (hence of era-sorted rows) held by
one Dask worker. Per depth the driver needs, per candidate split, sums over
*all* eras. Two kinds of sums occur (docs/distributed.md §3):

* exact ones -- fixed-point gradient/hessian sums and counts: every partial
  sum is an integer number of grid steps below 2^52 (docs/fixed-point.md), so
  shards sum them in any order and the driver adds the shards' results;
* float ones in era order -- the DES era pass (csrc/des.h des_candidate_push:
  sum w (gain_e - mu)^2, the noise term, the direction vote) and newton means.
  These are *continued*: a shard starts from the running state the previous
  shard (eras before its own) ended with and pushes its eras in order, with
  the very des.h functions that the CPU's score_tile calls. The additions are
  then exactly the single-machine ones, in the same order: bit-identical.

The same holds for the slot sums (``chained_slot_sums``): _partition.slot_sums
adds squared gradients in float64 over 16 fixed chunks of the global rows; a
shard continues the partials of the chunks its rows fall in.
"""

import numpy as np

from cython.parallel cimport prange

from libc.math cimport INFINITY
from libc.stdint cimport int8_t, uint8_t, int32_t, int64_t, uint64_t

from packboost.tree cimport bin_code_t, feature_index_t, bin_index_t, node_index_t
from packboost._split_params cimport (pb_split_params, make_split_params, candidate_is_scored,
                                      monotone_order_holds,
                                      DES_ERA_GAIN_NEWTON, PB_ERA_WEIGHTING_COUNT)
from packboost._slot_sums cimport SUM_CHUNKS as ROW_CHUNKS, TRASH_ROWS, add_rows_to_chunk
from packboost._des cimport (des_candidate_t, des_result_t, des_pooled_gain,
                             des_candidate_begin, des_candidate_begin_bounded,
                             des_bounded_gain, des_era_gain, des_realized_mean,
                             des_candidate_set_mean, des_candidate_set_noise,
                             des_candidate_push, des_candidate_finish)


# The chunking of the global rows, shared with _partition.slot_sums (Python
# name for backends/dask.py).
SUM_CHUNKS = ROW_CHUNKS

# The running state of a candidate's era pass that crosses the network.
STATE_FIELDS = ("weight_total", "sum_squares", "direction", "noise_sum", "weight_squares")
N_STATE = 5

# candidate_pass modes
cdef enum:
    PASS_NEWTON_MEAN = 0   # continue sum_e w_e gain_e (newton gains)
    PASS_CONTINUE = 1      # continue the des_candidate_push accumulators
    PASS_FINISH = 2        # no era: des_candidate_finish on the final state -> score, gain
MODE_NEWTON_MEAN = PASS_NEWTON_MEAN
MODE_PASS = PASS_CONTINUE
MODE_FINISH = PASS_FINISH


def chained_slot_sums(const double[::1] gradients, const double[::1] hessians,
                      const node_index_t[:, ::1] node_of_row, Py_ssize_t n_slots,
                      const int64_t[::1] chunk_bounds, partial, int n_threads=1):
    """Continue _partition.slot_sums' chunk partials (SUM_CHUNKS, n_slots +
    TRASH_ROWS, 4; _partition.chunk_partials) over this shard's rows; in
    place. ``chunk_bounds`` (SUM_CHUNKS + 1,): the global row chunks cut to
    this shard (chunk c is its rows chunk_bounds[c] .. chunk_bounds[c + 1] - 1,
    RowShard.chunk_bounds). Chunks are independent sums: ``n_threads``
    threads share them out, each chunk's rows added in row order, as
    _partition.slot_sums does."""
    cdef double[:, :, ::1] view = partial
    cdef Py_ssize_t n_rows = node_of_row.shape[0], chunk
    if n_slots <= 0:
        return partial
    if view.shape[0] != ROW_CHUNKS or view.shape[1] != n_slots + TRASH_ROWS or view.shape[2] != 4:
        raise ValueError(f"partial must be ({ROW_CHUNKS}, {n_slots + TRASH_ROWS}, 4) "
                         f"(_partition.chunk_partials), got {tuple(partial.shape)}")
    if chunk_bounds.shape[0] != ROW_CHUNKS + 1 or chunk_bounds[0] < 0 \
            or chunk_bounds[ROW_CHUNKS] > n_rows:
        raise ValueError(f"chunk_bounds must be {ROW_CHUNKS + 1} rows of the shard")
    for chunk in prange(ROW_CHUNKS, nogil=True, schedule='dynamic',
                        num_threads=max(1, min(n_threads, ROW_CHUNKS))):
        if chunk_bounds[chunk + 1] > chunk_bounds[chunk]:
            add_rows_to_chunk(&gradients[0], &hessians[0], node_of_row,
                              chunk_bounds[chunk], chunk_bounds[chunk + 1],
                              &view[chunk, 0, 0], -1)  # by a branch: shards take no flag
    return partial


def cell_layout(features, n_bins, Py_ssize_t features_per_pass, Py_ssize_t n_eras,
                Py_ssize_t n_slots, Py_ssize_t words):
    """Where each candidate feature's cells are in _split.find_best_splits'
    ``depth_cells`` (features cut into blocks as _split.feature_blocks cuts
    them; a block's cells are (era, slot, its features' cells) x ``words``).

    Returns int64 arrays over the depth's features: ``base`` (the feature's
    first cell of era 0, slot 0), ``stride`` (entries from one (era, slot)
    to the next) and ``prefix`` (cells of the features before it: its first
    cell in a slot's pooled cells, _split.pool_era_cells)."""
    from packboost._split import feature_blocks

    widths = np.asarray(n_bins)[np.asarray(features, dtype=np.intp)].astype(np.int64) + 1
    n_candidates = len(widths)
    prefix = np.zeros(n_candidates + 1, dtype=np.int64)
    prefix[1:] = np.cumsum(widths)
    per_pass = feature_blocks(n_candidates, features_per_pass)[0]
    position = np.arange(n_candidates)
    first = (position // per_pass) * per_pass
    end = np.minimum(first + per_pass, n_candidates)
    stride = (prefix[end] - prefix[first]) * words
    base = prefix[first] * n_eras * n_slots * words + (prefix[position] - prefix[first]) * words
    return base, stride, prefix[:n_candidates].copy()


cdef inline int64_t _units(uint64_t cell, int count_bits) noexcept nogil:
    """A packed cell's gradient units: an arithmetic shift, written without
    shifting a negative value (as _split.pool_era_cells does)."""
    cdef uint64_t sign_bit = (<uint64_t>1) << 63
    return <int64_t>(((cell ^ sign_bit) >> count_bits) - (sign_bit >> count_bits))


def pooled_from_cells(const int64_t[::1] pooled_cells, const int64_t[::1] prefix,
                      const int64_t[::1] widths, Py_ssize_t n_slots, Py_ssize_t width,
                      fixed):
    """_split.pool_era_cells' pooled cells (gradient units, count, hessian
    units per cell) as the (n_slots, n_features_d, width, 3) float64 sums
    enumerate_candidates reads (g, h, count; exact grid values)."""
    cdef Py_ssize_t n_cand = prefix.shape[0], slot, position, b
    cdef Py_ssize_t words = 1 if fixed.hessian_is_constant else 2, pw = words + 1
    cdef Py_ssize_t slot_cells = (prefix[n_cand - 1] + widths[n_cand - 1]) if n_cand else 0
    cdef double gradient_scale = fixed.gradient_scale, hessian_scale = fixed.hessian_scale
    cdef double constant_hessian = fixed.constant_hessian
    pooled = np.zeros((n_slots, n_cand, width, 3))
    cdef double[:, :, :, ::1] out = pooled
    cdef const int64_t* cell
    with nogil:
        for slot in range(n_slots):
            for position in range(n_cand):
                for b in range(widths[position]):
                    cell = &pooled_cells[(slot * slot_cells + prefix[position] + b) * pw]
                    out[slot, position, b, 0] = cell[0] / gradient_scale
                    out[slot, position, b, 2] = <double>cell[1]
                    out[slot, position, b, 1] = (cell[2] / hessian_scale if words == 2
                                                 else constant_hessian * <double>cell[1])
    return pooled


def clear_skipped_eras(int64_t[::1] cells, const int64_t[::1] base, const int64_t[::1] stride,
                       const int64_t[::1] widths, const int32_t[::1] slot_tree,
                       era_tree_rows, Py_ssize_t words):
    """Zero the cells of every (era, slot) whose tree holds no row of the era
    (``era_tree_rows[era, tree] == 0``, find_best_splits' flags): the pass
    skips them, so they keep what the buffer held (the local scan never
    reads them; the shard pools and counts every era)."""
    if era_tree_rows is None:
        return
    cdef const uint8_t[:, ::1] flags = era_tree_rows
    cdef Py_ssize_t n_slots = slot_tree.shape[0], n_cand = base.shape[0]
    cdef Py_ssize_t era, slot, position, c, start
    with nogil:
        for era in range(flags.shape[0]):
            for slot in range(n_slots):
                if flags[era, slot_tree[slot]]:
                    continue
                for position in range(n_cand):
                    start = base[position] + (era * n_slots + slot) * stride[position]
                    for c in range(widths[position] * words):
                        cells[start + c] = 0


def era_rows_from_cells(const int64_t[::1] cells, const int64_t[::1] base,
                        const int64_t[::1] stride, const int64_t[::1] widths,
                        const int32_t[::1] slot_tree, const uint8_t[::1] slot_open,
                        const uint8_t[:, ::1] tree_uses_feature, Py_ssize_t n_eras,
                        Py_ssize_t words, int count_bits):
    """Rows of each open slot in each era (n_slots, n_eras) float64, from the
    counts of the first feature its tree uses (0 where it uses none: the slot
    then has no candidate)."""
    cdef Py_ssize_t n_slots = slot_tree.shape[0], n_cand = base.shape[0]
    cdef Py_ssize_t slot, position, era, b, chosen
    cdef uint64_t mask = ((<uint64_t>1) << count_bits) - 1
    era_rows = np.zeros((n_slots, n_eras))
    cdef double[:, ::1] out = era_rows
    cdef const int64_t* first
    cdef uint64_t count
    with nogil:
        for slot in range(n_slots):
            if not slot_open[slot]:
                continue
            chosen = -1
            for position in range(n_cand):
                if tree_uses_feature[position, slot_tree[slot]]:
                    chosen = position
                    break
            if chosen < 0:
                continue
            for era in range(n_eras):
                first = &cells[base[chosen] + (era * n_slots + slot) * stride[chosen]]
                count = 0
                for b in range(widths[chosen]):
                    count = count + (<uint64_t>first[b * words] & mask)
                out[slot, era] = <double>count
    return era_rows


def enumerate_candidates(const double[:, :, :, ::1] pooled, const double[::1] eras_present,
                         const int32_t[::1] slot_tree, const uint8_t[::1] slot_open,
                         const feature_index_t[::1] features,
                         const uint8_t[:, ::1] tree_uses_feature,
                         const bin_index_t[::1] n_bins, dict params, totals=None,
                         weighted_left=None, constraints=None):
    """The candidates _split.score_tile scores, in its order, from the pooled
    (all eras) per-bin sums (n_slots, n_features_d, width, 3), with their
    pooled node/left sums and, for realized gains, their closed-form mean.
    Equal era weights: weight_total = eras present, weighted sums = pooled.
    Count weights: ``totals`` (n_slots, n_features_d, 5) and ``weighted_left``
    (n_slots, n_features_d, width, 2), the era-weighted sums of all eras
    (continue_era_weights, continue_weighted_bin). ``constraints``: None or
    find_best_splits' constraint arrays (``slot_bounds``,
    ``feature_monotone``, ``slot_allows_feature``, each optional): a pair
    not allowed has no candidate, a monotone feature's candidates keep its
    order, and bounded nodes use clipped values: each candidate records
    whether its node is ``bounded`` and its ``lower`` and ``upper`` bounds,
    which candidate_pass reads."""
    cdef pb_split_params c = make_split_params(params)
    cdef const double[:, ::1] bounds_view
    cdef const int8_t[::1] monotone_view
    cdef const uint8_t[:, ::1] allows_view
    cdef bint has_bounds = False, has_monotone = False, has_allows = False
    cdef double lower = -INFINITY, upper = INFINITY
    cdef int monotone = 0
    cdef bint bounded
    constraints = constraints or {}
    if constraints.get("slot_bounds") is not None:
        bounds_view = constraints["slot_bounds"]
        has_bounds = True
    if constraints.get("feature_monotone") is not None:
        monotone_view = constraints["feature_monotone"]
        has_monotone = True
    if constraints.get("slot_allows_feature") is not None:
        allows_view = constraints["slot_allows_feature"]
        has_allows = True
    cdef bint count_weights = c.era_weighting == PB_ERA_WEIGHTING_COUNT
    cdef const double[:, :, ::1] total_view
    cdef const double[:, :, :, ::1] left_view
    if count_weights:
        if totals is None or weighted_left is None:
            raise ValueError("era_weighting='count' needs totals and weighted_left")
        total_view = totals
        left_view = weighted_left
    cdef double w_sum_g, w_sum_h, w_missing_g, w_missing_h, cand_w_g, cand_w_h
    cdef Py_ssize_t n_slots = slot_tree.shape[0], n_cand = features.shape[0]
    cdef Py_ssize_t width = pooled.shape[2]
    # At most two candidates (missing side) per threshold of every open tile.
    cdef Py_ssize_t capacity = 2 * n_slots * n_cand * max(width - 1, 0)
    slot_out = np.empty(capacity, dtype=np.int32)
    position_out = np.empty(capacity, dtype=np.int32)
    threshold_out = np.empty(capacity, dtype=np.int32)
    missing_out = np.empty(capacity, dtype=np.uint8)
    bounded_out = np.empty(capacity, dtype=np.uint8)
    sums = np.empty((7, capacity))
    cdef int32_t[::1] o_slot = slot_out, o_position = position_out, o_threshold = threshold_out
    cdef uint8_t[::1] o_missing = missing_out, o_bounded = bounded_out
    cdef double[:, ::1] o_sums = sums
    cdef Py_ssize_t slot, position, b, nb, n = 0
    cdef int side, missing_left
    cdef double sum_g, sum_h, sum_count, miss_g, miss_h, miss_count
    cdef double left_g, left_h, left_count, cand_g, cand_h, cand_count, weight_total
    cdef des_candidate_t state
    with nogil:
        for slot in range(n_slots):
            if not slot_open[slot]:
                continue
            weight_total = eras_present[slot]
            if has_bounds:
                lower = bounds_view[slot, 0]
                upper = bounds_view[slot, 1]
            for position in range(n_cand):
                if not tree_uses_feature[position, slot_tree[slot]]:
                    continue
                if has_allows and not allows_view[slot, position]:
                    continue
                monotone = monotone_view[position] if has_monotone else 0
                bounded = monotone != 0 or lower > -INFINITY or upper < INFINITY
                nb = n_bins[features[position]]
                sum_g = sum_h = sum_count = 0.0
                for b in range(nb + 1):
                    sum_g += pooled[slot, position, b, 0]
                    sum_h += pooled[slot, position, b, 1]
                    sum_count += pooled[slot, position, b, 2]
                if sum_count == 0.0:
                    continue
                if count_weights:
                    weight_total = total_view[slot, position, 0]
                    w_sum_g = total_view[slot, position, 1]
                    w_sum_h = total_view[slot, position, 2]
                    w_missing_g = total_view[slot, position, 3]
                    w_missing_h = total_view[slot, position, 4]
                miss_g = pooled[slot, position, nb, 0]
                miss_h = pooled[slot, position, nb, 1]
                miss_count = pooled[slot, position, nb, 2]
                left_g = left_h = left_count = 0.0
                for b in range(nb):
                    left_g += pooled[slot, position, b, 0]
                    left_h += pooled[slot, position, b, 1]
                    left_count += pooled[slot, position, b, 2]
                    if pooled[slot, position, b, 2] == 0.0:
                        continue
                    for side in range(2):
                        missing_left = side == 0
                        cand_g = left_g + miss_g if missing_left else left_g
                        cand_h = left_h + miss_h if missing_left else left_h
                        cand_count = left_count + miss_count if missing_left else left_count
                        if not candidate_is_scored(&c, missing_left, left_count, miss_count,
                                                   cand_count, cand_h, sum_count, sum_h):
                            continue
                        if monotone != 0 and not monotone_order_holds(
                                monotone, cand_g, cand_h, sum_g, sum_h, lower, upper, &c):
                            continue
                        if bounded:
                            des_candidate_begin_bounded(&state, sum_g, sum_h, cand_g, cand_h,
                                                        lower, upper, c.reg_lambda, c.reg_alpha,
                                                        c.era_gain, c.dir_tanh_scale,
                                                        c.lambda_dir != 0.0)
                        else:
                            des_candidate_begin(&state, sum_g, sum_h, cand_g, cand_h,
                                                c.reg_lambda, c.reg_alpha, c.era_gain,
                                                c.dir_tanh_scale, c.lambda_dir != 0.0)
                        o_slot[n] = slot
                        o_position[n] = position
                        o_threshold[n] = b
                        o_missing[n] = missing_left
                        o_bounded[n] = bounded
                        o_sums[5, n] = lower
                        o_sums[6, n] = upper
                        o_sums[0, n] = sum_g
                        o_sums[1, n] = sum_h
                        o_sums[2, n] = cand_g
                        o_sums[3, n] = cand_h
                        if c.era_gain == DES_ERA_GAIN_NEWTON:
                            o_sums[4, n] = 0.0
                        elif count_weights:
                            cand_w_g = left_view[slot, position, b, 0]
                            cand_w_h = left_view[slot, position, b, 1]
                            if missing_left:
                                cand_w_g = cand_w_g + w_missing_g
                                cand_w_h = cand_w_h + w_missing_h
                            o_sums[4, n] = des_realized_mean(&state, w_sum_g, w_sum_h, cand_w_g,
                                                             cand_w_h, weight_total)
                        else:
                            o_sums[4, n] = des_realized_mean(&state, sum_g, sum_h, cand_g,
                                                             cand_h, weight_total)
                        n += 1
    return {"slot": slot_out[:n].copy(), "position": position_out[:n].copy(),
            "threshold": threshold_out[:n].copy(), "missing_left": missing_out[:n].copy(),
            "sum_g": sums[0, :n].copy(), "sum_h": sums[1, :n].copy(),
            "left_g": sums[2, :n].copy(), "left_h": sums[3, :n].copy(),
            "mean": sums[4, :n].copy(), "bounded": bounded_out[:n].copy(),
            "lower": sums[5, :n].copy(), "upper": sums[6, :n].copy()}


def continue_era_weights(const int64_t[::1] cells, const int64_t[::1] base,
                         const int64_t[::1] stride, const int64_t[::1] widths,
                         const int32_t[::1] slot_tree, const uint8_t[::1] slot_open,
                         const uint8_t[:, ::1] tree_uses_feature, const double[:, ::1] era_rows,
                         dict params, fixed, state):
    """era_weighting="count": continue every (slot, feature) tile's
    era-weighted totals over this shard's eras, in era order as
    _split.score_tile adds them (w_e = era_alpha + the era's rows):
    ``state`` (n_slots, n_features_d, 5) holds the running weight total and
    weighted gradient, hessian, missing gradient and missing hessian sums;
    returns them continued (a new array)."""
    cdef pb_split_params c = make_split_params(params)
    out = np.array(state, dtype=np.float64, copy=True)
    cdef double[:, :, ::1] acc = out
    cdef era_cells_t view
    _fill_view(&view, fixed, slot_tree.shape[0])
    cdef Py_ssize_t n_slots = slot_tree.shape[0], n_cand = base.shape[0]
    cdef Py_ssize_t n_eras = era_rows.shape[1], slot, position, era
    cdef double g, h, lg, lh, lc, count, w, missing_g, missing_h, missing_count
    with nogil:
        for slot in range(n_slots):
            if not slot_open[slot]:
                continue
            for position in range(n_cand):
                if not tree_uses_feature[position, slot_tree[slot]]:
                    continue
                for era in range(n_eras):
                    if era_rows[slot, era] == 0.0:
                        continue
                    _bin_sums(&view, &cells[base[position]], stride[position], slot, era,
                              widths[position] - 1, &missing_g, &missing_h, &missing_count)
                    # threshold "every bin but the missing one" on the left
                    _era_sums(&view, &cells[base[position]], stride[position], widths[position],
                              slot, era, widths[position] - 2, 0, &g, &h, &lg, &lh, &lc,
                              &count)
                    w = _era_weight(&c, count)
                    acc[slot, position, 0] += w
                    acc[slot, position, 1] += w * g
                    acc[slot, position, 2] += w * h
                    acc[slot, position, 3] += w * missing_g
                    acc[slot, position, 4] += w * missing_h
    return out


def continue_weighted_bin(const int64_t[::1] cells, const int64_t[::1] base,
                          const int64_t[::1] stride, const int64_t[::1] widths,
                          const int32_t[::1] slot_tree, const uint8_t[::1] slot_open,
                          const uint8_t[:, ::1] tree_uses_feature,
                          const double[:, ::1] era_rows, dict params, fixed, Py_ssize_t bin,
                          state):
    """era_weighting="count": continue every tile's running era-weighted left
    sums (n_slots, n_features_d, 2) over this shard's eras for non-missing
    bin ``bin`` -- _split.score_tile adds them bin-major, one running sum
    over (bin, era) -- and return them (a new array)."""
    cdef pb_split_params c = make_split_params(params)
    out = np.array(state, dtype=np.float64, copy=True)
    cdef double[:, :, ::1] acc = out
    cdef era_cells_t view
    _fill_view(&view, fixed, slot_tree.shape[0])
    cdef Py_ssize_t n_slots = slot_tree.shape[0], n_cand = base.shape[0]
    cdef Py_ssize_t n_eras = era_rows.shape[1], slot, position, era
    cdef double g, h, count, w
    with nogil:
        for slot in range(n_slots):
            if not slot_open[slot]:
                continue
            for position in range(n_cand):
                if not tree_uses_feature[position, slot_tree[slot]] \
                        or bin >= widths[position] - 1:
                    continue
                for era in range(n_eras):
                    if era_rows[slot, era] == 0.0:
                        continue
                    _bin_sums(&view, &cells[base[position]], stride[position], slot, era, bin,
                              &g, &h, &count)
                    w = _era_weight(&c, era_rows[slot, era])
                    acc[slot, position, 0] += w * g
                    acc[slot, position, 1] += w * h
    return out


cdef struct era_cells_t:
    # How to read a shard's per-era cells (candidate_pass)
    Py_ssize_t words
    int count_bits
    double gradient_scale
    double hessian_scale
    double constant_hessian
    Py_ssize_t n_slots


cdef inline void _era_sums(const era_cells_t* view, const int64_t* feature_cells,
                           Py_ssize_t stride, Py_ssize_t width, Py_ssize_t slot,
                           Py_ssize_t era, Py_ssize_t threshold, int missing_left,
                           double* g, double* h, double* lg, double* lh, double* lc,
                           double* count) noexcept nogil:
    """One era's node and left-child sums of a candidate, from the feature's
    packed cells (bins 0 .. width - 2, the missing bin last): summed in
    integer units, then turned to floats once (exact grid values, so the
    doubles one float sum per bin gives)."""
    cdef const int64_t* cell = feature_cells + (era * view.n_slots + slot) * stride
    cdef Py_ssize_t b, nb = width - 1, words = view.words
    cdef uint64_t mask = ((<uint64_t>1) << view.count_bits) - 1
    cdef int64_t units = 0, left_units = 0, hessian_units = 0, left_hessian_units = 0
    cdef uint64_t rows = 0, left_rows = 0, packed
    for b in range(width):
        packed = <uint64_t>cell[b * words]
        units = units + _units(packed, view.count_bits)
        rows = rows + (packed & mask)
        if words == 2:
            hessian_units = hessian_units + cell[b * words + 1]
        if b <= threshold or (b == nb and missing_left):
            left_units = left_units + _units(packed, view.count_bits)
            left_rows = left_rows + (packed & mask)
            if words == 2:
                left_hessian_units = left_hessian_units + cell[b * words + 1]
    g[0] = units / view.gradient_scale
    lg[0] = left_units / view.gradient_scale
    count[0] = <double>rows
    lc[0] = <double>left_rows
    if words == 2:
        h[0] = hessian_units / view.hessian_scale
        lh[0] = left_hessian_units / view.hessian_scale
    else:
        h[0] = view.constant_hessian * <double>rows
        lh[0] = view.constant_hessian * <double>left_rows


cdef void _fill_view(era_cells_t* view, fixed, Py_ssize_t n_slots):
    view.words = 1 if fixed.hessian_is_constant else 2
    view.count_bits = fixed.count_bits
    view.gradient_scale = fixed.gradient_scale
    view.hessian_scale = fixed.hessian_scale
    view.constant_hessian = fixed.constant_hessian
    view.n_slots = n_slots


cdef inline void _bin_sums(const era_cells_t* view, const int64_t* feature_cells,
                           Py_ssize_t stride, Py_ssize_t slot, Py_ssize_t era, Py_ssize_t b,
                           double* g, double* h, double* count) noexcept nogil:
    """One bin's own sums in one era (exact grid values)."""
    cdef const int64_t* cell = (feature_cells + (era * view.n_slots + slot) * stride
                                + b * view.words)
    cdef uint64_t mask = ((<uint64_t>1) << view.count_bits) - 1
    cdef uint64_t packed = <uint64_t>cell[0]
    g[0] = _units(packed, view.count_bits) / view.gradient_scale
    count[0] = <double>(packed & mask)
    h[0] = (cell[1] / view.hessian_scale if view.words == 2
            else view.constant_hessian * count[0])


cdef inline double _era_weight(const pb_split_params* c, double count) noexcept nogil:
    """An era's weight in the DES sums (csrc/pbc_split.h pbc_era_weight)."""
    return c.era_alpha + count if c.era_weighting == PB_ERA_WEIGHTING_COUNT else 1.0


cdef inline void _begin(des_candidate_t* state, const pb_split_params* c, int with_direction,
                        double sum_g, double sum_h, double left_g, double left_h,
                        bint bounded, double lower, double upper) noexcept nogil:
    """A candidate's DES state as score_tile begins it (clipped values in a
    bounded node: a monotone feature or a constrained slot)."""
    if bounded:
        des_candidate_begin_bounded(state, sum_g, sum_h, left_g, left_h, lower, upper,
                                    c.reg_lambda, c.reg_alpha, c.era_gain, c.dir_tanh_scale,
                                    with_direction)
    else:
        des_candidate_begin(state, sum_g, sum_h, left_g, left_h, c.reg_lambda, c.reg_alpha,
                            c.era_gain, c.dir_tanh_scale, with_direction)


cdef void _continue_candidate(const pb_split_params* c, int mode, int with_direction,
                              double sum_g, double sum_h, double left_g, double left_h,
                              double mean, double slot_noise, bint bounded, double lower,
                              double upper, const era_cells_t* view,
                              const int64_t* feature_cells, Py_ssize_t stride,
                              Py_ssize_t width, Py_ssize_t slot, Py_ssize_t threshold,
                              int missing_left, const double* slot_era_rows,
                              Py_ssize_t n_eras, double* acc) noexcept nogil:
    """One candidate's era-order sums continued over this shard's eras, in
    place in ``acc`` (its N_STATE accumulators, or its newton-gain sum)."""
    cdef des_candidate_t s
    cdef double g, h, lg, lh, lc, total_count
    cdef Py_ssize_t era
    _begin(&s, c, with_direction, sum_g, sum_h, left_g, left_h, bounded, lower, upper)
    if mode == PASS_NEWTON_MEAN:
        for era in range(n_eras):
            if slot_era_rows[era] == 0.0:
                continue
            _era_sums(view, feature_cells, stride, width, slot, era, threshold, missing_left,
                      &g, &h, &lg, &lh, &lc, &total_count)
            acc[0] += _era_weight(c, total_count) * des_era_gain(&s, g, h, lg, lh)
        return
    des_candidate_set_mean(&s, mean)
    if c.era_std_between:
        des_candidate_set_noise(&s, slot_noise)
    s.weight_total = acc[0]
    s.sum_squares = acc[1]
    s.direction = acc[2]
    s.noise_sum = acc[3]
    s.weight_squares = acc[4]
    for era in range(n_eras):
        if slot_era_rows[era] == 0.0:
            continue
        _era_sums(view, feature_cells, stride, width, slot, era, threshold, missing_left,
                  &g, &h, &lg, &lh, &lc, &total_count)
        des_candidate_push(&s, _era_weight(c, total_count), g, h, lg, lh, lc, total_count - lc)
    acc[0] = s.weight_total
    acc[1] = s.sum_squares
    acc[2] = s.direction
    acc[3] = s.noise_sum
    acc[4] = s.weight_squares


def candidate_pass(dict candidates, const double[::1] slot_variance, dict params, int mode,
                   state, cells=None, layout=None, era_rows=None, fixed=None,
                   Py_ssize_t n_slots=0, int n_threads=1):
    """Continue every candidate's era-order sums over this shard's eras.

    ``state`` is (n_candidates, N_STATE) for MODE_PASS, (n_candidates,) for
    MODE_NEWTON_MEAN: the running sums after the eras of the shards before
    this one (zeros for the first); returned updated (a new array). MODE_FINISH
    pushes no era and returns (score, gain) from the final state. ``cells``
    are this shard's per-era cells (_split.find_best_splits' ``depth_cells``
    of ``n_slots`` slots), ``layout`` their cell_layout (base, stride) and
    the features' widths, ``era_rows`` the rows per (slot, era), eras in
    order; ``fixed`` the round's FixedPointGradients. Candidates are
    independent: ``n_threads`` threads share them out (each candidate's own
    eras in order, so the result does not depend on the thread count).
    A bounded candidate (enumerate_candidates' ``bounded``, ``lower``,
    ``upper``) uses values clipped to its node's bounds."""
    cdef pb_split_params c = make_split_params(params)
    cdef const double[::1] c_lower = candidates["lower"], c_upper = candidates["upper"]
    cdef const uint8_t[::1] c_bounded = candidates["bounded"]
    cdef const int32_t[::1] cand_slot = candidates["slot"]
    cdef const int32_t[::1] cand_pos = candidates["position"]
    cdef const int32_t[::1] cand_t = candidates["threshold"]
    cdef const uint8_t[::1] cand_ml = candidates["missing_left"]
    cdef const double[::1] c_sum_g = candidates["sum_g"], c_sum_h = candidates["sum_h"]
    cdef const double[::1] c_left_g = candidates["left_g"], c_left_h = candidates["left_h"]
    cdef const double[::1] c_mean = candidates["mean"]
    cdef Py_ssize_t n = cand_slot.shape[0], i, era, n_eras = 0
    cdef int with_direction = c.lambda_dir != 0.0
    cdef des_candidate_t s
    cdef des_result_t result
    cdef era_cells_t view
    cdef const int64_t[::1] cell_view
    cdef const int64_t[::1] base_view, stride_view, width_view
    cdef const double[:, ::1] rows_view
    cdef double[::1] mean_acc
    cdef double[:, ::1] acc
    cdef double[::1] score_view, gain_view
    if mode != MODE_FINISH:
        cell_view = cells
        base_view, stride_view, width_view = layout
        rows_view = era_rows
        n_eras = rows_view.shape[1]
        _fill_view(&view, fixed, n_slots)
    out = np.array(state, dtype=np.float64, copy=True)
    if mode == MODE_NEWTON_MEAN:
        mean_acc = out
    else:
        acc = out
    score = np.full(n, -INFINITY)
    gain = np.zeros(n)
    score_view = score
    gain_view = gain
    if mode == MODE_FINISH:
        for i in range(n):
            _begin(&s, &c, with_direction, c_sum_g[i], c_sum_h[i], c_left_g[i], c_left_h[i],
                   c_bounded[i], c_lower[i], c_upper[i])
            des_candidate_set_mean(&s, c_mean[i])
            if c.era_std_between:
                des_candidate_set_noise(&s, slot_variance[cand_slot[i]])
            s.weight_total = acc[i, 0]
            s.sum_squares = acc[i, 1]
            s.direction = acc[i, 2]
            s.noise_sum = acc[i, 3]
            s.weight_squares = acc[i, 4]
            result = des_candidate_finish(&s, c.lambda_dro, c.lambda_dir)
            score_view[i] = result.score
            if c_bounded[i]:
                gain_view[i] = des_bounded_gain(&s, c_sum_g[i], c_sum_h[i], c_left_g[i],
                                                c_left_h[i])
            else:
                gain_view[i] = des_pooled_gain(c_sum_g[i], c_sum_h[i], c_left_g[i],
                                               c_left_h[i], c.reg_lambda, c.reg_alpha)
        return score, gain
    if n == 0:
        return out
    cdef Py_ssize_t width_of_state = 1 if mode == MODE_NEWTON_MEAN else N_STATE
    cdef double* state_pointer = &mean_acc[0] if mode == MODE_NEWTON_MEAN else &acc[0, 0]
    for i in prange(n, nogil=True, schedule='dynamic', chunksize=64,
                    num_threads=max(1, min(n_threads, n))):
        _continue_candidate(&c, mode, with_direction, c_sum_g[i], c_sum_h[i], c_left_g[i],
                            c_left_h[i], c_mean[i], slot_variance[cand_slot[i]],
                            c_bounded[i], c_lower[i], c_upper[i], &view,
                            &cell_view[base_view[cand_pos[i]]], stride_view[cand_pos[i]],
                            width_view[cand_pos[i]], cand_slot[i], cand_t[i], cand_ml[i],
                            &rows_view[cand_slot[i], 0], n_eras,
                            state_pointer + i * width_of_state)
    return out
