#!/usr/bin/env python
"""Compare Dask fits with local fits on random problems, for a bounded time.

The invariant (docs/distributed.md): a Dask fit grows the local fit's model,
bit for bit, whatever the data, the parameters and how the rows are cut into
partitions; where the local fit raises, the Dask fit raises the same type of
error. Each trial draws

* data: 1-11 eras of 0-119 rows (``--max-era-rows``; one at least
  non-empty), 1-8 features, binned codes or raw floats with NaN and ties,
  ties in the target, weights, several targets with NaN, a categorical
  column, rows in era order or shuffled, partitions of 1 row up to all rows;
* parameters: from the DES terms, era weighting and sampling to the
  objective, regularisation, monotone constraints and bins;
* the estimator: a regressor, or a classifier of two or three classes;
* extras: an eval set (with or without eras) and early stopping, or
  continued training from a local model (``init_model``);
* the input: Dask arrays, or a Dask DataFrame with the eras in a column;
  the Dask model also predicts lazily on a Dask array.

A trial whose predictions, eval results or best iteration differ, or whose
errors differ in type, is printed with what reproduces it (the seed and the
trial number) and counted; the run exits 1 after the time limit if any was
found. Trials on which both fits raise the same type of error are counted
(bad combinations drawn on purpose: a monotone direction on a categorical
feature).

Usage::

    python ci/fuzz_dask.py --seconds 300 --seed 1 --workers 2
    python ci/fuzz_dask.py --seconds 300 --seed 1 --workers 1 --threads 2
    python ci/fuzz_dask.py --seconds 300 --seed 1 --max-era-rows 3000
    python ci/fuzz_dask.py --seed 1 --replay 17     # trial 17 of seed 1 alone

Found with it (2026-11-29): multiclass classifiers failed when the shards
held different numbers of rows, and a fit task's own error was reported as
an IndexError.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings

import numpy as np

CHOICES = {
    "lambda_dir": [0.0, 0.2, 0.5], "lambda_dro": [0.0, 0.3, 1.0],
    "era_gain": ["realized", "newton"], "era_std": ["between", "total"],
    "era_weighting": ["equal", "count"], "era_subsample": [1.0, 0.5, 0.8],
    "row_subsample": [1.0, 0.7], "layer_feature_fraction": [1.0, 0.5, 0.2],
    "tree_feature_fraction": [1.0, 0.6], "feature_sampling": ["depth", "pack"],
    "reg_alpha": [0.0, 0.5], "reg_lambda": [0.0, 1.0, 5.0],
    "min_child_weight": [0.0, 1.0, 20.0], "min_split_gain": [0.0, 0.01],
    "max_delta_step": [0.0, 0.5], "learning_rate": [0.1, 0.5],
    "objective": ["squared_error", "squared_error", "huber", "quantile"],
    "max_bins": [5, 16, 255], "dir_tanh_scale": [0.0, 1.0],
}


def draw_parameters(rng, threads=1) -> dict:
    params = dict(n_estimators=int(rng.integers(1, 5)), max_depth=int(rng.integers(1, 6)),
                  pack_size=int(rng.choice([1, 2, 3, 4, 8])),
                  random_state=int(rng.integers(0, 100)), n_jobs=threads,
                  min_samples_leaf=int(rng.choice([1, 2, 10, 50])))
    for name, values in CHOICES.items():
        if rng.random() < 0.5:
            params[name] = values[int(rng.integers(len(values)))]
    return params


def draw_data(rng, max_era_rows=120):
    """(X, y, era, sample_weight or None) of a random problem."""
    n_eras, n_features = int(rng.integers(1, 12)), int(rng.integers(1, 9))
    sizes = rng.integers(0, max_era_rows, n_eras)
    sizes[int(rng.integers(n_eras))] = max(1, sizes.max())
    era = np.repeat(np.arange(n_eras), sizes)
    n = len(era)
    if rng.random() < 0.5:
        X = rng.normal(size=(n, n_features))
        X[rng.random(X.shape) < 0.1] = np.nan
        if rng.random() < 0.3:
            X[:, 0] = np.round(X[:, 0])
    else:
        X = rng.integers(0, 5, size=(n, n_features)).astype(np.float64)
    y = np.nan_to_num(X[:, 0]) * 0.1 + rng.normal(size=n) * 0.5
    if rng.random() < 0.3:
        y = np.round(y * 4) / 4
    if rng.random() < 0.3:
        y = np.stack([y + rng.normal(size=n) * 0.1 * k for k in range(int(rng.integers(2, 4)))],
                     axis=1)
        y[rng.random(y.shape) < 0.15] = np.nan
    weight = rng.uniform(0.2, 3, n) if rng.random() < 0.3 else None
    order = rng.permutation(n) if rng.random() < 0.5 else np.arange(n)
    return X[order], y[order], era[order], (None if weight is None else weight[order])


def draw_trial(rng, threads=1, max_era_rows=120) -> dict:
    """Everything one comparison needs, drawn from ``rng`` (``threads``:
    both fits' ``n_jobs``, a worker's threads)."""
    params = draw_parameters(rng, threads)
    X, y, era, weight = draw_data(rng, max_era_rows)
    chunk = int(rng.integers(1, max(2, len(y)) + 1))
    if rng.random() < 0.2 and X.shape[1] > 1:
        params["categorical_features"] = [X.shape[1] - 1]
        X[:, -1] = np.abs(np.nan_to_num(np.round(X[:, -1] * 3)))
    if rng.random() < 0.15 and X.shape[1] >= 2:
        params["monotone_constraints"] = [int(v) for v in rng.integers(-1, 2, X.shape[1])]
    classify = rng.random() < 0.3 and y.ndim == 1
    if classify:
        params.pop("objective", None)
        y = np.digitize(y, np.quantile(y, [0.5] if rng.random() < 0.5 else [0.3, 0.7]))
    fit_extra = {}
    if rng.random() < 0.3 and len(y) > 3:
        eval_rows = (X[::3], y[::3], era[::3])
        fit_extra["eval_set"] = [eval_rows if rng.random() < 0.5 else eval_rows[:2]]
        if rng.random() < 0.5:
            fit_extra["early_stopping_rounds"] = 1
        params["n_estimators"] += 3
    continued = rng.random() < 0.2 and not classify
    as_frame = rng.random() < 0.3
    return dict(params=params, X=X, y=y, era=era, weight=weight, chunk=chunk,
                classify=classify, fit_extra=fit_extra, continued=continued, as_frame=as_frame)


def _dask_inputs(trial):
    """The trial's (X, y, era, weight) as Dask collections cut into
    ``chunk``-row partitions: arrays, or (``as_frame``) a DataFrame with the
    eras in a column named by ``era`` (a one-target y as a Series)."""
    import dask.array as da

    X, y, era, weight, chunk = (trial[name] for name in ("X", "y", "era", "weight", "chunk"))
    if trial["as_frame"] and y.ndim == 1:
        import dask.dataframe as dd
        import pandas as pd

        frame = pd.DataFrame(X, columns=[f"f{k}" for k in range(X.shape[1])])
        frame["era"] = era
        n_partitions = max(1, -(-len(y) // chunk))
        return (dd.from_pandas(frame, npartitions=n_partitions),
                dd.from_pandas(pd.Series(y), npartitions=n_partitions), "era",
                None if weight is None else dd.from_pandas(pd.Series(weight),
                                                           npartitions=n_partitions))
    return (da.from_array(X, chunks=(chunk, -1)),
            da.from_array(y, chunks=(chunk, -1) if y.ndim == 2 else chunk),
            da.from_array(era, chunks=chunk),
            None if weight is None else da.from_array(weight, chunks=chunk))


def _fit(estimator, trial, extra, on_dask=False):
    """Fit ``estimator`` on the trial's rows (as Dask collections when
    ``on_dask``) with the fit's ``extra`` arguments; (estimator, None) or
    (None, error)."""
    X, y, era, weight = trial["X"], trial["y"], trial["era"], trial["weight"]
    try:
        if on_dask:
            X, y, era, weight = _dask_inputs(trial)
        return estimator.fit(X, y, era=era, sample_weight=weight, **extra), None
    except Exception as error:   # noqa: BLE001 -- a fit's error is an outcome to compare
        return None, error


def _same_evals(a: dict, b: dict) -> bool:
    """Eval results equal, NaN equal to NaN (a constant prediction's correlation)."""
    return a.keys() == b.keys() and all(
        a[name].keys() == b[name].keys()
        and all(np.array_equal(np.asarray(a[name][metric], dtype=float),
                               np.asarray(b[name][metric], dtype=float), equal_nan=True)
                for metric in a[name])
        for name in a)


def compare(trial, client) -> tuple[str | None, bool]:
    """(None if the Dask fit is the local fit or both raise the same type,
    else what differs; whether they raised). Raises nothing."""
    import dask.array as da

    from packboost import PackBoostClassifier, PackBoostRegressor
    from packboost.dask import DaskPackBoostClassifier, DaskPackBoostRegressor

    local_type, dask_type = ((PackBoostClassifier, DaskPackBoostClassifier) if trial["classify"]
                             else (PackBoostRegressor, DaskPackBoostRegressor))
    extra = dict(trial["fit_extra"])
    if trial["continued"]:
        # One local model both fits continue from; where it fails, both would.
        first = PackBoostRegressor(**dict(trial["params"], n_estimators=2))
        first, error = _fit(first, trial, {})
        if error is not None:
            return None, True
        extra["init_model"] = first
    local, local_error = _fit(local_type(**trial["params"]), trial, extra)
    model = dask_type(**trial["params"])
    model.client = client
    model, dask_error = _fit(model, trial, extra, on_dask=True)
    if local_error is not None or dask_error is not None:
        if type(local_error) is type(dask_error):
            return None, True
        return f"errors differ: local {local_error!r} / Dask {dask_error!r}", True
    X = trial["X"]
    predict = "predict_proba" if trial["classify"] else "predict"
    expected = getattr(local, predict)(X)
    if not np.array_equal(expected, getattr(model.to_local(), predict)(X), equal_nan=True):
        return "predictions differ", False
    lazy = getattr(model, predict)(da.from_array(X, chunks=(trial["chunk"], -1)))
    if not np.array_equal(expected, np.asarray(lazy.compute()), equal_nan=True):
        return "predictions on a Dask array differ", False
    if trial["fit_extra"] and (local.best_iteration_ != model.best_iteration_
                               or not _same_evals(local.evals_result_, model.evals_result_)):
        return "eval results differ", False
    return None, False


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=120.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1,
                        help="each worker's threads and both fits' n_jobs")
    parser.add_argument("--max-era-rows", type=int, default=120,
                        help="eras of 0 to this many rows, less one")
    parser.add_argument("--replay", type=int, default=None, metavar="TRIAL",
                        help="run trial TRIAL of --seed alone, and print it")
    args = parser.parse_args()
    import distributed

    warnings.simplefilter("ignore")
    rng = np.random.default_rng(args.seed)
    findings = trials = both_raised = 0
    with distributed.LocalCluster(n_workers=args.workers, threads_per_worker=args.threads,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        end = time.monotonic() + args.seconds
        while args.replay is not None or time.monotonic() < end:
            trial = draw_trial(rng, args.threads, args.max_era_rows)
            if args.replay is not None and trials < args.replay:
                trials += 1
                continue
            difference, raised = compare(trial, client)
            both_raised += raised and difference is None
            if difference is not None:
                findings += 1
                print(f"FINDING seed {args.seed} trial {trials}: {difference}; "
                      f"params {trial['params']}, X {trial['X'].shape}, "
                      f"eras {len(np.unique(trial['era']))}, chunk {trial['chunk']}, "
                      f"classify {trial['classify']}, weights {trial['weight'] is not None}, "
                      f"fit {sorted(trial['fit_extra'])}, continued {trial['continued']}, "
                      f"DataFrame {trial['as_frame']}",
                      flush=True)
            trials += 1
            if args.replay is not None:
                print(f"trial {args.replay}: {difference or 'the local fit'}")
                break
    print(f"{trials} trials ({both_raised} where both fits raised the same error), "
          f"{findings} findings")
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
