"""A Dask shard's own work against the local fit of the same eras, in one process.

    python benchmarks/bench_shard.py --sizes small --rounds 20 --pairs 8

What a Dask worker computes in a round (docs/distributed.md §3, "What a
shard's round costs"), without the cluster: the rows of the first half of
the training eras (bench_dask.py's data, ``--layout by-era``) fitted by the
local :class:`packboost.PackBoostRegressor` once through its
:class:`~packboost.backends.cpu.CpuBackend` and once through a
:class:`~packboost.backends.dask.ShardBackend` whose collective has one rank
(every exchange returns this shard's own numbers, so the shard's model is
the local fit's: checked). Both on ``--threads`` threads (a worker's
``threads_per_worker``; default 1), alternating ``--pairs`` times in this
process, after one fit of each to warm up. Reports, per round after the
first (a training callback notes when each round ends: the binning and the
first round are left out, as bench_dask.py's ``ratio_per_round``), the
minimum and median of each of CPU time (this thread's on one thread, the
process's on several) and wall time, their ratios, and each kernel's
minimum time a round over the whole fit (CPU on one thread, wall on
several): where the shard's pipeline (its cells-only histogram pass, the
pooled sums, the candidates' enumeration and era pass, the best-first
rounds' Python) costs more than the local fit's one pass. On a shared host
the minimum is the steadier number; the medians show the spread.

This is deliverable 1 of the Dask design ("a shard's per-depth work costs
what the same eras cost locally"), apart from what two processes on one
machine and the exchanges add (``bench_dask.py`` measures those, and its
``--floor`` the two processes alone).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import subprocess
import time
from unittest import mock

import numpy as np
from bench_dask import SIZES, benchmark_data, round_clock, seconds_per_round

# The kernels whose CPU time is reported (module, name).
KERNELS = (("_split", "find_best_splits"), ("_partition", "route_rows"),
           ("_distributed", "candidate_pass"), ("_distributed", "enumerate_candidates"),
           ("_distributed", "rank_in_slot"), ("_distributed", "era_rows_from_cells"),
           ("_distributed", "pooled_from_cells"), ("_distributed", "tile_table"),
           ("_distributed", "era_row_stats"))


def half_of_the_eras(size):
    """bench_dask.py's training rows of ``size`` (era-sorted), those of the
    first half of the eras: what one of two shards holds."""
    X, y, era, _ = benchmark_data(size, "by-era")
    kept = era < np.median(np.unique(era))
    return X[kept], y[kept], era[kept]


@contextlib.contextmanager
def kernel_clock(seconds: dict, clock=time.thread_time):
    """Adds each KERNELS function's seconds on ``clock`` to ``seconds[name]``
    while the context is open (profile_fit.py's wrapper)."""
    import importlib

    from profile_fit import timed

    with contextlib.ExitStack() as stack:
        for module_name, name in KERNELS:
            module = importlib.import_module(f"packboost.{module_name}")
            stack.enter_context(mock.patch.object(
                module, name, timed(name, getattr(module, name), seconds, clock)))
        yield


def _shard_backend(device, data, pack_size, n_threads):
    """open_backend's stand-in: a ShardBackend whose collective is this rank alone."""
    from packboost._collective import Collective
    from packboost.backends.dask import ShardBackend

    return contextlib.closing(ShardBackend(data, pack_size, n_threads, Collective(0, {})))


def timed_fit(rows, params, pipeline, kernels=None):
    """One fit through ``pipeline`` ("local" or "shard"): (CPU seconds and
    wall seconds a round after the first, held-in predictions of the first
    2,000 rows). The CPU clock is this thread's with one thread
    (``params["n_jobs"]``), the process's with several; ``kernels`` gets
    each kernel's seconds in the whole fit on it (wall with several)."""
    from packboost import PackBoostRegressor, backends

    X, y, era = rows
    one_thread = params["n_jobs"] == 1
    cpu_clock = time.thread_time if one_thread else time.process_time
    rounds = round_clock(cpu_clock)
    with contextlib.ExitStack() as stack:
        if pipeline == "shard":
            stack.enter_context(mock.patch.object(backends, "open_backend", _shard_backend))
        if kernels is not None:
            stack.enter_context(kernel_clock(
                kernels, time.thread_time if one_thread else time.perf_counter))
        model = PackBoostRegressor(**params).fit(X, y, era=era, callbacks=[rounds])
    return (seconds_per_round(rounds.cpu_ends), seconds_per_round(rounds.ends),
            model.predict(X[:2000]))


def run(size, rounds, pairs, pack_size, max_depth, feature_fraction, threads=1):
    if rounds < 2:
        raise ValueError(f"rounds must be at least 2 (the first is not timed), got {rounds}")
    rows = half_of_the_eras(size)
    params = dict(n_estimators=rounds, pack_size=pack_size, max_depth=max_depth,
                  layer_feature_fraction=feature_fraction, random_state=0, n_jobs=threads)
    pipelines = ("local", "shard")
    times = {name: [] for name in pipelines}
    kernels = {name: [] for name in pipelines}
    predictions = {}
    for pair in range(pairs + 1):
        for name in pipelines:
            seconds = {}
            cpu, wall, predictions[name] = timed_fit(rows, params, name, seconds)
            if pair:   # the first pair warms up
                times[name].append((cpu, wall))
                kernels[name].append(seconds)
    result = {"size": size, "rows": len(rows[1]), "eras": len(np.unique(rows[2])),
              "rounds": rounds, "pairs": pairs, "params": params,
              "same_predictions": bool(np.array_equal(predictions["local"],
                                                      predictions["shard"]))}
    for name in pipelines:
        values = np.array(times[name])
        result[name] = {
            "cpu_round_s_min": float(values[:, 0].min()),
            "cpu_round_s_median": float(np.median(values[:, 0])),
            "wall_round_s_min": float(values[:, 1].min()),
            "wall_round_s_median": float(np.median(values[:, 1])),
            "kernel_round_s_min": {
                kernel: float(min(run.get(kernel, 0.0) for run in kernels[name]) / rounds)
                for kernel in sorted({k for run in kernels[name] for k in run})}}
    for statistic in ("min", "median"):
        for clock in ("cpu", "wall"):
            result[f"ratio_{clock}_{statistic}"] = (
                result["shard"][f"{clock}_round_s_{statistic}"]
                / result["local"][f"{clock}_round_s_{statistic}"])
    return result


def machine_stamp():
    """When and where: the date, the commit (``+``: src changed since) and the
    CPU with its cores, as readme_outputs.py stamps the README's timings."""
    from readme_outputs import commit, hardware

    try:
        head = commit()
    except (OSError, subprocess.CalledProcessError):
        head = None
    return {"date": time.strftime("%Y-%m-%d"), "commit": head, "cpu": hardware()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", choices=SIZES, nargs="+", default=["small"])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--pairs", type=int, default=8)
    parser.add_argument("--pack-size", type=int, default=4)
    parser.add_argument("--max-depth", type=int, default=6)
    parser.add_argument("--feature-fraction", type=float, default=0.1)
    parser.add_argument("--threads", type=int, default=1,
                        help="threads of both fits (a Dask worker's threads_per_worker)")
    args = parser.parse_args()
    results = [run(size, args.rounds, args.pairs, args.pack_size, args.max_depth,
                   args.feature_fraction, args.threads) for size in args.sizes]
    print(json.dumps({"machine": machine_stamp(), "results": results}, indent=1))


if __name__ == "__main__":
    main()
