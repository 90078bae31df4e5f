"""A naive NumPy enumeration of the category-set candidates of one node and
feature (packboost/_categorical.pyx's notes), each scored by the DES oracle
of reference.py: the test oracle of the categorical split kernel."""

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
    era_g, era_h, era_c = (cells[:, : n_categories + 1, i].sum(axis=1) for i in range(3))
    pooled = cells[:, :n_categories].sum(axis=0)
    codes = np.flatnonzero(pooled[:, 2] > 0)
    k = len(codes)
    missing = cells[:, n_categories]
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
    min_leaf = max(1, params["min_samples_leaf"])
    found = []
    for left in sides:
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
            result.update(left=left, missing_left=missing_left)
            found.append(result)
    return found


def best_category_candidate(cells, n_categories, params, **options):
    """The first candidate with the highest score (None without any)."""
    return first_best(category_candidates(cells, n_categories, params, **options))
