# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Splits on categorical features: per-era category histograms, candidate
category sets, their DES scores, and the routing of rows by set.

# Notes:
A categorical feature is binned one bin per category (packboost/_categories.py),
so its bin code is the category's code and the missing bin (NaN, or a category
the fit never saw) is code ``K = n_bins``. A split sends a *set* of categories
left and the missing code to its missing side (docs/guide/categorical.md §2):

    categories with rows in the node:   k
    k <= max_cat_to_onehot:  one against the rest   {c} | rest,   c in code order
    k >  max_cat_to_onehot:  prefixes of the order of G_c / (H_c + cat_smooth)
                             over the node's eras pooled (cat_order="era": shrunk
                             towards 0 by lambda_dro x its spread between eras
                             beyond sampling noise; ascending, ties by code):
                             {o_1 .. o_j} | rest,  j = 1 .. k - 1, with at most
                             max_cat_threshold categories on the smaller side, at
                             least min_data_per_group non-missing rows on each,
                             and o_j, o_{j+1} of different ratios (a block of
                             tied categories is never cut);
                             then, with cat_search_steps = T > 0, from the best
                             prefix at most T moves of one category across the
                             set (S xor {c}, c in code order, same limits), each
                             to the move that scores highest if it beats the
                             current set: (k - 1) + T k sets at most

