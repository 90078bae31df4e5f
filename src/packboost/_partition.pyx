# cython: language_level=3
"""Which open node each row is in, per tree of the pack; node sums.

# Notes:
Instead of keeping each node's rows in a segment of an index array, a pack
keeps one small table, ``node_of_row[row, tree]``: the *slot* (index in the
frontier of open nodes) that the row reaches in that tree. Rows stay in their
era-sorted order for good, so histogram passes read every column in memory
order, and "partitioning" after a depth is one pass that rewrites the table.
Codes:

    slot >= 0          a row of the tree's sample, in open node ``slot``
    -2 - slot (<= -2)  a row the tree did not sample, routed along anyway
    -1                 the row's node became a leaf (see ``leaf_of_row``)

Every kernel that sums or histograms rows skips negative codes, so unsampled
rows cost only their routing; they are routed so that, when the pack is
grown, ``leaf_of_row[row, tree]`` holds every training row's leaf and the
prediction update is a table lookup instead of a walk down every tree.

    slot k splits on (feature, threshold, missing side)  ->  row goes to slot
        left_child_slot[k] or left_child_slot[k] + 1 of the next frontier
    slot k does not split (it became a leaf)              ->  -1, and the
        leaf's node id in its tree goes to leaf_of_row

Rows are independent, so the pass is parallel and deterministic.
"""

import numpy as np

from cython.parallel cimport prange
from libc.stdint cimport uint8_t, int32_t, uint32_t, int64_t
from libc.string cimport memmove

from packboost.tree cimport bin_code_t, feature_index_t, bin_index_t, node_index_t
from packboost._types cimport gradient_t, row_index_t, offset_t
from packboost._slot_sums cimport (SUM_CHUNKS, TRASH_ROWS, add_row_to_slot, add_rows_to_chunk,
                                   root_chunk_sums, ROOT_LANES, slot_or_trash,
                                   unsampled_if)
from packboost._histogram cimport MAX_PACK_SIZE, __builtin_prefetch
from packboost._tasks cimport ROWS_PER_TASK
from packboost._route cimport (route_vector_supported, route_entries, ROUTE_MISSING_SHIFT,
                               ROUTE_MISSING_RIGHT_SHIFT, ROUTE_LEFT_SHIFT, ROUTE_TRASH_SLOTS,
                               ROUTE_LANE_CHILDREN, ROUTE_LANE_CHILDREN_512,
                               route_lanes_512_supported)

# route_rows routes eight (row, tree) entries at a time where the CPU has
# AVX2 (_route.pxd); False: the scalar loop everywhere (the same numbers).
VECTOR_ROUTE = True


def start_tree(
        node_index_t[:, ::1] node_of_row,            # OUT column `tree` (n_rows, pack_size)
        const row_index_t[::1] sample,               # IN  the tree's rows
        Py_ssize_t tree,
        int n_threads,
):
    """Put every row in the root of ``tree`` (slot ``tree``): the sampled
    rows as ``tree``, the others as ``-2 - tree`` (routed, never summed)."""
    cdef Py_ssize_t n_rows = node_of_row.shape[0], row, position
    cdef node_index_t unsampled = <node_index_t>(-2 - tree), sampled = <node_index_t>tree
    if not 0 <= tree < node_of_row.shape[1]:
        raise ValueError(f"tree {tree} is not in a pack of {node_of_row.shape[1]}")
    for row in prange(n_rows, nogil=True, schedule='static',
                      num_threads=max(1, min(n_threads, n_rows))):
        node_of_row[row, tree] = unsampled
    for position in prange(sample.shape[0], nogil=True, schedule='static',
                           num_threads=max(1, min(n_threads, sample.shape[0]))):
        node_of_row[sample[position], tree] = sampled


# What routing reads of a slot, side by side (one cache line holds 2-3
# slots): route_rows fills one per slot of the frontier.
cdef struct slot_route:
    Py_ssize_t column_start     # where the split feature's codes start in X_binned
                                # (feature * n_rows), or -1: the slot does not split
    int32_t threshold           # non-missing codes <= threshold go left
    int32_t missing_code        # the feature's missing code (its n_bins)
    int32_t left_child          # the left child's slot; the right one's is + 1
    int32_t missing_child       # the child the missing code goes to


ROUTE_DTYPE = np.dtype([("column_start", np.intp), ("threshold", np.int32),
                        ("missing_code", np.int32), ("left_child", np.int32),
                        ("missing_child", np.int32)])
if ROUTE_DTYPE.itemsize != sizeof(slot_route):
    raise ImportError("ROUTE_DTYPE does not match the slot_route struct")


cdef inline void route_row(
        const bin_code_t* codes,            # IN  the row's codes: X_binned's at its row
                                            #     (feature-major), or a row-major copy's row
        node_index_t* row_codes,            # IN/OUT (pack_size,) the row's codes
        Py_ssize_t pack_size,
        const slot_route* routes,           # IN  (n_slots,) each slot's split
        const node_index_t* slot_node,      # IN  (n_slots,) node id of each slot
        node_index_t* row_leaves,           # OUT (pack_size,) the row's leaves
        double* sums,           # IN/OUT (n_next_slots, 4) partial sums, or NULL: none
        double* squares,        # IN/OUT (n_next_slots,) partial g^2 sums, or NULL: none
        double gradient,
        double hessian,
        double squared,                     # IN  the row's squared gradient on its grid
        node_index_t trash_slot=-1,  # IN  >= 0: the trees sample rows one by one
                                     #     (route_rows' scattered_samples): no branch on
                                     #     a code's sign; the unsampled add to sums' or
                                     #     squares' trash rows from trash_slot
) noexcept nogil:
    """One row's move to its child slot in every tree (route_rows); with
    ``sums``, the row added to that slot's (g, h, count, g^2) where the tree
    sampled it -- slot_sums' numbers: a slot is one tree's, so its sums take
    the rows in row order either way. With ``squares`` instead, g^2 only
    (the same additions as the fourth sum).

    A slot's split is one ``slot_route`` (one load for what took five arrays,
    and the column's start without a multiplication); the child is chosen
    without a branch on the missing code. With ``trash_slot``, nor on the
    code's sign (sampled or not), which a row subsample makes random: the
    branch was mispredicted and the routing took 1.6x as long (RESULTS.md,
    2026-11-27 6973e8a); with whole eras it is predicted, and cheaper."""
    cdef Py_ssize_t tree
    cdef Py_ssize_t value
    cdef node_index_t code, slot, child, negative, target
    cdef const slot_route* route
    for tree in range(pack_size):
        code = row_codes[tree]
        if code == -1:
            continue
        negative = code >> 31  # -1 for an unsampled code -2 - slot, else 0
        slot = unsampled_if(code, negative)
        route = routes + slot
        if route.column_start < 0:
            row_leaves[tree] = slot_node[slot]
            row_codes[tree] = -1
            continue
        value = codes[route.column_start]
        child = route.left_child + (value > route.threshold)
        if value == route.missing_code:
            child = route.missing_child
        if trash_slot >= 0:
            row_codes[tree] = unsampled_if(child, negative)  # child, or -2 - child
            target = slot_or_trash(child, code, trash_slot, tree)
            if sums != NULL:
                add_row_to_slot(sums + 4 * target, gradient, hessian, squared)
            elif squares != NULL:
                squares[target] += squared
        elif code >= 0:
            row_codes[tree] = child
            if sums != NULL:
                add_row_to_slot(sums + 4 * child, gradient, hessian, squared)
            elif squares != NULL:
                squares[child] += squared
        else:
            row_codes[tree] = -2 - child


