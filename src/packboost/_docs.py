"""Docstring templates of the estimators (sklearn.py).

The ``Parameters`` section is generated from the schema
(:data:`packboost._parameters.PARAMETER_DOC`); the fitted attributes and
``fit``'s arguments are written here, once for both estimators.
"""

from packboost._parameters import PARAMETER_DOC

__all__ = ["ATTRIBUTE_DOC", "FIT_DOC", "PARAMETER_DOC"]

ATTRIBUTE_DOC = """
    ensemble_ : TreeEnsemble
        The trees (struct-of-arrays) and the base score.
    bin_mapper_ : BinMapper
        Raw value -> bin mapping learnt in ``fit`` (or taken from ``init_model``).
    n_features_in_ : int
    feature_names_in_ : ndarray of str, only when X had string column names
    era_column_ : str, only when ``era`` was a column name of X
        That column is dropped from a table given to ``predict``: the frame
        used in ``fit`` can be predicted as it is.
    target_names_ : ndarray of str, only for a regressor of several targets whose ``y``
        was a table with string column names (or continued from a model with them);
        output ``j`` predicts target ``target_names_[j]``. Model files store them.
    n_eras_ : int
        Number of distinct eras seen in ``fit`` (1 when ``era`` is None).
    n_iter_ : int
        Rounds in the fitted model: those of ``init_model``, plus those grown,
        less those early stopping cut.
    evals_result_ : dict
        ``{eval set name: {metric name: [value after each round]}}``.
    best_iteration_ : int or None
        With early stopping: the rounds of the best model (the model keeps
        exactly these); None otherwise.
    best_score_ : dict
        ``{eval set name: {metric name: value}}`` at ``best_iteration_``, or
        after the last round without early stopping (empty without eval sets).
    feature_importances_ : ndarray of shape (n_features,)
        Per feature, its share of the ``importance_type`` totals.
"""

FIT_DOC = """
        Parameters
        ----------
        X : array-like, or a pandas / polars / pyarrow table, of shape (n_rows, n_features)
            NaN (or a null) marks a missing value. Integer columns already in
            ``[0, max_bins)``, such as Numerai's int8 features, are used as
            bins without a float copy. A table's column names are kept and
            checked again at predict time.
        y : array-like of shape (n_rows,)
        era : array-like of shape (n_rows,), str, or None
            Era label of each row (any sortable labels), or the name of a
            column of the table ``X`` holding them (that column is then not a
            feature). None puts every row in one era: DES then reduces to a
            plain Newton-gain GBDT when ``lambda_dro = lambda_dir = 0``.
        sample_weight : array-like of shape (n_rows,), optional
            Non-negative row weights, multiplied into gradients and hessians.
        eval_set : list of (X, y) or (X, y, era) tuples, optional
            Validation sets scored after every round into ``evals_result_``.
            ``era`` (labels, or a column name of that ``X``) enables the
            per-era metrics; without it the set is one era.
        eval_names : list of str, optional
            Names of the eval sets in ``evals_result_`` (default
            ``"valid_0"``, ``"valid_1"``, ...).
        eval_metric : str, callable or list of them, optional
            Metrics recorded per round: ``"rmse"``, ``"mae"``, ``"logloss"``
            (classifier) or ``"<correlation>_<statistic>"`` with correlation
            in ``pearson``, ``spearman``, ``numerai`` and statistic in
            ``mean``, ``std``, ``sharpe``, ``worst``, ``max_drawdown``
            (per-era correlations of the eval set, summarised by
            :func:`packboost.metrics.era_summary`). A callable is called as
            ``f(y_true, y_pred, era)`` and returns ``(name, value,
            higher_is_better)``. Default: %(default)s, preceded by
            ``"pearson_mean"`` and ``"pearson_sharpe"`` when an eval set has eras.
        early_stopping_rounds : int, optional
            Stop when the first ``eval_metric`` on the last eval set has not
            improved for this many rounds, and keep the best rounds
            (``best_iteration_``). :class:`packboost.callback.EarlyStopping`
            in ``callbacks`` chooses the metric and set.
        callbacks : list, optional
            :class:`packboost.callback.TrainingCallback` objects or functions
            ``f(info)`` called after every round (a true return stops).
        init_model : str, path, or fitted estimator of this class, optional
            Continue training: the new rounds are grown on top of its raw
            predictions and appended to its trees (``n_estimators`` more
            rounds). Its bin mapper is reused (so ``max_bins`` is taken from
            it), and ``pack_size`` and the features must match.
        progress : bool, optional
            Show a progress bar on stderr once a fit has run for a second.
            Default: only in a terminal or a notebook, never when ``CI`` is set
            or a :class:`~packboost.callback.LogEvaluation` already reports.

        Returns
        -------
        self

        Raises
        ------
        ValueError, TypeError
            Bad input or parameters, naming the argument and the value.
        MemoryError
            When the working memory ``fit`` is certain to need exceeds what is
            available (estimated before allocating; the message says what to
            reduce).

        Notes
        -----
        ``fit`` is all or nothing: whatever stops it (an error, an exception
        raised by a callback or an eval metric, Ctrl-C) propagates unchanged
        and leaves the estimator as it was before the call, unfitted or with
        its previous model. Ctrl-C is seen when the running kernel returns,
        within one depth of one round. A callback returning True stops
        training and keeps the rounds grown.
"""
