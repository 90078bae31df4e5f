/*
 * des.h -- the math of Directional Era Splitting (docs/des.md), once,
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
 *   alpha       reg_alpha (L1 regularisation of leaf values): every leaf value
 *               and gain uses the soft-thresholded gradient sum
 *               T(G) = sign(G) max(|G| - alpha, 0) in place of G, as XGBoost
 *               and LightGBM do (des_threshold_l1); alpha = 0 is the plain
 *               Newton math, bit for bit (T is then skipped, not evaluated)
 *
 * Scoring a candidate (feature, threshold, missing side) of a node:
 *
 *   des_candidate_begin()     pooled values, realized-gain coefficients,
 *                             direction sign and scale
 *   mean of the era gains     realized: des_realized_mean(), closed form from
 *                             weighted pooled sums (the gains are linear in the
 *                             era sums); newton: w_e des_era_gain() summed on a
 *                             grid (des_grid_exponent, des_to_grid)
 *   des_candidate_set_mean()
 *   des_candidate_set_noise() optional (era_std = "between"): the per-row
 *                             gradient variance of the node
 *   des_candidate_era_terms() once per era with rows in the node: the centred
 *                             square (gain_e - mean)^2, the era's sampling
 *                             noise and the direction vote; their largest
 *                             magnitudes (des_terms_max) give the grids
 *                             (des_grid_of), on which the terms are added as
 *                             integers (des_grid_add), in any order
 *   des_candidate_set_sums()  the sums and the era weights' totals
 *   des_candidate_finish()    DES score, mean, std, direction
 *
 * The variance is the centred two-pass form sum w (x - mean)^2 / W: it stays
 * exact when the gains share a large common offset, where the naive
 * E[x^2] - E[x]^2 cancels catastrophically, and the realized mean costs no
 * pass of its own.
 *
 * Between-era std (era_std = "between", the default). The spread of the era
 * gains has two sources: eras that really disagree, and sampling noise -- an
 * era's gain is a sum over its few rows in the node, so it scatters even when
 * every era has the same true effect. The noise part grows as nodes shrink
 * and would make DES reject nearly every split below the first levels (a
 * t-test at |E|^(1/2) lambda_dro). DES penalises disagreement, not noise: as
 * in a random-effects meta-analysis,
 *
 *     sigma_between^2 = max(0, sigma^2 - (1 - sum w^2 / W^2) sum_e w_e nu_e / W)
 *
 * with nu_e the sampling variance of gain_e: realized gains are linear in the
 * era's sums, gain_e = (v - v_L) G_eL + (v - v_R) G_eR + (hessian terms), so
 * nu_e = s_g^2 ((v - v_L)^2 n_eL + (v - v_R)^2 n_eR) with s_g^2 the per-row
 * variance of the (weighted) gradients in the node; hessian noise is ignored
 * (zero for squared error). The factor (1 - sum w^2 / W^2) is the expected
 * shrinkage of a variance around the estimated mean. With era_gain = "newton"
 * the per-era gains are not linear and no correction is made.
 */
#ifndef PACKBOOST_DES_H
#define PACKBOOST_DES_H

#include <math.h>

#ifdef __CUDACC__
#define DES_FN static __host__ __device__ __forceinline__
#else
#define DES_FN static inline
#endif

/* era_gain values (docs/des.md §3): read by packboost/_split.pyx through cdef extern */
#define DES_ERA_GAIN_REALIZED 0
#define DES_ERA_GAIN_NEWTON 1

/*
 * T(G) = sign(G) max(|G| - alpha, 0): the gradient sum left after the L1
 * penalty alpha |v|. The leaf minimising G v + 0.5 (H + lambda) v^2 + alpha |v|
 * is v = -T(G) / (H + lambda), and its loss reduction 0.5 T(G)^2 / (H + lambda).
 */
