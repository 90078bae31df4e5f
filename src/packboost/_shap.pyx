# cython: language_level=3
"""Exact path-dependent TreeSHAP contributions (``predict(X, pred_contrib=True)``).

# Notes:
For one row and one tree, the contribution of feature i is its Shapley value
in the game v(S) = E[tree(x) | x_S], where the expectation over the features
outside S follows the training rows down the tree: at a split on a feature not
in S, both children are taken, weighted by their share of the node's rows
(``n_samples``, the "cover"). Lundberg, Erion and Lee's polynomial algorithm
(Consistent individualized feature attribution for tree ensembles, 2018)
computes every feature's value in one walk: it keeps, along the path from the
root, each distinct feature's fraction of "zero" paths (the cover share when
the feature is unknown) and "one" paths (1 when the row goes that way, else
0), plus the permutation weights of the path's subsets, extending the path at
each split and unwinding it when a feature repeats. Cost per (row, tree):
O(leaves x depth^2).

The last column is the expected value: the base score plus each tree's
cover-weighted mean leaf value. Row by row, contributions add up to the raw
prediction (up to float rounding: these are other additions than predict's).
Rows are independent: a ``prange`` over rows, one path buffer per thread.
"""

import numpy as np

from cython.parallel cimport prange, parallel, threadid
from libc.stdint cimport uint8_t, uint32_t, int32_t, int64_t

from packboost.tree cimport (CategorySets, TreeNodes, category_goes_left, raw_value_t,
                             feature_index_t, node_index_t)


cdef enum:
    SHAP_ROW_BLOCK = 256    # rows per block of the tabled path (a thread's unit of work)
    CACHE_LINE = 64         # bytes: each thread's scratch row is padded by one line,
                            # so no two threads write to the same line (false sharing)


cdef struct path_element:
    int feature        # -1 for the root's placeholder
    double zero        # share of the node's cover when the feature is unknown
    double one         # 1 if the row follows this branch, else 0
    double weight      # permutation weight of the subsets of this path length


cdef struct tree_view:
    TreeNodes nodes          # tree.pxd's node arrays (threshold_bin read with sets only)
    const int64_t* cover     # training rows reaching each node (n_samples)
    const CategorySets* sets  # category sets, or NULL: none


cdef inline bint row_goes_left(const TreeNodes* nodes, const CategorySets* sets,
                               Py_ssize_t node, double x) noexcept nogil:
    """The side a raw value takes at a node (tree.pxd's rule, sets included)."""
    if x != x:
        return nodes.missing_left[node]
    if sets != NULL and nodes.threshold_bin[node] < 0:
        return category_goes_left(sets, <node_index_t>node, <int64_t>x)
    return x <= nodes.threshold[node]


cdef CategorySets* category_sets(CategorySets* sets, const uint32_t[:, ::1] category_words,
                                 const int32_t[::1] threshold_bin,
                                 Py_ssize_t n_nodes) except? NULL:
    """``sets`` over ``category_words`` (which needs ``threshold_bin``), or NULL."""
    if category_words is None or category_words.shape[1] == 0 or n_nodes == 0:
        return NULL
    if category_words.shape[0] != n_nodes or threshold_bin is None \
            or threshold_bin.shape[0] != n_nodes:
        raise ValueError(f"category_words and threshold_bin must have {n_nodes} rows")
    sets.words = &category_words[0, 0]
    sets.n_words = category_words.shape[1]
    return sets


cdef inline void extend_path(path_element* path, int depth, double zero, double one,
                             int feature) noexcept nogil:
    cdef int i
    path[depth].feature = feature
    path[depth].zero = zero
    path[depth].one = one
    path[depth].weight = 1.0 if depth == 0 else 0.0
    for i in range(depth - 1, -1, -1):
        path[i + 1].weight += one * path[i].weight * (i + 1) / <double>(depth + 1)
        path[i].weight = zero * path[i].weight * (depth - i) / <double>(depth + 1)


cdef inline void unwind_path(path_element* path, int depth, int index) noexcept nogil:
    cdef double one = path[index].one, zero = path[index].zero
    cdef double next_one = path[depth].weight, saved
    cdef int i
    for i in range(depth - 1, -1, -1):
        if one != 0.0:
            saved = path[i].weight
            path[i].weight = next_one * (depth + 1) / ((i + 1) * one)
            next_one = saved - path[i].weight * zero * (depth - i) / <double>(depth + 1)
        else:
            path[i].weight = path[i].weight * (depth + 1) / (zero * (depth - i))
    for i in range(index, depth):
        path[i].feature = path[i + 1].feature
        path[i].zero = path[i + 1].zero
        path[i].one = path[i + 1].one


