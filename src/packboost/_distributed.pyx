# cython: language_level=3
"""Kernels of distributed training: one shard's share of a depth (docs/distributed.md).

A shard is a set of whole eras (their rows era-sorted) held by one Dask
worker. Per depth the driver needs, per candidate split, sums over
*all* eras. Two kinds of sums occur (docs/distributed.md §3):

* exact ones -- fixed-point gradient/hessian sums and counts: every partial
  sum is an integer number of grid steps below 2^52 (docs/fixed-point.md), so
  shards sum them in any order and the driver adds the shards' results;
* the DES era pass (csrc/des.h: sum w (gain_e - mu)^2, the noise term, the
  direction vote; newton means) -- float terms, one per era, each sum taken
  on a power-of-two grid given by its largest term (docs/des.md §6.3). A
  shard reports its eras' largest terms (candidate_pass MODE_TERMS_MAX),
  the maxima are all-reduced, and the terms rounded to the grid they give
  are added as int64 (MODE_TERMS_SUM) and all-reduced: the local fit's
  integers, whatever the shards. Every shard then finishes every candidate
  (MODE_FINISH) with the very des.h code that _split.score_tile runs.

The slot sums need no kernel here: every value they add is on a grid on
which its sums are exact (the squared gradients too, _fixed_point.rounded_squares),
so each shard's _partition.slot_sums are all-reduced.
"""

import numpy as np

from packboost._split import best_candidate_per_slot

from cython.parallel cimport prange, threadid

from libc.math cimport INFINITY, fabs
from libc.stdint cimport int8_t, uint8_t, int32_t, int64_t, uint64_t
from libc.stdlib cimport malloc, free, qsort
from libc.string cimport memmove

from packboost.tree cimport bin_code_t, feature_index_t, bin_index_t, node_index_t
from packboost._histogram cimport __builtin_prefetch, packed_units
from packboost._split_params cimport (pb_split_params, make_split_params, candidate_is_scored,
                                      monotone_order_holds,
                                      DES_ERA_GAIN_NEWTON, PB_ERA_WEIGHTING_COUNT)
from packboost._des cimport (des_candidate_t, des_result_t, des_pooled_gain,
                             des_candidate_begin, des_candidate_begin_bounded,
                             des_bounded_gain, des_era_gain, des_realized_mean,
                             des_candidate_set_mean, des_candidate_set_noise,
                             des_era_terms_t, des_grid_t, des_grid_sums_t,
                             des_candidate_era_terms, des_terms_max, des_grid_exponent,
                             des_grid_of, des_era_weight_bound,
                             des_grid_inverse_step, des_to_grid, des_from_grid,
                             des_grid_add, des_weight_total, des_weight_squares,
                             des_candidate_set_sums, des_candidate_finish)



# A candidate's era-pass sums (csrc/des.h des_era_terms_t), each on its own grid.
TERM_FIELDS = ("square", "noise", "direction")
N_TERMS = 3

# candidate_pass modes
cdef enum:
    PASS_NEWTON_MAX = 0    # largest |w_e gain_e| over this shard's eras (newton gains)
    PASS_NEWTON_SUM = 1    # sum_e w_e gain_e in steps of the candidate's grid
    PASS_TERMS_MAX = 2     # largest |term| of each era-pass sum over this shard's eras
    PASS_TERMS_SUM = 3     # the era-pass sums in steps of the candidate's grids
    PASS_FINISH = 4        # no era: des_candidate_finish on the sums of all eras
MODE_NEWTON_MAX = PASS_NEWTON_MAX
MODE_NEWTON_SUM = PASS_NEWTON_SUM
MODE_TERMS_MAX = PASS_TERMS_MAX
MODE_TERMS_SUM = PASS_TERMS_SUM
MODE_FINISH = PASS_FINISH


def grid_exponents(const double[:, ::1] largest, const double[::1] largest_era_rows,
                   const double[::1] n_terms, dict params):
    """The grids of the candidates' era-pass sums (csrc/des.h des_grid_of):
    int32 (n_candidates, N_TERMS) exponents from the largest square and noise
    terms of all eras (``largest``, (n_candidates, 2)), the largest era row
    count of each candidate's node (the direction votes' bound) and its
    number of eras with rows, ``n_terms``."""
    cdef pb_split_params c = make_split_params(params)
    out = np.empty((largest.shape[0], N_TERMS), dtype=np.int32)
    cdef int32_t[:, ::1] view = out
    cdef des_era_terms_t largest_terms
    cdef des_grid_t grid
    cdef Py_ssize_t i
    for i in range(largest.shape[0]):
        largest_terms.square = largest[i, 0]
        largest_terms.noise = largest[i, 1]
        largest_terms.direction = 0.0
        grid = des_grid_of(&largest_terms, des_era_weight_bound(
            c.era_weighting == PB_ERA_WEIGHTING_COUNT, largest_era_rows[i], c.era_alpha),
            n_terms[i])
        view[i, 0] = grid.square
        view[i, 1] = grid.noise
        view[i, 2] = grid.direction
    return out


def newton_grid_exponents(const double[::1] largest, const double[::1] n_terms):
    """The grid exponents (csrc/des.h des_grid_exponent) of the newton gain
    sums whose largest terms (of all eras) are ``largest``, of ``n_terms``
    terms each (the eras with rows in the candidate's node): int32."""
    out = np.empty(largest.shape[0], dtype=np.int32)
    cdef int32_t[::1] view = out
    cdef Py_ssize_t i
    for i in range(largest.shape[0]):
        view[i] = des_grid_exponent(largest[i], n_terms[i])
    return out


def kept_terms(int mode):
    """Terms per (candidate, era) that candidate_pass keeps in ``mode``'s
    pair of passes: the newton term, or the square and noise terms."""
    return 1 if mode == PASS_NEWTON_MAX or mode == PASS_NEWTON_SUM else 2


def newton_means(const int64_t[::1] steps, const int32_t[::1] exponents,
                 const double[::1] weight_total):
    """Means of newton era gains from their sums on the grid (_split.score_tile's
    arithmetic): sum / weight_total per candidate."""
    out = np.empty(steps.shape[0])
    cdef double[::1] view = out
    cdef Py_ssize_t i
    for i in range(steps.shape[0]):
        view[i] = des_from_grid(steps[i], exponents[i]) / weight_total[i]
    return out


