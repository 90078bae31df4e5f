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
from libc.stdint cimport uint8_t, int32_t, int64_t

from packboost.tree cimport bin_code_t, feature_index_t, bin_index_t, node_index_t
from packboost._split_params cimport (pb_split_params, make_split_params, candidate_is_scored,
                                      DES_ERA_GAIN_NEWTON)
from packboost._slot_sums cimport SUM_CHUNKS as ROW_CHUNKS, TRASH_ROWS, add_rows_to_chunk
from packboost._des cimport (des_candidate_t, des_result_t, des_pooled_gain,
                             des_candidate_begin, des_era_gain, des_realized_mean,
                             des_candidate_set_mean, des_candidate_set_noise,
                             des_candidate_push, des_candidate_finish)


# The chunking of the global rows, shared with _partition.slot_sums (Python
# name for backends/dask.py).
SUM_CHUNKS = ROW_CHUNKS

# The running state of a candidate's era pass that crosses the network.
STATE_FIELDS = ("weight_total", "sum_squares", "direction", "noise_sum", "weight_squares")
N_STATE = 5

# candidate_pass modes
MODE_NEWTON_MEAN = 0   # continue sum_e w_e gain_e (newton gains)
MODE_PASS = 1          # continue the des_candidate_push accumulators
MODE_FINISH = 2        # no era: des_candidate_finish on the final state -> score, gain


def chained_slot_sums(const double[::1] gradients, const double[::1] hessians,
                      const node_index_t[:, ::1] node_of_row, Py_ssize_t n_slots,
                      Py_ssize_t first_row, Py_ssize_t total_rows, partial):
    """Continue _partition.slot_sums' chunk partials (SUM_CHUNKS, n_slots +
    TRASH_ROWS, 4; _partition.chunk_partials) over this shard's rows, global
    rows first_row.. of total_rows; in place."""
    cdef double[:, :, ::1] view = partial
    cdef Py_ssize_t n_rows = node_of_row.shape[0], pack_size = node_of_row.shape[1]
    cdef Py_ssize_t chunk_rows = (total_rows + ROW_CHUNKS - 1) // ROW_CHUNKS
    cdef Py_ssize_t row = 0, chunk, row_end
    if n_slots <= 0 or chunk_rows == 0:
        return partial
    if view.shape[0] != ROW_CHUNKS or view.shape[1] != n_slots + TRASH_ROWS or view.shape[2] != 4:
        raise ValueError(f"partial must be ({ROW_CHUNKS}, {n_slots + TRASH_ROWS}, 4) "
                         f"(_partition.chunk_partials), got {tuple(partial.shape)}")
    with nogil:
        while row < n_rows:  # the shard's rows, a global chunk at a time
            chunk = (first_row + row) // chunk_rows
            row_end = min(n_rows, (chunk + 1) * chunk_rows - first_row)
            add_rows_to_chunk(&gradients[0], &hessians[0], node_of_row, row, row_end,
                              &view[chunk, 0, 0], -1)  # by a branch: shards take no flag
            row = row_end
    return partial


def era_histograms(const bin_code_t[:, ::1] X_binned, const double[::1] gradients,
                   const double[::1] hessians, const node_index_t[:, ::1] node_of_row,
                   const int32_t[::1] row_era, Py_ssize_t n_eras,
                   const int32_t[::1] slot_tree, const uint8_t[::1] slot_open,
                   const feature_index_t[::1] features, const uint8_t[:, ::1] tree_uses_feature,
                   Py_ssize_t width, int n_threads=1):
    """Per-era histograms of the open slots over the depth's features:
    (n_slots, n_features_d, n_eras, width, 3) float64 (g, h, count; the missing
    bin of feature k at n_bins[k]) and the rows per (slot, era). Sums of grid
    values: exact, whatever the order. ``n_threads`` threads take a feature
    each (a feature's cells are one thread's: no two threads add to a cell)."""
    cdef Py_ssize_t n_slots = slot_tree.shape[0], n_cand = features.shape[0]
    cdef Py_ssize_t n_rows = node_of_row.shape[0], pack_size = node_of_row.shape[1]
    hist = np.zeros((n_slots, n_cand, n_eras, width, 3))
    era_rows = np.zeros((n_slots, n_eras))
    cdef double[:, :, :, :, ::1] h_view = hist
    cdef double[:, ::1] rows_view = era_rows
    cdef Py_ssize_t row, tree, position, era, code, feature
    cdef node_index_t slot
    with nogil:
        for row in range(n_rows):
            era = row_era[row]
            for tree in range(pack_size):
                slot = node_of_row[row, tree]
                if slot >= 0 and slot_open[slot]:
                    rows_view[slot, era] += 1.0
    for position in prange(n_cand, nogil=True, schedule='dynamic', chunksize=1,
                           num_threads=max(1, min(n_threads, n_cand))):
        feature = features[position]
        for row in range(n_rows):
            era = row_era[row]
            code = X_binned[feature, row]
            for tree in range(pack_size):
                if not tree_uses_feature[position, tree]:
                    continue
                slot = node_of_row[row, tree]
                if slot < 0 or not slot_open[slot]:
                    continue
                h_view[slot, position, era, code, 0] += gradients[row]
                h_view[slot, position, era, code, 1] += hessians[row]
                h_view[slot, position, era, code, 2] += 1.0
    return hist, era_rows


