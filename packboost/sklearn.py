"""scikit-learn estimators: :class:`PackBoostRegressor` and :class:`PackBoostClassifier`.

The estimators orchestrate: validate inputs, bin them, sort rows by era, call
:func:`packboost.booster.train`, and keep the bin mapper and the trees. All
hyper-parameters live in ``__init__`` (scikit-learn's contract), are checked
in ``fit`` and documented once, in :data:`_PARAMETER_DOC`.
"""

from __future__ import annotations

import numbers
import os
import warnings

import numpy as np

from packboost import _validation
from packboost._compat import BaseEstimator, ClassifierMixin, RegressorMixin
from packboost._threads import resolve_n_threads
from packboost.binning import BinMapper
from packboost.booster import EvalSet, train
from packboost.grower import TrainingData
from packboost.objectives import get_objective

_PARAMETER_DOC = """
    n_estimators : int, default=100
        Boosting rounds. Each round grows a pack, so the model has
        ``n_estimators * pack_size`` trees.
    pack_size : int, default=4
        Trees grown in lockstep per round, sharing each depth's feature subset;
        the round's update is their average (DESIGN 2).
    max_depth : int, default=6
        Depth of every tree (depth-wise growth).
    learning_rate : float, default=0.1
        Shrinkage of each round's update.
    reg_lambda : float, default=1.0
        L2 regularisation of leaf values (``v = -G / (H + reg_lambda)``).
    min_samples_leaf : int, default=20
        Minimum rows in each child of a split.
    min_child_weight : float, default=1e-3
        Minimum hessian sum in each child of a split.
    min_split_gain : float, default=0.0
        A split must have a pooled Newton gain above this.
    max_delta_step : float, default=0.0
        If positive, leaf values are clipped to ``[-max_delta_step, max_delta_step]``.
    max_bins : int, default=255
        Maximum number of non-missing bins per feature (2 .. 65535); NaN gets
        its own extra bin. Integer features already in ``[0, max_bins)`` are
        used as bins directly.
    layer_feature_fraction : float, default=1.0
        Fraction of features drawn per depth, shared by the whole pack.
    tree_feature_fraction : float, default=0.75
        Fraction of the depth's features each tree of a pack may use.
    row_subsample : float, default=1.0
        Probability that a row is used by a tree (drawn per tree and round).
    era_subsample : float, default=0.75
        Fraction of eras each tree of a round is grown on.
    era_gain : {"realized", "newton"}, default="realized"
        Per-era gain definition (DESIGN 1).
    lambda_dro : float, default=0.25
        Weight of the per-era gain standard deviation (risk) in DES.
    lambda_dir : float, default=0.0
        Weight of the directional-agreement term in DES.
    era_weighting : {"equal", "count"}, default="equal"
        Era weights in DES: equal, or proportional to ``era_alpha + rows``.
    era_alpha : float, default=0.0
        Additive smoothing of count era weights.
    dir_tanh_scale : float, default=1.0
        Softness of the direction vote; 0 counts signs.
    n_jobs : int or None, default=None
        Threads; None or -1 uses every CPU this process may use.
    random_state : int, numpy Generator/RandomState or None, default=None
        Seed of every random draw. The model is a pure function of data,
        parameters and an int seed, whatever ``n_jobs``.
    device : {"cpu"}, default="cpu"
        Backend. ("cuda" comes with the CUDA backend.)
"""

# name -> (kind, lower, upper, lower inclusive, upper inclusive) for numbers;
# name -> tuple of choices for strings.
_INT = "int"
_REAL = "real"
_PARAMETER_RULES = {
    "n_estimators": (_INT, 0, None, True, True),
    "pack_size": (_INT, 1, None, True, True),
    "max_depth": (_INT, 0, 30, True, True),
    "learning_rate": (_REAL, 0.0, None, False, True),
    "reg_lambda": (_REAL, 0.0, None, True, True),
    "min_samples_leaf": (_INT, 1, None, True, True),
    "min_child_weight": (_REAL, 0.0, None, True, True),
    "min_split_gain": (_REAL, 0.0, None, True, True),
    "max_delta_step": (_REAL, 0.0, None, True, True),
    "max_bins": (_INT, 2, 65535, True, True),
    "layer_feature_fraction": (_REAL, 0.0, 1.0, False, True),
    "tree_feature_fraction": (_REAL, 0.0, 1.0, False, True),
    "row_subsample": (_REAL, 0.0, 1.0, False, True),
    "era_subsample": (_REAL, 0.0, 1.0, False, True),
    "lambda_dro": (_REAL, 0.0, None, True, True),
    "lambda_dir": (_REAL, 0.0, None, True, True),
    "era_alpha": (_REAL, 0.0, None, True, True),
    "dir_tanh_scale": (_REAL, 0.0, None, True, True),
    "era_gain": ("realized", "newton"),
    "era_weighting": ("equal", "count"),
    "device": ("cpu",),
}