def cell_prefix(const int64_t[::1] widths):
    """Each candidate feature's first cell in a slot's pooled cells (the
    cells of the features before it; pooled_from_cells)."""
    cdef Py_ssize_t n = widths.shape[0]
    prefix = np.zeros(n, dtype=np.int64)
    if n > 1:
        prefix[1:] = np.cumsum(np.asarray(widths)[:n - 1])
    return prefix


def pooled_from_cells(const int64_t[::1] pooled_cells, const int64_t[::1] prefix,
                      const int64_t[::1] widths, Py_ssize_t n_slots, Py_ssize_t width,
                      fixed, int n_threads=1):
    """A depth's pooled cells (find_best_splits' ``pooled_cells``: per slot
    and candidate cell the gradient units, the rows and, without a constant
    hessian, the hessian units; int64, all-reduced over the shards) as the
    (n_slots, n_features_d, width, 3) float64 sums enumerate_candidates
    reads (g, h, count; exact grid values). The slots are shared among
    ``n_threads`` threads."""
    cdef Py_ssize_t n_cand = prefix.shape[0], slot, position, b
    cdef Py_ssize_t words = 1 if fixed.hessian_is_constant else 2, pw = words + 1
    cdef Py_ssize_t slot_cells = (prefix[n_cand - 1] + widths[n_cand - 1]) if n_cand else 0
    cdef double gradient_scale = fixed.gradient_scale, hessian_scale = fixed.hessian_scale
    cdef double constant_hessian = fixed.constant_hessian
    pooled = np.zeros((n_slots, n_cand, width, 3))
    cdef double[:, :, :, ::1] out = pooled
    cdef const int64_t* cell
    with nogil:
        for slot in prange(n_slots, schedule='static',
                           num_threads=max(1, min(n_threads, n_slots))):
            for position in range(n_cand):
                for b in range(widths[position]):
                    cell = &pooled_cells[(slot * slot_cells + prefix[position] + b) * pw]
                    out[slot, position, b, 0] = cell[0] / gradient_scale
                    out[slot, position, b, 2] = <double>cell[1]
                    out[slot, position, b, 1] = (cell[2] / hessian_scale if words == 2
                                                 else constant_hessian * <double>cell[1])
    return pooled


def era_rows_from_cells(const int64_t[::1] cells, const int64_t[:, ::1] origin,
                        const int64_t[::1] stride, const int64_t[::1] widths,
                        const int32_t[::1] slot_tree, const uint8_t[::1] slot_open,
                        const uint8_t[:, ::1] tree_uses_feature, Py_ssize_t n_eras,
                        Py_ssize_t words, int count_bits, int n_threads=1):
    """Rows of each open slot in each era (n_slots, n_eras) float64, from the
    counts of the first feature its tree uses (0 where it uses none: the slot
    then has no candidate). The slots are shared among ``n_threads``
    threads."""
    cdef Py_ssize_t n_slots = slot_tree.shape[0], n_cand = origin.shape[0]
    cdef Py_ssize_t slot, position, era, b, chosen
    cdef uint64_t mask = ((<uint64_t>1) << count_bits) - 1
    era_rows = np.zeros((n_slots, n_eras))
    cdef double[:, ::1] out = era_rows
    cdef const int64_t* first
    cdef uint64_t count
    with nogil:
        for slot in prange(n_slots, schedule='dynamic',
                           num_threads=max(1, min(n_threads, n_slots))):
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
                _prefetch_era(&cells[origin[chosen, slot_tree[slot]]], n_slots,
                              stride[chosen], widths[chosen] * words, slot, era, n_eras)
                first = &cells[origin[chosen, slot_tree[slot]]
                               + (era * n_slots + slot) * stride[chosen]]
                count = 0   # the packed words' sum: the rows in its low bits
                for b in range(widths[chosen]):
                    count = count + <uint64_t>first[b * words]
                out[slot, era] = <double>(count & mask)
    return era_rows


def era_row_stats(const double[:, ::1] era_rows):
    """Per slot over this shard's eras (``era_rows``: (n_slots, n_eras),
    era_rows_from_cells'): the eras with rows, the rows and the sum of the
    eras' squared rows, int64 (n_slots, 3) -- the era weights' totals,
    summed over the shards with the pooled cells (integers: any order)."""
    cdef Py_ssize_t n_slots = era_rows.shape[0], n_eras = era_rows.shape[1], s, e
    stats = np.zeros((n_slots, 3), dtype=np.int64)
    cdef int64_t[:, ::1] out = stats
    cdef int64_t rows
    with nogil:
        for s in range(n_slots):
            for e in range(n_eras):
                rows = <int64_t>era_rows[s, e]
                if rows > 0:
                    out[s, 0] += 1
                out[s, 1] += rows
                out[s, 2] += rows * rows
    return stats


cdef struct ranked_t:
    double key      # the value; NaN: -inf, ranked after every number (nan_last)
    int64_t index
    int nan_last


cdef int _higher_first(const void* a, const void* b) noexcept nogil:
    """qsort's order of rank_in_slot: numbers before NaN, the largest
    first, ties to the lower index (a total order: qsort need not be
    stable)."""
    cdef const ranked_t* x = <const ranked_t*>a
    cdef const ranked_t* y = <const ranked_t*>b
    if x.nan_last != y.nan_last:
        return x.nan_last - y.nan_last
    if x.key > y.key:
        return -1
    if x.key < y.key:
        return 1
    return (x.index > y.index) - (x.index < y.index)


