"""Categorical features on the Dask estimators (docs/distributed.md,
"Categorical features"): categories learned from every partition, per-era
category cells gathered from every shard, and the model the local fit's, bit
for bit."""

import numpy as np
import pytest

distributed = pytest.importorskip("distributed")
da = pytest.importorskip("dask.array")
dd = pytest.importorskip("dask.dataframe")
pd = pytest.importorskip("pandas")

from packboost import PackBoostRegressor, _categories  # noqa: E402
from packboost.dask import DaskPackBoostRegressor  # noqa: E402

from conftest import assert_same_model  # noqa: E402

PARAMS = dict(n_estimators=4, max_depth=3, min_samples_leaf=5, random_state=2, n_jobs=1,
              min_data_per_group=5)
# A Dask test that hangs fails instead (tests/conftest.py).
pytestmark = pytest.mark.usefixtures("fail_instead_of_hanging")


def era_table(seed=0, n_rows=1500, n_eras=10):
    """A categorical driver whose effect flips in some eras, a category only
    the last eras have (one shard's), a declared category no row has,
    missing labels, and two numeric features; rows shuffled across eras."""
    rng = np.random.default_rng(seed)
    era = np.sort(rng.integers(0, n_eras, n_rows))
    sector = rng.integers(0, 8, n_rows)
    sector[(era >= n_eras - 2) & (rng.random(n_rows) < 0.3)] = 8     # late eras only
    flip = np.where(np.isin(era, [2, 5]), -1.0, 1.0)
    x = rng.normal(size=(n_rows, 2))
    y = (flip * np.where(np.isin(sector, [1, 4, 6, 8]), 1.0, -0.5) + 0.3 * x[:, 0]
         + rng.normal(size=n_rows))
    labels = np.array([f"s{k}" for k in range(9)], dtype=object)[sector]
    labels[rng.random(n_rows) < 0.05] = None
    frame = pd.DataFrame({
        "x0": x[:, 0],
        "sector": pd.Categorical(labels, categories=[f"s{k}" for k in range(10)]),
        "x1": x[:, 1]})
    perm = rng.permutation(n_rows)
    return frame.iloc[perm].reset_index(drop=True), y[perm], era[perm], sector[perm]


