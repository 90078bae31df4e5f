# route_rows' loop eight (row, tree) entries at a time (_partition.pyx,
# docs/cpu-kernels.md §6): where the CPU has AVX2, a run of node_of_row is
# routed as vectors of eight entries -- each entry's slot split, its code in
# the split column and its child found with gathers, compares and blends --
# instead of one entry at a time with a branch per step. Same children, same
# leaves, and the squared gradients added to the children's sums in the same
# order (entry by entry), so the sums are the scalar loop's bit for bit.
#
# Why: routing was a quarter of a small fit at ~25 instructions per (row,
# tree) with no single cost to remove (benchmarks/RESULTS.md, 2026-11-26
# 6d337fc); the vector loop does the same work in a handful of instructions
# per entry.
#
# The loop reads a code as the top byte of the 32-bit word ending at it, so
# it needs three bytes before the code inside the matrix: route_rows gives
# it rows from the fourth on (and only uint8 codes of the feature-major
# matrix, addresses below 2**31, child slots below 2**15; otherwise the
# scalar loop routes).

from libc.stdint cimport uint8_t, int32_t, uint32_t

cdef extern from *:
    """
    #if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
    #define PB_ROUTE_VECTOR 1
    #define PB_TARGET_AVX2 __attribute__((target("avx2")))
    #include <immintrin.h>
    #else
    #define PB_ROUTE_VECTOR 0
    #define PB_TARGET_AVX2
    #endif

    /* A slot's split for the vector loop, one 32-bit word: threshold (bits
       0-7), the feature's missing code (8-15), whether the missing code goes
       right (16), the left child's slot (17-31). */
    #define PB_ROUTE_MISSING_SHIFT 8
    #define PB_ROUTE_MISSING_RIGHT_SHIFT 16
    #define PB_ROUTE_LEFT_SHIFT 17
    /* Entries past a chunk's squared sums that the vector loop's lanes
       without a child add to (one per lane). */
    #define PB_ROUTE_TRASH_SLOTS 8
    /* The most children per tree whose squared sums the vector loop keeps
       in lanes (pb_add_squares_by_lanes); more: pb_add_squares (with eight
       the lanes' compares and adds cost more than the loop they replace). */
    #define PB_ROUTE_LANE_CHILDREN 4
    /* With AVX-512 (eight trees a vector, the square added under a mask):
       up to 8 (with 16 the compares and masked adds cost more than the
       loop entry by entry). */
    #define PB_ROUTE_LANE_CHILDREN_512 8

    static int pb_route_vector_supported(void)
    {
    #if PB_ROUTE_VECTOR
        __builtin_cpu_init();
        return __builtin_cpu_supports("avx2");
    #else
        return 0;
    #endif
    }

    /* May pb_add_squares_by_lanes take up to PB_ROUTE_LANE_CHILDREN_512
       children (AVX-512F and VL)? */
    static int pb_route_lanes_512_supported(void)
    {
    #if PB_ROUTE_VECTOR
        __builtin_cpu_init();
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl");
    #else
        return 0;
    #endif
    }

    /* The squared gradients of entries [first, last) just routed (the
       caller's line of rows, in L1), entry by entry: an entry now >= 0 is a
       sampled row's child and adds its row's squared gradient (``squared``, on
       its grid: _fixed_point.rounded_squares) to it; every other
       entry adds to its lane's trash slot (never read). GCC compiles the
       slot's choice to a branch: right where a lane's tree samples all or
       none of the line's rows (whole eras: the branch is predicted, and the
       trash adds wait on no load; the slot by masks routed 5-12% slower),
       mispredicted half the time where a row subsample mixes them (the
       routing took 1.8x as long; RESULTS.md, 2026-11-27 6973e8a).
       `scattered`: the trees sample rows one by one, not whole eras; then
       the slot by masks. (Telling the two apart from the line's codes in
       the vector loop cost more than it saved.) */
    static inline void pb_add_squares(
        const int32_t *node, Py_ssize_t first, Py_ssize_t last, int pack_shift,
        double *squares, int32_t trash_slot, const double *squared, int scattered)
    {
        Py_ssize_t entry;
        if (!scattered) {
            for (entry = first; entry < last; ++entry) {
                const int32_t code = node[entry];
                squares[code >= 0 ? code : trash_slot + (int32_t)(entry & 7)] += squared[entry >> pack_shift];
            }
            return;
        }
        for (entry = first; entry < last; ++entry) {
            const int32_t code = node[entry];
            const int32_t away = trash_slot + (int32_t)(entry & 7) - code;
            squares[code + (away & (code >> 31))] += squared[entry >> pack_shift];   /* >> 31: -1 or 0 */
        }
    }

    #if PB_ROUTE_VECTOR
    /* pb_add_squares where each tree's children are few (route_rows'
       tree_children): rows [first_row, last_row), four trees at a time,
       each tree's children's running sums in the lanes of `n_children`
       vectors -- child j of the four trees in vector j -- added row by row:
       the additions of pb_add_squares, in its order, without a memory
       round trip per (row, tree) (0.9 ns of routing's 2.4 per (row, tree)
       on one thread went to that loop, whatever the depth). A lane whose
       code is not child j (another child, unsampled, done: code - first
       child < 0) adds +0.0, which leaves the sum unchanged: it starts at
       +0.0 or a sum of squares and never is -0.0. The sums are loaded from
       `squares` before the rows and stored after: the chunk's next line
       goes on from them. */
    /* The running sums of lanes [0, n_lanes) -- trees first_tree, first_tree
       + 1, ... -- child by child into sums[j * n_lanes + lane] (0.0 past a
       tree's children), and back after the rows: a lane owns child j of its
       tree if the tree has more than j children. */
    static inline void pb_lane_sums_load(
        const double *squares, const int32_t *child_base, const int32_t *child_count,
        Py_ssize_t first_tree, int n_lanes, int n_children, double *sums)
    {
        int j, lane;
        for (j = 0; j < n_children; ++j)
            for (lane = 0; lane < n_lanes; ++lane)
                sums[j * n_lanes + lane] = j < child_count[first_tree + lane]
                    ? squares[child_base[first_tree + lane] + j] : 0.0;
    }

    static inline void pb_lane_sums_store(
        double *squares, const int32_t *child_base, const int32_t *child_count,
        Py_ssize_t first_tree, int n_lanes, int n_children, const double *sums)
    {
        int j, lane;
        for (j = 0; j < n_children; ++j)
            for (lane = 0; lane < n_lanes; ++lane)
                if (j < child_count[first_tree + lane])
                    squares[child_base[first_tree + lane] + j] = sums[j * n_lanes + lane];
    }

    __attribute__((target("avx2"), always_inline))
    static inline void pb_add_lane_squares(
        const int32_t *node, Py_ssize_t first_row, Py_ssize_t last_row, int pack_shift,
        double *squares, const int32_t *child_base, const int32_t *child_count,
        const double *squared, const int n_children, const int n_groups)
    {
        /* n_groups groups of four trees per pass over the rows (two: a pack
           of eight in one pass, its squares computed once per row) */
        const Py_ssize_t pack_size = (Py_ssize_t)1 << pack_shift;
        Py_ssize_t first_tree, row;
        int j, group;
        for (first_tree = 0; first_tree < pack_size; first_tree += 4 * n_groups) {
            double sums[2][PB_ROUTE_LANE_CHILDREN][4] __attribute__((aligned(32)));
            __m256d running[2][PB_ROUTE_LANE_CHILDREN];
            __m128i base[2];
            for (group = 0; group < n_groups; ++group) {
                const Py_ssize_t tree = first_tree + 4 * group;
                pb_lane_sums_load(squares, child_base, child_count, tree, 4, n_children,
                                  sums[group][0]);
                for (j = 0; j < n_children; ++j)
                    running[group][j] = _mm256_load_pd(sums[group][j]);
                base[group] = _mm_loadu_si128((const __m128i *)(child_base + tree));
            }
            for (row = first_row; row < last_row; ++row) {
                const __m256d square = _mm256_set1_pd(squared[row]);
                for (group = 0; group < n_groups; ++group) {
                    const __m128i code = _mm_loadu_si128(
                        (const __m128i *)(node + (row << pack_shift) + first_tree + 4 * group));
                    const __m256d child = _mm256_cvtepi32_pd(_mm_sub_epi32(code, base[group]));
                    for (j = 0; j < n_children; ++j)
                        running[group][j] = _mm256_add_pd(running[group][j], _mm256_and_pd(
                            _mm256_cmp_pd(child, _mm256_set1_pd((double)j), _CMP_EQ_OQ),
                            square));
                }
            }
            for (group = 0; group < n_groups; ++group) {
                for (j = 0; j < n_children; ++j)
                    _mm256_store_pd(sums[group][j], running[group][j]);
                pb_lane_sums_store(squares, child_base, child_count, first_tree + 4 * group, 4,
                                   n_children, sums[group][0]);
            }
        }
    }

    /* pb_add_lane_squares for up to PB_ROUTE_LANE_CHILDREN_512 children with
       AVX-512: eight trees a vector (packs of 8k), one vector per child (a
       constant count: the sums stay in registers; a child past a tree's
       count matches no code), the row's square added under a mask -- the
       lanes whose code is that child -- so the other lanes' sums are left as
       they are. With AVX2's 32 bytes, compares and adds, eight children cost
       more than the loop entry by entry. */
    __attribute__((target("avx512f,avx512vl")))
    static void pb_add_squares_by_lanes_512(
        const int32_t *node, Py_ssize_t first_row, Py_ssize_t last_row, int pack_shift,
        double *squares, const int32_t *child_base, const int32_t *child_count,
        const double *squared)
    {
        const Py_ssize_t pack_size = (Py_ssize_t)1 << pack_shift;
        const int n_children = PB_ROUTE_LANE_CHILDREN_512;
        Py_ssize_t first_tree, row;
        int j;
        for (first_tree = 0; first_tree < pack_size; first_tree += 8) {
            double sums[PB_ROUTE_LANE_CHILDREN_512][8] __attribute__((aligned(64)));
            __m512d running[PB_ROUTE_LANE_CHILDREN_512];
            pb_lane_sums_load(squares, child_base, child_count, first_tree, 8, n_children,
                              sums[0]);
            for (j = 0; j < n_children; ++j)
                running[j] = _mm512_load_pd(sums[j]);
            const __m256i base = _mm256_loadu_si256((const __m256i *)(child_base + first_tree));
            for (row = first_row; row < last_row; ++row) {
                const __m256i child = _mm256_sub_epi32(_mm256_loadu_si256(
                    (const __m256i *)(node + (row << pack_shift) + first_tree)), base);
                const __m512d square = _mm512_set1_pd(squared[row]);
                for (j = 0; j < n_children; ++j)
                    running[j] = _mm512_mask_add_pd(
                        running[j], _mm256_cmpeq_epi32_mask(child, _mm256_set1_epi32(j)),
                        running[j], square);
            }
            for (j = 0; j < n_children; ++j)
                _mm512_store_pd(sums[j], running[j]);
            pb_lane_sums_store(squares, child_base, child_count, first_tree, 8, n_children,
                               sums[0]);
        }
    }

    /* pb_add_lane_squares with its numbers of children (2 or 4) and groups
       (1: a pack of four, else 2) constants: the sums then stay in
       registers; more than four children: pb_add_squares_by_lanes_512 (the
       caller checked the CPU has it, route_rows' tree_children). */
    __attribute__((target("avx2")))
    static void pb_add_squares_by_lanes(
        const int32_t *node, Py_ssize_t first_row, Py_ssize_t last_row, int pack_shift,
        double *squares, const int32_t *child_base, const int32_t *child_count,
        const double *squared, int n_children)
    {
        if (n_children > PB_ROUTE_LANE_CHILDREN)
            pb_add_squares_by_lanes_512(node, first_row, last_row, pack_shift, squares,
                                        child_base, child_count, squared);
        else if (pack_shift == 2 && n_children <= 2)
            pb_add_lane_squares(node, first_row, last_row, pack_shift, squares, child_base,
                                child_count, squared, 2, 1);
        else if (pack_shift == 2)
            pb_add_lane_squares(node, first_row, last_row, pack_shift, squares, child_base,
                                child_count, squared, 4, 1);
        else if (n_children <= 2)
            pb_add_lane_squares(node, first_row, last_row, pack_shift, squares, child_base,
                                child_count, squared, 2, 2);
        else
            pb_add_lane_squares(node, first_row, last_row, pack_shift, squares, child_base,
                                child_count, squared, 4, 2);
    }

    /* A slot's entry of a table of at most 8 * n_tables int32 held in
       registers (tables[k]: entries 8k .. 8k + 7): one permute per table
       and a blend per bit above the third, in place of a gather (whose
       lanes are loads: two gathers by slot were a third of the loop's time,
       perf). n_tables 1, 2 or 4. */
    __attribute__((target("avx2"), always_inline))
    static inline __m256i pb_slot_lookup(const __m256i *tables, const int n_tables,
                                         __m256i slot)
    {
        __m256i low = _mm256_permutevar8x32_epi32(tables[0], slot);
        if (n_tables == 1)
            return low;
        const __m256i bit3 = _mm256_cmpeq_epi32(
            _mm256_and_si256(slot, _mm256_set1_epi32(8)), _mm256_set1_epi32(8));
        low = _mm256_blendv_epi8(low, _mm256_permutevar8x32_epi32(tables[1], slot), bit3);
        if (n_tables == 2)
            return low;
        const __m256i high = _mm256_blendv_epi8(
            _mm256_permutevar8x32_epi32(tables[2], slot),
            _mm256_permutevar8x32_epi32(tables[3], slot), bit3);
        const __m256i bit4 = _mm256_cmpeq_epi32(
            _mm256_and_si256(slot, _mm256_set1_epi32(16)), _mm256_set1_epi32(16));
        return _mm256_blendv_epi8(low, high, bit4);
    }

    /* Entries [first, last) of node_of_row seen flat (entry = row *
       pack_size + tree, pack_size = 1 << pack_shift), last - first a
       multiple of 8. An entry's code c (route_rows' codes: slot >= 0,
       -2 - slot unsampled, -1 done) moves to its child; a slot that does not
       split (column < 0) makes it -1 and writes the slot's node to leaf.
       The slot's column and word by gathers (n_tables 0) or, for at most
       8 * n_tables slots, from tables in registers (pb_slot_lookup). */
    __attribute__((target("avx2"), always_inline))
    static inline void pb_route_vectors(
        const uint8_t *codes, Py_ssize_t row_stride, int32_t *node, int32_t *leaf,
        Py_ssize_t first, Py_ssize_t last, int pack_shift,
        const int32_t *slot_column, const uint32_t *slot_word, const int32_t *slot_node,
        Py_ssize_t n_slots, const int n_tables)
    {
        const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
        const __m256i zero = _mm256_setzero_si256();
        const __m256i minus_one = _mm256_set1_epi32(-1);
        const __m256i minus_two = _mm256_set1_epi32(-2);
        const __m256i byte = _mm256_set1_epi32(255);
        const __m256i one = _mm256_set1_epi32(1);
        /* a lane's row is its vector's first row plus lane >> pack_shift */
        const __m256i lane_offset = _mm256_mullo_epi32(
            _mm256_srli_epi32(lane, pack_shift), _mm256_set1_epi32((int32_t)row_stride));
        /* Codes read as the top byte of the word ending at them. */
        const int *words_before = (const int *)(codes - 3);
        __m256i column_table[4], word_table[4];
        int k, i;
        for (k = 0; k < n_tables; ++k) {
            int32_t columns[8], words[8];
            for (i = 0; i < 8; ++i) {
                const Py_ssize_t slot = 8 * k + i;
                columns[i] = slot < n_slots ? slot_column[slot] : -1;
                words[i] = slot < n_slots ? (int32_t)slot_word[slot] : 0;
            }
            column_table[k] = _mm256_loadu_si256((const __m256i *)columns);
            word_table[k] = _mm256_loadu_si256((const __m256i *)words);
        }
        Py_ssize_t entry;
        for (entry = first; entry < last; entry += 8) {
            __m256i code = _mm256_loadu_si256((const __m256i *)(node + entry));
            __m256i done = _mm256_cmpeq_epi32(code, minus_one);
            /* slot: c for c >= 0, -2 - c for c <= -2; done entries read slot 0 */
            __m256i slot = _mm256_max_epi32(_mm256_max_epi32(code, _mm256_sub_epi32(minus_two, code)),
                                            zero);
            __m256i column, word;
            if (n_tables == 0) {
                column = _mm256_i32gather_epi32(slot_column, slot, 4);
                word = _mm256_i32gather_epi32((const int *)slot_word, slot, 4);
            } else {
                column = pb_slot_lookup(column_table, n_tables, slot);
                word = pb_slot_lookup(word_table, n_tables, slot);
            }
            __m256i leafy = _mm256_andnot_si256(done, _mm256_cmpgt_epi32(zero, column));
            __m256i split = _mm256_andnot_si256(done, _mm256_cmpgt_epi32(column, minus_one));
            __m256i address = _mm256_add_epi32(_mm256_add_epi32(
                column, _mm256_set1_epi32((int32_t)((entry >> pack_shift) * row_stride))),
                lane_offset);
            __m256i value = _mm256_srli_epi32(
                _mm256_mask_i32gather_epi32(zero, words_before, address, split, 1), 24);
            __m256i threshold = _mm256_and_si256(word, byte);
            __m256i missing_code = _mm256_and_si256(_mm256_srli_epi32(word, PB_ROUTE_MISSING_SHIFT),
                                                    byte);
            __m256i missing_right = _mm256_and_si256(
                _mm256_srli_epi32(word, PB_ROUTE_MISSING_RIGHT_SHIFT), one);
            __m256i left = _mm256_srli_epi32(word, PB_ROUTE_LEFT_SHIFT);
            /* right of the threshold: compare gives -1, so left - (-1) */
            __m256i child = _mm256_sub_epi32(left, _mm256_cmpgt_epi32(value, threshold));
            child = _mm256_blendv_epi8(child, _mm256_add_epi32(left, missing_right),
                                       _mm256_cmpeq_epi32(value, missing_code));
            __m256i sampled = _mm256_cmpgt_epi32(code, minus_one);
            __m256i moved = _mm256_blendv_epi8(_mm256_sub_epi32(minus_two, child), child, sampled);
            __m256i result = _mm256_blendv_epi8(code, moved, split);
            result = _mm256_blendv_epi8(result, minus_one, leafy);
            _mm256_storeu_si256((__m256i *)(node + entry), result);
            if (_mm256_movemask_ps(_mm256_castsi256_ps(leafy))) {
                __m256i leaf_node = _mm256_mask_i32gather_epi32(zero, slot_node, slot, leafy, 4);
                _mm256_maskstore_epi32(leaf + entry, leafy, leaf_node);
            }
        }
    }
    #endif

    /* pb_route_vectors, then the squared gradients of the entries: each
       sampled entry adds its row's squared gradient to its child's sum, entries
       in order, in lanes (pb_add_squares_by_lanes, given lane_children) or
       entry by entry (pb_add_squares: squares has ROUTE_TRASH_SLOTS more
       entries from trash_slot on, which the other entries add to, as
       `scattered` says); squares NULL: none. Without AVX2 in the compiler
       or the CPU it is never called (pb_route_vector_supported() is 0). */
    PB_TARGET_AVX2
    static void pb_route_entries(
        const uint8_t *codes, Py_ssize_t row_stride, int32_t *node, int32_t *leaf,
        Py_ssize_t first, Py_ssize_t last, int pack_shift,
        const int32_t *slot_column, const uint32_t *slot_word, const int32_t *slot_node,
        Py_ssize_t n_slots, double *squares, int32_t trash_slot, const double *squared,
        int scattered, const int32_t *child_base, const int32_t *child_count, int lane_children)
    {
    #if PB_ROUTE_VECTOR
        if (n_slots <= 8)
            pb_route_vectors(codes, row_stride, node, leaf, first, last, pack_shift, slot_column,
                             slot_word, slot_node, n_slots, 1);
        else if (n_slots <= 16)
            pb_route_vectors(codes, row_stride, node, leaf, first, last, pack_shift, slot_column,
                             slot_word, slot_node, n_slots, 2);
        else if (n_slots <= 32)
            pb_route_vectors(codes, row_stride, node, leaf, first, last, pack_shift, slot_column,
                             slot_word, slot_node, n_slots, 4);
        else
            pb_route_vectors(codes, row_stride, node, leaf, first, last, pack_shift, slot_column,
                             slot_word, slot_node, n_slots, 0);
        if (squares != NULL && lane_children > 0)
            pb_add_squares_by_lanes(node, first >> pack_shift, last >> pack_shift, pack_shift,
                                    squares, child_base, child_count, squared,
                                    lane_children);
        else if (squares != NULL)
            pb_add_squares(node, first, last, pack_shift, squares, trash_slot, squared,
                           scattered);
    #endif
    }
    """
    int ROUTE_MISSING_SHIFT "PB_ROUTE_MISSING_SHIFT"
    int ROUTE_MISSING_RIGHT_SHIFT "PB_ROUTE_MISSING_RIGHT_SHIFT"
    int ROUTE_LEFT_SHIFT "PB_ROUTE_LEFT_SHIFT"
    int ROUTE_TRASH_SLOTS "PB_ROUTE_TRASH_SLOTS"
    int ROUTE_LANE_CHILDREN "PB_ROUTE_LANE_CHILDREN"
    int ROUTE_LANE_CHILDREN_512 "PB_ROUTE_LANE_CHILDREN_512"
    int route_lanes_512_supported "pb_route_lanes_512_supported" () noexcept nogil
    int route_vector_supported "pb_route_vector_supported" () noexcept nogil
    void route_entries "pb_route_entries" (
        const uint8_t* codes, Py_ssize_t row_stride, int32_t* node, int32_t* leaf,
        Py_ssize_t first, Py_ssize_t last, int pack_shift, const int32_t* slot_column,
        const uint32_t* slot_word, const int32_t* slot_node, Py_ssize_t n_slots,
        double* squares, int32_t trash_slot, const double* squared, int scattered,
        const int32_t* child_base, const int32_t* child_count, int lane_children) noexcept nogil
