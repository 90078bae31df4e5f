# cython: language_level=3
"""Tree ensemble prediction, on raw feature values or on bins.

# Notes:
Trees are stored struct-of-arrays, all trees of a model concatenated:
``feature`` (-1 at a leaf), ``threshold_bin``, ``threshold`` (raw value: x <=
threshold goes left), ``missing_left``, ``left_child``/``right_child``
(absolute node indices) and ``value`` (the leaf's contribution, shrinkage
already applied). A tree is named by the index of its root.

The tree walk itself is the public kernel of packboost/tree.pxd
(``predict_rows_raw`` / ``predict_rows_binned``, what ``cimport packboost``
gives downstream code): this module only validates strides and splits the
rows into blocks of ROW_BLOCK, one ``prange`` iteration each. Inside a block
trees are the outer loop so one tree's nodes stay in cache while the block's
rows walk it. Each row sums its trees in model order, so the result does not
depend on the thread count.
"""

import numpy as np

from cython.parallel cimport prange
from libc.stdint cimport uint8_t, uint32_t, int32_t, int64_t

from packboost.tree cimport (CategorySets, TreeNodes, bin_code_t, bin_index_t, feature_index_t,
                             node_index_t, predict_rows_binned_with_sets,
                             predict_rows_raw_with_sets, raw_value_t)
from packboost._types cimport score_t
from packboost._tasks cimport ROWS_PER_TASK
from packboost._slot_sums cimport unsampled_if

cdef enum:
    ROW_BLOCK = 128


cdef CategorySets* category_sets(CategorySets* sets, const uint32_t[:, ::1] category_words,
                                 Py_ssize_t n_nodes) except? NULL:
    """``sets`` pointing at ``category_words``, or NULL without them."""
    if category_words is None or category_words.shape[1] == 0:
        return NULL
    if category_words.shape[0] != n_nodes:
        raise ValueError(f"category_words must have {n_nodes} rows, one per node")
    sets.words = &category_words[0, 0] if n_nodes > 0 else NULL
    sets.n_words = category_words.shape[1] if n_nodes > 0 else 0
    return sets


def predict_raw(
        const raw_value_t[:, :] X,                    # IN  (n_rows, n_features), any strides
        const feature_index_t[::1] feature,         # IN  node arrays
        const double[::1] threshold,
        const uint8_t[::1] missing_left,
        const node_index_t[::1] left_child,
        const node_index_t[::1] right_child,
        const score_t[::1] value,
        const int64_t[::1] tree_roots,            # IN  trees to add up
        score_t[::1] out,                             # IN/OUT (n_rows,) += sum of trees
        int n_threads,
        const uint32_t[:, ::1] category_words=None,   # IN  (n_nodes, n_words) category sets
        const int32_t[::1] threshold_bin=None,        #     with the nodes' threshold_bin
):
    """Add the trees' outputs for raw rows to ``out``. NaN takes the missing side.
    With ``category_words`` (and ``threshold_bin``), nodes of threshold_bin -1
    split by category set (packboost/tree.pxd)."""
    cdef Py_ssize_t itemsize = sizeof(raw_value_t)
    if X.strides[0] % itemsize or X.strides[1] % itemsize:
        # The kernel strides in elements; a misaligned view (rare) is copied.
        X = np.ascontiguousarray(X)
    cdef Py_ssize_t n_rows = X.shape[0]
    cdef Py_ssize_t n_blocks = (n_rows + ROW_BLOCK - 1) // ROW_BLOCK
    cdef Py_ssize_t row_stride = X.strides[0] // itemsize
    cdef Py_ssize_t feature_stride = X.strides[1] // itemsize
    cdef Py_ssize_t block, row_start
    cdef TreeNodes nodes
    cdef CategorySets sets
    cdef CategorySets* sets_pointer = category_sets(&sets, category_words, feature.shape[0])
    if n_rows == 0 or tree_roots.shape[0] == 0:
        return
    if sets_pointer != NULL and (threshold_bin is None
                                 or threshold_bin.shape[0] != feature.shape[0]):
        raise ValueError("category_words needs the nodes' threshold_bin")
    nodes.feature = &feature[0]
    nodes.threshold = &threshold[0]
    nodes.threshold_bin = &threshold_bin[0] if sets_pointer != NULL else NULL
    nodes.missing_left = &missing_left[0]
    nodes.left_child = &left_child[0]
    nodes.right_child = &right_child[0]
    nodes.value = &value[0]
    for block in prange(n_blocks, nogil=True, schedule='static',
                        num_threads=max(1, min(n_threads, n_blocks))):
        row_start = block * ROW_BLOCK
        predict_rows_raw_with_sets(&nodes, sets_pointer, &tree_roots[0], tree_roots.shape[0],
                                   &X[row_start, 0], min(ROW_BLOCK, n_rows - row_start),
                                   row_stride, feature_stride, &out[row_start])


