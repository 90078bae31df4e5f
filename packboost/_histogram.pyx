# cython: language_level=3
"""Test-facing entry point of the per-era pack histogram kernel.

# Notes:
The kernel itself is ``build_pack_histograms`` in ``_histogram.pxd``; the
split finder inlines it into its per-block loop. This module only exposes
it to Python so tests can compare it with the NumPy oracle in
``packboost._reference``.
"""

import numpy as np

from libc.stdint cimport uint8_t

from packboost._types cimport (X_BINNED_C, G_H_C, ROW_IDX_C, FEATURE_IDX_C, BIN_IDX_C,
                               NODE_IDX_C, OFFSET_C, hist_entry)
from packboost._histogram cimport MAX_PACK_SIZE, build_pack_histograms

HIST_DTYPE = np.dtype([("sum_gradients", np.float64),
                       ("sum_hessians", np.float64),
                       ("count", np.int64)])


def build_histograms(const X_BINNED_C[:, ::1] X_binned, Py_ssize_t feature_idx,
                     const G_H_C[::1] gradients, const G_H_C[::1] hessians,
                     const ROW_IDX_C[::1] active_rows, const OFFSET_C[::1] era_offsets,
                     const NODE_IDX_C[:, ::1] node_of_row,
                     const uint8_t[::1] tree_uses_feature, Py_ssize_t n_slots,
                     Py_ssize_t width):
    """Per-era histograms of ``feature_idx`` for slots ``0 .. n_slots-1``,
    over ``active_rows`` (era e's are ``active_rows[era_offsets[e]:era_offsets[e+1]]``).

    Returns a structured array (n_eras, n_slots, width) with fields
    ``sum_gradients``, ``sum_hessians``, ``count``.
    """
    cdef Py_ssize_t n_eras = era_offsets.shape[0] - 1
    hist = np.zeros((n_eras, n_slots, width), dtype=HIST_DTYPE)
    cdef hist_entry[:, :, ::1] hist_view = hist
    cdef FEATURE_IDX_C feature = <FEATURE_IDX_C>feature_idx
    n_bins = np.full(X_binned.shape[0], width - 1, dtype=np.int32)
    cdef BIN_IDX_C[::1] n_bins_view = n_bins
    cdef Py_ssize_t n_cells = hist.size
    if n_cells == 0:
        return hist
    if node_of_row.shape[1] > MAX_PACK_SIZE:
        raise ValueError(f"at most {MAX_PACK_SIZE} trees per pack")
    with nogil:
        build_pack_histograms(X_binned, &feature, 1, n_bins_view, gradients, hessians,
                              active_rows, era_offsets, node_of_row, &tree_uses_feature[0],
                              0, n_slots, n_cells, &hist_view[0, 0, 0])
    return hist
