/*
 * partition.cu -- which open node (slot) each row is in, per tree of the
 * pack; pooled node sums. Mirrors packboost/_partition.pyx.
 *
 * Rows never move: node_of_row[row, tree] is rewritten in place after each
 * depth, one thread per row, so the "partition" is deterministic and needs
 * no scan of row indices (the CPU engine made the same choice; the
 * histogram pass reads each feature column in row order).
 */
#include "internal.cuh"

/*
 * fixed = round-half-even(real * scale), or of (real * real) * scale: the same
 * integers as NumPy's np.rint(x * scale) on the host (scale is a power of two,
 * so that product is exact and only the rounding to an integer happens).
 */
__global__ void pbc_quantize_kernel(const double *__restrict__ real,
                                    long long *__restrict__ fixed, int64_t n, double scale,
                                    int square)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        double x = real[i];
        if (square)
            x = x * x;
        fixed[i] = __double2ll_rn(x * scale);
    }
}

int pbc_launch_quantize(pbc_context *ctx, long long *fixed, double scale, int square)
{
    PBC_LAUNCH(pbc_quantize_kernel, pbc_blocks(ctx->n_rows, PBC_ROW_THREADS), PBC_ROW_THREADS, 0,
               ctx->stream)(ctx->staging, fixed, ctx->n_rows, scale, square);
    PBC_CHECK_LAUNCH();
    return PBC_OK;
}

/* node_of_row[row, tree] = -2 - tree for every row: in the tree's root, not sampled. */
__global__ void pbc_unsampled_kernel(int64_t n_rows, int32_t pack_size,
                                     int32_t *__restrict__ node_of_row)
{
    int64_t n = n_rows * pack_size;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        node_of_row[i] = -2 - (int32_t)(i % pack_size);
}

/*
 * node_of_row[row, tree] = tree for the rows the tree samples (root of tree t
 * = slot t): sample[i] for i < n_sample, or every row when sample is NULL.
 */
__global__ void pbc_init_round_kernel(const int32_t *__restrict__ sample,
                                      int64_t n_sample, int64_t n_rows, int32_t tree,
                                      int32_t pack_size, int32_t *__restrict__ node_of_row)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n_sample;
         i += (int64_t)gridDim.x * blockDim.x) {
        int64_t row = sample ? (int64_t)sample[i] : i;
        if (row >= 0 && row < n_rows)
            node_of_row[row * pack_size + tree] = tree;
    }
}

int pbc_launch_init_round(pbc_context *ctx, const int64_t *tree_n_rows)
{
    /* Every row starts in its tree's root unsampled (routed along, never
     * summed; docs/data-layout.md), then each tree's sample is marked. */
    PBC_LAUNCH(pbc_unsampled_kernel, pbc_blocks(ctx->n_rows * ctx->pack_size, PBC_ROW_THREADS),
               PBC_ROW_THREADS, 0, ctx->stream)(ctx->n_rows, ctx->pack_size, ctx->node_of_row);
    PBC_CHECK_LAUNCH();
    for (int32_t tree = 0; tree < ctx->pack_size; ++tree) {
        if (tree_n_rows[tree] == 0)
            continue;
        const int32_t *sample =
            tree_n_rows[tree] < ctx->n_rows ? ctx->tree_rows + tree * ctx->n_rows : NULL;
        PBC_LAUNCH(pbc_init_round_kernel, pbc_blocks(tree_n_rows[tree], PBC_ROW_THREADS),
                   PBC_ROW_THREADS, 0, ctx->stream)(sample, tree_n_rows[tree], ctx->n_rows, tree,
                                                    ctx->pack_size, ctx->node_of_row);
        PBC_CHECK_LAUNCH();
    }
    return PBC_OK;
}

/*
 * Exact integer sums per slot: (g, h, count, g^2) at sums[k * n_slots + slot]
 * for k = 0 .. 3. A block first adds its rows in shared memory when the slots
 * fit there, then once per slot into global memory.
 */
__global__ void pbc_slot_sums_kernel(const long long *__restrict__ gradients,
                                     const long long *__restrict__ hessians,
                                     const long long *__restrict__ gradients_squared,
                                     const int32_t *__restrict__ node_of_row, int64_t n_rows,
                                     int32_t pack_size, int32_t n_slots, int use_shared,
                                     unsigned long long *__restrict__ sums)
{
    PBC_DYNAMIC_SHARED(unsigned long long, shared_sums);
    unsigned long long *target = use_shared ? shared_sums : sums;
    if (use_shared) {
        for (int i = threadIdx.x; i < 4 * n_slots; i += blockDim.x)
            shared_sums[i] = 0ULL;
        __syncthreads();
    }
    for (int64_t row = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; row < n_rows;
         row += (int64_t)gridDim.x * blockDim.x) {
        for (int32_t tree = 0; tree < pack_size; ++tree) {
            int32_t slot = node_of_row[row * pack_size + tree];
            if (slot < 0)
                continue;
            atomicAdd(target + slot, (unsigned long long)gradients[row]);
            atomicAdd(target + n_slots + slot, (unsigned long long)hessians[row]);
            atomicAdd(target + 2 * n_slots + slot, 1ULL);
            atomicAdd(target + 3 * n_slots + slot, (unsigned long long)gradients_squared[row]);
        }
    }
    if (use_shared) {
        __syncthreads();
        for (int i = threadIdx.x; i < 4 * n_slots; i += blockDim.x)
            if (shared_sums[i] != 0ULL)
                atomicAdd(sums + i, shared_sums[i]);
    }
}

