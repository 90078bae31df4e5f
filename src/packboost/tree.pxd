# Public Cython API: the fitted trees' struct-of-arrays layout and the nogil
# kernels that evaluate them (``cimport packboost`` re-exports all of it).
#
# This is the ONE implementation of tree evaluation: packboost/_predict.pyx
# (what ``model.predict`` runs) calls these same functions, so downstream code
# that cimports them gets bit-identical results. Everything is ``inline`` in
# this file: a downstream module compiles its own copy and needs neither a C
# header nor a link against packboost's extension modules (only Cython's
# include path, ``packboost.get_include()``).
#
# Layout (packboost/ensemble.py, NODE_FIELDS; the model file stores it as is):
# all trees of a model are concatenated; node ``i`` is entry ``i`` of every
# array; child indices are absolute, so a tree is named by its root node
# (``model.ensemble_.tree_roots()``, int64). A node with ``feature < 0`` is a
# leaf. Rows go left when ``x <= threshold`` (raw values) or ``bin <=
# threshold_bin`` (bin codes); NaN, or the missing bin, goes left iff
# ``missing_left``. ``value`` holds the leaf's contribution with the
# learning rate already applied, so a raw score is
# ``base_score + sum over trees of value[leaf]``.
#
#     feature        int32    split feature, -1 at a leaf
#     threshold      float64  raw-value threshold
#     threshold_bin  int32    bin-code threshold
#     missing_left   uint8    1: NaN / missing bin goes left
#     left_child     int32    absolute node index (-1 at a leaf)
#     right_child    int32
#     value          float64  leaf contribution
#
# Categorical features (docs/guide/categorical.md): a model trained with them
# has a category set per node, ``category_words`` (n_nodes, n_words) uint32,
# given to the ``*_with_sets`` kernels as a ``CategorySets``. A node whose
# ``threshold_bin`` is -1 splits by its set: a row whose value (raw: the
# category's code as a number) or bin is category code ``c`` goes left iff bit
# ``c % 32`` of word ``c // 32`` of the node's row is set; NaN and the missing
# bin take ``missing_left``. The ``*_with_sets`` kernels read ``threshold_bin``
# in raw mode too. Such a node's ``threshold`` is -inf, so the kernels without
# sets send every non-missing value right there: use them only for models
# without categorical features.
#
# Kernels assume valid input (checked at the public boundary): children in range, features below the
# row length, roots pointing at nodes of the same arrays. They do not
# allocate, do not hold the GIL and start no threads: parallelise over blocks
# of rows in the caller (``prange``), as packboost/_predict.pyx does.
#
# Semver: names in this file are public; everything in packboost/_*.pxd is
# private and may change in any release.

from libc.stdint cimport int8_t, uint8_t, int16_t, uint16_t, int32_t, uint32_t, int64_t

ctypedef int32_t feature_index_t   # ``feature``: split feature, -1 at a leaf
ctypedef int32_t node_index_t      # ``left_child`` / ``right_child``, tree roots
ctypedef int32_t bin_index_t       # ``threshold_bin`` and missing-bin codes

# Raw feature values the kernels read (any of these, without a conversion).
ctypedef fused raw_value_t:
    double
    float
    int8_t
    uint8_t
    int16_t
    int32_t
    int64_t

# Bin codes: uint8 up to 256 bins (missing bin included), uint16 above.
ctypedef fused bin_code_t:
    uint8_t
    uint16_t


# Pointers to the node arrays of a model (struct-of-arrays, same length).
# Only the fields a kernel reads must be set: raw prediction reads
# ``threshold``, binned prediction reads ``threshold_bin``.
ctypedef struct TreeNodes:
    const feature_index_t* feature
    const double* threshold
    const bin_index_t* threshold_bin
    const uint8_t* missing_left
    const node_index_t* left_child
    const node_index_t* right_child
    const double* value


# The category sets of a model with categorical features: node i's set is
# words[i * n_words .. (i + 1) * n_words - 1].
ctypedef struct CategorySets:
    const uint32_t* words
    Py_ssize_t n_words


