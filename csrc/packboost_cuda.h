/*
 * packboost_cuda.h -- the C ABI of libpackboost_cuda.so, PackBoost's CUDA
 * backend (docs/cuda-kernels.md).
 *
 * Plain C: integer error codes, opaque handles, pointers and fixed-width
 * integers only, so that Cython (packboost/_cuda.pyx) or any other language
 * can call it. Every function returns PBC_OK (0) or an error code:
 *   > 0   a cudaError_t value (pbc_error_string gives CUDA's own message)
 *   < 0   one of the PBC_ERROR_* codes below
 *
 * The library grows the trees of a pack depth by depth, exactly like the CPU
 * engine (packboost/grower.py): rows never move; node_of_row[row, tree] is the
 * open node (slot) a row is in. The training data, gradients and node_of_row
 * stay on the device for the whole fit; per depth only a few small per-slot
 * arrays cross the bus. All randomness is drawn by the caller (the host), so
 * a model is a pure function of (data, params, seed) on both backends.
 *
 * Gradient sums are integer fixed point: the device quantises gradients and
 * hessians to int64 (value * scale, rounded half to even, scale a power of two
 * chosen by the caller), and every sum on the device is an exact integer sum, so results do not depend on the
 * order of atomic additions. Sums are turned back to reals (x / scale) only to
 * score candidates (csrc/pbc_split.h, which uses csrc/des.h like the CPU).
 */
#ifndef PACKBOOST_CUDA_H
#define PACKBOOST_CUDA_H

#include <stdint.h>

#include "split_params.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PBC_API_VERSION 6

#define PBC_OK 0
#define PBC_ERROR_INVALID_ARGUMENT (-1)
#define PBC_ERROR_HOST_MEMORY (-2)
#define PBC_ERROR_TOO_MANY_TREES (-3)
/* The round's gradients (computed on the device) are not finite, or so small
 * that their fixed-point scale is beyond float64 (pbc_round_scales). */
#define PBC_ERROR_GRADIENTS_NOT_FINITE (-4)
#define PBC_ERROR_GRADIENTS_TOO_SMALL (-5)

/* Trees per pack the kernels accept (same cap as the CPU engine). */
#define PBC_MAX_PACK_SIZE 64

/* Kernel timers (milliseconds, accumulated while timing is on). */
#define PBC_TIMER_INIT 0      /* node_of_row from the round's samples */
#define PBC_TIMER_SUMS 1      /* per-slot pooled sums */
#define PBC_TIMER_HISTOGRAM 2 /* per-era histograms (shared memory) */
#define PBC_TIMER_SCORE 3     /* prefix scan + DES scoring of (slot, feature) tiles */
#define PBC_TIMER_SELECT 4    /* best feature per slot */
#define PBC_TIMER_ROUTE 5     /* rows to child slots */
#define PBC_TIMER_PREDICT 6   /* pack update on the training rows (leaf lookup) */
#define PBC_TIMER_TRANSFER 7  /* host <-> device copies of the round and depth inputs */
#define PBC_TIMER_GRADIENTS 8 /* the round's gradients and fixed-point grid on the device */
#define PBC_N_TIMERS 9

/* The DES parameters of pbc_find_splits: csrc/split_params.h (one struct for both backends). */

typedef struct pbc_context pbc_context;

/* CUDA's message for a cudaError_t, or the library's for a PBC_ERROR_* code. */
const char *pbc_error_string(int code);
int pbc_api_version(void);
/* The nvcc architecture flags the library was compiled with. */
const char *pbc_build_arch(void);
int pbc_runtime_version(int *version);
int pbc_driver_version(int *version);
/* cudaGetDeviceCount: fails (e.g. 35, 100) where no driver or GPU exists. */
int pbc_device_count(int *count);
int pbc_device_name(int device, char *name, int length);
/* cudaMemGetInfo on `device`: bytes free now and in all, so that a caller can
 * refuse, before allocating, a request that cannot fit. */
int pbc_device_memory(int device, int64_t *free_bytes, int64_t *total_bytes);

/*
 * A fit's device state. X_binned is feature-major (n_features, n_rows), uint8
 * (bytes_per_bin = 1) or uint16 (2); rows sorted by era (row_era
 * non-decreasing, 0 .. n_eras-1); n_bins[f] non-missing bins of feature f
 * (the missing code). histogram_budget_bytes caps the device histogram
 * buffer of a depth (features are taken in chunks under it).
 */
int pbc_context_create(int device, const void *X_binned, int bytes_per_bin,
                       int64_t n_features, int64_t n_rows, const int32_t *n_bins,
                       const int32_t *row_era, int32_t n_eras, int32_t pack_size,
                       int64_t histogram_budget_bytes, pbc_context **context);
