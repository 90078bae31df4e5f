/*
 * round.cu -- what starts a round, on the device: the objective's gradients
 * from the device's raw predictions, the round's fixed-point grid, the
 * quantised gradients, and every row's root slot from the trees' era and row
 * flags. Mirrors packboost/booster.py (_round_gradients),
 * packboost/_fixed_point.py (to_fixed_point, squared_gradient_scale) and
 * packboost/_partition.pyx (start_pack_eras); docs/cuda-kernels.md §4.
 *
 * The same numbers as the host: each step is the host's float operation in
 * the host's order (the library is built with --fmad=false, so no multiply
 * and add is fused), each era's sum of |g| is added row by row in row order
 * (one thread per era adds what its warp loaded), the eras' sums in era
 * order (one thread), and the scales are exact powers of two from frexp
 * (pbc_power_of_two_scale, the host's power_of_two_exponent). So the
 * integers the histograms sum are those the CPU backend sums.
 */
#include <math.h>

#include "internal.cuh"

/* Rows of an era one warp loads before its first lane adds them in order. */
#define PBC_ERA_SUM_ROWS 256
/* Threads of the per-era sums: one warp per era. */
#define PBC_ERA_SUM_THREADS 32

/* Bounds of docs/fixed-point.md (packboost/_fixed_point.py). */
#define PBC_EXACT_SUM_BITS 52
#define PBC_PACKED_VALUE_BITS 62
#define PBC_MAX_SCALE_EXPONENT 1023

/*
 * _fixed_point._power_of_two_scale: the largest power of two s with
 * magnitude * s <= 2^bound_bits (1 for 0), its exponent from frexp (exact);
 * a non-finite magnitude or a scale beyond float64 sets *status.
 */
__device__ double pbc_power_of_two_scale(int bound_bits, double magnitude, int32_t *status)
{
    if (!isfinite(magnitude)) {
        *status = PBC_ERROR_GRADIENTS_NOT_FINITE;
        return 1.0;
    }
    if (magnitude == 0.0)
        return 1.0;
    int binary_exponent = 0;
    const double mantissa = frexp(magnitude, &binary_exponent);
    const int exponent = bound_bits - binary_exponent + (mantissa == 0.5 ? 1 : 0);
    if (exponent > PBC_MAX_SCALE_EXPONENT) {
        if (*status == 0)
            *status = PBC_ERROR_GRADIENTS_TOO_SMALL;
        return 1.0;
    }
    return ldexp(1.0, exponent);
}

/* g of every row: the objective's gradient (objectives.py), times the
 * weight, times the fit's power-of-two rescaling (GradientScaling.apply). */
__global__ void pbc_gradients_kernel(const double *__restrict__ raw_prediction,
                                     const double *__restrict__ targets,
                                     const double *__restrict__ weights, int64_t n_rows,
                                     int objective, double parameter, double multiplier,
                                     double *__restrict__ gradients)
{
    for (int64_t row = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; row < n_rows;
         row += (int64_t)gridDim.x * blockDim.x) {
        double g = raw_prediction[row] - targets[row];
        if (objective == PBC_OBJECTIVE_HUBER)
            g = g < -parameter ? -parameter : (g > parameter ? parameter : g);
        if (weights)
            g = g * weights[row];
        gradients[row] = g * multiplier;  /* a power of two: exact, 1 changes nothing */
    }
}

/* Each era's sum of |g| added row by row in row order (_histogram.era_magnitude_sums):
 * the warp loads PBC_ERA_SUM_ROWS rows, its first lane adds them in order. */
__global__ void pbc_era_magnitude_kernel(const double *__restrict__ gradients,
                                         const int64_t *__restrict__ era_offsets,
                                         int32_t n_eras, double *__restrict__ era_sums)
{
    PBC_DYNAMIC_SHARED(double, loaded);
    for (int32_t era = blockIdx.x; era < n_eras; era += gridDim.x) {
        const int64_t begin = era_offsets[era], end = era_offsets[era + 1];
        double sum = 0.0;
        for (int64_t first = begin; first < end; first += PBC_ERA_SUM_ROWS) {
            const int64_t n = end - first < PBC_ERA_SUM_ROWS ? end - first : PBC_ERA_SUM_ROWS;
            for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
                loaded[i] = fabs(gradients[first + i]);
            __syncthreads();
            if (threadIdx.x == 0)
                for (int64_t i = 0; i < n; ++i)
                    sum += loaded[i];
            __syncthreads();
        }
        if (threadIdx.x == 0)
            era_sums[era] = sum;
    }
}

