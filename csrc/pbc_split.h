/*
 * pbc_split.h -- scoring one (slot, feature) tile of the CUDA backend from its
 * fixed-point per-era histogram (docs/des.md, docs/cuda-kernels.md §5.3), in pieces that compile as
 * C (host) and CUDA (__host__ __device__).
 *
 * On the GPU one warp scores one tile: lane l owns eras l, l + 32, l + 64, ...
 * and every quantity summed over eras is a per-lane partial followed by a
 * butterfly all-reduce (__shfl_xor_sync with offsets 16, 8, 4, 2, 1). The
 * butterfly leaves bit-identical values on every lane (x + y == y + x), so all
 * lanes take the same branches and lane 0 writes the result.
 *
 * The per-lane pieces live here once; cuda/split.cu runs them with shuffles,
 * and pbc_score_tile_host() below runs them lane by lane with the same
 * butterfly order, so the host gives the GPU's numbers (up to tanh's last bit;
 * the library is built with --fmad=false so no multiply-add is contracted).
 * tests/oracles/_cuda_emulate.pyx exposes that host version: the tests of a
 * machine without a GPU check the GPU's scoring against the CPU engine with
 * it.
 *
 * A tile's histogram: cell (era, bin) at cells[era * era_stride + bin], bins
 * 0 .. n_bins-1 then the missing bin n_bins; sums of g * scale_g, h * scale_h
 * (int64) and row counts. pbc_lane_totals() first turns the non-missing bins
 * of the lane's eras into prefix sums in place, so the left side of threshold
 * t in era e is the single cell (e, t).
 *
 * The candidate sweep, the constraints, the tie breaks and the DES math are
 * those of score_tile in packboost/_split.pyx (and des.h does the math): t =
 * 0 .. n_bins-1, missing left then right; missing-right is skipped without
 * missing rows, missing-left with nothing else on the left; a candidate
 * replaces the best only with a strictly larger score.
 */
#ifndef PACKBOOST_PBC_SPLIT_H
#define PACKBOOST_PBC_SPLIT_H

#include <math.h>
#include <stdint.h>

#include "des.h"
#include "split_params.h"

#ifdef __CUDACC__
#define PBC_FN static __host__ __device__ __forceinline__
#else
#define PBC_FN static inline
#endif

#define PBC_WARP_LANES 32

/* One histogram cell: fixed-point sums and a row count. */
typedef struct {
    long long sum_g;
    long long sum_h;
    long long count;
} pbc_cell;

/* Sums over a tile's eras (pooled: exact integers); present and
   rows_squared (eras with rows, sum of their squared row counts) give the era
   weights' totals (des_weight_total, des_weight_squares), largest_rows (a
   maximum) the bound of the direction votes. The era-weighted sums (reals)
   are set after the warp's sums (pbc_weigh_totals): with count weights they
   are on grids of exponents w_exponent_g, w_exponent_h. */
typedef struct {
    long long g, h, count, missing_g, missing_h, missing_count, present, rows_squared;
    long long largest_rows;
    double w_g, w_h, w_missing_g, w_missing_h;
    int w_exponent_g, w_exponent_h;
} pbc_totals;

/* Sums of the non-missing bins <= t over a tile's eras; with count weights
   the era-weighted ones in steps of the tile's grids (pbc_totals). */
typedef struct {
    long long g, h, count, w_g, w_h;
} pbc_left;

/* Count weights: a tile's largest |w_e x| (x: an era's left sum at any
   threshold, its total or its missing bin), gradients and hessians. */
typedef struct {
    double g, h;
} pbc_weighted_max;

/* Count weights: a lane's era-weighted totals, in steps of the tile's grids. */
typedef struct {
    long long g, h, missing_g, missing_h;
} pbc_weighted_steps;

/* Best candidate of a tile. */
typedef struct {
    double score;
    double gain;
    int32_t threshold;
    int32_t missing_left;
    int32_t found;
} pbc_best;

/* Real-valued sums of one era, its left side, for a candidate. */
typedef struct {
    double g, h, count, left_g, left_h, left_count;
} pbc_era_sums;

PBC_FN double pbc_era_weight(const pb_split_params *params, long long count)
{
    return params->era_weighting == PB_ERA_WEIGHTING_COUNT ? params->era_alpha + (double)count : 1.0;
}

