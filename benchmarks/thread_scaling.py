"""PackBoost's thread scaling, and whether it oversubscribes next to other OpenMP users.

    python benchmarks/thread_scaling.py --size medium --repeats 3

Two measurements on Numerai-like data (``make_numerai_like``, last quarter of
eras held out, depth 6, ``layer_feature_fraction`` 0.1, DES defaults):

* **scaling**: the same fit with ``n_jobs`` = 1 and 2 (each in a fresh
  subprocess, alternating), median fit time and the speed-up;
* **shared process**: the 2-thread fit in a process that has first imported
  LightGBM, XGBoost and scikit-learn and fitted a small model with each, so
  that their OpenMP runtimes and thread pools are alive -- against the same fit
  in a process that imported nothing else. A sampling thread records how many
  threads the process has while PackBoost fits; ``threadpoolctl`` lists the
  OpenMP runtimes loaded. Oversubscription would show as a slower fit there.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import threading
import time

SIZES = {
    "tiny": dict(n_rows=20_000, n_features=50, n_eras=40),
    "small": dict(n_rows=200_000, n_features=200, n_eras=200),
    "medium": dict(n_rows=1_000_000, n_features=400, n_eras=400),
}


def _warm_peers() -> list[str]:
    """Fit a small model with every installed peer, leaving their pools alive."""
    import numpy as np

    rng = np.random.default_rng(0)
    X = rng.integers(0, 5, size=(5_000, 20)).astype(np.float32)
    y = X[:, 0] + rng.normal(size=5_000)
    warmed = []
    try:
        import lightgbm

        lightgbm.LGBMRegressor(n_estimators=20, n_jobs=2, verbose=-1).fit(X, y)
        warmed.append("lightgbm")
    except ImportError:
        pass
    try:
        import xgboost

        xgboost.XGBRegressor(n_estimators=20, n_jobs=2, tree_method="hist").fit(X, y)
        warmed.append("xgboost")
    except ImportError:
        pass
    try:
        from sklearn.ensemble import HistGradientBoostingRegressor

        HistGradientBoostingRegressor(max_iter=20).fit(X, y)
        warmed.append("sklearn")
    except ImportError:
        pass
    return warmed


def _openmp_runtimes() -> list[str]:
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return ["(threadpoolctl not installed)"]
    return sorted({os.path.basename(info["filepath"]) for info in threadpool_info()
                   if info.get("user_api") == "openmp"})


def run_one(config: dict) -> dict:
    """Child process: optionally warm the peers, then time one PackBoost fit."""
    warmed = _warm_peers() if config["with_peers"] else []
    from packboost import PackBoostRegressor
    from packboost.datasets import make_numerai_like

    data = make_numerai_like(**SIZES[config["size"]], random_state=0)
    train, _ = data.split_by_era(0.25)
    model = PackBoostRegressor(n_estimators=config["rounds"], max_depth=6,
                               layer_feature_fraction=0.1, n_jobs=config["threads"],
                               random_state=0)
    peak_threads = 0
    fitting = True

    def sample_threads():
        nonlocal peak_threads
        while fitting:
            peak_threads = max(peak_threads, len(os.listdir("/proc/self/task")))
            time.sleep(0.01)

    sampler = threading.Thread(target=sample_threads, daemon=True)
    sampler.start()
    start = time.perf_counter()
    model.fit(train.X, train.y, era=train.era)
    seconds = time.perf_counter() - start
    fitting = False
    sampler.join()
    return dict(config, fit_seconds=seconds, peak_threads=peak_threads, warmed=warmed,
                openmp_runtimes=_openmp_runtimes())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=SIZES, default="small")
    parser.add_argument("--rounds", type=int, default=25, help="rounds of pack 4")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(run_one(json.loads(args.child))))
        return

    print(f"# {time.strftime('%Y-%m-%d')} {platform.node()} {os.cpu_count()} cpus | "
          f"python {sys.argv[0]} " + " ".join(sys.argv[1:]), flush=True)
    cases = [("1 thread", 1, False), ("2 threads", 2, False),
             ("2 threads, peers warmed in the process", 2, True)]
    runs = {name: [] for name, _, _ in cases}
    details = {}
    for repeat in range(args.repeats):
        for name, threads, with_peers in cases:
            config = dict(size=args.size, rounds=args.rounds, threads=threads,
                          with_peers=with_peers, repeat=repeat)
            done = subprocess.run([sys.executable, __file__, "--child", json.dumps(config)],
                                  capture_output=True, text=True)
            if done.returncode != 0:
                print(f"{name} failed: {done.stderr[-800:]}", file=sys.stderr)
                continue
            result = json.loads(done.stdout.strip().splitlines()[-1])
            runs[name].append(result["fit_seconds"])
            details[name] = result
            print(f"  {name:40s} repeat {repeat}: fit {result['fit_seconds']:.2f} s, "
                  f"peak threads {result['peak_threads']}", flush=True)

    one = statistics.median(runs["1 thread"]) if runs["1 thread"] else float("nan")
    alone = statistics.median(runs["2 threads"]) if runs["2 threads"] else float("nan")
    print(f"\nmedians of {args.repeats} alternating runs, {args.size}, "
          f"{args.rounds} rounds x pack 4")
    print("| case | fit s | vs 1 thread | vs 2 threads alone | peak threads | OpenMP runtimes |")
    print("| --- | ---: | ---: | ---: | ---: | --- |")
    for name, _, _ in cases:
        if not runs[name]:
            continue
        fit = statistics.median(runs[name])
        info = details[name]
        extra = f" (warmed: {', '.join(info['warmed'])})" if info["warmed"] else ""
        print(f"| {name}{extra} | {fit:.2f} | {one / fit:.2f}x | {alone / fit:.2f}x | "
              f"{info['peak_threads']} | {', '.join(info['openmp_runtimes'])} |")


if __name__ == "__main__":
    main()
