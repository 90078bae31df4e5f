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


# ----------------------------------------------------------------------------- Numerai


def _numetrics_frame():
    """Real Numerai validation targets and example predictions shipped by numetrics.

    The package is not imported (its module imports pkg_resources); only its
    data file is read.
    """
    import importlib.util
    from pathlib import Path

    pytest.importorskip("pyarrow")
    spec = importlib.util.find_spec("numetrics")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("numetrics is not installed")
    path = Path(spec.submodule_search_locations[0]) / "data" / "val_target_preds.parquet"
    if not path.exists():
        pytest.skip("numetrics ships no val_target_preds.parquet")
    return pd.read_parquet(path)


def _numerai_tools_per_era(frame, prediction_column, target_column="target"):
    scoring = pytest.importorskip("numerai_tools.scoring")
    return frame.groupby("era").apply(
        lambda group: scoring.numerai_corr(group[[prediction_column]],
                                           group[target_column])[prediction_column])


def test_normal_quantile_matches_scipy_and_the_standard_library():
    from statistics import NormalDist

    from packboost.metrics import _normal_quantile

    p = np.concatenate([np.linspace(1e-12, 1 - 1e-12, 4001), [1e-300, 0.075, 0.925, 0.5]])
    ours = _normal_quantile(p)
    expected = np.array([NormalDist().inv_cdf(value) for value in p])
    np.testing.assert_allclose(ours, expected, rtol=1e-14, atol=1e-14)
    stats = pytest.importorskip("scipy.stats")
    np.testing.assert_allclose(ours, stats.norm.ppf(p), rtol=1e-13, atol=1e-13)


def test_numerai_correlation_matches_numerai_tools_on_real_targets():
    """Golden test: 28 real validation eras, Numerai's example predictions."""
    frame = _numetrics_frame()
    # numerai_tools centres and powers a float32 target in float32; in float64
    # (the targets 0, 0.25, ..., 1 are exact in both) the two agree to rounding.
    frame["target"] = frame["target"].astype(np.float64)
    expected = _numerai_tools_per_era(frame, "example_prediction")
    eras, ours = per_era_correlation(frame["target"], frame["example_prediction"],
                                     frame["era"], method="numerai")
    assert len(eras) == 28
    np.testing.assert_allclose(ours, expected.loc[eras].to_numpy(), rtol=0, atol=1e-9)


def test_numerai_correlation_with_float32_targets_and_ties():
    frame = _numetrics_frame()
    frame = frame[frame["era"].isin(frame["era"].unique()[:6])].copy()
    frame["rounded"] = frame["example_prediction"].round(3)  # many ties
    expected = _numerai_tools_per_era(frame, "rounded")
    eras, ours = per_era_correlation(frame["target"], frame["rounded"], frame["era"],
                                     method="numerai")
    # The reference rounds its float32 target arithmetic; ours is float64.
    np.testing.assert_allclose(ours, expected.loc[eras].to_numpy(), rtol=0, atol=1e-7)


def test_feature_neutral_correlation_matches_numerai_tools():
    from packboost.metrics import feature_neutral_correlation

    scoring = pytest.importorskip("numerai_tools.scoring")
    frame = _numetrics_frame()
    frame = frame[frame["era"].isin(frame["era"].unique()[:4])].copy()
    frame["target"] = frame["target"].astype(np.float64)
    rng = np.random.default_rng(0)
    features = pd.DataFrame(rng.integers(0, 5, size=(len(frame), 6)).astype(np.int8),
                            index=frame.index, columns=[f"feature_{i}" for i in range(6)])
    # One feature carries the predictions, so neutralising changes the score.
    features["feature_0"] = (frame["example_prediction"].rank(pct=True) * 4.99).astype(np.int8)
    expected = frame.groupby("era").apply(
        lambda group: scoring.feature_neutral_corr(group[["example_prediction"]],
                                                   features.loc[group.index],
                                                   group["target"])["example_prediction"])
    eras, ours = feature_neutral_correlation(frame["target"], frame["example_prediction"],
                                             features, frame["era"])
    np.testing.assert_allclose(ours, expected.loc[eras].to_numpy(), rtol=0, atol=1e-9)
    _, plain = per_era_correlation(frame["target"], frame["example_prediction"], frame["era"],
                                   method="numerai")
    assert not np.allclose(ours, plain)
    _, untouched = feature_neutral_correlation(frame["target"], frame["example_prediction"],
                                               features, frame["era"], proportion=0.0)
    np.testing.assert_allclose(untouched, plain, atol=1e-12)


