"""Refitting a pack's leaves to a quantile of their residuals (``objective="quantile"``).

The pinball loss has no curvature, so its Newton step (unit hessians) is
``share of the leaf's rows below the prediction - (1 - alpha)``: it says which
way to move, not how far, and a leaf crawls towards its quantile at most
``learning_rate`` per round. As LightGBM does for its quantile and L1
objectives, once a tree is grown its split structure is kept and each leaf's
value is replaced by the weighted alpha-quantile of the residuals
``y - F`` of the rows it was grown on (the tree's sample), times the round's
shrinkage ``learning_rate / pack_size``: the step that minimises the leaf's
pinball loss.

The rows are routed with the binned prediction kernel
(:func:`packboost._predict.predict_binned` walking a copy of the tree whose
leaf values are their node ids), on the driver's binned matrix, so the CPU
and CUDA backends refit the same way. The Dask backend, whose rows are on
its shards, finds the same order statistic of every shard's residuals by
bisection over their order (:func:`quantile_ranks`, :func:`order_keys`;
packboost.backends.dask). With sample weights the weights are first put on
an integer grid (:func:`weight_grid_exponent`, :func:`weight_units`: a
power of two from the tree sample's row count and largest weight, so that
every sum of units is exact in int64 and in float64): the quantile is then
the same whatever order, or split over shards, the weights are added in
(:func:`grouped_grid_quantile`).
"""

from __future__ import annotations

import numpy as np

from packboost import _predict


def leaf_of_rows(pack, tree: int, data, n_threads: int) -> np.ndarray:
    """(n_rows,) int64: every training row's leaf in ``tree`` of ``pack``, as the
    index of that node in the pack's node arrays."""
    nodes = pack.nodes
    node_ids = np.arange(len(nodes["value"]), dtype=np.float64)
    root = np.array([pack.tree_offsets[tree]], dtype=np.int64)
    out = np.zeros(data.n_rows, dtype=np.float64)
    _predict.predict_binned(data.X_binned, data.n_bins, nodes["feature"],
                            nodes["threshold_bin"], nodes["missing_left"],
                            nodes["left_child"], nodes["right_child"], node_ids, root, out,
                            n_threads, category_words=nodes.get("category_words"))
    # A tree's walk adds its root's offset to the leaf's tree-local index:
    # the sum is the pack-wide node id, exactly (integers far below 2**53).
    return out.astype(np.int64)


