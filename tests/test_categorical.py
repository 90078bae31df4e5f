"""Categorical features: the split kernel against its NumPy oracle, routing,
prediction, model files, TreeSHAP and the inputs that carry categories."""

import itertools

import numpy as np
import pytest

from packboost import PackBoostRegressor, _categorical, load_model
from packboost.grower import pack_category_words, unpack_category_words

from conftest import DEFAULT_SPLIT_PARAMS
from oracles.categorical import (
    best_category_candidate,
    best_category_search,
    category_candidates,
    scored_sides,
)

OPTIONS = dict(max_cat_to_onehot=4, max_cat_threshold=3, cat_smooth=2.0, min_data_per_group=3)


def random_cells(rng, n_eras, n_categories, *, empty_eras=True, missing=True, scale=1.0):
    """Per-era category cells of one slot: integer counts, grid-valued sums."""
    width = n_categories + 1
    counts = rng.integers(0, 6, size=(n_eras, width)).astype(np.float64)
    counts[:, rng.random(width) < 0.2] = 0.0            # categories without rows
    if empty_eras and n_eras > 1:
        counts[rng.random(n_eras) < 0.25] = 0.0          # eras without rows
    if not missing:
        counts[:, n_categories] = 0.0
    effect = rng.normal(size=width) * scale
    sign = np.where(rng.random(n_eras) < 0.3, -1.0, 1.0)  # effects that flip in some eras
    g = np.round((counts * (sign[:, None] * effect[None, :])
                  + rng.normal(size=counts.shape) * np.sqrt(counts)) * 64) / 64
    h = counts * rng.choice([1.0, 0.5], size=counts.shape)
    return np.stack([g, h, counts], axis=-1)


def kernel_best(cells_by_slot, n_categories, params, options, variance=None, bounds=None,
                cat_order="pooled", search_steps=0):
    hist = np.ascontiguousarray(np.stack(cells_by_slot)[None])  # one feature
    n_slots = hist.shape[1]
    return _categorical.best_category_splits(
        hist, np.array([n_categories], dtype=np.int32), np.ones(n_slots, dtype=np.uint8),
        np.zeros(n_slots, dtype=np.int32), np.ones((1, 1), dtype=np.uint8),
        np.zeros(n_slots) if variance is None else variance, dict(params),
        options["max_cat_to_onehot"], options["max_cat_threshold"], options["cat_smooth"],
        options["min_data_per_group"], 2, slot_bounds=bounds,
        order_by_eras=cat_order == "era", search_steps=search_steps)


def left_set_of(candidate, cells, n_categories):
    """The kernel's left set of an oracle candidate: categories without rows
    in the node join the missing side."""
    flags = np.zeros(cells.shape[1], dtype=np.uint8)
    flags[candidate["left"]] = 1
    if candidate["missing_left"]:
        absent = cells[:, :n_categories, 2].sum(axis=0) == 0
        flags[:n_categories][absent] = 1
    return flags


PARAM_CASES = [
    dict(DEFAULT_SPLIT_PARAMS),
    dict(DEFAULT_SPLIT_PARAMS, era_gain="newton", lambda_dir=0.0),
    dict(DEFAULT_SPLIT_PARAMS, era_weighting="count", era_alpha=1.0, era_std="between"),
    dict(DEFAULT_SPLIT_PARAMS, lambda_dro=0.0, lambda_dir=0.0, reg_alpha=0.5),
    dict(DEFAULT_SPLIT_PARAMS, min_samples_leaf=4, min_child_weight=2.0, dir_tanh_scale=0.0),
]


@pytest.mark.parametrize("search_steps", [0, 8])
@pytest.mark.parametrize("cat_order", ["pooled", "era"])
@pytest.mark.parametrize("case", range(len(PARAM_CASES)))
@pytest.mark.parametrize("n_eras,n_categories", [(1, 1), (1, 3), (3, 2), (5, 4), (7, 5),
                                                  (4, 9), (9, 14)])
