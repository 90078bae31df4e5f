# Per-era histograms of a block of features for every open node of a pack
# (DESIGN 3.3).
#
# Declared inline here so that the split finder (_split.pyx) compiles it into
# its per-block loop: a block's histograms are built and scored back to back
# by one thread, on a buffer that stays in that thread's cache.

from libc.string cimport memset
from libc.stdint cimport uint8_t

from packboost._types cimport (X_BINNED_C, G_H_C, ROW_IDX_C, FEATURE_IDX_C, BIN_IDX_C,
                               NODE_IDX_C, OFFSET_C, hist_entry)

cdef enum:
    MAX_PACK_SIZE = 64  # trees per pack the kernels accept (stack arrays)


cdef inline void build_pack_histograms(
        const X_BINNED_C[:, ::1] X_binned,     # IN  (n_features, n_rows)
        const FEATURE_IDX_C* block_features,    # IN  (n_block,) features of the block
        Py_ssize_t n_block,
        const BIN_IDX_C[::1] n_bins,            # IN  (n_features,) width = n_bins + 1
        const G_H_C[::1] gradients,             # IN  (n_rows,)
        const G_H_C[::1] hessians,              # IN  (n_rows,)
        const ROW_IDX_C[::1] active_rows,       # IN  rows in some open slot, ascending
        const OFFSET_C[::1] era_offsets,        # IN  (n_eras + 1,) era e's active rows
        const NODE_IDX_C[:, ::1] node_of_row,   # IN  (n_rows, pack_size) slot or -1
        const uint8_t* tree_uses_feature,       # IN  (n_block, pack_size), row-major
        Py_ssize_t slot_start,                  # IN  slots [slot_start, slot_end)
        Py_ssize_t slot_end,                    #     are histogrammed here
        Py_ssize_t feature_stride,              # IN  cells between two features' blocks
        hist_entry* hist,                       # OUT per feature j, at hist + j * feature_stride:
                                                #     (n_eras, slot_end - slot_start, width_j)
) noexcept nogil:
    """Sum (g, h, count) per (feature, era, slot, bin) in ONE pass over the rows.

    Rows are era-sorted and ``active_rows`` ascending, so the pass walks the
    feature columns, the gradients and the hessians forwards in memory (rows
    of closed nodes are skipped), and the cells it touches while in era e --
    (slot, bin) of that era, era-major layout -- sit together in cache.

    Each row adds to the slot (open node) it is in, in every tree of the pack
    that may split on the feature: one read of a column serves the whole pack
    (g and h are shared by the pack, DESIGN 2). A row's g, h and slots are
    read once for the whole block of features, not once per feature: those
    reads are 30+ bytes per row against 1 byte of the column.
    """
    cdef Py_ssize_t n_eras = era_offsets.shape[0] - 1
    cdef Py_ssize_t pack_size = node_of_row.shape[1]
    cdef Py_ssize_t n_group = slot_end - slot_start
    cdef Py_ssize_t era, position, row, tree, index, n_hits, block
    cdef Py_ssize_t width, bin_value
    cdef Py_ssize_t[MAX_PACK_SIZE] hit_tree
    cdef Py_ssize_t[MAX_PACK_SIZE] hit_slot
    cdef NODE_IDX_C slot
    cdef hist_entry* base
    cdef hist_entry* cell
    cdef const uint8_t* uses
    cdef G_H_C gradient, hessian
    memset(hist, 0, n_block * feature_stride * sizeof(hist_entry))
    for era in range(n_eras):
        for position in range(era_offsets[era], era_offsets[era + 1]):
            row = active_rows[position]
            n_hits = 0
            for tree in range(pack_size):
                slot = node_of_row[row, tree]
                if slot_start <= slot < slot_end:
                    hit_tree[n_hits] = tree
                    hit_slot[n_hits] = slot - slot_start
                    n_hits += 1
            if n_hits == 0:
                continue
            gradient = gradients[row]
            hessian = hessians[row]
            for block in range(n_block):
                width = n_bins[block_features[block]] + 1
                bin_value = X_binned[block_features[block], row]
                base = hist + block * feature_stride + era * n_group * width + bin_value
                uses = tree_uses_feature + block * pack_size
                for index in range(n_hits):
                    if not uses[hit_tree[index]]:
                        continue
                    cell = base + hit_slot[index] * width
                    cell.sum_gradients += gradient
                    cell.sum_hessians += hessian
                    cell.count += 1
