"""The parameter schema (packboost/_parameters.py) is the one source of every hyper-parameter.

The estimators' signatures, their docstrings, the ``packboost train`` flags,
validation, model file checks and the settings handed to the grower and the
split kernels must all agree with it.
"""

import argparse
import inspect
import re
from pathlib import Path

import numpy as np
import pytest

from packboost import PackBoostClassifier, PackBoostRegressor, _parameters, model_io
from packboost._parameters import (
    CHOICE,
    INT,
    LAYERS,
    MAX_PACK_SIZE,
    OTHER,
    PARAMETER_DOC,
    PARAMETER_RULES,
    PARAMETERS,
    REAL,
    SCHEMA,
    check_file_parameter,
    check_parameter,
    grower_settings,
    names,
    split_kernel_params,
)
from packboost.booster import grower_params
from packboost.cli import _build_parser

ESTIMATORS = [PackBoostRegressor, PackBoostClassifier]
ROOT = Path(__file__).resolve().parents[1]


# ----------------------------------------------------------------------------- the schema itself


def test_every_parameter_is_well_formed():
    assert len(PARAMETERS) == len(SCHEMA)
    for parameter in SCHEMA:
        assert parameter.kind in (INT, REAL, CHOICE, OTHER), parameter.name
        assert parameter.layers and set(parameter.layers) <= set(LAYERS), parameter.name
        assert parameter.doc.strip() and "\n" not in parameter.doc, parameter.name
        assert parameter.since_format >= 1
        if parameter.kind == CHOICE:
            assert parameter.choices and parameter.default in parameter.choices
        elif parameter.kind in (INT, REAL):
            check_parameter(parameter.name, parameter.default)  # the default is valid
        if parameter.before is not _parameters.MISSING:
            check_parameter(parameter.name, parameter.before)


def test_rules_are_the_bounded_and_choice_parameters_numbers_first():
    bounded = [p.name for p in SCHEMA if p.kind in (INT, REAL)]
    choices = [p.name for p in SCHEMA if p.kind == CHOICE]
    assert list(PARAMETER_RULES) == bounded + choices
    for name, rule in PARAMETER_RULES.items():
        parameter = PARAMETERS[name]
        expected = parameter.choices if parameter.kind == CHOICE else (
            parameter.kind, parameter.low, parameter.high, parameter.low_closed,
            parameter.high_closed)
        assert rule == expected


def test_pack_size_bound_is_max_pack_size():
    assert PARAMETERS["pack_size"].high == MAX_PACK_SIZE == 64
    from packboost import sklearn

    assert sklearn.MAX_PACK_SIZE == MAX_PACK_SIZE
    assert sklearn._PARAMETER_RULES is PARAMETER_RULES


def test_max_pack_size_copies_agree():
    """The kernels' copies (Cython, C) of MAX_PACK_SIZE, where this checkout has them."""
    from packboost import _histogram

    if hasattr(_histogram, "MAX_PACK_SIZE"):
        assert _histogram.MAX_PACK_SIZE == MAX_PACK_SIZE
    copies = {"src/packboost/_histogram.pxd": r"^\s*MAX_PACK_SIZE\s*=\s*(\d+)",
              "csrc/packboost_cuda.h": r"^#define\s+PBC_MAX_PACK_SIZE\s+(\d+)"}
    found = 0
    for path, pattern in copies.items():
        if (ROOT / path).exists():
            match = re.search(pattern, (ROOT / path).read_text(), flags=re.M)
            assert match, path
            assert int(match.group(1)) == MAX_PACK_SIZE, path
            found += 1
    if not found:
        pytest.skip("no source checkout beside the tests")
    try:
        from packboost import _cuda
    except ImportError:
        return
    assert _cuda.MAX_PACK_SIZE == MAX_PACK_SIZE


def test_layers():
    assert names("split") == tuple(p.name for p in SCHEMA if "split" in p.layers)
    assert set(names("split")) == {"reg_lambda", "reg_alpha", "era_gain", "era_weighting",
                                   "era_alpha",
                                   "lambda_dro", "lambda_dir", "dir_tanh_scale", "era_std",
                                   "min_samples_leaf", "min_child_weight"}
    assert set(names("sampling")) >= {"pack_size", "max_depth", "layer_feature_fraction",
                                      "tree_feature_fraction", "row_subsample",
                                      "era_subsample"}
    assert names("binning") == ("max_bins",)
    assert names("device") == ("device",)
    assert names("importance") == ("importance_type",)
    with pytest.raises(ValueError, match="layer"):
        names("nowhere")


