"""The boosting loop: gradients, per-round random draws, packs, updates.

Round t (DESIGN 2): compute g, h once from the current prediction F; draw
each tree's row sample and every depth's shared feature subset K_d (plus each
tree's own features inside it); grow the pack; F <- F + the pack's trees
(leaf values already carry ``learning_rate / pack_size``).

Every random draw happens here, from one ``numpy.random.Generator`` seeded by
``random_state``, in a fixed order, so a model is a pure function of (data,
params, seed) whatever the thread count.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from packboost.ensemble import TreeEnsemble
from packboost.grower import GrowerParams, TrainingData, grow_pack, predict_pack_binned


@dataclass
class RoundDraws:
    """Everything random about one round."""

    tree_samples: list          # per tree: ascending int32 rows
    layer_features: list        # per depth: ascending int32 features (K_d)
    tree_feature_masks: list    # per depth: (pack_size, len(K_d)) bool, or None


def _fraction_count(fraction: float, total: int) -> int:
    """At least one, at most ``total``, else ``round(fraction * total)``."""
    return int(min(total, max(1, round(fraction * total)))) if total else 0


def draw_round(rng: np.random.Generator, data: TrainingData, params: dict) -> RoundDraws:
    """Draw one round's per-tree samples and per-depth feature subsets.

    * ``era_subsample``: each tree keeps a random subset of the eras,
    * ``row_subsample``: then each of their rows with that probability,
    * ``layer_feature_fraction``: K_d, shared by the pack at depth d,
    * ``tree_feature_fraction``: each tree's own features inside K_d.
    A fraction of 1 draws nothing, so turning a sampler off leaves the
    other draws of a seed unchanged.
    """
    pack_size = params["pack_size"]
    n_rows, n_eras, n_features = data.n_rows, data.n_eras, data.n_features
    all_rows = np.arange(n_rows, dtype=np.int32)
    tree_samples = []
    for _ in range(pack_size):
        rows = all_rows
        if params["era_subsample"] < 1.0 and n_eras > 1:
            n_keep = _fraction_count(params["era_subsample"], n_eras)
            keep_era = np.zeros(n_eras, dtype=bool)
            keep_era[rng.choice(n_eras, size=n_keep, replace=False)] = True
            rows = rows[keep_era[data.row_era[rows]]]
        if params["row_subsample"] < 1.0 and len(rows) > 1:
            keep = rng.random(len(rows)) < params["row_subsample"]
            if not keep.any():
                keep[rng.integers(len(rows))] = True
            rows = rows[keep]
        tree_samples.append(np.ascontiguousarray(rows, dtype=np.int32))

    layer_features, tree_feature_masks = [], []
    for _ in range(params["max_depth"]):
        if params["layer_feature_fraction"] < 1.0:
            n_layer = _fraction_count(params["layer_feature_fraction"], n_features)
            features = np.sort(rng.choice(n_features, size=n_layer, replace=False))
        else:
            features = np.arange(n_features)
        layer_features.append(features.astype(np.int32))
        if params["tree_feature_fraction"] < 1.0 and len(features) > 1:
            n_tree = _fraction_count(params["tree_feature_fraction"], len(features))
            mask = np.zeros((pack_size, len(features)), dtype=bool)
            for tree in range(pack_size):
                mask[tree, rng.choice(len(features), size=n_tree, replace=False)] = True
            tree_feature_masks.append(mask)
        else:
            tree_feature_masks.append(None)
    return RoundDraws(tree_samples, layer_features, tree_feature_masks)


def grower_params(params: dict) -> GrowerParams:
    return GrowerParams(
        max_depth=params["max_depth"],
        reg_lambda=params["reg_lambda"],
        min_samples_leaf=params["min_samples_leaf"],
        min_child_weight=params["min_child_weight"],
        min_split_gain=params["min_split_gain"],
        max_delta_step=params["max_delta_step"],
        shrinkage=params["learning_rate"] / params["pack_size"],
        split={name: params[name] for name in (
            "reg_lambda", "era_gain", "era_weighting", "era_alpha", "lambda_dro",
            "lambda_dir", "dir_tanh_scale", "min_samples_leaf", "min_child_weight")},
    )


@dataclass
class EvalSet:
    """A validation set tracked during training (raw X, its own raw scores)."""

    name: str
    X: np.ndarray
    y: np.ndarray
    raw_prediction: np.ndarray
    history: dict = field(default_factory=dict)


def train(data: TrainingData, y: np.ndarray, sample_weight: np.ndarray | None,
          objective, params: dict, n_threads: int, eval_sets: list | None = None,
          metric=None) -> TreeEnsemble:
    """Fit ``params["n_estimators"]`` rounds on era-sorted training data.

    ``y`` and ``sample_weight`` are in the row order of ``data``. ``metric``
    maps (y, raw prediction) of an eval set to a float recorded per round.
    """
    rng = np.random.default_rng(params["random_state"])
    base_score = objective.base_score(y, sample_weight)
    raw_prediction = np.full(data.n_rows, base_score, dtype=np.float64)
    gradients = np.empty(data.n_rows, dtype=np.float64)
    hessians = np.empty(data.n_rows, dtype=np.float64)
    settings = grower_params(params)
    for eval_set in eval_sets or ():
        eval_set.raw_prediction = np.full(eval_set.X.shape[0], base_score)

    packs = []
    for _ in range(params["n_estimators"]):
        objective.gradients(y, raw_prediction, sample_weight, gradients, hessians)
        draws = draw_round(rng, data, params)
        pack = grow_pack(data, gradients, hessians, draws.tree_samples,
                         draws.layer_features, draws.tree_feature_masks, settings,
                         n_threads)
        packs.append(pack)
        predict_pack_binned(data, pack, raw_prediction, n_threads)
        for eval_set in eval_sets or ():
            pack_only = TreeEnsemble.from_packs([pack], params["pack_size"], 0.0)
            eval_set.raw_prediction += pack_only.predict_raw(eval_set.X, n_threads)
            if metric is not None:
                for name, value in metric(eval_set.y, eval_set.raw_prediction).items():
                    eval_set.history.setdefault(name, []).append(value)
    return TreeEnsemble.from_packs(packs, params["pack_size"], base_score)
