"""Per-era evaluation metrics (README.md, "Per-era metrics").

A model for era-structured data is judged era by era: compute one score per
era (:func:`per_era_correlation`, :func:`feature_neutral_correlation`), then
summarise the sequence of scores (:func:`era_summary`: mean, standard
deviation, Sharpe ratio, worst era and maximum drawdown). :func:`era_report`
does both for several correlations at once and prints as a table
(:mod:`packboost.reports`; ``EraReport`` and ``era_report`` are importable
from here too).

Three correlations are offered, all computed inside each era:

``"pearson"``
    The Pearson correlation of targets and predictions.
``"spearman"``
    The Pearson correlation of their ranks (ties get the average rank).
``"numerai"``
    Numerai's tournament correlation (``numerai_tools.scoring.numerai_corr``):
    the predictions are ranked (ties kept), mapped to percentiles
    ``(rank - 0.5) / n``, gaussianised with the normal quantile function and
    raised to the power 1.5 keeping their sign; the targets are centred on
    their era mean and raised to the power 1.5 keeping their sign; the score
    is the Pearson correlation of the two. The 1.5 powers weight the tails,
    where Numerai's stakes are.

The same names, joined to a statistic, are the per-era metrics that
``fit(eval_set=...)`` records every round and early stopping can watch:
``"pearson_mean"``, ``"numerai_sharpe"``, ``"spearman_worst"``, ... (see
:data:`EVAL_METRIC_NAMES`; the registry of those metrics is
:mod:`packboost._eval_metrics`).

Notes
-----
Everything is grouped by era without a Python loop over rows: the rows are
put in era order once (a stable argsort of the era codes), so each era is a
contiguous segment and the per-era sums are ``np.add.reduceat`` over the
segment starts. The normal quantile function is Wichura's algorithm AS 241
(accurate to about 1e-16), vectorised in NumPy, so no SciPy is needed.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = [
    "CORRELATION_METHODS",
    "ERA_STATISTICS",
    "EVAL_METRIC_NAMES",  # noqa: F822 (moved; __getattr__ below)
    "EraReport",  # noqa: F822 (moved; __getattr__ below)
    "era_report",  # noqa: F822 (moved; __getattr__ below)
    "era_summary",
    "feature_neutral_correlation",
    "make_era_scorer",  # noqa: F822 (packboost._era_scorer; __getattr__ below)
    "numerai_correlation",
    "per_era_correlation",
]

CORRELATION_METHODS = ("pearson", "spearman", "numerai")
# Summary statistics of a sequence of per-era scores (era_summary's keys, n_eras aside).
ERA_STATISTICS = ("mean", "std", "sharpe", "worst", "max_drawdown")

# Least-squares cut-off of neutralisation, as numerai_tools.scoring.neutralize uses.
NEUTRALIZE_RCOND = 1e-6
# Exponent of Numerai's tail weighting.
NUMERAI_POWER = 1.5


# ----------------------------------------------------------------------------- per era


def per_era_correlation(y_true, y_pred, era=None, *, method: str = "pearson"):
    """Correlation between ``y_true`` and ``y_pred`` inside each era.

    Parameters
    ----------
    y_true : array-like of shape (n_rows,)
        Target values.
    y_pred : array-like of shape (n_rows,)
        Predictions.
    era : array-like of shape (n_rows,) or None, default=None
        Era label of each row: any sortable values (integers, strings, ...).
        Rows need not be sorted by era. None puts every row in one era
        (labelled 0).
    method : {"pearson", "spearman", "numerai"}, default="pearson"
        ``"spearman"`` is the Pearson correlation of the ranks within the era,
        ties receiving the average of their ranks. ``"numerai"`` is Numerai's
        correlation (module docstring); it agrees with
        ``numerai_tools.scoring.numerai_corr`` applied era by era.

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

    Examples
    --------
    >>> from packboost.metrics import per_era_correlation
    >>> eras, corr = per_era_correlation([0, 1, 2, 0, 1, 2], [0, 1, 3, 2, 1, 0],
    ...                                  ["a", "a", "a", "b", "b", "b"])
    >>> eras.tolist(), corr.round(3).tolist()
    (['a', 'b'], [0.982, -1.0])
    """
    y_true = _as_1d(y_true, "y_true", dtype=np.float64)
    n_rows = y_true.shape[0]
    y_pred = _as_1d(y_pred, "y_pred", dtype=np.float64, n_rows=n_rows)
    _check_method(method)
    scorer = EraScorer(y_true, era)
    return scorer.labels, scorer.correlations(y_pred, method)


def numerai_correlation(y_true, y_pred) -> float:
    """Numerai's correlation of one era (all rows together); NaN if undefined.

    Equal to ``numerai_tools.scoring.numerai_corr(pd.DataFrame({"p": y_pred}),
    pd.Series(y_true))["p"]`` on finite inputs. See :func:`per_era_correlation`
    with ``method="numerai"`` for the per-era version.
    """
    return float(per_era_correlation(y_true, y_pred, None, method="numerai")[1][0])


def feature_neutral_correlation(y_true, y_pred, features, era=None, *,
                                proportion: float = 1.0):
    """Numerai correlation of the predictions made neutral to ``features``, per era.

    In each era (as ``numerai_tools.scoring.feature_neutral_corr`` does on one
    era): the predictions are ranked (ties kept) and gaussianised; their
    least-squares projection on the features plus an intercept, times
    ``proportion``, is subtracted; the rest is scaled to unit variance and
    scored with Numerai's correlation. It measures the part of a model's
    score that no linear mix of the features explains.

    Parameters
    ----------
    y_true, y_pred : array-like of shape (n_rows,)
    features : array-like or DataFrame of shape (n_rows, n_features)
        The features to neutralise against (e.g. those the model was fit on).
    era : array-like of shape (n_rows,) or None, default=None
    proportion : float, default=1.0
        Fraction of the projection removed (0 keeps the predictions).

    Returns
    -------
    eras, correlations : ndarray of shape (n_eras,)
        As in :func:`per_era_correlation` (NaN where undefined). The cost is
        one least-squares solve per era, ``O(rows x features^2)``.
    """
    from packboost import _inputs

    y_true = _as_1d(y_true, "y_true", dtype=np.float64)
    n_rows = y_true.shape[0]
    y_pred = _as_1d(y_pred, "y_pred", dtype=np.float64, n_rows=n_rows)
    features, _ = _inputs.as_matrix(features, argument="features")
    if features.ndim != 2 or features.shape[0] != n_rows:
        raise ValueError(
            f"features must have shape ({n_rows}, n_features), got {features.shape}"
        )
    proportion = float(proportion)
    scorer = EraScorer(y_true, era)
    groups = scorer.groups
    pred_sorted = groups.gather(y_pred)
    result = np.full(groups.n_eras, np.nan)
    for index, (start, size) in enumerate(zip(groups.starts.tolist(), groups.sizes.tolist(),
                                              strict=True)):
        rows = slice(start, start + size)
        era_rows = groups.rows(index)
        predictions = pred_sorted[rows]
        if not (np.isfinite(predictions).all() and np.isfinite(scorer.target[rows]).all()):
            continue
        gaussian = _normal_quantile(_percentile_ranks(predictions))
        if np.ptp(gaussian) == 0:
            continue
        design = np.empty((size, features.shape[1] + 1), dtype=np.float64)
        design[:, :-1] = features[era_rows]
        if not np.isfinite(design[:, :-1]).all():
            continue
        # Each feature column scaled by a power of two to a largest magnitude in
        # [1, 2): the projection does not depend on the columns' scales, but the
        # least-squares cut-off (rcond, relative to the largest singular value)
        # would drop a column of features much smaller than the intercept.
        peaks = np.max(np.abs(design[:, :-1]), axis=0)
        design[:, :-1] = np.ldexp(design[:, :-1],
                                  -np.where(peaks > 0, np.frexp(peaks)[1] - 1, 0))
        design[:, -1] = 1.0
        coefficients = np.linalg.lstsq(design, gaussian, rcond=NEUTRALIZE_RCOND)[0]
        neutral = gaussian - proportion * (design @ coefficients)
        scale = np.std(neutral)
        if not scale > 0:
            continue
        neutral /= scale
        transformed = _signed_power(_normal_quantile(_percentile_ranks(neutral)))
        target = scorer.transformed_target("numerai")[rows]
        result[index] = _pearson(target, transformed)
    return scorer.labels, result


class EraScorer:
    """Targets grouped by era once, scored against many predictions.

    Used by :func:`per_era_correlation` and, every boosting round, by the
    evaluation of ``eval_set``: the era grouping and the target's transforms
    are computed once.

    Parameters
    ----------
    y_true : array-like of shape (n_rows,)
    era : array-like of shape (n_rows,) or None
    """

    def __init__(self, y_true, era=None):
        y_true = _as_1d(y_true, "y_true", dtype=np.float64)
        self.groups = _EraGroups(era, y_true.shape[0])
        self.labels = self.groups.labels
        self.target = self.groups.gather(y_true)
        self._target_bad = self.groups.any_per_era(~np.isfinite(self.target))
        self._transformed = {}

    def transformed_target(self, method: str) -> np.ndarray:
        """The era-sorted target as ``method`` correlates it (cached)."""
        if method not in self._transformed:
            self._transformed[method] = self._transform(self.target, method, is_target=True)
        return self._transformed[method]

    def correlations(self, y_pred, method: str = "pearson") -> np.ndarray:
        """Per-era correlation of ``y_pred`` (rows in the caller's order)."""
        _check_method(method)
        groups = self.groups
        y_pred = _as_1d(y_pred, "y_pred", dtype=np.float64, n_rows=self.target.shape[0])
        if groups.n_eras == 0:
            return np.empty(0, dtype=np.float64)
        pred_sorted = groups.gather(y_pred)
        bad = self._target_bad | groups.any_per_era(~np.isfinite(pred_sorted))
        target = self.transformed_target(method)
        prediction = self._transform(pred_sorted, method, is_target=False)
        correlations = _segment_pearson(target, prediction, groups.starts, groups.sizes)
        correlations[bad] = np.nan
        return correlations

    def _transform(self, values, method, *, is_target):
        groups = self.groups
        if method == "pearson" or values.size == 0:
            return values
        with np.errstate(invalid="ignore", divide="ignore"):
            if method == "spearman":
                return _average_ranks(values, groups.codes)
            if is_target:  # numerai: centred in its era, then the signed 1.5 power
                # (scaled by a power of two per era first: |x|**1.5 of 1e-250 would
                # underflow; the era's correlation does not see the factor)
                values = _unit_scaled(values, groups.starts, groups.sizes)
                means = np.add.reduceat(values, groups.starts) / groups.sizes
                return _signed_power(values - np.repeat(means, groups.sizes))
            ranks = _average_ranks(values, groups.codes) - np.repeat(groups.starts - 1,
                                                                      groups.sizes)
            percentiles = (ranks - 0.5) / np.repeat(groups.sizes, groups.sizes)
            return _signed_power(_normal_quantile(percentiles))


class _EraGroups:
    """Rows grouped by era: a stable era order, segment starts and sizes."""

    def __init__(self, era, n_rows: int):
        if era is None:
            labels = np.zeros(1 if n_rows else 0, dtype=np.int64)
            codes = np.zeros(n_rows, dtype=np.intp)
        else:
            era = _as_1d(era, "era", n_rows=n_rows)
            try:
                labels, codes = np.unique(era, return_inverse=True)
            except TypeError as error:
                raise TypeError(f"era labels cannot be ordered: {error}") from None
            codes = codes.ravel()
        from packboost._validation import era_order

        order = era_order(codes)
        self.order = None if np.array_equal(order, np.arange(n_rows)) else order
        self.codes = codes if self.order is None else codes[order]
        self.labels = labels
        self.n_eras = labels.shape[0]
        self.sizes = np.bincount(self.codes, minlength=self.n_eras).astype(np.int64)
        self.starts = np.concatenate(([0], np.cumsum(self.sizes)[:-1])).astype(np.int64)

    def gather(self, values: np.ndarray) -> np.ndarray:
        """``values`` in era order."""
        return values if self.order is None else values[self.order]

    def rows(self, index: int):
        """Original row indices of era number ``index`` (in era order)."""
        start, size = int(self.starts[index]), int(self.sizes[index])
        if self.order is None:
            return slice(start, start + size)
        return self.order[start:start + size]

    def any_per_era(self, flags: np.ndarray) -> np.ndarray:
        """Per era: is any (era-sorted) flag set?"""
        if self.n_eras == 0:
            return np.zeros(0, dtype=bool)
        return np.logical_or.reduceat(flags, self.starts) if flags.size else \
            np.zeros(self.n_eras, dtype=bool)


# ----------------------------------------------------------------------------- summaries


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
        ``mean``; ``std``, the population standard deviation (``ddof=0``, as
        ``numerai_tools.scoring.sharpe_ratio`` uses); ``sharpe`` =
        ``mean / std`` (NaN when ``std`` is 0); ``worst``, the minimum;
        ``max_drawdown``, the largest fall of the cumulative sum of the scores
        from its running peak, as a non-negative number (the sum starts at 0,
        so a first negative era counts as a drawdown); ``n_eras``, an int.
        With no era left, every statistic is NaN and ``n_eras`` is 0.

    Examples
    --------
    >>> from packboost.metrics import era_summary
    >>> summary = era_summary([0.02, -0.01, 0.03])
    >>> round(summary["mean"], 4), round(summary["max_drawdown"], 4)
    (0.0133, 0.01)
    """
    values = _as_1d(per_era_values, "per_era_values", dtype=np.float64)
    values = values[~np.isnan(values)]
    if values.size == 0:
        nan = float("nan")
        return {
            "mean": nan, "std": nan, "sharpe": nan, "worst": nan, "max_drawdown": nan, "n_eras": 0,
        }
    # Scores far from 1 are scaled by a power of two (exact) and the results
    # scaled back: squares of 1e-200 underflow, sums of 1e300 overflow.
    exponent = _rescaling_exponent(np.max(np.abs(values)))
    values = np.ldexp(values, -exponent)
    mean = float(np.mean(values))
    std = float(np.std(values))
    cumulative = np.concatenate(([0.0], np.cumsum(values)))
    drawdown = np.maximum.accumulate(cumulative) - cumulative
    return {
        "mean": _ldexp(mean, exponent),
        "std": _ldexp(std, exponent),
        "sharpe": mean / std if std > 0 else float("nan"),
        "worst": _ldexp(float(np.min(values)), exponent),
        "max_drawdown": _ldexp(float(np.max(drawdown)), exponent),
        "n_eras": int(values.size),
    }


# ----------------------------------------------------------------------------- helpers


def _check_method(method):
    if method not in CORRELATION_METHODS:
        raise ValueError(f"method must be one of {CORRELATION_METHODS}, got {method!r}")


def _segment_pearson(a, b, starts, sizes):
    """Pearson correlation of ``a`` and ``b`` on each contiguous segment.

    Two passes (means, then centred products) for accuracy. Constancy is
    tested on the values themselves (min == max), not on a centred sum of
    squares, which rounding can leave a tiny non-zero for a constant segment.
    """
    if a.size == 0:
        return np.empty(0, dtype=np.float64)
    # Products of values far from 1 underflow to 0 or overflow to inf (1e-200 or
    # 1e160 gave correlations of 0 or NaN); a power of two per segment is exact
    # and leaves the correlation as it is.
    a = _unit_scaled(a, starts, sizes)
    b = _unit_scaled(b, starts, sizes)
    with np.errstate(invalid="ignore", over="ignore"):
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


# Values whose largest magnitude is within 2**-ORDINARY_EXPONENT .. 2**ORDINARY_EXPONENT
# are used as they are; others are first scaled by a power of two (exact).
ORDINARY_EXPONENT = 64


def _rescaling_exponent(peak) -> int:
    """0 for an ordinary, zero or non-finite ``peak``, else the k with ``peak * 2**-k``
    in [1, 2)."""
    peak = float(peak)
    if not math.isfinite(peak) or peak == 0.0 or \
            2.0**-ORDINARY_EXPONENT <= peak <= 2.0**ORDINARY_EXPONENT:
        return 0
    return math.frexp(peak)[1] - 1


def _ldexp(value: float, exponent: int) -> float:
    """``value * 2**exponent``, inf where that overflows float64."""
    try:
        return math.ldexp(value, exponent)
    except OverflowError:
        return math.copysign(math.inf, value)


def _unit_scaled(values, starts, sizes):
    """``values`` with each segment scaled by a power of two (exact) that brings
    its largest finite magnitude into [1, 2); segments of ordinary magnitude
    (``ORDINARY_EXPONENT``) are left as they are, bit for bit."""
    magnitude = np.abs(values)
    magnitude[~np.isfinite(magnitude)] = 0.0
    peaks = np.maximum.reduceat(magnitude, starts)
    rescale = (peaks > 0) & ((peaks < 2.0**-ORDINARY_EXPONENT)
                             | (peaks > 2.0**ORDINARY_EXPONENT))
    if not rescale.any():
        return values
    exponents = np.where(rescale, np.frexp(peaks)[1] - 1, 0)
    return np.ldexp(values, -np.repeat(exponents, sizes))


def _pearson(a, b) -> float:
    return float(_segment_pearson(a, b, np.zeros(1, dtype=np.int64),
                                  np.array([a.size], dtype=np.int64))[0])


def _average_ranks(values, codes):
    """Ranks of ``values`` within each group of ``codes``, ties averaged.

    ``codes`` must be sorted (rows in era order). The ranks are positions in
    the whole array (0-based), so a group's ranks start at its first
    position; correlations within the group cannot see that offset.
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


def _percentile_ranks(values):
    """``(rank - 0.5) / n`` of one group, 1-based ranks with ties averaged."""
    ranks = _average_ranks(values, np.zeros(values.shape[0], dtype=np.intp)) + 1.0
    return (ranks - 0.5) / values.shape[0]


def _signed_power(values, power=NUMERAI_POWER):
    return np.sign(values) * np.abs(values) ** power


# Wichura (1988), algorithm AS 241 (PPND16): rational approximations of the
# normal quantile on |p - 0.5| <= 0.425, then in r = sqrt(-log(min(p, 1 - p)))
# below and above 5. Coefficients from highest degree down, for np.polyval.
_AS241_CENTRAL = (
    (2.5090809287301226727e3, 3.3430575583588128105e4, 6.7265770927008700853e4,
     4.5921953931549871457e4, 1.3731693765509461125e4, 1.9715909503065514427e3,
     1.3314166789178437745e2, 3.3871328727963666080e0),
    (5.2264952788528545610e3, 2.8729085735721942674e4, 3.9307895800092710610e4,
     2.1213794301586595867e4, 5.3941960214247511077e3, 6.8718700749205790830e2,
     4.2313330701600911252e1, 1.0),
)
_AS241_INTERMEDIATE = (
    (7.74545014278341407640e-4, 2.27238449892691845833e-2, 2.41780725177450611770e-1,
     1.27045825245236838258e0, 3.64784832476320460504e0, 5.76949722146069140550e0,
     4.63033784615654529590e0, 1.42343711074968357734e0),
    (1.05075007164441684324e-9, 5.47593808499534494600e-4, 1.51986665636164571966e-2,
     1.48103976427480074590e-1, 6.89767334985100004550e-1, 1.67638483018380384940e0,
     2.05319162663775882187e0, 1.0),
)
_AS241_TAIL = (
    (2.01033439929228813265e-7, 2.71155556874348757815e-5, 1.24266094738807843860e-3,
     2.65321895265761230930e-2, 2.96560571828504891230e-1, 1.78482653991729133580e0,
     5.46378491116411436990e0, 6.65790464350110377720e0),
    (2.04426310338993978564e-15, 1.42151175831644588870e-7, 1.84631831751005468180e-5,
     7.86869131145613259100e-4, 1.48753612908506148525e-2, 1.36929880922735805310e-1,
     5.99832206555887937690e-1, 1.0),
)


def _normal_quantile(p):
    """Inverse of the standard normal CDF for ``p`` in (0, 1) (AS 241)."""
    p = np.asarray(p, dtype=np.float64)
    q = p - 0.5
    out = np.empty_like(p)
    central = np.abs(q) <= 0.425
    r = 0.180625 - q[central] ** 2
    numerator, denominator = _AS241_CENTRAL
    out[central] = q[central] * np.polyval(numerator, r) / np.polyval(denominator, r)
    tails = ~central
    if tails.any():
        with np.errstate(divide="ignore", invalid="ignore"):
            r = np.sqrt(-np.log(np.minimum(p[tails], 1.0 - p[tails])))
        values = np.empty_like(r)
        near = r <= 5.0
        numerator, denominator = _AS241_INTERMEDIATE
        values[near] = (np.polyval(numerator, r[near] - 1.6)
                        / np.polyval(denominator, r[near] - 1.6))
        numerator, denominator = _AS241_TAIL
        values[~near] = (np.polyval(numerator, r[~near] - 5.0)
                         / np.polyval(denominator, r[~near] - 5.0))
        out[tails] = np.where(q[tails] < 0, -values, values)
    return out


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


# ----------------------------------------------------------------------------- moved names

# Names that moved out of this module, still importable from it: the report
# (packboost.reports), the registry of training metrics
# (packboost._eval_metrics) and the scikit-learn scorers (packboost._era_scorer).
# Imported on first use: those modules build on this one.
_MOVED = {
    "EraReport": "packboost.reports",
    "era_report": "packboost.reports",
    "EvalMetric": "packboost._eval_metrics",
    "resolve_eval_metric": "packboost._eval_metrics",
    "pooled_metric": "packboost._eval_metrics",
    "EVAL_METRIC_NAMES": "packboost._eval_metrics",
    "POOLED_METRICS": "packboost._eval_metrics",
    "make_era_scorer": "packboost._era_scorer",
    "EraMetricScorer": "packboost._era_scorer",
}


def __getattr__(name):
    if name in _MOVED:
        import importlib

        return getattr(importlib.import_module(_MOVED[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_MOVED))
