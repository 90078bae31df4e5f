"""PackBoost on the GPU vs the CPU backend, Numerai scale by default.

    python benchmarks/bench_gpu.py                       # 2.7M x 2376, 600 eras
    python benchmarks/bench_gpu.py --rows 200000 --features 200 --eras 100 --rounds 3
    python benchmarks/bench_gpu.py --skip-cpu --json out.json

Data: synthetic uint8 features 0..4 (Numerai's layout: feature-major, so the
estimator uses them without a copy), rows sorted by era, a target built from
a few features with era-dependent coefficients plus noise. Settings: depth 6,
pack 8, DES defaults, layer feature fraction 0.1 and 1.0 (``--feature-fraction``).

For each feature fraction and backend the same seeded fit is run with
``--rounds`` rounds (GPU) and ``--cpu-rounds`` rounds (CPU, ``--threads``
threads): the seed draws the same samples on both, so the first rounds are the
same trees, which the report checks (``same splits``). Reported:

* trees/s in steady state: pack_size / median time of a round's grow + update
  (the first ``--warmup`` rounds excluded); the same over the whole boosting
  loop (host gradients and random draws included); the whole fit's wall time;
* for the GPU, a second fit with CUDA-event timers: milliseconds per depth,
  split into kernels (histogram, score, select, route, slot sums, transfer...),
  and the histogram against its bounds: updates per second (sampled rows of
  open slots x the features their tree uses) and the least bytes it must read
  per second (each drawn column once, a row's slots, g and h).

Timings are from this process on this machine; record them in
benchmarks/RESULTS.md with the machine, the command and the date.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np


def make_data(n_rows: int, n_features: int, n_eras: int, seed: int = 0):
    """(X (n_rows, n_features) uint8 F-ordered, y, era) with rows sorted by era."""
    rng = np.random.default_rng(seed)
    X_t = np.empty((n_features, n_rows), dtype=np.uint8)
    for feature in range(n_features):
        X_t[feature] = rng.integers(0, 5, size=n_rows, dtype=np.uint8)
    era = np.repeat(np.arange(n_eras, dtype=np.int32), -(-n_rows // n_eras))[:n_rows]
    n_informative = min(20, n_features)
    informative = rng.choice(n_features, size=n_informative, replace=False)
    # Era-dependent coefficients: mostly positive, some eras flip a feature.
    base = rng.normal(0.05, 0.02, size=n_informative)
    flips = np.where(rng.random((n_eras, n_informative)) < 0.2, -1.0, 1.0)
    y = rng.normal(0.0, 1.0, size=n_rows)
    for position, feature in enumerate(informative):
        y += (base[position] * flips[era, position]) * (X_t[feature].astype(np.float64) - 2.0)
    y = np.clip(np.round((y - y.min()) / (y.max() - y.min()) * 4) / 4, 0, 1)
    return X_t.T, y, era


class TimedBackend:
    """Wraps a backend (packboost.backends) and records each pack's wall time,
    from ``begin_pack`` to the end of ``add_pack``, and each depth's work: the
    histogram updates (sampled rows of open slots x the features their tree
    uses) and the distinct feature columns the depth reads."""

    def __init__(self, inner):
        self.inner = inner
        self.round_seconds = []
        self.grow_starts = []
        self.round_work = []  # per round: per depth {"updates", "columns"}
        self._counts = None

    def begin_pack(self, *args):
        self._start = time.perf_counter()
        self.grow_starts.append(self._start)
        self.round_work.append([])
        return self.inner.begin_pack(*args)

    def slot_sums(self, n_slots):
        sums = self.inner.slot_sums(n_slots)
        self._counts = np.asarray(sums.count, dtype=np.int64)
        return sums

    def find_splits(self, slot_tree, slot_open, features, tree_uses_feature, *args, **kwargs):
        uses = np.asarray(tree_uses_feature, dtype=bool)          # (features, pack)
        open_slots = np.asarray(slot_open, dtype=bool)
        trees = np.asarray(slot_tree)[open_slots]
        rows = self._counts[: len(open_slots)][open_slots]
        open_trees = np.zeros(uses.shape[1], dtype=bool)
        open_trees[trees] = True
        self.round_work[-1].append({
            "updates": int((rows * uses.sum(axis=0)[trees]).sum()),
            "columns": int(uses[:, open_trees].any(axis=1).sum())})
        return self.inner.find_splits(slot_tree, slot_open, features, tree_uses_feature,
                                      *args, **kwargs)

    def add_pack(self, *args):
        self.inner.add_pack(*args)
        self.round_seconds.append(time.perf_counter() - self._start)

    def __getattr__(self, name):  # slot_sums, find_splits, route_rows, close
        return getattr(self.inner, name)


def run_fit(X, y, era, *, device, rounds, feature_fraction, args, kernel_timings=None):
    """One fit; returns (model, per-round seconds, fit seconds, loop seconds).

    Per-round seconds: grow + update of the pack (the backend's work). Loop
    seconds: from one round's grow to the next's, so also the host's
    gradients and random draws of the boosting loop.
    """
    from packboost import PackBoostRegressor, backends
    from packboost.backends.cpu import CpuBackend
    from packboost.backends.cuda import CudaBackend

    recorder = {}

    def backend_factory(device_name, data, pack_size, n_threads):
        if device_name == "cuda" and args.emulate:
            sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
            from oracles.host_kernels import HostKernels  # the test oracle

            inner = CudaBackend(HostKernels(data, pack_size), timings=kernel_timings)
        elif device_name == "cuda":
            backends.check_device("cuda")
            inner = CudaBackend.on_gpu(data, pack_size, timings=kernel_timings)
        else:
            inner = CpuBackend(data, pack_size, n_threads)
        recorder["backend"] = TimedBackend(inner)
        return contextlib.closing(recorder["backend"])

    model = PackBoostRegressor(
        n_estimators=rounds, pack_size=args.pack, max_depth=args.depth, learning_rate=0.01,
        layer_feature_fraction=feature_fraction, lambda_dro=args.lambda_dro,
        n_jobs=args.threads, random_state=args.seed,
        device="cpu" if device == "cuda" and args.emulate else device)
    original = backends.open_backend
    backends.open_backend = (
        (lambda name, data, pack, n_threads: backend_factory("cuda", data, pack, n_threads))
        if device == "cuda" and args.emulate else backend_factory)
    try:
        start = time.perf_counter()
        model.fit(X, y, era=era)
        seconds = time.perf_counter() - start
    finally:
        backends.open_backend = original
    backend = recorder["backend"]
    if kernel_timings is not None:  # the timed round's work per depth, beside its timers
        kernel_timings.append(backend.round_work[-1])
    return model, backend.round_seconds, seconds, np.diff(backend.grow_starts).tolist()


def steady_trees_per_second(round_seconds, pack_size, warmup):
    timed = round_seconds[warmup:] or round_seconds
    return pack_size / statistics.median(timed), statistics.median(timed)


def same_splits(model_a, model_b, n_rounds):
    """Compare the first n_rounds rounds' splits of two models.

    Returns "same", "same up to N exact ties" (nodes whose two choices have the
    same DES score to 1e-12: equivalent partitions, e.g. one feature's bins
    <= 3 holding the rows another's bin 0 holds, broken by rounding), or
    "DIFFERENT (...)".
    """
    a, b = model_a.ensemble_, model_b.ensemble_
    end = a.tree_offsets[min(n_rounds * a.pack_size, a.n_trees)]
    if b.tree_offsets[min(n_rounds * b.pack_size, b.n_trees)] != end:
        return "DIFFERENT (tree sizes)"
    differ = np.zeros(end, dtype=bool)
    for key in ("feature", "threshold_bin", "missing_left"):
        differ |= a.nodes[key][:end] != b.nodes[key][:end]
    if not differ.any():
        return "same"
    first = int(np.argmax(differ))
    score_a, score_b = a.nodes["des_score"][first], b.nodes["des_score"][first]
    if abs(score_a - score_b) <= 1e-12 * max(abs(score_a), abs(score_b)):
        return f"same up to an exact tie at node {first} (trees below it differ)"
    return f"DIFFERENT (first at node {first}: scores {score_a!r} vs {score_b!r})"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=2_700_000)
    parser.add_argument("--features", type=int, default=2376)
    parser.add_argument("--eras", type=int, default=600)
    parser.add_argument("--depth", type=int, default=6)
    parser.add_argument("--pack", type=int, default=8)
    parser.add_argument("--feature-fraction", type=float, nargs="+", default=[0.1, 1.0])
    parser.add_argument("--lambda-dro", type=float, default=0.25)
    parser.add_argument("--rounds", type=int, default=6, help="GPU rounds per fit")
    parser.add_argument("--warmup", type=int, default=1, help="rounds left out of trees/s")
    parser.add_argument("--cpu-rounds", type=int, default=1)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--skip-cpu", action="store_true")
    parser.add_argument("--skip-gpu", action="store_true")
    parser.add_argument("--json", help="write the results here too")
    parser.add_argument("--emulate", action="store_true",
                        help="GPU path with host kernels (tests this script without a GPU; "
                             "its timings mean nothing)")
    args = parser.parse_args(argv)
    if args.emulate:  # HostKernels scores with the test oracle tests/oracles (not installed)
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))

    import packboost
    from packboost import _device

    info = _device.cuda_build_info()
    print(f"# bench_gpu  {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    print(f"machine: {platform.node()}  {os.cpu_count()} CPUs  {platform.python_version()}  "
          f"packboost {packboost.__version__}")
    print(f"cuda: {info}")
    if not args.skip_gpu and not info["available"] and not args.emulate:
        raise SystemExit(f"no usable GPU: {info['error']} (use --skip-gpu)")

    start = time.perf_counter()
    X, y, era = make_data(args.rows, args.features, args.eras, args.seed)
    print(f"data: {args.rows} x {args.features} uint8, {args.eras} eras "
          f"({X.nbytes / 2**30:.1f} GiB, made in {time.perf_counter() - start:.1f} s)")
    print(f"settings: depth {args.depth}, pack {args.pack}, lambda_dro {args.lambda_dro}, "
          f"threads {args.threads}, seed {args.seed}\n")

    results = []
    for fraction in args.feature_fraction:
        row = {"feature_fraction": fraction}
        gpu_model = cpu_model = None
        if not args.skip_gpu:
            gpu_model, rounds, fit_seconds, loop = run_fit(X, y, era, device="cuda",
                                                           rounds=args.rounds,
                                                           feature_fraction=fraction, args=args)
            rate, median = steady_trees_per_second(rounds, args.pack, args.warmup)
            row.update(gpu_trees_per_s=rate, gpu_round_s=median, gpu_fit_s=fit_seconds,
                       gpu_nodes=int(len(gpu_model.ensemble_.nodes["feature"])),
                       gpu_round_seconds=rounds, gpu_loop_seconds=loop)
            if len(loop) > args.warmup:
                loop_rate, _ = steady_trees_per_second(loop, args.pack, args.warmup)
                row["gpu_loop_trees_per_s"] = loop_rate
                print(f"feature fraction {fraction}: GPU boosting loop (draws, gradients, "
                      f"grow, update) {loop_rate:.1f} trees/s")
            # Kernel breakdown: timers synchronise after every kernel, so a second fit.
            timings = []
            run_fit(X, y, era, device="cuda", rounds=min(args.rounds, 1 + args.warmup),
                    feature_fraction=fraction, args=args, kernel_timings=timings)
            work = timings.pop()
            per_depth = timings[-1]
            row["gpu_ms_per_depth"] = per_depth
            row["gpu_work_per_depth"] = work
            print(f"feature fraction {fraction}: GPU {rate:.1f} trees/s "
                  f"(round {median * 1e3:.1f} ms, fit {fit_seconds:.1f} s, "
                  f"{row['gpu_nodes']} nodes)")
            names = sorted({name for depth in per_depth for name in depth})
            print("| depth | " + " | ".join(names) + " | total ms |")
            print("| ---: |" + " ---: |" * (len(names) + 1))
            for depth, times in enumerate(per_depth):
                print(f"| {depth} | " + " | ".join(f"{times.get(n, 0.0):.2f}" for n in names)
                      + f" | {sum(times.values()):.2f} |")
            # The histogram against two bounds: its updates per second, and the
            # bytes it must read at least (each drawn column once, a row's slots,
            # g and h: 4 x pack + 16 bytes) per second, beside HBM's ~3 TB/s.
            print("\n| depth | updates (M) | columns | histogram ms | G updates/s | min GB read "
                  "| GB/s |")
            print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
            # No split search at the last depth: work is one shorter than the timers.
            for depth, (times, done) in enumerate(zip(per_depth, work, strict=False)):
                ms = times.get("histogram", 0.0)
                gigabytes = (done["columns"] * X.itemsize + 4 * args.pack + 16) * len(X) / 1e9
                print(f"| {depth} | {done['updates'] / 1e6:.1f} | {done['columns']} | {ms:.2f} "
                      f"| {done['updates'] / ms / 1e6 if ms else 0:.0f} | {gigabytes:.2f} "
                      f"| {gigabytes / ms * 1e3 if ms else 0:.0f} |")
        if not args.skip_cpu:
            cpu_model, rounds, fit_seconds, _ = run_fit(X, y, era, device="cpu",
                                                        rounds=args.cpu_rounds,
                                                        feature_fraction=fraction, args=args)
            rate, median = steady_trees_per_second(rounds, args.pack, 0)
            row.update(cpu_trees_per_s=rate, cpu_round_s=median, cpu_fit_s=fit_seconds,
                       cpu_round_seconds=rounds)
            print(f"feature fraction {fraction}: CPU ({args.threads} threads) {rate:.2f} "
                  f"trees/s (round {median:.2f} s, fit {fit_seconds:.1f} s)")
        if gpu_model is not None and cpu_model is not None:
            row["speedup"] = row["gpu_trees_per_s"] / row["cpu_trees_per_s"]
            row["same_splits"] = same_splits(gpu_model, cpu_model, args.cpu_rounds)
            print(f"feature fraction {fraction}: GPU / CPU = {row['speedup']:.1f}x; splits of "
                  f"the first {args.cpu_rounds} round(s): {row['same_splits']}")
        print()
        results.append(row)

    if args.json:
        with open(args.json, "w") as handle:
            json.dump({"args": vars(args), "cuda": info, "results": results}, handle,
                      indent=2, default=str)


if __name__ == "__main__":
    main()