def rank_in_slot(const int32_t[::1] slot, const double[::1] value, Py_ssize_t n_slots,
                 int n_threads=1):
    """Each candidate's place among its slot's (``slot`` in [0, n_slots)) by
    ``value``: the largest 0, ties to the lower index, NaN after every
    number; int64. The order the era pass's best-first rounds take (one
    sort per slot: the candidates grouped by slot, then each group sorted;
    the slots' sorts shared among ``n_threads`` threads: a depth's
    candidates at Numerai's width took ~0.4 ms a depth on one)."""
    cdef Py_ssize_t n = slot.shape[0], i, s, start
    if value.shape[0] != n:
        raise ValueError("slot and value must have one entry per candidate")
    starts = np.zeros(n_slots + 1, dtype=np.int64)
    cdef int64_t[::1] start_view = starts
    for i in range(n):
        if slot[i] < 0 or slot[i] >= n_slots:
            raise ValueError(f"slot {slot[i]} is outside 0 .. {n_slots - 1}")
        start_view[slot[i] + 1] += 1
    for s in range(n_slots):
        start_view[s + 1] += start_view[s]
    cursor = starts[:n_slots].copy()
    cdef int64_t[::1] cursor_view = cursor
    cdef ranked_t* entry_view = <ranked_t*>malloc(max(n, 1) * sizeof(ranked_t))
    if entry_view == NULL:
        raise MemoryError()
    rank = np.empty(n, dtype=np.int64)
    cdef int64_t[::1] rank_view = rank
    cdef ranked_t* entry
    cdef int64_t* rank_pointer = &rank_view[0] if n else NULL
    with nogil:
        for i in range(n):
            entry = &entry_view[cursor_view[slot[i]]]
            cursor_view[slot[i]] += 1
            entry.nan_last = value[i] != value[i]
            entry.key = -INFINITY if entry.nan_last else value[i]
            entry.index = i
        for s in prange(n_slots, schedule='dynamic',
                        num_threads=max(1, min(n_threads, n_slots))):
            _rank_slot(entry_view, start_view[s], start_view[s + 1], rank_pointer)
    free(entry_view)
    return rank


cdef void _rank_slot(ranked_t* entries, int64_t start, int64_t end,
                     int64_t* rank) noexcept nogil:
    """One slot's candidates entries[start:end] sorted (_higher_first) and
    each one's place among them written to ``rank``."""
    cdef int64_t i
    if end - start > 1:
        qsort(&entries[start], end - start, sizeof(ranked_t), _higher_first)
    for i in range(start, end):
        rank[entries[i].index] = i - start


def best_first_round(const int64_t[::1] rank, const double[::1] bound,
                     const int32_t[::1] slot, const double[::1] floor,
                     int64_t first, int64_t width):
    """The candidates a best-first round of the era pass scores: those whose
    place in their slot (``rank``, rank_in_slot's) is in [first, first +
    width) and whose ``bound`` reaches their slot's ``floor`` (the best score
    so far; a NaN bound never does), ascending; int64. One typed pass where
    five NumPy expressions over every candidate cost ~0.1 ms a round at
    150k x 200."""
    cdef Py_ssize_t n = rank.shape[0], i, count = 0
    if bound.shape[0] != n or slot.shape[0] != n:
        raise ValueError("rank, bound and slot must have one entry per candidate")
    chosen = np.empty(n, dtype=np.int64)
    cdef int64_t[::1] out = chosen
    cdef int64_t last = first + width
    with nogil:
        for i in range(n):
            if first <= rank[i] < last and bound[i] >= floor[slot[i]]:
                out[count] = i
                count += 1
    return chosen[:count]


def tile_table(dict candidates, const double[::1] score, const double[::1] gain,
               Py_ssize_t n_slots, Py_ssize_t n_positions):
    """The (n_slots, n_positions) table of each (slot, candidate feature)
    tile's choice, as find_best_splits returns it (BestSplits.of_table's
    input): score_tile's rule -- the first candidate of the tile with the
    strictly largest score; none where no candidate scores above -inf (NaN
    never wins) -- its ``score``, ``gain``, ``threshold``, ``missing_left``
    and ``found``; and, where any tile has one, ``slot_left`` (n_slots, 4):
    per slot its winning tile's position and that candidate's pooled left
    sums (gradient, hessian, rows), the winner being the first maximum over
    the positions (_split.best_candidate_per_slot); NaN for a slot
    without one. One typed pass over the candidates, where the NumPy
    expressions it replaced cost ~0.2 ms a depth at 150k x 200."""
    cdef const int32_t[::1] slot = candidates["slot"]
    cdef const int32_t[::1] position = candidates["position"]
    cdef const int32_t[::1] threshold = candidates["threshold"]
    cdef const uint8_t[::1] missing_left = candidates["missing_left"]
    cdef const double[::1] left_g = candidates["left_g"], left_h = candidates["left_h"]
    cdef const double[::1] left_count = candidates["left_count"]
    cdef Py_ssize_t n = slot.shape[0], i, s, p, current
    if position.shape[0] != n or score.shape[0] != n or gain.shape[0] != n:
        raise ValueError("candidates, score and gain must have one entry per candidate")
    chosen = np.full((n_slots, n_positions), -1, dtype=np.int64)
    cdef int64_t[:, ::1] chosen_view = chosen
    cdef bint any_found = False
    for i in range(n):
        if not (score[i] > -INFINITY):
            continue
        if not (0 <= slot[i] < n_slots and 0 <= position[i] < n_positions):
            raise ValueError(f"candidate {i}'s tile ({slot[i]}, {position[i]}) is outside "
                             f"({n_slots}, {n_positions})")
        current = chosen_view[slot[i], position[i]]
        if current < 0 or score[i] > score[current]:
            chosen_view[slot[i], position[i]] = i
        any_found = True
    table_score = np.full((n_slots, n_positions), -INFINITY)
    table_gain = np.zeros((n_slots, n_positions))
    table_threshold = np.zeros((n_slots, n_positions), dtype=np.int32)
    table_missing = np.zeros((n_slots, n_positions), dtype=np.uint8)
    table_found = np.zeros((n_slots, n_positions), dtype=np.uint8)
    cdef double[:, ::1] score_out = table_score, gain_out = table_gain
    cdef int32_t[:, ::1] threshold_out = table_threshold
    cdef uint8_t[:, ::1] missing_out = table_missing, found_out = table_found
    for s in range(n_slots):
        for p in range(n_positions):
            i = chosen_view[s, p]
            if i < 0:
                continue
            score_out[s, p] = score[i]
            gain_out[s, p] = gain[i]
            threshold_out[s, p] = threshold[i]
            missing_out[s, p] = missing_left[i]
            found_out[s, p] = 1
    table = {"score": table_score, "gain": table_gain, "threshold": table_threshold,
             "missing_left": table_missing, "found": table_found}
    if not any_found:
        return table
    # Each slot's winner by the local rule itself.
    winners = best_candidate_per_slot(table_score, table_found)
    cdef const int64_t[::1] winner = winners
    slot_left = np.full((n_slots, 4), np.nan)
    cdef double[:, ::1] left_out = slot_left
    for s in range(n_slots):
        if winner[s] >= 0:
            i = chosen_view[s, winner[s]]
            left_out[s, 0] = winner[s]
            left_out[s, 1] = left_g[i]
            left_out[s, 2] = left_h[i]
            left_out[s, 3] = left_count[i]
    table["slot_left"] = slot_left
    return table


