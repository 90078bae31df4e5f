"""Every hyper-parameter, declared once.

:data:`SCHEMA` holds one :class:`Parameter` per estimator hyper-parameter, in
the order of the estimators' ``__init__`` signature: its kind and bounds (or
choices), its default, its documentation, the layer(s) of the library that
read it, and what a model file written before it existed meant. Everything
else is derived from it:

* the estimators' parameter docstring (:data:`PARAMETER_DOC`),
* validation in ``fit`` (:func:`check_parameter`, :data:`PARAMETER_RULES`),
* the ``packboost train`` flags (:func:`add_cli_flags`),
* the parameter checks of model files (:func:`check_file_parameter`,
  :data:`PARAMETERS_BEFORE_THEY_EXISTED`),
* the settings handed to the grower and the split kernels
  (:func:`grower_settings`, :func:`split_kernel_params`).

The estimators keep an explicit ``__init__`` (scikit-learn reads its
signature); ``tests/test_parameters.py`` checks that it matches this schema.
"""

from __future__ import annotations

import numbers
import textwrap
from dataclasses import dataclass

import numpy as np

from packboost import _constraints, _validation
from packboost._categories import check_categorical_features as _categorical_check
from packboost._threads import resolve_n_threads
from packboost.objectives import BUILT_IN as BUILT_IN_OBJECTIVES
from packboost.objectives import CUSTOM as CUSTOM_OBJECTIVE

# Kinds of parameter.
INT = "int"
REAL = "real"
CHOICE = "choice"
OTHER = "other"   # checked by its own function (n_jobs, random_state)

# Layers: which part of the library reads a parameter.
LAYERS = (
    "estimator",   # sklearn.py itself (threads, seed)
    "boosting",    # booster.train's loop (rounds, packs)
    "binning",     # BinMapper
    "sampling",    # booster.draw_round: per-round row and feature draws
    "grower",      # GrowerParams (grower.py, the one depth driver)
    "split",       # the DES split kernels of both backends (_split_params.make_split_params)
    "device",      # backend choice (packboost.backends)
    "importance",  # feature importances
)

# Trees per pack the kernels accept: per-tree state lives in fixed-size stack
# arrays. The same number is MAX_PACK_SIZE of packboost/_histogram.pxd and
# PBC_MAX_PACK_SIZE of csrc/packboost_cuda.h (tests/test_parameters.py
# checks that the copies agree).
MAX_PACK_SIZE = 64

# The deepest tree the engine grows, and the max_depth that asks for it
# (LightGBM's "no limit"): with depth-wise growth a tree stops where its nodes
# cannot be split, and 2**30 leaves are far more than any data fills.
MAX_DEPTH = 30
NO_DEPTH_LIMIT = -1

# The kernels take the thread count as a C int.
MAX_N_JOBS = 2**31 - 1


class _Missing:
    def __repr__(self):
        return "MISSING"


# "No value": a parameter that every model file has always had.
MISSING = _Missing()


@dataclass(frozen=True)
class Parameter:
    """One hyper-parameter of the estimators.

    Attributes
    ----------
    name : str
        The keyword of ``__init__``.
    kind : {"int", "real", "choice", "other"}
    default : object
        The ``__init__`` default.
    doc : str
        The description in the estimators' docstring (one paragraph).
    layers : tuple of str
        The parts of the library that read it (:data:`LAYERS`).
    low, high : number or None
        Bounds of an int or real parameter (None: unbounded).
    low_closed, high_closed : bool
        Whether the bounds themselves are allowed.
    choices : tuple of str
        The values of a choice parameter.
    type_doc : str or None
        The numpydoc type when it is not the kind's (``int``, ``float``,
        ``{"a", "b"}``).
    default_doc : str or None
        The default as the docstring shows it, when not its repr.
    since_format : int
        The model file format version from which files may hold it.
    before : object
        The value that reproduces a model file written before the parameter
        existed (``MISSING``: files have always had it).
    flags : tuple of str or None
        ``packboost train`` flags (default: ``--name-with-dashes``).
    cli_help : str or None
        The flag's help text, if any.
    cli_choices : tuple of str
        The string values the flag of an "other" parameter takes (empty: an
        int flag); the Python value may be more (a callable ``objective``).
    cli_json : bool
        The flag of an "other" parameter takes JSON (a list or a dict).
    """

    name: str
    kind: str
    default: object
    doc: str
    layers: tuple
    low: object = None
    high: object = None
    low_closed: bool = True
    high_closed: bool = True
    choices: tuple = ()
    type_doc: str | None = None
    default_doc: str | None = None
    since_format: int = 1
    before: object = MISSING
    flags: tuple | None = None
    cli_help: str | None = None
    cli_choices: tuple = ()
    cli_json: bool = False

    @property
    def cli_flags(self) -> tuple:
        return self.flags or ("--" + self.name.replace("_", "-"),)

    @property
    def rule(self) -> tuple:
        """``(kind, low, high, low closed, high closed)``, or the choices."""
        if self.kind == CHOICE:
            return self.choices
        return (self.kind, self.low, self.high, self.low_closed, self.high_closed)


