"""Several targets in one fit vs one fit per target (issue 17 item 5).

    python benchmarks/bench_outputs.py --rows 100000 --features 100 --targets 1 4 8

For each k, one fit of ``PackBoostRegressor`` on a (rows x k) target matrix
against k fits on one column each, alternating, same parameters and seed (so
the k-target model's trees are exactly the k single fits', docs/packs.md §10:
only the time differs). The joint fit bins X once and grows each round's k
packs on one backend (its buffers allocated once); the separate fits bin X
k times. Targets: ``make_numerai_like``'s target plus independent noise, one
noise draw per extra target. Reports medians over ``--repeats`` of the wall
time and of the process's CPU time (all threads; steadier than the wall time
on a shared machine, where other processes take turns on the cores), and
the largest peak resident memory of the process during a joint fit, above
what it held before (the data and ``Y``), and whether the joint model
predicts every target as its separate fit does (the same trees; with
``--unknown`` and sampling on, only the complete target's are).

``--unknown F``: extra target j is NaN in its first ``F * j / (k - 1)`` of
the eras (auxiliary targets that start later); the separate fits then train
each target on its known rows only, as the joint fit does
(packboost/_unknown_targets.py).

``--one-by-one``: also time the joint fit with the round's packs grown one
after the other (``CpuBackend.grows_outputs_in_one_pass`` off): the same
trees without the shared pass, in the same run.

``--held-out F``: generate ``F`` more of the eras (and rows) and hold them
out; report the joint model's mean per-era Pearson correlation there, of
each target's prediction with the first (main) target, averaged over the
targets (the same models whatever the pass, so the same numbers).

``--wide``: also one fit of the first target alone with ``pack_size`` k x 4
and the same rounds: one pass over the rows per depth for all ``4k`` trees,
which is what a kernel growing the round's k packs in one pass would do
(docs/packs.md §10). Its trees are not the k-target fit's (one target, a
smaller shrinkage per tree), so it estimates that kernel's time, no more;
where the trees of a pack draw whole eras it is optimistic, because a root
era is summed once for every tree holding it (``share_equal_rows``), while
k outputs' trees have k different gradients. ``--row-subsample 0.999``
turns that sharing off in every fit (no two trees then hold the same rows
of an era) for a like-for-like estimate.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time

import numpy as np

# The same peak-memory reading as bench_speed.py (this folder is on sys.path
# when the script runs).
from bench_speed import _reset_peak_rss, _rss_kib

from packboost import PackBoostRegressor
from packboost.backends.cpu import CpuBackend
from packboost.datasets import make_numerai_like
from packboost.metrics import per_era_correlation


def targets(y: np.ndarray, k: int, seed: int = 0, era=None, unknown: float = 0.0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    columns = [y] + [y + rng.normal(0, np.std(y), len(y)) for _ in range(k - 1)]
    Y = np.column_stack(columns).astype(np.float64)
    if unknown > 0 and k > 1:
        codes = np.unique(era, return_inverse=True)[1].reshape(-1)
        for column in range(1, k):
            Y[codes < unknown * column / (k - 1) * (codes.max() + 1), column] = np.nan
    return Y


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--features", type=int, default=100)
    parser.add_argument("--eras", type=int, default=100)
    parser.add_argument("--targets", type=int, nargs="+", default=[1, 4, 8])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--unknown", type=float, default=0.0,
                        help="extra targets NaN in up to this fraction of the eras")
    parser.add_argument("--row-subsample", type=float, default=1.0)
    parser.add_argument("--one-by-one", action="store_true",
                        help="also time the joint fit without the shared pass")
    parser.add_argument("--held-out", type=float, default=0.0,
                        help="hold out this fraction more eras; report the per-era corr there")
    parser.add_argument("--wide", action="store_true",
                        help="also time one target with pack_size 4k (see the docstring)")
    args = parser.parse_args()

    held_eras = int(round(args.held_out * args.eras))
    data = make_numerai_like(n_rows=args.rows + int(round(args.held_out * args.rows)),
                             n_features=args.features, n_eras=args.eras + held_eras,
                             random_state=0)
    valid = None
    if held_eras:
        # Rows are era-sorted: the last eras are held out (slices keep X's layout).
        n_train = int(np.searchsorted(np.asarray(data.era), args.eras))
        valid = (data.X[n_train:], data.y[n_train:], data.era[n_train:])
        data = argparse.Namespace(X=data.X[:n_train], y=data.y[:n_train],
                                  era=data.era[:n_train])
    params = dict(n_estimators=args.rounds, max_depth=6, pack_size=4, random_state=0,
                  n_jobs=args.threads, row_subsample=args.row_subsample)
    print(f"# {platform.node()} {platform.processor() or platform.machine()}, "
          f"{args.threads} threads; {args.rows} rows x {args.features} uint8 features, "
          f"{args.eras} eras, {args.rounds} rounds x pack 4, depth 6"
          + (f"; extra targets unknown in up to {args.unknown:.0%} of the eras"
             if args.unknown else "")
          + (f"; row_subsample {args.row_subsample}" if args.row_subsample < 1 else ""))
    # One-off costs (lazy imports, the OpenMP pool) out of the first timing.
    PackBoostRegressor(**dict(params, n_estimators=1)).fit(data.X, data.y, era=data.era)
    wide_columns = " pack 4k, one target: wall s, CPU s | pack 4k / one (wall, CPU) |"
    one_by_one_columns = (" one fit, packs one by one: wall s, CPU s "
                          "| one by one / one (wall, CPU) | same as one by one |")
    print("| k targets | one fit: wall s, CPU s | k separate fits: wall s, CPU s "
          "| separate / one (wall, CPU) | one fit: peak GiB | same predictions |"
          + (one_by_one_columns if args.one_by_one else "")
          + (" held-out corr |" if valid is not None else "")
          + (wide_columns if args.wide else ""))
    print("| ---: | ---: | ---: | ---: | ---: | --- |"
          + (" ---: | ---: | --- |" if args.one_by_one else "")
          + (" ---: |" if valid is not None else "")
          + (" ---: | ---: |" if args.wide else ""))
    for k in args.targets:
        Y = targets(data.y, k, era=data.era, unknown=args.unknown)
        kinds = (("joint", "separate") + (("one-by-one",) if args.one_by_one else ())
                 + (("wide",) if args.wide else ()))
        times = {kind: [] for kind in kinds}
        peak_gib = 0.0
        for repeat in range(args.repeats):
            order = kinds if repeat % 2 == 0 else kinds[::-1]
            for kind in order:
                if kind == "joint":
                    _reset_peak_rss()
                    before = _rss_kib("VmRSS")
                wall, cpu = time.perf_counter(), time.process_time()
                if kind == "joint":
                    joint = PackBoostRegressor(**params).fit(data.X, Y if k > 1 else Y[:, 0],
                                                             era=data.era)
                elif kind == "one-by-one":
                    CpuBackend.grows_outputs_in_one_pass = False
                    try:
                        one_by_one = PackBoostRegressor(**params).fit(
                            data.X, Y if k > 1 else Y[:, 0], era=data.era)
                    finally:
                        CpuBackend.grows_outputs_in_one_pass = True
                elif kind == "wide":
                    PackBoostRegressor(**dict(params, pack_size=4 * k)).fit(
                        data.X, Y[:, 0], era=data.era)
                else:
                    separate = []
                    for column in range(k):
                        known = ~np.isnan(Y[:, column])
                        separate.append(PackBoostRegressor(**params).fit(
                            data.X[known], Y[known, column], era=data.era[known]))
                times[kind].append((time.perf_counter() - wall, time.process_time() - cpu))
                if kind == "joint":
                    peak_gib = max(peak_gib, (_rss_kib("VmHWM") - before) / 2**20)
        # The joint model's trees are the separate fits' where the draws
        # are (complete targets, or every sampling off): the same predictions.
        predicted = joint.predict(data.X).reshape(len(data.X), -1)
        same = all(np.array_equal(predicted[:, column], model.predict(data.X))
                   for column, model in enumerate(separate))
        if valid is not None:
            X_valid, y_valid, era_valid = valid
            scores = joint.predict(X_valid).reshape(len(X_valid), -1)
            corr = np.mean([np.nanmean(per_era_correlation(y_valid, scores[:, column],
                                                           era_valid)[1])
                            for column in range(scores.shape[1])])
        if args.one_by_one:
            same_apart = np.array_equal(predicted, one_by_one.predict(data.X).reshape(
                len(data.X), -1))
        joint = [statistics.median(values) for values in zip(*times["joint"], strict=True)]
        separate = [statistics.median(values)
                    for values in zip(*times["separate"], strict=True)]
        line = (f"| {k} | {joint[0]:.2f}, {joint[1]:.2f} | {separate[0]:.2f}, {separate[1]:.2f} "
                f"| {separate[0] / joint[0]:.2f}x, {separate[1] / joint[1]:.2f}x "
                f"| {peak_gib:.2f} | {'yes' if same else 'no'} |")
        if args.one_by_one:
            apart = [statistics.median(values)
                     for values in zip(*times["one-by-one"], strict=True)]
            line += (f" {apart[0]:.2f}, {apart[1]:.2f} "
                     f"| {apart[0] / joint[0]:.2f}x, {apart[1] / joint[1]:.2f}x "
                     f"| {'yes' if same_apart else 'no'} |")
        if valid is not None:
            line += f" {corr:.4f} |"
        if args.wide:
            wide = [statistics.median(values) for values in zip(*times["wide"], strict=True)]
            line += (f" {wide[0]:.2f}, {wide[1]:.2f} "
                     f"| {wide[0] / joint[0]:.2f}x, {wide[1] / joint[1]:.2f}x |")
        print(line, flush=True)


if __name__ == "__main__":
    main()
