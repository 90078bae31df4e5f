"""Distributed training on Dask (packboost.dask, docs/distributed.md).

One LocalCluster (2 worker processes, tests/conftest.py) for the module. The central claim: the
distributed model is the local fit, bit for bit, whatever the partitioning.
"""

import pickle
import re

import numpy as np
import pytest

distributed = pytest.importorskip("distributed")
da = pytest.importorskip("dask.array")
dd = pytest.importorskip("dask.dataframe")
pd = pytest.importorskip("pandas")

from packboost import PackBoostClassifier, PackBoostRegressor, load_model  # noqa: E402
from packboost.callback import TrainingCallback  # noqa: E402
from packboost.dask import (  # noqa: E402
    DaskPackBoostClassifier,
    DaskPackBoostRegressor,
    WorkerLostError,
    _shard_workers,
    place_eras,
    shard_plan,
)
from packboost.datasets import make_numerai_like  # noqa: E402

from conftest import assert_same_model  # noqa: E402

PARAMS = dict(n_estimators=3, max_depth=3, min_samples_leaf=10, random_state=3, n_jobs=1)


# A Dask test that hangs fails instead (tests/conftest.py).
pytestmark = pytest.mark.usefixtures("fail_instead_of_hanging")


@pytest.fixture(scope="module")
def problem():
    data = make_numerai_like(n_rows=2400, n_features=6, n_eras=10, random_state=0)
    # Shuffled rows: every era spread over every input partition.
    perm = np.random.default_rng(0).permutation(len(data.y))
    return data.X[perm], data.y[perm], np.asarray(data.era)[perm]


def assert_fits_as_locally(client, X, y, era, params, sample_weight=None):
    """The Dask fit on ``client`` (X in row chunks of 700: every era over
    several chunks) grows the local fit's model, bit for bit."""
    local = PackBoostRegressor(**params).fit(X, y, era=era, sample_weight=sample_weight)
    model = DaskPackBoostRegressor(**params)
    model.client = client
    model.fit(da.from_array(X, chunks=(700, -1)), da.from_array(y, chunks=700),
              era=da.from_array(era, chunks=700),
              sample_weight=(None if sample_weight is None
                             else da.from_array(sample_weight, chunks=700)))
    assert_same_model(local, model)


@pytest.mark.parametrize("extra", [
    dict(lambda_dir=0.5),                                    # the whole DES era pass
    dict(era_gain="newton", lambda_dro=0.5, row_subsample=0.8, tree_feature_fraction=0.7),
    # raw float features with NaN (missing bins, binning from gathered rows),
    # weights (per-row hessians), the total std
    dict(raw_features=True, era_std="total", lambda_dir=0.2, dir_tanh_scale=0.0),
    # L1 leaves and gains, a robust objective, one feature draw per pack
    dict(reg_alpha=0.5, objective="huber", feature_sampling="pack",
         layer_feature_fraction=0.7),
    # era weights by row count: the weighted sums in score_tile's (bin, era)
    # order, with realized and newton gains, constant and per-row hessians
    dict(era_weighting="count", era_alpha=3.0, lambda_dro=0.3, lambda_dir=0.2),
    dict(era_weighting="count", era_gain="newton", lambda_dro=0.4, raw_features=True),
    # each tree draws its own eras (the pass skips the others)
    dict(era_subsample=0.6, lambda_dir=0.3, lambda_dro=0.2),
    dict(era_subsample=0.7, row_subsample=0.8, era_gain="newton", lambda_dro=0.3),
    # constraints: clipped values in bounded nodes, monotone orders, allowed pairs
    dict(monotone_constraints=[1, -1, 0, 1, 0, 0], lambda_dir=0.3, max_depth=4),
    dict(monotone_constraints=[0, 1, 0, 0, -1, 0], era_gain="newton", lambda_dro=0.3,
         interaction_constraints=[[0, 1], [1, 2, 3]]),
    dict(interaction_constraints=[[0, 4], [2, 3, 5]], era_weighting="count", lambda_dir=0.2),
])
def test_regressor_is_the_local_fit_bit_for_bit(client, problem, extra, era_placement):
    X, y, era = problem
    params = {**PARAMS, **extra}
    weight = None
    if params.pop("raw_features", False):
        rng = np.random.default_rng(1)
        X = X + rng.normal(0, 0.1, X.shape)
        X[rng.random(X.shape) < 0.1] = np.nan
        weight = rng.uniform(0.5, 2.0, len(y))
    local = PackBoostRegressor(**params).fit(X, y, era=era, sample_weight=weight)
    chunks = 700  # partitions cut across eras
    model = DaskPackBoostRegressor(**params)
    model.client = client
    model.fit(da.from_array(X, chunks=(chunks, -1)), da.from_array(y, chunks=chunks),
              era=da.from_array(era, chunks=chunks),
              sample_weight=None if weight is None else da.from_array(weight, chunks=chunks))
    assert (local.ensemble_.nodes["feature"] >= 0).sum() > 3   # it did split
    assert_same_model(local, model)
    lazy = model.predict(da.from_array(X, chunks=(chunks, -1)))
    assert isinstance(lazy, da.Array)
    np.testing.assert_array_equal(lazy.compute(), local.predict(X))
    plain = model.to_local()
    assert type(plain) is PackBoostRegressor
    np.testing.assert_array_equal(plain.predict(X), local.predict(X))


