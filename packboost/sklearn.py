"""scikit-learn estimators: :class:`PackBoostRegressor` and :class:`PackBoostClassifier`.

The estimators orchestrate: validate inputs (arrays or pandas / polars /
pyarrow tables, :mod:`packboost._inputs`), bin them, sort rows by era, prepare
the eval sets, metrics and callbacks, call :func:`packboost.booster.train`,
and keep the bin mapper and the trees. All hyper-parameters live in
``__init__`` (scikit-learn's contract), are checked in ``fit`` and documented
once, in :data:`_PARAMETER_DOC`; what a fit does rather than what model it
makes (eval sets, early stopping, callbacks, ``init_model``) are keyword
arguments of ``fit``.
"""

from __future__ import annotations

import copy
import numbers
import os
import sys
import warnings

import numpy as np

from packboost import _validation, backends
from packboost._compat import BaseEstimator, ClassifierMixin, RegressorMixin
from packboost._memory import check_fit_memory, data_memory_estimate, training_memory_estimate
from packboost._threads import resolve_n_threads
from packboost.binning import BinMapper
from packboost.booster import EvalSet, InitModel, _fraction_count, train
from packboost.callback import EarlyStopping, LogEvaluation, ProgressBar
from packboost.grower import TrainingData
from packboost.metrics import resolve_eval_metric
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
    tree_feature_fraction : float, default=0.5
        Fraction of the depth's features each tree of a pack may use.
    row_subsample : float, default=1.0
        Probability that a row is used by a tree (drawn per tree and round).
    era_subsample : float, default=0.75
        Fraction of eras each tree of a round is grown on.
    era_gain : {"realized", "newton"}, default="realized"
        Per-era gain definition (DESIGN 1).
    lambda_dro : float, default=1.0
        Weight of the per-era gain standard deviation (risk) in DES; see
        ``era_std`` for which standard deviation.
    lambda_dir : float, default=0.0
        Weight of the directional-agreement term in DES.
    era_weighting : {"equal", "count"}, default="equal"
        Era weights in DES: equal, or proportional to ``era_alpha + rows``.
    era_alpha : float, default=0.0
        Additive smoothing of count era weights.
    dir_tanh_scale : float, default=1.0
        Softness of the direction vote; 0 counts signs.
    era_std : {"between", "total"}, default="between"
        The risk term of DES. ``"between"``: the standard deviation of the
        per-era gains beyond what sampling noise within eras explains (eras
        that disagree are penalised, small nodes are not), see ``csrc/des.h``.
        ``"total"``: the plain weighted standard deviation of DESIGN 1, which
        also penalises noise and so stops trees early on weak signal. Only
        ``era_gain="realized"`` is corrected; ``"newton"`` always uses the total.
    n_jobs : int or None, default=None
        Threads; None or -1 uses every CPU this process may use.
    random_state : int, numpy Generator/RandomState or None, default=None
        Seed of every random draw. The model is a pure function of data,
        parameters and an int seed, whatever ``n_jobs``.
    device : {"cpu", "cuda"}, default="cpu"
        Backend. ``"cuda"`` trains and predicts on the first NVIDIA GPU with
        libpackboost_cuda (builds with nvcc only; see
        ``packboost.cuda_available()``): the same trees as the CPU for the
        same seed. Without a usable GPU, fit and predict raise
        ``packboost.CudaError`` with CUDA's message.
    importance_type : {"gain", "split", "des"}, default="gain"
        What ``feature_importances_`` adds up over a feature's splits: their
        pooled Newton gain, their number, or their DES score (gain that held
        up across eras, DESIGN 1).
