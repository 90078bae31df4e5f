"""Fitted estimators to and from model files (docs/model-file.md §5).

A model file (:mod:`packboost.model_file`, no pickle inside) holds:

* metadata: which estimator, its parameters, the feature count and names, the
  classes of a classifier, the bin mapper's settings, the pack size and the
  base score, the packboost version that wrote it;
* arrays: the node arrays of every tree (``node_<field>``, see
  :data:`packboost.ensemble.NODE_FIELDS`), ``tree_offsets``, the per-depth
  feature subsets (with ``round_layer_offsets``, which rounds they belong
  to; files without it are read as equal depths per round), the bin
  mapper's cut points; ``best_iteration`` (metadata) after early stopping;
* for a model of several outputs (targets or classes): ``n_outputs`` and
  ``base_score`` as a list, one per output. The tree -> output map is the
  layout (:class:`~packboost.ensemble.TreeEnsemble`: each round holds one
  pack per output, output-major), so ``n_outputs`` is all it takes; files
  without it have one output, and a packboost that predates it refuses such a
  file (its ``base_score`` is not a number) instead of misreading it.

Loading builds an estimator only from a fixed list of classes and checks every
array against the others before a prediction can walk it, so a corrupted or
forged file raises :class:`~packboost.model_file.ModelFileError` instead of
crashing inside a kernel.

A file holds the *model*, never the resources to run it: the run-time
parameters (:data:`RUNTIME_PARAMETERS`: ``n_jobs``, ``device``) are not saved,
and ignored in files that have them; a loaded model runs with the caller's
(``load_model(path, n_jobs=..., device=...)``, default: every CPU, the CPU
backend), as XGBoost leaves ``nthread`` and ``device`` out of its model files.

A classifier's labels come back with their dtype and values (``classes_dtype``
in the metadata): bool, integers and floats of any width, datetime64 and
timedelta64 as the array ``classes``; str and bytes (``U``/``S`` dtypes) and
object arrays of one of str, bytes, int, float or bool as the metadata list
``classes`` (bytes as Latin-1 text).  Other labels (dates, tuples, mixed
types, complex numbers) are refused by ``save_model`` with a ``TypeError``
naming their type.
"""

from __future__ import annotations

import os
import re
import warnings

import numpy as np

from packboost import _constraints

# PARAMETERS_BEFORE_THEY_EXISTED: parameters added after format v1 files were
# first written, with the value that reproduces the training of a file that
# predates them (so that ``init_model=`` continues a model the way it was grown).
from packboost._parameters import (
    MAX_PACK_SIZE,
    PARAMETERS,
    PARAMETERS_BEFORE_THEY_EXISTED,
    check_file_parameter,
    check_parameter,
)
from packboost._version import __version__
from packboost.binning import BinMapper
from packboost.ensemble import NODE_FIELDS, TreeEnsemble
from packboost.model_file import ModelFileError, read_model_file, write_model_file
from packboost.objectives import CUSTOM as CUSTOM_OBJECTIVE

MODEL_KIND = "packboost-model"

# Outputs a model file may declare (targets or classes): bounds what a forged
# file makes ``predict`` allocate per row.
MAX_OUTPUTS = 1 << 16

# Parameters that say how to run a model on this machine, not what the model is:
# never written to a file, ignored in files that have them (a file must not pick
# the threads or the device of whoever loads it).
RUNTIME_PARAMETERS = ("n_jobs", "device")


# The estimator classes a model file may name: the fixed list that loading
# builds from (sklearn.py registers its estimators with @register_estimator).
_ESTIMATORS: dict = {}


def register_estimator(cls):
    """Class decorator: model files may name ``cls`` (by its ``__name__``)."""
    _ESTIMATORS[cls.__name__] = cls
    return cls


def _estimator_classes():
    # The estimators register when packboost.sklearn is imported, which
    # ``import packboost`` leaves for first use (it imports scikit-learn).
    import packboost.sklearn  # noqa: F401

    return dict(_ESTIMATORS)