class _FailAtSecondRound(TrainingCallback):
    def after_iteration(self, info):
        if info.iteration == 1:
            raise ArithmeticError("the callback failed at round 2")
        return False


def test_an_error_in_the_fit_task_reaches_the_caller_as_itself(client, problem):
    """A fit task that raises (here rank 0's callback) fails the fit with its
    own error, not a lost worker: the errors are read before the fit's
    other tasks are cancelled (cancelling marks a failed future cancelled)."""
    X, y, era = problem
    model = DaskPackBoostRegressor(**dict(PARAMS, n_estimators=4))
    model.client = client
    with pytest.raises(ArithmeticError, match="the callback failed at round 2"):
        model.fit(da.from_array(X, chunks=(700, -1)), da.from_array(y, chunks=700),
                  era=da.from_array(era, chunks=700), callbacks=[_FailAtSecondRound()])
    assert not hasattr(model, "ensemble_")
    assert set(client.run(_shards_held).values()) == {0}


def test_classifier_from_a_dataframe_with_an_era_column(client, problem, tmp_path):
    X, y, era = problem
    labels = np.where(y > np.median(y), "up", "down")
    frame = pd.DataFrame(X, columns=[f"f{k}" for k in range(X.shape[1])])
    local = PackBoostClassifier(**PARAMS).fit(frame, labels, era=era)
    frame["era"] = era
    ddf = dd.from_pandas(frame, npartitions=3)
    model = DaskPackBoostClassifier(**PARAMS)
    model.client = client
    model.fit(ddf, dd.from_pandas(pd.Series(labels), npartitions=3), era="era")
    assert_same_model(local, model)
    features = ddf.drop(columns=["era"])
    np.testing.assert_array_equal(np.asarray(model.predict_proba(features).compute()),
                                  local.predict_proba(frame.drop(columns=["era"])))
    np.testing.assert_array_equal(model.predict(features).compute(),
                                  local.predict(frame.drop(columns=["era"])))
    restored = pickle.loads(pickle.dumps(model))   # without its client
    assert "client" not in vars(restored)
    np.testing.assert_array_equal(restored.predict_proba(frame.drop(columns=["era"])),
                                  local.predict_proba(frame.drop(columns=["era"])))
    path = tmp_path / "model.pb"
    model.save_model(path)
    loaded = load_model(path)
    assert type(loaded) is PackBoostClassifier
    plain = frame.drop(columns=["era"])
    assert loaded.predict(plain).tolist() == local.predict(plain).tolist()


def test_eval_set_and_early_stopping_as_locally(client, problem):
    X, y, era = problem
    params = {**PARAMS, "n_estimators": 12, "learning_rate": 0.5}
    fit_args = dict(eval_metric=["rmse", "pearson_mean"], early_stopping_rounds=2)
    local = PackBoostRegressor(**params).fit(X[:1800], y[:1800], era=era[:1800],
                                              eval_set=[(X[1800:], y[1800:], era[1800:])],
                                              **fit_args)
    model = DaskPackBoostRegressor(**params)
    model.client = client
    model.fit(da.from_array(X[:1800], chunks=(600, -1)), da.from_array(y[:1800], chunks=600),
              era=da.from_array(era[:1800], chunks=600),
              eval_set=[(da.from_array(X[1800:], chunks=(300, -1)), y[1800:], era[1800:])],
              **fit_args)
    assert model.evals_result_ == local.evals_result_
    assert model.best_iteration_ == local.best_iteration_
    assert_same_model(local, model)


def test_one_era_per_worker_and_a_single_era(client, problem):
    X, y, era = problem
    two = np.where(np.isin(era, np.unique(era)[:4]), "a", "b")
    for labels in (two, None):
        local = PackBoostRegressor(**PARAMS).fit(X, y, era=labels)
        model = DaskPackBoostRegressor(**PARAMS)
        model.client = client
        model.fit(da.from_array(X, chunks=(500, -1)), da.from_array(y, chunks=500),
                  era=None if labels is None else da.from_array(labels, chunks=500))
        assert_same_model(local, model)


def _fit_on_threaded_workers(params, X, y, era, n_workers=2, **fit_args):
    """The Dask fit on workers that are threads of this process (so that a
    test's monkeypatches reach the shards), X in row chunks of 700."""
    with distributed.LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=False,
                                  dashboard_address=":0") as cluster, \
            distributed.Client(cluster, set_as_default=False) as threaded:
        model = DaskPackBoostRegressor(**params)
        model.client = threaded
        model.fit(da.from_array(X, chunks=(700, -1)), da.from_array(y, chunks=700),
                  era=da.from_array(era, chunks=700), **fit_args)
    return model


