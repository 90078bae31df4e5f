/*
 * context.cu -- the C API of libpackboost_cuda.so (csrc/packboost_cuda.h):
 * device memory of a fit, host <-> device copies, timers and errors.
 *
 * A call either completes or returns the first error (CUDA's cudaError_t or
 * a PBC_ERROR_* code); the caller turns it into an exception with
 * pbc_error_string's text. Nothing here prints or aborts.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.cuh"

extern "C" const char *pbc_error_string(int code)
{
    switch (code) {
    case PBC_OK: return "no error";
    case PBC_ERROR_INVALID_ARGUMENT: return "invalid argument to libpackboost_cuda";
    case PBC_ERROR_HOST_MEMORY: return "out of host memory in libpackboost_cuda";
    case PBC_ERROR_TOO_MANY_TREES: return "too many trees per pack for libpackboost_cuda";
    default: break;
    }
    if (code > 0)
        return cudaGetErrorString((cudaError_t)code);
    return "unknown libpackboost_cuda error";
}

extern "C" int pbc_api_version(void)
{
    return PBC_API_VERSION;
}

#ifndef PBC_BUILD_ARCH
#define PBC_BUILD_ARCH "unknown"
#endif

extern "C" const char *pbc_build_arch(void)
{
    return PBC_BUILD_ARCH;
}

extern "C" int pbc_runtime_version(int *version)
{
    PBC_CHECK(cudaRuntimeGetVersion(version));
    return PBC_OK;
}

extern "C" int pbc_driver_version(int *version)
{
    PBC_CHECK(cudaDriverGetVersion(version));
    return PBC_OK;
}

extern "C" int pbc_device_count(int *count)
{
    *count = 0;
    PBC_CHECK(cudaGetDeviceCount(count));
    return PBC_OK;
}

extern "C" int pbc_device_name(int device, char *name, int length)
{
    cudaDeviceProp properties;
    if (length < 1)
        return PBC_ERROR_INVALID_ARGUMENT;
    PBC_CHECK(cudaGetDeviceProperties(&properties, device));
    strncpy(name, properties.name, (size_t)length - 1);
    name[length - 1] = '\0';
    return PBC_OK;
}

extern "C" int pbc_device_memory(int device, int64_t *free_bytes, int64_t *total_bytes)
{
    size_t free_now = 0, total = 0;
    if (!free_bytes || !total_bytes)
        return PBC_ERROR_INVALID_ARGUMENT;
    PBC_CHECK(cudaSetDevice(device));
    PBC_CHECK(cudaMemGetInfo(&free_now, &total));
    *free_bytes = (int64_t)free_now;
    *total_bytes = (int64_t)total;
    return PBC_OK;
}

/* -- timers ---------------------------------------------------------------- */

static int pbc_timer_begin(pbc_context *ctx)
{
    if (ctx->timing)
        PBC_CHECK(cudaEventRecord(ctx->start, ctx->stream));
    return PBC_OK;
}

static int pbc_timer_end(pbc_context *ctx, int timer)
{
    float ms = 0.0f;
    if (!ctx->timing)
        return PBC_OK;
    PBC_CHECK(cudaEventRecord(ctx->stop, ctx->stream));
    PBC_CHECK(cudaEventSynchronize(ctx->stop));
    PBC_CHECK(cudaEventElapsedTime(&ms, ctx->start, ctx->stop));
    ctx->times[timer] += ms;
    return PBC_OK;
}

#define PBC_TIMED(timer, expr)                   \
    do {                                         \
        int pbc_rc_ = pbc_timer_begin(ctx);      \
        if (pbc_rc_ == PBC_OK)                   \
            pbc_rc_ = (expr);                    \
        if (pbc_rc_ == PBC_OK)                   \
            pbc_rc_ = pbc_timer_end(ctx, timer); \
        if (pbc_rc_ != PBC_OK)                   \
            return pbc_rc_;                      \
    } while (0)

extern "C" int pbc_set_timing(pbc_context *ctx, int enabled)
{
    if (!ctx)
        return PBC_ERROR_INVALID_ARGUMENT;
    ctx->timing = enabled != 0;
    return PBC_OK;
}

extern "C" int pbc_read_timers(pbc_context *ctx, double *times, int reset)
{
    if (!ctx)
        return PBC_ERROR_INVALID_ARGUMENT;
    for (int i = 0; i < PBC_N_TIMERS; ++i) {
        times[i] = ctx->times[i];
        if (reset)
            ctx->times[i] = 0.0;
    }
    return PBC_OK;
}

/* -- scratch: one device buffer carved into aligned pieces ------------------ */

typedef struct {
    char *base;
    size_t offset;
} pbc_arena;

static void *pbc_take(pbc_arena *arena, size_t bytes)
{
    size_t offset = (arena->offset + 255) & ~(size_t)255;
    arena->offset = offset + bytes;
    return arena->base ? (void *)(arena->base + offset) : NULL;
}

static int pbc_reserve(void **buffer, size_t *capacity, size_t bytes)
{
    if (bytes <= *capacity && *buffer)
        return PBC_OK;
    if (*buffer) {
        PBC_CHECK(cudaFree(*buffer));
        *buffer = NULL;
        *capacity = 0;
    }
    PBC_CHECK(cudaMalloc(buffer, bytes > 0 ? bytes : 1));
    *capacity = bytes;
    return PBC_OK;
}

/*
 * Copies return nonzero on failure and keep the error in ctx->copy_error, so
 * that a chain `pbc_upload(...) || pbc_upload(...)` stops at the first one;
 * pbc_copies(ctx, chain) turns the chain back into that error code.
 */
static int pbc_upload(pbc_context *ctx, void *device, const void *host, size_t bytes)
{
    cudaError_t status = cudaSuccess;
    if (bytes)
        status = cudaMemcpyAsync(device, host, bytes, cudaMemcpyHostToDevice, ctx->stream);
    ctx->copy_error = (int)status;
    return status != cudaSuccess;
}

static int pbc_download(pbc_context *ctx, void *host, const void *device, size_t bytes)
{
    cudaError_t status = cudaSuccess;
    if (bytes)
        status = cudaMemcpyAsync(host, device, bytes, cudaMemcpyDeviceToHost, ctx->stream);
    ctx->copy_error = (int)status;
    return status != cudaSuccess;
}

static int pbc_copies(pbc_context *ctx, int failed)
{
    return failed ? ctx->copy_error : PBC_OK;
}

/* A pinned host buffer of at least `bytes` (ctx->pinned), kept and grown:
 * the small downloads of every depth go through it. */
static int pbc_reserve_pinned(pbc_context *ctx, size_t bytes)
{
    if (bytes <= ctx->pinned_bytes && ctx->pinned)
        return PBC_OK;
    if (ctx->pinned) {
        PBC_CHECK(cudaFreeHost(ctx->pinned));
        ctx->pinned = NULL;
        ctx->pinned_bytes = 0;
    }
    PBC_CHECK(cudaMallocHost(&ctx->pinned, bytes > 0 ? bytes : 1));
    ctx->pinned_bytes = bytes;
    return PBC_OK;
}

