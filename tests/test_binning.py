"""Tests of packboost.binning.BinMapper against the contract of docs/data-layout.md §1."""

import json

import numpy as np
import pytest

from packboost.binning import BinMapper, distinct_values

FLOAT_MAX = np.finfo(np.float64).max


def naive_codes(mapper, X):
    """Oracle: code = number of cuts strictly below x, NaN to n_bins; (n_rows, n_features)."""
    X = np.asarray(X)
    codes = np.empty(X.shape, dtype=np.int64)
    for row_idx in range(X.shape[0]):
        for feature_idx in range(X.shape[1]):
            value = X[row_idx, feature_idx]
            if X.dtype.kind == "f" and np.isnan(value):
                codes[row_idx, feature_idx] = mapper.n_bins_[feature_idx]
            else:
                cuts = mapper.cuts_[feature_idx]
                codes[row_idx, feature_idx] = sum(1 for cut in cuts if cut < value)
    return codes


def searchsorted_codes(mapper, X, row_order=None):
    """Vectorised oracle in the output layout: (n_features, n_rows_out), int64."""
    X = np.asarray(X)
    if row_order is not None:
        X = X[row_order]
    codes = np.empty(X.shape[::-1], dtype=np.int64)
    for feature_idx, cuts in enumerate(mapper.cuts_):
        values = X[:, feature_idx].astype(np.float64)
        codes[feature_idx] = np.searchsorted(cuts, values, side="left")
        codes[feature_idx][np.isnan(values)] = mapper.n_bins_[feature_idx]
    return codes


def check_invariants(mapper, max_bins):
    """Fitted-state invariants every mapper must satisfy."""
    assert mapper.n_bins_.dtype == np.int32
    assert len(mapper.cuts_) == mapper.n_bins_.size
    assert np.all(mapper.n_bins_ >= 1) and np.all(mapper.n_bins_ <= max_bins)
    for n_bins, cuts in zip(mapper.n_bins_, mapper.cuts_, strict=True):
        assert cuts.dtype == np.float64
        assert cuts.size == n_bins - 1
        assert np.all(np.isfinite(cuts))
        assert np.all(np.diff(cuts) > 0)
    expected_dtype = np.uint8 if mapper.n_bins_.max() + 1 <= 256 else np.uint16
    assert mapper.binned_dtype_ is expected_dtype


def check_cut_rule(mapper, X, X_binned):
    """bin <= t  <=>  x <= cuts[t], and NaN gets the missing code."""
    X = np.asarray(X, dtype=np.float64)
    for feature_idx, cuts in enumerate(mapper.cuts_):
        values = X[:, feature_idx]
        codes = X_binned[feature_idx].astype(np.int64)
        nan = np.isnan(values)
        assert np.all(codes[nan] == mapper.n_bins_[feature_idx])
        assert np.all(codes[~nan] < mapper.n_bins_[feature_idx])
        for t, cut in enumerate(cuts):
            np.testing.assert_array_equal(codes[~nan] <= t, values[~nan] <= cut)


# ---------------------------------------------------------------- exact cuts


def test_exact_cuts_low_cardinality():
    X = np.array([[1.0, 10.0], [2.0, 10.0], [4.0, -3.0], [2.0, 0.5], [1.0, 10.0]])
    mapper = BinMapper(max_bins=8).fit(X)
    assert not mapper.prebinned_
    np.testing.assert_array_equal(mapper.n_bins_, [3, 3])
    np.testing.assert_array_equal(mapper.cuts_[0], [1.5, 3.0])
    np.testing.assert_array_equal(mapper.cuts_[1], [-1.25, 5.25])
    X_binned = mapper.transform(X)
    assert X_binned.shape == (2, 5) and X_binned.dtype == np.uint8
    assert X_binned.flags.c_contiguous
    np.testing.assert_array_equal(X_binned, [[0, 1, 2, 1, 0], [2, 2, 0, 1, 2]])


def test_exact_cuts_at_max_bins_distinct_values():
    # Exactly max_bins distinct values -> exact path, one bin per value.
    values = np.random.default_rng(0).permutation(np.repeat(np.arange(16.0) ** 2, 7))
    mapper = BinMapper(max_bins=16).fit(values[:, None])
    assert mapper.n_bins_[0] == 16
    codes = mapper.transform(values[:, None])[0]
    np.testing.assert_array_equal(codes, np.sqrt(values).astype(int))


def test_exact_cuts_see_values_the_subsample_missed():
    # A value occurring once is almost surely outside a 50-row subsample of 5000
    # rows, but the column has few distinct values, so it must get its own bin.
    values = np.tile([0.0, 1.0, 2.0], 2000)[:5000]
    values[1234] = 7.0
    mapper = BinMapper(max_bins=10, subsample=50, random_state=0).fit(values[:, None])
    np.testing.assert_array_equal(mapper.cuts_[0], [0.5, 1.5, 4.5])
    assert mapper.transform(values[:, None])[0, 1234] == 3


# ------------------------------------------------------------- quantile cuts


