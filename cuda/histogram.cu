/*
 * histogram.cu -- per-era histograms of the (candidate feature, tree) pairs a
 * depth scores (docs/cuda-kernels.md §5.2). Mirrors build_pack_histograms in
 * packboost/_histogram.pxd.
 *
 * The host plans the depth's work (pbc_plan_histograms) as items: one
 * candidate feature for a run of one tree's slots. Only pairs whose tree
 * draws the feature are items, so at a layer feature fraction of 0.1 a row's
 * pass touches the ~10% of (feature, tree) pairs that are scored instead of
 * checking every (feature, tree) of the pack, and only their tiles of the
 * histogram are allocated and zeroed. Items are packed into blocks whose bins
 * fit in shared memory; a chunk of candidates is what the histogram budget
 * holds. Grid: x = era-aligned row tile (never crosses an era, so a block
 * adds into the cells of a single era), y = block of items of the chunk.
 * A block sums its rows into shared memory, then adds every non-empty cell
 * once into the chunk's histogram, where the tile of (candidate, slot) is
 *
 *     hist[tile_offset[candidate, tree] + ((slot - first slot of tree) * n_eras + era)
 *          * max_width + bin]
 *
 * Features of at most PBC_PAIR_MAX_WIDTH bins go in pairs of one tree's
 * candidates (as the CPU's joint tables, docs/cpu-kernels.md): an item holds
 * the (bin, bin) table of the two, so a row adds its g, h and count once for
 * both features; when the block ends, each of the pair's cells in the
 * histogram gets its row (first feature) or column (second) of the table,
 * summed in shared memory: the same integer sums (mod 2^64), half the shared
 * atomics of a row's pass where every feature pairs.
 *
 * A row's g and h are read once for all items of the block (g and h are
 * shared by the pack's trees, docs/packs.md §2). Where every row's hessian
 * is one value (squared error without weights) the block adds g and the
 * count only and flushes count x that value as the hessian sum: the same
 * integer mod 2^64 as the per-row adds, one shared atomic less per update.
 * Sums are int64 fixed point,
 * so the atomics' order does not matter and the histogram is bit-identical
 * run to run. Where one slot's bins do not fit in shared memory (max_width >
 * the block's cells) rows go straight to global atomics.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.cuh"

/* Shared cells of one item: a bin per slot, or a (bin, bin) table per slot. */
__host__ __device__ static inline int64_t pbc_item_cells(const pbc_hist_item *item,
                                                         int32_t max_width)
{
    return (int64_t)(item->slot_end - item->slot_begin) * max_width
           * (item->column2 >= 0 ? max_width : 1);
}