def enumerate_candidates(const double[:, :, :, ::1] pooled, const double[:, ::1] era_stats,
                         const int32_t[::1] slot_tree, const uint8_t[::1] slot_open,
                         const feature_index_t[::1] features,
                         const uint8_t[:, ::1] tree_uses_feature,
                         const bin_index_t[::1] n_bins, dict params, totals=None,
                         weighted_left=None, constraints=None, int n_threads=1):
    """The candidates _split.score_tile scores, in its order, from the pooled
    (all eras) per-bin sums (n_slots, n_features_d, width, 3), with their
    pooled node/left sums, their era weights' totals and, for realized gains,
    their closed-form mean. ``era_stats`` (n_slots, 3): per slot over all
    eras, the eras with rows in it, its rows and the sum of its eras' squared
    row counts (integers; the weight totals of csrc/des.h des_weight_total).
    Equal era weights: weighted sums = pooled.
    Count weights: ``totals`` (n_slots, n_features_d, 4) and ``weighted_left``
    (n_slots, n_features_d, width, 2), the era-weighted sums of all eras
    (weighted_sum_steps, all-reduced). ``constraints``: None or
    find_best_splits' constraint arrays (``slot_bounds``,
    ``feature_monotone``, ``slot_allows_feature``, each optional): a pair
    not allowed has no candidate, a monotone feature's candidates keep its
    order, and bounded nodes use clipped values: each candidate records
    whether its node is ``bounded`` and its ``lower`` and ``upper`` bounds,
    which candidate_pass reads. The slots are shared among ``n_threads``
    threads, each writing its candidates in a region of its own; the regions
    are then closed up, in slot order."""
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
    # At most two candidates (missing side) per threshold of every open tile
    # (a slot's tree uses about 1 / pack_size of the depth's features: sized
    # by the whole grid, the scratch was several MB a depth, fresh each time).
    cdef Py_ssize_t capacity = 0, slot, position
    region = np.zeros(n_slots + 1, dtype=np.int64)   # each slot's first place
    cdef int64_t[::1] region_view = region
    for slot in range(n_slots):
        if slot_open[slot]:
            for position in range(n_cand):
                if tree_uses_feature[position, slot_tree[slot]]:
                    capacity += 2 * n_bins[features[position]]
        region_view[slot + 1] = capacity
    found = np.zeros(n_slots, dtype=np.int64)         # candidates written per slot
    cdef int64_t[::1] found_view = found
    cdef int threads = max(1, min(n_threads, n_slots))
    cdef des_candidate_t* states = <des_candidate_t*>malloc(threads * sizeof(des_candidate_t))
    if states == NULL:
        raise MemoryError()
    cdef des_candidate_t* state
    slot_out = np.empty(capacity, dtype=np.int32)
    position_out = np.empty(capacity, dtype=np.int32)
    threshold_out = np.empty(capacity, dtype=np.int32)
    missing_out = np.empty(capacity, dtype=np.uint8)
    bounded_out = np.empty(capacity, dtype=np.uint8)
    sums = np.empty((10, capacity))
    cdef int32_t[::1] o_slot = slot_out, o_position = position_out, o_threshold = threshold_out
    cdef uint8_t[::1] o_missing = missing_out, o_bounded = bounded_out
    cdef double[:, ::1] o_sums = sums
    cdef Py_ssize_t b, nb, n = 0, k
    cdef int side, missing_left
    cdef double sum_g, sum_h, sum_count, miss_g, miss_h, miss_count
    cdef double left_g, left_h, left_count, cand_g, cand_h, cand_count
    cdef double weight_total, weight_squares
    with nogil:
        for slot in prange(n_slots, schedule='dynamic', num_threads=threads):
            if not slot_open[slot]:
                continue
            # (Every name assigned here is the thread's own; a thread's DES
            # state too, by its number.)
            state = &states[threadid()]
            k = region_view[slot]
            lower = -INFINITY
            upper = INFINITY
            weight_total = des_weight_total(count_weights, era_stats[slot, 0],
                                            era_stats[slot, 1], c.era_alpha)
            weight_squares = des_weight_squares(count_weights, era_stats[slot, 0],
                                                era_stats[slot, 1], era_stats[slot, 2],
                                                c.era_alpha)
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
                    sum_g = sum_g + pooled[slot, position, b, 0]
                    sum_h = sum_h + pooled[slot, position, b, 1]
                    sum_count = sum_count + pooled[slot, position, b, 2]
                if sum_count == 0.0:
                    continue
                if count_weights:
                    w_sum_g = total_view[slot, position, 0]
                    w_sum_h = total_view[slot, position, 1]
                    w_missing_g = total_view[slot, position, 2]
                    w_missing_h = total_view[slot, position, 3]
                miss_g = pooled[slot, position, nb, 0]
                miss_h = pooled[slot, position, nb, 1]
                miss_count = pooled[slot, position, nb, 2]
                left_g = left_h = left_count = 0.0
                for b in range(nb):
                    left_g = left_g + pooled[slot, position, b, 0]
                    left_h = left_h + pooled[slot, position, b, 1]
                    left_count = left_count + pooled[slot, position, b, 2]
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
                            des_candidate_begin_bounded(state, sum_g, sum_h, cand_g, cand_h,
                                                        lower, upper, c.reg_lambda, c.reg_alpha,
                                                        c.era_gain, c.dir_tanh_scale,
                                                        c.lambda_dir != 0.0)
                        else:
                            des_candidate_begin(state, sum_g, sum_h, cand_g, cand_h,
                                                c.reg_lambda, c.reg_alpha, c.era_gain,
                                                c.dir_tanh_scale, c.lambda_dir != 0.0)
                        o_slot[k] = slot
                        o_position[k] = position
                        o_threshold[k] = b
                        o_missing[k] = missing_left
                        o_bounded[k] = bounded
                        o_sums[5, k] = lower
                        o_sums[6, k] = upper
                        o_sums[0, k] = sum_g
                        o_sums[1, k] = sum_h
                        o_sums[2, k] = cand_g
                        o_sums[3, k] = cand_h
                        o_sums[7, k] = weight_total
                        o_sums[8, k] = weight_squares
                        o_sums[9, k] = cand_count
                        if c.era_gain == DES_ERA_GAIN_NEWTON:
                            o_sums[4, k] = 0.0
                        elif count_weights:
                            cand_w_g = left_view[slot, position, b, 0]
                            cand_w_h = left_view[slot, position, b, 1]
                            if missing_left:
                                cand_w_g = cand_w_g + w_missing_g
                                cand_w_h = cand_w_h + w_missing_h
                            o_sums[4, k] = des_realized_mean(state, w_sum_g, w_sum_h, cand_w_g,
                                                             cand_w_h, weight_total)
                        else:
                            o_sums[4, k] = des_realized_mean(state, sum_g, sum_h, cand_g,
                                                             cand_h, weight_total)
                        k = k + 1   # (not +=: in a prange that would make k a reduction)
            found_view[slot] = k - region_view[slot]
    free(states)
    # The regions closed up in slot order (each moves left, or stays): the
    # candidates in score_tile's order.
    cdef Py_ssize_t source, count, row
    for slot in range(n_slots):
        source, count = region_view[slot], found_view[slot]
        if count and source != n:
            memmove(&o_slot[n], &o_slot[source], count * sizeof(int32_t))
            memmove(&o_position[n], &o_position[source], count * sizeof(int32_t))
            memmove(&o_threshold[n], &o_threshold[source], count * sizeof(int32_t))
            memmove(&o_missing[n], &o_missing[source], count * sizeof(uint8_t))
            memmove(&o_bounded[n], &o_bounded[source], count * sizeof(uint8_t))
            for row in range(10):
                memmove(&o_sums[row, n], &o_sums[row, source], count * sizeof(double))
        n += count
    # (Views of the regions' arrays, each contiguous: no copy.)
    return {"slot": slot_out[:n], "position": position_out[:n],
            "threshold": threshold_out[:n], "missing_left": missing_out[:n],
            "sum_g": sums[0, :n], "sum_h": sums[1, :n],
            "left_g": sums[2, :n], "left_h": sums[3, :n],
            "mean": sums[4, :n], "bounded": bounded_out[:n],
            "lower": sums[5, :n], "upper": sums[6, :n],
            "weight_total": sums[7, :n], "weight_squares": sums[8, :n],
            "left_count": sums[9, :n]}


