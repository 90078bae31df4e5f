# The engine's private array roles, named in the vocabulary of the public
# packboost/tree.pxd (``*_t``, fixed-width integers only): the public names
# -- bin_code_t (uint8/uint16 bin codes), raw_value_t (raw feature values),
# feature_index_t, node_index_t (nodes and frontier slots), bin_index_t --
# are cimported from packboost.tree; the roles only the engine has are here.
#
# Matching NumPy dtypes: float64 gradients and scores, int32 indices, int64
# offsets; HIST_DTYPE (packboost/_histogram.pyx) for hist_entry; NODE_FIELDS
# (packboost/ensemble.py) for the node arrays.

from libc.stdint cimport int32_t, int64_t

ctypedef double gradient_t      # gradients, hessians, their sums
ctypedef double score_t         # predictions, leaf values
ctypedef int32_t row_index_t    # row indices into the era-sorted training rows
ctypedef int32_t era_index_t    # era codes 0 .. n_eras-1
ctypedef int64_t offset_t       # segment boundaries (era offsets into row lists)

# One cell of a per-era histogram as the scorer reads it: sums over the rows
# of one (era, bin). The kernels accumulate fixed-point int64 cells and unpack
# a tile into these (docs/fixed-point.md §3).
ctypedef struct hist_entry:
    double sum_gradients
    double sum_hessians
    int64_t count
