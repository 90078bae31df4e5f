# cython: language_level=3
"""Split finding: per-era histograms scored by DES, fused per tile.

# Notes:
The work of one depth of a pack is a list of *tiles*: (node, feature) pairs,
node-major, features ascending, only the features the node's tree may use.
Each tile is processed start to finish by one thread:

    rows of the node (era-sorted)  --build_tile_histogram-->  hist[era, bin]
    hist[era, bin]  --score_tile-->  best (threshold, missing side) of the tile

and only the tile's best candidate is kept, so memory is
O(n_threads * n_eras * n_bins), never O(nodes * features * eras * bins).
A tile is always computed by a single thread in a fixed order, so results do
not depend on the number of threads (DESIGN 2: a model is a pure function of
data, params and seed).

Scoring a tile (DESIGN 1) sweeps thresholds t = 0 .. n_bins-1 (left = bins
<= t) and, for each, the missing bin on the left then on the right; a
candidate is scored only if both children meet min_samples_leaf and
min_child_weight (pooled). Every partition is scored once: missing-right is
skipped when the node has no missing rows, and "missing alone on the left" is
left to its mirror, missing-right at the last threshold. The per-era pass over the eras of the node lives in
csrc/des.h, shared with the CUDA backend. Ties keep the first candidate seen:
lower feature, lower threshold, missing-left before missing-right.
"""

import numpy as np

from cython.parallel cimport prange, parallel, threadid
from libc.math cimport INFINITY
from libc.stdint cimport uint8_t, int32_t, int64_t

from packboost._types cimport (X_BINNED_C, G_H_C, ROW_IDX_C, ERA_IDX_C,
                               FEATURE_IDX_C, BIN_IDX_C, NODE_IDX_C, OFFSET_C,
                               hist_entry)
from packboost._histogram cimport build_tile_histogram
from packboost._histogram import HIST_DTYPE


cdef extern from "des.h" nogil:
    ctypedef struct des_candidate_t:
        pass
    ctypedef struct des_result_t:
        double score
        double mean
        double std
        double direction
    double des_pooled_gain(double sum_g, double sum_h, double left_g,
                           double left_h, double reg_lambda)
    void des_candidate_begin(des_candidate_t *state, double sum_g, double sum_h,
                             double left_g, double left_h, double reg_lambda,
                             int era_gain, double dir_tanh_scale)
    void des_candidate_push(des_candidate_t *state, double era_weight,
                            double era_g, double era_h, double era_left_g,
                            double era_left_h, double era_left_count,
                            double era_right_count)
    des_result_t des_candidate_finish(const des_candidate_t *state,
                                      double lambda_dro, double lambda_dir)
    int DES_ERA_GAIN_REALIZED
    int DES_ERA_GAIN_NEWTON


ERA_GAIN_CODES = {"realized": DES_ERA_GAIN_REALIZED, "newton": DES_ERA_GAIN_NEWTON}
ERA_WEIGHTING_CODES = {"equal": 0, "count": 1}

# Per-era scratch arrays of one thread, each of length n_eras.
cdef enum:
    SCRATCH_WEIGHT = 0
    SCRATCH_G
    SCRATCH_H
    SCRATCH_COUNT
    SCRATCH_LEFT_G
    SCRATCH_LEFT_H
    SCRATCH_LEFT_COUNT
    N_SCRATCH


cdef struct split_params:
    double reg_lambda
    int era_gain
    int era_weighting        # 0 equal, 1 count
    double era_alpha
    double lambda_dro
    double lambda_dir
    double dir_tanh_scale
    double min_samples_leaf
    double min_child_weight


cdef struct tile_best:
    double score
    double gain
    double mean
    double std
    double direction
    BIN_IDX_C threshold
    uint8_t missing_left
    uint8_t found


