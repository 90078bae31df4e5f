"""A fitted model as a NumPy-only function: ``model.standalone_predictor()``.

Why: Numerai (and many deployment targets) run an uploaded, pickled
``predict(live_features)`` in a container that has NumPy and pandas but no
promise of PackBoost. Pickling the estimator drags the library along (its
classes are pickled by reference, so unpickling imports ``packboost``); the
predictor made here holds only arrays and rebuilds itself from its own source
on unpickling, so it needs NumPy alone, with ``pickle`` and ``cloudpickle``.

How: the predictor's code is the string :data:`PREDICTOR_SOURCE`, executed
once here to make the class, and again wherever a pickled predictor is loaded
(its ``__reduce__`` hands ``builtins.eval`` that source and the model's
arrays). It walks every tree for a block of rows at once (NumPy gathers, no
Python loop per row) and adds the trees' leaf values in tree order starting
from the base score, exactly the additions of ``model.predict``, so the
results are bit-identical.
"""

from __future__ import annotations

import numpy as np

# The whole predictor, NumPy only. Kept as source so that a pickle carries it
# by value (see the module docstring); executed below for the package's use.
PREDICTOR_SOURCE = '''
import numpy as np


class StandalonePredictor:
    """``predict(X)`` of a fitted PackBoost model, with NumPy alone.

    ``X``: a 2-D array (rows x the model's features, any real dtype, NaN
    missing) or a table with the model's feature columns by name (pandas,
    polars; other columns are ignored). Pickles with pickle and cloudpickle
    without needing packboost where it is loaded.
    """

    # Rows walked at once: bounds the (rows x trees) index arrays in memory.
    CELLS_PER_BLOCK = 1 << 22

    def __init__(self, state):
        self.state = state

    def __reduce__(self):
        return (eval, (REBUILD, {"SOURCE": SOURCE, "REBUILD": REBUILD, "state": self.state}))

    def __repr__(self):
        state = self.state
        return (f"StandalonePredictor({state['kind']}, {len(state['tree_roots'])} trees, "
                f"{state['n_features']} features)")

    @property
    def feature_names(self):
        names = self.state["feature_names"]
        return None if names is None else list(names)

    def __call__(self, X):
        return self.predict(X)

    def predict(self, X):
        """What ``model.predict(X)`` returns: values, or a classifier's labels."""
        raw = self.raw_predict(X)
        if self.state["kind"] == "classifier":
            if raw.ndim == 2:
                return self.state["classes"][np.argmax(raw, axis=1)]
            return self.state["classes"][(raw > 0).astype(np.intp)]
        return raw

    def predict_proba(self, X):
        """A classifier's ``predict_proba(X)``: columns in the order of its classes."""
        if self.state["kind"] != "classifier":
            raise AttributeError("predict_proba: this predictor is a regressor's")
        raw = self.raw_predict(X)
        if raw.ndim == 2:
            return _softmax(raw)
        positive = _sigmoid(raw)
        return np.column_stack([1.0 - positive, positive])

    def raw_predict(self, X):
        """The raw score: base score plus every tree's leaf value, in tree order;
        (rows, outputs) for a model of several outputs (each tree adds to its
        output, ``tree_output``)."""
        X = self._matrix(X)
        state = self.state
        n_outputs = state.get("n_outputs", 1)
        if n_outputs == 1:
            out = np.full(X.shape[0], state["base_score"], dtype=np.float64)
            columns = [out]
        else:
            out = np.empty((n_outputs, X.shape[0]), dtype=np.float64)
            out[:] = np.asarray(state["base_score"], dtype=np.float64)[:, np.newaxis]
            columns = list(out)
        n_trees = len(state["tree_roots"])
        if n_trees == 0 or X.shape[0] == 0:
            return out if n_outputs == 1 else out.T.copy()
        tree_output = state.get("tree_output")
        step = max(1, self.CELLS_PER_BLOCK // n_trees)
        for start in range(0, X.shape[0], step):
            stop = min(start + step, X.shape[0])
            leaves = self._leaves(X[start:stop])
            blocks = [column[start:stop] for column in columns]
            for tree in range(n_trees):  # the library's order of additions
                output = 0 if tree_output is None else tree_output[tree]
                blocks[output] += state["value"][leaves[:, tree]]
        return out if n_outputs == 1 else out.T.copy()

    def _leaves(self, X):
        """(rows, trees) leaf reached by every row in every tree."""
        state = self.state
        feature, threshold = state["feature"], state["threshold"]
        missing_left = state["missing_left"]
        left, right = state["left_child"], state["right_child"]
        node = np.repeat(state["tree_roots"][np.newaxis, :], X.shape[0], axis=0)
        rows = np.arange(X.shape[0])[:, np.newaxis]
        for _ in range(state["max_depth"]):
            split_feature = feature[node]
            internal = split_feature >= 0
            if not internal.any():
                break
            x = X[rows, np.maximum(split_feature, 0)]
            go_left = np.where(np.isnan(x), missing_left[node], x <= threshold[node])
            words = state.get("category_words")
            if words is not None:
                # A category-set split: code c goes left iff bit c of the node's set.
                by_set = state["set_split"][node] & ~np.isnan(x)
                code = np.where(by_set, np.nan_to_num(x), 0).astype(np.int64)
                inside = (code >= 0) & (code < 32 * words.shape[1])
                code = np.where(inside, code, 0)
                bit = (words[node, code >> 5] >> (code & 31).astype(np.uint32)) & 1
                go_left = np.where(by_set, inside & (bit == 1), go_left)
            node = np.where(internal, np.where(go_left, left[node], right[node]), node)
        return node

    def _matrix(self, X):
        state = self.state
        names = state["feature_names"]
        categories = state.get("categories")
        if categories:
            X = self._category_codes(X, names, categories)
        if hasattr(X, "columns") and not isinstance(X, np.ndarray):
            columns = [str(name) for name in X.columns]
            if names is not None:
                missing = [name for name in names if name not in set(columns)]
                if missing:
                    raise ValueError(f"X lacks the model's feature columns {missing[:5]}")
                X = X[list(names)]
            if hasattr(X, "to_numpy"):
                try:  # pandas: nullable columns become NaN
                    X = X.to_numpy(dtype=np.float64, na_value=np.nan)
                except TypeError:  # polars and others
                    X = X.to_numpy()
        X = np.asarray(X)
        if X.ndim != 2:
            raise ValueError(f"X must be 2-D (rows x features), got shape {X.shape}")
        if not (np.issubdtype(X.dtype, np.number) or X.dtype == np.bool_):
            raise TypeError(f"X must hold numbers, got dtype {X.dtype}")
        if X.shape[1] != state["n_features"]:
            raise ValueError(f"X has {X.shape[1]} features, the model {state['n_features']}")
        return X.astype(np.float64, copy=False)

    def _category_codes(self, X, names, categories):
        """X as float64 with each categorical column's labels replaced by the
        fit's codes (NaN: missing or unseen, the split's missing side)."""
        is_table = hasattr(X, "columns") and not isinstance(X, np.ndarray)
        n_features = self.state["n_features"]
        if is_table and names is None:
            raise ValueError("this model was fitted on an array: pass an array")
        if not is_table:
            X = np.asarray(X, dtype=object) if not isinstance(X, np.ndarray) else X
            if X.ndim != 2 or X.shape[1] != n_features:
                raise ValueError(f"X must be 2-D with {n_features} features")
        n_rows = len(X)
        out = np.empty((n_rows, n_features))
        for k in range(n_features):
            column = X[names[k]] if is_table else X[:, k]
            if hasattr(column, "to_numpy"):
                column = column.to_numpy()
            if k in categories:
                index = {label: code for code, label in enumerate(categories[k])}
                values = np.asarray(column, dtype=object).tolist()
                out[:, k] = [np.nan if _missing(value) else
                             index.get(value.item() if hasattr(value, "item") else value,
                                       np.nan)
                             for value in values]
            else:
                out[:, k] = np.asarray(column, dtype=np.float64)
        return out


def _missing(value):
    """None, NaN, or pandas' NA / NaT (told by type name: no pandas needed)."""
    return (value is None or (isinstance(value, float) and value != value)
            or type(value).__name__ in ("NAType", "NaTType"))


def _softmax(raw):
    shifted = np.exp(raw - raw.max(axis=1, keepdims=True))
    return shifted / shifted.sum(axis=1, keepdims=True)


def _sigmoid(x):
    out = np.empty_like(x, dtype=np.float64)
    positive = x >= 0
    out[positive] = 1.0 / (1.0 + np.exp(-x[positive]))
    exp_x = np.exp(x[~positive])
    out[~positive] = exp_x / (1.0 + exp_x)
    return out
'''

