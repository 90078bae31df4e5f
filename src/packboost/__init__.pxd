# Public Cython surface of packboost: ``cimport packboost``.
#
#     cimport packboost
#     cdef packboost.TreeNodes nodes
#     nodes.feature = &feature[0]            # ... one pointer per node array
#     packboost.predict_rows_raw(&nodes, &roots[0], n_trees, &X[0, 0], n_rows,
#                                n_features, 1, &out[0])      # nogil
#
# Compile with Cython's include path set to ``packboost.get_include()``. The
# layout, the kernels and their contracts are documented in packboost/tree.pxd;
# README "Use from Cython" has a complete downstream package. Only the names
# below are public; packboost/_*.pxd are private and free to change.

from packboost.tree cimport (
    CategorySets,
    TreeNodes,
    bin_code_t,
    bin_index_t,
    category_goes_left,
    feature_index_t,
    leaf_of_binned_row,
    leaf_of_binned_row_with_sets,
    leaf_of_raw_row,
    leaf_of_raw_row_with_sets,
    node_index_t,
    predict_rows_binned,
    predict_rows_binned_with_sets,
    predict_rows_raw,
    predict_rows_raw_with_sets,
    raw_value_t,
)
