"""Distributed training on Dask: :class:`DaskPackBoostRegressor` and
:class:`DaskPackBoostClassifier` (docs/distributed.md).

The estimators take Dask DataFrames / Arrays and have exactly the local
estimators' parameters (they subclass them). ``fit`` moves every era whole to
one worker -- contiguous ranges of eras, balanced by rows, whatever the input
partitioning -- bins each worker's rows there, and runs the one driver
(:func:`packboost.booster.train`) on the client over a
:class:`packboost.backends.dask.DaskBackend`. The model is bit for bit the
local fit's with the same parameters and seed, and is an ordinary PackBoost
model (``to_local()``, same model files).

What stays on the client: the 1-D per-row vectors of the driver (``y``,
``sample_weight``, era codes, the raw predictions and gradients) and the
eval sets. What stays on the workers: the feature matrix (rows x features).
"""

from __future__ import annotations

import uuid

import numpy as np

from packboost import _categories, _constraints, _validation
from packboost.backends.dask import (
    DaskBackend,
    ShardInfo,
    WorkerLostError,
    _Shard,
    _worker_addresses,
    worker_store,
)
from packboost.binning import BinMapper
from packboost.booster import train
from packboost.grower import TrainingData
from packboost.objectives import get_objective, make_objective
from packboost.sklearn import (
    PackBoostClassifier,
    PackBoostRegressor,
    _fitted_state,
    _resolve_n_jobs,
)

__all__ = ["DaskPackBoostRegressor", "DaskPackBoostClassifier", "WorkerLostError"]


class _RemoteTrainingData(TrainingData):
    """TrainingData whose binned matrix lives on the workers: the driver reads
    only its shape, eras, bins and cuts."""

    def __init__(self, n_features, n_rows, **fields):
        super().__init__(X_binned=None, **fields)
        self._shape = (n_features, n_rows)

    @property
    def n_features(self) -> int:
        return self._shape[0]

    @property
    def n_rows(self) -> int:
        return self._shape[1]


def _is_dask(value) -> bool:
    return hasattr(value, "__dask_graph__") and value.__dask_graph__() is not None


def _compute(value):
    """A Dask collection as NumPy (pandas for a frame); anything else as is."""
    if value is None or not _is_dask(value):
        return value
    return value.compute()


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


def _select_rows(part, index):
    """Rows ``index`` of one input partition, validated as the local fit would."""
    X, _ = _validation.check_X(part)
    return np.ascontiguousarray(X[index])