/* The round's scales, once ctx->host_grid holds the device's (after a sync). */
static int pbc_take_round_grid(pbc_context *ctx)
{
    ctx->grid_pending = 0;
    if (ctx->host_grid->status != 0)
        return ctx->host_grid->status;
    ctx->inv_scale_g = 1.0 / ctx->host_grid->scale_gradients;
    ctx->inv_scale_h = 1.0 / ctx->host_grid->scale_hessians;
    return PBC_OK;
}

/* A round started on the device: its scales to the host now (one sync),
 * unless the slot sums brought them already. */
static int pbc_read_round_grid(pbc_context *ctx)
{
    if (!ctx->grid_pending)
        return ctx->device_round && ctx->host_grid->status != 0 ? ctx->host_grid->status
                                                                : PBC_OK;
    int rc = pbc_copies(ctx, pbc_download(ctx, ctx->host_grid, ctx->grid,
                                          sizeof(struct pbc_round_grid)));
    if (rc == PBC_OK)
        rc = (int)cudaStreamSynchronize(ctx->stream);
    return rc == PBC_OK ? pbc_take_round_grid(ctx) : rc;
}

/* -- context ----------------------------------------------------------------- */

extern "C" int pbc_context_destroy(pbc_context *ctx)
{
    if (!ctx)
        return PBC_OK;
    cudaSetDevice(ctx->device);
    void *buffers[] = {ctx->X_binned, ctx->n_bins, ctx->tile_begin, ctx->tile_end,
                       ctx->tile_era, ctx->gradients, ctx->hessians,
                       ctx->gradients_squared, ctx->staging,
                       ctx->tree_rows,
                       ctx->node_of_row, ctx->leaf_of_row, ctx->scratch, ctx->hist,
                       ctx->predict_out, ctx->targets, ctx->weights, ctx->row_era,
                       ctx->era_offsets, ctx->era_sums, ctx->grid, ctx->era_keep,
                       ctx->kept_before, ctx->tree_has_row_keep};
    for (size_t i = 0; i < sizeof(buffers) / sizeof(buffers[0]); ++i)
        if (buffers[i])
            cudaFree(buffers[i]);
    free(ctx->host_era_offsets);
    if (ctx->host_grid)
        cudaFreeHost(ctx->host_grid);
    if (ctx->pinned)
        cudaFreeHost(ctx->pinned);
    if (ctx->start)
        cudaEventDestroy(ctx->start);
    if (ctx->stop)
        cudaEventDestroy(ctx->stop);
    if (ctx->stream)
        cudaStreamDestroy(ctx->stream);
    free(ctx);
    return PBC_OK;
}

static int pbc_context_fill(pbc_context *ctx, const void *X_binned, const int32_t *n_bins,
                            const int32_t *row_era)
{
    const int64_t n_rows = ctx->n_rows, pack = ctx->pack_size;
    int64_t n_tiles = 0, begin, end;
    int64_t *tile_begin, *tile_end;
    int32_t *tile_era;
    int rc;

    PBC_CHECK(cudaSetDevice(ctx->device));
    PBC_CHECK(cudaStreamCreateWithFlags(&ctx->stream, cudaStreamNonBlocking));
    PBC_CHECK(cudaEventCreate(&ctx->start));
    PBC_CHECK(cudaEventCreate(&ctx->stop));
    {
        int setup = pbc_histogram_setup(ctx);
        if (setup != PBC_OK)
            return setup;
    }

    /* Era-aligned row tiles of at most PBC_TILE_ROWS rows. */
    for (begin = 0; begin < n_rows; begin = end) {
        for (end = begin; end < n_rows && row_era[end] == row_era[begin]; ++end) {}
        n_tiles += (end - begin + PBC_TILE_ROWS - 1) / PBC_TILE_ROWS;
    }
    tile_begin = (int64_t *)malloc(n_tiles * sizeof(int64_t));
    tile_end = (int64_t *)malloc(n_tiles * sizeof(int64_t));
    tile_era = (int32_t *)malloc(n_tiles * sizeof(int32_t));
    if (!tile_begin || !tile_end || !tile_era) {
        free(tile_begin);
        free(tile_end);
        free(tile_era);
        return PBC_ERROR_HOST_MEMORY;
    }
    n_tiles = 0;
    for (begin = 0; begin < n_rows; begin = end) {
        for (end = begin; end < n_rows && row_era[end] == row_era[begin]; ++end) {}
        for (int64_t first = begin; first < end; first += PBC_TILE_ROWS) {
            tile_begin[n_tiles] = first;
            tile_end[n_tiles] = first + PBC_TILE_ROWS < end ? first + PBC_TILE_ROWS : end;
            tile_era[n_tiles] = row_era[begin];
            ++n_tiles;
        }
    }
    ctx->n_tiles = n_tiles;
    rc = PBC_OK;
#define PBC_ALLOC(ptr, bytes)                                         \
    if (rc == PBC_OK) {                                               \
        cudaError_t alloc_status_ = cudaMalloc((void **)&(ptr), (bytes)); \
        if (alloc_status_ != cudaSuccess)                             \
            rc = (int)alloc_status_;                                  \
    }
    PBC_ALLOC(ctx->tile_begin, n_tiles * sizeof(int64_t));
    PBC_ALLOC(ctx->tile_end, n_tiles * sizeof(int64_t));
    PBC_ALLOC(ctx->tile_era, n_tiles * sizeof(int32_t));
    PBC_ALLOC(ctx->X_binned, (size_t)ctx->n_features * n_rows * ctx->bytes_per_bin);
    PBC_ALLOC(ctx->n_bins, ctx->n_features * sizeof(int32_t));
    PBC_ALLOC(ctx->gradients, n_rows * sizeof(long long));
    PBC_ALLOC(ctx->hessians, n_rows * sizeof(long long));
    PBC_ALLOC(ctx->gradients_squared, n_rows * sizeof(long long));
    PBC_ALLOC(ctx->staging, n_rows * sizeof(double));
    PBC_ALLOC(ctx->tree_rows, n_rows * pack * sizeof(int32_t));
    PBC_ALLOC(ctx->node_of_row, n_rows * pack * sizeof(int32_t));
    PBC_ALLOC(ctx->leaf_of_row, n_rows * pack * sizeof(int32_t));
    PBC_ALLOC(ctx->predict_out, n_rows * sizeof(double));
    PBC_ALLOC(ctx->row_era, n_rows * sizeof(int32_t));
    PBC_ALLOC(ctx->era_offsets, ((size_t)ctx->n_eras + 1) * sizeof(int64_t));
    PBC_ALLOC(ctx->era_keep, (size_t)ctx->n_eras * pack);
    PBC_ALLOC(ctx->kept_before, (size_t)ctx->n_eras * pack * sizeof(int64_t));
    PBC_ALLOC(ctx->tree_has_row_keep, pack);
#undef PBC_ALLOC
    if (rc == PBC_OK) {
        cudaError_t pinned_status = cudaMallocHost((void **)&ctx->host_grid,
                                                   sizeof(struct pbc_round_grid));
        if (pinned_status != cudaSuccess)
            rc = (int)pinned_status;
    }
    int64_t *era_offsets = (int64_t *)malloc(((size_t)ctx->n_eras + 1) * sizeof(int64_t));
    if (!era_offsets && rc == PBC_OK)
        rc = PBC_ERROR_HOST_MEMORY;
    if (rc == PBC_OK) {
        /* row_era is non-decreasing (checked): era e's rows start at the
         * first row of an era >= e. */
        int64_t row = 0;
        for (int32_t era = 0; era <= ctx->n_eras; ++era) {
            while (row < n_rows && row_era[row] < era)
                ++row;
            era_offsets[era] = row;
        }
        rc = pbc_copies(ctx, pbc_upload(ctx, ctx->row_era, row_era, n_rows * sizeof(int32_t))
                        || pbc_upload(ctx, ctx->era_offsets, era_offsets,
                                      ((size_t)ctx->n_eras + 1) * sizeof(int64_t)));
        if (rc == PBC_OK)
            rc = (int)cudaStreamSynchronize(ctx->stream);
    }
    ctx->host_era_offsets = era_offsets;  /* freed with the context */
    if (rc == PBC_OK) rc = pbc_copies(ctx, pbc_upload(ctx, ctx->tile_begin, tile_begin, n_tiles * sizeof(int64_t)));
    if (rc == PBC_OK) rc = pbc_copies(ctx, pbc_upload(ctx, ctx->tile_end, tile_end, n_tiles * sizeof(int64_t)));
    if (rc == PBC_OK) rc = pbc_copies(ctx, pbc_upload(ctx, ctx->tile_era, tile_era, n_tiles * sizeof(int32_t)));
    if (rc == PBC_OK)
        rc = pbc_copies(ctx, pbc_upload(ctx, ctx->X_binned, X_binned,
                                        (size_t)ctx->n_features * n_rows * ctx->bytes_per_bin));
    if (rc == PBC_OK)
        rc = pbc_copies(ctx, pbc_upload(ctx, ctx->n_bins, n_bins, ctx->n_features * sizeof(int32_t)));
    if (rc == PBC_OK)
        rc = (int)cudaStreamSynchronize(ctx->stream);
    free(tile_begin);
    free(tile_end);
    free(tile_era);
    return rc;
}