def weighted_sum_maxima(const int64_t[::1] cells, const int64_t[:, ::1] origin,
                        const int64_t[::1] stride, const int64_t[::1] widths,
                        const int32_t[::1] slot_tree, const uint8_t[::1] slot_open,
                        const uint8_t[:, ::1] tree_uses_feature, const double[:, ::1] era_rows,
                        dict params, fixed):
    """era_weighting="count": per (slot, feature) tile the largest |w_e x|
    over this shard's eras (w_e = era_alpha + the era's rows), x the era's
    left sums at each threshold, its totals and its missing bin, gradients
    and hessians: (n_slots, n_features_d, 2), whose maxima over the shards
    give the grids of the tile's era-weighted sums (_split.era_weighted_sums,
    docs/des.md §6.3)."""
    cdef pb_split_params c = make_split_params(params)
    cdef Py_ssize_t n_slots = slot_tree.shape[0], n_cand = origin.shape[0]
    out = np.zeros((n_slots, n_cand, 2))
    cdef double[:, :, ::1] largest = out
    cdef era_cells_t view
    _fill_view(&view, fixed, n_slots)
    cdef Py_ssize_t n_eras = era_rows.shape[1], slot, position, era, b, nb
    cdef double g, h, count, w, left_g, left_h
    with nogil:
        for slot in range(n_slots):
            if not slot_open[slot]:
                continue
            for position in range(n_cand):
                if not tree_uses_feature[position, slot_tree[slot]]:
                    continue
                nb = widths[position] - 1
                for era in range(n_eras):
                    _prefetch_era(&cells[origin[position, slot_tree[slot]]], n_slots,
                                  stride[position], widths[position] * view.words, slot, era,
                                  n_eras)
                    if era_rows[slot, era] == 0.0:
                        continue
                    w = _era_weight(&c, era_rows[slot, era])
                    left_g = left_h = 0.0
                    for b in range(nb + 1):
                        _bin_sums(&view, &cells[origin[position, slot_tree[slot]]],
                                  stride[position], slot, era, b, &g, &h, &count)
                        if b == nb:   # the missing bin, then the era's totals
                            _raise_to(&largest[slot, position, 0], fabs(w * g))
                            _raise_to(&largest[slot, position, 1], fabs(w * h))
                            g = g + left_g
                            h = h + left_h
                        else:         # the left sums at threshold b
                            g = g + left_g
                            h = h + left_h
                            left_g = g
                            left_h = h
                        _raise_to(&largest[slot, position, 0], fabs(w * g))
                        _raise_to(&largest[slot, position, 1], fabs(w * h))
    return out


def weighted_grid_exponents(const double[:, :, ::1] largest, const double[::1] n_terms):
    """The grid exponents (csrc/des.h des_grid_exponent) of the count
    weights' sums of every (slot, feature) tile from their largest terms over
    all shards (weighted_sum_maxima), ``n_terms`` per slot (its eras with
    rows): int32, the shape of ``largest``."""
    out = np.empty((largest.shape[0], largest.shape[1], largest.shape[2]), dtype=np.int32)
    cdef int32_t[:, :, ::1] view = out
    cdef Py_ssize_t i, j, k
    for i in range(largest.shape[0]):
        for j in range(largest.shape[1]):
            for k in range(largest.shape[2]):
                view[i, j, k] = des_grid_exponent(largest[i, j, k], n_terms[i])
    return out


