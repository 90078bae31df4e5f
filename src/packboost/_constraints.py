"""Monotone and interaction constraints: checked, resolved, applied per depth.

The two parameters (declared in :mod:`packboost._parameters`) are checked in
two steps: their shape when ``fit`` checks every parameter
(:func:`check_monotone`, :func:`check_interactions`), then against the
training matrix's features (:func:`resolve_monotone`,
:func:`resolve_interactions`), which gives the arrays the grower reads, or
None when a constraint constrains nothing (all zeros; one set holding every
feature), so that such a fit is the unconstrained fit bit for bit.

The grower keeps, per slot of the frontier (docs/packs.md §2):

* monotone: ``[lower, upper]`` bounds on the node's value (unshrunk Newton
  units). A node's value is its Newton value clipped to them; the children of
  a split on a constrained feature split the bounds at the midpoint of their
  two clipped values (:func:`child_bounds`), as XGBoost and LightGBM's
  "basic" method do. Every leaf left of such a split is then at most the
  midpoint and every leaf right of it at least, so each tree, and their sum,
  is monotone in the feature. The split finder only admits splits on a
  constrained feature whose clipped children are ordered (docs/des.md §14).
* interactions: the features used on the path to the node. A node may split
  on the features of every constraint set that holds all of them
  (:func:`allowed_features`); a feature of no set is a set of its own, so it
  is only ever used alone on a path.
"""

from __future__ import annotations

import numbers

import numpy as np

from packboost import _validation

MONOTONE = "monotone_constraints"
INTERACTIONS = "interaction_constraints"


# ----------------------------------------------------------------------------- shapes


def _is_int(value) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_))


def check_monotone(value) -> None:
    """None, a sequence of -1/0/1 (one per feature) or a dict {feature name: -1/0/1}."""
    if value is None:
        return
    if isinstance(value, dict):
        items = list(value.items())
        for key, _ in items:
            if not isinstance(key, str):
                raise TypeError(f"{MONOTONE} as a dict maps feature names (str) to -1, 0 "
                                f"or 1; got the key {_validation.show(key)}")
        entries = [entry for _, entry in items]
    elif isinstance(value, (list, tuple, np.ndarray)):
        if isinstance(value, np.ndarray) and value.ndim != 1:
            raise ValueError(f"{MONOTONE} must be 1-D (one entry per feature), got an "
                             f"array of shape {value.shape}")
        entries = value.tolist() if isinstance(value, np.ndarray) else list(value)
    else:
        raise TypeError(f"{MONOTONE} must be None, a list of -1/0/1 per feature or a dict "
                        f"{{feature name: -1/0/1}}, got {_validation.show(value)}")
    for entry in entries:
        if not _is_int(entry) or int(entry) not in (-1, 0, 1):
            raise ValueError(f"{MONOTONE} entries must be -1, 0 or 1, got "
                             f"{_validation.show(entry)}")


def check_interactions(value) -> None:
    """None or a list of feature sets, each a non-empty list of indices or names."""
    if value is None:
        return
    if not isinstance(value, (list, tuple)):
        raise TypeError(f"{INTERACTIONS} must be None or a list of lists of features "
                        f"(indices or names), got {_validation.show(value)}")
    for group in value:
        if not isinstance(group, (list, tuple, np.ndarray)):
            raise TypeError(f"{INTERACTIONS} must be a list of lists of features; got the "
                            f"entry {_validation.show(group)}")
        if len(group) == 0:
            raise ValueError(f"{INTERACTIONS}: a feature set is empty")
        for feature in list(group):
            if isinstance(feature, str):
                continue
            if not _is_int(feature):
                raise TypeError(f"{INTERACTIONS}: a feature is an index (int) or a name "
                                f"(str), got {_validation.show(feature)}")
            if feature < 0:
                raise ValueError(f"{INTERACTIONS}: feature indices are non-negative, got "
                                 f"{int(feature)}")


def json_value(name: str, value):
    """The parameter as plain JSON types (model files), or None."""
    if value is None:
        return None
    if name == MONOTONE:
        if isinstance(value, dict):
            return {str(key): int(entry) for key, entry in value.items()}
        return [int(entry) for entry in value]
    return [[feature if isinstance(feature, str) else int(feature) for feature in group]
            for group in value]


# ----------------------------------------------------------------------------- resolution


def _feature_index(feature, n_features: int, feature_names, what: str) -> int:
    if isinstance(feature, str):
        if feature_names is None:
            raise ValueError(f"{what} names the feature {feature!r}, but X has no feature "
                             f"names (pass a DataFrame, or use column indices)")
        where = np.flatnonzero(np.asarray(feature_names, dtype=object) == feature)
        if len(where) == 0:
            raise ValueError(f"{what} names the feature {feature!r}, which X does not have")
        return int(where[0])
    if not 0 <= int(feature) < n_features:
        raise ValueError(f"{what} uses feature {int(feature)}, but X has {n_features} "
                         f"features (indices 0 .. {n_features - 1})")
    return int(feature)


