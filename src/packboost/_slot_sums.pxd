# Pooled sums of a pack's slots (gradient, hessian, row count, squared
# gradient), in a fixed chunking of the rows (_partition.slot_sums): within
# a chunk rows are added in order and the chunks' partials are added in chunk
# order. Every value added is on a grid on which its sums stay exact
# (the fixed-point gradients and hessians; the squared gradients on theirs,
# _fixed_point.rounded_squares), so the sums are the same in any order: the
# Dask shards add their own rows' and all-reduce them. A chunk's partial is slot-major, (n_slots + TRASH_ROWS, 4): a
# slot's (g, h, count, g^2) side by side, added as two pairs
# (add_row_to_slot), then trash rows that the rows no tree sampled add to.

from libc.stdint cimport int32_t, int64_t, uint8_t

from packboost.tree cimport node_index_t
from packboost._types cimport gradient_t

cdef enum:
    SUM_CHUNKS = 16   # a fixed number, whatever the thread count
    # Rows past a partial's slots that the rows no tree sampled add to, one
    # per tree modulo TRASH_ROWS (a power of two): one row for every tree
    # chained each add on the one before (store to load).
    TRASH_ROWS = 8


cdef extern from *:
    """
    /* One row's (gradient, hessian, 1, gradient^2) added to a slot's four sums
       side by side (a chunk partial's row): two paired adds where
       the compiler has vector types (GCC, Clang), four scalar ones otherwise;
       each lane is one IEEE addition, so the sums are the same either way. */
    static inline void pb_add_row_to_slot(double *sums, double gradient, double hessian,
                                          double squared) {
    #if defined(__GNUC__)
        typedef double pb_pair __attribute__((vector_size(16)));
        pb_pair low, high;
        __builtin_memcpy(&low, sums, sizeof low);
        __builtin_memcpy(&high, sums + 2, sizeof high);
        low += (pb_pair){gradient, hessian};
        high += (pb_pair){1.0, squared};
        __builtin_memcpy(sums, &low, sizeof low);
        __builtin_memcpy(sums + 2, &high, sizeof high);
    #else
        sums[0] += gradient;
        sums[1] += hessian;
        sums[2] += 1.0;
        sums[3] += squared;
    #endif
    }
    """
    void add_row_to_slot "pb_add_row_to_slot" (double* sums, double gradient, double hessian,
                                               double squared) noexcept nogil


