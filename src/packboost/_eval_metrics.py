"""The metrics recorded every round on ``fit``'s eval sets: the registry.

A name in :data:`EVAL_METRIC_NAMES` -- a pooled metric (``"rmse"``,
``"mae"``, ``"huber"``, ``"quantile"``, ``"logloss"``; ``"multi_logloss"`` and
``"multi_error"`` of a multiclass model) or ``"<correlation>_<statistic>"``, a per-era
correlation (:data:`packboost.metrics.CORRELATION_METHODS`) summarised by one
statistic of :func:`packboost.metrics.era_summary` -- or a user callable
becomes an :class:`EvalMetric`; :func:`pooled_metric` computes the pooled ones
(the per-era ones are :class:`packboost.metrics.EraScorer`'s). These names are
importable from :mod:`packboost.metrics` too.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from packboost.metrics import CORRELATION_METHODS, ERA_STATISTICS, _ldexp, _rescaling_exponent

__all__ = ["EVAL_METRIC_NAMES", "POOLED_METRICS", "EvalMetric", "check_distinct_names",
           "pooled_metric", "resolve_eval_metric"]

# Metrics on the pooled rows (no eras).
# name -> higher is better; "huber" and "quantile" are the objectives' own losses
# (mean Huber loss with delta alpha, mean pinball loss at level alpha)
POOLED_METRICS = {"rmse": False, "mae": False, "huber": False, "quantile": False,
                  "logloss": False, "multi_logloss": False, "multi_error": False}
# Metrics of a multiclass model's (n_rows, n_classes) probabilities.
MULTICLASS_METRICS = ("multi_logloss", "multi_error")
EVAL_METRIC_NAMES = tuple(POOLED_METRICS) + tuple(
    f"{method}_{statistic}" for method in CORRELATION_METHODS for statistic in ERA_STATISTICS
)
# Statistics where a smaller value is better.
_LOWER_IS_BETTER_STATISTICS = ("std", "max_drawdown")


@dataclass(frozen=True)
class EvalMetric:
    """A metric recorded per round on an eval set."""

    name: str
    higher_is_better: bool
    method: str | None = None      # correlation of an era metric
    statistic: str | None = None   # its era_summary statistic
    function: object = None        # a user callable
    alpha: float | None = None     # the Huber delta or the quantile level


def resolve_eval_metric(metric, *, objective_name: str, alpha: float = 0.9) -> EvalMetric:
    """An :class:`EvalMetric` from a name in :data:`EVAL_METRIC_NAMES` or a callable.

    ``alpha`` (the estimator's) is the delta of ``"huber"`` and the level of
    ``"quantile"``, as for the objectives of those names.

    A callable is called as ``metric(y_true, y_pred, era)`` (``era`` is None
    for an eval set without eras) and returns ``(name, value,
    higher_is_better)``; its name is found on the first call.
    """
    if callable(metric):
        return EvalMetric(name=getattr(metric, "__name__", "custom"), higher_is_better=True,
                          function=metric)
    if not isinstance(metric, str) or metric not in EVAL_METRIC_NAMES:
        raise ValueError(
            f"eval_metric must be a callable or one of {list(EVAL_METRIC_NAMES)}, got {metric!r}"
        )
    if metric == "logloss" and objective_name != "logistic":
        raise ValueError("eval_metric 'logloss' needs a binary classifier" + (
            "; a multiclass model reports 'multi_logloss'" if objective_name == "softmax"
            else ""))
    if metric in MULTICLASS_METRICS and objective_name != "softmax":
        raise ValueError(f"eval_metric {metric!r} needs a multiclass classifier (more than "
                         "two classes)")
    if objective_name == "softmax" and metric not in MULTICLASS_METRICS:
        raise ValueError(f"eval_metric {metric!r} does not score a multiclass model; use "
                         f"{list(MULTICLASS_METRICS)} or a callable")
    if metric == "quantile" and not 0.0 < alpha < 1.0:
        # alpha is one parameter for the objective and this metric: one message
        raise ValueError(f"alpha must be in (0, 1) for objective='quantile' or "
                         f"eval_metric='quantile', got {alpha!r}")
    if metric in ("huber", "quantile"):
        return EvalMetric(name=metric, higher_is_better=False, alpha=float(alpha))
    if metric in POOLED_METRICS:
        return EvalMetric(name=metric, higher_is_better=POOLED_METRICS[metric])
    method, statistic = metric.split("_", 1)
    return EvalMetric(name=metric, higher_is_better=statistic not in _LOWER_IS_BETTER_STATISTICS,
                      method=method, statistic=statistic)


def check_distinct_names(metrics: list, names: list | None = None) -> None:
    """Refuse two metrics of one name: they would share one history list (two
    entries per round) and early stopping would read them as one metric.

    ``metrics`` are :class:`EvalMetric` s and ``names`` (same order) their
    recorded names; by default their own, which a callable's is not: it is
    the one the callable returns, known after its first call.
    """
    names = [metric.name for metric in metrics] if names is None else names
    first = {}
    for metric, name in zip(metrics, names, strict=True):
        if name in first and first[name].function is None and metric.function is None:
            raise ValueError(f"eval_metric lists the metric {name!r} twice")
        if name in first:
            described = [f"the callable {item.name!r}" if item.function is not None
                         else "the built-in" for item in (first[name], metric)]
            raise ValueError(
                f"eval_metric names the metric {name!r} twice ({described[0]} and "
                f"{described[1]}); each metric needs its own name (a callable returns its "
                "name as the first item of its (name, value, higher_is_better))")
        first[name] = metric


def pooled_metric(name: str, y_true: np.ndarray, raw: np.ndarray, prediction: np.ndarray,
                  alpha: float | None = None) -> float:
    """``rmse``, ``mae``, ``huber`` (delta ``alpha``) or ``quantile`` (level
    ``alpha``) of ``prediction``, ``logloss`` of raw log-odds, or
    ``multi_logloss`` / ``multi_error`` of class codes ``y_true`` and
    (n_rows, n_classes) probabilities ``prediction``."""
    if name in MULTICLASS_METRICS:
        codes = y_true.astype(np.intp)
        if name == "multi_error":
            return float(np.mean(np.argmax(prediction, axis=1) != codes))
        # -log p of the true class from raw scores (log-sum-exp, stable).
        true_raw = raw[np.arange(len(codes)), codes]
        return float(np.mean(np.logaddexp.reduce(raw, axis=1) - true_raw))
    if name == "huber":
        residual = np.abs(prediction - y_true)
        loss = np.where(residual <= alpha, 0.5 * residual * residual,
                        alpha * (residual - 0.5 * alpha))
        return float(np.mean(loss))
    if name == "quantile":
        residual = y_true - prediction
        return float(np.mean(np.where(residual >= 0, alpha * residual,
                                      (alpha - 1.0) * residual)))
    if name in ("rmse", "mae"):
        # Errors far from 1 are scaled by a power of two (exact) and the result
        # scaled back: squares of 1e-200 underflow to 0, of 1e160 overflow.
        errors = np.abs(prediction - y_true)
        exponent = _rescaling_exponent(np.max(errors)) if errors.size else 0
        errors = np.ldexp(errors, -exponent)
        value = np.sqrt(np.mean(errors * errors)) if name == "rmse" else np.mean(errors)
        return _ldexp(float(value), exponent)
    # logloss from raw scores, stable for large |raw|: log(1 + exp(-s z)).
    signed = np.where(y_true > 0.5, raw, -raw)
    return float(np.mean(np.logaddexp(0.0, -signed)))
