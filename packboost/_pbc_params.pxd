# cython: language_level=3
# The GPU backend's split parameters (csrc/packboost_cuda.h), shared by
# _cuda.pyx (the real library) and _cuda_emulate.pyx (its host run), so that
# both build the struct from a params dict in one place.

from libc.stdint cimport int32_t


cdef extern from "packboost_cuda.h" nogil:
    ctypedef struct pbc_split_params:
        double reg_lambda
        int32_t era_gain
        int32_t era_weighting
        double era_alpha
        double lambda_dro
        double lambda_dir
        double dir_tanh_scale
        double min_samples_leaf
        double min_child_weight
        int32_t era_std_between


cdef inline pbc_split_params make_params(dict params) except *:
    from packboost._split import ERA_GAIN_CODES, ERA_STD_CODES, ERA_WEIGHTING_CODES
    cdef pbc_split_params result
    result.reg_lambda = params["reg_lambda"]
    result.era_gain = ERA_GAIN_CODES[params["era_gain"]]
    result.era_weighting = ERA_WEIGHTING_CODES[params["era_weighting"]]
    result.era_alpha = params["era_alpha"]
    result.lambda_dro = params["lambda_dro"]
    result.lambda_dir = params["lambda_dir"]
    result.dir_tanh_scale = params["dir_tanh_scale"]
    result.min_samples_leaf = max(1, params["min_samples_leaf"])
    result.min_child_weight = params["min_child_weight"]
    # As _split.make_params: the kernel default is DESIGN 1's total std.
    result.era_std_between = ERA_STD_CODES[params.get("era_std", "total")]
    return result
