/*
 * des.h -- the math of Directional Era Splitting (DESIGN.md section 1), once,
 * for every backend.
 *
 * This header compiles as C (the Cython CPU kernels include it), as C++ and as
 * CUDA (under nvcc every function becomes __host__ __device__), so that the CPU
 * and GPU backends score a candidate split with literally the same code.
 *
 * Vocabulary (all sums are float64, already multiplied by sample weights):
 *   G, H        pooled gradient / hessian sums of the node
 *   G_L, H_L    pooled sums of the left child (right = node - left)
 *   G_e, H_e    era e's sums in the node; G_eL, H_eL era e's sums in the left child
 *   lambda      reg_lambda (L2 regularisation of leaf values)
 *
 * Scoring a candidate is a single pass over the eras of the node:
 *   des_candidate_begin()  -> pooled values, direction sign
 *   des_candidate_push()   once per era with rows in the node
 *   des_candidate_finish() -> DES score, mean, std, direction
 * The mean and variance of the per-era gains are accumulated with weighted
 * Welford updates (West 1979), which stay accurate when the gains share a
 * large common offset -- a two-pass formula would need the eras twice, the
 * naive E[x^2] - E[x]^2 formula cancels catastrophically.
 */
#ifndef PACKBOOST_DES_H
#define PACKBOOST_DES_H

#include <math.h>

#ifdef __CUDACC__
#define DES_FN static __host__ __device__ __forceinline__
#else
#define DES_FN static inline
#endif

/* era_gain values (DESIGN 1): keep in sync with packboost/_types.pxd */
#define DES_ERA_GAIN_REALIZED 0
#define DES_ERA_GAIN_NEWTON 1

/* phi(G, H) = 0.5 G^2 / (H + lambda): the loss reduction of a Newton leaf. */
DES_FN double des_phi(double sum_g, double sum_h, double reg_lambda)
{
    double denom = sum_h + reg_lambda;
    return denom > 0.0 ? 0.5 * sum_g * sum_g / denom : 0.0;
}

/* v = -G / (H + lambda): the Newton leaf value. */
DES_FN double des_leaf_value(double sum_g, double sum_h, double reg_lambda)
{
    double denom = sum_h + reg_lambda;
    return denom > 0.0 ? -sum_g / denom : 0.0;
}

/* Pooled Newton gain of a split: phi(L) + phi(R) - phi(node). */
DES_FN double des_pooled_gain(double sum_g, double sum_h,
                              double left_g, double left_h, double reg_lambda)
{
    return des_phi(left_g, left_h, reg_lambda)
         + des_phi(sum_g - left_g, sum_h - left_h, reg_lambda)
         - des_phi(sum_g, sum_h, reg_lambda);
}

/*
 * Era e's loss term on a side s with pooled sums (G_s, H_s) and value v_s:
 *   l_e(s) = G_es v_s + 0.5 H_es (1 + lambda / H_s) v_s^2
 * Summed over eras it gives G_s v_s + 0.5 (H_s + lambda) v_s^2 = -phi(G_s, H_s),
 * so the per-era realized gains add up to the pooled gain exactly.
 * A side with H_s = 0 has H_es = 0 for every era; its term is then 0.
 */
DES_FN double des_realized_era_loss(double era_g, double era_h,
                                    double side_h, double side_value,
                                    double reg_lambda)
{
    double curvature = side_h > 0.0 ? era_h * (1.0 + reg_lambda / side_h) : 0.0;
    return era_g * side_value + 0.5 * curvature * side_value * side_value;
}

/* Running state of one candidate's pass over the eras. */
typedef struct {
    /* pooled quantities fixed for the candidate */
    double sum_g, sum_h, left_g, left_h;
    double value_node, value_left, value_right;
    double direction_sign;      /* d = sign(v_L - v_R) */
    double direction_inv_scale; /* 1 / (s |v_L - v_R|), 0 when s = 0 */
    double reg_lambda;
    int era_gain;
    /* weighted Welford accumulators over eras */
    double weight_total;
    double mean;
    double m2;
    double direction; /* sum_e w_e d f(delta_e) */
} des_candidate_t;

/* Result of one candidate. */
typedef struct {
    double score;  /* DES = mu - lambda_dro sigma + lambda_dir |mu| D */
    double mean;   /* mu */
    double std;    /* sigma */
    double direction; /* D */
} des_result_t;