/* The gradient scale of to_fixed_point, one thread: the largest era sum and
 * the total added in era order (_fixed_point.largest_and_total). */
__global__ void pbc_gradient_grid_kernel(const double *__restrict__ era_sums, int32_t n_eras,
                                         int32_t count_bits, struct pbc_round_grid *grid)
{
    if (blockIdx.x != 0 || threadIdx.x != 0)
        return;
    double largest = 0.0, total = 0.0;
    for (int32_t era = 0; era < n_eras; ++era) {
        const double era_sum = era_sums[era];
        largest = era_sum > largest ? era_sum : largest;
        total += era_sum;
    }
    int32_t status = 0;
    const double by_era = pbc_power_of_two_scale(PBC_PACKED_VALUE_BITS - count_bits - 1,
                                                 largest, &status);
    const double by_total = pbc_power_of_two_scale(PBC_EXACT_SUM_BITS - 1, total, &status);
    grid->scale_gradients = by_total < by_era ? by_total : by_era;
    grid->peak_units = 0ULL;
    grid->status = status;
}

/* g_q = rint(g * scale) (half to even, _histogram.round_to_grid), and the
 * round's largest |g_q| (one atomic per warp). */
__global__ void pbc_round_quantize_kernel(const double *__restrict__ gradients, int64_t n_rows,
                                          struct pbc_round_grid *grid,
                                          long long *__restrict__ fixed)
{
    const double scale = grid->scale_gradients;
    unsigned long long peak = 0ULL;
    for (int64_t row = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; row < n_rows;
         row += (int64_t)gridDim.x * blockDim.x) {
        const long long units = __double2ll_rn(gradients[row] * scale);
        fixed[row] = units;
        const unsigned long long magnitude =
            units < 0 ? 0ULL - (unsigned long long)units : (unsigned long long)units;
        peak = magnitude > peak ? magnitude : peak;
    }
    for (int offset = 16; offset > 0; offset /= 2) {
        const unsigned long long other = __shfl_xor_sync(0xffffffffu, peak, offset);
        peak = other > peak ? other : peak;
    }
    if (threadIdx.x % 32 == 0 && peak > 0ULL)
        atomicMax(&grid->peak_units, peak);
}

/* g * g on its own grid (squared_gradient_scale: from the largest rounded
 * |g|, max |g_q| / scale exactly) for the nodes' gradient variance. */
__global__ void pbc_round_squares_kernel(const long long *__restrict__ fixed, int64_t n_rows,
                                         int32_t squared_bound_bits,
                                         struct pbc_round_grid *grid,
                                         long long *__restrict__ fixed_squares)
{
    const double inverse = 1.0 / grid->scale_gradients;  /* a power of two: exact */
    const double peak = (double)grid->peak_units * inverse;
    int32_t status = 0;
    const double scale = pbc_power_of_two_scale(squared_bound_bits, peak * peak, &status);
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        grid->scale_gradients_squared = scale;
        if (grid->status == 0)
            grid->status = status;
    }
    for (int64_t row = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; row < n_rows;
         row += (int64_t)gridDim.x * blockDim.x) {
        const double rounded = (double)fixed[row] * inverse;  /* the host's rounded g */
        fixed_squares[row] = __double2ll_rn(rounded * rounded * scale);
    }
}

