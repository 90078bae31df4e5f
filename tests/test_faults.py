"""Faults during fit: Ctrl-C, exceptions in user code, requests too large for memory.

The contract (README, "Faults"): ``fit`` is all or nothing. Whatever
interrupts it -- KeyboardInterrupt, an exception in a callback or an eval
metric, a MemoryError -- propagates unchanged, no further round is grown, and
the estimator is left exactly as before the call: unfitted, or still the
previous model. Only a callback returning True stops early *and keeps* the
rounds grown.
"""

from __future__ import annotations

import _thread
import signal
import tracemalloc

import numpy as np
import pytest

import packboost
from packboost import PackBoostClassifier, PackBoostRegressor, _memory
from packboost.callback import TrainingCallback

PARAMS = dict(n_estimators=10, max_depth=3, pack_size=2, min_samples_leaf=5, random_state=0,
              n_jobs=1)


def problem(seed=0, n_rows=600, n_features=5, n_eras=6):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n_rows, n_features))
    y = X[:, 0] - X[:, 1] + rng.normal(size=n_rows)
    era = rng.integers(0, n_eras, size=n_rows)
    return X, y, era


X, Y, ERA = problem()


class Raiser(TrainingCallback):
    """Raises ``error`` from ``hook`` at round ``at`` (0-based), counting the rounds it saw."""

    def __init__(self, error, at=2, hook="after_iteration"):
        self.error, self.at, self.hook, self.rounds_seen = error, at, hook, 0

    def before_training(self, info):
        if self.hook == "before_training":
            raise self.error

    def after_iteration(self, info):
        self.rounds_seen += 1
        if self.hook == "after_iteration" and info.iteration == self.at:
            raise self.error
        return False

    def after_training(self, info):
        if self.hook == "after_training":
            raise self.error


def fitted_state(model):
    return {name: value for name, value in vars(model).items() if name.endswith("_")}


def assert_unfitted(model):
    assert not model.__sklearn_is_fitted__()
    assert fitted_state(model) == {}


# ----------------------------------------------------------------------------- interrupts


@pytest.mark.parametrize("error", [KeyboardInterrupt(), RuntimeError("boom in callback")],
                         ids=["KeyboardInterrupt", "RuntimeError"])
def test_interrupt_in_a_callback_stops_at_once_and_leaves_the_model_unfitted(error):
    model = PackBoostRegressor(**PARAMS)
    raiser = Raiser(error, at=2)
    with pytest.raises(type(error)) as info:
        model.fit(X, Y, era=ERA, callbacks=[raiser])
    assert info.value is error  # the same exception, not a wrapper
    assert raiser.rounds_seen == 3  # no round after the one that raised
    assert_unfitted(model)


def test_interrupt_keeps_the_previous_model_untouched():
    model = PackBoostRegressor(**PARAMS).fit(X, Y, era=ERA)
    before = fitted_state(model)
    prediction = model.predict(X)
    X_other, y_other, _ = problem(seed=1, n_features=4)
    with pytest.raises(KeyboardInterrupt):
        model.fit(X_other, y_other, callbacks=[Raiser(KeyboardInterrupt(), at=0)])
    after = fitted_state(model)
    assert after.keys() == before.keys()
    assert all(after[name] is before[name] for name in before)  # the very same objects
    np.testing.assert_array_equal(model.predict(X), prediction)
    assert model.n_features_in_ == 5


def test_interrupted_classifier_keeps_its_classes_and_names():
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame(X, columns=list("abcde"))
    model = PackBoostClassifier(**PARAMS).fit(frame, np.where(Y > 0, "up", "down"))
    proba = model.predict_proba(frame)
    with pytest.raises(KeyboardInterrupt):
        model.fit(X[:, :3], (Y > 0).astype(int), callbacks=[Raiser(KeyboardInterrupt(), at=1)])
    assert list(model.classes_) == ["down", "up"]
    assert list(model.feature_names_in_) == list("abcde")
    np.testing.assert_array_equal(model.predict_proba(frame), proba)