DES_FN double des_threshold_l1(double sum_g, double reg_alpha)
{
    if (reg_alpha <= 0.0)
        return sum_g;
    if (sum_g > reg_alpha)
        return sum_g - reg_alpha;
    if (sum_g < -reg_alpha)
        return sum_g + reg_alpha;
    return 0.0;
}

/* phi(G, H) = 0.5 T(G)^2 / (H + lambda): the loss reduction of a Newton leaf. */
DES_FN double des_phi(double sum_g, double sum_h, double reg_lambda, double reg_alpha)
{
    double denom = sum_h + reg_lambda;
    double g = des_threshold_l1(sum_g, reg_alpha);
    return denom > 0.0 ? 0.5 * g * g / denom : 0.0;
}

/* v = -T(G) / (H + lambda): the Newton leaf value. */
DES_FN double des_leaf_value(double sum_g, double sum_h, double reg_lambda, double reg_alpha)
{
    double denom = sum_h + reg_lambda;
    return denom > 0.0 ? -des_threshold_l1(sum_g, reg_alpha) / denom : 0.0;
}

/* Pooled Newton gain of a split: phi(L) + phi(R) - phi(node). */
DES_FN double des_pooled_gain(double sum_g, double sum_h,
                              double left_g, double left_h, double reg_lambda,
                              double reg_alpha)
{
    return des_phi(left_g, left_h, reg_lambda, reg_alpha)
         + des_phi(sum_g - left_g, sum_h - left_h, reg_lambda, reg_alpha)
         - des_phi(sum_g, sum_h, reg_lambda, reg_alpha);
}

/*
 * Realized era gains (docs/des.md §3.1). Era e's loss term on a side s with pooled sums
 * (G_s, H_s) and value v_s is l_e(s) = G_es v_s + 0.5 H_es (1 + lambda/H_s) v_s^2.
 * Summed over eras it gives G_s v_s + 0.5 (H_s + lambda) v_s^2 = -phi(G_s, H_s),
 * so the per-era gains l_e(node) - l_e(left) - l_e(right) add up to the pooled
 * gain exactly.
 *
 * With L1 (alpha > 0) the side's penalty alpha |v_s| is shared by the eras in
 * proportion to their hessian, l_e(s) += alpha |v_s| H_es / H_s: still linear
 * in (G_es, H_es), and the sum G_s v_s + 0.5 (H_s + lambda) v_s^2 + alpha |v_s|
 * is -0.5 T(G_s)^2 / (H_s + lambda) = -phi(G_s, H_s) for v_s = -T(G_s) / (H_s +
 * lambda), so the era gains still add up to the pooled (L1) gain. The
 * sampling-noise coefficients (v - v_L)^2 are those of the gradients and
 * keep their form.
 */

/* Running state of one candidate's pass over the eras. */
typedef struct {
    double reg_lambda, reg_alpha;
    int era_gain;
    /* Newton values of the node and its children (pooled sums) */
    double value_node, value_left, value_right;
    /* realized gains: gain_e = coef_g G_e + coef_h H_e + coef_left_g G_eL + coef_left_h H_eL */
    double coef_g, coef_h, coef_left_g, coef_left_h;
    /* direction: d = sign(v_L - v_R) and 1 / (s |v_L - v_R|) (0 when s = 0) */
    int with_direction;
    double direction_sign, direction_inv_scale;
    /* the pass over eras */
    double mean, weight_total, sum_squares, direction;
    /* sampling noise of the era gains (des_candidate_set_noise): s_g^2, the
       noise coefficients (v - v_L)^2 and (v - v_R)^2, sum w nu_e, sum w^2 */
    double gradient_variance, noise_left, noise_right, noise_sum, weight_squares;
} des_candidate_t;

/* Result of one candidate. */
typedef struct {
    double score;  /* DES = mu - lambda_dro sigma + lambda_dir |mu| D */
    double mean;   /* mu */
    double std;    /* sigma */
    double direction; /* D (0 when the direction term is off) */
} des_result_t;

