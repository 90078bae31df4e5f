"""Loss functions: gradients, hessians and the starting score (docs/des.md §1).

Per row ``g_i = dL/dF`` and ``h_i = d2L/dF2``, both multiplied by the sample
weight when one is given.

The estimators' ``objective`` parameter picks one (:func:`make_objective`):

* ``"squared_error"`` (the regressor's default), ``"huber"`` and
  ``"quantile"`` for :class:`~packboost.PackBoostRegressor`, ``"logistic"``
  for :class:`~packboost.PackBoostClassifier`;
* a callable ``objective(y_true, y_pred) -> (grad, hess)`` (LightGBM's
  scikit-learn convention): :class:`CustomObjective`.

Models of several outputs (docs/packs.md §10) compute every output's
gradients at once, on ``(n_outputs, n_rows)`` arrays (output-major, so that
each output's row is contiguous): :class:`MultiTarget` (one regression loss
per target column) and :class:`Softmax` (the multiclass log loss). Their
``transform`` maps ``(n_rows, n_outputs)`` raw scores, the layout of
``predict``.

``huber`` and ``quantile`` read ``alpha`` as LightGBM does: the Huber loss's
``delta`` (where it turns from quadratic to linear), and the quantile level.
Both use a hessian of 1, so their leaves are Newton leaves ``-G / (n +
reg_lambda)`` of the (clipped or signed) gradients; see
:class:`Quantile` for how its leaves are refitted to residual quantiles.
"""

from __future__ import annotations

import numpy as np

# Hessians of the logistic loss vanish for confident rows; a floor keeps the
# Newton step finite there (XGBoost and LightGBM do the same).
_MIN_LOGISTIC_HESSIAN = 1e-16


def _logistic_hessians_and_weights(probability, sample_weight, out_g, out_h) -> None:
    """``out_h = max(p (1 - p), floor)`` -- the logistic and softmax hessian --
    then both gradients and hessians times ``sample_weight`` (if any)."""
    np.multiply(probability, 1.0 - probability, out=out_h)
    np.maximum(out_h, _MIN_LOGISTIC_HESSIAN, out=out_h)
    if sample_weight is not None:
        out_g *= sample_weight
        out_h *= sample_weight


# What a model file stores as ``objective`` when the model was trained with a
# callable: the function itself is never stored (a loaded model runs no code).
CUSTOM = "custom"

# Built-in objectives of each estimator kind, the default first.
REGRESSION_OBJECTIVES = ("squared_error", "huber", "quantile")
CLASSIFICATION_OBJECTIVES = ("logistic",)
BUILT_IN = REGRESSION_OBJECTIVES + CLASSIFICATION_OBJECTIVES


class ObjectiveError(ValueError):
    """A custom objective returned gradients that cannot be trained on."""


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

    @staticmethod
    def loss(y, raw_prediction, sample_weight) -> float:
        with np.errstate(over="ignore"):
            return _mean(0.5 * np.square(raw_prediction - y), sample_weight)


class Huber:
    """Huber loss with ``delta = alpha``: quadratic for ``|F - y| <= alpha``, linear beyond.

    ``g = clip(F - y, -alpha, alpha)``. The exact hessian is 1 inside and 0
    outside; 0 would give a leaf of outliers an unbounded Newton step, so
    ``h = 1`` everywhere (as LightGBM): outliers pull a leaf by at most
    ``alpha`` per row instead of by their whole residual.
    The starting score is the weighted median, which outliers do not move.
    """

    name = "huber"

    def __init__(self, alpha: float):
        self.alpha = float(alpha)

    def base_score(self, y, sample_weight) -> float:
        return weighted_quantile(y, sample_weight, 0.5)

    def gradients(self, y, raw_prediction, sample_weight, out_g, out_h) -> None:
        np.subtract(raw_prediction, y, out=out_g)
        np.clip(out_g, -self.alpha, self.alpha, out=out_g)
        _unit_hessian(out_g, out_h, sample_weight)

    def loss(self, y, raw_prediction, sample_weight) -> float:
        residual = np.abs(raw_prediction - y)
        with np.errstate(over="ignore"):
            return _mean(np.where(residual <= self.alpha, 0.5 * residual * residual,
                                  self.alpha * (residual - 0.5 * self.alpha)), sample_weight)

    transform = staticmethod(SquaredError.transform)


