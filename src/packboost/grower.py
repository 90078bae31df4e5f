"""Grow one pack of trees, depth by depth (docs/packs.md §2, docs/engine.md).

Python decides, Cython computes: this module keeps the frontier of open
nodes of every tree of the pack as a handful of NumPy arrays and calls one
kernel per step of a depth -- node sums, split finding over all (slot,
feature) pairs, routing rows to children -- so there is no Python work per
node or per row.

The frontier (one entry per open node, called a *slot*; trees in order, then
nodes in order of creation):

    slot_tree    which tree of the pack the node belongs to
    slot_local   the node's index inside its tree (root = 0)

and ``node_of_row[row, tree]`` (see ``_partition.pyx``) says which slot each
row is in, per tree. All randomness (row/era samples, feature subsets) is
drawn by the caller and passed in, so growing is a pure function of its inputs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from packboost import _constraints, _split
from packboost._fixed_point import OutputsFixedPoint, to_fixed_point
from packboost._samples import TreeSamples
from packboost.ensemble import empty_nodes

# Histogram subtraction (docs/cpu-kernels.md §3) derives a child's cells
# from its parent's for the features the parent's tree scanned; the others
# the pass sums from the child's rows itself, with a row list. With more
# than this share of the next depth's (tree, feature) pairs new -- trees'
# features redrawn per depth (tree_feature_fraction < 1): about 1 - the
# fraction -- the depth's cells are not kept for the children: full passes,
# which sum each era's rows without a list, cost half the time (400,000 x
# 200, tree_feature_fraction 0.5; benchmarks/RESULTS.md, 2026-11-28).
# uint16 codes (over 256 bins) have no pass without a list: the old
# trade-off holds and they subtract as before.
SUBTRACTION_MAX_NEW_FEATURES = 0.25


@dataclass
class TrainingData:
    """Binned, era-sorted training matrix and what the kernels need with it."""

    X_binned: np.ndarray     # (n_features, n_rows) uint8/uint16, C-contiguous
    n_bins: np.ndarray       # (n_features,) int32 non-missing bins = missing code
    row_era: np.ndarray      # (n_rows,) int32, non-decreasing
    n_eras: int
    cuts: list               # per feature: float64 cut points (raw thresholds)
    # None: these are all the training rows. Else a packboost._row_shard.RowShard:
    # they are one shard of whole eras, the rest on other workers (docs/distributed.md).
    shard: object = None
    # (n_features,) bool: the categorical features (one bin per category,
    # splits by category set: packboost/_categorical.pyx), or None: none.
    categorical: np.ndarray | None = None

    @cached_property
    def category_words(self) -> int:
        """uint32 words of a node's category set: every code of the widest
        categorical feature, its missing one included (0 without any)."""
        if self.categorical is None or not np.any(self.categorical):
            return 0
        return int(np.max(self.n_bins[self.categorical])) // 32 + 1

    @cached_property
    def era_offsets(self) -> np.ndarray:
        """Rows of era e are era_offsets[e] .. era_offsets[e+1] (rows era-sorted).
        Computed once (a search of every row: 10 ms at Numerai scale, which
        every round asked for several times); the fields are not changed
        after construction."""
        offsets = np.searchsorted(self.row_era, np.arange(self.n_eras + 1),
                                  side="left").astype(np.int64)
        offsets.flags.writeable = False
        return offsets

    @cached_property
    def all_rows(self) -> np.ndarray:
        """0 .. n_rows - 1 (int32), made once: the CPU backend's row list
        at every depth whose slots are all summed."""
        rows = np.arange(self.n_rows, dtype=np.int32)
        rows.flags.writeable = False
        return rows

    @property
    def n_features(self) -> int:
        return self.X_binned.shape[0]

    @property
    def n_rows(self) -> int:
        return self.X_binned.shape[1]

    @cached_property
    def _cut_table(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every feature's cuts followed by +inf, in one array: (table, each
        feature's first entry, each feature's number of cuts)."""
        lengths = np.array([len(cuts) for cuts in self.cuts], dtype=np.int64)
        starts = np.concatenate([[0], np.cumsum(lengths + 1)[:-1]]).astype(np.int64)
        table = np.full(int(np.sum(lengths + 1)), np.inf)
        for start, cuts in zip(starts.tolist(), self.cuts, strict=True):
            table[start:start + len(cuts)] = cuts
        return table, starts, lengths

    def raw_threshold(self, feature: np.ndarray, threshold_bin: np.ndarray) -> np.ndarray:
        """Raw value t such that x <= t  <=>  bin(x) <= threshold_bin.

        The last non-missing bin has no cut above it: everything non-missing
        goes left, so the raw threshold is +inf.
        """
        table, starts, lengths = self._cut_table
        feature = np.asarray(feature, dtype=np.intp)
        # A bin past the feature's cuts reads the +inf after them.
        return table[starts[feature] + np.minimum(threshold_bin, lengths[feature])]


