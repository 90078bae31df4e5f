"""Fitted estimators to and from model files (docs/model-file.md §5).

A model file (:mod:`packboost.model_file`, no pickle inside) holds:

* metadata: which estimator, its parameters, the feature count and names, the
  classes of a classifier, the bin mapper's settings, the pack size and the
  base score, the packboost version that wrote it;
* arrays: the node arrays of every tree (``node_<field>``, see
  :data:`packboost.ensemble.NODE_FIELDS`), ``tree_offsets``, the per-depth
  feature subsets (with ``round_layer_offsets``, which rounds they belong
  to; files without it are read as equal depths per round), the bin
  mapper's cut points; ``best_iteration`` (metadata) after early stopping.

Loading builds an estimator only from a fixed list of classes and checks every
array against the others before a prediction can walk it, so a corrupted or
forged file raises :class:`~packboost.model_file.ModelFileError` instead of
crashing inside a kernel.
"""

from __future__ import annotations

import os

import numpy as np

# PARAMETERS_BEFORE_THEY_EXISTED: parameters added after format v1 files were
# first written, with the value that reproduces the training of a file that
# predates them (so that ``init_model=`` continues a model the way it was grown).
from packboost._parameters import (
    MAX_PACK_SIZE,
    PARAMETERS,
    PARAMETERS_BEFORE_THEY_EXISTED,
    check_file_parameter,
)
from packboost._version import __version__
from packboost.binning import BinMapper
from packboost.ensemble import NODE_FIELDS, TreeEnsemble
from packboost.model_file import ModelFileError, read_model_file, write_model_file

MODEL_KIND = "packboost-model"


# The estimator classes a model file may name: the fixed list that loading
# builds from (sklearn.py registers its estimators with @register_estimator).
_ESTIMATORS: dict = {}


def register_estimator(cls):
    """Class decorator: model files may name ``cls`` (by its ``__name__``)."""
    _ESTIMATORS[cls.__name__] = cls
    return cls


def _estimator_classes():
    return dict(_ESTIMATORS)


def _json_params(estimator) -> dict:
    params = estimator.get_params()
    # A Generator/RandomState seed cannot be stored; it has done its work.
    if not (params["random_state"] is None or isinstance(params["random_state"], int)):
        params["random_state"] = None
    return params


def save_estimator(estimator, path) -> None:
    ensemble = estimator.ensemble_
    metadata = {
        "kind": MODEL_KIND,
        "estimator": type(estimator).__name__,
        "packboost_version": __version__,
        "params": _json_params(estimator),
        "n_features_in": int(estimator.n_features_in_),
        "feature_names": (None if getattr(estimator, "feature_names_in_", None) is None
                          else [str(name) for name in estimator.feature_names_in_]),
        "n_eras": int(estimator.n_eras_),
        "pack_size": int(ensemble.pack_size),
        "base_score": float(ensemble.base_score),
        "bin_mapper": estimator.bin_mapper_.to_metadata(),
        "best_iteration": getattr(estimator, "best_iteration_", None),
    }
    arrays = {f"node_{name}": values for name, values in ensemble.nodes.items()}
    arrays["tree_offsets"] = ensemble.tree_offsets
    arrays["layer_features"] = ensemble.layer_features
    arrays["layer_offsets"] = ensemble.layer_offsets
    if ensemble.round_layer_offsets is not None:
        arrays["round_layer_offsets"] = ensemble.round_layer_offsets
    arrays.update(estimator.bin_mapper_.to_arrays())
    if hasattr(estimator, "classes_"):
        classes = np.asarray(estimator.classes_)
        if classes.dtype.kind in "biuf":
            arrays["classes"] = classes
        else:
            metadata["classes"] = [str(label) for label in classes]
    write_model_file(path, metadata, arrays)


def load_model(path):
    """Load an estimator saved with ``save_model``.

    Returns a fitted :class:`~packboost.PackBoostRegressor` or
    :class:`~packboost.PackBoostClassifier`. Raises
    :class:`~packboost.model_file.ModelFileError` (a ``ValueError``) for a file
    that is not a valid PackBoost model.
    """
    if not isinstance(path, (str, bytes, os.PathLike)):
        raise TypeError(f"load_model takes the path of a model file (str or os.PathLike), got "
                        f"{type(path).__name__}")
    metadata, arrays = read_model_file(path)
    try:
        return _build_estimator(metadata, arrays)
    except ModelFileError as error:
        raise ModelFileError(f"{os.fsdecode(path)!r}: {error}") from None
    except (KeyError, TypeError, ValueError, IndexError, AttributeError,
            OverflowError) as error:
        # Everything the checks below did not name: still the file's fault.
        raise ModelFileError(f"{os.fsdecode(path)!r}: inconsistent model content: "
                             f"{error!r}") from None


