# cython: language_level=3
"""Test-facing entry point of the per-era pack histogram kernel.

# Notes:
The kernel itself is ``build_pack_histograms`` in ``_histogram.pxd``; the
split finder inlines it into its per-block loop. This module only exposes
it to Python so tests can compare it with the NumPy oracle in
``tests/oracles/reference.py`` (not installed).
"""

import numpy as np

from cython.parallel cimport prange
from libc.math cimport fabs, rint
from libc.stdint cimport uint8_t, int32_t, int64_t

from packboost.tree cimport bin_code_t, feature_index_t, bin_index_t, node_index_t
from packboost._types cimport row_index_t, offset_t, hist_entry
from packboost._tasks cimport ROWS_PER_TASK
from packboost._histogram cimport (MAX_PACK_SIZE, MAX_FEATURES_PER_PASS, PAIR_SCRATCH_CELLS,
                                   PAIR_MAX_WIDTH, PB_PAIR_MAX_WIDTH, fixed_point_rows,
                                   view_fixed_point, era_tree_flags, block_cell_offsets,
                                   tree_cell_offsets, build_pack_histograms, unpack_tile)
from packboost._fixed_point import FixedPointGradients, to_fixed_point

HIST_DTYPE = np.dtype([("sum_gradients", np.float64),
                       ("sum_hessians", np.float64),
                       ("count", np.int64)])

# The C pair loop (_histogram.pxd, pb_add_row_pairs) and the Cython code around
# it must agree on a pair's joint layout.
if PB_PAIR_MAX_WIDTH != PAIR_MAX_WIDTH:
    raise ImportError("pb_add_row_pairs and PAIR_MAX_WIDTH disagree")


