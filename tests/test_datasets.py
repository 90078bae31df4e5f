"""Tests of packboost.datasets: the synthetic Numerai-like era data."""

import numpy as np
import pytest

from packboost.datasets import EraDataset, make_numerai_like, make_sign_flip, make_smooth_drift
from packboost.metrics import per_era_correlation

# Awkward sizes: eras of unequal size (6_003 = 20 * 300 + 3), odd feature count.
N_ROWS, N_FEATURES, N_ERAS = 6_003, 23, 20


@pytest.fixture(scope="module")
def data():
    return make_numerai_like(N_ROWS, N_FEATURES, N_ERAS, random_state=3)


def _level_counts(levels, era, n_eras):
    """counts[e, v] = number of rows of era e at level v (levels 0..4)."""
    return np.bincount(era * 5 + levels, minlength=n_eras * 5).reshape(n_eras, 5)


def _least_squares_held_out_correlation(data):
    train, test = data.split_by_era(0.25)
    design = np.c_[train.X.astype(np.float64), np.ones(train.n_rows)]
    coef = np.linalg.lstsq(design, train.y.astype(np.float64), rcond=None)[0]
    prediction = test.X @ coef[:-1] + coef[-1]
    return per_era_correlation(test.y, prediction, test.era)[1]


def test_shapes_dtypes_and_layout(data):
    assert isinstance(data, EraDataset)
    assert data.X.shape == (N_ROWS, N_FEATURES)
    assert data.X.dtype == np.uint8
    assert data.X.flags.f_contiguous
    assert data.y.shape == (N_ROWS,) and data.y.dtype == np.float32
    assert data.era.shape == (N_ROWS,) and data.era.dtype == np.int32
    assert len(data.feature_names) == N_FEATURES
    assert len(set(data.feature_names)) == N_FEATURES
    assert data.feature_names[0] == "feature_00"
    assert (data.n_rows, data.n_features, data.n_eras) == (N_ROWS, N_FEATURES, N_ERAS)
    assert "n_rows=6003" in repr(data)


def test_value_sets(data):
    assert set(np.unique(data.X).tolist()) == {0, 1, 2, 3, 4}
    assert set(np.unique(data.y).tolist()) == {0.0, 0.25, 0.5, 0.75, 1.0}


def test_eras_sorted_and_balanced(data):
    assert np.all(np.diff(data.era) >= 0)
    sizes = np.bincount(data.era)
    assert sizes.size == N_ERAS
    assert sizes.sum() == N_ROWS
    assert sizes.max() - sizes.min() <= 1


def test_levels_are_per_era_quintiles(data):
    sizes = np.bincount(data.era)
    for feature_idx in range(N_FEATURES):
        counts = _level_counts(data.X[:, feature_idx].astype(np.int64), data.era, N_ERAS)
        assert np.all(counts.sum(axis=1) == sizes)
        assert np.all(counts.max(axis=1) - counts.min(axis=1) <= 1)
    counts = _level_counts(np.rint(data.y * 4).astype(np.int64), data.era, N_ERAS)
    assert np.all(counts.max(axis=1) - counts.min(axis=1) <= 1)


