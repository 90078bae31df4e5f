"""The boosting loop: gradients, per-round random draws, packs, updates.

Round t (docs/packs.md §1): compute g, h once from the current prediction F; draw
each tree's row sample and every depth's shared feature subset K_d (plus each
tree's own features inside it); grow the pack; F <- F + the pack's trees
(leaf values already carry ``learning_rate / pack_size``).

After each round the eval sets are scored and the callbacks
(:mod:`packboost.callback`) run: they may stop training early, and the
ensemble is then cut back to the best round.

Every random draw happens here, from one ``numpy.random.Generator`` seeded by
``random_state``, in a fixed order, so a model is a pure function of (data,
params, seed) whatever the thread count.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass, field

import numpy as np

from packboost import _validation
from packboost._divergence import DivergenceWatch
from packboost._eval_metrics import check_distinct_names
from packboost._fixed_point import GradientScaling, RoundBuffers
from packboost._leaf_refit import refit_quantile_leaves
from packboost._parameters import MAX_PACK_SIZE
from packboost._samples import TreeSamples
from packboost._unknown_targets import KnownTargets
from packboost.callback import CallbackList, TrainingInfo
from packboost.ensemble import TreeEnsemble
from packboost.grower import (
    GrowerParams,
    TrainingData,
    grow_device_pack,
    grow_output_packs,
    grow_pack,
)
from packboost.metrics import EraScorer, era_summary, pooled_metric
from packboost.objectives import MultiTarget, ObjectiveError


@dataclass
class RoundDraws:
    """Everything random about one round."""

    tree_samples: TreeSamples   # per tree: its eras (and rows); a sequence of its rows
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
    other draws of a seed unchanged. With ``feature_sampling="pack"`` the
    depth-0 draw of both is kept for every depth (the same arrays).
    """
    pack_size = params["pack_size"]
    n_eras, n_features = data.n_eras, data.n_features
    era_offsets = data.era_offsets
    era_sizes = np.diff(era_offsets)
    era_keep = np.ones((pack_size, n_eras), dtype=np.uint8)
    row_keep = [None] * pack_size
    for tree in range(pack_size):
        n_rows = data.n_rows
        if params["era_subsample"] < 1.0 and n_eras > 1:
            n_keep = _fraction_count(params["era_subsample"], n_eras)
            era_keep[tree] = 0
            era_keep[tree, rng.choice(n_eras, size=n_keep, replace=False)] = 1
            if params["row_subsample"] < 1.0:
                # Rows are era-sorted: the kept eras' runs of rows.
                n_rows = int(era_sizes[era_keep[tree] != 0].sum())
        if params["row_subsample"] < 1.0 and n_rows > 1:
            keep = rng.random(n_rows) < params["row_subsample"]
            if not keep.any():
                keep[rng.integers(n_rows)] = True
            row_keep[tree] = keep
    tree_samples = TreeSamples(era_keep, row_keep, era_offsets)

    layer_features, tree_feature_masks = [], []
    for depth in range(params["max_depth"]):
        if depth > 0 and params["feature_sampling"] == "pack":
            layer_features.append(layer_features[0])
            tree_feature_masks.append(tree_feature_masks[0])
            continue
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


