"""The Dask backend: the rows live on Dask workers, whole eras per worker
(docs/distributed.md).

:class:`DaskBackend` implements :class:`packboost.backends.interface.Backend`
for the one driver (:func:`packboost.grower.grow_pack`, run on the client by
:func:`packboost.booster.train`). Each worker holds a *shard*: a contiguous
range of whole eras, i.e. of the era-sorted training rows, binned, with the
shard's ``node_of_row`` / ``leaf_of_row``. Per depth:

1. every shard histograms its own eras (they never leave the worker) and
   returns the pooled per-bin sums of every (slot, feature): exact fixed-point
   sums, added on the client in any order;
2. the client enumerates the candidates exactly as ``_split.score_tile``
   does and, when DES needs its era pass, sends them along the shards in era
   order: each shard continues the running float state of every candidate
   over its eras (``_distributed.candidate_pass``), worker to worker through
   Dask's dependencies; the client finishes the last state.

The float sums are therefore added in the single-machine order, by the same
des.h functions: the trees are bit for bit the CPU backend's.

Worker-side state lives in a module-level registry keyed by shard; a task
that finds no shard (the worker was restarted) raises, and the client
watches that every shard's worker is alive while it waits, so a dead worker
is an error, never a hang (:class:`WorkerLostError`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from packboost import _constraints, _distributed, _partition, _predict
from packboost.backends.interface import BestSplits, SlotSums

# Arguments larger than this are scattered to their worker first.
SCATTER_BYTES = 1 << 20

# How often the client checks that the shards' workers are alive while it waits.
POLL_SECONDS = 0.5

_SHARDS: dict = {}   # worker side: shard key -> _Shard (per process: threaded workers share it)


class WorkerLostError(RuntimeError):
    """A worker holding training eras left the cluster during a fit."""


@dataclass
class ShardInfo:
    """Where a shard lives and which global (era-sorted) rows it holds."""

    worker: str
    first_row: int
    end_row: int
    first_era: int
    end_era: int
    key: str          # the shard's name in its worker's registry: fit id / shard index


@dataclass
class _Shard:
    X_binned: np.ndarray       # (n_features, n_local) bin codes
    row_era: np.ndarray        # (n_local,) int32, era codes relative to the shard
    n_eras: int
    n_bins: np.ndarray
    first_row: int
    total_rows: int
    pack_size: int
    n_threads: int
    node_of_row: np.ndarray = None
    leaf_of_row: np.ndarray = None
    gradients: np.ndarray = None
    hessians: np.ndarray = None
    depth: dict = field(default_factory=dict)   # this depth's histograms
    cpu_seconds: float = 0.0


# -- worker side ------------------------------------------------------------------

def _shard(key: str) -> _Shard:
    try:
        return _SHARDS[key]
    except KeyError:
        raise WorkerLostError(
            f"this worker holds no shard {key}: it was restarted during the fit"
        ) from None


def worker_store(key: str, shard: _Shard) -> int:
    shard.node_of_row = np.empty((shard.X_binned.shape[1], shard.pack_size), dtype=np.int32)
    shard.leaf_of_row = np.empty_like(shard.node_of_row)
    _SHARDS[key] = shard
    return shard.X_binned.shape[1]


def worker_drop(key: str) -> float:
    """Free the shard; returns the CPU seconds its tasks took."""
    shard = _SHARDS.pop(key, None)
    return shard.cpu_seconds if shard is not None else float("nan")


def worker_begin_pack(key, gradients, hessians, tree_rows) -> None:
    shard = _shard(key)
    shard.gradients, shard.hessians = gradients, hessians
    for tree, rows in enumerate(tree_rows):
        _partition.start_tree(shard.node_of_row, rows, tree, shard.n_threads)


def worker_slot_sums(key, n_slots, partial):
    shard = _shard(key)
    return _distributed.chained_slot_sums(shard.gradients, shard.hessians, shard.node_of_row,
                                          n_slots, shard.first_row, shard.total_rows,
                                          np.array(partial, copy=True))


def worker_histograms(key, slot_tree, slot_open, features, tree_uses_feature, width):
    shard = _shard(key)
    hist, era_rows = _distributed.era_histograms(
        shard.X_binned, shard.gradients, shard.hessians, shard.node_of_row, shard.row_era,
        shard.n_eras, slot_tree, slot_open, features, tree_uses_feature, width)
    shard.depth = dict(hist=hist, era_rows=era_rows, features=features)
    # Sums of grid values: exact, so the client may add the shards in any order.
    return hist.sum(axis=2), (era_rows > 0).sum(axis=1).astype(np.float64)


def worker_enumerate(key, pooled, split_args, params) -> None:
    """Enumerate this depth's candidates from the pooled sums (the same
    deterministic code as on the client): the per-bin pooled sums cross the
    network, not the candidate list."""
    shard = _shard(key)
    shard.depth["candidates"] = _distributed.enumerate_candidates(*pooled, *split_args, params)


def worker_candidate_pass(key, block, slot_variance, params, means, mode, state):
    """Continue ``state`` of candidates ``block`` = (start, end) over this
    shard's eras (``means``: their newton means, when given)."""
    shard = _shard(key)
    depth = shard.depth
    start, end = block
    candidates = {name: values[start:end] for name, values in depth["candidates"].items()}
    if means is not None:
        candidates["mean"] = means
    return _distributed.candidate_pass(candidates, slot_variance, params, mode, state,
                                       depth["hist"], depth["era_rows"], shard.n_bins,
                                       depth["features"])