def _entry(mapping: dict, key: str, kinds, where: str):
    """``mapping[key]``, which must be one of the JSON types ``kinds`` (bool is not an int)."""
    kinds = kinds if isinstance(kinds, tuple) else (kinds,)
    if key not in mapping:
        raise ModelFileError(f"{where} lacks {key!r}")
    value = mapping[key]
    if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
        raise ModelFileError(f"{where}[{key!r}] has the wrong type: {value!r:.80}")
    return value


def _count(metadata: dict, key: str, low: int, high: int | None = None) -> int:
    value = _entry(metadata, key, int, "model metadata")
    if value < low or (high is not None and value > high):
        raise ModelFileError(f"model metadata {key}={value} is out of range")
    return value


def _array(arrays: dict, name: str, dtype, ndim: int = 1) -> np.ndarray:
    if name not in arrays:
        raise ModelFileError(f"model file lacks the array {name!r}")
    values = arrays[name]
    if values.dtype.kind != np.dtype(dtype).kind or values.ndim != ndim:
        raise ModelFileError(f"{name} must be a {ndim}-D {np.dtype(dtype)} array, got "
                             f"{values.ndim}-D {values.dtype}")
    return np.ascontiguousarray(values, dtype=dtype)


def _checked_params(estimator, params: dict) -> dict:
    """The estimator parameters of a file, each checked as ``fit`` checks it.

    A file may come from anyone: a forged ``n_jobs`` or ``max_bins`` must not
    reach a kernel. Unknown keys (parameters of another version) are ignored;
    parameters newer than the file get the value that reproduces how it was
    trained (``PARAMETERS_BEFORE_THEY_EXISTED``), not today's default.
    """
    valid = set(estimator.get_params())
    checked = {}
    for key, value in params.items():
        if key not in valid:
            continue
        try:
            if key in PARAMETERS:
                check_file_parameter(key, value)
        except (TypeError, ValueError) as error:
            raise ModelFileError(f"invalid parameter in model file: {error}") from None
        checked[key] = value
    for key, value in PARAMETERS_BEFORE_THEY_EXISTED.items():
        if key in valid:
            checked.setdefault(key, value)
    return checked