@dataclass
class GrowerParams:
    max_depth: int
    reg_lambda: float
    reg_alpha: float
    min_samples_leaf: int
    min_child_weight: float
    min_split_gain: float
    max_delta_step: float
    shrinkage: float  # learning_rate / pack_size, folded into leaf values
    split: dict       # the DES parameters read by _split.find_best_splits
    # Cap on one thread's histogram buffer (n_eras x slots x bins cells); past
    # it the slots of a depth are histogrammed in groups, one column pass each.
    histogram_budget_bytes: int = _split.DEFAULT_HISTOGRAM_BUDGET_BYTES
    # Features histogrammed per pass over the rows: a row's g, h and slots are
    # read once per block of features instead of once per feature.
    features_per_pass: int = _split.DEFAULT_FEATURES_PER_PASS
    # Resolved constraints (packboost._constraints), None when unconstrained:
    # (n_features,) int8 of -1/0/1, and (n_sets, n_features) bool sets.
    monotone_constraints: np.ndarray | None = None
    interaction_constraints: np.ndarray | None = None
    # Category splits (packboost/_categorical.pyx; LightGBM's meanings).
    max_cat_to_onehot: int = 4
    max_cat_threshold: int = 32
    cat_smooth: float = 1000.0
    min_data_per_group: int = 100
    cat_order: str = "era"
    cat_search_steps: int = 0


@dataclass
class Pack:
    """The trees of one round: node arrays with pack-local child indices."""

    nodes: dict
    tree_offsets: np.ndarray  # (pack_size + 1,)
    layer_features: list      # K_d for d = 0 .. max_depth-1
    # With monotone constraints: (n_nodes, 2) [lower, upper] bounds on each
    # node's value, in the units of nodes["value"] (shrunk), None without.
    # Not saved: what changes a leaf after growing (the quantile refit,
    # packboost._leaf_refit) must keep it inside them for the trees to stay
    # monotone.
    value_bounds: np.ndarray | None = None


def leaf_values(sum_g: np.ndarray, sum_h: np.ndarray, reg_lambda: float,
                max_delta_step: float, reg_alpha: float = 0.0) -> np.ndarray:
    """Newton values ``-T(G) / (H + lambda)``, clipped to +-max_delta_step if > 0.

    ``T(G) = sign(G) max(|G| - reg_alpha, 0)`` (L1; des_threshold_l1 of
    csrc/des.h, which the split gains use): skipped for ``reg_alpha = 0``,
    whose values stay bit for bit those of plain L2.
    """
    if reg_alpha > 0:
        sum_g = np.sign(sum_g) * np.maximum(np.abs(sum_g) - reg_alpha, 0.0)
    denom = sum_h + reg_lambda
    values = np.divide(-sum_g, denom, out=np.zeros_like(sum_g), where=denom > 0)
    if max_delta_step > 0:
        np.clip(values, -max_delta_step, max_delta_step, out=values)
    return values