def test_tiny_eras():
    # Eras smaller than 5 rows: levels follow floor(5 * rank / size).
    small = make_numerai_like(7, 3, 3, random_state=0)
    assert np.bincount(small.era).tolist() == [3, 2, 2]
    assert small.X.max() <= 4 and small.y.max() <= 1.0
    for era_id, size in enumerate([3, 2, 2]):
        expected = sorted(5 * rank // size for rank in range(size))
        assert sorted(small.X[small.era == era_id, 0].tolist()) == expected


def test_deterministic_per_seed(data):
    again = make_numerai_like(N_ROWS, N_FEATURES, N_ERAS, random_state=3)
    np.testing.assert_array_equal(again.X, data.X)
    np.testing.assert_array_equal(again.y, data.y)
    np.testing.assert_array_equal(again.era, data.era)
    np.testing.assert_array_equal(again.coefficients, data.coefficients)
    other = make_numerai_like(N_ROWS, N_FEATURES, N_ERAS, random_state=4)
    assert not np.array_equal(other.X, data.X)
    assert not np.array_equal(other.y, data.y)


def test_ground_truth_metadata(data):
    informative = data.informative_features
    assert informative.size == max(1, N_FEATURES // 10)
    assert np.unique(informative).size == informative.size
    assert informative.min() >= 0 and informative.max() < N_FEATURES
    assert data.coefficients.shape == (N_ERAS, informative.size)


def test_split_by_era(data):
    train, test = data.split_by_era(0.25)
    assert np.unique(train.era).tolist() == list(range(15))
    assert np.unique(test.era).tolist() == list(range(15, 20))
    assert train.n_rows + test.n_rows == N_ROWS
    for part in (train, test):
        assert part.X.flags.f_contiguous and part.X.dtype == np.uint8
        assert part.feature_names == data.feature_names
    np.testing.assert_array_equal(np.vstack([train.X, test.X]), data.X)
    np.testing.assert_array_equal(np.concatenate([train.y, test.y]), data.y)
    # The split owns its arrays.
    train.X[0, 0] = 9
    assert data.X[0, 0] != 9


def test_split_by_era_unsorted_rows(data):
    order = np.random.default_rng(0).permutation(N_ROWS)
    shuffled = EraDataset(data.X[order], data.y[order], data.era[order], data.feature_names)
    train, test = shuffled.split_by_era(0.5)
    assert train.era.max() < test.era.min()
    assert train.n_eras == test.n_eras == 10
    assert test.X.flags.f_contiguous
    np.testing.assert_array_equal(test.X, data.X[order][data.era[order] >= 10])


@pytest.mark.parametrize("fraction", [0.0, 1.0, -0.1, 1.5])
def test_split_by_era_rejects_bad_fraction(data, fraction):
    with pytest.raises(ValueError, match="holdout_fraction"):
        data.split_by_era(fraction)


def test_split_by_era_keeps_one_era_each_side():
    small = make_numerai_like(100, 4, 2)
    train, test = small.split_by_era(0.01)
    assert (train.n_eras, test.n_eras) == (1, 1)
    with pytest.raises(ValueError, match="at least 2 eras"):
        make_numerai_like(100, 4, 1).split_by_era()


def test_signal_is_real():
    # Without drift the held-out eras follow the training eras' rule. (With the
    # default drift the held-out mean can be near 0 or below for some seeds:
    # the flipping features are meant to mislead a model fitted on the past.)
    data = make_numerai_like(40_000, 50, 40, drift=0.0, random_state=0)
    correlations = _least_squares_held_out_correlation(data)
    assert np.mean(correlations) > 0.03


def test_drift_hurts_held_out_eras():
    kwargs = dict(n_rows=40_000, n_features=50, n_eras=40, random_state=0)
    with_drift = _least_squares_held_out_correlation(make_numerai_like(drift=1.0, **kwargs))
    without = _least_squares_held_out_correlation(make_numerai_like(drift=0.0, **kwargs))
    assert np.mean(without) > np.mean(with_drift)


def test_no_signal_gives_no_correlation():
    data = make_numerai_like(40_000, 50, 40, signal=0.0, random_state=0)
    correlations = _least_squares_held_out_correlation(data)
    # 10 held-out eras of 1_000 rows: standard error about 0.01.
    assert abs(np.mean(correlations)) < 0.04


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        (dict(n_rows=10, n_eras=20), ValueError, "n_rows"),
        (dict(n_rows=0), ValueError, "n_rows"),
        (dict(n_features=0), ValueError, "n_features"),
        (dict(n_eras=0), ValueError, "n_eras"),
        (dict(n_rows=10.0), TypeError, "n_rows"),
        (dict(n_features=5, n_informative=6), ValueError, "n_informative"),
        (dict(n_informative=0), ValueError, "n_informative"),
        (dict(signal=-1.0), ValueError, "signal"),
        (dict(drift=float("nan")), ValueError, "drift"),
    ],
)
def test_invalid_arguments(kwargs, error, match):
    params = dict(n_rows=100, n_features=5, n_eras=4)
    params.update(kwargs)
    with pytest.raises(error, match=match):
        make_numerai_like(**params)


# ----------------------------------------------------------- era-shift cases

ERA_SHIFT = [make_sign_flip, make_smooth_drift]


@pytest.mark.parametrize("make", ERA_SHIFT)
def test_era_shift_layout_and_determinism(make):
    data = make(N_ROWS, N_FEATURES, N_ERAS, random_state=5)
    assert data.X.shape == (N_ROWS, N_FEATURES) and data.X.dtype == np.uint8
    assert data.X.flags.f_contiguous
    assert set(np.unique(data.y).tolist()) == {0.0, 0.25, 0.5, 0.75, 1.0}
    assert np.bincount(data.era).tolist() == np.bincount(
        make_numerai_like(N_ROWS, N_FEATURES, N_ERAS).era).tolist()
    assert data.coefficients.shape == (N_ERAS, data.informative_features.size)
    again = make(N_ROWS, N_FEATURES, N_ERAS, random_state=5)
    np.testing.assert_array_equal(again.X, data.X)
    np.testing.assert_array_equal(again.y, data.y)
    assert not np.array_equal(make(N_ROWS, N_FEATURES, N_ERAS, random_state=6).y, data.y)


