"""Distributed training on Dask: :class:`DaskPackBoostRegressor` and
:class:`DaskPackBoostClassifier` (docs/distributed.md).

The estimators take Dask DataFrames / Arrays and have exactly the local
estimators' parameters (they subclass them). ``fit`` moves every era whole to
one worker -- contiguous ranges of eras, balanced by rows, whatever the input
partitioning -- with its targets and weights, bins each worker's rows there,
and then runs one task per worker for the whole fit: every worker runs the
one driver (:func:`packboost.booster.train`) over its shard, exchanging the
sums over all eras with the other workers directly
(:mod:`packboost.backends.dask`). The model is bit for bit the local fit's
with the same parameters and seed, and is an ordinary PackBoost model
(``to_local()``, same model files).

Per-row state (targets, weights, gradients, predictions) lives on the
workers; the eval sets and the callbacks live on the first worker (rank 0),
whose model is returned. The client computes the era labels once (the shard
plan) and the base score, and sends no per-row array after loading.
"""

from __future__ import annotations

import operator
import os
import threading
import time
import uuid
from dataclasses import dataclass

import numpy as np

from packboost import _categories, _constraints, _inputs, _validation
from packboost._binning import place_columns
from packboost._collective import PeerLostError
from packboost.backends.dask import (
    _LOADING,
    WorkerLostError,
    _Shard,
    _worker_addresses,
    worker_drop,
    worker_store,
    worker_train,
)
from packboost.binning import BinMapper
from packboost.objectives import get_objective, make_objective
from packboost.sklearn import (
    PackBoostClassifier,
    PackBoostRegressor,
    _check_categorical_supported,
    _fitted_state,
    _resolve_n_jobs,
)

__all__ = ["DaskPackBoostRegressor", "DaskPackBoostClassifier", "WorkerLostError"]


def _is_dask(value) -> bool:
    return hasattr(value, "__dask_graph__") and value.__dask_graph__() is not None


def _compute_on(client, *values) -> list:
    """``values`` with their Dask collections computed on ``client``, in one
    call per kind of graph (a round trip to the scheduler each, not one per
    value; DataFrame expressions and array graphs computed together would
    be materialised, with a warning); anything else as is."""
    out = list(values)
    lazy = [index for index, value in enumerate(values)
            if value is not None and _is_dask(value)]
    for expressions in (True, False):
        group = [index for index in lazy if hasattr(values[index], "expr") == expressions]
        if group:
            for index, result in zip(group, client.compute([values[index] for index in group],
                                                           sync=True), strict=True):
                out[index] = result
    return out


def shard_plan(era_rows: np.ndarray, n_workers: int) -> list:
    """Contiguous era ranges ``(first_era, end_era)``, at most ``n_workers``,
    each non-empty, balanced by rows (a cut where the running row count
    passes k / n of the total)."""
    n_eras = len(era_rows)
    n_shards = max(1, min(n_workers, n_eras))
    cumulative = np.cumsum(era_rows)
    total = cumulative[-1]
    cuts = [0]
    for k in range(1, n_shards):
        cut = int(np.searchsorted(cumulative, total * k / n_shards, side="left")) + 1
        cut = min(max(cut, cuts[-1] + 1), n_eras - (n_shards - k))
        cuts.append(cut)
    cuts.append(n_eras)
    return [(cuts[k], cuts[k + 1]) for k in range(n_shards)]


def _checked(part, encoder):
    """One input partition as the local fit checks X, its categorical
    columns first replaced by their codes (``encoder``, None: none)."""
    if encoder is not None:
        part = encoder.transform(part)
    return _validation.check_X(part)[0]


def _select_rows(scanned, index):
    """Rows ``index`` of one scanned partition (:func:`_scan_partition`)."""
    return np.ascontiguousarray(scanned[1][index])


def _partition_categories(part, categorical_features):
    """The categorical features of one input partition and their categories
    (_categories.learn_encoder; combined over the partitions on the client)."""
    return _categories.learn_encoder(part, categorical_features)


# How often the client checks that the shards' workers are alive while it waits.
POLL_SECONDS = 0.5
# How long the client waits for a finished task's result (the fitted model
# from rank 0) before it checks whether the worker holding it is gone.
RESULT_SECONDS = 60.0
# How long the client waits for a failed fit's own error once the other ranks
# have reported their lost peer.
CAUSE_SECONDS = 3.0


@dataclass
class ShardInfo:
    """Where a shard lives and which eras it holds."""

    worker: str
    eras: np.ndarray  # ascending era codes
    key: str          # the shard's name in its worker's registry: fit id / shard index

    def describe_eras(self) -> str:
        """The eras as runs of consecutive codes: "0..9, 20..29"."""
        from packboost._row_shard import era_runs

        return ", ".join(f"{first}..{end - 1}" if end - first > 1 else f"{first}"
                         for first, end in zip(*map(np.ndarray.tolist, era_runs(self.eras)),
                                               strict=True))


