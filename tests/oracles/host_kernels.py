"""The CUDA backend's device contract run on the host: the oracle of its kernels.

:class:`HostKernels` has the methods of ``packboost._cuda.CudaContext`` (one
per device step), so :class:`packboost.backends.cuda.CudaBackend` -- and
through it the one driver, ``packboost.grower.grow_pack`` -- runs on it
without a GPU. Integer parts (histograms, node sums) are exact NumPy sums, so
they equal the device's whatever the order of its atomics; tile scoring runs
the GPU's warp algorithm lane by lane (``_cuda_emulate``, built from
csrc/pbc_split.h). Small data only.
"""

from __future__ import annotations

import numpy as np


def quantize(values: np.ndarray, scale: float) -> np.ndarray:
    """``round(values * scale)`` as int64, half to even: the device's quantize
    kernel (exact for values on the fixed-point grid of ``scale``)."""
    return np.rint(np.asarray(values, dtype=np.float64) * scale).astype(np.int64)


def naive_scale(bound_bits: int, magnitude: float) -> float:
    """The largest power of two ``s`` with ``magnitude * s <= 2**bound_bits``
    (1 for 0), by exact comparisons with powers of two; FloatingPointError
    where it is not finite or beyond float64 (the fixed-point grid's rule)."""
    from fractions import Fraction

    if not np.isfinite(magnitude):
        raise FloatingPointError("gradients or hessians are not finite")
    if magnitude == 0.0:
        return 1.0
    exact, exponent = Fraction(magnitude), 0
    while exact * Fraction(2) ** exponent > 2**bound_bits:
        exponent -= 1
    while exact * Fraction(2) ** (exponent + 1) <= 2**bound_bits:
        exponent += 1
    if exponent > 1023:
        raise FloatingPointError("gradients or hessians too small for the fixed-point grid")
    return 2.0**exponent


class HostKernels:
    """The device contract on the host: the oracle of libpackboost_cuda's kernels.

    Integer parts (histograms, node sums) are exact NumPy sums, so they equal
    the device's whatever its atomics' order; scoring runs the GPU's warp
    algorithm lane by lane (``oracles.cuda_emulate()``). Small data only.
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
        # Every row in its tree's root, unsampled (-2 - tree), then the samples.
        self.node_of_row = np.empty((self.data.n_rows, self.pack_size), dtype=np.int32)
        self.node_of_row[:] = -2 - np.arange(self.pack_size, dtype=np.int32)
        self.leaf_of_row = np.full((self.data.n_rows, self.pack_size), -1, dtype=np.int32)
        for tree, rows in enumerate(tree_samples or ()):
            self.node_of_row[rows, tree] = tree

    def start_samples(self, era_keep, kept_before, row_keep):
        """Each tree's rows from its flags, row by row (pbc_start_samples)."""
        offsets = self.data.era_offsets
        self.node_of_row = np.empty((self.data.n_rows, self.pack_size), dtype=np.int32)
        self.leaf_of_row = np.full((self.data.n_rows, self.pack_size), -1, dtype=np.int32)
        for row in range(self.data.n_rows):
            era = int(self.data.row_era[row])
            for tree in range(self.pack_size):
                sampled = bool(era_keep[tree, era])
                if sampled and row_keep[tree] is not None:
                    sampled = bool(row_keep[tree][kept_before[tree, era] + row - offsets[era]])
                self.node_of_row[row, tree] = tree if sampled else -2 - tree

    def setup_device_round(self, objective, parameter, y, sample_weight, raw_prediction,
                           hessians, gradient_multiplier, scale_hessians, count_bits,
                           squared_bound_bits):
        self.device = dict(objective=objective, parameter=parameter, y=np.array(y),
                           weight=None if sample_weight is None else np.array(sample_weight),
                           multiplier=gradient_multiplier, count_bits=count_bits,
                           squared_bound_bits=squared_bound_bits)
        self.raw_prediction = np.array(raw_prediction, dtype=np.float64)
        self.hessians = quantize(hessians, scale_hessians)
        self.scale_hessians = scale_hessians

    def device_gradients(self):
        """The round on the device, naively: the objective's formula, each
        era's sum of |g| added row by row, the grid's scales by exact
        comparisons with powers of two (cuda/round.cu's contract)."""
        setup = self.device
        g = self.raw_prediction - setup["y"]
        if setup["objective"] == "huber":
            g = np.clip(g, -setup["parameter"], setup["parameter"])
        if setup["weight"] is not None:
            g = g * setup["weight"]
        g = g * setup["multiplier"]
        offsets = self.data.era_offsets
        era_sums = []
        for era in range(self.data.n_eras):
            total = 0.0
            for value in g[offsets[era]:offsets[era + 1]].tolist():
                total += abs(value)
            era_sums.append(total)
        total = 0.0
        for era_sum in era_sums:
            total += era_sum
        scale_g = min(naive_scale(62 - setup["count_bits"] - 1, max(era_sums, default=0.0)),
                      naive_scale(51, total))
        self.gradients = quantize(g, scale_g)
        peak = float(np.max(np.abs(self.gradients), initial=0)) / scale_g
        scale_g2 = naive_scale(setup["squared_bound_bits"], peak * peak)
        rounded = self.gradients / scale_g
        self.gradients_squared = quantize(rounded * rounded, scale_g2)
        self.scale = (scale_g, self.scale_hessians)
        self.round_scale_values = (scale_g, self.scale_hessians, scale_g2)

    def round_scales(self):
        return self.round_scale_values

    def read_fixed_gradients(self):
        return self.gradients.copy(), self.hessians.copy(), self.gradients_squared.copy()

    def read_predictions(self, first=0, stride=1):
        return self.raw_prediction[first::stride].copy()

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
        from oracles import cuda_emulate

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

    def route_rows(self, split_feature, split_threshold, split_missing_left, left_child_slot,
                   slot_node):
        data = self.data
        for tree in range(self.pack_size):
            codes = self.node_of_row[:, tree]
            rows = np.flatnonzero(codes != -1)
            sampled = codes[rows] >= 0
            slot = np.where(sampled, codes[rows], -2 - codes[rows])
            feature = split_feature[slot]
            closed = feature < 0
            self.leaf_of_row[rows[closed], tree] = slot_node[slot[closed]]
            self.node_of_row[rows[closed], tree] = -1
            rows, slot, feature = rows[~closed], slot[~closed], feature[~closed]
            sampled = sampled[~closed]
            bins = data.X_binned[feature, rows].astype(np.int64)
            missing = bins == data.n_bins[feature]
            left = np.where(missing, split_missing_left[slot] != 0,
                            bins <= split_threshold[slot])
            child = left_child_slot[slot] + np.where(left, 0, 1)
            self.node_of_row[rows, tree] = np.where(sampled, child, -2 - child)

    def read_node_of_row(self):
        return self.node_of_row.copy()

    def write_node_of_row(self, node_of_row):
        self.node_of_row = np.array(node_of_row, dtype=np.int32, copy=True)

    def add_leaf_values(self, value, tree_roots, out):
        if out is None:
            out = self.raw_prediction
        for tree in range(self.pack_size):
            out += value[tree_roots[tree] + self.leaf_of_row[:, tree]]