cdef inline bint category_goes_left(
        const CategorySets* sets,        # IN  the model's category sets
        node_index_t node,               # IN  a node splitting by category set
        int64_t code,                    # IN  the row's category code
) noexcept nogil:
    """Is category ``code`` in the node's left set? Codes beyond the set's
    words (or negative) are not."""
    if code < 0 or code >= 32 * sets.n_words:
        return False
    return (sets.words[node * sets.n_words + (code >> 5)] >> (code & 31)) & 1


cdef inline node_index_t leaf_of_raw_row(
        const TreeNodes* nodes,          # IN  node arrays
        node_index_t root,               # IN  root node of the tree
        const raw_value_t* row,          # IN  row[f * feature_stride] is feature f
        Py_ssize_t feature_stride,       # IN  elements between two features of a row
) noexcept nogil:
    """Index of the leaf one row of raw values reaches in one tree."""
    return leaf_of_raw_row_with_sets(nodes, NULL, root, row, feature_stride)


cdef inline node_index_t leaf_of_raw_row_with_sets(
        const TreeNodes* nodes,          # IN  node arrays (threshold_bin too if sets)
        const CategorySets* sets,        # IN  category sets, or NULL: none
        node_index_t root,               # IN  root node of the tree
        const raw_value_t* row,          # IN  row[f * feature_stride] is feature f
        Py_ssize_t feature_stride,       # IN  elements between two features of a row
) noexcept nogil:
    """leaf_of_raw_row for a model with categorical features."""
    # Locals, not nodes.*: the compiler need not reload the struct at every step.
    cdef const feature_index_t* feature = nodes.feature
    cdef const double* threshold = nodes.threshold
    cdef const uint8_t* missing_left = nodes.missing_left
    cdef const node_index_t* left_child = nodes.left_child
    cdef const node_index_t* right_child = nodes.right_child
    cdef node_index_t node = root
    cdef feature_index_t feature_idx = feature[node]
    cdef double x
    while feature_idx >= 0:
        x = <double>row[feature_idx * feature_stride]
        if x != x:  # NaN; compiled away for integer inputs
            node = left_child[node] if missing_left[node] else right_child[node]
        elif sets != NULL and nodes.threshold_bin[node] < 0:
            node = left_child[node] if category_goes_left(sets, node, <int64_t>x) \
                else right_child[node]
        elif x <= threshold[node]:
            node = left_child[node]
        else:
            node = right_child[node]
        feature_idx = feature[node]
    return node


cdef inline node_index_t leaf_of_binned_row(
        const TreeNodes* nodes,          # IN  node arrays
        node_index_t root,               # IN  root node of the tree
        const bin_code_t* row,           # IN  row[f * feature_stride] is feature f's bin
        Py_ssize_t feature_stride,       # IN  elements between two features of a row
        const bin_index_t* missing_bin,  # IN  (n_features,) feature f's missing-bin code
) noexcept nogil:
    """Index of the leaf one row of bin codes reaches in one tree."""
    return leaf_of_binned_row_with_sets(nodes, NULL, root, row, feature_stride, missing_bin)


cdef inline node_index_t leaf_of_binned_row_with_sets(
        const TreeNodes* nodes,          # IN  node arrays
        const CategorySets* sets,        # IN  category sets, or NULL: none
        node_index_t root,               # IN  root node of the tree
        const bin_code_t* row,           # IN  row[f * feature_stride] is feature f's bin
        Py_ssize_t feature_stride,       # IN  elements between two features of a row
        const bin_index_t* missing_bin,  # IN  (n_features,) feature f's missing-bin code
) noexcept nogil:
    """leaf_of_binned_row for a model with categorical features."""
    cdef const feature_index_t* feature = nodes.feature
    cdef const bin_index_t* threshold_bin = nodes.threshold_bin
    cdef const uint8_t* missing_left = nodes.missing_left
    cdef const node_index_t* left_child = nodes.left_child
    cdef const node_index_t* right_child = nodes.right_child
    cdef node_index_t node = root
    cdef feature_index_t feature_idx = feature[node]
    cdef bin_index_t bin_value
    while feature_idx >= 0:
        bin_value = row[feature_idx * feature_stride]
        if bin_value == missing_bin[feature_idx]:
            node = left_child[node] if missing_left[node] else right_child[node]
        elif sets != NULL and threshold_bin[node] < 0:
            node = left_child[node] if category_goes_left(sets, node, bin_value) \
                else right_child[node]
        elif bin_value <= threshold_bin[node]:
            node = left_child[node]
        else:
            node = right_child[node]
        feature_idx = feature[node]
    return node