def _json_params(estimator) -> dict:
    params = {key: value for key, value in estimator.get_params().items()
              if key not in RUNTIME_PARAMETERS}
    # A callable objective is code: never stored. The file says "custom"; the
    # model predicts from its trees alone (a raw score needs no loss).
    if callable(params["objective"]):
        params["objective"] = CUSTOM_OBJECTIVE
    # A Generator/RandomState seed cannot be stored; it has done its work.
    if not (params["random_state"] is None or isinstance(params["random_state"], int)):
        params["random_state"] = None
    # Tuples and NumPy arrays of constraints as JSON lists.
    for name in (_constraints.MONOTONE, _constraints.INTERACTIONS):
        params[name] = _constraints.json_value(name, params[name])
    if params.get("categorical_features") is not None:
        params["categorical_features"] = [
            entry if isinstance(entry, str) else int(entry)
            for entry in params["categorical_features"]]
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
        "era_column": getattr(estimator, "era_column_", None),
        "pack_size": int(ensemble.pack_size),
        "base_score": (float(ensemble.base_score) if ensemble.n_outputs == 1
                       else [float(value) for value in ensemble.base_scores]),
        "bin_mapper": estimator.bin_mapper_.to_metadata(),
        "best_iteration": getattr(estimator, "best_iteration_", None),
    }
    if ensemble.n_outputs > 1:
        metadata["n_outputs"] = int(ensemble.n_outputs)
    if getattr(estimator, "target_names_", None) is not None:
        metadata["target_names"] = [str(name) for name in estimator.target_names_]
    if callable(estimator.get_params()["objective"]):
        function = estimator.get_params()["objective"]
        metadata["custom_objective"] = (
            f"trained with the objective function "
            f"{getattr(function, '__qualname__', type(function).__name__)!s:.200}, which "
            "model files do not store: the model predicts; to train it further, pass the "
            "function again (set_params(objective=...))")
    arrays = {f"node_{name}": values for name, values in ensemble.nodes.items()}
    arrays["tree_offsets"] = ensemble.tree_offsets
    arrays["layer_features"] = ensemble.layer_features
    arrays["layer_offsets"] = ensemble.layer_offsets
    if ensemble.round_layer_offsets is not None:
        arrays["round_layer_offsets"] = ensemble.round_layer_offsets
    arrays.update(estimator.bin_mapper_.to_arrays())
    if hasattr(estimator, "classes_"):
        _save_classes(np.asarray(estimator.classes_), metadata, arrays)
    encoder = getattr(estimator, "category_encoder_", None)
    if encoder is not None:
        metadata["categorical"] = encoder.to_json()
    write_model_file(path, metadata, arrays)