def test_quantile_cuts_give_equal_frequency_bins():
    rng = np.random.default_rng(1)
    X = np.column_stack([rng.normal(size=20_000), rng.exponential(size=20_000) ** 3])
    mapper = BinMapper(max_bins=16, random_state=0).fit(X)
    check_invariants(mapper, 16)
    np.testing.assert_array_equal(mapper.n_bins_, [16, 16])
    X_binned = mapper.transform(X)
    for feature_idx in range(2):
        counts = np.bincount(X_binned[feature_idx], minlength=16)
        np.testing.assert_allclose(counts, 20_000 / 16, rtol=0.02)
    check_cut_rule(mapper, X, X_binned)


def test_quantile_cuts_on_subsample_stay_roughly_equal_frequency():
    values = np.random.default_rng(2).uniform(size=50_000)
    mapper = BinMapper(max_bins=10, subsample=5_000, random_state=3).fit(values[:, None])
    counts = np.bincount(mapper.transform(values[:, None])[0], minlength=10)
    np.testing.assert_allclose(counts, 5_000, rtol=0.15)


def test_ties_share_a_bin_and_no_bin_is_empty():
    rng = np.random.default_rng(4)
    # Half the column is 0.0, 10% is 1.0, the rest continuous: more distinct
    # values than max_bins, so quantile cuts must deduplicate.
    values = np.concatenate([np.zeros(5_000), np.ones(1_000), rng.uniform(2, 3, 4_000)])
    values = rng.permutation(values)
    mapper = BinMapper(max_bins=20, random_state=0).fit(values[:, None])
    check_invariants(mapper, 20)
    assert mapper.n_bins_[0] < 20  # quantiles inside the run of zeros collapsed
    codes = mapper.transform(values[:, None])[0]
    assert np.unique(codes[values == 0.0]).size == 1
    assert np.unique(codes[values == 1.0]).size == 1
    assert codes[values == 0.0][0] < codes[values == 1.0][0]
    assert np.all(np.bincount(codes, minlength=mapper.n_bins_[0]) > 0)
    check_cut_rule(mapper, values[:, None], codes[None, :])


def test_heavy_ties_at_the_top_do_not_open_an_empty_bin():
    rng = np.random.default_rng(5)
    values = np.concatenate([rng.uniform(0, 1, 300), np.full(700, 5.0)])
    mapper = BinMapper(max_bins=16).fit(values[:, None])
    codes = mapper.transform(values[:, None])[0]
    assert np.all(np.bincount(codes, minlength=mapper.n_bins_[0]) > 0)


# ------------------------------------------------------ missing and edge cases


def test_nan_goes_to_missing_code():
    X = np.array([[0.0, np.nan], [np.nan, 1.0], [1.0, 2.0], [2.0, np.nan]])
    mapper = BinMapper().fit(X)
    np.testing.assert_array_equal(mapper.n_bins_, [3, 2])
    X_binned = mapper.transform(X)
    np.testing.assert_array_equal(X_binned, [[0, 3, 1, 2], [2, 0, 1, 2]])


def test_nan_goes_to_missing_code_on_quantile_path():
    rng = np.random.default_rng(6)
    values = rng.normal(size=3_000)
    values[rng.uniform(size=3_000) < 0.3] = np.nan
    mapper = BinMapper(max_bins=32, random_state=0).fit(values[:, None])
    codes = mapper.transform(values[:, None])[0]
    np.testing.assert_array_equal(codes == 32, np.isnan(values))


def test_all_nan_and_constant_columns():
    X = np.array(
        [[np.nan, 3.5, 3.5, -2.0], [np.nan, 3.5, np.nan, -2.0], [np.nan, 3.5, 3.5, -2.0]]
    )
    mapper = BinMapper().fit(X)
    np.testing.assert_array_equal(mapper.n_bins_, [1, 1, 1, 1])
    assert all(cuts.size == 0 for cuts in mapper.cuts_)
    X_binned = mapper.transform(X)
    np.testing.assert_array_equal(X_binned[0], [1, 1, 1])
    np.testing.assert_array_equal(X_binned[1], [0, 0, 0])
    np.testing.assert_array_equal(X_binned[2], [0, 1, 0])
    np.testing.assert_array_equal(X_binned[3], [0, 0, 0])
    # Unseen values of a constant feature still land in its only bin.
    np.testing.assert_array_equal(
        mapper.transform(np.array([[np.nan, 100.0, -100.0, np.inf]])).ravel(), [1, 0, 0, 0]
    )


def test_single_row():
    X = np.array([[1.5, np.nan, 7.0]])
    mapper = BinMapper().fit(X)
    np.testing.assert_array_equal(mapper.n_bins_, [1, 1, 1])
    np.testing.assert_array_equal(mapper.transform(X), [[0], [1], [0]])


def test_infinities_are_ordinary_values():
    X = np.array([[-np.inf], [0.0], [1.0], [np.inf], [np.nan], [np.inf]])
    mapper = BinMapper().fit(X)
    check_invariants(mapper, 255)
    assert mapper.n_bins_[0] == 4
    np.testing.assert_array_equal(mapper.transform(X)[0], [0, 1, 2, 3, 4, 3])
    check_cut_rule(mapper, X, mapper.transform(X))


