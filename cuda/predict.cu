/*
 * predict.cu -- tree evaluation on the device. Mirrors packboost/_predict.pyx:
 * on training bins (the pack update of a round) and on raw values (predict).
 * One thread per row; each row sums its trees in order.
 */
#include <math.h>

#include "internal.cuh"

template <typename BinT>
__global__ void pbc_predict_binned_kernel(const BinT *__restrict__ X_binned, int64_t n_rows,
                                          const int32_t *__restrict__ n_bins,
                                          const int32_t *__restrict__ feature,
                                          const int32_t *__restrict__ threshold_bin,
                                          const uint8_t *__restrict__ missing_left,
                                          const int32_t *__restrict__ left_child,
                                          const int32_t *__restrict__ right_child,
                                          const double *__restrict__ value, int32_t n_trees,
                                          const int64_t *__restrict__ tree_roots,
                                          double *__restrict__ out)
{
    for (int64_t row = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; row < n_rows;
         row += (int64_t)gridDim.x * blockDim.x) {
        double total = 0.0;
        for (int32_t tree = 0; tree < n_trees; ++tree) {
            int64_t node = tree_roots[tree];
            while (feature[node] >= 0) {
                int32_t f = feature[node];
                int32_t bin = (int32_t)X_binned[f * n_rows + row];
                bool left = bin == n_bins[f] ? missing_left[node] != 0
                                             : bin <= threshold_bin[node];
                node = left ? left_child[node] : right_child[node];
            }
            total += value[node];
        }
        out[row] = total;
    }
}

int pbc_launch_predict_binned(pbc_context *ctx, const int32_t *feature,
                              const int32_t *threshold_bin, const uint8_t *missing_left,
                              const int32_t *left_child, const int32_t *right_child,
                              const double *value, int32_t n_trees, const int64_t *tree_roots,
                              double *out)
{
    unsigned int blocks = pbc_blocks(ctx->n_rows, PBC_ROW_THREADS);
    if (ctx->bytes_per_bin == 1)
        PBC_LAUNCH(pbc_predict_binned_kernel<uint8_t>, blocks, PBC_ROW_THREADS, 0, ctx->stream)(
            (const uint8_t *)ctx->X_binned, ctx->n_rows, ctx->n_bins, feature, threshold_bin,
            missing_left, left_child, right_child, value, n_trees, tree_roots, out);
    else
        PBC_LAUNCH(pbc_predict_binned_kernel<uint16_t>, blocks, PBC_ROW_THREADS, 0, ctx->stream)(
            (const uint16_t *)ctx->X_binned, ctx->n_rows, ctx->n_bins, feature, threshold_bin,
            missing_left, left_child, right_child, value, n_trees, tree_roots, out);
    PBC_CHECK_LAUNCH();
    return PBC_OK;
}

/* Raw values, row-major (n_rows, n_features); NaN takes the missing side. */
template <typename T>
__global__ void pbc_predict_raw_kernel(const T *__restrict__ X, int64_t n_rows,
                                       int64_t n_features, const int32_t *__restrict__ feature,
                                       const double *__restrict__ threshold,
                                       const uint8_t *__restrict__ missing_left,
                                       const int32_t *__restrict__ left_child,
                                       const int32_t *__restrict__ right_child,
                                       const double *__restrict__ value, int64_t n_trees,
                                       const int64_t *__restrict__ tree_roots,
                                       double *__restrict__ out)
{
    for (int64_t row = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; row < n_rows;
         row += (int64_t)gridDim.x * blockDim.x) {
        double total = 0.0;
        for (int64_t tree = 0; tree < n_trees; ++tree) {
            int64_t node = tree_roots[tree];
            while (feature[node] >= 0) {
                double x = (double)X[row * n_features + feature[node]];
                if (isnan(x))
                    node = missing_left[node] ? left_child[node] : right_child[node];
                else
                    node = x <= threshold[node] ? left_child[node] : right_child[node];
            }
            total += value[node];
        }
        out[row] = total;
    }
}

int pbc_launch_predict_raw(cudaStream_t stream, const void *X, int dtype, int64_t n_rows,
                           int64_t n_features, const int32_t *feature, const double *threshold,
                           const uint8_t *missing_left, const int32_t *left_child,
                           const int32_t *right_child, const double *value, int64_t n_trees,
                           const int64_t *tree_roots, double *out)
{
    unsigned int blocks = pbc_blocks(n_rows, PBC_ROW_THREADS);
#define PBC_PREDICT_RAW(T)                                                             \
    PBC_LAUNCH(pbc_predict_raw_kernel<T>, blocks, PBC_ROW_THREADS, 0, stream)(                 \
        (const T *)X, n_rows, n_features, feature, threshold, missing_left, left_child, \
        right_child, value, n_trees, tree_roots, out)
    switch (dtype) {
    case PBC_DTYPE_FLOAT64: PBC_PREDICT_RAW(double); break;
    case PBC_DTYPE_FLOAT32: PBC_PREDICT_RAW(float); break;
    case PBC_DTYPE_INT8: PBC_PREDICT_RAW(int8_t); break;
    case PBC_DTYPE_UINT8: PBC_PREDICT_RAW(uint8_t); break;
    default: return PBC_ERROR_INVALID_ARGUMENT;
    }
#undef PBC_PREDICT_RAW
    PBC_CHECK_LAUNCH();
    return PBC_OK;
}
