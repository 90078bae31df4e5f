"""The shard kernels of distributed training (packboost._distributed) against
NumPy oracles."""

import numpy as np
import pytest

from packboost import _distributed


def era_histograms_oracle(X_binned, gradients, hessians, node_of_row, row_era, n_eras,
                          slot_tree, slot_open, features, tree_uses_feature, width):
    hist = np.zeros((len(slot_tree), len(features), n_eras, width, 3))
    era_rows = np.zeros((len(slot_tree), n_eras))
    for row in range(node_of_row.shape[0]):
        for tree in range(node_of_row.shape[1]):
            slot = node_of_row[row, tree]
            if slot < 0 or not slot_open[slot]:
                continue
            era_rows[slot, row_era[row]] += 1
            for position, feature in enumerate(features):
                if tree_uses_feature[position, tree]:
                    cell = hist[slot, position, row_era[row], X_binned[feature, row]]
                    cell += (gradients[row], hessians[row], 1.0)
    return hist, era_rows


@pytest.mark.parametrize("n_rows,n_eras,n_threads", [(1, 1, 1), (1, 3, 4), (57, 5, 1),
                                                     (57, 5, 3), (300, 2, 2)])
def test_era_histograms_match_the_oracle(n_rows, n_eras, n_threads):
    rng = np.random.default_rng(n_rows * 10 + n_threads)
    n_features, pack_size, n_slots, width = 5, 3, 7, 4
    X_binned = rng.integers(0, width, (n_features, n_rows)).astype(np.uint8)
    # grid values (multiples of 1/64): exact in any order
    gradients = rng.integers(-64, 64, n_rows) / 64.0
    hessians = rng.integers(1, 64, n_rows) / 64.0
    row_era = np.sort(rng.integers(0, n_eras, n_rows)).astype(np.int32)  # some eras empty
    node_of_row = rng.integers(-2, n_slots, (n_rows, pack_size)).astype(np.int32)
    slot_tree = np.sort(rng.integers(0, pack_size, n_slots)).astype(np.int32)
    slot_open = (rng.random(n_slots) < 0.7).astype(np.uint8)
    features = np.array([0, 2, 3], dtype=np.int32)
    tree_uses_feature = (rng.random((len(features), pack_size)) < 0.7).astype(np.uint8)
    args = (X_binned, gradients, hessians, node_of_row, row_era, n_eras, slot_tree,
            slot_open, features, tree_uses_feature, width)
    hist, era_rows = _distributed.era_histograms(*args, n_threads)
    expected_hist, expected_rows = era_histograms_oracle(*args)
    np.testing.assert_array_equal(hist, expected_hist)
    np.testing.assert_array_equal(era_rows, expected_rows)