PBC_FN void pbc_totals_zero(pbc_totals *t)
{
    t->g = t->h = t->count = t->missing_g = t->missing_h = t->missing_count = 0;
    t->present = t->rows_squared = t->largest_rows = 0;
    t->w_g = t->w_h = t->w_missing_g = t->w_missing_h = 0.0;
    t->w_exponent_g = t->w_exponent_h = DES_GRID_MIN_EXPONENT;
}

PBC_FN pbc_totals pbc_totals_add(pbc_totals a, pbc_totals b)
{
    a.g += b.g; a.h += b.h; a.count += b.count;
    a.missing_g += b.missing_g; a.missing_h += b.missing_h;
    a.missing_count += b.missing_count;
    a.present += b.present; a.rows_squared += b.rows_squared;
    a.largest_rows = a.largest_rows > b.largest_rows ? a.largest_rows : b.largest_rows;
    return a;
}

PBC_FN pbc_left pbc_left_add(pbc_left a, pbc_left b)
{
    a.g += b.g; a.h += b.h; a.count += b.count;
    a.w_g += b.w_g; a.w_h += b.w_h;
    return a;
}

/* The largest of two maxima (exact, commutative: the butterfly's order is moot). */
PBC_FN double pbc_double_max(double a, double b)
{
    return a > b ? a : b;
}

PBC_FN des_era_terms_t pbc_terms_max(des_era_terms_t a, des_era_terms_t b)
{
    a.square = pbc_double_max(a.square, b.square);
    a.noise = pbc_double_max(a.noise, b.noise);
    a.direction = pbc_double_max(a.direction, b.direction);
    return a;
}

PBC_FN long long pbc_steps_add(long long a, long long b)
{
    return a + b;
}

PBC_FN des_grid_sums_t pbc_grid_sums_add(des_grid_sums_t a, des_grid_sums_t b)
{
    a.square += b.square;
    a.noise += b.noise;
    a.direction += b.direction;
    return a;
}

/* The grids of a tile's candidate from its largest terms (csrc/des.h des_grid_of). */
PBC_FN des_grid_t pbc_grid_of(const pb_split_params *params, const pbc_totals *totals,
                              const des_era_terms_t *largest)
{
    return des_grid_of(largest,
                       des_era_weight_bound(params->era_weighting == PB_ERA_WEIGHTING_COUNT,
                                            (double)totals->largest_rows, params->era_alpha),
                       (double)totals->present);
}

/* The era weights' totals of a tile (csrc/des.h; exact in any order). */
PBC_FN double pbc_weight_total(const pb_split_params *params, const pbc_totals *totals)
{
    return des_weight_total(params->era_weighting == PB_ERA_WEIGHTING_COUNT,
                            (double)totals->present, (double)totals->count, params->era_alpha);
}

PBC_FN double pbc_weight_squares(const pb_split_params *params, const pbc_totals *totals)
{
    return des_weight_squares(params->era_weighting == PB_ERA_WEIGHTING_COUNT,
                              (double)totals->present, (double)totals->count,
                              (double)totals->rows_squared, params->era_alpha);
}

/*
 * Lane's share of the tile totals; turns its eras' non-missing bins into
 * prefix sums in place (call once per tile).
 */
PBC_FN pbc_totals pbc_lane_totals(pbc_cell *cells, long long era_stride, int n_eras,
                                  int n_bins, const pb_split_params *params,
                                  double inv_scale_g, double inv_scale_h,
                                  int lane, int n_lanes)
{
    pbc_totals totals;
    int era, bin;
    pbc_totals_zero(&totals);
    for (era = lane; era < n_eras; era += n_lanes) {
        pbc_cell *row = cells + era * era_stride;
        long long g = 0, h = 0, c = 0;
        for (bin = 0; bin < n_bins; ++bin) {
            g += row[bin].sum_g;
            h += row[bin].sum_h;
            c += row[bin].count;
            row[bin].sum_g = g;
            row[bin].sum_h = h;
            row[bin].count = c;
        }
        c += row[n_bins].count;
        if (c == 0)
            continue;
        g += row[n_bins].sum_g;
        h += row[n_bins].sum_h;
        totals.g += g;
        totals.h += h;
        totals.count += c;
        totals.missing_g += row[n_bins].sum_g;
        totals.missing_h += row[n_bins].sum_h;
        totals.missing_count += row[n_bins].count;
        totals.present += 1;
        totals.rows_squared += c * c;
        if (c > totals.largest_rows)
            totals.largest_rows = c;
    }
    return totals;
}