cdef extern from *:
    """
    /* The roots' sums of one chunk of rows [first, last) where trees keep
       whole eras (a pack's roots: slot t holds tree t's kept eras), for the
       trees [tree0, tree0 + n_trees), n_trees <= PB_ROOT_LANES: into
       `partial` (a chunk partial, slot-major (g, h, count, g^2)), what
       pb_add_row_to_slot gives row by row from the table, bit for bit. Each
       tree's sums are lanes of vectors kept in registers, added row by row
       in row order; a tree
       that does not keep the row's era adds +0.0 (its lane masked to zero),
       which leaves an IEEE sum unchanged: the sums start at +0.0 and never
       become -0.0 (x + y is -0.0 only when both are). Counts are the kept
       rows, added per era (whole numbers: exact either way). `era` is the
       era holding row `first`; era_tree_rows[era * pack_size + tree]: does
       the tree keep the era. */
    #define PB_ROOT_LANES 4
    static void pb_root_chunk_sums(
        const double *gradients, const double *hessians, const double *squared,
        Py_ssize_t first, Py_ssize_t last,
        const int64_t *era_offsets, Py_ssize_t era, const uint8_t *era_tree_rows,
        Py_ssize_t pack_size, Py_ssize_t tree0, Py_ssize_t n_trees, double *partial)
    {
    #if defined(__GNUC__)
        /* pairs of lanes (16 bytes: SSE2 registers; wider vectors on plain
           x86-64 went through the stack, a store-to-load wait per row) */
        typedef double pb_pair __attribute__((vector_size(16)));
        typedef long long pb_pair_mask __attribute__((vector_size(16)));
        const pb_pair zero = {0.0, 0.0};
        pb_pair gradient_low = zero, gradient_high = zero, hessian_low = zero;
        pb_pair hessian_high = zero, square_low = zero, square_high = zero;
        double count[PB_ROOT_LANES] = {0, 0, 0, 0};
        double lanes[3][PB_ROOT_LANES];
        Py_ssize_t row = first, end, t;
        while (row < last) {
            while (era_offsets[era + 1] <= row)
                ++era;                          /* empty eras hold no row */
            end = era_offsets[era + 1] < last ? era_offsets[era + 1] : last;
            long long keep[PB_ROOT_LANES] = {0, 0, 0, 0};
            for (t = 0; t < n_trees; ++t)
                if (era_tree_rows[era * pack_size + tree0 + t]) {
                    keep[t] = -1;
                    count[t] += (double)(end - row);
                }
            const pb_pair_mask low = {keep[0], keep[1]}, high = {keep[2], keep[3]};
            for (; row < end; ++row) {
                const double g = gradients[row], h = hessians[row], s = squared[row];
                const pb_pair_mask gv = (pb_pair_mask)(pb_pair){g, g};
                const pb_pair_mask hv = (pb_pair_mask)(pb_pair){h, h};
                const pb_pair_mask sv = (pb_pair_mask)(pb_pair){s, s};
                gradient_low += (pb_pair)(gv & low);
                gradient_high += (pb_pair)(gv & high);
                hessian_low += (pb_pair)(hv & low);
                hessian_high += (pb_pair)(hv & high);
                square_low += (pb_pair)(sv & low);
                square_high += (pb_pair)(sv & high);
            }
        }
        __builtin_memcpy(lanes[0], &gradient_low, sizeof gradient_low);
        __builtin_memcpy(lanes[0] + 2, &gradient_high, sizeof gradient_high);
        __builtin_memcpy(lanes[1], &hessian_low, sizeof hessian_low);
        __builtin_memcpy(lanes[1] + 2, &hessian_high, sizeof hessian_high);
        __builtin_memcpy(lanes[2], &square_low, sizeof square_low);
        __builtin_memcpy(lanes[2] + 2, &square_high, sizeof square_high);
        for (t = 0; t < n_trees; ++t) {
            double *sums = partial + 4 * (tree0 + t);
            sums[0] = lanes[0][t];
            sums[1] = lanes[1][t];
            sums[2] = count[t];
            sums[3] = lanes[2][t];
        }
    #else
        /* the same additions a tree at a time */
        Py_ssize_t t, row, e, end;
        for (t = 0; t < n_trees; ++t) {
            double *sums = partial + 4 * (tree0 + t);
            sums[0] = sums[1] = sums[2] = sums[3] = 0.0;
            for (row = first, e = era; row < last; ) {
                while (era_offsets[e + 1] <= row)
                    ++e;
                end = era_offsets[e + 1] < last ? era_offsets[e + 1] : last;
                if (!era_tree_rows[e * pack_size + tree0 + t]) {
                    row = end;
                    continue;
                }
                sums[2] += (double)(end - row);
                for (; row < end; ++row) {
                    sums[0] += gradients[row];
                    sums[1] += hessians[row];
                    sums[3] += squared[row];
                }
            }
        }
    #endif
    }
    """
    void root_chunk_sums "pb_root_chunk_sums" (
        const double* gradients, const double* hessians, const double* squared,
        Py_ssize_t first, Py_ssize_t last,
        const int64_t* era_offsets, Py_ssize_t era, const uint8_t* era_tree_rows,
        Py_ssize_t pack_size, Py_ssize_t tree0, Py_ssize_t n_trees,
        double* partial) noexcept nogil
    int ROOT_LANES "PB_ROOT_LANES"


cdef inline node_index_t unsampled_if(node_index_t value, node_index_t negative) noexcept nogil:
    """``value`` where ``negative`` is 0, ``-2 - value`` where it is -1 (a
    code's ``code >> 31``): by masks, ``(v ^ m) + m``, not a branch on the
    code's sign (random under a row subsample). The mapping is its own
    inverse: a code's slot is ``unsampled_if(code, code >> 31)``, and a slot
    moved to ``child`` keeps its sampling as ``unsampled_if(child, negative)``."""
    return (value ^ negative) + negative


