"""The Dask backend: every worker runs the one driver over its own shard of
whole eras; the workers talk to each other directly (docs/distributed.md).

Worker side. A *shard* (:class:`_Shard`, stored by :func:`worker_store` when
the rows arrive) is a set of whole eras of the training rows, in the local
fit's era-sorted order: their binned features, targets and weights. The fit is one
task per worker (:func:`worker_train`): it connects to the other shards'
workers (:class:`packboost._collective.Collective`) and runs
:func:`packboost.booster.train` over a :class:`ShardBackend`, whose passes
over the rows are this worker's and whose sums over all eras are exchanged
with the others. Per depth:

1. slot sums: each shard sums its rows (gradients, hessians, counts and
   squared gradients, every value on a grid on which its sums are exact)
   and the sums are all-reduced;
2. every shard histograms its own eras (they never leave the worker) and the
   pooled per-bin sums of every (slot, feature) are all-reduced: exact
   fixed-point sums, the same doubles in any order;
3. every shard enumerates the candidates from the pooled sums (the same
   deterministic code) and, when DES needs its era pass, computes its eras'
   terms of each candidate (``_distributed.candidate_pass``): their largest
   magnitudes are all-reduced (max), giving each sum its grid, and the
   terms' sums in whole grid steps are all-reduced (int64, order-free,
   docs/des.md §6.3); every shard finishes the same scores and picks the
   same best split of each slot;
4. routing and the prediction update are each shard's own rows.

Every sum is therefore the local fit's number, by the same des.h functions:
every worker grows the trees of the local fit, bit for bit.
Rank 0 also holds the eval sets and runs the callbacks; its stop decision is
sent to the others after every round, and its model is the fit's result.
"""

from __future__ import annotations

import contextlib
import threading
import time
from dataclasses import dataclass, field

import numpy as np

from packboost import _distributed, _partition, _split
from packboost.backends.cpu import CpuBackend
from packboost.backends.interface import BestSplits, SlotSums
from packboost.callback import CallbackList

_SHARDS: dict = {}   # worker side: shard key -> _Shard (per process: threaded workers share it)
# worker side: shard key -> a shard being loaded (packboost.dask._start_shard)
_LOADING: dict = {}


class WorkerLostError(RuntimeError):
    """A worker holding training eras left the cluster during a fit."""


@dataclass
class _Shard:
    """One worker's training rows (the eras ``eras``, ascending codes of all)."""

    X_binned: np.ndarray       # (n_features, n_local) bin codes
    row_era: np.ndarray        # (n_local,) int32, each row's place in ``eras``
    y: np.ndarray              # (n_local,) or (n_local, n_targets), era-sorted
    sample_weight: np.ndarray | None
    eras: np.ndarray
    init_raw: np.ndarray | None = None   # the continued model's raw scores of the rows
    listener: object = None    # the socket the other shards connect to
    stats: dict = field(default_factory=dict)


def _shard(key: str) -> _Shard:
    try:
        return _SHARDS[key]
    except KeyError:
        raise WorkerLostError(
            f"this worker holds no shard {key}: it was restarted during the fit"
        ) from None


def worker_store(key: str, shard: _Shard) -> tuple:
    """Keep the shard and open its socket; returns (rows, socket address)."""
    from packboost import _collective

    shard.listener = _collective.listen(_listen_host())
    _SHARDS[key] = shard
    return shard.X_binned.shape[1], _collective.address_of(shard.listener)


def worker_drop(key: str) -> dict:
    """Free the shard; returns its fit's statistics (CPU seconds, bytes sent)."""
    _LOADING.pop(key, None)   # a fit that failed while loading
    shard = _SHARDS.pop(key, None)
    if shard is None:
        return {}
    if shard.listener is not None:
        shard.listener.close()
    return shard.stats


def _listen_host() -> str:
    """The host the worker itself is reached at (its Dask address)."""
    try:
        from distributed import get_worker
        from distributed.comm import get_address_host, parse_address

        address = get_worker().address
        if parse_address(address)[0] == "tcp" or parse_address(address)[0] == "tls":
            return get_address_host(address)
    except (ImportError, ValueError):
        pass
    return "127.0.0.1"   # in-process workers (LocalCluster(processes=False))


# Per worker (in-process workers share a process): the fits running on it
# and the profiler callback they paused (_profiler_paused).
_PAUSED_LOCK = threading.Lock()
_PAUSED: dict = {}