def _build_shard(key, pieces, n_local, n_features, dtype, mapper, row_era, shard_args):
    """Worker side: assemble the shard's rows in era-sorted order, bin, store."""
    X = np.empty((n_local, n_features), dtype=dtype)
    for rows, position in pieces:
        X[position] = rows
    X_binned = mapper.transform(X, n_threads=shard_args["n_threads"])
    return worker_store(key, _Shard(X_binned=X_binned, row_era=row_era, **shard_args))


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
        if init_model is not None:
            raise NotImplementedError(f"{type(self).__name__}.fit does not take init_model yet; "
                                      "continue a model with the local estimator (to_local())")
        params = self._validated_params()
        _validation.warn_unusual_params(params)
        _categories.refuse_distributed(X, params["categorical_features"], type(self).__name__)
        if params["device"] != "cpu":
            raise ValueError(f"device must be 'cpu' for {type(self).__name__} (the workers "
                             f"run the CPU kernels), got {params['device']!r}")
        if params["era_weighting"] != "equal":
            # Count weights enter the threshold scan as float sums of w_e * G_e
            # in (bin, era) order, which no per-worker partial reproduces
            # bit for bit (docs/distributed.md §3).
            raise NotImplementedError(
                f"{type(self).__name__} supports era_weighting='equal' only, got "
                f"{params['era_weighting']!r}")
        if params["objective"] == "quantile":
            # Quantile leaves are refitted on the driver's binned matrix
            # (packboost._leaf_refit), which here lives on the workers.
            raise NotImplementedError(
                f"{type(self).__name__} does not support objective='quantile' (its leaves "
                "are refitted to residual quantiles on the binned data, which the Dask "
                "backend keeps on the workers); fit PackBoostRegressor on one machine")
        n_threads = _resolve_n_jobs(self.n_jobs)
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
            lengths = np.asarray(X.map_partitions(len).compute(), dtype=np.int64)
            feature_names = np.asarray([str(name) for name in X.columns], dtype=object)
            n_features = len(X.columns)
        else:
            X = X.rechunk({1: -1})
            if any(np.isnan(size) for size in X.chunks[0]):
                X = X.compute_chunk_sizes()
            parts = list(X.to_delayed().ravel())
            lengths = np.asarray(X.chunks[0], dtype=np.int64)
            n_features = X.shape[1]
        params = _constraints.resolve_for_fit(params, n_features, feature_names,
                                              distributed=True)
        n_rows = int(lengths.sum())
        starts = np.concatenate([[0], np.cumsum(lengths)])

        y, era, sample_weight = (_compute(y), _compute(era), _compute(sample_weight))
        y, target = self._learn_target(y, n_rows, None)
        n_outputs = self._n_outputs(y, target)
        if n_outputs > 1:
            raise NotImplementedError(
                f"{type(self).__name__} trains one output; y has "
                f"{self._outputs_description(n_outputs)}: fit the local estimator "
                f"({self._local_class.__name__}) for several targets or classes")
        sample_weight = _validation.check_sample_weight(sample_weight, n_rows)
        _validation.check_gradient_scale(y, sample_weight)
        era_codes, _ = _validation.encode_eras(era, n_rows)
        n_eras = int(era_codes.max()) + 1

        # The rows of the local fit, in its order: sorted by era, stable.
        order = np.argsort(era_codes, kind="stable")
        position = np.empty(n_rows, dtype=np.int64)
        position[order] = np.arange(n_rows)
        era_rows = np.bincount(era_codes, minlength=n_eras)
        workers = sorted(client.run_on_scheduler(_worker_addresses))
        if not workers:
            raise RuntimeError("the Dask cluster has no workers")
        plan = shard_plan(era_rows, len(workers))
        era_offsets = np.concatenate([[0], np.cumsum(era_rows)])
        shard_of_era = np.repeat(np.arange(len(plan)), [end - first for first, end in plan])
        shard_of_row = shard_of_era[era_codes]

        part_futures = client.compute(parts)
        # One validating pass over the partitions: dtype and integer column ranges.
        ranges = client.gather([client.submit(_column_range, part, pure=False)
                                for part in part_futures])
        mapper = self._fit_mapper(ranges, client, n_rows, params, part_futures)
        dtype = np.result_type(*[dtype for dtype, _, _ in ranges])

        fit_id = uuid.uuid4().hex
        shards, stores = [], []
        for index, (first_era, end_era) in enumerate(plan):
            first_row, end_row = int(era_offsets[first_era]), int(era_offsets[end_era])
            pieces = []
            for part, start, end in zip(part_futures, starts[:-1], starts[1:], strict=True):
                local = np.flatnonzero(shard_of_row[start:end] == index)
                if len(local):
                    rows = client.submit(_select_rows, part, local, pure=False)
                    pieces.append((rows, position[start + local] - first_row))
            shard = ShardInfo(worker=workers[index], first_row=first_row, end_row=end_row,
                              first_era=first_era, end_era=end_era, key=f"{fit_id}/{index}")
            shard_args = dict(n_eras=end_era - first_era, n_bins=mapper.n_bins_,
                              first_row=first_row, total_rows=n_rows,
                              pack_size=params["pack_size"], n_threads=n_threads)
            row_era = np.ascontiguousarray(era_codes[order[first_row:end_row]] - first_era,
                                           dtype=np.int32)
            stores.append(client.submit(_build_shard, shard.key, pieces, end_row - first_row,
                                        n_features, dtype, mapper, row_era, shard_args,
                                        workers=[shard.worker], allow_other_workers=False,
                                        pure=False))
            shards.append(shard)
        y = y[order]
        sample_weight = sample_weight[order] if sample_weight is not None else None
        data = _RemoteTrainingData(n_features, n_rows, n_bins=mapper.n_bins_,
                                   row_era=np.ascontiguousarray(era_codes[order], dtype=np.int32),
                                   n_eras=n_eras, cuts=mapper.cuts_)

        eval_set = _computed_eval_set(eval_set)
        eval_sets = self._prepare_eval_sets(eval_set, eval_names, n_features, feature_names,
                                            target)
        metrics = self._resolve_metrics(eval_metric, eval_sets, params)
        callback_list = self._build_callbacks(callbacks, early_stopping_rounds, progress)
        objective = make_objective(
            params["objective"], alpha=params["alpha"],
            link=get_objective(self._objective_name).transform,
            row_order=None if np.array_equal(order, np.arange(n_rows)) else order)
        backend = DaskBackend(client, fit_id, shards, data, params["pack_size"])
        try:
            backend._gather(stores)
            ensemble, info = train(data, y, sample_weight, objective, params, n_threads,
                                   eval_sets=eval_sets, metrics=metrics,
                                   callbacks=callback_list, init=None, model=self,
                                   backend=backend)
        finally:
            backend.close()
        # Diagnostics of the last fit (benchmarks/bench_dask.py), not model state.
        self.bytes_log_ = backend.bytes_log
        self.worker_cpu_seconds_ = backend.worker_cpu_seconds
        return _fitted_state(target, ensemble, mapper, n_features, n_eras, info,
                             feature_names, era_column)

    @staticmethod
    def _fit_mapper(ranges, client, n_rows, params, part_futures):
        """The local fit's BinMapper, exactly: pre-binned integer codes from the
        global column ranges; otherwise fitted on the gathered rows (data up to
        the mapper's subsample only)."""
        mapper = BinMapper(max_bins=params["max_bins"], random_state=params["random_state"])
        kinds = {dtype.kind for dtype, _, _ in ranges}
        if kinds <= set("iu"):
            low = min(int(r[1].min()) if r[1].size else 0 for r in ranges)
            high = np.max(np.stack([r[2] for r in ranges]), axis=0)
            if low >= 0 and (high.size == 0 or int(high.max()) < params["max_bins"]):
                # Two rows with the global column maxima: BinMapper's own
                # pre-binned rule sees the ranges the whole X has.
                return mapper.fit(np.stack([np.zeros_like(high), high]).astype(np.int64))
        if n_rows > mapper.subsample:
            raise NotImplementedError(
                f"Dask fits of raw (not pre-binned) features are limited to "
                f"{mapper.subsample} rows for now; bin the features first (integer codes in "
                f"[0, max_bins), as Numerai's int8 data already is)")
        X_all = np.concatenate([_validation.check_X(part)[0]
                                for part in client.gather(part_futures)])
        return mapper.fit(X_all)

    def predict(self, X, iteration_range=None, **kwargs):
        if _is_dask(X):
            return _lazy(self.to_local(), "predict", X, iteration_range, **kwargs)
        return super().predict(X, iteration_range, **kwargs)


