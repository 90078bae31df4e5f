# cython: language_level=3
# The DES split parameters as every kernel reads them: ONE C struct
# (csrc/split_params.h), filled here, once, from the dict the driver passes
# (packboost._parameters: the "split" layer of the schema). The CPU split
# finder (_split.pyx), the CUDA backend (_cuda.pyx) and its host oracle all
# call make_split_params, so they cannot disagree on a code or a default:
# every field is required.

from libc.stdint cimport int32_t

from packboost._des cimport des_clip, des_leaf_value


cdef extern from "des.h" nogil:
    int DES_ERA_GAIN_REALIZED
    int DES_ERA_GAIN_NEWTON


cdef extern from "split_params.h" nogil:
    int PB_ERA_WEIGHTING_EQUAL
    int PB_ERA_WEIGHTING_COUNT
    ctypedef struct pb_split_params:
        double reg_lambda
        double reg_alpha
        int32_t era_gain
        int32_t era_weighting
        double era_alpha
        double lambda_dro
        double lambda_dir
        double dir_tanh_scale
        double min_samples_leaf
        double min_child_weight
        int32_t era_std_between


cdef inline pb_split_params make_split_params(dict params) except *:
    """The struct for ``params`` (every split parameter; KeyError names a missing one)."""
    cdef pb_split_params result
    era_gain = params["era_gain"]
    era_weighting = params["era_weighting"]
    era_std = params["era_std"]
    if era_gain not in ("realized", "newton"):
        raise ValueError(f"era_gain must be 'realized' or 'newton', got {era_gain!r}")
    if era_weighting not in ("equal", "count"):
        raise ValueError(f"era_weighting must be 'equal' or 'count', got {era_weighting!r}")
    if era_std not in ("between", "total"):
        raise ValueError(f"era_std must be 'between' or 'total', got {era_std!r}")
    result.reg_lambda = params["reg_lambda"]
    result.reg_alpha = params["reg_alpha"]
    result.era_gain = DES_ERA_GAIN_REALIZED if era_gain == "realized" else DES_ERA_GAIN_NEWTON
    result.era_weighting = (PB_ERA_WEIGHTING_EQUAL if era_weighting == "equal"
                            else PB_ERA_WEIGHTING_COUNT)
    result.era_alpha = params["era_alpha"]
    result.lambda_dro = params["lambda_dro"]
    result.lambda_dir = params["lambda_dir"]
    result.dir_tanh_scale = params["dir_tanh_scale"]
    # A child needs at least one row whatever the user asked.
    result.min_samples_leaf = max(1, params["min_samples_leaf"])
    result.min_child_weight = params["min_child_weight"]
    result.era_std_between = era_std == "between"
    return result


cdef inline bint candidate_is_scored(
        const pb_split_params* params, bint missing_left,
        double left_count,      # rows of the non-missing bins left of the threshold
        double missing_count,   # the node's rows with a missing value
        double cand_count,      # the left child's rows (with the missing ones if left)
        double cand_h,          # the left child's hessian sum
        double sum_count, double sum_h,   # the node's
) noexcept nogil:
    """Does candidate (threshold, missing side) get scored? Every partition
    once (docs/des.md §9): missing-right is missing-left's partition when the
    node has no missing rows (missing-left wins the tie), and {missing} |
    {all values} is left to its mirror, missing-right at the last threshold
    (else rounding would break the mirror tie differently per backend). Then
    both children must meet min_samples_leaf and min_child_weight (pooled).
    The CPU split finder (_split.pyx) and the Dask shards (_distributed.pyx)
    call this; the CUDA kernels' twin, on integer sums, is
    pbc_candidate_sums in csrc/pbc_split.h."""
    if not missing_left and missing_count == 0.0:
        return False
    if missing_left and left_count == 0.0:
        return False
    return not (cand_count < params.min_samples_leaf
                or sum_count - cand_count < params.min_samples_leaf
                or cand_h < params.min_child_weight
                or sum_h - cand_h < params.min_child_weight)


cdef inline bint monotone_order_holds(
        int monotone, double left_g, double left_h, double sum_g, double sum_h,
        double lower, double upper, const pb_split_params* params) noexcept nogil:
    """May a split on a feature with constraint ``monotone`` (+1: increasing,
    -1: decreasing) have these children? Their values, clipped to the node's
    bounds, must be ordered (left <= right for +1); the missing rows count on
    the side they go to (docs/des.md §14). The CPU split finder and the
    Dask shards (_distributed.pyx) call this."""
    cdef double value_left = des_clip(des_leaf_value(left_g, left_h, params.reg_lambda,
                                                     params.reg_alpha), lower, upper)
    cdef double value_right = des_clip(des_leaf_value(sum_g - left_g, sum_h - left_h,
                                                      params.reg_lambda, params.reg_alpha),
                                       lower, upper)
    if monotone > 0:
        return value_left <= value_right
    return value_left >= value_right
