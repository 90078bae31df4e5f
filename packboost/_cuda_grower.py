"""Grow one pack on the GPU: the CUDA twin of :func:`packboost.grower.grow_pack`.

Python decides, the device computes (DESIGN 4). The frontier bookkeeping --
slots, child numbering, which splits are accepted, the per-pack node arrays
-- is the CPU grower's, line for line; what differs is where the data lives.
The binned matrix, the round's gradients and ``node_of_row`` stay on the
device for the whole fit; per depth the host sends the depth's feature subset
and receives one best split per slot (a few small arrays), so there is no
host round trip per node.

The device contract (one method per kernel step) is implemented twice:

* ``packboost._cuda.CudaContext``: libpackboost_cuda.so on a GPU;
* :class:`HostKernels`: NumPy plus the GPU's own scoring code run on the host
  (``packboost._cuda_emulate``, from csrc/pbc_split.h). It is the oracle of
  the device kernels and lets a machine without a GPU test this driver.

Fixed point (DESIGN 4): gradients and hessians are quantised once per round,
``round(x * scale)`` with ``scale`` a power of two chosen so that no sum of a
round's values can overflow int64; every device sum is then an exact integer
sum, the same whatever the order of atomic additions, and a sum of integer
valued reals (counts, unit hessians) is exact.
"""

from __future__ import annotations

import math

import numpy as np

from packboost import _predict
from packboost.ensemble import empty_nodes
from packboost.grower import (
    Pack,
    assemble_pack,
    gradient_variance,
    leaf_values,
    number_children,
    tree_uses_feature_table,
)

# |any sum of a round's quantised values| < 2**FIXED_POINT_BITS (+ rounding).
FIXED_POINT_BITS = 62


def peak_magnitude(values: np.ndarray) -> float:
    """``max |values|`` (0 for none), without a temporary array."""
    return max(float(np.max(values)), -float(np.min(values))) if len(values) else 0.0


def fixed_point_scale(values: np.ndarray | None = None, *, peak: float | None = None,
                      n_values: int | None = None) -> float:
    """Largest power of two ``s`` with ``n_values * peak * s <= 2**62``.

    ``peak`` and ``n_values`` default to ``max|values|`` and ``len(values)``.
    """
    if peak is None:
        peak = peak_magnitude(values)
    if n_values is None:
        n_values = len(values)
    if not math.isfinite(peak):
        raise FloatingPointError("gradients or hessians are not finite")
    if peak == 0.0 or n_values == 0:
        return 1.0
    exponent = math.floor(FIXED_POINT_BITS - math.log2(peak) - math.log2(n_values))
    return math.ldexp(1.0, max(-1020, min(1020, exponent)))


def quantize(values: np.ndarray, scale: float) -> np.ndarray:
    """``round(values * scale)`` as int64, half to even (scale from
    :func:`fixed_point_scale`): what the device's quantize kernel computes."""
    return np.rint(np.asarray(values, dtype=np.float64) * scale).astype(np.int64)