DES_FN double des_sign(double x)
{
    return (x > 0.0) - (x < 0.0);
}

/*
 * Era e's loss term on side s, l_e(s) = G_es v_s + 0.5 H_es (1 + lambda/H_s) v_s^2
 * (+ alpha |v_s| H_es / H_s with L1), is linear in (G_es, H_es): l_e(s) = G_es a_s +
 * H_es b_s. des_realized_curvature returns b_s (0 for a side without hessian,
 * whose eras have none either).
 */
DES_FN double des_realized_curvature(double side_h, double side_value, double reg_lambda,
                                     double reg_alpha)
{
    double curvature;
    if (side_h <= 0.0)
        return 0.0;
    curvature = 0.5 * (1.0 + reg_lambda / side_h) * side_value * side_value;
    /* v_s = 0 adds no penalty (and alpha = inf, an overflowed rescaling, no NaN) */
    if (reg_alpha > 0.0 && side_value != 0.0)
        curvature += reg_alpha * fabs(side_value) / side_h;
    return curvature;
}

/*
 * Start a candidate whose node, left and right leaf values are given: the
 * Newton values (des_candidate_begin) or, under monotone constraints, the
 * Newton values clipped to the node's bounds (des_candidate_begin_bounded).
 * The realized gains are linear in an era's sums for any values, so they
 * still add up to the pooled gain of those values (des_bounded_gain).
 */
DES_FN void des_candidate_begin_values(des_candidate_t *state,
                                       double sum_g, double sum_h,
                                       double left_g, double left_h,
                                       double value_node, double value_left,
                                       double value_right,
                                       double reg_lambda, double reg_alpha, int era_gain,
                                       double dir_tanh_scale, int with_direction)
{
    double right_h = sum_h - left_h, spread;
    double curvature_node, curvature_left, curvature_right;
    (void)sum_g;
    (void)left_g;
    state->reg_lambda = reg_lambda;
    state->reg_alpha = reg_alpha;
    state->era_gain = era_gain;
    state->value_node = value_node;
    state->value_left = value_left;
    state->value_right = value_right;
    curvature_node = des_realized_curvature(sum_h, state->value_node, reg_lambda, reg_alpha);
    curvature_left = des_realized_curvature(left_h, state->value_left, reg_lambda, reg_alpha);
    curvature_right = des_realized_curvature(right_h, state->value_right, reg_lambda,
                                             reg_alpha);
    /* gain_e = l_e(node) - l_e(left) - l_e(right), right sums = era - left */
    state->coef_g = state->value_node - state->value_right;
    state->coef_h = curvature_node - curvature_right;
    state->coef_left_g = state->value_right - state->value_left;
    state->coef_left_h = curvature_right - curvature_left;
    spread = state->value_left - state->value_right;
    state->with_direction = with_direction;
    state->direction_sign = des_sign(spread);
    state->direction_inv_scale =
        (dir_tanh_scale > 0.0 && spread != 0.0) ? 1.0 / (dir_tanh_scale * fabs(spread)) : 0.0;
    state->mean = 0.0;
    state->weight_total = 0.0;
    state->sum_squares = 0.0;
    state->direction = 0.0;
    state->gradient_variance = 0.0;
    state->noise_left = (state->value_node - state->value_left)
                      * (state->value_node - state->value_left);
    state->noise_right = (state->value_node - state->value_right)
                       * (state->value_node - state->value_right);
    state->noise_sum = 0.0;
    state->weight_squares = 0.0;
}

/*
 * Start a candidate with pooled node sums (G, H) and left sums (G_L, H_L).
 * with_direction = 0 skips the direction vote (lambda_dir = 0), whose per-era
 * Newton values and tanh dominate the cost of a pass otherwise.
 */