def _real(name, default, doc, layers, low=0.0, high=None, **kwargs):
    return Parameter(name, REAL, default, doc, layers, low=low, high=high, **kwargs)


def _int(name, default, doc, layers, low, high=None, **kwargs):
    return Parameter(name, INT, default, doc, layers, low=low, high=high, **kwargs)


def _choice(name, choices, doc, layers, **kwargs):
    return Parameter(name, CHOICE, choices[0], doc, layers, choices=tuple(choices), **kwargs)


_FRACTION = {"low": 0.0, "high": 1.0, "low_closed": False}

SCHEMA: tuple = (
    _int("n_estimators", 100,
         "Boosting rounds. Each round grows a pack, so the model has "
         "``n_estimators * pack_size`` trees.",
         ("boosting",), low=0),
    _int("pack_size", 4,
         "Trees grown in lockstep per round, sharing each depth's feature subset; "
         "the round's update is their average (docs/packs.md §5).",
         ("boosting", "sampling", "grower"), low=1, high=MAX_PACK_SIZE),
    _int("max_depth", 6,
         "Depth of every tree (depth-wise growth). -1 means no limit, as in LightGBM: "
         "trees grow until ``min_samples_leaf``, ``min_child_weight`` or "
         f"``min_split_gain`` stop them, to the engine's deepest, {MAX_DEPTH}.",
         ("sampling", "grower"), low=NO_DEPTH_LIMIT, high=MAX_DEPTH),
    _real("learning_rate", 0.1,
          "Shrinkage of each round's update.",
          ("grower",), low_closed=False),
    Parameter("objective", OTHER, None,
              "The loss. None: the estimator's own (``\"squared_error\"`` for the regressor, "
              "``\"logistic\"`` for the classifier). The regressor also takes ``\"huber\"`` "
              "and ``\"quantile\"`` (see ``alpha``). A callable ``objective(y_true, y_pred) "
              "-> (grad, hess)`` (LightGBM's scikit-learn convention) gets the target and the "
              "raw scores as float64 arrays in the order of the rows of ``X`` and returns the "
              "per-row first and second derivatives of the loss in the raw score, unweighted "
              "(``sample_weight`` is applied by PackBoost); a classifier's ``y_true`` is 1.0 "
              "for ``classes_[1]``, else 0.0, and its raw scores are read as log-odds. A model "
              "trained with a callable starts from a raw score of 0, and its model file "
              "stores ``\"custom\"`` instead of the function (loaded, it predicts; to train "
              "further, pass the function again).",
              ("boosting",), type_doc='str, callable or None',
              cli_choices=("squared_error", "huber", "quantile", "logistic"),
              cli_help="the loss (default: squared_error, or logistic with --classifier)"),
    _real("alpha", 0.9,
          "Parameter of the objective, as in LightGBM: the quantile level of "
          "``objective=\"quantile\"`` (in (0, 1); 0.9 fits the 90th percentile), the "
          "``delta`` of ``objective=\"huber\"`` (residuals beyond it count linearly, so an "
          "outlier pulls a leaf by at most ``alpha`` per row). Unused otherwise.",
          ("boosting",), low_closed=False),
    _real("reg_lambda", 1.0,
          "L2 regularisation of leaf values (``v = -G / (H + reg_lambda)``).",
          ("grower", "split")),
    _real("reg_alpha", 0.0,
          "L1 regularisation of leaf values: ``v = -T(G) / (H + reg_lambda)`` with "
          "``T(G) = sign(G) max(|G| - reg_alpha, 0)``, so a leaf whose gradient sum is "
          "below ``reg_alpha`` is 0; the split gains (pooled and per era) use the same "
          "soft-thresholded sums, as in XGBoost and LightGBM.",
          ("grower", "split")),
    _int("min_samples_leaf", 20,
         "Minimum rows in each child of a split.",
         ("grower", "split"), low=1),
    _real("min_child_weight", 1e-3,
          "Minimum hessian sum in each child of a split.",
          ("grower", "split"), default_doc="1e-3"),
    _real("min_split_gain", 0.0,
          "A split must have a pooled Newton gain above this.",
          ("grower",)),
    _real("max_delta_step", 0.0,
          "If positive, leaf values are clipped to ``[-max_delta_step, max_delta_step]``.",
          ("grower",)),
    _int("max_bins", 255,
         "Maximum number of non-missing bins per feature (2 .. 65535); NaN gets its own "
         "extra bin. Integer features already in ``[0, max_bins)`` are used as bins "
         "directly.",
         ("binning",), low=2, high=65535),
    _real("layer_feature_fraction", 1.0,
          "Fraction of features drawn per depth, shared by the whole pack.",
          ("sampling",), **_FRACTION),
    _real("tree_feature_fraction", 0.5,
          "Fraction of the depth's features each tree of a pack may use.",
          ("sampling",), **_FRACTION),
    _choice("feature_sampling", ("depth", "pack"),
            "When ``layer_feature_fraction`` and ``tree_feature_fraction`` draw: "
            "``\"depth\"``, afresh at every depth; ``\"pack\"``, once per pack for all "
            "of its depths (as LightGBM's ``feature_fraction`` and XGBoost's "
            "``colsample_bytree`` keep a tree's features). With ``\"pack\"`` every depth "
            "scans its parent's features, so the CPU derives half of each depth's "
            "histograms by subtraction (docs/cpu-kernels.md §3): fewer passes over the rows "
            "at a feature fraction below 1.",
            ("sampling",), before="depth"),
    _real("row_subsample", 1.0,
          "Probability that a row is used by a tree (drawn per tree and round).",
          ("sampling",), **_FRACTION),
    _real("era_subsample", 0.75,
          "Fraction of eras each tree of a round is grown on.",
          ("sampling",), **_FRACTION),
    _choice("era_gain", ("realized", "newton"),
            "Per-era gain definition (docs/des.md §3).",
            ("split",)),
    _real("lambda_dro", 1.0,
          "Weight of the per-era gain standard deviation (risk) in DES; see ``era_std`` "
          "for which standard deviation.",
          ("split",)),
    _real("lambda_dir", 0.0,
          "Weight of the directional-agreement term in DES.",
          ("split",)),
    _choice("era_weighting", ("equal", "count"),
            "Era weights in DES: equal, or proportional to ``era_alpha + rows``.",
            ("split",)),
    _real("era_alpha", 0.0,
          "Additive smoothing of count era weights.",
          ("split",)),
    _real("dir_tanh_scale", 1.0,
          "Softness of the direction vote; 0 counts signs.",
          ("split",)),
    _choice("era_std", ("between", "total"),
            "The risk term of DES. ``\"between\"``: the standard deviation of the per-era "
            "gains beyond what sampling noise within eras explains (eras that disagree are "
            "penalised, small nodes are not), see ``csrc/des.h``. ``\"total\"``: the plain "
            "weighted standard deviation (docs/des.md §6.1), which also penalises noise and so "
            "stops trees early on weak signal. Only ``era_gain=\"realized\"`` is corrected; "
            "``\"newton\"`` always uses the total.",
            ("split",), before="total"),
    Parameter("monotone_constraints", OTHER, None,
              "Monotone constraints, one per feature: ``1`` the prediction never decreases "
              "when the feature grows (all others fixed), ``-1`` it never increases, ``0`` "
              "free; a list with one entry per feature, or a dict ``{feature name: -1/0/1}`` "
              "(others 0). Splits on a constrained feature must order their children's "
              "values and every node's value is kept within bounds passed down from its "
              "ancestors (XGBoost's and LightGBM's \"basic\" method, docs/des.md §14); "
              "missing values are not ordered. CPU only.",
              ("grower",), type_doc="list of int, dict or None", before=None,
              cli_json=True, cli_help="JSON list of -1/0/1 per feature, or an object "
              "{name: -1/0/1}"),
    Parameter("interaction_constraints", OTHER, None,
              "Feature sets that may interact: every root-to-leaf path of a tree uses "
              "features that all belong to one of the sets (indices or names). A feature "
              "in no set is a set of its own: the paths that use it use nothing else. "
              "``None`` or ``[]``: no constraint. CPU only.",
              ("grower",), type_doc="list of lists of int or str, or None", before=None,
              cli_json=True, cli_help="JSON list of lists of feature indices or names"),
    Parameter("categorical_features", OTHER, None,
              "Features to split on as categories (indices or names), besides the columns "
              "that are categorical by type (pandas ``category``, polars "
              "``Categorical``/``Enum``, Arrow dictionary), which always are. A listed "
              "column holds labels: integer (or other numeric) codes, or strings. The "
              "categories seen at fit are stored with the model; at predict an unseen "
              "category or NaN takes the split's missing side (docs/guide/categorical.md).",
              ("estimator",), type_doc="list of int or str, or None", before=None,
              cli_json=True, cli_help="JSON list of feature indices or names"),
    _int("max_cat_to_onehot", 4,
         "A categorical split of a node whose feature has at most this many categories "
         "with rows is one category against the rest; above it, the categories are ordered "
         "by their smoothed gradient ratio and the split is a prefix of that order (as "
         "LightGBM's ``max_cat_to_onehot``).",
         ("grower",), low=1, before=4),
    _int("max_cat_threshold", 32,
         "Most categories on the smaller side of a split by ordered categories "
         "(LightGBM's ``max_cat_threshold``).",
         ("grower",), low=1, before=32),
    _real("cat_smooth", 1000.0,
          "Smoothing of the ratio ``G / (H + cat_smooth)`` that orders a node's categories: "
          "categories with few rows are pulled towards 0, the middle of the order "
          "(LightGBM's ``cat_smooth``, whose default is 10: era data's category effects "
          "are small against their noise, and 1,000 measured better held out on every "
          "data set of docs/guide/categorical.md §2.0).",
          ("grower",), before=10.0),
    _int("min_data_per_group", 100,
         "Least rows (missing ones not counted) on each side of a split by ordered "
         "categories (LightGBM's ``min_data_per_group``).",
         ("grower",), low=1, before=100),
    _choice("cat_order", ("era", "pooled"),
            "The order whose prefixes are a node's candidate category sets (above "
            "``max_cat_to_onehot`` categories). ``\"pooled\"``: the ratio ``G / (H + "
            "cat_smooth)`` of the node's rows, all eras pooled (LightGBM's and XGBoost's "
            "order). ``\"era\"``: that ratio shrunk towards 0 by ``lambda_dro`` times the "
            "spread of the category's per-era means beyond their sampling noise, so that "
            "categories whose effect flips between eras sit in the middle of the order, "
            "one block that no prefix cuts (docs/guide/categorical.md §2).",
            ("grower",), before="pooled"),
    _int("cat_search_steps", 0,
         "Above ``max_cat_to_onehot`` categories: after the prefixes of ``cat_order``, "
         "at most this many moves of one category across the best set found (into it or "
         "out of it), each the move that raises the DES score most, while one does: so "
         "that a category whose effect flips between eras can leave a set the order put "
         "it in. Each move scores one candidate per category. 0: the prefixes only "
         "(LightGBM's candidates) (docs/guide/categorical.md §2.2).",
         ("grower",), low=0, before=0),
    Parameter("n_jobs", OTHER, None,
              "Threads; None or -1 uses every CPU this process may use.",
              ("estimator",), type_doc="int or None"),
    Parameter("random_state", OTHER, None,
              "Seed of every random draw. The model is a pure function of data, parameters "
              "and an int seed, whatever ``n_jobs``.",
              ("estimator", "sampling"),
              type_doc="int, numpy Generator/RandomState or None",
              flags=("--seed", "--random-state"), cli_help="seed of every random draw"),
    _choice("device", ("cpu", "cuda"),
            "Backend. ``\"cuda\"`` trains and predicts on the first NVIDIA GPU with "
            "libpackboost_cuda (builds with nvcc only; see ``packboost.cuda_available()``): "
            "the same trees as the CPU for the same seed. Without a usable GPU, fit and "
            "predict raise ``packboost.CudaError`` with CUDA's message.",
            ("device",)),
    _choice("importance_type", ("gain", "split", "des"),
            "What ``feature_importances_`` adds up over a feature's splits: their pooled "
            "Newton gain, their number, or their DES score (gain that held up across eras, "
            "docs/des.md §8).",
            ("importance",)),
)