int pbc_launch_round_gradients(pbc_context *ctx)
{
    const unsigned int blocks = pbc_blocks(ctx->n_rows, PBC_ROW_THREADS);
    PBC_LAUNCH(pbc_gradients_kernel, blocks, PBC_ROW_THREADS, 0, ctx->stream)(
        ctx->predict_out, ctx->targets, ctx->weights, ctx->n_rows, ctx->objective,
        ctx->objective_parameter, ctx->gradient_multiplier, ctx->staging);
    PBC_CHECK_LAUNCH();
    unsigned int era_blocks = ctx->n_eras < 65535 ? (unsigned int)ctx->n_eras : 65535u;
    PBC_LAUNCH(pbc_era_magnitude_kernel, era_blocks, PBC_ERA_SUM_THREADS,
               PBC_ERA_SUM_ROWS * sizeof(double), ctx->stream)(
        ctx->staging, ctx->era_offsets, ctx->n_eras, ctx->era_sums);
    PBC_CHECK_LAUNCH();
    PBC_LAUNCH(pbc_gradient_grid_kernel, 1, 1, 0, ctx->stream)(
        ctx->era_sums, ctx->n_eras, ctx->count_bits, ctx->grid);
    PBC_CHECK_LAUNCH();
    PBC_LAUNCH(pbc_round_quantize_kernel, blocks, PBC_ROW_THREADS, 0, ctx->stream)(
        ctx->staging, ctx->n_rows, ctx->grid, ctx->gradients);
    PBC_CHECK_LAUNCH();
    PBC_LAUNCH(pbc_round_squares_kernel, blocks, PBC_ROW_THREADS, 0, ctx->stream)(
        ctx->gradients, ctx->n_rows, ctx->squared_bound_bits, ctx->grid,
        ctx->gradients_squared);
    PBC_CHECK_LAUNCH();
    return PBC_OK;
}

/*
 * node_of_row from the trees' flags (_partition.start_pack_eras): row r of
 * era e is in tree t's sample when t keeps e and, with a row subsample, the
 * byte of r among t's kept rows is set; then it is in t's root (slot t),
 * else routed along unsampled (-2 - t).
 */
__global__ void pbc_start_samples_kernel(const int32_t *__restrict__ row_era,
                                         const int64_t *__restrict__ era_offsets,
                                         int64_t n_rows, int32_t n_eras, int32_t pack_size,
                                         const uint8_t *__restrict__ era_keep,
                                         const int64_t *__restrict__ kept_before,
                                         const uint8_t *__restrict__ has_row_keep,
                                         const uint8_t *__restrict__ row_keep,
                                         int32_t *__restrict__ node_of_row)
{
    for (int64_t row = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; row < n_rows;
         row += (int64_t)gridDim.x * blockDim.x) {
        const int32_t era = row_era[row];
        for (int32_t tree = 0; tree < pack_size; ++tree) {
            const int64_t flag = (int64_t)tree * n_eras + era;
            bool sampled = era_keep[flag] != 0;
            if (sampled && has_row_keep[tree])
                sampled = row_keep[tree * n_rows + kept_before[flag]
                                   + (row - era_offsets[era])] != 0;
            node_of_row[row * pack_size + tree] = sampled ? tree : -2 - tree;
        }
    }
}

int pbc_launch_start_samples(pbc_context *ctx, const uint8_t *row_keep)
{
    PBC_LAUNCH(pbc_start_samples_kernel, pbc_blocks(ctx->n_rows, PBC_ROW_THREADS),
               PBC_ROW_THREADS, 0, ctx->stream)(
        ctx->row_era, ctx->era_offsets, ctx->n_rows, ctx->n_eras, ctx->pack_size,
        ctx->era_keep, ctx->kept_before, ctx->tree_has_row_keep, row_keep, ctx->node_of_row);
    PBC_CHECK_LAUNCH();
    return PBC_OK;
}

/* out[i] = values[first + i * stride]: a strided read of the rows' values. */
__global__ void pbc_gather_kernel(const double *__restrict__ values, int64_t first,
                                  int64_t stride, int64_t n_out, double *__restrict__ out)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n_out;
         i += (int64_t)gridDim.x * blockDim.x)
        out[i] = values[first + i * stride];
}

int pbc_launch_gather(pbc_context *ctx, const double *values, int64_t first, int64_t stride,
                      int64_t n_out, double *out)
{
    PBC_LAUNCH(pbc_gather_kernel, pbc_blocks(n_out, PBC_ROW_THREADS), PBC_ROW_THREADS, 0,
               ctx->stream)(values, first, stride, n_out, out);
    PBC_CHECK_LAUNCH();
    return PBC_OK;
}