def enumerate_candidates(const double[:, :, :, ::1] pooled, const double[::1] eras_present,
                         const int32_t[::1] slot_tree, const uint8_t[::1] slot_open,
                         const feature_index_t[::1] features,
                         const uint8_t[:, ::1] tree_uses_feature,
                         const bin_index_t[::1] n_bins, dict params):
    """The candidates _split.score_tile scores, in its order, from the pooled
    (all eras) per-bin sums (n_slots, n_features_d, width, 3), with their
    pooled node/left sums and, for realized gains, their closed-form mean.
    Equal era weights: weight_total = eras present, weighted sums = pooled."""
    cdef pb_split_params c = make_split_params(params)
    cdef Py_ssize_t n_slots = slot_tree.shape[0], n_cand = features.shape[0]
    cdef Py_ssize_t slot, position, b, nb
    cdef int side, missing_left
    cdef double sum_g, sum_h, sum_count, miss_g, miss_h, miss_count
    cdef double left_g, left_h, left_count, cand_g, cand_h, cand_count, weight_total
    cdef des_candidate_t state
    out = {name: [] for name in ("slot", "position", "threshold", "missing_left", "sum_g",
                                 "sum_h", "left_g", "left_h", "mean")}
    for slot in range(n_slots):
        if not slot_open[slot]:
            continue
        weight_total = eras_present[slot]
        for position in range(n_cand):
            if not tree_uses_feature[position, slot_tree[slot]]:
                continue
            nb = n_bins[features[position]]
            sum_g = sum_h = sum_count = 0.0
            for b in range(nb + 1):
                sum_g += pooled[slot, position, b, 0]
                sum_h += pooled[slot, position, b, 1]
                sum_count += pooled[slot, position, b, 2]
            if sum_count == 0.0:
                continue
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
                    des_candidate_begin(&state, sum_g, sum_h, cand_g, cand_h, c.reg_lambda,
                                        c.reg_alpha, c.era_gain, c.dir_tanh_scale,
                                        c.lambda_dir != 0.0)
                    out["slot"].append(slot)
                    out["position"].append(position)
                    out["threshold"].append(b)
                    out["missing_left"].append(missing_left)
                    out["sum_g"].append(sum_g)
                    out["sum_h"].append(sum_h)
                    out["left_g"].append(cand_g)
                    out["left_h"].append(cand_h)
                    out["mean"].append(0.0 if c.era_gain == DES_ERA_GAIN_NEWTON else
                                       des_realized_mean(&state, sum_g, sum_h, cand_g, cand_h,
                                                         weight_total))
    dtypes = dict(slot=np.int32, position=np.int32, threshold=np.int32,
                  missing_left=np.uint8)
    return {name: np.asarray(values, dtype=dtypes.get(name, np.float64))
            for name, values in out.items()}