@pytest.mark.parametrize(
    "distinct",
    [
        [-np.inf, np.inf],
        [-FLOAT_MAX, FLOAT_MAX],
        [FLOAT_MAX / 2, FLOAT_MAX, np.inf],
        [-np.inf, -FLOAT_MAX / 2, 0.0],
        [1.0, np.nextafter(1.0, 2.0)],
        [0.0, 5e-324, 1e-323],
        [-5e-324, 0.0],
        [np.nextafter(FLOAT_MAX, 0.0), FLOAT_MAX],
    ],
)
def test_midpoints_of_extreme_neighbours_separate_them(distinct):
    values = np.array(distinct, dtype=np.float64)
    mapper = BinMapper().fit(values[:, None])
    check_invariants(mapper, 255)
    assert mapper.n_bins_[0] == values.size
    np.testing.assert_array_equal(mapper.transform(values[:, None])[0], np.arange(values.size))


def test_neg_inf_and_most_negative_float_may_share_a_bin():
    # No finite float separates -inf from -FLOAT_MAX; cuts must stay finite.
    values = np.array([-np.inf, -FLOAT_MAX, 0.0])
    mapper = BinMapper().fit(values[:, None])
    check_invariants(mapper, 255)
    check_cut_rule(mapper, values[:, None], mapper.transform(values[:, None]))


def test_infinities_on_quantile_path():
    rng = np.random.default_rng(7)
    values = rng.normal(size=2_000)
    values[:300] = np.inf
    values[300:500] = -np.inf
    values = rng.permutation(values)
    mapper = BinMapper(max_bins=10).fit(values[:, None])
    check_invariants(mapper, 10)
    codes = mapper.transform(values[:, None])
    check_cut_rule(mapper, values[:, None], codes)
    assert np.unique(codes[0][values == np.inf]).size == 1
    assert codes[0][values == np.inf][0] > codes[0][np.isfinite(values)].max()


def test_float32_matches_float64_and_cut_rule():
    rng = np.random.default_rng(8)
    X32 = (rng.normal(size=(3_000, 3)) * [1.0, 1e-30, 1e30]).astype(np.float32)
    X32[::17, 0] = np.nan
    X32[:, 2] = np.round(X32[:, 2] / 1e30, 1).astype(np.float32) * np.float32(1e30)
    X64 = X32.astype(np.float64)
    mapper32 = BinMapper(max_bins=64, random_state=0).fit(X32)
    mapper64 = BinMapper(max_bins=64, random_state=0).fit(X64)
    for cuts32, cuts64 in zip(mapper32.cuts_, mapper64.cuts_, strict=True):
        np.testing.assert_array_equal(cuts32, cuts64)
    X_binned = mapper32.transform(X32)
    np.testing.assert_array_equal(X_binned, mapper64.transform(X64))
    check_cut_rule(mapper32, X64, X_binned)


def test_matches_naive_oracle_on_awkward_data():
    rng = np.random.default_rng(9)
    X = np.column_stack(
        [
            rng.normal(size=157),
            rng.integers(-3, 4, size=157).astype(np.float64),
            np.where(rng.uniform(size=157) < 0.5, np.nan, rng.exponential(size=157)),
            rng.choice([-np.inf, np.inf, 0.0, np.nan], size=157),
            rng.standard_cauchy(size=157) * 1e300,
        ]
    )
    for max_bins in (2, 3, 7, 255):
        mapper = BinMapper(max_bins=max_bins, random_state=0).fit(X)
        check_invariants(mapper, max_bins)
        X_binned = mapper.transform(X)
        np.testing.assert_array_equal(X_binned.T, naive_codes(mapper, X))


# ------------------------------------------------------------------ integers


@pytest.mark.parametrize("dtype", [np.int8, np.uint8])
def test_prebinned_identity_zero_copy_for_fortran_input(dtype):
    rng = np.random.default_rng(10)
    X = np.asfortranarray(rng.integers(0, 5, size=(500, 7)).astype(dtype))
    X[:, 3] = np.minimum(X[:, 3], 2)
    mapper = BinMapper().fit(X)
    assert mapper.prebinned_
    assert mapper.binned_dtype_ is np.uint8
    np.testing.assert_array_equal(mapper.n_bins_, X.max(axis=0).astype(np.int64) + 1)
    for n_bins, cuts in zip(mapper.n_bins_, mapper.cuts_, strict=True):
        np.testing.assert_array_equal(cuts, np.arange(n_bins - 1))
    for X_binned in (
        mapper.transform(X),
        mapper.transform(X, row_order=np.arange(500)),
        BinMapper().fit_transform(X),
    ):
        assert np.shares_memory(X_binned, X)
        assert X_binned.dtype == np.uint8 and X_binned.shape == (7, 500)
        assert X_binned.flags.c_contiguous
        assert not X_binned.flags.writeable
        np.testing.assert_array_equal(X_binned, X.T)


@pytest.mark.parametrize("dtype", [np.int8, np.uint8])
def test_prebinned_c_ordered_input_is_copied(dtype):
    X = np.ascontiguousarray(np.random.default_rng(11).integers(0, 5, size=(300, 6)), dtype=dtype)
    mapper = BinMapper().fit(X)
    assert mapper.prebinned_
    X_binned = mapper.transform(X)
    assert not np.shares_memory(X_binned, X)
    assert X_binned.flags.c_contiguous and X_binned.dtype == np.uint8
    np.testing.assert_array_equal(X_binned, X.T)