/* Era total count of a prefix-scanned era row. */
PBC_FN long long pbc_era_count(const pbc_cell *row, int n_bins)
{
    return row[n_bins - 1].count + row[n_bins].count;
}

/* Lane's share of the left sums (non-missing bins <= threshold). */
PBC_FN pbc_left pbc_lane_left(const pbc_cell *cells, long long era_stride, int n_eras,
                              int n_bins, int threshold, const pb_split_params *params,
                              const pbc_totals *totals, double inv_scale_g,
                              double inv_scale_h, int lane, int n_lanes)
{
    pbc_left left;
    int era;
    const int weighted = params->era_weighting == PB_ERA_WEIGHTING_COUNT;
    const double inverse_g = des_grid_inverse_step(totals->w_exponent_g);
    const double inverse_h = des_grid_inverse_step(totals->w_exponent_h);
    left.g = left.h = left.count = left.w_g = left.w_h = 0;
    for (era = lane; era < n_eras; era += n_lanes) {
        const pbc_cell *row = cells + era * era_stride;
        long long c = pbc_era_count(row, n_bins);
        double w;
        if (c == 0)
            continue;
        left.g += row[threshold].sum_g;
        left.h += row[threshold].sum_h;
        left.count += row[threshold].count;
        if (weighted) {
            w = pbc_era_weight(params, c);
            left.w_g += des_to_grid(w * ((double)row[threshold].sum_g * inv_scale_g), inverse_g);
            left.w_h += des_to_grid(w * ((double)row[threshold].sum_h * inv_scale_h), inverse_h);
        }
    }
    return left;
}

/* Count weights: the lane's largest |w_e x| over its eras (pbc_weighted_max). */
PBC_FN pbc_weighted_max pbc_lane_weighted_max(const pbc_cell *cells, long long era_stride,
                                              int n_eras, int n_bins,
                                              const pb_split_params *params,
                                              double inv_scale_g, double inv_scale_h,
                                              int lane, int n_lanes)
{
    pbc_weighted_max largest = {0.0, 0.0};
    int era, bin;
    for (era = lane; era < n_eras; era += n_lanes) {
        const pbc_cell *row = cells + era * era_stride;
        long long c = pbc_era_count(row, n_bins);
        double w;
        if (c == 0)
            continue;
        w = pbc_era_weight(params, c);
        for (bin = 0; bin < n_bins; ++bin) {
            largest.g = pbc_double_max(largest.g, fabs(w * ((double)row[bin].sum_g * inv_scale_g)));
            largest.h = pbc_double_max(largest.h, fabs(w * ((double)row[bin].sum_h * inv_scale_h)));
        }
        largest.g = pbc_double_max(largest.g, fabs(w * ((double)row[n_bins].sum_g * inv_scale_g)));
        largest.h = pbc_double_max(largest.h, fabs(w * ((double)row[n_bins].sum_h * inv_scale_h)));
        largest.g = pbc_double_max(largest.g, fabs(w * ((double)(row[n_bins - 1].sum_g
                                                                  + row[n_bins].sum_g)
                                                         * inv_scale_g)));
        largest.h = pbc_double_max(largest.h, fabs(w * ((double)(row[n_bins - 1].sum_h
                                                                  + row[n_bins].sum_h)
                                                         * inv_scale_h)));
    }
    return largest;
}

PBC_FN pbc_weighted_max pbc_weighted_max_of(pbc_weighted_max a, pbc_weighted_max b)
{
    a.g = pbc_double_max(a.g, b.g);
    a.h = pbc_double_max(a.h, b.h);
    return a;
}