DES_FN void des_candidate_begin(des_candidate_t *state,
                                double sum_g, double sum_h,
                                double left_g, double left_h,
                                double reg_lambda, double reg_alpha, int era_gain,
                                double dir_tanh_scale, int with_direction)
{
    des_candidate_begin_values(
        state, sum_g, sum_h, left_g, left_h,
        des_leaf_value(sum_g, sum_h, reg_lambda, reg_alpha),
        des_leaf_value(left_g, left_h, reg_lambda, reg_alpha),
        des_leaf_value(sum_g - left_g, sum_h - left_h, reg_lambda, reg_alpha),
        reg_lambda, reg_alpha, era_gain, dir_tanh_scale, with_direction);
}

/*
 * Monotone constraints (docs/des.md §14). A node of a constrained tree has
 * bounds [lower, upper] on its value: its value and its children's are the
 * Newton values clipped to them.
 */
DES_FN double des_clip(double value, double lower, double upper)
{
    return value < lower ? lower : (value > upper ? upper : value);
}

/* A side's regularised loss G v + 0.5 (H + lambda) v^2 + alpha |v| at value v
   (-phi(G, H) at the Newton value). */
DES_FN double des_side_loss(double sum_g, double sum_h, double value, double reg_lambda,
                            double reg_alpha)
{
    double loss = sum_g * value + 0.5 * (sum_h + reg_lambda) * value * value;
    if (reg_alpha > 0.0)
        loss += reg_alpha * fabs(value);
    return loss;
}

DES_FN void des_candidate_begin_bounded(des_candidate_t *state,
                                        double sum_g, double sum_h,
                                        double left_g, double left_h,
                                        double lower, double upper,
                                        double reg_lambda, double reg_alpha, int era_gain,
                                        double dir_tanh_scale, int with_direction)
{
    des_candidate_begin_values(
        state, sum_g, sum_h, left_g, left_h,
        des_clip(des_leaf_value(sum_g, sum_h, reg_lambda, reg_alpha), lower, upper),
        des_clip(des_leaf_value(left_g, left_h, reg_lambda, reg_alpha), lower, upper),
        des_clip(des_leaf_value(sum_g - left_g, sum_h - left_h, reg_lambda, reg_alpha),
                 lower, upper),
        reg_lambda, reg_alpha, era_gain, dir_tanh_scale, with_direction);
}

/* Pooled gain of a started candidate at its own (clipped) values: the sum of
   its realized era gains; des_pooled_gain when no value was clipped. */
DES_FN double des_bounded_gain(const des_candidate_t *state,
                               double sum_g, double sum_h, double left_g, double left_h)
{
    double lambda = state->reg_lambda, alpha = state->reg_alpha;
    return des_side_loss(sum_g, sum_h, state->value_node, lambda, alpha)
         - des_side_loss(left_g, left_h, state->value_left, lambda, alpha)
         - des_side_loss(sum_g - left_g, sum_h - left_h, state->value_right, lambda, alpha);
}

/* Per-era gain of the candidate (docs/des.md §3, era_gain). */
DES_FN double des_era_gain(const des_candidate_t *state,
                           double era_g, double era_h,
                           double era_left_g, double era_left_h)
{
    double lambda = state->reg_lambda, alpha = state->reg_alpha;
    if (state->era_gain == DES_ERA_GAIN_NEWTON) {
        return des_phi(era_left_g, era_left_h, lambda, alpha)
             + des_phi(era_g - era_left_g, era_h - era_left_h, lambda, alpha)
             - des_phi(era_g, era_h, lambda, alpha);
    }
    return state->coef_g * era_g + state->coef_h * era_h
         + state->coef_left_g * era_left_g + state->coef_left_h * era_left_h;
}

/*
 * Weighted mean of the realized era gains without a pass over the eras:
 * arguments are sum_e w_e G_e, sum_e w_e H_e, sum_e w_e G_eL, sum_e w_e H_eL
 * and sum_e w_e over the eras with rows in the node.
 */
