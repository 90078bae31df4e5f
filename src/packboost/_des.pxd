# The DES split math of csrc/des.h (docs/des.md), declared once for the Cython
# modules that score candidates: _split.pyx and _categorical.pyx (one machine)
# and _distributed.pyx (the Dask shards, whose era sums on a grid are added
# over the workers before a candidate is finished).

cdef extern from "des.h" nogil:
    ctypedef struct des_candidate_t:
        double mean
        double weight_total
        double sum_squares
        double direction
        double noise_sum
        double weight_squares
    ctypedef struct des_result_t:
        double score
        double mean
        double std
        double direction
    double des_pooled_gain(double sum_g, double sum_h, double left_g,
                           double left_h, double reg_lambda, double reg_alpha)
    void des_candidate_begin(des_candidate_t *state, double sum_g, double sum_h,
                             double left_g, double left_h, double reg_lambda,
                             double reg_alpha, int era_gain, double dir_tanh_scale,
                             int with_direction)
    void des_candidate_begin_bounded(des_candidate_t *state, double sum_g, double sum_h,
                                     double left_g, double left_h, double lower,
                                     double upper, double reg_lambda, double reg_alpha,
                                     int era_gain, double dir_tanh_scale,
                                     int with_direction)
    double des_clip(double value, double lower, double upper)
    double des_leaf_value(double sum_g, double sum_h, double reg_lambda, double reg_alpha)
    double des_bounded_gain(const des_candidate_t *state, double sum_g, double sum_h,
                            double left_g, double left_h)
    double des_era_gain(const des_candidate_t *state, double era_g, double era_h,
                        double era_left_g, double era_left_h)
    double des_realized_mean(const des_candidate_t *state, double weighted_g,
                             double weighted_h, double weighted_left_g,
                             double weighted_left_h, double weight_total)
    void des_candidate_set_mean(des_candidate_t *state, double mean)
    void des_candidate_set_noise(des_candidate_t *state, double gradient_variance)
    ctypedef struct des_era_terms_t:
        double square
        double noise
        double direction
    ctypedef struct des_grid_t:
        int square
        int noise
        int direction
    ctypedef struct des_grid_sums_t:
        long long square
        long long noise
        long long direction
    des_era_terms_t des_candidate_era_terms(const des_candidate_t *state, double era_weight,
                                            double era_g, double era_h, double era_left_g,
                                            double era_left_h, double era_left_count,
                                            double era_right_count, int with_vote)
    int des_grid_exponent(double max_abs, double n_terms)
    double des_grid_inverse_step(int exponent)
    long long des_to_grid(double term, double inverse_step)
    double des_from_grid(long long steps, int exponent)
    void des_terms_max(des_era_terms_t *max_abs, const des_era_terms_t *terms)
    double des_era_weight_bound(int count_weights, double largest_era_rows,
                                double era_alpha)
    des_grid_t des_grid_of(const des_era_terms_t *max_abs, double weight_bound,
                           double n_terms)
    void des_grid_add(des_grid_sums_t *sums, const des_era_terms_t *terms,
                      double inverse_square, double inverse_noise, double inverse_direction)
    double des_grid_sum(const double *terms, long n_terms)
    des_grid_sums_t des_grid_sums_of(const double *square, const double *noise,
                                     const double *direction, long n_terms,
                                     const des_grid_t *grid)
    double des_weight_total(int count_weights, double n_present, double rows,
                            double era_alpha)
    double des_weight_squares(int count_weights, double n_present, double rows,
                              double rows_squared, double era_alpha)
    void des_candidate_set_sums(des_candidate_t *state, double weight_total,
                                double weight_squares, const des_grid_sums_t *sums,
                                const des_grid_t *grid)
    des_result_t des_candidate_finish(const des_candidate_t *state,
                                      double lambda_dro, double lambda_dir)
