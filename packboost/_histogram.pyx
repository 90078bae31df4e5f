# cython: language_level=3
"""Test-facing entry point of the per-era histogram kernel.

# Notes:
The kernel itself is ``build_tile_histogram`` in ``_histogram.pxd``; the
split finder inlines it into its (node, feature) tile loop. This module only
exposes it to Python so tests can compare it with the NumPy oracle in
``packboost._reference``.
"""

import numpy as np

from packboost._types cimport (X_BINNED_C, G_H_C, ROW_IDX_C, ERA_IDX_C,
                               OFFSET_C, hist_entry)
from packboost._histogram cimport build_tile_histogram

HIST_DTYPE = np.dtype([("sum_gradients", np.float64),
                       ("sum_hessians", np.float64),
                       ("count", np.int64)])


def build_histogram(const X_BINNED_C[:, ::1] X_binned, Py_ssize_t feature_idx,
                    const ROW_IDX_C[::1] sample_indices,
                    const G_H_C[::1] gradients, const G_H_C[::1] hessians,
                    const ERA_IDX_C[::1] row_era, Py_ssize_t n_eras,
                    Py_ssize_t width):
    """Per-era histogram of ``feature_idx`` over ``sample_indices``.

    Returns a structured array of shape (n_eras, width) with fields
    ``sum_gradients``, ``sum_hessians``, ``count``.
    """
    hist = np.zeros((n_eras, width), dtype=HIST_DTYPE)
    cdef hist_entry[:, ::1] hist_view = hist
    if n_eras * width == 0:
        return hist
    with nogil:
        build_tile_histogram(X_binned, feature_idx, sample_indices, 0,
                             sample_indices.shape[0], gradients, hessians,
                             row_era, n_eras, width, &hist_view[0, 0])
    return hist
