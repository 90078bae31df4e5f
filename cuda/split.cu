/*
 * split.cu -- DES scoring of (slot, feature) tiles and the best split per
 * slot. Mirrors score_tile / best_candidate_per_slot of packboost/_split.pyx;
 * the math is csrc/pbc_split.h + csrc/des.h, shared with the host.
 *
 * One warp per tile (docs/cuda-kernels.md §5.3): lane l owns eras l, l + 32, ...; it first
 * prefix-scans its eras' bins in place (the histogram is scratch), then for
 * each threshold the warp sums the left side over eras with a butterfly of
 * __shfl_xor_sync, and for each missing side the era pass (spread, direction):
 * a butterfly of the terms' maxima gives each sum its grid, then a butterfly
 * of int64 grid steps adds them (csrc/des.h: order-free, so the CPU's sums).
 * Every lane ends each reduction with the same bits, so all lanes follow the
 * same branches; lane 0 writes the tile's best candidate.
 */
#include "internal.cuh"

#define PBC_FULL_MASK 0xffffffffu

__device__ __forceinline__ long long pbc_warp_sum(long long value)
{
    for (int offset = PBC_WARP_LANES / 2; offset >= 1; offset >>= 1)
        value = value + __shfl_xor_sync(PBC_FULL_MASK, value, offset);
    return value;
}

__device__ __forceinline__ double pbc_warp_max(double value)
{
    for (int offset = PBC_WARP_LANES / 2; offset >= 1; offset >>= 1)
        value = pbc_double_max(value, __shfl_xor_sync(PBC_FULL_MASK, value, offset));
    return value;
}

__device__ __forceinline__ long long pbc_warp_max(long long value)
{
    for (int offset = PBC_WARP_LANES / 2; offset >= 1; offset >>= 1) {
        long long other = __shfl_xor_sync(PBC_FULL_MASK, value, offset);
        value = value > other ? value : other;
    }
    return value;
}

__device__ __forceinline__ pbc_totals pbc_warp_sum(pbc_totals t)
{
    t.g = pbc_warp_sum(t.g);
    t.h = pbc_warp_sum(t.h);
    t.count = pbc_warp_sum(t.count);
    t.missing_g = pbc_warp_sum(t.missing_g);
    t.missing_h = pbc_warp_sum(t.missing_h);
    t.missing_count = pbc_warp_sum(t.missing_count);
    t.present = pbc_warp_sum(t.present);
    t.rows_squared = pbc_warp_sum(t.rows_squared);
    t.largest_rows = pbc_warp_max(t.largest_rows);
    return t;
}

__device__ __forceinline__ pbc_weighted_max pbc_warp_max(pbc_weighted_max largest)
{
    largest.g = pbc_warp_max(largest.g);
    largest.h = pbc_warp_max(largest.h);
    return largest;
}

__device__ __forceinline__ pbc_weighted_steps pbc_warp_sum(pbc_weighted_steps steps)
{
    steps.g = pbc_warp_sum(steps.g);
    steps.h = pbc_warp_sum(steps.h);
    steps.missing_g = pbc_warp_sum(steps.missing_g);
    steps.missing_h = pbc_warp_sum(steps.missing_h);
    return steps;
}

__device__ __forceinline__ pbc_left pbc_warp_sum(pbc_left l)
{
    l.g = pbc_warp_sum(l.g);
    l.h = pbc_warp_sum(l.h);
    l.count = pbc_warp_sum(l.count);
    l.w_g = pbc_warp_sum(l.w_g);
    l.w_h = pbc_warp_sum(l.w_h);
    return l;
}

__device__ __forceinline__ des_era_terms_t pbc_warp_max(des_era_terms_t terms)
{
    terms.square = pbc_warp_max(terms.square);
    terms.noise = pbc_warp_max(terms.noise);
    terms.direction = pbc_warp_max(terms.direction);
    return terms;
}

__device__ __forceinline__ des_grid_sums_t pbc_warp_sum(des_grid_sums_t sums)
{
    sums.square = pbc_warp_sum(sums.square);
    sums.noise = pbc_warp_sum(sums.noise);
    sums.direction = pbc_warp_sum(sums.direction);
    return sums;
}