/* Count weights: the lane's era-weighted totals in steps of the tile's grids. */
PBC_FN pbc_weighted_steps pbc_lane_weighted_totals(const pbc_cell *cells, long long era_stride,
                                                   int n_eras, int n_bins,
                                                   const pb_split_params *params,
                                                   double inv_scale_g, double inv_scale_h,
                                                   const pbc_totals *totals, int lane,
                                                   int n_lanes)
{
    pbc_weighted_steps steps = {0, 0, 0, 0};
    const double inverse_g = des_grid_inverse_step(totals->w_exponent_g);
    const double inverse_h = des_grid_inverse_step(totals->w_exponent_h);
    int era;
    for (era = lane; era < n_eras; era += n_lanes) {
        const pbc_cell *row = cells + era * era_stride;
        long long c = pbc_era_count(row, n_bins);
        double w;
        if (c == 0)
            continue;
        w = pbc_era_weight(params, c);
        steps.g += des_to_grid(w * ((double)(row[n_bins - 1].sum_g + row[n_bins].sum_g)
                                    * inv_scale_g), inverse_g);
        steps.h += des_to_grid(w * ((double)(row[n_bins - 1].sum_h + row[n_bins].sum_h)
                                    * inv_scale_h), inverse_h);
        steps.missing_g += des_to_grid(w * ((double)row[n_bins].sum_g * inv_scale_g), inverse_g);
        steps.missing_h += des_to_grid(w * ((double)row[n_bins].sum_h * inv_scale_h), inverse_h);
    }
    return steps;
}

PBC_FN pbc_weighted_steps pbc_weighted_steps_add(pbc_weighted_steps a, pbc_weighted_steps b)
{
    a.g += b.g;
    a.h += b.h;
    a.missing_g += b.missing_g;
    a.missing_h += b.missing_h;
    return a;
}

/* Equal weights: the era-weighted sums are the pooled ones (exact). */
PBC_FN void pbc_totals_equal_weights(pbc_totals *totals, double inv_scale_g,
                                     double inv_scale_h)
{
    totals->w_g = (double)totals->g * inv_scale_g;
    totals->w_h = (double)totals->h * inv_scale_h;
    totals->w_missing_g = (double)totals->missing_g * inv_scale_g;
    totals->w_missing_h = (double)totals->missing_h * inv_scale_h;
}

/* Count weights: the grids of a tile's era-weighted sums from their largest terms. */
PBC_FN void pbc_totals_weigh(pbc_totals *totals, const pbc_weighted_max *largest)
{
    totals->w_exponent_g = des_grid_exponent(largest->g, (double)totals->present);
    totals->w_exponent_h = des_grid_exponent(largest->h, (double)totals->present);
}

/* Count weights: the era-weighted totals from their steps. */
PBC_FN void pbc_totals_weighted(pbc_totals *totals, const pbc_weighted_steps *steps)
{
    totals->w_g = des_from_grid(steps->g, totals->w_exponent_g);
    totals->w_h = des_from_grid(steps->h, totals->w_exponent_h);
    totals->w_missing_g = des_from_grid(steps->missing_g, totals->w_exponent_g);
    totals->w_missing_h = des_from_grid(steps->missing_h, totals->w_exponent_h);
}

/* Era e's sums for candidate (threshold, missing side), in real units. */
PBC_FN pbc_era_sums pbc_era_candidate(const pbc_cell *row, int n_bins, int threshold,
                                      int missing_left, double inv_scale_g,
                                      double inv_scale_h)
{
    pbc_era_sums s;
    const pbc_cell *last = row + (n_bins - 1), *missing = row + n_bins, *cut = row + threshold;
    long long left_g = cut->sum_g, left_h = cut->sum_h, left_c = cut->count;
    if (missing_left) {
        left_g += missing->sum_g;
        left_h += missing->sum_h;
        left_c += missing->count;
    }
    s.g = (double)(last->sum_g + missing->sum_g) * inv_scale_g;
    s.h = (double)(last->sum_h + missing->sum_h) * inv_scale_h;
    s.count = (double)(last->count + missing->count);
    s.left_g = (double)left_g * inv_scale_g;
    s.left_h = (double)left_h * inv_scale_h;
    s.left_count = (double)left_c;
    return s;
}

