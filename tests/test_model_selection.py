"""Era splitters: whole eras, embargoes, scikit-learn's protocol."""

from __future__ import annotations

import numpy as np
import pytest

from packboost.model_selection import EraKFold, WalkForwardSplit


def shuffled_eras(n_eras, rows_per_era=3, seed=0, labels=None):
    """Era labels of rows in random order (eras need not be contiguous or sorted)."""
    labels = np.arange(n_eras) if labels is None else np.asarray(labels)
    era = np.repeat(labels, rows_per_era)
    return np.random.default_rng(seed).permutation(era)


def era_sets(era, train, test):
    return set(era[train].tolist()), set(era[test].tolist())


@pytest.mark.parametrize("n_eras, n_splits, embargo", [(10, 5, 1), (7, 3, 0), (12, 2, 3),
                                                         (5, 5, 0)])
def test_era_kfold_keeps_eras_whole_and_embargoes_neighbours(n_eras, n_splits, embargo):
    era = shuffled_eras(n_eras)
    splitter = EraKFold(n_splits, embargo=embargo)
    tested = []
    for train, test in splitter.split(np.zeros((len(era), 2)), groups=era):
        assert len(np.intersect1d(train, test)) == 0
        train_eras, test_eras = era_sets(era, train, test)
        # whole eras: every row of a test era is in the test set
        assert len(test) == sum((era == e).sum() for e in test_eras)
        assert len(train) == sum((era == e).sum() for e in train_eras)
        low, high = min(test_eras), max(test_eras)
        assert test_eras == set(range(low, high + 1))  # consecutive
        assert all(e < low - embargo or e > high + embargo for e in train_eras)
        assert train_eras | test_eras | set(range(low - embargo, high + embargo + 1)) \
            >= set(range(n_eras))
        tested.extend(sorted(test_eras))
    assert tested == list(range(n_eras))  # every era tested once, in order
    assert splitter.get_n_splits() == n_splits


def test_walk_forward_trains_only_on_the_past():
    labels = [f"era{i:03d}" for i in range(20)]  # strings that sort in time
    era = shuffled_eras(20, labels=labels)
    splits = list(WalkForwardSplit(4, test_eras=3, embargo=2).split(None, groups=era))
    assert len(splits) == 4
    previous_test = None
    position = {label: index for index, label in enumerate(labels)}
    for train, test in splits:
        train_eras, test_eras = ({position[label] for label in eras}
                                 for eras in era_sets(era, train, test))
        assert len(test_eras) == 3
        assert max(train_eras) < min(test_eras) - 2  # embargo of 2 eras
        assert min(train_eras) == 0                   # expanding window
        if previous_test is not None:
            assert min(test_eras) > max(previous_test)
        previous_test = test_eras
    assert max(era_sets(era, *splits[-1])[1]) == "era019"


def test_walk_forward_rolling_window_and_default_block():
    era = shuffled_eras(12)
    for train, test in WalkForwardSplit(3, max_train_eras=4).split(None, groups=era):
        train_eras, test_eras = era_sets(era, train, test)
        assert len(test_eras) == 12 // 4
        assert train_eras == set(range(max(0, min(test_eras) - 4), min(test_eras)))


@pytest.mark.parametrize("splitter, message", [
    (EraKFold(5), "more than the 3 eras"),
    (EraKFold(2, embargo=5), "no training era"),
    (WalkForwardSplit(3, test_eras=1, embargo=1), "too few"),
])
def test_too_few_eras_is_a_clear_error(splitter, message):
    with pytest.raises(ValueError, match=message):
        list(splitter.split(None, groups=shuffled_eras(3)))


@pytest.mark.parametrize("make, error", [
    (lambda: EraKFold(1), ValueError), (lambda: EraKFold(2.0), TypeError),
    (lambda: EraKFold(3, embargo=-1), ValueError), (lambda: WalkForwardSplit(0), ValueError),
    (lambda: WalkForwardSplit(2, test_eras=0), ValueError),
    (lambda: WalkForwardSplit(2, max_train_eras=True), TypeError),
])
def test_bad_parameters(make, error):
    with pytest.raises(error):
        make()


def test_bad_groups():
    X = np.zeros((6, 1))
    with pytest.raises(ValueError, match="groups must be the era label"):
        list(EraKFold(2).split(X))
    with pytest.raises(ValueError, match="6 rows"):
        list(EraKFold(2).split(X, groups=np.arange(5)))
    with pytest.raises(ValueError, match="NaN"):
        list(EraKFold(2).split(X, groups=[0.0, 1.0, np.nan, 1.0, 2.0, 2.0]))


def test_works_with_scikit_learn_cross_validation():
    sklearn_model_selection = pytest.importorskip("sklearn.model_selection")
    from packboost import PackBoostRegressor
    from packboost.datasets import make_numerai_like

    data = make_numerai_like(n_rows=1_200, n_features=5, n_eras=12, random_state=0)
    model = PackBoostRegressor(n_estimators=3, max_depth=2, random_state=0, n_jobs=1)
    scores = sklearn_model_selection.cross_val_score(
        model, data.X, data.y, groups=data.era, cv=EraKFold(3, embargo=1))
    assert scores.shape == (3,) and np.isfinite(scores).all()
    search = sklearn_model_selection.GridSearchCV(
        model, {"max_depth": [1, 2]}, cv=WalkForwardSplit(2, embargo=1))
    search.fit(data.X, data.y, groups=data.era)
    assert search.best_params_["max_depth"] in (1, 2)