cdef inline double unwound_path_sum(const path_element* path, int depth,
                                    int index) noexcept nogil:
    """Sum of the path's weights with element ``index`` unwound (not modifying it)."""
    cdef double one = path[index].one, zero = path[index].zero
    cdef double next_one = path[depth].weight, total = 0.0, scaled
    cdef int i
    for i in range(depth - 1, -1, -1):
        if one != 0.0:
            scaled = next_one * (depth + 1) / ((i + 1) * one)
            total += scaled
            next_one = path[i].weight - scaled * zero * (depth - i) / <double>(depth + 1)
        else:
            total += (path[i].weight / zero) / ((depth - i) / <double>(depth + 1))
    return total


cdef void tree_shap(const tree_view* tree, const raw_value_t* row, Py_ssize_t feature_stride,
                    double* phi, Py_ssize_t node, path_element* parent_path, int depth,
                    double parent_zero, double parent_one, int parent_feature) noexcept nogil:
    # This node's path follows the parent's in the buffer (copy, then extend).
    cdef path_element* path = parent_path + depth + 1
    cdef int i, index
    cdef Py_ssize_t hot, cold
    cdef double x, incoming_zero = 1.0, incoming_one = 1.0, weight
    cdef feature_index_t split
    cdef bint go_left
    for i in range(depth + 1):
        path[i] = parent_path[i]
    extend_path(path, depth, parent_zero, parent_one, parent_feature)

    split = tree.nodes.feature[node]
    if split < 0:  # a leaf: every feature on the path gets its share of the value
        for i in range(1, depth + 1):
            weight = unwound_path_sum(path, depth, i)
            phi[path[i].feature] += (weight * (path[i].one - path[i].zero)
                                     * tree.nodes.value[node])
        return

    x = <double>row[split * feature_stride]
    go_left = row_goes_left(&tree.nodes, tree.sets, node, x)
    hot = tree.nodes.left_child[node] if go_left else tree.nodes.right_child[node]
    cold = tree.nodes.right_child[node] if go_left else tree.nodes.left_child[node]

    # A feature already on the path: undo its earlier split, carry its fractions.
    index = depth + 1
    for i in range(depth + 1):
        if path[i].feature == split:
            index = i
            break
    if index <= depth:
        incoming_zero = path[index].zero
        incoming_one = path[index].one
        unwind_path(path, depth, index)
        depth -= 1

    tree_shap(tree, row, feature_stride, phi, hot, path, depth + 1,
              incoming_zero * tree.cover[hot] / <double>tree.cover[node], incoming_one, split)
    tree_shap(tree, row, feature_stride, phi, cold, path, depth + 1,
              incoming_zero * tree.cover[cold] / <double>tree.cover[node], 0.0, split)


def contributions(
        const raw_value_t[:, :] X,               # IN  (n_rows, n_features), any strides
        const feature_index_t[::1] feature,       # IN  node arrays
        const double[::1] threshold,
        const uint8_t[::1] missing_left,
        const node_index_t[::1] left_child,
        const node_index_t[::1] right_child,
        const double[::1] value,
        const int64_t[::1] cover,                 # IN  training rows reaching each node
        const int64_t[::1] tree_roots,            # IN  the trees to explain
        int max_depth,                            # IN  deepest leaf of those trees
        double[:, ::1] out,                       # IN/OUT (n_rows, n_features + 1) +=
        int n_threads,
        const uint32_t[:, ::1] category_words=None,  # IN  category sets (tree.pxd), with
        const int32_t[::1] threshold_bin=None,       #     the nodes' threshold_bin
):
    """Add every row's TreeSHAP contributions (last column: expected value) to ``out``."""
    cdef Py_ssize_t itemsize = sizeof(raw_value_t)
    if X.strides[0] % itemsize or X.strides[1] % itemsize:
        X = np.ascontiguousarray(X)
    cdef Py_ssize_t n_rows = X.shape[0], n_features = X.shape[1]
    cdef Py_ssize_t n_trees = tree_roots.shape[0]
    if out.shape[0] != n_rows or out.shape[1] != n_features + 1:
        raise ValueError("out must have shape (n_rows, n_features + 1)")
    if n_rows == 0 or n_trees == 0:
        return
    cdef Py_ssize_t row_stride = X.strides[0] // itemsize
    cdef Py_ssize_t feature_stride = X.strides[1] // itemsize
    cdef tree_view tree
    tree.nodes.feature = &feature[0]
    tree.nodes.threshold = &threshold[0]
    tree.nodes.missing_left = &missing_left[0]
    tree.nodes.left_child = &left_child[0]
    tree.nodes.right_child = &right_child[0]
    tree.nodes.value = &value[0]
    cdef CategorySets sets
    tree.sets = category_sets(&sets, category_words, threshold_bin, feature.shape[0])
    tree.nodes.threshold_bin = &threshold_bin[0] if tree.sets != NULL else NULL
    tree.cover = &cover[0]

    # Expected value of each tree: its leaves' values weighted by cover.
    cdef double expected = 0.0
    cdef Py_ssize_t t
    for t in range(n_trees):
        expected += _expected_value(&tree, tree_roots[t])

    # Paths of lengths 1 .. max_depth + 1, each copied below its parent's.
    cdef Py_ssize_t path_length = (max_depth + 2) * (max_depth + 3) // 2
    n_threads = max(1, min(n_threads, n_rows))
    buffers = np.zeros((n_threads, path_length * sizeof(path_element) + CACHE_LINE),
                       dtype=np.uint8)
    cdef uint8_t[:, ::1] buffer_view = buffers
    cdef Py_ssize_t row, t_index
    cdef int thread
    cdef path_element* path
    with nogil, parallel(num_threads=n_threads):
        thread = threadid()
        path = <path_element*>&buffer_view[thread, 0]
        for row in prange(n_rows, schedule='static'):
            for t_index in range(n_trees):
                tree_shap(&tree, &X[0, 0] + row * row_stride, feature_stride,
                          &out[row, 0], tree_roots[t_index], path, 0, 1.0, 1.0, -1)
            out[row, n_features] += expected


