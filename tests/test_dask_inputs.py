"""Dask estimators on inputs shaped as real pipelines leave them: empty
partitions (what a filter leaves), integer column names (``pd.DataFrame(array)``,
``dd.from_dask_array``), and every keyword of the local ``predict``.

The claim is the local estimator's: the same model bit for bit, the same
predictions, one (possibly empty) piece per input partition.
"""

import numpy as np
import pytest

distributed = pytest.importorskip("distributed")
da = pytest.importorskip("dask.array")
dd = pytest.importorskip("dask.dataframe")
pd = pytest.importorskip("pandas")

from packboost import PackBoostClassifier, PackBoostRegressor, load_model  # noqa: E402
from packboost.dask import DaskPackBoostClassifier, DaskPackBoostRegressor  # noqa: E402
from packboost.datasets import make_numerai_like  # noqa: E402

from conftest import assert_same_model  # noqa: E402

PARAMS = dict(n_estimators=3, max_depth=3, min_samples_leaf=10, random_state=3, n_jobs=1)


@pytest.fixture(scope="module")
def problem():
    data = make_numerai_like(n_rows=1200, n_features=5, n_eras=8, random_state=1)
    perm = np.random.default_rng(1).permutation(len(data.y))
    return data.X[perm], data.y[perm], np.asarray(data.era)[perm]


def _fitted(estimator_class, client, *args, **kwargs):
    model = estimator_class(**PARAMS)
    model.client = client
    return model.fit(*args, **kwargs)


def _with_an_empty_partition(frame):
    """``frame`` in 3 partitions, the middle one emptied by a filter."""
    ddf = dd.from_pandas(frame, npartitions=3)
    middle = ddf.partitions[1].index.compute()
    low, high = middle.min(), middle.max()
    filtered = ddf.map_partitions(lambda part: part[(part.index < low) | (part.index > high)])
    lengths = filtered.map_partitions(len).compute().tolist()
    assert len(lengths) == 3 and lengths[1] == 0 and min(lengths[0], lengths[2]) > 0
    keep = (frame.index < low) | (frame.index > high)
    return filtered, frame.loc[keep]


# ----------------------------------------------------------------------------- predict


@pytest.mark.parametrize("estimator", ["regressor", "classifier"])
def test_pred_contrib_on_dask_input_is_the_local_contributions(client, problem, estimator):
    """The keyword reached the local model (the classifier dropped it and
    returned labels; the regressor's lazy result declared a 1-D output)."""
    X, y, era = problem
    if estimator == "regressor":
        dask_class, local_class, target = DaskPackBoostRegressor, PackBoostRegressor, y
    else:
        dask_class, local_class = DaskPackBoostClassifier, PackBoostClassifier
        target = np.where(y > np.median(y), "up", "down")
    local = local_class(**PARAMS).fit(X, target, era=era)
    model = _fitted(dask_class, client, da.from_array(X, chunks=(500, -1)),
                    da.from_array(target, chunks=500), era=da.from_array(era, chunks=500))
    assert_same_model(local, model)
    expected = local.predict(X, pred_contrib=True)
    assert expected.shape == (len(X), X.shape[1] + 1)
    lazy = model.predict(da.from_array(X, chunks=(500, -1)), pred_contrib=True)
    assert lazy.shape[1] == X.shape[1] + 1
    np.testing.assert_array_equal(lazy.compute(), expected)
    frame = pd.DataFrame(X, columns=[f"f{k}" for k in range(X.shape[1])])
    named = _fitted(dask_class, client, dd.from_pandas(frame, npartitions=3),
                    dd.from_pandas(pd.Series(target), npartitions=3),
                    era=dd.from_pandas(pd.Series(era), npartitions=3))
    contributions = named.predict(dd.from_pandas(frame, npartitions=3), pred_contrib=True)
    np.testing.assert_array_equal(np.asarray(contributions.compute()), expected)


