"""The fitted trees: struct-of-arrays, all trees of a model concatenated.

Every tree is a set of nodes; node ``i`` of the model is described by the
``i``-th entry of each array in :data:`NODE_FIELDS`. Child indices are
absolute (into the concatenated arrays), so a tree is fully named by its root,
``tree_offsets[t]``. Trees are grouped in packs of ``pack_size`` consecutive
trees, one pack per boosting round (docs/packs.md). Leaf ``value`` already carries
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
    # Round r's subsets are entries round_layer_offsets[r]:round_layer_offsets[r + 1] of
    # layer_offsets' list; None means every round has the same number of depths.
    round_layer_offsets: np.ndarray | None = None

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
            return cls(pack_size=pack_size, base_score=base_score,
                       round_layer_offsets=np.zeros(1, dtype=np.int64))
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
        round_layer_offsets = np.cumsum([0] + [len(p.layer_features) for p in packs]
                                        ).astype(np.int64)
        return cls(nodes=nodes, tree_offsets=tree_offsets, pack_size=pack_size,
                   base_score=base_score, layer_features=layer_features,
                   layer_offsets=layer_offsets, round_layer_offsets=round_layer_offsets)

    # -- rounds ------------------------------------------------------------------

    def _round_layer_offsets(self) -> np.ndarray:
        if self.round_layer_offsets is not None:
            return self.round_layer_offsets
        n_layers = len(self.layer_offsets) - 1
        per_round = n_layers // self.n_rounds if self.n_rounds else 0
        return np.arange(self.n_rounds + 1, dtype=np.int64) * per_round

    def truncate(self, n_rounds: int) -> TreeEnsemble:
        """The model made of the first ``n_rounds`` rounds (a copy)."""
        n_rounds = int(n_rounds)
        if not 0 <= n_rounds <= self.n_rounds:
            raise ValueError(f"n_rounds must be in [0, {self.n_rounds}], got {n_rounds}")
        n_trees = n_rounds * self.pack_size
        n_nodes = int(self.tree_offsets[n_trees])
        nodes = {name: values[:n_nodes].copy() for name, values in self.nodes.items()}
        round_layers = self._round_layer_offsets()
        n_layers = int(round_layers[n_rounds])
        layer_offsets = self.layer_offsets[:n_layers + 1].copy()
        return TreeEnsemble(
            nodes=nodes, tree_offsets=self.tree_offsets[:n_trees + 1].copy(),
            pack_size=self.pack_size, base_score=self.base_score,
            layer_features=self.layer_features[:int(layer_offsets[-1])].copy(),
            layer_offsets=layer_offsets,
            round_layer_offsets=round_layers[:n_rounds + 1].copy())

    def concatenate(self, other: TreeEnsemble) -> TreeEnsemble:
        """This model's rounds followed by ``other``'s (whose base score is dropped).

        Used to continue training: ``other`` was grown on top of this model's
        raw predictions, so the sum of both is the continued model.
        """
        if other.pack_size != self.pack_size:
            raise ValueError(
                f"cannot append rounds of pack_size {other.pack_size} to a model of "
                f"pack_size {self.pack_size}"
            )
        shift = len(self.nodes["feature"])
        nodes = {}
        for name in NODE_FIELDS:
            part = other.nodes[name]
            if name in ("left_child", "right_child"):
                part = np.where(part >= 0, part + shift, -1).astype(np.int32)
            nodes[name] = np.concatenate([self.nodes[name], part])
        tree_offsets = np.concatenate([self.tree_offsets, other.tree_offsets[1:] + shift])
        layer_offsets = np.concatenate([self.layer_offsets,
                                        other.layer_offsets[1:] + self.layer_offsets[-1]])
        own_rounds = self._round_layer_offsets()
        round_layer_offsets = np.concatenate([own_rounds, other._round_layer_offsets()[1:]
                                              + own_rounds[-1]])
        return TreeEnsemble(
            nodes=nodes, tree_offsets=tree_offsets.astype(np.int64), pack_size=self.pack_size,
            base_score=self.base_score,
            layer_features=np.concatenate([self.layer_features, other.layer_features]
                                          ).astype(np.int32),
            layer_offsets=layer_offsets.astype(np.int64),
            round_layer_offsets=round_layer_offsets.astype(np.int64))

    # -- insight -----------------------------------------------------------------

    def feature_importance(self, n_features: int, importance_type: str = "gain",
                           n_rounds: int | None = None) -> np.ndarray:
        """Per feature, over the splits of the first ``n_rounds`` rounds (all by default):

        * ``"gain"``: the sum of the splits' pooled Newton gains,
        * ``"split"``: the number of splits,
        * ``"des"``: the sum of the splits' DES scores (docs/des.md §8): gain that
          held up across eras, net of the risk penalty.
        """
        end = len(self.nodes["feature"]) if n_rounds is None else \
            int(self.tree_offsets[n_rounds * self.pack_size])
        feature = self.nodes["feature"][:end]
        internal = feature >= 0
        if importance_type == "split":
            weights = None
        elif importance_type in ("gain", "des"):
            field_name = "gain" if importance_type == "gain" else "des_score"
            weights = self.nodes[field_name][:end][internal]
        else:
            raise ValueError(
                f"importance_type must be one of ['gain', 'split', 'des'], got {importance_type!r}"
            )
        return np.bincount(feature[internal], weights=weights,
                           minlength=n_features).astype(np.float64)

    # -- prediction --------------------------------------------------------------

    def tree_roots(self, n_rounds: int | None = None, start_round: int = 0) -> np.ndarray:
        """Roots of the trees of rounds ``start_round .. n_rounds - 1`` (all by default)."""
        n_trees = self.n_trees if n_rounds is None else n_rounds * self.pack_size
        first = start_round * self.pack_size
        return np.ascontiguousarray(self.tree_offsets[first:n_trees], dtype=np.int64)

    def max_depth(self, tree_roots: np.ndarray) -> int:
        """Edges on the longest root-to-leaf path of the trees rooted at ``tree_roots``."""
        feature, left, right = (self.nodes[name] for name in ("feature", "left_child",
                                                               "right_child"))
        frontier, depth = np.asarray(tree_roots, dtype=np.int64), 0
        while len(frontier := frontier[feature[frontier] >= 0]):
            frontier = np.concatenate([left[frontier], right[frontier]]).astype(np.int64)
            depth += 1
        return depth

    def predict_contributions(self, X: np.ndarray, n_threads: int,
                              n_rounds: int | None = None, start_round: int = 0) -> np.ndarray:
        """TreeSHAP contributions (n_rows, n_features + 1) of the selected rounds' trees;
        the last column is the expected value (base score included). Each row sums
        to its raw score up to float rounding (packboost/_contributions.py)."""
        from packboost._contributions import contributions

        return contributions(self, X, n_threads, n_rounds, start_round)

    def predict_raw(self, X: np.ndarray, n_threads: int, n_rounds: int | None = None,
                    start_round: int = 0) -> np.ndarray:
        """Raw scores (before the objective's link) for raw feature values X.

        The base score plus the trees of rounds ``start_round .. n_rounds - 1``.
        """
        out = np.full(X.shape[0], self.base_score, dtype=np.float64)
        nodes = self.nodes
        _predict.predict_raw(X, nodes["feature"], nodes["threshold"], nodes["missing_left"],
                             nodes["left_child"], nodes["right_child"], nodes["value"],
                             self.tree_roots(n_rounds, start_round), out, n_threads)
        return out