DES_FN double des_realized_mean(const des_candidate_t *state,
                                double weighted_g, double weighted_h,
                                double weighted_left_g, double weighted_left_h,
                                double weight_total)
{
    if (weight_total <= 0.0)
        return 0.0;
    return (state->coef_g * weighted_g + state->coef_h * weighted_h
            + state->coef_left_g * weighted_left_g + state->coef_left_h * weighted_left_h)
         / weight_total;
}

DES_FN void des_candidate_set_mean(des_candidate_t *state, double mean)
{
    state->mean = mean;
}

/*
 * Subtract the eras' sampling noise from the variance (era_std = "between",
 * see the top of this file): gradient_variance is the per-row variance s_g^2
 * of the node's gradients. Not calling this (or passing 0) keeps the total
 * std of docs/des.md §6.1. Realized gains only.
 */
DES_FN void des_candidate_set_noise(des_candidate_t *state, double gradient_variance)
{
    state->gradient_variance =
        (state->era_gain == DES_ERA_GAIN_REALIZED && gradient_variance > 0.0)
        ? gradient_variance : 0.0;
}

/*
 * One era's terms of the pass, for an era with rows in the node, of weight
 * w_e > 0: the centred square w_e (gain_e - mean)^2, the era's sampling noise
 * w_e nu_e (era_std = "between") and, with_vote, its direction vote
 * w_e d vote_e (the dearest term: a pass that only needs the others' maxima
 * skips it; see des_grid_of). The era
 * votes on the direction only if it has rows on both sides (its own
 * v_eL - v_eR exists). The vote reads the era's own L2 Newton values without
 * the L1 threshold: an era's sums are a fraction of the node's, and alpha
 * (sized for a leaf) would silence most eras' votes.
 */
typedef struct {
    double square, noise, direction;
} des_era_terms_t;

DES_FN des_era_terms_t des_candidate_era_terms(const des_candidate_t *state, double era_weight,
                                               double era_g, double era_h,
                                               double era_left_g, double era_left_h,
                                               double era_left_count, double era_right_count,
                                               int with_vote)
{
    des_era_terms_t terms;
    double deviation = des_era_gain(state, era_g, era_h, era_left_g, era_left_h) - state->mean;
    terms.square = era_weight * deviation * deviation;
    terms.noise = 0.0;
    terms.direction = 0.0;
    if (state->gradient_variance > 0.0)
        terms.noise = era_weight * state->gradient_variance
                    * (state->noise_left * era_left_count + state->noise_right * era_right_count);
    if (with_vote && state->with_direction && state->direction_sign != 0.0
            && era_left_count > 0.0 && era_right_count > 0.0) {
        double lambda = state->reg_lambda;
        double era_delta = des_leaf_value(era_left_g, era_left_h, lambda, 0.0)
                         - des_leaf_value(era_g - era_left_g, era_h - era_left_h, lambda, 0.0);
        double vote = state->direction_inv_scale > 0.0
                    ? tanh(era_delta * state->direction_inv_scale)
                    : des_sign(era_delta);
        terms.direction = era_weight * state->direction_sign * vote;
    }
    return terms;
}

/*
 * Order-free sums over eras (docs/des.md §6.3). Float additions depend on
 * their order, so a pass split over threads, GPU lanes or Dask workers would
 * give other last bits than one loop over the eras -- and a near-tie between
 * two candidates could then flip. Each sum of the pass is instead taken on a
 * power-of-two grid, as the gradients are (docs/fixed-point.md): with M the
 * largest |term| of the sum (a maximum: exact in any order) and n_terms the
 * number of terms (the eras with rows in the node, so that the grid depends on
 * the node's rows only, not on eras elsewhere), the step is 2^k, the smallest power of
 * two with M n_terms < 2^(k + DES_GRID_BITS); every term is rounded once to a
 * whole number of steps (round half to even) and the integers are added in
 * int64, which cannot overflow (|sum| <= 2^62 + n_terms / 2) and gives the
 * same sum in any order. The step is about 2^-52 of the largest term for a
 * thousand eras: the rounding changes a score by less than float64 sums of
 * that many terms would.
 */