@dataclass
class _ShardLoading:
    """A shard's rows while they arrive (worker side): its own partitions'
    (_start_shard) and the pieces other workers binned (_place_pieces), in
    either order or at once; _build_shard stores the shard once both are in."""

    X_binned: np.ndarray
    init_raw: np.ndarray | None = None

    def place_scores(self, raw, places):
        with _LOADING_LOCK:
            if self.init_raw is None:
                self.init_raw = np.empty((self.X_binned.shape[1],) + raw.shape[1:],
                                         dtype=np.float64)
        self.init_raw[places] = raw


_LOADING_LOCK = threading.Lock()


def _loading(key, n_features, n_local, dtype) -> _ShardLoading:
    """The shard ``key``'s loading on this worker, begun by whichever half
    comes first (threaded workers may run both at once)."""
    with _LOADING_LOCK:
        if key not in _LOADING:
            _LOADING[key] = _ShardLoading(np.empty((n_features, n_local), dtype=dtype))
        return _LOADING[key]


def _start_shard(key, local_parts, n_local, mapper, init_ensemble, n_threads):
    """Worker side: the shard's rows of the partitions on this worker
    (``local_parts``: (scanned partition, its rows of this shard in the
    shard's order, their places in the shard)) binned straight into their
    era-sorted places. It needs nothing from other workers: it runs while
    the pieces from them are binned and fetched (:func:`_place_pieces`).
    Returns the rows placed."""
    loading = _loading(key, mapper.n_features_in_, n_local, mapper.binned_dtype_)
    placed = 0
    for scanned, rows, places in local_parts:
        mapper.transform_into(scanned[1], loading.X_binned, rows, places, n_threads)
        placed += len(rows)
        if init_ensemble is not None:
            loading.place_scores(init_ensemble.predict_raw(scanned[1][rows], n_threads),
                                 places)
    return placed


def _place_pieces(key, pieces, n_local, n_features, dtype, n_threads):
    """Worker side: what partitions on other workers binned for the shard
    (``pieces``, :func:`_bin_partition`) put in their places. Its only
    dependencies are the pieces, so the worker fetches them as they are
    binned, not after its own rows are placed. Returns the rows placed."""
    loading = _loading(key, n_features, n_local, dtype)
    placed = 0
    for codes, places, raw in pieces:
        place_columns(codes, places, loading.X_binned, n_threads)
        placed += len(places)
        if raw is not None:
            loading.place_scores(raw, places)
    return placed


def _build_shard(key, started, placed, row_era, y, sample_weight, eras):
    """Worker side: the shard stored once its own rows (``started``, from
    :func:`_start_shard`) and the pieces (``placed``, :func:`_place_pieces`)
    are in. Returns (rows, the address its fit listens at)."""
    with _LOADING_LOCK:
        loading = _LOADING.pop(key)
    n_local = loading.X_binned.shape[1]
    if started + placed != n_local:
        raise AssertionError(f"shard {key}: {started + placed} rows arrived, {n_local} expected")
    return worker_store(key, _Shard(X_binned=loading.X_binned, row_era=row_era, y=y,
                                    sample_weight=sample_weight, eras=eras,
                                    init_raw=loading.init_raw))