extern "C" int pbc_context_create(int device, const void *X_binned, int bytes_per_bin,
                                  int64_t n_features, int64_t n_rows, const int32_t *n_bins,
                                  const int32_t *row_era, int32_t n_eras, int32_t pack_size,
                                  int64_t histogram_budget_bytes, pbc_context **context)
{
    pbc_context *ctx;
    int rc, max_bins = 0;
    if (!context)
        return PBC_ERROR_INVALID_ARGUMENT;
    *context = NULL;
    if (!X_binned || !n_bins || !row_era || n_features < 1 || n_rows < 1 || n_eras < 1
            || (bytes_per_bin != 1 && bytes_per_bin != 2) || pack_size < 1)
        return PBC_ERROR_INVALID_ARGUMENT;
    if (pack_size > PBC_MAX_PACK_SIZE)
        return PBC_ERROR_TOO_MANY_TREES;
    for (int64_t f = 0; f < n_features; ++f) {
        if (n_bins[f] < 0 || n_bins[f] >= (bytes_per_bin == 1 ? 256 : 65536))
            return PBC_ERROR_INVALID_ARGUMENT;
        max_bins = n_bins[f] > max_bins ? n_bins[f] : max_bins;
    }
    for (int64_t row = 0; row < n_rows; ++row)
        if (row_era[row] < 0 || row_era[row] >= n_eras
                || (row > 0 && row_era[row] < row_era[row - 1]))
            return PBC_ERROR_INVALID_ARGUMENT;
    ctx = (pbc_context *)calloc(1, sizeof(pbc_context));
    if (!ctx)
        return PBC_ERROR_HOST_MEMORY;
    ctx->device = device;
    ctx->n_features = n_features;
    ctx->n_rows = n_rows;
    ctx->n_eras = n_eras;
    ctx->pack_size = pack_size;
    ctx->bytes_per_bin = bytes_per_bin;
    ctx->max_width = max_bins + 1;
    ctx->histogram_budget_bytes = histogram_budget_bytes > 0 ? histogram_budget_bytes
                                                             : (int64_t)1 << 30;
    ctx->inv_scale_g = ctx->inv_scale_h = 1.0;
    rc = pbc_context_fill(ctx, X_binned, n_bins, row_era);
    if (rc != PBC_OK) {
        pbc_context_destroy(ctx);
        return rc;
    }
    *context = ctx;
    return PBC_OK;
}

/* -- a round ------------------------------------------------------------------ */

extern "C" int pbc_begin_round(pbc_context *ctx, const double *gradients,
                               const double *hessians, const int32_t *const *tree_rows,
                               const int64_t *tree_n_rows, double scale_gradients,
                               double scale_hessians, double scale_gradients_squared)
{
    if (!ctx || !gradients || !hessians || !tree_rows != !tree_n_rows
            || !(scale_gradients > 0.0) || !(scale_hessians > 0.0)
            || !(scale_gradients_squared > 0.0))
        return PBC_ERROR_INVALID_ARGUMENT;
    /* Rows out of range are skipped by the kernel (no host pass over them). */
    for (int32_t tree = 0; tree_rows && tree < ctx->pack_size; ++tree)
        if (tree_n_rows[tree] < 0 || tree_n_rows[tree] > ctx->n_rows
                || (tree_n_rows[tree] > 0 && !tree_rows[tree]))
            return PBC_ERROR_INVALID_ARGUMENT;
    PBC_CHECK(cudaSetDevice(ctx->device));
    ctx->inv_scale_g = 1.0 / scale_gradients;
    ctx->inv_scale_h = 1.0 / scale_hessians;
    /* One staging buffer: the copies and kernels are ordered on the stream. */
    PBC_TIMED(PBC_TIMER_TRANSFER,
              pbc_copies(ctx, pbc_upload(ctx, ctx->staging, gradients,
                                         ctx->n_rows * sizeof(double))));
    PBC_TIMED(PBC_TIMER_INIT, pbc_launch_quantize(ctx, ctx->gradients, scale_gradients, 0));
    PBC_TIMED(PBC_TIMER_INIT, pbc_launch_quantize(ctx, ctx->gradients_squared,
                                                  scale_gradients_squared, 1));
    PBC_TIMED(PBC_TIMER_TRANSFER,
              pbc_copies(ctx, pbc_upload(ctx, ctx->staging, hessians,
                                         ctx->n_rows * sizeof(double))));
    PBC_TIMED(PBC_TIMER_INIT, pbc_launch_quantize(ctx, ctx->hessians, scale_hessians, 0));
    pbc_note_hessians(ctx, hessians, scale_hessians);
    ctx->grid_pending = 0;  /* the scales are the host's */
    if (!tree_rows) {
        /* The samples follow (pbc_start_samples), on the same stream. */
        PBC_CHECK(cudaStreamSynchronize(ctx->stream));
        return PBC_OK;
    }
    for (int32_t tree = 0; tree < ctx->pack_size; ++tree)
        if (tree_n_rows[tree] < ctx->n_rows)  /* n_rows distinct rows: all, no upload */
            PBC_TIMED(PBC_TIMER_TRANSFER,
                      pbc_copies(ctx, pbc_upload(ctx, ctx->tree_rows + tree * ctx->n_rows,
                                                 tree_rows[tree],
                                                 tree_n_rows[tree] * sizeof(int32_t))));
    PBC_TIMED(PBC_TIMER_INIT, pbc_launch_init_round(ctx, tree_n_rows));
    /* The host may reuse its arrays once this returns. */
    PBC_CHECK(cudaStreamSynchronize(ctx->stream));
    return PBC_OK;
}

