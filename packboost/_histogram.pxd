# Per-era histograms of one feature for every open node of a pack (DESIGN 3.3).
#
# Declared inline here so that the split finder (_split.pyx) compiles it into
# its per-feature loop: a feature's histograms are built and scored back to
# back by one thread, on a buffer that stays in that thread's cache.

from libc.stdint cimport uint8_t
from libc.string cimport memset

from packboost._types cimport (X_BINNED_C, G_H_C, ROW_IDX_C, NODE_IDX_C, OFFSET_C,
                               hist_entry)


cdef inline void build_pack_histogram(
        const X_BINNED_C[:, ::1] X_binned,     # IN  (n_features, n_rows)
        Py_ssize_t feature_idx,                 # IN
        const G_H_C[::1] gradients,             # IN  (n_rows,)
        const G_H_C[::1] hessians,              # IN  (n_rows,)
        const ROW_IDX_C[::1] active_rows,       # IN  rows in some open slot, ascending
        const OFFSET_C[::1] era_offsets,        # IN  (n_eras + 1,) era e's active rows
        const NODE_IDX_C[:, ::1] node_of_row,   # IN  (n_rows, pack_size) slot or -1
        const uint8_t* tree_uses_feature,       # IN  (pack_size,)
        Py_ssize_t slot_start,                  # IN  slots [slot_start, slot_end)
        Py_ssize_t slot_end,                    #     are histogrammed here
        Py_ssize_t width,                       # IN  bins incl. the missing bin
        hist_entry* hist,                       # OUT (n_eras, slot_end - slot_start, width)
) noexcept nogil:
    """Sum (g, h, count) per (era, slot, bin) in ONE pass over the column.

    Rows are era-sorted and ``active_rows`` ascending, so the pass walks the
    feature column, the gradients and the hessians forwards in memory (rows of
    closed nodes are skipped), and all cells it touches while in era e --
    (slot, bin) of that era, era-major layout -- sit together in cache.
    Each row adds to the slot (open node) it belongs to in every tree of the
    pack that may split on this feature: one read of the column serves the
    whole pack (g and h are shared by the pack, DESIGN 2).
    """
    cdef Py_ssize_t n_eras = era_offsets.shape[0] - 1
    cdef Py_ssize_t pack_size = node_of_row.shape[1]
    cdef Py_ssize_t n_group = slot_end - slot_start
    cdef Py_ssize_t era, position, row, tree, bin_value
    cdef NODE_IDX_C slot
    cdef hist_entry* era_base
    cdef hist_entry* cell
    cdef G_H_C gradient, hessian
    memset(hist, 0, n_eras * n_group * width * sizeof(hist_entry))
    for era in range(n_eras):
        era_base = hist + era * n_group * width
        for position in range(era_offsets[era], era_offsets[era + 1]):
            row = active_rows[position]
            bin_value = X_binned[feature_idx, row]
            gradient = gradients[row]
            hessian = hessians[row]
            for tree in range(pack_size):
                slot = node_of_row[row, tree]
                if slot < slot_start or slot >= slot_end or not tree_uses_feature[tree]:
                    continue
                cell = era_base + (slot - slot_start) * width + bin_value
                cell.sum_gradients += gradient
                cell.sum_hessians += hessian
                cell.count += 1