@pytest.mark.parametrize("where", ["binning", "grow_pack", "eval_metric", "before_training",
                                   "after_training"])
def test_interrupt_anywhere_in_fit_leaves_no_partial_state(monkeypatch, where):
    """Ctrl-C is raised at the next bytecode after a kernel returns: wherever it lands."""
    calls = []

    def interrupt(*args, **kwargs):
        calls.append(where)
        raise KeyboardInterrupt

    fit_kwargs = {}
    if where == "binning":
        monkeypatch.setattr(packboost.binning.BinMapper, "fit_transform", interrupt)
    elif where == "grow_pack":
        real = packboost.booster.grow_pack

        def grow_then_interrupt(*args, **kwargs):
            if len(calls) == 3:  # round 4, mid-round: the pack is not added
                interrupt()
            calls.append("round")
            return real(*args, **kwargs)

        monkeypatch.setattr(packboost.booster, "grow_pack", grow_then_interrupt)
    elif where == "eval_metric":
        fit_kwargs = dict(eval_set=[(X, Y)], eval_metric=lambda y, p, era: interrupt())
    else:
        fit_kwargs = dict(callbacks=[Raiser(KeyboardInterrupt(), hook=where)])
    model = PackBoostRegressor(**PARAMS)
    with pytest.raises(KeyboardInterrupt):
        model.fit(X, Y, era=ERA, **fit_kwargs)
    assert_unfitted(model)
    monkeypatch.undo()
    # Nothing is left over: the next fit is the model a fresh estimator fits.
    np.testing.assert_array_equal(model.fit(X, Y, era=ERA).predict(X),
                                  PackBoostRegressor(**PARAMS).fit(X, Y, era=ERA).predict(X))


def test_a_real_interrupt_signal_is_seen_within_the_round():
    """``_thread.interrupt_main`` delivers Ctrl-C as the SIGINT handler would: it
    is raised at the next bytecode boundary, so no further round starts."""
    rounds = []

    def press_ctrl_c(info):
        rounds.append(info.iteration)
        if info.iteration == 1:
            _thread.interrupt_main()
        return False

    model = PackBoostRegressor(**PARAMS)
    # A shell starts background jobs with SIGINT ignored, and then
    # interrupt_main does nothing: give SIGINT Python's own handler here.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            model.fit(X, Y, era=ERA, callbacks=[press_ctrl_c])
    finally:
        signal.signal(signal.SIGINT, previous)
    assert rounds == [0, 1]
    assert_unfitted(model)


@pytest.mark.parametrize("hook", ["before_training", "after_iteration", "after_training"])
def test_an_exception_in_a_callback_stops_training_with_that_exception(hook):
    error = ValueError(f"user code failed in {hook}")
    raiser = Raiser(error, at=1, hook=hook)
    model = PackBoostRegressor(**PARAMS)
    with pytest.raises(ValueError) as info:
        model.fit(X, Y, era=ERA, callbacks=[raiser])
    assert info.value is error
    assert raiser.rounds_seen == {"before_training": 0, "after_iteration": 2,
                                  "after_training": PARAMS["n_estimators"]}[hook]
    assert_unfitted(model)


def test_exceptions_in_plain_function_callbacks_and_metrics_propagate():
    def callback(info):
        if info.iteration == 3:
            raise ZeroDivisionError("in a plain function")

    with pytest.raises(ZeroDivisionError, match="in a plain function"):
        PackBoostRegressor(**PARAMS).fit(X, Y, callbacks=[callback])

    def metric(y_true, y_pred, era):
        raise LookupError("in an eval metric")

    with pytest.raises(LookupError, match="in an eval metric"):
        PackBoostRegressor(**PARAMS).fit(X, Y, eval_set=[(X, Y)], eval_metric=metric)