#define DES_GRID_BITS 62
/* The smallest step: 2^-1022 keeps 2^k a normal double and 2^-k finite. */
#define DES_GRID_MIN_EXPONENT (-1022)

/* The exponent k of the grid step 2^k for n_terms terms of magnitude <= max_abs. */
DES_FN int des_grid_exponent(double max_abs, double n_terms)
{
    int exponent;
    if (!(max_abs > 0.0))
        return DES_GRID_MIN_EXPONENT;  /* every term is 0 */
    (void)frexp(max_abs * (n_terms > 1.0 ? n_terms : 1.0), &exponent);  /* < 2^exponent */
    exponent -= DES_GRID_BITS;
    return exponent < DES_GRID_MIN_EXPONENT ? DES_GRID_MIN_EXPONENT : exponent;
}

/* 2^-k: a term times it is its (unrounded) number of steps, exactly. */
DES_FN double des_grid_inverse_step(int exponent)
{
    return ldexp(1.0, -exponent);
}

/* The whole number of steps nearest term * inverse_step (half to even). */
DES_FN long long des_to_grid(double term, double inverse_step)
{
#ifdef __CUDA_ARCH__
    return __double2ll_rn(term * inverse_step);
#else
    return llrint(term * inverse_step);
#endif
}

DES_FN double des_from_grid(long long steps, int exponent)
{
    return ldexp((double)steps, exponent);
}

/* The grids of a candidate's three sums, from the largest |term| of each. */
typedef struct {
    int square, noise, direction;
} des_grid_t;

/* A candidate's three sums in steps of their grids. */
typedef struct {
    long long square, noise, direction;
} des_grid_sums_t;

/* The largest |square| and |noise| terms so far (the direction votes need none). */
DES_FN void des_terms_max(des_era_terms_t *max_abs, const des_era_terms_t *terms)
{
    double square = fabs(terms->square), noise = fabs(terms->noise);
    if (square > max_abs->square)
        max_abs->square = square;
    if (noise > max_abs->noise)
        max_abs->noise = noise;
}

/*
 * The largest era weight of a node, a bound on every direction vote
 * |w_e d vote_e| <= w_e (|vote_e| <= 1): 1 for equal weights, era_alpha plus
 * the node's largest era row count for count weights.
 */
DES_FN double des_era_weight_bound(int count_weights, double largest_era_rows,
                                   double era_alpha)
{
    return count_weights ? era_alpha + largest_era_rows : 1.0;
}

/*
 * The grids of a candidate's sums: the squares' and the noise's from their
 * largest terms (max_abs), the direction votes' from their bound
 * weight_bound (des_era_weight_bound) -- so no pass computes a vote, with its
 * tanh, only to find the largest.
 */
DES_FN des_grid_t des_grid_of(const des_era_terms_t *max_abs, double weight_bound,
                              double n_terms)
{
    des_grid_t grid;
    grid.square = des_grid_exponent(max_abs->square, n_terms);
    grid.noise = des_grid_exponent(max_abs->noise, n_terms);
    grid.direction = des_grid_exponent(weight_bound, n_terms);
    return grid;
}

/* Add one era's terms to sums on the grid (inverse steps: des_grid_inverse_step). */
DES_FN void des_grid_add(des_grid_sums_t *sums, const des_era_terms_t *terms,
                         double inverse_square, double inverse_noise, double inverse_direction)
{
    sums->square += des_to_grid(terms->square, inverse_square);
    sums->noise += des_to_grid(terms->noise, inverse_noise);
    sums->direction += des_to_grid(terms->direction, inverse_direction);
}