/* Era e's newton-gain term w_e gain_e of a candidate (0 for an era without rows). */
PBC_FN double pbc_era_gain_term(const des_candidate_t *state, const pbc_cell *row, int n_bins,
                                int threshold, int missing_left,
                                const pb_split_params *params, double inv_scale_g,
                                double inv_scale_h)
{
    long long c = pbc_era_count(row, n_bins);
    pbc_era_sums s;
    if (c == 0)
        return 0.0;
    s = pbc_era_candidate(row, n_bins, threshold, missing_left, inv_scale_g, inv_scale_h);
    return pbc_era_weight(params, c) * des_era_gain(state, s.g, s.h, s.left_g, s.left_h);
}

/* Lane's largest |w_e gain_e| (newton era gains: the grid of their sum). */
PBC_FN double pbc_lane_gain_max(const des_candidate_t *state, const pbc_cell *cells,
                                long long era_stride, int n_eras, int n_bins, int threshold,
                                int missing_left, const pb_split_params *params,
                                double inv_scale_g, double inv_scale_h, int lane, int n_lanes)
{
    double largest = 0.0;
    int era;
    for (era = lane; era < n_eras; era += n_lanes)
        largest = pbc_double_max(largest, fabs(pbc_era_gain_term(
            state, cells + era * era_stride, n_bins, threshold, missing_left, params,
            inv_scale_g, inv_scale_h)));
    return largest;
}

/* Lane's share of sum_e w_e gain_e, in steps of the grid 2^exponent. */
PBC_FN long long pbc_lane_gain_steps(const des_candidate_t *state, const pbc_cell *cells,
                                     long long era_stride, int n_eras, int n_bins,
                                     int threshold, int missing_left,
                                     const pb_split_params *params, double inv_scale_g,
                                     double inv_scale_h, int exponent, int lane, int n_lanes)
{
    double inverse_step = des_grid_inverse_step(exponent);
    long long steps = 0;
    int era;
    for (era = lane; era < n_eras; era += n_lanes)
        steps += des_to_grid(pbc_era_gain_term(state, cells + era * era_stride, n_bins,
                                               threshold, missing_left, params, inv_scale_g,
                                               inv_scale_h),
                             inverse_step);
    return steps;
}

/* Era e's terms of a begun candidate's pass (the vote with_vote); *present = 0
   for an era without rows. */
PBC_FN des_era_terms_t pbc_era_terms(const des_candidate_t *state, const pbc_cell *row,
                                     int n_bins, int threshold, int missing_left,
                                     const pb_split_params *params, double inv_scale_g,
                                     double inv_scale_h, int with_vote, int *present)
{
    des_era_terms_t terms = {0.0, 0.0, 0.0};
    long long c = pbc_era_count(row, n_bins);
    pbc_era_sums s;
    *present = c != 0;
    if (c == 0)
        return terms;
    s = pbc_era_candidate(row, n_bins, threshold, missing_left, inv_scale_g, inv_scale_h);
    return des_candidate_era_terms(state, pbc_era_weight(params, c), s.g, s.h, s.left_g,
                                   s.left_h, s.left_count, s.count - s.left_count, with_vote);
}

/* Lane's largest |square| and |noise| terms of the era pass (their grids:
   des_grid_of; the votes need no maximum, so none is computed here). */
PBC_FN des_era_terms_t pbc_lane_terms_max(const des_candidate_t *state, const pbc_cell *cells,
                                          long long era_stride, int n_eras, int n_bins,
                                          int threshold, int missing_left,
                                          const pb_split_params *params, double inv_scale_g,
                                          double inv_scale_h, int lane, int n_lanes)
{
    des_era_terms_t largest = {0.0, 0.0, 0.0};
    int era, present;
    for (era = lane; era < n_eras; era += n_lanes) {
        des_era_terms_t terms = pbc_era_terms(state, cells + era * era_stride, n_bins,
                                              threshold, missing_left, params, inv_scale_g,
                                              inv_scale_h, 0, &present);
        if (present)
            des_terms_max(&largest, &terms);
    }
    return largest;
}

/* Lane's share of the era pass's sums, in steps of their grids. The terms are
   computed again rather than kept: a lane's eras are not bounded in number. */