int pbc_context_destroy(pbc_context *context);
int pbc_set_timing(pbc_context *context, int enabled);
/* Copy the timers into times[PBC_N_TIMERS]; reset them if reset != 0. */
int pbc_read_timers(pbc_context *context, double *times, int reset);

/*
 * Start a round (a pack): gradients and hessians (n_rows,) already on the
 * fixed-point grid of docs/fixed-point.md (packboost/_fixed_point.py) and that
 * grid's scales (powers of two), so the device's int64 x * scale is exact and
 * its sums equal the CPU's; g * g is rounded to scale_gradients_squared (it
 * only enters a node's gradient variance). tree_rows[t] (tree_n_rows[t]
 * distinct rows in 0 .. n_rows-1; others are ignored) is tree t's sample,
 * uploaded as is; tree_n_rows[t] == n_rows means every row (tree_rows[t] is
 * then not read). The root of tree t is slot t: node_of_row[row, t] = t for
 * a sampled row, -2 - t for the others (routed along, never summed, so that
 * every training row ends in a leaf). tree_rows and tree_n_rows both NULL:
 * the gradients only, the samples from pbc_start_samples.
 */
int pbc_begin_round(pbc_context *context, const double *gradients, const double *hessians,
                    const int32_t *const *tree_rows, const int64_t *tree_n_rows,
                    double scale_gradients, double scale_hessians,
                    double scale_gradients_squared);

/*
 * The round on the device (docs/cuda-kernels.md §4.1). Once per fit,
 * pbc_device_round_setup keeps the targets y, the weights (NULL: none) and
 * the raw predictions (n_rows,) on the device, with the fit's constant
 * hessians (already rescaled, quantised here once with scale_hessians).
 * Then per round pbc_device_round_gradients computes on the device what the
 * host computes for a one-output fit (packboost/booster.py, _fixed_point.py):
 * g = objective'(F, y) (times the weight), times gradient_multiplier (the
 * fit's power-of-two rescaling), each era's sum of |g| in row order, the
 * fixed-point scale of docs/fixed-point.md §4 (count_bits: the largest era's
 * row-count bits), g and g * g quantised (squared_bound_bits: the bound of
 * one row's g * g); nothing crosses the bus. pbc_round_scales gives the
 * round's three scales to the host (downloaded with the next slot sums).
 * pbc_add_leaf_values with out == NULL updates these predictions in place;
 * pbc_read_predictions reads some of them back.
 */
#define PBC_OBJECTIVE_SQUARED_ERROR 0  /* g = F - y */
#define PBC_OBJECTIVE_HUBER 1          /* g = clip(F - y, -parameter, parameter) */
int pbc_device_round_setup(pbc_context *context, int objective, double parameter,
                           const double *y, const double *sample_weight,
                           const double *raw_prediction, const double *hessians,
                           double gradient_multiplier, double scale_hessians,
                           int32_t count_bits, int32_t squared_bound_bits);
int pbc_device_round_gradients(pbc_context *context);
/* scales[3] = the round's gradient, hessian and squared-gradient scales. */
int pbc_round_scales(pbc_context *context, double *scales);
/* The round's fixed-point g, h and g * g (n_rows,) each, from the device (tests). */
int pbc_read_fixed_gradients(pbc_context *context, int64_t *gradients, int64_t *hessians,
                             int64_t *gradients_squared);
/* out[i] = raw_prediction[first + i * stride], i < n_out, from the device. */
int pbc_read_predictions(pbc_context *context, int64_t first, int64_t stride, int64_t n_out,
                         double *out);

/*
 * A round's samples as flags (docs/cuda-kernels.md §4.2), for either way of
 * starting a round: era_keep (pack_size, n_eras) 1 where tree t keeps era e;
 * row_keep[t] NULL (every row of its eras) or one byte per row of its kept
 * eras in row order (1: sampled), whose first byte of era e is
 * kept_before[t * n_eras + e] (the rows of t's kept eras before e). Sets
 * node_of_row as pbc_begin_round does from row lists.
 */
int pbc_start_samples(pbc_context *context, const uint8_t *era_keep, const int64_t *kept_before,
                      const uint8_t *const *row_keep, const int64_t *row_keep_length);

/*
 * Exact pooled sums (fixed point) and row counts of slots 0 .. n_slots-1; the
 * squared gradients (quantised with scale_gradients_squared) give a node's
 * gradient variance, for era_std_between.
 */
int pbc_slot_sums(pbc_context *context, int32_t n_slots, int64_t *sum_gradients,
                  int64_t *sum_hessians, int64_t *count, int64_t *sum_gradients_squared);

