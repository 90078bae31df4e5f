# cython: language_level=3
"""Node segments of the sample-index array: stable partition and node sums.

# Notes:
All trees of a pack share one ``sample_indices`` array; every open node owns a
contiguous segment ``[node_start, node_end)`` of it. Rows inside a segment are
ascending, hence grouped by era (rows are era-sorted once, DESIGN 3.2). A
split rewrites the segment in place, stably:

    before:  | r0 r1 r2 r3 r4 r5 |            (ascending)
    after:   | r0 r3 r4 | r1 r2 r5 |          left rows, then right rows,
               left child  right child        each still ascending

so the children's segments are again era-grouped and no sort is ever needed.
The right rows wait in a scratch array of the same length as the segment.
"""

import numpy as np

from cython.parallel cimport prange
from libc.stdint cimport uint8_t, int64_t

from packboost._types cimport (X_BINNED_C, G_H_C, ROW_IDX_C, FEATURE_IDX_C,
                               BIN_IDX_C, OFFSET_C)


cdef inline bint goes_left(Py_ssize_t bin_value, Py_ssize_t threshold,
                           Py_ssize_t missing_bin, bint missing_left) noexcept nogil:
    if bin_value == missing_bin:
        return missing_left
    return bin_value <= threshold


def partition_nodes(
        const X_BINNED_C[:, ::1] X_binned,       # IN  (n_features, n_rows)
        ROW_IDX_C[::1] sample_indices,            # IN/OUT segments rewritten
        const OFFSET_C[::1] node_start,           # IN  (n_nodes,)
        const OFFSET_C[::1] node_end,             # IN  (n_nodes,)
        const FEATURE_IDX_C[::1] split_feature,   # IN  (n_nodes,) -1: no split
        const BIN_IDX_C[::1] split_threshold,     # IN  (n_nodes,)
        const uint8_t[::1] split_missing_left,    # IN  (n_nodes,)
        const BIN_IDX_C[::1] n_bins,              # IN  (n_features,) missing bin code
        int n_threads,
):
    """Stably partition the segment of every splitting node.

    Returns ``n_left`` (int64, per node): the left child owns
    ``[start, start + n_left)`` and the right child ``[start + n_left, end)``.
    """
    cdef Py_ssize_t n_nodes = node_start.shape[0]
    n_left = np.zeros(n_nodes, dtype=np.int64)
    cdef int64_t[::1] n_left_view = n_left
    scratch = np.empty(sample_indices.shape[0], dtype=np.int32)
    cdef ROW_IDX_C[::1] scratch_view = scratch
    cdef Py_ssize_t node, position, feature, left_end, right_end
    cdef ROW_IDX_C row
    if n_nodes == 0:
        return n_left
    for node in prange(n_nodes, nogil=True, schedule='dynamic',
                       num_threads=max(1, min(n_threads, n_nodes))):
        feature = split_feature[node]
        if feature < 0:
            continue
        left_end = node_start[node]
        right_end = node_start[node]
        for position in range(node_start[node], node_end[node]):
            row = sample_indices[position]
            if goes_left(X_binned[feature, row], split_threshold[node],
                         n_bins[feature], split_missing_left[node]):
                sample_indices[left_end] = row
                left_end = left_end + 1
            else:
                scratch_view[right_end] = row
                right_end = right_end + 1
        n_left_view[node] = left_end - node_start[node]
        for position in range(node_start[node], right_end):
            sample_indices[left_end + position - node_start[node]] = scratch_view[position]
    return n_left


def node_sums(
        const G_H_C[::1] gradients,               # IN  (n_rows,)
        const G_H_C[::1] hessians,                # IN  (n_rows,)
        const ROW_IDX_C[::1] sample_indices,      # IN
        const OFFSET_C[::1] node_start,           # IN  (n_nodes,)
        const OFFSET_C[::1] node_end,             # IN  (n_nodes,)
        int n_threads,
):
    """Pooled gradient and hessian sums of every node segment (rows in order)."""
    cdef Py_ssize_t n_nodes = node_start.shape[0]
    sum_g = np.zeros(n_nodes)
    sum_h = np.zeros(n_nodes)
    cdef double[::1] sum_g_view = sum_g, sum_h_view = sum_h
    cdef Py_ssize_t node, position
    cdef double g, h
    if n_nodes == 0:
        return sum_g, sum_h
    for node in prange(n_nodes, nogil=True, schedule='dynamic',
                       num_threads=max(1, min(n_threads, n_nodes))):
        g = 0.0
        h = 0.0
        for position in range(node_start[node], node_end[node]):
            g = g + gradients[sample_indices[position]]
            h = h + hessians[sample_indices[position]]
        sum_g_view[node] = g
        sum_h_view[node] = h
    return sum_g, sum_h
