# cython: language_level=3
"""Tree ensemble prediction, on raw feature values or on bins.

# Notes:
Trees are stored struct-of-arrays, all trees of a model concatenated:
``feature`` (-1 at a leaf), ``threshold_bin``, ``threshold`` (raw value: x <=
threshold goes left), ``missing_left``, ``left_child``/``right_child``
(absolute node indices) and ``value`` (the leaf's contribution, shrinkage
already applied). A tree is named by the index of its root.

Work is split over blocks of rows; inside a block trees are the outer loop so
one tree's nodes stay in cache while the block's rows walk it. Each row sums
its trees in model order, so the result does not depend on the thread count.
"""

import numpy as np

from cython.parallel cimport prange
from libc.stdint cimport uint8_t, int64_t

from packboost._types cimport (X_BINNED_C, X_RAW_C, Y_C, FEATURE_IDX_C,
                               BIN_IDX_C, NODE_IDX_C)

cdef enum:
    ROW_BLOCK = 128


def predict_raw(
        const X_RAW_C[:, :] X,                    # IN  (n_rows, n_features), any strides
        const FEATURE_IDX_C[::1] feature,         # IN  node arrays
        const double[::1] threshold,
        const uint8_t[::1] missing_left,
        const NODE_IDX_C[::1] left_child,
        const NODE_IDX_C[::1] right_child,
        const Y_C[::1] value,
        const int64_t[::1] tree_roots,            # IN  trees to add up
        Y_C[::1] out,                             # IN/OUT (n_rows,) += sum of trees
        int n_threads,
):
    """Add the trees' outputs for raw rows to ``out``. NaN takes the missing side."""
    cdef Py_ssize_t n_rows = X.shape[0]
    cdef Py_ssize_t n_blocks = (n_rows + ROW_BLOCK - 1) // ROW_BLOCK
    cdef Py_ssize_t block, row, row_end, tree
    cdef NODE_IDX_C node
    cdef double x
    if n_rows == 0 or tree_roots.shape[0] == 0:
        return
    for block in prange(n_blocks, nogil=True, schedule='static',
                        num_threads=max(1, min(n_threads, n_blocks))):
        row_end = min((block + 1) * ROW_BLOCK, n_rows)
        for tree in range(tree_roots.shape[0]):
            for row in range(block * ROW_BLOCK, row_end):
                node = <NODE_IDX_C>tree_roots[tree]
                while feature[node] >= 0:
                    x = <double>X[row, feature[node]]
                    if x != x:  # NaN; compiled away for integer inputs
                        node = left_child[node] if missing_left[node] else right_child[node]
                    elif x <= threshold[node]:
                        node = left_child[node]
                    else:
                        node = right_child[node]
                out[row] += value[node]


def predict_binned(
        const X_BINNED_C[:, ::1] X_binned,        # IN  (n_features, n_rows)
        const BIN_IDX_C[::1] n_bins,              # IN  (n_features,) missing bin code
        const FEATURE_IDX_C[::1] feature,         # IN  node arrays
        const BIN_IDX_C[::1] threshold_bin,
        const uint8_t[::1] missing_left,
        const NODE_IDX_C[::1] left_child,
        const NODE_IDX_C[::1] right_child,
        const Y_C[::1] value,
        const int64_t[::1] tree_roots,            # IN  trees to add up
        Y_C[::1] out,                             # IN/OUT (n_rows,) += sum of trees
        int n_threads,
):
    """Add the trees' outputs for binned rows (feature-major) to ``out``."""
    cdef Py_ssize_t n_rows = X_binned.shape[1]
    cdef Py_ssize_t n_blocks = (n_rows + ROW_BLOCK - 1) // ROW_BLOCK
    cdef Py_ssize_t block, row, row_end, tree
    cdef NODE_IDX_C node
    cdef Py_ssize_t bin_value
    if n_rows == 0 or tree_roots.shape[0] == 0:
        return
    for block in prange(n_blocks, nogil=True, schedule='static',
                        num_threads=max(1, min(n_threads, n_blocks))):
        row_end = min((block + 1) * ROW_BLOCK, n_rows)
        for tree in range(tree_roots.shape[0]):
            for row in range(block * ROW_BLOCK, row_end):
                node = <NODE_IDX_C>tree_roots[tree]
                while feature[node] >= 0:
                    bin_value = X_binned[feature[node], row]
                    if bin_value == n_bins[feature[node]]:
                        node = left_child[node] if missing_left[node] else right_child[node]
                    elif bin_value <= threshold_bin[node]:
                        node = left_child[node]
                    else:
                        node = right_child[node]
                out[row] += value[node]