def test_a_callback_returning_true_keeps_the_rounds_grown():
    """The way to stop early *and keep* the model: a callback returns True."""
    model = PackBoostRegressor(**PARAMS).fit(X, Y, era=ERA,
                                             callbacks=[lambda info: info.iteration == 3])
    assert model.n_iter_ == 4
    full = PackBoostRegressor(**PARAMS).fit(X, Y, era=ERA)
    np.testing.assert_array_equal(model.predict(X), full.predict(X, iteration_range=(0, 4)))


def test_interrupted_save_leaves_the_old_file(tmp_path, monkeypatch):
    path = tmp_path / "model.pbm"
    model = PackBoostRegressor(**PARAMS).fit(X, Y)
    model.save_model(path)
    old = path.read_bytes()

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(packboost.model_file.os, "fsync", interrupted)
    with pytest.raises(KeyboardInterrupt):
        PackBoostRegressor(**{**PARAMS, "n_estimators": 2}).fit(X, Y).save_model(path)
    monkeypatch.undo()
    assert path.read_bytes() == old
    assert [item.name for item in tmp_path.iterdir()] == ["model.pbm"]


def test_cli_train_interrupted_exits_130_without_a_model(tmp_path, monkeypatch, capsys):
    from packboost._files import write_columns
    from packboost.cli import main

    monkeypatch.chdir(tmp_path)
    columns = {"era": ERA, "target": Y, **{f"feature_{k}": X[:, k] for k in range(5)}}
    write_columns("train.csv", columns)
    monkeypatch.setattr(PackBoostRegressor, "fit", lambda *args, **kwargs: _raise_interrupt())
    assert main(["train", "train.csv", "-o", "model.pbm"]) == 130
    assert "packboost train: interrupted" in capsys.readouterr().err
    assert not (tmp_path / "model.pbm").exists()


def _raise_interrupt():
    raise KeyboardInterrupt


# ----------------------------------------------------------------------------- memory


def _limit_memory(monkeypatch, nbytes):
    monkeypatch.setattr(_memory, "available_memory_bytes",
                        lambda: (nbytes, "a test limit"))


def test_too_little_memory_for_the_data_fails_before_binning(monkeypatch):
    _limit_memory(monkeypatch, 100_000)

    def must_not_run(*args, **kwargs):
        raise AssertionError("binned before the memory check")

    monkeypatch.setattr(packboost.binning.BinMapper, "fit_transform", must_not_run)
    model = PackBoostRegressor(**PARAMS)
    with pytest.raises(MemoryError) as info:
        model.fit(np.zeros((20_000, 8)), np.zeros(20_000))
    message = str(info.value)
    assert message.startswith("PackBoostRegressor.fit needs at least ")
    assert "available (a test limit)" in message
    assert "binned matrix 0.153 MiB (20000 rows x 8 features x 1 B)" in message
    assert "era-sorted rows" in message and "Reduce " in message
    assert_unfitted(model)


def test_too_little_memory_for_the_histograms_fails_before_training(monkeypatch):
    """Eras given as row ids with many bins: the per-thread histogram buffers
    (features per pass x eras x bins x 24 B) explode; refused before training."""
    n_rows = 3000
    X_many = np.random.default_rng(0).normal(size=(n_rows, 2))
    era = np.arange(n_rows)  # one era per row: a classic mistake
    data = _memory.data_memory_estimate(n_rows=n_rows, n_features=2, binned_bytes_per_value=1)
    _limit_memory(monkeypatch, sum(size for size, _ in data.values()) + 10_000_000)

    def must_not_run(*args, **kwargs):
        raise AssertionError("trained before the memory check")

    monkeypatch.setattr(packboost.sklearn, "train", must_not_run)
    model = PackBoostRegressor(**{**PARAMS, "max_bins": 4000})
    with pytest.raises(MemoryError) as info:
        model.fit(X_many, np.zeros(n_rows), era=era)
    message = str(info.value)
    assert "histogram buffers" in message
    assert f"2 features per pass x {n_rows} eras x 3001 bins" in message
    assert "Reduce fewer eras (are the era labels row ids?)" in message
    assert_unfitted(model)


