"""Per-era evaluation metrics (DESIGN.md section 5).

A model for era-structured data is judged era by era: compute one score per
era (:func:`per_era_correlation`), then summarise the sequence of scores
(:func:`era_summary`: mean, standard deviation, Sharpe ratio, worst era and
maximum drawdown).

Notes
-----
Everything is grouped by era without a Python loop over rows: the rows are
put in era order once (a stable argsort of the era codes), so each era is a
contiguous segment and the per-era sums are ``np.add.reduceat`` over the
segment starts.
"""

from __future__ import annotations

import numpy as np

__all__ = ["era_summary", "per_era_correlation"]

_CORRELATION_METHODS = ("pearson", "spearman")


def per_era_correlation(y_true, y_pred, era, *, method: str = "pearson"):
    """Correlation between ``y_true`` and ``y_pred`` inside each era.

    Parameters
    ----------
    y_true : array-like of shape (n_rows,)
        Target values.
    y_pred : array-like of shape (n_rows,)
        Predictions.
    era : array-like of shape (n_rows,)
        Era label of each row: any sortable values (integers, strings, ...).
        Rows need not be sorted by era.
    method : {"pearson", "spearman"}, default="pearson"
        ``"spearman"`` is the Pearson correlation of the ranks within the era,
        ties receiving the average of their ranks.

    Returns
    -------
    eras : ndarray of shape (n_eras,)
        The distinct era labels, sorted (as :func:`numpy.unique` sorts them).
    correlations : ndarray of shape (n_eras,), float64
        The correlation of each era, in the order of ``eras``. No era is
        dropped: the value is NaN for an era where ``y_true`` or ``y_pred``
        is constant (including an era of one row), where the correlation is
        undefined, and for an era where either input has a NaN or infinite
        value.
    """
    y_true = _as_1d(y_true, "y_true", dtype=np.float64)
    n_rows = y_true.shape[0]
    y_pred = _as_1d(y_pred, "y_pred", dtype=np.float64, n_rows=n_rows)
    era = _as_1d(era, "era", n_rows=n_rows)
    if method not in _CORRELATION_METHODS:
        raise ValueError(f"method must be one of {_CORRELATION_METHODS}, got {method!r}")

    eras, era_codes = np.unique(era, return_inverse=True)
    if n_rows == 0:
        return eras, np.empty(0, dtype=np.float64)
    row_order = np.argsort(era_codes, kind="stable")
    codes = era_codes[row_order]
    era_sizes = np.bincount(codes, minlength=eras.size)
    era_starts = np.concatenate(([0], np.cumsum(era_sizes)[:-1]))
    true_sorted = y_true[row_order]
    pred_sorted = y_pred[row_order]

    non_finite = ~(np.isfinite(true_sorted) & np.isfinite(pred_sorted))
    has_non_finite = np.bincount(codes, weights=non_finite, minlength=eras.size) > 0
    if method == "spearman":
        true_sorted = _average_ranks(true_sorted, codes)
        pred_sorted = _average_ranks(pred_sorted, codes)

    correlations = _segment_pearson(true_sorted, pred_sorted, era_starts, era_sizes)
    correlations[has_non_finite] = np.nan
    return eras, correlations


def era_summary(per_era_values) -> dict:
    """Summary statistics of a sequence of per-era scores.

    Parameters
    ----------
    per_era_values : array-like of shape (n_eras,)
        One score per era, in era order (the order matters for the drawdown),
        e.g. the correlations returned by :func:`per_era_correlation`. NaN
        entries (eras where the score is undefined) are excluded from every
        statistic, and ``n_eras`` counts only the eras kept.

    Returns
    -------
    dict
        ``mean``; ``std``, the population standard deviation (``ddof=0``);
        ``sharpe`` = ``mean / std`` (NaN when ``std`` is 0); ``worst``, the
        minimum; ``max_drawdown``, the largest fall of the cumulative sum of
        the scores from its running peak, as a non-negative number (the sum
        starts at 0, so a first negative era counts as a drawdown);
        ``n_eras``, an int. With no era left, every statistic is NaN and
        ``n_eras`` is 0.
    """
    values = _as_1d(per_era_values, "per_era_values", dtype=np.float64)
    values = values[~np.isnan(values)]
    if values.size == 0:
        nan = float("nan")
        return {
            "mean": nan, "std": nan, "sharpe": nan, "worst": nan, "max_drawdown": nan, "n_eras": 0,
        }
    mean = float(np.mean(values))
    std = float(np.std(values))
    cumulative = np.concatenate(([0.0], np.cumsum(values)))
    drawdown = np.maximum.accumulate(cumulative) - cumulative
    return {
        "mean": mean,
        "std": std,
        "sharpe": mean / std if std > 0 else float("nan"),
        "worst": float(np.min(values)),
        "max_drawdown": float(np.max(drawdown)),
        "n_eras": int(values.size),
    }


def _segment_pearson(a, b, starts, sizes):
    """Pearson correlation of ``a`` and ``b`` on each contiguous segment.

    Two passes (means, then centred products) for accuracy. Constancy is
    tested on the values themselves (min == max), not on a centred sum of
    squares, which rounding can leave a tiny non-zero for a constant segment.
    """
    mean_a = np.add.reduceat(a, starts) / sizes
    mean_b = np.add.reduceat(b, starts) / sizes
    centred_a = a - np.repeat(mean_a, sizes)
    centred_b = b - np.repeat(mean_b, sizes)
    cross = np.add.reduceat(centred_a * centred_b, starts)
    var_a = np.add.reduceat(centred_a * centred_a, starts)
    var_b = np.add.reduceat(centred_b * centred_b, starts)
    constant = (np.maximum.reduceat(a, starts) == np.minimum.reduceat(a, starts)) | (
        np.maximum.reduceat(b, starts) == np.minimum.reduceat(b, starts)
    )
    with np.errstate(divide="ignore", invalid="ignore"):
        correlations = np.clip(cross / np.sqrt(var_a * var_b), -1.0, 1.0)
    correlations[constant] = np.nan
    return correlations


def _average_ranks(values, codes):
    """Ranks of ``values`` within each group of ``codes``, ties averaged.

    ``codes`` must be sorted (rows in era order). The ranks are offset by the
    group's first position, which no correlation within the group can see.
    """
    order = np.lexsort((values, codes))
    sorted_values = values[order]
    sorted_codes = codes[order]
    new_run = np.ones(values.shape[0], dtype=bool)
    new_run[1:] = sorted_values[1:] != sorted_values[:-1]
    new_run[1:] |= sorted_codes[1:] != sorted_codes[:-1]
    run_starts = np.flatnonzero(new_run)
    run_ends = np.append(run_starts[1:], values.shape[0]) - 1
    run_ids = np.cumsum(new_run) - 1
    ranks = np.empty(values.shape[0], dtype=np.float64)
    ranks[order] = 0.5 * (run_starts + run_ends)[run_ids]
    return ranks


def _as_1d(values, name: str, *, dtype=None, n_rows: int | None = None) -> np.ndarray:
    try:
        array = np.asarray(values, dtype=dtype)
    except (TypeError, ValueError) as exc:
        raise TypeError(
            f"{name} must be array-like of numbers, got {type(values).__name__}"
        ) from exc
    if array.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {array.shape}")
    if n_rows is not None and array.shape[0] != n_rows:
        raise ValueError(
            f"{name} has {array.shape[0]} rows but y_true has {n_rows}; lengths must match"
        )
    return array
