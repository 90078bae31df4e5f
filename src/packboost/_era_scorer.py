"""Scikit-learn scorers that score by era: :func:`make_era_scorer`.

A model search picks the settings whose score is highest; for era data that
score should be what the model is judged on, a per-era correlation
summarised over the eras (``"numerai_mean"``, ``"numerai_sharpe"``, ...), not
the pooled R^2 of ``RegressorMixin.score``. The scorer needs every test row's
era. It takes it by scikit-learn's metadata routing (it requests ``era``, so
``GridSearchCV(...).fit(X, y, era=era)`` hands each fold's eras to it once
``sklearn.set_config(enable_metadata_routing=True)``), or, without routing,
from the era column of a table ``X`` when the model was fitted with
``era="<column>"``.

scikit-learn is imported only when it asks for the scorer's routing.
"""

from __future__ import annotations

import numpy as np

from packboost._eval_metrics import _LOWER_IS_BETTER_STATISTICS
from packboost.metrics import (
    CORRELATION_METHODS,
    ERA_STATISTICS,
    era_summary,
    per_era_correlation,
)

__all__ = ["ERA_SCORER_NAMES", "EraMetricScorer", "make_era_scorer"]

ERA_SCORER_NAMES = tuple(f"{method}_{statistic}" for method in CORRELATION_METHODS
                         for statistic in ERA_STATISTICS)


class EraMetricScorer:
    """Callable ``scorer(estimator, X, y_true, era=None)``: one per-era metric.

    ``"<correlation>_<statistic>"`` (:func:`packboost.metrics.per_era_correlation`
    summarised by :func:`packboost.metrics.era_summary`); statistics where
    smaller is better (``std``, ``max_drawdown``) are returned negated, as
    scikit-learn's ``neg_*`` scorers, so that higher is always better. A
    model of several targets scores the mean of its targets' values.
    """

    def __init__(self, name: str):
        if not isinstance(name, str) or name not in ERA_SCORER_NAMES:
            raise ValueError(f"make_era_scorer: name must be one of {list(ERA_SCORER_NAMES)}, "
                             f"got {name!r}")
        self.name = name
        self.method, self.statistic = name.split("_", 1)
        self.sign = -1.0 if self.statistic in _LOWER_IS_BETTER_STATISTICS else 1.0

    def __repr__(self) -> str:
        return f"make_era_scorer({self.name!r})"

    def __call__(self, estimator, X, y_true, era=None, **ignored) -> float:
        if era is None:
            era = _era_column_of(estimator, X)
        if era is None:
            raise ValueError(
                f"{self!r} needs the era of every scored row: enable scikit-learn's metadata "
                "routing (sklearn.set_config(enable_metadata_routing=True)) and pass "
                "era=... to the search's or cross_validate's fit, or give X as a table "
                "holding the era column and fit with era='<column name>'")
        prediction = np.asarray(estimator.predict(X))
        y_true = np.asarray(y_true)
        if y_true.ndim == 1:
            return self.sign * self._score(y_true, prediction, era)
        return self.sign * float(np.mean([self._score(y_true[:, column], prediction[:, column],
                                                      era)
                                          for column in range(y_true.shape[1])]))

    def _score(self, y_true, prediction, era) -> float:
        known = ~np.isnan(y_true) if y_true.dtype.kind == "f" else slice(None)
        _, scores = per_era_correlation(y_true[known], prediction[known], np.asarray(era)[known],
                                        method=self.method)
        return float(era_summary(scores)[self.statistic])

    def get_metadata_routing(self):
        """scikit-learn's routing: the scorer requests ``era`` for ``score``."""
        from sklearn.utils.metadata_routing import MetadataRequest

        request = MetadataRequest(owner=type(self).__name__)
        request.score.add_request(param="era", alias=True)
        return request


def make_era_scorer(name: str) -> EraMetricScorer:
    """A scikit-learn scorer of a per-era metric, for ``scoring=``.

    Parameters
    ----------
    name : str
        ``"<correlation>_<statistic>"``: a correlation of
        :data:`packboost.metrics.CORRELATION_METHODS` (``"pearson"``,
        ``"spearman"``, ``"numerai"``) and a statistic of
        :func:`packboost.metrics.era_summary` (``"mean"``, ``"std"``,
        ``"sharpe"``, ``"worst"``, ``"max_drawdown"``), as the eval metrics of
        ``fit`` are named: ``"numerai_mean"``, ``"numerai_sharpe"``, ...

    Returns
    -------
    EraMetricScorer
        ``scorer(estimator, X, y_true, era=None)``, higher is better (``std``
        and ``max_drawdown`` negated). It requests ``era`` by metadata routing;
        without routing it reads the era column of a table ``X`` (a model
        fitted with ``era="<column>"``).

    Examples
    --------
    >>> import sklearn
    >>> from sklearn.model_selection import cross_val_score
    >>> from packboost import PackBoostRegressor
    >>> from packboost.datasets import make_numerai_like
    >>> from packboost.metrics import make_era_scorer
    >>> from packboost.model_selection import EraKFold
    >>> data = make_numerai_like(n_rows=1200, n_features=8, n_eras=12, random_state=0)
    >>> with sklearn.config_context(enable_metadata_routing=True):
    ...     model = PackBoostRegressor(n_estimators=5).set_fit_request(era=True)
    ...     scores = cross_val_score(model, data.X, data.y, cv=EraKFold(3),
    ...                              scoring=make_era_scorer("numerai_mean"),
    ...                              params={"era": data.era})
    >>> scores.shape
    (3,)
    """
    return EraMetricScorer(name)


def _era_column_of(estimator, X):
    """The era labels of a table ``X`` whose model was fitted with ``era="<column>"``."""
    column = getattr(estimator, "era_column_", None)
    if column is None and hasattr(estimator, "steps"):  # a Pipeline: its last step's
        column = getattr(estimator.steps[-1][1], "era_column_", None)
    if column is None:
        return None
    try:
        values = X[column]
    except (KeyError, TypeError, IndexError, ValueError):
        return None
    return np.asarray(values)