# ----------------------------------------------------------------------------- estimators


@pytest.mark.parametrize("estimator", ESTIMATORS)
def test_signature_matches_the_schema(estimator):
    signature = inspect.signature(estimator.__init__)
    parameters = [p for p in signature.parameters.values() if p.name != "self"]
    assert [p.name for p in parameters] == [p.name for p in SCHEMA]
    for parameter in parameters:
        assert parameter.kind is inspect.Parameter.KEYWORD_ONLY
        default = PARAMETERS[parameter.name].default
        assert parameter.default == default and type(parameter.default) is type(default), \
            parameter.name
    assert estimator().get_params() == {p.name: p.default for p in SCHEMA}


@pytest.mark.parametrize("estimator", ESTIMATORS)
def test_docstring_is_generated_from_the_schema(estimator):
    assert PARAMETER_DOC in estimator.__doc__
    flat = " ".join(estimator.__doc__.split())
    for parameter in SCHEMA:
        assert f"{parameter.name} : " in estimator.__doc__
        assert " ".join(parameter.doc.split()) in flat, parameter.name
    documented = re.findall(r"^    (\w+) : ", PARAMETER_DOC, flags=re.M)
    assert documented == [p.name for p in SCHEMA]


def test_validated_params_cover_the_rules_and_the_seed():
    params = PackBoostRegressor(random_state=3)._validated_params()
    assert list(params) == [*PARAMETER_RULES, "objective", "random_state",
                            "monotone_constraints", "interaction_constraints",
                            "categorical_features"]
    assert params["random_state"] == 3
    assert params["objective"] == "squared_error"  # None: the estimator's own
    assert PackBoostClassifier()._validated_params()["objective"] == "logistic"


# ----------------------------------------------------------------------------- bounds


def _edge_cases(parameter):
    """(value, accepted?) pairs at and beyond every bound of ``parameter``."""
    cases = []
    if parameter.kind == CHOICE:
        cases += [(choice, True) for choice in parameter.choices]
        cases += [("no-such-choice", False), (None, False), (1, False)]
        return cases
    if parameter.kind == OTHER:
        return {
            "n_jobs": [(None, True), (-1, True), (1, True), (0, False), ("all", False),
                       (1.5, False), (2**31, False), (True, False)],
            "objective": [(None, True), ("squared_error", True), ("huber", True),
                          ("quantile", True), ("logistic", True), (len, True),
                          ("l2", False), ("custom", False), (1, False)],
            "monotone_constraints": [(None, True), ([1, 0, -1], True), ((0,), True),
                                     ({"age": 1}, True), (np.array([1, -1]), True),
                                     ([2], False), ([0.5], False), ([True], False),
                                     ({1: 1}, False), ("increasing", False),
                                     (np.ones((2, 2), int), False)],
            "interaction_constraints": [(None, True), ([], True), ([[0, 1], ["a"]], True),
                                        ([[]], False), ([0, 1], False), ([[1.5]], False),
                                        ([[-1]], False), ("a", False)],
            "categorical_features": [(None, True), ([], True), ([0, "sector"], True),
                                     ((2,), True), ("sector", False), ([1.5], False),
                                     ([True], False), ([-1], False), ([0, 0], False)],
            "random_state": [(None, True), (0, True), (7, True),
                             (np.random.default_rng(0), True),
                             (np.random.RandomState(0), True), (-1, False),
                             ("seed", False), (True, False)],
        }[parameter.name]
    step = 1 if parameter.kind == INT else 1e-9
    cases += [("1", False), (True, False), (None, False)]
    if parameter.kind == INT:
        cases.append((2.5, False))
    else:
        cases += [(float("nan"), False), (float("inf"), False), (-float("inf"), False)]
    if parameter.low is not None:
        cases += [(parameter.low, parameter.low_closed), (parameter.low - step, False),
                  (parameter.low + step, True)]
    if parameter.high is not None:
        cases += [(parameter.high, parameter.high_closed), (parameter.high + step, False),
                  (parameter.high - step, True)]
    return cases