MONTHS = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]


def _time_ordered(splitter, groups, order):
    """Every split's eras, as positions in ``order`` (the labels in time)."""
    rank = {label: position for position, label in enumerate(order)}
    labels = np.asarray(groups, dtype=object)
    for train, test in splitter.split(None, groups=groups):
        yield ({rank[label] for label in labels[train]}, {rank[label] for label in labels[test]})


@pytest.mark.parametrize("make", ["pandas", "polars"])
def test_a_declared_order_of_labels_is_honoured(make):
    """Month names as an ordered categorical: the splits follow the months,
    not their alphabetical order (which would test on jan and train on aug)."""
    era = shuffled_eras(12, labels=MONTHS).tolist()
    if make == "pandas":
        pd = pytest.importorskip("pandas")
        groups = pd.Series(pd.Categorical(era, categories=MONTHS, ordered=True))
    else:
        pl = pytest.importorskip("polars")
        groups = pl.Series(era, dtype=pl.Enum(MONTHS))
    for train, test in _time_ordered(WalkForwardSplit(3, test_eras=2), groups, MONTHS):
        assert max(train) < min(test)
    blocks = [sorted(test) for _, test in _time_ordered(EraKFold(3), groups, MONTHS)]
    assert blocks == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]]


def test_categories_without_rows_and_datetimes_keep_their_order():
    pd = pytest.importorskip("pandas")
    era = shuffled_eras(6, labels=MONTHS[:6]).tolist()
    unused_first = pd.Categorical(era, categories=["dec", *MONTHS[:6]], ordered=True)
    for train, test in _time_ordered(WalkForwardSplit(2, test_eras=2), unused_first, MONTHS):
        assert max(train) < min(test)
    days = pd.date_range("2026-01-30", periods=8, freq="D")
    for stamps in (days, days.tz_localize("Europe/Paris")):
        groups = pd.Series(shuffled_eras(8, labels=np.arange(8))).map(dict(enumerate(stamps)))
        for train, test in _time_ordered(WalkForwardSplit(3, test_eras=2), groups, list(stamps)):
            assert max(train) < min(test)


@pytest.mark.parametrize("splitter", [EraKFold(2), WalkForwardSplit(1, test_eras=1)])
def test_missing_or_mixed_labels_are_refused_naming_groups(splitter):
    pd = pytest.importorskip("pandas")
    day = np.datetime64("2026-01-01", "D")
    bad = {
        "NaT": np.array([day, day + 1, np.datetime64("NaT"), day + 2, day + 1, day]),
        "NaN in objects": np.array(["a", "b", np.nan, "c", "a", "b"], dtype=object),
        "None": ["a", "b", None, "c", "a", "b"],
        "pd.NA": pd.array(["a", "b", pd.NA, "c", "a", "b"], dtype="string"),
        "NaN in a categorical": pd.Categorical(["a", "b", None, "c", "a", "b"],
                                               categories=["c", "b", "a"], ordered=True),
        "NaT in a Series": pd.Series(pd.to_datetime(["2026-01-01", None, "2026-01-02",
                                                     "2026-01-03", "2026-01-01",
                                                     "2026-01-02"])),
    }
    for groups in bad.values():
        with pytest.raises(ValueError, match="groups.*(NaN|missing)"):
            list(splitter.split(None, groups=groups))
    with pytest.raises(ValueError, match="groups.*cannot be ordered"):
        list(splitter.split(None, groups=np.array([1, "a", 2, "b", 1, "a"], dtype=object)))


def test_an_unordered_categorical_is_used_where_its_orders_agree():
    """Unordered, its categories (pandas' sort order) and its labels (ours)
    may disagree: that is refused; where they agree it is the labels."""
    pd = pytest.importorskip("pandas")
    era = shuffled_eras(6, labels=MONTHS[:6]).tolist()
    with pytest.raises(ValueError, match="groups is an unordered categorical.*ambiguous"):
        list(WalkForwardSplit(2, test_eras=2).split(None, groups=pd.Categorical(
            era, categories=MONTHS[:6])))
    labels = sorted(MONTHS[:6])
    plain = list(WalkForwardSplit(2, test_eras=2).split(None, groups=np.array(era)))
    categorical = list(WalkForwardSplit(2, test_eras=2).split(
        None, groups=pd.Series(era, dtype="category")))   # categories sorted, as read
    assert pd.Series(era, dtype="category").cat.categories.tolist() == labels
    for (train, test), (train_c, test_c) in zip(plain, categorical, strict=True):
        np.testing.assert_array_equal(train, train_c)
        np.testing.assert_array_equal(test, test_c)
