/*
 * internal.cuh -- what the .cu files of libpackboost_cuda.so share: the
 * context of a fit, error plumbing and the kernel launchers.
 *
 * One concept per file, mirroring the CPU kernels:
 *   context.cu    the C API: device memory, copies, timers, errors
 *   histogram.cu  per-era histograms in shared memory    (_histogram.pxd)
 *   split.cu      prefix scan + DES scoring + best split (_split.pyx, des.h)
 *   partition.cu  round init, slot sums, routing rows    (_partition.pyx)
 *   predict.cu    pack update and raw prediction         (_predict.pyx)
 *   round.cu      a round's gradients, grid and samples   (booster.py, _fixed_point.py)
 *   fake_cuda.h   (tests/cuda_stub/) the runtime on host threads, for tests without a GPU
 */
#ifndef PACKBOOST_CUDA_INTERNAL_CUH
#define PACKBOOST_CUDA_INTERNAL_CUH

#include <math.h>
#include <stdint.h>

#ifdef PBC_FAKE_CUDA
/* The kernels on host threads, for checks without a GPU (ci/cuda_on_cpu.sh). */
#include "fake_cuda.h"
#else
#include <cuda_runtime.h>
/* kernel<<<grid, block, shared bytes, stream>>>(args), spelled so that the
 * fake runtime can launch it too. */
#define PBC_LAUNCH(kernel, grid, block, shared, stream) kernel<<<grid, block, shared, stream>>>
#define PBC_DYNAMIC_SHARED(type, name) extern __shared__ type name[]
#endif

#include "packboost_cuda.h"
#include "pbc_split.h"

/* Return the first CUDA error of an expression as the function's result. */
#define PBC_CHECK(expr)                        \
    do {                                       \
        cudaError_t pbc_status_ = (expr);      \
        if (pbc_status_ != cudaSuccess)        \
            return (int)pbc_status_;           \
    } while (0)

/* A launch's configuration or asynchronous error. */
#define PBC_CHECK_LAUNCH() PBC_CHECK(cudaGetLastError())

/* Threads of the row-parallel kernels (one warp per block in the fake runtime,
 * where each CUDA thread is an OS thread: every kernel loops over blockDim). */
#ifdef PBC_FAKE_CUDA
#define PBC_ROW_THREADS 32
#else
#define PBC_ROW_THREADS 256
#endif
/* Rows of one histogram tile (a tile never crosses an era boundary). */
#define PBC_TILE_ROWS 4096
/* Shared memory for a block's histogram cells: the device's opt-in limit, at
 * most PBC_HIST_SHARED_MAX_BYTES (two blocks per SM on an H100), at least the
 * 48 KiB every device gives (PBC_HIST_SHARED_BYTES, also the slot-sums cap). */
#define PBC_HIST_SHARED_BYTES (48 * 1024)
#define PBC_HIST_SHARED_MAX_BYTES (96 * 1024)
/* A histogram block's planned cells: small enough for several resident blocks
 * per multiprocessor (latency hiding), large enough for many items per read
 * of a row. */
#ifdef PBC_FAKE_CUDA
/* Small blocks on the host stand-in, so that its tests also split a tree's
 * slots over several items (5-bin features from depth 4 on). */
#define PBC_HIST_BLOCK_BYTES (2 * 1024)
#else
#define PBC_HIST_BLOCK_BYTES (24 * 1024)
#endif
/* Items (a candidate feature for a run of one tree's slots) of one histogram
 * block: more items share each read of a row's slots, g and h; fewer keep the
 * block's serial loop over them short. */
#define PBC_MAX_ITEMS_PER_BLOCK 64
/* Warps per block of the scoring kernel (one warp per tile). */
#ifdef PBC_FAKE_CUDA
#define PBC_SCORE_WARPS 1
#else
#define PBC_SCORE_WARPS 4
#endif