def test_best_category_split_matches_the_oracle(case, n_eras, n_categories, cat_order,
                                                search_steps):
    params = PARAM_CASES[case]
    rng = np.random.default_rng(1000 * case + 10 * n_eras + n_categories)
    for options in (OPTIONS, dict(OPTIONS, max_cat_to_onehot=1, max_cat_threshold=64,
                                  min_data_per_group=1)):
        slots = [random_cells(rng, n_eras, n_categories, missing=bool(s % 2))
                 for s in range(6)]
        variance = rng.random(len(slots)) * 2.0
        found = kernel_best(slots, n_categories, params, options, variance,
                            cat_order=cat_order, search_steps=search_steps)
        for slot, cells in enumerate(slots):
            oracle, near_tie = best_category_search(
                cells, n_categories, params, gradient_variance=variance[slot],
                cat_order=cat_order, cat_search_steps=search_steps, **options)
            if oracle is None:
                assert found["column"][slot] == -1
                continue
            assert found["column"][slot] == 0
            chosen = found["left_categories"][slot]
            expected = left_set_of(oracle, cells, n_categories)
            if not np.array_equal(chosen, expected) or (
                    found["missing_left"][slot] != oracle["missing_left"]):
                # Only a proven tie may resolve otherwise: the kernel's own
                # candidate scores, by the oracle, what the kernel says and
                # what the oracle's best does (a prefix), or the search met a
                # near tie on its way.
                assert near_tie or np.isclose(found["score"][slot], oracle["score"],
                                              rtol=1e-9)
                present = cells[:, : n_categories + 1, 2].sum(axis=1) > 0
                left = [int(c) for c in np.flatnonzero(chosen[:n_categories])
                        if cells[:, c, 2].sum() > 0]
                own = [c for c in scored_sides(cells[present], n_categories, left, params,
                                               variance[slot], (-np.inf, np.inf))
                       if c["missing_left"] == found["missing_left"][slot]]
                assert own and np.isclose(own[0]["score"], found["score"][slot], rtol=1e-9)
                continue
            np.testing.assert_allclose(found["score"][slot], oracle["score"], rtol=1e-9,
                                       atol=1e-12)
            np.testing.assert_allclose(found["gain"][slot], oracle["gain"], rtol=1e-9,
                                       atol=1e-12)


def test_the_search_leaves_the_prefixes_for_a_higher_score():
    # Random cells whose best set is no prefix of either order: the search
    # moves categories across until no move scores higher, and lands where
    # the oracle's search does.
    params = dict(DEFAULT_SPLIT_PARAMS, lambda_dro=1.0, lambda_dir=0.0)
    options = dict(max_cat_to_onehot=1, max_cat_threshold=64, cat_smooth=2.0,
                   min_data_per_group=1)
    rng = np.random.default_rng(11)
    moved = 0
    for _ in range(20):
        cells = random_cells(rng, 9, 14, scale=2.0)
        prefixes = category_candidates(cells, 14, params, cat_order="era", **options)
        if not prefixes:
            continue
        best_prefix = best_category_candidate(cells, 14, params, cat_order="era", **options)
        found = kernel_best([cells], 14, params, options, cat_order="era", search_steps=14)
        oracle = best_category_candidate(cells, 14, params, cat_order="era",
                                         cat_search_steps=14, **options)
        assert found["score"][0] >= best_prefix["score"]
        np.testing.assert_allclose(found["score"][0], oracle["score"], rtol=1e-9)
        np.testing.assert_array_equal(found["left_categories"][0],
                                      left_set_of(oracle, cells, 14))
        if found["score"][0] > best_prefix["score"]:
            moved += 1
            assert all(c["left"] != oracle["left"] for c in prefixes)
            # no single move scores higher: a local optimum of the DES score
            once_more = best_category_candidate(cells, 14, params, cat_order="era",
                                                cat_search_steps=15, **options)
            assert once_more["score"] == oracle["score"]
    assert moved >= 3


@pytest.mark.parametrize("max_cat_threshold, min_data_per_group", [(2, 1), (64, 12), (3, 8)])
def test_the_search_keeps_the_set_limits(max_cat_threshold, min_data_per_group):
    options = dict(max_cat_to_onehot=2, max_cat_threshold=max_cat_threshold, cat_smooth=1.0,
                   min_data_per_group=min_data_per_group)
    params = dict(DEFAULT_SPLIT_PARAMS, lambda_dro=0.5)
    rng = np.random.default_rng(max_cat_threshold + min_data_per_group)
    slots = [random_cells(rng, 6, 12, missing=False) for _ in range(12)]
    found = kernel_best(slots, 12, params, options, search_steps=12)
    assert (found["column"] == 0).sum() >= 6
    for slot, cells in enumerate(slots):
        if found["column"][slot] < 0:
            continue
        rows = cells[:, :12, 2].sum(axis=0)
        present = rows > 0
        left = found["left_categories"][slot][:12].astype(bool) & present
        size = int(left.sum())
        assert 1 <= size <= present.sum() - 1
        assert min(size, present.sum() - size) <= max_cat_threshold
        assert rows[left].sum() >= min_data_per_group
        assert rows[present & ~left].sum() >= min_data_per_group


