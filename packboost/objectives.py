"""Loss functions: gradients, hessians and the starting score (docs/des.md §1).

Per row ``g_i = dL/dF`` and ``h_i = d2L/dF2``, both multiplied by the sample
weight when one is given.
"""

from __future__ import annotations

import numpy as np

# Hessians of the logistic loss vanish for confident rows; a floor keeps the
# Newton step finite there (XGBoost and LightGBM do the same).
_MIN_LOGISTIC_HESSIAN = 1e-16


class SquaredError:
    """``L = 0.5 (F - y)^2``: ``g = F - y``, ``h = 1``."""

    name = "squared_error"

    @staticmethod
    def base_score(y: np.ndarray, sample_weight: np.ndarray | None) -> float:
        return float(np.average(y, weights=sample_weight)) if y.size else 0.0

    @staticmethod
    def gradients(y, raw_prediction, sample_weight, out_g, out_h) -> None:
        np.subtract(raw_prediction, y, out=out_g)
        if sample_weight is None:
            out_h.fill(1.0)
        else:
            out_g *= sample_weight
            out_h[:] = sample_weight

    @staticmethod
    def transform(raw_prediction: np.ndarray) -> np.ndarray:
        return raw_prediction


class Logistic:
    """Binary log loss on ``y`` in {0, 1}: ``g = p - y``, ``h = p (1 - p)``."""

    name = "logistic"

    @staticmethod
    def base_score(y: np.ndarray, sample_weight: np.ndarray | None) -> float:
        if not y.size:
            return 0.0
        positive_rate = float(np.average(y, weights=sample_weight))
        positive_rate = min(max(positive_rate, 1e-12), 1.0 - 1e-12)
        return float(np.log(positive_rate / (1.0 - positive_rate)))

    @staticmethod
    def gradients(y, raw_prediction, sample_weight, out_g, out_h) -> None:
        probability = _sigmoid(raw_prediction)
        np.subtract(probability, y, out=out_g)
        np.multiply(probability, 1.0 - probability, out=out_h)
        np.maximum(out_h, _MIN_LOGISTIC_HESSIAN, out=out_h)
        if sample_weight is not None:
            out_g *= sample_weight
            out_h *= sample_weight

    @staticmethod
    def transform(raw_prediction: np.ndarray) -> np.ndarray:
        return _sigmoid(raw_prediction)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    # exp of a large positive x overflows; split by sign to stay finite.
    out = np.empty_like(x, dtype=np.float64)
    positive = x >= 0
    out[positive] = 1.0 / (1.0 + np.exp(-x[positive]))
    exp_x = np.exp(x[~positive])
    out[~positive] = exp_x / (1.0 + exp_x)
    return out


OBJECTIVES = {cls.name: cls for cls in (SquaredError, Logistic)}


def get_objective(name: str):
    try:
        return OBJECTIVES[name]
    except KeyError:
        raise ValueError(
            f"objective must be one of {sorted(OBJECTIVES)}, got {name!r}"
        ) from None