def candidate_pass(dict candidates, const double[::1] slot_variance, dict params, int mode,
                   state, hist=None, era_rows=None, const bin_index_t[::1] n_bins=None,
                   const feature_index_t[::1] features=None):
    """Continue every candidate's era-order sums over this shard's eras.

    ``state`` is (n_candidates, N_STATE) for MODE_PASS, (n_candidates,) for
    MODE_NEWTON_MEAN: the running sums after the eras of the shards before
    this one (zeros for the first); returned updated (a new array). MODE_FINISH
    pushes no era and returns (score, gain) from the final state. ``hist`` and
    ``era_rows`` are this shard's era_histograms, eras in order."""
    cdef pb_split_params c = make_split_params(params)
    cdef const int32_t[::1] cand_slot = candidates["slot"]
    cdef const int32_t[::1] cand_pos = candidates["position"]
    cdef const int32_t[::1] cand_t = candidates["threshold"]
    cdef const uint8_t[::1] cand_ml = candidates["missing_left"]
    cdef const double[::1] c_sum_g = candidates["sum_g"], c_sum_h = candidates["sum_h"]
    cdef const double[::1] c_left_g = candidates["left_g"], c_left_h = candidates["left_h"]
    cdef const double[::1] c_mean = candidates["mean"]
    cdef Py_ssize_t n = cand_slot.shape[0], i, era, b, nb, n_eras = 0
    cdef int with_direction = c.lambda_dir != 0.0
    cdef des_candidate_t s
    cdef des_result_t result
    cdef double g, h, lg, lh, lc, total_count
    cdef const double[:, :, :, :, ::1] hv
    cdef const double[:, ::1] rows_view
    cdef double[::1] mean_acc
    cdef double[:, ::1] acc
    cdef double[::1] score_view, gain_view
    if mode != MODE_FINISH:
        hv = hist
        rows_view = era_rows
        n_eras = rows_view.shape[1]
    out = np.array(state, dtype=np.float64, copy=True)
    if mode == MODE_NEWTON_MEAN:
        mean_acc = out
    else:
        acc = out
    score = np.full(n, -INFINITY)
    gain = np.zeros(n)
    score_view = score
    gain_view = gain
    for i in range(n):
        des_candidate_begin(&s, c_sum_g[i], c_sum_h[i], c_left_g[i], c_left_h[i],
                            c.reg_lambda, c.reg_alpha, c.era_gain, c.dir_tanh_scale,
                            with_direction)
        if mode == MODE_NEWTON_MEAN:
            for era in range(n_eras):
                if rows_view[cand_slot[i], era] == 0.0:
                    continue
                _era_sums(hv, cand_slot[i], cand_pos[i], era, cand_t[i], cand_ml[i],
                          n_bins[features[cand_pos[i]]], &g, &h, &lg, &lh, &lc, &total_count)
                mean_acc[i] += 1.0 * des_era_gain(&s, g, h, lg, lh)
            continue
        des_candidate_set_mean(&s, c_mean[i])
        if c.era_std_between:
            des_candidate_set_noise(&s, slot_variance[cand_slot[i]])
        s.weight_total = acc[i, 0]
        s.sum_squares = acc[i, 1]
        s.direction = acc[i, 2]
        s.noise_sum = acc[i, 3]
        s.weight_squares = acc[i, 4]
        if mode == MODE_FINISH:
            result = des_candidate_finish(&s, c.lambda_dro, c.lambda_dir)
            score_view[i] = result.score
            gain_view[i] = des_pooled_gain(c_sum_g[i], c_sum_h[i], c_left_g[i], c_left_h[i],
                                           c.reg_lambda, c.reg_alpha)
            continue
        for era in range(n_eras):
            if rows_view[cand_slot[i], era] == 0.0:
                continue
            _era_sums(hv, cand_slot[i], cand_pos[i], era, cand_t[i], cand_ml[i],
                      n_bins[features[cand_pos[i]]], &g, &h, &lg, &lh, &lc, &total_count)
            des_candidate_push(&s, 1.0, g, h, lg, lh, lc, total_count - lc)
        acc[i, 0] = s.weight_total
        acc[i, 1] = s.sum_squares
        acc[i, 2] = s.direction
        acc[i, 3] = s.noise_sum
        acc[i, 4] = s.weight_squares
    if mode == MODE_FINISH:
        return score, gain
    return out


cdef inline void _era_sums(const double[:, :, :, :, ::1] hv, Py_ssize_t slot,
                           Py_ssize_t position, Py_ssize_t era, Py_ssize_t threshold,
                           int missing_left, Py_ssize_t nb, double* g, double* h,
                           double* lg, double* lh, double* lc, double* count) noexcept nogil:
    """One era's node and left-child sums of a candidate (exact: grid values)."""
    cdef Py_ssize_t b
    g[0] = h[0] = lg[0] = lh[0] = lc[0] = count[0] = 0.0
    for b in range(nb + 1):
        g[0] += hv[slot, position, era, b, 0]
        h[0] += hv[slot, position, era, b, 1]
        count[0] += hv[slot, position, era, b, 2]
        if b <= threshold or (b == nb and missing_left):
            lg[0] += hv[slot, position, era, b, 0]
            lh[0] += hv[slot, position, era, b, 1]
            lc[0] += hv[slot, position, era, b, 2]