cdef double _expected_value(const tree_view* tree, Py_ssize_t node) noexcept nogil:
    if tree.nodes.feature[node] < 0:
        return tree.nodes.value[node]
    cdef Py_ssize_t left = tree.nodes.left_child[node], right = tree.nodes.right_child[node]
    return (tree.cover[left] * _expected_value(tree, left)
            + tree.cover[right] * _expected_value(tree, right)) / <double>tree.cover[node]


# -- the fast path: per-leaf tables of contributions --------------------------------
#
# In the path-dependent game a leaf's contribution to the features on its path
# depends on the row only through d bits: for each distinct feature on the
# path, does the row satisfy every split on that feature there (its "one"
# fraction, 0 or 1)? The zero fractions (cover shares) are fixed. So each leaf
# gets a table of its d features' contributions for every one of its 2^d
# patterns (the weights of the path polynomial do not depend on the order in
# which features joined the path), filled once per call with the functions
# above; a row then costs, per tree, one comparison per internal node and d
# bit operations and d additions per leaf: O(leaves x depth) instead of
# O(leaves x depth^2) with divisions, and no recursion.


def fill_leaf_tables(
        const int64_t[::1] leaf_first,       # IN  (n_leaves + 1,) offsets into features/zero
        const int64_t[::1] path_features,    # IN  distinct features of each leaf's path
        const double[::1] path_zero,         # IN  their zero fractions (products of shares)
        const double[::1] leaf_value,        # IN  (n_leaves,)
        const int64_t[::1] table_first,      # IN  (n_leaves,) offsets into table
        double[::1] table,                   # OUT 2^d x d per leaf, pattern-major
        int n_threads,
):
    """Contributions of every leaf for every pattern of its path features' bits."""
    cdef Py_ssize_t n_leaves = leaf_value.shape[0], leaf
    cdef int max_d = 0
    for leaf in range(n_leaves):
        max_d = max(max_d, <int>(leaf_first[leaf + 1] - leaf_first[leaf]))
    n_threads = max(1, min(n_threads, n_leaves))
    buffers = np.zeros((n_threads, (max_d + 2) * sizeof(path_element) + CACHE_LINE),
                       dtype=np.uint8)
    cdef uint8_t[:, ::1] buffer_view = buffers
    cdef path_element* path
    cdef int d, j, pattern, thread
    cdef int64_t first, out
    with nogil, parallel(num_threads=n_threads):
        thread = threadid()
        path = <path_element*>&buffer_view[thread, 0]
        for leaf in prange(n_leaves, schedule='dynamic'):
            first = leaf_first[leaf]
            d = <int>(leaf_first[leaf + 1] - first)
            for pattern in range(1 << d):
                extend_path(path, 0, 1.0, 1.0, -1)
                for j in range(d):
                    extend_path(path, j + 1, path_zero[first + j],
                                1.0 if (pattern >> j) & 1 else 0.0, <int>path_features[first + j])
                out = table_first[leaf] + pattern * d
                for j in range(d):
                    table[out + j] = (unwound_path_sum(path, d, j + 1)
                                      * (path[j + 1].one - path[j + 1].zero) * leaf_value[leaf])


