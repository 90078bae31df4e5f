/*
 * predict.cu -- tree evaluation on the device. Mirrors packboost/_predict.pyx:
 * on training bins (the pack update of a round) and on raw values (predict).
 * One thread per row; each row sums its trees in order.
 */
#include <math.h>

#include "internal.cuh"

/*
 * The pack update on the training rows by lookup (_predict.pyx
 * add_leaf_values): each row adds its trees' leaf values to out in tree
 * order, the CPU's additions in the CPU's order.
 */
__global__ void pbc_add_leaf_values_kernel(const int32_t *__restrict__ leaf_of_row,
                                           int64_t n_rows, int32_t pack_size,
                                           const double *__restrict__ value,
                                           const int64_t *__restrict__ tree_roots,
                                           double *__restrict__ out)
{
    for (int64_t row = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; row < n_rows;
         row += (int64_t)gridDim.x * blockDim.x) {
        double total = out[row];
        for (int32_t tree = 0; tree < pack_size; ++tree)
            total += value[tree_roots[tree] + leaf_of_row[row * pack_size + tree]];
        out[row] = total;
    }
}

int pbc_launch_add_leaf_values(pbc_context *ctx, const double *value, const int64_t *tree_roots,
                               double *out)
{
    PBC_LAUNCH(pbc_add_leaf_values_kernel, pbc_blocks(ctx->n_rows, PBC_ROW_THREADS),
               PBC_ROW_THREADS, 0, ctx->stream)(ctx->leaf_of_row, ctx->n_rows, ctx->pack_size,
                                                value, tree_roots, out);
    PBC_CHECK_LAUNCH();
    return PBC_OK;
}

/* Raw values, row-major (n_rows, n_features); NaN takes the missing side.
   Each output's trees (output_tree_starts) summed in order into
   out[row * n_outputs + output]: a row's values are read once for every
   output (one upload of X). */
template <typename T>
__global__ void pbc_predict_raw_kernel(const T *__restrict__ X, int64_t n_rows,
                                       int64_t n_features, const int32_t *__restrict__ feature,
                                       const double *__restrict__ threshold,
                                       const uint8_t *__restrict__ missing_left,
                                       const int32_t *__restrict__ left_child,
                                       const int32_t *__restrict__ right_child,
                                       const double *__restrict__ value,
                                       const int64_t *__restrict__ tree_roots,
                                       int64_t n_outputs,
                                       const int64_t *__restrict__ output_tree_starts,
                                       double *__restrict__ out)
{
    for (int64_t row = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; row < n_rows;
         row += (int64_t)gridDim.x * blockDim.x) {
        for (int64_t output = 0; output < n_outputs; ++output) {
            double total = 0.0;
            for (int64_t tree = output_tree_starts[output];
                 tree < output_tree_starts[output + 1]; ++tree) {
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
            out[row * n_outputs + output] = total;
        }
    }
}

int pbc_launch_predict_raw(cudaStream_t stream, const void *X, int dtype, int64_t n_rows,
                           int64_t n_features, const int32_t *feature, const double *threshold,
                           const uint8_t *missing_left, const int32_t *left_child,
                           const int32_t *right_child, const double *value,
                           const int64_t *tree_roots, int64_t n_outputs,
                           const int64_t *output_tree_starts, double *out)
{
    unsigned int blocks = pbc_blocks(n_rows, PBC_ROW_THREADS);
#define PBC_PREDICT_RAW(T)                                                             \
    PBC_LAUNCH(pbc_predict_raw_kernel<T>, blocks, PBC_ROW_THREADS, 0, stream)(                 \
        (const T *)X, n_rows, n_features, feature, threshold, missing_left, left_child, \
        right_child, value, tree_roots, n_outputs, output_tree_starts, out)
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
