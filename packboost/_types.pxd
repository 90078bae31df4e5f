# Cython names for every array role of the engine (STYLE.md 3).
#
# The matching NumPy dtypes live in packboost/_dtypes (see _openmp.pyx
# neighbours): keep both in sync. Fixed-width integer types only.

from libc.stdint cimport int8_t, uint8_t, int16_t, uint16_t, int32_t, int64_t, uint32_t

# Binned feature matrix, feature-major (n_features, n_rows): uint8 up to 256
# bins (missing bin included), uint16 above (DESIGN 3.1).
ctypedef fused X_BINNED_C:
    uint8_t
    uint16_t

# Raw feature values accepted by the raw-input predictor without a copy.
ctypedef fused X_RAW_C:
    double
    float
    int8_t
    uint8_t
    int16_t
    int32_t
    int64_t

ctypedef double G_H_C          # gradients, hessians, their sums
ctypedef double Y_C            # predictions, leaf values
ctypedef int32_t ROW_IDX_C     # row indices into the era-sorted training rows
ctypedef int32_t ERA_IDX_C     # era codes 0 .. n_eras-1
ctypedef int32_t FEATURE_IDX_C # feature indices; -1 marks a leaf in a tree
ctypedef int32_t BIN_IDX_C     # bin indices and bin thresholds
ctypedef int32_t NODE_IDX_C    # node indices inside a tree or a frontier
ctypedef int64_t OFFSET_C      # segment boundaries in sample-index arrays

# One cell of a per-era histogram: sums over the rows of one (era, bin).
ctypedef struct hist_entry:
    double sum_gradients
    double sum_hessians
    int64_t count