EDGE_CASES = [(parameter.name, value, accepted) for parameter in SCHEMA
              for value, accepted in _edge_cases(parameter)]


@pytest.mark.parametrize("name, value, accepted", EDGE_CASES,
                         ids=[f"{name}={value!r}" for name, value, _ in EDGE_CASES])
def test_every_parameter_is_accepted_or_rejected_per_its_bounds(name, value, accepted):
    if accepted:
        check_parameter(name, value)
        if name in PARAMETER_RULES:
            # fit checks it the same way (the estimator's own validation)
            PackBoostRegressor(**{name: value})._validated_params()
    else:
        with pytest.raises((TypeError, ValueError)) as info:
            check_parameter(name, value)
        assert name in str(info.value)


def test_file_parameters_are_checked_like_fit_and_random_state_as_json():
    assert check_file_parameter("max_depth", 3) == 3
    assert check_file_parameter("random_state", 4) == 4
    with pytest.raises(ValueError, match="random_state"):
        check_file_parameter("random_state", -1)
    with pytest.raises(ValueError, match="random_state"):
        check_file_parameter("random_state", "x")
    with pytest.raises(ValueError, match="pack_size"):
        check_file_parameter("pack_size", MAX_PACK_SIZE + 1)


def test_older_files_get_the_schema_values():
    assert _parameters.PARAMETERS_BEFORE_THEY_EXISTED == {
        "era_std": "total", "feature_sampling": "depth", "monotone_constraints": None,
        "interaction_constraints": None, "categorical_features": None,
        "max_cat_to_onehot": 4, "max_cat_threshold": 32, "cat_smooth": 10.0,
        "min_data_per_group": 100, "cat_order": "pooled", "cat_search_steps": 0}
    assert model_io.PARAMETERS_BEFORE_THEY_EXISTED is _parameters.PARAMETERS_BEFORE_THEY_EXISTED
    checked = model_io._checked_params(PackBoostRegressor(), {})
    assert checked["era_std"] == "total" and checked["feature_sampling"] == "depth"


# ----------------------------------------------------------------------------- consumers


def test_split_kernel_params_and_grower_params():
    params = PackBoostRegressor(pack_size=5, learning_rate=0.2, era_std="total",
                                reg_lambda=2.0)._validated_params()
    split = split_kernel_params(params)
    assert list(split) == list(names("split"))
    assert split == {name: params[name] for name in names("split")}
    settings = grower_params(params)
    assert settings.split == split
    assert settings.shrinkage == pytest.approx(0.2 / 5)
    for key in ("max_depth", "reg_lambda", "reg_alpha", "min_samples_leaf", "min_child_weight",
                "min_split_gain", "max_delta_step"):
        assert getattr(settings, key) == params[key]
    expected = grower_settings(params)
    assert {key: getattr(settings, key) for key in expected} == expected


@pytest.mark.parametrize("overrides", [{}, dict(era_gain="newton", era_weighting="count",
                                                era_std="total", min_samples_leaf=0)])
def test_the_split_kernels_receive_the_schema_values(overrides):
    """What the estimators validate is what the C struct of both backends
    (csrc/split_params.h, filled once by _split_params.pxd) holds: the schema
    defaults included, no kernel-side default in between."""
    from packboost import _split

    params = {**PackBoostRegressor()._validated_params(), **overrides}
    received = _split.split_params_as_dict(split_kernel_params(params))
    assert set(received) == set(names("split")) - {"era_std"} | {"era_std_between"}
    for name in ("reg_lambda", "reg_alpha", "era_alpha", "lambda_dro", "lambda_dir",
                 "dir_tanh_scale", "min_child_weight"):
        assert received[name] == params[name], name
    assert received["min_samples_leaf"] == max(1, params["min_samples_leaf"])
    assert received["era_gain"] == _split.ERA_GAIN_CODES[params["era_gain"]]
    assert received["era_weighting"] == _split.ERA_WEIGHTING_CODES[params["era_weighting"]]
    assert received["era_std_between"] == (params["era_std"] == "between")
    if not overrides:  # the defaults themselves
        defaults = {parameter.name: parameter.default for parameter in _parameters.SCHEMA}
        assert params["era_std"] == defaults["era_std"] == "between"
        assert received["lambda_dro"] == defaults["lambda_dro"]


