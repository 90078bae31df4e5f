"""A deliberately naive NumPy implementation of one round: the test oracle.

Everything here follows docs/des.md line by line, favouring the
obvious formula over speed: histograms by ``np.add.at``, per-era gains
computed era by era, mean and standard deviation by the two-pass formula,
the direction term written out. The Cython engine must pick the same splits
(feature, threshold, missing side) and leaf values on the same inputs.
Not used by the library itself.
"""

from __future__ import annotations

import numpy as np


def shrink_l1(sum_g, reg_alpha):
    """The gradient sum after the L1 penalty: sign(G) max(|G| - alpha, 0)."""
    return float(np.sign(sum_g) * max(abs(sum_g) - reg_alpha, 0.0)) if reg_alpha else sum_g


def phi(sum_g, sum_h, reg_lambda, reg_alpha=0.0):
    """Loss reduction of the best leaf: -min_v G v + (H + lambda) v^2 / 2 + alpha |v|."""
    denom = sum_h + reg_lambda
    sum_g = shrink_l1(sum_g, reg_alpha)
    return 0.5 * sum_g**2 / denom if denom > 0 else 0.0


def newton_value(sum_g, sum_h, reg_lambda, reg_alpha=0.0):
    denom = sum_h + reg_lambda
    return -shrink_l1(sum_g, reg_alpha) / denom if denom > 0 else 0.0


def histogram(X_binned, feature, rows, gradients, hessians, row_era, n_eras, width):
    """Per-era (sum g, sum h, count) of ``feature`` over ``rows``: 3 x (n_eras, width)."""
    hist_g = np.zeros((n_eras, width))
    hist_h = np.zeros((n_eras, width))
    hist_c = np.zeros((n_eras, width))
    eras = row_era[rows]
    bins = X_binned[feature, rows].astype(np.int64)
    np.add.at(hist_g, (eras, bins), gradients[rows])
    np.add.at(hist_h, (eras, bins), hessians[rows])
    np.add.at(hist_c, (eras, bins), 1.0)
    return hist_g, hist_h, hist_c


def side_loss(sum_g, sum_h, value, reg_lambda, reg_alpha=0.0):
    """A side's regularised loss at ``value``: G v + (H + lambda) v^2 / 2 + alpha |v|."""
    return sum_g * value + 0.5 * (sum_h + reg_lambda) * value**2 + reg_alpha * abs(value)


def bounded_values(sum_g, sum_h, left_g, left_h, reg_lambda, reg_alpha, bounds):
    """(node, left, right) Newton values, clipped to ``bounds`` = (lower, upper)."""
    lower, upper = bounds
    return tuple(float(np.clip(newton_value(g, h, reg_lambda, reg_alpha), lower, upper))
                 for g, h in ((sum_g, sum_h), (left_g, left_h),
                              (sum_g - left_g, sum_h - left_h)))


def era_gains(era_g, era_h, era_left_g, era_left_h, reg_lambda, era_gain, reg_alpha=0.0,
              bounds=(-np.inf, np.inf)):
    """Per-era gains of one candidate (docs/des.md §3), one era at a time.

    Realized gains: era e's share of a side's regularised loss, the L2 and L1
    penalties split by the era's share of the side's hessian, at the sides'
    Newton values clipped to the node's ``bounds`` (monotone constraints,
    docs/des.md §14). Newton gains are the eras' own, whatever the bounds.
    """
    sum_g, sum_h = era_g.sum(), era_h.sum()
    left_g, left_h = era_left_g.sum(), era_left_h.sum()
    right_h = sum_h - left_h
    value_node, value_left, value_right = bounded_values(sum_g, sum_h, left_g, left_h,
                                                         reg_lambda, reg_alpha, bounds)
    gains = np.empty(len(era_g))
    for e in range(len(era_g)):
        eg, eh, elg, elh = era_g[e], era_h[e], era_left_g[e], era_left_h[e]
        erg, erh = eg - elg, eh - elh
        if era_gain == "newton":
            gains[e] = (phi(elg, elh, reg_lambda, reg_alpha) + phi(erg, erh, reg_lambda, reg_alpha)
                        - phi(eg, eh, reg_lambda, reg_alpha))
        else:
            def loss(g_es, h_es, h_s, v_s):
                share = h_es / h_s if h_s > 0 else 0.0
                return (g_es * v_s + 0.5 * (h_es + share * reg_lambda) * v_s**2
                        + share * reg_alpha * abs(v_s))

            gains[e] = (loss(eg, eh, sum_h, value_node)
                        - loss(elg, elh, left_h, value_left)
                        - loss(erg, erh, right_h, value_right))
    return gains