def worker_route_rows(key, split_feature, split_threshold, split_missing_left,
                      left_child_slot, slot_node) -> None:
    shard = _shard(key)
    shard.depth = {}
    _partition.route_rows(shard.X_binned, shard.node_of_row, split_feature, split_threshold,
                          split_missing_left, left_child_slot, shard.n_bins, slot_node,
                          shard.leaf_of_row, shard.n_threads)


def worker_add_pack(key, values, tree_roots, raw_prediction):
    shard = _shard(key)
    raw_prediction = np.array(raw_prediction, dtype=np.float64, copy=True)
    _predict.add_leaf_values(shard.leaf_of_row, values, tree_roots, raw_prediction,
                             shard.n_threads)
    return raw_prediction


# -- client side ------------------------------------------------------------------

class DaskBackend:
    """:class:`packboost.backends.interface.Backend` over shards on Dask workers.

    ``shards`` (era order) were stored by :func:`worker_store` under their
    ``key`` (one per shard: workers may share a process).
    ``bytes_log`` records ``(kind, bytes, sizes)`` of the arrays that crossed the
    network (arguments, results, chained states): kind "depth" for a depth's
    slot sums and split finding (the previous depth's routing included),
    "pack" for the per-round gradients, samples and prediction update.
    """

    def __init__(self, client, fit_id: str, shards: list, data, pack_size: int):
        self.client = client
        self.fit_id = fit_id
        self.shards = list(shards)
        self.data = data
        self.pack_size = pack_size
        self.bytes_log: list = []
        self.round_bytes = 0
        self._pending: dict = {}
        self.worker_cpu_seconds: list = []   # per shard, filled by close()

    # -- plumbing

    def _submit(self, shard: ShardInfo, function, *args, after=None):
        """Run ``function(key, *args)`` on the shard's worker, after the
        future ``after``, else after the shard's pending task (routing, the
        pack's start): those are not waited for, their successor depends on
        them (one round trip less per depth; their errors surface there)."""
        self.round_bytes += _nbytes(args)
        pending = after if after is not None else self._pending.pop(shard.worker, None)
        # Large arrays (a round's gradients, prediction slices) go to the
        # worker directly rather than inside the task graph.
        args = [self.client.scatter(arg, workers=[shard.worker], direct=True, hash=False)
                if isinstance(arg, np.ndarray) and arg.nbytes > SCATTER_BYTES else arg
                for arg in args]
        return self.client.submit(_after, function, pending, shard.key, *args,
                                  workers=[shard.worker], allow_other_workers=False,
                                  pure=False)

    def _defer(self, futures) -> None:
        for shard, future in zip(self.shards, futures, strict=True):
            self._pending[shard.worker] = future

    def _gather(self, futures):
        """Results of ``futures``; a :class:`WorkerLostError` as soon as a
        shard's worker is gone (its pinned tasks would wait forever)."""
        from distributed import wait

        futures = list(futures)
        results = None
        while results is None:
            try:
                wait(futures, timeout=POLL_SECONDS)
                # Fetched with a timeout too: a worker that dies after its
                # task finished takes the result with it, and a plain gather
                # would wait forever for a recomputation pinned to that worker.
                results = [future.result(timeout=POLL_SECONDS) for future in futures]
            except TimeoutError:
                self._check_workers(futures)
        self.round_bytes += _nbytes(results)
        return results

    def _check_workers(self, futures) -> None:
        alive = set(self.client.run_on_scheduler(_worker_addresses))
        lost = [shard for shard in self.shards if shard.worker not in alive]
        if lost:
            self.client.cancel(futures)
            eras = ", ".join(f"{s.first_era}..{s.end_era - 1}" for s in lost)
            raise WorkerLostError(
                f"Dask worker {lost[0].worker} holding training eras {eras} left the cluster "
                "during fit; the fit was abandoned (no model was kept). Restart the fit on "
                "the remaining workers.")

    def _chain_blocks(self, mode, initial, means, ready, slot_variance, split_params):
        """The era-order chain of the candidates' states, in blocks: block j
        goes shard 1 -> 2 -> ... -> P, and shard k works on block j while
        shard k+1 works on block j-1 (a pipeline: P shards are busy at once
        instead of one). Each candidate's own chain is unchanged, so blocks
        change no result. ``ready``: per shard, its enumeration."""
        finals = []
        for start, end in candidate_blocks(len(initial), len(self.shards)):
            state = initial[start:end]
            for shard, enumerated in zip(self.shards, ready, strict=True):
                state = self._submit(shard, worker_candidate_pass, (start, end), slot_variance,
                                     split_params, None if means is None else means[start:end],
                                     mode, state, after=enumerated)
            finals.append(state)
        results = self._gather(finals)
        # every hop between shards moved one state
        self.round_bytes += _nbytes(results) * (len(self.shards) - 1)
        return np.concatenate(results)

    def _chain(self, function, state, *args):
        """Run ``function`` on every shard in era order, each continuing the
        state the previous one returned (worker to worker, no client hop)."""
        for shard in self.shards:
            state = self._submit(shard, function, *args, state)
        (result,) = self._gather([state])
        # every hop moved one state of this size
        self.round_bytes += _nbytes(result) * (len(self.shards) - 1)
        return result

    def close(self) -> None:
        if self._pending:
            self.client.cancel(list(self._pending.values()))
            self._pending = {}
        futures = [self.client.submit(worker_drop, shard.key, workers=[shard.worker],
                                      pure=False) for shard in self.shards]
        deadline = time.monotonic() + 5.0
        self.worker_cpu_seconds = []
        for future in futures:
            try:
                seconds = future.result(timeout=max(0.1, deadline - time.monotonic()))
            except Exception:  # noqa: BLE001 -- a lost worker has nothing left to free
                seconds = float("nan")
            self.worker_cpu_seconds.append(seconds)

    # -- the interface

    def begin_pack(self, fixed, tree_samples: list) -> None:
        if len(tree_samples) != self.pack_size:
            raise ValueError(f"expected {self.pack_size} tree samples, got {len(tree_samples)}")
        futures = []
        for shard in self.shards:
            span = slice(shard.first_row, shard.end_row)
            tree_rows = []
            for rows in tree_samples:
                lo, hi = np.searchsorted(rows, [shard.first_row, shard.end_row])
                tree_rows.append(np.ascontiguousarray(rows[lo:hi] - shard.first_row,
                                                      dtype=np.int32))
            futures.append(self._submit(shard, worker_begin_pack, fixed.gradients[span],
                                        fixed.hessians[span], tree_rows))
        self._defer(futures)
        self._log("pack")

    def slot_sums(self, n_slots: int) -> SlotSums:
        partial = self._chain(worker_slot_sums, _partition.chunk_partials(n_slots), n_slots)
        # _partition.slot_sums' final additions, chunks in order
        return SlotSums(*_partition.chunk_totals(partial, n_slots))

    def find_splits(self, slot_tree, slot_open, features, tree_uses_feature, slot_variance,
                    split_params, *, keep_for_children=False, constraints=None) -> BestSplits:
        if constraints is not None:
            raise _constraints.unsupported("the Dask estimators")
        # keep_for_children (histogram subtraction) is a hint; shards rebuild
        # their histograms every depth.
        n_slots, n_candidates = len(slot_tree), len(features)
        n_bins = self.data.n_bins
        width = int(n_bins[features].max()) + 1 if n_candidates else 1
        results = self._gather([
            self._submit(shard, worker_histograms, slot_tree, slot_open, features,
                         tree_uses_feature, width) for shard in self.shards])
        pooled = results[0][0].copy()
        present = results[0][1].copy()
        for shard_pooled, shard_present in results[1:]:
            pooled += shard_pooled     # exact: integer numbers of grid steps
            present += shard_present
        pooled = (np.ascontiguousarray(pooled), present)
        split_args = (slot_tree, slot_open, features, tree_uses_feature, n_bins)
        candidates = _distributed.enumerate_candidates(*pooled, *split_args, split_params)
        n = len(candidates["slot"])
        newton = split_params["era_gain"] == "newton"
        needs_pass = (split_params["lambda_dro"] != 0.0 or split_params["lambda_dir"] != 0.0
                      or newton)
        state = np.zeros((n, _distributed.N_STATE))
        if needs_pass and n:
            ready = [self._submit(shard, worker_enumerate, pooled, split_args, split_params)
                     for shard in self.shards]
            args = (ready, slot_variance, split_params)
            if newton:
                sums = self._chain_blocks(_distributed.MODE_NEWTON_MEAN, np.zeros(n), None,
                                          *args)
                candidates["mean"] = sums / present[candidates["slot"]]
                state = self._chain_blocks(_distributed.MODE_PASS, state, candidates["mean"],
                                           *args)
            else:
                state = self._chain_blocks(_distributed.MODE_PASS, state, None, *args)
        score, gain = _distributed.candidate_pass(candidates, slot_variance, split_params,
                                                  _distributed.MODE_FINISH, state)
        self._log("depth", slots=n_slots, features=n_candidates, width=width,
                  candidates=n, shards=len(self.shards), chained=bool(needs_pass and n))
        return _best_splits(candidates, score, gain, n_slots, n_candidates)

    def route_rows(self, split_feature, split_threshold, split_missing_left, left_child_slot,
                   slot_node, *, split_children=True) -> None:
        # split_children is a hint this backend does not use (it always sums
        # the squared gradients).
        self._defer([self._submit(shard, worker_route_rows, split_feature, split_threshold,
                                  split_missing_left, left_child_slot, slot_node)
                     for shard in self.shards])

    def add_pack(self, pack, raw_prediction: np.ndarray) -> None:
        roots = np.ascontiguousarray(pack.tree_offsets[:-1])
        values = np.ascontiguousarray(pack.nodes["value"])
        updated = self._gather([
            self._submit(shard, worker_add_pack, values, roots,
                         raw_prediction[shard.first_row:shard.end_row])
            for shard in self.shards])
        for shard, part in zip(self.shards, updated, strict=True):
            raw_prediction[shard.first_row:shard.end_row] = part
        self._log("pack")

    def _log(self, kind: str, **sizes) -> None:
        self.bytes_log.append((kind, self.round_bytes, sizes))
        self.round_bytes = 0