"""

# Trees per pack the kernels accept (MAX_PACK_SIZE of packboost/_histogram.pxd:
# per-tree state lives in fixed-size stack arrays).
MAX_PACK_SIZE = 64

# name -> (kind, lower, upper, lower inclusive, upper inclusive) for numbers;
# name -> tuple of choices for strings.
_INT = "int"
_REAL = "real"
_PARAMETER_RULES = {
    "n_estimators": (_INT, 0, None, True, True),
    "pack_size": (_INT, 1, MAX_PACK_SIZE, True, True),
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
    "era_std": ("between", "total"),
    "device": ("cpu", "cuda"),
    "importance_type": ("gain", "split", "des"),
}


def _check_parameter(name, value):
    rule = _PARAMETER_RULES[name]
    if isinstance(rule[0], str) and rule[0] not in (_INT, _REAL):
        if not isinstance(value, str) or value not in rule:
            raise ValueError(f"{name} must be one of {list(rule)}, got {_validation.show(value)}")
        return value
    kind, low, high, low_closed, high_closed = rule
    if kind == _INT:
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            raise TypeError(f"{name} must be an int, got {_validation.show(value)}")
        value = int(value)
    else:
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise TypeError(f"{name} must be a real number, got {_validation.show(value)}")
        value = float(value)
        if not np.isfinite(value):
            raise ValueError(f"{name} must be finite, got {_validation.show(value)}")
    too_low = low is not None and (value < low or (value == low and not low_closed))
    too_high = high is not None and (value > high or (value == high and not high_closed))
    if too_low or too_high:
        left = "[" if low_closed else "("
        right = "]" if high_closed else ")"
        interval = f"{left}{low if low is not None else '-inf'}, " \
                   f"{high if high is not None else 'inf'}{right}"
        raise ValueError(f"{name} must be in {interval}, got {_validation.show(value)}")
    return value


# The kernels take the thread count as a C int.
_MAX_N_JOBS = 2**31 - 1


def _resolve_n_jobs(n_jobs) -> int:
    """Threads for ``n_jobs`` (None, -1: every CPU this process may use; see _threads)."""
    if (isinstance(n_jobs, numbers.Integral) and not isinstance(n_jobs, bool)
            and not -_MAX_N_JOBS <= n_jobs <= _MAX_N_JOBS):
        raise ValueError(f"n_jobs must be an int in [-{_MAX_N_JOBS}, {_MAX_N_JOBS}] or None, "
                         f"got {n_jobs!r}")
    return resolve_n_threads(n_jobs)


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
                 layer_feature_fraction=1.0, tree_feature_fraction=0.5,
                 row_subsample=1.0, era_subsample=0.75, era_gain="realized",
                 lambda_dro=1.0, lambda_dir=0.0, era_weighting="equal", era_alpha=0.0,
                 dir_tanh_scale=1.0, era_std="between", n_jobs=None, random_state=None,
                 device="cpu",
                 importance_type="gain"):
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
        self.era_std = era_std
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.device = device
        self.importance_type = importance_type

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

    def _fitted_state(self) -> dict:
        """The fitted attributes (scikit-learn's trailing underscore) and private fit state."""
        return {name: value for name, value in vars(self).items()
                if (name.endswith("_") and not name.startswith("__"))
                or name == "_evals_first_round"}

    def _fit(self, X, y, **kwargs):
        """Fit, all or nothing.

        Any exception -- bad input, a MemoryError, an exception raised by a
        callback or an eval metric, a KeyboardInterrupt (Ctrl-C is seen between
        two kernel calls, so within one depth of one round) -- leaves the
        estimator exactly as it was before ``fit`` (unfitted, or the previous
        model) and propagates unchanged. A fit that should keep the rounds
        grown so far is stopped by a callback returning True instead.
        """
        before = self._fitted_state()
        try:
            return self._fit_all(X, y, **kwargs)
        except BaseException:
            for name in self._fitted_state():
                delattr(self, name)
            for name, value in before.items():
                setattr(self, name, value)
            raise

    def _reset_target_encoding(self):
        """Forget what the previous fit learnt about the target (the classes)."""

    def _fit_all(self, X, y, *, era, sample_weight, eval_set, eval_names, eval_metric,
                 early_stopping_rounds, callbacks, init_model, progress):
        if init_model is self:
            # Training further from itself: keep the old model (and classes) aside.
            init_model = copy.copy(self)
        self._reset_target_encoding()
        params = self._validated_params()
        backends.check_device(params["device"])
        if early_stopping_rounds is not None and (
                isinstance(early_stopping_rounds, bool)
                or not isinstance(early_stopping_rounds, numbers.Integral)):
            raise TypeError(f"early_stopping_rounds must be an int or None, got "
                            f"{early_stopping_rounds!r}")
        if early_stopping_rounds is not None and early_stopping_rounds < 1:
            raise ValueError(f"early_stopping_rounds must be at least 1, got "
                             f"{early_stopping_rounds!r}")
        if progress is not None and not isinstance(progress, (bool, np.bool_)):
            raise TypeError(f"progress must be True, False or None, got {progress!r}")
        n_threads = _resolve_n_jobs(self.n_jobs)
        init = self._resolve_init_model(init_model)
        if isinstance(era, str):
            era, X = _validation.frame_column(X, era, "era")
        X, feature_names = _validation.check_X(X)
        if init is not None:
            init._check_features(X, feature_names, init.n_features_in_,
                                 getattr(init, "feature_names_in_", None),
                                 "X (continuing init_model)")
            if feature_names is None:
                feature_names = getattr(init, "feature_names_in_", None)
        n_rows = X.shape[0]
        y = self._encode_target(y, n_rows, init=init)
        sample_weight = _validation.check_sample_weight(sample_weight, n_rows)
        _validation.check_gradient_scale(y, sample_weight)
        era_codes, _ = _validation.encode_eras(era, n_rows)

        # Rows sorted once by era (stable): each era becomes one contiguous span.
        order = np.argsort(era_codes, kind="stable")
        if np.array_equal(order, np.arange(n_rows)):
            order = None
        # A certain failure to allocate is reported before anything large is.
        shares_X = (X.dtype in (np.int8, np.uint8) and X.flags.f_contiguous and order is None)
        check_fit_memory(data_memory_estimate(
            n_rows=n_rows, n_features=X.shape[1], binned_bytes_per_value=0 if shares_X else 1,
            weighted=sample_weight is not None, sorted_by_era=order is None),
            who=f"{type(self).__name__}.fit")
        if init is None:
            mapper = BinMapper(max_bins=params["max_bins"],
                               random_state=params["random_state"])
            X_binned = mapper.fit_transform(X, row_order=order)
            start = None
        else:
            # Continued training bins with the saved cuts, so old and new trees agree.
            mapper = init.bin_mapper_
            X_binned = mapper.transform(X, row_order=order)
            init_raw = init.ensemble_.predict_raw(X, n_threads)
            start = InitModel(ensemble=init.ensemble_,
                              raw_prediction=init_raw if order is None else init_raw[order])
        if order is not None:
            y, era_codes = y[order], era_codes[order]
            sample_weight = sample_weight[order] if sample_weight is not None else None
        data = TrainingData(X_binned=X_binned, n_bins=mapper.n_bins_,
                            row_era=np.ascontiguousarray(era_codes, dtype=np.int32),
                            n_eras=int(era_codes.max()) + 1, cuts=mapper.cuts_)

        eval_sets = self._prepare_eval_sets(eval_set, eval_names, X.shape[1], feature_names)
        metrics = self._resolve_metrics(eval_metric, eval_sets)
        callback_list = self._build_callbacks(callbacks, early_stopping_rounds, progress)
        check_fit_memory(training_memory_estimate(
            n_rows=n_rows, pack_size=params["pack_size"], n_threads=n_threads,
            bin_widths=mapper.n_bins_ + 1, n_eras=data.n_eras,
            n_candidates=_fraction_count(params["layer_feature_fraction"], X.shape[1]),
            max_depth=params["max_depth"], min_samples_leaf=params["min_samples_leaf"],
            n_estimators=params["n_estimators"],
            eval_rows=sum(item.X.shape[0] for item in eval_sets)),
            who=f"{type(self).__name__}.fit")
        objective = get_objective(self._objective_name)
        with backends.open_backend(params["device"], data, params["pack_size"],
                                   n_threads) as backend:
            ensemble, info = train(data, y, sample_weight, objective, params, n_threads,
                                   eval_sets=eval_sets, metrics=metrics,
                                   callbacks=callback_list, init=start, model=self,
                                   backend=backend)
        self.ensemble_ = ensemble
        self.bin_mapper_ = mapper
        self.n_features_in_ = X.shape[1]
        if feature_names is not None:
            self.feature_names_in_ = feature_names
        elif hasattr(self, "feature_names_in_"):
            del self.feature_names_in_
        self.n_eras_ = data.n_eras
        self.n_iter_ = ensemble.n_rounds
        self.evals_result_ = info.evals_result
        self.best_iteration_ = info.best_iteration
        self.best_score_ = info.best_score or {}
        self._evals_first_round = info.begin_iteration
        return self

    def _resolve_init_model(self, init_model):
        if init_model is None:
            return None
        if isinstance(init_model, (str, os.PathLike)):
            from packboost.model_io import load_model
            init_model = load_model(init_model)
        if type(init_model) is not type(self):
            raise TypeError(
                f"init_model must be a fitted {type(self).__name__} or the path of its model "
                f"file, got {type(init_model).__name__}"
            )
        if not init_model.__sklearn_is_fitted__():
            raise ValueError("init_model is not fitted")
        if init_model.ensemble_.pack_size != self.pack_size:
            raise ValueError(
                f"init_model has pack_size={init_model.ensemble_.pack_size}, but this model "
                f"has pack_size={self.pack_size}; continued training needs the same pack size"
            )
        return init_model

    def _prepare_eval_sets(self, eval_set, eval_names, n_features, feature_names):
        if eval_set is None:
            return []
        if isinstance(eval_set, tuple):
            eval_set = [eval_set]
        if eval_names is not None:
            eval_names = [eval_names] if isinstance(eval_names, str) else list(eval_names)
            if len(eval_names) != len(eval_set) or len(set(eval_names)) != len(eval_names):
                raise ValueError(
                    f"eval_names must hold {len(eval_set)} distinct names, one per eval_set "
                    f"item, got {eval_names!r}"
                )
        prepared = []
        for index, item in enumerate(eval_set):
            if not isinstance(item, (tuple, list)) or len(item) not in (2, 3):
                raise ValueError(
                    f"eval_set[{index}] must be an (X, y) or (X, y, era) tuple, got "
                    f"{type(item).__name__}"
                )
            X_eval, y_eval = item[0], item[1]
            era_eval = item[2] if len(item) == 3 else None
            if isinstance(era_eval, str):
                era_eval, X_eval = _validation.frame_column(X_eval, era_eval,
                                                            f"eval_set[{index}] era")
            X_eval = self._check_predict_X(X_eval, n_features=n_features,
                                           feature_names=feature_names,
                                           argument=f"eval_set[{index}] X")
            y_eval = self._encode_target(y_eval, X_eval.shape[0], argument=f"eval_set[{index}] y",
                                         learn=False)
            if era_eval is not None:
                era_eval = np.asarray(era_eval)
                _validation.encode_eras(era_eval, X_eval.shape[0],
                                        argument=f"eval_set[{index}] era")
            name = eval_names[index] if eval_names is not None else f"valid_{index}"
            prepared.append(EvalSet(name=str(name), X=X_eval, y=y_eval,
                                    raw_prediction=np.zeros(0), era=era_eval))
        return prepared

    def _resolve_metrics(self, eval_metric, eval_sets):
        if eval_metric is None:
            eval_metric = list(self._default_metrics)
            if any(item.era is not None for item in eval_sets):
                eval_metric = ["pearson_mean", "pearson_sharpe", *eval_metric]
        elif isinstance(eval_metric, str) or callable(eval_metric):
            eval_metric = [eval_metric]
        metrics = [resolve_eval_metric(metric, objective_name=self._objective_name)
                   for metric in eval_metric]
        if not metrics:
            raise ValueError("eval_metric is empty")
        return metrics

    def _build_callbacks(self, callbacks, early_stopping_rounds, progress):
        if callbacks is not None and not isinstance(callbacks, (list, tuple)):
            callbacks = [callbacks]
        callback_list = list(callbacks or ())
        if early_stopping_rounds is not None:
            callback_list.insert(0, EarlyStopping(early_stopping_rounds))
        if progress is None:
            # A log already shows progress, and a bar redrawn under it garbles both.
            progress = _interactive_session() and not any(
                isinstance(item, LogEvaluation) for item in callback_list)
        if progress and not any(isinstance(item, ProgressBar) for item in callback_list):
            callback_list.append(ProgressBar())
        return callback_list

    # -- prediction ------------------------------------------------------------

    def _check_predict_X(self, X, *, n_features=None, feature_names=None, argument="X"):
        X, names = _validation.check_X(X, argument=argument)
        if n_features is None:
            n_features = self.n_features_in_
            feature_names = getattr(self, "feature_names_in_", None)
        self._check_features(X, names, n_features, feature_names, argument)
        return X

    def _check_features(self, X, names, n_features, feature_names, argument):
        """The width and names of a validated ``X`` against those expected."""
        if X.shape[1] != n_features:
            raise ValueError(
                f"{argument} has {X.shape[1]} features, but {type(self).__name__} is "
                f"expecting {n_features} features as input."
            )
        if names is not None and feature_names is None:
            warnings.warn(f"{argument} has feature names, but {type(self).__name__} was "
                          "fitted without feature names", UserWarning, stacklevel=4)
        elif names is None and feature_names is not None:
            warnings.warn(f"{argument} does not have valid feature names, but "
                          f"{type(self).__name__} was fitted with feature names", UserWarning,
                          stacklevel=4)
        elif names is not None and not np.array_equal(names, feature_names):
            expected, got = list(feature_names), list(names)
            missing = [name for name in expected if name not in set(got)]
            unexpected = [name for name in got if name not in set(expected)]
            detail = (f"missing {missing[:5]}, unexpected {unexpected[:5]}"
                      if missing or unexpected else "same names in another order")
            raise ValueError(
                "The feature names should match those that were passed during fit: "
                f"{detail} (expected {expected[:5]}..., got {got[:5]}...)"
            )

    def _raw_predict(self, X, iteration_range=None):
        if not self.__sklearn_is_fitted__():
            raise _not_fitted_error(self)
        start, end = self._round_range(iteration_range)
        X = self._check_predict_X(X)
        return backends.predict_raw(_check_parameter("device", self.device), self.ensemble_, X,
                                    _resolve_n_jobs(self.n_jobs), n_rounds=end,
                                    start_round=start)

    def _round_range(self, iteration_range):
        n_rounds = self.ensemble_.n_rounds
        if iteration_range is None:
            return 0, n_rounds
        try:
            start, end = iteration_range
        except (TypeError, ValueError):
            raise TypeError(
                f"iteration_range must be a (start, end) pair of rounds, got {iteration_range!r}"
            ) from None
        end = n_rounds if end is None else end
        for value in (start, end):
            if isinstance(value, bool) or not isinstance(value, numbers.Integral):
                raise TypeError(f"iteration_range must hold ints, got {iteration_range!r}")
        if not 0 <= start <= end <= n_rounds:
            raise ValueError(
                f"iteration_range must satisfy 0 <= start <= end <= {n_rounds} (the model's "
                f"rounds), got {iteration_range!r}"
            )
        return int(start), int(end)

    # -- insight -------------------------------------------------------------------

    @property
    def feature_importances_(self):
        """Importance of each feature (``importance_type``), summing to 1.

        All zeros when the model has no split.
        """
        values = self.get_feature_importance()
        total = values.sum()
        return values / total if total > 0 else values

    def get_feature_importance(self, importance_type=None, *, normalize=False,
                               iteration_range=None):
        """Per feature, the total ``"gain"``, ``"split"`` count or ``"des"`` score of its splits.

        Parameters
        ----------
        importance_type : {"gain", "split", "des"}, optional
            Default: the estimator's ``importance_type``.
        normalize : bool, default=False
            Divide by the total, so that the values sum to 1.
        iteration_range : (int, int), optional
            Count only the splits of rounds ``start .. end - 1``.

        Returns
        -------
        ndarray of shape (n_features_in_,)
            In the order of the features (``feature_names_in_`` names them).
        """
        if not self.__sklearn_is_fitted__():
            raise _not_fitted_error(self)
        kind = _check_parameter("importance_type", importance_type if importance_type
                                is not None else self.importance_type)
        start, end = self._round_range(iteration_range)
        values = self.ensemble_.feature_importance(self.n_features_in_, kind, n_rounds=end)
        if start:
            values = values - self.ensemble_.feature_importance(self.n_features_in_, kind,
                                                                n_rounds=start)
        if normalize:
            total = values.sum()
            values = values / total if total > 0 else values
        return values

    # -- model files -----------------------------------------------------------

    def save_model(self, path: str | os.PathLike) -> None:
        """Write the fitted model to ``path`` (atomically; no pickle inside).

        Load it back with :func:`packboost.load_model`.
        """
        from packboost.model_io import save_estimator
        if not self.__sklearn_is_fitted__():
            raise _not_fitted_error(self)
        save_estimator(self, path)


def _interactive_session() -> bool:
    """Whether a person is likely watching: a terminal on stderr or a notebook, not CI."""
    if os.environ.get("CI"):
        return False
    try:
        terminal = sys.stderr is not None and sys.stderr.isatty()
    except (AttributeError, ValueError):
        terminal = False
    return terminal or "ipykernel" in sys.modules


def _not_fitted_error(estimator):
    try:
        from sklearn.exceptions import NotFittedError
    except ImportError:  # pragma: no cover
        NotFittedError = type("NotFittedError", (ValueError, AttributeError), {})
    return NotFittedError(
        f"This {type(estimator).__name__} instance is not fitted yet. Call 'fit' with "
        "appropriate arguments before using this estimator."
    )


_ATTRIBUTE_DOC = """
    ensemble_ : TreeEnsemble
        The trees (struct-of-arrays) and the base score.
    bin_mapper_ : BinMapper
        Raw value -> bin mapping learnt in ``fit`` (or taken from ``init_model``).
    n_features_in_ : int
    feature_names_in_ : ndarray of str, only when X had string column names
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
        ``{eval set name: {metric name: value}}`` at ``best_iteration_``.
    feature_importances_ : ndarray of shape (n_features_in_,)
        Per feature, its share of the ``importance_type`` totals.
"""

_FIT_DOC = """
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


class PackBoostRegressor(RegressorMixin, _PackBoostEstimator):
    __doc__ = f"""Gradient-boosted tree packs with Directional Era Splitting (squared error).

    Parameters
    ----------{_PARAMETER_DOC}
    Attributes
    ----------{_ATTRIBUTE_DOC}
    Examples
    --------
    >>> from packboost import PackBoostRegressor
    >>> from packboost.datasets import make_numerai_like
    >>> data = make_numerai_like(n_rows=2000, n_features=10, n_eras=20)
    >>> model = PackBoostRegressor(n_estimators=5, random_state=0)
    >>> model.fit(data.X, data.y, era=data.era).predict(data.X[:2]).shape
    (2,)
    """

    _objective_name = "squared_error"
    _default_metrics = ("rmse",)

    def fit(self, X, y, *, era=None, sample_weight=None, eval_set=None, eval_names=None,
            eval_metric=None, early_stopping_rounds=None, callbacks=None, init_model=None,
            progress=None):
        return self._fit(X, y, era=era, sample_weight=sample_weight, eval_set=eval_set,
                         eval_names=eval_names, eval_metric=eval_metric,
                         early_stopping_rounds=early_stopping_rounds, callbacks=callbacks,
                         init_model=init_model, progress=progress)

    fit.__doc__ = "Fit on ``X`` (rows x features) and ``y``.\n" + _FIT_DOC % {
        "default": '``["rmse"]``'}

    def predict(self, X, iteration_range=None):
        """Predicted values for ``X``.

        Parameters
        ----------
        X : array-like or table of shape (n_rows, n_features)
        iteration_range : (int, int), optional
            Use only rounds ``start .. end - 1`` (``end=None``: to the last);
            the base score is always included. Default: every round.
        """
        return self._raw_predict(X, iteration_range)

    def _encode_target(self, y, n_rows, argument="y", learn=True, init=None):
        return _validation.check_y(y, n_rows, argument=argument)


class PackBoostClassifier(ClassifierMixin, _PackBoostEstimator):
    __doc__ = f"""Binary classifier: packs of DES trees on the logistic loss.

    Parameters
    ----------{_PARAMETER_DOC}
    Attributes
    ----------
    classes_ : ndarray of shape (2,)
        The two class labels; ``classes_[1]`` is the positive class.{_ATTRIBUTE_DOC}
    Era metrics in ``eval_metric`` score the probability of ``classes_[1]``.
    """

    _objective_name = "logistic"
    _default_metrics = ("logloss",)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = False
        return tags

    def fit(self, X, y, *, era=None, sample_weight=None, eval_set=None, eval_names=None,
            eval_metric=None, early_stopping_rounds=None, callbacks=None, init_model=None,
            progress=None):
        return self._fit(X, y, era=era, sample_weight=sample_weight, eval_set=eval_set,
                         eval_names=eval_names, eval_metric=eval_metric,
                         early_stopping_rounds=early_stopping_rounds, callbacks=callbacks,
                         init_model=init_model, progress=progress)

    fit.__doc__ = "Fit on ``X`` and binary labels ``y``.\n" + _FIT_DOC % {
        "default": '``["logloss"]``'}

    def _reset_target_encoding(self):
        if hasattr(self, "classes_"):
            del self.classes_

    def _encode_target(self, y, n_rows, argument="y", learn=True, init=None):
        if y is None:
            raise ValueError(f"fit requires y to be passed, but the target {argument} is None")
        y = np.asarray(y)
        if y.ndim == 2 and y.shape[1] == 1:
            y = _validation.check_y(y, n_rows, argument=argument) if y.dtype.kind in "fiub" \
                else y[:, 0]
        if y.ndim != 1 or len(y) != n_rows:
            raise ValueError(f"{argument} must have shape ({n_rows},), got {y.shape}")
        if y.dtype.kind == "f" and not np.isfinite(y).all():
            row = int(np.argmax(~np.isfinite(y)))
            raise ValueError(f"Input {argument} contains NaN or infinity "
                             f"({_validation.show(y[row])} at row {row}).")
        missing = _validation._missing_labels(y)
        if missing is not None and missing.any():
            row = int(np.argmax(missing))
            raise ValueError(f"Input {argument} contains NaN or another missing label "
                             f"({_validation.show(y[row])} at row {row})")
        if init is not None:
            self.classes_ = init.classes_
        elif learn:
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

    def decision_function(self, X, iteration_range=None):
        """Raw log-odds of the positive class ``classes_[1]``.

        ``iteration_range`` as in :meth:`PackBoostRegressor.predict`.
        """
        return self._raw_predict(X, iteration_range)

    def predict_proba(self, X, iteration_range=None):
        """Class probabilities, columns in the order of ``classes_``."""
        positive = get_objective("logistic").transform(self.decision_function(X, iteration_range))
        return np.column_stack([1.0 - positive, positive])

    def predict(self, X, iteration_range=None):
        """Most probable class label."""
        raw = self.decision_function(X, iteration_range)
        return self.classes_[(raw > 0).astype(np.intp)]