@pytest.mark.parametrize("dtype", [np.int16, np.int32, np.uint16, np.int64, np.uint64])
def test_prebinned_wider_integers_identity(dtype):
    X = np.random.default_rng(12).integers(0, 200, size=(400, 3)).astype(dtype)
    mapper = BinMapper().fit(X)
    assert mapper.prebinned_
    np.testing.assert_array_equal(mapper.transform(X), X.T)


def test_prebinned_out_of_range_values_follow_cut_rule():
    X_train = np.asfortranarray(np.tile(np.arange(5, dtype=np.int8), (2, 20)).T)
    mapper = BinMapper().fit(X_train)
    X_new = np.asfortranarray(np.array([[-3, 0], [4, 9], [127, 2], [-128, 5]], dtype=np.int8))
    X_binned = mapper.transform(X_new)
    assert not np.shares_memory(X_binned, X_new)
    np.testing.assert_array_equal(X_binned, [[0, 4, 4, 0], [0, 4, 2, 4]])
    # Wider integers and floats against the same pre-binned mapper.
    np.testing.assert_array_equal(
        mapper.transform(X_new.astype(np.int64) * 1000), [[0, 4, 4, 0], [0, 4, 4, 4]]
    )
    X_float = np.array([[2.5, np.nan], [-0.5, 1.0]])
    np.testing.assert_array_equal(mapper.transform(X_float), [[3, 0], [5, 1]])
    np.testing.assert_array_equal(mapper.transform(X_new).T, naive_codes(mapper, X_new))


@pytest.mark.parametrize(
    "X_new, expected",
    [
        ([[0, 1], [7, 2], [4, 0]], [[0, 4, 4], [1, 2, 0]]),  # too large only
        ([[0, 1], [-1, 2], [4, 0]], [[0, 0, 4], [1, 2, 0]]),  # negative only
    ],
)
def test_prebinned_zero_copy_only_when_values_are_in_range(X_new, expected):
    mapper = BinMapper().fit(np.asfortranarray(np.tile(np.arange(5, dtype=np.int8), (2, 4)).T))
    X_new = np.asfortranarray(np.array(X_new, dtype=np.int8))
    X_binned = mapper.transform(X_new)
    assert not np.shares_memory(X_binned, X_new)
    np.testing.assert_array_equal(X_binned, expected)


def test_bool_input_is_prebinned():
    X = np.asfortranarray(np.random.default_rng(13).uniform(size=(50, 3)) < 0.5)
    mapper = BinMapper().fit(X)
    assert mapper.prebinned_
    X_binned = mapper.transform(X)
    assert np.shares_memory(X_binned, X)
    np.testing.assert_array_equal(X_binned, X.T)


def test_int64_with_values_above_max_bins_uses_quantiles():
    values = np.random.default_rng(14).integers(0, 100_000, size=5_000)
    mapper = BinMapper(max_bins=32, random_state=0).fit(values[:, None])
    assert not mapper.prebinned_
    assert mapper.n_bins_[0] == 32
    assert np.any(mapper.cuts_[0] != np.round(mapper.cuts_[0]))  # not the identity cuts
    codes = mapper.transform(values[:, None])
    np.testing.assert_allclose(np.bincount(codes[0]), 5_000 / 32, rtol=0.05)
    check_cut_rule(mapper, values[:, None], codes)


def test_int64_few_values_but_some_above_max_bins_are_exact():
    values = np.array([0, 1, 2, 300, 2, 1], dtype=np.int64)
    mapper = BinMapper(max_bins=255).fit(values[:, None])
    assert not mapper.prebinned_
    np.testing.assert_array_equal(mapper.cuts_[0], [0.5, 1.5, 151.0])
    np.testing.assert_array_equal(mapper.transform(values[:, None])[0], [0, 1, 2, 3, 2, 1])


def test_negative_integers_are_not_prebinned():
    values = np.array([-2, 0, 3, -2, 3], dtype=np.int8)
    mapper = BinMapper().fit(values[:, None])
    assert not mapper.prebinned_
    np.testing.assert_array_equal(mapper.cuts_[0], [-1.0, 1.5])
    np.testing.assert_array_equal(mapper.transform(values[:, None])[0], [0, 1, 2, 0, 2])


# ------------------------------------------------------------------- layout


@pytest.mark.parametrize("n_cuts", [0, 1, 2, 3, 7, 8, 255, 256, 1000])
def test_binning_kernel_matches_searchsorted(n_cuts):
    # More values than one kernel row block; cut counts around powers of 2.
    from packboost._binning import map_to_bins

    rng = np.random.default_rng(22)
    n_values = 2048 * 2 + 17
    cuts = np.unique(rng.normal(size=n_cuts))
    values = rng.normal(size=n_values) * 1.5
    if n_cuts:  # values equal to a cut must go left
        values[::11] = cuts[rng.integers(0, cuts.size, values[::11].size)]
    values[5::97] = np.nan
    values[7::101] = np.inf
    values[9::103] = -np.inf
    out = np.full((1, n_values), 0, dtype=np.uint16)
    map_to_bins(values[:, None], cuts, np.array([0, cuts.size], dtype=np.int64),
                np.array([cuts.size + 1], dtype=np.int32), np.zeros(0, dtype=np.int64),
                out, 2)
    expected = np.searchsorted(cuts, values, side="left")
    expected[np.isnan(values)] = cuts.size + 1
    np.testing.assert_array_equal(out[0], expected)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int16])
