"""Plots: rendered to PNG, non-trivial, and usable on existing axes."""

import builtins
import sys

import numpy as np
import pytest

from packboost import PackBoostRegressor
from packboost.datasets import make_numerai_like
from packboost.metrics import era_report, per_era_correlation

matplotlib = pytest.importorskip("matplotlib")
from packboost import plotting  # noqa: E402

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
MIN_PNG_BYTES = 8_000  # a blank figure of these sizes is ~3-5 kB


@pytest.fixture(scope="module")
def fitted():
    data = make_numerai_like(n_rows=2400, n_features=8, n_eras=24, signal=0.3, random_state=0)
    train, test = data.split_by_era(0.25)
    names = [f"feature_{i}" for i in range(data.n_features)]
    pd = pytest.importorskip("pandas")
    model = PackBoostRegressor(n_estimators=8, max_depth=3, random_state=0, n_jobs=1)
    model.fit(pd.DataFrame(train.X, columns=names), train.y, era=train.era,
              eval_set=[(pd.DataFrame(test.X, columns=names), test.y, test.era)],
              early_stopping_rounds=3)
    return model, test, names


def _check_png(path):
    data = path.read_bytes()
    assert data.startswith(PNG_SIGNATURE)
    assert len(data) > MIN_PNG_BYTES, len(data)


def test_era_correlation_plot(fitted, tmp_path):
    model, test, names = fitted
    pd = pytest.importorskip("pandas")
    prediction = model.predict(pd.DataFrame(test.X, columns=names))
    figure = plotting.plot_era_correlation(test.y, prediction, test.era, method="numerai",
                                           path=tmp_path / "eras.png")
    _check_png(tmp_path / "eras.png")
    bars_ax, line_ax = figure.axes
    assert len(bars_ax.patches) == 6  # one bar per held-out era
    line = line_ax.get_lines()[0]
    _, scores = per_era_correlation(test.y, prediction, test.era, method="numerai")
    np.testing.assert_allclose(line.get_ydata(), np.cumsum(scores))


def test_importance_and_metric_plots(fitted, tmp_path):
    model, _, names = fitted
    figure = plotting.plot_importance(model, max_features=5, path=tmp_path / "importance.png")
    _check_png(tmp_path / "importance.png")
    labels = [label.get_text() for label in figure.axes[0].get_yticklabels()]
    assert len(labels) == 5 and set(labels) <= set(names)
    top = names[int(np.argmax(model.feature_importances_))]
    assert labels[-1] == top  # largest bar on top
    plotting.plot_importance(model, importance_type="des", path=tmp_path / "des.png")
    _check_png(tmp_path / "des.png")

    figure = plotting.plot_metric(model, "pearson_mean", path=tmp_path / "curve.png")
    _check_png(tmp_path / "curve.png")
    lines = figure.axes[0].get_lines()
    assert len(lines[0].get_xdata()) == len(model.evals_result_["valid_0"]["pearson_mean"])
    assert lines[-1].get_xdata()[0] == model.best_iteration_  # the best-iteration marker
    plotting.plot_metric(model.evals_result_)  # a plain dict works too
    with pytest.raises(ValueError, match="no metric"):
        plotting.plot_metric(model, "auc")


def test_report_plot_and_existing_axes(fitted, tmp_path):
    _, test, _ = fitted
    rng = np.random.default_rng(0)
    report = era_report(test.y, test.y + rng.normal(size=test.n_rows), test.era)
    figure = plotting.plot_era_report(report, path=tmp_path / "report.png")
    _check_png(tmp_path / "report.png")
    assert len(figure.axes) == 6  # three panels, each with its cumulative axis
    from matplotlib.figure import Figure

    own = Figure()
    ax = own.add_subplot()
    assert plotting.plot_era_scores(report.eras, report.scores["pearson"], ax=ax) is own


def test_missing_matplotlib_is_named(fitted, monkeypatch):
    model, _, _ = fitted
    real_import = builtins.__import__

    def fake_import(name, *args, **kwargs):
        if name.startswith("matplotlib"):
            raise ImportError("No module named 'matplotlib'")
        return real_import(name, *args, **kwargs)

    for module in list(sys.modules):
        if module.startswith("matplotlib"):
            monkeypatch.delitem(sys.modules, module)
    monkeypatch.setattr(builtins, "__import__", fake_import)
    with pytest.raises(ImportError, match="pip install matplotlib"):
        plotting.plot_importance(model)