PBC_FN des_grid_sums_t pbc_lane_grid_sums(const des_candidate_t *state, const pbc_cell *cells,
                                          long long era_stride, int n_eras, int n_bins,
                                          int threshold, int missing_left,
                                          const pb_split_params *params, double inv_scale_g,
                                          double inv_scale_h, const des_grid_t *grid,
                                          int lane, int n_lanes)
{
    des_grid_sums_t sums = {0, 0, 0};
    double inverse_square = des_grid_inverse_step(grid->square);
    double inverse_noise = des_grid_inverse_step(grid->noise);
    double inverse_direction = des_grid_inverse_step(grid->direction);
    int era, present;
    for (era = lane; era < n_eras; era += n_lanes) {
        des_era_terms_t terms = pbc_era_terms(state, cells + era * era_stride, n_bins,
                                              threshold, missing_left, params, inv_scale_g,
                                              inv_scale_h, 1, &present);
        if (present)
            des_grid_add(&sums, &terms, inverse_square, inverse_noise, inverse_direction);
    }
    return sums;
}

/* Does the tile's era pass run at all (DES needs it for std, direction, newton)? */
PBC_FN int pbc_needs_pass(const pb_split_params *params)
{
    return params->lambda_dro != 0.0 || params->lambda_dir != 0.0
        || params->era_gain == DES_ERA_GAIN_NEWTON;
}

/* Real-valued pooled sums of a candidate and whether it is scored at all. */
typedef struct {
    double sum_g, sum_h, left_g, left_h, left_w_g, left_w_h;
    int scored;
} pbc_candidate;

PBC_FN pbc_candidate pbc_candidate_sums(const pbc_totals *totals, const pbc_left *left,
                                        int missing_left, const pb_split_params *params,
                                        double inv_scale_g, double inv_scale_h)
{
    pbc_candidate cand;
    long long left_g = left->g, left_h = left->h, left_count = left->count;
    /* era-weighted left sums: pooled (equal weights) or on the tile's grids */
    double w_g = params->era_weighting == PB_ERA_WEIGHTING_COUNT
               ? des_from_grid(left->w_g, totals->w_exponent_g) : (double)left->g * inv_scale_g;
    double w_h = params->era_weighting == PB_ERA_WEIGHTING_COUNT
               ? des_from_grid(left->w_h, totals->w_exponent_h) : (double)left->h * inv_scale_h;
    cand.scored = 0;
    cand.sum_g = (double)totals->g * inv_scale_g;
    cand.sum_h = (double)totals->h * inv_scale_h;
    cand.left_g = cand.left_h = cand.left_w_g = cand.left_w_h = 0.0;
    if (!missing_left && totals->missing_count == 0)
        return cand;  /* same partition as missing-left, which wins the tie */
    if (missing_left && left->count == 0)
        return cand;  /* {missing} | {values}: scored as missing-right at the last t */
    if (missing_left) {
        left_g += totals->missing_g;
        left_h += totals->missing_h;
        left_count += totals->missing_count;
        w_g += totals->w_missing_g;
        w_h += totals->w_missing_h;
    }
    cand.left_g = (double)left_g * inv_scale_g;
    cand.left_h = (double)left_h * inv_scale_h;
    cand.left_w_g = w_g;
    cand.left_w_h = w_h;
    if ((double)left_count < params->min_samples_leaf
            || (double)(totals->count - left_count) < params->min_samples_leaf
            || cand.left_h < params->min_child_weight
            || cand.sum_h - cand.left_h < params->min_child_weight)
        return cand;
    cand.scored = 1;
    return cand;
}

PBC_FN void pbc_candidate_start(des_candidate_t *state, const pbc_candidate *cand,
                                const pb_split_params *params)
{
    des_candidate_begin(state, cand->sum_g, cand->sum_h, cand->left_g, cand->left_h,
                        params->reg_lambda, params->reg_alpha, params->era_gain,
                        params->dir_tanh_scale,
                        params->lambda_dir != 0.0);
}

/* After the mean, as score_tile does: the node's noise for era_std = "between". */
PBC_FN void pbc_candidate_noise(des_candidate_t *state, const pb_split_params *params,
                                double gradient_variance)
{
    if (params->era_std_between)
        des_candidate_set_noise(state, gradient_variance);
}

/* Close a candidate and keep it if strictly better (first maximum wins ties);
   sums and grid: its era pass (NULL: none ran). */