class _DaskEstimator:
    """What the Dask estimators add to the local ones (mixin, listed first)."""

    #: The ``distributed.Client`` to fit on (default: ``distributed.default_client()``).
    client = None

    def _client(self):
        if self.client is not None:
            return self.client
        from distributed import default_client

        return default_client()

    def __getstate__(self):
        # A Client does not pickle (nor belong in a model file): a pickled
        # estimator fits on the default client of wherever it is loaded.
        state = super().__getstate__()
        state.pop("client", None)
        return state

    def to_local(self):
        """The fitted model as the plain local estimator (same parameters)."""
        view = self._fitted_view()
        local = self._local_class(**self.get_params())
        local._publish({name: value for name, value in view.items()
                        if name in _fitted_names(view)})
        return local

    def save_model(self, path) -> None:
        self.to_local().save_model(path)

    def _fit_all(self, X, y, *, era, sample_weight, eval_set, eval_names, eval_metric,
                 early_stopping_rounds, callbacks, init_model, progress):
        params = self._validated_params()
        init = self._dask_init_model(init_model, params["pack_size"])
        _validation.warn_unusual_params(params)
        if params["device"] != "cpu":
            raise ValueError(f"device must be 'cpu' for {type(self).__name__} (the workers "
                             f"run the CPU kernels), got {params['device']!r}")
        client = self._client()

        era_column = era if isinstance(era, str) else None
        if era_column is not None:
            if not hasattr(X, "columns") or era_column not in list(X.columns):
                # the local message for a missing column
                _validation.frame_column(X._meta if hasattr(X, "_meta") else X, era_column,
                                         "era")
            era = X[era_column]
            X = X.drop(columns=[era_column])
        if not _is_dask(X):
            raise TypeError(f"X must be a Dask DataFrame or Array for {type(self).__name__}, "
                            f"got {type(X).__name__}; use the local estimator for in-memory data")
        if X.ndim != 2:
            raise ValueError(f"Expected 2D array for X, got {X.ndim}D array instead")
        feature_names = None
        if hasattr(X, "columns"):
            parts = X.to_delayed()
            lengths = X.map_partitions(len)   # computed with the targets, below
            feature_names = _inputs.table_feature_names(X.columns)  # as the local fit
            n_features = len(X.columns)
        else:
            X = X.rechunk({1: -1})
            if any(np.isnan(size) for size in X.chunks[0]):
                X = X.compute_chunk_sizes()
            parts = list(X.to_delayed().ravel())
            lengths = np.asarray(X.chunks[0], dtype=np.int64)
            n_features = X.shape[1]
        if init is not None:
            self._check_features(np.empty((0, n_features)), feature_names,
                                 init["n_features_in_"], init.get("feature_names_in_"),
                                 "X (continuing init_model)")
            if feature_names is None:
                feature_names = init.get("feature_names_in_")
        params = _constraints.resolve_for_fit(params, n_features, feature_names)
        lengths, y, era, sample_weight = _compute_on(client, lengths, y, era, sample_weight)
        lengths = np.asarray(lengths, dtype=np.int64)
        n_rows = int(lengths.sum())
        starts = np.concatenate([[0], np.cumsum(lengths)])

        y, target = self._learn_target(y, n_rows, init)
        n_outputs = self._n_outputs(y, target)
        self._check_outputs_supported(n_outputs, params)
        sample_weight = _validation.check_sample_weight(sample_weight, n_rows)
        _validation.check_gradient_scale(y, sample_weight)
        era_codes, _ = _validation.encode_eras(era, n_rows)
        del era   # the labels (strings: ~60 bytes a row): the codes serve from here
        n_eras = int(era_codes.max()) + 1

        # The rows of the local fit, in its order: sorted by era, stable.
        order = _validation.era_order(era_codes)
        position = np.empty(n_rows, dtype=np.int64)
        position[order] = np.arange(n_rows)
        era_rows = np.bincount(era_codes, minlength=n_eras)
        workers = sorted(client.run_on_scheduler(_worker_addresses))
        if not workers:
            raise RuntimeError("the Dask cluster has no workers")
        era_offsets = np.concatenate([[0], np.cumsum(era_rows)])

        part_futures = client.compute(parts)
        # The categories of the categorical features, from every partition's
        # rows (the local fit learns them from the whole X); continued
        # training keeps the model's own.
        encoder = None if init is None else init.get("category_encoder_")
        if encoder is None and _may_have_categories(X, params["categorical_features"]):
            encoder = _categories.combine(client.gather([
                client.submit(_partition_categories, part, params["categorical_features"],
                              pure=False)
                for part, length in zip(part_futures, lengths, strict=True) if length]))
            if encoder is not None and init is not None:
                raise ValueError("init_model was trained without categorical features; "
                                 "continue it on the same numeric features")
        if encoder is not None:
            _check_categorical_supported(params, encoder, feature_names)
        # Two passes over each partition where it lives. The first validates
        # it as the local fit validates X and measures what the bin mapper
        # needs (dtype, integer column ranges); the second bins its rows of
        # each shard, so only bin codes travel to the shards. Empty
        # partitions (what a filter leaves) hold no rows to validate or bin.
        filled = [client.submit(_scan_partition, part, encoder, pure=False)
                  for part, length in zip(part_futures, lengths, strict=True) if length]
        filled_lengths = lengths[lengths > 0]
        ranges = client.gather([client.submit(operator.getitem, item, 0, pure=False)
                                for item in filled])
        # Continued training bins with the saved cuts, so old and new trees agree.
        if init is None:
            mapper = self._fit_mapper(ranges, client, n_rows, params, filled, filled_lengths)
            _categories.set_category_bins(mapper, encoder)   # as the local fit's fit_bins
        else:
            mapper = init["bin_mapper_"]
        init_ensemble = None if init is None else init["ensemble_"]
        fit_id = uuid.uuid4().hex
        # In train's form: era-sorted, several targets output-major (n_targets, n_rows).
        y = self._training_target(y[order], n_outputs)
        sample_weight = sample_weight[order] if sample_weight is not None else None
        del order   # each shard's rows are its eras' spans of that order (_store_shards)
        threads = _worker_threads(client, workers, self.n_jobs)
        shards, stores = _store_shards(
            client, fit_id, workers, threads, filled, starts[:-1][lengths > 0],
            filled_lengths, era_codes, position, era_rows, y, sample_weight, mapper,
            init_ensemble)
        # From here every path frees the shards (and their loading) on the
        # workers: a bad eval set or callback fails after the loading began.
        try:
            eval_set = _computed_eval_set(client, eval_set)
            eval_sets = self._prepare_eval_sets(eval_set, eval_names, n_features, feature_names,
                                                target, n_outputs, encoder=encoder)
            metrics = self._resolve_metrics(eval_metric, eval_sets, params, n_outputs)
            # Callbacks run on rank 0's worker: a progress bar there shows nothing here.
            callback_list = self._build_callbacks(callbacks, early_stopping_rounds, False)
            # A callable objective gets each worker's rows (era-sorted): row by row.
            objective = self._output_objective(
                make_objective(params["objective"], alpha=params["alpha"],
                               link=get_objective(self._objective_name).transform), n_outputs)
            training = dict(params=params, n_bins=mapper.n_bins_, cuts=mapper.cuts_,
                            categorical=None if encoder is None else encoder.mask(),
                            objective=objective, metrics=metrics, init_ensemble=init_ensemble,
                            base_score=(objective.base_score(y, sample_weight) if init is None
                                        else None))
            # The loading's per-row arrays (the era codes, each row's place in
            # the era order, the targets and weights) are in the shards' hands
            # now; the client does not keep them through the rounds.
            del y, sample_weight, era_codes, position
            addresses = [address for _, address in _wait(client, shards, stores)]
            # The shards hold what the fit needs: the loading's intermediate
            # results (validated partitions, binned pieces, scattered targets)
            # are freed on the workers before it, not kept through every round.
            del part_futures, filled
            global_era_offsets = np.asarray(era_offsets, dtype=np.int64)
            shard_eras = [shard.eras for shard in shards]
            fits = [client.submit(
                worker_train, shard.key, rank, addresses, global_era_offsets, shard_eras,
                dict(training, n_threads=threads[shard.worker],
                     eval_sets=eval_sets if rank == 0 else None,
                     callbacks=callback_list if rank == 0 else None,
                     leader_has_callbacks=bool(callback_list)),
                workers=[shard.worker], allow_other_workers=False, pure=False, retries=0)
                for rank, shard in enumerate(shards)]
            ensemble, info = _wait(client, shards, fits)[0]
        finally:
            # Diagnostics of the last fit (benchmarks/bench_dask.py), not model state.
            self.worker_stats_ = _drop_shards(client, shards, after=stores)
        fitted = _fitted_state(target, ensemble, mapper, n_features, n_eras, info,
                               feature_names, era_column)
        if encoder is not None:
            fitted["category_encoder_"] = encoder
        return fitted

    def _dask_init_model(self, init_model, pack_size):
        """The fitted state to continue from: a fitted local or Dask estimator
        of this kind, the path of its model file, or None."""
        if init_model is None:
            return None
        if isinstance(init_model, (str, os.PathLike)):
            from packboost.model_io import load_model

            init_model = load_model(init_model)
        if not isinstance(init_model, self._local_class):
            raise TypeError(
                f"init_model must be a fitted {self._local_class.__name__} or "
                f"{type(self).__name__}, or the path of its model file, got "
                f"{type(init_model).__name__}")
        view = init_model._view()
        if view is None:
            raise ValueError("init_model is not fitted")
        return self._resolve_init_model(view, pack_size)

    @staticmethod
    def _fit_mapper(ranges, client, n_rows, params, scanned, lengths):
        """The local fit's BinMapper, exactly: pre-binned integer codes from the
        global column ranges; otherwise fitted on the local fit's row sample
        (gathered) and, for the columns with few distinct values, their
        distinct values over all partitions (BinMapper.fit_sample).
        ``scanned``: the non-empty partitions' :func:`_scan_partition`."""
        mapper = BinMapper(max_bins=params["max_bins"], random_state=params["random_state"])
        kinds = {dtype.kind for dtype, _, _ in ranges}
        if kinds <= set("iu"):
            low = min(int(r[1].min()) if r[1].size else 0 for r in ranges)
            high = np.max(np.stack([r[2] for r in ranges]), axis=0)
            if low >= 0 and (high.size == 0 or int(high.max()) < params["max_bins"]):
                # Two rows with the global column maxima: BinMapper's own
                # pre-binned rule sees the ranges the whole X has.
                return mapper.fit(np.stack([np.zeros_like(high), high]).astype(np.int64))
        sample_rows = mapper.sample_rows(n_rows)
        if sample_rows is None:
            X_all = np.concatenate([item[1] for item in client.gather(scanned)])
            return mapper.fit(X_all)
        # The local fit's row sample, gathered from the partitions (rows in
        # their global order), and each column's distinct values over every
        # partition where the sample has few: BinMapper.fit's cuts, exactly.
        starts = np.concatenate([[0], np.cumsum(lengths)])
        sample = np.concatenate(client.gather([
            client.submit(_select_rows, item,
                          sample_rows[(sample_rows >= start) & (sample_rows < end)] - start,
                          pure=False)
            for item, start, end in zip(scanned, starts[:-1], starts[1:], strict=True)]))

        def column_distinct(features):
            parts = client.gather([client.submit(_distinct_values, item, features,
                                                 mapper.max_bins, pure=False)
                                   for item in scanned])
            union = []
            for k in range(len(features)):
                pieces = [part[k] for part in parts]
                values = (None if any(piece is None for piece in pieces)
                          else np.unique(np.concatenate(pieces)))
                union.append(None if values is None or values.size > mapper.max_bins
                             else values)
            return union

        return mapper.fit_sample(sample, column_distinct)

    def predict(self, X, iteration_range=None, *, pred_contrib=False):
        if _is_dask(X):
            local = self.to_local()
            n_outputs = local.ensemble_.n_outputs
            if pred_contrib:
                def contributions(part):
                    return local.predict(part, iteration_range, pred_contrib=True)

                if n_outputs == 1:   # (rows, features + 1)
                    return _lazy(X, contributions, n_columns=local.n_features_in_ + 1,
                                 dtype=np.float64)
                # (rows, outputs, features + 1): an array, whatever X is
                return _lazy_3d(X, contributions, (n_outputs, local.n_features_in_ + 1))
            return _lazy(X, lambda part: local.predict(part, iteration_range),
                         n_columns=self._prediction_columns(local),
                         dtype=self._prediction_dtype(local))
        return super().predict(X, iteration_range, pred_contrib=pred_contrib)

    @staticmethod
    def _prediction_dtype(local):
        return np.dtype(np.float64)

    @staticmethod
    def _prediction_columns(local):
        """Columns of ``predict``: None (one value a row), or the targets."""
        n_outputs = local.ensemble_.n_outputs
        return None if n_outputs == 1 else n_outputs