# Candidates per block of the pipelined chain (at least; blocks of a depth
# are at most PIPELINE_BLOCKS_PER_SHARD x the shards).
MIN_BLOCK_CANDIDATES = 2048
PIPELINE_BLOCKS_PER_SHARD = 4


def candidate_blocks(n: int, n_shards: int) -> list:
    """``(start, end)`` blocks of ``n`` candidates for the pipelined chain."""
    if n_shards <= 1:
        return [(0, n)]
    count = max(1, min(PIPELINE_BLOCKS_PER_SHARD * n_shards, n // MIN_BLOCK_CANDIDATES))
    edges = np.linspace(0, n, count + 1).astype(np.int64)
    return [(int(a), int(b)) for a, b in zip(edges[:-1], edges[1:], strict=True) if b > a]


def _best_splits(candidates, score, gain, n_slots, n_candidates) -> BestSplits:
    """score_tile's choice per (slot, feature) -- the first candidate with the
    strictly largest score -- then the best feature per slot."""
    shape = (n_slots, n_candidates)
    found = {"score": np.full(shape, -np.inf), "gain": np.zeros(shape),
             "threshold": np.zeros(shape, dtype=np.int32),
             "missing_left": np.zeros(shape, dtype=np.uint8),
             "found": np.zeros(shape, dtype=np.uint8)}
    valid = np.flatnonzero(score > -np.inf)   # NaN and -inf never beat the initial -inf
    if len(valid):
        key = candidates["slot"][valid].astype(np.int64) * n_candidates \
            + candidates["position"][valid]
        order = np.lexsort((valid, -score[valid], key))
        first = np.ones(len(order), dtype=bool)
        first[1:] = key[order][1:] != key[order][:-1]
        chosen = valid[order[first]]
        slot, position = candidates["slot"][chosen], candidates["position"][chosen]
        found["score"][slot, position] = score[chosen]
        found["gain"][slot, position] = gain[chosen]
        found["threshold"][slot, position] = candidates["threshold"][chosen]
        found["missing_left"][slot, position] = candidates["missing_left"][chosen]
        found["found"][slot, position] = 1
    return BestSplits.of_table(found)


def _after(function, _pending, key, *args):
    """Worker side: ``function`` once the shard's pending task is done (Dask
    passes that task's result, None, as ``_pending``); its CPU seconds are
    added to the shard's account (``DaskBackend.worker_cpu_seconds``)."""
    start = time.process_time()
    try:
        return function(key, *args)
    finally:
        shard = _SHARDS.get(key)
        if shard is not None:
            shard.cpu_seconds += time.process_time() - start


def _worker_addresses(dask_scheduler=None):
    return list(dask_scheduler.workers)


def _nbytes(value) -> int:
    """Bytes of the arrays in ``value`` (what a transfer carries, headers aside)."""
    if isinstance(value, np.ndarray):
        return value.nbytes
    if isinstance(value, dict):
        return sum(_nbytes(item) for item in value.values())
    if isinstance(value, (list, tuple)):
        return sum(_nbytes(item) for item in value)
    return 8