cdef split_params make_params(dict params) except *:
    cdef split_params result
    result.reg_lambda = params["reg_lambda"]
    result.era_gain = ERA_GAIN_CODES[params["era_gain"]]
    result.era_weighting = ERA_WEIGHTING_CODES[params["era_weighting"]]
    result.era_alpha = params["era_alpha"]
    result.lambda_dro = params["lambda_dro"]
    result.lambda_dir = params["lambda_dir"]
    result.dir_tanh_scale = params["dir_tanh_scale"]
    # A child needs at least one row whatever the user asked.
    result.min_samples_leaf = max(1, params["min_samples_leaf"])
    result.min_child_weight = params["min_child_weight"]
    return result


cdef tile_best score_tile(
        const hist_entry* hist,          # IN  (n_eras, width)
        Py_ssize_t n_eras,
        Py_ssize_t n_bins,               # non-missing bins; missing bin = n_bins
        const split_params* params,
        int32_t* era_ids,                # scratch (n_eras,)
        double* scratch,                 # scratch (N_SCRATCH, n_eras)
) noexcept nogil:
    # Returned by value: inside prange an assigned variable is thread-private,
    # a struct written through a pointer would be shared by every thread.
    cdef Py_ssize_t width = n_bins + 1
    cdef Py_ssize_t era, bin_idx, i, n_present = 0
    cdef double* era_weight = scratch + SCRATCH_WEIGHT * n_eras
    cdef double* era_g = scratch + SCRATCH_G * n_eras
    cdef double* era_h = scratch + SCRATCH_H * n_eras
    cdef double* era_count = scratch + SCRATCH_COUNT * n_eras
    cdef double* left_g = scratch + SCRATCH_LEFT_G * n_eras
    cdef double* left_h = scratch + SCRATCH_LEFT_H * n_eras
    cdef double* left_count = scratch + SCRATCH_LEFT_COUNT * n_eras
    cdef const hist_entry* row
    cdef const hist_entry* cell
    cdef const hist_entry* missing
    cdef double sum_g = 0.0, sum_h = 0.0, sum_count = 0.0
    cdef double missing_g = 0.0, missing_h = 0.0, missing_count = 0.0
    cdef double pooled_left_g = 0.0, pooled_left_h = 0.0, pooled_left_count = 0.0
    cdef double cand_g, cand_h, cand_count, g, h, c
    cdef double era_left_g, era_left_h, era_left_count
    cdef int side, missing_goes_left
    cdef des_candidate_t state
    cdef des_result_t result
    cdef tile_best best

    best.found = 0
    best.score = -INFINITY

    # Eras with rows in the node, their totals and weights (DESIGN 1, era weights).
    for era in range(n_eras):
        row = hist + era * width
        g = 0.0
        h = 0.0
        c = 0.0
        for bin_idx in range(width):
            g += row[bin_idx].sum_gradients
            h += row[bin_idx].sum_hessians
            c += row[bin_idx].count
        if c == 0.0:
            continue
        era_ids[n_present] = <int32_t>era
        era_g[n_present] = g
        era_h[n_present] = h
        era_count[n_present] = c
        era_weight[n_present] = params.era_alpha + c if params.era_weighting else 1.0
        left_g[n_present] = 0.0
        left_h[n_present] = 0.0
        left_count[n_present] = 0.0
        sum_g += g
        sum_h += h
        sum_count += c
        missing_g += row[n_bins].sum_gradients
        missing_h += row[n_bins].sum_hessians
        missing_count += row[n_bins].count
        n_present += 1

    for bin_idx in range(n_bins):
        # Move bin `bin_idx` to the left side, era by era and pooled.
        for i in range(n_present):
            cell = hist + era_ids[i] * width + bin_idx
            left_g[i] += cell.sum_gradients
            left_h[i] += cell.sum_hessians
            left_count[i] += cell.count
            pooled_left_g += cell.sum_gradients
            pooled_left_h += cell.sum_hessians
            pooled_left_count += cell.count
        for side in range(2):
            missing_goes_left = side == 0
            if not missing_goes_left and missing_count == 0.0:
                break  # same partition as missing-left, which wins the tie
            if missing_goes_left and pooled_left_count == 0.0:
                # {missing} | {all values} mirrors the missing-right candidate
                # of the last threshold; score that partition once, there, or
                # rounding would break the mirror tie differently per backend.
                continue
            cand_g = pooled_left_g + missing_g if missing_goes_left else pooled_left_g
            cand_h = pooled_left_h + missing_h if missing_goes_left else pooled_left_h
            cand_count = (pooled_left_count + missing_count if missing_goes_left
                          else pooled_left_count)
            if (cand_count < params.min_samples_leaf
                    or sum_count - cand_count < params.min_samples_leaf
                    or cand_h < params.min_child_weight
                    or sum_h - cand_h < params.min_child_weight):
                continue
            des_candidate_begin(&state, sum_g, sum_h, cand_g, cand_h,
                                params.reg_lambda, params.era_gain,
                                params.dir_tanh_scale)
            for i in range(n_present):
                era_left_g = left_g[i]
                era_left_h = left_h[i]
                era_left_count = left_count[i]
                if missing_goes_left:
                    missing = hist + era_ids[i] * width + n_bins
                    era_left_g = era_left_g + missing.sum_gradients
                    era_left_h = era_left_h + missing.sum_hessians
                    era_left_count = era_left_count + missing.count
                des_candidate_push(&state, era_weight[i], era_g[i], era_h[i],
                                   era_left_g, era_left_h, era_left_count,
                                   era_count[i] - era_left_count)
            result = des_candidate_finish(&state, params.lambda_dro, params.lambda_dir)
            if result.score > best.score:
                best.found = 1
                best.score = result.score
                best.mean = result.mean
                best.std = result.std
                best.direction = result.direction
                best.gain = des_pooled_gain(sum_g, sum_h, cand_g, cand_h,
                                            params.reg_lambda)
                best.threshold = <BIN_IDX_C>bin_idx
                best.missing_left = <uint8_t>missing_goes_left
    return best