def _store_shards(client, fit_id, workers, threads, scanned, starts, lengths, era_codes,
                  position, era_rows, y, sample_weight, mapper, init_ensemble):
    """Place the eras on the workers (:func:`place_eras`, from where the
    scanned partitions live), bin the partitions (``scanned``, their global
    ``starts`` and ``lengths``) into the shards and store them on their
    workers; returns the shards (ShardInfo) and their store tasks. A
    partition on a shard's worker is binned by the shard itself, into
    place; for a shard elsewhere one task where the partition lives bins its
    rows of that shard (:func:`_bin_partition`): its result is the shard's
    piece, fetched by the shard's worker (no task on the partition's worker
    to pick it out, which would queue behind that worker's own shard). What
    this function holds (the pieces, the targets' futures) ends with it:
    the shards then hold what the fit needs."""
    n_eras = len(era_rows)
    holders = client.who_has(scanned)
    held = _held_rows(workers, holders, scanned, starts, lengths, era_codes, n_eras)
    shard_eras, shard_workers = place_eras(era_rows, held)
    n_shards = len(shard_eras)
    shard_of_era, era_shift = _places_in_shards(era_rows, shard_eras)
    pieces = [[] for _ in shard_eras]        # futures of (codes, places, raw scores)
    local_parts = [[] for _ in shard_eras]   # (scanned, rows, places) binned by the shard
    for item, start, length in zip(scanned, starts, lengths, strict=True):
        # Per partition, not for all rows at once: the client's memory at
        # loading is what it holds of every row (docs/guide/dask.md).
        codes_of_part = era_codes[start:start + length]
        shard_of_part = shard_of_era[codes_of_part]
        places_of_part = position[start:start + length] + era_shift[codes_of_part]
        held_by = set(holders.get(item.key, ()))
        # The partition's rows by shard, each shard's in its order: by
        # position (distinct integers), then stably by shard code (the era
        # sort's radix sort: it sorts any small codes).
        by_position = np.argsort(position[start:start + length])
        by_shard = by_position[_validation.era_order(shard_of_part[by_position])]
        bounds = np.searchsorted(shard_of_part[by_shard], np.arange(n_shards + 1))
        for index in np.flatnonzero(np.diff(bounds)).tolist():
            rows = by_shard[bounds[index]:bounds[index + 1]]
            places = np.ascontiguousarray(places_of_part[rows], dtype=np.int64)
            if workers[shard_workers[index]] in held_by:
                local_parts[index].append((item, rows, places))
            else:
                # First on their worker: the pieces travel while the shards
                # there bin their own rows (_start_shard).
                pieces[index].append(client.submit(_bin_partition, item, rows, places, mapper,
                                                   init_ensemble, pure=False, priority=1))
    shards, stores = [], []
    for index, eras in enumerate(shard_eras):
        worker = workers[shard_workers[index]]
        shard = ShardInfo(worker=worker, eras=eras, key=f"{fit_id}/{index}")
        # Each of the shard's places, its era (``eras`` ascend) and its row
        # in the era-sorted order (``y``'s): the place less its era's shift;
        # made a shard at a time.
        row_era = np.repeat(np.arange(len(eras), dtype=np.int32), era_rows[eras])
        rows_of_shard = np.arange(len(row_era)) - era_shift[eras][row_era]
        # The shard's targets and weights go to its worker once, here;
        # nothing per row crosses the network after loading.
        targets = [client.scatter(np.ascontiguousarray(values[..., rows_of_shard]),
                                  workers=[worker], hash=False)
                   if values is not None else None for values in (y, sample_weight)]
        pinned = dict(workers=[worker], allow_other_workers=False, pure=False)
        n_local, n_threads = len(rows_of_shard), threads[worker]
        started = client.submit(_start_shard, shard.key, local_parts[index], n_local, mapper,
                                init_ensemble, n_threads, **pinned)
        placed = client.submit(_place_pieces, shard.key, pieces[index], n_local,
                               mapper.n_features_in_, mapper.binned_dtype_, n_threads,
                               **pinned)
        stores.append(client.submit(_build_shard, shard.key, started, placed, row_era,
                                    *targets, eras, **pinned))
        shards.append(shard)
    return shards, stores