def score_candidate(era_g, era_h, era_c, era_left_g, era_left_h, era_left_c, params,
                    gradient_variance=0.0, bounds=(-np.inf, np.inf)):
    """DES of one candidate over the eras present in the node (rows > 0).

    With ``params["era_std"] == "between"`` (realized gains) the eras'
    sampling variance ``nu_e = s^2 ((v - v_L)^2 n_eL + (v - v_R)^2 n_eR)``,
    ``s^2 = gradient_variance``, is taken out of the variance (csrc/des.h).
    """
    reg_lambda = params["reg_lambda"]
    reg_alpha = params.get("reg_alpha", 0.0)
    if params["era_weighting"] == "count":
        weights = params["era_alpha"] + era_c
    else:
        weights = np.ones(len(era_c))
    weights = weights / weights.sum()
    gains = era_gains(era_g, era_h, era_left_g, era_left_h, reg_lambda, params["era_gain"],
                      reg_alpha, bounds)
    mean = float(np.sum(weights * gains))
    variance = float(np.sum(weights * (gains - mean) ** 2))

    sum_g, sum_h = era_g.sum(), era_h.sum()
    left_g, left_h = era_left_g.sum(), era_left_h.sum()
    value_node, value_left, value_right = bounded_values(sum_g, sum_h, left_g, left_h,
                                                         reg_lambda, reg_alpha, bounds)
    if (params.get("era_std", "total") == "between" and params["era_gain"] == "realized"
            and gradient_variance > 0):
        noise = gradient_variance * ((value_node - value_left) ** 2 * era_left_c
                                     + (value_node - value_right) ** 2 * (era_c - era_left_c))
        variance -= (1.0 - np.sum(weights**2)) * float(np.sum(weights * noise))
    std = float(np.sqrt(variance)) if variance > 0 else 0.0
    spread = value_left - value_right
    d = np.sign(spread)
    direction = 0.0
    scale = params["dir_tanh_scale"]
    for e in range(len(era_c)):
        # the era's own L2 values, not thresholded by alpha (csrc/des.h)
        if era_left_c[e] > 0 and era_c[e] - era_left_c[e] > 0 and d != 0:
            delta = (newton_value(era_left_g[e], era_left_h[e], reg_lambda)
                     - newton_value(era_g[e] - era_left_g[e], era_h[e] - era_left_h[e],
                                    reg_lambda))
            vote = np.tanh(delta / (scale * abs(spread))) if scale > 0 else np.sign(delta)
            direction += weights[e] * d * vote
    score = mean - params["lambda_dro"] * std + params["lambda_dir"] * abs(mean) * direction
    gain = (side_loss(sum_g, sum_h, value_node, reg_lambda, reg_alpha)
            - side_loss(left_g, left_h, value_left, reg_lambda, reg_alpha)
            - side_loss(sum_g - left_g, sum_h - left_h, value_right, reg_lambda, reg_alpha))
    return dict(score=score, gain=gain, mean=mean, std=std, direction=direction)


