"""PackBoost against its peers at the sizes users run, Numerai scale included.

    python benchmarks/bench_scale.py                          # every case, 3 repeats
    python benchmarks/bench_scale.py --cases numerai --repeats 3
    python benchmarks/bench_scale.py --cases full --libraries packboost --depths 6 10

Cases (``make_numerai_like``: int8 quintile features, rows sorted by era):

========== ============================ ====== =============================
case       data                         trees  feature sampling
========== ============================ ====== =============================
numerai    2.7M rows x 500, 600 eras    40     0.1
full       2.7M rows x 2,376, 600 eras  16     0.1 (Numerai's whole width)
small      150k rows x 200, 150 eras    100    0.1
small240   90k rows x 200, 120 eras     240    0.1, learning rate 0.05
every      150k rows x 200, 150 eras    100    1.0 (every feature, every depth)
========== ============================ ====== =============================

Depth 6 unless ``--depths`` says otherwise; 2 threads. Peers run as their
users run them, in their default environment (no ``OMP_WAIT_POLICY`` or other
override): LightGBM ``feature_fraction`` (per tree) with ``num_leaves =
2**depth``, XGBoost ``hist`` with ``colsample_bytree``. PackBoost, in packs of
8, draws the share per depth (``layer_feature_fraction``; each tree then
splits on ``tree_feature_fraction`` = 0.5 of them, the default), and every
feature in every tree (both fractions 1) in the "every" case
(``packboost-pack``: ``feature_sampling="pack"``, drawn once per pack as
LightGBM draws per tree, which lets the CPU subtract histograms). Setup
(LightGBM's ``Dataset``, XGBoost's ``QuantileDMatrix``, PackBoost's binning
and checks) is timed apart from
training, since users
build a Dataset once and then train many models on it -- except PackBoost's,
which ``fit`` does (no separate Dataset), so its ``s/tree (fit)`` carries it.
``s/tree (fit)`` is training time over trees; ``steady s/tree`` (what the
ratios compare) is the time per tree after the first eighth of the rounds,
from per-round callbacks of each library: what each further tree costs a user
who trains thousands, with every library's one-off work (PackBoost's binning,
everyone's first touch of its working memory) left out alike.

Every (case, library, repeat) is one fresh process; libraries alternate within
a repeat. Data are generated once per case and cached as ``.npy`` under
``--cache`` (the full width takes 6.4 GB). Peak memory is the process's
``VmHWM`` above its resident size once the data are loaded. The machine is
shared and noisy: read the ratios of one run, not absolute times across runs.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

# The same peak-memory reading as bench_speed.py (this folder is on sys.path
# when a benchmark runs as a script).
from bench_speed import _reset_peak_rss, _rss_kib

CASES = {
    "numerai": dict(n_rows=2_700_000, n_features=500, n_eras=600, trees=40, fraction=0.1,
                    learning_rate=0.01),
    "full": dict(n_rows=2_700_000, n_features=2376, n_eras=600, trees=16, fraction=0.1,
                 learning_rate=0.01),
    "small": dict(n_rows=150_000, n_features=200, n_eras=150, trees=100, fraction=0.1,
                  learning_rate=0.01),
    "small240": dict(n_rows=90_000, n_features=200, n_eras=120, trees=240, fraction=0.1,
                     learning_rate=0.05),
    "every": dict(n_rows=150_000, n_features=200, n_eras=150, trees=100, fraction=1.0,
                  learning_rate=0.01),
}
# "packboost-pack": feature_sampling="pack" (draws once per pack, LightGBM's way,
# and lets the CPU subtract histograms at every depth).
LIBRARIES = ("packboost", "packboost-pack", "lightgbm", "xgboost")
BLOCK = 500  # features generated at once (cached_data)
PACK_SIZE = 8


def cached_data(case: str, cache: Path):
    """The case's (X, y, era) from ``cache``, generated on first use."""
    import numpy as np

    spec = CASES[case]
    folder = cache / f"{case}-{spec['n_rows']}x{spec['n_features']}x{spec['n_eras']}"
    if not (folder / "done").exists():
        from packboost.datasets import make_numerai_like

        folder.mkdir(parents=True, exist_ok=True)
        n_rows, n_features, n_eras = spec["n_rows"], spec["n_features"], spec["n_eras"]
        # Column-major on disk as generated: one feature's rows are contiguous.
        # Wide cases are generated in blocks of at most BLOCK features (the
        # generator holds ~2.5x its output), the target from the first block:
        # the other blocks are independent draws of the same process, which
        # is what their timing needs.
        XT = np.lib.format.open_memmap(folder / "XT.npy", mode="w+", dtype=np.uint8,
                                       shape=(n_features, n_rows))
        for seed, start in enumerate(range(0, n_features, BLOCK)):
            width = min(BLOCK, n_features - start)
            data = make_numerai_like(n_rows, width, n_eras, random_state=seed)
            XT[start:start + width] = data.X.T
            if seed == 0:
                np.save(folder / "y.npy", data.y)
                np.save(folder / "era.npy", data.era)
            del data
        XT.flush()
        del XT
        (folder / "done").write_text("ok")
    X = np.load(folder / "XT.npy").T  # a Fortran-ordered view, no copy
    return X, np.load(folder / "y.npy"), np.load(folder / "era.npy")