def slot_routes(const feature_index_t[::1] split_feature, const bin_index_t[::1] split_threshold,
                const uint8_t[::1] split_missing_left, const node_index_t[::1] left_child_slot,
                const bin_index_t[::1] n_bins, Py_ssize_t n_rows):
    """route_rows' ``slot_route`` of every slot (ROUTE_DTYPE).

    Typed loops, not NumPy expressions: a frontier has at most a few hundred
    slots, and the dozen array operations per call cost ~20 us, more than
    routing a small fit's depth (benchmarks/RESULTS.md, 2026-11-27
    fd68a67)."""
    cdef Py_ssize_t n_slots = split_feature.shape[0], slot
    cdef Py_ssize_t n_features = n_bins.shape[0]
    if not (split_threshold.shape[0] == split_missing_left.shape[0]
            == left_child_slot.shape[0] == n_slots):
        raise ValueError(f"the split arrays must all have {n_slots} entries")
    for slot in range(n_slots):
        if split_feature[slot] >= n_features:
            raise ValueError(f"split features must be below {n_features}")
    for slot in range(n_slots):
        if split_feature[slot] >= 0 and left_child_slot[slot] < 0:
            raise ValueError("a slot that splits needs a left child slot")
    routes = np.zeros(n_slots, dtype=ROUTE_DTYPE)
    if n_slots == 0:
        return routes
    cdef uint8_t[::1] route_bytes = routes.view(np.uint8)
    cdef slot_route* route = <slot_route*>&route_bytes[0]
    cdef feature_index_t feature
    for slot in range(n_slots):
        feature = split_feature[slot]
        # A slot that does not split keeps its other fields as if on
        # feature 0 (never read).
        route[slot].column_start = feature * n_rows if feature >= 0 else -1
        route[slot].threshold = split_threshold[slot]
        route[slot].missing_code = (n_bins[feature if feature >= 0 else 0]
                                    if n_features > 0 else 0)
        route[slot].left_child = left_child_slot[slot]
        route[slot].missing_child = left_child_slot[slot] + (split_missing_left[slot] == 0)
    return routes


cdef enum:
    START_BLOCK = 16384     # rows per block of start_pack (512 KiB of a pack of 8)
    PREFETCH_AHEAD = 256    # rows ahead whose split columns route_rows asks for
    PREFETCH_MIN_COLUMNS = 24  # distinct split columns from which it does


cdef inline void prefetch_columns(
        const bin_code_t* codes,                # IN  X_binned's codes, feature-major
        const Py_ssize_t* column_starts,        # IN  (n_columns,) the split columns' starts
        Py_ssize_t n_columns,
        Py_ssize_t row,
        Py_ssize_t column_rows,                 # IN  codes per column (X_binned's rows)
) noexcept nogil:
    """Ask for the line at ``row + PREFETCH_AHEAD`` of every split column
    (route_rows calls it once per line of rows)."""
    cdef Py_ssize_t k, ahead = row + PREFETCH_AHEAD
    if ahead >= column_rows:
        return
    for k in range(n_columns):
        __builtin_prefetch(codes + column_starts[k] + ahead)


cdef inline void start_block(
        node_index_t[:, ::1] node_of_row,
        const row_index_t* merged,               # every tree's sample, one after another
        const int64_t* offsets,                  # (pack_size + 1,) tree t's at [offsets[t], offsets[t + 1])
        Py_ssize_t row_start,
        Py_ssize_t row_end,
) noexcept nogil:
    cdef Py_ssize_t tree, row, low, high, middle
    cdef node_index_t sampled, unsampled
    for tree in range(node_of_row.shape[1]):
        sampled = <node_index_t>tree
        unsampled = <node_index_t>(-2 - tree)
        for row in range(row_start, row_end):
            node_of_row[row, tree] = unsampled
        # the tree's first sampled row at or after row_start
        low = offsets[tree]
        high = offsets[tree + 1]
        while low < high:
            middle = (low + high) // 2
            if merged[middle] < row_start:
                low = middle + 1
            else:
                high = middle
        while low < offsets[tree + 1] and merged[low] < row_end:
            node_of_row[merged[low], tree] = sampled
            low += 1


def start_pack(
        node_index_t[:, ::1] node_of_row,            # OUT (n_rows, pack_size)
        list tree_samples,                           # IN  per tree: ascending int32 rows
        int n_threads,
):
    """Put every row in the root of every tree of the pack: what
    ``start_tree`` does for each tree, in one pass over the table.

    Rows are taken in blocks; a block's rows of every tree are written while
    its part of the table is in cache (one tree at a time, the table was
    swept once per tree with a stride of a row: 4% of a fit at Numerai
    scale). Each tree's sample is found in the block by a binary search."""
    cdef Py_ssize_t n_rows = node_of_row.shape[0], pack_size = node_of_row.shape[1]
    cdef Py_ssize_t tree, block, row, position, n_blocks
    if len(tree_samples) != pack_size:
        raise ValueError(f"expected {pack_size} tree samples, got {len(tree_samples)}")
    samples = [np.ascontiguousarray(rows, dtype=np.int32) for rows in tree_samples]
    offsets = np.zeros(pack_size + 1, dtype=np.int64)
    offsets[1:] = np.cumsum([len(rows) for rows in samples])
    merged = np.concatenate(samples) if pack_size else np.zeros(0, dtype=np.int32)
    if len(merged) and (merged.min() < 0 or merged.max() >= n_rows):
        raise ValueError(f"tree samples must be rows 0 .. {n_rows - 1}")
    cdef const row_index_t[::1] merged_view = merged
    cdef const int64_t[::1] offsets_view = offsets
    if n_rows == 0 or pack_size == 0:
        return
    n_blocks = (n_rows + START_BLOCK - 1) // START_BLOCK
    for block in prange(n_blocks, nogil=True, schedule='static',
                        num_threads=max(1, min(n_threads, n_blocks))):
        start_block(node_of_row, &merged_view[0], &offsets_view[0], block * START_BLOCK,
                    min(n_rows, (block + 1) * START_BLOCK))


cdef void start_era_rows(
        node_index_t[:, ::1] node_of_row,
        const uint8_t[:, ::1] era_keep,
        Py_ssize_t era,
        Py_ssize_t row_start,
        Py_ssize_t row_end,
        const uint8_t** row_keep,            # IN  (pack_size,) a tree's row flags or NULL
        const int64_t[:, ::1] kept_before,   # IN  (pack_size, n_eras) its flags' era start
) noexcept nogil:
    """Every row of one era at the root of each tree: code ``tree`` where the
    tree keeps the era (and, with its row flags, the row), ``-2 - tree``
    (unsampled) where it does not."""
    cdef Py_ssize_t pack_size = node_of_row.shape[1], tree, row
    cdef node_index_t codes[MAX_PACK_SIZE]
    cdef const uint8_t* flags[MAX_PACK_SIZE]
    cdef bint any_flags = False
    for tree in range(pack_size):
        codes[tree] = <node_index_t>tree if era_keep[tree, era] else <node_index_t>(-2 - tree)
        flags[tree] = NULL
        if era_keep[tree, era] and row_keep[tree] != NULL:
            flags[tree] = row_keep[tree] + kept_before[tree, era] - row_start
            any_flags = True
    if not any_flags:
        for row in range(row_start, row_end):
            for tree in range(pack_size):
                node_of_row[row, tree] = codes[tree]
        return
    # A tree at a time (the era's part of the table stays in cache), its
    # row flags read without a branch: they are random (a branch on them
    # was mispredicted half the time).
    for tree in range(pack_size):
        if flags[tree] == NULL:
            for row in range(row_start, row_end):
                node_of_row[row, tree] = codes[tree]
        else:  # kept: tree; not: -2 - tree
            for row in range(row_start, row_end):
                node_of_row[row, tree] = <node_index_t>(
                    tree - (1 - <Py_ssize_t>flags[tree][row]) * (2 + 2 * tree))


