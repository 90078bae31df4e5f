"""What monotone and interaction constraints cost a fit (docs/des.md §14).

    python benchmarks/bench_constraints.py --rows 100000 --features 100 --repeats 3

Fits the same Numerai-like data with no constraints, with monotone
constraints on a share of the features, with interaction sets, and with
both, alternating the configurations in every repeat (a shared machine's
load then hits each alike), and prints the best CPU time of each with its
ratio to the unconstrained fit. ``n_jobs=1`` and process CPU time, so the
numbers stay comparable on a machine shared with other jobs.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from packboost import PackBoostRegressor
from packboost.datasets import make_numerai_like


def configurations(n_features: int, monotone_share: float, n_sets: int) -> dict:
    rng = np.random.default_rng(0)
    monotone = np.zeros(n_features, dtype=int)
    chosen = rng.choice(n_features, size=max(1, int(monotone_share * n_features)),
                        replace=False)
    monotone[chosen] = rng.choice([-1, 1], size=len(chosen))
    # Overlapping sets covering most features (a few left alone).
    order = rng.permutation(n_features)
    size = max(2, n_features // n_sets)
    sets = [sorted(order[k * size: (k + 1) * size + 2].tolist()) for k in range(n_sets)]
    return {
        "none": {},
        "monotone": dict(monotone_constraints=monotone.tolist()),
        "interaction": dict(interaction_constraints=sets),
        "both": dict(monotone_constraints=monotone.tolist(), interaction_constraints=sets),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--features", type=int, default=100)
    parser.add_argument("--eras", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--max-depth", type=int, default=6)
    parser.add_argument("--monotone-share", type=float, default=0.2)
    parser.add_argument("--sets", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    data = make_numerai_like(n_rows=args.rows, n_features=args.features, n_eras=args.eras,
                             random_state=0)
    configs = configurations(args.features, args.monotone_share, args.sets)
    times = {name: [] for name in configs}
    for _ in range(args.repeats):
        for name, extra in configs.items():
            model = PackBoostRegressor(n_estimators=args.rounds, max_depth=args.max_depth,
                                       random_state=0, n_jobs=1, **extra)
            started = time.process_time()
            model.fit(data.X, data.y, era=data.era)
            times[name].append(time.process_time() - started)
    base = min(times["none"])
    print(f"{args.rows} rows x {args.features} features, {args.eras} eras, "
          f"{args.rounds} rounds, depth {args.max_depth}, n_jobs=1, best of {args.repeats}")
    print("| constraints | CPU s | vs none |")
    print("| --- | ---: | ---: |")
    for name, values in times.items():
        print(f"| {name} | {min(values):.2f} | {min(values) / base:.3f} |")


if __name__ == "__main__":
    main()