class Quantile:
    """Pinball loss at level ``alpha``: ``L = alpha (y - F)`` for ``y > F``, else
    ``(1 - alpha) (F - y)``.

    ``g = 1 - alpha`` where ``F >= y``, ``-alpha`` where ``F < y``; ``h = 1``.
    The trees are grown on these (their Newton step says which way a leaf
    should move, not how far); then, as LightGBM does, each leaf is refitted
    to the weighted alpha-quantile of its rows' residuals ``y - F``, times
    ``learning_rate / pack_size`` (:mod:`packboost._leaf_refit`;
    ``reg_lambda``, ``reg_alpha`` and ``max_delta_step`` shape the splits
    only). The starting score is the weighted alpha-quantile of ``y``.
    """

    # booster.train refits the leaves of each grown pack (packboost._leaf_refit).
    refits_leaves_to_quantile = True
    name = "quantile"

    def __init__(self, alpha: float):
        self.alpha = float(alpha)

    def base_score(self, y, sample_weight) -> float:
        return weighted_quantile(y, sample_weight, self.alpha)

    def gradients(self, y, raw_prediction, sample_weight, out_g, out_h) -> None:
        np.copyto(out_g, np.where(raw_prediction >= y, 1.0 - self.alpha, -self.alpha))
        _unit_hessian(out_g, out_h, sample_weight)

    def loss(self, y, raw_prediction, sample_weight) -> float:
        residual = y - raw_prediction
        return _mean(np.where(residual >= 0, self.alpha * residual,
                              (self.alpha - 1.0) * residual), sample_weight)

    transform = staticmethod(SquaredError.transform)


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
        _logistic_hessians_and_weights(probability, sample_weight, out_g, out_h)

    @staticmethod
    def loss(y, raw_prediction, sample_weight) -> float:
        # log(1 + exp(-s F)) with s = +1 for y = 1, -1 for y = 0: stable for large |F|.
        return _mean(np.logaddexp(0.0, np.where(y > 0.5, -raw_prediction, raw_prediction)),
                     sample_weight)

    @staticmethod
    def transform(raw_prediction: np.ndarray) -> np.ndarray:
        return _sigmoid(raw_prediction)


class MultiTarget:
    """One regression loss (``objective``) per target: output ``j`` is fitted to
    column ``j`` of ``Y`` (stored output-major, ``(n_targets, n_rows)``), its
    gradients those of ``objective`` on that column alone."""

    def __init__(self, objective, n_outputs: int):
        self.objective = objective
        self.n_outputs = int(n_outputs)
        self.name = objective.name

    def base_score(self, y: np.ndarray, sample_weight) -> np.ndarray:
        """Each target's own starting score, over the rows where it is known
        (not NaN; packboost._unknown_targets)."""
        scores = []
        for column in y:
            known = ~np.isnan(column)
            if known.all():
                scores.append(self.objective.base_score(column, sample_weight))
            else:
                scores.append(self.objective.base_score(
                    column[known], None if sample_weight is None else sample_weight[known]))
        return np.array(scores)

    def gradients(self, y, raw_prediction, sample_weight, out_g, out_h) -> None:
        for output in range(self.n_outputs):
            self.objective.gradients(y[output], raw_prediction[output], sample_weight,
                                     out_g[output], out_h[output])

    def loss(self, y, raw_prediction, sample_weight) -> float:
        """The mean over the targets of each one's loss."""
        return float(np.mean([self.objective.loss(y[output], raw_prediction[output],
                                                  sample_weight)
                              for output in range(self.n_outputs)]))

    def transform(self, raw_prediction: np.ndarray) -> np.ndarray:
        return self.objective.transform(raw_prediction)