def test_a_huge_request_fails_cleanly_instead_of_crashing():
    """Real memory, no monkeypatching: tens of GiB of histograms are refused."""
    n_rows = 40_000
    X_many = np.linspace(0.0, 1.0, 2 * n_rows).reshape(n_rows, 2)
    estimate = _memory.training_memory_estimate(
        n_rows=n_rows, pack_size=4, n_threads=1, bin_widths=[n_rows + 1] * 2, n_eras=n_rows,
        n_candidates=2, max_depth=6, min_samples_leaf=20, n_estimators=1)
    available, _ = _memory.available_memory_bytes()
    if available is None or available > sum(size for size, _ in estimate.values()):
        pytest.skip("this machine could hold the request")
    with pytest.raises(MemoryError, match=r"needs at least .* GiB of working memory"):
        PackBoostRegressor(n_estimators=1, max_bins=65535, n_jobs=1).fit(
            X_many, np.zeros(n_rows), era=np.arange(n_rows))


@pytest.mark.parametrize("layout", ["float, unsorted eras, weights", "int8, sorted eras"])
def test_the_estimate_is_a_lower_bound_of_what_fit_allocates(layout):
    """Conservative: the check never refuses a fit whose real peak it exceeds."""
    n_rows, n_features = 5000, 6
    X_float, y, era = problem(n_rows=n_rows, n_features=n_features, n_eras=40)
    weights = None
    if layout.startswith("int8"):
        X_fit = np.asfortranarray(np.clip(X_float * 2 + 2, 0, 4).astype(np.int8))
        order = np.argsort(era, kind="stable")
        X_fit, y, era = np.asfortranarray(X_fit[order]), y[order], era[order]
    else:
        X_fit, weights = X_float, np.random.default_rng(0).uniform(0.5, 2.0, n_rows)
    params = dict(PARAMS, n_estimators=2, max_bins=63)
    model = PackBoostRegressor(**params)
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base, _ = tracemalloc.get_traced_memory()
        model.fit(X_fit, y, era=era, sample_weight=weights)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    shares = X_fit.dtype == np.int8
    data = _memory.data_memory_estimate(
        n_rows=n_rows, n_features=n_features, binned_bytes_per_value=0 if shares else 1,
        weighted=weights is not None, sorted_by_era=shares)
    training = _memory.training_memory_estimate(
        n_rows=n_rows, pack_size=params["pack_size"], n_threads=1,
        bin_widths=model.bin_mapper_.n_bins_ + 1, n_eras=40, n_candidates=n_features,
        max_depth=params["max_depth"], min_samples_leaf=params["min_samples_leaf"],
        n_estimators=params["n_estimators"])
    estimate = sum(size for size, _ in {**data, **training}.values())
    assert 0 < estimate <= peak - base