def _category_sets(metadata, arrays, nodes, mapper, n_features):
    """The categorical features of a model file (None without any), its
    category sets put in ``nodes``, after checking that they describe this
    model: one bin per category, set splits (threshold_bin -1) only on
    categorical features and threshold splits only on the others, and no set
    holding a code beyond its feature's categories (a forged set would send
    unseen categories, read as codes past the list, anywhere)."""
    from packboost._categories import CategoryEncoder
    from packboost.ensemble import CATEGORY_WORDS

    words = arrays.get(f"node_{CATEGORY_WORDS}")
    if "categorical" not in metadata:
        if words is not None:
            raise ModelFileError("model file has category sets but no categorical features")
        if np.any(nodes["threshold_bin"][nodes["feature"] >= 0] < 0):
            raise ModelFileError("split bin thresholds must not be negative")
        return None
    try:
        encoder = CategoryEncoder.from_json(metadata["categorical"])
    except (TypeError, ValueError) as error:
        raise ModelFileError(f"invalid categorical features: {error}") from None
    if encoder.n_features != n_features:
        raise ModelFileError("categorical features and model disagree on the number of features")
    n_categories = encoder.n_categories()
    if not np.array_equal(mapper.n_bins_[encoder.features], np.maximum(n_categories, 1)):
        raise ModelFileError("a categorical feature must have one bin per category")
    n_nodes = len(nodes["feature"])
    if (words is None or words.dtype != np.uint32 or words.ndim != 2
            or words.shape[0] != n_nodes or words.shape[1] < 1
            or 32 * words.shape[1] < int(np.max(n_categories, initial=0))):
        raise ModelFileError(f"node_{CATEGORY_WORDS} must be a (n_nodes, n_words) uint32 "
                             "array of category sets covering every category")
    internal = nodes["feature"] >= 0
    by_set = internal & (nodes["threshold_bin"] == -1)
    categorical = encoder.mask()
    feature = np.where(internal, nodes["feature"], 0)
    if np.any(by_set & ~categorical[feature]):
        raise ModelFileError("a category-set split (threshold_bin -1) on a feature that is "
                             "not categorical")
    if np.any(internal & ~by_set & (categorical[feature] | (nodes["threshold_bin"] < 0))):
        raise ModelFileError("a categorical feature split by threshold, or a negative "
                             "bin threshold")
    from packboost.grower import unpack_category_words

    flags = unpack_category_words(words[by_set], 32 * words.shape[1])
    limit = np.zeros(n_features, dtype=np.int64)
    limit[encoder.features] = n_categories
    beyond = np.arange(flags.shape[1])[None, :] >= limit[nodes["feature"][by_set]][:, None]
    if np.any(flags.astype(bool) & beyond):
        raise ModelFileError("a category set holds a code beyond its feature's categories")
    nodes[CATEGORY_WORDS] = words
    return encoder