template <typename BinT>
__global__ void pbc_histogram_kernel(
    const BinT *__restrict__ X_binned, int64_t n_rows, int32_t pack_size,
    const int64_t *__restrict__ tile_begin, const int64_t *__restrict__ tile_end,
    const int32_t *__restrict__ tile_era, const long long *__restrict__ gradients,
    const long long *__restrict__ hessians, const int32_t *__restrict__ node_of_row,
    const uint8_t *__restrict__ slot_open, const pbc_hist_item *__restrict__ items,
    const int32_t *__restrict__ block_items, int32_t shared_capacity, int32_t max_width,
    int32_t n_eras, int use_shared, int hessian_is_constant, long long hessian_constant,
    unsigned long long *__restrict__ hist)
{
    PBC_DYNAMIC_SHARED(unsigned long long, shared_cells);
    /* The block's items sit after its cells: read by every thread for every row. */
    pbc_hist_item *block_item = (pbc_hist_item *)(shared_cells + 3 * (int64_t)shared_capacity);
    const int64_t tile = blockIdx.x;
    const int32_t era = tile_era[tile];
    const int32_t first_item = block_items[blockIdx.y];
    const int32_t n_items = block_items[blockIdx.y + 1] - first_item;

    for (int32_t i = threadIdx.x; i < n_items; i += blockDim.x)
        block_item[i] = items[first_item + i];
    __syncthreads();
    if (use_shared) {
        const pbc_hist_item last = block_item[n_items - 1];
        const int64_t n_cells = last.shared_offset + pbc_item_cells(&last, max_width);
        for (int64_t i = threadIdx.x; i < 3 * n_cells; i += blockDim.x)
            shared_cells[i] = 0ULL;
        __syncthreads();
    }
    for (int64_t row = tile_begin[tile] + threadIdx.x; row < tile_end[tile];
         row += blockDim.x) {
        long long g = 0, h = 0;
        bool loaded = false, open = false;
        int32_t tree = -1, slot = -1;
        for (int32_t i = 0; i < n_items; ++i) {
            const pbc_hist_item *item = &block_item[i];
            if (item->tree != tree) {  /* items come tree by tree (pbc_plan_histograms) */
                tree = item->tree;
                slot = node_of_row[row * pack_size + tree];
                open = slot >= 0 && slot_open[slot];
            }
            if (!open || slot < item->slot_begin || slot >= item->slot_end)
                continue;
            if (!loaded) {
                g = gradients[row];
                h = hessian_is_constant ? hessian_constant : hessians[row];
                loaded = true;
            }
            const int64_t bin = (int64_t)X_binned[(int64_t)item->column * n_rows + row];
            if (use_shared) {
                /* a pair's table: row `bin`, column the second feature's bin */
                const int64_t offset = item->column2 < 0
                    ? (int64_t)(slot - item->slot_begin) * max_width + bin
                    : ((int64_t)(slot - item->slot_begin) * max_width + bin) * max_width
                      + (int64_t)X_binned[(int64_t)item->column2 * n_rows + row];
                unsigned long long *cell = shared_cells + 3 * (item->shared_offset + offset);
                pbc_shared_add64(cell, (unsigned long long)g);
                if (!hessian_is_constant)
                    pbc_shared_add64(cell + 1, (unsigned long long)h);
                atomicAdd((unsigned int *)(cell + 2), 1u);  /* < 2^32 rows a tile */
            } else {
                unsigned long long *cell = hist
                    + 3 * (item->hist_offset
                           + ((int64_t)(slot - item->slot_begin) * n_eras + era) * max_width
                           + bin);
                atomicAdd(cell, (unsigned long long)g);  /* global: a native 64-bit add */
                atomicAdd(cell + 1, (unsigned long long)h);
                atomicAdd(cell + 2, 1ULL);
            }
        }
    }
    if (use_shared) {
        __syncthreads();
        for (int32_t i = 0; i < n_items; ++i) {
            const pbc_hist_item item = block_item[i];
            const int32_t pair = item.column2 >= 0;
            /* Output cells: (slot, bin), or (slot, side, bin) of a pair. */
            const int64_t n_out =
                (int64_t)(item.slot_end - item.slot_begin) * max_width * (pair ? 2 : 1);
            for (int64_t c = threadIdx.x; c < n_out; c += blockDim.x) {
                const int64_t bin = c % max_width, side = pair ? (c / max_width) % 2 : 0;
                const int64_t slot = c / (max_width * (pair ? 2 : 1));
                unsigned long long sum[3];
                if (!pair) {
                    const unsigned long long *local = shared_cells + 3 * (item.shared_offset + c);
                    sum[0] = local[0], sum[1] = local[1], sum[2] = local[2];
                } else {
                    /* the table's row `bin` (first feature) or column `bin` (second) */
                    const unsigned long long *table =
                        shared_cells + 3 * (item.shared_offset + slot * max_width * max_width);
                    sum[0] = sum[1] = sum[2] = 0ULL;
                    for (int64_t k = 0; k < max_width; ++k) {
                        const unsigned long long *local = table + 3 * (
                            side == 0 ? bin * max_width + k : k * max_width + bin);
                        sum[0] += local[0], sum[1] += local[1], sum[2] += local[2];
                    }
                }
                if (sum[2] == 0ULL)
                    continue;
                unsigned long long *cell = hist + 3 * ((side == 0 ? item.hist_offset
                                                                  : item.hist_offset2)
                                                       + (slot * n_eras + era) * max_width + bin);
                atomicAdd(cell, sum[0]);
                atomicAdd(cell + 1, hessian_is_constant
                                        ? sum[2] * (unsigned long long)hessian_constant
                                        : sum[1]);
                atomicAdd(cell + 2, sum[2]);
            }
        }
    }
}

/*
 * Let the histogram kernel use the device's opt-in shared memory (once per
 * context); the block's item table takes PBC_MAX_ITEMS_PER_BLOCK items of it.
 */
