"""TreeSHAP contributions of an ensemble: which kernel explains which tree.

Two exact kernels in :mod:`packboost._shap` give the same values:

* the tabled one (fast): per leaf, a table of its path features'
  contributions for every pattern of which of their splits a row satisfies,
  filled once per call; a row then costs O(leaves x depth) per tree. Tables
  hold ``2^d x d`` numbers per leaf with ``d`` distinct features on its path,
  so trees with long paths of distinct features do not fit;
* the recursive one (Lundberg et al.'s path algorithm), O(leaves x depth^2)
  per row and tree, for those.

Trees are tabled in chunks whose tables stay under :data:`TABLE_BUDGET_ENTRIES`.
"""

from __future__ import annotations

import numpy as np

from packboost import _shap

# A tree is tabled when each leaf has at most this many distinct path features.
MAX_TABLED_PATH_FEATURES = 12
# Table entries (float64) of the trees tabled at once: 64 MiB.
TABLE_BUDGET_ENTRIES = 1 << 23


class _TreePaths:
    """Every leaf's path in one tree: split nodes, sides, distinct features."""

    def __init__(self, nodes, root: int):
        feature, left, right = nodes["feature"], nodes["left_child"], nodes["right_child"]
        cover = nodes["n_samples"]
        self.leaves = []  # (node, value, features, zeros)
        self.splits = []  # (node, bit of its feature on its path), parents first
        self.expected = 0.0
        stack = [(int(root), [], [])]
        while stack:  # depth first, so a node is listed before its children
            node, features, zeros = stack.pop()
            split = int(feature[node])
            if split < 0:
                self.leaves.append((node, float(nodes["value"][node]), features, zeros))
                self.expected += float(nodes["value"][node]) * cover[node] / cover[root]
                continue
            bit = features.index(split) if split in features else len(features)
            self.splits.append((node, bit))
            for child in (int(left[node]), int(right[node])):
                share = cover[child] / cover[node]
                if bit < len(features):
                    child_features = features
                    child_zeros = list(zeros)
                    child_zeros[bit] *= share
                else:
                    child_features = [*features, split]
                    child_zeros = [*zeros, share]
                stack.append((child, child_features, child_zeros))
        self.max_path_features = max(len(leaf[2]) for leaf in self.leaves)
        self.table_entries = sum(len(leaf[2]) << len(leaf[2]) for leaf in self.leaves)


def contributions(ensemble, X: np.ndarray, n_threads: int, n_rounds=None,
                  start_round: int = 0) -> np.ndarray:
    """(n_rows, n_features + 1) contributions; the last column is the expected value."""
    nodes = ensemble.nodes
    roots = ensemble.tree_roots(n_rounds, start_round)
    out = np.zeros((X.shape[0], X.shape[1] + 1), dtype=np.float64)
    out[:, -1] = ensemble.base_score
    if X.shape[0] == 0 or len(roots) == 0:
        return out
    cover = np.ascontiguousarray(nodes["n_samples"], dtype=np.int64)
    node_end = dict(zip(ensemble.tree_offsets[:-1].tolist(), ensemble.tree_offsets[1:].tolist(),
                        strict=True))
    recursive, chunk, chunk_entries = [], [], 0
    expected = 0.0
    for root in roots.tolist():
        paths = _TreePaths(nodes, root)
        if (paths.max_path_features > MAX_TABLED_PATH_FEATURES
                or paths.table_entries > TABLE_BUDGET_ENTRIES):
            recursive.append(root)
            continue
        expected += paths.expected
        if chunk and chunk_entries + paths.table_entries > TABLE_BUDGET_ENTRIES:
            _run_tabled(nodes, chunk, X, out, n_threads)
            chunk, chunk_entries = [], 0
        chunk.append((root, node_end[root], paths))
        chunk_entries += paths.table_entries
    if chunk:
        _run_tabled(nodes, chunk, X, out, n_threads)
    out[:, -1] += expected
    if recursive:
        roots = np.array(recursive, dtype=np.int64)
        _shap.contributions(X, nodes["feature"], nodes["threshold"], nodes["missing_left"],
                            nodes["left_child"], nodes["right_child"], nodes["value"], cover,
                            roots, ensemble.max_depth(roots), out, n_threads,
                            category_words=nodes.get("category_words"),
                            threshold_bin=nodes["threshold_bin"])
    return out


def _run_tabled(nodes, trees: list, X: np.ndarray, out: np.ndarray, n_threads: int) -> None:
    split_first, split_nodes, split_bit = [0], [], []
    tree_leaves, leaf_node = [0], []
    leaf_first, path_features, path_zero, leaf_value, table_first = [0], [], [], [], []
    n_entries = 0
    for _, _, paths in trees:
        for node, bit in paths.splits:
            split_nodes.append(node)
            split_bit.append(bit)
        split_first.append(len(split_nodes))
        for node, value, features, zeros in paths.leaves:
            leaf_node.append(node)
            path_features.extend(features)
            path_zero.extend(zeros)
            leaf_first.append(len(path_features))
            leaf_value.append(value)
            table_first.append(n_entries)
            n_entries += len(features) << len(features)
        tree_leaves.append(len(leaf_value))
    as_int64 = lambda values: np.array(values, dtype=np.int64)  # noqa: E731
    table = np.empty(n_entries, dtype=np.float64)
    _shap.fill_leaf_tables(as_int64(leaf_first), as_int64(path_features),
                           np.array(path_zero, dtype=np.float64),
                           np.array(leaf_value, dtype=np.float64), as_int64(table_first),
                           table, n_threads)
    _shap.tabled_contributions(X, nodes["feature"], nodes["threshold"], nodes["missing_left"],
                               nodes["left_child"], nodes["right_child"],
                               as_int64([root for root, _, _ in trees]),
                               as_int64([end for _, end, _ in trees]),
                               as_int64(split_first), as_int64(split_nodes),
                               np.array(split_bit, dtype=np.int32),
                               as_int64(tree_leaves), as_int64(leaf_node),
                               as_int64(leaf_first), as_int64(path_features),
                               as_int64(table_first), table, out, n_threads,
                               category_words=nodes.get("category_words"),
                               threshold_bin=nodes["threshold_bin"])