/* The warp version of pbc_score_tile_host (csrc/pbc_split.h); keep them in step. */
__device__ pbc_best pbc_score_tile_warp(pbc_cell *cells, long long era_stride, int n_eras,
                                        int n_bins, const pb_split_params *params,
                                        double gradient_variance, double inv_scale_g,
                                        double inv_scale_h, int lane)
{
    pbc_best best = pbc_best_none();
    const int needs_pass = pbc_needs_pass(params);
    if (n_bins < 1 || n_eras < 1)
        return best;
    pbc_totals totals = pbc_warp_sum(pbc_lane_totals(cells, era_stride, n_eras, n_bins, params,
                                                     inv_scale_g, inv_scale_h, lane,
                                                     PBC_WARP_LANES));
    if (totals.count == 0)
        return best;
    __syncwarp();  /* every lane's prefix scan is visible to the others */
    if (params->era_weighting == PB_ERA_WEIGHTING_COUNT) {
        /* the era-weighted sums on grids from their largest terms (csrc/des.h) */
        pbc_weighted_max largest = pbc_warp_max(pbc_lane_weighted_max(
            cells, era_stride, n_eras, n_bins, params, inv_scale_g, inv_scale_h, lane,
            PBC_WARP_LANES));
        pbc_totals_weigh(&totals, &largest);
        pbc_weighted_steps steps = pbc_warp_sum(pbc_lane_weighted_totals(
            cells, era_stride, n_eras, n_bins, params, inv_scale_g, inv_scale_h, &totals, lane,
            PBC_WARP_LANES));
        pbc_totals_weighted(&totals, &steps);
    } else {
        pbc_totals_equal_weights(&totals, inv_scale_g, inv_scale_h);
    }
    for (int threshold = 0; threshold < n_bins; ++threshold) {
        pbc_left left = pbc_warp_sum(pbc_lane_left(cells, era_stride, n_eras, n_bins, threshold,
                                                   params, &totals, inv_scale_g, inv_scale_h,
                                                   lane, PBC_WARP_LANES));
        for (int side = 0; side < 2; ++side) {
            const int missing_left = side == 0;
            des_candidate_t state;
            double mean;
            pbc_candidate cand = pbc_candidate_sums(&totals, &left, missing_left, params,
                                                    inv_scale_g, inv_scale_h);
            if (!cand.scored)
                continue;
            pbc_candidate_start(&state, &cand, params);
            if (params->era_gain == DES_ERA_GAIN_NEWTON) {
                /* sum_e w_e gain_e on the grid of its largest term (csrc/des.h) */
                int exponent = des_grid_exponent(
                    pbc_warp_max(pbc_lane_gain_max(&state, cells, era_stride, n_eras, n_bins,
                                                   threshold, missing_left, params,
                                                   inv_scale_g, inv_scale_h, lane,
                                                   PBC_WARP_LANES)),
                    (double)totals.present);
                long long steps = pbc_warp_sum(pbc_lane_gain_steps(
                    &state, cells, era_stride, n_eras, n_bins, threshold, missing_left, params,
                    inv_scale_g, inv_scale_h, exponent, lane, PBC_WARP_LANES));
                mean = des_from_grid(steps, exponent) / pbc_weight_total(params, &totals);
            } else {
                mean = des_realized_mean(&state, totals.w_g, totals.w_h, cand.left_w_g,
                                         cand.left_w_h, pbc_weight_total(params, &totals));
            }
            des_candidate_set_mean(&state, mean);
            pbc_candidate_noise(&state, params, gradient_variance);
            if (needs_pass) {
                des_era_terms_t largest = pbc_warp_max(pbc_lane_terms_max(
                    &state, cells, era_stride, n_eras, n_bins, threshold, missing_left, params,
                    inv_scale_g, inv_scale_h, lane, PBC_WARP_LANES));
                des_grid_t grid = pbc_grid_of(params, &totals, &largest);
                des_grid_sums_t sums = pbc_warp_sum(pbc_lane_grid_sums(
                    &state, cells, era_stride, n_eras, n_bins, threshold, missing_left, params,
                    inv_scale_g, inv_scale_h, &grid, lane, PBC_WARP_LANES));
                pbc_candidate_close(&best, &state, &cand, &totals, &sums, &grid, params,
                                    threshold, missing_left);
            } else {
                pbc_candidate_close(&best, &state, &cand, &totals, NULL, NULL, params,
                                    threshold, missing_left);
            }
        }
    }
    return best;
}

__global__ void pbc_score_kernel(pbc_cell *__restrict__ hist, int32_t n_slots, int32_t n_eras,
                                 int32_t max_width, const int32_t *__restrict__ n_bins,
                                 const int32_t *__restrict__ slot_tree,
                                 const uint8_t *__restrict__ slot_open,
                                 const double *__restrict__ slot_gradient_variance,
                                 const int32_t *__restrict__ features,     /* chunk's */
                                 const int64_t *__restrict__ tile_offset,  /* chunk's */
                                 const int32_t *__restrict__ tree_first_slot,
                                 int32_t chunk_size, int32_t chunk_first, int32_t n_candidates,
                                 int32_t pack_size, pb_split_params params,
                                 double inv_scale_g, double inv_scale_h,
                                 double *__restrict__ tile_score, double *__restrict__ tile_gain,
                                 int32_t *__restrict__ tile_threshold,
                                 uint8_t *__restrict__ tile_missing_left,
                                 uint8_t *__restrict__ tile_found)
{
    const int64_t warp = (int64_t)blockIdx.x * PBC_SCORE_WARPS + threadIdx.x / PBC_WARP_LANES;
    const int lane = threadIdx.x % PBC_WARP_LANES;
    if (warp >= (int64_t)chunk_size * n_slots)
        return;  /* whole warps only: the branch is uniform within a warp */
    const int32_t member = (int32_t)(warp / n_slots), slot = (int32_t)(warp % n_slots);
    const int32_t tree = slot_tree[slot];
    const int64_t offset = tile_offset[(int64_t)member * pack_size + tree];
    if (!slot_open[slot] || offset < 0)
        return;  /* closed, or the tree does not draw the feature */
    pbc_cell *cells = hist + offset
                    + (int64_t)(slot - tree_first_slot[tree]) * n_eras * max_width;
    pbc_best best = pbc_score_tile_warp(cells, max_width, n_eras, n_bins[features[member]],
                                        &params, slot_gradient_variance[slot], inv_scale_g,
                                        inv_scale_h, lane);
    if (lane == 0) {
        int64_t out = (int64_t)slot * n_candidates + chunk_first + member;
        tile_found[out] = (uint8_t)best.found;
        tile_score[out] = best.score;
        tile_gain[out] = best.gain;
        tile_threshold[out] = best.threshold;
        tile_missing_left[out] = (uint8_t)best.missing_left;
    }
}