PARAMETERS: dict = {parameter.name: parameter for parameter in SCHEMA}
DEFAULTS: dict = {parameter.name: parameter.default for parameter in SCHEMA}

# The parameters checked by bounds or choices, numbers first (the order in
# which fit checks them), as name -> Parameter.rule.
PARAMETER_RULES: dict = {
    parameter.name: parameter.rule
    for parameter in sorted((p for p in SCHEMA if p.kind != OTHER),
                            key=lambda p: p.kind == CHOICE)
}

# Parameters added after model files were first written, with the value that
# reproduces the training of a file that predates them (so that
# ``init_model=`` continues a model the way it was grown).
PARAMETERS_BEFORE_THEY_EXISTED: dict = {
    parameter.name: parameter.before for parameter in SCHEMA
    if parameter.before is not MISSING
}


def names(layer: str) -> tuple:
    """The parameters read by ``layer`` (one of :data:`LAYERS`), in schema order."""
    if layer not in LAYERS:
        raise ValueError(f"layer must be one of {LAYERS}, got {layer!r}")
    return tuple(parameter.name for parameter in SCHEMA if layer in parameter.layers)


# ----------------------------------------------------------------------------- checks


def check_parameter(name: str, value):
    """``value`` checked as ``fit`` checks parameter ``name``; ints and reals normalised.

    Raises TypeError or ValueError naming the parameter and the value.
    """
    parameter = PARAMETERS[name]
    if parameter.kind == CHOICE:
        if not isinstance(value, str) or value not in parameter.choices:
            raise ValueError(f"{name} must be one of {list(parameter.choices)}, got "
                             f"{_validation.show(value)}")
        return value
    if parameter.kind == OTHER:
        _OTHER_CHECKS[name](value)
        return value
    low, high = parameter.low, parameter.high
    low_closed, high_closed = parameter.low_closed, parameter.high_closed
    if parameter.kind == INT:
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
    if name == "max_depth" and value == NO_DEPTH_LIMIT:
        return MAX_DEPTH
    return value