def weighted_sum_steps(const int64_t[::1] cells, const int64_t[:, ::1] origin,
                       const int64_t[::1] stride, const int64_t[::1] widths,
                       const int32_t[::1] slot_tree, const uint8_t[::1] slot_open,
                       const uint8_t[:, ::1] tree_uses_feature, const double[:, ::1] era_rows,
                       dict params, fixed, const int32_t[:, :, ::1] exponents):
    """era_weighting="count": this shard's era-weighted sums of every tile in
    int64 steps of its grids (``exponents``, weighted_grid_exponents): totals
    (n_slots, n_features_d, 4) -- gradients, hessians, the missing bin's
    gradients and hessians -- and left sums (n_slots, n_features_d, width, 2)
    at each threshold; added over the shards they are _split.era_weighted_sums'
    integers."""
    cdef pb_split_params c = make_split_params(params)
    cdef Py_ssize_t n_slots = slot_tree.shape[0], n_cand = origin.shape[0]
    cdef Py_ssize_t width = max(1, int(np.max(widths))) if n_cand else 1
    totals = np.zeros((n_slots, n_cand, 4), dtype=np.int64)
    left = np.zeros((n_slots, n_cand, width, 2), dtype=np.int64)
    cdef int64_t[:, :, ::1] total_view = totals
    cdef int64_t[:, :, :, ::1] left_view = left
    cdef era_cells_t view
    _fill_view(&view, fixed, n_slots)
    cdef Py_ssize_t n_eras = era_rows.shape[1], slot, position, era, b, nb
    cdef double g, h, count, w, left_g, left_h, inverse_g, inverse_h
    with nogil:
        for slot in range(n_slots):
            if not slot_open[slot]:
                continue
            for position in range(n_cand):
                if not tree_uses_feature[position, slot_tree[slot]]:
                    continue
                nb = widths[position] - 1
                inverse_g = des_grid_inverse_step(exponents[slot, position, 0])
                inverse_h = des_grid_inverse_step(exponents[slot, position, 1])
                for era in range(n_eras):
                    _prefetch_era(&cells[origin[position, slot_tree[slot]]], n_slots,
                                  stride[position], widths[position] * view.words, slot, era,
                                  n_eras)
                    if era_rows[slot, era] == 0.0:
                        continue
                    w = _era_weight(&c, era_rows[slot, era])
                    left_g = left_h = 0.0
                    for b in range(nb + 1):
                        _bin_sums(&view, &cells[origin[position, slot_tree[slot]]],
                                  stride[position], slot, era, b, &g, &h, &count)
                        if b == nb:
                            total_view[slot, position, 2] += des_to_grid(w * g, inverse_g)
                            total_view[slot, position, 3] += des_to_grid(w * h, inverse_h)
                            total_view[slot, position, 0] += des_to_grid(w * (g + left_g),
                                                                         inverse_g)
                            total_view[slot, position, 1] += des_to_grid(w * (h + left_h),
                                                                         inverse_h)
                        else:
                            left_g = left_g + g
                            left_h = left_h + h
                            left_view[slot, position, b, 0] += des_to_grid(w * left_g, inverse_g)
                            left_view[slot, position, b, 1] += des_to_grid(w * left_h, inverse_h)
    return totals, left


cdef inline void _raise_to(double* largest, double value) noexcept nogil:
    if value > largest[0]:
        largest[0] = value


cdef struct era_cells_t:
    # How to read a shard's per-era cells (candidate_pass)
    Py_ssize_t words
    int count_bits
    double gradient_scale
    double hessian_scale
    double constant_hessian
    Py_ssize_t n_slots


# Eras ahead whose cells the era pass asks for: a candidate's eras are a
# (slot, feature)'s cells a whole era's block apart (kilobytes), which the
# hardware prefetcher does not follow across pages.
cdef enum:
    ERA_PREFETCH_AHEAD = 8


cdef inline void _prefetch_era(const int64_t* feature_cells, Py_ssize_t n_slots,
                               Py_ssize_t stride, Py_ssize_t run, Py_ssize_t slot,
                               Py_ssize_t era, Py_ssize_t n_eras) noexcept nogil:
    """Ask for a (slot, feature)'s cells ERA_PREFETCH_AHEAD eras after
    ``era`` (the first and last line of their ``run`` int64: width x words)."""
    cdef const int64_t* cell
    if era + ERA_PREFETCH_AHEAD < n_eras:
        cell = feature_cells + ((era + ERA_PREFETCH_AHEAD) * n_slots + slot) * stride
        __builtin_prefetch(cell)
        __builtin_prefetch(cell + run - 1)


cdef inline void _era_sums(const era_cells_t* view, const int64_t* feature_cells,
                           Py_ssize_t stride, Py_ssize_t width, Py_ssize_t slot,
                           Py_ssize_t era, Py_ssize_t threshold, int missing_left,
                           double* g, double* h, double* lg, double* lh, double* lc,
                           double* count) noexcept nogil:
    """One era's node and left-child sums of a candidate, from the feature's
    packed cells (bins 0 .. width - 2, the missing bin last; left: the bins
    up to ``threshold``, and the missing one where ``missing_left``). The
    packed words are added as they are and split once (unpack_tile's running
    sum: an era's row count never carries into the gradient bits), then
    turned to floats (exact grid values, so the doubles one float sum per
    bin gives)."""
    cdef const int64_t* cell = feature_cells + (era * view.n_slots + slot) * stride
    cdef Py_ssize_t b, nb = width - 1, words = view.words
    cdef Py_ssize_t left_end = min(max(threshold + 1, 0), width)
    cdef uint64_t mask = ((<uint64_t>1) << view.count_bits) - 1
    cdef uint64_t packed = 0, left_packed
    cdef int64_t hessian_units = 0, left_hessian_units
    for b in range(left_end):
        packed = packed + <uint64_t>cell[b * words]
        if words == 2:
            hessian_units = hessian_units + cell[b * words + 1]
    left_packed = packed
    left_hessian_units = hessian_units
    for b in range(left_end, width):
        packed = packed + <uint64_t>cell[b * words]
        if words == 2:
            hessian_units = hessian_units + cell[b * words + 1]
    if missing_left and nb >= left_end:
        left_packed = left_packed + <uint64_t>cell[nb * words]
        if words == 2:
            left_hessian_units = left_hessian_units + cell[nb * words + 1]
    g[0] = packed_units(packed, view.count_bits) / view.gradient_scale
    lg[0] = packed_units(left_packed, view.count_bits) / view.gradient_scale
    count[0] = <double>(packed & mask)
    lc[0] = <double>(left_packed & mask)
    if words == 2:
        h[0] = hessian_units / view.hessian_scale
        lh[0] = left_hessian_units / view.hessian_scale
    else:
        h[0] = view.constant_hessian * count[0]
        lh[0] = view.constant_hessian * lc[0]


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
    g[0] = packed_units(packed, view.count_bits) / view.gradient_scale
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