class Softmax:
    """Multiclass log loss over ``n_classes`` raw scores per row.

    ``p = softmax(F)`` over the classes; for class ``c`` and label ``y``:
    ``g_c = p_c - [y = c]``, ``h_c = p_c (1 - p_c)``, the diagonal of the
    loss's Hessian (the classes' trees are grown apart, each on its own
    column, as LightGBM's and XGBoost's multiclass do; XGBoost doubles this
    hessian, LightGBM scales it by ``k / (k - 1)``: both take shorter steps,
    which ``learning_rate`` does here). ``y`` holds class codes ``0 .. k-1``.
    The starting scores are the log class frequencies, centred (softmax
    ignores a shift): round 0 predicts the class priors.
    """

    name = "softmax"

    def __init__(self, n_classes: int):
        self.n_outputs = int(n_classes)

    def base_score(self, y: np.ndarray, sample_weight) -> np.ndarray:
        if not y.size:
            return np.zeros(self.n_outputs)
        counts = np.bincount(y.astype(np.intp), weights=sample_weight,
                             minlength=self.n_outputs)
        frequency = np.maximum(counts / counts.sum(), 1e-12)
        log_frequency = np.log(frequency)
        return log_frequency - log_frequency.mean()

    def gradients(self, y, raw_prediction, sample_weight, out_g, out_h) -> None:
        probability = softmax(raw_prediction, axis=0)
        np.copyto(out_g, probability)
        out_g[y.astype(np.intp), np.arange(y.size)] -= 1.0
        _logistic_hessians_and_weights(probability, sample_weight, out_g, out_h)

    @staticmethod
    def loss(y, raw_prediction, sample_weight) -> float:
        true_raw = raw_prediction[y.astype(np.intp), np.arange(y.size)]
        return _mean(np.logaddexp.reduce(raw_prediction, axis=0) - true_raw, sample_weight)

    @staticmethod
    def transform(raw_prediction: np.ndarray) -> np.ndarray:
        return softmax(raw_prediction, axis=1)


def softmax(raw: np.ndarray, axis: int) -> np.ndarray:
    """``exp(raw) / sum(exp(raw))`` along ``axis``, shifted by the maximum so that
    no exp overflows."""
    shifted = np.exp(raw - raw.max(axis=axis, keepdims=True))
    return shifted / shifted.sum(axis=axis, keepdims=True)