def _places_in_shards(era_rows, shard_eras) -> tuple:
    """(each era's shard, each era's shift): a shard's rows are its eras' in
    era order, each era's in the local fit's era-sorted order, so a row of
    era ``e`` at place ``p`` of that order (``position``) is at place
    ``p + shift[e]`` of its shard."""
    n_eras = len(era_rows)
    shard_of_era = np.empty(n_eras, dtype=np.int64)
    era_place = np.empty(n_eras, dtype=np.int64)   # each era's first place in its shard
    for index, eras in enumerate(shard_eras):
        shard_of_era[eras] = index
        era_place[eras] = np.cumsum(era_rows[eras]) - era_rows[eras]
    era_offsets = np.cumsum(era_rows) - era_rows
    return shard_of_era, era_place - era_offsets


def _held_rows(workers, holders, scanned, starts, lengths, era_codes, n_eras) -> np.ndarray:
    """(n_workers, n_eras): the rows of each era in the partitions each
    worker holds (``holders``: client.who_has of the scanned partitions; a
    partition held twice counts for both)."""
    column = {worker: k for k, worker in enumerate(workers)}
    held = np.zeros((len(workers), n_eras), dtype=np.int64)
    for item, start, length in zip(scanned, starts, lengths, strict=True):
        rows = np.bincount(era_codes[start:start + length], minlength=n_eras)
        for worker in holders.get(item.key, ()):
            if worker in column:
                held[column[worker]] += rows
    return held