def grow_pack_device(kernels, data, gradients: np.ndarray, hessians: np.ndarray,
                     tree_samples: list, layer_features: list, tree_feature_masks: list,
                     params, timings: list | None = None) -> Pack:
    """Grow ``len(tree_samples)`` trees in lockstep with ``kernels``.

    Arguments as :func:`packboost.grower.grow_pack`. With ``timings``, the
    kernels' timers after each depth are appended to it (a dict per depth).
    """
    pack_size = len(tree_samples)
    gradients = np.ascontiguousarray(gradients, dtype=np.float64)
    peak = peak_magnitude(gradients)
    scale_g = fixed_point_scale(peak=peak, n_values=len(gradients))
    scale_h = fixed_point_scale(hessians)
    # Sums of g * g give a node's gradient variance (era_std="between"); max g^2 = peak^2.
    scale_g2 = fixed_point_scale(peak=peak * peak, n_values=len(gradients))
    kernels.begin_round(gradients, np.ascontiguousarray(hessians, dtype=np.float64),
                        list(tree_samples), scale_g, scale_h, scale_g2)

    slot_tree = np.arange(pack_size, dtype=np.int32)
    slot_local = np.zeros(pack_size, dtype=np.int32)
    next_local = np.ones(pack_size, dtype=np.int64)
    levels = []
    for depth in range(params.max_depth + 1):
        n_slots = len(slot_tree)
        if n_slots == 0:
            break
        fixed_g, fixed_h, counts, fixed_g2 = kernels.slot_sums(n_slots)
        # Powers of two: x / scale is the device's x * (1 / scale), exactly.
        sum_g = fixed_g.astype(np.float64) / scale_g
        sum_h = fixed_h.astype(np.float64) / scale_h
        sum_g2 = fixed_g2.astype(np.float64) / scale_g2
        level = empty_nodes(n_slots)
        level["value"][:] = params.shrinkage * leaf_values(
            sum_g, sum_h, params.reg_lambda, params.max_delta_step)
        level["n_samples"][:] = counts
        level["sum_hessian"][:] = sum_h

        split_slots = np.zeros(0, dtype=np.int64)
        if depth < params.max_depth:
            split_slots = _split_level(kernels, data, slot_tree, counts,
                                       gradient_variance(sum_g, sum_g2, counts), pack_size,
                                       layer_features[depth], tree_feature_masks[depth],
                                       params, level)
        split_trees, left_local = number_children(level, split_slots, slot_tree, next_local)
        levels.append((slot_tree, slot_local, level))
        if len(split_slots) == 0:
            if timings is not None:
                timings.append(kernels.read_timers(reset=True))
            break

        left_child_slot = np.full(n_slots, -1, dtype=np.int32)
        left_child_slot[split_slots] = 2 * np.arange(len(split_slots), dtype=np.int32)
        kernels.route_rows(np.ascontiguousarray(level["feature"], dtype=np.int32),
                           np.ascontiguousarray(level["threshold_bin"], dtype=np.int32),
                           np.ascontiguousarray(level["missing_left"], dtype=np.uint8),
                           left_child_slot)
        if timings is not None:
            timings.append(kernels.read_timers(reset=True))
        slot_tree = np.repeat(split_trees, 2).astype(np.int32)
        slot_local = np.column_stack([left_local, left_local + 1]).ravel().astype(np.int32)

    return assemble_pack(levels, next_local, layer_features)


def _split_level(kernels, data, slot_tree, counts, slot_variance, pack_size, features,
                 feature_mask, params, level):
    """``grower._split_level`` with the device's per-slot best split."""
    slot_open = (counts >= 2 * max(1, params.min_samples_leaf)).astype(np.uint8)
    if not slot_open.any():
        return np.zeros(0, dtype=np.int64)
    tree_uses_feature = tree_uses_feature_table(feature_mask, len(features), pack_size)
    features = np.ascontiguousarray(features, dtype=np.int32)
    best = kernels.find_splits(np.ascontiguousarray(slot_tree, dtype=np.int32), slot_open,
                               features, tree_uses_feature,
                               np.ascontiguousarray(slot_variance, dtype=np.float64),
                               params.split)
    candidates = np.flatnonzero(best["column"] >= 0)
    column = best["column"][candidates]
    score = best["score"][candidates]
    gain = best["gain"][candidates]
    # DESIGN 1 (Choice): split only if DES > 0 and the pooled gain > min_split_gain.
    accept = (score > 0) & (gain > params.min_split_gain)
    split_slots = candidates[accept]
    column = column[accept]

    split_feature = features[column]
    split_threshold = best["threshold"][split_slots]
    level["feature"][split_slots] = split_feature
    level["threshold_bin"][split_slots] = split_threshold
    level["missing_left"][split_slots] = best["missing_left"][split_slots]
    level["threshold"][split_slots] = data.raw_threshold(split_feature, split_threshold)
    level["gain"][split_slots] = gain[accept]
    level["des_score"][split_slots] = score[accept]
    return split_slots


