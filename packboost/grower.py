"""Grow one pack of trees, depth by depth (DESIGN 2 and 3).

Python decides, Cython computes: this module keeps the frontier of open
nodes of every tree of the pack as a handful of NumPy arrays and calls one
kernel per step of a depth -- node sums, split finding over all (node,
feature) tiles, partition -- so there is no Python work per node or per row.

Frontier arrays (one entry per open node, trees in order, then nodes in order
of creation):

    node_tree   which tree of the pack the node belongs to
    node_local  the node's index inside its tree (root = 0)
    node_start  its segment [node_start, node_end) of ``sample_indices``
    node_end

All randomness (row/era samples, feature subsets) is drawn by the caller and
passed in, so growing is a pure function of its inputs.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from packboost import _partition, _predict, _split
from packboost.ensemble import empty_nodes


@dataclass
class TrainingData:
    """Binned, era-sorted training matrix and what the kernels need with it."""

    X_binned: np.ndarray     # (n_features, n_rows) uint8/uint16, C-contiguous
    n_bins: np.ndarray       # (n_features,) int32 non-missing bins = missing code
    row_era: np.ndarray      # (n_rows,) int32, non-decreasing
    n_eras: int
    cuts: list               # per feature: float64 cut points (raw thresholds)

    @property
    def n_features(self) -> int:
        return self.X_binned.shape[0]

    @property
    def n_rows(self) -> int:
        return self.X_binned.shape[1]

    def raw_threshold(self, feature: np.ndarray, threshold_bin: np.ndarray) -> np.ndarray:
        """Raw value t such that x <= t  <=>  bin(x) <= threshold_bin.

        The last non-missing bin has no cut above it: everything non-missing
        goes left, so the raw threshold is +inf.
        """
        out = np.full(len(feature), np.inf)
        for i, (k, t) in enumerate(zip(feature.tolist(), threshold_bin.tolist(), strict=True)):
            if t < len(self.cuts[k]):
                out[i] = self.cuts[k][t]
        return out


@dataclass
class GrowerParams:
    max_depth: int
    reg_lambda: float
    min_samples_leaf: int
    min_child_weight: float
    min_split_gain: float
    max_delta_step: float
    shrinkage: float  # learning_rate / pack_size, folded into leaf values
    split: dict       # the DES parameters read by _split.find_best_splits


@dataclass
class Pack:
    """The trees of one round: node arrays with pack-local child indices."""

    nodes: dict
    tree_offsets: np.ndarray  # (pack_size + 1,)
    layer_features: list      # K_d for d = 0 .. max_depth-1


def leaf_values(sum_g: np.ndarray, sum_h: np.ndarray, reg_lambda: float,
                max_delta_step: float) -> np.ndarray:
    """Newton values ``-G / (H + lambda)``, clipped to +-max_delta_step if > 0."""
    denom = sum_h + reg_lambda
    values = np.divide(-sum_g, denom, out=np.zeros_like(sum_g), where=denom > 0)
    if max_delta_step > 0:
        np.clip(values, -max_delta_step, max_delta_step, out=values)
    return values


def grow_pack(data: TrainingData, gradients: np.ndarray, hessians: np.ndarray,
              tree_samples: list, layer_features: list, tree_feature_masks: list,
              params: GrowerParams, n_threads: int) -> Pack:
    """Grow ``len(tree_samples)`` trees in lockstep.

    Parameters
    ----------
    tree_samples : list of int32 arrays
        Rows (ascending) each tree is grown on.
    layer_features : list of int32 arrays, one per depth
        The pack's shared feature subset K_d, ascending.
    tree_feature_masks : list of (pack_size, len(K_d)) bool arrays or None
        Per tree, which features of K_d it may split on at that depth.
    """
    pack_size = len(tree_samples)
    sizes = np.array([len(s) for s in tree_samples], dtype=np.int64)
    bounds = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    sample_indices = (np.concatenate(tree_samples).astype(np.int32, copy=False)
                      if pack_size else np.zeros(0, dtype=np.int32))
    sample_indices = np.ascontiguousarray(sample_indices)

    node_tree = np.arange(pack_size, dtype=np.int32)
    node_local = np.zeros(pack_size, dtype=np.int32)
    node_start = bounds[:-1].copy()
    node_end = bounds[1:].copy()
    next_local = np.ones(pack_size, dtype=np.int64)
    levels = []  # per depth: (node_tree, node_local, field arrays)

    for depth in range(params.max_depth + 1):
        n_nodes = len(node_tree)
        if n_nodes == 0:
            break
        sum_g, sum_h = _partition.node_sums(gradients, hessians, sample_indices,
                                            node_start, node_end, n_threads)
        counts = node_end - node_start
        level = empty_nodes(n_nodes)
        level["value"][:] = params.shrinkage * leaf_values(
            sum_g, sum_h, params.reg_lambda, params.max_delta_step)
        level["n_samples"][:] = counts
        level["sum_hessian"][:] = sum_h

        split_nodes = np.zeros(0, dtype=np.int64)
        if depth < params.max_depth:
            split_nodes, n_left = _split_level(data, gradients, hessians, sample_indices,
                                               node_tree, node_start, node_end, counts,
                                               layer_features[depth],
                                               tree_feature_masks[depth], params,
                                               level, n_threads)
        # Children get the next free local ids of their tree, left then right.
        split_trees = node_tree[split_nodes]
        first_of_tree = np.searchsorted(split_trees, split_trees, side="left")
        rank_in_tree = np.arange(len(split_nodes)) - first_of_tree
        left_local = (next_local[split_trees] + 2 * rank_in_tree).astype(np.int32)
        level["left_child"][split_nodes] = left_local
        level["right_child"][split_nodes] = left_local + 1
        next_local += 2 * np.bincount(split_trees, minlength=pack_size)
        levels.append((node_tree, node_local, level))

        # The next frontier: children interleaved (L0, R0, L1, R1, ...) so
        # that nodes stay grouped by tree.
        middle = node_start[split_nodes] + n_left[split_nodes] if len(split_nodes) else \
            np.zeros(0, dtype=np.int64)
        node_tree = np.repeat(split_trees, 2).astype(np.int32)
        node_local = np.column_stack([left_local, left_local + 1]).ravel().astype(np.int32)
        node_start = np.column_stack([node_start[split_nodes], middle]).ravel()
        node_end = np.column_stack([middle, node_end[split_nodes]]).ravel()
        node_start = np.ascontiguousarray(node_start, dtype=np.int64)
        node_end = np.ascontiguousarray(node_end, dtype=np.int64)

    # Scatter the levels into per-pack arrays: tree t owns
    # [tree_offsets[t], tree_offsets[t+1]); children become pack-absolute.
    tree_offsets = np.concatenate([[0], np.cumsum(next_local)]).astype(np.int64)
    nodes = empty_nodes(int(tree_offsets[-1]))
    for level_tree, level_local, level in levels:
        position = tree_offsets[level_tree] + level_local
        for name, values in level.items():
            if name in ("left_child", "right_child"):
                values = np.where(values >= 0, values + tree_offsets[level_tree], -1)
            nodes[name][position] = values
    return Pack(nodes=nodes, tree_offsets=tree_offsets, layer_features=list(layer_features))


def _split_level(data, gradients, hessians, sample_indices, node_tree, node_start,
                 node_end, counts, features, feature_mask, params, level, n_threads):
    """Find and apply the best split of every frontier node; fill ``level``.

    Returns the indices of the nodes that split and ``n_left`` per node.
    """
    n_nodes = len(node_tree)
    # Tiles: (node, feature) pairs, node-major, features ascending; a node too
    # small for two children of min_samples_leaf rows gets none.
    allowed = np.ones((n_nodes, len(features)), dtype=bool)
    if feature_mask is not None:
        allowed &= feature_mask[node_tree]
    allowed &= (counts >= 2 * max(1, params.min_samples_leaf))[:, None]
    tile_node, tile_position = np.nonzero(allowed)
    tile_node = tile_node.astype(np.int32)
    tile_feature = np.ascontiguousarray(features[tile_position], dtype=np.int32)

    tiles = _split.find_best_splits(data.X_binned, gradients, hessians, data.row_era,
                                    data.n_eras, sample_indices, node_start, node_end,
                                    tile_node, tile_feature, data.n_bins, params.split,
                                    n_threads)
    best_tile = _split.best_tile_per_node(tile_node, tiles["score"], tiles["found"], n_nodes)
    candidates = np.flatnonzero(best_tile >= 0)
    chosen = best_tile[candidates]
    # DESIGN 1 (Choice): split only if DES > 0 and the pooled gain > min_split_gain.
    accept = (tiles["score"][chosen] > 0) & (tiles["gain"][chosen] > params.min_split_gain)
    split_nodes = candidates[accept]
    chosen = chosen[accept]

    split_feature = np.full(n_nodes, -1, dtype=np.int32)
    split_threshold = np.zeros(n_nodes, dtype=np.int32)
    split_missing_left = np.zeros(n_nodes, dtype=np.uint8)
    split_feature[split_nodes] = tile_feature[chosen]
    split_threshold[split_nodes] = tiles["threshold"][chosen]
    split_missing_left[split_nodes] = tiles["missing_left"][chosen]

    level["feature"][:] = split_feature
    level["threshold_bin"][:] = split_threshold
    level["missing_left"][:] = split_missing_left
    level["threshold"][split_nodes] = data.raw_threshold(tile_feature[chosen],
                                                         tiles["threshold"][chosen])
    level["gain"][split_nodes] = tiles["gain"][chosen]
    level["des_score"][split_nodes] = tiles["score"][chosen]

    n_left = _partition.partition_nodes(data.X_binned, sample_indices, node_start, node_end,
                                        split_feature, split_threshold, split_missing_left,
                                        data.n_bins, n_threads)
    return split_nodes, n_left


def predict_pack_binned(data: TrainingData, pack: Pack, out: np.ndarray,
                        n_threads: int) -> None:
    """Add the pack's trees evaluated on the training bins to ``out``."""
    nodes = pack.nodes
    _predict.predict_binned(data.X_binned, data.n_bins, nodes["feature"],
                            nodes["threshold_bin"], nodes["missing_left"],
                            nodes["left_child"], nodes["right_child"], nodes["value"],
                            np.ascontiguousarray(pack.tree_offsets[:-1]), out, n_threads)