# Evaluated (by ``eval``, with SOURCE and state bound) wherever a pickled
# predictor is loaded: runs the source in a fresh namespace, returns the object.
REBUILD = ("(lambda namespace: exec(SOURCE, namespace) or "
           "namespace['StandalonePredictor'](state))"
           "({'__name__': 'packboost_standalone_predictor', 'SOURCE': SOURCE, "
           "'REBUILD': REBUILD})")

_namespace = {"__name__": "packboost_standalone_predictor", "SOURCE": PREDICTOR_SOURCE,
              "REBUILD": REBUILD}
exec(PREDICTOR_SOURCE, _namespace)  # noqa: S102 -- our own constant source, see above
StandalonePredictor = _namespace["StandalonePredictor"]


def standalone_predictor(model) -> StandalonePredictor:
    """The NumPy-only predictor of a fitted PackBoost estimator (see the module docstring)."""
    ensemble = getattr(model, "ensemble_", None)
    if ensemble is None:
        raise ValueError(f"{type(model).__name__} is not fitted yet: call fit first")
    nodes = ensemble.nodes
    roots = np.ascontiguousarray(ensemble.tree_roots(), dtype=np.int64)
    names = getattr(model, "feature_names_in_", None)
    is_classifier = hasattr(model, "classes_")
    state = {
        "kind": "classifier" if is_classifier else "regressor",
        "feature": np.array(nodes["feature"], dtype=np.int64),
        "threshold": np.array(nodes["threshold"], dtype=np.float64),
        "missing_left": np.array(nodes["missing_left"], dtype=bool),
        "left_child": np.array(nodes["left_child"], dtype=np.int64),
        "right_child": np.array(nodes["right_child"], dtype=np.int64),
        "value": np.array(nodes["value"], dtype=np.float64),
        "tree_roots": roots,
        "max_depth": ensemble.max_depth(roots),
        "base_score": (float(ensemble.base_score) if ensemble.n_outputs == 1
                       else ensemble.base_scores),
        "n_outputs": int(ensemble.n_outputs),
        "tree_output": (None if ensemble.n_outputs == 1
                        else np.ascontiguousarray(ensemble.tree_outputs())),
        "n_features": int(model.n_features_in_),
        "feature_names": None if names is None else [str(name) for name in names],
        "classes": np.array(model.classes_) if is_classifier else None,
    }
    encoder = getattr(model, "category_encoder_", None)
    if encoder is not None:
        state["category_words"] = np.array(nodes["category_words"], dtype=np.uint32)
        state["set_split"] = np.array(nodes["threshold_bin"] == -1, dtype=bool)
        state["categories"] = {int(k): list(labels) for k, labels in
                               zip(encoder.features.tolist(), encoder.categories, strict=True)}
    return StandalonePredictor(state)

