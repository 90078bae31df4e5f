"""scikit-learn estimators: :class:`PackBoostRegressor` and :class:`PackBoostClassifier`.

The estimators orchestrate: validate inputs (arrays or pandas / polars /
pyarrow tables, :mod:`packboost._inputs`), bin them, sort rows by era, prepare
the eval sets, metrics and callbacks, call :func:`packboost.booster.train`,
and keep the bin mapper and the trees. All hyper-parameters live in
``__init__`` (scikit-learn's contract), are declared once, with their
bounds, defaults and docs, in :mod:`packboost._parameters`, and are checked
in ``fit``; what a fit does rather than what model it makes (eval sets,
early stopping, callbacks, ``init_model``) are keyword arguments of ``fit``.
"""

from __future__ import annotations

import inspect
import numbers
import os
import sys
import warnings

import numpy as np

from packboost import (
    _categories,
    _constraints,
    _inputs,
    _parameters,
    _validation,
    backends,
    model_selection,
)
from packboost._compat import BaseEstimator, ClassifierMixin, RegressorMixin
from packboost._docs import ATTRIBUTE_DOC as _ATTRIBUTE_DOC
from packboost._docs import FIT_DOC as _FIT_DOC
from packboost._eval_metrics import check_distinct_names, resolve_eval_metric
from packboost._memory import check_fit_memory, data_memory_estimate, training_memory_estimate
from packboost.binning import BinMapper
from packboost.booster import EvalSet, InitModel, _fraction_count, outputs_per_pass, train
from packboost.callback import EarlyStopping, LogEvaluation, ProgressBar
from packboost.grower import TrainingData
from packboost.model_io import register_estimator, save_estimator
from packboost.objectives import (
    CLASSIFICATION_OBJECTIVES,
    REGRESSION_OBJECTIVES,
    CustomObjective,
    MultiTarget,
    Softmax,
    check_objective,
    get_objective,
    make_objective,
)

# The schema's names, kept importable from here (tests and older code use them).
_PARAMETER_DOC = _parameters.PARAMETER_DOC
_PARAMETER_RULES = _parameters.PARAMETER_RULES
_check_parameter = _parameters.check_parameter
_resolve_n_jobs = _parameters.resolve_n_jobs
_resolve_seed = _parameters.resolve_seed
_MAX_N_JOBS = _parameters.MAX_N_JOBS
MAX_PACK_SIZE = _parameters.MAX_PACK_SIZE

# Every fitted attribute (scikit-learn's trailing underscore, plus the first
# round of ``evals_result_``). A fit publishes them all in one step, and keeps
# the same values, as one dict, in _SNAPSHOT; see _PackBoostEstimator._view.
_FITTED = ("ensemble_", "bin_mapper_", "n_features_in_", "feature_names_in_", "era_column_",
           "n_eras_", "category_encoder_", "target_names_",
           "n_iter_", "evals_result_", "best_iteration_", "best_score_", "classes_",
           "_evals_first_round")
_SNAPSHOT = "_fitted_snapshot"
_MISSING = object()