cdef inline node_index_t slot_or_trash(node_index_t slot, node_index_t code,
                                       node_index_t trash_slot, Py_ssize_t tree) noexcept nogil:
    """``slot`` where the tree's ``code`` is a sampled row's (>= 0), else the
    tree's trash row ``trash_slot + tree`` modulo TRASH_ROWS; by masks, not a
    branch (the codes' signs are random under a row subsample)."""
    cdef node_index_t negative = code >> 31  # -1 for a negative code, else 0
    return (slot & ~negative) | ((trash_slot + (tree & (TRASH_ROWS - 1))) & negative)


cdef inline void add_row_to_chunk(
        const gradient_t* gradients,            # IN  (n_rows,) indexed by row
        const gradient_t* hessians,             # IN  (n_rows,)
        const double* squared,                  # IN  (n_rows,) squared gradients on their grid
        const node_index_t[:, ::1] node_of_row,   # IN  (n_rows, pack_size) slot or negative
        Py_ssize_t row,
        double* sums,                           # IN/OUT one chunk's (n_slots + TRASH_ROWS, 4)
        node_index_t trash_slot,                # IN  n_slots: the partial's first trash row,
                                                #     or -1: a branch (whole eras)
        const int32_t* tree_output=NULL,        # IN  (pack_size,) each tree's output, or NULL:
        Py_ssize_t output_stride=0,             #     one; tree t's gradients and hessians
                                                #     then at + tree_output[t] * output_stride
) noexcept nogil:
    """Add ``row`` to its slot's sums in every tree that sampled it (trees in
    order). With ``trash_slot`` (the trees sample rows one by one) the slot
    by masks, a tree that did not (a negative code) adding the row to a
    trash row, never read: a row subsample makes the codes' signs random,
    and the branch on them was mispredicted half the time; where trees draw
    whole eras the branch is predicted, and 15% faster (RESULTS.md,
    2026-11-27 6973e8a)."""
    cdef Py_ssize_t tree, pack_size = node_of_row.shape[1], at
    cdef node_index_t code
    cdef double gradient
    if tree_output != NULL:
        # Several outputs' trees in one pack (docs/packs.md §10): each adds
        # its output's values, in the same order as a pack of its own.
        for tree in range(pack_size):
            code = node_of_row[row, tree]
            at = tree_output[tree] * output_stride + row
            gradient = gradients[at]
            if trash_slot < 0:
                if code >= 0:
                    add_row_to_slot(sums + 4 * code, gradient, hessians[at], squared[at])
                continue
            add_row_to_slot(sums + 4 * slot_or_trash(code, code, trash_slot, tree), gradient,
                            hessians[at], squared[at])
        return
    gradient = gradients[row]
    for tree in range(pack_size):
        code = node_of_row[row, tree]
        if trash_slot < 0:
            if code >= 0:
                add_row_to_slot(sums + 4 * code, gradient, hessians[row], squared[row])
            continue
        add_row_to_slot(sums + 4 * slot_or_trash(code, code, trash_slot, tree), gradient,
                        hessians[row], squared[row])


cdef inline void add_rows_to_chunk(
        const gradient_t* gradients,            # IN  (n_rows,) indexed by row
        const gradient_t* hessians,             # IN  (n_rows,)
        const double* squared,                  # IN  (n_rows,)
        const node_index_t[:, ::1] node_of_row,   # IN  (n_rows, pack_size) slot or negative
        Py_ssize_t row_start,                   # IN  rows [row_start, row_end)
        Py_ssize_t row_end,
        double* sums,                           # IN/OUT one chunk's (n_slots + TRASH_ROWS, 4)
        node_index_t trash_slot,                # IN  n_slots (chunk_partials' first trash
                                                #     row) or -1 (add_row_to_chunk)
        const int32_t* tree_output=NULL,        # IN  as add_row_to_chunk takes them
        Py_ssize_t output_stride=0,
) noexcept nogil:
    cdef Py_ssize_t row
    for row in range(row_start, row_end):
        add_row_to_chunk(gradients, hessians, squared, node_of_row, row, sums, trash_slot,
                         tree_output, output_stride)