# Era sets are placed instead of contiguous ranges only when they keep more
# rows where they are by this share of all rows: input with every era on
# every worker (shuffled) keeps the ranges.
ERA_SETS_MIN_GAIN = 0.01
# How far above an even share of the rows a shard of era sets may grow to
# keep an era on the worker holding it. Beyond it the era moves: every
# round waits for the largest shard, a move is paid once (at 750k x 400 a
# 5% slack left shards of 52.5% and 47.5% of the rows, whose fit tasks took
# 2.44 and 2.15 CPU seconds in 20 rounds; moving 5% of the rows instead
# costs about one round).
ERA_SETS_SLACK = 0.01


def place_eras(era_rows: np.ndarray, held: np.ndarray) -> tuple[list, list]:
    """The eras of each shard (ascending era codes) and the index of its
    worker. ``held`` (n_workers, n_eras): the rows of each era already on
    each worker. Either contiguous ranges balanced by rows
    (:func:`shard_plan`), each on the worker holding most of it, or, where
    that keeps more rows in place (input partitioned by era: a Parquet data
    set sorted by era, whose partitions Dask spreads over the workers in no
    era order), each era on a worker holding it (:func:`_eras_where_held`).
    The model is the same either way: the shards' eras need not be
    consecutive (packboost._row_shard)."""
    n_workers = held.shape[0]
    ranges = [np.arange(first, end) for first, end in shard_plan(era_rows, n_workers)]
    range_workers = _shard_workers(np.stack([held[:, eras].sum(axis=1) for eras in ranges]))
    sets, set_workers = _eras_where_held(era_rows, held)

    def kept(plan, plan_workers):
        return sum(int(held[worker, eras].sum())
                   for eras, worker in zip(plan, plan_workers, strict=True))

    if kept(sets, set_workers) - kept(ranges, range_workers) > \
            ERA_SETS_MIN_GAIN * int(era_rows.sum()):
        return sets, set_workers
    return ranges, range_workers


def _eras_where_held(era_rows, held) -> tuple[list, list]:
    """Each era on the worker holding most of its rows, while that worker's
    rows stay within ERA_SETS_SLACK of an even share (else on the one
    holding the most among those with room, or the least loaded): the eras
    held most by one worker first, larger first. Returns the non-empty
    shards' eras and workers, in worker order."""
    n_workers, n_eras = held.shape
    cap = (1 + ERA_SETS_SLACK) * int(era_rows.sum()) / max(1, min(n_workers, n_eras))
    load = np.zeros(n_workers, dtype=np.int64)
    owner = np.empty(n_eras, dtype=np.int64)
    workers = np.arange(n_workers)
    for era in np.lexsort((-era_rows, -held.max(axis=0))).tolist():
        rows = int(era_rows[era])
        room = workers[load + rows <= cap]
        candidates = room if len(room) else workers[[int(np.argmin(load))]]
        # the most of the era held; ties to the least loaded, then the first
        best = int(candidates[np.lexsort((candidates, load[candidates],
                                          -held[candidates, era]))[0]])
        owner[era] = best
        load[best] += rows
    shards = [(np.flatnonzero(owner == worker), worker) for worker in range(n_workers)]
    shards = [(eras, worker) for eras, worker in shards if len(eras)]
    return [eras for eras, _ in shards], [worker for _, worker in shards]


def _shard_workers(held: np.ndarray) -> list:
    """The worker of each shard (``held``: (n_shards, n_workers) rows of each
    shard already on each worker): the one holding the most of its rows
    (greedy, the largest first; ties to the earlier worker), each worker one
    shard. Only where the shards live changes, not the model."""
    n_shards, n_workers = held.shape
    chosen, taken = [None] * n_shards, set()
    for flat in np.argsort(-held, axis=None, kind="stable").tolist():
        shard, worker = divmod(flat, n_workers)
        if chosen[shard] is None and worker not in taken:
            chosen[shard] = worker
            taken.add(worker)
    return chosen


def _worker_threads(client, workers, n_jobs) -> dict:
    """Threads of each worker's kernels: ``n_jobs`` as the local estimators
    resolve it, or (None) as many as the worker has."""
    if n_jobs is not None:
        return dict.fromkeys(workers, _resolve_n_jobs(n_jobs))
    info = client.scheduler_info()["workers"]
    return {worker: max(1, int(info.get(worker, {}).get("nthreads", 1))) for worker in workers}