PBC_FN void pbc_candidate_close(pbc_best *best, des_candidate_t *state,
                                const pbc_candidate *cand, const pbc_totals *totals,
                                const des_grid_sums_t *sums, const des_grid_t *grid,
                                const pb_split_params *params, int threshold,
                                int missing_left)
{
    des_result_t result;
    if (sums != NULL)
        des_candidate_set_sums(state, pbc_weight_total(params, totals),
                               pbc_weight_squares(params, totals), sums, grid);
    result = des_candidate_finish(state, params->lambda_dro, params->lambda_dir);
    if (result.score > best->score) {
        best->found = 1;
        best->score = result.score;
        best->gain = des_pooled_gain(cand->sum_g, cand->sum_h, cand->left_g, cand->left_h,
                                     params->reg_lambda, params->reg_alpha);
        best->threshold = threshold;
        best->missing_left = missing_left;
    }
}

PBC_FN pbc_best pbc_best_none(void)
{
    pbc_best best;
    best.score = -INFINITY;
    best.gain = 0.0;
    best.threshold = 0;
    best.missing_left = 0;
    best.found = 0;
    return best;
}

#ifndef __CUDACC__
/*
 * The warp's algorithm run on the host, lane by lane, with the same butterfly
 * order as __shfl_xor_sync (offsets 16 .. 1). Reference for the GPU kernel.
 */
#define PBC_BUTTERFLY(TYPE, ADD, values)                                     \
    do {                                                                     \
        TYPE butterfly_tmp_[PBC_WARP_LANES];                                 \
        int butterfly_offset_, butterfly_lane_;                              \
        for (butterfly_offset_ = PBC_WARP_LANES / 2; butterfly_offset_ >= 1; \
             butterfly_offset_ >>= 1) {                                      \
            for (butterfly_lane_ = 0; butterfly_lane_ < PBC_WARP_LANES;      \
                 ++butterfly_lane_)                                          \
                butterfly_tmp_[butterfly_lane_] = ADD(                       \
                    (values)[butterfly_lane_],                               \
                    (values)[butterfly_lane_ ^ butterfly_offset_]);          \
            for (butterfly_lane_ = 0; butterfly_lane_ < PBC_WARP_LANES;      \
                 ++butterfly_lane_)                                          \
                (values)[butterfly_lane_] = butterfly_tmp_[butterfly_lane_]; \
        }                                                                    \
    } while (0)

