"""The fitted trees: struct-of-arrays, all trees of a model concatenated.

Every tree is a set of nodes; node ``i`` of the model is described by the
``i``-th entry of each array in :data:`NODE_FIELDS`. Child indices are
absolute (into the concatenated arrays), so a tree is fully named by its root,
``tree_offsets[t]``. Trees are grouped in packs of ``pack_size`` consecutive
trees, one pack per boosting round (DESIGN 2). Leaf ``value`` already carries
the round's shrinkage ``learning_rate / pack_size``, so a raw prediction is
``base_score + sum of the leaf values reached``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from packboost import _predict

# name -> dtype of every per-node array (the model file stores them as is).
NODE_FIELDS: dict[str, np.dtype] = {
    "feature": np.dtype(np.int32),        # split feature, -1 at a leaf
    "threshold_bin": np.dtype(np.int32),  # left = bins <= threshold_bin
    "threshold": np.dtype(np.float64),    # left = raw value <= threshold
    "missing_left": np.dtype(np.uint8),   # where NaN / the missing bin goes
    "left_child": np.dtype(np.int32),
    "right_child": np.dtype(np.int32),
    "value": np.dtype(np.float64),        # shrunk Newton value (used at leaves)
    "gain": np.dtype(np.float64),         # pooled Newton gain of the split
    "des_score": np.dtype(np.float64),    # DES score of the split
    "n_samples": np.dtype(np.int64),      # training rows reaching the node
    "sum_hessian": np.dtype(np.float64),  # their hessian sum
}


def empty_nodes(n_nodes: int = 0) -> dict[str, np.ndarray]:
    """Node arrays of length ``n_nodes``: a leaf with value 0 everywhere."""
    nodes = {name: np.zeros(n_nodes, dtype=dtype) for name, dtype in NODE_FIELDS.items()}
    nodes["feature"].fill(-1)
    nodes["left_child"].fill(-1)
    nodes["right_child"].fill(-1)
    return nodes


@dataclass
class TreeEnsemble:
    """All trees of a model plus what is needed to evaluate them."""

    nodes: dict[str, np.ndarray] = field(default_factory=empty_nodes)
    tree_offsets: np.ndarray = field(default_factory=lambda: np.zeros(1, dtype=np.int64))
    pack_size: int = 1
    base_score: float = 0.0
    # Feature subset K_d drawn for every (round, depth): flat, with offsets.
    layer_features: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int32))
    layer_offsets: np.ndarray = field(default_factory=lambda: np.zeros(1, dtype=np.int64))

    @property
    def n_trees(self) -> int:
        return len(self.tree_offsets) - 1

    @property
    def n_rounds(self) -> int:
        return self.n_trees // self.pack_size

    @classmethod
    def from_packs(cls, packs: list, pack_size: int, base_score: float) -> TreeEnsemble:
        """Concatenate the packs grown by :mod:`packboost.grower`."""
        if not packs:
            return cls(pack_size=pack_size, base_score=base_score)
        nodes = {}
        node_shift = np.cumsum([0] + [len(p.nodes["feature"]) for p in packs[:-1]])
        for name in NODE_FIELDS:
            parts = [p.nodes[name] for p in packs]
            if name in ("left_child", "right_child"):
                parts = [np.where(part >= 0, part + shift, -1).astype(np.int32)
                         for part, shift in zip(parts, node_shift, strict=True)]
            nodes[name] = np.concatenate(parts)
        tree_offsets = np.concatenate(
            [[0]] + [p.tree_offsets[1:] + shift for p, shift in zip(packs, node_shift, strict=True)]
        ).astype(np.int64)
        layer_parts = [feature_set for p in packs for feature_set in p.layer_features]
        layer_offsets = np.cumsum([0] + [len(part) for part in layer_parts]).astype(np.int64)
        layer_features = (np.concatenate(layer_parts).astype(np.int32) if layer_parts
                          else np.zeros(0, dtype=np.int32))
        return cls(nodes=nodes, tree_offsets=tree_offsets, pack_size=pack_size,
                   base_score=base_score, layer_features=layer_features,
                   layer_offsets=layer_offsets)

    def tree_roots(self, n_rounds: int | None = None) -> np.ndarray:
        """Roots of the trees of the first ``n_rounds`` rounds (all by default)."""
        n_trees = self.n_trees if n_rounds is None else n_rounds * self.pack_size
        return np.ascontiguousarray(self.tree_offsets[:n_trees], dtype=np.int64)

    def predict_raw(self, X: np.ndarray, n_threads: int, n_rounds: int | None = None
                    ) -> np.ndarray:
        """Raw scores (before the objective's link) for raw feature values X."""
        out = np.full(X.shape[0], self.base_score, dtype=np.float64)
        nodes = self.nodes
        _predict.predict_raw(X, nodes["feature"], nodes["threshold"], nodes["missing_left"],
                             nodes["left_child"], nodes["right_child"], nodes["value"],
                             self.tree_roots(n_rounds), out, n_threads)
        return out