def _check_parameter(name, value):
    rule = _PARAMETER_RULES[name]
    if isinstance(rule[0], str) and rule[0] not in (_INT, _REAL):
        if not isinstance(value, str) or value not in rule:
            raise ValueError(f"{name} must be one of {list(rule)}, got {value!r}")
        return value
    kind, low, high, low_closed, high_closed = rule
    if kind == _INT:
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            raise TypeError(f"{name} must be an int, got {value!r}")
        value = int(value)
    else:
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise TypeError(f"{name} must be a real number, got {value!r}")
        value = float(value)
        if not np.isfinite(value):
            raise ValueError(f"{name} must be finite, got {value!r}")
    too_low = low is not None and (value < low or (value == low and not low_closed))
    too_high = high is not None and (value > high or (value == high and not high_closed))
    if too_low or too_high:
        left = "[" if low_closed else "("
        right = "]" if high_closed else ")"
        interval = f"{left}{low if low is not None else '-inf'}, " \
                   f"{high if high is not None else 'inf'}{right}"
        raise ValueError(f"{name} must be in {interval}, got {value!r}")
    return value


def _resolve_seed(random_state) -> int:
    """An int seed from ``random_state`` (None draws a fresh one)."""
    if random_state is None:
        return int(np.random.SeedSequence().generate_state(1)[0])
    if isinstance(random_state, numbers.Integral) and not isinstance(random_state, bool):
        if random_state < 0:
            raise ValueError(f"random_state must be non-negative, got {random_state}")
        return int(random_state)
    if isinstance(random_state, np.random.RandomState):
        return int(random_state.randint(np.iinfo(np.int32).max))
    if isinstance(random_state, np.random.Generator):
        return int(random_state.integers(np.iinfo(np.int32).max))
    raise TypeError(
        f"random_state must be None, an int, a numpy Generator or RandomState, "
        f"got {random_state!r}"
    )