/* The sum of n_terms terms on the grid of their largest magnitude, as a double. */
DES_FN double des_grid_sum(const double *terms, long n_terms)
{
    double largest = 0.0, inverse_step;
    long long steps = 0;
    long i;
    int exponent;
    for (i = 0; i < n_terms; ++i)
        if (fabs(terms[i]) > largest)
            largest = fabs(terms[i]);
    exponent = des_grid_exponent(largest, (double)n_terms);
    inverse_step = des_grid_inverse_step(exponent);
    for (i = 0; i < n_terms; ++i)
        steps += des_to_grid(terms[i], inverse_step);
    return des_from_grid(steps, exponent);
}

/* A candidate's kept era terms (one array per sum) in steps of their grids. */
DES_FN des_grid_sums_t des_grid_sums_of(const double *square, const double *noise,
                                        const double *direction, long n_terms,
                                        const des_grid_t *grid)
{
    des_grid_sums_t sums = {0, 0, 0};
    des_era_terms_t terms;
    double inverse_square = des_grid_inverse_step(grid->square);
    double inverse_noise = des_grid_inverse_step(grid->noise);
    double inverse_direction = des_grid_inverse_step(grid->direction);
    long i;
    for (i = 0; i < n_terms; ++i) {
        terms.square = square[i];
        terms.noise = noise[i];
        terms.direction = direction[i];
        des_grid_add(&sums, &terms, inverse_square, inverse_noise, inverse_direction);
    }
    return sums;
}

/*
 * The era weights' totals sum_e w_e and sum_e w_e^2 over the n_present eras
 * with rows in the node, from integers (exact in any order): equal weights
 * (w_e = 1) give n_present; count weights (w_e = era_alpha + n_e) give
 * n_present alpha + sum n_e and n_present alpha^2 + 2 alpha sum n_e + sum n_e^2,
 * with rows = sum_e n_e and rows_squared = sum_e n_e^2.
 */
DES_FN double des_weight_total(int count_weights, double n_present, double rows,
                               double era_alpha)
{
    return count_weights ? n_present * era_alpha + rows : n_present;
}

DES_FN double des_weight_squares(int count_weights, double n_present, double rows,
                                 double rows_squared, double era_alpha)
{
    return count_weights
        ? n_present * era_alpha * era_alpha + 2.0 * era_alpha * rows + rows_squared
        : n_present;
}

/* Close the era pass: the weight totals and the three sums on their grids. */
DES_FN void des_candidate_set_sums(des_candidate_t *state, double weight_total,
                                   double weight_squares, const des_grid_sums_t *sums,
                                   const des_grid_t *grid)
{
    state->weight_total = weight_total;
    state->weight_squares = weight_squares;
    state->sum_squares = des_from_grid(sums->square, grid->square);
    state->noise_sum = des_from_grid(sums->noise, grid->noise);
    state->direction = des_from_grid(sums->direction, grid->direction);
}

/*
 * Close the pass. Era weights need not be normalised: the variance and the
 * direction are divided by the total weight of the eras pushed.
 */
DES_FN des_result_t des_candidate_finish(const des_candidate_t *state,
                                         double lambda_dro, double lambda_dir)
{
    des_result_t result;
    double variance = 0.0;
    result.direction = 0.0;
    if (state->weight_total > 0.0) {
        double total = state->weight_total;
        variance = state->sum_squares / total;
        if (state->gradient_variance > 0.0) {
            double shrinkage = 1.0 - state->weight_squares / (total * total);
            variance -= shrinkage * state->noise_sum / total;
        }
        result.direction = state->direction / total;
        /* |D| <= 1 also after rounding: the pruning bound mu + lambda_dir |mu|
           (docs/des.md §9) then holds for every score */
        if (result.direction > 1.0)
            result.direction = 1.0;
        else if (result.direction < -1.0)
            result.direction = -1.0;
    }
    result.mean = state->mean;
    result.std = variance > 0.0 ? sqrt(variance) : 0.0;
    result.score = result.mean - lambda_dro * result.std
                 + lambda_dir * fabs(result.mean) * result.direction;
    return result;
}

#endif /* PACKBOOST_DES_H */
