# The DES split math of csrc/des.h (docs/des.md), declared once for the Cython
# modules that score candidates: _split.pyx (one machine) and _distributed.pyx
# (the Dask shards, which carry a candidate's running state between workers
# and so read its fields).

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
    void des_candidate_push(des_candidate_t *state, double era_weight,
                            double era_g, double era_h, double era_left_g,
                            double era_left_h, double era_left_count,
                            double era_right_count)
    des_result_t des_candidate_finish(const des_candidate_t *state,
                                      double lambda_dro, double lambda_dir)