def tabled_contributions(
        const raw_value_t[:, :] X,             # IN  (n_rows, n_features), any strides
        const feature_index_t[::1] feature,     # IN  node arrays
        const double[::1] threshold,
        const uint8_t[::1] missing_left,
        const node_index_t[::1] left_child,
        const node_index_t[::1] right_child,
        const int64_t[::1] tree_first,          # IN  (n_trees,) each tree's nodes are
        const int64_t[::1] tree_end,            #     tree_first[t] .. tree_end[t] - 1
        const int64_t[::1] split_first,         # IN  (n_trees + 1,) ranges of split_nodes
        const int64_t[::1] split_nodes,         # IN  each tree's split nodes, parents first
        const int32_t[::1] split_bit,           # IN  the bit of each split's feature on
                                                #     its path (same order as split_nodes)
        const int64_t[::1] tree_leaves,         # IN  (n_trees + 1,) leaf ranges
        const int64_t[::1] leaf_node,           # IN  (n_leaves,) each leaf's node
        const int64_t[::1] leaf_first,          # IN  offsets into path_features
        const int64_t[::1] path_features,
        const int64_t[::1] table_first,
        const double[::1] table,
        double[:, ::1] out,                     # IN/OUT (n_rows, n_features + 1) +=
        int n_threads,
        const uint32_t[:, ::1] category_words=None,  # IN  category sets (tree.pxd), with
        const int32_t[::1] threshold_bin=None,       #     the nodes' threshold_bin
):
    """Add every row's contributions from the tabled trees to ``out``.

    A row's pattern at a leaf has bit j cleared when the row fails a split on the
    path's j-th feature. One pass over a tree's splits, parents first, hands each
    node's pattern to its children (the side the row does not take loses the
    split's bit), so a leaf's pattern costs nothing more: per (row, tree), one
    comparison per split and d table additions per leaf, with no data-dependent
    branch.
    """
    cdef Py_ssize_t itemsize = sizeof(raw_value_t)
    if X.strides[0] % itemsize or X.strides[1] % itemsize:
        X = np.ascontiguousarray(X)
    cdef Py_ssize_t n_rows = X.shape[0], n_trees = tree_first.shape[0]
    cdef Py_ssize_t row_stride = X.strides[0] // itemsize
    cdef Py_ssize_t feature_stride = X.strides[1] // itemsize
    cdef CategorySets sets
    cdef CategorySets* sets_pointer = category_sets(&sets, category_words, threshold_bin,
                                                    feature.shape[0])
    cdef TreeNodes nodes
    if n_rows == 0 or n_trees == 0:
        return
    nodes.feature = &feature[0]
    nodes.threshold = &threshold[0]
    nodes.missing_left = &missing_left[0]
    nodes.threshold_bin = &threshold_bin[0] if sets_pointer != NULL else NULL
    cdef Py_ssize_t max_nodes = 1, t
    for t in range(n_trees):
        max_nodes = max(max_nodes, tree_end[t] - tree_first[t])
    cdef Py_ssize_t n_blocks = (n_rows + SHAP_ROW_BLOCK - 1) // SHAP_ROW_BLOCK
    n_threads = max(1, min(n_threads, n_blocks))
    scratch = np.zeros((n_threads, max_nodes + CACHE_LINE // sizeof(uint32_t)),
                       dtype=np.uint32)
    cdef uint32_t[:, ::1] scratch_view = scratch
    cdef uint32_t* node_pattern
    cdef Py_ssize_t block, row, row_end, node, base, leaf, split, first
    cdef int thread, d, j
    cdef uint32_t pattern, goes_left, bit
    cdef double x
    cdef const raw_value_t* values
    cdef const double* entry
    cdef double* out_row
    with nogil, parallel(num_threads=n_threads):
        thread = threadid()
        node_pattern = &scratch_view[thread, 0]
        for block in prange(n_blocks, schedule='static'):
            row_end = min(n_rows, (block + 1) * SHAP_ROW_BLOCK)
            # Trees outer, rows inner: one tree's tables stay in cache for the block.
            for t in range(n_trees):
                base = tree_first[t]
                for row in range(block * SHAP_ROW_BLOCK, row_end):
                    values = &X[0, 0] + row * row_stride
                    out_row = &out[row, 0]
                    node_pattern[0] = 0xFFFFFFFFu
                    for split in range(split_first[t], split_first[t + 1]):
                        node = split_nodes[split]
                        x = <double>values[feature[node] * feature_stride]
                        goes_left = row_goes_left(&nodes, sets_pointer, node, x)
                        pattern = node_pattern[node - base]
                        bit = (<uint32_t>1) << split_bit[split]
                        # The child the row does not take loses this split's bit.
                        node_pattern[left_child[node] - base] = pattern & ~(bit * (1u - goes_left))
                        node_pattern[right_child[node] - base] = pattern & ~(bit * goes_left)
                    for leaf in range(tree_leaves[t], tree_leaves[t + 1]):
                        first = leaf_first[leaf]
                        d = <int>(leaf_first[leaf + 1] - first)
                        pattern = node_pattern[leaf_node[leaf] - base] & ((1u << d) - 1u)
                        entry = &table[table_first[leaf] + pattern * d]
                        for j in range(d):
                            out_row[path_features[first + j]] += entry[j]