struct pbc_context {
    int device;
    cudaStream_t stream;
    int64_t n_features, n_rows;
    int32_t n_eras, pack_size, bytes_per_bin, max_width;
    int64_t histogram_budget_bytes;
    /* data of the fit */
    void *X_binned;             /* (n_features, n_rows) uint8 / uint16 */
    int32_t *n_bins;            /* (n_features,) */
    int64_t n_tiles;            /* era-aligned row tiles */
    int64_t *tile_begin, *tile_end;
    int32_t *tile_era;
    /* round state */
    long long *gradients, *hessians;  /* fixed point (n_rows,) */
    long long *gradients_squared;     /* fixed point g * g (n_rows,) */
    double *staging;                  /* (n_rows,) a real-valued upload */
    int32_t *tree_rows;               /* (pack_size, n_rows): tree t's sample at t * n_rows */
    int32_t *node_of_row;             /* (n_rows, pack_size) slot codes (docs/data-layout.md) */
    int32_t *leaf_of_row;             /* (n_rows, pack_size) leaf node id in its tree */
    double inv_scale_g, inv_scale_h;
    /* depth scratch, grown on demand */
    void *scratch;
    size_t scratch_bytes;
    pbc_cell *hist;
    size_t hist_bytes;
    double *predict_out;              /* (n_rows,) the pack update's device copy of out */
    /* the round on the device (round.cu; NULL until pbc_device_round_setup) */
    int device_round;                 /* set up: predict_out holds the raw predictions */
    int objective;                    /* PBC_OBJECTIVE_* */
    double objective_parameter, gradient_multiplier;
    int32_t count_bits, squared_bound_bits;
    double *targets, *weights;        /* (n_rows,) y; the weights or NULL */
    int32_t *row_era;                 /* (n_rows,) */
    int64_t *era_offsets;             /* (n_eras + 1) */
    int64_t *host_era_offsets;        /* the same on the host (argument checks) */
    double *era_sums;                 /* (n_eras) the round's sums of |g| */
    struct pbc_round_grid *grid;      /* the round's scales, on the device */
    struct pbc_round_grid *host_grid; /* its pinned host copy */
    int grid_pending;                 /* host_grid not yet read for this round */
    /* samples by flags (pbc_start_samples): (pack_size, n_eras) each */
    uint8_t *era_keep;
    int64_t *kept_before;
    uint8_t *tree_has_row_keep;       /* (pack_size) */
    /* pinned host staging of the small downloads (slot sums, predictions) */
    void *pinned;
    size_t pinned_bytes;
    /* timers */
    int timing;
    cudaEvent_t start, stop;
    double times[PBC_N_TIMERS];
    int copy_error;                   /* the last copy's cudaError_t (see pbc_copies) */
    int hist_shared_cells;            /* pbc_cell capacity of a histogram block */
    int hist_block_cells;             /* the cells a histogram block is planned to hold */
    /* Every row's fixed-point hessian is hessian_constant (squared error
     * without weights): the histogram kernel counts rows and derives the
     * hessian sums, one shared atomic less per update (pbc_note_hessians). */
    int hessian_is_constant;
    long long hessian_constant;
};

/* The fixed-point grid of a round computed on the device (round.cu). */
struct pbc_round_grid {
    double scale_gradients, scale_hessians, scale_gradients_squared;
    unsigned long long peak_units;  /* max |g_q| of the round */
    int32_t status;                 /* 0, or PBC_ERROR_GRADIENTS_* */
    int32_t pad;
};

/* Launchers (each in the .cu of its kernel); all on context->stream. */
int pbc_launch_round_gradients(pbc_context *ctx);
int pbc_launch_start_samples(pbc_context *ctx, const uint8_t *row_keep);
int pbc_launch_gather(pbc_context *ctx, const double *values, int64_t first, int64_t stride,
                      int64_t n_out, double *out);
/* One unit of a histogram block's work: the bins of one candidate feature,
 * or the joint bins of a pair of them, for the slots [slot_begin, slot_end)
 * of one tree (histogram.cu). */
typedef struct {
    int64_t hist_offset;     /* cells: slot_begin's (era 0, bin 0) in the chunk's histogram */
    int64_t hist_offset2;    /* the same for the pair's second feature */
    int32_t column;          /* the feature's column in X_binned */
    int32_t column2;         /* the pair's second feature's column; -1: a single feature */
    int32_t tree;
    int32_t slot_begin, slot_end;
    int32_t shared_offset;   /* cells: where the block sums the item's bins */
} pbc_hist_item;

/* Features of at most this many bins (the missing bin included) are summed
 * in pairs: a (bin, bin) table of the two, one set of adds per row for both
 * (Numerai's 5 levels and the missing bin: 36 cells a slot). 0: no pairs
 * (-DPBC_PAIR_MAX_WIDTH=0, the A/B baseline of ci/gpu_ab.sh). */
#ifndef PBC_PAIR_MAX_WIDTH
#define PBC_PAIR_MAX_WIDTH 8
#endif
/* 1: a histogram block counts rows where every hessian is one value
 * (pbc_note_hessians); 0: it adds every row's hessian (the A/B baseline). */
#ifndef PBC_HIST_CONSTANT_HESSIAN
#define PBC_HIST_CONSTANT_HESSIAN 1
#endif

/* A depth's histogram work, planned on the host (pbc_plan_histograms). */
typedef struct {
    int32_t n_chunks, n_blocks, n_items, use_shared;
    int32_t *chunk_first;    /* (n_chunks + 1) candidate bounds of the chunks */
    int32_t *chunk_blocks;   /* (n_chunks + 1) bounds of each chunk's blocks */
    int64_t *chunk_cells;    /* (n_chunks) cells of each chunk's histogram */
    int64_t max_chunk_cells;
    int32_t max_block_cells;   /* the shared cells of the largest block */
    int32_t *block_items;    /* (n_blocks + 1) bounds of each block's items */
    pbc_hist_item *items;    /* (n_items) */
    int64_t *tile_offset;    /* (n_candidates, pack_size) cells of the (candidate, tree)
                                tiles in their chunk's histogram; -1: not scored */
    int32_t *tree_first_slot;  /* (pack_size) */
} pbc_hist_plan;