def grow_pack(backend, data: TrainingData, gradients: np.ndarray, hessians: np.ndarray,
              tree_samples: Sequence, layer_features: list, tree_feature_masks: list,
              params: GrowerParams, n_threads: int, *,
              counted_rows: np.ndarray | None = None, buffers=None) -> Pack:
    """Grow ``len(tree_samples)`` trees in lockstep on ``backend``.

    This is the package's one depth loop: the frontier bookkeeping (slots,
    child numbering, which splits are accepted, the node arrays) is done here
    once, and every pass over the rows is a call of the backend
    (:mod:`packboost.backends`, docs/engine.md).

    Parameters
    ----------
    backend : packboost.backends.Backend
        Where the rows live and the kernels run (CPU or CUDA).
    tree_samples : sequence of int32 arrays (usually a TreeSamples)
        Rows (ascending) each tree is grown on.
    layer_features : list of int32 arrays, one per depth
        The pack's shared feature subset K_d, ascending.
    tree_feature_masks : list of (pack_size, len(K_d)) bool arrays or None
        Per tree, which features of K_d it may split on at that depth.
    counted_rows : bool array (n_rows,) or None
        The only rows ``tree_samples`` may hold (the target's known rows,
        packboost._unknown_targets); None: any row.
    buffers : packboost._fixed_point.RoundBuffers or None
        Where the rounded gradients are written (reused round after round).
    """
    # Rounded once for the whole pack (docs/fixed-point.md); both backends sum
    # these values exactly, so the trees do not depend on the backend.
    fixed = to_fixed_point(gradients, hessians, data.era_offsets, n_threads,
                           counted_rows=counted_rows, shard=data.shard, buffers=buffers)
    return _grow(backend, data, fixed, tree_samples, layer_features, tree_feature_masks, params)


def grow_device_pack(backend, data: TrainingData, tree_samples: Sequence, layer_features: list,
                     tree_feature_masks: list, params: GrowerParams) -> Pack:
    """:func:`grow_pack` where the backend computes the round's gradients
    itself, on the device (after ``backend.start_device_rounds``;
    packboost/_device_round.py): the same trees, no gradient on the host."""
    from packboost._device_round import DEVICE_GRADIENTS

    return _grow(backend, data, DEVICE_GRADIENTS, tree_samples, layer_features,
                 tree_feature_masks, params)


def grow_output_packs(backend, data: TrainingData, gradients: np.ndarray,
                      hessians: np.ndarray, tree_samples: TreeSamples, layer_features: list,
                      tree_feature_masks: list, params: GrowerParams,
                      n_threads: int, *, known=None, buffers=None) -> list[Pack] | None:
    """The packs of k outputs grown as one pack of ``k * pack_size`` trees
    (docs/packs.md §10): one pass over the rows per depth for all of them,
    tree ``j * pack_size + t`` being tree ``t`` of output ``j`` with output
    ``j``'s gradients (rows ``j`` of the (k, n_rows) ``gradients`` and
    ``hessians``) and the round's draws. Every slot is split on its own sums,
    so each output's pack is the one :func:`grow_pack` grows alone, bit for
    bit. The backend must accept :class:`~packboost._fixed_point.OutputsFixedPoint`
    (``grows_outputs_in_one_pass``); every output is grown with ``params``.

    ``known`` (a :class:`packboost._unknown_targets.KnownTargets` of these
    k outputs, or None: every target known): output ``j`` grows on its
    known rows, as :func:`grow_pack` with ``known.tree_samples(j, ...)`` and
    ``counted_rows=known.counted_rows(j)`` grows it -- its trees' samples
    cut to them, its grid and float sums' chunks those of a fit on them.

    ``buffers`` (one :class:`~packboost._fixed_point.RoundBuffers` per
    output, or None): where each output's rounded gradients are written.

    Returns the k packs, or None (nothing grown) where the outputs' rounded
    gradients cannot share one pass (OutputsFixedPoint.same_format): grow
    them one by one then.
    """
    n_outputs, pack_size = len(gradients), len(tree_samples)
    counted = [None if known is None else known.counted_rows(output)
               for output in range(n_outputs)]
    outputs = [to_fixed_point(gradients[output], hessians[output], data.era_offsets,
                              n_threads, counted_rows=counted[output], shard=data.shard,
                              buffers=None if buffers is None else buffers[output])
               for output in range(n_outputs)]
    if not OutputsFixedPoint.same_format(outputs):
        return None
    fixed = OutputsFixedPoint(outputs, np.repeat(np.arange(n_outputs, dtype=np.int32),
                                                 pack_size))
    output_samples = [tree_samples if known is None else known.tree_samples(output, tree_samples)
                      for output in range(n_outputs)]
    samples = TreeSamples(np.concatenate([item.era_keep for item in output_samples]),
                          [keep for item in output_samples for keep in item.row_keep],
                          tree_samples.era_offsets)
    masks = [None if mask is None else np.tile(mask, (n_outputs, 1))
             for mask in tree_feature_masks]
    pack = _grow(backend, data, fixed, samples, layer_features, masks, params)
    return [output_pack(pack, output * pack_size, (output + 1) * pack_size)
            for output in range(n_outputs)]


