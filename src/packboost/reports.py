"""Per-era reports: several correlations of one prediction, era by era, as a table.

:func:`era_report` scores a prediction with every correlation of
:mod:`packboost.metrics` in each era; the :class:`EraReport` it returns holds
the per-era values, their :func:`~packboost.metrics.era_summary` and prints
as text (``format_table``, ``format_summary``) or converts to a dict or a
pandas DataFrame. Both names are importable from :mod:`packboost.metrics` too.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from packboost.metrics import (
    ERA_STATISTICS,
    EraScorer,
    _as_1d,
    _check_method,
    era_summary,
    feature_neutral_correlation,
)

__all__ = ["EraReport", "era_report", "format_target_summaries"]


@dataclass
class EraReport:
    """Per-era scores of one prediction, for several correlations.

    Attributes
    ----------
    eras : ndarray of shape (n_eras,)
        Sorted era labels.
    n_rows : ndarray of shape (n_eras,), int64
        Rows in each era.
    scores : dict of str to ndarray of shape (n_eras,)
        Per correlation name (``"pearson"``, ``"numerai"``, ...,
        ``"feature_neutral"``), its value in every era.
    """

    eras: np.ndarray
    n_rows: np.ndarray
    scores: dict = field(default_factory=dict)

    @property
    def summary(self) -> dict:
        """Per correlation name, its :func:`era_summary`."""
        return {name: era_summary(values) for name, values in self.scores.items()}

    def to_dict(self) -> dict:
        """Plain lists (JSON-ready): ``era``, ``n_rows`` and one list per score."""
        out = {"era": [_plain(label) for label in self.eras.tolist()],
               "n_rows": self.n_rows.tolist()}
        out.update({name: values.tolist() for name, values in self.scores.items()})
        return out

    def to_frame(self):
        """A pandas DataFrame indexed by era (needs pandas)."""
        from packboost._compat import import_optional

        pd = import_optional("pandas", "EraReport.to_frame")
        frame = pd.DataFrame({"n_rows": self.n_rows, **self.scores},
                             index=pd.Index(self.eras, name="era"))
        return frame

    def format_table(self, *, max_rows: int | None = None) -> str:
        """The per-era table as text: era, rows, each score and its running sum.

        ``max_rows`` keeps the first and last eras and elides the middle.
        """
        names = list(self.scores)
        header = ["era", "rows"] + [column for name in names
                                    for column in (name, f"{name}_cum")]
        cumulative = {name: np.nancumsum(values) for name, values in self.scores.items()}
        lines = []
        n_eras = len(self.eras)
        shown = range(n_eras)
        if max_rows is not None and n_eras > max_rows:
            head = max_rows - max_rows // 2
            shown = list(range(head)) + [None] + list(range(n_eras - max_rows // 2, n_eras))
        for index in shown:
            if index is None:
                lines.append(["..."] + [""] * (len(header) - 1))
                continue
            row = [str(_plain(self.eras[index])), str(int(self.n_rows[index]))]
            for name in names:
                row += [f"{self.scores[name][index]:.4f}", f"{cumulative[name][index]:.4f}"]
            lines.append(row)
        return _format_columns(header, lines)

    def format_summary(self) -> str:
        """The :func:`era_summary` of every score, one row per score."""
        header = ["score", *ERA_STATISTICS, "n_eras"]
        lines = []
        for name, summary in self.summary.items():
            lines.append([name] + [f"{summary[key]:.4f}" for key in ERA_STATISTICS]
                         + [str(summary["n_eras"])])
        return _format_columns(header, lines)

    def __str__(self) -> str:
        return f"{self.format_table(max_rows=20)}\n\n{self.format_summary()}"


def era_report(y_true, y_pred, era=None, *, methods=("pearson", "spearman", "numerai"),
               features=None) -> EraReport:
    """Score ``y_pred`` era by era with several correlations.

    Parameters
    ----------
    y_true, y_pred, era : array-like of shape (n_rows,)
        As in :func:`per_era_correlation`.
    methods : sequence of {"pearson", "spearman", "numerai"}
        Correlations to compute.
    features : array-like of shape (n_rows, n_features), optional
        When given, the report adds ``"feature_neutral"``
        (:func:`feature_neutral_correlation`).

    Returns
    -------
    EraReport
        ``print(report)`` shows the per-era table and the summaries;
        ``report.summary["numerai"]["sharpe"]`` reads one number.

    Examples
    --------
    >>> import numpy as np
    >>> from packboost.metrics import era_report
    >>> rng = np.random.default_rng(0)
    >>> y = rng.normal(size=400)
    >>> report = era_report(y, y + rng.normal(size=400), np.repeat(np.arange(4), 100))
    >>> sorted(report.scores)
    ['numerai', 'pearson', 'spearman']
    """
    if isinstance(methods, str):
        methods = (methods,)
    for method in methods:
        _check_method(method)
    y_true = _as_1d(y_true, "y_true", dtype=np.float64)
    y_pred = _as_1d(y_pred, "y_pred", dtype=np.float64, n_rows=y_true.shape[0])
    scorer = EraScorer(y_true, era)
    scores = {method: scorer.correlations(y_pred, method) for method in methods}
    if features is not None:
        scores["feature_neutral"] = feature_neutral_correlation(y_true, y_pred, features,
                                                                era)[1]
    return EraReport(eras=scorer.labels, n_rows=scorer.groups.sizes.copy(), scores=scores)


def format_target_summaries(reports: dict) -> str:
    """Several targets' era reports as one table (``packboost evaluate`` of a
    model of several targets).

    Parameters
    ----------
    reports : dict of str to EraReport
        Per target name, its report (the same scores in each).

    Returns
    -------
    str
        A row per (target, score) with its :func:`~packboost.metrics.era_summary`,
        then per score the mean of each statistic over the targets.
    """
    header = ["target", "score", *ERA_STATISTICS, "n_eras"]
    lines = []
    for target, report in reports.items():
        for name, summary in report.summary.items():
            lines.append([target, name] + [f"{summary[key]:.4f}" for key in ERA_STATISTICS]
                         + [str(summary["n_eras"])])
    first = next(iter(reports.values()))
    for name in first.scores:
        summaries = [report.summary[name] for report in reports.values()]
        lines.append([f"mean of {len(reports)}", name]
                     + [f"{np.mean([item[key] for item in summaries]):.4f}"
                        for key in ERA_STATISTICS] + [""])
    return _format_columns(header, lines)


def _plain(label):
    """A NumPy scalar as a plain Python value (for JSON and printing)."""
    return label.item() if isinstance(label, np.generic) else label


def _format_columns(header, rows) -> str:
    widths = [max(len(str(cell)) for cell in column) for column in zip(header, *rows,
                                                                         strict=True)]
    lines = ["  ".join(str(cell).rjust(width) for cell, width in zip(row, widths, strict=True))
             for row in [header, *rows]]
    return "\n".join(lines)