static pbc_best pbc_score_tile_host(pbc_cell *cells, long long era_stride, int n_eras,
                                    int n_bins, const pb_split_params *params,
                                    double gradient_variance, double inv_scale_g,
                                    double inv_scale_h)
{
    pbc_best best = pbc_best_none();
    pbc_totals totals[PBC_WARP_LANES];
    pbc_left left[PBC_WARP_LANES];
    des_era_terms_t largest[PBC_WARP_LANES];
    des_grid_sums_t sums[PBC_WARP_LANES];
    double gain_max[PBC_WARP_LANES];
    long long gain_steps[PBC_WARP_LANES];
    int lane, threshold, side, needs_pass = pbc_needs_pass(params);
    if (n_bins < 1 || n_eras < 1)
        return best;
    for (lane = 0; lane < PBC_WARP_LANES; ++lane)
        totals[lane] = pbc_lane_totals(cells, era_stride, n_eras, n_bins, params,
                                       inv_scale_g, inv_scale_h, lane, PBC_WARP_LANES);
    PBC_BUTTERFLY(pbc_totals, pbc_totals_add, totals);
    if (totals[0].count == 0)
        return best;
    if (params->era_weighting == PB_ERA_WEIGHTING_COUNT) {
        pbc_weighted_max largest[PBC_WARP_LANES];
        pbc_weighted_steps steps[PBC_WARP_LANES];
        for (lane = 0; lane < PBC_WARP_LANES; ++lane)
            largest[lane] = pbc_lane_weighted_max(cells, era_stride, n_eras, n_bins, params,
                                                  inv_scale_g, inv_scale_h, lane,
                                                  PBC_WARP_LANES);
        PBC_BUTTERFLY(pbc_weighted_max, pbc_weighted_max_of, largest);
        pbc_totals_weigh(&totals[0], &largest[0]);
        for (lane = 0; lane < PBC_WARP_LANES; ++lane)
            steps[lane] = pbc_lane_weighted_totals(cells, era_stride, n_eras, n_bins, params,
                                                   inv_scale_g, inv_scale_h, &totals[0], lane,
                                                   PBC_WARP_LANES);
        PBC_BUTTERFLY(pbc_weighted_steps, pbc_weighted_steps_add, steps);
        pbc_totals_weighted(&totals[0], &steps[0]);
    } else {
        pbc_totals_equal_weights(&totals[0], inv_scale_g, inv_scale_h);
    }
    for (threshold = 0; threshold < n_bins; ++threshold) {
        for (lane = 0; lane < PBC_WARP_LANES; ++lane)
            left[lane] = pbc_lane_left(cells, era_stride, n_eras, n_bins, threshold, params,
                                       &totals[0], inv_scale_g, inv_scale_h, lane,
                                       PBC_WARP_LANES);
        PBC_BUTTERFLY(pbc_left, pbc_left_add, left);
        for (side = 0; side < 2; ++side) {
            int missing_left = side == 0;
            des_candidate_t state;
            des_grid_t grid;
            double mean;
            pbc_candidate cand = pbc_candidate_sums(&totals[0], &left[0], missing_left,
                                                    params, inv_scale_g, inv_scale_h);
            if (!cand.scored)
                continue;
            pbc_candidate_start(&state, &cand, params);
            if (params->era_gain == DES_ERA_GAIN_NEWTON) {
                int exponent;
                for (lane = 0; lane < PBC_WARP_LANES; ++lane)
                    gain_max[lane] = pbc_lane_gain_max(&state, cells, era_stride, n_eras,
                                                       n_bins, threshold, missing_left, params,
                                                       inv_scale_g, inv_scale_h, lane,
                                                       PBC_WARP_LANES);
                PBC_BUTTERFLY(double, pbc_double_max, gain_max);
                exponent = des_grid_exponent(gain_max[0], (double)totals[0].present);
                for (lane = 0; lane < PBC_WARP_LANES; ++lane)
                    gain_steps[lane] = pbc_lane_gain_steps(&state, cells, era_stride, n_eras,
                                                           n_bins, threshold, missing_left,
                                                           params, inv_scale_g, inv_scale_h,
                                                           exponent, lane, PBC_WARP_LANES);
                PBC_BUTTERFLY(long long, pbc_steps_add, gain_steps);
                mean = des_from_grid(gain_steps[0], exponent)
                     / pbc_weight_total(params, &totals[0]);
            } else {
                mean = des_realized_mean(&state, totals[0].w_g, totals[0].w_h, cand.left_w_g,
                                         cand.left_w_h, pbc_weight_total(params, &totals[0]));
            }
            des_candidate_set_mean(&state, mean);
            pbc_candidate_noise(&state, params, gradient_variance);
            if (needs_pass) {
                for (lane = 0; lane < PBC_WARP_LANES; ++lane)
                    largest[lane] = pbc_lane_terms_max(&state, cells, era_stride, n_eras,
                                                       n_bins, threshold, missing_left, params,
                                                       inv_scale_g, inv_scale_h, lane,
                                                       PBC_WARP_LANES);
                PBC_BUTTERFLY(des_era_terms_t, pbc_terms_max, largest);
                grid = pbc_grid_of(params, &totals[0], &largest[0]);
                for (lane = 0; lane < PBC_WARP_LANES; ++lane)
                    sums[lane] = pbc_lane_grid_sums(&state, cells, era_stride, n_eras, n_bins,
                                                    threshold, missing_left, params,
                                                    inv_scale_g, inv_scale_h, &grid, lane,
                                                    PBC_WARP_LANES);
                PBC_BUTTERFLY(des_grid_sums_t, pbc_grid_sums_add, sums);
                pbc_candidate_close(&best, &state, &cand, &totals[0], &sums[0], &grid, params,
                                    threshold, missing_left);
            } else {
                pbc_candidate_close(&best, &state, &cand, &totals[0], NULL, NULL, params,
                                    threshold, missing_left);
            }
        }
    }
    return best;
}
#endif /* !__CUDACC__ */

#endif /* PACKBOOST_PBC_SPLIT_H */
