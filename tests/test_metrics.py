"""Tests of packboost.metrics: per-era correlation and era summaries."""

import math

import numpy as np
import pandas as pd
import pytest

from packboost.metrics import era_summary, per_era_correlation


def _random_panel(seed=0, n_rows=1_237, n_eras=17):
    """Unsorted eras, ties on both sides (5-level target, rounded predictions)."""
    rng = np.random.default_rng(seed)
    era = rng.integers(n_eras, size=n_rows)
    y_true = rng.integers(5, size=n_rows) / 4
    y_pred = np.round(0.3 * y_true + rng.normal(size=n_rows), 1)
    return y_true, y_pred, era


def _oracle(y_true, y_pred, era, method):
    """Per-era correlation with pandas (ranks) and np.corrcoef, era by era."""
    frame = pd.DataFrame({"y_true": y_true, "y_pred": y_pred, "era": era})
    eras, values = [], []
    for label, group in frame.groupby("era", sort=True):
        a, b = group["y_true"].to_numpy(), group["y_pred"].to_numpy()
        if method == "spearman":
            a = group["y_true"].rank(method="average").to_numpy()
            b = group["y_pred"].rank(method="average").to_numpy()
        eras.append(label)
        values.append(np.corrcoef(a, b)[0, 1])
    return np.array(eras), np.array(values)


@pytest.mark.parametrize("method", ["pearson", "spearman"])
def test_matches_oracle_on_random_data_with_ties(method):
    y_true, y_pred, era = _random_panel()
    eras, correlations = per_era_correlation(y_true, y_pred, era, method=method)
    expected_eras, expected = _oracle(y_true, y_pred, era, method)
    np.testing.assert_array_equal(eras, expected_eras)
    np.testing.assert_allclose(correlations, expected, rtol=1e-12, atol=1e-12)
    assert correlations.dtype == np.float64


def test_spearman_matches_pandas_corr():
    y_true, y_pred, era = _random_panel(seed=1)
    frame = pd.DataFrame({"a": y_true, "b": y_pred, "era": era})
    # DataFrame.corr ranks in pandas' own code (Series.corr would need scipy).
    expected = [
        group[["a", "b"]].corr(method="spearman").iloc[0, 1]
        for _, group in frame.groupby("era", sort=True)
    ]
    eras, correlations = per_era_correlation(y_true, y_pred, era, method="spearman")
    np.testing.assert_array_equal(eras, np.unique(era))
    np.testing.assert_allclose(correlations, expected, rtol=1e-12)


def test_spearman_is_invariant_to_monotone_transforms():
    y_true, y_pred, era = _random_panel(seed=2)
    _, base = per_era_correlation(y_true, y_pred, era, method="spearman")
    _, transformed = per_era_correlation(y_true, np.exp(3 * y_pred), era, method="spearman")
    np.testing.assert_allclose(transformed, base, rtol=1e-12)


@pytest.mark.parametrize("method", ["pearson", "spearman"])
def test_row_order_does_not_matter(method):
    y_true, y_pred, era = _random_panel(seed=3)
    order = np.random.default_rng(0).permutation(y_true.size)
    _, base = per_era_correlation(y_true, y_pred, era, method=method)
    _, shuffled = per_era_correlation(y_true[order], y_pred[order], era[order], method=method)
    np.testing.assert_allclose(shuffled, base, rtol=1e-12, atol=1e-14)


def test_string_eras_are_sorted():
    y_true, y_pred, era = _random_panel(seed=4, n_eras=5)
    labels = np.array(["era10", "era2", "era3", "era1", "era5"])[era]
    eras, correlations = per_era_correlation(y_true, y_pred, labels.tolist())
    assert eras.tolist() == ["era1", "era10", "era2", "era3", "era5"]
    _, by_int = per_era_correlation(y_true, y_pred, era)
    np.testing.assert_allclose(correlations, by_int[[3, 0, 1, 2, 4]], rtol=1e-12)