def test_sign_flip_process():
    n_eras = 400
    data = make_sign_flip(n_eras * 20, 100, n_eras, n_strong=3, n_stable=10, random_state=1)
    strong, stable = data.coefficients[:, :3], data.coefficients[:, 3:]
    # All strong features flip together; the flipped eras are a minority,
    # more frequent late (p rises from 0.1 to 0.45).
    signs = np.sign(strong)
    assert np.all(signs == signs[:, :1])
    flipped = signs[:, 0] != np.sign(np.median(strong[:, 0]))
    early, late = flipped[: n_eras // 2].mean(), flipped[n_eras // 2 :].mean()
    assert 0.05 < early < late < 0.5
    np.testing.assert_allclose(np.linalg.norm(strong, axis=1), 0.2)
    # Stable features keep their sign in (almost) every era.
    assert np.mean(np.sign(stable) == np.sign(np.median(stable, axis=0))) > 0.99
    assert len(set(data.informative_features.tolist())) == 13


def test_sign_flip_strong_features_mislead_pooled_fit():
    """A pooled least-squares fit leans on the strong features and so does
    worse in flipped eras than in unflipped ones."""
    data = make_sign_flip(40_000, 30, 80, n_strong=2, n_stable=6, strong_signal=0.4,
                          random_state=2)
    design = np.c_[data.X.astype(np.float64), np.ones(data.n_rows)]
    coef = np.linalg.lstsq(design, data.y.astype(np.float64), rcond=None)[0]
    _, correlation = per_era_correlation(data.y, design @ coef, data.era)[:2]
    flipped = np.sign(data.coefficients[:, 0]) != np.sign(np.median(data.coefficients[:, 0]))
    assert correlation[~flipped].mean() > 0.1 > correlation[flipped].mean()


def test_smooth_drift_process():
    data = make_smooth_drift(4_000, 40, 200, n_informative=8, random_state=3)
    # Half the informative features drift along a line, the others stay put
    # (up to the per-era jitter): compare first and last tenth of eras.
    head, tail = data.coefficients[:20].mean(axis=0), data.coefficients[-20:].mean(axis=0)
    moved = np.abs(tail - head) / np.abs(data.coefficients).mean()
    assert np.sum(moved > 0.5) >= 3 and np.sum(moved < 0.3) >= 3


@pytest.mark.parametrize("make, kwargs, match", [
    (make_sign_flip, dict(n_strong=0), "n_strong"),
    (make_sign_flip, dict(n_strong=20, n_stable=10), "n_strong \\+ n_stable"),
    (make_sign_flip, dict(flip_end=1.5), "flip_end"),
    (make_sign_flip, dict(strong_signal=-1.0), "strong_signal"),
    (make_smooth_drift, dict(n_informative=50), "n_informative"),
    (make_smooth_drift, dict(drift=float("nan")), "drift"),
])
def test_era_shift_invalid_arguments(make, kwargs, match):
    with pytest.raises(ValueError, match=match):
        make(1_000, 23, 10, **kwargs)


def test_categorical_flip_has_a_category_whose_effect_flips_in_some_eras():
    from packboost.datasets import make_categorical_flip

    data = make_categorical_flip(n_rows=6000, n_features=10, n_eras=30, n_categories=12,
                                 random_state=4)
    assert data.X.shape == (6000, 11) and data.X.dtype == np.uint8
    assert data.X.flags.f_contiguous and data.categorical_features == (0,)
    assert data.feature_names[0] == "category"
    assert set(np.unique(data.X[:, 0])) <= set(range(12))
    effects = data.category_effects
    assert effects.shape == (30, 12)
    # two regimes: each era's effects are stable + flip or stable - flip
    regimes = np.unique(np.round(effects, 12), axis=0)
    assert len(regimes) == 2
    stable, flip = regimes.mean(axis=0), (regimes[0] - regimes[1]) / 2
    assert np.all(np.isclose(np.abs(effects - stable), np.abs(flip)))
    # the category drives the target: its per-category mean follows the era's effects
    era0 = data.era == 0
    means = [data.y[era0 & (data.X[:, 0] == c)].mean() for c in range(12)]
    assert np.corrcoef(means, effects[0])[0, 1] > 0.5
    again = make_categorical_flip(n_rows=6000, n_features=10, n_eras=30, n_categories=12,
                                  random_state=4)
    np.testing.assert_array_equal(again.X, data.X)
    train, test = data.split_by_era(0.25)
    assert train.categorical_features == (0,) and test.category_effects.shape == (30, 12)
    with pytest.raises(ValueError, match="n_categories"):
        make_categorical_flip(n_rows=100, n_features=2, n_eras=2, n_categories=300)