/* -- the round on the device (round.cu) ------------------------------------ */

extern "C" int pbc_device_round_setup(pbc_context *ctx, int objective, double parameter,
                                      const double *y, const double *sample_weight,
                                      const double *raw_prediction, const double *hessians,
                                      double gradient_multiplier, double scale_hessians,
                                      int32_t count_bits, int32_t squared_bound_bits)
{
    if (!ctx || !y || !raw_prediction || !hessians || !(scale_hessians > 0.0)
            || !(gradient_multiplier > 0.0) || count_bits < 1 || count_bits > 31
            || (objective != PBC_OBJECTIVE_SQUARED_ERROR && objective != PBC_OBJECTIVE_HUBER)
            || (objective == PBC_OBJECTIVE_HUBER && !(parameter >= 0.0)))
        return PBC_ERROR_INVALID_ARGUMENT;
    PBC_CHECK(cudaSetDevice(ctx->device));
    const size_t row_bytes = ctx->n_rows * sizeof(double);
    if (!ctx->targets)
        PBC_CHECK(cudaMalloc((void **)&ctx->targets, row_bytes));
    if (sample_weight && !ctx->weights)
        PBC_CHECK(cudaMalloc((void **)&ctx->weights, row_bytes));
    if (!ctx->era_sums)
        PBC_CHECK(cudaMalloc((void **)&ctx->era_sums, ctx->n_eras * sizeof(double)));
    if (!ctx->grid)
        PBC_CHECK(cudaMalloc((void **)&ctx->grid, sizeof(struct pbc_round_grid)));
    ctx->objective = objective;
    ctx->objective_parameter = parameter;
    ctx->gradient_multiplier = gradient_multiplier;
    ctx->count_bits = count_bits;
    ctx->squared_bound_bits = squared_bound_bits;
    memset(ctx->host_grid, 0, sizeof(struct pbc_round_grid));
    ctx->host_grid->scale_hessians = scale_hessians;
    ctx->host_grid->scale_gradients = ctx->host_grid->scale_gradients_squared = 1.0;
    int rc = pbc_copies(ctx, pbc_upload(ctx, ctx->targets, y, row_bytes)
                        || (sample_weight && pbc_upload(ctx, ctx->weights, sample_weight,
                                                        row_bytes))
                        || pbc_upload(ctx, ctx->predict_out, raw_prediction, row_bytes)
                        || pbc_upload(ctx, ctx->grid, ctx->host_grid,
                                      sizeof(struct pbc_round_grid))
                        || pbc_upload(ctx, ctx->staging, hessians, row_bytes));
    if (rc != PBC_OK)
        return rc;
    if (!sample_weight && ctx->weights) {
        PBC_CHECK(cudaFree(ctx->weights));
        ctx->weights = NULL;
    }
    /* The fit's hessians do not change between rounds: quantised once. */
    rc = pbc_launch_quantize(ctx, ctx->hessians, scale_hessians, 0);
    pbc_note_hessians(ctx, hessians, scale_hessians);
    if (rc == PBC_OK)
        rc = (int)cudaStreamSynchronize(ctx->stream);
    if (rc == PBC_OK) {
        ctx->device_round = 1;
        ctx->grid_pending = 0;
    }
    return rc;
}

extern "C" int pbc_device_round_gradients(pbc_context *ctx)
{
    if (!ctx || !ctx->device_round)
        return PBC_ERROR_INVALID_ARGUMENT;
    PBC_CHECK(cudaSetDevice(ctx->device));
    /* Queued only: the scales come to the host with the first slot sums. */
    PBC_TIMED(PBC_TIMER_GRADIENTS, pbc_launch_round_gradients(ctx));
    ctx->grid_pending = 1;
    return PBC_OK;
}

extern "C" int pbc_round_scales(pbc_context *ctx, double *scales)
{
    if (!ctx || !scales || !ctx->device_round)
        return PBC_ERROR_INVALID_ARGUMENT;
    PBC_CHECK(cudaSetDevice(ctx->device));
    int rc = pbc_read_round_grid(ctx);
    if (rc != PBC_OK)
        return rc;
    scales[0] = ctx->host_grid->scale_gradients;
    scales[1] = ctx->host_grid->scale_hessians;
    scales[2] = ctx->host_grid->scale_gradients_squared;
    return PBC_OK;
}

extern "C" int pbc_read_fixed_gradients(pbc_context *ctx, int64_t *gradients,
                                        int64_t *hessians, int64_t *gradients_squared)
{
    if (!ctx || !gradients || !hessians || !gradients_squared)
        return PBC_ERROR_INVALID_ARGUMENT;
    PBC_CHECK(cudaSetDevice(ctx->device));
    const size_t bytes = ctx->n_rows * sizeof(int64_t);
    int rc = pbc_copies(ctx, pbc_download(ctx, gradients, ctx->gradients, bytes)
                        || pbc_download(ctx, hessians, ctx->hessians, bytes)
                        || pbc_download(ctx, gradients_squared, ctx->gradients_squared, bytes));
    if (rc == PBC_OK)
        rc = (int)cudaStreamSynchronize(ctx->stream);
    return rc;
}

extern "C" int pbc_read_predictions(pbc_context *ctx, int64_t first, int64_t stride,
                                    int64_t n_out, double *out)
{
    if (!ctx || !ctx->device_round || first < 0 || stride < 1 || n_out < 0 || (n_out && !out)
            || (n_out > 0 && first + (n_out - 1) * stride >= ctx->n_rows))
        return PBC_ERROR_INVALID_ARGUMENT;
    if (n_out == 0)
        return PBC_OK;
    PBC_CHECK(cudaSetDevice(ctx->device));
    const size_t bytes = n_out * sizeof(double);
    pbc_arena arena = {NULL, 0};
    pbc_take(&arena, bytes);
    int rc = pbc_reserve(&ctx->scratch, &ctx->scratch_bytes, arena.offset);
    if (rc == PBC_OK)
        rc = pbc_reserve_pinned(ctx, bytes);
    if (rc != PBC_OK)
        return rc;
    double *gathered = (double *)ctx->scratch;
    PBC_TIMED(PBC_TIMER_PREDICT,
              pbc_launch_gather(ctx, ctx->predict_out, first, stride, n_out, gathered));
    rc = pbc_copies(ctx, pbc_download(ctx, ctx->pinned, gathered, bytes));
    if (rc == PBC_OK)
        rc = (int)cudaStreamSynchronize(ctx->stream);
    if (rc == PBC_OK)
        memcpy(out, ctx->pinned, bytes);
    return rc;
}