@pytest.mark.parametrize("use_row_order", [False, True])
def test_tiled_layouts_cross_tile_and_block_edges(dtype, use_row_order):
    # More rows than one row tile, a feature count that is not a multiple of the
    # feature block, in C order, F order and a strided view.
    rng = np.random.default_rng(23)
    n_rows = 2 * 2048 + 1_234  # crosses the kernel's row blocks
    X = (rng.normal(size=(n_rows, 37)) * 40).astype(dtype)
    if X.dtype.kind == "f":
        X[rng.uniform(size=X.shape) < 0.05] = np.nan
    row_order = rng.permutation(n_rows)[: n_rows - 5] if use_row_order else None
    mapper = BinMapper(max_bins=64, random_state=0).fit(X)
    check_invariants(mapper, 64)
    expected = searchsorted_codes(mapper, X, row_order)
    wide = np.zeros((n_rows, 74), dtype=dtype)
    wide[:, ::2] = X
    for variant in (X, np.asfortranarray(X), wide[:, ::2]):
        np.testing.assert_array_equal(mapper.transform(variant, row_order=row_order), expected)


def test_empty_outputs():
    X = np.random.default_rng(24).normal(size=(30, 4))
    mapper = BinMapper().fit(X)
    for empty in (np.zeros(0, dtype=np.int64), []):
        X_binned = mapper.transform(X, row_order=empty)
        assert X_binned.shape == (4, 0) and X_binned.dtype == np.uint8
    assert mapper.transform(X[:0]).shape == (4, 0)
    no_rows = BinMapper().fit(np.zeros((0, 3)))
    np.testing.assert_array_equal(no_rows.n_bins_, [1, 1, 1])
    assert no_rows.transform(np.zeros((0, 3))).shape == (3, 0)
    X_new = np.array([[1.0, np.nan, -2.0]])
    np.testing.assert_array_equal(no_rows.transform(X_new), [[0], [1], [0]])
    for dtype in (np.float64, np.int8):
        no_features = BinMapper().fit(np.zeros((5, 0), dtype=dtype))
        assert no_features.n_bins_.shape == (0,)
        assert no_features.transform(np.zeros((5, 0), dtype=dtype)).shape == (0, 5)


def test_other_dtypes_at_transform_time():
    rng = np.random.default_rng(25)
    X = rng.integers(-50, 50, size=(500, 3)).astype(np.float64)
    mapper = BinMapper(max_bins=16, random_state=0).fit(X)
    expected = mapper.transform(X)
    for dtype in (np.int8, np.int32, np.int64, np.float16, np.float32):
        np.testing.assert_array_equal(mapper.transform(X.astype(dtype)), expected)


@pytest.mark.parametrize("order", ["C", "F"])
def test_row_order_gathers_rows(order):
    rng = np.random.default_rng(15)
    X = np.asarray(rng.normal(size=(1_000, 21)), order=order)
    X[rng.uniform(size=X.shape) < 0.1] = np.nan
    mapper = BinMapper(max_bins=50, random_state=0).fit(X)
    X_binned = mapper.transform(X)
    row_order = rng.permutation(1_000)[:700]
    row_order[:5] = row_order[0]  # repeats are allowed
    gathered = mapper.transform(X, row_order=row_order)
    assert gathered.shape == (21, 700) and gathered.flags.c_contiguous
    np.testing.assert_array_equal(gathered, X_binned[:, row_order])
    np.testing.assert_array_equal(mapper.fit_transform(X, row_order), gathered)


@pytest.mark.parametrize("order", ["C", "F"])
def test_prebinned_row_order_gathers_rows(order):
    rng = np.random.default_rng(16)
    X = np.asarray(rng.integers(0, 5, size=(400, 9), dtype=np.int8), order=order)
    mapper = BinMapper().fit(X)
    row_order = rng.permutation(400)
    gathered = mapper.transform(X, row_order=row_order)
    assert not np.shares_memory(gathered, X)
    np.testing.assert_array_equal(gathered, X[row_order].T)


@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.int32])
@pytest.mark.parametrize("n_features", [3, 1_100])
@pytest.mark.parametrize("use_row_order", [False, True])
def test_prebinned_codes_are_the_values_across_row_blocks(dtype, n_features, use_row_order):
    # In-range codes are copied, not counted against cuts: rows in C order
    # cross the kernel's row blocks (their size depends on the width: the
    # floor of 64 rows at 1,100 int8 features), with and without a row order.
    rng = np.random.default_rng(n_features)
    n_rows = 1_500
    X = rng.integers(0, 5, size=(n_rows, n_features)).astype(dtype)
    X[:, 0] = 4   # every column's codes 0..4 (one column constant)
    mapper = BinMapper().fit(X)
    assert mapper.prebinned_
    row_order = rng.permutation(n_rows)[:-3] if use_row_order else None
    expected = (X if row_order is None else X[row_order]).T
    for variant in (X, np.asfortranarray(X)):
        binned = mapper.transform(variant, row_order=row_order)
        np.testing.assert_array_equal(binned, expected)
        assert binned.dtype == np.uint8