int pbc_histogram_setup(pbc_context *ctx)
{
    int optin = 0;
    PBC_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin,
                                     ctx->device));
    int bytes = optin < PBC_HIST_SHARED_MAX_BYTES ? optin : PBC_HIST_SHARED_MAX_BYTES;
    if (bytes < PBC_HIST_SHARED_BYTES)
        bytes = PBC_HIST_SHARED_BYTES;
    ctx->hist_shared_cells =
        (bytes - PBC_MAX_ITEMS_PER_BLOCK * (int)sizeof(pbc_hist_item)) / (int)sizeof(pbc_cell);
    ctx->hist_block_cells = PBC_HIST_BLOCK_BYTES / (int)sizeof(pbc_cell);
    if (ctx->hist_block_cells > ctx->hist_shared_cells)
        ctx->hist_block_cells = ctx->hist_shared_cells;
    if (bytes > PBC_HIST_SHARED_BYTES) {
        PBC_CHECK(cudaFuncSetAttribute(pbc_histogram_kernel<uint8_t>,
                                       cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
        PBC_CHECK(cudaFuncSetAttribute(pbc_histogram_kernel<uint16_t>,
                                       cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
    }
    return PBC_OK;
}

void pbc_free_hist_plan(pbc_hist_plan *plan)
{
    free(plan->chunk_first);
    free(plan->chunk_blocks);
    free(plan->chunk_cells);
    free(plan->block_items);
    free(plan->items);
    free(plan->tile_offset);
    free(plan->tree_first_slot);
    memset(plan, 0, sizeof(*plan));
}

/*
 * The depth's histogram work on the host: chunks of candidates whose tiles fit
 * the budget, their (candidate, tree) tiles' offsets, and items packed into
 * blocks. A tree's slots must be consecutive (the grower numbers them so).
 */
int pbc_plan_histograms(const pbc_context *ctx, int32_t n_slots, const int32_t *slot_tree,
                        const uint8_t *slot_open, int32_t n_candidates, const int32_t *features,
                        const uint8_t *tree_uses_feature, pbc_hist_plan *plan)
{
    const int32_t pack = ctx->pack_size, width = ctx->max_width;
    const int use_shared = width <= ctx->hist_shared_cells;
    /* Blocks aim at ctx->hist_block_cells (a few resident blocks per
     * multiprocessor); one slot's bins may take up to the opt-in maximum. */
    const int32_t block_capacity = width <= ctx->hist_block_cells ? ctx->hist_block_cells
                                                                  : ctx->hist_shared_cells;
    const int64_t tile_cells = (int64_t)ctx->n_eras * width;  /* one (candidate, slot) */
    int64_t budget_cells = ctx->histogram_budget_bytes / (int64_t)sizeof(pbc_cell);
    int32_t tree_end_slot[PBC_MAX_PACK_SIZE], tree_slots[PBC_MAX_PACK_SIZE];
    int32_t tree_open[PBC_MAX_PACK_SIZE];
    int32_t slots_per_item = n_slots, max_tree_slots = 1;

    memset(plan, 0, sizeof(*plan));
    plan->tree_first_slot = (int32_t *)malloc(pack * sizeof(int32_t));
    if (!plan->tree_first_slot)
        return PBC_ERROR_HOST_MEMORY;
    for (int32_t t = 0; t < pack; ++t) {
        plan->tree_first_slot[t] = tree_end_slot[t] = 0;
        tree_open[t] = 0;
    }
    for (int32_t slot = 0; slot < n_slots; ++slot) {
        const int32_t t = slot_tree[slot];
        if (slot > 0 && t < slot_tree[slot - 1]) {
            pbc_free_hist_plan(plan);
            return PBC_ERROR_INVALID_ARGUMENT;  /* a tree's slots are not consecutive */
        }
        if (slot == 0 || t != slot_tree[slot - 1])
            plan->tree_first_slot[t] = slot;
        tree_end_slot[t] = slot + 1;
        tree_open[t] |= slot_open[slot] != 0;
    }
    for (int32_t t = 0; t < pack; ++t) {
        tree_slots[t] = tree_end_slot[t] - plan->tree_first_slot[t];
        max_tree_slots = tree_slots[t] > max_tree_slots ? tree_slots[t] : max_tree_slots;
    }
    if (use_shared)
        slots_per_item = block_capacity / width;  /* >= 1 */
    /* Pairs: features narrow enough, and a slot's table fits a block. */
    const int32_t pair_cells = width * width;
    const int use_pairs = use_shared && width <= PBC_PAIR_MAX_WIDTH
                          && pair_cells <= block_capacity;
    const int32_t slots_per_pair = use_pairs ? block_capacity / pair_cells : slots_per_item;
    const int32_t fewest_slots = slots_per_pair < slots_per_item ? slots_per_pair
                                                                 : slots_per_item;
    if (budget_cells < 1)
        budget_cells = 1;

    const int64_t max_items =
        (int64_t)n_candidates * pack * ((max_tree_slots + fewest_slots - 1) / fewest_slots);
    plan->chunk_first = (int32_t *)malloc((n_candidates + 1) * sizeof(int32_t));
    plan->chunk_blocks = (int32_t *)malloc((n_candidates + 1) * sizeof(int32_t));
    plan->chunk_cells = (int64_t *)malloc((n_candidates + 1) * sizeof(int64_t));
    plan->block_items = (int32_t *)malloc((max_items + 1) * sizeof(int32_t));
    plan->items = (pbc_hist_item *)malloc((max_items > 0 ? max_items : 1) * sizeof(pbc_hist_item));
    plan->tile_offset = (int64_t *)malloc((int64_t)n_candidates * pack * sizeof(int64_t));
    if (!plan->chunk_first || !plan->chunk_blocks || !plan->chunk_cells || !plan->block_items
            || !plan->items || !plan->tile_offset) {
        pbc_free_hist_plan(plan);
        return PBC_ERROR_HOST_MEMORY;
    }
    if (max_items > INT32_MAX - 1) {
        pbc_free_hist_plan(plan);
        return PBC_ERROR_INVALID_ARGUMENT;
    }

    /* Chunks: consecutive candidates whose tiles fit the budget, and the
     * grid's y extent (blocks <= items). */
    int32_t n_chunks = 0;
    int64_t chunk_cells = 0, chunk_items = 0;
    plan->chunk_first[0] = 0;
    for (int32_t c = 0; c < n_candidates; ++c) {
        int64_t member_cells = 0, member_items = 0;
        for (int32_t t = 0; t < pack; ++t)
            if (tree_uses_feature[(int64_t)c * pack + t] && tree_open[t]) {
                member_cells += tree_slots[t] * tile_cells;
                member_items += (tree_slots[t] + fewest_slots - 1) / fewest_slots;
            }
        if (c > plan->chunk_first[n_chunks]
                && (chunk_cells + member_cells > budget_cells
                    || chunk_items + member_items > 65535)) {
            plan->chunk_cells[n_chunks++] = chunk_cells;
            plan->chunk_first[n_chunks] = c;
            chunk_cells = chunk_items = 0;
        }
        chunk_cells += member_cells;
        chunk_items += member_items;
    }
    plan->chunk_cells[n_chunks++] = chunk_cells;
    plan->chunk_first[n_chunks] = n_candidates;

    /* Items tree by tree within a chunk, so that a block's consecutive items
     * mostly share a tree and a row's slot is read once for them (the kernel
     * keeps the last tree's). */
    int32_t n_blocks = 0, n_items = 0;
    plan->block_items[0] = 0;
    for (int64_t pair = 0; pair < (int64_t)n_candidates * pack; ++pair)
        plan->tile_offset[pair] = -1;
    for (int32_t k = 0; k < n_chunks; ++k) {
        int64_t offset = 0;
        int32_t block_cells = 0, block_open = 0;
        plan->chunk_blocks[k] = n_blocks;
        for (int32_t t = 0; t < pack; ++t) {
            if (!tree_open[t])
                continue;
            /* The tree's candidates of the chunk, two at a time where they pair. */
            int32_t pending = -1;   /* a drawn candidate waiting for its partner */
            for (int32_t c = plan->chunk_first[k]; c <= plan->chunk_first[k + 1]; ++c) {
                const int at_end = c == plan->chunk_first[k + 1];
                if (!at_end && !tree_uses_feature[(int64_t)c * pack + t])
                    continue;
                if (use_pairs && !at_end && pending < 0) {
                    pending = c;
                    continue;
                }
                int32_t first_c = c, second_c = -1;
                if (use_pairs) {
                    if (pending < 0)
                        break;            /* at the end, nothing waiting */
                    first_c = pending;    /* at the end: alone */
                    second_c = at_end ? -1 : c;
                    pending = -1;
                } else if (at_end) {
                    break;
                }
                const int64_t pair = (int64_t)first_c * pack + t;
                const int64_t tile_cells_of_tree = (int64_t)tree_slots[t] * tile_cells;
                plan->tile_offset[pair] = offset;
                if (second_c >= 0)
                    plan->tile_offset[(int64_t)second_c * pack + t] = offset + tile_cells_of_tree;
                const int32_t step = second_c >= 0 ? slots_per_pair : slots_per_item;
                for (int32_t begin = plan->tree_first_slot[t]; begin < tree_end_slot[t];
                     begin += step) {
                    const int32_t end = begin + step < tree_end_slot[t]
                        ? begin + step : tree_end_slot[t];
                    const int32_t cells = (end - begin) * width * (second_c >= 0 ? width : 1);
                    if (block_open
                            && (n_items - plan->block_items[n_blocks] >= PBC_MAX_ITEMS_PER_BLOCK
                                || (use_shared && block_cells + cells > block_capacity))) {
                        plan->block_items[++n_blocks] = n_items;
                        block_open = 0;
                    }
                    if (!block_open) {
                        block_open = 1;
                        block_cells = 0;
                    }
                    pbc_hist_item *item = &plan->items[n_items++];
                    const int64_t within = (int64_t)(begin - plan->tree_first_slot[t])
                                           * tile_cells;
                    item->hist_offset = offset + within;
                    item->hist_offset2 = second_c >= 0 ? offset + tile_cells_of_tree + within
                                                       : -1;
                    item->column = features[first_c];
                    item->column2 = second_c >= 0 ? features[second_c] : -1;
                    item->tree = t;
                    item->slot_begin = begin;
                    item->slot_end = end;
                    item->shared_offset = block_cells;
                    block_cells += cells;
                    if (block_cells > plan->max_block_cells)
                        plan->max_block_cells = block_cells;
                }
                offset += tile_cells_of_tree * (second_c >= 0 ? 2 : 1);
            }
        }
        if (block_open)
            plan->block_items[++n_blocks] = n_items;
    }
    plan->chunk_blocks[n_chunks] = n_blocks;
    plan->n_chunks = n_chunks;
    plan->n_blocks = n_blocks;
    plan->n_items = n_items;
    plan->use_shared = use_shared;
    for (int32_t k = 0; k < n_chunks; ++k)
        plan->max_chunk_cells = plan->chunk_cells[k] > plan->max_chunk_cells
                                ? plan->chunk_cells[k] : plan->max_chunk_cells;
    return PBC_OK;
}

/*
 * Zero chunk `chunk`'s histogram and add its rows: items and block_items are
 * the plan's, on the device (block_items already offset to the chunk's first block).
 */
int pbc_launch_histograms(pbc_context *ctx, const pbc_hist_plan *plan, int32_t chunk,
                          const uint8_t *slot_open, const pbc_hist_item *items,
                          const int32_t *block_items)
{
    const int32_t n_blocks = plan->chunk_blocks[chunk + 1] - plan->chunk_blocks[chunk];
    PBC_CHECK(cudaMemsetAsync(ctx->hist, 0, plan->chunk_cells[chunk] * sizeof(pbc_cell),
                              ctx->stream));
    if (n_blocks == 0)
        return PBC_OK;  /* no open tree draws these candidates */
    dim3 grid((unsigned int)ctx->n_tiles, (unsigned int)n_blocks, 1);
    /* Only the cells the plan's largest block needs: more blocks fit on a multiprocessor. */
    const int32_t capacity = plan->use_shared ? plan->max_block_cells : 0;
    size_t shared = (size_t)capacity * sizeof(pbc_cell)
                  + PBC_MAX_ITEMS_PER_BLOCK * sizeof(pbc_hist_item);
    const int32_t *blocks = block_items + plan->chunk_blocks[chunk];
    if (ctx->bytes_per_bin == 1)
        PBC_LAUNCH(pbc_histogram_kernel<uint8_t>, grid, PBC_ROW_THREADS, shared, ctx->stream)(
            (const uint8_t *)ctx->X_binned, ctx->n_rows, ctx->pack_size, ctx->tile_begin,
            ctx->tile_end, ctx->tile_era, ctx->gradients, ctx->hessians, ctx->node_of_row,
            slot_open, items, blocks, capacity, ctx->max_width, ctx->n_eras, plan->use_shared,
            ctx->hessian_is_constant, ctx->hessian_constant, (unsigned long long *)ctx->hist);
    else
        PBC_LAUNCH(pbc_histogram_kernel<uint16_t>, grid, PBC_ROW_THREADS, shared, ctx->stream)(
            (const uint16_t *)ctx->X_binned, ctx->n_rows, ctx->pack_size, ctx->tile_begin,
            ctx->tile_end, ctx->tile_era, ctx->gradients, ctx->hessians, ctx->node_of_row,
            slot_open, items, blocks, capacity, ctx->max_width, ctx->n_eras, plan->use_shared,
            ctx->hessian_is_constant, ctx->hessian_constant, (unsigned long long *)ctx->hist);
    PBC_CHECK_LAUNCH();
    return PBC_OK;
}