extern "C" int pbc_start_samples(pbc_context *ctx, const uint8_t *era_keep,
                                 const int64_t *kept_before, const uint8_t *const *row_keep,
                                 const int64_t *row_keep_length)
{
    if (!ctx || !era_keep || !kept_before || !row_keep || !row_keep_length)
        return PBC_ERROR_INVALID_ARGUMENT;
    const int64_t pack = ctx->pack_size, n_eras = ctx->n_eras;
    uint8_t has_row_keep[PBC_MAX_PACK_SIZE];
    for (int64_t tree = 0; tree < pack; ++tree) {
        has_row_keep[tree] = row_keep[tree] != NULL;
        if (row_keep[tree] && (row_keep_length[tree] < 0 || row_keep_length[tree] > ctx->n_rows))
            return PBC_ERROR_INVALID_ARGUMENT;
        /* Every kept era's rows must have their bytes (the kernel reads them). */
        for (int64_t era = 0; row_keep[tree] && era < n_eras; ++era) {
            const int64_t first = kept_before[tree * n_eras + era];
            const int64_t size = ctx->host_era_offsets[era + 1] - ctx->host_era_offsets[era];
            if (era_keep[tree * n_eras + era]
                    && (first < 0 || first + size > row_keep_length[tree]))
                return PBC_ERROR_INVALID_ARGUMENT;
        }
    }
    PBC_CHECK(cudaSetDevice(ctx->device));
    /* The row bytes in the round's sample buffer (n_rows bytes a tree). */
    uint8_t *row_bytes = (uint8_t *)ctx->tree_rows;
    PBC_TIMED(PBC_TIMER_TRANSFER,
              pbc_copies(ctx, pbc_upload(ctx, ctx->era_keep, era_keep, pack * n_eras)
                         || pbc_upload(ctx, ctx->kept_before, kept_before,
                                       pack * n_eras * sizeof(int64_t))
                         || pbc_upload(ctx, ctx->tree_has_row_keep, has_row_keep, pack)));
    for (int64_t tree = 0; tree < pack; ++tree)
        if (row_keep[tree])
            PBC_TIMED(PBC_TIMER_TRANSFER,
                      pbc_copies(ctx, pbc_upload(ctx, row_bytes + tree * ctx->n_rows,
                                                 row_keep[tree], row_keep_length[tree])));
    PBC_TIMED(PBC_TIMER_INIT, pbc_launch_start_samples(ctx, row_bytes));
    /* has_row_keep lives on this stack frame: its copy must be done. */
    PBC_CHECK(cudaStreamSynchronize(ctx->stream));
    return PBC_OK;
}

extern "C" int pbc_slot_sums(pbc_context *ctx, int32_t n_slots, int64_t *sum_gradients,
                             int64_t *sum_hessians, int64_t *count,
                             int64_t *sum_gradients_squared)
{
    pbc_arena arena = {NULL, 0};
    long long *sums;
    int64_t *host;
    if (!ctx || n_slots < 1 || !sum_gradients || !sum_hessians || !count
            || !sum_gradients_squared)
        return PBC_ERROR_INVALID_ARGUMENT;
    PBC_CHECK(cudaSetDevice(ctx->device));
    pbc_take(&arena, 4 * (size_t)n_slots * sizeof(long long));
    {
        int reserved = pbc_reserve(&ctx->scratch, &ctx->scratch_bytes, arena.offset);
        if (reserved != PBC_OK)
            return reserved;
    }
    arena.base = (char *)ctx->scratch;
    arena.offset = 0;
    sums = (long long *)pbc_take(&arena, 4 * (size_t)n_slots * sizeof(long long));
    PBC_TIMED(PBC_TIMER_SUMS, pbc_launch_slot_sums(ctx, n_slots, sums));
    {
        int reserved = pbc_reserve_pinned(ctx, 4 * (size_t)n_slots * sizeof(int64_t));
        if (reserved != PBC_OK)
            return reserved;
    }
    host = (int64_t *)ctx->pinned;
    /* A round started on the device: its scales come down with its first
     * sums, in the same synchronisation. */
    int rc = pbc_copies(ctx, (ctx->grid_pending
                              && pbc_download(ctx, ctx->host_grid, ctx->grid,
                                              sizeof(struct pbc_round_grid)))
                        || pbc_download(ctx, host, sums, 4 * (size_t)n_slots * sizeof(int64_t)));
    if (rc == PBC_OK)
        rc = (int)cudaStreamSynchronize(ctx->stream);
    if (rc == PBC_OK && ctx->grid_pending)
        pbc_take_round_grid(ctx);
    if (rc == PBC_OK) {
        memcpy(sum_gradients, host, n_slots * sizeof(int64_t));
        memcpy(sum_hessians, host + n_slots, n_slots * sizeof(int64_t));
        memcpy(count, host + 2 * (size_t)n_slots, n_slots * sizeof(int64_t));
        memcpy(sum_gradients_squared, host + 3 * (size_t)n_slots, n_slots * sizeof(int64_t));
    }
    return rc;
}

