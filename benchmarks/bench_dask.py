"""Distributed training on Dask: fit time and bytes per depth, 1 vs 2 workers.

    python benchmarks/bench_dask.py --size medium --rounds 5 --workers 1 2

Fits :class:`packboost.dask.DaskPackBoostRegressor` on a
``LocalCluster(n_workers=w, threads_per_worker=1, processes=True)`` and the
local :class:`packboost.PackBoostRegressor` (``n_jobs=1``) on the same
Numerai-like data (the last quarter of eras held out; the Dask input is the
shuffled training rows in 8 partitions, so every era is split across
partitions). Reports fit seconds, each worker's compute seconds from Dask's
task stream (the rest is latency and the client) and its CPU seconds (which
the load of a shared machine does not inflate), whether the trees
and predictions are bit-identical to the local fit, and per depth the bytes
that crossed the network (the arrays of every task's arguments and results,
and the states chained from worker to worker; pickle framing not counted)
next to the formula of docs/distributed.md §4. Then extrapolates to a
Numerai-scale fit on 10 nodes (``extrapolate``).
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

SIZES = {
    "tiny": dict(n_rows=20_000, n_features=50, n_eras=40),
    "small": dict(n_rows=200_000, n_features=200, n_eras=200),
    "medium": dict(n_rows=1_000_000, n_features=400, n_eras=400),
}

STATE_BYTES = 40        # _distributed.N_STATE float64 per candidate
SUM_PARTIAL_BYTES = 512  # SUM_CHUNKS x 4 float64 per slot
PIPELINE_BLOCKS = 4      # backends/dask.py PIPELINE_BLOCKS_PER_SHARD


def depth_bytes(shards, slots, features, width, candidates, chained):
    """docs/distributed.md §4: the bytes of one depth, leading terms.

    Each shard uploads its pooled per-bin sums (slots x features x width x
    (g, h, n)) and downloads the summed ones with the first chained call
    (2 x); the candidate state hops client -> shard 1 -> ... -> shard P ->
    client (P + 1 states); the slot-sum partials hop the same way.
    """
    pooled = slots * features * width * 3 * 8
    return (2 * shards * pooled
            + (shards + 1) * STATE_BYTES * candidates * chained
            + (shards + 1) * SUM_PARTIAL_BYTES * slots)


def run(size, rounds, worker_counts, pack_size, max_depth, feature_fraction):
    import dask.array as da
    from distributed import Client, LocalCluster, get_task_stream

    from packboost import PackBoostRegressor
    from packboost.dask import DaskPackBoostRegressor
    from packboost.datasets import make_numerai_like

    data = make_numerai_like(**SIZES[size], random_state=0)
    train, test = data.split_by_era(0.25)
    perm = np.random.default_rng(0).permutation(len(train.y))
    X, y, era = train.X[perm], train.y[perm], np.asarray(train.era)[perm]
    params = dict(n_estimators=rounds, pack_size=pack_size, max_depth=max_depth,
                  layer_feature_fraction=feature_fraction, random_state=0, n_jobs=1)
    start = time.perf_counter()
    local = PackBoostRegressor(**params).fit(X, y, era=era)
    results = {"size": size, "rows": int(len(y)), "features": int(X.shape[1]),
               "eras": int(len(np.unique(era))), "params": params,
               "local_fit_s": time.perf_counter() - start, "dask": []}
    reference = local.predict(test.X)
    chunk = -(-len(y) // 8)
    for workers in worker_counts:
        with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                          dashboard_address=None) as cluster, Client(cluster) as client:
            model = DaskPackBoostRegressor(**params)
            model.client = client
            dX = da.from_array(X, chunks=(chunk, -1)).persist()
            dy, dera = da.from_array(y, chunks=chunk), da.from_array(era, chunks=chunk)
            start = time.perf_counter()
            with get_task_stream(client) as stream:
                model.fit(dX, dy, era=dera)
            fit_s = time.perf_counter() - start
            busy = {}
            for task in stream.data:
                for part in task.get("startstops", ()):
                    if part["action"] == "compute":
                        busy[task["worker"]] = (busy.get(task["worker"], 0.0)
                                                + part["stop"] - part["start"])
            same = all(np.array_equal(local.ensemble_.nodes[k], model.ensemble_.nodes[k],
                                      equal_nan=True) for k in local.ensemble_.nodes)
            same_prediction = np.array_equal(model.to_local().predict(test.X), reference)
            depths = [(sent, sizes) for kind, sent, sizes in model.bytes_log_
                      if kind == "depth"]
            packs = [sent for kind, sent, _ in model.bytes_log_ if kind == "pack"]
            per_depth = {}
            for index, (sent, sizes) in enumerate(depths):
                depth = index % max_depth
                formula = depth_bytes(sizes["shards"], sizes["slots"], sizes["features"],
                                      sizes["width"], sizes["candidates"], sizes["chained"])
                entry = per_depth.setdefault(depth, {"measured": [], "formula": []})
                entry["measured"].append(sent)
                entry["formula"].append(formula)
            results["dask"].append({
                "workers": workers, "fit_s": fit_s, "same_trees": bool(same),
                "worker_compute_s": sorted(busy.values()),
                "worker_cpu_s": model.worker_cpu_seconds_,
                "tasks": len(stream.data),
                "same_predictions": bool(same_prediction),
                "bytes_per_round_outside_depths": float(np.mean(packs)) * 2 if packs else 0.0,
                "per_depth": {depth: {"measured_mean": float(np.mean(v["measured"])),
                                      "formula_mean": float(np.mean(v["formula"]))}
                              for depth, v in sorted(per_depth.items())}})
    return results


def extrapolate(ns_per_update, nodes=10, gbit=10.0, rows=2_700_000, eras=600,
                features=238, bins=5, pack_size=4, max_depth=6, hop_ms=1.0):
    """Numerai scale on ``nodes`` workers: seconds per round from compute,
    network (``gbit`` Gb/s) and task hops, every depth summed (every node
    splitting: slots double per depth).

    ``ns_per_update``: a shard's measured CPU nanoseconds per (row, feature,
    tree) per depth, histogram and era pass together (single-threaded shard
    kernel, as today).
    """
    link = gbit * 1e9 / 8
    width = bins + 1
    compute = network = hops = 0.0
    depths = []
    for depth in range(max_depth):
        slots = pack_size * 2 ** depth
        candidates = slots * features * (bins - 1)  # the last threshold empties a child
        pooled = slots * features * width * 3 * 8
        depth_compute = ns_per_update * 1e-9 * rows * features * pack_size / nodes
        # the client's link carries every shard's pooled sums up and down; the
        # chained states hop P + 1 times, pipelined in blocks
        depth_network = (2 * nodes * pooled + (nodes + 1) * STATE_BYTES * candidates) / link
        depth_hops = (2 * nodes + 2 + PIPELINE_BLOCKS * nodes) * hop_ms * 1e-3
        compute, network, hops = compute + depth_compute, network + depth_network, \
            hops + depth_hops
        depths.append({"depth": depth, "slots": slots, "candidates": candidates,
                       "bytes": depth_bytes(nodes, slots, features, width, candidates, True),
                       "per_era_histograms_bytes": eras * pooled,
                       "compute_s": depth_compute, "network_s": depth_network})
    per_round_vectors = rows * (8 + 8 + 4 * pack_size + 8 + 8)  # g, h, samples, raw up/down
    network += per_round_vectors / link
    return {"nodes": nodes, "gbit_s": gbit, "rows": rows, "eras": eras,
            "features_per_depth": features, "pack_size": pack_size, "max_depth": max_depth,
            "ns_per_update": ns_per_update, "per_depth": depths,
            "round_compute_s": compute, "round_network_s": network, "round_hops_s": hops,
            "round_vectors_bytes": per_round_vectors,
            "single_node_round_compute_s": compute * nodes}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=SIZES, default="small")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--pack-size", type=int, default=4)
    parser.add_argument("--max-depth", type=int, default=6)
    parser.add_argument("--feature-fraction", type=float, default=0.1)
    args = parser.parse_args()
    results = run(args.size, args.rounds, args.workers, args.pack_size, args.max_depth,
                  args.feature_fraction)
    one = next((r for r in results["dask"] if r["workers"] == 1), results["dask"][0])
    updates = (args.rounds * args.max_depth * results["rows"] * args.pack_size
               * max(1, round(args.feature_fraction * results["features"])))
    results["extrapolation"] = extrapolate(sum(one["worker_cpu_s"]) / updates * 1e9)
    print(json.dumps(results, indent=1, default=str))


if __name__ == "__main__":
    main()