def test_search_steps_parameter_reaches_the_kernel_and_the_model_file(tmp_path):
    X, y, era, _ = era_table(seed=3)
    base = dict(n_estimators=6, max_depth=3, random_state=0, n_jobs=1, min_data_per_group=20,
                max_cat_to_onehot=2)
    prefixes = PackBoostRegressor(**base, cat_search_steps=0).fit(X, y, era=era)
    searched = PackBoostRegressor(**base, cat_search_steps=6).fit(X, y, era=era)
    assert PackBoostRegressor().get_params()["cat_search_steps"] == 0
    assert not np.array_equal(prefixes.ensemble_.nodes["category_words"],
                              searched.ensemble_.nodes["category_words"])
    path = tmp_path / "searched.json"
    searched.save_model(path)
    loaded = load_model(path)
    assert loaded.get_params()["cat_search_steps"] == 6
    np.testing.assert_array_equal(loaded.predict(X), searched.predict(X))
    with pytest.raises(ValueError, match="cat_search_steps"):
        PackBoostRegressor(cat_search_steps=-1).fit(X, y, era=era)


def test_tied_categories_are_never_cut_apart():
    # cat_order="era": categories 0, 1, 2 flip between the two eras (their
    # shrunk ratios are all 0); 4 is low, 5 and 3 high in both. The order is
    # 4 | 0 1 2 | 5 | 3, and no prefix cuts the tied block.
    stable, flip = np.array([0.1, -0.1, 0.05, 1.0, -1.0, 0.5]), np.array(
        [0.5, 0.6, 0.4, 0.1, 0.1, 0.0])
    cells = np.zeros((2, 7, 3))
    cells[:, :6, 2] = cells[:, :6, 1] = 10.0
    cells[0, :6, 0], cells[1, :6, 0] = 10 * (stable + flip), 10 * (stable - flip)
    params = dict(DEFAULT_SPLIT_PARAMS, lambda_dro=1.0, min_samples_leaf=1)
    options = dict(max_cat_to_onehot=1, max_cat_threshold=64, cat_smooth=0.0,
                   min_data_per_group=1)
    lefts = [c["left"] for c in category_candidates(cells, 6, params, cat_order="era",
                                                    **options)]
    assert lefts == [[4], [0, 1, 2, 4], [0, 1, 2, 4, 5]]
    found = kernel_best([cells], 6, params, options, cat_order="era")
    chosen = sorted(np.flatnonzero(found["left_categories"][0][:6]).tolist())
    assert chosen in lefts or sorted(set(range(6)) - set(chosen)) in lefts


def test_era_order_counts_sampling_noise_as_no_disagreement():
    # Two rows per (era, category): each category's per-era mean is its
    # effect +-0.5 (alternating eras), a spread of 0.25 that two rows with
    # gradient variance 1 explain as noise (N = (1 - 1/8) / 2). With
    # era_std="between" the era order is then the pooled one; counting the
    # spread as disagreement (era_std="total") shrinks the four small
    # effects to one tied block that no prefix may cut.
    effect = np.array([-0.9, -0.3, -0.1, 0.1, 0.3, 0.9])
    sign = np.where(np.arange(8) % 2 == 0, 1.0, -1.0)
    cells = np.zeros((8, 7, 3))
    cells[:, :6, 2] = cells[:, :6, 1] = 2.0
    cells[:, :6, 0] = 2.0 * (effect[np.newaxis, :] + 0.5 * sign[:, np.newaxis])
    options = dict(max_cat_to_onehot=1, max_cat_threshold=64, cat_smooth=0.0,
                   min_data_per_group=1)

    def lefts(era_std, cat_order, variance):
        params = dict(DEFAULT_SPLIT_PARAMS, lambda_dro=1.0, era_std=era_std)
        return [c["left"] for c in category_candidates(cells, 6, params, cat_order=cat_order,
                                                      gradient_variance=variance, **options)]

    pooled = [[0], [0, 1], [0, 1, 2], [0, 1, 2, 3], [0, 1, 2, 3, 4]]
    assert lefts("total", "pooled", 1.0) == pooled
    assert lefts("between", "era", 1.0) == pooled
    assert lefts("total", "era", 1.0) == [[0], [0, 1, 2, 3, 4]]
    params = dict(DEFAULT_SPLIT_PARAMS, lambda_dro=1.0, era_std="between")
    found = kernel_best([cells], 6, params, options, np.array([1.0]), cat_order="era")
    best = best_category_candidate(cells, 6, params, gradient_variance=1.0, cat_order="era",
                                   **options)
    assert found["column"][0] == 0
    np.testing.assert_allclose(found["score"][0], best["score"], rtol=1e-9)