def test_layouts_give_the_same_bins():
    rng = np.random.default_rng(17)
    X = rng.normal(size=(600, 40)).astype(np.float32)
    expected = BinMapper(max_bins=20, random_state=0).fit_transform(np.asfortranarray(X))
    for variant in (X, np.ascontiguousarray(X[::-1])[::-1], X[:, ::-1][:, ::-1]):
        np.testing.assert_array_equal(
            BinMapper(max_bins=20, random_state=0).fit_transform(variant), expected
        )


def test_uint16_output_above_255_bins():
    values = np.random.default_rng(18).normal(size=(20_000, 2))
    values[::7, 1] = np.nan
    mapper = BinMapper(max_bins=1_000, random_state=0).fit(values)
    assert mapper.binned_dtype_ is np.uint16
    assert mapper.n_bins_.max() > 255
    X_binned = mapper.transform(values)
    assert X_binned.dtype == np.uint16
    assert X_binned[1][::7].tolist() == [mapper.n_bins_[1]] * len(range(0, 20_000, 7))
    check_cut_rule(mapper, values, X_binned)


def test_255_bins_plus_missing_fit_uint8():
    values = np.arange(1_000, dtype=np.float64)
    values[0] = np.nan
    mapper = BinMapper(max_bins=255).fit(values[:, None])
    assert mapper.n_bins_[0] == 255
    assert mapper.binned_dtype_ is np.uint8
    assert mapper.transform(values[:, None])[0, 0] == 255


def test_prebinned_256_codes_need_uint16():
    X = np.asfortranarray(np.arange(256, dtype=np.uint8)[:, None])
    mapper = BinMapper(max_bins=256).fit(X)
    assert mapper.prebinned_ and mapper.binned_dtype_ is np.uint16
    X_binned = mapper.transform(X)
    assert X_binned.dtype == np.uint16
    np.testing.assert_array_equal(X_binned[0], np.arange(256))


# -------------------------------------------------------------- determinism


def test_seed_makes_fit_deterministic():
    X = np.random.default_rng(19).normal(size=(5_000, 3))

    def fit_cuts(seed):
        return BinMapper(max_bins=16, subsample=200, random_state=seed).fit(X).cuts_

    first, again, other = fit_cuts(42), fit_cuts(42), fit_cuts(43)
    for a, b in zip(first, again, strict=True):
        np.testing.assert_array_equal(a, b)
    assert any(not np.array_equal(a, b) for a, b in zip(first, other, strict=True))


# ------------------------------------------------------------ serialisation


@pytest.mark.parametrize("kind", ["float", "prebinned", "empty"])
def test_round_trip_through_arrays(kind):
    rng = np.random.default_rng(20)
    if kind == "float":
        X = rng.normal(size=(2_000, 4))
        X[:, 1] = np.round(X[:, 1])
        X[:, 2] = np.nan
        X[::3, 3] = np.inf
    elif kind == "prebinned":
        X = np.asfortranarray(rng.integers(0, 5, size=(2_000, 4), dtype=np.int8))
    else:
        X = np.empty((10, 0))
    mapper = BinMapper(max_bins=30, random_state=0).fit(X)
    metadata = json.loads(json.dumps(mapper.to_metadata()))
    arrays = mapper.to_arrays()
    assert arrays["bin_n_bins"].dtype == np.int32
    assert arrays["bin_cuts"].dtype == np.float64
    assert arrays["bin_cut_offsets"].dtype == np.int64
    assert arrays["bin_cut_offsets"].shape == (X.shape[1] + 1,)
    restored = BinMapper.from_arrays(metadata, arrays)
    assert restored.prebinned_ == mapper.prebinned_
    assert restored.binned_dtype_ is mapper.binned_dtype_
    np.testing.assert_array_equal(restored.n_bins_, mapper.n_bins_)
    for a, b in zip(restored.cuts_, mapper.cuts_, strict=True):
        np.testing.assert_array_equal(a, b)
    X_other = np.asarray(rng.normal(size=(100, X.shape[1])) * 3)
    np.testing.assert_array_equal(restored.transform(X), mapper.transform(X))
    np.testing.assert_array_equal(restored.transform(X_other), mapper.transform(X_other))


def _fitted_payload():
    X = np.random.default_rng(21).normal(size=(500, 3))
    X[:, 2] = 1.0
    mapper = BinMapper(max_bins=8, random_state=0).fit(X)
    return mapper.to_metadata(), mapper.to_arrays()