@pytest.mark.parametrize(("n_workers", "n_jobs"), [(2, 1), (3, 2)])
def test_threaded_workers_of_one_process(problem, monkeypatch, n_workers, n_jobs):
    # Workers sharing a process share the worker-side registry: shards are
    # kept apart by their own keys. Three workers: the pooled sums all-reduced
    # around the ring (every array, however small), each shard's kernels on
    # two threads.
    from packboost import _collective

    monkeypatch.setattr(_collective, "RING_MIN_BYTES", 0)
    X, y, era = problem
    local = PackBoostRegressor(**PARAMS).fit(X, y, era=era)
    model = _fit_on_threaded_workers(dict(PARAMS, n_jobs=n_jobs), X, y, era, n_workers)
    assert_same_model(local, model)


def test_children_derived_from_their_parents_cells(problem, monkeypatch):
    """Histogram subtraction on the shards (every tree scanning every
    feature, so each depth keeps its cells for the next): children derived
    as their parent's cells minus their sibling's, pooled by the pass with
    the built ones, with each tree skipping some eras (era_subsample) --
    the local fit's model, bit for bit."""
    from packboost.backends import cpu

    derived = []
    plan = cpu.CpuBackend._subtraction_plan

    def noting(self, *args, **kwargs):
        found = plan(self, *args, **kwargs)
        derived.append(found is not None and found["parent_cells"] is not None)
        return found

    monkeypatch.setattr(cpu.CpuBackend, "_subtraction_plan", noting)
    params = dict(PARAMS, tree_feature_fraction=1.0, era_subsample=0.7, lambda_dir=0.3)
    X, y, era = problem
    local = PackBoostRegressor(**params).fit(X, y, era=era)
    derived.clear()
    model = _fit_on_threaded_workers(params, X, y, era)
    assert any(derived)   # the shards derived children
    assert_same_model(local, model)


def test_squared_gradients_ride_with_the_next_depths_pooled_cells(problem, monkeypatch):
    """After a routing that splits children, a shard's next exchange is the
    next depth's pooled cells, carrying the children's squared-gradient
    steps: no exchange of their own (one fewer a split depth), and the
    local fit's model."""
    import threading

    from packboost import _collective
    from packboost.backends import dask as dask_backend

    events = {}
    route, find, allreduce = (dask_backend.ShardBackend.route_rows,
                              dask_backend.ShardBackend.find_splits,
                              _collective.Collective.allreduce)

    def note(event):
        events.setdefault(threading.get_ident(), []).append(event)

    def routing(self, *args, split_children=True, **kwargs):
        note("route" if split_children else "route-last")
        return route(self, *args, split_children=split_children, **kwargs)

    def finding(self, *args, **kwargs):
        note("find")
        return find(self, *args, **kwargs)

    def reducing(self, array, operation="sum"):
        note(("allreduce", np.asarray(array).size))
        return allreduce(self, array, operation)

    monkeypatch.setattr(dask_backend.ShardBackend, "route_rows", routing)
    monkeypatch.setattr(dask_backend.ShardBackend, "find_splits", finding)
    monkeypatch.setattr(_collective.Collective, "allreduce", reducing)
    X, y, era = problem
    params = dict(PARAMS, max_depth=4)
    local = PackBoostRegressor(**params).fit(X, y, era=era)
    model = _fit_on_threaded_workers(params, X, y, era)
    assert_same_model(local, model)
    assert len(events) == 2
    for sequence in events.values():
        after_route = [sequence[k + 1] for k in range(len(sequence) - 1)
                       if sequence[k] == "route"]
        assert after_route and all(event == "find" for event in after_route)


@pytest.mark.parametrize("with_callback", [False, True])
def test_the_stop_decision_is_sent_only_where_a_callback_can_stop(problem, monkeypatch,
                                                                   with_callback):
    """Without callbacks no round can stop early: the ranks exchange no stop
    decision. With one (here stopping after round 2), rank 0 sends its
    decision every round and every rank stops with it: the local model."""
    import threading

    from packboost import _collective

    decisions = {}
    broadcast = _collective.Collective.broadcast

    def counting(self, value, root=0):
        thread = threading.get_ident()
        decisions[thread] = decisions.get(thread, 0) + 1
        return broadcast(self, value, root)

    monkeypatch.setattr(_collective.Collective, "broadcast", counting)

    class StopAfterTwo(TrainingCallback):
        def after_iteration(self, info):
            return info.iteration >= 1

    X, y, era = problem
    params = dict(PARAMS, n_estimators=4)
    fit_args = dict(callbacks=[StopAfterTwo()]) if with_callback else {}
    local = PackBoostRegressor(**params).fit(X, y, era=era, **fit_args)
    model = _fit_on_threaded_workers(params, X, y, era, **fit_args)
    assert_same_model(local, model)
    assert model.ensemble_.n_rounds == (2 if with_callback else 4)
    if with_callback:
        assert sorted(decisions.values()) == [2, 2]   # one a round on each rank
    else:
        assert decisions == {}