def _wait(client, shards, futures) -> list:
    """Results of the shards' ``futures``; the first real error, or a
    :class:`WorkerLostError` as soon as a shard's worker is gone (its pinned
    tasks would wait forever)."""
    from distributed import wait

    while True:
        pending = [future for future in futures if future.status == "pending"]
        if pending:
            try:
                # distributed.wait asks for the current client: this fit's,
                # which need not be the default one (Client(set_as_default=False)).
                with client.as_current():
                    wait(pending, timeout=POLL_SECONDS, return_when="FIRST_COMPLETED")
            except TimeoutError:
                pass
        failed = [future for future in futures if future.status in ("error", "cancelled")]
        if failed:
            # A worker whose task fails closes its connections: the others
            # then report a lost peer, often before the failing task's own
            # error reaches the client. The failure itself is the error to
            # show: wait a little for it (a worker that died never sends one).
            # (Read before cancelling: cancelling marks a failed future cancelled.)
            errors = _task_errors(futures)
            pending = [future for future in futures if future.status == "pending"]
            if not _causes(errors) and pending:
                _check_workers(client, shards, futures)   # a worker gone: no cause will come
                try:
                    with client.as_current():
                        wait(pending, timeout=CAUSE_SECONDS)
                except TimeoutError:
                    pass
                errors = _task_errors(futures)
            client.cancel(futures)
            cause = _causes(errors)
            if cause:
                raise cause[0]
            _check_workers(client, shards, futures, wait_seconds=5.0)
            why = errors[0] if errors else "its task was cancelled"
            raise WorkerLostError(f"a Dask worker of the fit stopped answering ({why}); "
                                  "the fit was abandoned (no model was kept)")
        if all(future.status == "finished" for future in futures):
            # Fetched with a timeout too: a worker that dies after its task
            # finished takes the result with it (its pinned task then waits
            # for it forever): that is a lost worker too.
            try:
                return [future.result(timeout=RESULT_SECONDS) for future in futures]
            except TimeoutError:
                _check_workers(client, shards, futures, wait_seconds=5.0)
                raise WorkerLostError(
                    f"the results of the fit's tasks did not arrive within {RESULT_SECONDS} s; "
                    "the fit was abandoned (no model was kept)") from None
        _check_workers(client, shards, futures)


def _task_errors(futures) -> list:
    """The errors of the ``futures`` that failed so far."""
    return [future.exception() for future in futures if future.status == "error"]


def _causes(errors) -> list:
    """``errors`` other than a lost peer or worker (what another rank's
    failure makes the others report)."""
    return [error for error in errors
            if not isinstance(error, (PeerLostError, WorkerLostError))]


def _check_workers(client, shards, futures, wait_seconds: float = 0.0) -> None:
    """Raise :class:`WorkerLostError` if a shard's worker left (waiting up
    to ``wait_seconds`` for the scheduler to notice)."""
    deadline = time.monotonic() + wait_seconds
    while True:
        alive = set(client.run_on_scheduler(_worker_addresses))
        lost = [shard for shard in shards if shard.worker not in alive]
        if lost:
            client.cancel(futures)
            eras = ", ".join(shard.describe_eras() for shard in lost)
            raise WorkerLostError(
                f"Dask worker {lost[0].worker} holding training eras {eras} left the cluster "
                "during fit; the fit was abandoned (no model was kept). Restart the fit on "
                "the remaining workers.")
        if time.monotonic() >= deadline:
            return
        time.sleep(0.2)


def _drop_shards(client, shards, after=()) -> list:
    """Free every shard (a few seconds at most: a lost worker has nothing to
    free); returns each shard's fit statistics. ``after``: the loading's
    tasks, let finish first (a fit that fails while they run would otherwise
    free the shards before they are made)."""
    from distributed import wait

    try:
        with client.as_current():
            wait(list(after), timeout=5.0)
    except Exception:  # noqa: BLE001 -- a failed or lost loading has nothing more to make
        pass
    deadline = time.monotonic() + 5.0
    futures = [client.submit(worker_drop, shard.key, workers=[shard.worker], pure=False)
               for shard in shards]
    stats = []
    for future in futures:
        try:
            stats.append(future.result(timeout=max(0.1, deadline - time.monotonic())))
        except Exception:  # noqa: BLE001 -- a lost worker has nothing left to free
            stats.append({})
    return stats


def _distinct_values(scanned, features, max_bins):
    """Per feature of ``features``: its distinct values in this scanned
    partition (binning.distinct_values)."""
    from packboost.binning import distinct_values

    X = scanned[1]
    return [distinct_values(X[:, k], max_bins) for k in features]


def _scan_partition(part, encoder=None):
    """First pass over one partition where it lives: validated as the local
    fit validates X (categorical columns as their codes). Returns (its
    dtype and, for integers, its column minima and maxima: what the bin
    mapper needs) and the validated matrix, kept on the worker for the
    second pass (:func:`_bin_partition`)."""
    X = _checked(part, encoder)
    if X.dtype.kind not in "iu" or X.shape[0] == 0:
        ranges = X.dtype, np.zeros(0, dtype=np.int64), np.zeros(X.shape[1], dtype=np.int64)
    else:
        ranges = X.dtype, X.min(axis=0).astype(np.int64), X.max(axis=0).astype(np.int64)
    return ranges, X


