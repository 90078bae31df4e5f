"""Where the ranks of a Dask fit wait for each other, and whether a second fit
of the same model waits at the same places.

    python benchmarks/bench_rank_balance.py --size medium --rounds 10 --fits 4

The ranks of a Dask fit meet at every exchange (docs/distributed.md §2): one
that arrives first waits for the others. Its wait has one of two causes.
The work: one shard's eras cost more than another's between two exchanges,
and then they do so in every fit of the same model (the same seed draws the
same samples, so every fit does the same work in the same order). Or the
machine: a core that ran slower for a while (another process on it, or on
the host under a virtual machine), which no two fits share.

This fits the same model ``--fits`` times on a ``LocalCluster`` of
``--workers`` workers of ``--threads-per-worker`` threads (after a first fit
of one round, which imports packboost on the workers) and notes, on each
rank, the CPU time (the fit thread's with one thread, the worker process's
with several) and the wall time of the work between consecutive exchanges.
Reports, per fit: a round's seconds, each rank's seconds waiting, the
imbalance (the sum over the intervals between exchanges of the slowest
rank's time minus the fastest's, in wall and in CPU time) and each rank's
wall time between exchanges that was not its CPU time (with one thread: it
was runnable but not running; waiting inside an exchange is not counted). Across fits: the
correlation, between two fits, of each interval's CPU time per rank less the
interval's mean over the ranks (``work_correlation``: near 1 when the work
sets who waits, near 0 when the machine does), and the CPU imbalance of the
fits' mean intervals against the fits' own (averaging fits keeps what the
work makes and thins what the machine makes).
"""

from __future__ import annotations

import argparse
import itertools
import json
import time

import numpy as np
from bench_dask import SIZES, benchmark_data, persisted_input, seconds_per_round
from bench_shard import machine_stamp

# A collective call's notes: (CPU, wall, seconds waited) at its start, then at its end.
CPU_START, WALL_START, WAITED_START, CPU_END, WALL_END, WAITED_END = range(6)


def _install_trace(process_clock: bool) -> None:
    """On a worker: every outermost collective call of a fit noted
    (CPU_START..WAITED_END), each fit's notes kept with its rank until
    :func:`_take_traces`."""
    from packboost import _collective
    from packboost.backends import dask as backend

    if getattr(backend.worker_train, "traced", False):
        return
    clock = time.process_time if process_clock else time.thread_time
    calls, fits, inside = [], [], [False]

    def traced(method):
        def call(self, *args, **kwargs):
            if inside[0]:   # a collective built on another (broadcast in allgather)
                return method(self, *args, **kwargs)
            inside[0] = True
            start = (clock(), time.perf_counter(), self.seconds_waiting)
            try:
                return method(self, *args, **kwargs)
            finally:
                inside[0] = False
                calls.append(start + (clock(), time.perf_counter(), self.seconds_waiting))
        return call

    for name in ("allreduce", "allgather", "broadcast"):
        setattr(_collective.Collective, name, traced(getattr(_collective.Collective, name)))
    original = backend.worker_train

    def worker_train(key, rank, *args, **kwargs):
        calls.clear()
        try:
            return original(key, rank, *args, **kwargs)
        finally:
            fits.append((rank, np.array(calls, dtype=np.float64).reshape(-1, 6)))

    worker_train.traced = True
    worker_train.fits = fits
    backend.worker_train = worker_train


def _take_traces() -> list:
    """The (rank, notes) of each fit this worker ran since the last call."""
    from packboost.backends import dask as backend

    fits = backend.worker_train.fits
    taken = list(fits)
    fits.clear()
    return taken


def intervals(notes: np.ndarray) -> tuple:
    """(CPU seconds, wall seconds) of the work between consecutive exchanges,
    (ranks, calls - 1) each, of one fit's notes (ranks, calls, 6)."""
    return (notes[:, 1:, CPU_START] - notes[:, :-1, CPU_END],
            notes[:, 1:, WALL_START] - notes[:, :-1, WALL_END])


