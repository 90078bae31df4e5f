"""Two builds of PackBoost, same fits, alternating: is a change slower, and are its trees the same?

    python benchmarks/compare_builds.py --before /tmp/venv-before/bin/python \\
        --after .venv/bin/python --sizes small medium --repeats 5

``--before`` and ``--after`` are Python interpreters, each with its own
packboost installed (e.g. a virtual environment with the last release, and one
with the working tree). Each fit is a fresh subprocess; runs alternate
(before, after, before, ...) so that the machine's drift hits both alike. The
report gives, per size, the median fit seconds of each build, the median of the
per-pair ratios (before / after: > 1 means the change is faster), whether
the fitted node arrays and predictions are bit-identical between the builds,
whether the splits alone are (features, thresholds, missing sides and tree
shapes: a change of the scores' last bits leaves them), and each build's
mean per-era correlation on the held-out eras.

On a shared machine a fit's wall time moves by tens of percent from one minute
to the next. ``--fits K`` fits K times per subprocess and keeps the fastest (as
``timeit`` does: the runs the machine slowed least), and the report adds the
same for the process's CPU seconds, which other jobs on the machine do not
stretch (with ``--threads 1`` the CPU time is the fit's work alone; with more
threads it also counts OpenMP's waiting workers).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

SIZES = {
    "small": dict(n_rows=200_000, n_features=200, n_eras=200),
    "medium": dict(n_rows=1_000_000, n_features=400, n_eras=400),
}

CHILD = r"""
import hashlib, json, sys, time
import numpy as np
from packboost import PackBoostRegressor
from packboost.datasets import make_numerai_like

config = json.loads(sys.argv[1])
data = make_numerai_like(**config["size"], random_state=0)
train, test = data.split_by_era(0.25)
model = PackBoostRegressor(n_estimators=config["rounds"], pack_size=config["pack_size"],
                           max_depth=6,
                           layer_feature_fraction=config["feature_fraction"],
                           n_jobs=config["threads"], random_state=0)
seconds = cpu_seconds = float("inf")
for _ in range(config["fits"]):
    start, start_cpu = time.perf_counter(), time.process_time()
    model.fit(train.X, train.y, era=train.era)
    seconds = min(seconds, time.perf_counter() - start)
    cpu_seconds = min(cpu_seconds, time.process_time() - start_cpu)
digest = hashlib.sha256()
for name in sorted(model.ensemble_.nodes):
    digest.update(np.ascontiguousarray(model.ensemble_.nodes[name]).tobytes())
prediction = model.predict(test.X)
digest.update(prediction.tobytes())
splits = hashlib.sha256()
for name in ("feature", "threshold_bin", "missing_left", "left_child"):
    splits.update(np.ascontiguousarray(model.ensemble_.nodes[name]).tobytes())
corr = [np.corrcoef(prediction[test.era == era], test.y[test.era == era])[0, 1]
        for era in np.unique(test.era)]
print(json.dumps({"fit_seconds": seconds, "cpu_seconds": cpu_seconds,
                  "model_sha256": digest.hexdigest(), "splits_sha256": splits.hexdigest(),
                  "held_out_corr": float(np.mean(corr))}))
"""


def run(python: str, config: dict) -> dict:
    result = subprocess.run([python, "-c", CHILD, json.dumps(config)], check=True,
                            capture_output=True, text=True, cwd="/")
    return json.loads(result.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", required=True, help="Python with the baseline build")
    parser.add_argument("--after", default=sys.executable, help="Python with the new build")
    parser.add_argument("--sizes", nargs="+", choices=SIZES, default=["small", "medium"])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=25, help="rounds (packs)")
    parser.add_argument("--pack-size", type=int, default=4)
    parser.add_argument("--feature-fraction", type=float, default=0.1)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--fits", type=int, default=1,
                        help="fits per subprocess, the fastest kept")
    args = parser.parse_args()
    if args.fits < 1:
        parser.error("--fits must be at least 1")

    print("| size | before s (median) | after s (median) | before/after, median of pairs "
          "(range) | CPU s before / after (medians) | CPU before/after, median of pairs "
          "(range) | same trees | same splits | held-out corr before / after |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | --- | --- | --- |")
    for size in args.sizes:
        config = dict(size=SIZES[size], rounds=args.rounds, fits=args.fits,
                      pack_size=args.pack_size,
                      feature_fraction=args.feature_fraction, threads=args.threads)
        results, digests, split_digests = {"before": [], "after": []}, set(), set()
        for _ in range(args.repeats):
            first = run(args.before, config)
            second = run(args.after, config)
            results["before"].append(first)
            results["after"].append(second)
            digests.update((first["model_sha256"], second["model_sha256"]))
            split_digests.update((first["splits_sha256"], second["splits_sha256"]))
            print(f"# {size}: before {first['fit_seconds']:.2f} s "
                  f"({first['cpu_seconds']:.2f} CPU), after {second['fit_seconds']:.2f} s "
                  f"({second['cpu_seconds']:.2f} CPU)", file=sys.stderr, flush=True)
        cells = []
        for key in ("fit_seconds", "cpu_seconds"):
            before = [result[key] for result in results["before"]]
            after = [result[key] for result in results["after"]]
            ratios = [b / a for b, a in zip(before, after, strict=True)]
            cells.append(f"{statistics.median(before):.2f} | {statistics.median(after):.2f}"
                         if key == "fit_seconds" else
                         f"{statistics.median(before):.2f} / {statistics.median(after):.2f}")
            cells.append(f"{statistics.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f})")
        corr = (f"{results['before'][0]['held_out_corr']:.6f} / "
                f"{results['after'][0]['held_out_corr']:.6f}")
        print(f"| {size} | {' | '.join(cells)} | {'yes' if len(digests) == 1 else 'NO'} | "
              f"{'yes' if len(split_digests) == 1 else 'NO'} | {corr} |", flush=True)


if __name__ == "__main__":
    main()