def residuals(y: np.ndarray, raw_prediction: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """``y - raw_prediction`` of ``rows``, a zero always +0.0 (-0.0 and 0.0
    sort as equals but are different bits: the Dask refit's order keys tell
    them apart, so neither refit keeps a -0.0)."""
    return y[rows] - raw_prediction[rows] + 0.0


def order_keys(values: np.ndarray) -> np.ndarray:
    """uint64 keys in the order of the float64 ``values`` (no NaN): a
    non-negative value's bits with the sign bit set, a negative one's bits
    all flipped. :func:`from_order_keys` inverts it."""
    bits = np.ascontiguousarray(values, dtype=np.float64).view(np.uint64)
    return np.where(bits >> np.uint64(63), ~bits, bits | np.uint64(1 << 63))


def from_order_keys(keys: np.ndarray) -> np.ndarray:
    """The float64 values of :func:`order_keys`' ``keys``."""
    keys = np.asarray(keys, dtype=np.uint64)
    bits = np.where(keys >> np.uint64(63), keys & np.uint64((1 << 63) - 1), ~keys)
    return bits.view(np.float64)


def quantile_ranks(counts: np.ndarray, q: float) -> np.ndarray:
    """Per group of one tree's rows (``counts`` rows each, groups in order):
    the 0-based rank, within its group, of the row whose value
    :func:`grouped_weighted_quantile` takes with unit weights (its rule, in
    its float arithmetic; a group without rows gets 0)."""
    counts = np.asarray(counts, dtype=np.float64)
    before = np.concatenate([[0.0], np.cumsum(counts)[:-1]])
    # The first position whose cumulative count (1-based, exact integers)
    # reaches before + q x count, kept inside the group.
    position = np.maximum(np.ceil(before + q * counts) - 1.0, 0.0)
    position = np.clip(position, before, np.maximum(before + counts - 1.0, before))
    return (position - before).astype(np.int64)


def grouped_weighted_quantile(group: np.ndarray, values: np.ndarray,
                              weights: np.ndarray, q: float, n_groups: int):
    """Per group g of ``0 .. n_groups-1``: the smallest value whose cumulative
    weight (values ascending) reaches ``q`` of the group's total weight, as
    :func:`packboost.objectives.weighted_quantile` does for one group.

    Returns ``(quantile, has_weight)``; groups without positive weight get 0 and
    False.
    """
    return _grouped_quantile(group, values, np.asarray(weights, dtype=np.float64), n_groups,
                             lambda before, totals: before + q * totals)


def _grouped_quantile(group, values, weights, n_groups, reach):
    """Per group: the value at the first position (values ascending) whose
    cumulative weight reaches ``reach(before, totals)`` (the weights' running
    sum before the group, the group's total; in ``weights``' dtype), and
    whether the group has weight."""
    order = np.lexsort((values, group))
    group, values, weights = group[order], values[order], weights[order]
    starts = np.searchsorted(group, np.arange(n_groups), side="left")
    ends = np.searchsorted(group, np.arange(n_groups), side="right")
    cumulative = np.concatenate([np.zeros(1, dtype=weights.dtype), np.cumsum(weights)])
    before, totals = cumulative[starts], cumulative[ends] - cumulative[starts]
    has_weight = totals > 0
    position = np.searchsorted(cumulative[1:], reach(before, totals), side="left")
    position = np.clip(position, starts, np.maximum(ends - 1, starts))
    if not len(values):
        return np.zeros(n_groups), has_weight
    quantile = np.where(has_weight, values[np.minimum(position, len(values) - 1)], 0.0)
    return quantile, has_weight


# Every sum of weight units stays at or below 2**GRID_SUM_BITS: exact as int64
# and as float64 (whose q x total the rule compares with).
GRID_SUM_BITS = 52


def weight_grid_exponent(n_rows: int, max_weight: float) -> int:
    """The power of two ``e`` that puts a tree sample's weights on their grid:
    ``rint(w x 2**e)`` of ``n_rows`` weights, each at most ``max_weight``,
    sums to at most 2**GRID_SUM_BITS. A weight below 2**-(e+1) counts as
    zero (a leaf whose every weight does keeps its value)."""
    row_bits = int(np.ceil(np.log2(max(int(n_rows), 1))))
    if not max_weight > 0.0:
        return 0
    return GRID_SUM_BITS - row_bits - int(np.frexp(max_weight)[1])


def weight_units(weights: np.ndarray, exponent: int) -> np.ndarray:
    """int64 ``rint(weights x 2**exponent)`` (exact: a power of two scales)."""
    return np.rint(np.ldexp(np.asarray(weights, dtype=np.float64), exponent)).astype(np.int64)


def unit_thresholds(totals: np.ndarray, q: float) -> np.ndarray:
    """Per group: the units its cumulative weight must reach, ``ceil(q x
    total)`` (the total's units exact in float64, the product rounded once)."""
    return np.ceil(q * np.asarray(totals, dtype=np.float64)).astype(np.int64)


def grouped_grid_quantile(group: np.ndarray, values: np.ndarray, units: np.ndarray,
                          q: float, n_groups: int):
    """:func:`grouped_weighted_quantile` on integer weights (``units``,
    :func:`weight_units`): per group the smallest value whose cumulative
    units (values ascending) reach :func:`unit_thresholds` of the group's
    total; with a threshold of 0, the group's smallest value. Integer sums:
    the same in any order, which lets the Dask shards find it by bisection.

    Returns ``(quantile, has_weight)``; groups without units get 0 and False.
    """
    return _grouped_quantile(group, values, np.asarray(units, dtype=np.int64), n_groups,
                             lambda before, totals: before + unit_thresholds(totals, q))


def refit_quantile_leaves(pack, data, y: np.ndarray, raw_prediction: np.ndarray,
                          sample_weight: np.ndarray | None, tree_samples: list,
                          alpha: float, shrinkage: float, n_threads: int) -> None:
    """Set every leaf of ``pack`` to ``shrinkage`` x the weighted ``alpha``-quantile
    of ``y - raw_prediction`` over its tree's sampled rows that reach it (in place):
    without weights :func:`grouped_weighted_quantile` with unit weights, with
    them :func:`grouped_grid_quantile` on the weights' grid.

    ``raw_prediction`` is the prediction the pack was grown from (before the
    pack is added). A leaf none of whose sampled rows has weight keeps its value.
    With monotone constraints the refitted value is clipped to the leaf's
    bounds (``pack.value_bounds``), which the grower chose so that every tree
    is monotone whatever its leaves' values inside them (packboost._constraints).
    """
    values = pack.nodes["value"]
    is_leaf = pack.nodes["feature"] < 0
    for tree, rows in enumerate(tree_samples):
        if len(rows) == 0:
            continue
        leaf = leaf_of_rows(pack, tree, data, n_threads)[rows]
        residual = residuals(y, raw_prediction, rows)
        if sample_weight is None:
            quantile, has_weight = grouped_weighted_quantile(
                leaf, residual, np.ones(len(rows)), alpha, len(values))
        else:
            weights = np.asarray(sample_weight, dtype=np.float64)[rows]
            exponent = weight_grid_exponent(len(rows), float(weights.max()))
            quantile, has_weight = grouped_grid_quantile(
                leaf, residual, weight_units(weights, exponent), alpha, len(values))
        refit = has_weight & is_leaf
        refitted = shrinkage * quantile[refit]
        if pack.value_bounds is not None:
            refitted = np.clip(refitted, pack.value_bounds[refit, 0],
                               pack.value_bounds[refit, 1])
        values[refit] = refitted