def resolve_n_jobs(n_jobs) -> int:
    """Threads for ``n_jobs`` (None, -1: every CPU this process may use; see _threads)."""
    if (isinstance(n_jobs, numbers.Integral) and not isinstance(n_jobs, bool)
            and not -MAX_N_JOBS <= n_jobs <= MAX_N_JOBS):
        raise ValueError(f"n_jobs must be an int in [-{MAX_N_JOBS}, {MAX_N_JOBS}] or None, "
                         f"got {n_jobs!r}")
    return resolve_n_threads(n_jobs)


def resolve_seed(random_state) -> int:
    """An int seed from ``random_state`` (None draws a fresh one)."""
    if random_state is None:
        return int(np.random.SeedSequence().generate_state(1)[0])
    _check_random_state(random_state)
    if isinstance(random_state, numbers.Integral):
        return int(random_state)
    if isinstance(random_state, np.random.RandomState):
        return int(random_state.randint(np.iinfo(np.int32).max))
    return int(random_state.integers(np.iinfo(np.int32).max))


def _check_random_state(random_state):
    """A valid ``random_state`` without drawing from it."""
    if random_state is None:
        return
    if isinstance(random_state, numbers.Integral) and not isinstance(random_state, bool):
        if random_state < 0:
            raise ValueError(f"random_state must be non-negative, got {random_state}")
        return
    if isinstance(random_state, (np.random.RandomState, np.random.Generator)):
        return
    raise TypeError(
        f"random_state must be None, an int, a numpy Generator or RandomState, "
        f"got {random_state!r}"
    )