def test_empty_partitions_give_empty_pieces_at_predict(client, problem):
    X, y, era = problem
    frame = pd.DataFrame(X, columns=[f"f{k}" for k in range(X.shape[1])])
    labels = np.where(y > np.median(y), "up", "down")
    local_regressor = PackBoostRegressor(**PARAMS).fit(frame, y, era=era)
    local_classifier = PackBoostClassifier(**PARAMS).fit(frame, labels, era=era)
    regressor = _fitted(DaskPackBoostRegressor, client, dd.from_pandas(frame, npartitions=2),
                        dd.from_pandas(pd.Series(y), npartitions=2),
                        era=dd.from_pandas(pd.Series(era), npartitions=2))
    classifier = _fitted(DaskPackBoostClassifier, client, dd.from_pandas(frame, npartitions=2),
                         dd.from_pandas(pd.Series(labels), npartitions=2),
                         era=dd.from_pandas(pd.Series(era), npartitions=2))
    filtered, kept = _with_an_empty_partition(frame)
    cases = [(regressor.predict(filtered), local_regressor.predict(kept)),
             (regressor.predict(filtered, pred_contrib=True),
              local_regressor.predict(kept, pred_contrib=True)),
             (classifier.predict(filtered), local_classifier.predict(kept)),
             (classifier.predict_proba(filtered), local_classifier.predict_proba(kept)),
             (classifier.predict(filtered, pred_contrib=True),
              local_classifier.predict(kept, pred_contrib=True))]
    for lazy, expected in cases:
        assert lazy.npartitions == 3
        result = lazy.compute()
        assert list(result.index) == list(kept.index)
        np.testing.assert_array_equal(np.asarray(result), expected)
    # An array with an empty block
    blocks = da.from_array(X, chunks=((300, 0, len(X) - 300), (X.shape[1],)))
    np.testing.assert_array_equal(classifier.predict_proba(blocks).compute(),
                                  local_classifier.predict_proba(frame))
    np.testing.assert_array_equal(regressor.predict(blocks).compute(),
                                  local_regressor.predict(frame))


# ----------------------------------------------------------------------------- fit


def test_an_empty_partition_at_fit_is_the_local_fit(client, problem):
    X, y, era = problem
    frame = pd.DataFrame(X, columns=[f"f{k}" for k in range(X.shape[1])])
    frame["era"], frame["target"] = era, y
    filtered, kept = _with_an_empty_partition(frame)
    features = [f"f{k}" for k in range(X.shape[1])]
    local = PackBoostRegressor(**PARAMS).fit(kept[features], kept["target"], era=kept["era"])
    model = _fitted(DaskPackBoostRegressor, client, filtered[features + ["era"]],
                    filtered["target"], era="era")
    assert_same_model(local, model)
    raw = frame.astype({name: np.float64 for name in features})   # raw features, binned
    filtered, kept = _with_an_empty_partition(raw)                # from gathered rows
    local = PackBoostRegressor(**PARAMS).fit(kept[features], kept["target"], era=kept["era"])
    model = _fitted(DaskPackBoostRegressor, client, filtered[features], filtered["target"],
                    era=filtered["era"])
    assert_same_model(local, model)
    # An array with an empty block
    chunks = (300, 0, len(X) - 300)
    local = PackBoostRegressor(**PARAMS).fit(X, y, era=era)
    model = _fitted(DaskPackBoostRegressor, client,
                    da.from_array(X, chunks=(chunks, (X.shape[1],))),
                    da.from_array(y, chunks=(chunks,)), era=da.from_array(era, chunks=(chunks,)))
    assert_same_model(local, model)


@pytest.mark.parametrize("make", ["pandas", "dask_array"])
def test_integer_column_names_are_unnamed_features_as_locally(client, problem, tmp_path, make):
    """Integer column names were recorded as '0', '1', ... and the frame the
    model was fitted on was then refused."""
    X, y, era = problem
    frame = pd.DataFrame(X)
    ddf = (dd.from_pandas(frame, npartitions=3) if make == "pandas"
           else dd.from_dask_array(da.from_array(X, chunks=(400, -1))))
    assert list(ddf.columns) == list(range(X.shape[1]))
    local = PackBoostRegressor(**PARAMS).fit(frame, y, era=era)
    assert not hasattr(local, "feature_names_in_")
    model = _fitted(DaskPackBoostRegressor, client, ddf, da.from_array(y, chunks=400),
                    era=da.from_array(era, chunks=400))
    assert not hasattr(model, "feature_names_in_")
    assert_same_model(local, model)
    expected = local.predict(X)
    np.testing.assert_array_equal(np.asarray(model.predict(ddf).compute()), expected)
    np.testing.assert_array_equal(model.predict(frame), expected)
    np.testing.assert_array_equal(model.to_local().predict(frame), expected)
    model.save_model(tmp_path / "m.pbm")
    np.testing.assert_array_equal(load_model(tmp_path / "m.pbm").predict(frame), expected)