@pytest.mark.parametrize("method", ["pearson", "spearman"])
def test_undefined_eras_are_nan(method):
    era = np.array([0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 4, 4, 4])
    y_true = np.array([0.1, 0.1, 0.1, 1, 2, 3, 1, 2, 3, 5, 1, 2, 3], dtype=float)
    y_pred = np.array([1, 2, 3, 4, 4, 4, 1, 3, 2, 7, 1, np.nan, 3], dtype=float)
    # era 0: constant y_true (0.1 does not survive a centred sum exactly);
    # era 1: constant y_pred; era 3: one row; era 4: a NaN.
    eras, correlations = per_era_correlation(y_true, y_pred, era, method=method)
    assert eras.tolist() == [0, 1, 2, 3, 4]
    assert np.isnan(correlations[[0, 1, 3, 4]]).all()
    assert correlations[2] == pytest.approx(0.5)


def test_perfect_correlations_are_exactly_bounded():
    x = np.linspace(0, 1, 50)
    era = np.repeat([0, 1], 25)
    _, correlations = per_era_correlation(x, np.r_[3 * x[:25], -2 * x[25:]], era)
    assert correlations[0] == pytest.approx(1.0) and correlations[0] <= 1.0
    assert correlations[1] == pytest.approx(-1.0) and correlations[1] >= -1.0


def test_empty_input():
    eras, correlations = per_era_correlation([], [], [])
    assert eras.size == 0 and correlations.size == 0


def test_length_and_shape_errors():
    with pytest.raises(ValueError, match="y_pred"):
        per_era_correlation([1, 2, 3], [1, 2], [0, 0, 0])
    with pytest.raises(ValueError, match="era"):
        per_era_correlation([1, 2, 3], [1, 2, 3], [0, 0])
    with pytest.raises(ValueError, match="y_true"):
        per_era_correlation([[1, 2, 3]], [1, 2, 3], [0, 0, 0])
    with pytest.raises(ValueError, match="method"):
        per_era_correlation([1, 2, 3], [1, 2, 3], [0, 0, 0], method="kendall")


def test_summary_hand_made_sequence():
    values = [0.1, -0.2, 0.3, -0.1, -0.15, 0.2]
    summary = era_summary(values)
    mean = sum(values) / 6
    std = math.sqrt(sum((v - mean) ** 2 for v in values) / 6)
    assert summary["mean"] == pytest.approx(mean)
    assert summary["std"] == pytest.approx(std)
    assert summary["sharpe"] == pytest.approx(mean / std)
    assert summary["worst"] == pytest.approx(-0.2)
    # Cumulative: 0.1, -0.1, 0.2, 0.1, -0.05, 0.15; worst fall 0.2 -> -0.05.
    assert summary["max_drawdown"] == pytest.approx(0.25)
    assert summary["n_eras"] == 6
    assert isinstance(summary["n_eras"], int)
    assert all(isinstance(summary[key], float) for key in ("mean", "std", "sharpe"))


def test_summary_drawdown_edge_cases():
    # The cumulative sum starts at 0, so a losing first era is a drawdown.
    assert era_summary([-0.1, 0.05])["max_drawdown"] == pytest.approx(0.1)
    assert era_summary([0.1, 0.2, 0.3])["max_drawdown"] == 0.0
    assert era_summary([0.5, -0.1, -0.1, 0.9, -0.3])["max_drawdown"] == pytest.approx(0.3)


def test_summary_excludes_nan_eras():
    summary = era_summary([0.1, np.nan, 0.3])
    assert summary["n_eras"] == 2
    assert summary["mean"] == pytest.approx(0.2)
    assert summary["std"] == pytest.approx(0.1)
    assert summary["max_drawdown"] == 0.0


def test_summary_degenerate_inputs():
    for values in ([], [np.nan, np.nan]):
        summary = era_summary(values)
        assert summary["n_eras"] == 0
        assert all(math.isnan(summary[key]) for key in summary if key != "n_eras")
    constant = era_summary([0.2, 0.2])
    assert constant["std"] == 0.0 and math.isnan(constant["sharpe"])
    with pytest.raises(ValueError, match="per_era_values"):
        era_summary([[0.1, 0.2]])


def test_summary_of_per_era_correlation():
    y_true, y_pred, era = _random_panel(seed=5)
    _, correlations = per_era_correlation(y_true, y_pred, era)
    summary = era_summary(correlations)
    assert summary["n_eras"] == 17
    assert summary["mean"] == pytest.approx(np.mean(correlations))