def _check_n_jobs(n_jobs):
    if n_jobs is not None:
        resolve_n_jobs(n_jobs)


def _check_objective(objective):
    """None, a built-in name or a callable (which estimator takes which: at fit)."""
    if objective is None or callable(objective):
        return
    if not isinstance(objective, str) or objective not in BUILT_IN_OBJECTIVES:
        raise ValueError(f"objective must be None, a callable (y_true, y_pred) -> (grad, hess) "
                         f"or one of {list(BUILT_IN_OBJECTIVES)}, got "
                         f"{_validation.show(objective)}")


_OTHER_CHECKS = {"n_jobs": _check_n_jobs, "random_state": _check_random_state,
                 "categorical_features": _categorical_check,
                 "objective": _check_objective,
                 "monotone_constraints": _constraints.check_monotone,
                 "interaction_constraints": _constraints.check_interactions}


def check_file_parameter(name: str, value):
    """A parameter read from a model file, checked as ``fit`` checks it.

    A file is JSON: ``random_state`` must be None or a non-negative int;
    ``objective`` is None, a built-in name or ``"custom"`` (a callable's model).
    """
    if name == "random_state":
        if value is not None and not (
                isinstance(value, int) and not isinstance(value, bool) and value >= 0):
            raise ValueError(f"random_state must be None or a non-negative int, got "
                             f"{value!r:.80}")
        return value
    if name == "objective" and value == CUSTOM_OBJECTIVE:
        return value  # trained with a callable, which files do not store
    return check_parameter(name, value)