class HostKernels:
    """The device contract on the host: the oracle of libpackboost_cuda's kernels.

    Integer parts (histograms, node sums) are exact NumPy sums, so they equal
    the device's whatever its atomics' order; scoring runs the GPU's warp
    algorithm lane by lane (``packboost._cuda_emulate``). Small data only.
    """

    def __init__(self, data, pack_size: int):
        self.data = data
        self.pack_size = pack_size
        self.node_of_row = np.full((data.n_rows, pack_size), -1, dtype=np.int32)
        self.max_width = int(np.max(data.n_bins)) + 1 if data.n_features else 1

    def close(self) -> None:
        pass

    def read_timers(self, reset: bool = True) -> dict:
        return {}

    def begin_round(self, gradients, hessians, tree_samples, scale_g, scale_h, scale_g2):
        self.gradients = quantize(gradients, scale_g)
        self.hessians = quantize(hessians, scale_h)
        self.gradients_squared = quantize(np.asarray(gradients) * gradients, scale_g2)
        self.scale = (scale_g, scale_h)
        self.node_of_row = np.full((self.data.n_rows, self.pack_size), -1, dtype=np.int32)
        for tree, rows in enumerate(tree_samples):
            self.node_of_row[rows, tree] = tree

    def slot_sums(self, n_slots: int):
        sums = np.zeros((4, n_slots), dtype=np.int64)
        for tree in range(self.pack_size):
            slots = self.node_of_row[:, tree]
            rows = np.flatnonzero(slots >= 0)
            np.add.at(sums[0], slots[rows], self.gradients[rows])
            np.add.at(sums[1], slots[rows], self.hessians[rows])
            np.add.at(sums[2], slots[rows], 1)
            np.add.at(sums[3], slots[rows], self.gradients_squared[rows])
        return sums[0], sums[1], sums[2], sums[3]

    def find_splits(self, slot_tree, slot_open, features, tree_uses_feature, slot_variance,
                    params):
        from oracles import cuda_emulate  # tests/oracles/ (on sys.path under pytest)
        _cuda_emulate = cuda_emulate()

        data, width = self.data, self.max_width
        n_slots, n_candidates = len(slot_tree), len(features)
        hist = np.zeros((n_candidates, n_slots, data.n_eras, width, 3), dtype=np.int64)
        for position, feature in enumerate(features.tolist()):
            bins = data.X_binned[feature].astype(np.int64)
            for tree in range(self.pack_size):
                if not tree_uses_feature[position, tree]:
                    continue
                slots = self.node_of_row[:, tree]
                rows = np.flatnonzero(slots >= 0)
                rows = rows[slot_open[slots[rows]] != 0]
                cells = hist[position].reshape(-1, 3)
                index = (slots[rows].astype(np.int64) * data.n_eras
                         + data.row_era[rows]) * width + bins[rows]
                np.add.at(cells[:, 0], index, self.gradients[rows])
                np.add.at(cells[:, 1], index, self.hessians[rows])
                np.add.at(cells[:, 2], index, 1)
        tile_open = (slot_open[np.newaxis, :]
                     & tree_uses_feature[:, slot_tree]).astype(np.uint8).ravel()
        tile_bins = np.repeat(np.asarray(data.n_bins, dtype=np.int32)[features], n_slots)
        tiles = _cuda_emulate.score_tiles(
            hist.reshape(n_candidates * n_slots, data.n_eras, width, 3),
            np.ascontiguousarray(tile_bins, dtype=np.int32), tile_open, params, *self.scale,
            gradient_variance=np.tile(np.asarray(slot_variance, dtype=np.float64),
                                      n_candidates))
        # (candidate, slot) tiles -> (slot, candidate); first maximum per slot.
        score = tiles["score"].reshape(n_candidates, n_slots).T
        found = tiles["found"].reshape(n_candidates, n_slots).T
        column = np.full(n_slots, -1, dtype=np.int32)
        for slot in range(n_slots):
            for position in range(n_candidates):
                if found[slot, position] and (
                        column[slot] < 0 or score[slot, position] > score[slot, column[slot]]):
                    column[slot] = position
        chosen = np.maximum(column, 0)
        pick = chosen * n_slots + np.arange(n_slots)
        has = column >= 0
        return dict(column=column,
                    score=np.where(has, tiles["score"][pick], -np.inf),
                    gain=np.where(has, tiles["gain"][pick], 0.0),
                    threshold=np.where(has, tiles["threshold"][pick], 0).astype(np.int32),
                    missing_left=np.where(has, tiles["missing_left"][pick], 0).astype(np.uint8))

    def route_rows(self, split_feature, split_threshold, split_missing_left, left_child_slot):
        data = self.data
        for tree in range(self.pack_size):
            slots = self.node_of_row[:, tree]
            rows = np.flatnonzero(slots >= 0)
            slot = slots[rows]
            feature = split_feature[slot]
            closed = feature < 0
            self.node_of_row[rows[closed], tree] = -1
            rows, slot, feature = rows[~closed], slot[~closed], feature[~closed]
            bins = data.X_binned[feature, rows].astype(np.int64)
            missing = bins == data.n_bins[feature]
            left = np.where(missing, split_missing_left[slot] != 0,
                            bins <= split_threshold[slot])
            self.node_of_row[rows, tree] = left_child_slot[slot] + np.where(left, 0, 1)

    def predict_binned(self, feature, threshold_bin, missing_left, left_child, right_child,
                       value, tree_roots, out):
        total = np.zeros(self.data.n_rows)
        _predict.predict_binned(self.data.X_binned, self.data.n_bins, feature, threshold_bin,
                                missing_left, left_child, right_child, value, tree_roots,
                                total, 1)
        out += total