def steady_per_tree(stamps: list, trees_per_stamp: int) -> float:
    """Training time per tree once the first eighth of the trees (at least one
    round) is grown: from the end of that round to the end of the last, over
    the trees in between. Leaves out what a fit does once -- PackBoost's binning
    and checks inside ``fit``, every library's first touch of its working
    memory -- which the users' thousands of trees amortise."""
    rounds = len(stamps)
    first = max(1, rounds // 8)
    if rounds - first < 1:
        return float("nan")
    return (stamps[-1] - stamps[first - 1]) / ((rounds - first) * trees_per_stamp)


def run_one(config: dict) -> dict:
    """Child process: load the data, set up and train one model, report."""
    X, y, era = cached_data(config["case"], Path(config["cache"]))
    library, depth, threads = config["library"], config["depth"], config["threads"]
    trees, fraction, rate = config["trees"], config["fraction"], config["learning_rate"]
    min_leaf = config.get("min_samples_leaf", 20)
    subsample = config.get("row_subsample", 1.0)
    stamps = []          # time at the end of every boosting round (callbacks)
    trees_per_stamp = 1  # a PackBoost round grows a pack
    _reset_peak_rss()
    rss_before = _rss_kib("VmRSS")
    if library.startswith("packboost"):
        from packboost import PackBoostRegressor

        model = PackBoostRegressor(
            n_estimators=trees // PACK_SIZE, pack_size=PACK_SIZE, max_depth=depth,
            learning_rate=rate, layer_feature_fraction=fraction, min_samples_leaf=min_leaf,
            feature_sampling="pack" if library == "packboost-pack" else "depth",
            # every feature in every tree too when the case says "every feature"
            **({"tree_feature_fraction": 1.0} if fraction == 1.0 else {}),
            row_subsample=subsample, n_jobs=threads, random_state=0)
        start = time.perf_counter()
        model.fit(X, y, era=era, callbacks=[lambda info: stamps.append(time.perf_counter())])
        setup, train = 0.0, time.perf_counter() - start
        trees_per_stamp = PACK_SIZE
    elif library == "lightgbm":
        import lightgbm

        start = time.perf_counter()
        dataset = lightgbm.Dataset(X, y, params={"verbose": -1, "max_bin": 255}).construct()
        setup = time.perf_counter() - start
        params = dict(objective="regression", max_depth=depth, num_leaves=2**depth,
                      min_child_samples=min_leaf,
                      learning_rate=rate, feature_fraction=fraction, num_threads=threads,
                      verbose=-1, seed=0,
                      **({"bagging_fraction": subsample, "bagging_freq": 1}
                         if subsample < 1 else {}))
        start = time.perf_counter()
        lightgbm.train(params, dataset, num_boost_round=trees,
                       callbacks=[lambda env: stamps.append(time.perf_counter())])
        train = time.perf_counter() - start
    elif library == "xgboost":
        import xgboost

        start = time.perf_counter()
        matrix = xgboost.QuantileDMatrix(X, y, nthread=threads)
        setup = time.perf_counter() - start
        # squared error: a hessian of 1 per row, so min_child_weight counts rows
        params = dict(tree_method="hist", max_depth=depth, eta=rate, min_child_weight=min_leaf,
                      colsample_bytree=fraction, subsample=subsample, nthread=threads, seed=0)
        class Stamp(xgboost.callback.TrainingCallback):
            def after_iteration(self, model, epoch, evals_log):
                stamps.append(time.perf_counter())
                return False

        start = time.perf_counter()
        xgboost.train(params, matrix, num_boost_round=trees, callbacks=[Stamp()])
        train = time.perf_counter() - start
    else:
        raise ValueError(library)
    return dict(config, setup_seconds=setup, train_seconds=train,
                seconds_per_tree=train / trees,
                steady_seconds_per_tree=steady_per_tree(stamps, trees_per_stamp),
                peak_gib=(_rss_kib("VmHWM") - rss_before) / 2**20,
                data_gib=X.nbytes / 2**30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", nargs="+", choices=CASES, default=list(CASES))
    parser.add_argument("--libraries", nargs="+", choices=LIBRARIES, default=list(LIBRARIES))
    parser.add_argument("--depths", type=int, nargs="+", default=[6])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--trees", type=int, help="override every case's tree count")
    parser.add_argument("--min-samples-leaf", type=int, default=20,
                        help="rows per leaf at least (LightGBM min_child_samples; Numerai's "
                             "deep model: depth 10 with 10000)")
    parser.add_argument("--row-subsample", type=float, default=1.0,
                        help="each tree's share of the rows, as users port bagging: "
                             "PackBoost row_subsample, LightGBM bagging_fraction with "
                             "bagging_freq=1, XGBoost subsample")
    parser.add_argument("--cache", default=os.path.expanduser("~/.cache/packboost-bench"))
    parser.add_argument("--json", help="also write every run to this JSON file")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(run_one(json.loads(args.child))))
        return

    print(f"# {time.strftime('%Y-%m-%d')} {platform.node()} {os.cpu_count()} cpus | "
          f"python {' '.join(sys.argv)}", flush=True)
    runs = []
    for case in args.cases:
        # "full" is PackBoost's alone unless peers are named: LightGBM's Dataset of
        # the whole width does not fit in 24 GiB (issue 18's table).
        libraries = args.libraries
        if case == "full" and args.libraries == list(LIBRARIES):
            libraries = ["packboost", "packboost-pack"]
        spec = CASES[case]
        for depth in args.depths:
            for repeat in range(args.repeats):
                for library in libraries:
                    config = dict(case=case, library=library, depth=depth, repeat=repeat,
                                  threads=args.threads, cache=args.cache,
                                  trees=args.trees or spec["trees"], fraction=spec["fraction"],
                                  learning_rate=spec["learning_rate"],
                                  min_samples_leaf=args.min_samples_leaf,
                                  row_subsample=args.row_subsample)
                    done = subprocess.run([sys.executable, __file__, "--child",
                                           json.dumps(config)], capture_output=True, text=True)
                    if done.returncode != 0:
                        print(f"  {case} {library} depth {depth} failed: "
                              f"{done.stderr[-400:]}", flush=True)
                        continue
                    runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
                    run = runs[-1]
                    print(f"  {case} depth {depth} {library:9s} repeat {repeat}: setup "
                          f"{run['setup_seconds']:.1f} s, {run['seconds_per_tree']:.4g} s/tree, "
                          f"steady {run['steady_seconds_per_tree']:.4g} s/tree, "
                          f"peak {run['peak_gib']:.2f} GiB", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(runs, indent=1))
    report(runs)


def report(runs: list) -> None:
    """Markdown table: medians per (case, depth, library) and each library's
    s/tree over PackBoost's (> 1: PackBoost faster), for both samplings, on
    the steady per-tree times (the whole fit's s/tree beside them)."""
    print("\n| case | depth | library | setup s | s/tree (fit) | steady s/tree | vs packboost "
          "| vs packboost-pack | peak GiB above data | runs |")
    print("| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    keys = sorted({(r["case"], r["depth"]) for r in runs},
                  key=lambda key: (list(CASES).index(key[0]), key[1]))

    def median_per_tree(case, depth, library, field="steady_seconds_per_tree"):
        values = [r[field] for r in runs
                  if (r["case"], r["depth"], r["library"]) == (case, depth, library)]
        return statistics.median(values) if values else float("nan")

    for case, depth in keys:
        for library in LIBRARIES:
            mine = [r for r in runs if (r["case"], r["depth"], r["library"])
                    == (case, depth, library)]
            if not mine:
                continue
            per_tree = median_per_tree(case, depth, library)
            # "-" where that PackBoost sampling was not run
            ratios = [per_tree / median_per_tree(case, depth, ours)
                      for ours in ("packboost", "packboost-pack")]
            ratios = ["-" if ratio != ratio else f"{ratio:.2f}x" for ratio in ratios]
            fit_per_tree = median_per_tree(case, depth, library, "seconds_per_tree")
            print(f"| {case} | {depth} | {library} | "
                  f"{statistics.median(r['setup_seconds'] for r in mine):.1f} | "
                  f"{fit_per_tree:.4g} | {per_tree:.4g} | {ratios[0]} | {ratios[1]} | "
                  f"{statistics.median(r['peak_gib'] for r in mine):.2f} | {len(mine)} |")


if __name__ == "__main__":
    main()
