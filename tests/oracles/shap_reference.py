"""Brute-force Shapley values of the path-dependent tree game (TreeSHAP's oracle).

v(S) = the tree's output when the features in S take the row's values and the
others are averaged over the training rows, following each split's children
in proportion to their row counts (``n_samples``). The Shapley value of feature
i averages v(S + i) - v(S) over every subset S of the other features with the
weights |S|! (n - |S| - 1)! / n!. Exponential in the number of features: a
handful only.
"""

from __future__ import annotations

import itertools
import math

import numpy as np


def tree_value(nodes, node: int, x: np.ndarray, known: frozenset) -> float:
    feature = int(nodes["feature"][node])
    if feature < 0:
        return float(nodes["value"][node])
    left, right = int(nodes["left_child"][node]), int(nodes["right_child"][node])
    if feature in known:
        value = x[feature]
        if np.isnan(value):
            go_left = bool(nodes["missing_left"][node])
        elif "category_words" in nodes and nodes["threshold_bin"][node] == -1:
            # a category-set split: code c goes left iff bit c of the node's set
            code, words = int(value), nodes["category_words"][node]
            go_left = 0 <= code < 32 * len(words) and bool((int(words[code // 32])
                                                             >> (code % 32)) & 1)
        else:
            go_left = value <= nodes["threshold"][node]
        return tree_value(nodes, left if go_left else right, x, known)
    cover = nodes["n_samples"]
    return (cover[left] * tree_value(nodes, left, x, known)
            + cover[right] * tree_value(nodes, right, x, known)) / cover[node]


def shapley_contributions(nodes, roots, base_score: float, X: np.ndarray) -> np.ndarray:
    n_rows, n_features = X.shape
    out = np.zeros((n_rows, n_features + 1))
    weights = [math.factorial(k) * math.factorial(n_features - k - 1)
               / math.factorial(n_features) for k in range(n_features)]
    for row in range(n_rows):
        x = X[row].astype(np.float64)
        out[row, -1] = base_score
        for root in roots:
            out[row, -1] += tree_value(nodes, int(root), x, frozenset())
            for feature in range(n_features):
                others = [f for f in range(n_features) if f != feature]
                for size in range(n_features):
                    for subset in itertools.combinations(others, size):
                        known = frozenset(subset)
                        out[row, feature] += weights[size] * (
                            tree_value(nodes, int(root), x, known | {feature})
                            - tree_value(nodes, int(root), x, known))
    return out