def test_numerai_correlation_properties():
    from packboost.metrics import numerai_correlation

    y_true, y_pred, era = _random_panel(seed=6)
    _, per_era = per_era_correlation(y_true, y_pred, era, method="numerai")
    # Rank-based on the prediction side: invariant to monotone maps of y_pred.
    _, monotone = per_era_correlation(y_true, np.exp(y_pred), era, method="numerai")
    np.testing.assert_allclose(monotone, per_era, rtol=1e-12)
    # One era alone is the pooled function.
    first = era == era.min()
    assert numerai_correlation(y_true[first], y_pred[first]) == pytest.approx(per_era[0],
                                                                               rel=1e-12)
    assert np.isnan(numerai_correlation([1.0, 1.0, 1.0], [0.1, 0.2, 0.3]))


def test_era_none_is_one_era():
    y_true, y_pred, _ = _random_panel(seed=7)
    eras, correlations = per_era_correlation(y_true, y_pred)
    assert eras.tolist() == [0]
    assert correlations[0] == pytest.approx(np.corrcoef(y_true, y_pred)[0, 1], rel=1e-12)


def test_era_report_table_summary_and_frame():
    from packboost.metrics import era_report

    y_true, y_pred, era = _random_panel(seed=8, n_eras=30)
    report = era_report(y_true, y_pred, era)
    assert list(report.scores) == ["pearson", "spearman", "numerai"]
    assert report.n_rows.sum() == y_true.size
    _, numerai = per_era_correlation(y_true, y_pred, era, method="numerai")
    np.testing.assert_array_equal(report.scores["numerai"], numerai)
    assert report.summary["numerai"] == era_summary(numerai)
    table = report.format_table()
    assert len(table.splitlines()) == 31 and "numerai_cum" in table
    assert "..." in report.format_table(max_rows=10)
    assert "max_drawdown" in str(report)
    frame = report.to_frame()
    assert list(frame.columns) == ["n_rows", "pearson", "spearman", "numerai"]
    assert report.to_dict()["era"] == list(range(30))
    with pytest.raises(ValueError, match="method"):
        era_report(y_true, y_pred, era, methods=["kendall"])


def test_eval_metric_names_resolve():
    from packboost.metrics import EVAL_METRIC_NAMES, resolve_eval_metric

    assert "numerai_sharpe" in EVAL_METRIC_NAMES and "spearman_max_drawdown" in EVAL_METRIC_NAMES
    metric = resolve_eval_metric("numerai_max_drawdown", objective_name="squared_error")
    assert (metric.method, metric.statistic, metric.higher_is_better) == \
        ("numerai", "max_drawdown", False)
    assert resolve_eval_metric("pearson_sharpe", objective_name="logistic").higher_is_better
    assert not resolve_eval_metric("rmse", objective_name="squared_error").higher_is_better
    with pytest.raises(ValueError, match="eval_metric"):
        resolve_eval_metric("kendall_mean", objective_name="squared_error")
    with pytest.raises(ValueError, match="classifier"):
        resolve_eval_metric("logloss", objective_name="squared_error")


# -- extreme scales -------------------------------------------------------------------
#
# A correlation does not depend on the scale of either input, a summary's mean,
# std, worst and drawdown scale with it (the Sharpe ratio does not), and
# pooled errors scale with it; none may underflow to 0 or overflow to inf on
# the way where the result itself is an ordinary float.

