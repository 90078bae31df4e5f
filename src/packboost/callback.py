"""Training callbacks: early stopping, logging, a progress bar, your own.

``fit(..., callbacks=[...])`` takes :class:`TrainingCallback` objects and
plain functions. The boosting loop (:func:`packboost.booster.train`) calls

* ``before_training(info)`` once, before the first round,
* ``after_iteration(info)`` after every round, once the eval sets are scored;
  a true return value stops training,
* ``after_training(info)`` once, at the end,

with one :class:`TrainingInfo` that the callbacks may read and, for the
best-iteration fields, write. A plain function ``f(info)`` is called as
``after_iteration``.

Callbacks never touch the random draws, so stopping early gives exactly the
first rounds of the model that would have been grown without stopping.

Examples
--------
>>> from packboost.callback import TrainingCallback
>>> class StopWhenGoodEnough(TrainingCallback):
...     def after_iteration(self, info):
...         return info.latest("valid_0", "pearson_mean") > 0.05
"""

from __future__ import annotations

import math
import shutil
import sys
import time
import warnings
from dataclasses import dataclass, field

__all__ = [
    "EarlyStopping",
    "LogEvaluation",
    "ProgressBar",
    "TrainingCallback",
    "TrainingInfo",
]


@dataclass
class TrainingInfo:
    """The state of a fit, as callbacks see it.

    Rounds are counted in the whole model: with ``init_model``, its rounds
    come first, so ``begin_iteration`` is their number.

    Attributes
    ----------
    model : estimator or None
        The estimator being fitted (its fitted attributes are not set yet).
    begin_iteration, end_iteration : int
        The rounds grown by this fit are ``begin_iteration .. end_iteration - 1``.
    iteration : int
        0-based index of the round just grown (-1 before the first).
    evals_result : dict
        ``{eval set name: {metric name: [value after each round of this fit]}}``.
    metrics : dict
        ``{metric name: higher is better}`` in ``eval_metric`` order (filled
        after the first round for callable metrics).
    eval_names : list of str
        Eval set names, in ``eval_set`` order.
    best_iteration : int or None
        Set by :class:`EarlyStopping`: the number of rounds of the best model.
    best_score : dict or None
        ``{eval set name: {metric name: value}}`` at ``best_iteration``.
    restore_best : bool
        When true at the end, the model keeps its first ``best_iteration``
        rounds only.
    start_time : float
        ``time.perf_counter()`` when training began.
    """

    model: object = None
    begin_iteration: int = 0
    end_iteration: int = 0
    iteration: int = -1
    evals_result: dict = field(default_factory=dict)
    metrics: dict = field(default_factory=dict)
    eval_names: list = field(default_factory=list)
    best_iteration: int | None = None
    best_score: dict | None = None
    restore_best: bool = False
    start_time: float = field(default_factory=time.perf_counter)

    @property
    def elapsed(self) -> float:
        """Seconds since training began."""
        return time.perf_counter() - self.start_time

    @property
    def rounds_done(self) -> int:
        """Rounds grown by this fit so far."""
        return self.iteration + 1 - self.begin_iteration

    def latest(self, data_name: str | None = None, metric: str | None = None) -> float:
        """The last recorded value of ``metric`` on ``data_name``.

        Defaults: the last eval set and the first metric.
        """
        if not self.eval_names:
            raise ValueError("no eval_set: nothing is recorded")
        data_name = self.eval_names[-1] if data_name is None else data_name
        history = self.evals_result[data_name]
        metric = next(iter(history)) if metric is None else metric
        return history[metric][-1]


class TrainingCallback:
    """Base class of callbacks; every hook does nothing unless overridden."""

    def before_training(self, info: TrainingInfo) -> None:
        """Called once before the first round."""

    def after_iteration(self, info: TrainingInfo) -> bool:
        """Called after every round; return True to stop training."""
        return False

    def after_training(self, info: TrainingInfo) -> None:
        """Called once when training ends (stopped early or not)."""


