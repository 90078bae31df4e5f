"""PackBoost on the GPU against its CPU backend and XGBoost on the same card.

    python benchmarks/bench_gpu.py                       # 2.7M x 2376, 600 eras
    python benchmarks/bench_gpu.py --rows 200000 --features 200 --eras 100 --rounds 3
    python benchmarks/bench_gpu.py --feature-fraction 0.1 --recipes example deep --trees 200
    python benchmarks/bench_gpu.py --skip-cpu --peer none --json out.json
    python benchmarks/bench_gpu.py --feature-fraction 0.1 --eval-set   # held-out scored each round
    # without a GPU, to run every code path (timings mean nothing):
    python benchmarks/bench_gpu.py --emulate --peer-device cpu --rows 3000 --features 20 \
        --eras 10 --holdout-eras 4 --rounds 2 --recipes example deep --trees 16

Data: synthetic uint8 features 0..4 (Numerai's layout: feature-major, so the
estimator uses them without a copy), rows sorted by era, a target built from
a few features with era-dependent coefficients plus noise. ``--holdout-eras``
more eras of the same size (10% of ``--eras`` by default) are made beside the
training rows and never trained on: every model is scored on them.

**Speed** (``--feature-fraction``, 0.1 and 1.0 by default; depth 6, pack 8,
DES defaults). For each feature fraction and backend the same seeded fit is
run with ``--rounds`` rounds (GPU) and ``--cpu-rounds`` rounds (CPU,
``--threads`` threads): the seed draws the same samples on both, so the first
rounds are the same trees, which the report checks (``same splits``). Reported:

* trees/s in steady state: pack_size / median time of a round's grow + update
  (the first ``--warmup`` rounds excluded); the same over the whole boosting
  loop (host gradients and random draws included); the whole fit's wall time;
* for the GPU, a second fit with CUDA-event timers: milliseconds per depth,
  split into kernels (histogram, score, select, route, slot sums, transfer...),
  and the histogram against its bounds: updates per second (sampled rows of
  open slots x the features their tree uses) and the least bytes it must read
  per second (each drawn column once, a row's slots, g and h);
* XGBoost (``--peer xgboost``, on ``--peer-device``, ``cuda`` by default)
  growing as many trees as the GPU fit, matched as below.

**Recipes** (``--recipes``): Numerai's example model (depth 5, feature fraction
0.1, 2,000 trees, learning rate 0.01, LightGBM's default of 20 rows a leaf)
and its deep model (depth 10, 1,024 leaves, feature fraction 0.1, 10,000 rows
a leaf, 30,000 trees at 0.001), for PackBoost on the GPU and for the peer.
``--trees`` cuts every recipe to that many trees for a time-boxed run (the
trees/s stay comparable; the held-out correlation is that of the shorter fit).

**Matching XGBoost to PackBoost** (same data, same trees, same leaves):

* trees: PackBoost grows ``pack_size`` trees a round, so a recipe of N trees
  is N / pack_size rounds, and XGBoost grows N boosting rounds of one tree;
* shrinkage: a PackBoost round adds ``learning_rate / pack_size`` times each
  of its trees (docs/packs.md §5), so PackBoost gets ``learning_rate = rate x
  pack_size`` and every tree of both models is scaled by the recipe's rate;
* shape: ``grow_policy="depthwise"``, the same ``max_depth``, ``max_leaves=0``
  (depth-wise trees of depth d have up to 2**d leaves in both);
* leaves: ``min_child_weight`` = ``min_samples_leaf`` (the squared error's
  hessian is 1 a row in both, so a hessian sum is a row count), ``reg_lambda``
  1 in both;
* features: PackBoost draws ``layer_feature_fraction`` of the features per
  depth (shared by the pack), and each tree ``tree_feature_fraction`` (0.5) of
  those; a tree's level therefore scores ``layer x tree`` of the features, a
  uniform draw, which is XGBoost's ``colsample_bylevel`` (drawn per tree and
  level; ``colsample_bynode`` stays 1, as a PackBoost tree's nodes at one
  depth share their features); the pack's shared draw only correlates its
  trees;
* rows: PackBoost samples ``era_subsample`` (0.75) of the eras per tree,
  XGBoost ``subsample`` = the same fraction of the rows (no era sampling there);
* bins: ``max_bin=5``, the data's five levels (PackBoost uses the codes as bins);
* XGBoost's data (a ``QuantileDMatrix``) is built once and shared by its fits:
  its build time is reported as setup and added to each fit's whole time.

Reported for each fit: trees, whole-fit seconds and trees/s (setup included),
steady trees/s (median round or iteration after ``--warmup``), and the
held-out per-era correlation (``packboost.metrics``, Numerai's correlation)
as mean and Sharpe, so a speed gain is never a quality loss. ``--json``
is rewritten after every fit: a run cut short keeps what it measured.

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

# Numerai's models as LightGBM runs them (numer.ai example scripts); the peer
# grows them as in the module docstring, PackBoost with its own defaults
# beside the recipe's depth, feature fraction and leaf size.
RECIPES = {
    "example": {"max_depth": 5, "feature_fraction": 0.1, "trees": 2000,
                "learning_rate": 0.01, "min_samples_leaf": 20},
    "deep": {"max_depth": 10, "feature_fraction": 0.1, "trees": 30000,
             "learning_rate": 0.001, "min_samples_leaf": 10000},
}


def make_data(n_rows: int, n_features: int, n_eras: int, seed: int = 0, holdout_eras: int = 0):
    """Training ``(X, y, era)`` and held-out ``(X, y, era)``.

    X is (rows, n_features) uint8, F-ordered, rows sorted by era; the held-out
    set has ``holdout_eras`` more eras of the training eras' size.
    """
    rng = np.random.default_rng(seed)
    rows_per_era = -(-n_rows // n_eras)
    n_holdout = holdout_eras * rows_per_era
    train_t = np.empty((n_features, n_rows), dtype=np.uint8)
    holdout_t = np.empty((n_features, n_holdout), dtype=np.uint8)
    for feature in range(n_features):
        codes = rng.integers(0, 5, size=n_rows + n_holdout, dtype=np.uint8)
        train_t[feature] = codes[:n_rows]
        holdout_t[feature] = codes[n_rows:]
    era = np.repeat(np.arange(n_eras + holdout_eras, dtype=np.int32),
                    rows_per_era)[:n_rows + n_holdout]
    era[n_rows:] = np.repeat(np.arange(n_eras, n_eras + holdout_eras, dtype=np.int32),
                             rows_per_era)
    n_informative = min(20, n_features)
    informative = rng.choice(n_features, size=n_informative, replace=False)
    # Era-dependent coefficients: mostly positive, some eras flip a feature.
    base = rng.normal(0.05, 0.02, size=n_informative)
    flips = np.where(rng.random((n_eras + holdout_eras, n_informative)) < 0.2, -1.0, 1.0)
    y = rng.normal(0.0, 1.0, size=n_rows + n_holdout)
    for position, feature in enumerate(informative):
        codes = np.concatenate([train_t[feature], holdout_t[feature]]).astype(np.float64)
        y += (base[position] * flips[era, position]) * (codes - 2.0)
    y = np.clip(np.round((y - y.min()) / (y.max() - y.min()) * 4) / 4, 0, 1)
    return ((train_t.T, y[:n_rows], era[:n_rows]),
            (holdout_t.T, y[n_rows:], era[n_rows:]))


def held_out_quality(predictions, holdout) -> dict:
    """Mean and Sharpe of the per-era (Numerai) correlation on the held-out eras."""
    from packboost.metrics import era_summary, per_era_correlation

    _, y, era = holdout
    if len(y) == 0:
        return {}
    _, correlations = per_era_correlation(y, np.asarray(predictions, dtype=np.float64), era,
                                          method="numerai")
    summary = era_summary(correlations)
    return {"holdout_corr_mean": summary["mean"], "holdout_corr_sharpe": summary["sharpe"],
            "holdout_eras": summary["n_eras"]}


def quality_text(row: dict) -> str:
    if "holdout_corr_mean" not in row:
        return ""
    return (f", held-out corr {row['holdout_corr_mean']:.4f} "
            f"(Sharpe {row['holdout_corr_sharpe']:.2f})")


class TimedBackend:
    """Wraps a backend (packboost.backends) and records each pack's wall time,
    from ``begin_pack`` to the end of ``add_pack``, and each depth's work: the
    histogram updates (sampled rows of open slots x the features their tree
    uses) and the distinct feature columns the depth reads."""

    def __init__(self, inner, device_round: bool = True):
        self.inner = inner
        # False: the boosting loop computes the gradients on the host (the
        # path before the round moved to the device; --host-round).
        self.computes_round_gradients = device_round and getattr(
            inner, "computes_round_gradients", False)
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


def run_fit(X, y, era, *, device, rounds, feature_fraction, args, kernel_timings=None,
            max_depth=None, learning_rate=0.01, min_samples_leaf=20, device_round=True,
            eval_set=None):
    """One fit; returns (model, per-round seconds, fit seconds, loop seconds).
    ``eval_set``: scored every round, as a user watching a validation set
    does (the loop seconds then include it).

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
        recorder["backend"] = TimedBackend(inner, device_round)
        return contextlib.closing(recorder["backend"])

    model = PackBoostRegressor(
        n_estimators=rounds, pack_size=args.pack,
        max_depth=args.depth if max_depth is None else max_depth, learning_rate=learning_rate,
        min_samples_leaf=min_samples_leaf, layer_feature_fraction=feature_fraction,
        tree_feature_fraction=args.tree_feature_fraction, era_subsample=args.era_subsample,
        lambda_dro=args.lambda_dro,
        n_jobs=args.threads, random_state=args.seed,
        device="cpu" if device == "cuda" and args.emulate else device)
    original = backends.open_backend
    backends.open_backend = (
        (lambda name, data, pack, n_threads: backend_factory("cuda", data, pack, n_threads))
        if device == "cuda" and args.emulate else backend_factory)
    try:
        start = time.perf_counter()
        model.fit(X, y, era=era, eval_set=eval_set)
        seconds = time.perf_counter() - start
    finally:
        backends.open_backend = original
    backend = recorder["backend"]
    if kernel_timings is not None:  # the timed round's work per depth, beside its timers
        kernel_timings.append(backend.round_work[-1])
    return model, backend.round_seconds, seconds, np.diff(backend.grow_starts).tolist()