def _column_range(part):
    """One partition validated as the local fit validates X: its dtype and,
    for integers, its column minima and maxima."""
    X, _ = _validation.check_X(part)
    if X.dtype.kind not in "iu" or X.shape[0] == 0:
        return X.dtype, np.zeros(0, dtype=np.int64), np.zeros(X.shape[1], dtype=np.int64)
    return X.dtype, X.min(axis=0).astype(np.int64), X.max(axis=0).astype(np.int64)


def _computed_eval_set(eval_set):
    if eval_set is None:
        return None
    items = [eval_set] if isinstance(eval_set, tuple) else list(eval_set)
    return [tuple(_compute(value) for value in item) if isinstance(item, (tuple, list))
            else item for item in items]


def _fitted_names(view):
    from packboost.sklearn import _FITTED

    return [name for name in _FITTED if name in view]


def _lazy(local, method, X, iteration_range, columns=None, **kwargs):
    """``local.method`` on every partition / block of ``X``, lazily."""
    def apply(part):
        return getattr(local, method)(part, iteration_range, **kwargs)

    if hasattr(X, "map_partitions"):
        if columns:
            import pandas as pd

            return X.map_partitions(
                lambda part: pd.DataFrame(apply(part), index=part.index),
                meta=pd.DataFrame({k: pd.Series(dtype="f8") for k in range(columns)}))
        return X.map_partitions(apply, meta=(None, "f8" if method != "predict_labels"
                                             else "O"))
    X = X.rechunk({1: -1})
    if columns:
        return X.map_blocks(apply, chunks=(X.chunks[0], (columns,)), dtype=np.float64)
    return X.map_blocks(apply, drop_axis=1, dtype=np.float64)


class DaskPackBoostRegressor(_DaskEstimator, PackBoostRegressor):
    """:class:`packboost.PackBoostRegressor` trained on a Dask cluster.

    Same parameters; ``fit(X, y, era=...)`` takes Dask DataFrames / Arrays
    (``era``: a column name of ``X`` or a Dask Series / Array), ``predict``
    returns a lazy Dask collection for Dask input. The model equals the local
    fit's bit for bit (docs/distributed.md); ``to_local()`` returns it as a
    plain :class:`~packboost.PackBoostRegressor`.
    """

    _local_class = PackBoostRegressor


class DaskPackBoostClassifier(_DaskEstimator, PackBoostClassifier):
    """:class:`packboost.PackBoostClassifier` trained on a Dask cluster; see
    :class:`DaskPackBoostRegressor`. ``predict_proba`` is lazy for Dask input."""

    _local_class = PackBoostClassifier

    def predict_proba(self, X, iteration_range=None):
        if _is_dask(X):
            return _lazy(self.to_local(), "predict_proba", X, iteration_range, columns=2)
        return super().predict_proba(X, iteration_range)

    def predict(self, X, iteration_range=None, **kwargs):
        if _is_dask(X):
            local = self.to_local()
            if hasattr(X, "map_partitions"):
                return X.map_partitions(lambda part: local.predict(part, iteration_range),
                                        meta=(None, local.classes_.dtype))
            return X.rechunk({1: -1}).map_blocks(
                lambda block: local.predict(block, iteration_range), drop_axis=1,
                dtype=local.classes_.dtype)
        return PackBoostClassifier.predict(self, X, iteration_range, **kwargs)
