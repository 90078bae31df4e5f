# The node-ordered route's pooled pass (find_best_splits_by_node in
# _split.pyx, docs/cpu-kernels.md §3): a slot's rows' packed gradients added
# into one L1 chunk of cells per feature, summed over eras. The loop is in C
# for two reasons, both measured (benchmarks/RESULTS.md, 2026-11-26 0482a7f):
#
# * Where the compiler put it moved an every-feature fit by 25-40% when it
#   was Cython inside pool_rows: edits to pool_rows' other branches, even to
#   unrelated functions of _split.pyx, shifted its loop against the cache
#   lines of the decoded-instruction cache. Here it is its own function,
#   aligned to a 64-byte line, so only edits to this file move it.
# * Four codes per load: the loop is one read-modify-write per (row,
#   feature) and ran at the front end's limit with its counter, pointer
#   and compare around each one.

from libc.stdint cimport uint8_t, int32_t, int64_t

cdef extern from *:
    """
    #include <string.h>
    #if defined(__GNUC__)
    #define PB_POOL_INLINE inline __attribute__((always_inline))
    #define PB_POOL_OUT_OF_LINE __attribute__((noinline, aligned(64)))
    #else
    #define PB_POOL_INLINE inline
    #define PB_POOL_OUT_OF_LINE
    #endif
    /* Rows ahead whose codes the pooled pass asks for: a deep node's rows
       are scattered over the matrix, in no pattern the hardware prefetcher
       follows. */
    #define PB_POOL_PREFETCH_ROWS 8

    /* How a slot's features map to their cells in the chunk. */
    typedef struct {
        const int32_t *columns;     /* (n_members,) columns of X_rows to sum */
        const Py_ssize_t *cell_of;  /* (n_members,) each one's first cell */
        Py_ssize_t n_members;
        Py_ssize_t first_column;    /* columns[0] */
        Py_ssize_t codes_span;      /* columns[last] - columns[0] + 1: bytes a row's codes span */
        /* > 0: consecutive columns of this many cells each, cells in order
           (every feature of a tree): walked by a pointer's stride */
        Py_ssize_t uniform_width;
        /* > 0: columns of this many cells each, column c's at c * width (a
           tree's share of such features): one table read per update */
        Py_ssize_t column_width;
    } pb_pool_layout;

    static PB_POOL_INLINE void pb_pool_prefetch(
        const uint8_t *X_rows, Py_ssize_t n_columns, const int32_t *slot_rows,
        Py_ssize_t i, Py_ssize_t n_slot_rows, const pb_pool_layout *layout)
    {
        Py_ssize_t j;
        if (i + PB_POOL_PREFETCH_ROWS < n_slot_rows) {
            const uint8_t *ahead = X_rows + (Py_ssize_t)slot_rows[i + PB_POOL_PREFETCH_ROWS]
                                   * n_columns + layout->first_column;
            for (j = 0; j < layout->codes_span; j += 64)
                __builtin_prefetch(ahead + j);
        }
    }

    /* Rows slot_rows[start:end) of a slot of n_slot_rows; words: 1 (packed
       gradient and count per cell) or 2 (and the fixed-point hessian). */
    static PB_POOL_INLINE void pb_pool_rows_words(
        const uint8_t *X_rows, Py_ssize_t n_columns, const int32_t *slot_rows,
        Py_ssize_t start, Py_ssize_t end, Py_ssize_t n_slot_rows,
        const int64_t *packed, const int64_t *hessian, const pb_pool_layout *layout,
        int64_t *chunk, const int words)
    {
        const Py_ssize_t n_members = layout->n_members, width = layout->uniform_width;
        const int32_t *columns = layout->columns;
        const Py_ssize_t *cell_of = layout->cell_of;
        Py_ssize_t i, j;
        for (i = start; i < end; ++i) {
            const int32_t row = slot_rows[i];
            const int64_t value = packed[row];
            const int64_t h = words == 2 ? hessian[row] : 0;
            const uint8_t *codes = X_rows + (Py_ssize_t)row * n_columns;
            pb_pool_prefetch(X_rows, n_columns, slot_rows, i, n_slot_rows, layout);
            if (width > 0) {
                int64_t *cell = chunk + cell_of[0] * words;
                codes += layout->first_column;
                j = 0;
    #if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
                if (words == 1) {
                    /* Four features' codes in one load, taken in memory order. */
                    for (; j + 4 <= n_members; j += 4, cell += 4 * width) {
                        uint32_t four;
                        memcpy(&four, codes + j, 4);
                        cell[four & 255u] += value;
                        cell[width + ((four >> 8) & 255u)] += value;
                        cell[2 * width + ((four >> 16) & 255u)] += value;
                        cell[3 * width + (four >> 24)] += value;
                    }
                }
    #endif
                for (; j < n_members; ++j, cell += width * words) {
                    cell[codes[j] * words] += value;
                    if (words == 2)
                        cell[codes[j] * 2 + 1] += h;
                }
            } else if (layout->column_width > 0) {
                const Py_ssize_t column_width = layout->column_width;
                for (j = 0; j < n_members; ++j) {
                    int64_t *cell = chunk + (columns[j] * column_width + codes[columns[j]]) * words;
                    cell[0] += value;
                    if (words == 2)
                        cell[1] += h;
                }
            } else {
                for (j = 0; j < n_members; ++j) {
                    int64_t *cell = chunk + (cell_of[j] + codes[columns[j]]) * words;
                    cell[0] += value;
                    if (words == 2)
                        cell[1] += h;
                }
            }
        }
    }

    /* hessian NULL: one word per cell; else two. */
    static PB_POOL_OUT_OF_LINE void pb_pool_rows(
        const uint8_t *X_rows, Py_ssize_t n_columns, const int32_t *slot_rows,
        Py_ssize_t start, Py_ssize_t end, Py_ssize_t n_slot_rows,
        const int64_t *packed, const int64_t *hessian, const pb_pool_layout *layout,
        int64_t *chunk)
    {
        if (hessian == NULL)
            pb_pool_rows_words(X_rows, n_columns, slot_rows, start, end, n_slot_rows, packed,
                               NULL, layout, chunk, 1);
        else
            pb_pool_rows_words(X_rows, n_columns, slot_rows, start, end, n_slot_rows, packed,
                               hessian, layout, chunk, 2);
    }
    """
    ctypedef struct pb_pool_layout:
        const int32_t* columns
        const Py_ssize_t* cell_of
        Py_ssize_t n_members
        Py_ssize_t first_column
        Py_ssize_t codes_span
        Py_ssize_t uniform_width
        Py_ssize_t column_width
    # Rows slot_rows[start:end) of the slot's n_slot_rows added into ``chunk``
    # (cells of ``words`` int64: hessian NULL -> 1, else 2).
    void pb_pool_rows(const uint8_t* X_rows, Py_ssize_t n_columns, const int32_t* slot_rows,
                      Py_ssize_t start, Py_ssize_t end, Py_ssize_t n_slot_rows,
                      const int64_t* packed, const int64_t* hessian,
                      const pb_pool_layout* layout, int64_t* chunk) noexcept nogil