def test_a_set_that_helps_only_some_eras_loses_like_a_threshold():
    """Category 0 pulls up in half of the eras and down in the others; category
    1 pulls up in every era, less. DES takes {1}; the pooled gain takes {0}."""
    n_eras = 8
    cells = np.zeros((n_eras, 4, 3))
    for era in range(n_eras):
        flip = 1.0 if era % 2 else -1.0
        cells[era, 0] = [-6.0 * flip * 10, 10, 10]  # strong, flips
        cells[era, 1] = [-1.0 * 10, 10, 10]         # weak, steady
        cells[era, 2] = [1.0 * 10, 10, 10]
    cells[0, 0, 0] = -60.5  # pooled: category 0 still pulls up a little
    params = dict(DEFAULT_SPLIT_PARAMS, lambda_dro=1.0, lambda_dir=0.0)
    pooled_only = dict(params, lambda_dro=0.0)
    options = dict(OPTIONS, max_cat_to_onehot=8)
    robust = kernel_best([cells], 3, params, options)
    plain = kernel_best([cells], 3, pooled_only, options)
    assert robust["left_categories"][0][:3].tolist() in ([0, 1, 0], [1, 0, 1])
    oracle = best_category_candidate(cells, 3, params, **options)
    assert oracle["left"] in ([1], [0, 2])
    assert plain["score"][0] > 0
    by_gain = best_category_candidate(cells, 3, dict(pooled_only), **options)
    assert by_gain["gain"] >= oracle["gain"]


def test_bounded_slots_score_with_clipped_values():
    rng = np.random.default_rng(5)
    cells = random_cells(rng, 4, 6)
    bounds = np.array([[-0.05, 0.05]])
    found = kernel_best([cells], 6, DEFAULT_SPLIT_PARAMS, OPTIONS, bounds=bounds)
    oracle = best_category_candidate(cells, 6, DEFAULT_SPLIT_PARAMS, bounds=(-0.05, 0.05),
                                     **OPTIONS)
    np.testing.assert_allclose(found["score"][0], oracle["score"], rtol=1e-9, atol=1e-12)


def test_histograms_sum_each_slot_rows_per_era_and_code():
    rng = np.random.default_rng(2)
    n_rows, pack_size, n_eras = 301, 3, 4
    X_binned = rng.integers(0, 6, size=(2, n_rows)).astype(np.uint8)
    row_era = np.sort(rng.integers(0, n_eras, n_rows)).astype(np.int32)
    node_of_row = rng.integers(-3, 4, size=(n_rows, pack_size)).astype(np.int32)
    slot_tree = np.array([0, 0, 1, 1, 2, 2, 2], dtype=np.int32)
    # a tree's rows only in its own slots
    for tree in range(pack_size):
        own = np.flatnonzero(slot_tree == tree)
        codes = node_of_row[:, tree]
        node_of_row[:, tree] = np.where(codes >= 0, own[codes % len(own)], codes)
    slot_open = np.array([1, 1, 0, 1, 1, 1, 0], dtype=np.uint8)
    g, h = np.round(rng.normal(size=n_rows) * 32) / 32, rng.random(n_rows).round(3)
    hist = _categorical.category_histograms(X_binned, np.array([1], dtype=np.int32),
                                            node_of_row, slot_tree, slot_open, g, h, row_era,
                                            n_eras, 7, 2)
    expected = np.zeros((len(slot_tree), n_eras, 7, 3))
    for row, tree in itertools.product(range(n_rows), range(pack_size)):
        slot = node_of_row[row, tree]
        if slot >= 0 and slot_open[slot]:
            expected[slot, row_era[row], X_binned[1, row]] += [g[row], h[row], 1]
    np.testing.assert_allclose(hist[0], expected, rtol=1e-12, atol=1e-12)