def start_pack_eras(
        node_index_t[:, ::1] node_of_row,            # OUT (n_rows, pack_size)
        const uint8_t[:, ::1] era_keep,              # IN  (pack_size, n_eras) 1: kept
        const offset_t[::1] era_offsets,             # IN  (n_eras + 1,) rows era-sorted
        int n_threads,
        row_keep=None,                               # IN  per tree: flags or None
):
    """start_pack from the trees' era flags (and row flags): the same codes
    as from their row lists, written era by era, without the lists (none to
    build, no binary search, one streaming write of the table).

    ``row_keep``: None (whole eras), or per tree a bool array over the rows
    of its kept eras in row order (TreeSamples' row_keep: a row subsample),
    or None for a tree that keeps all of them."""
    cdef Py_ssize_t n_rows = node_of_row.shape[0], pack_size = node_of_row.shape[1]
    cdef Py_ssize_t n_eras = era_keep.shape[1], era, tree
    if era_keep.shape[0] != pack_size:
        raise ValueError(f"era_keep must have {pack_size} rows (one per tree)")
    if pack_size > MAX_PACK_SIZE:
        raise ValueError(f"at most {MAX_PACK_SIZE} trees per pack")
    if era_offsets.shape[0] != n_eras + 1 or era_offsets[0] != 0 or era_offsets[n_eras] != n_rows:
        raise ValueError(f"era_offsets must have {n_eras + 1} entries from 0 to {n_rows}")
    if row_keep is None:
        row_keep = [None] * pack_size
    if len(row_keep) != pack_size:
        raise ValueError(f"row_keep must have {pack_size} entries (one per tree)")
    # Each tree's flags, and where an era's rows start among them (the rows
    # of its kept eras before that era).
    sizes = np.diff(np.asarray(era_offsets, dtype=np.int64))
    kept_rows = np.asarray(era_keep, dtype=np.int64) * sizes
    kept_before = np.ascontiguousarray(np.cumsum(kept_rows, axis=1) - kept_rows)
    cdef const int64_t[:, ::1] kept_before_view = kept_before
    flags = []
    cdef const uint8_t* flag_pointer[MAX_PACK_SIZE]
    cdef const uint8_t[::1] flag_view
    for tree in range(pack_size):
        flag_pointer[tree] = NULL
        if row_keep[tree] is None:
            continue
        keep = np.ascontiguousarray(row_keep[tree])
        if keep.dtype != np.bool_ or keep.ndim != 1 or keep.shape[0] != kept_rows[tree].sum():
            raise ValueError(f"row_keep[{tree}] must be a bool array over the "
                             f"{kept_rows[tree].sum()} rows of the tree's kept eras")
        flags.append(keep)  # kept alive while the pointers are read
        if keep.shape[0]:
            flag_view = keep.view(np.uint8)
            flag_pointer[tree] = &flag_view[0]
    if n_rows == 0 or pack_size == 0:
        return
    for era in prange(n_eras, nogil=True, schedule='dynamic',
                      num_threads=max(1, min(n_threads, n_eras))):
        start_era_rows(node_of_row, era_keep, era, era_offsets[era], era_offsets[era + 1],
                       flag_pointer, kept_before_view)


def rows_of_eras(const uint8_t[::1] keep_era, const offset_t[::1] era_offsets):
    """The rows (ascending int32) of the eras with ``keep_era`` set: rows
    are era-sorted, so each kept era is a run of consecutive rows."""
    cdef Py_ssize_t n_eras = keep_era.shape[0], era, row, n = 0
    if era_offsets.shape[0] != n_eras + 1:
        raise ValueError(f"era_offsets must have {n_eras + 1} entries")
    for era in range(n_eras):
        if keep_era[era]:
            n += era_offsets[era + 1] - era_offsets[era]
    rows = np.empty(n, dtype=np.int32)
    cdef row_index_t[::1] rows_view = rows
    n = 0
    with nogil:
        for era in range(n_eras):
            if keep_era[era]:
                for row in range(era_offsets[era], era_offsets[era + 1]):
                    rows_view[n] = <row_index_t>row
                    n += 1
    return rows