int pbc_launch_slot_sums(pbc_context *ctx, int32_t n_slots, long long *sums)
{
    size_t shared = 4 * (size_t)n_slots * sizeof(unsigned long long);
    int use_shared = shared <= PBC_HIST_SHARED_BYTES;
    unsigned int blocks = pbc_blocks(ctx->n_rows, PBC_ROW_THREADS);
    if (blocks > 4096)
        blocks = 4096;  /* few blocks: few global atomics per slot */
    PBC_CHECK(cudaMemsetAsync(sums, 0, shared, ctx->stream));
    PBC_LAUNCH(pbc_slot_sums_kernel, blocks, PBC_ROW_THREADS, use_shared ? shared : 0, ctx->stream)(
        ctx->gradients, ctx->hessians, ctx->gradients_squared, ctx->node_of_row, ctx->n_rows, ctx->pack_size, n_slots,
        use_shared, (unsigned long long *)sums);
    PBC_CHECK_LAUNCH();
    return PBC_OK;
}

/*
 * route_rows of _partition.pyx, one thread per row. Codes: slot >= 0 a
 * sampled row in an open slot, -2 - slot an unsampled row routed along, -1 a
 * row whose node became a leaf (its leaf is in leaf_of_row).
 */
template <typename BinT>
__global__ void pbc_route_kernel(const BinT *__restrict__ X_binned, int64_t n_rows,
                                 int32_t pack_size, const int32_t *__restrict__ n_bins,
                                 const int32_t *__restrict__ split_feature,
                                 const int32_t *__restrict__ split_threshold,
                                 const uint8_t *__restrict__ split_missing_left,
                                 const int32_t *__restrict__ left_child_slot,
                                 const int32_t *__restrict__ slot_node,
                                 int32_t *__restrict__ node_of_row,
                                 int32_t *__restrict__ leaf_of_row)
{
    for (int64_t row = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; row < n_rows;
         row += (int64_t)gridDim.x * blockDim.x) {
        for (int32_t tree = 0; tree < pack_size; ++tree) {
            int32_t code = node_of_row[row * pack_size + tree];
            if (code == -1)
                continue;
            int32_t slot = code >= 0 ? code : -2 - code;
            int32_t feature = split_feature[slot];
            if (feature < 0) {
                leaf_of_row[row * pack_size + tree] = slot_node[slot];
                node_of_row[row * pack_size + tree] = -1;
                continue;
            }
            int32_t bin = (int32_t)X_binned[feature * n_rows + row];
            bool left = bin == n_bins[feature] ? split_missing_left[slot] != 0
                                               : bin <= split_threshold[slot];
            int32_t child = left_child_slot[slot] + (left ? 0 : 1);
            node_of_row[row * pack_size + tree] = code >= 0 ? child : -2 - child;
        }
    }
}

int pbc_launch_route(pbc_context *ctx, const int32_t *split_feature,
                     const int32_t *split_threshold, const uint8_t *split_missing_left,
                     const int32_t *left_child_slot, const int32_t *slot_node)
{
    unsigned int blocks = pbc_blocks(ctx->n_rows, PBC_ROW_THREADS);
    if (ctx->bytes_per_bin == 1)
        PBC_LAUNCH(pbc_route_kernel<uint8_t>, blocks, PBC_ROW_THREADS, 0, ctx->stream)(
            (const uint8_t *)ctx->X_binned, ctx->n_rows, ctx->pack_size, ctx->n_bins,
            split_feature, split_threshold, split_missing_left, left_child_slot, slot_node,
            ctx->node_of_row, ctx->leaf_of_row);
    else
        PBC_LAUNCH(pbc_route_kernel<uint16_t>, blocks, PBC_ROW_THREADS, 0, ctx->stream)(
            (const uint16_t *)ctx->X_binned, ctx->n_rows, ctx->pack_size, ctx->n_bins,
            split_feature, split_threshold, split_missing_left, left_child_slot, slot_node,
            ctx->node_of_row, ctx->leaf_of_row);
    PBC_CHECK_LAUNCH();
    return PBC_OK;
}