int pbc_histogram_setup(pbc_context *ctx);
int pbc_plan_histograms(const pbc_context *ctx, int32_t n_slots, const int32_t *slot_tree,
                        const uint8_t *slot_open, int32_t n_candidates, const int32_t *features,
                        const uint8_t *tree_uses_feature, pbc_hist_plan *plan);
void pbc_free_hist_plan(pbc_hist_plan *plan);
int pbc_launch_quantize(pbc_context *ctx, long long *fixed, double scale, int square);
int pbc_launch_init_round(pbc_context *ctx, const int64_t *tree_n_rows);
int pbc_launch_slot_sums(pbc_context *ctx, int32_t n_slots, long long *sums /* (4, n_slots) */);
int pbc_launch_histograms(pbc_context *ctx, const pbc_hist_plan *plan, int32_t chunk,
                          const uint8_t *slot_open, const pbc_hist_item *items,
                          const int32_t *block_items);
int pbc_launch_score(pbc_context *ctx, int32_t n_slots, const int32_t *slot_tree,
                     const uint8_t *slot_open, const double *slot_gradient_variance,
                     int32_t n_candidates, int32_t chunk_first,
                     int32_t chunk_size, const int32_t *features,
                     const int64_t *tile_offset, const int32_t *tree_first_slot,
                     const pb_split_params *params,
                     double *tile_score, double *tile_gain, int32_t *tile_threshold,
                     uint8_t *tile_missing_left, uint8_t *tile_found);
int pbc_launch_select(pbc_context *ctx, int32_t n_slots, int32_t n_candidates,
                      const double *tile_score, const double *tile_gain,
                      const int32_t *tile_threshold, const uint8_t *tile_missing_left,
                      const uint8_t *tile_found, int32_t *best_column, double *best_score,
                      double *best_gain, int32_t *best_threshold,
                      uint8_t *best_missing_left);
int pbc_launch_route(pbc_context *ctx, const int32_t *split_feature,
                     const int32_t *split_threshold, const uint8_t *split_missing_left,
                     const int32_t *left_child_slot, const int32_t *slot_node);
int pbc_launch_add_leaf_values(pbc_context *ctx, const double *value, const int64_t *tree_roots,
                               double *out);
int pbc_launch_predict_raw(cudaStream_t stream, const void *X, int dtype, int64_t n_rows,
                           int64_t n_features, const int32_t *feature, const double *threshold,
                           const uint8_t *missing_left, const int32_t *left_child,
                           const int32_t *right_child, const double *value,
                           const int64_t *tree_roots, int64_t n_outputs,
                           const int64_t *output_tree_starts, double *out);

/*
 * A 64-bit add into a shared-memory cell from native 32-bit atomics. Hopper
 * has no 64-bit shared-memory atomic add: atomicAdd on an unsigned long long
 * there compiles to a compare-and-swap loop, which retries under contention
 * (a histogram's few bins are hit by most of a warp at once). The low word's
 * old value says whether this add carried out of it; each carry is seen by
 * exactly one adder, which adds it to the high word with its own high part,
 * so the cell ends with the same 64-bit sum (mod 2^64) a 64-bit atomic gives.
 * Only for cells read after a barrier: between the two adds a reader could
 * see the low word updated and the high word not yet.
 */
__device__ __forceinline__ void pbc_shared_add64(unsigned long long *cell,
                                                 unsigned long long value)
{
    unsigned int *words = (unsigned int *)cell;  /* little-endian: words[0] is the low word */
    const unsigned int low = (unsigned int)value;
    unsigned int high = (unsigned int)(value >> 32);
    const unsigned int old = atomicAdd(words, low);
    high += (unsigned int)(old + low < old);  /* the carry out of the low word */
    if (high != 0u)
        atomicAdd(words + 1, high);
}

/*
 * Note whether every row's hessian (real, before quantisation) is one finite
 * value, and its fixed-point value: nearbyint rounds half to even, as the
 * quantise kernel's __double2ll_rn, on the same exact product (scale is a
 * power of two).
 */
static inline void pbc_note_hessians(pbc_context *ctx, const double *hessians, double scale)
{
    const double first = ctx->n_rows > 0 ? hessians[0] : 0.0;
    int64_t row = 1;
    while (row < ctx->n_rows && hessians[row] == first)
        ++row;
    ctx->hessian_is_constant = PBC_HIST_CONSTANT_HESSIAN && ctx->n_rows > 0
                               && row == ctx->n_rows && isfinite(first);
    ctx->hessian_constant = ctx->hessian_is_constant ? (long long)nearbyint(first * scale) : 0;
}

static inline unsigned int pbc_blocks(int64_t n, int threads)
{
    int64_t blocks = (n + threads - 1) / threads;
    if (blocks < 1)
        blocks = 1;
    if (blocks > 65535LL * 32)
        blocks = 65535LL * 32;  /* grid-stride loops cover the rest */
    return (unsigned int)blocks;
}

#endif /* PACKBOOST_CUDA_INTERNAL_CUH */
