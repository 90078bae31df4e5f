"""Model selection over eras with scikit-learn: the eras reach every fold's
fit (metadata routing, or a fit parameter), per-era scorers
(packboost.metrics.make_era_scorer), and the warning for a fold fitted
without eras."""

import re
import warnings
from pathlib import Path

import numpy as np
import pytest

sklearn = pytest.importorskip("sklearn")
from sklearn.model_selection import GridSearchCV, cross_validate  # noqa: E402

from packboost import PackBoostRegressor  # noqa: E402
from packboost.datasets import make_numerai_like  # noqa: E402
from packboost.metrics import make_era_scorer  # noqa: E402
from packboost.model_selection import EraKFold, EraNotPassedWarning, WalkForwardSplit  # noqa: E402

GUIDE_PAGE = Path(__file__).resolve().parents[1] / "docs" / "guide" / "model-selection.md"
PARAMS = dict(n_estimators=4, max_depth=3, pack_size=2, random_state=3, n_jobs=1)


@pytest.fixture(scope="module")
def data():
    # Eras shuffled and labelled by strings: the folds' rows are not contiguous.
    data = make_numerai_like(n_rows=900, n_features=6, n_eras=9, random_state=1)
    order = np.random.default_rng(0).permutation(len(data.y))
    era = np.array([f"{label:04d}" for label in np.asarray(data.era)[order]])
    return np.asarray(data.X)[order], np.asarray(data.y)[order], era


class _Recorder:
    """A scorer that keeps what each fold's model predicts on every row."""

    def __init__(self, X):
        self.X, self.models = X, []

    def __call__(self, estimator, X_test, y_test, **ignored):
        self.models.append((estimator.n_eras_, estimator.predict(self.X)))
        return 0.0


def _fold_fits(X, y, era, splitter, grid_values=(None,), name="max_depth"):
    """(n_eras_, predictions on X) of fit(era=...) on each fold's training rows."""
    expected = []
    for value in grid_values:
        for train, _ in splitter.split(X, y, era):
            params = PARAMS if value is None else {**PARAMS, name: value}
            model = PackBoostRegressor(**params).fit(X[train], y[train], era=era[train])
            expected.append((model.n_eras_, model.predict(X)))
    return expected


def _assert_same_models(recorded, expected):
    assert len(recorded) == len(expected)
    for (n_eras, prediction), (n_eras_expected, prediction_expected) in zip(
            recorded, expected, strict=True):
        assert n_eras == n_eras_expected > 1
        np.testing.assert_array_equal(prediction, prediction_expected)


def test_grid_search_with_routing_fits_each_fold_with_its_eras(data):
    X, y, era = data
    splitter = EraKFold(3, embargo=1)
    recorder = _Recorder(X)
    with sklearn.config_context(enable_metadata_routing=True), warnings.catch_warnings():
        warnings.simplefilter("error", EraNotPassedWarning)
        search = GridSearchCV(PackBoostRegressor(**PARAMS).set_fit_request(era=True),
                              {"max_depth": [2, 3]}, cv=splitter, scoring=recorder,
                              refit=False)
        search.fit(X, y, era=era)
    # Candidates in order, each over the folds in order.
    _assert_same_models(recorder.models, _fold_fits(X, y, era, splitter, (2, 3)))


def test_grid_search_without_routing_takes_era_as_a_fit_parameter(data):
    X, y, era = data
    splitter = WalkForwardSplit(3, embargo=1)
    recorder = _Recorder(X)
    with warnings.catch_warnings():
        warnings.simplefilter("error", EraNotPassedWarning)
        GridSearchCV(PackBoostRegressor(**PARAMS), {"max_depth": [3]}, cv=splitter,
                     scoring=recorder, refit=False).fit(X, y, groups=era, era=era)
    _assert_same_models(recorder.models, _fold_fits(X, y, era, splitter))


def test_cross_validate_with_routing_returns_fold_models_fitted_with_eras(data):
    X, y, era = data
    splitter = EraKFold(3)
    with sklearn.config_context(enable_metadata_routing=True):
        result = cross_validate(PackBoostRegressor(**PARAMS).set_fit_request(era=True), X, y,
                                cv=splitter, params={"era": era}, return_estimator=True,
                                scoring=make_era_scorer("numerai_mean"))
    recorded = [(model.n_eras_, model.predict(X)) for model in result["estimator"]]
    _assert_same_models(recorded, _fold_fits(X, y, era, splitter))
    # The scores are each fold model's per-era score on its test rows.
    for model, (_, test), score in zip(result["estimator"], splitter.split(X, y, era),
                                       result["test_score"], strict=True):
        assert score == make_era_scorer("numerai_mean")(model, X[test], y[test], era=era[test])


def test_a_fold_fitted_without_eras_warns(data):
    X, y, era = data
    with pytest.warns(EraNotPassedWarning, match="got no era inside a cross-validation"):
        GridSearchCV(PackBoostRegressor(**PARAMS), {"max_depth": [3]}, cv=EraKFold(3),
                     refit=False).fit(X, y, groups=era)
    with pytest.warns(EraNotPassedWarning):
        cross_validate(PackBoostRegressor(**PARAMS), X, y, groups=era, cv=WalkForwardSplit(2))
    with warnings.catch_warnings():
        warnings.simplefilter("error", EraNotPassedWarning)
        PackBoostRegressor(**PARAMS).fit(X, y)                        # no cross-validation
        cross_validate(PackBoostRegressor(**PARAMS), X, y, cv=3)      # not over eras