def _on_worker_loop(worker, function, timeout: float = 1.0) -> None:
    """``function()`` run on the worker's event loop (where its periodic
    callbacks may be started and stopped), waited for up to ``timeout``."""
    done = threading.Event()

    def call():
        try:
            function()
        finally:
            done.set()

    try:
        worker.loop.add_callback(call)
    except RuntimeError:   # the worker's loop is closing: nothing to start or stop
        return
    done.wait(timeout)


@contextlib.contextmanager
def _profiler_paused():
    """Within: the Dask worker's statistical profiler
    (``distributed.worker.profile``) does not sample. It wakes the worker's
    event loop every 10 ms (``profile.interval``) to walk the stacks of the
    running tasks, taking the GIL from the fit's thread between its kernels
    and a core from the workers' kernels: a round of two workers of a
    2-core machine at 150k x 200 took 46-51 ms without it against 57-61 ms
    (benchmarks/RESULTS.md, 2026-11-29). A fit task's profile is one long
    call into the kernels anyway. After the worker's last fit the profiler
    runs again as it did."""
    try:
        from distributed import get_worker

        worker = get_worker()
    except (ImportError, ValueError):   # not in a Dask worker
        yield
        return
    with _PAUSED_LOCK:
        paused = _PAUSED.setdefault(id(worker), {"fits": 0, "callback": None})
        paused["fits"] += 1
        if paused["fits"] == 1:
            callback = getattr(worker, "periodic_callbacks", {}).get("profile")
            if callback is not None and callback.is_running():
                paused["callback"] = callback
                _on_worker_loop(worker, callback.stop)
    try:
        yield
    finally:
        with _PAUSED_LOCK:
            paused["fits"] -= 1
            if paused["fits"] == 0:
                if paused["callback"] is not None:
                    _on_worker_loop(worker, paused["callback"].start)
                del _PAUSED[id(worker)]


def worker_train(key: str, rank: int, addresses: list, global_era_offsets: np.ndarray,
                 shard_eras: list, training: dict):
    """The fit on this worker: connect to the other shards, run the driver
    over this shard (``shard_eras[rank]``; ``shard_eras``: every rank's eras).
    Returns rank 0's (ensemble, training info); None elsewhere."""
    from packboost._collective import Collective
    from packboost._heap import freed_memory_kept
    from packboost._row_shard import RowShard
    from packboost.booster import InitModel, train
    from packboost.grower import TrainingData

    shard = _shard(key)
    start_cpu, start_wall = time.process_time(), time.perf_counter()
    collective = Collective.connect(rank, addresses, shard.listener)
    backend = callbacks = None
    try:
        row_shard = RowShard(collective, global_era_offsets, shard_eras, rank,
                             shard.X_binned.shape[0])
        data = TrainingData(X_binned=shard.X_binned, n_bins=training["n_bins"],
                            row_era=shard.row_era, n_eras=len(shard.eras),
                            cuts=training["cuts"], shard=row_shard,
                            categorical=training.get("categorical"))
        params, n_threads = training["params"], training["n_threads"]
        leader = rank == 0
        # Without a callback on rank 0 no round can stop early: the ranks
        # then skip the stop decision's broadcast (an exchange a round).
        may_stop = training["leader_has_callbacks"]
        callbacks = (_LeaderCallbacks(training["callbacks"], collective, may_stop) if leader
                     else _FollowerCallbacks(collective, may_stop))
        # One shard holds every era: the CPU backend as a local fit runs it.
        backend = (ShardBackend(data, params["pack_size"], n_threads, collective)
                   if collective.size > 1 else CpuBackend(data, params["pack_size"], n_threads))
        init = None
        if training["init_ensemble"] is not None:
            init = InitModel(ensemble=training["init_ensemble"], raw_prediction=shard.init_raw)
        # Dask's workers hand freed memory back at once; the rounds reuse it
        # (packboost._heap: page faults at every depth otherwise), and the
        # heap is trimmed once the backend's buffers are freed too. The
        # worker's profiler waits (_profiler_paused).
        with freed_memory_kept(), _profiler_paused():
            try:
                ensemble, info = train(
                    data, shard.y, shard.sample_weight, training["objective"], params, n_threads,
                    eval_sets=training["eval_sets"] if leader else None,
                    metrics=training["metrics"], callbacks=callbacks, init=init, model=None,
                    backend=backend, base_score=training["base_score"])
            finally:
                backend.close()
    finally:
        shard.stats = dict(cpu_seconds=time.process_time() - start_cpu,
                           era_pass_seconds=getattr(backend, "era_pass_seconds", 0.0),
                           seconds=time.perf_counter() - start_wall,
                           # Seconds from the task's start to each round's end:
                           # the rounds' cost without the fit's setup.
                           round_ends=[end - start_wall for end in
                                       (callbacks.round_ends if callbacks is not None else ())],
                           bytes_sent=collective.bytes_sent,
                           seconds_waiting=collective.seconds_waiting,
                           messages_sent=collective.messages_sent)
        # Closing tells the other ranks at once when this one failed.
        collective.close()
    return (ensemble, info) if leader else None