def _count_era_pass(monkeypatch):
    """Record, on both shards of a threaded cluster, the candidates each
    depth enumerates and each best-first round of the era pass scores."""
    from packboost import _distributed

    scored, enumerated = [], []
    finish, enumerate_candidates = _distributed.candidate_pass, _distributed.enumerate_candidates

    def counting(candidates, *args, **kwargs):
        if args[2] == _distributed.MODE_TERMS_MAX:
            scored.append(len(candidates["slot"]))
        return finish(candidates, *args, **kwargs)

    def listing(*args, **kwargs):
        candidates = enumerate_candidates(*args, **kwargs)
        enumerated.append(len(candidates["slot"]))
        return candidates

    monkeypatch.setattr(_distributed, "candidate_pass", counting)
    monkeypatch.setattr(_distributed, "enumerate_candidates", listing)
    return scored, enumerated


@pytest.mark.parametrize("schedule", ["one-a-slot", "all-at-once"])
@pytest.mark.parametrize("extra", [dict(lambda_dir=0.5), dict(lambda_dro=0.8, lambda_dir=0.0),
                                   dict(era_gain="newton", lambda_dro=0.5)])
def test_the_era_pass_in_any_best_first_rounds(problem, monkeypatch, extra, schedule):
    """The era pass's rounds decide what is computed, never what is chosen.
    One candidate a slot in the first round: many rounds a depth, the floors
    of each round pruning the next, fewer candidates scored than there were.
    A first round above the depth's candidates (FIRST_ROUND_CANDIDATES):
    every candidate scored in one round a depth. Either way the local fit's
    model."""
    from packboost.backends import dask as dask_backend

    if schedule == "one-a-slot":
        monkeypatch.setattr(dask_backend, "FIRST_ROUND_PER_SLOT", 1)
        monkeypatch.setattr(dask_backend, "FIRST_ROUND_CANDIDATES", 0)
    else:
        monkeypatch.setattr(dask_backend, "FIRST_ROUND_CANDIDATES", 10 ** 9)
    scored, enumerated = _count_era_pass(monkeypatch)
    params = dict(PARAMS, max_depth=4, **extra)
    X, y, era = problem
    local = PackBoostRegressor(**params).fit(X, y, era=era)
    model = _fit_on_threaded_workers(params, X, y, era)
    assert_same_model(local, model)
    if schedule == "one-a-slot":
        # Both shards counted: more rounds than depths, fewer candidates
        # scored than enumerated (the floors pruned)
        assert len(scored) > 2 * params["n_estimators"] * params["max_depth"]
        assert sum(scored) < sum(enumerated)
    else:
        # every enumerated candidate scored, in one round a depth (the newton
        # means take every candidate first: not counted here)
        assert sum(scored) == sum(enumerated) > 0
        assert len(scored) == sum(1 for count in enumerated if count)

_LOADING_KEYS_SEEN = []


class _RecordLoadingKeys(TrainingCallback):
    """On rank 0's worker, each round: which of the loading's intermediate
    results (validated partitions, binned pieces) the worker still holds.
    The scheduler frees keys asynchronously: each round waits up to 5 s for
    them to go (a fit that kept them would hold them to its end)."""

    def after_iteration(self, info):
        import time

        deadline = time.monotonic() + 5.0
        while True:
            held = [str(key) for key in distributed.get_worker().data.keys()]
            loading = [key for key in held
                       if "_scan_partition" in key or "_bin_partition" in key]
            if not loading or time.monotonic() > deadline:
                break
            time.sleep(0.02)
        _LOADING_KEYS_SEEN.append(loading)
        return False


_PROFILER_RUNNING = []


class _RecordProfiler(TrainingCallback):
    """On rank 0's worker, each round: is the worker's profiler sampling?"""

    def after_iteration(self, info):
        callback = distributed.get_worker().periodic_callbacks.get("profile")
        _PROFILER_RUNNING.append(callback is not None and callback.is_running())
        return False


def test_the_workers_profiler_waits_for_the_fit_and_runs_again_after(problem):
    """The fit task pauses its worker's statistical profiler (it takes the
    GIL a hundred times a second) and starts it again when the fit ends --
    also when two workers share a process."""
    X, y, era = problem
    _PROFILER_RUNNING.clear()
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                  dashboard_address=":0") as cluster, \
            distributed.Client(cluster, set_as_default=False) as threaded:
        workers = list(cluster.workers.values())
        assert all(worker.periodic_callbacks["profile"].is_running() for worker in workers)
        model = DaskPackBoostRegressor(**dict(PARAMS, n_estimators=3))
        model.client = threaded
        model.fit(da.from_array(X, chunks=(700, -1)), da.from_array(y, chunks=700),
                  era=da.from_array(era, chunks=700), callbacks=[_RecordProfiler()])
        assert _PROFILER_RUNNING == [False] * 3
        assert all(worker.periodic_callbacks["profile"].is_running() for worker in workers)


