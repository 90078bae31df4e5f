"""The fitted trees: struct-of-arrays, all trees of a model concatenated.

Every tree is a set of nodes; node ``i`` of the model is described by the
``i``-th entry of each array in :data:`NODE_FIELDS`. Child indices are
absolute (into the concatenated arrays), so a tree is fully named by its root,
``tree_offsets[t]``. Trees are grouped in packs of ``pack_size`` consecutive
trees, one pack per boosting round (docs/packs.md). Leaf ``value`` already carries
the round's shrinkage ``learning_rate / pack_size``, so a raw prediction is
``base_score + sum of the leaf values reached``.

A model of ``n_outputs > 1`` outputs (several regression targets, or the
classes of a multiclass softmax) grows one pack per output each round: round
``r`` holds ``n_outputs`` packs, output-major, so tree ``t`` belongs to output
``(t // pack_size) % n_outputs`` (:meth:`TreeEnsemble.tree_outputs`), and
``base_score`` holds one starting score per output. Output ``j``'s raw score
is its base score plus the leaf values of its own trees, added in tree order;
a one-output model is exactly the layout above.
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


# The category set of each node of a model with categorical features
# (n_nodes, n_words) uint32: code c goes left iff bit c % 32 of word c // 32 is
# set (read only at nodes that split on a categorical feature). Absent from
# models without categorical features.
CATEGORY_WORDS = "category_words"


def empty_nodes(n_nodes: int = 0, category_words: int = 0) -> dict[str, np.ndarray]:
    """Node arrays of length ``n_nodes``: a leaf with value 0 everywhere (and
    empty category sets of ``category_words`` words when that is not 0)."""
    nodes = {name: np.zeros(n_nodes, dtype=dtype) for name, dtype in NODE_FIELDS.items()}
    if category_words:
        nodes[CATEGORY_WORDS] = np.zeros((n_nodes, category_words), dtype=np.uint32)
    nodes["feature"].fill(-1)
    nodes["left_child"].fill(-1)
    nodes["right_child"].fill(-1)
    return nodes


def _node_arrays(nodes: dict) -> list:
    """The node arrays a model has: NODE_FIELDS, and its category sets if any."""
    return list(NODE_FIELDS) + ([CATEGORY_WORDS] if CATEGORY_WORDS in nodes else [])


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
    # Outputs (targets or classes); with more than one, base_score is a
    # (n_outputs,) float64 array and each round holds one pack per output.
    n_outputs: int = 1

    @property
    def n_trees(self) -> int:
        return len(self.tree_offsets) - 1

    @property
    def trees_per_round(self) -> int:
        return self.pack_size * self.n_outputs

    @property
    def n_rounds(self) -> int:
        return self.n_trees // self.trees_per_round

    @property
    def base_scores(self) -> np.ndarray:
        """(n_outputs,) float64: each output's starting score."""
        return np.broadcast_to(np.asarray(self.base_score, dtype=np.float64),
                               (self.n_outputs,)).copy()

    def tree_outputs(self) -> np.ndarray:
        """(n_trees,) int64: the output each tree adds to (the tree -> output map)."""
        return (np.arange(self.n_trees, dtype=np.int64) // self.pack_size) % self.n_outputs

    @classmethod
    def from_packs(cls, packs: list, pack_size: int, base_score,
                   n_outputs: int = 1) -> TreeEnsemble:
        """Concatenate the packs grown by :mod:`packboost.grower`.

        With ``n_outputs > 1``, ``packs`` holds each round's packs output by
        output, and the packs of one round share their feature subsets (one
        draw per round): they are stored once per round.
        """
        if n_outputs > 1:
            base_score = np.asarray(base_score, dtype=np.float64).copy()
        if not packs:
            return cls(pack_size=pack_size, base_score=base_score,
                       round_layer_offsets=np.zeros(1, dtype=np.int64), n_outputs=n_outputs)
        nodes = {}
        node_shift = np.cumsum([0] + [len(p.nodes["feature"]) for p in packs[:-1]])
        for name in _node_arrays(packs[0].nodes):
            parts = [p.nodes[name] for p in packs]
            if name in ("left_child", "right_child"):
                parts = [np.where(part >= 0, part + shift, -1).astype(np.int32)
                         for part, shift in zip(parts, node_shift, strict=True)]
            nodes[name] = np.concatenate(parts)
        tree_offsets = np.concatenate(
            [[0]] + [p.tree_offsets[1:] + shift for p, shift in zip(packs, node_shift, strict=True)]
        ).astype(np.int64)
        round_packs = packs[::n_outputs]  # one per round: the first output's
        layer_parts = [feature_set for p in round_packs for feature_set in p.layer_features]
        layer_offsets = np.cumsum([0] + [len(part) for part in layer_parts]).astype(np.int64)
        layer_features = (np.concatenate(layer_parts).astype(np.int32) if layer_parts
                          else np.zeros(0, dtype=np.int32))
        round_layer_offsets = np.cumsum([0] + [len(p.layer_features) for p in round_packs]
                                        ).astype(np.int64)
        return cls(nodes=nodes, tree_offsets=tree_offsets, pack_size=pack_size,
                   base_score=base_score, layer_features=layer_features,
                   layer_offsets=layer_offsets, round_layer_offsets=round_layer_offsets,
                   n_outputs=n_outputs)

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
        n_trees = n_rounds * self.trees_per_round
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
            round_layer_offsets=round_layers[:n_rounds + 1].copy(), n_outputs=self.n_outputs)

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
        if other.n_outputs != self.n_outputs:
            raise ValueError(f"cannot append rounds of {other.n_outputs} outputs to a model of "
                             f"{self.n_outputs} outputs")
        shift = len(self.nodes["feature"])
        if (CATEGORY_WORDS in self.nodes) != (CATEGORY_WORDS in other.nodes) or (
                CATEGORY_WORDS in self.nodes and self.nodes[CATEGORY_WORDS].shape[1]
                != other.nodes[CATEGORY_WORDS].shape[1]):
            raise ValueError("cannot append rounds with other category sets than the model's")
        nodes = {}
        for name in _node_arrays(self.nodes):
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
            round_layer_offsets=round_layer_offsets.astype(np.int64), n_outputs=self.n_outputs)

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
            int(self.tree_offsets[n_rounds * self.trees_per_round])
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

    def tree_roots(self, n_rounds: int | None = None, start_round: int = 0,
                   output: int | None = None) -> np.ndarray:
        """Roots of the trees of rounds ``start_round .. n_rounds - 1`` (all by
        default), in tree order; with ``output``, only that output's trees."""
        n_trees = self.n_trees if n_rounds is None else n_rounds * self.trees_per_round
        first = start_round * self.trees_per_round
        roots = self.tree_offsets[first:n_trees]
        if output is not None:
            roots = roots[self.tree_outputs()[first:n_trees] == output]
        return np.ascontiguousarray(roots, dtype=np.int64)

    def output_ensemble(self, output: int) -> TreeEnsemble:
        """Output ``output``'s trees as a one-output model (the same rounds,
        pack size and feature subsets): what a consumer of one-output models
        (TreeSHAP, the CUDA predictor) runs once per output."""
        if self.n_outputs == 1:
            return self
        roots = self.tree_roots(output=output)
        ends = self.tree_offsets[1:][self.tree_outputs() == output]
        keep = np.concatenate([np.arange(begin, end) for begin, end in zip(roots, ends,
                                                                               strict=True)]
                              ) if len(roots) else np.zeros(0, dtype=np.int64)
        new_index = np.full(len(self.nodes["feature"]), -1, dtype=np.int64)
        new_index[keep] = np.arange(len(keep))
        nodes = {}
        for name, values in self.nodes.items():
            values = values[keep]
            if name in ("left_child", "right_child"):
                values = np.where(values >= 0, new_index[np.maximum(values, 0)], -1
                                  ).astype(np.int32)
            nodes[name] = values
        sizes = ends - roots
        return TreeEnsemble(
            nodes=nodes, tree_offsets=np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64),
            pack_size=self.pack_size, base_score=float(self.base_scores[output]),
            layer_features=self.layer_features, layer_offsets=self.layer_offsets,
            round_layer_offsets=self._round_layer_offsets())

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
        to its raw score up to float rounding (packboost/_contributions.py).
        With several outputs: (n_rows, n_outputs, n_features + 1), one output's
        trees at a time."""
        from packboost._contributions import contributions

        if self.n_outputs > 1:
            return np.stack([contributions(self.output_ensemble(output), X, n_threads,
                                           n_rounds, start_round)
                             for output in range(self.n_outputs)], axis=1)
        return contributions(self, X, n_threads, n_rounds, start_round)

    def predict_raw(self, X: np.ndarray, n_threads: int, n_rounds: int | None = None,
                    start_round: int = 0) -> np.ndarray:
        """Raw scores (before the objective's link) for raw feature values X.

        The base score plus the trees of rounds ``start_round .. n_rounds - 1``:
        shape (n_rows,), or (n_rows, n_outputs) for a model of several outputs.
        """
        if self.n_outputs == 1:
            return self._predict_output(X, n_threads, self.base_score,
                                        self.tree_roots(n_rounds, start_round))
        return np.column_stack([
            self._predict_output(X, n_threads, base,
                                 self.tree_roots(n_rounds, start_round, output=output))
            for output, base in enumerate(self.base_scores.tolist())])

    def _predict_output(self, X, n_threads, base_score, roots) -> np.ndarray:
        out = np.full(X.shape[0], base_score, dtype=np.float64)
        nodes = self.nodes
        _predict.predict_raw(X, nodes["feature"], nodes["threshold"], nodes["missing_left"],
                             nodes["left_child"], nodes["right_child"], nodes["value"],
                             roots, out, n_threads, category_words=nodes.get(CATEGORY_WORDS),
                             threshold_bin=nodes["threshold_bin"])
        return out
