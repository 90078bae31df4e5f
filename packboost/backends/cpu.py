"""The CPU backend: the Cython/OpenMP kernels (docs/cpu-kernels.md).

Rows stay in their era-sorted order for good; ``node_of_row[row, tree]``
(packboost/_partition.pyx) says which slot each row is in, and
``leaf_of_row[row, tree]`` collects every training row's leaf as the pack
grows, so that the prediction update is a lookup.
"""

from __future__ import annotations

import numpy as np

from packboost import _partition, _predict, _split
from packboost.backends.interface import BestSplits, SlotSums


class CpuBackend:
    """:class:`packboost.backends.interface.Backend` on this machine's cores.

    ``histogram_budget_bytes`` caps one thread's histogram buffer (n_eras x
    slots x bins cells; past it the slots of a depth are histogrammed in
    groups, one pass each); ``features_per_pass`` features are histogrammed
    per pass over the rows (a row's gradient and slots are read once per
    block of features). Neither changes the trees.
    """

    def __init__(self, data, pack_size: int, n_threads: int, *,
                 histogram_budget_bytes: int = _split.DEFAULT_HISTOGRAM_BUDGET_BYTES,
                 features_per_pass: int = _split.DEFAULT_FEATURES_PER_PASS):
        self.data = data
        self.pack_size = pack_size
        self.n_threads = n_threads
        self.histogram_budget_bytes = histogram_budget_bytes
        self.features_per_pass = features_per_pass
        self.node_of_row = np.empty((data.n_rows, pack_size), dtype=np.int32)
        self.leaf_of_row = np.empty((data.n_rows, pack_size), dtype=np.int32)
        self.fixed = None

    def close(self) -> None:
        self.node_of_row = self.leaf_of_row = self.fixed = None

    def begin_pack(self, fixed, tree_samples: list) -> None:
        if len(tree_samples) != self.pack_size:
            raise ValueError(f"expected {self.pack_size} tree samples, got {len(tree_samples)}")
        self.fixed = fixed
        for tree, rows in enumerate(tree_samples):
            _partition.start_tree(self.node_of_row, rows, tree, self.n_threads)

    def slot_sums(self, n_slots: int) -> SlotSums:
        fixed = self.fixed
        return SlotSums(*_partition.slot_sums(fixed.gradients, fixed.hessians, self.node_of_row,
                                              n_slots, self.n_threads))

    def find_splits(self, slot_tree, slot_open, features, tree_uses_feature, slot_variance,
                    split_params) -> BestSplits:
        data = self.data
        rows, era_offsets = _partition.active_rows(self.node_of_row, slot_open, data.row_era,
                                                   data.n_eras)
        found = _split.find_best_splits(
            data.X_binned, self.fixed, rows, era_offsets, self.node_of_row, slot_tree,
            slot_open, features, tree_uses_feature, data.n_bins, split_params, self.n_threads,
            self.histogram_budget_bytes, self.features_per_pass, slot_variance)
        column = _split.best_candidate_per_slot(found["score"], found["found"])
        slots = np.arange(len(column))
        chosen = np.maximum(column, 0)
        has = column >= 0
        return BestSplits(
            column=column,
            score=np.where(has, found["score"][slots, chosen], -np.inf),
            gain=np.where(has, found["gain"][slots, chosen], 0.0),
            threshold=np.where(has, found["threshold"][slots, chosen], 0).astype(np.int32),
            missing_left=np.where(has, found["missing_left"][slots, chosen], 0).astype(np.uint8))

    def route_rows(self, split_feature, split_threshold, split_missing_left, left_child_slot,
                   slot_node) -> None:
        data = self.data
        _partition.route_rows(data.X_binned, self.node_of_row, split_feature, split_threshold,
                              split_missing_left, left_child_slot, data.n_bins, slot_node,
                              self.leaf_of_row, self.n_threads)

    def add_pack(self, pack, raw_prediction: np.ndarray) -> None:
        _predict.add_leaf_values(self.leaf_of_row, pack.nodes["value"],
                                 np.ascontiguousarray(pack.tree_offsets[:-1]), raw_prediction,
                                 self.n_threads)