class EarlyStopping(TrainingCallback):
    """Stop when a metric has not improved for ``rounds`` rounds; keep the best model.

    Parameters
    ----------
    rounds : int
        Patience: training stops after this many rounds without improvement.
    metric : str, optional
        The metric to watch (any name recorded in ``evals_result_``, e.g.
        ``"numerai_sharpe"``). Default: the first of ``eval_metric``.
    data_name : str, optional
        The eval set to watch. Default: the last one of ``eval_set``.
    min_delta : float, default=0.0
        An improvement must beat the best value by more than this.
    maximize : bool, optional
        Whether larger is better; default from the metric (correlations and
        Sharpe up, errors, std and drawdown down).
    restore_best : bool, default=True
        Keep only the first ``best_iteration_`` rounds in the fitted model.

    Notes
    -----
    A NaN value (e.g. a Sharpe ratio while every era scores the same) is
    never an improvement, and counts towards the patience like any round
    without one. If the metric is NaN in every round, training stops after
    ``rounds`` rounds, keeps them all, and warns (``UserWarning``): there is no
    best iteration.
    """

    def __init__(self, rounds: int, *, metric: str | None = None, data_name: str | None = None,
                 min_delta: float = 0.0, maximize: bool | None = None,
                 restore_best: bool = True):
        if isinstance(rounds, bool) or not isinstance(rounds, int) or rounds < 1:
            raise ValueError(f"early stopping rounds must be a positive int, got {rounds!r}")
        if not min_delta >= 0:
            raise ValueError(f"min_delta must be non-negative, got {min_delta!r}")
        self.rounds = rounds
        self.metric = metric
        self.data_name = data_name
        self.min_delta = float(min_delta)
        self.maximize = maximize
        self.restore_best = restore_best

    def before_training(self, info):
        if not info.eval_names:
            raise ValueError("early stopping needs at least one eval_set to watch")
        if self.data_name is not None and self.data_name not in info.eval_names:
            raise ValueError(
                f"early stopping data_name={self.data_name!r} is not an eval set; the eval "
                f"sets are {info.eval_names}"
            )
        self._data_name = self.data_name or info.eval_names[-1]
        self._best_value = None
        self._best_iteration = None

    def after_iteration(self, info):
        history = info.evals_result[self._data_name]
        metric = self.metric if self.metric is not None else next(iter(info.metrics))
        if metric not in history:
            raise ValueError(
                f"early stopping metric {metric!r} is not recorded; the metrics are "
                f"{list(history)}"
            )
        maximize = info.metrics[metric] if self.maximize is None else self.maximize
        value = history[metric][-1]
        if not math.isnan(value) and (
                self._best_value is None
                or (maximize and value > self._best_value + self.min_delta)
                or (not maximize and value < self._best_value - self.min_delta)):
            self._best_value = value
            self._best_iteration = info.iteration
            info.best_iteration = info.iteration + 1
            info.best_score = {name: {key: values[-1] for key, values in metrics.items()}
                               for name, metrics in info.evals_result.items()}
            return False
        waited = info.iteration - (self._best_iteration if self._best_iteration is not None
                                   else info.begin_iteration - 1)
        return waited >= self.rounds

    def after_training(self, info):
        if self.restore_best:
            info.restore_best = True
        if self._best_iteration is None and info.rounds_done > 0:
            # Every round's value was NaN: nothing to compare, no best round.
            # (LightGBM and XGBoost then keep round 1 without a word.)
            metric = self.metric if self.metric is not None else next(iter(info.metrics))
            warnings.warn(
                f"early stopping: {metric!r} on {self._data_name!r} was NaN in all "
                f"{info.rounds_done} rounds, so there is no best iteration (best_iteration_ is "
                f"None) and the {info.rounds_done} rounds grown are kept. A per-era metric is NaN "
                "when the predictions or the targets are constant in every era, or an eval "
                "set has one era for a std or Sharpe; watch another metric or eval set",
                UserWarning, stacklevel=2)


class LogEvaluation(TrainingCallback):
    """Print the eval metrics every ``period`` rounds.

    Parameters
    ----------
    period : int, default=1
        Print after rounds ``period, 2 * period, ...`` and after the last one.
    stream : file-like, optional
        Where to print (default: ``sys.stdout`` at the time of printing).
    """

    def __init__(self, period: int = 1, *, stream=None):
        if isinstance(period, bool) or not isinstance(period, int) or period < 1:
            raise ValueError(f"period must be a positive int, got {period!r}")
        self.period = period
        self.stream = stream

    def after_iteration(self, info):
        rounds_done = info.rounds_done
        last = info.iteration + 1 == info.end_iteration
        if rounds_done % self.period == 0 or last:
            self._print(format_evaluation(info))
        return False

    def after_training(self, info):
        if info.best_iteration is not None:
            scores = info.best_score or {}
            shown = "  ".join(f"{name} {metric}={value:.6g}" for name, metrics in scores.items()
                              for metric, value in metrics.items())
            self._print(f"best iteration: {info.best_iteration}  {shown}".rstrip())

    def _print(self, text):
        print(text, file=self.stream if self.stream is not None else sys.stdout, flush=True)