class _PackBoostEstimator(BaseEstimator):
    """Shared fit/predict machinery; subclasses set the objectives they take."""

    def __new__(cls, *args, **kwargs):
        # Python's own error for an unknown keyword names no alternative; a
        # LightGBM / XGBoost user porting a configuration gets the equivalent.
        unknown = [name for name in kwargs if name not in _parameters.PARAMETERS]
        if unknown:
            raise TypeError(_parameters.unknown_parameter_message(cls.__name__, unknown))
        return super().__new__(cls)

    _objectives = REGRESSION_OBJECTIVES
    _objective_name = "squared_error"   # the default objective, whose link maps raw scores

    def __init__(self, *, n_estimators=100, pack_size=4, max_depth=6, learning_rate=0.1,
                 objective=None, alpha=0.9, reg_lambda=1.0, reg_alpha=0.0, min_samples_leaf=20,
                 min_child_weight=1e-3,
                 min_split_gain=0.0, max_delta_step=0.0, max_bins=255,
                 layer_feature_fraction=1.0, tree_feature_fraction=0.5,
                 feature_sampling="depth", row_subsample=1.0, era_subsample=0.75,
                 era_gain="realized",
                 lambda_dro=1.0, lambda_dir=0.0, era_weighting="equal", era_alpha=0.0,
                 dir_tanh_scale=1.0, era_std="between", monotone_constraints=None,
                 interaction_constraints=None, categorical_features=None,
                 max_cat_to_onehot=4, max_cat_threshold=32, cat_smooth=1000.0,
                 min_data_per_group=100, cat_order="era", cat_search_steps=0, n_jobs=None,
                 random_state=None,
                 device="cpu",
                 importance_type="gain"):
        self.n_estimators = n_estimators
        self.pack_size = pack_size
        self.max_depth = max_depth
        self.learning_rate = learning_rate
        self.objective = objective
        self.alpha = alpha
        self.reg_lambda = reg_lambda
        self.reg_alpha = reg_alpha
        self.min_samples_leaf = min_samples_leaf
        self.min_child_weight = min_child_weight
        self.min_split_gain = min_split_gain
        self.max_delta_step = max_delta_step
        self.max_bins = max_bins
        self.layer_feature_fraction = layer_feature_fraction
        self.tree_feature_fraction = tree_feature_fraction
        self.feature_sampling = feature_sampling
        self.row_subsample = row_subsample
        self.era_subsample = era_subsample
        self.era_gain = era_gain
        self.lambda_dro = lambda_dro
        self.lambda_dir = lambda_dir
        self.era_weighting = era_weighting
        self.era_alpha = era_alpha
        self.dir_tanh_scale = dir_tanh_scale
        self.era_std = era_std
        self.monotone_constraints = monotone_constraints
        self.interaction_constraints = interaction_constraints
        self.categorical_features = categorical_features
        self.max_cat_to_onehot = max_cat_to_onehot
        self.max_cat_threshold = max_cat_threshold
        self.cat_smooth = cat_smooth
        self.min_data_per_group = min_data_per_group
        self.cat_order = cat_order
        self.cat_search_steps = cat_search_steps
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
        return "ensemble_" in vars(self)

    # -- the fitted state --------------------------------------------------------
    #
    # One estimator may be refitted in one thread while others predict with it,
    # save it or change its parameters. A fit therefore builds its whole state
    # aside and publishes it in one step (_publish), and every reader takes one
    # snapshot (_view) at its start and reads nothing else from ``self``: it
    # sees the old model or the new one, never the new trees with the old
    # classes, width or round count.

    def _view(self) -> dict | None:
        """One consistent snapshot: the parameters and the fitted attributes of
        one fit (absent ones, such as ``feature_names_in_``, absent), or None
        when the estimator is not fitted. Never changes after it is taken."""
        view = vars(self).copy()  # one step: never half of a publication
        snapshot = view.pop(_SNAPSHOT, None)
        if snapshot is not None and all(view.get(name, _MISSING) is value
                                        for name, value in snapshot.items()):
            # The plain attributes are the snapshot's, but for a name that the
            # publishing fit is about to remove (feature_names_in_).
            for name in _FITTED:
                if name not in snapshot:
                    view.pop(name, None)
        elif "ensemble_" not in view:
            return None
        # else: fitted attributes set one by one (load_model, an older pickle, an
        # attribute assigned by hand after the fit): as they are.
        return view

    def _fitted_view(self) -> dict:
        view = self._view()
        if view is None:
            raise _not_fitted_error(self)
        return view

    def _publish(self, fitted: dict) -> None:
        """Make ``fitted`` (every attribute of _FITTED this fit has) the fitted state."""
        snapshot = dict(fitted)
        attributes = vars(self)
        previous = attributes.copy()  # the old values die after the update, not during it
        attributes.update({**snapshot, _SNAPSHOT: snapshot})
        for name in _FITTED:
            if name not in snapshot:
                attributes.pop(name, None)
        del previous

    def _frozen(self, view: dict):
        """An estimator holding ``view`` (for code that reads attributes one by one)."""
        frozen = object.__new__(type(self))
        vars(frozen).update(view)
        return frozen

    # -- fitting ---------------------------------------------------------------

    def _validated_params(self, source: dict | None = None) -> dict:
        """The parameters checked, from ``source`` (a snapshot of ``vars(self)``)."""
        source = vars(self).copy() if source is None else source
        params = {name: _check_parameter(name, source[name]) for name in _PARAMETER_RULES}
        params["objective"] = check_objective(source["objective"], self._objectives,
                                              type(self).__name__)
        params["random_state"] = _resolve_seed(source["random_state"])
        for name in (_constraints.MONOTONE, _constraints.INTERACTIONS,
                     _categories.ARGUMENT):
            params[name] = _check_parameter(name, source[name])
        return params

    def _fit(self, X, y, **kwargs):
        """Fit, all or nothing.

        The new fitted state is built aside and published in one step at the
        end. Any exception before -- bad input, a MemoryError, an exception
        raised by a callback or an eval metric, a KeyboardInterrupt (Ctrl-C is
        seen between two kernel calls, so within one depth of one round) --
        leaves the estimator exactly as it was before ``fit`` (unfitted, or the
        previous model) and propagates unchanged. A fit that should keep the
        rounds grown so far is stopped by a callback returning True instead.
        """
        self._publish(self._fit_all(X, y, **kwargs))
        return self

    def _fit_all(self, X, y, *, era, sample_weight, eval_set, eval_names, eval_metric,
                 early_stopping_rounds, callbacks, init_model, progress):
        """Fit and return the fitted attributes, without changing ``self``."""
        source = self._view() if init_model is self else None
        if source is None:
            source = vars(self).copy()
        params = self._validated_params(source)
        _validation.warn_unusual_params(params)
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
        n_threads = _resolve_n_jobs(source["n_jobs"])
        # Training further from itself uses the model this fit started from.
        init = self._resolve_init_model(source if init_model is self else init_model,
                                        params["pack_size"])
        era_column = era if isinstance(era, str) else None
        if era is None:
            model_selection.warn_if_fitted_without_era(type(self).__name__)
        if era_column is not None:
            era, X = _validation.frame_column(X, era_column, "era")
        if init is not None and init.get("category_encoder_") is not None:
            encoder = init["category_encoder_"]
            X = encoder.transform(X)
        else:
            encoder, X = _categories.learn(X, params["categorical_features"])
            if encoder is not None and init is not None:
                raise ValueError("init_model was trained without categorical features; "
                                 "continue it on the same numeric features")
        X, feature_names = _validation.check_X(X)
        if init is not None:
            self._check_features(X, feature_names, init["n_features_in_"],
                                 init.get("feature_names_in_"), "X (continuing init_model)")
            if feature_names is None:
                feature_names = init.get("feature_names_in_")
        params = _constraints.resolve_for_fit(params, X.shape[1], feature_names)
        if encoder is not None:
            _check_categorical_supported(params, encoder, feature_names)
        n_rows = X.shape[0]
        y, target = self._learn_target(y, n_rows, init)
        n_outputs = self._n_outputs(y, target)
        self._check_outputs_supported(n_outputs, params)
        sample_weight = _validation.check_sample_weight(sample_weight, n_rows)
        _validation.check_gradient_scale(y, sample_weight)
        _validation.warn_if_a_feature_is_the_target(X, y, feature_names)
        era_codes, _ = _validation.encode_eras(era, n_rows)

        # Rows sorted once by era (stable): each era becomes one contiguous span.
        order = _validation.era_order(era_codes)
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
            if encoder is None:
                X_binned = mapper.fit_transform(X, row_order=order, n_threads=n_threads)
            else:
                X_binned = _categories.fit_bins(mapper, X, encoder, order, n_threads)
            start = None
        else:
            # Continued training bins with the saved cuts, so old and new trees agree.
            mapper = init["bin_mapper_"]
            X_binned = mapper.transform(X, row_order=order, n_threads=n_threads)
            init_raw = init["ensemble_"].predict_raw(X, n_threads)
            start = InitModel(ensemble=init["ensemble_"],
                              raw_prediction=init_raw if order is None else init_raw[order])
        if order is not None:
            y, era_codes = y[order], era_codes[order]
            sample_weight = sample_weight[order] if sample_weight is not None else None
        data = TrainingData(X_binned=X_binned, n_bins=mapper.n_bins_,
                            row_era=np.ascontiguousarray(era_codes, dtype=np.int32),
                            n_eras=int(era_codes.max()) + 1, cuts=mapper.cuts_,
                            categorical=None if encoder is None else encoder.mask())

        eval_sets = self._prepare_eval_sets(eval_set, eval_names, X.shape[1], feature_names,
                                            target, n_outputs, encoder=encoder)
        metrics = self._resolve_metrics(eval_metric, eval_sets, params, n_outputs)
        callback_list = self._build_callbacks(callbacks, early_stopping_rounds, progress)
        output_objective = make_objective(params["objective"], alpha=params["alpha"],
                                          link=get_objective(self._objective_name).transform,
                                          row_order=order)
        check_fit_memory(training_memory_estimate(
            n_rows=n_rows, pack_size=params["pack_size"], n_threads=n_threads,
            bin_widths=mapper.n_bins_ + 1, n_eras=data.n_eras,
            n_candidates=_fraction_count(params["layer_feature_fraction"], X.shape[1]),
            max_depth=params["max_depth"], min_samples_leaf=params["min_samples_leaf"],
            n_estimators=params["n_estimators"],
            eval_rows=sum(item.X.shape[0] for item in eval_sets), n_outputs=n_outputs,
            outputs_per_pass=outputs_per_pass(
                n_outputs, params, output_objective,
                grows_outputs_in_one_pass=backends.grows_outputs_in_one_pass(params["device"]),
                categorical=encoder is not None)),
            who=f"{type(self).__name__}.fit")
        objective = self._output_objective(output_objective, n_outputs)
        with backends.open_backend(params["device"], data, params["pack_size"],
                                   n_threads) as backend:
            ensemble, info = train(data, self._training_target(y, n_outputs), sample_weight,
                                   objective, params, n_threads,
                                   eval_sets=eval_sets, metrics=metrics,
                                   callbacks=callback_list, init=start, model=self,
                                   backend=backend)
        fitted = _fitted_state(target, ensemble, mapper, X.shape[1], data.n_eras, info,
                               feature_names, era_column)
        if encoder is not None:
            fitted["category_encoder_"] = encoder
        return fitted

    # -- several outputs (targets or classes; docs/packs.md §10) -----------------

    def _check_outputs_supported(self, n_outputs, params) -> None:
        """Refuse, before any work, what a model of several outputs cannot do yet."""
        if n_outputs == 1:
            return
        what = self._outputs_description(n_outputs)
        if callable(params["objective"]) and not self._callable_takes_outputs:
            raise ValueError(
                f"objective: a classifier's callable objective trains two classes, but y "
                f"has {what}; leave objective unset to train the softmax loss")

    # A callable objective of several targets takes and returns (n_rows, n_targets).
    _callable_takes_outputs = True

    def _output_objective(self, objective, n_outputs):
        """The objective of all ``n_outputs`` outputs (``objective`` itself for one)."""
        if n_outputs == 1:
            return objective
        if isinstance(objective, CustomObjective):
            return objective.for_outputs(n_outputs)
        return MultiTarget(objective, n_outputs)

    @staticmethod
    def _training_target(y, n_outputs):
        """``y`` as ``train`` takes it: several targets output-major (n_targets, n_rows)."""
        return np.ascontiguousarray(y.T) if y.ndim == 2 else y

    def _resolve_init_model(self, init_model, pack_size) -> dict | None:
        """The fitted state (a _view) to continue from: ``init_model`` is an
        estimator, the path of its model file, or already a view (``self``'s)."""
        if init_model is None:
            return None
        if isinstance(init_model, dict):
            view = init_model
        else:
            if isinstance(init_model, (str, os.PathLike)):
                from packboost.model_io import load_model
                init_model = load_model(init_model)
            if type(init_model) is not type(self):
                raise TypeError(
                    f"init_model must be a fitted {type(self).__name__} or the path of its "
                    f"model file, got {type(init_model).__name__}"
                )
            view = init_model._view()
        if view is None:
            raise ValueError("init_model is not fitted")
        if view["ensemble_"].pack_size != pack_size:
            raise ValueError(
                f"init_model has pack_size={view['ensemble_'].pack_size}, but this model "
                f"has pack_size={pack_size}; continued training needs the same pack size"
            )
        return view

    def _prepare_eval_sets(self, eval_set, eval_names, n_features, feature_names, target,
                           n_outputs=1, encoder=None):
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
                                           argument=f"eval_set[{index}] X", encoder=encoder)
            y_eval = self._encode_target(y_eval, X_eval.shape[0], target,
                                         argument=f"eval_set[{index}] y", n_outputs=n_outputs)
            if era_eval is not None:
                era_eval = np.asarray(era_eval)
                _validation.encode_eras(era_eval, X_eval.shape[0],
                                        argument=f"eval_set[{index}] era")
            name = eval_names[index] if eval_names is not None else f"valid_{index}"
            prepared.append(EvalSet(name=str(name), X=X_eval, y=y_eval,
                                    raw_prediction=np.zeros(0), era=era_eval))
        return prepared

    def _resolve_metrics(self, eval_metric, eval_sets, params, n_outputs=1):
        objective_name = self._metric_objective_name(n_outputs)
        if eval_metric is None:
            # The loss being minimised, as LightGBM's default metric follows
            # its objective: huber and quantile fits report their own loss.
            objective = params["objective"]
            if objective_name == "softmax":
                eval_metric = ["multi_logloss"]
            else:
                eval_metric = ([objective] if objective in ("huber", "quantile")
                               else list(self._default_metrics))
                if any(item.era is not None for item in eval_sets):
                    eval_metric = ["pearson_mean", "pearson_sharpe", *eval_metric]
        elif isinstance(eval_metric, str) or callable(eval_metric):
            eval_metric = [eval_metric]
        metrics = [resolve_eval_metric(metric, objective_name=objective_name,
                                       alpha=params["alpha"])
                   for metric in eval_metric]
        if not metrics:
            raise ValueError("eval_metric is empty")
        # Before any round for the built-ins; a callable's name is checked
        # once it has returned it (packboost.booster.EvalSet.evaluate).
        check_distinct_names([metric for metric in metrics if metric.function is None])
        return metrics

    def _build_callbacks(self, callbacks, early_stopping_rounds, progress):
        if callbacks is not None and not isinstance(callbacks, (list, tuple)):
            callbacks = [callbacks]
        callback_list = list(callbacks or ())
        if early_stopping_rounds is not None:
            callback_list.insert(0, EarlyStopping(early_stopping_rounds))
        if progress is None:
            # A log already shows progress, and a bar redrawn under it garbles both.
            progress = _interactive_terminal() and not any(
                isinstance(item, LogEvaluation) for item in callback_list)
        if progress and not any(isinstance(item, ProgressBar) for item in callback_list):
            callback_list.append(ProgressBar())
        return callback_list

    # -- prediction ------------------------------------------------------------

    def _check_predict_X(self, X, *, n_features, feature_names, argument="X",
                         era_column=None, encoder=None):
        # A model fitted with era="<column>" predicts the same frame, its era
        # column still in it (as users hold their data): that column is not a feature.
        if (era_column is not None and _inputs.frame_kind(X) is not None
                and era_column in _inputs.column_names(X)
                and (feature_names is None or era_column not in list(feature_names))):
            X = _inputs.drop_columns(X, [era_column])
        if feature_names is not None and _inputs.frame_kind(X) is not None:
            # By name before any dtype check: an ``id`` column of strings is told
            # as a column the model does not know, not as a non-numeric feature.
            _check_feature_names(_inputs.column_names(X), feature_names)
        if encoder is not None:
            # Categories to the fit's codes (unseen ones to NaN: the missing side).
            X = encoder.transform(X, argument=argument)
        X, names = _validation.check_X(X, argument=argument)
        self._check_features(X, names, n_features, feature_names, argument)
        return X

    def _check_features(self, X, names, n_features, feature_names, argument):
        """The names and width of a validated ``X`` against those expected.

        Names first (as scikit-learn): a table with other columns is told which.
        """
        if names is not None and feature_names is not None:
            _check_feature_names(names, feature_names)
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

    def _prediction_input(self, X, iteration_range, view):
        """``(view, X checked, start round, end round)`` of one snapshot of the model
        (``view``; default: one taken now)."""
        view = self._fitted_view() if view is None else view
        start, end = _round_range(view["ensemble_"], iteration_range)
        X = self._check_predict_X(X, n_features=view["n_features_in_"],
                                  era_column=view.get("era_column_"),
                                  encoder=view.get("category_encoder_"),
                                  feature_names=view.get("feature_names_in_"))
        return view, X, start, end

    def _raw_predict(self, X, iteration_range=None, view=None):
        """Raw scores of the model in ``view`` (default: a snapshot taken now)."""
        view, X, start, end = self._prediction_input(X, iteration_range, view)
        return backends.predict_raw(_check_parameter("device", view["device"]),
                                    view["ensemble_"], X, _resolve_n_jobs(view["n_jobs"]),
                                    n_rounds=end, start_round=start)

    def _contributions(self, X, iteration_range=None, view=None):
        """TreeSHAP contributions of the raw score: (n_rows, n_features + 1), or
        (n_rows, n_outputs, n_features + 1) for a model of several outputs."""
        view, X, start, end = self._prediction_input(X, iteration_range, view)
        return view["ensemble_"].predict_contributions(X, _resolve_n_jobs(view["n_jobs"]),
                                                       n_rounds=end, start_round=start)

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
        view = self._fitted_view()
        ensemble, n_features = view["ensemble_"], view["n_features_in_"]
        kind = _check_parameter("importance_type", importance_type if importance_type
                                is not None else view["importance_type"])
        start, end = _round_range(ensemble, iteration_range)
        values = ensemble.feature_importance(n_features, kind, n_rounds=end)
        if start:
            values = values - ensemble.feature_importance(n_features, kind, n_rounds=start)
        if normalize:
            total = values.sum()
            values = values / total if total > 0 else values
        return values

    # -- model files -----------------------------------------------------------

    def save_model(self, path: str | os.PathLike) -> None:
        """Write the fitted model to ``path`` (atomically; no pickle inside).

        Load it back with :func:`packboost.load_model`.
        """
        # One snapshot, whatever another thread fits or sets meanwhile.
        save_estimator(self._frozen(self._fitted_view()), path)

    def standalone_predictor(self):
        """``predict`` of this fitted model as a NumPy-only, picklable object.

        Calling it returns exactly ``self.predict(X)`` (a classifier's also
        has ``predict_proba``); it pickles with pickle or cloudpickle and loads
        where packboost is not installed (a Numerai upload). See
        :mod:`packboost.standalone`.
        """
        from types import SimpleNamespace

        from packboost.standalone import standalone_predictor

        # One snapshot, like predict: the trees, width and classes of one fit.
        return standalone_predictor(SimpleNamespace(**self._fitted_view()))