# Parameter names of LightGBM and XGBoost (and their aliases) that users carry
# over, with what PackBoost calls the same idea (README "Coming from LightGBM").
_PER_TREE_FRACTION = (
    "layer_feature_fraction (drawn afresh at every depth; feature_sampling='pack' draws "
    "once per pack as LightGBM draws per tree: faster, but it lost held-out Sharpe with "
    "100 features, benchmarks/RESULTS.md)")
FOREIGN_NAMES = {
    "num_leaves": "max_depth (trees grow depth-wise: up to 2**max_depth leaves)",
    "max_leaves": "max_depth (trees grow depth-wise: up to 2**max_depth leaves)",
    "colsample_bytree": _PER_TREE_FRACTION,
    "feature_fraction": _PER_TREE_FRACTION,
    "colsample_bylevel": "layer_feature_fraction",
    "colsample_bynode": "tree_feature_fraction",
    "subsample": "row_subsample (or era_subsample for whole eras)",
    "bagging_fraction": "row_subsample (or era_subsample for whole eras)",
    "min_child_samples": "min_samples_leaf", "min_data_in_leaf": "min_samples_leaf",
    "min_sum_hessian_in_leaf": "min_child_weight",
    "lambda_l2": "reg_lambda", "reg_lambda_l2": "reg_lambda", "lambda": "reg_lambda",
    "lambda_l1": "reg_alpha", "reg_lambda_l1": "reg_alpha",
    "loss": "objective", "application": "objective", "objective_type": "objective",
    "min_gain_to_split": "min_split_gain", "gamma": "min_split_gain",
    "min_split_loss": "min_split_gain",
    "num_iterations": "n_estimators", "num_boost_round": "n_estimators",
    "n_iter": "n_estimators",
    "eta": "learning_rate", "shrinkage_rate": "learning_rate",
    "max_bin": "max_bins", "seed": "random_state", "num_threads": "n_jobs",
    "nthread": "n_jobs",
    "verbose": "fit(..., progress=False) or callbacks=[LogEvaluation(period)]",
    "verbosity": "fit(..., progress=False) or callbacks=[LogEvaluation(period)]",
    "silent": "fit(..., progress=False)",
}


def unknown_parameter_message(estimator: str, unknown: list) -> str:
    """The TypeError for keywords that are not parameters, naming PackBoost's equivalents."""
    parts = []
    for name in unknown:
        if name in FOREIGN_NAMES:
            parts.append(f"{name!r} is not a PackBoost parameter; use {FOREIGN_NAMES[name]}")
        else:
            parts.append(f"{name!r} is not a parameter")
    return (f"{estimator}: " + "; ".join(parts) + f". Its parameters: "
            f"{', '.join(parameter.name for parameter in SCHEMA)}")