def test_the_loading_is_freed_before_the_fit(problem):
    """A DataFrame's validated copy and the binned pieces are not kept on
    the workers through the rounds: the shards hold what the fit needs."""
    X, y, era = problem
    frame = dd.from_pandas(pd.DataFrame(X, columns=[f"f{k}" for k in range(X.shape[1])]),
                           npartitions=4)
    _LOADING_KEYS_SEEN.clear()
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                  dashboard_address=":0") as cluster, \
            distributed.Client(cluster, set_as_default=False) as threaded:
        model = DaskPackBoostRegressor(**dict(PARAMS, n_estimators=6))
        model.client = threaded
        model.fit(frame, dd.from_pandas(pd.Series(y), npartitions=4),
                  era=dd.from_pandas(pd.Series(era), npartitions=4),
                  callbacks=[_RecordLoadingKeys()])
    assert len(_LOADING_KEYS_SEEN) == 6
    assert _LOADING_KEYS_SEEN[-1] == []


def test_shard_plan_is_contiguous_and_balanced_by_rows():
    assert shard_plan(np.array([10, 10, 10, 10]), 2) == [(0, 2), (2, 4)]
    assert shard_plan(np.array([100, 1, 1, 1]), 2) == [(0, 1), (1, 4)]
    assert shard_plan(np.array([5]), 3) == [(0, 1)]
    assert shard_plan(np.array([1, 1, 1]), 3) == [(0, 1), (1, 2), (2, 3)]


def test_each_shard_goes_to_the_worker_holding_most_of_its_rows():
    # rows of shards 0 and 1 (rows) on workers w0, w1 (columns)
    assert _shard_workers(np.array([[0, 7], [5, 0]])) == [1, 0]
    # a partition held twice counts for both; no rows anywhere: in worker order
    assert _shard_workers(np.array([[3, 7], [2, 3]])) == [1, 0]
    assert _shard_workers(np.zeros((2, 3), dtype=np.int64)) == [0, 1]
    # fewer shards than workers: the one holding the rows is taken
    assert _shard_workers(np.array([[0, 0, 3]])) == [2]


def _plan_rows(era_rows, plan):
    return [int(era_rows[eras].sum()) for eras in plan]