class XGBoostPeer:
    """XGBoost's ``hist`` trees on ``device``, matched to PackBoost's fits
    (module docstring). Its ``QuantileDMatrix`` is built on first use and
    shared by every fit of the run."""

    def __init__(self, X, y, *, device: str, threads: int, seed: int, max_bin: int = 5):
        import xgboost

        self.xgboost = xgboost
        self.X, self.y = X, y
        self.device, self.threads, self.seed, self.max_bin = device, threads, seed, max_bin
        self.matrix = None
        self.setup_seconds = 0.0
        info = xgboost.build_info()
        self.describe = (f"xgboost {xgboost.__version__} on {device} "
                         f"(built with CUDA: {info.get('USE_CUDA')})")
        if device == "cuda" and not info.get("USE_CUDA"):
            raise SystemExit(f"{self.describe}: this XGBoost has no CUDA (use --peer-device cpu)")

    def build_matrix(self):
        """The training data as XGBoost bins it. On the GPU from a CuPy copy of X
        when CuPy is there (the quantiles are then sketched on the device; the
        copy is freed once the bins are made), else from the host array."""
        xgboost = self.xgboost
        if self.device == "cuda":
            try:
                import cupy
            except ImportError:
                cupy = None
            if cupy is not None:
                try:
                    device_X = cupy.asarray(self.X)
                    matrix = xgboost.QuantileDMatrix(device_X, label=cupy.asarray(self.y),
                                                     max_bin=self.max_bin)
                    del device_X
                    cupy.get_default_memory_pool().free_all_blocks()
                    self.describe += ", data from a CuPy array"
                    return matrix
                except Exception as error:  # noqa: BLE001 -- reported, then the host path
                    print(f"peer: QuantileDMatrix from CuPy failed ({error!r}); "
                          "from the host array instead")
        self.describe += ", data from the host array"
        return xgboost.QuantileDMatrix(self.X, label=self.y, max_bin=self.max_bin,
                                       nthread=self.threads)

    def params(self, *, max_depth, learning_rate, level_fraction, min_child_weight, subsample):
        return {"device": self.device, "tree_method": "hist", "max_bin": self.max_bin,
                "objective": "reg:squarederror", "grow_policy": "depthwise",
                "max_depth": max_depth, "max_leaves": 0, "learning_rate": learning_rate,
                "colsample_bylevel": level_fraction, "colsample_bynode": 1.0,
                "min_child_weight": min_child_weight, "reg_lambda": 1.0,
                "subsample": subsample, "nthread": self.threads, "seed": self.seed,
                "verbosity": 1}

    def fit(self, trees: int, warmup: int, **params) -> tuple:
        """(booster, row of results) after ``trees`` boosting rounds."""
        xgboost = self.xgboost
        if self.matrix is None:
            start = time.perf_counter()
            self.matrix = self.build_matrix()
            self.setup_seconds = time.perf_counter() - start
        stamps = []

        class Stamp(xgboost.callback.TrainingCallback):
            def after_iteration(self, model, epoch, evals_log):
                stamps.append(time.perf_counter())
                return False

        chosen = self.params(**params)
        start = time.perf_counter()
        booster = xgboost.train(chosen, self.matrix, num_boost_round=trees,
                                callbacks=[Stamp()])
        train_seconds = time.perf_counter() - start
        iteration = np.diff([start, *stamps])
        steady = iteration[warmup:] if len(iteration) > warmup else iteration
        whole = self.setup_seconds + train_seconds
        row = {"trees": trees, "setup_s": self.setup_seconds, "train_s": train_seconds,
               "fit_s": whole, "trees_per_s": trees / whole if whole else 0.0,
               "steady_trees_per_s": 1.0 / statistics.median(steady) if len(steady) else 0.0,
               "params": chosen}
        return booster, row

    def predict(self, booster, X):
        return booster.inplace_predict(X)


