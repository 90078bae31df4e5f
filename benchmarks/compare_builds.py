"""Two builds of PackBoost, same fits, alternating: is a change slower, and are its trees the same?

    python benchmarks/compare_builds.py --before /tmp/venv-before/bin/python \\
        --after .venv/bin/python --sizes small medium --repeats 5

``--before`` and ``--after`` are Python interpreters, each with its own
packboost installed (e.g. a virtual environment with the last release, and one
with the working tree). Each fit is a fresh subprocess; runs alternate
(before, after, before, ...) so that the machine's drift hits both alike. The
report gives, per size, the median fit seconds of each build, the median of the
per-pair ratios (before / after: > 1 means the change is faster) and whether
the fitted node arrays and predictions are bit-identical between the builds.
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
model = PackBoostRegressor(n_estimators=config["rounds"], pack_size=4, max_depth=6,
                           layer_feature_fraction=config["feature_fraction"],
                           n_jobs=config["threads"], random_state=0)
start = time.perf_counter()
model.fit(train.X, train.y, era=train.era)
seconds = time.perf_counter() - start
digest = hashlib.sha256()
for name in sorted(model.ensemble_.nodes):
    digest.update(np.ascontiguousarray(model.ensemble_.nodes[name]).tobytes())
digest.update(model.predict(test.X).tobytes())
print(json.dumps({"fit_seconds": seconds, "model_sha256": digest.hexdigest()}))
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
    parser.add_argument("--rounds", type=int, default=25, help="rounds of pack 4")
    parser.add_argument("--feature-fraction", type=float, default=0.1)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()

    print("| size | before s (median) | after s (median) | before/after, median of pairs "
          "(range) | same trees |")
    print("| --- | ---: | ---: | ---: | --- |")
    for size in args.sizes:
        config = dict(size=SIZES[size], rounds=args.rounds,
                      feature_fraction=args.feature_fraction, threads=args.threads)
        before, after, digests = [], [], set()
        for _ in range(args.repeats):
            first = run(args.before, config)
            second = run(args.after, config)
            before.append(first["fit_seconds"])
            after.append(second["fit_seconds"])
            digests.update((first["model_sha256"], second["model_sha256"]))
            print(f"# {size}: before {first['fit_seconds']:.2f} s, "
                  f"after {second['fit_seconds']:.2f} s", file=sys.stderr, flush=True)
        ratios = [b / a for b, a in zip(before, after, strict=True)]
        print(f"| {size} | {statistics.median(before):.2f} | {statistics.median(after):.2f} "
              f"| {statistics.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f}) "
              f"| {'yes' if len(digests) == 1 else 'NO'} |", flush=True)


if __name__ == "__main__":
    main()