/* pbc_find_splits once its arguments are checked and its histograms planned. */
static int pbc_find_splits_planned(pbc_context *ctx, const pbc_hist_plan *plan, int32_t n_slots,
                                   const int32_t *slot_tree, const uint8_t *slot_open,
                                   int32_t n_candidates, const int32_t *features,
                                   const double *slot_gradient_variance,
                                   const pb_split_params *params, int32_t *best_column,
                                   double *best_score, double *best_gain,
                                   int32_t *best_threshold, uint8_t *best_missing_left)
{
    const int64_t n_tiles = (int64_t)n_slots * n_candidates;
    const int64_t pack = ctx->pack_size;
    /* Scratch layout (measured with a NULL base, then carved). */
    pbc_arena arena = {NULL, 0};
    for (int pass = 0; pass < 2; ++pass) {
        int32_t *d_slot_tree = (int32_t *)pbc_take(&arena, n_slots * sizeof(int32_t));
        uint8_t *d_slot_open = (uint8_t *)pbc_take(&arena, n_slots);
        double *d_variance = (double *)pbc_take(&arena, n_slots * sizeof(double));
        int32_t *d_features = (int32_t *)pbc_take(&arena, n_candidates * sizeof(int32_t));
        pbc_hist_item *d_items =
            (pbc_hist_item *)pbc_take(&arena, plan->n_items * sizeof(pbc_hist_item));
        int32_t *d_block_items =
            (int32_t *)pbc_take(&arena, (plan->n_blocks + 1) * sizeof(int32_t));
        int64_t *d_tile_offset = (int64_t *)pbc_take(&arena, n_candidates * pack * sizeof(int64_t));
        int32_t *d_tree_first_slot = (int32_t *)pbc_take(&arena, pack * sizeof(int32_t));
        double *tile_score = (double *)pbc_take(&arena, n_tiles * sizeof(double));
        double *tile_gain = (double *)pbc_take(&arena, n_tiles * sizeof(double));
        int32_t *tile_threshold = (int32_t *)pbc_take(&arena, n_tiles * sizeof(int32_t));
        uint8_t *tile_missing_left = (uint8_t *)pbc_take(&arena, n_tiles);
        uint8_t *tile_found = (uint8_t *)pbc_take(&arena, n_tiles);
        int32_t *d_column = (int32_t *)pbc_take(&arena, n_slots * sizeof(int32_t));
        double *d_score = (double *)pbc_take(&arena, n_slots * sizeof(double));
        double *d_gain = (double *)pbc_take(&arena, n_slots * sizeof(double));
        int32_t *d_threshold = (int32_t *)pbc_take(&arena, n_slots * sizeof(int32_t));
        uint8_t *d_missing_left = (uint8_t *)pbc_take(&arena, n_slots);
        if (pass == 0) {
            int rc = pbc_reserve(&ctx->scratch, &ctx->scratch_bytes, arena.offset);
            if (rc != PBC_OK)
                return rc;
            arena.base = (char *)ctx->scratch;
            arena.offset = 0;
            continue;
        }
        PBC_TIMED(PBC_TIMER_TRANSFER,
                  pbc_copies(ctx, pbc_upload(ctx, d_slot_tree, slot_tree, n_slots * sizeof(int32_t))
                  || pbc_upload(ctx, d_slot_open, slot_open, n_slots)
                  || (slot_gradient_variance
                      ? pbc_upload(ctx, d_variance, slot_gradient_variance,
                                   n_slots * sizeof(double))
                      : (ctx->copy_error = (int)cudaMemsetAsync(
                             d_variance, 0, n_slots * sizeof(double), ctx->stream)) != 0)
                  || pbc_upload(ctx, d_features, features, n_candidates * sizeof(int32_t))
                  || pbc_upload(ctx, d_items, plan->items, plan->n_items * sizeof(pbc_hist_item))
                  || pbc_upload(ctx, d_block_items, plan->block_items,
                                (plan->n_blocks + 1) * sizeof(int32_t))
                  || pbc_upload(ctx, d_tile_offset, plan->tile_offset,
                                n_candidates * pack * sizeof(int64_t))
                  || pbc_upload(ctx, d_tree_first_slot, plan->tree_first_slot,
                                pack * sizeof(int32_t))));
        PBC_CHECK(cudaMemsetAsync(tile_found, 0, n_tiles, ctx->stream));
        {
            void *hist = ctx->hist;
            int rc = pbc_reserve(&hist, &ctx->hist_bytes,
                                 (size_t)plan->max_chunk_cells * sizeof(pbc_cell));
            ctx->hist = (pbc_cell *)hist;
            if (rc != PBC_OK)
                return rc;
        }
        for (int32_t chunk = 0; chunk < plan->n_chunks; ++chunk) {
            const int32_t first = plan->chunk_first[chunk];
            const int32_t size = plan->chunk_first[chunk + 1] - first;
            PBC_TIMED(PBC_TIMER_HISTOGRAM,
                      pbc_launch_histograms(ctx, plan, chunk, d_slot_open, d_items,
                                            d_block_items));
            PBC_TIMED(PBC_TIMER_SCORE,
                      pbc_launch_score(ctx, n_slots, d_slot_tree, d_slot_open, d_variance,
                                       n_candidates, first, size, d_features, d_tile_offset,
                                       d_tree_first_slot, params, tile_score, tile_gain,
                                       tile_threshold, tile_missing_left, tile_found));
        }
        PBC_TIMED(PBC_TIMER_SELECT,
                  pbc_launch_select(ctx, n_slots, n_candidates, tile_score, tile_gain,
                                    tile_threshold, tile_missing_left, tile_found, d_column,
                                    d_score, d_gain, d_threshold, d_missing_left));
        PBC_TIMED(PBC_TIMER_TRANSFER,
                  pbc_copies(ctx, pbc_download(ctx, best_column, d_column, n_slots * sizeof(int32_t))
                  || pbc_download(ctx, best_score, d_score, n_slots * sizeof(double))
                  || pbc_download(ctx, best_gain, d_gain, n_slots * sizeof(double))
                  || pbc_download(ctx, best_threshold, d_threshold, n_slots * sizeof(int32_t))
                  || pbc_download(ctx, best_missing_left, d_missing_left, n_slots)));
        PBC_CHECK(cudaStreamSynchronize(ctx->stream));
    }
    return PBC_OK;
}

extern "C" int pbc_find_splits(pbc_context *ctx, int32_t n_slots, const int32_t *slot_tree,
                               const uint8_t *slot_open, int32_t n_candidates,
                               const int32_t *features, const uint8_t *tree_uses_feature,
                               const double *slot_gradient_variance,
                               const pb_split_params *params, int32_t *best_column,
                               double *best_score, double *best_gain, int32_t *best_threshold,
                               uint8_t *best_missing_left)
{
    if (!ctx || n_slots < 1 || n_candidates < 1 || !slot_tree || !slot_open || !features
            || !tree_uses_feature || !params)
        return PBC_ERROR_INVALID_ARGUMENT;
    for (int32_t i = 0; i < n_candidates; ++i)
        if (features[i] < 0 || features[i] >= ctx->n_features)
            return PBC_ERROR_INVALID_ARGUMENT;
    for (int32_t i = 0; i < n_slots; ++i)
        if (slot_tree[i] < 0 || slot_tree[i] >= ctx->pack_size)
            return PBC_ERROR_INVALID_ARGUMENT;
    PBC_CHECK(cudaSetDevice(ctx->device));
    {
        int scales = pbc_read_round_grid(ctx);  /* the scoring's inverse scales */
        if (scales != PBC_OK)
            return scales;
    }
    pbc_hist_plan plan;
    int rc = pbc_plan_histograms(ctx, n_slots, slot_tree, slot_open, n_candidates, features,
                                 tree_uses_feature, &plan);
    if (rc != PBC_OK)
        return rc;
    rc = pbc_find_splits_planned(ctx, &plan, n_slots, slot_tree, slot_open, n_candidates,
                                 features, slot_gradient_variance, params, best_column,
                                 best_score, best_gain, best_threshold, best_missing_left);
    pbc_free_hist_plan(&plan);
    return rc;
}