def predict_binned(
        const bin_code_t[:, ::1] X_binned,        # IN  (n_features, n_rows)
        const bin_index_t[::1] n_bins,              # IN  (n_features,) missing bin code
        const feature_index_t[::1] feature,         # IN  node arrays
        const bin_index_t[::1] threshold_bin,
        const uint8_t[::1] missing_left,
        const node_index_t[::1] left_child,
        const node_index_t[::1] right_child,
        const score_t[::1] value,
        const int64_t[::1] tree_roots,            # IN  trees to add up
        score_t[::1] out,                             # IN/OUT (n_rows,) += sum of trees
        int n_threads,
        const uint32_t[:, ::1] category_words=None,   # IN  (n_nodes, n_words) category sets
):
    """Add the trees' outputs for binned rows (feature-major) to ``out``."""
    cdef Py_ssize_t n_rows = X_binned.shape[1]
    cdef Py_ssize_t n_blocks = (n_rows + ROW_BLOCK - 1) // ROW_BLOCK
    cdef Py_ssize_t block, row_start
    cdef TreeNodes nodes
    cdef CategorySets sets
    cdef CategorySets* sets_pointer = category_sets(&sets, category_words, feature.shape[0])
    if n_rows == 0 or tree_roots.shape[0] == 0:
        return
    nodes.feature = &feature[0]
    nodes.threshold = NULL
    nodes.threshold_bin = &threshold_bin[0]
    nodes.missing_left = &missing_left[0]
    nodes.left_child = &left_child[0]
    nodes.right_child = &right_child[0]
    nodes.value = &value[0]
    for block in prange(n_blocks, nogil=True, schedule='static',
                        num_threads=max(1, min(n_threads, n_blocks))):
        row_start = block * ROW_BLOCK
        # Feature-major: a row's next feature is n_rows elements further.
        predict_rows_binned_with_sets(&nodes, sets_pointer, &tree_roots[0],
                                      tree_roots.shape[0], &X_binned[0, row_start],
                                      min(ROW_BLOCK, n_rows - row_start), 1, n_rows,
                                      &n_bins[0], &out[row_start])


def add_leaf_values(
        const node_index_t[:, ::1] leaf_of_row,     # IN  (n_rows, n_trees) node id in its tree
        const score_t[::1] value,                     # IN  node values, tree t's from tree_roots[t]
        const int64_t[::1] tree_roots,            # IN  (n_trees,)
        score_t[::1] out,                             # IN/OUT (n_rows,) += sum of the trees
        int n_threads,
        const node_index_t[:, ::1] node_of_row=None,  # IN  (n_rows, n_trees) with slot_node:
        const node_index_t[::1] slot_node=None,       #     rows still in a slot of the last
                                                      #     frontier (code != -1) are in its leaf
):
    """Add each row's leaf values to ``out``, trees in order (the additions
    of ``predict_binned``, so the sums are bit-identical to a tree walk).

    With ``node_of_row`` and ``slot_node``: a row whose code in a tree is not
    -1 (``_partition`` codes) is in the leaf ``slot_node[slot]`` of the last
    frontier, where ``leaf_of_row`` has not been written -- the CPU backend
    leaves the last depth's leaves to this pass instead of a routing pass
    that only copies them (backends/cpu.py)."""
    cdef Py_ssize_t n_rows = leaf_of_row.shape[0], n_trees = leaf_of_row.shape[1]
    cdef Py_ssize_t row, tree, leaf
    cdef node_index_t code
    cdef score_t total
    cdef bint pending = node_of_row is not None
    if pending != (slot_node is not None):
        raise ValueError("node_of_row and slot_node go together")
    if n_rows == 0 or n_trees == 0:
        return
    if tree_roots.shape[0] != n_trees or out.shape[0] != n_rows:
        raise ValueError("leaf_of_row, tree_roots and out do not match")
    if pending and (node_of_row.shape[0] != n_rows or node_of_row.shape[1] != n_trees):
        raise ValueError("node_of_row and leaf_of_row do not match")
    if not pending:
        for row in prange(n_rows, nogil=True, schedule='dynamic', chunksize=ROWS_PER_TASK,
                          num_threads=max(1, min(n_threads, n_rows))):
            # The row's sum in a register, trees in order: out[row] +=
            # reloaded it after every store (out may alias value), a chain
            # of store-to-load round trips per row.
            total = out[row]
            for tree in range(n_trees):
                total = total + value[tree_roots[tree] + leaf_of_row[row, tree]]
            out[row] = total
        return
    cdef Py_ssize_t n_slots = slot_node.shape[0], n_outside = 0
    for row in prange(n_rows, nogil=True, schedule='dynamic', chunksize=ROWS_PER_TASK,
                      num_threads=max(1, min(n_threads, n_rows))):
        total = out[row]
        for tree in range(n_trees):
            code = node_of_row[row, tree]
            if code == -1:
                leaf = leaf_of_row[row, tree]
            else:
                # the slot of a code c >= 0 or -2 - slot, by masks (a row
                # subsample makes the signs random; a branch on them was
                # mispredicted)
                code = unsampled_if(code, code >> 31)
                if code >= n_slots:
                    n_outside += 1  # not a slot of the frontier: reported below
                    continue
                leaf = slot_node[code]
            total = total + value[tree_roots[tree] + leaf]
        out[row] = total
    if n_outside:
        raise ValueError(f"{n_outside} codes of node_of_row are not slots of the "
                         f"{n_slots}-slot frontier")
