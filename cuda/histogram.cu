/*
 * histogram.cu -- per-era histograms of a chunk of candidate features for
 * every open slot of a pack (docs/cuda-kernels.md §5.2). Mirrors build_pack_histograms in
 * packboost/_histogram.pxd.
 *
 * Grid: x = era-aligned row tile (never crosses an era, so a block adds into
 * the cells of a single era), y = group of features, z = group of slots.
 * A block sums its rows into shared memory -- (feature, slot, bin) cells of
 * its era -- then adds every non-empty cell once into the global histogram
 *
 *     hist[((feature_in_chunk * n_slots + slot) * n_eras + era) * max_width + bin]
 *
 * A row's slots, g and h are read once for all features of the block (one
 * read of a column serves every tree of the pack: g and h are shared,
 * docs/packs.md §2). Sums are int64 fixed point, so the atomics' order does not matter and
 * the histogram is bit-identical run to run. Where one slot's bins do not fit
 * in shared memory (max_width > the block's cells) rows go straight to
 * global atomics.
 */
#include "internal.cuh"

template <typename BinT>
__global__ void pbc_histogram_kernel(
    const BinT *__restrict__ X_binned, int64_t n_rows, int32_t pack_size,
    const int64_t *__restrict__ tile_begin, const int64_t *__restrict__ tile_end,
    const int32_t *__restrict__ tile_era, const long long *__restrict__ gradients,
    const long long *__restrict__ hessians, const int32_t *__restrict__ node_of_row,
    const uint8_t *__restrict__ slot_open, int32_t n_slots,
    const int32_t *__restrict__ features,           /* the chunk's candidates */
    const uint8_t *__restrict__ tree_uses_feature,  /* the chunk's rows (chunk, pack) */
    int32_t chunk_size, int32_t features_per_block, int32_t group_slots, int32_t max_width,
    int32_t n_eras, int use_shared, unsigned long long *__restrict__ hist)
{
    PBC_DYNAMIC_SHARED(unsigned long long, shared_cells);
    const int64_t tile = blockIdx.x;
    const int32_t first_feature = blockIdx.y * features_per_block;
    const int32_t n_block_features = min(features_per_block, chunk_size - first_feature);
    const int32_t slot_begin = blockIdx.z * group_slots;
    const int32_t slot_end = min(slot_begin + group_slots, n_slots);
    const int32_t era = tile_era[tile];
    const int64_t group_cells = (int64_t)n_block_features * group_slots * max_width;

    if (use_shared) {
        for (int64_t i = threadIdx.x; i < 3 * group_cells; i += blockDim.x)
            shared_cells[i] = 0ULL;
        __syncthreads();
    }
    for (int64_t row = tile_begin[tile] + threadIdx.x; row < tile_end[tile];
         row += blockDim.x) {
        long long g = 0, h = 0;
        bool loaded = false;
        for (int32_t tree = 0; tree < pack_size; ++tree) {
            int32_t slot = node_of_row[row * pack_size + tree];
            if (slot < slot_begin || slot >= slot_end || !slot_open[slot])
                continue;
            if (!loaded) {
                g = gradients[row];
                h = hessians[row];
                loaded = true;
            }
            for (int32_t member = 0; member < n_block_features; ++member) {
                int32_t candidate = first_feature + member;
                if (!tree_uses_feature[candidate * pack_size + tree])
                    continue;
                int64_t bin = (int64_t)X_binned[features[candidate] * n_rows + row];
                if (use_shared) {
                    unsigned long long *cell = shared_cells
                         + 3 * (((int64_t)member * group_slots + (slot - slot_begin)) * max_width
                                + bin);
                    pbc_shared_add64(cell, (unsigned long long)g);
                    pbc_shared_add64(cell + 1, (unsigned long long)h);
                    atomicAdd((unsigned int *)(cell + 2), 1u);  /* < 2^32 rows a tile */
                } else {
                    unsigned long long *cell = hist
                         + 3 * ((((int64_t)candidate * n_slots + slot) * n_eras + era) * max_width
                                + bin);
                    atomicAdd(cell, (unsigned long long)g);  /* global: a native 64-bit add */
                    atomicAdd(cell + 1, (unsigned long long)h);
                    atomicAdd(cell + 2, 1ULL);
                }
            }
        }
    }
    if (use_shared) {
        __syncthreads();
        const int64_t n_slot_cells = (int64_t)(slot_end - slot_begin) * max_width;
        for (int64_t i = threadIdx.x; i < n_block_features * n_slot_cells; i += blockDim.x) {
            int64_t member = i / n_slot_cells, rest = i % n_slot_cells;
            int64_t slot = rest / max_width, bin = rest % max_width;
            const unsigned long long *local =
                shared_cells + 3 * ((member * group_slots + slot) * max_width + bin);
            if (local[2] == 0ULL)
                continue;
            unsigned long long *cell =
                hist + 3 * ((((first_feature + member) * (int64_t)n_slots + slot_begin + slot)
                             * n_eras + era) * max_width + bin);
            atomicAdd(cell, local[0]);
            atomicAdd(cell + 1, local[1]);
            atomicAdd(cell + 2, local[2]);
        }
    }
}