class _PackBoostEstimator(BaseEstimator):
    """Shared fit/predict machinery; subclasses set the objective."""

    _objective_name = "squared_error"

    def __init__(self, *, n_estimators=100, pack_size=4, max_depth=6, learning_rate=0.1,
                 reg_lambda=1.0, min_samples_leaf=20, min_child_weight=1e-3,
                 min_split_gain=0.0, max_delta_step=0.0, max_bins=255,
                 layer_feature_fraction=1.0, tree_feature_fraction=0.75,
                 row_subsample=1.0, era_subsample=0.75, era_gain="realized",
                 lambda_dro=0.25, lambda_dir=0.0, era_weighting="equal", era_alpha=0.0,
                 dir_tanh_scale=1.0, n_jobs=None, random_state=None, device="cpu"):
        self.n_estimators = n_estimators
        self.pack_size = pack_size
        self.max_depth = max_depth
        self.learning_rate = learning_rate
        self.reg_lambda = reg_lambda
        self.min_samples_leaf = min_samples_leaf
        self.min_child_weight = min_child_weight
        self.min_split_gain = min_split_gain
        self.max_delta_step = max_delta_step
        self.max_bins = max_bins
        self.layer_feature_fraction = layer_feature_fraction
        self.tree_feature_fraction = tree_feature_fraction
        self.row_subsample = row_subsample
        self.era_subsample = era_subsample
        self.era_gain = era_gain
        self.lambda_dro = lambda_dro
        self.lambda_dir = lambda_dir
        self.era_weighting = era_weighting
        self.era_alpha = era_alpha
        self.dir_tanh_scale = dir_tanh_scale
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.device = device

    # -- scikit-learn protocol -------------------------------------------------

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True
        return tags

    def __sklearn_is_fitted__(self):
        return hasattr(self, "ensemble_")

    # -- fitting ---------------------------------------------------------------

    def _validated_params(self) -> dict:
        params = {name: _check_parameter(name, getattr(self, name))
                  for name in _PARAMETER_RULES}
        params["random_state"] = _resolve_seed(self.random_state)
        return params

    def _fit(self, X, y, era, sample_weight, eval_set):
        params = self._validated_params()
        n_threads = resolve_n_threads(self.n_jobs)
        if isinstance(era, str):
            era, X = _validation.frame_column(X, era, "era")
        X, feature_names = _validation.check_X(X)
        n_rows = X.shape[0]
        y = self._encode_target(y, n_rows)
        sample_weight = _validation.check_sample_weight(sample_weight, n_rows)
        era_codes, _ = _validation.encode_eras(era, n_rows)

        # Rows sorted once by era (stable): each era becomes one contiguous span.
        order = np.argsort(era_codes, kind="stable")
        if np.array_equal(order, np.arange(n_rows)):
            order = None
        mapper = BinMapper(max_bins=params["max_bins"], random_state=params["random_state"])
        X_binned = mapper.fit_transform(X, row_order=order)
        if order is not None:
            y, era_codes = y[order], era_codes[order]
            sample_weight = sample_weight[order] if sample_weight is not None else None
        data = TrainingData(X_binned=X_binned, n_bins=mapper.n_bins_,
                            row_era=np.ascontiguousarray(era_codes, dtype=np.int32),
                            n_eras=int(era_codes.max()) + 1, cuts=mapper.cuts_)

        eval_sets = self._prepare_eval_sets(eval_set, X.shape[1], feature_names)
        objective = get_objective(self._objective_name)
        self.ensemble_ = train(data, y, sample_weight, objective, params, n_threads,
                               eval_sets=eval_sets, metric=self._eval_metric)
        self.bin_mapper_ = mapper
        self.n_features_in_ = X.shape[1]
        if feature_names is not None:
            self.feature_names_in_ = feature_names
        elif hasattr(self, "feature_names_in_"):
            del self.feature_names_in_
        self.n_eras_ = data.n_eras
        self.evals_result_ = {item.name: item.history for item in eval_sets}
        return self

    def _prepare_eval_sets(self, eval_set, n_features, feature_names):
        if eval_set is None:
            return []
        if isinstance(eval_set, tuple):
            eval_set = [eval_set]
        prepared = []
        for index, item in enumerate(eval_set):
            if not isinstance(item, (tuple, list)) or len(item) != 2:
                raise ValueError(
                    f"eval_set[{index}] must be an (X, y) pair, got {type(item).__name__}"
                )
            X_eval, y_eval = item
            X_eval = self._check_predict_X(X_eval, n_features=n_features,
                                           feature_names=feature_names,
                                           argument=f"eval_set[{index}] X")
            y_eval = self._encode_target(y_eval, X_eval.shape[0], argument=f"eval_set[{index}] y",
                                         learn=False)
            prepared.append(EvalSet(name=f"valid_{index}", X=X_eval, y=y_eval,
                                    raw_prediction=np.zeros(0)))
        return prepared

    # -- prediction ------------------------------------------------------------

    def _check_predict_X(self, X, *, n_features=None, feature_names=None, argument="X"):
        X, names = _validation.check_X(X, argument=argument)
        if n_features is None:
            n_features = self.n_features_in_
            feature_names = getattr(self, "feature_names_in_", None)
        if X.shape[1] != n_features:
            raise ValueError(
                f"X has {X.shape[1]} features, but {type(self).__name__} is expecting "
                f"{n_features} features as input."
            )
        if names is not None and feature_names is None:
            warnings.warn(f"X has feature names, but {type(self).__name__} was fitted "
                          "without feature names", UserWarning, stacklevel=3)
        elif names is None and feature_names is not None:
            warnings.warn(f"X does not have valid feature names, but {type(self).__name__} "
                          "was fitted with feature names", UserWarning, stacklevel=3)
        elif names is not None and not np.array_equal(names, feature_names):
            raise ValueError(
                "The feature names should match those that were passed during fit: "
                f"expected {list(feature_names)[:10]}..., got {list(names)[:10]}..."
            )
        return X

    def _raw_predict(self, X):
        if not self.__sklearn_is_fitted__():
            raise _not_fitted_error(self)
        X = self._check_predict_X(X)
        return self.ensemble_.predict_raw(X, resolve_n_threads(self.n_jobs))

    # -- model files -----------------------------------------------------------

    def save_model(self, path: str | os.PathLike) -> None:
        """Write the fitted model to ``path`` (atomically; no pickle inside).

        Load it back with :func:`packboost.load_model`.
        """
        from packboost.model_io import save_estimator
        if not self.__sklearn_is_fitted__():
            raise _not_fitted_error(self)
        save_estimator(self, path)


def _not_fitted_error(estimator):
    try:
        from sklearn.exceptions import NotFittedError
    except ImportError:  # pragma: no cover
        NotFittedError = type("NotFittedError", (ValueError, AttributeError), {})
    return NotFittedError(
        f"This {type(estimator).__name__} instance is not fitted yet. Call 'fit' with "
        "appropriate arguments before using this estimator."
    )