def test_input_spread_over_every_worker_keeps_contiguous_era_ranges():
    """Every era on every worker (shuffled input): the eras placed as
    shard_plan's balanced ranges (nothing is gained by sets), each on the
    worker holding most of it."""
    era_rows = np.array([30, 10, 20, 40, 20, 30])
    held = np.stack([era_rows // 2, era_rows - era_rows // 2])
    held[1, 4] += 1   # noise: worker 1 holds a row more of era 4
    plan, workers = place_eras(era_rows, held)
    assert [eras.tolist() for eras in plan] == \
        [list(range(first, end)) for first, end in shard_plan(era_rows, 2)]
    assert sorted(workers) == [0, 1]


def test_eras_partitioned_over_the_workers_stay_where_they_are():
    """Era-sorted partitions spread over the workers in no era order (as Dask
    places a Parquet data set sorted by era): each era on the worker that
    holds it, the shards' eras not consecutive, nothing moved."""
    era_rows = np.full(8, 10)
    holder = np.array([1, 0, 1, 1, 0, 0, 1, 0])
    held = np.zeros((2, 8), dtype=np.int64)
    held[holder, np.arange(8)] = era_rows
    plan, workers = place_eras(era_rows, held)
    assert workers == [0, 1]
    assert [eras.tolist() for eras in plan] == [[1, 4, 5, 7], [0, 2, 3, 6]]
    # a third worker holding nothing gets a share: balance before place
    held3 = np.vstack([held, np.zeros((1, 8), dtype=np.int64)])
    plan3, workers3 = place_eras(era_rows, held3)
    assert sorted(np.concatenate(plan3).tolist()) == list(range(8))
    assert sorted(_plan_rows(era_rows, plan3)) == [20, 30, 30]


def test_a_worker_holding_most_eras_keeps_at_most_its_share():
    """One worker holds 7 of 8 equal eras: it keeps its share (within
    ERA_SETS_SLACK, whole eras) and the rest move to the other; every era
    in exactly one shard."""
    era_rows = np.full(8, 10)
    held = np.zeros((2, 8), dtype=np.int64)
    held[0, :7] = 10
    held[1, 7] = 10
    plan, workers = place_eras(era_rows, held)
    rows = dict(zip(workers, _plan_rows(era_rows, plan), strict=True))
    assert rows == {0: 40, 1: 40}
    assert sorted(np.concatenate(plan).tolist()) == list(range(8))
    assert 7 in plan[workers.index(1)]


@pytest.mark.parametrize("seed", range(6))
def test_placed_eras_are_balanced_whatever_the_input_holds(seed):
    """Random era sizes, workers and holdings (by era-sorted partitions of
    random lengths, a partition on a random worker): every era in exactly
    one shard, each shard's eras ascending, no shard above an even share by
    more than ERA_SETS_SLACK and one era, and never fewer rows kept in place
    than by the contiguous ranges."""
    from packboost.dask import ERA_SETS_SLACK

    rng = np.random.default_rng(seed)
    n_eras, n_workers = int(rng.integers(1, 300)), int(rng.integers(1, 9))
    era_rows = rng.integers(1, 500, n_eras)
    held = np.zeros((n_workers, n_eras), dtype=np.int64)
    era_of_row = np.repeat(np.arange(n_eras), era_rows)
    cuts = np.sort(rng.choice(len(era_of_row), min(len(era_of_row) - 1, 20), replace=False))
    for rows in np.split(era_of_row, cuts):
        held[rng.integers(n_workers)] += np.bincount(rows, minlength=n_eras)
    plan, workers = place_eras(era_rows, held)
    assert sorted(np.concatenate(plan).tolist()) == list(range(n_eras))
    assert len(set(workers)) == len(workers) <= n_workers
    assert all(np.all(np.diff(eras) > 0) for eras in plan)
    even = era_rows.sum() / min(n_workers, n_eras)
    assert max(_plan_rows(era_rows, plan)) <= (1 + ERA_SETS_SLACK) * even + era_rows.max()
    ranges = [np.arange(first, end) for first, end in shard_plan(era_rows, n_workers)]
    range_workers = _shard_workers(np.stack([held[:, eras].sum(axis=1) for eras in ranges]))
    kept = sum(int(held[w, eras].sum()) for eras, w in zip(plan, workers, strict=True))
    assert kept >= sum(int(held[w, eras].sum())
                       for eras, w in zip(ranges, range_workers, strict=True))


@pytest.mark.parametrize("first_half_on", [0, 1])
def test_input_partitioned_by_era_is_binned_where_it_lives(client, problem, first_half_on):
    """Era-sorted input whose halves live on one worker each, the halves the
    shards' era ranges: each shard is built from its worker's partitions,
    whichever worker holds which half (no partition binned for another
    worker), and the model is the local fit's."""
    X, y, era = problem
    order = np.argsort(era, kind="stable")
    X, y, era = X[order], y[order], era[order]
    era_rows = np.bincount(np.unique(era, return_inverse=True)[1])
    cut = int(np.cumsum(era_rows)[shard_plan(era_rows, 2)[0][1] - 1])
    workers = sorted(client.scheduler_info()["workers"])
    if first_half_on:
        workers = workers[::-1]
    halves = [da.from_array(X[:cut], chunks=(400, -1)).persist(workers=[workers[0]]),
              da.from_array(X[cut:], chunks=(400, -1)).persist(workers=[workers[1]])]
    assert_fits_where_it_lives(client, halves, X, y, era)


def assert_fits_where_it_lives(client, parts, X, y, era):
    """The Dask fit of the persisted ``parts`` of era-sorted ``X`` builds two
    shards, bins nothing for another worker, and grows the local fit's model."""
    distributed.wait(parts)
    local = PackBoostRegressor(**PARAMS).fit(X, y, era=era)
    model = DaskPackBoostRegressor(**PARAMS)
    model.client = client
    with distributed.get_task_stream(client) as stream:
        model.fit(da.concatenate(parts), da.from_array(y, chunks=400),
                  era=da.from_array(era, chunks=400))
    names = [str(task["key"]) for task in stream.data]
    assert sum("_build_shard" in name for name in names) == 2
    assert not any("_bin_partition" in name for name in names)
    assert_same_model(local, model)


def test_era_partitions_spread_over_the_workers_in_no_order_stay_where_they_are(client,
                                                                                 problem):
    """Era-sorted partitions of whole eras on the workers in turn (w0, w1,
    w0, w1, as Dask spreads a Parquet data set sorted by era): each worker's
    shard is the eras it holds, not a contiguous range: nothing is binned
    for another worker, and the model is the local fit's."""
    X, y, era = problem
    order = np.argsort(era, kind="stable")
    X, y, era = X[order], y[order], era[order]
    era_rows = np.bincount(np.unique(era, return_inverse=True)[1])
    cuts = np.concatenate([[0], np.cumsum(era_rows)[[2, 4, 6]], [len(y)]])   # 5 eras each
    workers = sorted(client.scheduler_info()["workers"])
    parts = [da.from_array(X[first:end], chunks=(end - first, -1)).persist(
        workers=[workers[k % 2]])
        for k, (first, end) in enumerate(zip(cuts[:-1], cuts[1:], strict=True))]
    assert_fits_where_it_lives(client, parts, X, y, era)


def _message(error):
    return re.sub(r"at row \d+", "at row _", str(error))


@pytest.mark.parametrize("case", ["inf", "nan_label", "missing_era"])
def test_bad_input_gives_the_local_error(client, problem, case):
    X, y, era = problem
    X, y, era = X.astype(np.float64), y.copy(), era.astype(object)
    if case == "inf":
        X[5, 2] = np.inf
    elif case == "nan_label":
        y[7] = np.nan
    else:
        era[9] = None
    dask_era = dd.from_pandas(pd.Series(era), npartitions=2)
    with pytest.raises(Exception) as local_error:
        # the same values as Dask holds them (None becomes <NA> in its strings)
        PackBoostRegressor(**PARAMS).fit(X, y, era=dask_era.compute())
    model = DaskPackBoostRegressor(**PARAMS)
    model.client = client
    with pytest.raises(type(local_error.value)) as dask_error:
        model.fit(da.from_array(X, chunks=(1000, -1)), da.from_array(y, chunks=1000),
                  era=dask_era)
    assert _message(dask_error.value) == _message(local_error.value)
    assert not hasattr(model, "ensemble_")


def _shards_held():
    from packboost.backends import dask as backend

    return len(backend._SHARDS) + len(backend._LOADING)


def test_an_error_after_the_loading_began_leaves_no_shard(client, problem, monkeypatch):
    """An error on the client while the shards load (here: checking the
    metrics, after a pause that lets the loading finish) reaches the caller,
    and the workers keep no shard, built or half-built."""
    import time

    def failing(*args, **kwargs):
        time.sleep(1.5)
        raise ValueError("bad eval_metric")

    monkeypatch.setattr(DaskPackBoostRegressor, "_resolve_metrics", failing)
    X, y, era = problem
    model = DaskPackBoostRegressor(**PARAMS)
    model.client = client
    with pytest.raises(ValueError, match="bad eval_metric"):
        model.fit(da.from_array(X, chunks=(700, -1)), da.from_array(y, chunks=700),
                  era=da.from_array(era, chunks=700))
    assert not hasattr(model, "ensemble_")
    assert set(client.run(_shards_held).values()) == {0}


@pytest.mark.parametrize("objective", ["squared_error", "quantile"])
def test_targets_unknown_in_some_eras_as_locally(client, problem, objective):
    # Auxiliary targets NaN in the first eras (on one worker only) and in
    # scattered rows: each target grows on its known rows, as locally (with
    # quantile leaves: refitted over the known rows of every shard).
    X, y, era = problem
    params = {**PARAMS, "lambda_dir": 0.3, "row_subsample": 0.9, "objective": objective}
    target = np.column_stack([y, y + np.cos(np.arange(len(y))), -y])
    first_eras = np.isin(era, np.unique(era)[:3])
    target[first_eras, 1] = np.nan
    target[np.random.default_rng(2).random(len(y)) < 0.2, 2] = np.nan
    assert_fits_as_locally(client, X, target, era, params)


def test_continued_training_as_locally(client, problem, tmp_path):
    X, y, era = problem
    first = PackBoostRegressor(**PARAMS).fit(X, y, era=era)
    more = {**PARAMS, "n_estimators": 2, "lambda_dir": 0.3}
    local = PackBoostRegressor(**more).fit(X, y, era=era, init_model=first)
    path = tmp_path / "first.pb"
    first.save_model(path)
    for init_model in (first, path):
        model = DaskPackBoostRegressor(**more)
        model.client = client
        model.fit(da.from_array(X, chunks=(700, -1)), da.from_array(y, chunks=700),
                  era=da.from_array(era, chunks=700), init_model=init_model)
        assert model.ensemble_.n_rounds == PARAMS["n_estimators"] + 2
        assert_same_model(local, model)
    with pytest.raises(TypeError, match="init_model must be a fitted PackBoostRegressor"):
        model.fit(da.from_array(X, chunks=(700, -1)), da.from_array(y, chunks=700),
                  era=da.from_array(era, chunks=700),
                  init_model=PackBoostClassifier(**PARAMS))


def test_raw_features_beyond_the_binning_sample(client, problem, monkeypatch):
    # More rows than the binning sample (here 500 of 2400): the bins come from
    # the local fit's row sample and every partition's distinct values.
    from packboost.binning import BinMapper

    monkeypatch.setattr(BinMapper.__init__, "__defaults__", (255, 500, None))
    X, y, era = problem
    rng = np.random.default_rng(5)
    X = X + rng.normal(0, 0.1, X.shape)
    X[:, 1] = np.round(X[:, 1])              # few values, one rare
    X[7, 1] = 99.0
    X[rng.random(X.shape) < 0.05] = np.nan
    local = PackBoostRegressor(**PARAMS).fit(X, y, era=era)
    model = DaskPackBoostRegressor(**PARAMS)
    model.client = client
    model.fit(da.from_array(X, chunks=(700, -1)), da.from_array(y, chunks=700),
              era=da.from_array(era, chunks=700))
    for mine, theirs in zip(model.bin_mapper_.cuts_, local.bin_mapper_.cuts_, strict=True):
        np.testing.assert_array_equal(mine, theirs)
    assert_same_model(local, model)


@pytest.mark.parametrize("extra", [
    dict(alpha=0.3),
    # tree samples (rows and eras) and a quantile at the edge of small leaves
    dict(alpha=0.9, row_subsample=0.7, era_subsample=0.8, min_samples_leaf=3),
    # targets with ties: many residuals equal, zeros among them
    dict(alpha=0.5, ties=True),
    # weights on their grid: random reals, zeros, a weight far below the rest
    dict(alpha=0.3, weights=True),
    dict(alpha=0.8, weights=True, ties=True, row_subsample=0.7, min_samples_leaf=3),
])
def test_quantile_leaves_as_locally(client, problem, extra):
    """objective="quantile": the leaves refitted to the residuals' quantiles
    over every shard's rows, bit for bit the local refit."""
    X, y, era = problem
    extra = dict(extra)
    if extra.pop("ties", False):
        y = np.round(y * 4) / 4
    weights = None
    if extra.pop("weights", False):
        rng = np.random.default_rng(5)
        weights = rng.uniform(0.0, 3.0, len(y)) * (rng.random(len(y)) > 0.2)
        weights[7] = 1e-30
    assert_fits_as_locally(client, X, y, era,
                           dict(PARAMS, objective="quantile", n_estimators=4, **extra),
                           sample_weight=weights)


@pytest.mark.parametrize("kind", ["targets", "classes"])
def test_several_outputs_as_locally(client, problem, kind):
    # Several targets (one pack per target) and several classes (softmax):
    # every output's trees as the local fit grows them. Era 0 has half the
    # rows of the others, so the two shards hold different numbers of rows
    # (the check for unknown targets once gave class labels one flag per
    # row, not per output, and the shards' arrays did not match).
    X, y, era = problem
    keep = (era != 0) | (np.arange(len(y)) % 2 == 0)
    X, y, era = X[keep], y[keep], era[keep]
    params = {**PARAMS, "lambda_dir": 0.3}
    if kind == "targets":
        local_class, dask_class = PackBoostRegressor, DaskPackBoostRegressor
        target = np.column_stack([y, -y + np.sin(np.arange(len(y))), y ** 2])
    else:
        local_class, dask_class = PackBoostClassifier, DaskPackBoostClassifier
        target = np.digitize(y, np.quantile(y, [0.3, 0.7]))
    local = local_class(**params).fit(X, target, era=era)
    model = dask_class(**params)
    model.client = client
    model.fit(da.from_array(X, chunks=(700, -1)), da.from_array(target, chunks=700),
              era=da.from_array(era, chunks=700))
    assert model.ensemble_.n_outputs == 3
    assert_same_model(local, model)
    np.testing.assert_array_equal(np.asarray(model.to_local().predict(X)), local.predict(X))
    # Lazy predictions of every output, and their contributions (rows, 3, features + 1)
    dX = da.from_array(X, chunks=(700, -1))
    np.testing.assert_array_equal(np.asarray(model.predict(dX).compute()), local.predict(X))
    np.testing.assert_array_equal(model.predict(dX, pred_contrib=True).compute(),
                                  local.predict(X, pred_contrib=True))


def _exit_soon():
    """Worker side: die (no clean shutdown) a moment after returning."""
    import os
    import threading
    import time

    def die():
        time.sleep(0.2)
        os._exit(1)

    threading.Thread(target=die, daemon=True).start()


class _KillThisWorker(TrainingCallback):
    """Callbacks run on the first worker of the fit: it dies after round 0,
    before the fit can end (it waits for its death: a small fit could
    otherwise finish within the moment)."""

    def after_iteration(self, info):
        if info.iteration == 0:
            import time

            _exit_soon()
            time.sleep(30)
        return False


def test_a_worker_dying_mid_fit_is_a_clear_error_and_no_model(client, problem):
    # Last in the module: the nanny restarts the worker, under a new address.
    X, y, era = problem
    model = DaskPackBoostRegressor(**{**PARAMS, "n_estimators": 50})
    model.client = client
    with pytest.raises(WorkerLostError, match="left the cluster during fit"):
        model.fit(da.from_array(X, chunks=(700, -1)), da.from_array(y, chunks=700),
                  era=da.from_array(era, chunks=700), callbacks=[_KillThisWorker()])
    assert not hasattr(model, "ensemble_")
    client.wait_for_workers(2, timeout=60)


def test_a_worker_gone_with_a_finished_result_is_a_lost_worker():
    """A worker that dies after its task finished takes the result with it
    (the pinned task waits for it forever): the client's wait for the result
    ends as a lost worker, not a bare timeout."""
    from packboost import dask as packboost_dask

    class FinishedButGone:
        status = "finished"

        def result(self, timeout=None):
            raise TimeoutError("the result never came")

    class Cluster:     # the scheduler knows no worker any more
        def run_on_scheduler(self, function):
            return []

        def cancel(self, futures):
            self.cancelled = futures

    shard = packboost_dask.ShardInfo(worker="tcp://gone:1", eras=np.array([0, 1, 5]),
                                     key="fit/0")
    client = Cluster()
    with pytest.raises(WorkerLostError, match=r"eras 0\.\.1, 5 left the cluster during fit"):
        packboost_dask._wait(client, [shard], [FinishedButGone()])
    assert len(client.cancelled) == 1
