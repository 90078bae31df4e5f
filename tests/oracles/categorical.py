"""A naive NumPy enumeration of the category-set candidates of one node and
feature (packboost/_categorical.pyx's notes), each scored by the DES oracle
of reference.py, and the search that moves one category at a time from the
best of them (``cat_search_steps``): the test oracle of the categorical split
kernel."""

from __future__ import annotations

import numpy as np

from oracles.reference import first_best, score_candidate


def era_robust_ratio(cells, code, cat_smooth, lambda_dro, gradient_variance):
    """cat_order="era": the pooled smoothed ratio shrunk towards 0 by
    lambda_dro times the between-era spread tau of the per-era means
    G_ce / H_ce (weighted by H_ce, less their expected sampling variance)."""
    pooled = cells[:, code].sum(axis=0)
    ratio = pooled[0] / (pooled[1] + cat_smooth)
    rows = (cells[:, code, 2] > 0) & (cells[:, code, 1] > 0)
    if lambda_dro == 0.0 or not rows.any():
        return float(ratio)
    g, h, n = cells[rows, code, 0], cells[rows, code, 1], cells[rows, code, 2]
    mean = g.sum() / h.sum()
    spread = np.sum(h * (g / h - mean) ** 2) / h.sum()
    noise = gradient_variance * np.sum(n / h * (1.0 - h / h.sum())) / h.sum()
    tau2 = spread - noise
    if tau2 <= 0.0:
        return float(ratio)
    return float(np.sign(ratio) * max(abs(ratio) - lambda_dro * np.sqrt(tau2), 0.0))


def category_candidates(cells, n_categories, params, *, max_cat_to_onehot, max_cat_threshold,
                        cat_smooth, min_data_per_group, gradient_variance=0.0,
                        bounds=(-np.inf, np.inf), cat_order="pooled"):
    """Every scored candidate of one (slot, feature), in the kernel's order.

    ``cells`` (n_eras, width, 3): per era and code the sums of g, h and the
    row count; code ``n_categories`` is the missing one. Each candidate is a
    dict with ``score``, ``gain``, ``left`` (the sorted codes sent left, the
    missing one excluded) and ``missing_left``.
    """
    cells = np.asarray(cells, dtype=np.float64)
    present = cells[:, : n_categories + 1, 2].sum(axis=1) > 0
    cells = cells[present]
    pooled = cells[:, :n_categories].sum(axis=0)
    codes = np.flatnonzero(pooled[:, 2] > 0)
    k = len(codes)
    if k <= max_cat_to_onehot:
        sides = [[int(code)] for code in codes]
    else:
        if cat_order == "era":
            noise = gradient_variance if params.get("era_std", "total") == "between" else 0.0
            ratio = np.array([era_robust_ratio(cells, code, cat_smooth, params["lambda_dro"],
                                               noise) for code in codes])
        else:
            ratio = pooled[codes, 0] / (pooled[codes, 1] + cat_smooth)
        ranking = np.lexsort((codes, ratio))
        order, ratio = codes[ranking], ratio[ranking]
        sides = []
        for j in range(1, k):
            left = order[:j]
            if j > max_cat_threshold and k - j > max_cat_threshold:
                continue
            if ratio[j - 1] == ratio[j]:
                continue    # a cut inside a block of tied categories
            left_rows = pooled[left, 2].sum()
            if (left_rows < min_data_per_group
                    or pooled[:, 2].sum() - left_rows < min_data_per_group):
                continue
            sides.append(sorted(int(code) for code in left))
    found = []
    for left in sides:
        found.extend(scored_sides(cells, n_categories, left, params, gradient_variance, bounds))
    return found