# ----------------------------------------------------------------------------- consumers


def split_kernel_params(params: dict) -> dict:
    """The DES parameters the split kernels take (``_split.make_params``), from ``params``."""
    return {name: params[name] for name in names("split")}


_CONSTRAINTS = (_constraints.MONOTONE, _constraints.INTERACTIONS)
_CATEGORY_SPLITS = ("max_cat_to_onehot", "max_cat_threshold", "cat_smooth", "min_data_per_group",
                    "cat_order", "cat_search_steps")


def grower_settings(params: dict) -> dict:
    """The keyword arguments of :class:`packboost.grower.GrowerParams`, from ``params``.

    The grower's own parameters, the shrinkage folded into leaf values
    (``learning_rate / pack_size``) and the split kernels' dict.
    """
    settings = {name: params[name] for name in names("grower")
                if name not in ("pack_size", "learning_rate", *_CONSTRAINTS, *_CATEGORY_SPLITS)}
    # Read only where a feature is categorical: callers without any may leave them out.
    settings.update({name: params.get(name, DEFAULTS[name]) for name in _CATEGORY_SPLITS})
    # Resolved against X by the estimator (_constraints.resolve_for_fit);
    # absent: unconstrained.
    settings.update({name: params.get(name) for name in _CONSTRAINTS})
    settings["shrinkage"] = params["learning_rate"] / params["pack_size"]
    settings["split"] = split_kernel_params(params)
    return settings


def _json_flag(text: str):
    """The value of a JSON flag (argparse reports the ValueError as an invalid value)."""
    import json

    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(f"not JSON: {error}") from None


_json_flag.__name__ = "JSON"   # argparse names the type in its error


def add_cli_flags(group) -> None:
    """Add a flag per parameter to an argparse group, with ``dest="param_<name>"``.

    Bounded and choice parameters first (the order of :data:`PARAMETER_RULES`),
    then the others; every flag defaults to None (not given).
    """
    ordered = [PARAMETERS[name] for name in PARAMETER_RULES]
    ordered += [parameter for parameter in SCHEMA if parameter.kind == OTHER]
    for parameter in ordered:
        options = {"dest": f"param_{parameter.name}", "default": None}
        if parameter.kind == CHOICE:
            options["choices"] = parameter.choices
        elif parameter.cli_choices:
            options["choices"] = parameter.cli_choices
        elif parameter.cli_json:
            options["type"] = _json_flag
            options["metavar"] = "JSON"
        else:
            options["type"] = float if parameter.kind == REAL else int
            options["metavar"] = "FLOAT" if parameter.kind == REAL else "INT"
        if parameter.cli_help is not None:
            options["help"] = parameter.cli_help
        group.add_argument(*parameter.cli_flags, **options)


# ----------------------------------------------------------------------------- docs


def _type_doc(parameter: Parameter) -> str:
    if parameter.type_doc is not None:
        return parameter.type_doc
    if parameter.kind == CHOICE:
        return "{" + ", ".join(f'"{choice}"' for choice in parameter.choices) + "}"
    return "int" if parameter.kind == INT else "float"


def _default_doc(parameter: Parameter) -> str:
    if parameter.default_doc is not None:
        return parameter.default_doc
    if isinstance(parameter.default, str):
        return f'"{parameter.default}"'
    return repr(parameter.default)


def parameter_doc(indent: str = "    ", width: int = 88) -> str:
    """The numpydoc ``Parameters`` entries of every parameter (schema order)."""
    lines = [""]
    for parameter in SCHEMA:
        lines.append(f"{indent}{parameter.name} : {_type_doc(parameter)}, "
                     f"default={_default_doc(parameter)}")
        lines.extend(textwrap.wrap(parameter.doc, width=width,
                                   initial_indent=indent * 2, subsequent_indent=indent * 2,
                                   break_on_hyphens=False))
    return "\n".join(lines) + "\n"


# The Parameters section of both estimators' docstrings.
PARAMETER_DOC = parameter_doc()