def build_histograms(const bin_code_t[:, ::1] X_binned, features,
                     gradients, hessians,
                     const row_index_t[::1] active_rows, const offset_t[::1] era_offsets,
                     const node_index_t[:, ::1] node_of_row,
                     tree_uses_feature, Py_ssize_t n_slots,
                     Py_ssize_t width, row_era_offsets=None, bint unpack=True,
                     cell_buffer=None, bint share_equal_rows=False, slot_tree=None,
                     era_tree_rows=None, bint runs_per_tree=False,
                     bint scattered_samples=False):
    """Per-era histograms of ``features`` for slots ``0 .. n_slots-1``,
    over ``active_rows`` (era e's are ``active_rows[era_offsets[e]:era_offsets[e+1]]``),
    in one pass over the rows, as the split finder builds them.

    ``features`` is one feature (``tree_uses_feature``: (pack_size,)) or a
    block of them (``tree_uses_feature``: (n_block, pack_size)); every
    feature is taken to have ``width - 1`` bins plus the missing bin.
    ``gradients`` is a ``_fixed_point.FixedPointGradients`` (``hessians``
    None), or raw gradients and hessians, rounded to fixed point here over
    the eras ``row_era_offsets`` of all rows (default ``era_offsets``, right
    when ``active_rows`` is every row).

    Returns a structured array (n_eras, n_slots, width) -- (n_block, n_eras,
    n_slots, width) for a block -- with fields ``sum_gradients``,
    ``sum_hessians``, ``count``. ``unpack=False`` returns the kernel's raw
    int64 cells instead, (n_eras, n_slots, cells per slot) in the layout
    build_pack_histograms documents (benchmarks/bench_histogram.py: the
    pass alone, without the float unpacking).

    ``share_equal_rows``: as find_best_splits does, sum an era once for
    every slot holding all its rows (build_pack_histograms); the cells of a
    feature a slot's tree does not use then hold sums instead of zeros.

    ``slot_tree``: (n_slots,) each slot's tree, as find_best_splits has it
    (slots grouped by tree), for summing narrow features in pairs; None:
    read from ``node_of_row`` (slot_trees_of; a pass over the table).

    ``era_tree_rows``: (n_eras, pack_size) uint8, 0 where a tree has no row
    in an era, as find_best_splits takes it (the pass skips those); None:
    every (era, tree) is listed.

    ``scattered_samples``: as find_best_splits takes it (the same cells).

    ``runs_per_tree``: lay each slot's run out for its tree's features only
    (tree_cell_offsets), as find_best_splits does below the roots; needs the
    slots' trees (``slot_tree``, or read from the table) and no
    ``share_equal_rows``. The unpacked histograms are the same (a feature a
    slot's tree does not use is zeros either way); the raw cells are shorter.

    ``cell_buffer``: an int64 array of at least the cells' entries to hold
    them, kept across calls as a fit keeps its block buffer (a new array
    faults in fresh pages, which the kernel clearing them made a third of a
    depth-5 pass in the benchmarks); None: a new one. The raw cells returned
    with ``unpack=False`` are then a view of it.
    """
    single = np.ndim(features) == 0
    block_features = np.atleast_1d(np.asarray(features, dtype=np.int32))
    uses = np.ascontiguousarray(np.atleast_2d(tree_uses_feature), dtype=np.uint8)
    cdef Py_ssize_t n_block = block_features.shape[0]
    cdef Py_ssize_t n_eras = era_offsets.shape[0] - 1
    if uses.shape != (n_block, node_of_row.shape[1]):
        raise ValueError(f"tree_uses_feature must be ({n_block}, {node_of_row.shape[1]}), "
                         f"got {uses.shape}")
    if n_block > MAX_FEATURES_PER_PASS:
        raise ValueError(f"at most {MAX_FEATURES_PER_PASS} features per pass")
    if node_of_row.shape[1] > MAX_PACK_SIZE:
        raise ValueError(f"at most {MAX_PACK_SIZE} trees per pack")
    n_cells = n_block * n_eras * n_slots * width
    if n_cells == 0:
        hist = np.zeros((n_block, n_eras, n_slots, width), dtype=HIST_DTYPE)
        return hist[0] if single else hist
    if isinstance(gradients, FixedPointGradients):
        fixed = gradients
    else:
        fixed = to_fixed_point(gradients, hessians, np.asarray(
            era_offsets if row_era_offsets is None else row_era_offsets))
    cdef const feature_index_t[::1] features_view = block_features
    cdef const uint8_t[:, ::1] uses_view = uses
    n_bins = np.full(X_binned.shape[0], width - 1, dtype=np.int32)
    cdef bin_index_t[::1] n_bins_view = n_bins
    cdef fixed_point_rows rows = view_fixed_point(fixed, X_binned.shape[1])
    cdef Py_ssize_t words = rows.words
    # Each feature's first cell in a run: one table, or one per tree.
    tree_offsets = np.zeros(node_of_row.shape[1] * MAX_FEATURES_PER_PASS, dtype=np.intp)
    cdef Py_ssize_t[::1] offset_view = tree_offsets
    cdef Py_ssize_t* feature_offset = &offset_view[0]
    cdef Py_ssize_t offset_stride = MAX_FEATURES_PER_PASS if runs_per_tree else 0
    cdef Py_ssize_t slot_stride
    if cell_buffer is None:
        cells = np.empty(n_cells * words, dtype=np.int64)
    elif (not isinstance(cell_buffer, np.ndarray) or cell_buffer.dtype != np.int64
          or cell_buffer.ndim != 1 or cell_buffer.size < n_cells * words):
        raise ValueError(f"cell_buffer must be a 1-d int64 array of at least "
                         f"{n_cells * words} entries")
    else:
        cells = cell_buffer[:n_cells * words]
    cdef int64_t[::1] cells_view = cells
    pair_scratch = np.empty(PAIR_SCRATCH_CELLS, dtype=np.int64)
    cdef int64_t[::1] pair_view = pair_scratch
    # Each slot's tree, as find_best_splits knows it, for the feature pairs:
    # from the table when every slot belongs to one tree and the trees' slots
    # come in tree order; otherwise none (no pairs).
    if slot_tree is None:
        slot_tree = slot_trees_of(node_of_row, n_slots)
    else:
        slot_tree = np.ascontiguousarray(slot_tree, dtype=np.int32)
        if slot_tree.shape != (n_slots,) or (n_slots and (
                slot_tree.min() < 0 or slot_tree.max() >= node_of_row.shape[1]
                or (np.diff(slot_tree) < 0).any())):
            raise ValueError(f"slot_tree must hold {n_slots} ascending trees of the pack")
    if runs_per_tree and (slot_tree is None or share_equal_rows):
        raise ValueError("runs_per_tree needs the slots' trees and no share_equal_rows")
    cdef const int32_t[::1] slot_tree_view = slot_tree if slot_tree is not None else \
        np.zeros(1, dtype=np.int32)
    cdef const uint8_t* era_tree_pointer = era_tree_flags(era_tree_rows, n_eras,
                                                          node_of_row.shape[1])
    cdef Py_ssize_t slot, member, era
    with nogil:
        if runs_per_tree:
            slot_stride = tree_cell_offsets(&features_view[0], n_block, n_bins_view,
                                            &uses_view[0, 0], node_of_row.shape[1],
                                            feature_offset)
        else:
            slot_stride = block_cell_offsets(&features_view[0], n_block, n_bins_view,
                                             feature_offset)
        # One era per call, as find_best_splits does: an era's cells are
        # zeroed just before its rows are summed into them, while in cache.
        for era in range(n_eras):
            build_pack_histograms(X_binned, &features_view[0], n_block, n_bins_view, &rows,
                                  active_rows, era_offsets, era, era + 1, node_of_row,
                                  &uses_view[0, 0], 0, n_slots, n_slots, feature_offset,
                                  offset_stride,
                                  slot_stride,
                                  NULL, NULL, share_equal_rows, &cells_view[0],
                                  &pair_view[0],
                                  &slot_tree_view[0] if slot_tree is not None else NULL,
                                  era_tree_pointer, scattered_samples)
    if not unpack:
        return cells[:n_eras * n_slots * slot_stride * words].reshape(
            n_eras, n_slots, slot_stride * words)
    hist = (np.zeros if runs_per_tree else np.empty)((n_block, n_eras, n_slots, width),
                                                     dtype=HIST_DTYPE)
    cdef hist_entry[:, :, :, ::1] hist_view = hist
    cdef Py_ssize_t tree
    with nogil:
        for member in range(n_block):
            for slot in range(n_slots):
                tree = slot_tree_view[slot] if runs_per_tree else 0
                if runs_per_tree and not uses_view[member, tree]:
                    continue  # no cells: its histogram stays zeros
                unpack_tile(&cells_view[0] + (slot * slot_stride
                                              + feature_offset[tree * offset_stride + member])
                            * words,
                            n_slots * slot_stride, n_eras, width, &rows,
                            &hist_view[member, 0, slot, 0], n_slots * width, False)
    return hist[0] if single else hist