class DeviceBackend:
    """``booster.train``'s backend: grows packs and updates scores with ``kernels``."""

    def __init__(self, kernels, timings: list | None = None):
        self.kernels = kernels
        self.timings = timings

    @classmethod
    def on_gpu(cls, data, pack_size: int, device: int = 0, timings: list | None = None):
        from packboost._cuda import CudaContext

        kernels = CudaContext(data.X_binned, data.n_bins, data.row_era, data.n_eras,
                              pack_size, device)
        if timings is not None:
            kernels.set_timing(True)
        return cls(kernels, timings)

    def close(self) -> None:
        self.kernels.close()

    def grow_pack(self, data, gradients, hessians, tree_samples, layer_features,
                  tree_feature_masks, params, n_threads) -> Pack:
        depth_times = [] if self.timings is not None else None
        pack = grow_pack_device(self.kernels, data, gradients, hessians, tree_samples,
                                layer_features, tree_feature_masks, params, depth_times)
        if self.timings is not None:
            self.timings.append(depth_times)
        return pack

    def predict_pack_binned(self, data, pack, out, n_threads) -> None:
        nodes = pack.nodes
        self._predict(nodes, pack, out)
        if self.timings:
            # The update belongs to the round just grown: its last depth's entry.
            last_depth = self.timings[-1][-1] if self.timings[-1] else {}
            for name, value in self.kernels.read_timers(reset=True).items():
                last_depth[name] = last_depth.get(name, 0.0) + value

    def _predict(self, nodes, pack, out) -> None:
        self.kernels.predict_binned(
            np.ascontiguousarray(nodes["feature"], dtype=np.int32),
            np.ascontiguousarray(nodes["threshold_bin"], dtype=np.int32),
            np.ascontiguousarray(nodes["missing_left"], dtype=np.uint8),
            np.ascontiguousarray(nodes["left_child"], dtype=np.int32),
            np.ascontiguousarray(nodes["right_child"], dtype=np.int32),
            np.ascontiguousarray(nodes["value"], dtype=np.float64),
            np.ascontiguousarray(pack.tree_offsets[:-1], dtype=np.int64), out)
