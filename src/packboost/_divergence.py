"""Stopping a fit that diverges, with an error that names ``learning_rate``.

A step of ``learning_rate`` times the Newton step overshoots the minimum for
rates above 1; for squared error each round then multiplies the residuals by
about ``|1 - learning_rate|``, so from a rate of 2 the predictions grow
geometrically (to 1e18 in 30 rounds at a rate of 10) and the fit "succeeds"
with a model that predicts nothing. The training loss shows it: it grows by
orders of magnitude, where boosting only ever lowers it, apart from small
transients (a converging fit at a rate of 1.9 stayed below 13 times its
starting loss).

:class:`DivergenceWatch` compares the training loss after each round with
the loss of the constant starting score (the base score: the best
prediction that ignores X); more than :data:`DIVERGENCE_FACTOR` times that
is divergence. A callable objective has no loss to compute: the mean square
of its gradients stands in (for squared error it is twice the loss), checked
on the gradients each round computes anyway.

Divergence is gross (orders of magnitude), so the loss is taken on every
k-th training row, at most :data:`CHECKED_ROWS` of them (a fixed stride: no
random draw, so the model does not change): a millisecond per round where
all 2.4M rows of a Numerai fit took 50 to 200.
"""

from __future__ import annotations

import numpy as np

# A training loss this many times that of the constant starting score: no fit
# that converges gets there (the largest seen: 13, a logistic fit at a rate of
# 1.9 with 1% positives), every squared-error fit at a rate >= 2.5 does within
# a few rounds.
DIVERGENCE_FACTOR = 100.0
# Rows the loss is computed on (every k-th of the training rows).
CHECKED_ROWS = 1 << 16


class DivergenceWatch:
    """The training loss of a fit against that of its constant starting score.

    ``objective`` computes gradients as :func:`packboost.booster.train` calls
    it; ``base_raw`` (n_outputs, n_rows) are the starting raw scores and
    ``base_gradients`` the gradients there. ``begin`` is the first round of
    this fit (continued training counts on).
    """

    def __init__(self, objective, y, sample_weight, learning_rate: float,
                 base_raw: np.ndarray, base_gradients: np.ndarray):
        n_rows = base_raw.shape[-1]
        # The rows are the last axis of y (a 2-D y of several targets is
        # output-major), of the raw scores and of the gradients.
        self.rows = slice(None, None, max(1, -(-n_rows // CHECKED_ROWS)))
        self.objective = objective
        self.y = y[..., self.rows]
        self.sample_weight = None if sample_weight is None else sample_weight[self.rows]
        self.learning_rate = learning_rate
        self.has_loss = hasattr(objective, "loss")
        # Several targets unknown in some rows (NaN, packboost._unknown_targets):
        # each target's loss on its known rows.
        self.known = None
        if self.y.ndim == 2 and self.y.dtype.kind == "f" and np.isnan(self.y).any():
            self.known = ~np.isnan(self.y)
        self.reference = (self._loss(base_raw) if self.has_loss
                          else _mean_square(base_gradients[..., self.rows]))

    def _loss(self, raw_prediction: np.ndarray) -> float:
        return self._loss_of_checked_rows(raw_prediction[..., self.rows])

    @property
    def row_stride(self) -> int:
        """The loss is taken on rows 0, k, 2k, ...: this k."""
        return self.rows.step

    def _loss_of_checked_rows(self, raw: np.ndarray) -> float:
        raw = raw[0] if len(raw) == 1 else raw
        if self.known is None:
            return self.objective.loss(self.y, raw, self.sample_weight)
        weight = self.sample_weight
        losses = [self.objective.objective.loss(
                      self.y[output][known], raw[output][known],
                      None if weight is None else weight[known])
                  for output, known in enumerate(self.known) if known.any()]
        return float(np.mean(losses)) if losses else 0.0

    def after_round(self, raw_prediction: np.ndarray, round_index: int) -> None:
        """Raise if the scores after round ``round_index`` have diverged
        (objectives with a loss)."""
        if self.has_loss:
            self._check(self._loss(raw_prediction), round_index, "the training loss")

    def after_round_on_checked_rows(self, checked_raw: np.ndarray, round_index: int) -> None:
        """:meth:`after_round` from the raw scores of the checked rows alone
        (``raw_prediction[..., ::row_stride]``: a device holds the others)."""
        if self.has_loss:
            self._check(self._loss_of_checked_rows(checked_raw), round_index,
                        "the training loss")

    def before_round(self, gradients: np.ndarray, round_index: int) -> None:
        """Raise if the gradients at the start of round ``round_index`` (those
        of the scores after the round before) have diverged (callables)."""
        if not self.has_loss:
            self._check(_mean_square(gradients[..., self.rows]), round_index - 1,
                        "the mean square of the objective's gradients")

    def _check(self, value: float, round_index: int, measure: str) -> None:
        if np.isfinite(value) and (self.reference == 0.0
                                   or not value > DIVERGENCE_FACTOR * self.reference):
            return  # (a starting loss of 0 -- a constant target -- gives no scale)
        growth = ("is not finite (it overflowed float64)" if not np.isfinite(value) else
                  f"is {value / self.reference:.3g} times its value at the starting score "
                  f"(more than {DIVERGENCE_FACTOR:g} times: the fit moves away from the data)")
        advice = ("rates above 1 overshoot every Newton step and from about 2 the "
                  "predictions grow without bound; usual values are 0.01 to 0.3"
                  if self.learning_rate > 1.0 else
                  "shorter steps, or a larger reg_lambda (which bounds the step of a leaf "
                  "whose hessians are near 0), keep the fit near the data")
        raise FloatingPointError(
            f"training diverged in round {round_index}: {measure} {growth}; lower "
            f"learning_rate (now {self.learning_rate!r}): {advice}")


def _mean_square(values: np.ndarray) -> float:
    with np.errstate(over="ignore"):
        return float(np.mean(np.square(values))) if values.size else 0.0