def load_model(path, *, n_jobs=None, device="cpu"):
    """Load an estimator saved with ``save_model``.

    Parameters
    ----------
    path : str or os.PathLike
        A model file.
    n_jobs, device
        How the loaded model runs here (as the estimator parameters of the same
        names); a file never chooses them.

    Returns a fitted :class:`~packboost.PackBoostRegressor` or
    :class:`~packboost.PackBoostClassifier`. Raises
    :class:`~packboost.model_file.ModelFileError` (a ``ValueError``) for a file
    that is not a valid PackBoost model.
    """
    if not isinstance(path, (str, bytes, os.PathLike)):
        raise TypeError(f"load_model takes the path of a model file (str or os.PathLike), got "
                        f"{type(path).__name__}")
    runtime = {"n_jobs": check_parameter("n_jobs", n_jobs),
               "device": check_parameter("device", device)}
    metadata, arrays = read_model_file(path)
    try:
        estimator = _build_estimator(metadata, arrays)
    except ModelFileError as error:
        raise ModelFileError(f"{os.fsdecode(path)!r}: {error}") from None
    except (KeyError, TypeError, ValueError, IndexError, AttributeError,
            OverflowError) as error:
        # Everything the checks below did not name: still the file's fault.
        raise ModelFileError(f"{os.fsdecode(path)!r}: inconsistent model content: "
                             f"{error!r}") from None
    estimator.set_params(**runtime)
    if estimator.get_params()["objective"] == CUSTOM_OBJECTIVE:
        warnings.warn(
            f"{os.fsdecode(path)!r} was trained with a custom objective function, which model "
            "files do not store (loading runs no code): the model predicts as it did; to "
            "continue training it (init_model=), set_params(objective=your_function)",
            UserWarning, stacklevel=2)
    return estimator


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

    A file may come from anyone: a forged ``max_bins`` must not reach a kernel,
    and the run-time parameters (``n_jobs``, ``device``) are not taken from it
    at all: the estimator keeps its defaults. Unknown keys (parameters of
    another version) are ignored; parameters newer than the file get the value
    that reproduces how it was trained (``PARAMETERS_BEFORE_THEY_EXISTED``),
    not today's default.
    """
    valid = set(estimator.get_params()) - set(RUNTIME_PARAMETERS)
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
    # absent from files written before models of several outputs existed
    n_outputs = _count(metadata, "n_outputs", 1, MAX_OUTPUTS) if "n_outputs" in metadata else 1
    _check_trees(nodes, tree_offsets, n_features, pack_size * n_outputs)

    layer_features = _array(arrays, "layer_features", np.int32)
    layer_offsets = _array(arrays, "layer_offsets", np.int64)
    if (len(layer_offsets) < 1 or layer_offsets[0] != 0
            or layer_offsets[-1] != len(layer_features) or not _non_decreasing(layer_offsets)):
        raise ModelFileError("layer_offsets do not partition layer_features")
    if np.any(layer_features < 0) or np.any(layer_features >= n_features):
        raise ModelFileError("layer_features name a feature that does not exist")
    n_rounds = (len(tree_offsets) - 1) // (pack_size * n_outputs)
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
    if n_outputs == 1:
        base_score = _entry(metadata, "base_score", (int, float), "model metadata")
    else:
        base_score = _entry(metadata, "base_score", list, "model metadata")
        if len(base_score) != n_outputs or not all(
                isinstance(value, (int, float)) and not isinstance(value, bool)
                for value in base_score):
            raise ModelFileError(f"base_score must hold {n_outputs} numbers, one per output")
    if not np.all(np.isfinite(base_score)):
        raise ModelFileError(f"base_score must be finite, got {base_score!r:.200}")
    encoder = _category_sets(metadata, arrays, nodes, mapper, n_features)
    estimator.ensemble_ = TreeEnsemble(
        nodes=nodes, tree_offsets=tree_offsets, pack_size=pack_size,
        base_score=(float(base_score) if n_outputs == 1
                    else np.asarray(base_score, dtype=np.float64)),
        layer_features=layer_features,
        layer_offsets=layer_offsets, round_layer_offsets=round_layer_offsets,
        n_outputs=n_outputs)
    estimator.bin_mapper_ = mapper
    if encoder is not None:
        estimator.category_encoder_ = encoder
    estimator.n_features_in_ = n_features
    names = metadata.get("feature_names")
    if names is not None:
        if (not isinstance(names, list) or len(names) != n_features
                or not all(isinstance(item, str) for item in names)):
            raise ModelFileError(f"feature_names must be {n_features} strings")
        estimator.feature_names_in_ = np.asarray(names, dtype=object)
    target_names = metadata.get("target_names")  # only for several named targets
    if target_names is not None:
        if (hasattr(estimator, "predict_proba") or not isinstance(target_names, list)
                or len(target_names) != n_outputs or n_outputs < 2
                or not all(isinstance(item, str) for item in target_names)):
            raise ModelFileError(f"target_names must be {n_outputs} strings, one per output "
                                 "of a regressor of several targets")
        estimator.target_names_ = np.asarray(target_names, dtype=object)
    estimator.n_eras_ = _count(metadata, "n_eras", 1)
    era_column = metadata.get("era_column")  # absent from files written before it existed
    if era_column is not None:
        if not isinstance(era_column, str) or len(era_column) > 10_000:
            raise ModelFileError("era_column must be a string or null")
        estimator.era_column_ = era_column
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
        estimator.classes_ = _load_classes(metadata, arrays)
        expected = 1 if len(estimator.classes_) == 2 else len(estimator.classes_)
        if n_outputs != expected:
            raise ModelFileError(f"a classifier of {len(estimator.classes_)} classes has "
                                 f"{expected} output(s), the file says {n_outputs}")
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


# ----------------------------------------------------------------------------- class labels

# The container's array dtypes, by (kind, itemsize); other widths are stored in
# the nearest one that holds them exactly.
_STORABLE = {("b", 1), ("i", 1), ("i", 2), ("i", 4), ("i", 8), ("u", 1), ("u", 2), ("u", 4),
             ("u", 8), ("f", 4), ("f", 8)}
# Python types an object array of labels may hold (one of them throughout).
_OBJECT_LABEL_TYPES = ("bool", "int", "float", "str", "bytes")
# numpy dtype strings ``classes_dtype`` may name; U/S lengths up to _MAX_LABEL_CHARS.
_LABEL_DTYPE = re.compile(r"[<>|=](?:b1|[iu][1248]|f(?:2|4|8|12|16)|[US][0-9]{1,6}|O|"
                          r"[Mm]8\[[0-9]{0,4}(?:Y|M|W|D|h|m|s|ms|us|ns|ps|fs|as)\])")
_MAX_LABEL_CHARS = 1 << 16


def _label_type_name(label) -> str:
    kind = type(label)
    return kind.__name__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__name__}"


def _object_label_type(label) -> str | None:
    """Which of _OBJECT_LABEL_TYPES ``label`` is (numpy scalars included), or None."""
    if isinstance(label, (bool, np.bool_)):
        return "bool"
    if isinstance(label, (int, np.integer)):
        return "int"
    if isinstance(label, (float, np.floating)) and np.isfinite(label):
        return "float"
    if isinstance(label, str):
        return "str"
    if isinstance(label, bytes):
        return "bytes"
    return None


def _save_classes(classes: np.ndarray, metadata: dict, arrays: dict) -> None:
    """Store a classifier's labels so that they load with the same dtype and values.

    Raises TypeError naming the labels' type when a model file cannot hold them.
    """
    dtype = classes.dtype
    unsupported = (f"cannot save a classifier whose labels are of dtype {dtype}; model files "
                   "hold labels of dtype bool, int, uint, float, str, bytes, datetime64, "
                   "timedelta64, or object arrays of str, bytes, int, float or bool")
    if classes.ndim != 1 or dtype.kind not in "biufUSOMm":
        raise TypeError(unsupported)
    if dtype.kind in "biuf":
        if (dtype.kind, dtype.itemsize) in _STORABLE:
            stored = classes
        else:
            stored = classes.astype(np.float64 if dtype.itemsize > 4 else np.float32)
            if not np.array_equal(stored.astype(dtype), classes):
                raise TypeError(f"{unsupported} (the labels {classes.tolist()} of {dtype} are "
                                "not exactly representable in float64)")
        arrays["classes"] = stored
    elif dtype.kind in "Mm":
        arrays["classes"] = classes.view(np.int64)
    elif dtype.kind in "US":
        if dtype.itemsize // (4 if dtype.kind == "U" else 1) > _MAX_LABEL_CHARS:
            raise TypeError(f"cannot save a classifier whose labels are of dtype {dtype}: "
                            f"model files hold labels of at most {_MAX_LABEL_CHARS} characters")
        metadata["classes"] = [label if dtype.kind == "U" else label.decode("latin-1")
                               for label in classes.tolist()]
    else:
        labels = classes.tolist()
        kinds = {_object_label_type(label) for label in labels}
        if None in kinds or len(kinds) != 1:
            types = sorted({_label_type_name(label) for label in labels})
            raise TypeError(
                f"cannot save a classifier whose labels are of type {' and '.join(types)}: "
                "model files hold object labels of one of the types str, bytes, int, float "
                "or bool (finite), or arrays of a numeric, str, bytes or datetime64 dtype; "
                "convert the labels (e.g. dates to numpy.datetime64) before fitting")
        (kind,) = kinds
        convert = {"bool": bool, "int": int, "float": float, "str": str,
                   "bytes": lambda label: bytes(label).decode("latin-1")}[kind]
        metadata["classes"] = [convert(label) for label in labels]
        metadata["classes_type"] = kind
    metadata["classes_dtype"] = dtype.str


def _load_classes(metadata: dict, arrays: dict) -> np.ndarray:
    """A classifier's labels as saved by _save_classes, or as files before it wrote them."""
    if "classes_dtype" not in metadata:
        return _load_legacy_classes(metadata, arrays)
    text = _entry(metadata, "classes_dtype", str, "model metadata")
    if not _LABEL_DTYPE.fullmatch(text):
        raise ModelFileError(f"unsupported classes_dtype {text!r:.80}")
    try:
        dtype = np.dtype(text)
    except TypeError:
        raise ModelFileError(f"unsupported classes_dtype {text!r:.80}") from None
    if dtype.kind in "biufMm":
        if "classes" not in arrays:
            raise ModelFileError("model file lacks the array 'classes'")
        stored = arrays["classes"]
        if stored.ndim != 1 or len(stored) < 2:
            raise ModelFileError("a classifier needs at least 2 distinct classes")
        if dtype.kind in "Mm":
            if stored.dtype != np.int64:
                raise ModelFileError(f"classes of {dtype} must be stored as int64")
            classes = stored.view(dtype.newbyteorder("=")).astype(dtype)
            if np.isnat(classes).any():
                raise ModelFileError("classes must not be NaT")
        else:
            if stored.dtype.kind != dtype.kind:
                raise ModelFileError(f"classes stored as {stored.dtype} cannot be {dtype}")
            classes = stored.astype(dtype)
            if not np.array_equal(classes.astype(stored.dtype), stored):
                raise ModelFileError(f"classes {stored.tolist()} do not fit in {dtype}")
            if dtype.kind == "f" and not np.isfinite(classes).all():
                raise ModelFileError("classes must be finite")
    elif dtype.kind in "US":
        labels = _entry(metadata, "classes", list, "model metadata")
        if not all(isinstance(label, str) for label in labels):
            raise ModelFileError(f"classes of {dtype} must be stored as strings")
        n_chars = dtype.itemsize // (4 if dtype.kind == "U" else 1)
        if n_chars > _MAX_LABEL_CHARS or any(len(label) > n_chars for label in labels):
            raise ModelFileError(f"classes do not fit in {dtype}")
        if dtype.kind == "S":
            try:
                labels = [label.encode("latin-1") for label in labels]
            except UnicodeEncodeError:
                raise ModelFileError("classes of a bytes dtype must be Latin-1 text") from None
        classes = np.array(labels, dtype=dtype)
    else:
        labels = _entry(metadata, "classes", list, "model metadata")
        kind = _entry(metadata, "classes_type", str, "model metadata")
        if kind not in _OBJECT_LABEL_TYPES:
            raise ModelFileError(f"unsupported classes_type {kind!r:.80}")
        json_type = str if kind == "bytes" else {"bool": bool, "int": int, "float": float,
                                                  "str": str}[kind]
        if not all(type(label) is json_type for label in labels):
            raise ModelFileError(f"classes must be {kind} labels")
        if kind == "float" and not all(np.isfinite(label) for label in labels):
            raise ModelFileError("classes must be finite")
        if kind == "bytes":
            try:
                labels = [label.encode("latin-1") for label in labels]
            except UnicodeEncodeError:
                raise ModelFileError("bytes classes must be Latin-1 text") from None
        classes = np.empty(len(labels), dtype=object)
        classes[:] = labels
    _check_distinct_classes(classes)
    return classes


def _check_distinct_classes(classes: np.ndarray) -> None:
    """At least two labels, none twice (``predict`` indexes them by class code)."""
    labels = classes.tolist()  # Python scalars: hashable, equal labels hash equal
    if len(labels) < 2 or len(set(labels)) != len(labels):
        raise ModelFileError("a classifier needs at least 2 distinct classes")


def _load_legacy_classes(metadata: dict, arrays: dict) -> np.ndarray:
    """Files written before classes_dtype: numeric arrays, or labels as str."""
    if "classes" in arrays:
        classes = arrays["classes"]
        if classes.ndim != 1 or (classes.dtype.kind == "f" and not np.isfinite(classes).all()):
            raise ModelFileError("classes must be a 1-D array of finite labels")
    else:
        labels = _entry(metadata, "classes", list, "model metadata")
        if not all(isinstance(label, str) for label in labels):
            raise ModelFileError("classes must be strings or a numeric array")
        classes = np.asarray(labels, dtype=object)
    if len(classes) != 2 or classes[0] == classes[1]:
        raise ModelFileError("a classifier needs exactly 2 distinct classes")
    return classes