class _RankCallbacks(CallbackList):
    """Every rank ends a round on rank 0's stop decision (broadcast; none
    when rank 0 has no callback: ``may_stop`` False) and notes when
    (``round_ends``, perf_counter: the shard's stats)."""

    def __init__(self, callbacks, collective, may_stop=True):
        super().__init__(callbacks)
        self.collective = collective
        self.may_stop = may_stop
        self.round_ends = []

    def after_iteration(self, info) -> bool:
        stop = self._decision(info)
        if self.may_stop:
            stop = self.collective.broadcast(stop, root=0)
        self.round_ends.append(time.perf_counter())
        return bool(stop)

    def _decision(self, info):
        return None


class _LeaderCallbacks(_RankCallbacks):
    """Rank 0 runs the fit's callbacks and tells the others whether to stop."""

    def _decision(self, info) -> bool:
        return CallbackList.after_iteration(self, info)


class _FollowerCallbacks(_RankCallbacks):
    """The other ranks stop when rank 0 does."""

    def __init__(self, collective, may_stop=True):
        super().__init__((), collective, may_stop)


class ShardBackend(CpuBackend):
    """:class:`packboost.backends.interface.Backend` over one shard: the CPU
    backend's passes over this worker's rows (its packed histogram kernel,
    threads and histogram subtraction), with the sums over all eras from the
    other shards (module docstring)."""

    # Its sums go through the collective one output at a time.
    grows_outputs_in_one_pass = False

    def __init__(self, data, pack_size: int, n_threads: int, collective):
        super().__init__(data, pack_size, n_threads)
        self.collective = collective
        # Seconds this shard computed in the DES era passes (not waiting;
        # benchmarks/bench_dask.py reports them).
        self.era_pass_seconds = 0.0
        self._kept_buffer = None
        # The children's squared-gradient sums of this shard's rows (set by
        # route_rows), summed over the shards with the next depth's pooled
        # cells (find_splits, _completed_variance).
        self._own_squares = None

    def slot_sums(self, n_slots: int) -> SlotSums:
        """Every slot's sums over all shards: those the routing took
        (route_rows; their squared gradients None, completed by the next
        find_splits), or this shard's rows' sums (_partition.slot_sums),
        all-reduced."""
        routed, self._routed_sums = self._routed_sums, None
        if routed is not None and routed[0] == n_slots:
            self._counts, self._sums = routed[1].count, routed[1]
            return routed[1]
        return self._gathered_sums(n_slots)

    def _gathered_sums(self, n_slots: int) -> SlotSums:
        """This shard's rows' sums (CpuBackend.slot_sums), all-reduced. Each
        value added is on a grid on which its sums are exact (the fixed-point
        gradients and hessians, the squared gradients on theirs), so the
        totals are the local fit's whatever the shards (docs/distributed.md
        §3)."""
        own = super().slot_sums(n_slots)   # the CPU's (at the roots from the era flags)
        totals = self.collective.allreduce(
            np.stack([np.asarray(column, dtype=np.float64) for column in (
                own.gradients, own.hessians, own.count, own.gradients_squared)]), "sum")
        sums = SlotSums(totals[0], totals[1], totals[2].astype(np.int64), totals[3])
        self._counts, self._sums, self._routed_sums = sums.count, sums, None
        return sums

    def find_splits(self, slot_tree, slot_open, features, tree_uses_feature, slot_variance,
                    split_params, *, keep_for_children=False, constraints=None) -> BestSplits:
        data, collective, fixed = self.data, self.collective, self.fixed
        self._slot_tree = np.ascontiguousarray(slot_tree, dtype=np.int32)
        n_slots, n_candidates = len(slot_tree), len(features)
        # (slot_variance None: the slots' squared gradients are still this
        # shard's; they travel with the pooled cells below.)
        cells, origin, stride, pooled_cells = self._era_cells(
            slot_tree, slot_open, features, tree_uses_feature, slot_variance, split_params,
            keep_for_children)
        words = 1 if fixed.hessian_is_constant else 2
        widths = np.ascontiguousarray(data.n_bins[features] + 1, dtype=np.int64)
        width = int(widths.max()) if n_candidates else 1
        layout = (origin, stride, widths, self._slot_tree)
        # (The pass leaves zeros in the cells of an era a slot's tree skips,
        # tests/test_distributed_kernels.py: nothing to clear before reading.)
        era_rows = _distributed.era_rows_from_cells(cells, origin, stride, widths, slot_tree,
                                                    slot_open, tree_uses_feature, data.n_eras,
                                                    words, fixed.count_bits, self.n_threads)
        # Per slot over all eras: eras with rows, rows, squared era rows (the
        # era weights' totals), added with the pooled cells in one message.
        # Integer sums: the same in any order.
        era_stats = _distributed.era_row_stats(era_rows)
        own_squares = [] if slot_variance is not None else [self._square_units()]
        summed = collective.allreduce(
            np.concatenate([pooled_cells, era_stats.ravel(), *own_squares]), "sum")
        pooled_size = len(pooled_cells)
        pooled_cells = summed[:pooled_size]
        era_stats = summed[pooled_size:pooled_size + 3 * n_slots].reshape(n_slots, 3)
        era_stats = era_stats.astype(np.float64)
        if slot_variance is None:
            slot_variance = self._completed_variance(summed[pooled_size + 3 * n_slots:])
        pooled = _distributed.pooled_from_cells(pooled_cells, _distributed.cell_prefix(widths),
                                                widths, n_slots, width, fixed, self.n_threads)
        largest_era_rows = np.zeros(n_slots)
        totals = weighted_left = None
        if split_params["era_weighting"] == "count":
            # Each slot's largest era rows bound its direction votes.
            largest_era_rows = collective.allreduce(
                era_rows.max(axis=1, initial=0.0).astype(np.float64), "max")
            totals, weighted_left = self._era_weighted_sums(
                (cells, origin, stride, widths, slot_tree, slot_open, tree_uses_feature,
                 era_rows, split_params, fixed), np.ascontiguousarray(era_stats[:, 0]))
        candidates = _distributed.enumerate_candidates(
            pooled, np.ascontiguousarray(era_stats), slot_tree, slot_open, features,
            tree_uses_feature, data.n_bins, split_params, totals, weighted_left, constraints,
            self.n_threads)
        n = len(candidates["slot"])
        newton = split_params["era_gain"] == "newton"
        needs_pass = (split_params["lambda_dro"] != 0.0 or split_params["lambda_dir"] != 0.0
                      or newton)
        if not (needs_pass and n):
            # Nothing to add over eras: every shard finishes the same scores.
            score, gain = _distributed.candidate_pass(
                candidates, slot_variance, split_params, _distributed.MODE_FINISH)
            return self._chosen(_best_splits(candidates, score, gain, n_slots, n_candidates),
                                features)
        pass_arguments = (cells, layout, era_rows, fixed, n_slots,
                          self.n_threads)

        def subset_of(chosen):
            return {name: values[chosen] for name, values in candidates.items()}

        def sums_over_eras(subset, max_mode, sum_mode):
            """The era pass's sums of the candidates ``subset`` over all eras,
            order-free (docs/des.md §6.3): every shard's largest terms, their
            maximum over the shards -> the grids; every shard's sums in steps
            of the grids, added over the shards. Returns (steps, grid)."""
            # The maximum pass keeps its terms for the sum pass where they fit.
            kept = self._kept_terms((len(subset["slot"]), era_rows.shape[1],
                                     _distributed.kept_terms(max_mode)))
            began = time.perf_counter()
            largest = _distributed.candidate_pass(subset, slot_variance, split_params,
                                                  max_mode, *pass_arguments, kept=kept)
            self.era_pass_seconds += time.perf_counter() - began
            largest = collective.allreduce(largest, "max")
            n_terms = np.ascontiguousarray(era_stats[subset["slot"], 0])
            if max_mode == _distributed.MODE_NEWTON_MAX:
                grid = _distributed.newton_grid_exponents(largest, n_terms)
            else:
                grid = _distributed.grid_exponents(
                    largest, np.ascontiguousarray(largest_era_rows[subset["slot"]]), n_terms,
                    split_params)
            began = time.perf_counter()
            steps = _distributed.candidate_pass(subset, slot_variance, split_params,
                                                sum_mode, *pass_arguments, grid=grid, kept=kept)
            self.era_pass_seconds += time.perf_counter() - began
            return collective.allreduce(steps, "sum"), grid

        def scores_of(chosen):
            """The DES scores and gains of the candidates ``chosen``, the same
            on every shard."""
            subset = subset_of(chosen)
            steps, grid = sums_over_eras(subset, _distributed.MODE_TERMS_MAX,
                                         _distributed.MODE_TERMS_SUM)
            return _distributed.candidate_pass(subset, slot_variance, split_params,
                                               _distributed.MODE_FINISH, grid=grid, sums=steps)

        if newton:
            # Each candidate's mean of newton era gains, then the pass around it.
            steps, grid = sums_over_eras(candidates, _distributed.MODE_NEWTON_MAX,
                                         _distributed.MODE_NEWTON_SUM)
            candidates["mean"] = _distributed.newton_means(steps, grid,
                                                           candidates["weight_total"])
        # A candidate scores at most mu + lambda_dir |mu| (sigma >= 0, |D| <= 1;
        # _split.candidate_bound, the local scan's pruning, docs/des.md §9).
        # Best first, as the local scan goes: each slot's candidates by bound,
        # the highest first, in rounds of 4, 8, 16, ... per slot (the first
        # at least FIRST_ROUND_CANDIDATES in all); a round's
        # scores raise each slot's floor (the score its winner reaches at
        # least), and a candidate whose bound is below its slot's floor cannot
        # win: it is never scored. Every shard takes the same rounds. (Rounds
        # of 1, 2, 4, ... scored 3,193 candidates in 276 messages a rank at
        # 400k x 400, 5 rounds; from 4: 5,702 in 186 -- each round is two
        # exchanges, each candidate one pass over a shard's eras.)
        mean = candidates["mean"]
        bound = mean + split_params["lambda_dir"] * np.abs(mean)
        rank = _distributed.rank_in_slot(candidates["slot"], bound, n_slots, self.n_threads)
        floor = np.full(n_slots, -np.inf)
        score, gain = np.full(n, -np.inf), np.zeros(n)
        n_open = max(1, int(np.count_nonzero(slot_open)))
        first = 0
        width = max(FIRST_ROUND_PER_SLOT, -(-FIRST_ROUND_CANDIDATES // n_open))
        while True:
            chosen = _distributed.best_first_round(rank, bound, candidates["slot"], floor,
                                                   first, width)
            if first > 0 and not len(chosen):
                break   # in every slot the next bound is below its floor
            if len(chosen):
                score[chosen], gain[chosen] = scores_of(chosen)
                np.fmax.at(floor, candidates["slot"][chosen], score[chosen])
            first, width = first + width, 2 * width
            if first >= n:
                break
        return self._chosen(_best_splits(candidates, score, gain, n_slots, n_candidates), features)

    def _square_units(self) -> np.ndarray:
        """This shard's squared-gradient sums of the slots (route_rows) as
        int64 steps of their grid: exact (docs/fixed-point.md §8), so they
        add with the pooled cells' integers."""
        return (self._own_squares * self.fixed.squared_scale).astype(np.int64)

    def _completed_variance(self, square_units=None) -> np.ndarray:
        """The slots' gradient variance over all shards, by the driver's own
        function: from ``square_units`` (the all-reduced steps of the
        shards' squared-gradient sums), put in the depth's sums first; None:
        the depth's sums were completed already."""
        from packboost.grower import gradient_variance

        sums = self._sums
        if square_units is not None:
            sums.gradients_squared = square_units.astype(np.float64) / self.fixed.squared_scale
            self._own_squares = None
        return gradient_variance(sums.gradients, sums.gradients_squared, sums.count)

    def _kept_terms(self, shape):
        """A float64 array of ``shape`` for the era terms a maximum pass keeps
        (None above KEPT_TERMS_BYTES), a view of one buffer kept from call
        to call: fresh pages each time cost more than the pass saves."""
        size = int(np.prod(shape))
        if 8 * size > KEPT_TERMS_BYTES:
            return None
        if self._kept_buffer is None or self._kept_buffer.size < size:
            # Doubling: the fit's first depths ask for ever larger sets.
            grown = 0 if self._kept_buffer is None else 2 * self._kept_buffer.size
            self._kept_buffer = np.empty(max(size, min(grown, KEPT_TERMS_BYTES // 8), 1 << 16))
        return self._kept_buffer[:size].reshape(shape)

    def _era_weighted_sums(self, arguments, n_terms):
        """era_weighting="count": every tile's era-weighted totals (n_slots,
        n_features_d, 4) and left sums per threshold (n_slots, n_features_d,
        width, 2) over all eras, as _split.era_weighted_sums takes them: on
        grids from their largest terms (all-reduced maxima), added in int64
        steps (all-reduced sums); ``n_terms`` per slot, its eras with rows."""
        collective = self.collective
        largest = collective.allreduce(_distributed.weighted_sum_maxima(*arguments), "max")
        exponents = _distributed.weighted_grid_exponents(largest, n_terms)
        totals, left = _distributed.weighted_sum_steps(*arguments, exponents)
        totals = collective.allreduce(totals, "sum")
        left = collective.allreduce(left, "sum")
        # des_from_grid: the int64 steps as float64, times their power of two (exact)
        return (np.ldexp(totals.astype(np.float64), exponents[:, :, [0, 1, 0, 1]]),
                np.ldexp(left.astype(np.float64), exponents[:, :, np.newaxis, :]))

    def _era_cells(self, slot_tree, slot_open, features, tree_uses_feature, slot_variance,
                   split_params, keep_for_children=False):
        """This shard's per-era cells of every slot over ``features``
        (find_best_splits' ``depth_cells``), where they are (its
        ``cell_origin``, ``cell_stride``) and their sums over its eras
        (its ``pooled_cells``), by the CPU backend's pass: the
        open slots' rows, a child from its parent's cells where the parent
        depth kept them for it over the same features (subtraction; the
        driver's ``keep_for_children``, as a local fit takes it). Cells no
        child will derive from are laid out per tree (only the features a
        slot's tree uses), as a local full pass lays them. It scores
        nothing (``cells_only``): scores come from every shard's cells."""
        data = self.data
        plan = self._subtraction_plan(slot_tree, slot_open, features, tree_uses_feature,
                                      keep_for_children=True, always=True)
        if np.all(plan["visit"]):
            rows, era_offsets = data.all_rows, data.era_offsets
        else:
            rows, era_offsets = self._active_rows(plan["visit"])
        origin = np.empty((len(features), self.pack_size), dtype=np.int64)
        stride = np.empty(len(features), dtype=np.int64)
        # Pooled by the pass a chunk of eras at a time while in cache (built
        # and derived slots alike: a derived slot's cells are final once its
        # era's pass is done).
        pooled = np.empty(
            _split.pooled_cells_size(len(slot_tree), features, data.n_bins, self.fixed),
            dtype=np.int64)
        _split.find_best_splits(
            data.X_binned, self.fixed, rows, era_offsets, self.node_of_row, slot_tree,
            slot_open, features, tree_uses_feature, data.n_bins, split_params,
            self.n_threads, self.histogram_budget_bytes, self.features_per_pass,
            slot_variance, **{name: plan[name] for name in (
                "depth_cells", "parent_cells", "slot_kind", "slot_parent",
                "tree_extra_feature")},
            era_tree_rows=self._era_tree_rows, scattered_samples=self._scattered_samples,
            cells_only=True, cell_origin=origin, cell_stride=stride, pooled_cells=pooled,
            # a child derives from block-wide cells only
            cells_per_tree=not keep_for_children)
        self._kept = None if not keep_for_children else dict(
            cells=plan["depth_cells"], features=features, uses=tree_uses_feature,
            n_slots=len(slot_tree))
        self._best = None
        return plan["depth_cells"], origin, stride, pooled

    def find_category_splits(self, slot_tree, slot_open, features, tree_uses_feature,
                             slot_variance, params, *, constraints=None) -> dict:
        """The CPU backend's category splits over every shard's eras: each
        shard's per-era category cells (its own eras' sums, the local fit's
        numbers) gathered and put in era order, and scored alike on every
        shard by the CPU code (docs/distributed.md, "Categorical features"),
        with the depth's constraints as locally."""
        if slot_variance is None:
            # find_splits completed the squared gradients, else (no numeric
            # feature) they are all-reduced here
            slot_variance = self._completed_variance(
                None if self._own_squares is None
                else self.collective.allreduce(self._square_units(), "sum"))
        cells = self._category_cells(slot_tree, slot_open, features)
        hist = self.data.shard.in_era_order(self.collective.allgather(cells), axis=2)
        return self._score_category_cells(hist, slot_tree, slot_open, features,
                                          tree_uses_feature, slot_variance, params,
                                          constraints)

    def refit_quantile_leaves(self, pack, data, y, raw_prediction, sample_weight, tree_samples,
                              alpha, shrinkage, n_threads) -> None:
        """objective="quantile": every leaf refitted as the local fit refits it
        (_leaf_refit.refit_quantile_leaves) over every shard's rows. A leaf's
        value is the smallest residual at or below which its rows reach
        the local rule's share: without weights, more rows than the rank the
        local rule picks (_leaf_refit.quantile_ranks, from the leaves' row
        counts over all shards); with weights, the threshold of its weight
        units (_leaf_refit.unit_thresholds; the grid from every shard's rows
        and largest weight of each tree's sample). It is found by bisection
        over the residuals' order keys (_leaf_refit.order_keys), every leaf
        of the pack at once: 64 steps, each one allreduce of the leaves'
        rows (and units) at or below their midpoints (integers: exact)."""
        from packboost import _leaf_refit

        values, collective = pack.nodes["value"], self.collective
        n_nodes, n_trees = len(values), len(tree_samples)
        weighted = sample_weight is not None
        if weighted:
            # Each tree's grid: its sample's rows and largest weight, all shards.
            sizes = collective.allreduce(
                np.array([len(rows) for rows in tree_samples], dtype=np.int64), "sum")
            largest = collective.allreduce(np.array(
                [float(np.max(sample_weight[rows], initial=0.0)) for rows in tree_samples],
                dtype=np.float64), "max")
        # Every sampled row's leaf (a pack-wide node id: the trees' leaves are
        # distinct groups), residual key and weight units, sorted by (leaf, key).
        leaves, keys, units = [], [], []
        for tree, rows in enumerate(tree_samples):
            if len(rows):
                leaves.append(_leaf_refit.leaf_of_rows(pack, tree, data, n_threads)[rows])
                keys.append(_leaf_refit.order_keys(_leaf_refit.residuals(y, raw_prediction,
                                                                         rows)))
                if weighted:
                    exponent = _leaf_refit.weight_grid_exponent(sizes[tree], largest[tree])
                    units.append(_leaf_refit.weight_units(sample_weight[rows], exponent))
        leaf = np.concatenate(leaves) if leaves else np.zeros(0, dtype=np.int64)
        key = np.concatenate(keys) if keys else np.zeros(0, dtype=np.uint64)
        order = np.lexsort((key, leaf))
        leaf, key = leaf[order], key[order]
        segment = np.searchsorted(leaf, np.arange(n_nodes + 1), side="left")
        counts = np.diff(segment).astype(np.int64)
        if weighted:
            unit = (np.concatenate(units) if units else np.zeros(0, dtype=np.int64))[order]
            cumulative_units = np.concatenate([[0], np.cumsum(unit)])
            totals = cumulative_units[segment[1:]] - cumulative_units[segment[:-1]]
            counts, totals = collective.allreduce(np.stack([counts, totals]), "sum")
            threshold = _leaf_refit.unit_thresholds(totals, alpha)
            refit = (totals > 0) & (pack.nodes["feature"] < 0)
        else:
            counts = collective.allreduce(counts, "sum")
            # Each tree's leaves are a range of node ids: the rank rule runs per tree.
            rank = np.zeros(n_nodes, dtype=np.int64)
            offsets = pack.tree_offsets
            for tree in range(n_trees):
                begin, end = int(offsets[tree]), int(offsets[tree + 1])
                rank[begin:end] = _leaf_refit.quantile_ranks(counts[begin:end], alpha)
            refit = (counts > 0) & (pack.nodes["feature"] < 0)
        # The smallest key that reaches the leaf's share, per node.
        low = np.zeros(n_nodes, dtype=np.uint64)
        high = np.full(n_nodes, np.iinfo(np.uint64).max, dtype=np.uint64)
        own = np.flatnonzero(np.diff(segment) > 0)    # nodes with rows on this shard
        # One sorted int64 per row, (leaf, the key's rank among this shard's
        # keys), so that one searchsorted counts every leaf's keys at or below
        # its midpoint (a search per leaf and step was 64 x the leaves calls).
        distinct, dense = np.unique(key, return_inverse=True)
        width = len(distinct) + 1
        combined = leaf.astype(np.int64) * width + dense.reshape(-1) + 1
        for _ in range(64):
            middle = low + (high - low) // np.uint64(2)
            below = np.searchsorted(distinct, middle[own], side="right")
            end = np.searchsorted(combined, own * width + below, side="right")
            at_most = np.zeros((2 if weighted else 1, n_nodes), dtype=np.int64)
            at_most[0, own] = end - segment[own]
            if weighted:
                at_most[1, own] = cumulative_units[end] - cumulative_units[segment[own]]
            at_most = collective.allreduce(at_most, "sum")
            if weighted:   # a row at or below it, and the units' threshold reached
                enough = (at_most[0] >= 1) & (at_most[1] >= threshold)
            else:
                enough = at_most[0] > rank
            # (a node without rows anywhere stays put: nothing to find)
            enough |= ~refit
            high = np.where(enough, middle, high)
            low = np.where(enough, low, middle + np.uint64(1))
        refitted = shrinkage * _leaf_refit.from_order_keys(low[refit])
        if pack.value_bounds is not None:
            refitted = np.clip(refitted, pack.value_bounds[refit, 0],
                               pack.value_bounds[refit, 1])
        values[refit] = refitted

    def _chosen(self, best: BestSplits, features) -> BestSplits:
        """Keep the depth's choice for route_rows (the children's sums)."""
        self._best = (best, features)
        return best

    def route_rows(self, split_feature, split_threshold, split_missing_left, left_child_slot,
                   slot_node, *, split_children=True, category_splits=None) -> None:
        """The CPU backend's routing. The children's gradient, hessian and
        count sums come from the splits (exact pooled sums, the same on every
        shard); their squared gradients from this shard's rows as it routes
        them, all-reduced with the next depth's pooled cells (find_splits;
        every shard takes the same branch: the choice is the same on all).
        Otherwise slot_sums gathers the sums afterwards."""
        self._at_roots = False
        self._own_squares = None
        best, self._best = self._best, None
        split = np.flatnonzero(np.asarray(left_child_slot) >= 0)
        if len(split) == 0:
            self._last_slot_node = np.ascontiguousarray(slot_node, dtype=np.int32)
            self._slot_parent = None
            return
        if category_splits is not None:
            # By threshold, then the sets' categories left (no sums either).
            self._route_by_categories(split_feature, split_threshold, split_missing_left,
                                      left_child_slot, slot_node, split, category_splits)
            return
        children = None if not self._note_parents(left_child_slot, split) else \
            self._children_sums(best, split, split_feature, split_threshold, split_missing_left)
        data, fixed, n_next = self.data, self.fixed, 2 * len(split)
        if children is None or not split_children:
            # Sums from the rows when the next depth asks (slot_sums); at the
            # last depth the leaves' from the splits, as the CPU backend
            # takes them (their squared gradients are not read). Before, the
            # leaves' sums were summed from the rows again and all-reduced:
            # a pass over the rows and an exchange a round.
            self._route_without_sums(split_feature, split_threshold, split_missing_left,
                                     left_child_slot, slot_node, split)
            if children is not None:
                self._routed_sums = (n_next, SlotSums(*children, None))
            return
        squares = _partition.route_rows(
            data.X_binned, self.node_of_row, split_feature, split_threshold,
            split_missing_left, left_child_slot, data.n_bins, slot_node, self.leaf_of_row,
            self.n_threads, fixed.gradients, fixed.hessians, n_next, squares_only=True,
            slot_tree=self._slot_tree, scattered_samples=self._scattered_samples,
            squared_gradients=fixed.squared)
        self._own_squares = np.ascontiguousarray(squares, dtype=np.float64)
        self._routed_sums = (n_next, SlotSums(*children, None))


# Candidates per slot in the era pass's first best-first round (find_splits).
FIRST_ROUND_PER_SLOT = 4
# ... and at least this many candidates in all: a depth with few open slots
# (the first three of a pack of 4) then settles in one round instead of
# 1.6-1.7 (two exchanges a round; a candidate costs a pass over a shard's
# eras, 128 of them little). 150k x 200 and 750k x 400: 35-38 -> 32-33
# exchanges a round, a round ~3% shorter (benchmarks/RESULTS.md 2026-11-29).
FIRST_ROUND_CANDIDATES = 128

# The most a shard keeps of a set of candidates' era terms between the era
# pass's maximum and sum passes (more: the sum pass computes them again).
KEPT_TERMS_BYTES = 128 << 20


def _best_splits(candidates, score, gain, n_slots, n_candidates) -> BestSplits:
    """score_tile's choice per (slot, feature) -- the first candidate with the
    strictly largest score -- then the best feature per slot, with the
    winners' left sums (exact pooled sums, the same on every shard), from
    which route_rows takes the children's sums as find_best_splits'
    slot_left gives them locally."""
    return BestSplits.of_table(
        _distributed.tile_table(candidates, score, gain, n_slots, n_candidates))


def _worker_addresses(dask_scheduler=None):
    return list(dask_scheduler.workers)