def output_pack(pack: Pack, first_tree: int, end_tree: int) -> Pack:
    """Trees ``[first_tree, end_tree)`` of ``pack`` as a pack of their own
    (children renumbered from its first node)."""
    begin, end = int(pack.tree_offsets[first_tree]), int(pack.tree_offsets[end_tree])
    nodes = {name: values[begin:end].copy() for name, values in pack.nodes.items()}
    for name in ("left_child", "right_child"):
        nodes[name] = np.where(nodes[name] >= 0, nodes[name] - begin, -1).astype(
            pack.nodes[name].dtype)
    return Pack(nodes=nodes, tree_offsets=pack.tree_offsets[first_tree:end_tree + 1] - begin,
                layer_features=list(pack.layer_features),
                value_bounds=None if pack.value_bounds is None
                else pack.value_bounds[begin:end].copy())


def _grow(backend, data: TrainingData, fixed, tree_samples, layer_features: list,
          tree_feature_masks: list, params: GrowerParams) -> Pack:
    """grow_pack's depth loop on the round's fixed-point gradients."""
    pack_size = len(tree_samples)
    backend.begin_pack(fixed, tree_samples)

    slot_tree = np.arange(pack_size, dtype=np.int32)   # slot t is the root of tree t
    slot_local = np.zeros(pack_size, dtype=np.int32)
    next_local = np.ones(pack_size, dtype=np.int64)
    levels = []  # per depth: (slot_tree, slot_local, field arrays)
    # Per slot, with constraints (packboost._constraints): bounds on the node's
    # value, and the features used on the path to it.
    monotone = params.monotone_constraints
    slot_bounds = None if monotone is None else np.tile([-np.inf, np.inf], (pack_size, 1))
    split_bounds = split_monotone = None
    sets = params.interaction_constraints
    path_features = None if sets is None else np.zeros((pack_size, data.n_features), bool)

    for depth in range(params.max_depth + 1):
        n_slots = len(slot_tree)
        sums = backend.slot_sums(n_slots)
        counts = sums.count
        level = empty_nodes(n_slots, data.category_words)
        values = leaf_values(sums.gradients, sums.hessians, params.reg_lambda,
                             params.max_delta_step, params.reg_alpha)
        if monotone is not None:
            if split_bounds is not None:
                slot_bounds = _constraints.child_bounds(split_bounds, split_monotone, values)
            np.clip(values, slot_bounds[:, 0], slot_bounds[:, 1], out=values)
        level["value"][:] = params.shrinkage * values
        if monotone is not None:
            level["value_lower"] = params.shrinkage * slot_bounds[:, 0]
            level["value_upper"] = params.shrinkage * slot_bounds[:, 1]
        level["n_samples"][:] = counts
        level["sum_hessian"][:] = sums.hessians

        split_slots = np.zeros(0, dtype=np.int64)
        if depth < params.max_depth:
            # The next depth scans the same features: the backend may keep this
            # depth's histograms and derive the children's (histogram subtraction).
            keep = (depth + 1 < params.max_depth
                    and np.array_equal(layer_features[depth + 1], layer_features[depth])
                    and (few_new_features(tree_feature_masks[depth],
                                          tree_feature_masks[depth + 1])
                         # the pass without a list reads uint8 codes only
                         or data.X_binned.dtype != np.uint8))
            constraints = {}
            if monotone is not None:
                constraints["slot_bounds"] = np.ascontiguousarray(slot_bounds)
                constraints["feature_monotone"] = np.ascontiguousarray(
                    monotone[layer_features[depth]])
            if sets is not None:
                constraints["slot_allows_feature"] = np.ascontiguousarray(
                    _constraints.allowed_features(path_features, sets)[:, layer_features[depth]],
                    dtype=np.uint8)
            # (None: a backend whose squared gradients come with the depth's
            # first exchange computes the variance itself; Backend.slot_sums)
            slot_variance = (None if sums.gradients_squared is None else
                             gradient_variance(sums.gradients, sums.gradients_squared, counts))
            split_slots = _split_level(backend, data, slot_tree, pack_size, counts,
                                       slot_variance,
                                       layer_features[depth], tree_feature_masks[depth],
                                       params, level, keep, constraints or None)
        split_trees, left_local = number_children(level, split_slots, slot_tree, next_local)
        levels.append((slot_tree, slot_local, level))

        # The next frontier: children interleaved (L0, R0, L1, R1, ...) so
        # that slots stay grouped by tree; rows follow their node, and rows
        # of slots that did not split record their leaf (the prediction
        # update is then a lookup, backend.add_pack).
        left_child_slot = np.full(n_slots, -1, dtype=np.int32)
        left_child_slot[split_slots] = 2 * np.arange(len(split_slots), dtype=np.int32)
        routing = {}
        if data.category_words and len(split_slots) and np.any(
                data.categorical[level["feature"][split_slots]]):
            routing["category_splits"] = _category_routes(data, level, split_slots,
                                                          left_child_slot)
        backend.route_rows(level["feature"], level["threshold_bin"], level["missing_left"],
                           left_child_slot, slot_local,
                           split_children=depth + 1 < params.max_depth, **routing)
        if len(split_slots) == 0:
            break
        split_feature = level["feature"][split_slots]
        if monotone is not None:
            split_bounds = slot_bounds[split_slots]
            split_monotone = monotone[split_feature]
        if sets is not None:
            path_features = np.repeat(path_features[split_slots], 2, axis=0)
            path_features[np.arange(len(path_features)), np.repeat(split_feature, 2)] = True
        slot_tree = np.repeat(split_trees, 2).astype(np.int32)
        slot_local = np.column_stack([left_local, left_local + 1]).ravel().astype(np.int32)

    return assemble_pack(levels, next_local, layer_features)


