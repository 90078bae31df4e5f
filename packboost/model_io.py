"""Fitted estimators to and from model files (DESIGN 5).

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

import numpy as np

from packboost._version import __version__
from packboost.binning import BinMapper
from packboost.ensemble import NODE_FIELDS, TreeEnsemble
from packboost.model_file import ModelFileError, read_model_file, write_model_file

MODEL_KIND = "packboost-model"


def _estimator_classes():
    from packboost.sklearn import PackBoostClassifier, PackBoostRegressor
    return {cls.__name__: cls for cls in (PackBoostRegressor, PackBoostClassifier)}


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
    metadata, arrays = read_model_file(path)
    try:
        return _build_estimator(metadata, arrays)
    except ModelFileError:
        raise
    except (KeyError, TypeError, ValueError, IndexError) as error:
        raise ModelFileError(f"{path}: inconsistent model content: {error!r}") from None


def _build_estimator(metadata: dict, arrays: dict):
    if metadata.get("kind") != MODEL_KIND:
        raise ModelFileError("the file is a PackBoost container but not a model")
    classes = _estimator_classes()
    name = metadata["estimator"]
    if name not in classes:
        raise ModelFileError(f"unknown estimator {name!r} in model file")
    estimator = classes[name]()
    valid = set(estimator.get_params())
    params = {key: value for key, value in metadata["params"].items() if key in valid}
    estimator.set_params(**params)

    nodes = {}
    for field, dtype in NODE_FIELDS.items():
        values = arrays[f"node_{field}"]
        if values.dtype != dtype or values.ndim != 1:
            raise ModelFileError(f"node_{field} must be a 1-D {dtype} array")
        nodes[field] = values
    n_nodes = len(nodes["feature"])
    if any(len(values) != n_nodes for values in nodes.values()):
        raise ModelFileError("node arrays have different lengths")
    tree_offsets = np.ascontiguousarray(arrays["tree_offsets"], dtype=np.int64)
    pack_size = int(metadata["pack_size"])
    n_features = int(metadata["n_features_in"])
    _check_trees(nodes, tree_offsets, n_features, pack_size)

    layer_offsets = np.ascontiguousarray(arrays["layer_offsets"], dtype=np.int64)
    round_layer_offsets = arrays.get("round_layer_offsets")  # absent from older files
    if round_layer_offsets is not None:
        round_layer_offsets = np.ascontiguousarray(round_layer_offsets, dtype=np.int64)
        n_rounds = (len(tree_offsets) - 1) // pack_size
        if (round_layer_offsets.ndim != 1 or len(round_layer_offsets) != n_rounds + 1
                or round_layer_offsets[0] != 0
                or round_layer_offsets[-1] != len(layer_offsets) - 1
                or np.any(np.diff(round_layer_offsets) < 0)):
            raise ModelFileError("round_layer_offsets do not match the rounds and layers")

    mapper = BinMapper.from_arrays(metadata["bin_mapper"], arrays)
    if len(mapper.n_bins_) != n_features:
        raise ModelFileError("bin mapper and model disagree on the number of features")
    estimator.ensemble_ = TreeEnsemble(
        nodes=nodes, tree_offsets=tree_offsets, pack_size=pack_size,
        base_score=float(metadata["base_score"]),
        layer_features=np.ascontiguousarray(arrays["layer_features"], dtype=np.int32),
        layer_offsets=layer_offsets, round_layer_offsets=round_layer_offsets)
    estimator.bin_mapper_ = mapper
    estimator.n_features_in_ = n_features
    if metadata.get("feature_names") is not None:
        names = np.asarray(metadata["feature_names"], dtype=object)
        if len(names) != n_features:
            raise ModelFileError("feature_names has the wrong length")
        estimator.feature_names_in_ = names
    estimator.n_eras_ = int(metadata["n_eras"])
    estimator.n_iter_ = estimator.ensemble_.n_rounds
    estimator.evals_result_ = {}
    best_iteration = metadata.get("best_iteration")
    if best_iteration is not None and not (
            isinstance(best_iteration, int) and 0 <= best_iteration <= estimator.n_iter_):
        raise ModelFileError(f"best_iteration {best_iteration!r} is not a round of the model")
    estimator.best_iteration_ = best_iteration
    estimator.best_score_ = {}
    if name == "PackBoostClassifier":
        classes_ = arrays.get("classes")
        if classes_ is None:
            classes_ = np.asarray(metadata["classes"], dtype=object)
        if len(classes_) != 2:
            raise ModelFileError("a classifier needs exactly 2 classes")
        estimator.classes_ = classes_
    return estimator


def _check_trees(nodes, tree_offsets, n_features, pack_size):
    """Every child index must point forward inside its own tree, so that a
    prediction walk always ends at a leaf; features must exist."""
    n_nodes = len(nodes["feature"])
    if pack_size < 1 or tree_offsets.ndim != 1 or len(tree_offsets) < 1:
        raise ModelFileError("bad tree layout")
    if tree_offsets[0] != 0 or tree_offsets[-1] != n_nodes or np.any(np.diff(tree_offsets) < 1):
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