def _bin_partition(scanned, rows, places, mapper, init_ensemble):
    """Second pass over one partition where it lives: its rows ``rows`` of
    one shard on another worker, in the shard's row order, binned. Returns
    (codes of shape (n_features, m), the rows' places in the shard,
    ascending, and ``init_ensemble``'s raw scores of them when continuing
    it, else None). One thread: the partitions are binned in parallel."""
    X = scanned[1]
    codes = mapper.transform(X, row_order=rows, n_threads=1)
    init_raw = (None if init_ensemble is None
                else np.ascontiguousarray(init_ensemble.predict_raw(X[rows], 1)))
    return codes, places, init_raw


def _may_have_categories(X, categorical_features) -> bool:
    """Could the Dask collection ``X`` have categorical features: some are
    named, or a column has the pandas ``category`` dtype?"""
    if categorical_features:
        return True
    dtypes = getattr(X, "dtypes", None)
    return dtypes is not None and hasattr(dtypes, "items") and any(
        type(dtype).__name__ == "CategoricalDtype" for _, dtype in dtypes.items())


def _computed_eval_set(client, eval_set):
    """The eval sets with their Dask collections computed (on ``client``)."""
    if eval_set is None:
        return None
    items = [eval_set] if isinstance(eval_set, tuple) else list(eval_set)
    return [tuple(_compute_on(client, *item)) if isinstance(item, (tuple, list)) else item
            for item in items]


def _fitted_names(view):
    from packboost.sklearn import _FITTED

    return [name for name in _FITTED if name in view]


def _lazy(X, predict, *, n_columns, dtype):
    """``predict`` on every partition / block of the Dask collection ``X``,
    lazily: a Series (or 1-D array) when ``n_columns`` is None, else a
    DataFrame (or 2-D array) of ``n_columns`` columns; pieces keep their
    partition's index. An empty partition (what a filter leaves) gives an
    empty piece: the local estimators refuse zero rows, as scikit-learn's do."""
    def apply(part):
        if len(part) == 0:
            return np.empty((0,) if n_columns is None else (0, n_columns), dtype=dtype)
        return np.asarray(predict(part))

    if hasattr(X, "map_partitions"):
        import pandas as pd

        if n_columns is None:
            return X.map_partitions(lambda part: pd.Series(apply(part), index=part.index),
                                    meta=pd.Series(dtype=dtype))
        return X.map_partitions(
            lambda part: pd.DataFrame(apply(part), index=part.index),
            meta=pd.DataFrame({k: pd.Series(dtype=dtype) for k in range(n_columns)}))
    X = X.rechunk({1: -1})
    if n_columns is None:
        return X.map_blocks(apply, drop_axis=1, dtype=dtype)
    return X.map_blocks(apply, chunks=(X.chunks[0], (n_columns,)), dtype=dtype)


def _lazy_3d(X, predict, tail):
    """``predict`` on every partition / block of ``X`` as a lazy Dask array
    of shape (rows,) + ``tail`` (a DataFrame is taken as its array)."""
    if hasattr(X, "to_dask_array"):
        X = X.to_dask_array(lengths=True)
    X = X.rechunk({1: -1})

    def apply(block):
        if len(block) == 0:
            return np.empty((0,) + tail)
        return np.asarray(predict(block))

    return X.map_blocks(apply, chunks=(X.chunks[0],) + tuple((size,) for size in tail),
                        new_axis=2, dtype=np.float64)


class DaskPackBoostRegressor(_DaskEstimator, PackBoostRegressor):
    """:class:`packboost.PackBoostRegressor` trained on a Dask cluster.

    Same parameters; ``fit(X, y, era=...)`` takes Dask DataFrames / Arrays
    (``era``: a column name of ``X`` or a Dask Series / Array), ``predict``
    returns a lazy Dask collection for Dask input. The model equals the local
    fit's bit for bit (docs/distributed.md); ``to_local()`` returns it as a
    plain :class:`~packboost.PackBoostRegressor`.

    ``n_jobs`` is the threads of each worker's kernels (None: as many as the
    worker has). The fit is one task per worker; the callbacks run on the
    worker holding the first eras, and a callable objective on every worker
    over its own rows.
    """

    _local_class = PackBoostRegressor


class DaskPackBoostClassifier(_DaskEstimator, PackBoostClassifier):
    """:class:`packboost.PackBoostClassifier` trained on a Dask cluster; see
    :class:`DaskPackBoostRegressor`. ``predict_proba`` is lazy for Dask input."""

    _local_class = PackBoostClassifier

    def predict_proba(self, X, iteration_range=None):
        if _is_dask(X):
            local = self.to_local()
            return _lazy(X, lambda part: local.predict_proba(part, iteration_range),
                         n_columns=len(local.classes_), dtype=np.float64)
        return super().predict_proba(X, iteration_range)

    @staticmethod
    def _prediction_dtype(local):
        return local.classes_.dtype

    @staticmethod
    def _prediction_columns(local):
        return None   # one label a row, however many classes
