# cython: language_level=3
"""Host run of the CUDA backend's split scoring (csrc/pbc_split.h).

# Notes:
The GPU scores a (slot, feature) tile with one warp: 32 lanes own strided
eras and sum over eras with a butterfly of shuffles. ``pbc_score_tile_host``
runs the same per-lane code lane by lane with the same butterfly order, so on
a machine without a GPU the tests can check the GPU's scoring -- fixed-point
histograms, prefix scan, candidate sweep, DES math of csrc/des.h, tie breaks
-- against the CPU engine. A test oracle, not part of the package: the tests
compile it against the installed packboost (tests/oracles/_build.py; it needs
no nvcc).
"""

import numpy as np

from libc.stdint cimport uint8_t, int32_t, int64_t

from packboost._split_params cimport make_split_params, pb_split_params


cdef extern from "pbc_split.h" nogil:
    ctypedef struct pbc_cell:
        long long sum_g
        long long sum_h
        long long count
    ctypedef struct pbc_best:
        double score
        double gain
        int32_t threshold
        int32_t missing_left
        int32_t found
    pbc_best pbc_score_tile_host(pbc_cell *cells, long long era_stride, int n_eras,
                                 int n_bins, const pb_split_params *params,
                                 double gradient_variance, double inv_scale_g,
                                 double inv_scale_h)




def score_tiles(hist, const int32_t[::1] n_bins, const uint8_t[::1] tile_open, dict params,
                double scale_gradients, double scale_hessians, gradient_variance=None):
    """Best candidate of every tile, as the GPU's scoring kernel computes it.

    ``hist`` is int64 (n_tiles, n_eras, width, 3): fixed-point sums of g,
    h and the row count per (era, bin), bins 0 .. n_bins[tile]-1 then the
    missing bin at n_bins[tile]. It is prefix-scanned in place, like the
    GPU's scratch histogram. ``gradient_variance`` (n_tiles,) is the per-row
    gradient variance of each tile's node (``era_std="between"``; None:
    zeros). Returns a dict of (n_tiles,) arrays ``score``,
    ``gain``, ``threshold``, ``missing_left``, ``found``.
    """
    if not (isinstance(hist, np.ndarray) and hist.dtype == np.int64 and hist.ndim == 4
            and hist.shape[3] == 3 and hist.flags.c_contiguous):
        raise ValueError("hist must be a C-contiguous int64 array (n_tiles, n_eras, width, 3)")
    cdef int64_t[:, :, :, ::1] cells = hist
    cdef Py_ssize_t n_tiles = hist.shape[0], n_eras = hist.shape[1], width = hist.shape[2]
    if gradient_variance is None:
        gradient_variance = np.zeros(n_tiles)
    cdef const double[::1] variance = np.ascontiguousarray(gradient_variance, dtype=np.float64)
    if (n_bins.shape[0] != n_tiles or tile_open.shape[0] != n_tiles
            or variance.shape[0] != n_tiles):
        raise ValueError("n_bins, tile_open and gradient_variance need one entry per tile")
    for tile in range(n_tiles):
        if not 0 <= n_bins[tile] < width:
            raise ValueError("n_bins[tile] + 1 must fit in the histogram's width")
    score = np.full(n_tiles, -np.inf)
    gain = np.zeros(n_tiles)
    threshold = np.zeros(n_tiles, dtype=np.int32)
    missing_left = np.zeros(n_tiles, dtype=np.uint8)
    found = np.zeros(n_tiles, dtype=np.uint8)
    cdef double[::1] score_view = score, gain_view = gain
    cdef int32_t[::1] threshold_view = threshold
    cdef uint8_t[::1] missing_view = missing_left, found_view = found
    cdef pb_split_params c_params = make_split_params(params)
    cdef double inv_g = 1.0 / scale_gradients, inv_h = 1.0 / scale_hessians
    cdef pbc_best best
    cdef Py_ssize_t index
    if n_eras == 0:
        return dict(score=score, gain=gain, threshold=threshold, missing_left=missing_left,
                    found=found)
    with nogil:
        for index in range(n_tiles):
            if not tile_open[index]:
                continue
            best = pbc_score_tile_host(<pbc_cell *>&cells[index, 0, 0, 0], width,
                                       <int>n_eras, n_bins[index], &c_params,
                                       variance[index], inv_g, inv_h)
            found_view[index] = <uint8_t>best.found
            if best.found:
                score_view[index] = best.score
                gain_view[index] = best.gain
                threshold_view[index] = best.threshold
                missing_view[index] = <uint8_t>best.missing_left
    return dict(score=score, gain=gain, threshold=threshold, missing_left=missing_left,
                found=found)