/*
 * Best DES split of every slot over the candidate features (docs/des.md, docs/cuda-kernels.md §5):
 * slot_tree (n_slots,), slot_open (n_slots,), features (n_candidates,)
 * ascending, tree_uses_feature (n_candidates, pack_size) row-major,
 * slot_gradient_variance (n_slots,) per-row gradient variance of each slot
 * (used when params->era_std_between; NULL: zeros). Outputs
 * per slot: best_column (index into features, -1 when no candidate meets the
 * constraints), its DES score, pooled gain, bin threshold and missing side.
 * Ties: lower feature, lower threshold, missing-left first (as on the CPU).
 */
int pbc_find_splits(pbc_context *context, int32_t n_slots, const int32_t *slot_tree,
                    const uint8_t *slot_open, int32_t n_candidates, const int32_t *features,
                    const uint8_t *tree_uses_feature, const double *slot_gradient_variance,
                    const pb_split_params *params, int32_t *best_column, double *best_score, double *best_gain,
                    int32_t *best_threshold, uint8_t *best_missing_left);

/*
 * Move every row to its child slot: slot k with split_feature[k] >= 0 sends a
 * row to left_child_slot[k] (bin <= threshold, or missing and missing_left)
 * or left_child_slot[k] + 1 (an unsampled row keeps its -2 - slot code); a
 * slot with split_feature[k] < 0 becomes a leaf: its rows record slot_node[k]
 * (the node's id in its tree) as their leaf and close (-1).
 */
int pbc_route_rows(pbc_context *context, int32_t n_slots, const int32_t *split_feature,
                   const int32_t *split_threshold, const uint8_t *split_missing_left,
                   const int32_t *left_child_slot, const int32_t *slot_node);

/*
 * The pack update by lookup: out[row] += value[tree_roots[t] + leaf(row, t)]
 * for t = 0 .. pack_size-1 in order (the leaves recorded by pbc_route_rows),
 * the same additions in the same order as the CPU (bit-identical). value has
 * n_nodes entries; out (n_rows,) is read and written, or NULL: the device's
 * raw predictions of pbc_device_round_setup are, in place (no copy of rows).
 */
int pbc_add_leaf_values(pbc_context *context, int64_t n_nodes, const double *value,
                        const int64_t *tree_roots, double *out);

/*
 * node_of_row (n_rows, pack_size) int32 to the host, and back from it: the
 * categorical splits (packboost/backends/cuda.py) sum their per-era category
 * cells and move the rows of category-set splits on the host, between the
 * device's route_rows and the next depth (docs/cuda-kernels.md).
 */
int pbc_read_node_of_row(pbc_context *context, int32_t *node_of_row);
int pbc_write_node_of_row(pbc_context *context, const int32_t *node_of_row);

/* Raw-value prediction (no context). X is row-major (n_rows, n_features),
   copied to the device once for every output: the trees are grouped by
   output, output o's being tree_roots[output_tree_starts[o]] ..
   tree_roots[output_tree_starts[o + 1] - 1] (output_tree_starts: n_outputs
   + 1 entries from 0 to n_trees, non-decreasing); out is (n_rows, n_outputs)
   row-major, and each (row, output) adds the sum of its trees, taken in
   order. */
#define PBC_DTYPE_FLOAT64 0
#define PBC_DTYPE_FLOAT32 1
#define PBC_DTYPE_INT8 2
#define PBC_DTYPE_UINT8 3
int pbc_predict_raw(int device, const void *X, int dtype, int64_t n_rows, int64_t n_features,
                    int64_t n_nodes, const int32_t *feature, const double *threshold,
                    const uint8_t *missing_left, const int32_t *left_child,
                    const int32_t *right_child, const double *value, int64_t n_trees,
                    const int64_t *tree_roots, int64_t n_outputs,
                    const int64_t *output_tree_starts, double *out);

/* Raw rows kept on the device for repeated prediction: a fit's eval sets,
   whose rows each round's pack walks (docs/cuda-kernels.md §7). create
   copies X (as pbc_predict_raw takes it) to device `device` once; predict
   adds the trees to out as pbc_predict_raw does, with only the trees'
   arrays sent; destroy frees the copy (NULL: nothing). pbc_predict_raw is
   create, predict, destroy. */
typedef struct pbc_rows pbc_rows;
int pbc_rows_create(int device, const void *X, int dtype, int64_t n_rows, int64_t n_features,
                    pbc_rows **rows);
int pbc_rows_predict(pbc_rows *rows, int64_t n_nodes, const int32_t *feature,
                     const double *threshold, const uint8_t *missing_left,
                     const int32_t *left_child, const int32_t *right_child,
                     const double *value, int64_t n_trees, const int64_t *tree_roots,
                     int64_t n_outputs, const int64_t *output_tree_starts, double *out);
int pbc_rows_destroy(pbc_rows *rows);

#ifdef __cplusplus
}
#endif

#endif /* PACKBOOST_CUDA_H */