def open_peer(args, X, y):
    """The peer of this run, or None (``--peer none``, or XGBoost missing)."""
    if args.peer == "none":
        return None
    try:
        peer = XGBoostPeer(X, y, device=args.peer_device, threads=args.threads, seed=args.seed,
                           max_bin=args.max_bin)
    except ImportError as error:
        print(f"peer: xgboost is not importable ({error}); peers skipped "
              "(ci/gpu_check.sh 'peers' says how to carry its wheel)")
        return None
    print(f"peer: {peer.describe}, max_bin {args.max_bin}")
    return peer


def peer_arguments(args, *, max_depth, learning_rate, feature_fraction, min_samples_leaf):
    """XGBoost's settings for a PackBoost fit (module docstring, "Matching")."""
    return {"max_depth": max_depth, "learning_rate": learning_rate,
            "level_fraction": feature_fraction * args.tree_feature_fraction,
            "min_child_weight": float(min_samples_leaf), "subsample": args.era_subsample}


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


def parse_arguments(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=2_700_000)
    parser.add_argument("--features", type=int, default=2376)
    parser.add_argument("--eras", type=int, default=600)
    parser.add_argument("--holdout-eras", type=int, default=None,
                        help="held-out eras made beside the training eras (default: 10%%)")
    parser.add_argument("--depth", type=int, default=6)
    parser.add_argument("--pack", type=int, default=8)
    parser.add_argument("--feature-fraction", type=float, nargs="*", default=[0.1, 1.0],
                        help="layer feature fractions of the speed part (none: skip it)")
    parser.add_argument("--tree-feature-fraction", type=float, default=0.5)
    parser.add_argument("--era-subsample", type=float, default=0.75)
    parser.add_argument("--lambda-dro", type=float, default=0.25)
    parser.add_argument("--rounds", type=int, default=6, help="GPU rounds per fit")
    parser.add_argument("--warmup", type=int, default=1, help="rounds left out of trees/s")
    parser.add_argument("--host-round", action="store_true",
                        help="also fit with each round's gradients computed on the host "
                             "(the path before the round moved to the device), for its "
                             "loop and grow rates beside the device round's")
    parser.add_argument("--cpu-rounds", type=int, default=1)
    parser.add_argument("--eval-set", action="store_true",
                        help="score the held-out rows every round (speed part), as a "
                             "validation set is watched; the loop trees/s include it")
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--skip-cpu", action="store_true")
    parser.add_argument("--skip-gpu", action="store_true")
    parser.add_argument("--no-kernel-timers", action="store_true",
                        help="skip the second, event-timed GPU fit of the speed part")
    parser.add_argument("--recipes", nargs="*", default=[], choices=sorted(RECIPES),
                        help="Numerai's recipes to fit with PackBoost (GPU) and the peer")
    parser.add_argument("--trees", type=int, default=None,
                        help="cut every recipe to this many trees (a time-boxed run)")
    parser.add_argument("--peer", choices=("xgboost", "none"), default="xgboost")
    parser.add_argument("--peer-device", choices=("cuda", "cpu"), default="cuda",
                        help="XGBoost's device (cpu: rehearse without a GPU)")
    parser.add_argument("--max-bin", type=int, default=5, help="XGBoost's max_bin")
    parser.add_argument("--json", help="write the results here too (after every fit)")
    parser.add_argument("--emulate", action="store_true",
                        help="GPU path with host kernels (tests this script without a GPU; "
                             "its timings mean nothing)")
    args = parser.parse_args(argv)
    if args.holdout_eras is None:
        args.holdout_eras = max(1, args.eras // 10)
    return args


class Report:
    """The run's results, rewritten to ``--json`` after every fit."""

    def __init__(self, args, info):
        self.path = args.json
        self.document = {"args": vars(args), "cuda": info, "speed": [], "recipes": [],
                         "machine": {"node": platform.node(), "cpus": os.cpu_count(),
                                     "python": platform.python_version()}}

    def save(self):
        if self.path:
            with open(self.path, "w") as handle:
                json.dump(self.document, handle, indent=2, default=str)


def speed_part(args, train, holdout, peer, report):
    """PackBoost GPU vs CPU (and the peer) at ``--depth``, ``--pack``, per fraction."""
    X, y, era = train
    eval_set = [holdout] if args.eval_set else None
    for fraction in args.feature_fraction:
        row = {"feature_fraction": fraction, "eval_set": bool(args.eval_set)}
        report.document["speed"].append(row)
        gpu_model = cpu_model = None
        if not args.skip_gpu:
            gpu_model, rounds, fit_seconds, loop = run_fit(X, y, era, device="cuda",
                                                           rounds=args.rounds,
                                                           feature_fraction=fraction, args=args,
                                                           eval_set=eval_set)
            rate, median = steady_trees_per_second(rounds, args.pack, args.warmup)
            row.update(gpu_trees_per_s=rate, gpu_round_s=median, gpu_fit_s=fit_seconds,
                       gpu_nodes=int(len(gpu_model.ensemble_.nodes["feature"])),
                       gpu_round_seconds=rounds, gpu_loop_seconds=loop,
                       gpu=held_out_quality(gpu_model.predict(holdout[0]), holdout))
            if len(loop) > args.warmup:
                loop_rate, _ = steady_trees_per_second(loop, args.pack, args.warmup)
                row["gpu_loop_trees_per_s"] = loop_rate
                row["gpu_loop_over_grow"] = loop_rate / rate if rate else 0.0
                print(f"feature fraction {fraction}: GPU boosting loop (draws, gradients, "
                      f"grow, update) {loop_rate:.1f} trees/s, "
                      f"{100 * row['gpu_loop_over_grow']:.0f}% of the grow rate")
            if args.host_round:
                _, host_rounds, _, host_loop = run_fit(
                    X, y, era, device="cuda", rounds=args.rounds, feature_fraction=fraction,
                    args=args, device_round=False, eval_set=eval_set)
                host_rate, _ = steady_trees_per_second(host_rounds, args.pack, args.warmup)
                host_loop_rate, _ = (steady_trees_per_second(host_loop, args.pack, args.warmup)
                                     if len(host_loop) > args.warmup else (0.0, 0.0))
                row.update(gpu_host_round_trees_per_s=host_rate,
                           gpu_host_round_loop_trees_per_s=host_loop_rate)
                print(f"feature fraction {fraction}: GPU with the round's gradients on the "
                      f"host: grow {host_rate:.1f} trees/s, boosting loop "
                      f"{host_loop_rate:.1f} trees/s")
            print(f"feature fraction {fraction}: GPU {rate:.1f} trees/s "
                  f"(round {median * 1e3:.1f} ms, fit {fit_seconds:.1f} s, "
                  f"{row['gpu_nodes']} nodes{quality_text(row['gpu'])})")
            report.save()
            if not args.no_kernel_timers:
                kernel_breakdown(X, y, era, fraction, args, row)
                report.save()
        if not args.skip_cpu:
            cpu_model, rounds, fit_seconds, _ = run_fit(X, y, era, device="cpu",
                                                        rounds=args.cpu_rounds,
                                                        feature_fraction=fraction, args=args,
                                                        eval_set=eval_set)
            rate, median = steady_trees_per_second(rounds, args.pack, 0)
            row.update(cpu_trees_per_s=rate, cpu_round_s=median, cpu_fit_s=fit_seconds,
                       cpu_round_seconds=rounds,
                       cpu=held_out_quality(cpu_model.predict(holdout[0]), holdout))
            print(f"feature fraction {fraction}: CPU ({args.threads} threads) {rate:.2f} "
                  f"trees/s (round {median:.2f} s, fit {fit_seconds:.1f} s"
                  f"{quality_text(row['cpu'])})")
            report.save()
        if gpu_model is not None and cpu_model is not None:
            row["speedup"] = row["gpu_trees_per_s"] / row["cpu_trees_per_s"]
            row["same_splits"] = same_splits(gpu_model, cpu_model, args.cpu_rounds)
            print(f"feature fraction {fraction}: GPU / CPU = {row['speedup']:.1f}x; splits of "
                  f"the first {args.cpu_rounds} round(s): {row['same_splits']}")
        if peer is not None:
            trees = args.rounds * args.pack
            # PackBoost's rate 0.01 a round is 0.01 / pack_size a tree (docstring).
            booster, peer_row = peer.fit(trees, args.warmup * args.pack, **peer_arguments(
                args, max_depth=args.depth, learning_rate=0.01 / args.pack,
                feature_fraction=fraction, min_samples_leaf=20))
            peer_row.update(held_out_quality(peer.predict(booster, holdout[0]), holdout))
            row["peer"] = peer_row
            print(f"feature fraction {fraction}: {peer.describe}: {trees} trees, steady "
                  f"{peer_row['steady_trees_per_s']:.1f} trees/s, whole fit "
                  f"{peer_row['trees_per_s']:.1f} trees/s (setup {peer_row['setup_s']:.1f} s, "
                  f"train {peer_row['train_s']:.1f} s{quality_text(peer_row)})")
            if "gpu_loop_trees_per_s" in row:
                row["gpu_loop_over_peer"] = (row["gpu_loop_trees_per_s"]
                                             / peer_row["steady_trees_per_s"])
                print(f"feature fraction {fraction}: PackBoost GPU loop / peer steady = "
                      f"{row['gpu_loop_over_peer']:.2f}x")
        print()
        report.save()


def kernel_breakdown(X, y, era, fraction, args, row):
    """A second GPU fit with CUDA-event timers: ms per depth and kernel, and the
    histogram against its bounds."""
    # Kernel breakdown: timers synchronise after every kernel, so a second fit.
    timings = []
    run_fit(X, y, era, device="cuda", rounds=min(args.rounds, 1 + args.warmup),
            feature_fraction=fraction, args=args, kernel_timings=timings)
    work = timings.pop()
    per_depth = timings[-1]
    row["gpu_ms_per_depth"] = per_depth
    row["gpu_work_per_depth"] = work
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


def recipe_part(args, train, holdout, peer, report):
    """Numerai's recipes: PackBoost on the GPU and the peer, same trees."""
    X, y, era = train
    for name in args.recipes:
        recipe = RECIPES[name]
        trees = recipe["trees"] if args.trees is None else args.trees
        rounds = max(1, -(-trees // args.pack))
        trees = rounds * args.pack
        row = {"recipe": name, **recipe, "trees": trees, "pack": args.pack}
        report.document["recipes"].append(row)
        print(f"recipe {name}: depth {recipe['max_depth']}, feature fraction "
              f"{recipe['feature_fraction']}, {recipe['min_samples_leaf']} rows a leaf, "
              f"{trees} trees (rate {recipe['learning_rate']} a tree)")
        if not args.skip_gpu:
            model, _, fit_seconds, loop = run_fit(
                X, y, era, device="cuda", rounds=rounds,
                feature_fraction=recipe["feature_fraction"], args=args,
                max_depth=recipe["max_depth"],
                learning_rate=recipe["learning_rate"] * args.pack,
                min_samples_leaf=recipe["min_samples_leaf"])
            gpu = {"fit_s": fit_seconds, "trees_per_s": trees / fit_seconds,
                   "nodes": int(len(model.ensemble_.nodes["feature"]))}
            if len(loop) > args.warmup:
                gpu["steady_trees_per_s"], _ = steady_trees_per_second(loop, args.pack,
                                                                       args.warmup)
            gpu.update(held_out_quality(model.predict(holdout[0]), holdout))
            row["packboost_gpu"] = gpu
            steady = gpu.get("steady_trees_per_s")
            print(f"recipe {name}: PackBoost GPU whole fit {gpu['trees_per_s']:.1f} trees/s "
                  f"({fit_seconds:.1f} s)" + (f", steady loop {steady:.1f} trees/s"
                                               if steady else "") + quality_text(gpu))
            report.save()
        if peer is not None:
            booster, peer_row = peer.fit(trees, args.warmup * args.pack, **peer_arguments(
                args, max_depth=recipe["max_depth"], learning_rate=recipe["learning_rate"],
                feature_fraction=recipe["feature_fraction"],
                min_samples_leaf=recipe["min_samples_leaf"]))
            peer_row.update(held_out_quality(peer.predict(booster, holdout[0]), holdout))
            row["peer"] = peer_row
            print(f"recipe {name}: {peer.describe}: whole fit {peer_row['trees_per_s']:.1f} "
                  f"trees/s (setup {peer_row['setup_s']:.1f} s, train "
                  f"{peer_row['train_s']:.1f} s), steady {peer_row['steady_trees_per_s']:.1f} "
                  f"trees/s{quality_text(peer_row)}")
        if "packboost_gpu" in row and "peer" in row:
            row["whole_fit_ratio"] = row["packboost_gpu"]["trees_per_s"] / row["peer"][
                "trees_per_s"]
            print(f"recipe {name}: PackBoost GPU / peer, whole fit: "
                  f"{row['whole_fit_ratio']:.2f}x")
        print()
        report.save()


def main(argv=None):
    args = parse_arguments(argv)
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
        raise SystemExit(f"no usable GPU: {info['error']} (use --skip-gpu or --emulate)")

    start = time.perf_counter()
    train, holdout = make_data(args.rows, args.features, args.eras, args.seed,
                               args.holdout_eras)
    X = train[0]
    print(f"data: {args.rows} x {args.features} uint8, {args.eras} eras "
          f"({X.nbytes / 2**30:.1f} GiB) + {len(holdout[1])} held-out rows in "
          f"{args.holdout_eras} eras, made in {time.perf_counter() - start:.1f} s")
    print(f"settings: depth {args.depth}, pack {args.pack}, lambda_dro {args.lambda_dro}, "
          f"tree feature fraction {args.tree_feature_fraction}, era subsample "
          f"{args.era_subsample}, threads {args.threads}, seed {args.seed}\n")

    report = Report(args, info)
    peer = open_peer(args, train[0], train[1])
    speed_part(args, train, holdout, peer, report)
    recipe_part(args, train, holdout, peer, report)
    if peer is not None:
        report.document["peer"] = {"describe": peer.describe, "setup_s": peer.setup_seconds}
    report.save()


if __name__ == "__main__":
    main()