extern "C" int pbc_route_rows(pbc_context *ctx, int32_t n_slots, const int32_t *split_feature,
                              const int32_t *split_threshold, const uint8_t *split_missing_left,
                              const int32_t *left_child_slot, const int32_t *slot_node)
{
    if (!ctx || n_slots < 1 || !split_feature || !split_threshold || !split_missing_left
            || !left_child_slot || !slot_node)
        return PBC_ERROR_INVALID_ARGUMENT;
    for (int32_t i = 0; i < n_slots; ++i)
        if (split_feature[i] >= ctx->n_features)
            return PBC_ERROR_INVALID_ARGUMENT;
    PBC_CHECK(cudaSetDevice(ctx->device));
    pbc_arena arena = {NULL, 0};
    for (int pass = 0; pass < 2; ++pass) {
        int32_t *d_feature = (int32_t *)pbc_take(&arena, n_slots * sizeof(int32_t));
        int32_t *d_threshold = (int32_t *)pbc_take(&arena, n_slots * sizeof(int32_t));
        uint8_t *d_missing_left = (uint8_t *)pbc_take(&arena, n_slots);
        int32_t *d_left_child = (int32_t *)pbc_take(&arena, n_slots * sizeof(int32_t));
        int32_t *d_slot_node = (int32_t *)pbc_take(&arena, n_slots * sizeof(int32_t));
        if (pass == 0) {
            int rc = pbc_reserve(&ctx->scratch, &ctx->scratch_bytes, arena.offset);
            if (rc != PBC_OK)
                return rc;
            arena.base = (char *)ctx->scratch;
            arena.offset = 0;
            continue;
        }
        PBC_TIMED(PBC_TIMER_TRANSFER,
                  pbc_copies(ctx, pbc_upload(ctx, d_feature, split_feature, n_slots * sizeof(int32_t))
                  || pbc_upload(ctx, d_threshold, split_threshold, n_slots * sizeof(int32_t))
                  || pbc_upload(ctx, d_missing_left, split_missing_left, n_slots)
                  || pbc_upload(ctx, d_left_child, left_child_slot, n_slots * sizeof(int32_t))
                  || pbc_upload(ctx, d_slot_node, slot_node, n_slots * sizeof(int32_t))));
        PBC_TIMED(PBC_TIMER_ROUTE,
                  pbc_launch_route(ctx, d_feature, d_threshold, d_missing_left, d_left_child,
                                   d_slot_node));
    }
    /* The host may reuse its arrays once this returns. */
    PBC_CHECK(cudaStreamSynchronize(ctx->stream));
    return PBC_OK;
}

extern "C" int pbc_add_leaf_values(pbc_context *ctx, int64_t n_nodes, const double *value,
                                   const int64_t *tree_roots, double *out)
{
    if (!ctx || n_nodes < 1 || !value || !tree_roots || (!out && !ctx->device_round))
        return PBC_ERROR_INVALID_ARGUMENT;
    PBC_CHECK(cudaSetDevice(ctx->device));
    int rc = PBC_OK;
    pbc_arena arena = {NULL, 0};
    for (int pass = 0; pass < 2 && rc == PBC_OK; ++pass) {
        double *d_value = (double *)pbc_take(&arena, n_nodes * sizeof(double));
        int64_t *d_roots = (int64_t *)pbc_take(&arena, ctx->pack_size * sizeof(int64_t));
        if (pass == 0) {
            rc = pbc_reserve(&ctx->scratch, &ctx->scratch_bytes, arena.offset);
            arena.base = (char *)ctx->scratch;
            arena.offset = 0;
            continue;
        }
        rc = pbc_timer_begin(ctx);
        /* Without out, the device's raw predictions are updated in place:
         * only the pack's node values cross the bus. */
        if (rc == PBC_OK)
            rc = pbc_copies(ctx,
                pbc_upload(ctx, d_value, value, n_nodes * sizeof(double))
                || pbc_upload(ctx, d_roots, tree_roots, ctx->pack_size * sizeof(int64_t))
                || (out && pbc_upload(ctx, ctx->predict_out, out, ctx->n_rows * sizeof(double))));
        if (rc == PBC_OK)
            rc = pbc_launch_add_leaf_values(ctx, d_value, d_roots, ctx->predict_out);
        if (rc == PBC_OK && out)
            rc = pbc_copies(ctx, pbc_download(ctx, out, ctx->predict_out,
                                              ctx->n_rows * sizeof(double)));
        if (rc == PBC_OK && out)
            rc = (int)cudaStreamSynchronize(ctx->stream);
        if (rc == PBC_OK)
            rc = pbc_timer_end(ctx, PBC_TIMER_PREDICT);
    }
    return rc;
}

extern "C" int pbc_read_node_of_row(pbc_context *ctx, int32_t *node_of_row)
{
    if (!ctx || !node_of_row)
        return PBC_ERROR_INVALID_ARGUMENT;
    PBC_CHECK(cudaSetDevice(ctx->device));
    int rc = pbc_copies(ctx, pbc_download(ctx, node_of_row, ctx->node_of_row,
                                          ctx->n_rows * ctx->pack_size * sizeof(int32_t)));
    if (rc == PBC_OK)
        rc = (int)cudaStreamSynchronize(ctx->stream);
    return rc;
}

extern "C" int pbc_write_node_of_row(pbc_context *ctx, const int32_t *node_of_row)
{
    if (!ctx || !node_of_row)
        return PBC_ERROR_INVALID_ARGUMENT;
    PBC_CHECK(cudaSetDevice(ctx->device));
    int rc = pbc_copies(ctx, pbc_upload(ctx, ctx->node_of_row, node_of_row,
                                        ctx->n_rows * ctx->pack_size * sizeof(int32_t)));
    if (rc == PBC_OK)
        rc = (int)cudaStreamSynchronize(ctx->stream);
    return rc;
}

struct pbc_rows {
    int device, dtype;
    int64_t n_rows, n_features;
    void *X;                 /* the rows, row-major, on the device */
    double *out;             /* a call's predictions on the device, grown on demand */
    size_t out_bytes;
};

static const size_t pbc_raw_item_bytes[] = {8, 4, 1, 1};  /* by PBC_DTYPE_* */

extern "C" int pbc_rows_create(int device, const void *X, int dtype, int64_t n_rows,
                               int64_t n_features, pbc_rows **rows)
{
    if (!rows || (!X && n_rows > 0) || n_rows < 0 || n_features < 1 || dtype < 0
            || dtype > PBC_DTYPE_UINT8)
        return PBC_ERROR_INVALID_ARGUMENT;
    *rows = NULL;
    PBC_CHECK(cudaSetDevice(device));
    pbc_rows *made = (pbc_rows *)calloc(1, sizeof(pbc_rows));
    if (!made)
        return PBC_ERROR_HOST_MEMORY;
    made->device = device;
    made->dtype = dtype;
    made->n_rows = n_rows;
    made->n_features = n_features;
    const size_t bytes = (size_t)n_rows * n_features * pbc_raw_item_bytes[dtype];
    int rc = PBC_OK;
    if (bytes > 0) {
        rc = (int)cudaMalloc(&made->X, bytes);
        if (rc == PBC_OK)
            rc = (int)cudaMemcpy(made->X, X, bytes, cudaMemcpyHostToDevice);
    }
    if (rc != PBC_OK) {
        pbc_rows_destroy(made);
        return rc;
    }
    *rows = made;
    return PBC_OK;
}