def number_children(level: dict, split_slots: np.ndarray, slot_tree: np.ndarray,
                    next_local: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Give the children of the split slots the next free local ids of their
    tree, left then right, in slot order; fill ``level``'s child fields and
    advance ``next_local`` (per tree) in place. Returns (tree of each split
    slot, left child's local id)."""
    split_trees = slot_tree[split_slots]
    first_of_tree = np.searchsorted(split_trees, split_trees, side="left")
    rank_in_tree = np.arange(len(split_slots)) - first_of_tree
    left_local = (next_local[split_trees] + 2 * rank_in_tree).astype(np.int32)
    level["left_child"][split_slots] = left_local
    level["right_child"][split_slots] = left_local + 1
    next_local += 2 * np.bincount(split_trees, minlength=len(next_local))
    return split_trees, left_local


def assemble_pack(levels: list, next_local: np.ndarray, layer_features) -> Pack:
    """Scatter per-depth ``(slot_tree, slot_local, fields)`` levels into one
    pack: tree t owns nodes ``[tree_offsets[t], tree_offsets[t+1])`` and
    children become pack-absolute."""
    tree_offsets = np.concatenate([[0], np.cumsum(next_local)]).astype(np.int64)
    n_nodes = int(tree_offsets[-1])
    words = levels[0][2]["category_words"].shape[1] if levels and \
        "category_words" in levels[0][2] else 0
    nodes = empty_nodes(n_nodes, words)
    if not levels:
        return Pack(nodes=nodes, tree_offsets=tree_offsets, layer_features=list(layer_features))
    # Every level's slots at once (one scatter per field, not one per level
    # and field: this ran per pack).
    offset = tree_offsets[np.concatenate([level_tree for level_tree, _, _ in levels])]
    position = offset + np.concatenate([level_local for _, level_local, _ in levels])
    value_bounds = None
    if "value_lower" in levels[0][2]:
        value_bounds = np.empty((n_nodes, 2))
        for column, name in enumerate(("value_lower", "value_upper")):
            value_bounds[position, column] = np.concatenate([level.pop(name)
                                                             for _, _, level in levels])
    for name in levels[0][2]:
        values = np.concatenate([level[name] for _, _, level in levels])
        if name in ("left_child", "right_child"):
            values = np.where(values >= 0, values + offset, -1)
        nodes[name][position] = values
    return Pack(nodes=nodes, tree_offsets=tree_offsets, layer_features=list(layer_features),
                value_bounds=value_bounds)


def few_new_features(mask: np.ndarray | None, next_mask: np.ndarray | None) -> bool:
    """Do the next depth's trees scan mostly features they scan at this one
    (at most SUBTRACTION_MAX_NEW_FEATURES of their (tree, feature) pairs
    new)? Masks as ``tree_feature_masks`` holds them (None: every feature)."""
    if next_mask is None:
        return mask is None
    used = np.count_nonzero(next_mask)
    if mask is None or used == 0:
        return True
    return np.count_nonzero(next_mask & ~mask) <= SUBTRACTION_MAX_NEW_FEATURES * used


def tree_uses_feature_table(feature_mask, n_features: int, pack_size: int) -> np.ndarray:
    """(n_features, pack_size) uint8: may tree t split on the depth's feature k?"""
    if feature_mask is None:
        return np.ones((n_features, pack_size), dtype=np.uint8)
    return np.ascontiguousarray(feature_mask.T, dtype=np.uint8)


def gradient_variance(sum_g: np.ndarray, sum_g2: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Per-row variance of each slot's gradients (0 for an empty slot)."""
    n = np.maximum(counts, 1)
    mean = sum_g / n
    return np.maximum(sum_g2 / n - mean * mean, 0.0)


def _split_level(backend, data, slot_tree, pack_size, counts, slot_variance, features,
                 feature_mask, params, level, keep_for_children=False, constraints=None):
    """Find the best split of every frontier slot, fill ``level`` with the
    accepted ones and return their slot indices."""
    # A slot too small for two children of min_samples_leaf rows is not scored.
    slot_open = (counts >= 2 * max(1, params.min_samples_leaf)).astype(np.uint8)
    if not slot_open.any():
        return np.zeros(0, dtype=np.int64)
    tree_uses_feature = tree_uses_feature_table(feature_mask, len(features), pack_size)
    features = np.ascontiguousarray(features, dtype=np.int32)
    if slot_variance is not None:
        slot_variance = np.ascontiguousarray(slot_variance, dtype=np.float64)
    is_category = (np.zeros(len(features), dtype=bool) if data.categorical is None
                   else data.categorical[features])
    if is_category.any():
        # Thresholds on the numeric features, category sets on the others;
        # each side scores its own columns of the constraints.
        numeric, category = np.flatnonzero(~is_category), np.flatnonzero(is_category)
        best = _numeric_best(backend, slot_tree, slot_open, features[numeric],
                             tree_uses_feature[numeric], slot_variance, params,
                             keep_for_children, _constraint_columns(constraints, numeric))
        found = backend.find_category_splits(
            slot_tree, slot_open, features[category],
            np.ascontiguousarray(tree_uses_feature[category]), slot_variance, params,
            constraints=_constraint_columns(constraints, category))
        category_wins = _category_wins(best, features[numeric], found, features[category])
        # (numeric may be empty: every candidate feature categorical)
        column = np.full(len(best.column), -1, dtype=np.int64)
        has_numeric = best.column >= 0
        column[has_numeric] = numeric[best.column[has_numeric]]
        column[category_wins] = category[found["column"][category_wins]]
        score = np.where(category_wins, found["score"], best.score)
        gain = np.where(category_wins, found["gain"], best.gain)
        missing_left = np.where(category_wins, found["missing_left"], best.missing_left)
    else:
        best = _numeric_best(backend, slot_tree, slot_open, features, tree_uses_feature,
                             slot_variance, params, keep_for_children, constraints)
        column, score, gain, missing_left = best.column, best.score, best.gain, \
            best.missing_left
        category_wins = None
    candidates = np.flatnonzero(column >= 0)
    # docs/des.md (acceptance): split only if DES > 0 and the pooled gain > min_split_gain.
    accept = (score[candidates] > 0) & (gain[candidates] > params.min_split_gain)
    split_slots = candidates[accept]
    split_feature = features[column[split_slots]]
    split_threshold = best.threshold[split_slots] if len(best.threshold) else \
        np.zeros(len(split_slots), dtype=np.int32)
    level["feature"][split_slots] = split_feature
    level["threshold_bin"][split_slots] = split_threshold
    level["missing_left"][split_slots] = missing_left[split_slots]
    level["threshold"][split_slots] = data.raw_threshold(split_feature, split_threshold)
    level["gain"][split_slots] = gain[split_slots]
    level["des_score"][split_slots] = score[split_slots]
    if category_wins is not None:
        by_category = split_slots[category_wins[split_slots]]
        # A set split has no threshold: -1 / -inf send every non-missing
        # value right for a reader that ignores sets (the routing's first step).
        level["threshold_bin"][by_category] = -1
        level["threshold"][by_category] = -np.inf
        level["category_words"][by_category] = pack_category_words(
            found["left_categories"][by_category], level["category_words"].shape[1])
    return split_slots


def _numeric_best(backend, slot_tree, slot_open, features, tree_uses_feature, slot_variance,
                  params, keep_for_children, constraints):
    """The backend's best threshold split per slot (an empty result without features)."""
    from packboost.backends.interface import BestSplits

    if len(features) == 0:
        n_slots = len(slot_tree)
        return BestSplits(column=np.full(n_slots, -1, dtype=np.int64),
                          score=np.full(n_slots, -np.inf), gain=np.zeros(n_slots),
                          threshold=np.zeros(n_slots, dtype=np.int32),
                          missing_left=np.zeros(n_slots, dtype=np.uint8))
    return backend.find_splits(slot_tree, slot_open, np.ascontiguousarray(features),
                               np.ascontiguousarray(tree_uses_feature), slot_variance,
                               params.split, keep_for_children=keep_for_children,
                               constraints=constraints)


def _constraint_columns(constraints, columns):
    """The depth's constraints restricted to some of its candidate features."""
    if constraints is None:
        return None
    restricted = dict(constraints)
    if "feature_monotone" in restricted:
        restricted["feature_monotone"] = np.ascontiguousarray(
            restricted["feature_monotone"][columns])
    if "slot_allows_feature" in restricted:
        restricted["slot_allows_feature"] = np.ascontiguousarray(
            restricted["slot_allows_feature"][:, columns])
    return restricted


def _category_wins(best, numeric_features, found, category_features) -> np.ndarray:
    """Per slot: does the category split beat the threshold split? The
    higher score; a tie goes to the lower feature (docs/des.md §9)."""
    has_category = found["column"] >= 0
    has_numeric = best.column >= 0
    category_feature = category_features[np.maximum(found["column"], 0)]
    numeric_feature = (numeric_features[np.maximum(best.column, 0)] if len(numeric_features)
                       else np.zeros(len(best.column), dtype=np.int32))
    better = (found["score"] > best.score) | ((found["score"] == best.score)
                                              & (category_feature < numeric_feature))
    return has_category & (~has_numeric | better)


def pack_category_words(left_categories: np.ndarray, n_words: int) -> np.ndarray:
    """(n, width) 0/1 category flags as (n, n_words) uint32 bitsets: code c
    is bit c % 32 of word c // 32."""
    n, width = left_categories.shape
    padded = np.zeros((n, 32 * n_words), dtype=np.uint64)
    padded[:, :min(width, 32 * n_words)] = left_categories[:, :32 * n_words]
    bits = padded.reshape(n, n_words, 32) << np.arange(32, dtype=np.uint64)
    return bits.sum(axis=2).astype(np.uint32)


def unpack_category_words(words: np.ndarray, width: int) -> np.ndarray:
    """The inverse of :func:`pack_category_words`: (n, width) uint8 flags."""
    words = np.asarray(words, dtype=np.uint64)
    bits = (words[:, :, None] >> np.arange(32, dtype=np.uint64)) & np.uint64(1)
    return bits.reshape(len(words), -1)[:, :width].astype(np.uint8)


def _category_routes(data, level, split_slots, left_child_slot) -> dict:
    """What the backend needs to route by category set: per next slot, the
    feature of the set split whose right child it is (-1: none) and the set."""
    n_next = 2 * len(split_slots)
    width = int(np.max(data.n_bins[data.categorical])) + 1
    child_feature = np.full(n_next, -1, dtype=np.int32)
    child_left_set = np.zeros((n_next, width), dtype=np.uint8)
    feature = level["feature"][split_slots]
    by_category = data.categorical[feature]
    right = left_child_slot[split_slots][by_category] + 1
    child_feature[right] = feature[by_category]
    child_left_set[right] = unpack_category_words(
        level["category_words"][split_slots][by_category], width)
    return dict(child_feature=child_feature, child_left_set=child_left_set)