def candidates(hist_g, hist_h, hist_c, n_bins, params, pooled_gain_only=False,
               gradient_variance=0.0, bounds=(-np.inf, np.inf), monotone=0):
    """Every allowed (threshold, missing side) of one tile, in scan order.

    ``pooled_gain_only`` scores by the plain pooled Newton gain (a classic
    histogram GBDT), for the reductions of docs/des.md §11. ``bounds`` and
    ``monotone`` (docs/des.md §14): a candidate of a feature with constraint
    +1 (-1) is allowed only if its children's clipped values are ordered
    left <= right (left >= right), the missing rows on their side.
    """
    present = hist_c.sum(axis=1) > 0
    hist_g, hist_h, hist_c = hist_g[present], hist_h[present], hist_c[present]
    era_g, era_h, era_c = hist_g.sum(axis=1), hist_h.sum(axis=1), hist_c.sum(axis=1)
    min_leaf = max(1, params["min_samples_leaf"])
    found = []
    for threshold in range(n_bins):
        for missing_left in (True, False):
            take = np.zeros(hist_g.shape[1], dtype=bool)
            take[: threshold + 1] = True
            take[n_bins] = missing_left
            left_g = hist_g[:, take].sum(axis=1)
            left_h = hist_h[:, take].sum(axis=1)
            left_c = hist_c[:, take].sum(axis=1)
            if missing_left and hist_c[:, : threshold + 1].sum() == 0:
                continue  # {missing} | {values}: scored as its mirror, missing-right
            if (left_c.sum() < min_leaf or era_c.sum() - left_c.sum() < min_leaf
                    or left_h.sum() < params["min_child_weight"]
                    or era_h.sum() - left_h.sum() < params["min_child_weight"]):
                continue
            if monotone:
                _, value_left, value_right = bounded_values(
                    era_g.sum(), era_h.sum(), left_g.sum(), left_h.sum(), params["reg_lambda"],
                    params.get("reg_alpha", 0.0), bounds)
                if monotone * (value_right - value_left) < 0:
                    continue
            if pooled_gain_only:
                reg_lambda, reg_alpha = params["reg_lambda"], params.get("reg_alpha", 0.0)
                gain = (phi(left_g.sum(), left_h.sum(), reg_lambda, reg_alpha)
                        + phi(era_g.sum() - left_g.sum(), era_h.sum() - left_h.sum(),
                              reg_lambda, reg_alpha)
                        - phi(era_g.sum(), era_h.sum(), reg_lambda, reg_alpha))
                result = dict(score=gain, gain=gain)
            else:
                result = score_candidate(era_g, era_h, era_c, left_g, left_h, left_c, params,
                                         gradient_variance, bounds)
            result.update(threshold=threshold, missing_left=missing_left)
            found.append(result)
    return found


def first_best(items):
    """The first item with the largest score (ties keep scan order), or None."""
    best = None
    for item in items:
        if best is None or item["score"] > best["score"]:
            best = item
    return best


def allowed_by_interactions(path, sets, n_features):
    """The features a node whose path used ``path`` may split on: the union of
    the sets (lists of feature indices) that hold all of ``path``, a feature of
    no set being a set of its own (docs/des.md §14). ``sets`` None: all."""
    if sets is None:
        return set(range(n_features))
    groups = [set(group) for group in sets]
    groups += [{feature} for feature in range(n_features)
               if not any(feature in group for group in groups)]
    allowed = set()
    for group in groups:
        if path <= group:
            allowed |= group
    return allowed