int pbc_launch_score(pbc_context *ctx, int32_t n_slots, const int32_t *slot_tree,
                     const uint8_t *slot_open, const double *slot_gradient_variance,
                     int32_t n_candidates, int32_t chunk_first,
                     int32_t chunk_size, const int32_t *features,
                     const int64_t *tile_offset, const int32_t *tree_first_slot,
                     const pb_split_params *params,
                     double *tile_score, double *tile_gain, int32_t *tile_threshold,
                     uint8_t *tile_missing_left, uint8_t *tile_found)
{
    int64_t n_warps = (int64_t)chunk_size * n_slots;
    unsigned int blocks = (unsigned int)((n_warps + PBC_SCORE_WARPS - 1) / PBC_SCORE_WARPS);
    PBC_LAUNCH(pbc_score_kernel, blocks, PBC_SCORE_WARPS * PBC_WARP_LANES, 0, ctx->stream)(
        ctx->hist, n_slots, ctx->n_eras, ctx->max_width, ctx->n_bins, slot_tree, slot_open,
        slot_gradient_variance, features + chunk_first,
        tile_offset + (int64_t)chunk_first * ctx->pack_size, tree_first_slot,
        chunk_size, chunk_first, n_candidates, ctx->pack_size, *params, ctx->inv_scale_g,
        ctx->inv_scale_h, tile_score, tile_gain, tile_threshold, tile_missing_left,
        tile_found);
    PBC_CHECK_LAUNCH();
    return PBC_OK;
}

/* Best column per slot: the first maximum over ascending features (lower feature wins ties). */
__global__ void pbc_select_kernel(int32_t n_slots, int32_t n_candidates,
                                  const double *__restrict__ tile_score,
                                  const double *__restrict__ tile_gain,
                                  const int32_t *__restrict__ tile_threshold,
                                  const uint8_t *__restrict__ tile_missing_left,
                                  const uint8_t *__restrict__ tile_found,
                                  int32_t *__restrict__ best_column,
                                  double *__restrict__ best_score,
                                  double *__restrict__ best_gain,
                                  int32_t *__restrict__ best_threshold,
                                  uint8_t *__restrict__ best_missing_left)
{
    int32_t slot = blockIdx.x * blockDim.x + threadIdx.x;
    if (slot >= n_slots)
        return;
    const int64_t base = (int64_t)slot * n_candidates;
    int32_t column = -1;
    for (int32_t position = 0; position < n_candidates; ++position)
        if (tile_found[base + position]
                && (column < 0 || tile_score[base + position] > tile_score[base + column]))
            column = position;
    best_column[slot] = column;
    best_score[slot] = column >= 0 ? tile_score[base + column] : -INFINITY;
    best_gain[slot] = column >= 0 ? tile_gain[base + column] : 0.0;
    best_threshold[slot] = column >= 0 ? tile_threshold[base + column] : 0;
    best_missing_left[slot] = column >= 0 ? tile_missing_left[base + column] : 0;
}

int pbc_launch_select(pbc_context *ctx, int32_t n_slots, int32_t n_candidates,
                      const double *tile_score, const double *tile_gain,
                      const int32_t *tile_threshold, const uint8_t *tile_missing_left,
                      const uint8_t *tile_found, int32_t *best_column, double *best_score,
                      double *best_gain, int32_t *best_threshold, uint8_t *best_missing_left)
{
    PBC_LAUNCH(pbc_select_kernel, pbc_blocks(n_slots, 128), 128, 0, ctx->stream)(
        n_slots, n_candidates, tile_score, tile_gain, tile_threshold, tile_missing_left,
        tile_found, best_column, best_score, best_gain, best_threshold, best_missing_left);
    PBC_CHECK_LAUNCH();
    return PBC_OK;
}