def _numerai_tools_scores(y, prediction, era):
    pd = pytest.importorskip("pandas")
    scoring = pytest.importorskip("numerai_tools.scoring")
    # In float64: numerai_tools centres and powers a float32 target in float32
    # (the targets 0, 0.25, ..., 1 are exact in both).
    frame = pd.DataFrame({"target": y.astype(np.float64), "prediction": prediction, "era": era})
    per_era = frame.groupby("era").apply(
        lambda group: scoring.numerai_corr(group[["prediction"]], group["target"])["prediction"])
    return per_era.to_numpy()


def test_era_scorer_equals_numerai_tools_per_era_correlation(data):
    X, y, era = data
    model = PackBoostRegressor(**PARAMS).fit(X, y, era=era)
    per_era = _numerai_tools_scores(y, model.predict(X), era)
    assert len(per_era) == 9
    score = {name: make_era_scorer(name)(model, X, y, era=era)
             for name in ("numerai_mean", "numerai_sharpe", "numerai_std", "numerai_worst")}
    np.testing.assert_allclose(score["numerai_mean"], per_era.mean(), rtol=0, atol=1e-12)
    np.testing.assert_allclose(score["numerai_sharpe"], per_era.mean() / per_era.std(ddof=0),
                               rtol=1e-10)
    np.testing.assert_allclose(score["numerai_std"], -per_era.std(ddof=0), rtol=1e-10)
    np.testing.assert_allclose(score["numerai_worst"], per_era.min(), rtol=0, atol=1e-12)


def test_era_scorer_reads_the_era_column_of_a_table_without_routing(data):
    pd = pytest.importorskip("pandas")
    X, y, era = data
    frame = pd.DataFrame(X, columns=[f"f{i}" for i in range(X.shape[1])]).assign(era=era)
    model = PackBoostRegressor(**PARAMS).fit(frame, y, era="era")
    scorer = make_era_scorer("pearson_mean")
    assert scorer(model, frame, y) == scorer(model, frame.drop(columns="era"), y, era=era)
    # Rows of a NaN target are left out of their era's correlation.
    y_missing = y.copy()
    y_missing[::4] = np.nan
    assert scorer(model, frame, y_missing) == scorer(model, frame[~np.isnan(y_missing)],
                                                     y[~np.isnan(y_missing)])


def test_era_scorer_without_era_or_with_a_bad_name_says_what_to_do(data):
    X, y, _ = data
    model = PackBoostRegressor(**PARAMS).fit(X, y)
    with pytest.raises(ValueError, match="enable_metadata_routing"):
        make_era_scorer("numerai_mean")(model, X, y)
    with pytest.raises(ValueError, match="must be one of"):
        make_era_scorer("rmse")
    with pytest.raises(ValueError, match="must be one of"):
        make_era_scorer(["numerai_mean"])


def test_guide_cross_validation_example_as_written_fits_folds_with_eras():
    """The user guide's block, run as written on small data: no fold without eras."""
    block = next(code for code in re.findall(r"```python\n(.*?)```", GUIDE_PAGE.read_text(),
                                             re.S)
                 if "GridSearchCV" in code)
    data = make_numerai_like(n_rows=1500, n_features=6, n_eras=24, random_state=0)
    namespace = {"PackBoostRegressor": PackBoostRegressor, "train": data}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", EraNotPassedWarning)
            exec(compile(block, "docs/guide/model-selection.md block", "exec"), namespace)
    finally:
        sklearn.set_config(enable_metadata_routing=False)
    assert namespace["scores"].shape == (5,) and np.isfinite(namespace["scores"]).all()
    search = namespace["search"]
    assert search.best_estimator_.n_eras_ == 24
    assert np.isfinite(search.best_score_)


def test_without_routing_a_table_with_its_era_column_is_enough(data):
    """fit(frame, y, groups=frame["era"], era="era"): each fold fits with its
    eras (the column) and the scorer reads the era column of the test rows."""
    pd = pytest.importorskip("pandas")
    X, y, era = data
    frame = pd.DataFrame(X, columns=[f"f{i}" for i in range(X.shape[1])]).assign(era=era)
    splitter = EraKFold(3)
    scorer = make_era_scorer("numerai_sharpe")
    with warnings.catch_warnings():
        warnings.simplefilter("error", EraNotPassedWarning)
        search = GridSearchCV(PackBoostRegressor(**PARAMS), {"max_depth": [3]}, cv=splitter,
                              scoring=scorer, error_score="raise").fit(
            frame, y, groups=frame["era"], era="era")
    for fold, (train, test) in enumerate(splitter.split(X, y, era)):
        model = PackBoostRegressor(**PARAMS).fit(X[train], y[train], era=era[train])
        assert search.cv_results_[f"split{fold}_test_score"][0] == scorer(
            model, X[test], y[test], era=era[test])


def test_era_scorer_of_several_targets_is_the_mean_of_theirs(data):
    X, y, era = data
    Y = np.column_stack([y, y[::-1]])
    Y[:100, 1] = np.nan
    model = PackBoostRegressor(**PARAMS).fit(X, Y, era=era)
    prediction = model.predict(X)
    scorer = make_era_scorer("spearman_worst")

    class _Fixed:
        """A model whose predictions are given."""

        def __init__(self, values):
            self.values = values

        def predict(self, X_):
            return self.values

    known = ~np.isnan(Y[:, 1])
    per_target = [scorer(_Fixed(prediction[:, 0]), X, Y[:, 0], era=era),
                  scorer(_Fixed(prediction[known, 1]), X[known], Y[known, 1], era=era[known])]
    assert scorer(model, X, Y, era=era) == pytest.approx(np.mean(per_target), abs=0, rel=1e-15)