def _dask_fit(client, params, X, y, era, npartitions=3, **fit_args):
    model = DaskPackBoostRegressor(**params)
    model.client = client
    if isinstance(X, pd.DataFrame):
        frame = X.assign(era=era)
        model.fit(dd.from_pandas(frame, npartitions=npartitions),
                  dd.from_pandas(pd.Series(y), npartitions=npartitions), era="era", **fit_args)
    else:
        chunks = -(-len(y) // npartitions)
        model.fit(da.from_array(X, chunks=(chunks, -1)), da.from_array(y, chunks=chunks),
                  era=da.from_array(era, chunks=chunks), **fit_args)
    return model


@pytest.mark.parametrize("extra", [
    dict(),                                                       # default DES
    dict(lambda_dir=0.5, lambda_dro=0.3, era_gain="newton"),
    dict(max_cat_to_onehot=16),                                   # one against the rest
    dict(cat_order="era", era_weighting="count", era_alpha=2.0),
    dict(cat_search_steps=6, max_cat_to_onehot=2),                # the search beyond prefixes
    dict(era_subsample=0.7, row_subsample=0.8, layer_feature_fraction=0.7),
    # constraints beside the category sets (monotone on a numeric feature)
    dict(monotone_constraints=[1, 0, 0], interaction_constraints=[["x0", "sector"], ["x1"]]),
])
def test_pandas_category_column_is_the_local_fit(client, extra, era_placement):
    X, y, era, _ = era_table()
    params = {**PARAMS, **extra}
    local = PackBoostRegressor(**params).fit(X, y, era=era)
    model = _dask_fit(client, params, X, y, era)
    nodes = local.ensemble_.nodes
    assert np.any(nodes["threshold_bin"] == -1)          # it split by a category set
    assert model.category_encoder_.categories == local.category_encoder_.categories
    assert_same_model(local, model)
    np.testing.assert_array_equal(model.ensemble_.nodes["category_words"],
                                  nodes["category_words"])
    unseen = X.assign(sector=pd.Categorical(["never-seen"] * len(X)))
    np.testing.assert_array_equal(model.predict(unseen), local.predict(unseen))
    features = dd.from_pandas(X, npartitions=2)
    np.testing.assert_array_equal(model.predict(features).compute(), local.predict(X))


def test_integer_codes_whose_categories_differ_between_partitions(client):
    # Sorted rows: each partition sees other categories; the union is the
    # local fit's sorted distinct values.
    X, y, era, sector = era_table(seed=1)
    order = np.argsort(sector, kind="stable")
    matrix = np.column_stack([X["x0"], np.where(X["sector"].isna(), np.nan, sector),
                              X["x1"]])[order]
    y, era = y[order], era[order]
    params = {**PARAMS, "categorical_features": [1]}
    local = PackBoostRegressor(**params).fit(matrix, y, era=era)
    model = _dask_fit(client, params, matrix, y, era, npartitions=4)
    assert model.category_encoder_.categories == [list(range(9))]
    assert_same_model(local, model)


def test_only_categorical_features_one_era_and_continued_training(client):
    X, y, era, _ = era_table(seed=2, n_rows=400, n_eras=6)
    only = X[["sector"]]
    local = PackBoostRegressor(**PARAMS).fit(only, y, era=era)
    assert_same_model(local, _dask_fit(client, PARAMS, only, y, era))
    # one era: a single shard (the CPU backend runs it)
    single = np.zeros(len(y), dtype=np.int64)
    local = PackBoostRegressor(**PARAMS).fit(X, y, era=single)
    assert_same_model(local, _dask_fit(client, PARAMS, X, y, single))
    # continued: the first model's categories, whatever the new rows hold
    first = PackBoostRegressor(**PARAMS).fit(X, y, era=era)
    rows = X["sector"] != "s8"
    local = PackBoostRegressor(**PARAMS).fit(X[rows], y[rows], era=era[rows],
                                             init_model=first)
    model = _dask_fit(client, PARAMS, X[rows].reset_index(drop=True), y[rows], era[rows],
                      init_model=first)
    assert model.category_encoder_ is not None
    assert model.category_encoder_.categories == first.category_encoder_.categories
    assert_same_model(local, model)


def test_bad_categorical_input_gives_the_local_error(client):
    X, y, era, _ = era_table(n_rows=300)
    params = {**PARAMS, "categorical_features": ["no-such-column"]}
    with pytest.raises(ValueError, match="names 'no-such-column', which is not a column"):
        PackBoostRegressor(**params).fit(X, y, era=era)
    with pytest.raises(ValueError, match="names 'no-such-column', which is not a column"):
        _dask_fit(client, params, X, y, era)
    strings = X.assign(sector=X["sector"].astype(object))     # not declared categorical
    with pytest.raises(ValueError, match="non-numeric column 'sector'"):
        _dask_fit(client, PARAMS, strings, y, era)


def test_combine_takes_declared_lists_or_the_sorted_union():
    declared = pd.DataFrame({"c": pd.Categorical(["b"], categories=["z", "b", "a"])})
    same = pd.DataFrame({"c": pd.Categorical(["a"], categories=["z", "b", "a"])})
    parts = [_categories.learn_encoder(part, None) for part in (declared, same)]
    assert _categories.combine(parts).categories == [["z", "b", "a"]]
    other = pd.DataFrame({"c": pd.Categorical(["q"], categories=["q", "b"])})
    parts.append(_categories.learn_encoder(other, None))
    assert _categories.combine(parts).categories == [["a", "b", "q", "z"]]
    assert _categories.combine([None, None]) is None
    numeric = [_categories.learn_encoder(np.array([[3.0], [1.0]]), [0]),
               _categories.learn_encoder(np.array([[2.0], [np.nan]]), [0]), None]
    assert _categories.combine(numeric).categories == [[1, 2, 3]]
    mixed = [_categories.learn_encoder(np.array([["a"]], dtype=object), [0]),
             _categories.learn_encoder(np.array([[1]], dtype=object), [0])]
    with pytest.raises(TypeError, match="cannot be ordered"):
        _categories.combine(mixed)
    with pytest.raises(ValueError, match="same categorical features"):
        _categories.combine([numeric[0],
                             _categories.learn_encoder(np.array([[1.0, 2.0]]), [1])])


def test_eval_set_with_categories_as_locally(client):
    X, y, era, _ = era_table(seed=3)
    train, valid = era < 8, era >= 8
    X_train, X_valid = X[train].reset_index(drop=True), X[valid].reset_index(drop=True)
    fit_args = dict(eval_set=[(X_valid, y[valid], era[valid])], eval_metric=["rmse"],
                    early_stopping_rounds=2)
    params = {**PARAMS, "n_estimators": 6, "learning_rate": 0.5}
    local = PackBoostRegressor(**params).fit(X_train, y[train], era=era[train], **fit_args)
    model = _dask_fit(client, params, X_train, y[train], era[train], **fit_args)
    assert model.evals_result_ == local.evals_result_
    assert_same_model(local, model)
