"""Plots with matplotlib: per-era scores, feature importance, learning curves.

Every function returns a :class:`matplotlib.figure.Figure` and, given
``path=``, also saves it (PNG, or any format matplotlib infers from the file
name). Figures are made without :mod:`matplotlib.pyplot`, so nothing depends
on the interactive backend or on global state: a notebook shows the returned
figure, a script saves it. Pass ``ax=`` to draw into an existing Axes instead
(its figure is returned).

matplotlib is optional: ``pip install matplotlib``.
"""

from __future__ import annotations

import numpy as np

from packboost._compat import import_optional
from packboost.metrics import era_summary, per_era_correlation

__all__ = [
    "plot_era_correlation",
    "plot_era_report",
    "plot_era_scores",
    "plot_importance",
    "plot_metric",
]

_POSITIVE = "#2a7ab0"
_NEGATIVE = "#d0543c"
_CUMULATIVE = "#222222"
# At most this many era labels on an axis; the others are skipped.
_MAX_TICK_LABELS = 20


def plot_era_scores(eras, scores, *, label: str = "correlation", title: str | None = None,
                    ax=None, path=None, figsize=(10, 4)):
    """Bars of a score per era, with its cumulative sum on a second axis.

    Parameters
    ----------
    eras : array-like of shape (n_eras,)
        Era labels, in order.
    scores : array-like of shape (n_eras,)
        One score per era (NaN eras are left empty).
    label : str, default="correlation"
        Name of the score, for the axis and the legend.
    title : str, optional
        Default: the score's mean, Sharpe ratio and maximum drawdown.
    ax : matplotlib Axes, optional
    path : str or path, optional
        Save the figure there.
    figsize : (float, float), default=(10, 4)

    Returns
    -------
    matplotlib.figure.Figure
    """
    figure, ax = _figure_and_axes(ax, figsize)
    eras = np.asarray(eras)
    scores = np.asarray(scores, dtype=np.float64)
    if eras.shape != scores.shape or eras.ndim != 1:
        raise ValueError(f"eras and scores must be 1-D of one length, got {eras.shape} and "
                         f"{scores.shape}")
    positions = np.arange(len(scores))
    colors = np.where(scores >= 0, _POSITIVE, _NEGATIVE)
    ax.bar(positions, np.nan_to_num(scores), color=colors, width=0.85, label=label)
    ax.axhline(0.0, color="#888888", linewidth=0.8)
    summary = era_summary(scores)
    if summary["n_eras"]:
        ax.axhline(summary["mean"], color=_POSITIVE, linestyle="--", linewidth=1,
                   label=f"mean {summary['mean']:.4f}")
    ax.set_xlabel("era")
    ax.set_ylabel(label)
    _era_ticks(ax, eras)
    cumulative_ax = ax.twinx()
    cumulative_ax.plot(positions, np.nancumsum(scores), color=_CUMULATIVE, linewidth=1.5,
                       label=f"cumulative {label}")
    cumulative_ax.set_ylabel(f"cumulative {label}")
    handles, labels = ax.get_legend_handles_labels()
    more_handles, more_labels = cumulative_ax.get_legend_handles_labels()
    # On the twin axes, which are drawn last, so that no bar shows through.
    cumulative_ax.legend(handles + more_handles, labels + more_labels, loc="upper left",
                         fontsize="small", framealpha=0.9)
    if title is None:
        title = (f"{label} per era: mean {summary['mean']:.4f}, sharpe {summary['sharpe']:.2f}, "
                 f"max drawdown {summary['max_drawdown']:.4f} ({summary['n_eras']} eras)")
    ax.set_title(title)
    return _finish(figure, path)


def plot_era_correlation(y_true, y_pred, era, *, method: str = "pearson",
                         title: str | None = None, ax=None, path=None, figsize=(10, 4)):
    """Per-era correlation bars with the cumulative line.

    ``method`` as in :func:`packboost.metrics.per_era_correlation`; the other
    arguments as in :func:`plot_era_scores`.

    Examples
    --------
    >>> from packboost.plotting import plot_era_correlation
    >>> figure = plot_era_correlation(test.y, model.predict(test.X), test.era,
    ...                               method="numerai", path="eras.png")  # doctest: +SKIP
    """
    eras, scores = per_era_correlation(y_true, y_pred, era, method=method)
    return plot_era_scores(eras, scores, label=f"{method} corr", title=title, ax=ax, path=path,
                           figsize=figsize)


def plot_era_report(report, *, path=None, figsize=None):
    """One :func:`plot_era_scores` panel per score of a :class:`~packboost.metrics.EraReport`."""
    plt_figure = import_optional("matplotlib.figure", "packboost.plotting")
    names = list(report.scores)
    if not names:
        raise ValueError("the report holds no score to plot")
    figure = plt_figure.Figure(figsize=figsize or (10, 3.2 * len(names)), layout="constrained")
    axes = figure.subplots(len(names), 1, squeeze=False)[:, 0]
    for ax, name in zip(axes, names, strict=True):
        plot_era_scores(report.eras, report.scores[name], label=name, ax=ax)
    return _finish(figure, path)