# inspect.signature(PackBoostRegressor) reads __new__ first: show __init__'s keywords.
_PackBoostEstimator.__new__.__signature__ = inspect.signature(_PackBoostEstimator.__init__)

def _fitted_state(target, ensemble, mapper, n_features, n_eras, info, feature_names,
                  era_column) -> dict:
    """The fitted attributes of a fit (what ``_publish`` makes the model);
    shared with the Dask estimators (packboost/dask.py)."""
    fitted = {
        **target,
        "ensemble_": ensemble,
        "bin_mapper_": mapper,
        "n_features_in_": n_features,
        "n_eras_": n_eras,
        "n_iter_": ensemble.n_rounds,
        "evals_result_": info.evals_result,
        "best_iteration_": info.best_iteration,
        # Without early stopping, the scores of the last round (as LightGBM).
        "best_score_": info.best_score or {
            name: {metric: values[-1] for metric, values in metrics.items() if values}
            for name, metrics in info.evals_result.items()},
        "_evals_first_round": info.begin_iteration,
    }
    if feature_names is not None:
        fitted["feature_names_in_"] = feature_names
    if era_column is not None:
        fitted["era_column_"] = era_column
    return fitted


def _target_names(y) -> tuple:
    """``(y, names)``: the column names of a table ``y`` of several targets
    when they are all strings (an object array), else None; a
    :class:`packboost._inputs.NamedMatrix` (what the command line passes) is
    unwrapped to its values."""
    from packboost._inputs import NamedMatrix, column_names, frame_kind

    if isinstance(y, NamedMatrix):
        y, names = y.values, y.names
    elif frame_kind(y) is not None:
        names = column_names(y)
    else:
        return y, None
    if len(names) < 2 or not all(isinstance(name, str) for name in names):
        return y, None
    return y, np.asarray(names, dtype=object)