cdef inline void predict_rows_raw(
        const TreeNodes* nodes,          # IN  node arrays
        const int64_t* tree_roots,       # IN  (n_trees,) roots of the trees to add up
        Py_ssize_t n_trees,
        const raw_value_t* X,            # IN  row r, feature f at X[r * row_stride + f * feature_stride]
        Py_ssize_t n_rows,
        Py_ssize_t row_stride,           # IN  strides in elements, not bytes
        Py_ssize_t feature_stride,
        double* out,                     # IN/OUT (n_rows,): out[r] += sum of the trees' leaves
) noexcept nogil:
    """Add the trees' outputs for ``n_rows`` rows of raw values to ``out``.

    Trees are the outer loop (one tree's nodes stay in cache while the rows
    walk it); each row adds its trees in the order of ``tree_roots``, so the
    sums do not depend on how a caller splits the rows into blocks.
    """
    predict_rows_raw_with_sets(nodes, NULL, tree_roots, n_trees, X, n_rows, row_stride,
                               feature_stride, out)


cdef inline void predict_rows_raw_with_sets(
        const TreeNodes* nodes,          # IN  node arrays (threshold_bin too if sets)
        const CategorySets* sets,        # IN  category sets, or NULL: none
        const int64_t* tree_roots,       # IN  (n_trees,) roots of the trees to add up
        Py_ssize_t n_trees,
        const raw_value_t* X,            # IN  as predict_rows_raw
        Py_ssize_t n_rows,
        Py_ssize_t row_stride,
        Py_ssize_t feature_stride,
        double* out,                     # IN/OUT (n_rows,): out[r] += sum of the trees' leaves
) noexcept nogil:
    """predict_rows_raw for a model with categorical features."""
    cdef Py_ssize_t tree, row
    for tree in range(n_trees):
        for row in range(n_rows):
            out[row] += nodes.value[leaf_of_raw_row_with_sets(
                nodes, sets, <node_index_t>tree_roots[tree], X + row * row_stride,
                feature_stride)]


cdef inline void predict_rows_binned(
        const TreeNodes* nodes,          # IN  node arrays
        const int64_t* tree_roots,       # IN  (n_trees,) roots of the trees to add up
        Py_ssize_t n_trees,
        const bin_code_t* X_binned,      # IN  row r, feature f at X_binned[r * row_stride + f * feature_stride]
        Py_ssize_t n_rows,
        Py_ssize_t row_stride,           # IN  strides in elements, not bytes
        Py_ssize_t feature_stride,
        const bin_index_t* missing_bin,  # IN  (n_features,) missing-bin code of each feature
        double* out,                     # IN/OUT (n_rows,): out[r] += sum of the trees' leaves
) noexcept nogil:
    """Add the trees' outputs for ``n_rows`` rows of bin codes to ``out`` (as above)."""
    predict_rows_binned_with_sets(nodes, NULL, tree_roots, n_trees, X_binned, n_rows,
                                  row_stride, feature_stride, missing_bin, out)


cdef inline void predict_rows_binned_with_sets(
        const TreeNodes* nodes,          # IN  node arrays
        const CategorySets* sets,        # IN  category sets, or NULL: none
        const int64_t* tree_roots,       # IN  (n_trees,) roots of the trees to add up
        Py_ssize_t n_trees,
        const bin_code_t* X_binned,      # IN  as predict_rows_binned
        Py_ssize_t n_rows,
        Py_ssize_t row_stride,
        Py_ssize_t feature_stride,
        const bin_index_t* missing_bin,  # IN  (n_features,) missing-bin code of each feature
        double* out,                     # IN/OUT (n_rows,): out[r] += sum of the trees' leaves
) noexcept nogil:
    """predict_rows_binned for a model with categorical features."""
    cdef Py_ssize_t tree, row
    for tree in range(n_trees):
        for row in range(n_rows):
            out[row] += nodes.value[leaf_of_binned_row_with_sets(
                nodes, sets, <node_index_t>tree_roots[tree], X_binned + row * row_stride,
                feature_stride, missing_bin)]