def test_the_estimate_counts_the_one_pass_of_several_targets(monkeypatch):
    """A fit of 4 targets grows them as one pack (booster.outputs_per_pass):
    its row tables have a column per tree of every target and every
    target's fixed-point copies live at once. The estimate counts exactly
    the buffers the pass holds (measured from the backend and its
    OutputsFixedPoint) beyond one output's pack, and stays below the fit's
    traced peak."""
    from packboost import booster

    n_rows, n_features, n_targets = 5000, 6, 4
    X_float, y, era = problem(n_rows=n_rows, n_features=n_features, n_eras=40)
    noise = np.random.default_rng(1).normal(0, 0.3, (n_rows, n_targets))
    Y_many = y[:, np.newaxis] + noise
    params = dict(PARAMS, n_estimators=2, max_bins=63, pack_size=3)
    held = []
    grow = booster.grow_output_packs

    def measured(backend, data, gradients, *args, **kwargs):
        packs = grow(backend, data, gradients, *args, **kwargs)
        fixed = backend.fixed
        arrays = [backend.node_of_row, backend.leaf_of_row, fixed.gradients, fixed.hessians,
                  fixed.squared]
        for output in fixed.outputs:
            arrays += [output.gradients, output.hessians, output.packed, output.hessian_fixed,
                       output.squared]
        held.append(sum(array.nbytes for array in arrays))
        return packs

    monkeypatch.setattr(booster, "grow_output_packs", measured)
    model = PackBoostRegressor(**params)
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base, _ = tracemalloc.get_traced_memory()
        model.fit(X_float, Y_many, era=era)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(held) == params["n_estimators"]      # one pass for the 4 targets a round
    shared = booster.outputs_per_pass(n_targets, model.get_params(), None,
                                      grows_outputs_in_one_pass=True, categorical=False)
    assert shared == n_targets

    def estimate(outputs_per_pass):
        return _memory.training_memory_estimate(
            n_rows=n_rows, pack_size=params["pack_size"], n_threads=1,
            bin_widths=model.bin_mapper_.n_bins_ + 1, n_eras=40, n_candidates=n_features,
            max_depth=params["max_depth"], min_samples_leaf=params["min_samples_leaf"],
            n_estimators=params["n_estimators"], n_outputs=n_targets,
            outputs_per_pass=outputs_per_pass)

    one_pass, one_by_one = estimate(shared), estimate(1)
    # One output's pack at a time: its tables and one output's fixed-point copies.
    alone = n_rows * (8 * params["pack_size"] + 4 * 8)
    counted = one_pass["per-row training arrays"][0] - one_by_one["per-row training arrays"][0]
    assert counted == max(held) - alone > 0
    data = _memory.data_memory_estimate(n_rows=n_rows, n_features=n_features,
                                        binned_bytes_per_value=1, sorted_by_era=False)
    assert 0 < sum(size for size, _ in {**data, **one_pass}.values()) <= peak - base
    assert "4 outputs in one pass" in one_pass["per-row training arrays"][1]


def test_available_memory_reads_meminfo_and_cgroup_limits(monkeypatch):
    available, source = _memory.available_memory_bytes()
    if available is not None:
        assert available > 0 and source
    files = {"/sys/fs/cgroup/memory.max": 2 * 1024**3,
             "/sys/fs/cgroup/memory.current": 1024**3}
    monkeypatch.setattr(_memory, "_read_int", files.get)
    monkeypatch.setattr(_memory, "_read_meminfo", lambda: {"MemAvailable": 8 * 1024**3,
                                                           "SwapFree": 0})
    assert _memory.available_memory_bytes() == (1024**3, "cgroup memory.max - memory.current")
    files = {"/sys/fs/cgroup/memory/memory.limit_in_bytes": 2**63 - 4096}  # v1: no limit
    monkeypatch.setattr(_memory, "_read_int", files.get)
    assert _memory.available_memory_bytes() == (8 * 1024**3,
                                                "MemAvailable + SwapFree in /proc/meminfo")


def test_a_diverging_round_stops_training_instead_of_keeping_garbage(monkeypatch):
    """Inputs are bounded at the boundary; should a round still produce a non-finite
    leaf, training stops with an error rather than keep or save a broken model."""
    real = packboost.booster.grow_pack

    def nan_leaves(*args, **kwargs):
        pack = real(*args, **kwargs)
        pack.nodes["value"][-1] = np.nan
        return pack

    monkeypatch.setattr(packboost.booster, "grow_pack", nan_leaves)
    model = PackBoostRegressor(**PARAMS)
    with pytest.raises(FloatingPointError, match=r"training diverged in round 0: a leaf value"):
        model.fit(X, Y, era=ERA)
    assert_unfitted(model)