cdef void _candidate_era_pass(const pb_split_params* c, int mode, int with_direction,
                              double sum_g, double sum_h, double left_g, double left_h,
                              double mean, double slot_noise, bint bounded, double lower,
                              double upper, const era_cells_t* view,
                              const int64_t* feature_cells, Py_ssize_t stride,
                              Py_ssize_t width, Py_ssize_t slot, Py_ssize_t threshold,
                              int missing_left, const double* slot_era_rows,
                              Py_ssize_t n_eras, const int32_t* exponents,
                              double* largest, int64_t* steps, double* kept,
                              bint read_kept) noexcept nogil:
    """One candidate's era terms over this shard's eras: their largest
    magnitudes (``largest``, MODE_*_MAX) or their sums in steps of the grids
    ``exponents`` (``steps``, MODE_*_SUM) -- one value (newton gain sums) or
    N_TERMS (the era pass) per candidate. ``kept`` (NULL: none), per era the
    newton term or the square and noise terms: written by the maximum pass,
    rounded by the sum pass instead of computing them again when
    ``read_kept`` (the votes are computed, never kept)."""
    cdef des_candidate_t s
    cdef des_era_terms_t terms, terms_max
    cdef des_grid_sums_t sums
    cdef double g, h, lg, lh, lc, total_count, term, inverse_step = 0.0
    cdef double inverse_square = 0.0, inverse_noise = 0.0, inverse_direction = 0.0
    cdef Py_ssize_t era
    if mode == PASS_NEWTON_SUM and read_kept:
        inverse_step = des_grid_inverse_step(exponents[0])
        for era in range(n_eras):
            if slot_era_rows[era] != 0.0:
                steps[0] += des_to_grid(kept[era], inverse_step)
        return
    if mode == PASS_TERMS_SUM and read_kept:
        inverse_square = des_grid_inverse_step(exponents[0])
        inverse_noise = des_grid_inverse_step(exponents[1])
        for era in range(n_eras):
            if slot_era_rows[era] != 0.0:
                steps[0] += des_to_grid(kept[2 * era], inverse_square)
                steps[1] += des_to_grid(kept[2 * era + 1], inverse_noise)
        return   # no votes: steps[2] stays 0
    _begin(&s, c, with_direction, sum_g, sum_h, left_g, left_h, bounded, lower, upper)
    if mode == PASS_NEWTON_MAX or mode == PASS_NEWTON_SUM:
        if mode == PASS_NEWTON_SUM:
            inverse_step = des_grid_inverse_step(exponents[0])
        for era in range(n_eras):
            _prefetch_era(feature_cells, view.n_slots, stride, width * view.words, slot, era,
                          n_eras)
            if slot_era_rows[era] == 0.0:
                continue
            _era_sums(view, feature_cells, stride, width, slot, era, threshold, missing_left,
                      &g, &h, &lg, &lh, &lc, &total_count)
            term = _era_weight(c, total_count) * des_era_gain(&s, g, h, lg, lh)
            if mode == PASS_NEWTON_MAX:
                if fabs(term) > largest[0]:
                    largest[0] = fabs(term)
                if kept != NULL:
                    kept[era] = term
            else:
                steps[0] += des_to_grid(term, inverse_step)
        return
    des_candidate_set_mean(&s, mean)
    if c.era_std_between:
        des_candidate_set_noise(&s, slot_noise)
    terms_max.square = terms_max.noise = terms_max.direction = 0.0
    sums.square = sums.noise = sums.direction = 0
    if mode == PASS_TERMS_SUM:
        inverse_square = des_grid_inverse_step(exponents[0])
        inverse_noise = des_grid_inverse_step(exponents[1])
        inverse_direction = des_grid_inverse_step(exponents[2])
    for era in range(n_eras):
        _prefetch_era(feature_cells, view.n_slots, stride, width * view.words, slot, era,
                      n_eras)
        if slot_era_rows[era] == 0.0:
            continue
        _era_sums(view, feature_cells, stride, width, slot, era, threshold, missing_left,
                  &g, &h, &lg, &lh, &lc, &total_count)
        # The maxima need no vote (its grid comes from its bound, des_grid_of).
        terms = des_candidate_era_terms(&s, _era_weight(c, total_count), g, h, lg, lh, lc,
                                        total_count - lc, mode == PASS_TERMS_SUM)
        if mode == PASS_TERMS_MAX:
            des_terms_max(&terms_max, &terms)
            if kept != NULL:
                kept[2 * era] = terms.square
                kept[2 * era + 1] = terms.noise
        else:
            des_grid_add(&sums, &terms, inverse_square, inverse_noise, inverse_direction)
    if mode == PASS_TERMS_MAX:
        largest[0] = terms_max.square
        largest[1] = terms_max.noise
    else:
        steps[0] = sums.square
        steps[1] = sums.noise
        steps[2] = sums.direction