def _corrupt(metadata, arrays, how):
    arrays = {key: value.copy() for key, value in arrays.items()}
    metadata = dict(metadata)
    if how == "missing_key":
        del arrays["bin_cuts"]
    elif how == "offsets_length":
        arrays["bin_cut_offsets"] = arrays["bin_cut_offsets"][:-1]
    elif how == "offsets_mismatch":
        arrays["bin_cut_offsets"][1] -= 1
    elif how == "offsets_start":
        arrays["bin_cut_offsets"] += 1
    elif how == "cuts_length":
        arrays["bin_cuts"] = arrays["bin_cuts"][:-1]
    elif how == "cuts_not_increasing":
        arrays["bin_cuts"][[1, 2]] = arrays["bin_cuts"][[2, 1]]
    elif how == "cuts_nan":
        arrays["bin_cuts"][0] = np.nan
    elif how == "cuts_inf":
        arrays["bin_cuts"][-1] = np.inf
    elif how == "n_bins_zero":
        arrays["bin_n_bins"][2] = 0
    elif how == "n_bins_above_max_bins":
        arrays["bin_n_bins"][0] = 9
    elif how == "n_bins_2d":
        arrays["bin_n_bins"] = arrays["bin_n_bins"][None, :]
    elif how == "n_bins_float":
        arrays["bin_n_bins"] = arrays["bin_n_bins"].astype(np.float64)
    elif how == "cuts_int":
        arrays["bin_cuts"] = arrays["bin_cuts"].astype(np.int64)
    elif how == "metadata_max_bins":
        metadata["max_bins"] = 1
    elif how == "metadata_missing":
        del metadata["prebinned"]
    elif how == "prebinned_not_identity":
        metadata["prebinned"] = True
    elif how == "prebinned_not_bool":
        metadata["prebinned"] = "yes"
    return metadata, arrays


@pytest.mark.parametrize(
    "how",
    [
        "missing_key",
        "offsets_length",
        "offsets_mismatch",
        "offsets_start",
        "cuts_length",
        "cuts_not_increasing",
        "cuts_nan",
        "cuts_inf",
        "n_bins_zero",
        "n_bins_above_max_bins",
        "n_bins_2d",
        "n_bins_float",
        "cuts_int",
        "metadata_max_bins",
        "metadata_missing",
        "prebinned_not_identity",
        "prebinned_not_bool",
    ],
)
def test_corrupted_arrays_raise(how):
    metadata, arrays = _fitted_payload()
    BinMapper.from_arrays(metadata, arrays)  # the uncorrupted payload is fine
    metadata, arrays = _corrupt(metadata, arrays, how)
    with pytest.raises(ValueError):
        BinMapper.from_arrays(metadata, arrays)


# --------------------------------------------------------------- validation


@pytest.mark.parametrize("max_bins", [1, 0, -5, 65536, 2.5, True, "255", None])
def test_bad_max_bins_raises(max_bins):
    with pytest.raises(ValueError, match="max_bins"):
        BinMapper(max_bins=max_bins).fit(np.zeros((3, 1)))


@pytest.mark.parametrize("max_bins", [2, np.int64(7), 65535])
def test_max_bins_bounds_are_accepted(max_bins):
    values = np.arange(100.0)[:, None]
    mapper = BinMapper(max_bins=max_bins).fit(values)
    assert mapper.n_bins_[0] == min(int(max_bins), 100)


@pytest.mark.parametrize("subsample", [0, -1, 1.5, None])
def test_bad_subsample_raises(subsample):
    with pytest.raises(ValueError, match="subsample"):
        BinMapper(subsample=subsample).fit(np.zeros((3, 1)))


def test_transform_checks_its_input():
    mapper = BinMapper().fit(np.zeros((5, 3)))
    with pytest.raises(ValueError, match="features"):
        mapper.transform(np.zeros((5, 4)))
    with pytest.raises(ValueError, match="2-D"):
        mapper.transform(np.zeros(5))
    with pytest.raises(ValueError, match="row_order"):
        mapper.transform(np.zeros((5, 3)), row_order=np.array([0, 5]))
    with pytest.raises(ValueError, match="row_order"):
        mapper.transform(np.zeros((5, 3)), row_order=np.array([-1]))
    with pytest.raises(ValueError, match="row_order"):
        mapper.transform(np.zeros((5, 3)), row_order=np.array([0.0, 1.0]))
    with pytest.raises(ValueError, match="fitted"):
        BinMapper().transform(np.zeros((5, 3)))
    with pytest.raises(TypeError):
        BinMapper().fit(np.zeros((5, 3), dtype=complex))