def format_evaluation(info: TrainingInfo) -> str:
    """``[round/total]  set metric=value ...`` for the round just grown."""
    width = len(str(info.end_iteration))
    parts = [f"[{info.iteration + 1:>{width}}/{info.end_iteration}]"]
    for name, metrics in info.evals_result.items():
        parts += [f"{name} {metric}={values[-1]:.6g}" for metric, values in metrics.items()
                  if values]
    return "  ".join(parts)


class ProgressBar(TrainingCallback):
    """A one-line progress bar with the time left and the latest metric.

    Parameters
    ----------
    delay : float, default=1.0
        Seconds before the bar first appears, so short fits print nothing.
    stream : file-like, optional
        Default ``sys.stderr``.
    width : int, default=30
        Characters of the bar itself.
    refresh : float, default=0.2
        Minimum seconds between redraws.
    """

    def __init__(self, *, delay: float = 1.0, stream=None, width: int = 30,
                 refresh: float = 0.2):
        self.delay = float(delay)
        self.stream = stream
        self.width = int(width)
        self.refresh = float(refresh)

    def before_training(self, info):
        self._shown = False
        self._last_draw = -math.inf
        self._last_length = 0

    def after_iteration(self, info):
        elapsed = info.elapsed
        last = info.iteration + 1 == info.end_iteration
        if elapsed >= self.delay and (last or elapsed - self._last_draw >= self.refresh):
            self._draw(info, elapsed)
        return False

    def after_training(self, info):
        if self._shown:
            self._draw(info, info.elapsed)
            self._stream().write("\n")
            self._stream().flush()

    def _stream(self):
        return self.stream if self.stream is not None else sys.stderr

    def _draw(self, info, elapsed):
        total = max(info.end_iteration - info.begin_iteration, 1)
        done = info.rounds_done
        filled = int(self.width * done / total)
        bar = "#" * filled + "-" * (self.width - filled)
        remaining = elapsed / done * (total - done) if done else float("nan")
        text = f"\r[{bar}] {done}/{total} rounds  {elapsed:.1f}s  eta {remaining:.1f}s"
        if info.eval_names and info.metrics:
            metric = next(iter(info.metrics))
            try:
                text += f"  {info.eval_names[-1]} {metric}={info.latest(metric=metric):.4g}"
            except (KeyError, IndexError):
                pass
        # One line whatever the terminal: a line longer than the terminal wraps,
        # and "\r" then returns to the start of its last part only (the bar
        # would scroll a new line every draw); shorter text must cover the last.
        columns = max(20, shutil.get_terminal_size((80, 24)).columns - 1)
        body = text[1:][:columns]
        self._stream().write("\r" + body.ljust(min(columns, self._last_length)))
        self._stream().flush()
        self._last_length = len(body)
        self._shown = True
        self._last_draw = elapsed


class _FunctionCallback(TrainingCallback):
    """A plain function called after every round."""

    def __init__(self, function):
        self.function = function

    def after_iteration(self, info):
        return bool(self.function(info))


class CallbackList:
    """Calls every callback's hook in order (internal)."""

    def __init__(self, callbacks=()):
        self.callbacks = []
        for callback in callbacks or ():
            if isinstance(callback, TrainingCallback) or hasattr(callback, "after_iteration"):
                self.callbacks.append(callback)
            elif callable(callback):
                self.callbacks.append(_FunctionCallback(callback))
            else:
                raise TypeError(
                    f"a callback must be a TrainingCallback or a function, got {callback!r}"
                )

    def before_training(self, info):
        for callback in self.callbacks:
            if hasattr(callback, "before_training"):
                callback.before_training(info)

    def after_iteration(self, info) -> bool:
        # Every callback sees every round, even when an earlier one asks to stop.
        stop = False
        for callback in self.callbacks:
            stop = bool(callback.after_iteration(info)) or stop
        return stop

    def after_training(self, info):
        for callback in self.callbacks:
            if hasattr(callback, "after_training"):
                callback.after_training(info)
