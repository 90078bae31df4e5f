# Per-era histogram of one (node, feature) tile (DESIGN 3.3).
#
# Declared inline here so that the split finder (_split.pyx) compiles it into
# its own tile loop: building and scoring a tile happen back to back in one
# thread, on a buffer that stays in cache, and nothing of size
# eras x bins x features x nodes ever exists at once.

from libc.string cimport memset
from packboost._types cimport (X_BINNED_C, G_H_C, ROW_IDX_C, ERA_IDX_C,
                               OFFSET_C, hist_entry)


cdef inline void build_tile_histogram(
        const X_BINNED_C[:, ::1] X_binned,     # IN  (n_features, n_rows)
        Py_ssize_t feature_idx,                 # IN
        const ROW_IDX_C[::1] sample_indices,    # IN  rows of all nodes
        OFFSET_C start, OFFSET_C end,           # IN  this node's segment
        const G_H_C[::1] gradients,             # IN  (n_rows,)
        const G_H_C[::1] hessians,              # IN  (n_rows,)
        const ERA_IDX_C[::1] row_era,           # IN  (n_rows,)
        Py_ssize_t n_eras,
        Py_ssize_t width,                       # bins incl. the missing bin
        hist_entry* hist,                       # OUT (n_eras, width), row-major
) noexcept nogil:
    """Sum (g, h, count) per (era, bin) over the rows of one node segment.

    Rows of a node are kept in ascending (hence era-sorted) order, so the
    era index changes rarely and the histogram rows are written in order.
    """
    cdef OFFSET_C position
    cdef ROW_IDX_C row
    cdef hist_entry* cell
    memset(hist, 0, n_eras * width * sizeof(hist_entry))
    for position in range(start, end):
        row = sample_indices[position]
        cell = &hist[row_era[row] * width + X_binned[feature_idx, row]]
        cell.sum_gradients += gradients[row]
        cell.sum_hessians += hessians[row]
        cell.count += 1
