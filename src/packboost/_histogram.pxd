# Per-era histograms of a block of features for every open node of a pack
# (docs/cpu-kernels.md §3), accumulated in fixed point (packboost/_fixed_point.py).
#
# Declared inline here so that the split finder (_split.pyx) compiles it into
# its per-block loop: a block's histograms are built and scored back to back
# by one thread, on a buffer that stays in that thread's cache.

from libc.string cimport memcmp, memcpy, memset
from libc.stdint cimport uint8_t, int32_t, uint32_t, int64_t, uint64_t

cdef extern from *:
    # GCC/Clang: a hint to load a cache line early (unpack_tile; the one declaration,
    # cimported by _split, _partition and _distributed).
    void __builtin_prefetch(const void* address) noexcept nogil

from packboost.tree cimport bin_code_t, feature_index_t, bin_index_t, node_index_t
from packboost._types cimport row_index_t, offset_t, hist_entry

cdef enum:
    PREFETCH_ERAS = 24        # eras ahead whose cells unpack_tile asks for
    MAX_PACK_SIZE = 64        # trees per pack the kernels accept (stack arrays)
    MAX_FEATURES_PER_PASS = 64
    ROW_CHUNK = 128           # rows build_pack_histograms lists at a time (stack arrays)
    # Feature pairs (build_pack_histograms, docs/cpu-kernels.md §3): two
    # features of at most PAIR_MAX_WIDTH cells each (5 bins + missing:
    # Numerai's 0..4) are summed as one joint (first bin, second bin) cell
    # when the tree has at most PAIR_MAX_SLOTS slots in the pass and the era
    # at least PAIR_MIN_ROWS_PER_SLOT active rows per slot: each pair's joint
    # cells are cleared and folded back per (era, slot), which costs more than
    # it saves below ~30 rows (benchmarks/RESULTS.md, 2026-11-26 45cde4a and
    # 932e704).
    PAIR_MAX_WIDTH = 6
    PAIR_CELLS = PAIR_MAX_WIDTH * PAIR_MAX_WIDTH
    PAIR_MAX_SLOTS = 32
    PAIR_MIN_ROWS_PER_SLOT = 32
    # int64 of a thread's scratch (build_pack_histograms' pair_scratch), up to
    # two words per cell: the tree's slots' joint tables, then one more slot's
    # (era pairs' trash); after them a run of cells for the rows outside the
    # tree's slots when features are summed alone without a list (uint8
    # codes: at most 256 cells per feature).
    PAIR_TABLE_CELLS = (PAIR_MAX_SLOTS + 1) * (MAX_FEATURES_PER_PASS // 2) * PAIR_CELLS * 2
    SINGLE_TRASH_CELLS = MAX_FEATURES_PER_PASS * 256 * 2
    PAIR_SCRATCH_CELLS = PAIR_TABLE_CELLS + SINGLE_TRASH_CELLS

# What a histogram pass does for a slot (histogram subtraction, docs/cpu-kernels.md §3);
# cpdef: also Python names of packboost._histogram, for the CPU backend's plan.
cpdef enum slot_kind:
    SLOT_SKIP = 0      # no cells needed (its pair has no open slot)
    SLOT_BUILD = 1     # sum every feature its tree uses
    SLOT_DERIVE = 2    # parent minus built sibling; sum only the features the
                       # parent's tree did not use (tree_extra_feature)


# A round's _fixed_point.FixedPointGradients as the kernels read it. The
# pointers borrow the object's arrays: keep the object alive while in use.
cdef struct fixed_point_rows:
    const int64_t* packed              # (n_rows,) g_q << count_bits | 1
    const int64_t* hessian_fixed       # (n_rows,) h_q, or NULL: constant hessian
    Py_ssize_t words                   # int64 per cell: 1, or 2 with hessian_fixed
    int count_bits
    double inverse_gradient_scale      # 1 / scale (powers of two: exact)
    double inverse_hessian_scale
    double constant_hessian            # used when words == 1
    # Several outputs grown as one pack (docs/packs.md §10): NULL for one
    # output; else (pack_size,) each tree's output, and this struct is the
    # first of one per output (same words and count_bits, each its own rows
    # and scales): tree t reads rows_of_tree(rows, t).
    const int32_t* tree_output


cdef inline const fixed_point_rows* rows_of_tree(const fixed_point_rows* rows,
                                                 Py_ssize_t tree) noexcept nogil:
    """The gradients tree ``tree`` of the pack sums: its output's."""
    if rows.tree_output == NULL:
        return rows
    return rows + rows.tree_output[tree]


cdef inline const uint8_t* era_tree_flags(const uint8_t[:, ::1] flags, Py_ssize_t n_eras,
                                         Py_ssize_t pack_size) except? NULL:
    """The kernels' pointer to ``era_tree_rows`` -- (n_eras, pack_size) uint8,
    0 where a tree has no row in an era -- or NULL for None (or no cell).
    It points into the caller's array: keep that alive while in use."""
    if flags is None:
        return NULL
    if flags.shape[0] != n_eras or flags.shape[1] != pack_size:
        raise ValueError(f"era_tree_rows must be ({n_eras}, {pack_size}), got "
                         f"({flags.shape[0]}, {flags.shape[1]})")
    return &flags[0, 0] if n_eras and pack_size else NULL


cdef inline fixed_point_rows view_fixed_point(fixed, Py_ssize_t n_rows) except *:
    """The kernels' view of ``fixed`` for ``n_rows`` rows."""
    cdef const int64_t[::1] packed = fixed.packed
    cdef const int64_t[::1] hessian_fixed = fixed.hessian_fixed
    cdef fixed_point_rows rows
    if packed.shape[0] != n_rows:
        raise ValueError(f"fixed-point gradients have {packed.shape[0]} rows, "
                         f"the data {n_rows}")
    rows.packed = &packed[0]
    rows.hessian_fixed = NULL
    rows.words = 1
    if not fixed.hessian_is_constant:
        rows.hessian_fixed = &hessian_fixed[0]
        rows.words = 2
    rows.count_bits = fixed.count_bits
    rows.inverse_gradient_scale = 1.0 / fixed.gradient_scale
    rows.inverse_hessian_scale = 1.0 / fixed.hessian_scale
    rows.constant_hessian = fixed.constant_hessian
    rows.tree_output = NULL
    return rows


cdef inline Py_ssize_t view_outputs(fixed, Py_ssize_t n_rows, Py_ssize_t pack_size,
                                    fixed_point_rows* views) except -1:
    """The kernels' view of ``fixed`` -- one output's FixedPointGradients, or
    several outputs' (_fixed_point.OutputsFixedPoint: ``outputs`` and
    ``tree_output``) -- into ``views`` (room for ``pack_size`` structs: a
    pack has at most one output per tree); returns the number of outputs.
    The views borrow ``fixed``'s arrays: keep it alive while in use."""
    outputs = getattr(fixed, "outputs", None)
    if outputs is None:
        views[0] = view_fixed_point(fixed, n_rows)
        return 1
    cdef const int32_t[::1] tree_output = fixed.tree_output
    cdef Py_ssize_t n_outputs = len(outputs), output
    if tree_output.shape[0] != pack_size:
        raise ValueError(f"tree_output must have {pack_size} entries, got "
                         f"{tree_output.shape[0]}")
    if n_outputs < 1 or n_outputs > pack_size:
        raise ValueError(f"expected 1 to {pack_size} outputs, got {n_outputs}")
    for output in range(n_outputs):
        views[output] = view_fixed_point(outputs[output], n_rows)
        views[output].tree_output = &tree_output[0]
        if (views[output].words != views[0].words
                or views[output].count_bits != views[0].count_bits):
            raise ValueError("the outputs' fixed-point gradients must share their cell "
                             "format (constant hessian or not, count bits)")
    for output in range(pack_size):
        if not 0 <= tree_output[output] < n_outputs:
            raise ValueError(f"tree_output holds {tree_output[output]}, not an output")
    return n_outputs


cdef inline Py_ssize_t block_cell_offsets(
        const feature_index_t* block_features,  # IN  (n_block,)
        Py_ssize_t n_block,
        const bin_index_t[::1] n_bins,          # IN  (n_features,) width = n_bins + 1
        Py_ssize_t* feature_offset,             # OUT (n_block,) first cell of each feature
) noexcept nogil:
    """Where each feature of a block starts within one (era, slot)'s run of
    cells; returns the run's length (the sum of the features' widths)."""
    cdef Py_ssize_t member, offset = 0
    for member in range(n_block):
        feature_offset[member] = offset
        offset += n_bins[block_features[member]] + 1
    return offset


cdef inline Py_ssize_t tree_cell_offsets(
        const feature_index_t* block_features,  # IN  (n_block,)
        Py_ssize_t n_block,
        const bin_index_t[::1] n_bins,          # IN  (n_features,) width = n_bins + 1
        const uint8_t* tree_uses_feature,       # IN  (n_block, pack_size), row-major
        Py_ssize_t pack_size,
        Py_ssize_t* tree_offset,                # OUT (pack_size, MAX_FEATURES_PER_PASS):
                                                #     tree t's features' first cells at
                                                #     tree_offset[t * MAX_FEATURES_PER_PASS + j]
) noexcept nogil:
    """block_cell_offsets per tree: a slot's run holds only the features its
    tree uses, in block order (a feature the tree does not use gets offset 0
    and no cells: nothing reads them). Returns the longest tree's run, the
    stride of every (era, slot) run.

    Why: with ``tree_feature_fraction=0.5`` a tree uses half of a depth's
    features, and the block-wide run left half of every run untouched yet
    cleared, bounded over eras and carried through the caches. Below the
    roots of the small case, runs per tree were up to 1.2x faster per depth
    (benchmarks/RESULTS.md, 2026-11-26 6d337fc)."""
    cdef Py_ssize_t tree, member, offset, longest = 0
    for tree in range(pack_size):
        offset = 0
        for member in range(n_block):
            tree_offset[tree * MAX_FEATURES_PER_PASS + member] = offset
            if tree_uses_feature[member * pack_size + tree]:
                offset += n_bins[block_features[member]] + 1
        longest = max(longest, offset)
    return longest


cdef inline void add_rows(
        int64_t** runs,                         # IN  (n,) each row's run of cells (its slot's)
        const row_index_t* row_ids,             # IN  (n,) the rows
        Py_ssize_t n,
        const bin_code_t** column,              # IN  (n_columns,) the features' bin codes
        const Py_ssize_t* offset,               # IN  (n_columns,) each feature's first cell in a
                                                #     run, times words
        Py_ssize_t n_columns,
        const fixed_point_rows* rows,           # IN  the round's gradients
) noexcept nogil:
    """Add each listed row's gradient (and hessian) to its cell of every
    column: the inner loop of build_pack_histograms.

    Four rows at a time: a feature's column pointer and offset are loaded once
    for four updates, and the four read-modify-writes are independent (they
    overlap in the core even when two rows hit the same cell). One row at a
    time ran 1.6-1.9 ns per update, four 0.7-0.9 (benchmarks/RESULTS.md).
    Sums are exact integers, so the order never changes a cell."""
    cdef Py_ssize_t k = 0, index, o
    cdef Py_ssize_t b0, b1, b2, b3
    cdef row_index_t i0, i1, i2, i3
    cdef int64_t v0, v1, v2, v3, h0, h1, h2, h3
    cdef int64_t* r0
    cdef int64_t* r1
    cdef int64_t* r2
    cdef int64_t* r3
    cdef const bin_code_t* c
    cdef const int64_t* packed = rows.packed
    cdef const int64_t* hessian_fixed = rows.hessian_fixed
    while k + 4 <= n:
        r0 = runs[k]
        r1 = runs[k + 1]
        r2 = runs[k + 2]
        r3 = runs[k + 3]
        i0 = row_ids[k]
        i1 = row_ids[k + 1]
        i2 = row_ids[k + 2]
        i3 = row_ids[k + 3]
        v0 = packed[i0]
        v1 = packed[i1]
        v2 = packed[i2]
        v3 = packed[i3]
        if rows.words == 1:
            for index in range(n_columns):
                c = column[index]
                o = offset[index]
                b0 = o + c[i0]
                b1 = o + c[i1]
                b2 = o + c[i2]
                b3 = o + c[i3]
                r0[b0] += v0
                r1[b1] += v1
                r2[b2] += v2
                r3[b3] += v3
        else:
            # Two words per cell: the packed gradient and count, then the hessian.
            h0 = hessian_fixed[i0]
            h1 = hessian_fixed[i1]
            h2 = hessian_fixed[i2]
            h3 = hessian_fixed[i3]
            for index in range(n_columns):
                c = column[index]
                o = offset[index]
                b0 = o + 2 * c[i0]
                b1 = o + 2 * c[i1]
                b2 = o + 2 * c[i2]
                b3 = o + 2 * c[i3]
                r0[b0] += v0
                r0[b0 + 1] += h0
                r1[b1] += v1
                r1[b1 + 1] += h1
                r2[b2] += v2
                r2[b2 + 1] += h2
                r3[b3] += v3
                r3[b3 + 1] += h3
        k += 4
    while k < n:
        r0 = runs[k]
        i0 = row_ids[k]
        v0 = packed[i0]
        if rows.words == 1:
            for index in range(n_columns):
                r0[offset[index] + column[index][i0]] += v0
        else:
            h0 = hessian_fixed[i0]
            for index in range(n_columns):
                b0 = offset[index] + 2 * column[index][i0]
                r0[b0] += v0
                r0[b0 + 1] += h0
        k += 1


cdef extern from *:
    """
    /* build_pack_histograms' loop over feature pairs (add_rows for pairs):
       each listed row's packed gradient (and, with two words per cell, its
       fixed-point hessian) added to its joint cell (first code * 6 + second
       code) of every pair; pair p's 36 joint cells start at p * 36 * words
       in the row's run. One read-modify-write per word serves two features.
       In C and kept out of line: inlined into find_best_splits' parallel
       loop, GCC spilled the four rows' pointers and reloaded them for every
       pair (perf: a fit slower than without pairs). One body for both cell
       widths: `words` is a constant in each out-of-line caller below. */
    #define PB_PAIR_MAX_WIDTH 6
    #define PB_PAIR_CELLS (PB_PAIR_MAX_WIDTH * PB_PAIR_MAX_WIDTH)
    #if defined(__GNUC__)
    #define PB_ALWAYS_INLINE inline __attribute__((always_inline))
    #define PB_NOINLINE __attribute__((noinline))
    #else
    #define PB_ALWAYS_INLINE inline
    #define PB_NOINLINE
    #endif
    /* One row's update of its joint cell: the packed gradient (and count),
       then the hessian's word when cells have two. */
    static PB_ALWAYS_INLINE void pb_add_joint(int64_t *run, Py_ssize_t cell, int64_t value,
                                              int64_t hessian, const int words)
    {
        run[cell * words] += value;
        if (words == 2)
            run[cell * words + 1] += hessian;
    }

    /* Four consecutive rows i0 .. i0 + 3 (the usual case: an era's rows in
       order) added to their joint tables r0 .. r3: each feature's four codes
       in one load, and one row index instead of four, so that the gradients
       stay in registers. Bytes taken in memory order (little-endian x86-64
       and Arm64; elsewhere one code at a time). */
    static PB_ALWAYS_INLINE void pb_pair_four_rows(
        int64_t *r0, int64_t *r1, int64_t *r2, int64_t *r3, const int32_t i0,
        const int64_t v0, const int64_t v1, const int64_t v2, const int64_t v3,
        const int64_t h0, const int64_t h1, const int64_t h2, const int64_t h3,
        const uint8_t *const *first, const uint8_t *const *second, Py_ssize_t n_pairs,
        const int words)
    {
        const Py_ssize_t step = PB_PAIR_CELLS * words;
        Py_ssize_t pair;
        for (pair = 0; pair < n_pairs; ++pair) {
    #if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
            uint32_t a, b, joint;
            memcpy(&a, first[pair] + i0, 4);
            memcpy(&b, second[pair] + i0, 4);
            /* The four joint codes at once, one per byte: codes are below 6,
               so each byte's a * 6 + b <= 35 carries nothing into the next. */
            joint = a * PB_PAIR_MAX_WIDTH + b;
            pb_add_joint(r0, joint & 255u, v0, h0, words);
            pb_add_joint(r1, (joint >> 8) & 255u, v1, h1, words);
            pb_add_joint(r2, (joint >> 16) & 255u, v2, h2, words);
            pb_add_joint(r3, joint >> 24, v3, h3, words);
    #else
            const uint8_t *a = first[pair] + i0, *b = second[pair] + i0;
            pb_add_joint(r0, a[0] * PB_PAIR_MAX_WIDTH + b[0], v0, h0, words);
            pb_add_joint(r1, a[1] * PB_PAIR_MAX_WIDTH + b[1], v1, h1, words);
            pb_add_joint(r2, a[2] * PB_PAIR_MAX_WIDTH + b[2], v2, h2, words);
            pb_add_joint(r3, a[3] * PB_PAIR_MAX_WIDTH + b[3], v3, h3, words);
    #endif
            r0 += step;
            r1 += step;
            r2 += step;
            r3 += step;
        }
    }

    static PB_ALWAYS_INLINE void pb_pair_rows(
        int64_t *const *runs, const int32_t *row_ids, Py_ssize_t n,
        const uint8_t *const *first, const uint8_t *const *second, Py_ssize_t n_pairs,
        const int64_t *packed, const int64_t *hessian, const int words)
    {
        const Py_ssize_t step = PB_PAIR_CELLS * words;
        Py_ssize_t k = 0, pair;
        for (; k + 4 <= n; k += 4) {
            int64_t *r0 = runs[k], *r1 = runs[k + 1], *r2 = runs[k + 2], *r3 = runs[k + 3];
            const int32_t i0 = row_ids[k], i1 = row_ids[k + 1];
            const int32_t i2 = row_ids[k + 2], i3 = row_ids[k + 3];
            const int64_t v0 = packed[i0], v1 = packed[i1], v2 = packed[i2], v3 = packed[i3];
            const int64_t h0 = words == 2 ? hessian[i0] : 0, h1 = words == 2 ? hessian[i1] : 0;
            const int64_t h2 = words == 2 ? hessian[i2] : 0, h3 = words == 2 ? hessian[i3] : 0;
            if (i3 - i0 == 3) {
                pb_pair_four_rows(r0, r1, r2, r3, i0, v0, v1, v2, v3, h0, h1, h2, h3,
                                  first, second, n_pairs, words);
                continue;
            }
            for (pair = 0; pair < n_pairs; ++pair) {
                const uint8_t *a = first[pair], *b = second[pair];
                pb_add_joint(r0, a[i0] * PB_PAIR_MAX_WIDTH + b[i0], v0, h0, words);
                pb_add_joint(r1, a[i1] * PB_PAIR_MAX_WIDTH + b[i1], v1, h1, words);
                pb_add_joint(r2, a[i2] * PB_PAIR_MAX_WIDTH + b[i2], v2, h2, words);
                pb_add_joint(r3, a[i3] * PB_PAIR_MAX_WIDTH + b[i3], v3, h3, words);
                r0 += step;
                r1 += step;
                r2 += step;
                r3 += step;
            }
        }
        for (; k < n; ++k) {
            int64_t *r = runs[k];
            const int32_t i = row_ids[k];
            const int64_t v = packed[i];
            const int64_t h = words == 2 ? hessian[i] : 0;
            for (pair = 0; pair < n_pairs; ++pair, r += step)
                pb_add_joint(r, first[pair][i] * PB_PAIR_MAX_WIDTH + second[pair][i], v, h, words);
        }
    }

    /* hessian NULL: one word per cell (a constant hessian); else two. */
    static PB_NOINLINE void pb_add_row_pairs(
        int64_t *const *runs, const int32_t *row_ids, Py_ssize_t n,
        const uint8_t *const *first, const uint8_t *const *second, Py_ssize_t n_pairs,
        const int64_t *packed, const int64_t *hessian)
    {
        if (hessian == NULL)
            pb_pair_rows(runs, row_ids, n, first, second, n_pairs, packed, NULL, 1);
        else
            pb_pair_rows(runs, row_ids, n, first, second, n_pairs, packed, hessian, 2);
    }

    /* The run of cells (or joint tables) row i adds to in an era pass
       without a list: base + (its code - low_slot) * run_cells when the code
       (codes[i * code_stride], the tree's column of node_of_row) is one of
       the n_slots from low_slot, else the trash run. GCC compiles the
       choice to a branch: predicted where trees draw whole eras (a tree's
       rows in runs), and there 10% faster than masks; mispredicted where a
       row subsample puts rows in and out of the tree at random (the pass
       took 1.7x as long; RESULTS.md, 2026-11-27 6973e8a), so `masks` (the
       samples are scattered) chooses by masks, addresses as integers (an
       out-of-range slot's product is never a pointer). */
    static PB_ALWAYS_INLINE int64_t *pb_run_of_code(
        const int32_t *codes, Py_ssize_t code_stride, int32_t i, int32_t low_slot,
        uint32_t n_slots, int64_t *base, Py_ssize_t run_cells, int64_t *trash, const int masks)
    {
        const uint32_t slot = (uint32_t)(codes[(Py_ssize_t)i * code_stride] - low_slot);
        if (!masks)
            return slot < n_slots ? base + (Py_ssize_t)slot * run_cells : trash;
        const uintptr_t inside = (uintptr_t)0 - (uintptr_t)(slot < n_slots);  /* all ones or 0 */
        const uintptr_t run = (uintptr_t)base
                              + (uintptr_t)slot * (uintptr_t)run_cells * sizeof(int64_t);
        return (int64_t *)((run & inside) | ((uintptr_t)trash & ~inside));
    }

    /* add_rows' four rows r0 .. r3 = rows i0 .. i0 + 3 (consecutive) added
       to their cells of every column (offset[j]: column j's first cell times
       words): a column's four codes in one load, as in pb_pair_four_rows. */
    static PB_ALWAYS_INLINE void pb_single_four_rows(
        int64_t *r0, int64_t *r1, int64_t *r2, int64_t *r3, const int32_t i0,
        const int64_t v0, const int64_t v1, const int64_t v2, const int64_t v3,
        const int64_t h0, const int64_t h1, const int64_t h2, const int64_t h3,
        const uint8_t *const *column, const Py_ssize_t *offset, Py_ssize_t n_columns,
        const int words)
    {
        Py_ssize_t index;
        for (index = 0; index < n_columns; ++index) {
            const Py_ssize_t o = offset[index];
    #if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
            uint32_t four;
            memcpy(&four, column[index] + i0, 4);
            const Py_ssize_t b0 = o + (Py_ssize_t)(four & 255u) * words;
            const Py_ssize_t b1 = o + (Py_ssize_t)((four >> 8) & 255u) * words;
            const Py_ssize_t b2 = o + (Py_ssize_t)((four >> 16) & 255u) * words;
            const Py_ssize_t b3 = o + (Py_ssize_t)(four >> 24) * words;
    #else
            const uint8_t *c = column[index] + i0;
            const Py_ssize_t b0 = o + c[0] * words, b1 = o + c[1] * words;
            const Py_ssize_t b2 = o + c[2] * words, b3 = o + c[3] * words;
    #endif
            r0[b0] += v0;
            r1[b1] += v1;
            r2[b2] += v2;
            r3[b3] += v3;
            if (words == 2) {
                r0[b0 + 1] += h0;
                r1[b1 + 1] += h1;
                r2[b2 + 1] += h2;
                r3[b3 + 1] += h3;
            }
        }
    }

    /* An era's consecutive rows first_row .. first_row + n - 1 of one tree
       summed without a list: each row's run from its code (pb_run_of_code;
       rows outside the tree's slots into the trash run, summed and never
       read; masks: see pb_run_of_code). pairs = 1: the runs
       are the slots' joint tables (run_cells = n_items * PB_PAIR_CELLS *
       words) and the items pairs of columns first[p], second[p]; pairs = 0:
       the runs are the slots' cells and the items columns first[j] at
       offset[j] (second unused). The list this replaces cost a third of a
       shallow depth's pass (RESULTS.md, 2026-11-27 d523973). */
    static PB_ALWAYS_INLINE void pb_era_rows(
        const int32_t *codes, Py_ssize_t code_stride, int32_t first_row, Py_ssize_t n,
        int32_t low_slot, uint32_t n_slots, int64_t *runs, Py_ssize_t run_cells,
        int64_t *trash, const uint8_t *const *first, const uint8_t *const *second,
        const Py_ssize_t *offset, Py_ssize_t n_items, const int64_t *packed,
        const int64_t *hessian, const int words, const int pairs, const int masks)
    {
        const Py_ssize_t step = PB_PAIR_CELLS * words;
        Py_ssize_t k = 0, item;
    #define PB_ERA_RUN(i) pb_run_of_code(codes, code_stride, (i), low_slot, n_slots, runs, \
                                         run_cells, trash, masks)
        for (; k + 4 <= n; k += 4) {
            const int32_t i0 = first_row + (int32_t)k;
            int64_t *r0 = PB_ERA_RUN(i0), *r1 = PB_ERA_RUN(i0 + 1);
            int64_t *r2 = PB_ERA_RUN(i0 + 2), *r3 = PB_ERA_RUN(i0 + 3);
            const int64_t v0 = packed[i0], v1 = packed[i0 + 1];
            const int64_t v2 = packed[i0 + 2], v3 = packed[i0 + 3];
            const int64_t h0 = words == 2 ? hessian[i0] : 0, h1 = words == 2 ? hessian[i0 + 1] : 0;
            const int64_t h2 = words == 2 ? hessian[i0 + 2] : 0, h3 = words == 2 ? hessian[i0 + 3] : 0;
            if (pairs)
                pb_pair_four_rows(r0, r1, r2, r3, i0, v0, v1, v2, v3, h0, h1, h2, h3,
                                  first, second, n_items, words);
            else
                pb_single_four_rows(r0, r1, r2, r3, i0, v0, v1, v2, v3, h0, h1, h2, h3,
                                    first, offset, n_items, words);
        }
        for (; k < n; ++k) {
            const int32_t i = first_row + (int32_t)k;
            int64_t *r = PB_ERA_RUN(i);
            const int64_t v = packed[i];
            const int64_t h = words == 2 ? hessian[i] : 0;
            for (item = 0; item < n_items; ++item) {
                if (pairs)
                    pb_add_joint(r + item * step,
                                 first[item][i] * PB_PAIR_MAX_WIDTH + second[item][i], v, h, words);
                else
                    pb_add_joint(r + offset[item], first[item][i], v, h, words);
            }
        }
    #undef PB_ERA_RUN
    }

    /* The out-of-line callers, one body per (cell width, choice of run):
       `words`, `pairs` and `masks` are constants in each. */
    #define PB_ERA_ROWS_FOUR_WAYS(pairs_, run_cells_one_word, ...) do {                      \
            if (hessian == NULL && !scattered)                                                \
                pb_era_rows(codes, code_stride, first_row, n, low_slot, n_slots, runs,        \
                            (run_cells_one_word), trash, __VA_ARGS__, packed, NULL, 1,        \
                            pairs_, 0);                                                       \
            else if (hessian == NULL)                                                         \
                pb_era_rows(codes, code_stride, first_row, n, low_slot, n_slots, runs,        \
                            (run_cells_one_word), trash, __VA_ARGS__, packed, NULL, 1,        \
                            pairs_, 1);                                                       \
            else if (!scattered)                                                              \
                pb_era_rows(codes, code_stride, first_row, n, low_slot, n_slots, runs,        \
                            (run_cells_one_word) * (pairs_ ? 2 : 1), trash, __VA_ARGS__,      \
                            packed, hessian, 2, pairs_, 0);                                   \
            else                                                                              \
                pb_era_rows(codes, code_stride, first_row, n, low_slot, n_slots, runs,        \
                            (run_cells_one_word) * (pairs_ ? 2 : 1), trash, __VA_ARGS__,      \
                            packed, hessian, 2, pairs_, 1);                                   \
        } while (0)

    /* runs: the tree's slots' joint tables from slot low_slot, n_slots of
       them, and trash one more (hessian NULL: one word per cell); scattered:
       the trees sample rows one by one (pb_run_of_code's masks). */
    static PB_NOINLINE void pb_add_era_pairs(
        const int32_t *codes, Py_ssize_t code_stride, int32_t first_row, Py_ssize_t n,
        int32_t low_slot, uint32_t n_slots, int64_t *runs, int64_t *trash,
        const uint8_t *const *first, const uint8_t *const *second, Py_ssize_t n_pairs,
        const int64_t *packed, const int64_t *hessian, int scattered)
    {
        PB_ERA_ROWS_FOUR_WAYS(1, n_pairs * PB_PAIR_CELLS, first, second, NULL, n_pairs);
    }

    /* runs: the cells of the tree's slots from slot low_slot, run_cells
       apart (times words), n_slots of them; trash one more run. */
    static PB_NOINLINE void pb_add_era_singles(
        const int32_t *codes, Py_ssize_t code_stride, int32_t first_row, Py_ssize_t n,
        int32_t low_slot, uint32_t n_slots, int64_t *runs, Py_ssize_t run_cells,
        int64_t *trash, const uint8_t *const *column, const Py_ssize_t *offset,
        Py_ssize_t n_columns, const int64_t *packed, const int64_t *hessian, int scattered)
    {
        PB_ERA_ROWS_FOUR_WAYS(0, run_cells, column, NULL, offset, n_columns);
    }
    #undef PB_ERA_ROWS_FOUR_WAYS

    /* A slot's joint tables folded into its features' own cells: the first
       feature's bin i gets row i of the table, the second's bin j column j,
       word by word. Every table is summed whole (6 x 6): cells past a
       feature's width are zero (codes stay below it), and only `width`
       sums are added to the run, whose next cells are another feature's.
       In C for the same reason as the loop above: inlined into
       find_best_splits, GCC kept its counters on the stack. */
    static PB_ALWAYS_INLINE void pb_fold_tables(
        const int64_t *joint, Py_ssize_t n_pairs,
        const Py_ssize_t *first_offset, const Py_ssize_t *second_offset,
        const Py_ssize_t *first_width, const Py_ssize_t *second_width,
        const int words, int64_t *run)
    {
        Py_ssize_t pair, i, j, word;
        for (pair = 0; pair < n_pairs; ++pair) {
            const int64_t *table = joint + pair * PB_PAIR_CELLS * words;
            int64_t row_sums[PB_PAIR_MAX_WIDTH * 2] = {0};
            int64_t column_sums[PB_PAIR_MAX_WIDTH * 2] = {0};
            for (i = 0; i < PB_PAIR_MAX_WIDTH; ++i)
                for (j = 0; j < PB_PAIR_MAX_WIDTH; ++j)
                    for (word = 0; word < words; ++word) {
                        const int64_t value = table[(i * PB_PAIR_MAX_WIDTH + j) * words + word];
                        row_sums[i * words + word] += value;
                        column_sums[j * words + word] += value;
                    }
            int64_t *first = run + first_offset[pair], *second = run + second_offset[pair];
            for (i = 0; i < first_width[pair] * words; ++i)
                first[i] += row_sums[i];
            for (j = 0; j < second_width[pair] * words; ++j)
                second[j] += column_sums[j];
        }
    }

    #if defined(__SSE2__)
    #include <emmintrin.h>
    /* pb_fold_tables for one-word cells with SSE2 (every x86-64): a table's
       six rows as three pairs of cells each; its column sums are the rows'
       pairs added, its row sums each row's three pairs added and the two
       halves of that; both added to the run two cells at a time where the
       features are six wide (Numerai's five levels and the missing bin),
       cell by cell otherwise. The same integer sums. The loop it replaces
       zeroed two arrays per table (a `rep stos`) and added its sums cell by
       cell: 4-5% of a small fit (perf, 2026-11-27 c4248d6). */
    _Static_assert(PB_PAIR_MAX_WIDTH == 6, "pb_fold_tables_one_word takes rows as three pairs");
    static PB_ALWAYS_INLINE void pb_fold_tables_one_word(
        const int64_t *joint, Py_ssize_t n_pairs,
        const Py_ssize_t *first_offset, const Py_ssize_t *second_offset,
        const Py_ssize_t *first_width, const Py_ssize_t *second_width, int64_t *run)
    {
        Py_ssize_t pair, i;
        for (pair = 0; pair < n_pairs; ++pair) {
            const int64_t *table = joint + pair * PB_PAIR_CELLS;
            __m128i column01 = _mm_setzero_si128(), column23 = column01, column45 = column01;
            __m128i row_sum[3];          /* rows (0, 1), (2, 3), (4, 5) */
            int64_t rows[PB_PAIR_MAX_WIDTH], columns[PB_PAIR_MAX_WIDTH];
            for (i = 0; i < PB_PAIR_MAX_WIDTH; i += 2) {
                const __m128i *upper = (const __m128i *)(table + i * PB_PAIR_MAX_WIDTH);
                const __m128i *lower = (const __m128i *)(table + (i + 1) * PB_PAIR_MAX_WIDTH);
                const __m128i a0 = _mm_loadu_si128(upper), a1 = _mm_loadu_si128(upper + 1);
                const __m128i a2 = _mm_loadu_si128(upper + 2);
                const __m128i b0 = _mm_loadu_si128(lower), b1 = _mm_loadu_si128(lower + 1);
                const __m128i b2 = _mm_loadu_si128(lower + 2);
                column01 = _mm_add_epi64(column01, _mm_add_epi64(a0, b0));
                column23 = _mm_add_epi64(column23, _mm_add_epi64(a1, b1));
                column45 = _mm_add_epi64(column45, _mm_add_epi64(a2, b2));
                const __m128i a = _mm_add_epi64(_mm_add_epi64(a0, a1), a2);
                const __m128i b = _mm_add_epi64(_mm_add_epi64(b0, b1), b2);
                /* (a.low + a.high, b.low + b.high) */
                row_sum[i / 2] = _mm_add_epi64(_mm_unpacklo_epi64(a, b),
                                               _mm_unpackhi_epi64(a, b));
            }
            int64_t *first = run + first_offset[pair], *second = run + second_offset[pair];
            if (first_width[pair] == PB_PAIR_MAX_WIDTH) {
                for (i = 0; i < 3; ++i) {
                    __m128i *cells = (__m128i *)(first + 2 * i);
                    _mm_storeu_si128(cells, _mm_add_epi64(_mm_loadu_si128(cells), row_sum[i]));
                }
            } else {
                for (i = 0; i < 3; ++i)
                    _mm_storeu_si128((__m128i *)(rows + 2 * i), row_sum[i]);
                for (i = 0; i < first_width[pair]; ++i)
                    first[i] += rows[i];
            }
            if (second_width[pair] == PB_PAIR_MAX_WIDTH) {
                __m128i *cells = (__m128i *)second;
                _mm_storeu_si128(cells, _mm_add_epi64(_mm_loadu_si128(cells), column01));
                _mm_storeu_si128(cells + 1, _mm_add_epi64(_mm_loadu_si128(cells + 1), column23));
                _mm_storeu_si128(cells + 2, _mm_add_epi64(_mm_loadu_si128(cells + 2), column45));
            } else {
                _mm_storeu_si128((__m128i *)columns, column01);
                _mm_storeu_si128((__m128i *)(columns + 2), column23);
                _mm_storeu_si128((__m128i *)(columns + 4), column45);
                for (i = 0; i < second_width[pair]; ++i)
                    second[i] += columns[i];
            }
        }
    }
    #endif

    /* words: 1 or 2, as pb_add_row_pairs' hessian says. */
    static PB_NOINLINE void pb_fold_pairs(
        const int64_t *joint, Py_ssize_t n_pairs,
        const Py_ssize_t *first_offset, const Py_ssize_t *second_offset,
        const Py_ssize_t *first_width, const Py_ssize_t *second_width,
        Py_ssize_t words, int64_t *run)
    {
        if (words == 2)
            pb_fold_tables(joint, n_pairs, first_offset, second_offset, first_width,
                           second_width, 2, run);
        else
    #if defined(__SSE2__)
            pb_fold_tables_one_word(joint, n_pairs, first_offset, second_offset, first_width,
                                    second_width, run);
    #else
            pb_fold_tables(joint, n_pairs, first_offset, second_offset, first_width,
                           second_width, 1, run);
    #endif
    }
    """
    # the C loop's pair layout; _histogram.pyx checks it equals PAIR_MAX_WIDTH
    const int PB_PAIR_MAX_WIDTH
    void pb_add_row_pairs(int64_t** runs, const row_index_t* row_ids, Py_ssize_t n,
                          const uint8_t** first, const uint8_t** second, Py_ssize_t n_pairs,
                          const int64_t* packed, const int64_t* hessian) noexcept nogil
    void pb_add_era_pairs(const int32_t* codes, Py_ssize_t code_stride, int32_t first_row,
                          Py_ssize_t n, int32_t low_slot, uint32_t n_slots, int64_t* tables,
                          int64_t* trash, const uint8_t** first, const uint8_t** second,
                          Py_ssize_t n_pairs, const int64_t* packed,
                          const int64_t* hessian, int scattered) noexcept nogil
    void pb_add_era_singles(const int32_t* codes, Py_ssize_t code_stride, int32_t first_row,
                            Py_ssize_t n, int32_t low_slot, uint32_t n_slots, int64_t* runs,
                            Py_ssize_t run_cells, int64_t* trash, const uint8_t** column,
                            const Py_ssize_t* offset, Py_ssize_t n_columns,
                            const int64_t* packed, const int64_t* hessian,
                            int scattered) noexcept nogil
    # fold_pairs: a slot's joint cells (n_pairs * PAIR_CELLS * words) added to
    # its features' cells in ``run``; offsets (times words) and widths per pair
    void fold_pairs "pb_fold_pairs" (
        const int64_t* joint, Py_ssize_t n_pairs, const Py_ssize_t* first_offset,
        const Py_ssize_t* second_offset, const Py_ssize_t* first_width,
        const Py_ssize_t* second_width, Py_ssize_t words, int64_t* run) noexcept nogil


cdef inline void add_era_singles(
        const bin_code_t[:, ::1] X_binned, const node_index_t[:, ::1] node_of_row,
        Py_ssize_t tree, row_index_t first_row, Py_ssize_t n, Py_ssize_t slot_start,
        Py_ssize_t first_slot, Py_ssize_t last_slot, int64_t* era_cells, Py_ssize_t run_cells,
        int64_t* scratch, const bin_code_t** column, const Py_ssize_t* offset,
        Py_ssize_t n_columns, const fixed_point_rows* rows, bint scattered) noexcept nogil:
    """One tree's era of consecutive rows ``first_row ..`` added to the runs
    of its slots ``slot_start + first_slot .. slot_start + last_slot`` without
    a list (pb_add_era_singles); the scratch's single-feature trash run is
    cleared first (so its sums never grow past an era's)."""
    cdef int64_t* trash = scratch + PAIR_TABLE_CELLS
    if bin_code_t is uint8_t:
        memset(trash, 0, run_cells * sizeof(int64_t))
        pb_add_era_singles(&node_of_row[0, tree], node_of_row.shape[1], first_row, n,
                           <int32_t>(slot_start + first_slot),
                           <uint32_t>(last_slot - first_slot + 1),
                           era_cells + first_slot * run_cells, run_cells, trash,
                           <const uint8_t**>column, offset, n_columns, rows.packed,
                           rows.hessian_fixed, scattered)


cdef inline void build_pack_histograms(
        const bin_code_t[:, ::1] X_binned,     # IN  (n_features, n_rows)
        const feature_index_t* block_features,    # IN  (n_block,) features of the block
        Py_ssize_t n_block,
        const bin_index_t[::1] n_bins,            # IN  (n_features,) width = n_bins + 1
        const fixed_point_rows* rows,           # IN  the round's gradients (view_fixed_point)
        const row_index_t[::1] active_rows,       # IN  rows in some open slot, ascending
        const offset_t[::1] era_offsets,        # IN  (n_eras + 1,) era e's active rows
        Py_ssize_t era_start,                   # IN  eras [era_start, era_end) are
        Py_ssize_t era_end,                     #     summed here (their cells only)
        const node_index_t[:, ::1] node_of_row,   # IN  (n_rows, pack_size) slot or -1
        const uint8_t* tree_uses_feature,       # IN  (n_block, pack_size), row-major
        Py_ssize_t slot_start,                  # IN  slots [slot_start, slot_end)
        Py_ssize_t slot_end,                    #     are histogrammed here,
        Py_ssize_t n_slots,                     #     of the pass's n_slots
        const Py_ssize_t* feature_offset,       # IN  (n_block,) from block_cell_offsets (of
                                                #     a block, or a part of its offsets), or
                                                #     each tree's (tree_cell_offsets)
        Py_ssize_t tree_offset_stride,          # IN  0: one offset table for every tree;
                                                #     MAX_FEATURES_PER_PASS: tree t's table at
                                                #     feature_offset + t * tree_offset_stride
                                                #     (the whole block, no era sharing, no
                                                #     tree_extra_feature)
        Py_ssize_t slot_stride,                 # IN  cells per (era, slot): block_cell_offsets
        const uint8_t* slot_kind,               # IN  (n_slots,) SLOT_* or NULL: build every slot
        const uint8_t* tree_extra_feature,      # IN  (n_block, pack_size): features a
                                                #     SLOT_DERIVE slot sums itself (with slot_kind)
        bint share_equal_rows,                  # IN  sum an era once for every tree whose
                                                #     slot holds all its rows (see below)
        int64_t* hist,                          # OUT cell (era, slot, feature j, bin) at
                                                #     ((era * n_group + slot) * slot_stride
                                                #      + feature_offset[j] + bin) * words
        int64_t* pair_scratch,                  # -   PAIR_SCRATCH_CELLS cells of the calling
                                                #     thread for feature pairs, or NULL: none
        const int32_t* slot_tree,               # IN  (n_slots,) each slot's tree, grouped by
                                                #     tree, or NULL: no feature pairs, and
                                                #     every tree listed in every group
        const uint8_t* era_tree_rows,           # IN  (n_eras, pack_size) 0: the tree has no
                                                #     row in the era (not listed), or NULL
        bint scattered_samples,                 # IN  the trees sample rows one by one
                                                #     (pb_run_of_code), not whole eras
) noexcept nogil:
    """Sum (gradient, row count[, hessian]) per (era, slot, feature, bin), for
    the eras ``[era_start, era_end)``: an era's cells are its own, so threads
    given different eras never write the same cell (find_best_splits).

    A cell is ``words`` int64: the packed gradient sum and count, then the
    fixed-point hessian sum when hessians differ between rows.

    Cell layout, era -> slot -> feature -> bin: the cells one row updates (its
    slot's, every feature of the block) are one contiguous run of
    ``slot_stride`` cells, a few cache lines. The feature-major layout it
    replaced put a row's cells one feature-block apart: at depth 3+ those
    strides were multiples of 4 KiB, so every feature's cell fell in the same
    L1 set and a different page (7-8 ns per update against 1.2-1.4 here;
    benchmarks/RESULTS.md, bench_histogram.py).

    Loop order, era -> tree -> row -> feature (why, measured in
    benchmarks/RESULTS.md): within one tree the features a tree may split on
    are a fixed list, so the innermost loop has a fixed trip count and no
    data-dependent branch, and the row's slot and packed value are read once
    for all of them. The row-major order it replaces (one row, every tree)
    branched per (row, tree, feature) on "is the row in this tree, may the
    tree use this feature", which mispredicted at ~2 updates per row. An era's
    rows, columns and cells (era-major layout) stay in cache while the pack's
    trees take turns over them; rows are read forwards within the era.

    ``share_equal_rows``: when every active row of an era has the same codes
    in every tree (the roots of a pack whose trees sample whole eras, as
    ``era_subsample`` draws them), the built slots among them hold the same
    rows, so their cells are equal: the era is summed once, into the first
    such tree's run, for every feature any of them uses, and the run is
    copied to the others (at Numerai scale a root era was summed for ~6 trees
    of 25 features each, now once for ~49). The cells of features a tree
    does not use then hold the sums too (nothing reads them; without the
    option they stay zero). The check is one comparison of a row's codes with
    the era's first row's, and stops at the first difference.
    """
    cdef Py_ssize_t pack_size = node_of_row.shape[1]
    cdef Py_ssize_t n_group = slot_end - slot_start
    cdef Py_ssize_t words = rows.words
    cdef Py_ssize_t run_cells = slot_stride * words
    cdef Py_ssize_t era, position, row, tree, block, n_used
    cdef size_t slot
    cdef const bin_code_t* column[MAX_FEATURES_PER_PASS]
    cdef Py_ssize_t offset[MAX_FEATURES_PER_PASS]
    cdef const bin_code_t* extra_column[MAX_FEATURES_PER_PASS]
    cdef Py_ssize_t extra_offset[MAX_FEATURES_PER_PASS]
    cdef Py_ssize_t n_extra, chunk_start, chunk_end, n_listed, n_extra_listed
    cdef int64_t* listed_run[ROW_CHUNK]
    cdef row_index_t listed_row[ROW_CHUNK]
    cdef int64_t* extra_run[ROW_CHUNK]
    cdef row_index_t extra_row[ROW_CHUNK]
    cdef uint8_t kind
    cdef int64_t* era_cells
    cdef uint8_t sharing[MAX_PACK_SIZE]
    cdef Py_ssize_t source_tree, first_row, other
    cdef bint uses
    # Feature pairs (PAIR_MAX_WIDTH): the tree's narrow columns two by two,
    # the rest alone; joint cells of the tree's slots in pair_cells.
    cdef Py_ssize_t used_width[MAX_FEATURES_PER_PASS]
    cdef const bin_code_t* single_column[MAX_FEATURES_PER_PASS]
    cdef Py_ssize_t single_offset[MAX_FEATURES_PER_PASS]
    cdef const bin_code_t* pair_first[MAX_FEATURES_PER_PASS]
    cdef const bin_code_t* pair_second[MAX_FEATURES_PER_PASS]
    cdef Py_ssize_t pair_first_offset[MAX_FEATURES_PER_PASS]
    cdef Py_ssize_t pair_second_offset[MAX_FEATURES_PER_PASS]
    cdef Py_ssize_t pair_first_width[MAX_FEATURES_PER_PASS]
    cdef Py_ssize_t pair_second_width[MAX_FEATURES_PER_PASS]
    cdef int64_t* pair_run[ROW_CHUNK]
    cdef int64_t* pair_cells = NULL  # pair_scratch when the block has pairs
    cdef Py_ssize_t n_single, n_pairs, pending, index, n_narrow = 0
    cdef Py_ssize_t min_slot, max_slot, pair_slot, group_slot, pair_run_cells = 0
    cdef Py_ssize_t tree_first_slot[MAX_PACK_SIZE]
    cdef Py_ssize_t tree_last_slot[MAX_PACK_SIZE]
    cdef bint consecutive, pairs_free, singles_free
    cdef const fixed_point_rows* tree_rows
    if n_block == 0:
        return
    # Each tree's first and last slot of the group (slots are grouped by
    # tree: the range holds its slots only). A tree without one is not
    # listed at all: in slot groups (find_best_splits' budget) most trees
    # have no slot in a given group, and listing their rows found nothing.
    for tree in range(pack_size):
        # without slot_tree, any slot of the group
        tree_first_slot[tree] = n_group if slot_tree != NULL else 0
        tree_last_slot[tree] = -1 if slot_tree != NULL else n_group - 1
    if slot_tree != NULL:
        for group_slot in range(n_group):
            tree = slot_tree[group_slot + slot_start]
            if 0 <= tree < pack_size:
                tree_first_slot[tree] = min(tree_first_slot[tree], group_slot)
                tree_last_slot[tree] = max(tree_last_slot[tree], group_slot)
    if bin_code_t is uint8_t:
        if pair_scratch != NULL and slot_tree != NULL:
            for block in range(n_block):
                if n_bins[block_features[block]] + 1 <= PAIR_MAX_WIDTH:
                    n_narrow += 1
            if n_narrow >= 2:
                pair_cells = pair_scratch
    # Zero this call's cells only: its eras' and, within each (era, slot) run,
    # its features' (a contiguous stretch: the features of a block are laid
    # out in order), so that calls on other eras or features run alongside.
    cdef Py_ssize_t first_cell = feature_offset[0] * words
    cdef Py_ssize_t end_cell = (feature_offset[n_block - 1]
                                + n_bins[block_features[n_block - 1]] + 1) * words
    if tree_offset_stride != 0:  # runs per tree: the whole block, the whole runs
        first_cell = 0
        end_cell = run_cells
    if first_cell == 0 and end_cell == run_cells:  # the whole runs: one stretch
        memset(hist + era_start * n_group * run_cells, 0,
               (era_end - era_start) * n_group * run_cells * sizeof(int64_t))
    else:
        for era in range(era_start, era_end):
            for slot in range(<size_t>n_group):
                memset(hist + (era * n_group + slot) * run_cells + first_cell, 0,
                       (end_cell - first_cell) * sizeof(int64_t))
    for era in range(era_start, era_end):
        if era_offsets[era] == era_offsets[era + 1]:
            continue
        era_cells = hist + era * n_group * run_cells
        source_tree = -1
        if share_equal_rows:
            source_tree = shared_source(active_rows, era_offsets[era], era_offsets[era + 1],
                                        node_of_row, slot_start, n_group, slot_kind,
                                        rows.tree_output, sharing)
        for tree in range(pack_size):
            if source_tree >= 0 and sharing[tree] and tree != sharing[tree] - 1:
                continue  # its source's cells, copied below
            if tree_last_slot[tree] < tree_first_slot[tree]:
                continue  # no slot of this tree in the group
            if era_tree_rows != NULL and not era_tree_rows[era * pack_size + tree]:
                continue  # an era the tree did not draw: none of its rows is in a slot
            tree_rows = rows_of_tree(rows, tree)
            n_used = 0
            n_extra = 0
            n_single = 0
            for block in range(n_block):
                uses = tree_uses_feature[block * pack_size + tree]
                if source_tree >= 0 and sharing[tree] == tree + 1:
                    for other in range(pack_size):
                        uses = uses or (sharing[other] == tree + 1
                                        and tree_uses_feature[block * pack_size + other])
                if uses:
                    column[n_used] = &X_binned[block_features[block], 0]
                    offset[n_used] = feature_offset[tree * tree_offset_stride + block] * words
                    used_width[n_used] = n_bins[block_features[block]] + 1
                    n_used += 1
                    if slot_kind != NULL and tree_extra_feature[block * pack_size + tree]:
                        extra_column[n_extra] = column[n_used - 1]
                        extra_offset[n_extra] = offset[n_used - 1]
                        n_extra += 1
            if n_used == 0:
                continue
            n_pairs = 0
            if pair_cells != NULL:
                min_slot = tree_first_slot[tree]
                max_slot = tree_last_slot[tree]
                if (max_slot >= min_slot and max_slot - min_slot < PAIR_MAX_SLOTS
                        and era_offsets[era + 1] - era_offsets[era]
                        >= PAIR_MIN_ROWS_PER_SLOT * (max_slot - min_slot + 1)):
                    n_single = 0
                    pending = -1
                    for index in range(n_used):
                        if used_width[index] > PAIR_MAX_WIDTH:
                            single_column[n_single] = column[index]
                            single_offset[n_single] = offset[index]
                            n_single += 1
                        elif pending < 0:
                            pending = index
                        else:
                            pair_first[n_pairs] = column[pending]
                            pair_first_offset[n_pairs] = offset[pending]
                            pair_first_width[n_pairs] = used_width[pending]
                            pair_second[n_pairs] = column[index]
                            pair_second_offset[n_pairs] = offset[index]
                            pair_second_width[n_pairs] = used_width[index]
                            n_pairs += 1
                            pending = -1
                    if pending >= 0 and n_single == 0 and n_pairs > 0:
                        # The odd narrow feature out paired with itself: its
                        # codes fill the table's diagonal, folded into its
                        # cells once (no second feature: width 0), so every
                        # feature is paired and the era pass needs no list.
                        pair_first[n_pairs] = column[pending]
                        pair_first_offset[n_pairs] = offset[pending]
                        pair_first_width[n_pairs] = used_width[pending]
                        pair_second[n_pairs] = column[pending]
                        pair_second_offset[n_pairs] = offset[pending]
                        pair_second_width[n_pairs] = 0
                        n_pairs += 1
                    elif pending >= 0:
                        single_column[n_single] = column[pending]
                        single_offset[n_single] = offset[pending]
                        n_single += 1
                    pair_run_cells = n_pairs * PAIR_CELLS * words
                    if n_pairs > 0:
                        # the tree's slots' tables, then the trash (era pairs)
                        memset(pair_cells, 0,
                               (max_slot - min_slot + 2) * pair_run_cells * sizeof(int64_t))
            # The era's rows in chunks: each chunk's rows of this tree (and
            # group) are listed first with their run of cells, then summed
            # four at a time (add_rows). With subtraction the slot's kind says
            # which list a row joins: every feature, or only the extra ones.
            chunk_start = era_offsets[era]
            # Or, where the era's rows are consecutive and no slot is derived,
            # no list: each row's cells from its code, rows outside the
            # tree's slots of the group into trash cells (summed, never
            # read). The listing cost a third of a shallow depth's pass
            # (RESULTS.md, 2026-11-27 d523973). Features summed alone go
            # without a list only where the group holds every slot of the
            # tree (else most rows would be added to the trash: the pairs'
            # joint tables, a few cells per row, are taken either way).
            consecutive = (slot_kind == NULL and era_offsets[era + 1] - era_offsets[era]
                           == active_rows[era_offsets[era + 1] - 1]
                           - active_rows[era_offsets[era]] + 1)
            pairs_free = consecutive and n_pairs > 0
            singles_free = False
            if bin_code_t is uint8_t:
                singles_free = (consecutive and pair_scratch != NULL
                                and run_cells <= SINGLE_TRASH_CELLS
                                and tree_last_slot[tree] >= tree_first_slot[tree]
                                and ((slot_start == 0 and slot_end == n_slots)
                                     or (slot_tree != NULL
                                         and (slot_start == 0
                                              or slot_tree[slot_start - 1] != tree)
                                         and (slot_end == n_slots
                                              or slot_tree[slot_end] != tree))))
            if pairs_free and (n_single == 0 or singles_free):
                pb_add_era_pairs(&node_of_row[0, tree], pack_size,
                                 active_rows[era_offsets[era]],
                                 era_offsets[era + 1] - era_offsets[era],
                                 <int32_t>(slot_start + min_slot),
                                 <uint32_t>(max_slot - min_slot + 1), pair_cells,
                                 pair_cells + (max_slot - min_slot + 1) * pair_run_cells,
                                 <const uint8_t**>pair_first, <const uint8_t**>pair_second,
                                 n_pairs, tree_rows.packed, tree_rows.hessian_fixed,
                                 scattered_samples)
                if n_single > 0:
                    add_era_singles(X_binned, node_of_row, tree, active_rows[era_offsets[era]],
                                    era_offsets[era + 1] - era_offsets[era], slot_start,
                                    tree_first_slot[tree], tree_last_slot[tree], era_cells,
                                    run_cells, pair_scratch, single_column, single_offset,
                                    n_single, tree_rows, scattered_samples)
                chunk_start = era_offsets[era + 1]
            elif n_pairs == 0 and singles_free:
                add_era_singles(X_binned, node_of_row, tree, active_rows[era_offsets[era]],
                                era_offsets[era + 1] - era_offsets[era], slot_start,
                                tree_first_slot[tree], tree_last_slot[tree], era_cells,
                                run_cells, pair_scratch, column, offset, n_used, tree_rows,
                                scattered_samples)
                chunk_start = era_offsets[era + 1]
            while chunk_start < era_offsets[era + 1]:
                chunk_end = min(chunk_start + ROW_CHUNK, era_offsets[era + 1])
                n_listed = 0
                n_extra_listed = 0
                for position in range(chunk_start, chunk_end):
                    row = active_rows[position]
                    # Unsigned: slot -1 (row not in the tree) and slots of
                    # other groups both fall outside [0, n_group).
                    slot = <size_t>(node_of_row[row, tree] - slot_start)
                    if slot >= <size_t>n_group:
                        continue
                    kind = SLOT_BUILD if slot_kind == NULL else slot_kind[slot + slot_start]
                    if kind == SLOT_BUILD:
                        listed_run[n_listed] = era_cells + slot * run_cells
                        if n_pairs > 0:
                            pair_run[n_listed] = pair_cells + (<Py_ssize_t>slot - min_slot) \
                                * pair_run_cells
                        listed_row[n_listed] = row
                        n_listed += 1
                    elif kind == SLOT_DERIVE and n_extra > 0:
                        extra_run[n_extra_listed] = era_cells + slot * run_cells
                        extra_row[n_extra_listed] = row
                        n_extra_listed += 1
                if n_pairs > 0:
                    pb_add_row_pairs(pair_run, listed_row, n_listed,
                                     <const uint8_t**>pair_first, <const uint8_t**>pair_second,
                                     n_pairs, tree_rows.packed, tree_rows.hessian_fixed)
                    if n_single > 0:
                        add_rows(listed_run, listed_row, n_listed, single_column,
                                 single_offset, n_single, tree_rows)
                else:
                    add_rows(listed_run, listed_row, n_listed, column, offset, n_used, tree_rows)
                add_rows(extra_run, extra_row, n_extra_listed, extra_column, extra_offset,
                         n_extra, tree_rows)
                chunk_start = chunk_end
            if n_pairs > 0:
                for pair_slot in range(min_slot, max_slot + 1):
                    if slot_tree[pair_slot + slot_start] == tree and (
                            slot_kind == NULL or slot_kind[pair_slot + slot_start] == SLOT_BUILD):
                        fold_pairs(pair_cells + (pair_slot - min_slot) * pair_run_cells, n_pairs,
                                   pair_first_offset, pair_second_offset, pair_first_width,
                                   pair_second_width, words, era_cells + pair_slot * run_cells)
        if source_tree >= 0:
            first_row = active_rows[era_offsets[era]]
            for tree in range(pack_size):
                if sharing[tree] and tree != sharing[tree] - 1:
                    memcpy(era_cells + (node_of_row[first_row, tree] - slot_start) * run_cells
                           + first_cell,
                           era_cells + (node_of_row[first_row, sharing[tree] - 1] - slot_start)
                           * run_cells + first_cell,
                           (end_cell - first_cell) * sizeof(int64_t))


cdef inline Py_ssize_t shared_source(
        const row_index_t[::1] active_rows,
        Py_ssize_t start,                       # IN  the era's active rows are
        Py_ssize_t end,                         #     active_rows[start:end], start < end
        const node_index_t[:, ::1] node_of_row,
        Py_ssize_t slot_start,
        Py_ssize_t n_group,
        const uint8_t* slot_kind,
        const int32_t* tree_output,             # IN  (pack_size,) each tree's output, or NULL
        uint8_t* sharing,                       # OUT (pack_size,) 1 + the source tree of each
                                                #     tree whose slot is built here and holds
                                                #     every row of the era; 0: none
) noexcept nogil:
    """For build_pack_histograms' ``share_equal_rows``: if every active row
    of the era has the first row's codes in every tree, the trees whose
    slots are built in this group share their cells with the first such
    tree of their output (the source; trees of different outputs sum
    different gradients), where at least two do: ``sharing`` says which,
    and the first source is returned; otherwise -1."""
    cdef Py_ssize_t pack_size = node_of_row.shape[1], tree, position, output
    cdef Py_ssize_t source = -1
    cdef const node_index_t* first = &node_of_row[active_rows[start], 0]
    cdef size_t slot
    cdef Py_ssize_t output_source[MAX_PACK_SIZE]
    cdef uint8_t members[MAX_PACK_SIZE]
    for tree in range(pack_size):
        output_source[tree] = -1
        members[tree] = 0
    for tree in range(pack_size):
        slot = <size_t>(first[tree] - slot_start)
        sharing[tree] = 0
        if slot < <size_t>n_group and (
                slot_kind == NULL or slot_kind[slot + slot_start] == SLOT_BUILD):
            output = tree_output[tree] if tree_output != NULL else 0
            if output_source[output] < 0:
                output_source[output] = tree
            sharing[tree] = <uint8_t>(output_source[output] + 1)
            members[output_source[output]] += 1
    for tree in range(pack_size):
        if sharing[tree] and members[sharing[tree] - 1] < 2:
            sharing[tree] = 0     # alone in its output: nothing to share
        elif sharing[tree] and source < 0:
            source = tree
    if source < 0:
        return -1
    for position in range(start + 1, end):
        if memcmp(&node_of_row[active_rows[position], 0], first,
                  pack_size * sizeof(node_index_t)) != 0:
            return -1
    return source


cdef inline void derive_slots(
        const int64_t* parent,                  # IN  the parent depth's cells of this block,
                                                #     (n_eras, n_parent_slots, slot_stride * words)
        Py_ssize_t n_parent_slots,
        int64_t* hist,                          # IN/OUT this depth's cells of the block,
                                                #     (n_eras, n_slots, slot_stride * words)
        Py_ssize_t n_slots,
        Py_ssize_t era_start,                   # IN  eras [era_start, era_end) only
        Py_ssize_t era_end,
        Py_ssize_t slot_stride,
        Py_ssize_t words,
        const uint8_t* slot_kind,               # IN  (n_slots,) SLOT_*
        const int32_t* slot_parent,             # IN  (n_slots,) parent slot; sibling = slot ^ 1
        const int32_t* slot_tree,               # IN  (n_slots,)
        Py_ssize_t pack_size,
        const feature_index_t* block_features,  # IN  (n_block,)
        Py_ssize_t n_block,
        const bin_index_t[::1] n_bins,          # IN  (n_features,) width = n_bins + 1
        const Py_ssize_t* feature_offset,       # IN  (n_block,)
        const uint8_t* tree_uses_feature,       # IN  (n_block, pack_size)
        const uint8_t* tree_extra_feature,      # IN  (n_block, pack_size)
) noexcept nogil:
    """Cells of every SLOT_DERIVE slot = its parent's minus its built
    sibling's, for the features the parent's tree also used (the others the
    pass summed directly). Exact: cells are integers and the packing
    (gradient << count_bits | count) is linear."""
    cdef Py_ssize_t slot, era, member, cell, tree, run = slot_stride * words
    cdef const int64_t* from_parent
    cdef const int64_t* from_sibling
    cdef int64_t* target
    for slot in range(n_slots):
        if slot_kind[slot] != SLOT_DERIVE:
            continue
        tree = slot_tree[slot]
        for member in range(n_block):
            if (not tree_uses_feature[member * pack_size + tree]
                    or tree_extra_feature[member * pack_size + tree]):
                continue
            for era in range(era_start, era_end):
                from_parent = parent + (era * n_parent_slots + slot_parent[slot]) * run \
                    + feature_offset[member] * words
                from_sibling = hist + (era * n_slots + (slot ^ 1)) * run \
                    + feature_offset[member] * words
                target = hist + (era * n_slots + slot) * run + feature_offset[member] * words
                for cell in range((n_bins[block_features[member]] + 1) * words):
                    target[cell] = from_parent[cell] - from_sibling[cell]


cdef inline void unpack_tile(
        const int64_t* cells,           # IN  cell (era, bin) at cells[(era * era_stride + bin) * words]
        Py_ssize_t era_stride,
        Py_ssize_t n_eras,
        Py_ssize_t width,
        const fixed_point_rows* rows,   # IN  cell format and scales
        hist_entry* tile,               # OUT cell (era, bin) at tile[era * tile_era_stride + bin]
        Py_ssize_t tile_era_stride,
        bint prefix,                    # IN  non-missing bins as per-era prefix sums
) noexcept nogil:
    """One (slot, feature)'s cells as float (g, h, count) sums, for scoring.

    With ``prefix``, non-missing bin t holds the era's sum over bins 0..t (the
    left child at threshold t) and the missing bin (``width - 1``) its own
    sum: what score_tile reads. The running sum is taken on the packed
    integers -- the count bits never carry into the gradient bits, since an
    era's count fits them -- so it costs one add per bin.

    Exact: every sum is an integer below 2**53 times a power of two."""
    cdef Py_ssize_t era, bin_idx, words = rows.words, last = width - 1
    cdef int count_bits = rows.count_bits
    cdef double inverse_gradient_scale = rows.inverse_gradient_scale
    cdef double inverse_hessian_scale = rows.inverse_hessian_scale
    cdef double constant_hessian = rows.constant_hessian
    cdef int64_t cell, hessian, running, running_hessian
    cdef int64_t mask = ((<int64_t>1) << count_bits) - 1
    cdef const int64_t* source
    cdef hist_entry* target
    for era in range(n_eras):
        source = cells + era * era_stride * words
        target = tile + era * tile_era_stride
        # A tile's eras lie a whole (era, slot, feature) row of the block
        # apart -- 100s of KiB at depth 5, a new page each -- which the
        # hardware prefetcher does not follow: ask for them ahead (find_best_splits
        # at depth 5 of a pack of 8: 25% less CPU time, benchmarks/RESULTS.md).
        # Both ends of the era's cells: a feature's 6-cell run (48 bytes)
        # straddles two cache lines one time in three or more, and the
        # prefetch of its first line alone left a third of the tile loop
        # waiting on the second (perf, default fractions: tile loop 13% ->
        # 8-9% of a fit; 16 or 24 eras ahead did no better).
        if era + PREFETCH_ERAS < n_eras:
            __builtin_prefetch(source + PREFETCH_ERAS * era_stride * words)
            __builtin_prefetch(source + PREFETCH_ERAS * era_stride * words + width * words - 1)
        running = 0
        running_hessian = 0
        for bin_idx in range(width):
            cell = source[bin_idx * words]
            hessian = source[bin_idx * words + 1] if words == 2 else 0
            if prefix and bin_idx < last:
                running = running + cell
                running_hessian = running_hessian + hessian
                cell = running
                hessian = running_hessian
            target[bin_idx].count = cell & mask
            target[bin_idx].sum_gradients = (cell >> count_bits) * inverse_gradient_scale
            if words == 1:
                target[bin_idx].sum_hessians = target[bin_idx].count * constant_hessian
            else:
                target[bin_idx].sum_hessians = hessian * inverse_hessian_scale


cdef inline int64_t packed_units(uint64_t cell, int count_bits) noexcept nogil:
    """A packed cell's gradient units: an arithmetic shift, written as a
    logical shift of cell + 2**63 less 2**(63 - count_bits), never a shift
    of a negative number."""
    cdef uint64_t sign_bit = (<uint64_t>1) << 63
    return <int64_t>(((cell ^ sign_bit) >> count_bits) - (sign_bit >> count_bits))


cdef inline void add_to_pooled(
        const int64_t* cells,       # IN  n_cells packed cells, words int64 each
        Py_ssize_t n_cells,
        Py_ssize_t words,
        int count_bits,
        int64_t* pooled,            # IN/OUT n_cells pooled cells, words + 1 int64 each
) noexcept nogil:
    """Add packed cells to pooled ones (an era's cells summed over eras): per
    cell the gradient units (packed_units), the rows (the low count_bits)
    and, with two words, the hessian units. Unsigned adds: the sums wrap
    rather than trap."""
    cdef uint64_t mask = ((<uint64_t>1) << count_bits) - 1
    cdef const uint64_t* source = <const uint64_t*>cells
    cdef uint64_t* target = <uint64_t*>pooled
    cdef Py_ssize_t c, pw = words + 1
    cdef uint64_t cell
    for c in range(n_cells):
        cell = source[c * words]
        target[c * pw] += <uint64_t>packed_units(cell, count_bits)
        target[c * pw + 1] += cell & mask
        if words == 2:
            target[c * pw + 2] += source[c * 2 + 1]