def find_best_splits(
        const X_BINNED_C[:, ::1] X_binned,       # IN  (n_features, n_rows)
        const G_H_C[::1] gradients,               # IN  (n_rows,)
        const G_H_C[::1] hessians,                # IN  (n_rows,)
        const ERA_IDX_C[::1] row_era,             # IN  (n_rows,)
        Py_ssize_t n_eras,
        const ROW_IDX_C[::1] sample_indices,      # IN  node segments
        const OFFSET_C[::1] node_start,           # IN  (n_nodes,)
        const OFFSET_C[::1] node_end,             # IN  (n_nodes,)
        const NODE_IDX_C[::1] tile_node,          # IN  (n_tiles,)
        const FEATURE_IDX_C[::1] tile_feature,    # IN  (n_tiles,)
        const BIN_IDX_C[::1] n_bins,              # IN  (n_features,) non-missing bins
        dict params,
        int n_threads,
):
    """Best DES candidate of every (node, feature) tile.

    Returns a dict of per-tile arrays: ``score`` (-inf when no candidate
    meets the constraints), ``gain`` (pooled Newton gain), ``mean``, ``std``,
    ``direction``, ``threshold``, ``missing_left``, ``found``.
    """
    cdef Py_ssize_t n_tiles = tile_node.shape[0]
    cdef Py_ssize_t max_width = 1, tile, thread
    cdef split_params c_params = make_params(params)
    cdef tile_best best
    cdef NODE_IDX_C node
    cdef FEATURE_IDX_C feature

    score = np.full(n_tiles, -np.inf)
    gain = np.zeros(n_tiles)
    mean = np.zeros(n_tiles)
    std = np.zeros(n_tiles)
    direction = np.zeros(n_tiles)
    threshold = np.zeros(n_tiles, dtype=np.int32)
    missing_left = np.zeros(n_tiles, dtype=np.uint8)
    found = np.zeros(n_tiles, dtype=np.uint8)
    cdef double[::1] score_view = score, gain_view = gain, mean_view = mean
    cdef double[::1] std_view = std, direction_view = direction
    cdef BIN_IDX_C[::1] threshold_view = threshold
    cdef uint8_t[::1] missing_left_view = missing_left, found_view = found
    if n_tiles == 0 or n_eras == 0:
        return dict(score=score, gain=gain, mean=mean, std=std, direction=direction,
                    threshold=threshold, missing_left=missing_left, found=found)

    n_threads = max(1, min(n_threads, n_tiles))
    for tile in range(n_tiles):
        max_width = max(max_width, n_bins[tile_feature[tile]] + 1)
    # Per-thread buffers, allocated by NumPy so that a failure is a MemoryError.
    hist_buffers = np.empty((n_threads, n_eras * max_width), dtype=HIST_DTYPE)
    scratch_buffers = np.empty((n_threads, N_SCRATCH * n_eras), dtype=np.float64)
    era_id_buffers = np.empty((n_threads, n_eras), dtype=np.int32)
    cdef hist_entry[:, ::1] hist_view = hist_buffers
    cdef double[:, ::1] scratch_view = scratch_buffers
    cdef int32_t[:, ::1] era_id_view = era_id_buffers

    with nogil, parallel(num_threads=n_threads):
        for tile in prange(n_tiles, schedule='dynamic'):
            thread = threadid()
            node = tile_node[tile]
            feature = tile_feature[tile]
            build_tile_histogram(X_binned, feature, sample_indices,
                                 node_start[node], node_end[node],
                                 gradients, hessians, row_era, n_eras,
                                 n_bins[feature] + 1, &hist_view[thread, 0])
            best = score_tile(&hist_view[thread, 0], n_eras, n_bins[feature], &c_params,
                              &era_id_view[thread, 0], &scratch_view[thread, 0])
            found_view[tile] = best.found
            if best.found:
                score_view[tile] = best.score
                gain_view[tile] = best.gain
                mean_view[tile] = best.mean
                std_view[tile] = best.std
                direction_view[tile] = best.direction
                threshold_view[tile] = best.threshold
                missing_left_view[tile] = best.missing_left
    return dict(score=score, gain=gain, mean=mean, std=std, direction=direction,
                threshold=threshold, missing_left=missing_left, found=found)