def _check_categorical_supported(params, encoder, feature_names) -> None:
    """Refuse, before any work, what categorical features cannot do yet."""
    names = [feature_names[k] if feature_names is not None else int(k)
             for k in encoder.features.tolist()]
    monotone = params.get("monotone_constraints")
    if monotone is not None:
        constrained = [name for name, k in zip(names, encoder.features.tolist(), strict=True)
                       if monotone[k] != 0]
        if constrained:
            raise ValueError(
                f"monotone_constraints sets a direction for categorical feature "
                f"{constrained[0]!r}; categories have no order to be monotone in (give it 0)")


def _check_feature_names(names, feature_names) -> None:
    """Raise unless a table's column names are the fitted features, in order.

    Every unknown column is named (an ``id``, a target, another era column), as
    are the missing features, so one error says what to drop or add.
    """
    expected, got = list(feature_names), list(names)
    if got == expected:
        return
    known, present = set(expected), set(got)
    missing = [name for name in expected if name not in present]
    unexpected = [name for name in got if name not in known]
    if missing or unexpected:
        detail = ", ".join(f"{label} {_listed(names)}" for label, names in
                           (("missing", missing), ("unexpected", unexpected)) if names)
        if unexpected:
            detail += (" (columns that are not features of the model: drop them, or select "
                       "the features with X[model.feature_names_in_])")
    else:
        detail = "same names in another order"
    raise ValueError(
        f"The feature names should match those that were passed during fit: {detail} "
        f"(expected {expected[:5]}{'...' if len(expected) > 5 else ''})"
    )