/* Let the histogram kernel use the device's opt-in shared memory (once per context). */
int pbc_histogram_setup(pbc_context *ctx)
{
    int optin = 0;
    PBC_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin,
                                     ctx->device));
    int bytes = optin < PBC_HIST_SHARED_MAX_BYTES ? optin : PBC_HIST_SHARED_MAX_BYTES;
    if (bytes < PBC_HIST_SHARED_BYTES)
        bytes = PBC_HIST_SHARED_BYTES;
    ctx->hist_shared_cells = bytes / (int)sizeof(pbc_cell);
    if (bytes > PBC_HIST_SHARED_BYTES) {
        PBC_CHECK(cudaFuncSetAttribute(pbc_histogram_kernel<uint8_t>,
                                       cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
        PBC_CHECK(cudaFuncSetAttribute(pbc_histogram_kernel<uint16_t>,
                                       cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
    }
    return PBC_OK;
}

int pbc_launch_histograms(pbc_context *ctx, int32_t n_slots, const uint8_t *slot_open,
                          int32_t chunk_first, int32_t chunk_size, const int32_t *features,
                          const uint8_t *tree_uses_feature)
{
    const int32_t width = ctx->max_width;
    const int32_t shared_cells = ctx->hist_shared_cells;
    int use_shared = width <= shared_cells;
    int32_t group_slots = n_slots, features_per_block = 1;
    size_t hist_bytes = (size_t)chunk_size * n_slots * ctx->n_eras * width * sizeof(pbc_cell);
    PBC_CHECK(cudaMemsetAsync(ctx->hist, 0, hist_bytes, ctx->stream));
    if (use_shared) {
        if ((int64_t)n_slots * width <= shared_cells) {
            features_per_block = shared_cells / (n_slots * width);
        } else {
            group_slots = shared_cells / width;
        }
    } else {
        features_per_block = PBC_MAX_FEATURES_PER_BLOCK;
    }
    if (features_per_block > PBC_MAX_FEATURES_PER_BLOCK)
        features_per_block = PBC_MAX_FEATURES_PER_BLOCK;
    if (features_per_block > chunk_size)
        features_per_block = chunk_size;
    if ((n_slots + group_slots - 1) / group_slots > 65535)
        return PBC_ERROR_INVALID_ARGUMENT;  /* too many slots for one depth */
    dim3 grid((unsigned int)ctx->n_tiles,
              (unsigned int)((chunk_size + features_per_block - 1) / features_per_block),
              (unsigned int)((n_slots + group_slots - 1) / group_slots));
    size_t shared = use_shared
        ? (size_t)features_per_block * group_slots * width * sizeof(pbc_cell) : 0;
    if (ctx->bytes_per_bin == 1)
        PBC_LAUNCH(pbc_histogram_kernel<uint8_t>, grid, PBC_ROW_THREADS, shared, ctx->stream)(
            (const uint8_t *)ctx->X_binned, ctx->n_rows, ctx->pack_size, ctx->tile_begin,
            ctx->tile_end, ctx->tile_era, ctx->gradients, ctx->hessians, ctx->node_of_row,
            slot_open, n_slots, features + chunk_first,
            tree_uses_feature + (int64_t)chunk_first * ctx->pack_size, chunk_size,
            features_per_block, group_slots, width, ctx->n_eras, use_shared,
            (unsigned long long *)ctx->hist);
    else
        PBC_LAUNCH(pbc_histogram_kernel<uint16_t>, grid, PBC_ROW_THREADS, shared, ctx->stream)(
            (const uint16_t *)ctx->X_binned, ctx->n_rows, ctx->pack_size, ctx->tile_begin,
            ctx->tile_end, ctx->tile_era, ctx->gradients, ctx->hessians, ctx->node_of_row,
            slot_open, n_slots, features + chunk_first,
            tree_uses_feature + (int64_t)chunk_first * ctx->pack_size, chunk_size,
            features_per_block, group_slots, width, ctx->n_eras, use_shared,
            (unsigned long long *)ctx->hist);
    PBC_CHECK_LAUNCH();
    return PBC_OK;
}