def best_tile_per_node(const NODE_IDX_C[::1] tile_node, const double[::1] tile_score,
                       const uint8_t[::1] tile_found, Py_ssize_t n_nodes):
    """Index of the best tile of each node (-1 when none), first one on ties.

    Tiles arrive node-major with features ascending, so keeping the first
    maximum implements the lower-feature-index tie break.
    """
    best = np.full(n_nodes, -1, dtype=np.int64)
    cdef int64_t[::1] best_view = best
    cdef Py_ssize_t tile
    cdef NODE_IDX_C node
    for tile in range(tile_node.shape[0]):
        if not tile_found[tile]:
            continue
        node = tile_node[tile]
        if best_view[node] < 0 or tile_score[tile] > tile_score[best_view[node]]:
            best_view[node] = tile
    return best


def score_histogram(hist, Py_ssize_t n_bins, dict params):
    """Best candidate of one per-era histogram (test entry point of score_tile).

    ``hist`` is a structured array (n_eras, n_bins + 1) of HIST_DTYPE, the
    missing bin last. Returns a dict (score, gain, mean, std, direction,
    threshold, missing_left) or None when no candidate meets the constraints.
    """
    hist = np.ascontiguousarray(hist, dtype=HIST_DTYPE)
    if hist.ndim != 2 or hist.shape[1] != n_bins + 1:
        raise ValueError("hist must have shape (n_eras, n_bins + 1)")
    cdef Py_ssize_t n_eras = hist.shape[0]
    cdef hist_entry[:, ::1] hist_view = hist
    cdef split_params c_params = make_params(params)
    cdef tile_best best
    era_ids = np.empty(max(n_eras, 1), dtype=np.int32)
    scratch = np.empty(max(N_SCRATCH * n_eras, 1))
    cdef int32_t[::1] era_view = era_ids
    cdef double[::1] scratch_view = scratch
    if n_eras == 0:
        return None
    best = score_tile(&hist_view[0, 0], n_eras, n_bins, &c_params, &era_view[0],
                      &scratch_view[0])
    if not best.found:
        return None
    return dict(score=best.score, gain=best.gain, mean=best.mean, std=best.std,
                direction=best.direction, threshold=best.threshold,
                missing_left=bool(best.missing_left))