def _listed(names, limit: int = 20) -> str:
    shown = repr(names[:limit])
    return shown if len(names) <= limit else f"{shown[:-1]}, ... {len(names) - limit} more]"


def _round_range(ensemble, iteration_range):
    """``iteration_range`` checked against ``ensemble``'s rounds: ``(start, end)``."""
    n_rounds = ensemble.n_rounds
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



def _interactive_terminal() -> bool:
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


@register_estimator
class PackBoostRegressor(RegressorMixin, _PackBoostEstimator):
    __doc__ = f"""Regressor: packs of DES trees on squared error, Huber, quantile or your own loss.

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

    # The built-in objectives it takes (the default first); raw scores are predictions.
    _objectives = REGRESSION_OBJECTIVES
    _objective_name = "squared_error"
    _default_metrics = ("rmse",)

    def fit(self, X, y, *, era=None, sample_weight=None, eval_set=None, eval_names=None,
            eval_metric=None, early_stopping_rounds=None, callbacks=None, init_model=None,
            progress=None):
        return self._fit(X, y, era=era, sample_weight=sample_weight, eval_set=eval_set,
                         eval_names=eval_names, eval_metric=eval_metric,
                         early_stopping_rounds=early_stopping_rounds, callbacks=callbacks,
                         init_model=init_model, progress=progress)

    fit.__doc__ = ("Fit on ``X`` (rows x features) and ``y``: one target, or a 2-D ``y`` of "
                   "several (rows x targets), one set of trees per target grown in the same "
                   "rounds; a table ``y`` of several targets names them "
                   "(``target_names_``).\n") + _FIT_DOC % {
        "default": '``["rmse"]``'}

    def predict(self, X, iteration_range=None, *, pred_contrib=False):
        """Predicted values for ``X``: shape (n_rows,), or (n_rows, n_targets)
        for a model fitted on several targets (a 2-D ``y``).

        Parameters
        ----------
        X : array-like or table of shape (n_rows, n_features)
        iteration_range : (int, int), optional
            Use only rounds ``start .. end - 1`` (``end=None``: to the last);
            the base score is always included. Default: every round.
        pred_contrib : bool, default=False
            Return each feature's exact TreeSHAP contribution instead, shape
            ``(n_rows, n_features + 1)``; the last column is the expected value,
            and each row sums to the prediction (up to float rounding). With
            several targets: ``(n_rows, n_targets, n_features + 1)``.
        """
        if pred_contrib:
            return self._contributions(X, iteration_range)
        return self._raw_predict(X, iteration_range)

    def _learn_target(self, y, n_rows, init):
        """``y``: (n_rows,), or (n_rows, n_targets) for several targets; a
        table of several targets names them (``target_names_``)."""
        y, names = _target_names(y)
        y = _validation.check_y(y, n_rows, several=True)
        if init is not None:
            expected = init["ensemble_"].n_outputs
            if self._n_outputs(y, {}) != expected:
                raise ValueError(
                    f"y has {self._outputs_description(self._n_outputs(y, {}))}, but "
                    f"init_model was trained on {self._outputs_description(expected)}")
            if names is None:
                names = init.get("target_names_")
        if y.ndim == 1 or names is None:
            return y, {}
        return y, {"target_names_": names}

    def _encode_target(self, y, n_rows, target, argument="y", n_outputs=1):
        y = _validation.check_y(y, n_rows, argument=argument, several=n_outputs > 1)
        if self._n_outputs(y, target) != n_outputs:
            raise ValueError(f"{argument} must have shape ({n_rows}, {n_outputs}) (one column "
                             f"per target of y), got {y.shape}")
        return y

    @staticmethod
    def _n_outputs(y, target):
        return 1 if y.ndim == 1 else y.shape[1]

    @staticmethod
    def _outputs_description(n_outputs):
        return f"{n_outputs} target" + ("s" if n_outputs > 1 else "")

    def _metric_objective_name(self, n_outputs):
        return self._objective_name


@register_estimator
class PackBoostClassifier(ClassifierMixin, _PackBoostEstimator):
    __doc__ = f"""Classifier: packs of DES trees on the logistic loss (two classes) or
    the softmax loss (more: one pack per class each round, docs/packs.md §10).

    Parameters
    ----------{_PARAMETER_DOC}
    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        The class labels, sorted; with two, ``classes_[1]`` is the positive
        class.{_ATTRIBUTE_DOC}
    Era metrics in ``eval_metric`` score the probability of ``classes_[1]``
    (binary models only; a multiclass model reports ``"multi_logloss"`` and
    ``"multi_error"``).
    """

    # Raw scores are log-odds, whatever the objective (a callable's too).
    _objectives = CLASSIFICATION_OBJECTIVES
    _objective_name = "logistic"
    _default_metrics = ("logloss",)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = True
        return tags

    def fit(self, X, y, *, era=None, sample_weight=None, eval_set=None, eval_names=None,
            eval_metric=None, early_stopping_rounds=None, callbacks=None, init_model=None,
            progress=None):
        return self._fit(X, y, era=era, sample_weight=sample_weight, eval_set=eval_set,
                         eval_names=eval_names, eval_metric=eval_metric,
                         early_stopping_rounds=early_stopping_rounds, callbacks=callbacks,
                         init_model=init_model, progress=progress)

    fit.__doc__ = ("Fit on ``X`` and class labels ``y`` (two classes: the logistic loss; "
                   "more: softmax).\n") + _FIT_DOC % {
        "default": '``["logloss"]`` (``["multi_logloss"]`` for more than two classes)'}

    def _learn_target(self, y, n_rows, init):
        """``y`` as 0/1 and the fitted attributes it gives (``classes_``): the
        classes of ``init`` (a view) when continuing, else those of ``y``."""
        y = self._check_labels(y, n_rows, "y")
        if init is not None:
            classes = init["classes_"]
        else:
            if y.dtype.kind == "f" and np.any(y != np.round(y)):
                raise ValueError(
                    "Unknown label type: continuous. y must hold class labels; "
                    "use PackBoostRegressor for a continuous target"
                )
            try:
                classes = np.unique(y)
            except TypeError as error:
                raise ValueError(f"Unknown label type: y labels cannot be "
                                 f"ordered ({error})") from None
            if len(classes) < 2:
                raise ValueError(
                    f"y has 1 class ({classes.tolist()}); a classifier needs at least two"
                )
        return _class_codes(y, classes, "y"), {"classes_": classes}

    def _encode_target(self, y, n_rows, target, argument="y", n_outputs=1):
        """Labels ``y`` as class codes: 1.0 for ``target["classes_"][1]``, else
        0.0 (two classes), or the index of each label in ``classes_``."""
        return _class_codes(self._check_labels(y, n_rows, argument), target["classes_"],
                            argument)

    @staticmethod
    def _n_outputs(y, target):
        """One raw score for two classes (the log-odds), one per class beyond."""
        n_classes = len(target["classes_"])
        return 1 if n_classes == 2 else n_classes

    @staticmethod
    def _outputs_description(n_outputs):
        return f"{n_outputs} classes"

    # Classes' raw scores come from softmax, not from a callable.
    _callable_takes_outputs = False

    def _output_objective(self, objective, n_outputs):
        return objective if n_outputs == 1 else Softmax(n_outputs)

    def _metric_objective_name(self, n_outputs):
        return self._objective_name if n_outputs == 1 else "softmax"

    @staticmethod
    def _check_labels(y, n_rows, argument):
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
        return y

    def decision_function(self, X, iteration_range=None):
        """Raw log-odds of the positive class ``classes_[1]``, shape (n_rows,);
        for more than two classes, each class's raw score (softmax input),
        shape (n_rows, n_classes).

        ``iteration_range`` as in :meth:`PackBoostRegressor.predict`.
        """
        return self._raw_predict(X, iteration_range)

    def predict_proba(self, X, iteration_range=None):
        """Class probabilities (n_rows, n_classes), columns in the order of ``classes_``."""
        raw = self._raw_predict(X, iteration_range)
        if raw.ndim == 2:
            return Softmax.transform(raw)
        positive = get_objective("logistic").transform(raw)
        return np.column_stack([1.0 - positive, positive])

    def predict(self, X, iteration_range=None, *, pred_contrib=False):
        """Most probable class label.

        With ``pred_contrib=True``: each feature's TreeSHAP contribution to the
        raw log-odds (``decision_function``), shape ``(n_rows, n_features + 1)``,
        the last column the expected value; for more than two classes, per
        class: ``(n_rows, n_classes, n_features + 1)``.
        """
        view = self._fitted_view()  # the classes of the very model that scores
        if pred_contrib:
            return self._contributions(X, iteration_range, view)
        raw = self._raw_predict(X, iteration_range, view)
        if raw.ndim == 2:
            return view["classes_"][np.argmax(raw, axis=1)]
        return view["classes_"][(raw > 0).astype(np.intp)]


def _class_codes(y, classes, argument):
    """Each label's index in ``classes`` as float64 (for two classes: 1.0 where
    ``y`` is ``classes[1]``, 0.0 where it is ``classes[0]``)."""
    unknown = ~np.isin(y, classes)
    if unknown.any():
        raise ValueError(f"{argument} has labels not seen in fit: {np.unique(y[unknown])[:5]}")
    if len(classes) == 2:
        return (y == classes[1]).astype(np.float64)
    codes = np.zeros(len(y), dtype=np.float64)
    for code, label in enumerate(classes):
        codes[y == label] = code
    return codes