SCALES = [1e-300, 1e-200, 2.0**-600, 1e-160, 1e120, 2.0**500, 1e160, 1e300]


@pytest.mark.parametrize("method", ["pearson", "spearman", "numerai"])
@pytest.mark.parametrize("scale", SCALES)
def test_per_era_correlations_do_not_depend_on_the_scale(method, scale):
    y_true, y_pred, era = _random_panel(seed=9)
    y_pred = y_pred + 0.01 * np.random.default_rng(0).normal(size=len(y_pred))  # no ties
    _, reference = per_era_correlation(y_true, y_pred, era, method=method)
    assert np.isfinite(reference).all() and np.abs(reference).max() < 0.9
    for target, prediction in ((y_true * scale, y_pred), (y_true, y_pred * scale),
                               (y_true * scale, y_pred / scale)):
        _, scaled = per_era_correlation(target, prediction, era, method=method)
        np.testing.assert_allclose(scaled, reference, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("scale", [2.0**-900, 2.0**-500, 2.0**300, 2.0**900])
def test_pearson_under_power_of_two_scales_is_bit_identical(scale):
    y_true, y_pred, era = _random_panel(seed=10)
    _, reference = per_era_correlation(y_true, y_pred, era)
    _, scaled = per_era_correlation(y_true * scale, y_pred * scale, era)
    np.testing.assert_array_equal(scaled, reference)


@pytest.mark.parametrize("scale", [1e-200, 1e-100, 1e100, 1e200])
def test_feature_neutral_correlation_does_not_depend_on_the_scale(scale):
    from packboost.metrics import feature_neutral_correlation

    y_true, y_pred, era = _random_panel(seed=11)
    rng = np.random.default_rng(1)
    features = rng.integers(0, 5, size=(len(y_true), 4)).astype(np.float64)
    features[:, 0] = np.round(y_pred)  # a feature that explains part of the predictions
    _, reference = feature_neutral_correlation(y_true, y_pred, features, era)
    assert np.isfinite(reference).all()
    _, plain = per_era_correlation(y_true, y_pred, era, method="numerai")
    assert not np.allclose(reference, plain, atol=1e-3)
    _, scaled = feature_neutral_correlation(y_true * scale, y_pred * scale,
                                            features * scale, era)
    np.testing.assert_allclose(scaled, reference, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("scale", [1e-300, 2.0**-1000, 1e-200, 1e200, 2.0**1000, 1e300])
def test_era_summary_scales_with_its_values(scale):
    values = np.array([0.02, -0.01, 0.03, np.nan, -0.04, 0.05, 0.01])
    reference = era_summary(values)
    summary = era_summary(values * scale)
    assert summary["n_eras"] == reference["n_eras"]
    assert summary["sharpe"] == pytest.approx(reference["sharpe"], rel=1e-12)
    for key in ("mean", "std", "worst", "max_drawdown"):
        assert summary[key] == pytest.approx(reference[key] * scale, rel=1e-12), key
        if math.log2(scale).is_integer():
            assert summary[key] == reference[key] * scale, key  # exact


@pytest.mark.parametrize("scale", [1e-300, 1e-200, 2.0**-800, 1e200, 1e300])
def test_pooled_errors_scale_with_the_target(scale):
    from packboost._eval_metrics import pooled_metric

    rng = np.random.default_rng(3)
    y_true = rng.normal(size=101)
    prediction = y_true + rng.normal(size=101)
    for name in ("rmse", "mae"):
        reference = pooled_metric(name, y_true, prediction, prediction)
        scaled = pooled_metric(name, y_true * scale, prediction * scale, prediction * scale)
        assert scaled == pytest.approx(reference * scale, rel=1e-12), name
        if math.log2(scale).is_integer():
            assert scaled == reference * scale, name
