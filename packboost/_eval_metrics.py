"""The metrics recorded every round on ``fit``'s eval sets: the registry.

A name in :data:`EVAL_METRIC_NAMES` -- a pooled metric (``"rmse"``,
``"mae"``, ``"logloss"``) or ``"<correlation>_<statistic>"``, a per-era
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

__all__ = ["EVAL_METRIC_NAMES", "POOLED_METRICS", "EvalMetric", "pooled_metric",
           "resolve_eval_metric"]

# Metrics on the pooled rows (no eras).
POOLED_METRICS = {"rmse": False, "mae": False, "logloss": False}  # name -> higher is better
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


def resolve_eval_metric(metric, *, objective_name: str) -> EvalMetric:
    """An :class:`EvalMetric` from a name in :data:`EVAL_METRIC_NAMES` or a callable.

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
        raise ValueError("eval_metric 'logloss' needs a classifier")
    if metric in POOLED_METRICS:
        return EvalMetric(name=metric, higher_is_better=POOLED_METRICS[metric])
    method, statistic = metric.split("_", 1)
    return EvalMetric(name=metric, higher_is_better=statistic not in _LOWER_IS_BETTER_STATISTICS,
                      method=method, statistic=statistic)


def pooled_metric(name: str, y_true: np.ndarray, raw: np.ndarray, prediction: np.ndarray
                  ) -> float:
    """``rmse`` or ``mae`` of ``prediction``, or ``logloss`` of raw log-odds."""
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