def slot_trees_of(node_of_row, Py_ssize_t n_slots):
    """(n_slots,) int32: the tree whose column of ``node_of_row`` holds each
    slot (a slot no row is in goes with the tree before it), or None when a
    slot is in two trees' columns or the trees' slots are not in tree order."""
    table = np.asarray(node_of_row)
    slot_tree = np.full(n_slots, -1, dtype=np.int32)
    for tree in range(table.shape[1]):
        codes = table[:, tree]
        codes = codes[(codes >= 0) & (codes < n_slots)]
        slots = np.flatnonzero(np.bincount(codes, minlength=n_slots))
        if (slot_tree[slots] >= 0).any():
            return None
        slot_tree[slots] = tree
    if (np.diff(slot_tree[slot_tree >= 0]) < 0).any():
        return None
    return np.maximum.accumulate(np.maximum(slot_tree, 0)).astype(np.int32)


def era_magnitude_sums(const double[::1] values, const offset_t[::1] era_offsets):
    """Each era's sum of |values| (float64, one per era), added row by row:
    the bounds that choose a fixed-point scale (_fixed_point.to_fixed_point;
    a shard of whole eras gathers them to choose the grid of all rows)."""
    cdef Py_ssize_t n_eras = era_offsets.shape[0] - 1, era, row
    sums = np.zeros(max(n_eras, 0))
    cdef double[::1] view = sums
    cdef double era_sum
    with nogil:
        for era in range(n_eras):
            era_sum = 0.0
            for row in range(era_offsets[era], era_offsets[era + 1]):
                era_sum += fabs(values[row])
            view[era] = era_sum
    return sums


def round_squares_to_grid(const double[::1] gradients, double scale, double[::1] rounded,
                          int n_threads=1):
    """``rounded = rint(g * g * scale) / scale`` (half to even): each row's
    squared gradient on the grid of ``scale`` (_fixed_point.squared_gradient_scale),
    the numbers the CUDA backend sums as ``rint(g * g * scale)`` in int64."""
    cdef Py_ssize_t n = gradients.shape[0], row
    if rounded.shape[0] != n:
        raise ValueError("gradients and rounded must have one length")
    for row in prange(n, nogil=True, schedule='dynamic', chunksize=ROWS_PER_TASK,
                      num_threads=max(1, min(n_threads, n))):
        rounded[row] = rint(gradients[row] * gradients[row] * scale) / scale


def round_to_grid(const double[::1] values, double scale, double[::1] rounded,
                  int64_t[::1] units, int count_bits, int n_threads=1):
    """``units = rint(values * scale)`` (half to even, as NumPy's rint) and
    ``rounded = units / scale``; with ``count_bits`` > 0 ``units`` is packed
    for the histogram cells: ``units << count_bits | 1``."""
    cdef Py_ssize_t n = values.shape[0], row
    cdef double unit
    cdef int64_t one = 1 if count_bits > 0 else 0
    # A multiplication, not ``<<``: shifting a negative value left is undefined
    # in C (UBSan); times 2**count_bits is the same two's-complement bits.
    cdef int64_t count_unit = (<int64_t>1) << count_bits
    if rounded.shape[0] != n or units.shape[0] != n:
        raise ValueError("values, rounded and units must have one length")
    for row in prange(n, nogil=True, schedule='dynamic', chunksize=ROWS_PER_TASK,
                      num_threads=max(1, min(n_threads, n))):
        unit = rint(values[row] * scale)
        rounded[row] = unit / scale
        units[row] = (<int64_t>unit) * count_unit + one