class CustomObjective:
    """A user function ``objective(y_true, y_pred) -> (grad, hess)``.

    ``y_true`` is the target (a classifier's: 1.0 for ``classes_[1]``, else
    0.0) and ``y_pred`` the raw scores, both in the caller's row order (not
    the era-sorted order of training), as float64 arrays the function may
    keep. ``grad`` and ``hess`` are per row, unweighted: the sample weights
    are applied here. The model starts from a raw score of 0 (the function's
    minimiser is unknown), as LightGBM does. ``link`` maps raw scores to
    predictions: the identity for a regressor, the sigmoid for a classifier
    (raw scores are log-odds).

    With several targets (``n_outputs > 1``, a regressor's 2-D ``y``) the
    function takes ``y_true`` and ``y_pred`` of shape (n_rows, n_targets)
    and returns ``grad`` and ``hess`` of that shape; where a target is
    unknown (NaN in ``y_true``) its values are not used and may be anything.
    """

    name = CUSTOM

    def __init__(self, function, link, row_order: np.ndarray | None = None,
                 n_outputs: int = 1):
        self.function = function
        self.link = link
        # Training rows are era-sorted: row i is the caller's row row_order[i].
        self.row_order = row_order
        # Several targets: the function takes and returns (n_rows, n_targets).
        self.n_outputs = int(n_outputs)

    def for_outputs(self, n_outputs: int) -> CustomObjective:
        """The same function for a ``y`` of ``n_outputs`` targets."""
        return CustomObjective(self.function, self.link, self.row_order, n_outputs)

    def base_score(self, y, sample_weight):
        return 0.0 if self.n_outputs == 1 else np.zeros(self.n_outputs)

    def gradients(self, y, raw_prediction, sample_weight, out_g, out_h) -> None:
        if self.n_outputs > 1:
            # Output-major (n_targets, n_rows) here; the function sees rows x targets.
            # A target's unknown rows (NaN) may get any gradient: they are not used.
            known = ~np.isnan(y)
            self._call(y.T, raw_prediction.T, sample_weight, out_g.T, out_h.T, known.T)
            return
        self._call(y, raw_prediction, sample_weight, out_g, out_h, None)

    def _call(self, y, raw_prediction, sample_weight, out_g, out_h, known) -> None:
        y_true, y_pred = np.array(y, dtype=np.float64), np.array(raw_prediction,
                                                                  dtype=np.float64)
        if self.row_order is not None:
            y_true[self.row_order] = y
            y_pred[self.row_order] = raw_prediction
        known_rows = known   # in the training rows' order, as out_g and out_h
        if known is not None and self.row_order is not None:
            known_in_order = np.empty_like(known)
            known_in_order[self.row_order] = known
            known = known_in_order
        returned = self.function(y_true, y_pred)
        function_name = getattr(self.function, "__name__", type(self.function).__name__)
        if not (isinstance(returned, tuple) and len(returned) == 2):
            raise ObjectiveError(
                f"objective {function_name!r} must return a (grad, hess) tuple of two arrays, "
                f"got {type(returned).__name__}")
        for label, values, out in (("grad", returned[0], out_g), ("hess", returned[1], out_h)):
            try:
                values = np.asarray(values, dtype=np.float64)
            except (TypeError, ValueError) as error:
                raise ObjectiveError(f"objective {function_name!r} returned a {label} that is "
                                     f"not numeric: {error}") from None
            if values.shape != y.shape:
                expected = (f"({len(y)},), one value per training row" if y.ndim == 1 else
                            f"{y.shape}, one value per training row and target")
                raise ObjectiveError(
                    f"objective {function_name!r} returned {label} of shape {values.shape}; "
                    f"expected {expected}")
            checked = values if known is None else np.where(known, values, 0.0)
            bad = ~np.isfinite(checked)
            if bad.any():
                raise ObjectiveError(
                    f"objective {function_name!r} returned a {label} that is not finite "
                    f"({_first_value(values, bad)!r} at row {_first_row(bad)}, "
                    f"{int(bad.sum())} values in all)")
            if label == "hess" and np.any(checked < 0):
                raise ObjectiveError(
                    f"objective {function_name!r} returned a negative hess "
                    f"({_first_value(values, checked < 0)!r} "
                    f"at row {_first_row(checked < 0)}); Newton leaves need hessians >= 0")
            out[:] = values if self.row_order is None else values[self.row_order]
        if sample_weight is not None:
            weight = sample_weight if y.ndim == 1 else sample_weight[:, np.newaxis]
            out_g *= weight
            out_h *= weight
        for label, out in (("grad", out_g), ("hess", out_h)):
            # Finite values whose sum overflows (1e307 on a few rows) cannot be
            # summed into a leaf; said here, where the objective is known. (A
            # target's unknown rows are not summed: they do not count.)
            counted = out if known_rows is None else np.where(known_rows, out, 0.0)
            with np.errstate(over="ignore"):
                total = float(np.sum(np.abs(counted)))
            if not np.isfinite(total):
                flat = np.abs(counted).reshape(len(counted), -1).max(axis=1)
                row = int(np.argmax(flat))
                largest = float(np.max(np.abs(counted[row])))
                if self.row_order is not None:   # the row as the caller numbers it
                    row = int(self.row_order[row])
                weighted = " times sample_weight" if sample_weight is not None else ""
                raise ObjectiveError(
                    f"objective {function_name!r} returned a {label} too large: the sum of its "
                    f"magnitudes{weighted} over the {len(out)} rows overflows float64 (the "
                    f"largest is {largest!r}, at row {row}); rescale the objective")

    def transform(self, raw_prediction: np.ndarray) -> np.ndarray:
        return self.link(raw_prediction)