def candidate_pass(dict candidates, const double[::1] slot_variance, dict params, int mode,
                   cells=None, layout=None, era_rows=None, fixed=None,
                   Py_ssize_t n_slots=0, int n_threads=1, grid=None, sums=None, kept=None):
    """A shard's share of every candidate's era pass, or the candidates finished.

    MODE_NEWTON_MAX / MODE_TERMS_MAX return the largest magnitude of the
    terms over this shard's eras: (n_candidates,) of w_e gain_e (newton
    gains) or (n_candidates, 2) of the era pass's squares and noise terms
    (csrc/des.h des_candidate_era_terms; the votes need no maximum). Their
    maxima over the shards give the grids (newton_grid_exponents,
    grid_exponents): MODE_NEWTON_SUM / MODE_TERMS_SUM then return this
    shard's sums in int64 steps of ``grid`` ((n_candidates,) or
    (n_candidates, N_TERMS) int32): (n_candidates,) or (n_candidates,
    N_TERMS); summed over the shards they are the local fit's sums. MODE_FINISH
    reads no era and returns (score, gain) from ``sums`` and ``grid`` of all
    eras (None: no era pass, lambda_dro = lambda_dir = 0 with realized gains).

    ``cells`` are this shard's per-era cells (_split.find_best_splits'
    ``depth_cells`` of ``n_slots`` slots), ``layout`` (origin, stride,
    widths, slot_tree): where they are (find_best_splits' ``cell_origin``
    and ``cell_stride``), the features' widths and each slot's tree; ``era_rows`` the rows per
    (slot, era); ``fixed`` the round's FixedPointGradients. ``kept`` (None
    or float64 (n_candidates, eras, kept_terms(mode))): the maximum pass
    writes the terms there and the sum pass rounds them instead of computing
    them again (without votes only: lambda_dir = 0 or newton gains).
    Candidates are independent: ``n_threads`` threads share them out. A bounded candidate
    (enumerate_candidates' ``bounded``, ``lower``, ``upper``) uses values
    clipped to its node's bounds."""
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
    cdef const double[::1] c_weight_total = candidates["weight_total"]
    cdef const double[::1] c_weight_squares = candidates["weight_squares"]
    cdef Py_ssize_t n = cand_slot.shape[0], i, n_eras = 0
    cdef int with_direction = c.lambda_dir != 0.0
    cdef bint newton = mode == PASS_NEWTON_MAX or mode == PASS_NEWTON_SUM
    cdef Py_ssize_t n_values = 1 if newton else N_TERMS
    cdef des_candidate_t s
    cdef des_result_t result
    cdef des_grid_t grid_of
    cdef des_grid_sums_t sums_of
    cdef era_cells_t view
    cdef const int64_t[::1] cell_view
    cdef const int64_t[:, ::1] origin_view
    cdef const int64_t[::1] stride_view, width_view
    cdef const int32_t[::1] tree_of_slot
    cdef const double[:, ::1] rows_view
    cdef const int32_t[:, ::1] grid_view
    cdef const int64_t[:, ::1] sums_view
    cdef double[:, ::1] largest_view
    cdef int64_t[:, ::1] steps_view
    cdef double[::1] score_view, gain_view
    cdef bint finished_sums = sums is not None
    if mode == MODE_FINISH:
        score = np.full(n, -INFINITY)
        gain = np.zeros(n)
        score_view = score
        gain_view = gain
        if finished_sums:
            grid_view = np.ascontiguousarray(grid, dtype=np.int32).reshape(n, N_TERMS)
            sums_view = np.ascontiguousarray(sums, dtype=np.int64).reshape(n, N_TERMS)
        for i in range(n):
            _begin(&s, &c, with_direction, c_sum_g[i], c_sum_h[i], c_left_g[i], c_left_h[i],
                   c_bounded[i], c_lower[i], c_upper[i])
            des_candidate_set_mean(&s, c_mean[i])
            if c.era_std_between:
                des_candidate_set_noise(&s, slot_variance[cand_slot[i]])
            if finished_sums:
                grid_of.square = grid_view[i, 0]
                grid_of.noise = grid_view[i, 1]
                grid_of.direction = grid_view[i, 2]
                sums_of.square = sums_view[i, 0]
                sums_of.noise = sums_view[i, 1]
                sums_of.direction = sums_view[i, 2]
                des_candidate_set_sums(&s, c_weight_total[i], c_weight_squares[i], &sums_of,
                                       &grid_of)
            result = des_candidate_finish(&s, c.lambda_dro, c.lambda_dir)
            score_view[i] = result.score
            if c_bounded[i]:
                gain_view[i] = des_bounded_gain(&s, c_sum_g[i], c_sum_h[i], c_left_g[i],
                                                c_left_h[i])
            else:
                gain_view[i] = des_pooled_gain(c_sum_g[i], c_sum_h[i], c_left_g[i],
                                               c_left_h[i], c.reg_lambda, c.reg_alpha)
        return score, gain
    cell_view = cells
    origin_view, stride_view, width_view, tree_of_slot = layout
    rows_view = era_rows
    n_eras = rows_view.shape[1]
    _fill_view(&view, fixed, n_slots)
    largest = np.zeros((n, n_values))
    steps = np.zeros((n, n_values), dtype=np.int64)
    largest_view = largest
    steps_view = steps
    cdef bint summing = mode == PASS_NEWTON_SUM or mode == PASS_TERMS_SUM
    cdef Py_ssize_t kept_width = kept_terms(mode)
    cdef double[:, :, ::1] kept_view
    cdef double* kept_pointer = NULL
    cdef bint read_kept = kept is not None and summing and (newton or not with_direction)
    if kept is not None and n > 0:
        kept_view = kept
        if kept_view.shape[0] != n or kept_view.shape[1] != n_eras \
                or kept_view.shape[2] != kept_width:
            raise ValueError(f"kept must be ({n}, {n_eras}, {kept_width}), "
                             f"got {tuple(kept.shape)}")
        kept_pointer = &kept_view[0, 0, 0]
    if summing:
        grid_view = np.ascontiguousarray(grid, dtype=np.int32).reshape(n, n_values)
    else:
        grid_view = np.zeros((n, n_values), dtype=np.int32)
    for i in prange(n, nogil=True, schedule='dynamic', chunksize=64,
                    num_threads=max(1, min(n_threads, n))):
        _candidate_era_pass(&c, mode, with_direction, c_sum_g[i], c_sum_h[i], c_left_g[i],
                            c_left_h[i], c_mean[i], slot_variance[cand_slot[i]],
                            c_bounded[i], c_lower[i], c_upper[i], &view,
                            &cell_view[origin_view[cand_pos[i], tree_of_slot[cand_slot[i]]]],
                            stride_view[cand_pos[i]],
                            width_view[cand_pos[i]], cand_slot[i], cand_t[i], cand_ml[i],
                            &rows_view[cand_slot[i], 0], n_eras, &grid_view[i, 0],
                            &largest_view[i, 0], &steps_view[i, 0],
                            NULL if kept_pointer == NULL
                            else kept_pointer + i * n_eras * kept_width, read_kept)
    if summing:
        return steps.reshape(-1) if newton else steps
    return largest.reshape(-1) if newton else np.ascontiguousarray(largest[:, :2])
