"""Thread counts: explicit, bounded by what the process may use, and harmless
next to other OpenMP libraries in the same process."""

import numpy as np
import pytest

from packboost import PackBoostRegressor, _threads


def test_resolve_n_threads():
    available = _threads.available_cpus()
    assert available >= 1
    assert _threads.resolve_n_threads(None) == available
    assert _threads.resolve_n_threads(-1) == available
    assert _threads.resolve_n_threads(3) == 3
    assert _threads.resolve_n_threads(-available - 5) == 1
    with pytest.raises(ValueError, match="n_jobs"):
        _threads.resolve_n_threads(0)
    with pytest.raises(TypeError, match="n_jobs"):
        _threads.resolve_n_threads(1.5)


def test_cgroup_quota_is_read(tmp_path, monkeypatch):
    """cpu.max "150000 100000" means 1.5 CPUs: two threads at most."""
    real_open = open

    def fake_open(path, *args, **kwargs):
        if path == "/sys/fs/cgroup/cpu.max":
            target = tmp_path / "cpu.max"
            target.write_text("150000 100000\n")
            return real_open(target, *args, **kwargs)
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr("builtins.open", fake_open)
    assert _threads._cgroup_cpu_quota() == 2


@pytest.mark.parametrize("peer", ["lightgbm", "xgboost", "sklearn.ensemble"])
def test_same_model_with_another_openmp_library_loaded(peer):
    """Other OpenMP runtimes in the process (LightGBM ships its own libgomp,
    XGBoost and scikit-learn theirs) must not change or break a fit."""
    rng = np.random.default_rng(0)
    X = rng.integers(0, 5, size=(3000, 10)).astype(np.uint8)
    y = X[:, 0] * 0.2 + rng.normal(size=3000)
    era = np.repeat(np.arange(10), 300)
    before = PackBoostRegressor(n_estimators=5, random_state=0, n_jobs=2).fit(X, y, era=era)
    module = pytest.importorskip(peer)
    if peer == "lightgbm":
        module.LGBMRegressor(n_estimators=2, verbose=-1, n_jobs=2).fit(X, y)
    elif peer == "xgboost":
        module.XGBRegressor(n_estimators=2, n_jobs=2).fit(X, y)
    else:
        module.HistGradientBoostingRegressor(max_iter=2).fit(X, y)
    after = PackBoostRegressor(n_estimators=5, random_state=0, n_jobs=2).fit(X, y, era=era)
    np.testing.assert_array_equal(before.predict(X), after.predict(X))