def test_fit_sample_gives_the_cuts_of_fit():
    # The cuts from X's row sample and its columns' distinct values (what a
    # Dask fit gathers) equal fit's on X: quantile columns, a column whose
    # sample misses a rare value, few values, NaN only, signed zeros, inf.
    rng = np.random.default_rng(7)
    n_rows, max_bins = 3000, 16
    columns = [rng.normal(size=n_rows),                                # many values
               np.where(rng.random(n_rows) < 0.999, rng.integers(0, 5, n_rows), 77.5),
               rng.integers(0, 40, n_rows).astype(float),              # more than max_bins
               np.full(n_rows, np.nan),
               np.where(rng.random(n_rows) < 0.5, -0.0, 0.0),
               np.where(rng.random(n_rows) < 0.01, np.inf, rng.integers(0, 3, n_rows))]
    X = np.column_stack(columns)
    X[rng.random(X.shape) < 0.05] = np.nan
    reference = BinMapper(max_bins=max_bins, subsample=500, random_state=3).fit(X)
    mapper = BinMapper(max_bins=max_bins, subsample=500, random_state=3)
    rows = mapper.sample_rows(n_rows)
    assert rows is not None and len(rows) == 500
    parts = np.array_split(X, 7)

    def column_distinct(features):
        union = []
        for k in features:
            pieces = [distinct_values(part[:, k], max_bins) for part in parts]
            values = None if any(p is None for p in pieces) else np.unique(np.concatenate(pieces))
            union.append(None if values is None or values.size > max_bins else values)
        return union

    mapper.fit_sample(X[rows], column_distinct)
    assert len(mapper.cuts_) == len(reference.cuts_)
    for mine, theirs in zip(mapper.cuts_, reference.cuts_, strict=True):
        np.testing.assert_array_equal(mine, theirs)
    np.testing.assert_array_equal(mapper.n_bins_, reference.n_bins_)
    np.testing.assert_array_equal(mapper.transform(X), reference.transform(X))


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16])
@pytest.mark.parametrize("n_features, n_rows, n_pieces", [(1, 1, 1), (3, 17, 4), (5, 0, 1),
                                                          (7, 1000, 3)])
@pytest.mark.parametrize("n_threads", [1, 2])
def test_place_columns_puts_each_piece_at_its_rows(dtype, n_features, n_rows, n_pieces,
                                                   n_threads):
    """A shard assembled from pieces binned elsewhere (packboost.dask): each
    piece's column i lands at row rows[i], every other cell untouched."""
    from packboost._binning import place_columns

    rng = np.random.default_rng(n_rows + n_pieces)
    full = rng.integers(0, np.iinfo(dtype).max, size=(n_features, n_rows), dtype=dtype)
    out = np.full((n_features, n_rows + 2), 7, dtype=dtype)   # two rows no piece covers
    places = rng.permutation(n_rows + 2)[:n_rows]
    for rows in np.array_split(np.arange(n_rows), n_pieces):
        rows = np.sort(rows)
        place_columns(np.ascontiguousarray(full[:, rows]), places[rows].astype(np.int64),
                      out, n_threads)
    expected = np.full_like(out, 7)
    for i in range(n_rows):   # naive oracle, cell by cell
        for k in range(n_features):
            expected[k, places[i]] = full[k, i]
    np.testing.assert_array_equal(out, expected)


def test_place_columns_refuses_rows_outside_the_matrix():
    from packboost._binning import place_columns

    out = np.zeros((2, 3), dtype=np.uint8)
    with pytest.raises(ValueError, match="row 3 outside"):
        place_columns(np.ones((2, 1), dtype=np.uint8), np.array([3]), out, 1)
    with pytest.raises(ValueError, match="piece 2x1, rows 2"):
        place_columns(np.ones((2, 1), dtype=np.uint8), np.array([0, 1]), out, 1)
    assert not out.any()


@pytest.mark.parametrize("kind", ["float_nan", "prebinned", "int16"])
@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("n_threads", [1, 2])
def test_transform_into_bins_rows_into_their_columns(kind, order, n_threads):
    """transform_into(X, out, rows, columns): column columns[i] of out holds
    transform's codes of row rows[i]; columns it is not given stay as they
    were (a Dask shard binning its local partitions into place)."""
    rng = np.random.default_rng(3)
    if kind == "float_nan":
        X = rng.normal(size=(300, 5))
        X[rng.random(X.shape) < 0.1] = np.nan
    elif kind == "prebinned":
        X = rng.integers(0, 5, size=(300, 5)).astype(np.uint8)
    else:
        X = rng.integers(-3, 40, size=(300, 5)).astype(np.int16)
    X = np.asarray(X, order=order)
    mapper = BinMapper(max_bins=16, random_state=0).fit(X)
    expected_codes = mapper.transform(X)
    rows = rng.permutation(300)[:120]
    columns = rng.permutation(400)[:120]
    out = np.full((5, 400), 99, dtype=mapper.binned_dtype_)
    mapper.transform_into(X, out, rows, columns, n_threads=n_threads)
    expected = np.full_like(out, 99)
    expected[:, columns] = expected_codes[:, rows]
    np.testing.assert_array_equal(out, expected)
    mapper.transform_into(X, out, rows[:0], columns[:0])   # no rows: nothing changes
    np.testing.assert_array_equal(out, expected)


def test_transform_into_refuses_a_wrong_output_or_mismatched_rows():
    X = np.arange(12, dtype=np.float64).reshape(4, 3)
    mapper = BinMapper(max_bins=8).fit(X)
    good = np.zeros((3, 4), dtype=mapper.binned_dtype_)
    for bad in (np.zeros((3, 4), dtype=np.int64), np.zeros((2, 4), dtype=good.dtype),
                np.zeros((4, 3), dtype=good.dtype).T):
        with pytest.raises(ValueError, match="out must be"):
            mapper.transform_into(X, bad, [0], [0])
    with pytest.raises(ValueError, match="one length"):
        mapper.transform_into(X, good, [0, 1], [0])
    with pytest.raises(ValueError, match="column 4 outside"):
        mapper.transform_into(X, good, [0], [4])
    with pytest.raises(ValueError, match="row_order must index"):
        mapper.transform_into(X, good, [4], [0])
    assert not good.any()
