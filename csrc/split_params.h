/*
 * split_params.h -- the DES split parameters as the kernels of both backends
 * read them (docs/des.md): packboost/_split.pyx on the CPU, csrc/pbc_split.h
 * and cuda/split.cu on the GPU.
 *
 * One struct, filled in one place from the parameter dict the driver passes
 * (packboost/_split_params.pxd, make_split_params), so the backends cannot
 * disagree on a default or a code.
 */
#ifndef PACKBOOST_SPLIT_PARAMS_H
#define PACKBOOST_SPLIT_PARAMS_H

#include <stdint.h>

/* era_weighting codes */
#define PB_ERA_WEIGHTING_EQUAL 0
#define PB_ERA_WEIGHTING_COUNT 1

typedef struct {
    double reg_lambda;
    double reg_alpha;        /* L1 on leaf values (des_threshold_l1); 0: off */
    int32_t era_gain;        /* DES_ERA_GAIN_REALIZED / DES_ERA_GAIN_NEWTON (des.h) */
    int32_t era_weighting;   /* PB_ERA_WEIGHTING_EQUAL / PB_ERA_WEIGHTING_COUNT */
    double era_alpha;
    double lambda_dro;
    double lambda_dir;
    double dir_tanh_scale;
    double min_samples_leaf; /* at least 1 */
    double min_child_weight;
    int32_t era_std_between; /* 1: subtract the eras' sampling noise (des_candidate_set_noise) */
} pb_split_params;

#endif /* PACKBOOST_SPLIT_PARAMS_H */