def resolve_monotone(value, n_features: int, feature_names) -> np.ndarray | None:
    """(n_features,) int8 of -1/0/1, or None when nothing is constrained."""
    check_monotone(value)
    if value is None:
        return None
    monotone = np.zeros(n_features, dtype=np.int8)
    if isinstance(value, dict):
        for key, entry in value.items():
            monotone[_feature_index(key, n_features, feature_names, MONOTONE)] = int(entry)
    else:
        if len(value) != n_features:
            raise ValueError(f"{MONOTONE} has {len(value)} entries, but X has {n_features} "
                             f"features (give one per feature, or a dict by name)")
        monotone[:] = [int(entry) for entry in value]
    return monotone if monotone.any() else None


def resolve_interactions(value, n_features: int, feature_names) -> np.ndarray | None:
    """(n_sets, n_features) bool: the constraint sets, plus a set of its own for
    each feature of none; None when some set holds every feature (or no set
    is given: ``[]`` constrains nothing, as in XGBoost and LightGBM)."""
    check_interactions(value)
    if value is None or len(value) == 0:
        return None
    sets = np.zeros((len(value), n_features), dtype=bool)
    for position, group in enumerate(value):
        for feature in list(group):
            sets[position, _feature_index(feature, n_features, feature_names,
                                          INTERACTIONS)] = True
    if sets.all(axis=1).any():
        return None
    alone = np.flatnonzero(~sets.any(axis=0))
    singletons = np.zeros((len(alone), n_features), dtype=bool)
    singletons[np.arange(len(alone)), alone] = True
    return np.concatenate([sets, singletons])


def unsupported(where: str) -> ValueError:
    """The error of a backend that does not apply constraints."""
    return ValueError(f"{MONOTONE} and {INTERACTIONS} are not supported with {where}; "
                      f"train on the CPU (device='cpu') or leave both None")


def resolve_for_fit(params: dict, n_features: int, feature_names) -> dict:
    """``params`` with both constraints resolved against the training matrix
    (the grower's arrays, or None). Raises before any work when they are set
    and the backend cannot apply them (device="cuda")."""
    resolved = dict(params)
    resolved[MONOTONE] = resolve_monotone(params[MONOTONE], n_features, feature_names)
    resolved[INTERACTIONS] = resolve_interactions(params[INTERACTIONS], n_features,
                                                  feature_names)
    if resolved[MONOTONE] is not None or resolved[INTERACTIONS] is not None:
        if params["device"] != "cpu":
            raise unsupported(f"device={params['device']!r}")
    return resolved


# ----------------------------------------------------------------------------- per depth


def allowed_features(path_features: np.ndarray, sets: np.ndarray) -> np.ndarray:
    """(n_slots, n_features) bool: the features each slot may split on.

    ``path_features`` (n_slots, n_features) bool marks the features used on
    the path to each slot; a slot may use the union of the sets that hold
    all of them (every feature of every set at a root).
    """
    outside = path_features.astype(np.int32) @ (~sets).T.astype(np.int32)  # (n_slots, n_sets)
    return ((outside == 0).astype(np.int32) @ sets.astype(np.int32)) > 0


def child_bounds(parent_bounds: np.ndarray, parent_monotone: np.ndarray,
                 child_values: np.ndarray) -> np.ndarray:
    """(2 n, 2) bounds of the children of ``n`` split slots (left, right interleaved).

    ``parent_bounds`` (n, 2), ``parent_monotone`` (n,) the constraint of each
    split's feature, ``child_values`` (2 n,) the children's Newton values.
    Children of an unconstrained split inherit their parent's bounds; those
    of a constrained split divide them at the midpoint of their clipped values.
    """
    lower, upper = parent_bounds[:, 0], parent_bounds[:, 1]
    left = np.clip(child_values[0::2], lower, upper)
    right = np.clip(child_values[1::2], lower, upper)
    middle = np.clip(0.5 * (left + right), lower, upper)
    bounds = np.repeat(parent_bounds, 2, axis=0)
    increasing = np.flatnonzero(parent_monotone > 0)
    decreasing = np.flatnonzero(parent_monotone < 0)
    bounds[2 * increasing, 1] = middle[increasing]       # left <= middle <= right
    bounds[2 * increasing + 1, 0] = middle[increasing]
    bounds[2 * decreasing, 0] = middle[decreasing]       # left >= middle >= right
    bounds[2 * decreasing + 1, 1] = middle[decreasing]
    return bounds