cdef void route_vector_chunk(
        const bin_code_t* codes,                 # IN  route_rows' codes and row stride
        Py_ssize_t row_stride,
        node_index_t[:, ::1] node_of_row,        # IN/OUT
        node_index_t[:, ::1] leaf_of_row,        # OUT
        const slot_route* routes,
        const node_index_t* slot_node,
        Py_ssize_t row_start,                    # IN  rows [row_start, row_end)
        Py_ssize_t row_end,
        double* squares,                         # IN/OUT the chunk's g^2 partials and trash
                                                 #     slots, or NULL
        const double* squared,                   # IN  with squares: the rows' squared gradients
        const Py_ssize_t* column_starts,         # IN  split columns to prefetch, or NULL
        Py_ssize_t n_columns,
        Py_ssize_t line_rows,
        Py_ssize_t column_rows,
        const int32_t* slot_column,              # IN  vector_tables, of n_slots slots
        const uint32_t* slot_word,
        Py_ssize_t n_slots,
        int pack_shift,
        int32_t trash_slot,                      # IN  the first of squares' trash slots
        bint scattered,                          # IN  route_rows' scattered_samples
        const int32_t* child_base,               # IN  tree_children's (or NULL with
        const int32_t* child_count,              #     lane_children 0)
        int lane_children,
) noexcept nogil:
    """One chunk of route_rows by the vector loop (_route.pxd), a line of
    rows at a time, each line's split columns asked for ahead; the scalar
    route_row for the rows around it: the matrix's first three (the vector
    loop reads three bytes before a code) and a last part vector."""
    cdef Py_ssize_t pack_size = node_of_row.shape[1], row, line_end
    cdef Py_ssize_t rows_per_vector = max(1, 8 >> pack_shift)
    cdef Py_ssize_t vector_start = max(row_start, 3)
    cdef Py_ssize_t vector_end
    vector_start = min(row_end, (vector_start + rows_per_vector - 1) // rows_per_vector
                       * rows_per_vector)
    vector_end = vector_start + (row_end - vector_start) // rows_per_vector * rows_per_vector
    for row in range(row_start, vector_start):
        route_row(codes + row * row_stride, &node_of_row[row, 0], pack_size, routes, slot_node,
                  &leaf_of_row[row, 0], NULL, squares, 0.0, 0.0,
                  squared[row] if squares != NULL else 0.0,
                  trash_slot if scattered else -1)
    row = vector_start
    while row < vector_end:
        line_end = min(vector_end, (row // line_rows + 1) * line_rows)
        if n_columns > 0 and row % line_rows == 0:
            prefetch_columns(codes, column_starts, n_columns, row, column_rows)
        route_entries(<const uint8_t*>codes, row_stride, &node_of_row[0, 0], &leaf_of_row[0, 0],
                      row * pack_size, line_end * pack_size, pack_shift, slot_column, slot_word,
                      slot_node, n_slots, squares, trash_slot, squared, scattered, child_base,
                      child_count, lane_children)
        row = line_end
    for row in range(vector_end, row_end):
        route_row(codes + row * row_stride, &node_of_row[row, 0], pack_size, routes, slot_node,
                  &leaf_of_row[row, 0], NULL, squares, 0.0, 0.0,
                  squared[row] if squares != NULL else 0.0,
                  trash_slot if scattered else -1)


# route_row's trash index (tree modulo TRASH_ROWS) is meant for both the
# chunk partials' trash rows and the vector loop's squares trash slots.
if ROUTE_TRASH_SLOTS != TRASH_ROWS:
    raise ImportError("_route.pxd's ROUTE_TRASH_SLOTS must equal _slot_sums.pxd's TRASH_ROWS")


def vector_route_available():
    """Does route_rows have its vector loop on this CPU (AVX2)?"""
    return bool(route_vector_supported())


def tree_children(const int32_t[::1] slot_tree, const node_index_t[::1] left_child_slot,
                  Py_ssize_t pack_size, max_children=None):
    """Each tree's children in the next frontier as one range of slots,
    ((2, pack_size) int32: first child slot, number of children), for the
    vector loop's squares in lanes (pb_add_squares_by_lanes); None where it
    does not apply: packs of fewer than four trees or not a power of two,
    a tree with more than ``max_children`` children, or ranges of two
    trees that interleave (the driver numbers a tree's children together:
    slots are grouped by tree). A tree without a child has (0, 0).

    ``max_children``: None for what the CPU's lanes take (most_lane_children)."""
    cdef Py_ssize_t n_slots = slot_tree.shape[0], slot, tree, other
    cdef Py_ssize_t most = most_lane_children(pack_size) if max_children is None else max_children
    if left_child_slot.shape[0] != n_slots:
        raise ValueError(f"slot_tree must have {left_child_slot.shape[0]} entries, one per slot")
    if pack_size < 4 or pack_size & (pack_size - 1) or pack_size > MAX_PACK_SIZE:
        return None
    children = np.zeros((2, pack_size), dtype=np.int32)
    cdef int32_t[:, ::1] view = children
    cdef int64_t low[MAX_PACK_SIZE]
    cdef int64_t high[MAX_PACK_SIZE]
    for tree in range(pack_size):
        low[tree] = 2**62
        high[tree] = -1
    for slot in range(n_slots):
        if left_child_slot[slot] < 0:
            continue
        tree = slot_tree[slot]
        if not 0 <= tree < pack_size:
            raise ValueError(f"slot_tree[{slot}] = {tree} is not a tree of a pack of {pack_size}")
        low[tree] = min(low[tree], <int64_t>left_child_slot[slot])
        high[tree] = max(high[tree], <int64_t>left_child_slot[slot] + 1)
    for tree in range(pack_size):
        if high[tree] < 0:
            continue
        if high[tree] - low[tree] + 1 > most:
            return None
        for other in range(pack_size):
            if other != tree and high[other] >= 0 and low[other] <= high[tree] \
                    and low[tree] <= high[other]:
                return None
        view[0, tree] = <int32_t>low[tree]
        view[1, tree] = <int32_t>(high[tree] - low[tree] + 1)
    return children


def most_lane_children(Py_ssize_t pack_size):
    """The most children per tree whose squared sums the vector loop keeps in
    lanes for a pack of ``pack_size`` trees: ROUTE_LANE_CHILDREN_512 with
    AVX-512 (F and VL) and packs of a multiple of eight, else
    ROUTE_LANE_CHILDREN (AVX2)."""
    if pack_size % 8 == 0 and route_lanes_512_supported():
        return ROUTE_LANE_CHILDREN_512
    return ROUTE_LANE_CHILDREN


def vector_tables(routes):
    """route_rows' slot routes (ROUTE_DTYPE) as the vector loop's two tables
    (_route.pxd): each slot's column start (int32; -1: no split) and its
    threshold, missing code, missing side and left child in one uint32
    word; None when a value does not fit its field (then the scalar loop
    routes). A typed loop, as slot_routes."""
    cdef Py_ssize_t n_slots = routes.shape[0], slot
    column = np.empty(n_slots, dtype=np.int32)
    word = np.empty(n_slots, dtype=np.uint32)
    if n_slots == 0:
        return column, word
    if routes.dtype != ROUTE_DTYPE or not routes.flags.c_contiguous:
        raise ValueError("routes must be a contiguous ROUTE_DTYPE array")
    cdef const uint8_t[::1] route_bytes = routes.view(np.uint8)
    cdef const slot_route* route = <const slot_route*>&route_bytes[0]
    cdef int32_t[::1] column_view = column
    cdef uint32_t[::1] word_view = word
    cdef int64_t right
    for slot in range(n_slots):
        if route[slot].column_start < 0:
            column_view[slot] = -1
            word_view[slot] = 0
            continue
        right = <int64_t>route[slot].missing_child - route[slot].left_child
        if (route[slot].column_start >= 2**31
                or route[slot].threshold < 0 or route[slot].threshold > 255
                or route[slot].missing_code < 0 or route[slot].missing_code > 255
                or right < 0 or right > 1
                or route[slot].left_child < 0
                or route[slot].left_child >= (1 << (32 - ROUTE_LEFT_SHIFT))):
            return None
        column_view[slot] = <int32_t>route[slot].column_start
        word_view[slot] = (<uint32_t>route[slot].threshold
                           | (<uint32_t>route[slot].missing_code << ROUTE_MISSING_SHIFT)
                           | (<uint32_t>right << ROUTE_MISSING_RIGHT_SHIFT)
                           | (<uint32_t>route[slot].left_child << ROUTE_LEFT_SHIFT))
    return column, word


def split_column_starts(routes, Py_ssize_t n_features, Py_ssize_t n_rows):
    """The distinct column starts of the slots that split, ascending (what
    route_rows asks for ahead): a flag per feature, not np.unique."""
    cdef Py_ssize_t n_slots = routes.shape[0], slot, feature, n_starts = 0
    flags = np.zeros(max(n_features, 1), dtype=np.uint8)
    if n_slots == 0 or n_rows == 0:
        return np.zeros(0, dtype=np.intp)
    cdef uint8_t[::1] flag_view = flags
    cdef const uint8_t[::1] route_bytes = routes.view(np.uint8)
    cdef const slot_route* route = <const slot_route*>&route_bytes[0]
    for slot in range(n_slots):
        if route[slot].column_start >= 0:
            feature = route[slot].column_start // n_rows
            if not flag_view[feature]:
                flag_view[feature] = 1
                n_starts += 1
    starts = np.empty(n_starts, dtype=np.intp)
    cdef Py_ssize_t[::1] start_view = starts
    n_starts = 0
    for feature in range(n_features):
        if flag_view[feature]:
            start_view[n_starts] = feature * n_rows
            n_starts += 1
    return starts


def route_rows(
        const bin_code_t[:, ::1] X_binned,        # IN  (n_features, n_rows)
        node_index_t[:, ::1] node_of_row,            # IN/OUT (n_rows, pack_size) codes above
        const feature_index_t[::1] split_feature,    # IN  (n_slots,) -1: no split
        const bin_index_t[::1] split_threshold,      # IN  (n_slots,)
        const uint8_t[::1] split_missing_left,     # IN  (n_slots,)
        const node_index_t[::1] left_child_slot,     # IN  (n_slots,) right = left + 1
        const bin_index_t[::1] n_bins,               # IN  (n_features,) = missing code
        const node_index_t[::1] slot_node,           # IN  (n_slots,) node id of the slot in its tree
        node_index_t[:, ::1] leaf_of_row,            # OUT (n_rows, pack_size) leaf node ids
        int n_threads,
        const gradient_t[::1] gradients=None,        # IN  (n_rows,) with ``hessians``: also
        const gradient_t[::1] hessians=None,         #     sum the next frontier's slots
        Py_ssize_t n_next_slots=0,
        bint squares_only=False,
        const uint8_t[:, ::1] codes_by_row=None,
        const feature_index_t[::1] block_features=None,
        bint scattered_samples=False,
        const int32_t[::1] slot_tree=None,
        squared_gradients=None,
):
    """Move every row to its child slot in the next frontier; rows of slots
    that do not split get code -1 and their leaf in ``leaf_of_row``.

    ``scattered_samples``: the trees sample rows one by one (a row
    subsample), so sampled and unsampled codes alternate at random down a
    tree's column; False: whole eras (runs of either). The same results;
    the vector loop adds the squared gradients without a branch when True
    (_route.pxd, pb_add_squares).

    ``codes_by_row`` (n_rows, len(block_features)), uint8 codes only: the
    codes of ``block_features`` (ascending, every split feature among them)
    row-major, as the CPU backend's node-ordered route keeps them: a row's
    split codes for every tree then come from one run of the row's codes,
    not one column each (the same children).

    With ``gradients`` and ``hessians``, also returns what
    ``slot_sums(gradients, hessians, node_of_row, n_next_slots)`` would
    afterwards -- the same numbers, summed in the same chunks and order --
    while each row is at hand (a second pass over the table cost a third
    as much as the routing; benchmarks/RESULTS.md). Otherwise None.

    ``squares_only``: only the squared gradients' sums, (n_next_slots,), the
    same numbers as the fourth of those sums. The CPU backend takes the
    other three from the split finder (an exact left child's sums and the
    parent's minus them): half the read-modify-writes per (row, tree).

    ``slot_tree`` (n_slots,), each slot's tree: with it the vector loop adds
    the squares of trees with few children in vector lanes
    (tree_children, _route.pxd's pb_add_squares_by_lanes; the same
    numbers).

    ``squared_gradients`` (n_rows,): each row's squared gradient on its grid
    (FixedPointGradients.squared), what the sums add; None: squares_of(gradients)."""
    cdef Py_ssize_t n_rows = node_of_row.shape[0], row, chunk
    cdef const int64_t[::1] bounds = row_chunk_bounds(n_rows)
    cdef bint summing = gradients is not None and hessians is not None
    if summing and (gradients.shape[0] != n_rows or hessians.shape[0] != n_rows):
        raise ValueError(f"gradients and hessians must have {n_rows} entries")
    cdef const double[::1] squared
    if summing:
        squared = squares_of(gradients, squared_gradients, n_rows)
    # Each row is added to its child's sums while the child is at hand: about
    # 5% less routing time per (row, tree) in a fit than a second loop over
    # its trees (benchmarks/RESULTS.md, 2026-11-25 8d88aa8); the same numbers.
    partial = chunk_partials(0 if squares_only else n_next_slots)
    cdef double[:, :, ::1] partial_view = partial
    # A chunk's squared sums, then the vector loop's trash slots (_route.pxd).
    squares = np.zeros((SUM_CHUNKS, n_next_slots + ROUTE_TRASH_SLOTS if squares_only else 1))
    cdef double[:, ::1] squares_view = squares
    # The split columns, each once. Deep in a pack a row's trees read many
    # of them (up to the depth's K_d), more streams than the hardware
    # prefetcher follows: at Numerai scale depths 4-5 routed 1.5x slower
    # than depths 0-3, waiting on X. From PREFETCH_MIN_COLUMNS columns on,
    # each line of rows asks for its lines PREFETCH_AHEAD rows ahead: one
    # prefetch per column and 64 rows, not per (row, tree) (which slowed
    # small fits, benchmarks/RESULTS.md 2026-11-25 8d88aa8).
    routes = slot_routes(split_feature, split_threshold, split_missing_left, left_child_slot,
                         n_bins, X_binned.shape[1])
    if slot_node.shape[0] != routes.shape[0]:
        raise ValueError(f"slot_node must have {routes.shape[0]} entries")
    starts = split_column_starts(routes, n_bins.shape[0], X_binned.shape[1])
    cdef const Py_ssize_t[::1] starts_view = starts
    cdef Py_ssize_t n_columns = starts.shape[0] if starts.shape[0] >= PREFETCH_MIN_COLUMNS else 0
    cdef Py_ssize_t line_rows = 64 // sizeof(X_binned[0, 0]) if X_binned.shape[0] > 0 else 64
    cdef Py_ssize_t column_rows = X_binned.shape[1]
    cdef const uint8_t[::1] route_bytes = routes.view(np.uint8)
    cdef const slot_route* route_pointer = <const slot_route*>&route_bytes[0] \
        if routes.shape[0] else NULL
    cdef const bin_code_t* codes = &X_binned[0, 0]
    cdef Py_ssize_t pack_size = node_of_row.shape[1], row_stride = 1
    if codes_by_row is not None:
        if sizeof(X_binned[0, 0]) != 1 or block_features is None:
            raise ValueError("codes_by_row needs uint8 codes and block_features")
        if codes_by_row.shape[0] != n_rows or codes_by_row.shape[1] != block_features.shape[0]:
            raise ValueError(f"codes_by_row must be ({n_rows}, {block_features.shape[0]})")
        splits = np.asarray(split_feature) >= 0
        position = np.searchsorted(np.asarray(block_features), np.asarray(split_feature))
        position = np.minimum(position, max(0, block_features.shape[0] - 1))
        if np.any(splits) and not np.array_equal(np.asarray(block_features)[position[splits]],
                                                 np.asarray(split_feature)[splits]):
            raise ValueError("every split feature must be among block_features")
        routes["column_start"] = np.where(splits, position, -1)
        row_stride = codes_by_row.shape[1]
        n_columns = 0     # a row's codes are one run: nothing to ask for ahead
        if n_rows > 0 and row_stride > 0:
            codes = <const bin_code_t*>&codes_by_row[0, 0]
    # The vector loop (_route.pxd) where the CPU, the codes and the sizes
    # allow it; else the scalar loops below.
    cdef int pack_shift = 0
    while (<Py_ssize_t>1 << pack_shift) < pack_size:
        pack_shift += 1
    cdef const int32_t[::1] column_view
    cdef const uint32_t[::1] word_view
    cdef double* chunk_squares
    vector = None
    # Not from the row-major copy: there the scalar loop reads a row's codes
    # from its own run, and the gathers ran 1.6-3.8x slower (a software
    # prefetch of the rows ahead halved that, no more; RESULTS.md,
    # 2026-11-27 d523973).
    if (VECTOR_ROUTE and n_rows > 0 and routes.shape[0] > 0 and codes_by_row is None
            and route_vector_supported() and sizeof(X_binned[0, 0]) == 1
            and pack_size == 1 << pack_shift and (squares_only or not summing)
            and n_rows * pack_size < 2**31 and X_binned.shape[0] * X_binned.shape[1] < 2**31):
        vector = vector_tables(routes)
    children = None
    cdef const int32_t[:, ::1] children_view
    cdef int lane_children = 0
    if vector is not None and squares_only and summing and slot_tree is not None:
        children = tree_children(slot_tree, left_child_slot, pack_size)
    if children is not None:
        children_view = children
        lane_children = int(children[1].max())
    if vector is not None:
        column_view, word_view = vector
        # Every split column asked for ahead: the vector loop waits on its
        # codes where the scalar one had other work (RESULTS.md, 2026-11-27
        # d523973).
        n_columns = starts.shape[0]
        # Chunks as the sums take them (in_chunk_order), taken by the threads
        # as they come (docs/cpu-kernels.md §9).
        for chunk in prange(SUM_CHUNKS, nogil=True, schedule='dynamic',
                            num_threads=max(1, min(n_threads, SUM_CHUNKS))):
            chunk_squares = &squares_view[chunk, 0] if summing else NULL
            route_vector_chunk(
                codes, row_stride, node_of_row, leaf_of_row, route_pointer, &slot_node[0],
                bounds[chunk], bounds[chunk + 1], chunk_squares,
                &squared[0] if summing else NULL, &starts_view[0] if n_columns > 0 else NULL,
                n_columns, line_rows, column_rows, &column_view[0], &word_view[0],
                column_view.shape[0], pack_shift, n_next_slots, scattered_samples,
                &children_view[0, 0] if lane_children > 0 else NULL,
                &children_view[1, 0] if lane_children > 0 else NULL, lane_children)
    elif n_rows > 0 and not summing:
        for row in prange(n_rows, nogil=True, schedule='dynamic', chunksize=ROWS_PER_TASK,
                          num_threads=max(1, min(n_threads, n_rows))):
            if n_columns > 0 and row % line_rows == 0:
                prefetch_columns(codes, &starts_view[0], n_columns, row, column_rows)
            route_row(codes + row * row_stride, &node_of_row[row, 0], pack_size, route_pointer,
                      &slot_node[0], &leaf_of_row[row, 0], NULL, NULL, 0.0, 0.0, 0.0,
                      0 if scattered_samples else -1)
    elif n_rows > 0:
        for chunk in prange(SUM_CHUNKS, nogil=True, schedule='dynamic',
                            num_threads=max(1, min(n_threads, SUM_CHUNKS))):
            for row in range(bounds[chunk], bounds[chunk + 1]):
                if n_columns > 0 and row % line_rows == 0:
                    prefetch_columns(codes, &starts_view[0], n_columns, row, column_rows)
                route_row(codes + row * row_stride, &node_of_row[row, 0], pack_size,
                          route_pointer, &slot_node[0], &leaf_of_row[row, 0],
                          &partial_view[chunk, 0, 0]
                          if n_next_slots > 0 and not squares_only else NULL,
                          &squares_view[chunk, 0] if n_next_slots > 0 and squares_only
                          else NULL,
                          gradients[row], hessians[row], squared[row],
                          <node_index_t>n_next_slots if scattered_samples else -1)
    if not summing:
        return None
    if squares_only:
        return in_chunk_order(squares)[:n_next_slots]
    return chunk_totals(partial, n_next_slots)


def children_sums(const int64_t[::1] split, const int64_t[::1] column,
                  const feature_index_t[::1] candidate_features,
                  const feature_index_t[::1] split_feature, const bin_index_t[::1] split_threshold,
                  const uint8_t[::1] split_missing_left, const bin_index_t[::1] best_threshold,
                  const uint8_t[::1] best_missing_left,
                  const double[::1] left_gradients, const double[::1] left_hessians,
                  const double[::1] left_count,
                  const double[::1] gradients, const double[::1] hessians,
                  const int64_t[::1] count):
    """The next frontier's (gradient, hessian, count) sums, children 2k and
    2k + 1 of the split slot ``split[k]``: the left child the slot's best
    candidate's left sums, the right one the slot's sums minus them (exact
    fixed-point grid values, so the numbers summing the rows gives). None
    where the best candidates are not the splits made (another column,
    threshold or missing side) or their left sums are not known (NaN): then
    the routing sums the rows. One typed pass per depth (the NumPy checks
    took ~35 us; RESULTS.md, 2026-11-27 fd68a67)."""
    cdef Py_ssize_t n_split = split.shape[0], k, slot, chosen
    cdef Py_ssize_t n_slots = column.shape[0]
    if (best_threshold.shape[0] != n_slots or best_missing_left.shape[0] != n_slots
            or left_gradients.shape[0] != n_slots or left_hessians.shape[0] != n_slots
            or left_count.shape[0] != n_slots or gradients.shape[0] != n_slots
            or hessians.shape[0] != n_slots or count.shape[0] != n_slots
            or split_feature.shape[0] != n_slots or split_threshold.shape[0] != n_slots
            or split_missing_left.shape[0] != n_slots):
        return None
    for k in range(n_split):
        slot = split[k]
        if slot < 0 or slot >= n_slots:
            return None
        chosen = column[slot]
        if (chosen < 0 or chosen >= candidate_features.shape[0]
                or left_gradients[slot] != left_gradients[slot]      # NaN: not known
                or candidate_features[chosen] != split_feature[slot]
                or best_threshold[slot] != split_threshold[slot]
                or best_missing_left[slot] != split_missing_left[slot]):
            return None
    child_gradients = np.empty(2 * n_split)
    child_hessians = np.empty(2 * n_split)
    child_count = np.empty(2 * n_split, dtype=np.int64)
    cdef double[::1] g = child_gradients, h = child_hessians
    cdef int64_t[::1] c = child_count
    for k in range(n_split):
        slot = split[k]
        g[2 * k] = left_gradients[slot]
        g[2 * k + 1] = gradients[slot] - g[2 * k]
        h[2 * k] = left_hessians[slot]
        h[2 * k + 1] = hessians[slot] - h[2 * k]
        c[2 * k] = <int64_t>left_count[slot]
        c[2 * k + 1] = count[slot] - c[2 * k]
    return [child_gradients, child_hessians, child_count]


def row_chunk_bounds(Py_ssize_t n_rows):
    """The SUM_CHUNKS chunks of rows the sums are taken in, (SUM_CHUNKS + 1,)
    int64: chunk c is rows bounds[c] .. bounds[c + 1] - 1, equal chunks of
    ceil(n_rows / SUM_CHUNKS) rows. (The sums are exact, so the chunks only
    share the work out.)"""
    chunk_rows = (n_rows + SUM_CHUNKS - 1) // SUM_CHUNKS
    return np.minimum(np.arange(SUM_CHUNKS + 1, dtype=np.int64) * chunk_rows, n_rows)


def chunk_partials(Py_ssize_t n_slots):
    """Zeroed partial sums of the SUM_CHUNKS row chunks, (SUM_CHUNKS, n_slots
    + TRASH_ROWS, 4): a slot's (g, h, count, g^2) side by side, then the
    trash rows of the rows in no slot (_slot_sums.pxd), never read."""
    return np.zeros((SUM_CHUNKS, max(n_slots, 0) + TRASH_ROWS, 4))


def squares_of(gradients, squared_gradients, Py_ssize_t n_rows):
    """``squared_gradients`` checked against ``gradients`` (one value per
    entry, float64), or, None, the squares of ``gradients`` on the grid of
    each output's ``n_rows`` rows (_fixed_point.squared_gradient_scale): a
    caller without a FixedPointGradients at hand (tests, benchmarks)."""
    if squared_gradients is None:
        from packboost._fixed_point import rounded_squares, squared_gradient_scale

        values = np.asarray(gradients, dtype=np.float64)
        parts = [values[start:start + n_rows] for start in range(0, len(values), max(1, n_rows))]
        return np.concatenate([rounded_squares(part, squared_gradient_scale(part))
                               for part in parts]) if parts else np.zeros(0)
    squared = np.ascontiguousarray(squared_gradients, dtype=np.float64)
    if squared.shape != (len(gradients),):
        raise ValueError(f"squared_gradients must have {len(gradients)} entries, like gradients")
    return squared


def in_chunk_order(partial):
    """The SUM_CHUNKS chunks' partial sums (first axis) added in chunk order:
    the one order of the float sums, whatever the threads. A typed loop (each
    entry's chunks added one by one, as NumPy's chunk-by-chunk += did: the
    same numbers), run a few times per depth."""
    cdef const double[:, ::1] chunks = np.ascontiguousarray(partial, dtype=np.float64).reshape(
        partial.shape[0], -1)
    totals = np.array(chunks[0], copy=True) if chunks.shape[0] else np.zeros(0)
    cdef double[::1] total_view = totals
    cdef Py_ssize_t chunk, entry
    for chunk in range(1, chunks.shape[0]):
        for entry in range(chunks.shape[1]):
            total_view[entry] += chunks[chunk, entry]
    return totals.reshape(partial.shape[1:])


def chunk_totals(partial, Py_ssize_t n_slots):
    """(gradients, hessians, counts, squared gradients) of slot_sums from its
    chunks' partial sums (chunk_partials), added in chunk order."""
    totals = in_chunk_order(partial)[:n_slots]
    return totals[:, 0], totals[:, 1], totals[:, 2].astype(np.int64), totals[:, 3]


def slot_sums(
        const gradient_t[::1] gradients,               # IN  (n_rows,)
        const gradient_t[::1] hessians,                # IN  (n_rows,)
        const node_index_t[:, ::1] node_of_row,     # IN  (n_rows, pack_size)
        Py_ssize_t n_slots,
        int n_threads=1,
        bint scattered_samples=False,
        const int32_t[::1] tree_output=None,
        bint squares_only=False,
        squared_gradients=None,
):
    """Pooled gradient, squared-gradient and hessian sums and row counts of every slot.

    ``scattered_samples``: as route_rows takes it (the same sums).

    ``squares_only``: only the squared gradients' sums, (n_slots,), the same
    numbers as the fourth of the sums (and as route_rows' ``squares_only``):
    one addition per (row, tree) instead of four, for a pack whose other
    sums come from its splits (the CPU backend's several outputs).

    ``tree_output`` (pack_size,): the pack holds several outputs' trees
    (docs/packs.md §10); ``gradients`` and ``hessians`` are then
    (n_outputs * n_rows,), output-major, and tree t sums its output's. Each
    slot's sums are those of its output's pack alone, bit for bit (an
    output trained on its known rows: those of a fit on them alone).

    Rows are cut into SUM_CHUNKS fixed chunks summed in parallel, then the
    chunks' partial sums are added in chunk order: the result does not
    depend on the thread count (every value added is on a grid on which the
    sums are exact: they are the same in any order). The squared gradients
    (``squared_gradients``, like ``gradients``: FixedPointGradients.squared;
    None: squares_of(gradients)) give the node's gradient variance (DES's
    between-era std, csrc/des.h).
    """
    cdef Py_ssize_t n_rows = node_of_row.shape[0], pack_size = node_of_row.shape[1]
    partial = chunk_partials(n_slots)
    cdef double[:, :, ::1] partial_view = partial
    cdef Py_ssize_t chunk
    cdef const int64_t[::1] bounds = row_chunk_bounds(n_rows)
    cdef const int32_t* output_pointer = NULL
    cdef Py_ssize_t n_outputs = 1, tree
    if tree_output is not None:
        if tree_output.shape[0] != pack_size:
            raise ValueError(f"tree_output must have {pack_size} entries")
        for tree in range(pack_size):
            n_outputs = max(n_outputs, tree_output[tree] + 1)
            if tree_output[tree] < 0:
                raise ValueError("tree_output holds a negative output")
        output_pointer = &tree_output[0] if pack_size else NULL
    if gradients.shape[0] != n_outputs * n_rows or hessians.shape[0] != n_outputs * n_rows:
        raise ValueError(f"gradients and hessians must have {n_outputs * n_rows} entries")
    cdef const double[::1] squared = squares_of(gradients, squared_gradients, n_rows)
    cdef double[:, ::1] squares_view
    if squares_only:
        # A chunk's squared sums, then its trash rows (as chunk_partials').
        squares = np.zeros((SUM_CHUNKS, max(n_slots, 0) + TRASH_ROWS))
        squares_view = squares
        if n_rows > 0 and n_slots > 0:
            for chunk in prange(SUM_CHUNKS, nogil=True, schedule='dynamic',
                                num_threads=max(1, min(n_threads, SUM_CHUNKS))):
                add_squares_to_chunk(&squared[0], node_of_row, bounds[chunk],
                                     bounds[chunk + 1], &squares_view[chunk, 0],
                                     <node_index_t>n_slots if scattered_samples else -1,
                                     output_pointer, n_rows)
        return in_chunk_order(squares)[:n_slots]
    if n_rows > 0 and n_slots > 0:
        for chunk in prange(SUM_CHUNKS, nogil=True, schedule='dynamic',
                            num_threads=max(1, min(n_threads, SUM_CHUNKS))):
            add_rows_to_chunk(&gradients[0], &hessians[0], &squared[0], node_of_row,
                              bounds[chunk],
                              bounds[chunk + 1], &partial_view[chunk, 0, 0],
                              <node_index_t>n_slots if scattered_samples else -1,
                              output_pointer, n_rows)
    return chunk_totals(partial, n_slots)


cdef inline void add_squares_to_chunk(
        const double* squared,                  # IN  add_rows_to_chunk's squared gradients
        const node_index_t[:, ::1] node_of_row,
        Py_ssize_t row_start,
        Py_ssize_t row_end,
        double* squares,                        # IN/OUT one chunk's (n_slots + TRASH_ROWS,)
        node_index_t trash_slot,
        const int32_t* tree_output,
        Py_ssize_t output_stride,
) noexcept nogil:
    """add_rows_to_chunk's fourth sum alone: each row's squared gradient
    added to its slot in every tree that sampled it, rows and trees in the
    same order (the same numbers)."""
    cdef Py_ssize_t row, tree, pack_size = node_of_row.shape[1]
    cdef node_index_t code
    cdef double square
    for row in range(row_start, row_end):
        for tree in range(pack_size):
            code = node_of_row[row, tree]
            square = squared[row + (tree_output[tree] * output_stride
                                    if tree_output != NULL else 0)]
            if trash_slot < 0:
                if code >= 0:
                    squares[code] += square
                continue
            squares[slot_or_trash(code, code, trash_slot, tree)] += square


def root_sums(
        const double[::1] gradients,                # IN  (n_rows,)
        const double[::1] hessians,                 # IN  (n_rows,)
        const uint8_t[:, ::1] era_tree_rows,        # IN  (n_eras, pack_size) 1: the tree
                                                    #     keeps the era (find_best_splits')
        const offset_t[::1] era_offsets,            # IN  (n_eras + 1,) rows era-sorted
        int n_threads=1,
        squared_gradients=None,                     # IN  (n_rows,) as slot_sums takes them
):
    """slot_sums of a pack's roots where every tree keeps whole eras (slot
    ``t``: the rows of tree ``t``'s kept eras, as start_pack_eras writes
    them from ``era_tree_rows.T``): the same four sums, bit for bit, from
    the era flags instead of the table -- the same chunks, each chunk's rows added in row order, the
    chunks' partials in chunk order (pb_root_chunk_sums keeps each tree's
    sums in a vector lane: no table to read, no store-to-load chain per
    row)."""
    cdef Py_ssize_t n_eras = era_tree_rows.shape[0], pack_size = era_tree_rows.shape[1]
    cdef Py_ssize_t n_rows = gradients.shape[0]
    if hessians.shape[0] != n_rows:
        raise ValueError(f"hessians must have {n_rows} entries, like gradients")
    cdef const double[::1] squared = squares_of(gradients, squared_gradients, n_rows)
    if (era_offsets.shape[0] != n_eras + 1 or era_offsets[0] != 0
            or era_offsets[n_eras] != n_rows):
        raise ValueError(f"era_offsets must have {n_eras + 1} entries from 0 to {n_rows}")
    partial = chunk_partials(pack_size)
    cdef double[:, :, ::1] partial_view = partial
    cdef Py_ssize_t chunk_rows = (n_rows + SUM_CHUNKS - 1) // SUM_CHUNKS
    cdef Py_ssize_t chunk, first, last, era, tree0
    if n_rows > 0 and pack_size > 0:
        for chunk in prange(SUM_CHUNKS, nogil=True, schedule='dynamic',
                            num_threads=max(1, min(n_threads, SUM_CHUNKS))):
            first = chunk * chunk_rows
            last = min(n_rows, first + chunk_rows)
            if first >= last:
                continue
            era = era_holding(&era_offsets[0], n_eras, first)
            tree0 = 0
            while tree0 < pack_size:
                root_chunk_sums(&gradients[0], &hessians[0], &squared[0], first, last,
                                &era_offsets[0], era,
                                &era_tree_rows[0, 0], pack_size, tree0,
                                min(ROOT_LANES, pack_size - tree0), &partial_view[chunk, 0, 0])
                tree0 = tree0 + ROOT_LANES
    return chunk_totals(partial, pack_size)


cdef inline Py_ssize_t era_holding(const offset_t* era_offsets, Py_ssize_t n_eras,
                                   Py_ssize_t row) noexcept nogil:
    """The era whose rows include ``row`` (binary search; empty eras skipped)."""
    cdef Py_ssize_t low = 0, high = n_eras - 1, middle
    while low < high:  # the last era whose first row is <= row
        middle = (low + high + 1) // 2
        if era_offsets[middle] <= row:
            low = middle
        else:
            high = middle - 1
    return low


def active_rows(
        const node_index_t[:, ::1] node_of_row,     # IN  (n_rows, pack_size)
        const uint8_t[::1] slot_open,             # IN  (n_slots,)
        era_rows,                                   # IN  (n_eras + 1,) where each era's rows
                                                    #     start (TrainingData.era_offsets)
        int n_threads=1,
        out=None,                                   # OUT (n_rows,) int32 or None
):
    """Rows in at least one open slot (ascending) and their era offsets.
    The rows are written at the start of ``out`` where given (a buffer the
    backend keeps for the fit: a fresh one per depth meant fresh pages).

    Histogram passes only visit these: rows of closed nodes (leaves, nodes
    too small to split, rows a tree did not sample) cost nothing there.
    Each era's rows are listed in parallel at the era's own place (rows are
    era-sorted, so an era's active rows fit where its rows are), then moved
    down behind the previous era's: the result does not depend on the
    thread count."""
    cdef Py_ssize_t n_rows = node_of_row.shape[0]
    cdef Py_ssize_t n_slots = slot_open.shape[0]
    # The eras' offsets are the data's (computed once, TrainingData): found
    # here from every row's era they cost 3.5 ms per depth at Numerai scale,
    # on one thread.
    era_rows = np.ascontiguousarray(era_rows, dtype=np.int64)
    # The last offset is read by its index: this module is compiled without
    # wraparound, where `era_rows[-1]` is not the last item under every NumPy
    # (NumPy 2.5 raised IndexError: every fit failed on the GPU machine).
    if era_rows.ndim != 1 or era_rows.shape[0] < 1 \
            or era_rows[era_rows.shape[0] - 1] != n_rows:
        raise ValueError(f"era_rows must be 1-d era offsets ending at {n_rows}")
    cdef Py_ssize_t n_eras = era_rows.shape[0] - 1
    if out is None:
        rows = np.empty(n_rows, dtype=np.int32)
    elif not (isinstance(out, np.ndarray) and out.dtype == np.int32 and out.ndim == 1
              and out.shape[0] == n_rows and out.flags.c_contiguous and out.flags.writeable):
        raise ValueError(f"out must be a writeable contiguous ({n_rows},) int32 array")
    else:
        rows = out
    era_offsets = np.zeros(n_eras + 1, dtype=np.int64)
    if n_rows == 0 or n_eras == 0:
        return rows[:0], era_offsets
    cdef const int64_t[::1] era_rows_view = era_rows
    cdef row_index_t[::1] rows_view = rows
    cdef offset_t[::1] offsets_view = era_offsets
    cdef Py_ssize_t era
    for era in prange(n_eras, nogil=True, schedule='dynamic',
                      num_threads=max(1, min(n_threads, n_eras))):
        offsets_view[era + 1] = list_active(node_of_row, &slot_open[0], n_slots,
                                            era_rows_view[era], era_rows_view[era + 1],
                                            &rows_view[0] + era_rows_view[era])
    with nogil:
        for era in range(n_eras):
            if offsets_view[era] != era_rows_view[era] and offsets_view[era + 1] > 0:
                memmove(&rows_view[0] + offsets_view[era], &rows_view[0] + era_rows_view[era],
                        offsets_view[era + 1] * sizeof(row_index_t))
            offsets_view[era + 1] += offsets_view[era]
    return rows[:offsets_view[n_eras]], era_offsets


cdef inline Py_ssize_t list_active(
        const node_index_t[:, ::1] node_of_row,
        const uint8_t* slot_open,
        Py_ssize_t n_slots,
        Py_ssize_t row_start,
        Py_ssize_t row_end,
        row_index_t* out,                       # OUT the active rows
) noexcept nogil:
    """List the rows of [row_start, row_end) in an open slot of some tree;
    returns how many."""
    cdef Py_ssize_t row, tree, n = 0
    cdef node_index_t slot
    for row in range(row_start, row_end):
        for tree in range(node_of_row.shape[1]):
            slot = node_of_row[row, tree]
            if slot >= 0 and slot < n_slots and slot_open[slot]:
                out[n] = <row_index_t>row
                n += 1
                break
    return n