def grow_tree(X_binned, n_bins, gradients, hessians, row_era, n_eras, rows,
              layer_features, feature_masks, params, pooled_gain_only=False,
              monotone=None, interaction_sets=None):
    """One tree, breadth first, numbered like the engine (children appended
    left then right, in order of their parents). ``feature_masks[d]`` is this
    tree's boolean mask over ``layer_features[d]`` or None.

    ``monotone`` (one -1/0/1 per feature) and ``interaction_sets`` (lists of
    feature indices) are the constraints of docs/des.md §14, followed node by
    node: each node's value bounds and the features used on its path.

    Returns a dict of per-node lists: feature (-1 leaf), threshold_bin,
    missing_left, left_child, right_child, value (Newton value, unshrunk),
    n_samples.
    """
    reg_lambda = params["reg_lambda"]
    tree = {key: [] for key in ("feature", "threshold_bin", "missing_left", "left_child",
                                "right_child", "value", "n_samples", "des_score", "gain")}
    no_bounds = (-np.inf, np.inf)

    def unbounded_value(node_rows):
        sum_g, sum_h = gradients[node_rows].sum(), hessians[node_rows].sum()
        value = newton_value(sum_g, sum_h, reg_lambda, params.get("reg_alpha", 0.0))
        if params.get("max_delta_step", 0) > 0:
            value = float(np.clip(value, -params["max_delta_step"], params["max_delta_step"]))
        return value

    def new_node(node_rows, bounds=no_bounds):
        value = float(np.clip(unbounded_value(node_rows), *bounds))
        for key, item in (("feature", -1), ("threshold_bin", 0), ("missing_left", 0),
                          ("left_child", -1), ("right_child", -1), ("value", value),
                          ("n_samples", len(node_rows)), ("des_score", 0.0), ("gain", 0.0)):
            tree[key].append(item)
        return len(tree["feature"]) - 1

    def children_bounds(bounds, direction, left_rows, right_rows):
        if direction == 0:
            return bounds, bounds
        lower, upper = bounds
        left = float(np.clip(unbounded_value(left_rows), lower, upper))
        right = float(np.clip(unbounded_value(right_rows), lower, upper))
        middle = float(np.clip(0.5 * (left + right), lower, upper))
        if direction > 0:
            return (lower, middle), (middle, upper)
        return (middle, upper), (lower, middle)

    n_features = X_binned.shape[0]
    frontier = [(new_node(np.asarray(rows)), np.asarray(rows), no_bounds, frozenset())]
    for depth in range(params["max_depth"]):
        next_frontier = []
        for node, node_rows, bounds, path in frontier:
            if len(node_rows) < 2 * max(1, params["min_samples_leaf"]):
                continue
            per_feature = []
            node_g = gradients[node_rows]
            variance = max(float(np.mean(node_g * node_g)) - float(np.mean(node_g)) ** 2, 0.0)
            features = layer_features[depth]
            mask = feature_masks[depth]
            allowed = allowed_by_interactions(path, interaction_sets, n_features)
            for position, feature in enumerate(features):
                if mask is not None and not mask[position]:
                    continue
                if feature not in allowed:
                    continue
                width = n_bins[feature] + 1
                hist = histogram(X_binned, feature, node_rows, gradients, hessians,
                                 row_era, n_eras, width)
                direction = 0 if monotone is None else int(monotone[feature])
                best = first_best(candidates(*hist, n_bins[feature], params,
                                             pooled_gain_only, variance, bounds, direction))
                if best is not None:
                    best["feature"] = int(feature)
                    per_feature.append(best)
            best = first_best(per_feature)
            if best is None or not (best["score"] > 0
                                    and best["gain"] > params["min_split_gain"]):
                continue
            bins = X_binned[best["feature"], node_rows].astype(np.int64)
            is_missing = bins == n_bins[best["feature"]]
            left = np.where(is_missing, best["missing_left"], bins <= best["threshold"])
            tree["feature"][node] = best["feature"]
            tree["threshold_bin"][node] = best["threshold"]
            tree["missing_left"][node] = int(best["missing_left"])
            tree["des_score"][node] = best["score"]
            tree["gain"][node] = best["gain"]
            direction = 0 if monotone is None else int(monotone[best["feature"]])
            left_bounds, right_bounds = children_bounds(bounds, direction, node_rows[left],
                                                        node_rows[~left])
            left_node = new_node(node_rows[left], left_bounds)
            right_node = new_node(node_rows[~left], right_bounds)
            tree["left_child"][node] = left_node
            tree["right_child"][node] = right_node
            used = path | {best["feature"]}
            next_frontier += [(left_node, node_rows[left], left_bounds, used),
                              (right_node, node_rows[~left], right_bounds, used)]
        frontier = next_frontier
    return {key: np.asarray(values) for key, values in tree.items()}