DES_FN double des_sign(double x)
{
    return (x > 0.0) - (x < 0.0);
}

DES_FN void des_candidate_begin(des_candidate_t *state,
                                double sum_g, double sum_h,
                                double left_g, double left_h,
                                double reg_lambda, int era_gain,
                                double dir_tanh_scale)
{
    double right_g = sum_g - left_g, right_h = sum_h - left_h, spread;
    state->sum_g = sum_g;
    state->sum_h = sum_h;
    state->left_g = left_g;
    state->left_h = left_h;
    state->reg_lambda = reg_lambda;
    state->era_gain = era_gain;
    state->value_node = des_leaf_value(sum_g, sum_h, reg_lambda);
    state->value_left = des_leaf_value(left_g, left_h, reg_lambda);
    state->value_right = des_leaf_value(right_g, right_h, reg_lambda);
    spread = state->value_left - state->value_right;
    state->direction_sign = des_sign(spread);
    state->direction_inv_scale =
        (dir_tanh_scale > 0.0 && spread != 0.0) ? 1.0 / (dir_tanh_scale * fabs(spread)) : 0.0;
    state->weight_total = 0.0;
    state->mean = 0.0;
    state->m2 = 0.0;
    state->direction = 0.0;
}

/* Per-era gain of the candidate (DESIGN 1, era_gain). */
DES_FN double des_era_gain(const des_candidate_t *state,
                           double era_g, double era_h,
                           double era_left_g, double era_left_h)
{
    double lambda = state->reg_lambda;
    double era_right_g = era_g - era_left_g, era_right_h = era_h - era_left_h;
    if (state->era_gain == DES_ERA_GAIN_NEWTON) {
        return des_phi(era_left_g, era_left_h, lambda)
             + des_phi(era_right_g, era_right_h, lambda)
             - des_phi(era_g, era_h, lambda);
    }
    return des_realized_era_loss(era_g, era_h, state->sum_h, state->value_node, lambda)
         - des_realized_era_loss(era_left_g, era_left_h, state->left_h,
                                 state->value_left, lambda)
         - des_realized_era_loss(era_right_g, era_right_h, state->sum_h - state->left_h,
                                 state->value_right, lambda);
}

/*
 * Add one era (with rows in the node) of weight w_e > 0.
 * era_left_count / era_right_count decide whether the era votes on direction:
 * only an era with rows on both sides has its own v_eL - v_eR.
 */
DES_FN void des_candidate_push(des_candidate_t *state, double era_weight,
                               double era_g, double era_h,
                               double era_left_g, double era_left_h,
                               double era_left_count, double era_right_count)
{
    double gain = des_era_gain(state, era_g, era_h, era_left_g, era_left_h);
    double delta, era_delta, vote;

    /* weighted Welford: mean += w/W (x - mean); m2 += w (x - mean_old)(x - mean_new) */
    state->weight_total += era_weight;
    delta = gain - state->mean;
    state->mean += (era_weight / state->weight_total) * delta;
    state->m2 += era_weight * delta * (gain - state->mean);

    if (state->direction_sign != 0.0 && era_left_count > 0.0 && era_right_count > 0.0) {
        double lambda = state->reg_lambda;
        era_delta = des_leaf_value(era_left_g, era_left_h, lambda)
                  - des_leaf_value(era_g - era_left_g, era_h - era_left_h, lambda);
        vote = state->direction_inv_scale > 0.0
             ? tanh(era_delta * state->direction_inv_scale)
             : des_sign(era_delta);
        state->direction += era_weight * state->direction_sign * vote;
    }
}

/*
 * Close the pass. Era weights need not be normalised: mean and variance are
 * normalised by the total weight, and so is the direction term.
 */
DES_FN des_result_t des_candidate_finish(const des_candidate_t *state,
                                         double lambda_dro, double lambda_dir)
{
    des_result_t result;
    double variance = 0.0;
    if (state->weight_total > 0.0) {
        variance = state->m2 / state->weight_total;
        result.direction = state->direction / state->weight_total;
    } else {
        result.direction = 0.0;
    }
    result.mean = state->mean;
    result.std = variance > 0.0 ? sqrt(variance) : 0.0;
    result.score = result.mean - lambda_dro * result.std
                 + lambda_dir * fabs(result.mean) * result.direction;
    return result;
}

#endif /* PACKBOOST_DES_H */