def scored_sides(cells, n_categories, left, params, gradient_variance, bounds):
    """The category set ``left`` scored with the missing rows on the left,
    then on the right (only if the node has missing rows), each allowed by
    ``min_samples_leaf`` and ``min_child_weight``. ``cells``: the eras with
    rows only."""
    era_g, era_h, era_c = (cells[:, : n_categories + 1, i].sum(axis=1) for i in range(3))
    missing = cells[:, n_categories]
    min_leaf = max(1, params["min_samples_leaf"])
    found = []
    for missing_left in (True, False):
        if not missing_left and missing[:, 2].sum() == 0:
            continue
        left_sums = cells[:, left].sum(axis=1) + (missing if missing_left else 0.0)
        left_g, left_h, left_c = left_sums[:, 0], left_sums[:, 1], left_sums[:, 2]
        if (left_c.sum() < min_leaf or era_c.sum() - left_c.sum() < min_leaf
                or left_h.sum() < params["min_child_weight"]
                or era_h.sum() - left_h.sum() < params["min_child_weight"]):
            continue
        result = score_candidate(era_g, era_h, era_c, left_g, left_h, left_c, params,
                                 gradient_variance, bounds)
        result.update(left=list(left), missing_left=missing_left)
        found.append(result)
    return found


def category_search(cells, n_categories, params, start, *, search_steps, max_cat_threshold,
                    min_data_per_group, gradient_variance=0.0, bounds=(-np.inf, np.inf),
                    rtol=1e-9):
    """The search from ``start`` (the best prefix candidate): at most
    ``search_steps`` moves, each the candidate that scores highest among the
    sets that move one category with rows across (in code order, the missing
    rows left before right; strictly above the current score, the first such
    on ties), under the prefixes' ``max_cat_threshold`` and
    ``min_data_per_group``.

    Returns (best candidate, near_tie): ``near_tie`` is True when a choice on
    the way was within ``rtol`` of another (the kernel's arithmetic may then
    take the other way)."""
    cells = np.asarray(cells, dtype=np.float64)
    cells = cells[cells[:, : n_categories + 1, 2].sum(axis=1) > 0]
    pooled_rows = cells[:, :n_categories, 2].sum(axis=0)
    codes = np.flatnonzero(pooled_rows > 0)
    k, total_rows = len(codes), pooled_rows.sum()
    best, current, near_tie = start, set(start["left"]), False
    for _ in range(search_steps):
        scores = []
        move = None
        for code in codes:
            left = sorted(current ^ {int(code)})
            size = len(left)
            if size < 1 or size > k - 1 or (size > max_cat_threshold
                                             and k - size > max_cat_threshold):
                continue
            left_rows = pooled_rows[left].sum()
            if left_rows < min_data_per_group or total_rows - left_rows < min_data_per_group:
                continue
            for candidate in scored_sides(cells, n_categories, left, params, gradient_variance,
                                          bounds):
                scores.append(candidate["score"])
                if candidate["score"] > (move or best)["score"]:
                    move = candidate
        top = (move or best)["score"]
        near = [score for score in scores + [best["score"]]
                if np.isclose(score, top, rtol=rtol, atol=1e-12)]
        near_tie = near_tie or len(near) > 1
        if move is None:
            break
        best, current = move, set(move["left"])
    return best, near_tie


def best_category_candidate(cells, n_categories, params, *, cat_search_steps=0, **options):
    """The first candidate with the highest score (None without any), then
    the search from it when ``cat_search_steps`` > 0 and the node has more
    than ``max_cat_to_onehot`` categories."""
    return best_category_search(cells, n_categories, params, cat_search_steps=cat_search_steps,
                                **options)[0]


def best_category_search(cells, n_categories, params, *, cat_search_steps=0, **options):
    """(best candidate, near_tie) of :func:`best_category_candidate`:
    ``near_tie`` as :func:`category_search`'s, False without a search."""
    best = first_best(category_candidates(cells, n_categories, params, **options))
    cells = np.asarray(cells, dtype=np.float64)
    k = int((cells[:, :n_categories, 2].sum(axis=0) > 0).sum())
    if best is None or cat_search_steps <= 0 or k <= options["max_cat_to_onehot"]:
        return best, False
    return category_search(cells, n_categories, params, best, search_steps=cat_search_steps,
                           max_cat_threshold=options["max_cat_threshold"],
                           min_data_per_group=options["min_data_per_group"],
                           gradient_variance=options.get("gradient_variance", 0.0),
                           bounds=options.get("bounds", (-np.inf, np.inf)))