and every candidate, with the missing rows on the left, then on the right
(docs/des.md §9's rules for which of the two is scored), is scored by
csrc/des.h from the same per-era cells as a threshold: per-era gains, mean,
risk and direction (docs/des.md §3-§8). A category set that helps some eras
and hurts others loses as a threshold would. ``tests/oracles/categorical.py``
enumerates the same candidates and runs the same search with NumPy. The
search's sets are sums of the prefix's per-era cells plus or minus one
category's: exact (grid-valued sums, docs/fixed-point.md), so the kernel
and the oracle score the same numbers.

The histograms here are plain float64 sums of the round's rounded gradients
(docs/fixed-point.md: exact in any order), one (era, code) cell per slot and
feature; categorical features are few, so they are not worth the packed
cells of packboost/_histogram.pxd.
"""

import numpy as np

cimport cython
from cython.parallel cimport prange
from libc.math cimport INFINITY, fabs, sqrt
from libc.stdlib cimport malloc, free, qsort
from libc.stdint cimport uint8_t, int32_t, int64_t

from packboost.tree cimport bin_code_t, node_index_t
from packboost._des cimport (des_candidate_t, des_result_t, des_pooled_gain,
                             des_candidate_begin, des_candidate_begin_bounded,
                             des_bounded_gain, des_era_gain, des_realized_mean,
                             des_candidate_set_mean, des_candidate_set_noise,
                             des_era_terms_t, des_grid_t, des_grid_sums_t,
                             des_candidate_era_terms, des_terms_max, des_grid_of,
                             des_era_weight_bound, des_grid_sum, des_grid_sums_of,
                             des_weight_total,
                             des_weight_squares, des_candidate_set_sums,
                             des_candidate_finish)
from packboost._split_params cimport (pb_split_params, make_split_params,
                                      DES_ERA_GAIN_NEWTON, PB_ERA_WEIGHTING_COUNT)


def category_histograms(
        const bin_code_t[:, ::1] X_binned,          # IN  (n_features, n_rows) codes
        const int32_t[::1] features,                # IN  (n_cat,) categorical features
        const node_index_t[:, ::1] node_of_row,     # IN  (n_rows, pack_size) slot codes
        const int32_t[::1] slot_tree,               # IN  (n_slots,) each slot's tree
        const uint8_t[::1] slot_open,               # IN  (n_slots,) 1: histogram it
        const double[::1] gradients,                # IN  (n_rows,) the round's rounded g
        const double[::1] hessians,                 # IN  (n_rows,) and h
        const int32_t[::1] row_era,                 # IN  (n_rows,)
        Py_ssize_t n_eras,
        Py_ssize_t width,                           # codes per feature (its missing one too)
        int n_threads,
):
    """(n_cat, n_slots, n_eras, width, 3) float64: per (feature, slot, era,
    code) the sum of g, of h and the row count of the slot's sampled rows.

    One tree per task: a slot is one tree's, so the tasks write disjoint
    cells, each in row order."""
    cdef Py_ssize_t n_rows = node_of_row.shape[0], pack_size = node_of_row.shape[1]
    cdef Py_ssize_t n_slots = slot_open.shape[0], n_cat = features.shape[0]
    hist = np.zeros((n_cat, n_slots, n_eras, width, 3), dtype=np.float64)
    cdef double[:, :, :, :, ::1] cells = hist
    cdef Py_ssize_t tree, row, f, slot
    cdef Py_ssize_t code
    if n_rows == 0 or n_slots == 0 or n_cat == 0:
        return hist
    if slot_tree.shape[0] != n_slots:
        raise ValueError(f"slot_tree must have {n_slots} entries")
    for f in range(n_cat):
        if not 0 <= features[f] < X_binned.shape[0]:
            raise ValueError(f"feature {features[f]} is not a column of X_binned")
    for tree in prange(pack_size, nogil=True, schedule='dynamic',
                       num_threads=max(1, min(n_threads, pack_size))):
        for row in range(n_rows):
            slot = node_of_row[row, tree]
            if slot < 0 or slot >= n_slots or not slot_open[slot]:
                continue
            for f in range(n_cat):
                code = X_binned[features[f], row]
                if code >= width:
                    code = width - 1
                cells[f, slot, row_era[row], code, 0] += gradients[row]
                cells[f, slot, row_era[row], code, 1] += hessians[row]
                cells[f, slot, row_era[row], code, 2] += 1.0
    return hist


cdef struct ranked_category:
    double ratio
    int32_t code


cdef int compare_ranked(const void* a, const void* b) noexcept nogil:
    cdef const ranked_category* x = <const ranked_category*>a
    cdef const ranked_category* y = <const ranked_category*>b
    if x.ratio < y.ratio:
        return -1
    if x.ratio > y.ratio:
        return 1
    return (x.code > y.code) - (x.code < y.code)


cdef struct category_best:
    int found
    double score
    double gain
    int missing_left
    double left_g, left_h, left_count


cdef struct node_cells:
    # One (slot, feature)'s per-era totals and what scoring a set needs of
    # them (score_feature fills it once; score_set reads it per candidate).
    const double* cells              # (n_eras, width, 3)
    Py_ssize_t n_eras, width, n_present, missing_code
    const int32_t* era_ids           # (n_present,) the eras with rows
    const double* era_g
    const double* era_h
    const double* era_c
    const double* era_w
    double* era_terms                # (3 * n_eras,) scratch
    double sum_g, sum_h, sum_c, m_g, m_h, m_c, w_m_g, w_m_h, w_sum_g, w_sum_h
    double weight_total, weight_squares, largest_era_rows
    double gradient_variance, lower, upper
    bint bounded, with_direction, needs_pass
    const pb_split_params* params


cdef double era_robust_ratio(
        const double* cells, const int32_t* era_ids, Py_ssize_t n_present, Py_ssize_t width,
        Py_ssize_t code, double pooled_ratio, double lambda_dro,
        double gradient_variance) noexcept nogil:
    """cat_order="era": the category's pooled ratio m = G_c / (H_c + cat_smooth)
    shrunk towards 0 by lambda_dro times tau, the spread of its effect between
    eras beyond sampling noise: sign(m) max(|m| - lambda_dro tau, 0)
    (docs/guide/categorical.md §2.1).

    tau^2 = max(0, V - N), a random-effects meta-analysis of the per-era
    means x_e = G_ce / H_ce around xbar = G_c / H_c, weighted by H_ce:

        V = sum_e H_ce (x_e - xbar)^2 / H_c
        N = s_g^2 sum_e (n_ce / H_ce) (1 - H_ce / H_c) / H_c

    N is V's expectation when every era has the same effect (x_e's variance
    is s_g^2 n_ce / H_ce^2, s_g^2 the node's per-row gradient variance, 0
    unless era_std="between", as DES's: docs/des.md §6.2). A category whose
    effect changes sign between eras moves to the middle of the order; one
    with few rows per era keeps its pooled ratio unless its eras disagree
    beyond their noise."""
    cdef Py_ssize_t i
    cdef double g = 0.0, h = 0.0, era_mean, deviation, spread = 0.0, noise = 0.0, tau2
    cdef const double* cell
    if lambda_dro == 0.0:
        return pooled_ratio
    for i in range(n_present):
        cell = cells + (era_ids[i] * width + code) * 3
        if cell[2] > 0.0 and cell[1] > 0.0:
            g = g + cell[0]
            h = h + cell[1]
    if h <= 0.0:
        return pooled_ratio
    for i in range(n_present):
        cell = cells + (era_ids[i] * width + code) * 3
        if cell[2] > 0.0 and cell[1] > 0.0:
            era_mean = cell[0] / cell[1]
            deviation = era_mean - g / h
            spread = spread + cell[1] * deviation * deviation
            noise = noise + cell[2] / cell[1] * (1.0 - cell[1] / h)
    tau2 = spread / h - gradient_variance * noise / h
    if tau2 <= 0.0:
        return pooled_ratio
    spread = lambda_dro * sqrt(tau2)
    if fabs(pooled_ratio) <= spread:
        return 0.0
    return pooled_ratio - spread if pooled_ratio > 0.0 else pooled_ratio + spread


cdef bint score_set(
        const node_cells* node,
        const double* left_g, const double* left_h, const double* left_c,  # (n_present,)
        double p_left_g, double p_left_h, double p_left_c,   # their sums (non-missing left)
        category_best* best,             # IN/OUT: replaced by a strictly better candidate
) noexcept nogil:
    """DES of one category set, its missing rows on the left, then on the
    right (docs/des.md §9: the right only if the node has missing rows);
    ``best`` takes a candidate that scores strictly higher. True if it did."""
    cdef const pb_split_params* params = node.params
    cdef Py_ssize_t i, side, n_present = node.n_present, n_eras = node.n_eras
    cdef double* era_terms = node.era_terms
    cdef double w_left_g = 0.0, w_left_h = 0.0
    cdef double cand_g, cand_h, cand_c, cand_w_g, cand_w_h, elg, elh, elc, mean
    cdef const double* cell
    cdef bint missing_goes_left, improved = False
    cdef des_era_terms_t terms, terms_max
    cdef des_grid_t grid
    cdef des_grid_sums_t grid_sums
    cdef des_candidate_t state
    cdef des_result_t result
    for i in range(n_present):
        w_left_g = w_left_g + node.era_w[i] * left_g[i]
        w_left_h = w_left_h + node.era_w[i] * left_h[i]
    for side in range(2):
        missing_goes_left = side == 0
        if not missing_goes_left and node.m_c == 0.0:
            continue
        cand_g = p_left_g + node.m_g if missing_goes_left else p_left_g
        cand_h = p_left_h + node.m_h if missing_goes_left else p_left_h
        cand_c = p_left_c + node.m_c if missing_goes_left else p_left_c
        if (cand_c < params.min_samples_leaf or node.sum_c - cand_c < params.min_samples_leaf
                or cand_h < params.min_child_weight
                or node.sum_h - cand_h < params.min_child_weight):
            continue
        if node.bounded:
            des_candidate_begin_bounded(&state, node.sum_g, node.sum_h, cand_g, cand_h,
                                        node.lower, node.upper, params.reg_lambda,
                                        params.reg_alpha, params.era_gain,
                                        params.dir_tanh_scale, node.with_direction)
        else:
            des_candidate_begin(&state, node.sum_g, node.sum_h, cand_g, cand_h,
                                params.reg_lambda, params.reg_alpha, params.era_gain,
                                params.dir_tanh_scale, node.with_direction)
        if params.era_gain == DES_ERA_GAIN_NEWTON:
            # sum_e w_e gain_e on a grid (csrc/des.h des_grid_sum)
            for i in range(n_present):
                elg = left_g[i]
                elh = left_h[i]
                if missing_goes_left:
                    cell = node.cells + (node.era_ids[i] * node.width + node.missing_code) * 3
                    elg = elg + cell[0]
                    elh = elh + cell[1]
                era_terms[i] = node.era_w[i] * des_era_gain(&state, node.era_g[i],
                                                            node.era_h[i], elg, elh)
            mean = des_grid_sum(era_terms, n_present) / node.weight_total
        else:
            cand_w_g = w_left_g + node.w_m_g if missing_goes_left else w_left_g
            cand_w_h = w_left_h + node.w_m_h if missing_goes_left else w_left_h
            mean = des_realized_mean(&state, node.w_sum_g, node.w_sum_h, cand_w_g, cand_w_h,
                                     node.weight_total)
        des_candidate_set_mean(&state, mean)
        if params.era_std_between:
            des_candidate_set_noise(&state, node.gradient_variance)
        if node.needs_pass:
            # The era terms, their largest magnitudes, then their sums on
            # the grids those give (order-free: csrc/des.h, docs/des.md §6.3).
            terms_max.square = 0.0
            terms_max.noise = 0.0
            terms_max.direction = 0.0
            for i in range(n_present):
                elg = left_g[i]
                elh = left_h[i]
                elc = left_c[i]
                if missing_goes_left:
                    cell = node.cells + (node.era_ids[i] * node.width + node.missing_code) * 3
                    elg = elg + cell[0]
                    elh = elh + cell[1]
                    elc = elc + cell[2]
                terms = des_candidate_era_terms(&state, node.era_w[i], node.era_g[i],
                                                node.era_h[i], elg, elh, elc,
                                                node.era_c[i] - elc, 1)
                era_terms[i] = terms.square
                era_terms[n_eras + i] = terms.noise
                era_terms[2 * n_eras + i] = terms.direction
                des_terms_max(&terms_max, &terms)
            grid = des_grid_of(&terms_max, des_era_weight_bound(
                params.era_weighting == PB_ERA_WEIGHTING_COUNT, node.largest_era_rows,
                params.era_alpha), <double>n_present)
            grid_sums = des_grid_sums_of(era_terms, era_terms + n_eras,
                                         era_terms + 2 * n_eras, n_present, &grid)
            des_candidate_set_sums(&state, node.weight_total, node.weight_squares,
                                   &grid_sums, &grid)
        result = des_candidate_finish(&state, params.lambda_dro, params.lambda_dir)
        if result.score > best.score:
            improved = True
            best.found = 1
            best.score = result.score
            if node.bounded:
                best.gain = des_bounded_gain(&state, node.sum_g, node.sum_h, cand_g, cand_h)
            else:
                best.gain = des_pooled_gain(node.sum_g, node.sum_h, cand_g, cand_h,
                                            params.reg_lambda, params.reg_alpha)
            best.missing_left = missing_goes_left
            best.left_g = cand_g
            best.left_h = cand_h
            best.left_count = cand_c
    return improved


cdef inline void add_category_eras(
        double* out_g, double* out_h, double* out_c,               # OUT (n_present,)
        const double* base_g, const double* base_h, const double* base_c,  # IN (n_present,)
        const double* cells, const int32_t* era_ids, Py_ssize_t n_present,
        Py_ssize_t width, Py_ssize_t code, double sign) noexcept nogil:
    """A side's per-era sums with category ``code`` added (``sign`` 1) or
    taken away (-1): ``out = base + sign x`` the category's cell (G, H,
    count) in each present era. ``out`` may be ``base``."""
    cdef Py_ssize_t i
    cdef const double* cell
    for i in range(n_present):
        cell = cells + (era_ids[i] * width + code) * 3
        out_g[i] = base_g[i] + sign * cell[0]
        out_h[i] = base_h[i] + sign * cell[1]
        out_c[i] = base_c[i] + sign * cell[2]


cdef category_best score_feature(
        const double* cells,             # IN  (n_eras, width, 3) one slot's cells of a feature
        Py_ssize_t n_eras, Py_ssize_t width,
        Py_ssize_t n_categories,         # K: codes 0 .. K-1, missing code K
        const pb_split_params* params,
        double gradient_variance, double lower, double upper,
        int max_cat_to_onehot, int max_cat_threshold, double cat_smooth,
        double min_data_per_group,
        bint order_by_eras,              # order by the eras' ratios (cat_order="era")
        int search_steps,                # cat_search_steps: toggle moves after the prefixes
        double* scratch,                 # (14 * n_eras + 3 * width + 1)
        ranked_category* ranked,         # (width,)
        uint8_t* chosen,                 # OUT (width,) 1: the best set's categories
) noexcept nogil:
    cdef Py_ssize_t e, c, i, n_present = 0, k = 0, n_candidates, j, step, n_left
    cdef Py_ssize_t missing_code = n_categories, best_position = -1, best_toggle
    cdef double* era_g = scratch
    cdef double* era_h = scratch + n_eras
    cdef double* era_c = scratch + 2 * n_eras
    cdef double* era_w = scratch + 3 * n_eras
    cdef double* left_g = scratch + 4 * n_eras       # the candidate's non-missing left
    cdef double* left_h = scratch + 5 * n_eras       # side per era: a prefix's running
    cdef double* left_c = scratch + 6 * n_eras       # sums, or the search's current set
    cdef int32_t* era_ids = <int32_t*>(scratch + 7 * n_eras)
    cdef double* era_terms = scratch + 8 * n_eras   # 3 rows of n_eras: des_candidate_era_terms
    cdef double* move_g = scratch + 11 * n_eras     # a toggled set's, per era
    cdef double* move_h = scratch + 12 * n_eras
    cdef double* move_c = scratch + 13 * n_eras
    cdef double* cat_g = scratch + 14 * n_eras
    cdef double* cat_h = cat_g + width
    cdef double* cat_c = cat_h + width
    cdef double count_squares = 0.0, sign
    cdef double eg, eh, ec, w
    cdef double p_left_g, p_left_h, p_left_c, move_p_g, move_p_h, move_p_c
    cdef const double* cell
    cdef bint one_vs_rest
    cdef node_cells node
    cdef category_best best
    best.found = 0
    best.score = -INFINITY

    node.cells = cells
    node.n_eras = n_eras
    node.width = width
    node.missing_code = missing_code
    node.era_ids = era_ids
    node.era_g = era_g
    node.era_h = era_h
    node.era_c = era_c
    node.era_w = era_w
    node.era_terms = era_terms
    node.params = params
    node.gradient_variance = gradient_variance
    node.lower = lower
    node.upper = upper
    node.bounded = lower > -INFINITY or upper < INFINITY
    node.with_direction = params.lambda_dir != 0.0
    node.needs_pass = (params.lambda_dro != 0.0 or node.with_direction
                       or params.era_gain == DES_ERA_GAIN_NEWTON)
    node.sum_g = node.sum_h = node.sum_c = 0.0
    node.m_g = node.m_h = node.m_c = node.w_m_g = node.w_m_h = 0.0
    node.w_sum_g = node.w_sum_h = 0.0
    node.largest_era_rows = 0.0

    for c in range(n_categories):
        cat_g[c] = 0.0
        cat_h[c] = 0.0
        cat_c[c] = 0.0
    for e in range(n_eras):
        eg = 0.0
        eh = 0.0
        ec = 0.0
        for c in range(n_categories + 1):
            cell = cells + (e * width + c) * 3
            eg = eg + cell[0]
            eh = eh + cell[1]
            ec = ec + cell[2]
        if ec == 0.0:
            continue
        w = params.era_alpha + ec if params.era_weighting == PB_ERA_WEIGHTING_COUNT else 1.0
        era_ids[n_present] = <int32_t>e
        era_g[n_present] = eg
        era_h[n_present] = eh
        era_c[n_present] = ec
        era_w[n_present] = w
        node.sum_g += eg
        node.sum_h += eh
        node.sum_c += ec
        count_squares += ec * ec
        node.largest_era_rows = max(node.largest_era_rows, ec)
        node.w_sum_g += w * eg
        node.w_sum_h += w * eh
        cell = cells + (e * width + missing_code) * 3
        node.m_g += cell[0]
        node.m_h += cell[1]
        node.m_c += cell[2]
        node.w_m_g += w * cell[0]
        node.w_m_h += w * cell[1]
        for c in range(n_categories):
            cell = cells + (e * width + c) * 3
            cat_g[c] += cell[0]
            cat_h[c] += cell[1]
            cat_c[c] += cell[2]
        n_present += 1
    node.n_present = n_present
    # The era weights' totals from integers, exact in any order (csrc/des.h).
    node.weight_total = des_weight_total(params.era_weighting == PB_ERA_WEIGHTING_COUNT,
                                         <double>n_present, node.sum_c, params.era_alpha)
    node.weight_squares = des_weight_squares(params.era_weighting == PB_ERA_WEIGHTING_COUNT,
                                             <double>n_present, node.sum_c, count_squares,
                                             params.era_alpha)
    # The node's categories with rows, in code order.
    for c in range(n_categories):
        if cat_c[c] > 0.0:
            ranked[k].code = <int32_t>c
            ranked[k].ratio = 0.0
            k += 1
    if k == 0:
        return best
    one_vs_rest = k <= max_cat_to_onehot
    if one_vs_rest:
        n_candidates = k
    else:
        for i in range(k):
            c = ranked[i].code
            ranked[i].ratio = cat_g[c] / (cat_h[c] + cat_smooth)
            if order_by_eras:
                ranked[i].ratio = era_robust_ratio(
                    cells, era_ids, n_present, width, c, ranked[i].ratio, params.lambda_dro,
                    gradient_variance if params.era_std_between else 0.0)
        qsort(ranked, k, sizeof(ranked_category), compare_ranked)
        n_candidates = k - 1
    for i in range(n_present):
        left_g[i] = 0.0
        left_h[i] = 0.0
        left_c[i] = 0.0
    p_left_g = 0.0
    p_left_h = 0.0
    p_left_c = 0.0
    for j in range(n_candidates):
        c = ranked[j].code
        # The candidate's non-missing left side, per era and pooled: {c}, or
        # the prefix grown by c.
        if one_vs_rest:
            p_left_g = cat_g[c]
            p_left_h = cat_h[c]
            p_left_c = cat_c[c]
        else:
            p_left_g = p_left_g + cat_g[c]
            p_left_h = p_left_h + cat_h[c]
            p_left_c = p_left_c + cat_c[c]
        if one_vs_rest:
            for i in range(n_present):
                cell = cells + (era_ids[i] * width + c) * 3
                left_g[i] = cell[0]
                left_h[i] = cell[1]
                left_c[i] = cell[2]
        else:
            add_category_eras(left_g, left_h, left_c, left_g, left_h, left_c, cells, era_ids,
                              n_present, width, c, 1.0)
        if not one_vs_rest:
            if j + 1 > max_cat_threshold and k - j - 1 > max_cat_threshold:
                continue
            if ranked[j].ratio == ranked[j + 1].ratio:
                # Tied categories are one block: the order says nothing
                # between them (docs/guide/categorical.md §2).
                continue
            if (p_left_c < min_data_per_group
                    or node.sum_c - node.m_c - p_left_c < min_data_per_group):
                continue
        if score_set(&node, left_g, left_h, left_c, p_left_g, p_left_h, p_left_c, &best):
            best_position = j
    if not best.found:
        return best
    for c in range(width):
        chosen[c] = 0
    if one_vs_rest:
        chosen[ranked[best_position].code] = 1
        return best
    for i in range(best_position + 1):
        chosen[ranked[i].code] = 1
    if search_steps <= 0:
        return best
    # The search (docs/guide/categorical.md §2.2): from the best prefix, move
    # one category across (into the set, or out of it) while that scores
    # strictly higher, the best move first (ties: the lower code, then the
    # missing rows left), at most search_steps moves.
    n_left = best_position + 1
    p_left_g = 0.0
    p_left_h = 0.0
    p_left_c = 0.0
    for i in range(n_present):
        left_g[i] = 0.0
        left_h[i] = 0.0
        left_c[i] = 0.0
    for c in range(n_categories):
        if chosen[c]:
            p_left_g = p_left_g + cat_g[c]
            p_left_h = p_left_h + cat_h[c]
            p_left_c = p_left_c + cat_c[c]
            add_category_eras(left_g, left_h, left_c, left_g, left_h, left_c, cells, era_ids,
                              n_present, width, c, 1.0)
    for step in range(search_steps):
        best_toggle = -1
        for c in range(n_categories):
            if cat_c[c] == 0.0:
                continue
            sign = -1.0 if chosen[c] else 1.0
            j = n_left - 1 if chosen[c] else n_left + 1       # the moved set's size
            if j < 1 or j > k - 1 or (j > max_cat_threshold and k - j > max_cat_threshold):
                continue
            move_p_c = p_left_c + sign * cat_c[c]
            if (move_p_c < min_data_per_group
                    or node.sum_c - node.m_c - move_p_c < min_data_per_group):
                continue
            move_p_g = p_left_g + sign * cat_g[c]
            move_p_h = p_left_h + sign * cat_h[c]
            add_category_eras(move_g, move_h, move_c, left_g, left_h, left_c, cells, era_ids,
                              n_present, width, c, sign)
            if score_set(&node, move_g, move_h, move_c, move_p_g, move_p_h, move_p_c, &best):
                best_toggle = c
        if best_toggle < 0:
            break
        c = best_toggle
        sign = -1.0 if chosen[c] else 1.0
        chosen[c] = 0 if chosen[c] else 1
        n_left = n_left + (1 if chosen[c] else -1)
        p_left_g = p_left_g + sign * cat_g[c]
        p_left_h = p_left_h + sign * cat_h[c]
        p_left_c = p_left_c + sign * cat_c[c]
        add_category_eras(left_g, left_h, left_c, left_g, left_h, left_c, cells, era_ids,
                          n_present, width, c, sign)
    return best


def best_category_splits(
        const double[:, :, :, :, ::1] hist,         # IN  category_histograms' cells
        const int32_t[::1] n_categories,            # IN  (n_cat,) K of each feature
        const uint8_t[::1] slot_open,               # IN  (n_slots,)
        const int32_t[::1] slot_tree,               # IN  (n_slots,)
        const uint8_t[:, ::1] tree_uses_feature,    # IN  (n_cat, pack_size)
        const double[::1] slot_variance,            # IN  (n_slots,) per-row gradient variance
        dict split_params,
        int max_cat_to_onehot, int max_cat_threshold, double cat_smooth,
        double min_data_per_group, int n_threads,
        const double[:, ::1] slot_bounds=None,      # IN  (n_slots, 2) value bounds, or None
        const uint8_t[:, ::1] slot_allows_feature=None,  # IN  (n_slots, n_cat), or None
        bint order_by_eras=False,                   # cat_order="era" (score_feature)
        int search_steps=0,                         # cat_search_steps (score_feature)
):
    """The best category split of every open slot over the categorical
    features (ascending; the first strictly best wins: lower feature, then
    candidate order, then missing left before right).

    Returns a dict of per-slot arrays: ``column`` (int64, index into the
    features, -1: none), ``score``, ``gain``, ``missing_left``, the left
    child's ``left_gradients``/``left_hessians``/``left_count``, and
    ``left_categories`` (n_slots, width) uint8: 1 for the categories that go
    left, where the categories without rows in the node go with the missing
    ones (so an unseen category at predict time takes the missing side)."""
    cdef pb_split_params params = make_split_params(split_params)
    cdef Py_ssize_t n_cat = hist.shape[0], n_slots = hist.shape[1]
    cdef Py_ssize_t n_eras = hist.shape[2], width = hist.shape[3]
    cdef Py_ssize_t slot, f, i, c, k_rows
    if n_categories.shape[0] != n_cat or tree_uses_feature.shape[0] != n_cat:
        raise ValueError(f"n_categories and tree_uses_feature must have {n_cat} rows")
    if (slot_open.shape[0] != n_slots or slot_tree.shape[0] != n_slots
            or slot_variance.shape[0] != n_slots):
        raise ValueError(f"slot arrays must have {n_slots} entries")
    for f in range(n_cat):
        if not 0 <= n_categories[f] < width:
            raise ValueError(f"n_categories must be in [0, {width})")
    if slot_bounds is not None and slot_bounds.shape[0] != n_slots:
        raise ValueError(f"slot_bounds must have {n_slots} rows")
    if slot_allows_feature is not None and (slot_allows_feature.shape[0] != n_slots
                                            or slot_allows_feature.shape[1] != n_cat):
        raise ValueError(f"slot_allows_feature must be ({n_slots}, {n_cat})")
    column = np.full(n_slots, -1, dtype=np.int64)
    score = np.full(n_slots, -np.inf)
    gain = np.zeros(n_slots)
    missing_left = np.zeros(n_slots, dtype=np.uint8)
    left_g = np.zeros(n_slots)
    left_h = np.zeros(n_slots)
    left_count = np.zeros(n_slots)
    left_categories = np.zeros((n_slots, width), dtype=np.uint8)
    cdef int64_t[::1] column_view = column
    cdef double[::1] score_view = score, gain_view = gain
    cdef double[::1] left_g_view = left_g, left_h_view = left_h, left_count_view = left_count
    cdef uint8_t[::1] missing_view = missing_left
    cdef uint8_t[:, ::1] set_view = left_categories
    cdef double lower, upper
    cdef double* scratch
    cdef ranked_category* ranked
    cdef uint8_t* chosen
    cdef category_best found, best
    cdef Py_ssize_t best_f
    if n_slots == 0 or n_cat == 0:
        return dict(column=column, score=score, gain=gain, missing_left=missing_left,
                    left_gradients=left_g, left_hessians=left_h, left_count=left_count,
                    left_categories=left_categories)
    for slot in prange(n_slots, nogil=True, schedule='dynamic',
                       num_threads=max(1, min(n_threads, n_slots))):
        if not slot_open[slot]:
            continue
        scratch = <double*>malloc((14 * n_eras + 3 * width + 1) * sizeof(double))
        ranked = <ranked_category*>malloc((width + 1) * sizeof(ranked_category))
        chosen = <uint8_t*>malloc((width + 1) * sizeof(uint8_t))
        lower = -INFINITY
        upper = INFINITY
        if slot_bounds is not None:
            lower = slot_bounds[slot, 0]
            upper = slot_bounds[slot, 1]
        best.found = 0
        best.score = -INFINITY
        best_f = -1
        for f in range(n_cat):
            if not tree_uses_feature[f, slot_tree[slot]]:
                continue
            if slot_allows_feature is not None and not slot_allows_feature[slot, f]:
                continue
            found = score_feature(&hist[f, slot, 0, 0, 0], n_eras, width, n_categories[f],
                                  &params, slot_variance[slot], lower, upper,
                                  max_cat_to_onehot, max_cat_threshold, cat_smooth,
                                  min_data_per_group, order_by_eras, search_steps,
                                  scratch, ranked, chosen)
            if found.found and found.score > best.score:
                best = found
                best_f = f
                for c in range(width):
                    set_view[slot, c] = chosen[c]
                if found.missing_left:
                    # Categories without rows here go with the missing ones.
                    for c in range(n_categories[f]):
                        k_rows = 0
                        for i in range(n_eras):
                            if hist[f, slot, i, c, 2] > 0.0:
                                k_rows = 1
                                break
                        if k_rows == 0:
                            set_view[slot, c] = 1
        if best_f >= 0:
            column_view[slot] = best_f
            score_view[slot] = best.score
            gain_view[slot] = best.gain
            missing_view[slot] = best.missing_left
            left_g_view[slot] = best.left_g
            left_h_view[slot] = best.left_h
            left_count_view[slot] = best.left_count
        free(scratch)
        free(ranked)
        free(chosen)
    return dict(column=column, score=score, gain=gain, missing_left=missing_left,
                left_gradients=left_g, left_hessians=left_h, left_count=left_count,
                left_categories=left_categories)


def move_left_by_category(
        const bin_code_t[:, ::1] X_binned,          # IN  (n_features, n_rows)
        node_index_t[:, ::1] node_of_row,           # IN/OUT (n_rows, pack_size)
        const int32_t[::1] child_feature,           # IN  (n_next_slots,) for a right child of
                                                    #     a category split its feature, else -1
        const uint8_t[:, ::1] child_left_set,       # IN  (n_next_slots, width) its left set
        int n_threads,
):
    """Fix-up after a routing that sent every non-missing row of a category
    split to its right child (threshold -1): a row in such a right child
    whose code is in the split's left set moves to the left child (slot - 1).
    Unsampled codes (-2 - slot) move alike; missing codes stay where the
    routing put them."""
    cdef Py_ssize_t n_rows = node_of_row.shape[0], pack_size = node_of_row.shape[1]
    cdef Py_ssize_t n_next = child_feature.shape[0], width = child_left_set.shape[1]
    cdef Py_ssize_t row, tree, slot, code
    cdef node_index_t value
    cdef bint unsampled
    if child_left_set.shape[0] != n_next:
        raise ValueError(f"child_left_set must have {n_next} rows")
    for row in prange(n_rows, nogil=True, schedule='static',
                      num_threads=max(1, min(n_threads, n_rows))):
        for tree in range(pack_size):
            value = node_of_row[row, tree]
            if value == -1:
                continue
            unsampled = value < -1
            slot = -2 - value if unsampled else value
            if slot >= n_next or child_feature[slot] < 0:
                continue
            code = X_binned[child_feature[slot], row]
            if code < width and child_left_set[slot, code]:
                node_of_row[row, tree] = <node_index_t>(-2 - (slot - 1) if unsampled
                                                        else slot - 1)