def _build_estimator(metadata: dict, arrays: dict):
    if metadata.get("kind") != MODEL_KIND:
        raise ModelFileError("the file is a PackBoost container but not a model "
                             f"(kind {metadata.get('kind')!r:.80})")
    classes = _estimator_classes()
    name = _entry(metadata, "estimator", str, "model metadata")
    if name not in classes:
        raise ModelFileError(f"unknown estimator {name!r:.80} in model file")
    estimator = classes[name]()
    estimator.set_params(**_checked_params(
        estimator, _entry(metadata, "params", dict, "model metadata")))

    nodes = {}
    for field, dtype in NODE_FIELDS.items():
        values = arrays.get(f"node_{field}")
        if values is None:
            raise ModelFileError(f"model file lacks the array 'node_{field}'")
        if values.dtype != dtype or values.ndim != 1:
            raise ModelFileError(f"node_{field} must be a 1-D {dtype} array")
        nodes[field] = values
    n_nodes = len(nodes["feature"])
    if any(len(values) != n_nodes for values in nodes.values()):
        raise ModelFileError("node arrays have different lengths")
    tree_offsets = _array(arrays, "tree_offsets", np.int64)
    pack_size = _count(metadata, "pack_size", 1, MAX_PACK_SIZE)
    n_features = _count(metadata, "n_features_in", 1)
    _check_trees(nodes, tree_offsets, n_features, pack_size)

    layer_features = _array(arrays, "layer_features", np.int32)
    layer_offsets = _array(arrays, "layer_offsets", np.int64)
    if (len(layer_offsets) < 1 or layer_offsets[0] != 0
            or layer_offsets[-1] != len(layer_features) or not _non_decreasing(layer_offsets)):
        raise ModelFileError("layer_offsets do not partition layer_features")
    if np.any(layer_features < 0) or np.any(layer_features >= n_features):
        raise ModelFileError("layer_features name a feature that does not exist")
    n_rounds = (len(tree_offsets) - 1) // pack_size
    round_layer_offsets = None
    if "round_layer_offsets" in arrays:  # absent from files written before it existed
        round_layer_offsets = _array(arrays, "round_layer_offsets", np.int64)
        if (len(round_layer_offsets) != n_rounds + 1
                or round_layer_offsets[0] != 0
                or round_layer_offsets[-1] != len(layer_offsets) - 1
                or not _non_decreasing(round_layer_offsets)):
            raise ModelFileError("round_layer_offsets do not match the rounds and layers")
    elif n_rounds and (len(layer_offsets) - 1) % n_rounds:
        raise ModelFileError("layer_offsets do not hold the same number of depths per round")

    try:
        mapper = BinMapper.from_arrays(_entry(metadata, "bin_mapper", dict, "model metadata"),
                                       arrays)
    except (TypeError, ValueError) as error:
        if isinstance(error, ModelFileError):
            raise
        raise ModelFileError(f"invalid bin mapper: {error}") from None
    if len(mapper.n_bins_) != n_features:
        raise ModelFileError("bin mapper and model disagree on the number of features")
    base_score = _entry(metadata, "base_score", (int, float), "model metadata")
    if not np.isfinite(base_score):
        raise ModelFileError(f"base_score must be finite, got {base_score!r}")
    estimator.ensemble_ = TreeEnsemble(
        nodes=nodes, tree_offsets=tree_offsets, pack_size=pack_size,
        base_score=float(base_score), layer_features=layer_features,
        layer_offsets=layer_offsets, round_layer_offsets=round_layer_offsets)
    estimator.bin_mapper_ = mapper
    estimator.n_features_in_ = n_features
    names = metadata.get("feature_names")
    if names is not None:
        if (not isinstance(names, list) or len(names) != n_features
                or not all(isinstance(item, str) for item in names)):
            raise ModelFileError(f"feature_names must be {n_features} strings")
        estimator.feature_names_in_ = np.asarray(names, dtype=object)
    estimator.n_eras_ = _count(metadata, "n_eras", 1)
    estimator.n_iter_ = estimator.ensemble_.n_rounds
    estimator.evals_result_ = {}
    best_iteration = metadata.get("best_iteration")
    if best_iteration is not None and not (
            type(best_iteration) is int and 0 <= best_iteration <= estimator.n_iter_):
        raise ModelFileError(f"best_iteration {best_iteration!r:.80} is not a round of the "
                             "model")
    estimator.best_iteration_ = best_iteration
    estimator.best_score_ = {}
    if name == "PackBoostClassifier":
        if "classes" in arrays:
            classes_ = arrays["classes"]
            if classes_.ndim != 1 or (classes_.dtype.kind == "f"
                                      and not np.isfinite(classes_).all()):
                raise ModelFileError("classes must be a 1-D array of finite labels")
        else:
            labels = _entry(metadata, "classes", list, "model metadata")
            if not all(isinstance(label, str) for label in labels):
                raise ModelFileError("classes must be strings or a numeric array")
            classes_ = np.asarray(labels, dtype=object)
        if len(classes_) != 2 or classes_[0] == classes_[1]:
            raise ModelFileError("a classifier needs exactly 2 distinct classes")
        estimator.classes_ = classes_
    return estimator


def _non_decreasing(offsets: np.ndarray) -> bool:
    """Offsets that never go back. Compared, not subtracted: ``np.diff`` of forged
    int64 values wraps around (0, 7, -2**63 has the "positive" step 2**63 - 7),
    and NumPy 2.4's ``np.repeat`` with such counts writes out of bounds."""
    return bool(np.all(offsets[1:] >= offsets[:-1]))


def _check_trees(nodes, tree_offsets, n_features, pack_size):
    """Every child index must point forward inside its own tree, so that a
    prediction walk always ends at a leaf; features must exist."""
    n_nodes = len(nodes["feature"])
    if pack_size < 1 or tree_offsets.ndim != 1 or len(tree_offsets) < 1:
        raise ModelFileError("bad tree layout")
    if (tree_offsets[0] != 0 or tree_offsets[-1] != n_nodes
            or not np.all(tree_offsets[1:] > tree_offsets[:-1])):
        raise ModelFileError("tree_offsets do not partition the nodes")
    if (len(tree_offsets) - 1) % pack_size:
        raise ModelFileError("the number of trees is not a multiple of pack_size")
    feature = nodes["feature"]
    internal = feature >= 0
    if np.any(feature[internal] >= n_features) or np.any(feature < -1):
        raise ModelFileError("a split refers to a feature that does not exist")
    tree_of_node = np.repeat(np.arange(len(tree_offsets) - 1), np.diff(tree_offsets))
    tree_end = tree_offsets[1:][tree_of_node]
    index = np.arange(n_nodes)
    for child in (nodes["left_child"], nodes["right_child"]):
        c = child[internal]
        if np.any(c <= index[internal]) or np.any(c >= tree_end[internal]):
            raise ModelFileError("a child index points outside its tree or backwards")
    if not np.all(np.isfinite(nodes["value"])):
        raise ModelFileError("leaf values must be finite")
    if np.any(np.isnan(nodes["threshold"][internal])):
        raise ModelFileError("split thresholds must not be NaN")