def outputs_per_pass(n_outputs: int, params: dict, objective, *, grows_outputs_in_one_pass: bool,
                     categorical: bool, settings: GrowerParams | None = None) -> int:
    """How many outputs' packs a round grows as one pack, one pass over the
    rows per depth for all of them (grower.grow_output_packs, docs/packs.md
    §10): up to MAX_PACK_SIZE trees a pass where the backend can
    (``grows_outputs_in_one_pass``) and the outputs grow alike -- no
    quantile refit (``objective``, the loss each output is fitted with),
    categorical features or constraints; else 1 (one pack after the other).
    ``train`` also needs the outputs' gradient rescalings equal, known only
    once their gradients are; :func:`packboost._memory.training_memory_estimate`
    counts the pass from this."""
    settings = grower_params(params) if settings is None else settings
    if (n_outputs > 1 and grows_outputs_in_one_pass
            and not getattr(objective, "refits_leaves_to_quantile", False)
            and not categorical
            and settings.monotone_constraints is None
            and settings.interaction_constraints is None):
        return min(n_outputs, max(1, MAX_PACK_SIZE // params["pack_size"]))
    return 1


def grower_params(params: dict) -> GrowerParams:
    from packboost._parameters import grower_settings  # the schema's "grower" and "split" layers

    return GrowerParams(**grower_settings(params))


@dataclass
class EvalSet:
    """A validation set tracked during training (raw X, its own raw scores).

    ``era`` holds the era labels of its rows, or None (one era). ``scorer``
    groups ``y`` (each target's) by era once, for the per-era metrics of
    every round.
    """

    name: str
    X: np.ndarray
    y: np.ndarray
    raw_prediction: np.ndarray
    history: dict = field(default_factory=dict)
    era: np.ndarray | None = None
    scorer: object = None
    # Its rows on the backend's device (CudaBackend.keep_rows), or None: host.
    kept_rows: object = None

    def evaluate(self, metrics: list, objective) -> list:
        """``(name, value, higher_is_better)`` of every metric on the current scores.

        With several targets (``y`` of shape (n_rows, n_targets)), each metric
        is computed per target, recorded as ``"<name>[<j>]"``, and first as
        ``"<name>"``, their mean over the targets: what early stopping watches
        by default (docs/packs.md §10).
        """
        prediction = objective.transform(self.raw_prediction)
        if self.y.ndim == 1:
            return self._evaluate_output(metrics, self.y, self.raw_prediction, prediction, 0)
        per_target = [self._evaluate_output(metrics, self.y[:, target],
                                            self.raw_prediction[:, target],
                                            prediction[:, target], target)
                      for target in range(self.y.shape[1])]
        results = []
        for index, (name, _, higher_is_better) in enumerate(per_target[0]):
            values = [target_results[index][1] for target_results in per_target]
            results.append((name, float(np.mean(values)), higher_is_better))
        for target, target_results in enumerate(per_target):
            results.extend((f"{name}[{target}]", value, higher_is_better)
                           for name, value, higher_is_better in target_results)
        return results

    def _evaluate_output(self, metrics, y, raw_prediction, prediction, target) -> list:
        if self.scorer is None:
            self.scorer = {}
        era = self.era
        known = ~np.isnan(y)
        if not known.all():
            # A target unknown in a row (NaN) is scored on its known rows only.
            y, raw_prediction, prediction = y[known], raw_prediction[known], prediction[known]
            era = None if era is None else np.asarray(era)[known]
        per_era = {}
        results = []
        for metric in metrics:
            if metric.function is not None:
                returned = metric.function(y, prediction, era)
                if not (isinstance(returned, tuple) and len(returned) == 3):
                    raise TypeError(
                        f"eval_metric function {metric.name!r} must return (name, value, "
                        f"higher_is_better), got {returned!r}"
                    )
                name, value, higher_is_better = returned
                if not isinstance(name, str):
                    raise TypeError(f"eval_metric function {metric.name!r} must return its "
                                    f"name as a str, got {_validation.show(name)}")
                results.append((name, _metric_value(metric.name, value),
                                bool(higher_is_better)))
            elif metric.method is not None:
                if target not in self.scorer:
                    self.scorer[target] = EraScorer(y, era)
                if metric.method not in per_era:
                    per_era[metric.method] = era_summary(
                        self.scorer[target].correlations(prediction, metric.method))
                results.append((metric.name, per_era[metric.method][metric.statistic],
                                metric.higher_is_better))
            else:
                results.append((metric.name, pooled_metric(metric.name, y, raw_prediction,
                                                           prediction, metric.alpha),
                                metric.higher_is_better))
        check_distinct_names(metrics, [name for name, _, _ in results])
        return results


def _metric_value(function_name: str, value) -> float:
    """A callable eval metric's value as a float, or a TypeError naming it."""
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value[()]
    if isinstance(value, (numbers.Real, np.number)) and not isinstance(value, np.complexfloating):
        return float(value)
    raise TypeError(f"eval_metric function {function_name!r} must return its value as a "
                    f"number (a float), got {_validation.show(value)}")


@dataclass
class InitModel:
    """Where continued training starts: the earlier trees and their raw scores."""

    ensemble: TreeEnsemble
    raw_prediction: np.ndarray          # training rows, in the row order of ``data``


def _round_gradients(objective, round_index, y, raw_prediction, sample_weight, gradients,
                     hessians) -> None:
    """The objective's gradients of one round, into the (n_outputs, n_rows)
    ``gradients`` and ``hessians`` from the (n_outputs, n_rows) raw scores; a
    one-output objective works on row 0. A custom objective's bad output
    (:class:`~packboost.objectives.ObjectiveError`) is reported with the round."""
    try:
        if len(raw_prediction) == 1:
            objective.gradients(y, raw_prediction[0], sample_weight, gradients[0], hessians[0])
        else:
            objective.gradients(y, raw_prediction, sample_weight, gradients, hessians)
    except ObjectiveError as error:
        raise ObjectiveError(f"round {round_index}: {error}") from None


def train(data: TrainingData, y: np.ndarray, sample_weight: np.ndarray | None,
          objective, params: dict, n_threads: int, *, eval_sets: list | None = None,
          metrics: list | None = None, callbacks=None, init: InitModel | None = None,
          model=None, backend, base_score=None) -> tuple[TreeEnsemble, TrainingInfo]:
    """Fit ``params["n_estimators"]`` rounds on era-sorted training data.

    ``y`` and ``sample_weight`` are in the row order of ``data``. After every
    round each eval set's ``metrics`` (:class:`packboost.metrics.EvalMetric`)
    are recorded in its ``history`` and the callbacks
    (:mod:`packboost.callback`) run; one of them may stop training and ask
    for the best rounds to be kept. With ``init``, rounds are grown on top of
    its raw predictions and appended to its trees.

    An objective with ``n_outputs > 1`` (:class:`~packboost.objectives.MultiTarget`,
    :class:`~packboost.objectives.Softmax`) makes a model of that many
    outputs: each round computes every output's gradients from the scores
    before the round, draws once, and grows one pack per output with those
    draws on the same backend (the binned data and its buffers are shared):
    where it can, all of them as one pack, one pass over the rows per depth
    for every output (:func:`packboost.grower.grow_output_packs`), else one
    after the other; each output has its own gradient rescaling. Output
    ``j``'s trees are therefore those of a one-output fit of its gradients
    with the same seed (docs/packs.md §10).

    ``backend`` (:func:`packboost.backends.open_backend`) runs the passes
    over the rows; the round's draws are made here whatever the backend, so
    the model is the same function of the seed on every backend.

    ``data.shard`` set (:class:`packboost._row_shard.RowShard`): these rows
    are one worker's shard of a distributed fit whose every worker runs this
    loop; the draws are made over all rows and cut to the shard's, the
    gradient rescaling and grid come from all rows, and ``base_score`` (of
    all rows) is given, so every worker makes the decisions of the
    single-machine fit (docs/distributed.md).

    Returns the ensemble and the final :class:`~packboost.callback.TrainingInfo`.
    """
    eval_sets = list(eval_sets or ())
    metrics = list(metrics or ())
    n_outputs = getattr(objective, "n_outputs", 1)
    # The loss each output is fitted with (MultiTarget: the same for every target),
    # for what it does beyond gradients (quantile leaves are refitted).
    output_objective = objective.objective if isinstance(objective, MultiTarget) else objective
    rng = np.random.default_rng(params["random_state"])
    shard = data.shard
    if init is None:
        if base_score is None:
            base_score = objective.base_score(y, sample_weight)
        begin = 0
    else:
        base_score = init.ensemble.base_score
        begin = init.ensemble.n_rounds
    base_scores = np.broadcast_to(np.asarray(base_score, dtype=np.float64), (n_outputs,))
    # Output-major: each output's scores, gradients and hessians are one contiguous row.
    if init is None:
        raw_prediction = np.repeat(base_scores[:, np.newaxis], data.n_rows, axis=1)
    else:
        raw_prediction = np.ascontiguousarray(
            np.asarray(init.raw_prediction, dtype=np.float64).reshape(data.n_rows, -1).T)
    gradients = np.empty((n_outputs, data.n_rows), dtype=np.float64)
    hessians = np.empty((n_outputs, data.n_rows), dtype=np.float64)
    # Each output's rounded gradients, rewritten every round (RoundBuffers).
    round_buffers = [RoundBuffers() for _ in range(n_outputs)]
    # Targets NaN in some rows: each output grows on its known rows only.
    known = KnownTargets.of(y, data.era_offsets) if n_outputs > 1 else None
    if shard is not None and n_outputs > 1:
        # Whether a target has unknown rows is a question about all shards.
        known = shard.known_targets(y, data.era_offsets, n_outputs)
    # Grow on gradients of magnitude ~1 whatever the scale of y and the weights,
    # exactly (powers of two): one rescaling per fit and output, from the
    # gradients at the base score (docs/fixed-point.md §9).
    _round_gradients(objective, begin, y,
                     np.repeat(base_scores[:, np.newaxis], data.n_rows, axis=1),
                     sample_weight, gradients, hessians)
    if known is not None:
        known.clear_unknown(gradients, hessians)
    scalings = [GradientScaling.for_gradients(gradients[output], hessians[output], shard=shard)
                for output in range(n_outputs)]
    divergence = DivergenceWatch(objective, y, sample_weight, params["learning_rate"],
                                 np.repeat(base_scores[:, np.newaxis], data.n_rows, axis=1),
                                 gradients)
    unscaled_settings = grower_params(params)
    settings = [scaling.grower_params(unscaled_settings) for scaling in scalings]
    # Several outputs: each round's packs grown as one pack where the outputs
    # grow alike (outputs_per_pass), with the same rescaling, each on its
    # own known rows; else one pack after the other.
    shares_pass = shard is None and all(scaling == scalings[0] for scaling in scalings)
    pass_outputs = outputs_per_pass(
        n_outputs, params, output_objective,
        grows_outputs_in_one_pass=shares_pass and getattr(backend, "grows_outputs_in_one_pass",
                                                          False),
        categorical=bool(data.category_words), settings=unscaled_settings)
    # The round on the device (packboost/_device_round.py): a one-output fit
    # whose objective the device computes keeps y and its scores there, and
    # each round's gradients and grid are computed there (the same numbers).
    on_device = (n_outputs == 1 and shard is None
                 and getattr(backend, "computes_round_gradients", False)
                 and not data.category_words
                 and not getattr(output_objective, "refits_leaves_to_quantile", False)
                 and backend.start_device_rounds(objective, y, sample_weight, raw_prediction[0],
                                                 scalings[0], data))
    for eval_set in eval_sets:
        eval_set.raw_prediction = (
            np.repeat(base_scores[np.newaxis, :], eval_set.X.shape[0], axis=0).reshape(
                (eval_set.X.shape[0],) if n_outputs == 1 else (-1, n_outputs))
            if init is None else init.ensemble.predict_raw(eval_set.X, n_threads))
        eval_set.history = {}
        # A GPU fit walks each round's pack over the eval rows on the GPU
        # (not category-set splits: the GPU predictor walks thresholds only).
        keep_rows = getattr(backend, "keep_rows", None)
        eval_set.kept_rows = (keep_rows(eval_set.X)
                              if keep_rows is not None and not data.category_words else None)

    info = TrainingInfo(model=model, begin_iteration=begin,
                        end_iteration=begin + params["n_estimators"],
                        evals_result={item.name: item.history for item in eval_sets},
                        eval_names=[item.name for item in eval_sets])
    callback_list = callbacks if isinstance(callbacks, CallbackList) else CallbackList(callbacks)
    callback_list.before_training(info)

    packs = []
    for round_index in range(params["n_estimators"]):
        if not on_device:
            _round_gradients(objective, begin + round_index, y, raw_prediction, sample_weight,
                             gradients, hessians)
            if known is not None:
                known.clear_unknown(gradients, hessians)
            if round_index > 0:
                divergence.before_round(gradients, begin + round_index)
        if shard is None:
            draws = draw_round(rng, data, params)
        else:
            draws = draw_round(rng, shard.global_rows, params)
            draws.tree_samples = shard.local_samples(draws.tree_samples)
        round_packs = []
        for first in range(0, n_outputs, pass_outputs):
            end = min(n_outputs, first + pass_outputs)
            grown = None
            if end - first > 1:
                for output in range(first, end):
                    scalings[output].apply(gradients[output], hessians[output])
                # None where the outputs' fixed-point cells differ: then one
                # by one below, on the gradients rescaled here.
                grown = grow_output_packs(backend, data, gradients[first:end],
                                          hessians[first:end], draws.tree_samples,
                                          draws.layer_features, draws.tree_feature_masks,
                                          settings[first], n_threads,
                                          known=None if known is None
                                          else known.of_outputs(first, end),
                                          buffers=round_buffers[first:end])
            for output in range(first, end):
                if grown is not None:
                    pack = grown[output - first]
                    scalings[output].restore(pack.nodes, pack.value_bounds)
                else:
                    samples, counted_rows = draws.tree_samples, None
                    if known is not None:
                        samples = known.tree_samples(output, samples)
                        counted_rows = known.counted_rows(output)
                    if on_device:
                        pack = grow_device_pack(backend, data, samples, draws.layer_features,
                                                draws.tree_feature_masks, settings[output])
                    else:
                        if end - first == 1:
                            scalings[output].apply(gradients[output], hessians[output])
                        pack = grow_pack(backend, data, gradients[output], hessians[output],
                                         samples, draws.layer_features,
                                         draws.tree_feature_masks, settings[output],
                                         n_threads, counted_rows=counted_rows,
                                         buffers=round_buffers[output])
                    scalings[output].restore(pack.nodes, pack.value_bounds)
                    if getattr(output_objective, "refits_leaves_to_quantile", False):
                        # A backend whose rows are spread over workers refits its way.
                        refit = getattr(backend, "refit_quantile_leaves", refit_quantile_leaves)
                        refit(pack, data, y if n_outputs == 1 else y[output],
                              raw_prediction[output], sample_weight, samples,
                              output_objective.alpha,
                              params["learning_rate"] / params["pack_size"], n_threads)
                if not np.isfinite(pack.nodes["value"]).all():
                    # Never keep training on garbage: inputs are bounded at the public
                    # boundary, so this is a safety net, not an expected path.
                    raise FloatingPointError(
                        f"training diverged in round {begin + round_index}: a leaf value is "
                        f"not finite; lower learning_rate (now {params['learning_rate']!r}), "
                        "rescale y or sample_weight, or raise reg_lambda")
                if grown is None:
                    backend.add_pack(pack, raw_prediction[output])
                else:
                    backend.add_output_pack(pack, raw_prediction[output], output - first)
                round_packs.append(pack)
        if on_device:
            # The scores are on the device: only the rows the check reads come back.
            divergence.after_round_on_checked_rows(
                backend.read_predictions(divergence.row_stride)[np.newaxis],
                begin + round_index)
        else:
            divergence.after_round(raw_prediction, begin + round_index)
        packs.extend(round_packs)
        if eval_sets:
            pack_only = TreeEnsemble.from_packs(round_packs, params["pack_size"],
                                                np.zeros(n_outputs) if n_outputs > 1 else 0.0,
                                                n_outputs)
        for eval_set in eval_sets:
            if eval_set.kept_rows is not None:
                eval_set.kept_rows.add_predictions(pack_only, eval_set.raw_prediction)
            else:
                eval_set.raw_prediction += pack_only.predict_raw(eval_set.X, n_threads)
            for name, value, higher_is_better in eval_set.evaluate(metrics, objective):
                eval_set.history.setdefault(name, []).append(value)
                info.metrics.setdefault(name, higher_is_better)
        info.iteration = begin + round_index
        if callback_list.after_iteration(info):
            break
    callback_list.after_training(info)
    for eval_set in eval_sets:
        if eval_set.kept_rows is not None:
            eval_set.kept_rows.close()
            eval_set.kept_rows = None

    ensemble = TreeEnsemble.from_packs(packs, params["pack_size"], base_score, n_outputs)
    if init is not None:
        ensemble = init.ensemble.concatenate(ensemble)
    if info.restore_best and info.best_iteration is not None \
            and info.best_iteration < ensemble.n_rounds:
        ensemble = ensemble.truncate(info.best_iteration)
    return ensemble, info