extern "C" int pbc_rows_destroy(pbc_rows *rows)
{
    if (!rows)
        return PBC_OK;
    cudaSetDevice(rows->device);
    if (rows->X)
        cudaFree(rows->X);
    if (rows->out)
        cudaFree(rows->out);
    free(rows);
    return PBC_OK;
}

/* The trees' arguments of pbc_rows_predict and pbc_predict_raw. */
static int pbc_trees_valid(int64_t n_nodes, const int32_t *feature, const double *threshold,
                           const uint8_t *missing_left, const int32_t *left_child,
                           const int32_t *right_child, const double *value, int64_t n_trees,
                           const int64_t *tree_roots, int64_t n_outputs,
                           const int64_t *output_tree_starts)
{
    if (n_nodes < 1 || n_trees < 0 || !feature || !threshold || !missing_left || !left_child
            || !right_child || !value || (n_trees > 0 && !tree_roots) || n_outputs < 1
            || !output_tree_starts || output_tree_starts[0] != 0
            || output_tree_starts[n_outputs] != n_trees)
        return 0;
    for (int64_t output = 0; output < n_outputs; ++output)
        if (output_tree_starts[output + 1] < output_tree_starts[output])
            return 0;
    return 1;
}

extern "C" int pbc_rows_predict(pbc_rows *rows, int64_t n_nodes, const int32_t *feature,
                                const double *threshold, const uint8_t *missing_left,
                                const int32_t *left_child, const int32_t *right_child,
                                const double *value, int64_t n_trees,
                                const int64_t *tree_roots, int64_t n_outputs,
                                const int64_t *output_tree_starts, double *out)
{
    if (!rows || !out || !pbc_trees_valid(n_nodes, feature, threshold, missing_left, left_child,
                                          right_child, value, n_trees, tree_roots, n_outputs,
                                          output_tree_starts))
        return PBC_ERROR_INVALID_ARGUMENT;
    const int64_t n_rows = rows->n_rows;
    if (n_rows == 0 || n_trees == 0)
        return PBC_OK;
    PBC_CHECK(cudaSetDevice(rows->device));
    const size_t out_items = (size_t)n_rows * n_outputs;
    {
        void *grown = rows->out;
        int rc = pbc_reserve(&grown, &rows->out_bytes, out_items * sizeof(double));
        rows->out = (double *)grown;
        if (rc != PBC_OK)
            return rc;
    }
    double *host = (double *)malloc(out_items * sizeof(double));
    if (!host)
        return PBC_ERROR_HOST_MEMORY;
    void *buffer = NULL;
    cudaError_t status = cudaSuccess;
    int rc = PBC_OK;
    pbc_arena arena = {NULL, 0};
    for (int pass = 0; pass < 2 && rc == PBC_OK; ++pass) {
        int32_t *d_feature = (int32_t *)pbc_take(&arena, n_nodes * sizeof(int32_t));
        double *d_threshold = (double *)pbc_take(&arena, n_nodes * sizeof(double));
        uint8_t *d_missing_left = (uint8_t *)pbc_take(&arena, n_nodes);
        int32_t *d_left = (int32_t *)pbc_take(&arena, n_nodes * sizeof(int32_t));
        int32_t *d_right = (int32_t *)pbc_take(&arena, n_nodes * sizeof(int32_t));
        double *d_value = (double *)pbc_take(&arena, n_nodes * sizeof(double));
        int64_t *d_roots = (int64_t *)pbc_take(&arena, n_trees * sizeof(int64_t));
        int64_t *d_starts = (int64_t *)pbc_take(&arena, (n_outputs + 1) * sizeof(int64_t));
        if (pass == 0) {
            status = cudaMalloc(&buffer, arena.offset);
            rc = (int)status;
            arena.base = (char *)buffer;
            arena.offset = 0;
            continue;
        }
#define PBC_COPY_IN(dst, src, bytes) \
        if (status == cudaSuccess)    \
            status = cudaMemcpy((dst), (src), (bytes), cudaMemcpyHostToDevice)
        PBC_COPY_IN(d_feature, feature, n_nodes * sizeof(int32_t));
        PBC_COPY_IN(d_threshold, threshold, n_nodes * sizeof(double));
        PBC_COPY_IN(d_missing_left, missing_left, n_nodes);
        PBC_COPY_IN(d_left, left_child, n_nodes * sizeof(int32_t));
        PBC_COPY_IN(d_right, right_child, n_nodes * sizeof(int32_t));
        PBC_COPY_IN(d_value, value, n_nodes * sizeof(double));
        PBC_COPY_IN(d_roots, tree_roots, n_trees * sizeof(int64_t));
        PBC_COPY_IN(d_starts, output_tree_starts, (n_outputs + 1) * sizeof(int64_t));
#undef PBC_COPY_IN
        rc = (int)status;
        if (rc == PBC_OK)
            rc = pbc_launch_predict_raw(0, rows->X, rows->dtype, n_rows, rows->n_features,
                                        d_feature, d_threshold, d_missing_left, d_left,
                                        d_right, d_value, d_roots, n_outputs, d_starts,
                                        rows->out);
        if (rc == PBC_OK)
            rc = (int)cudaMemcpy(host, rows->out, out_items * sizeof(double),
                                 cudaMemcpyDeviceToHost);
    }
    if (buffer)
        cudaFree(buffer);
    if (rc == PBC_OK)
        for (size_t item = 0; item < out_items; ++item)
            out[item] += host[item];
    free(host);
    return rc;
}

extern "C" int pbc_predict_raw(int device, const void *X, int dtype, int64_t n_rows,
                               int64_t n_features, int64_t n_nodes, const int32_t *feature,
                               const double *threshold, const uint8_t *missing_left,
                               const int32_t *left_child, const int32_t *right_child,
                               const double *value, int64_t n_trees, const int64_t *tree_roots,
                               int64_t n_outputs, const int64_t *output_tree_starts,
                               double *out)
{
    if (!X || !out || n_rows < 0 || n_features < 1 || dtype < 0 || dtype > PBC_DTYPE_UINT8
            || !pbc_trees_valid(n_nodes, feature, threshold, missing_left, left_child,
                                right_child, value, n_trees, tree_roots, n_outputs,
                                output_tree_starts))
        return PBC_ERROR_INVALID_ARGUMENT;
    if (n_rows == 0 || n_trees == 0)
        return PBC_OK;
    pbc_rows *rows = NULL;
    int rc = pbc_rows_create(device, X, dtype, n_rows, n_features, &rows);
    if (rc == PBC_OK)
        rc = pbc_rows_predict(rows, n_nodes, feature, threshold, missing_left, left_child,
                              right_child, value, n_trees, tree_roots, n_outputs,
                              output_tree_starts, out);
    pbc_rows_destroy(rows);
    return rc;
}