def test_category_words_round_trip():
    rng = np.random.default_rng(3)
    flags = (rng.random((5, 70)) < 0.4).astype(np.uint8)
    words = pack_category_words(flags, 3)
    assert words.dtype == np.uint32 and words.shape == (5, 3)
    np.testing.assert_array_equal(unpack_category_words(words, 70), flags)
    assert words[0, 0] == sum(int(flags[0, c]) << c for c in range(32))


# ----------------------------------------------------------------------------- whole fits


def era_table(seed=0, n_rows=3000, n_eras=15, pandas=True):
    import pandas as pd

    rng = np.random.default_rng(seed)
    sector = rng.integers(0, 9, n_rows)
    era = np.repeat(np.arange(n_eras), n_rows // n_eras)
    x = rng.normal(size=n_rows)
    y = np.where(np.isin(sector, [1, 4, 6]), 1.0, -0.5) + 0.3 * x + rng.normal(size=n_rows)
    labels = np.array([f"s{k}" for k in range(9)], dtype=object)[sector]
    labels[::37] = None
    X = pd.DataFrame({"sector": pd.Categorical(labels), "x": x})
    return X, y, era, sector


def fitted(**params):
    X, y, era, _ = era_table()
    settings = dict(n_estimators=8, max_depth=3, random_state=0, n_jobs=1,
                    min_data_per_group=20)
    settings.update(params)
    return PackBoostRegressor(**settings).fit(X, y, era=era), X, y, era


def test_fit_splits_on_the_category_and_predicts_its_training_scores():
    model, X, y, era = fitted()
    ensemble = model.ensemble_
    nodes = ensemble.nodes
    by_set = nodes["threshold_bin"] == -1
    assert by_set.any() and np.all(nodes["feature"][by_set] == 0)
    assert model.category_encoder_.categories[0] == [f"s{k}" for k in range(9)]
    # Training scores as the booster added them (an eval set on the training
    # rows) equal a prediction that walks the trees.
    eval_model = PackBoostRegressor(n_estimators=8, max_depth=3, random_state=0, n_jobs=1,
                                    min_data_per_group=20)
    eval_model.fit(X, y, era=era, eval_set=[(X, y)], eval_metric="rmse")
    rmse = np.sqrt(np.mean((eval_model.predict(X) - y) ** 2))
    assert np.isclose(eval_model.evals_result_["valid_0"]["rmse"][-1], rmse, rtol=1e-12)
    np.testing.assert_array_equal(eval_model.predict(X), model.predict(X))


def test_a_table_of_categorical_features_only():
    # Every candidate feature categorical: no threshold split to compare with.
    model, X, y, era = fitted()
    only = PackBoostRegressor(n_estimators=4, max_depth=3, random_state=0, n_jobs=1,
                              min_data_per_group=20).fit(X[["sector"]], y, era=era)
    nodes = only.ensemble_.nodes
    assert np.all(nodes["threshold_bin"][nodes["feature"] >= 0] == -1)
    assert np.any(nodes["feature"] == 0)
    np.testing.assert_array_equal(only.standalone_predictor().predict(X[["sector"]]),
                                  only.predict(X[["sector"]]))


def test_unseen_categories_and_nan_take_the_missing_side():
    import pandas as pd

    model, X, _, _ = fitted()
    unseen = X.assign(sector=pd.Categorical(["never-seen"] * len(X)))
    missing = X.assign(sector=pd.Categorical([None] * len(X), categories=["s0"]))
    np.testing.assert_array_equal(model.predict(unseen), model.predict(missing))
    # by hand: NaN codes through the trees
    codes = model.category_encoder_.transform(missing).values
    assert np.isnan(codes[:, 0]).all()


def test_categories_map_by_label_not_by_code():
    import pandas as pd

    model, X, _, _ = fitted()
    reordered = X.assign(sector=X["sector"].cat.reorder_categories(
        list(reversed(X["sector"].cat.categories))))
    np.testing.assert_array_equal(model.predict(reordered), model.predict(X))
    as_strings = X.assign(sector=X["sector"].astype(object))
    np.testing.assert_array_equal(model.predict(as_strings), model.predict(X))
    del pd


def test_integer_codes_named_by_categorical_features():
    X, y, era, sector = era_table()
    matrix = np.column_stack([sector, X["x"].to_numpy()])
    model = PackBoostRegressor(n_estimators=8, max_depth=3, random_state=0, n_jobs=1,
                               min_data_per_group=20, categorical_features=[0])
    model.fit(matrix, y, era=era)
    assert np.any(model.ensemble_.nodes["threshold_bin"] == -1)
    assert model.category_encoder_.categories[0] == list(range(9))
    unseen = matrix.copy()
    unseen[:, 0] = 99
    missing = matrix.copy()
    missing[:, 0] = np.nan
    np.testing.assert_array_equal(model.predict(unseen), model.predict(missing))


def test_polars_and_arrow_categoricals_give_the_pandas_model():
    pl = pytest.importorskip("polars")
    pa = pytest.importorskip("pyarrow")
    model, X, y, era = fitted()
    strings = X["sector"].astype(object).where(X["sector"].notna(), None).tolist()
    table = pa.table({"sector": pa.array(strings).dictionary_encode(),
                      "x": pa.array(X["x"].to_numpy())})
    np.testing.assert_array_equal(model.predict(table), model.predict(X))
    frame = pl.DataFrame({"sector": pl.Series(strings, dtype=pl.Categorical),
                          "x": X["x"].to_numpy()})
    np.testing.assert_array_equal(model.predict(frame), model.predict(X))
    settings = dict(n_estimators=8, max_depth=3, random_state=0, n_jobs=1,
                    min_data_per_group=20)
    from_arrow = PackBoostRegressor(**settings).fit(table, y, era=era)
    # the dictionary's own order (here: of first appearance)
    assert sorted(from_arrow.category_encoder_.categories[0]) == [f"s{k}" for k in range(9)]
    assert np.any(from_arrow.ensemble_.nodes["threshold_bin"] == -1)


def test_non_numeric_column_error_names_the_column_and_the_way_out():
    X, y, _, _ = era_table()
    with pytest.raises(ValueError, match=r"non-numeric column 'id'.*drop it, or pass it as a "
                                         r"categorical feature \(categorical_features=\['id'\]"):
        PackBoostRegressor(n_estimators=1).fit(X.assign(id="row"), y)


def test_monotone_on_a_categorical_feature_is_refused():
    X, y, _, _ = era_table()
    with pytest.raises(ValueError, match="monotone_constraints.*categorical feature 'sector'"):
        PackBoostRegressor(n_estimators=1, monotone_constraints={"sector": 1}).fit(X, y)
    # a constraint on another feature is fine, and bounds the category splits too
    model = PackBoostRegressor(n_estimators=4, max_depth=3, monotone_constraints={"x": 1},
                               random_state=0, n_jobs=1, min_data_per_group=20).fit(X, y)
    grid = X.iloc[:50].copy()
    low, high = grid.assign(x=-1.0), grid.assign(x=1.0)
    assert np.all(model.predict(high) >= model.predict(low) - 1e-12)


def test_model_file_round_trip(tmp_path):
    model, X, _, _ = fitted()
    path = tmp_path / "model.pb"
    model.save_model(path)
    loaded = load_model(path)
    np.testing.assert_array_equal(loaded.predict(X), model.predict(X))
    assert loaded.category_encoder_.categories == model.category_encoder_.categories


def test_forged_category_sets_are_refused(tmp_path):
    from packboost import model_file
    from packboost.model_file import ModelFileError

    model, _, _, _ = fitted()
    path = tmp_path / "model.pb"
    model.save_model(path)
    metadata, arrays = model_file.read_model_file(path)
    words = arrays["node_category_words"].copy()
    node = int(np.flatnonzero(arrays["node_threshold_bin"] == -1)[0])
    words[node, 0] |= np.uint32(1 << 20)  # a code past the feature's 9 categories
    forged = dict(arrays, node_category_words=words)
    model_file.write_model_file(tmp_path / "forged.pb", metadata, forged)
    with pytest.raises(ModelFileError, match="category set"):
        load_model(tmp_path / "forged.pb")
    numeric = dict(arrays)
    feature = numeric["node_feature"].copy()
    feature[node] = 1  # a set split on the numeric feature
    model_file.write_model_file(tmp_path / "numeric.pb", metadata,
                                dict(numeric, node_feature=feature))
    with pytest.raises(ModelFileError, match="categorical"):
        load_model(tmp_path / "numeric.pb")


def test_shap_adds_up_and_matches_the_reference():
    from oracles.shap_reference import shapley_contributions

    model, X, _, _ = fitted()
    rows = X.iloc[:200]
    contributions = model.predict(rows, pred_contrib=True)
    np.testing.assert_allclose(contributions.sum(axis=1), model.predict(rows),
                               rtol=1e-9, atol=1e-9)
    codes = model.category_encoder_.transform(rows.iloc[:12]).values
    assert np.isnan(codes[0, 0])  # a missing category among them
    ensemble = model.ensemble_
    expected = shapley_contributions(ensemble.nodes, ensemble.tree_roots(),
                                     ensemble.base_score, codes)
    np.testing.assert_allclose(contributions[:12], expected, rtol=1e-9, atol=1e-12)


def test_standalone_predictor_matches_predict():
    import pickle

    model, X, _, _ = fitted()
    predictor = pickle.loads(pickle.dumps(model.standalone_predictor()))
    np.testing.assert_array_equal(predictor.predict(X), model.predict(X))


def test_importance_counts_category_splits():
    model, _, _, _ = fitted()
    splits = model.get_feature_importance("split")
    assert splits[0] == np.sum(model.ensemble_.nodes["threshold_bin"] == -1)
    gains = model.get_feature_importance("gain")
    assert np.isclose(gains[0], model.ensemble_.nodes["gain"][
        model.ensemble_.nodes["threshold_bin"] == -1].sum())


def test_a_categorical_model_predicts_on_the_cpu_whatever_the_device():
    # The GPU predictor walks thresholds, not category sets: device='cuda'
    # predicts such a model on the CPU (no GPU needed).
    from packboost import backends

    model, X, _, _ = fitted()
    codes = model.category_encoder_.transform(X).values
    np.testing.assert_array_equal(backends.predict_raw("cuda", model.ensemble_, codes, 1),
                                  model.ensemble_.predict_raw(codes, 1))


def test_shap_by_the_recursive_path_matches_the_tables(monkeypatch):
    from packboost import _contributions

    model, X, _, _ = fitted()
    rows = X.iloc[:60]
    tabled = model.predict(rows, pred_contrib=True)
    monkeypatch.setattr(_contributions, "MAX_TABLED_PATH_FEATURES", 0)
    recursive = model.predict(rows, pred_contrib=True)
    np.testing.assert_allclose(recursive, tabled, rtol=1e-9, atol=1e-12)


def test_nullable_and_string_columns_and_continued_training():
    import pandas as pd

    X, y, era, _ = era_table()
    nullable = X.assign(count=pd.array(np.arange(len(X)) % 7, dtype="Int8"),
                        tag=pd.array(["a", None, "b"] * (len(X) // 3), dtype="string"))
    nullable.loc[::11, "count"] = pd.NA
    model = PackBoostRegressor(n_estimators=4, max_depth=3, random_state=0, n_jobs=1,
                               min_data_per_group=20, categorical_features=["tag"])
    model.fit(nullable, y, era=era)
    assert model.category_encoder_.categories[1] == ["a", "b"]
    np.testing.assert_array_equal(model.standalone_predictor().predict(nullable),
                                  model.predict(nullable))
    numeric = PackBoostRegressor(n_estimators=2, random_state=0).fit(X[["x"]], y)
    with pytest.raises(ValueError, match="init_model was trained without categorical"):
        PackBoostRegressor(n_estimators=2).fit(X, y, init_model=numeric)
    # continuing a categorical model reuses its categories
    more = PackBoostRegressor(n_estimators=2, max_depth=3, random_state=1,
                              min_data_per_group=20, categorical_features=["tag"])
    more.fit(nullable, y, era=era, init_model=model)
    assert more.category_encoder_ is model.category_encoder_
    assert more.ensemble_.n_rounds == 6