def plot_importance(model, *, importance_type: str | None = None, max_features: int = 20,
                    feature_names=None, title: str | None = None, ax=None, path=None,
                    figsize=(7, 5)):
    """Horizontal bars of the most important features.

    Parameters
    ----------
    model : fitted PackBoostRegressor or PackBoostClassifier
    importance_type : {"gain", "split", "des"}, optional
        Default: the model's ``importance_type``.
    max_features : int, default=20
        Show the features with the largest importance (at least one).
    feature_names : list of str, optional
        Default: ``model.feature_names_in_``, else ``f0, f1, ...``.
    title, ax, path, figsize
        As in :func:`plot_era_scores`.

    Returns
    -------
    matplotlib.figure.Figure
    """
    kind = importance_type if importance_type is not None else model.importance_type
    values = model.get_feature_importance(kind, normalize=True)
    if feature_names is None:
        feature_names = getattr(model, "feature_names_in_", None)
    if feature_names is None:
        feature_names = [f"f{index}" for index in range(len(values))]
    feature_names = [str(name) for name in feature_names]
    if len(feature_names) != len(values):
        raise ValueError(f"feature_names has {len(feature_names)} names for {len(values)} "
                         "features")
    if isinstance(max_features, bool) or not isinstance(max_features, int) or max_features < 1:
        raise ValueError(f"max_features must be a positive int, got {max_features!r}")
    top = np.argsort(-values, kind="stable")[:max_features][::-1]
    figure, ax = _figure_and_axes(ax, figsize)
    ax.barh(np.arange(len(top)), values[top], color=_POSITIVE)
    ax.set_yticks(np.arange(len(top)), [feature_names[index] for index in top],
                  fontsize="small")
    ax.set_xlabel(f"share of total {kind}")
    ax.set_title(title if title is not None else f"feature importance ({kind})")
    return _finish(figure, path)


def plot_metric(model_or_evals_result, metric: str | None = None, *, data_names=None,
                title: str | None = None, ax=None, path=None, figsize=(7, 4)):
    """Learning curves: a metric per round for each eval set.

    Parameters
    ----------
    model_or_evals_result : fitted estimator or dict
        An estimator fitted with ``eval_set`` (its ``evals_result_``, and its
        ``best_iteration_`` marked by a dashed line) or an ``evals_result_``
        dict.
    metric : str, optional
        Default: the first metric recorded.
    data_names : list of str, optional
        Eval sets to draw (default: all).
    title, ax, path, figsize
        As in :func:`plot_era_scores`.

    Returns
    -------
    matplotlib.figure.Figure
    """
    if isinstance(model_or_evals_result, dict):
        evals_result, best_iteration, first_round = model_or_evals_result, None, 0
    else:
        evals_result = getattr(model_or_evals_result, "evals_result_", None)
        if evals_result is None:
            raise ValueError("the model is not fitted")
        best_iteration = getattr(model_or_evals_result, "best_iteration_", None)
        # Rounds are counted in the whole model: after init_model's rounds.
        first_round = getattr(model_or_evals_result, "_evals_first_round", 0)
    if not evals_result:
        raise ValueError("no evaluation was recorded: fit with eval_set=...")
    data_names = list(evals_result) if data_names is None else list(data_names)
    for name in data_names:
        if name not in evals_result:
            raise ValueError(f"no eval set {name!r}; recorded: {list(evals_result)}")
    if metric is None:
        metric = next(iter(evals_result[data_names[0]]))
    figure, ax = _figure_and_axes(ax, figsize)
    for name in data_names:
        if metric not in evals_result[name]:
            raise ValueError(f"no metric {metric!r} for {name!r}; recorded: "
                             f"{list(evals_result[name])}")
        values = np.asarray(evals_result[name][metric], dtype=np.float64)
        ax.plot(np.arange(1, len(values) + 1) + first_round, values, label=name)
    if best_iteration is not None:
        ax.axvline(best_iteration, color="#888888", linestyle="--", linewidth=1,
                   label=f"best iteration {best_iteration}")
    ax.set_xlabel("round")
    ax.set_ylabel(metric)
    ax.legend(fontsize="small")
    ax.set_title(title if title is not None else f"{metric} per round")
    return _finish(figure, path)


def _figure_and_axes(ax, figsize):
    if ax is not None:
        return ax.figure, ax
    matplotlib_figure = import_optional("matplotlib.figure", "packboost.plotting")
    figure = matplotlib_figure.Figure(figsize=figsize, layout="constrained")
    return figure, figure.add_subplot()


def _era_ticks(ax, eras):
    n_eras = len(eras)
    step = max(1, int(np.ceil(n_eras / _MAX_TICK_LABELS)))
    positions = np.arange(0, n_eras, step)
    ax.set_xticks(positions, [str(eras[index]) for index in positions], rotation=60,
                  fontsize="x-small", ha="right")
    ax.set_xlim(-0.6, n_eras - 0.4)


def _finish(figure, path):
    if path is not None:
        figure.savefig(path, dpi=100)
    return figure