def test_the_split_kernels_have_no_defaults_of_their_own():
    from packboost import _split

    params = split_kernel_params(PackBoostRegressor()._validated_params())
    for name in params:
        with pytest.raises(KeyError, match=name):
            _split.split_params_as_dict({k: v for k, v in params.items() if k != name})
    with pytest.raises(ValueError, match="era_std"):
        _split.split_params_as_dict({**params, "era_std": "pooled"})


# ----------------------------------------------------------------------------- CLI


def _train_flags():
    parser = _build_parser()
    subparsers = next(action for action in parser._actions
                      if isinstance(action, argparse._SubParsersAction))
    train = subparsers.choices["train"]
    return {action.dest: action for action in train._actions if action.dest.startswith("param_")}


def test_cli_flags_are_the_schema():
    flags = _train_flags()
    assert list(flags) == [f"param_{name}" for name in PARAMETER_RULES] + [
        f"param_{p.name}" for p in SCHEMA if p.kind == OTHER]
    for parameter in SCHEMA:
        action = flags[f"param_{parameter.name}"]
        assert action.option_strings == list(parameter.cli_flags)
        assert action.default is None
        if parameter.kind == CHOICE:
            assert tuple(action.choices) == parameter.choices
        elif parameter.cli_choices:
            assert parameter.kind == OTHER
            assert tuple(action.choices) == parameter.cli_choices
        elif parameter.cli_json:
            assert parameter.kind == OTHER
            assert action.type("[1, -1]") == [1, -1] and action.metavar == "JSON"
        else:
            assert action.type is (float if parameter.kind == REAL else int)
    assert flags["param_random_state"].option_strings == ["--seed", "--random-state"]
    assert flags["param_n_jobs"].option_strings == ["--n-jobs"]


def test_cli_flags_parse_to_the_parameters():
    parser = _build_parser()
    args = parser.parse_args(["train", "data.csv", "--max-depth", "3", "--era-std", "total",
                              "--learning-rate", "0.05", "--seed", "1"])
    assert (args.param_max_depth, args.param_era_std, args.param_learning_rate,
            args.param_random_state) == (3, "total", 0.05, 1)


# ----------------------------------------------------------------------------- foreign names


@pytest.mark.parametrize("estimator", [PackBoostRegressor, PackBoostClassifier])
@pytest.mark.parametrize("name, equivalent", [
    ("num_leaves", "max_depth"),
    ("colsample_bytree", "layer_feature_fraction (drawn afresh at every depth"),
    ("verbose", "fit(..., progress=False)"),
    ("subsample", "row_subsample")])
def test_lightgbm_names_get_their_packboost_equivalent(estimator, name, equivalent):
    with pytest.raises(TypeError, match=f"'{name}' is not a PackBoost parameter; use "
                                        f"{re.escape(equivalent)}"):
        estimator(**{name: 1})


def test_unknown_names_list_the_parameters_and_clone_still_works():
    with pytest.raises(TypeError, match="'depth' is not a parameter.*max_depth"):
        PackBoostRegressor(depth=3)
    assert list(inspect.signature(PackBoostRegressor).parameters) == [
        parameter.name for parameter in _parameters.SCHEMA]
    assert set(_parameters.FOREIGN_NAMES).isdisjoint(_parameters.PARAMETERS)
    sklearn_base = pytest.importorskip("sklearn.base")
    model = PackBoostRegressor(max_depth=3)
    assert sklearn_base.clone(model).get_params() == model.get_params()


def test_a_feature_equal_to_the_target_warns():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(2_000, 4))
    y = rng.normal(size=2_000)
    X[:, 2] = y
    with pytest.warns(UserWarning, match="equal to the target y.*column 2"):
        PackBoostRegressor(n_estimators=1, max_depth=1).fit(X, y)
    X[-1, 2] += 1.0  # equal on the probe rows only: not the target
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        PackBoostRegressor(n_estimators=1, max_depth=1).fit(X, y)