def _first_value(values: np.ndarray, flags: np.ndarray) -> float:
    """The first flagged value (rows first, then targets)."""
    return float(values.reshape(-1)[int(np.argmax(flags.reshape(-1)))])


def _first_row(flags: np.ndarray) -> int:
    return int(np.argmax(flags.reshape(len(flags), -1).any(axis=1)))


def _unit_hessian(out_g, out_h, sample_weight) -> None:
    """``h = 1`` (times the weights, which also scale ``g``)."""
    if sample_weight is None:
        out_h.fill(1.0)
    else:
        out_g *= sample_weight
        out_h[:] = sample_weight


def _mean(losses: np.ndarray, sample_weight: np.ndarray | None) -> float:
    """The (weighted) mean of per-row losses; +inf when they overflow."""
    if not losses.size:
        return 0.0
    with np.errstate(over="ignore", invalid="ignore"):
        value = float(np.average(losses, weights=sample_weight))
    return value if not np.isnan(value) else np.inf


def weighted_quantile(y: np.ndarray, sample_weight: np.ndarray | None, q: float) -> float:
    """The smallest ``y`` value whose cumulative weight reaches ``q`` of the total."""
    if not y.size:
        return 0.0
    order = np.argsort(y, kind="stable")
    weights = np.ones(y.size) if sample_weight is None else sample_weight[order]
    cumulative = np.cumsum(weights)
    index = int(np.searchsorted(cumulative, q * cumulative[-1], side="left"))
    return float(y[order][min(index, y.size - 1)])


def _sigmoid(x: np.ndarray) -> np.ndarray:
    # exp of a large positive x overflows; split by sign to stay finite.
    out = np.empty_like(x, dtype=np.float64)
    positive = x >= 0
    out[positive] = 1.0 / (1.0 + np.exp(-x[positive]))
    exp_x = np.exp(x[~positive])
    out[~positive] = exp_x / (1.0 + exp_x)
    return out


OBJECTIVES = {cls.name: cls for cls in (SquaredError, Huber, Quantile, Logistic)}


def get_objective(name: str):
    """The built-in objective class ``name`` (those with parameters need ``alpha``)."""
    try:
        return OBJECTIVES[name]
    except KeyError:
        raise ValueError(
            f"objective must be one of {sorted(OBJECTIVES)}, got {name!r}"
        ) from None


def check_objective(objective, allowed: tuple, estimator: str):
    """``objective`` (None, a name of ``allowed`` or a callable) checked for ``estimator``.

    Returns the name to use (None becomes ``allowed[0]``) or the callable.
    """
    if objective is None:
        return allowed[0]
    if callable(objective):
        return objective
    if objective == CUSTOM:
        raise ValueError(
            f"objective={CUSTOM!r} marks a model loaded from a file whose objective was a "
            "function, which model files do not store; to train, pass the function again: "
            "set_params(objective=your_function)")
    if not isinstance(objective, str) or objective not in allowed:
        raise ValueError(
            f"objective of {estimator} must be None, a callable (y_true, y_pred) -> "
            f"(grad, hess) or one of {list(allowed)}, got {objective!r}")
    return objective


def make_objective(objective, *, alpha: float, link, row_order=None):
    """The objective object of a fit: a checked name or callable (:func:`check_objective`).

    ``alpha`` parameterises ``"huber"`` (delta > 0) and ``"quantile"`` (a level
    in (0, 1)); ``link`` and ``row_order`` serve a callable
    (:class:`CustomObjective`).
    """
    if callable(objective):
        return CustomObjective(objective, link, row_order)
    if objective == "quantile":
        if not 0.0 < alpha < 1.0:
            raise ValueError(f"alpha must be in (0, 1) for objective='quantile' (the quantile "
                             f"level), got {alpha!r}")
        return Quantile(alpha)
    if objective == "huber":
        return Huber(alpha)
    return get_objective(objective)