def balance(traces: list) -> dict:
    """What :func:`main` reports of ``traces`` (one (ranks, calls, 6) array a fit)."""
    per_fit, deviations, cpu_of_fits = [], [], []
    for notes in traces:
        cpu, wall = intervals(notes)
        cpu_of_fits.append(cpu)
        deviations.append((cpu - cpu.mean(axis=0)).ravel())
        per_fit.append({
            "waiting_s": (notes[:, :, WAITED_END] - notes[:, :, WAITED_START]).sum(axis=1),
            "wall_imbalance_s": float((wall.max(axis=0) - wall.min(axis=0)).sum()),
            "cpu_imbalance_s": float((cpu.max(axis=0) - cpu.min(axis=0)).sum()),
            "off_cpu_s": (wall - cpu).sum(axis=1)})
    pairs = list(itertools.combinations(range(len(traces)), 2))
    correlations = [float(np.corrcoef(deviations[a], deviations[b])[0, 1]) for a, b in pairs]
    mean_cpu = np.mean(cpu_of_fits, axis=0)
    return {
        "fits": [{key: np.round(value, 4).tolist() for key, value in fit.items()}
                 for fit in per_fit],
        "work_correlation": correlations,
        "work_correlation_median": float(np.median(correlations)) if correlations else None,
        "cpu_imbalance_of_mean_fit_s": float((mean_cpu.max(axis=0) - mean_cpu.min(axis=0)).sum()),
        "cpu_imbalance_per_fit_s": float(np.mean([fit["cpu_imbalance_s"] for fit in per_fit]))}


def run(size, rounds, fits, workers, threads_per_worker, pack_size, max_depth,
        feature_fraction, layout, era_subsample):
    from distributed import Client, LocalCluster

    from packboost.dask import DaskPackBoostRegressor

    X, y, era, _ = benchmark_data(size, layout)
    params = dict(n_estimators=rounds, pack_size=pack_size, max_depth=max_depth,
                  layer_feature_fraction=feature_fraction, random_state=0)
    if era_subsample is not None:
        params["era_subsample"] = era_subsample
    traces, round_seconds = [], []
    with LocalCluster(n_workers=workers, threads_per_worker=threads_per_worker,
                      processes=True, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        dX, dy, dera = persisted_input(client, X, y, era)
        client.run(_install_trace, threads_per_worker > 1)
        first = DaskPackBoostRegressor(**dict(params, n_estimators=1), n_jobs=threads_per_worker)
        first.client = client
        first.fit(dX, dy, era=dera)
        client.run(_take_traces)
        for _ in range(fits):
            model = DaskPackBoostRegressor(**params, n_jobs=threads_per_worker)
            model.client = client
            model.fit(dX, dy, era=dera)
            round_seconds.append(seconds_per_round(model.worker_stats_[0]["round_ends"]))
            taken = [item for items in client.run(_take_traces).values() for item in items]
            ranks = [notes for _, notes in sorted(taken, key=lambda item: item[0])]
            if len({len(notes) for notes in ranks}) != 1:
                raise RuntimeError("the ranks made different numbers of collective calls")
            traces.append(np.stack(ranks))
    return {"size": size, "rows": int(len(y)), "features": int(X.shape[1]),
            "eras": int(len(np.unique(era))), "params": params, "layout": layout,
            "workers": workers, "threads_per_worker": threads_per_worker,
            "exchanges_per_fit": int(traces[0].shape[1]),
            "round_s": [round(value, 4) for value in round_seconds],
            **balance(traces)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=SIZES, default="medium")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--fits", type=int, default=4)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--threads-per-worker", type=int, default=1)
    parser.add_argument("--pack-size", type=int, default=4)
    parser.add_argument("--max-depth", type=int, default=6)
    parser.add_argument("--feature-fraction", type=float, default=0.1)
    parser.add_argument("--layout", choices=["shuffled", "by-era"], default="by-era")
    parser.add_argument("--era-subsample", type=float, default=None,
                        help="each tree's share of the eras (default: the estimator's); 1 "
                             "draws none, so that each shard's share of the work is the same "
                             "in every round")
    args = parser.parse_args()
    if args.fits < 2 or args.workers < 2:
        parser.error("--fits and --workers must be at least 2 (two fits to compare, two "
                     "ranks to wait)")
    result = run(args.size, args.rounds, args.fits, args.workers, args.threads_per_worker,
                 args.pack_size, args.max_depth, args.feature_fraction, args.layout,
                 args.era_subsample)
    print(json.dumps({"machine": machine_stamp(), "result": result}, indent=1))


if __name__ == "__main__":
    main()