class PackBoostRegressor(RegressorMixin, _PackBoostEstimator):
    __doc__ = f"""Gradient-boosted tree packs with Directional Era Splitting (squared error).

    Parameters
    ----------{_PARAMETER_DOC}
    Attributes
    ----------
    ensemble_ : TreeEnsemble
        The trees (struct-of-arrays) and the base score.
    bin_mapper_ : BinMapper
        Raw value -> bin mapping learnt in ``fit``.
    n_features_in_ : int
    feature_names_in_ : ndarray of str, only when X had string column names
    n_eras_ : int
        Number of distinct eras seen in ``fit`` (1 when ``era`` is None).
    evals_result_ : dict
        Per eval set, per metric, the value after every round.
    """

    _objective_name = "squared_error"

    def fit(self, X, y, *, era=None, sample_weight=None, eval_set=None):
        """Fit on ``X`` (rows x features) and ``y``.

        Parameters
        ----------
        X : array-like or pandas DataFrame of shape (n_rows, n_features)
            NaN marks a missing value.
        y : array-like of shape (n_rows,)
        era : array-like of shape (n_rows,), str, or None
            Era label of each row (any sortable labels), or the name of a
            column of the DataFrame ``X`` holding them (that column is then
            not a feature). None puts every row in one era: DES then reduces to
            a plain Newton-gain GBDT when ``lambda_dro = lambda_dir = 0``.
        sample_weight : array-like of shape (n_rows,), optional
            Non-negative row weights, multiplied into gradients and hessians.
        eval_set : list of (X, y) pairs, optional
            Validation sets scored after every round into ``evals_result_``.
        """
        return self._fit(X, y, era, sample_weight, eval_set)

    def predict(self, X):
        """Predicted values for ``X``."""
        return self._raw_predict(X)

    def _encode_target(self, y, n_rows, argument="y", learn=True):
        return _validation.check_y(y, n_rows, argument=argument)

    @staticmethod
    def _eval_metric(y, raw_prediction):
        return {"rmse": float(np.sqrt(np.mean((raw_prediction - y) ** 2)))}


class PackBoostClassifier(ClassifierMixin, _PackBoostEstimator):
    __doc__ = f"""Binary classifier: packs of DES trees on the logistic loss.

    Parameters
    ----------{_PARAMETER_DOC}
    Attributes
    ----------
    classes_ : ndarray of shape (2,)
        The two class labels; ``classes_[1]`` is the positive class.
    ensemble_, bin_mapper_, n_features_in_, feature_names_in_, n_eras_, evals_result_
        As in :class:`PackBoostRegressor`.
    """

    _objective_name = "logistic"

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = False
        return tags

    def fit(self, X, y, *, era=None, sample_weight=None, eval_set=None):
        """Fit on ``X`` and binary labels ``y``; see :meth:`PackBoostRegressor.fit`."""
        if hasattr(self, "classes_"):
            del self.classes_
        return self._fit(X, y, era, sample_weight, eval_set)

    def _encode_target(self, y, n_rows, argument="y", learn=True):
        if y is None:
            raise ValueError(f"fit requires y to be passed, but the target {argument} is None")
        y = np.asarray(y)
        if y.ndim == 2 and y.shape[1] == 1:
            y = _validation.check_y(y, n_rows, argument=argument) if y.dtype.kind in "fiub" \
                else y[:, 0]
        if y.ndim != 1 or len(y) != n_rows:
            raise ValueError(f"{argument} must have shape ({n_rows},), got {y.shape}")
        if y.dtype.kind == "f" and not np.isfinite(y).all():
            raise ValueError(f"Input {argument} contains NaN or infinity.")
        if learn:
            if y.dtype.kind == "f" and np.any(y != np.round(y)):
                raise ValueError(
                    f"Unknown label type: continuous. {argument} must hold class labels; "
                    "use PackBoostRegressor for a continuous target"
                )
            try:
                classes = np.unique(y)
            except TypeError as error:
                raise ValueError(f"Unknown label type: {argument} labels cannot be "
                                 f"ordered ({error})") from None
            if len(classes) > 2:
                raise ValueError(
                    "Only binary classification is supported. The type of the target "
                    f"is multiclass: {argument} has {len(classes)} classes"
                )
            if len(classes) < 2:
                raise ValueError(
                    f"{argument} has 1 class ({classes.tolist()}); a binary classifier "
                    "needs two"
                )
            self.classes_ = classes
        unknown = ~np.isin(y, self.classes_)
        if unknown.any():
            raise ValueError(f"{argument} has labels not seen in fit: {np.unique(y[unknown])[:5]}")
        return (y == self.classes_[1]).astype(np.float64)

    @staticmethod
    def _eval_metric(y, raw_prediction):
        # log loss from raw scores, stable for large |raw|: log(1 + exp(-s z)).
        signed = np.where(y > 0.5, raw_prediction, -raw_prediction)
        return {"logloss": float(np.mean(np.logaddexp(0.0, -signed)))}

    def decision_function(self, X):
        """Raw log-odds of the positive class ``classes_[1]``."""
        return self._raw_predict(X)

    def predict_proba(self, X):
        """Class probabilities, columns in the order of ``classes_``."""
        positive = get_objective("logistic").transform(self.decision_function(X))
        return np.column_stack([1.0 - positive, positive])

    def predict(self, X):
        """Most probable class label."""
        raw = self.decision_function(X)
        return self.classes_[(raw > 0).astype(np.intp)]
