"""DES split scoring (csrc/des.h via _split.pyx) vs the NumPy oracle."""

import itertools

import numpy as np
import pytest

from packboost import _histogram, _partition, _split
from packboost._fixed_point import to_fixed_point

from conftest import DEFAULT_SPLIT_PARAMS, make_binned_problem
from oracles import reference as _reference

PARAM_GRID = [
    dict(era_gain=era_gain, era_weighting=weighting, lambda_dro=dro, lambda_dir=dir_,
         dir_tanh_scale=scale)
    for era_gain, weighting, (dro, dir_, scale) in itertools.product(
        ["realized", "newton"], ["equal", "count"],
        [(0.0, 0.0, 1.0), (0.5, 0.0, 1.0), (0.25, 1.0, 1.0), (0.25, 1.0, 0.0), (1.0, 2.0, 0.3)])
]


def tile_histogram(data, g, h, feature):
    """(n_eras, n_bins + 1) histogram of every row of the problem."""
    node_of_row = np.zeros((data.n_rows, 1), dtype=np.int32)
    hist = _histogram.build_histograms(data.X_binned, feature, g, h, data.all_rows,
                                       data.era_offsets, node_of_row, np.ones(1, np.uint8), 1,
                                       int(data.n_bins[feature]) + 1)
    return hist[:, 0, :]


def reference_best(hist, n_bins, params):
    return _reference.first_best(_reference.candidates(
        hist["sum_gradients"], hist["sum_hessians"], hist["count"].astype(float), n_bins,
        params))


@pytest.mark.parametrize("params", PARAM_GRID, ids=lambda p: "-".join(map(str, p.values())))
@pytest.mark.parametrize("shape", [(1, 1), (5, 2), (60, 7), (400, 30), (3000, 120)])
def test_best_split_matches_reference(params, shape):
    n_rows, n_eras = shape
    params = {**DEFAULT_SPLIT_PARAMS, **params, "era_alpha": 3.0,
              "min_samples_leaf": 1 if n_rows < 100 else 5}
    data, g, h = make_binned_problem(n_rows * 7 + n_eras, n_rows, 3, n_eras,
                                     one_sided_eras=True)
    for feature in range(3):
        hist = tile_histogram(data, g, h, feature)
        n_bins = int(data.n_bins[feature])
        got = _split.score_histogram(hist, n_bins, params)
        want = reference_best(hist, n_bins, params)
        if want is None:
            assert got is None
            continue
        assert got is not None
        assert (got["threshold"], got["missing_left"]) == (want["threshold"],
                                                           want["missing_left"])
        # std is only computed when it counts (lambda_dro > 0 or newton
        # gains), the direction only when lambda_dir > 0.
        keys = ["score", "gain", "mean"]
        if params["lambda_dro"] > 0 or params["era_gain"] == "newton":
            keys.append("std")
        if params["lambda_dir"] > 0:
            keys.append("direction")
        for key in keys:
            np.testing.assert_allclose(got[key], want[key], rtol=1e-9, atol=1e-12,
                                       err_msg=key)


@pytest.mark.parametrize("reg_alpha", [0.3, 3.0, 30.0])
@pytest.mark.parametrize("params", PARAM_GRID[::3], ids=lambda p: "-".join(map(str, p.values())))
@pytest.mark.parametrize("shape", [(60, 7), (400, 30)])
def test_best_split_with_l1_matches_reference(params, shape, reg_alpha):
    """reg_alpha: soft-thresholded sums in the pooled gain and every era's gain."""
    n_rows, n_eras = shape
    params = {**DEFAULT_SPLIT_PARAMS, **params, "reg_alpha": reg_alpha, "era_alpha": 3.0,
              "min_samples_leaf": 3}
    data, g, h = make_binned_problem(n_rows + n_eras, n_rows, 3, n_eras)
    for feature in range(3):
        hist = tile_histogram(data, g, h, feature)
        n_bins = int(data.n_bins[feature])
        got = _split.score_histogram(hist, n_bins, params)
        want = reference_best(hist, n_bins, params)
        assert (got is None) == (want is None)
        if want is None:
            continue
        assert (got["threshold"], got["missing_left"]) == (want["threshold"],
                                                           want["missing_left"])
        for key in ("score", "gain", "mean"):
            np.testing.assert_allclose(got[key], want[key], rtol=1e-9, atol=1e-12,
                                       err_msg=key)


@pytest.mark.parametrize("reg_alpha", [0.0, 0.5, 4.0])
def test_realized_era_gains_add_up_to_the_pooled_l1_gain(reg_alpha):
    """With L1 the eras share a side's penalty by hessian (csrc/des.h), so their
    realized gains still sum to the pooled gain: equal weights, every era present,
    mean = gain / n_eras."""
    data, g, h = make_binned_problem(3, 2000, 2, 8, missing_rate=0.0)
    params = {**DEFAULT_SPLIT_PARAMS, "reg_alpha": reg_alpha, "lambda_dro": 0.0,
              "lambda_dir": 0.0, "min_samples_leaf": 20}
    hist = tile_histogram(data, g, h, 0)
    assert (hist["count"].sum(axis=1) > 0).all()
    best = _split.score_histogram(hist, int(data.n_bins[0]), params)
    np.testing.assert_allclose(best["mean"] * data.n_eras, best["gain"], rtol=1e-9)
    left = hist[:, : best["threshold"] + 1]
    sums = [(hist["sum_gradients"].sum(), hist["sum_hessians"].sum()),
            (left["sum_gradients"].sum(), left["sum_hessians"].sum())]
    (G, H), (G_L, H_L) = sums
    phi = [_reference.phi(g_, h_, 1.0, reg_alpha) for g_, h_ in
           ((G_L, H_L), (G - G_L, H - H_L), (G, H))]
    np.testing.assert_allclose(best["gain"], phi[0] + phi[1] - phi[2], rtol=1e-9)


def test_constraints_reject_small_children(split_params):
    data, g, h = make_binned_problem(1, 50, 1, 3, missing_rate=0.0)
    hist = tile_histogram(data, g, h, 0)
    n_bins = int(data.n_bins[0])
    assert _split.score_histogram(hist, n_bins, {**split_params, "min_samples_leaf": 26}) is None
    assert _split.score_histogram(hist, n_bins,
                                  {**split_params, "min_child_weight": 1e9}) is None
    best = _split.score_histogram(hist, n_bins, {**split_params, "min_samples_leaf": 10})
    counts = hist["count"].sum(axis=0)
    left = counts[: best["threshold"] + 1].sum()
    assert left >= 10 and counts.sum() - left >= 10


def test_realized_gains_sum_to_pooled_gain(split_params):
    """Equal weights, no risk or direction: the mean is pooled gain / |E_S|."""
    params = {**split_params, "lambda_dro": 0.0, "lambda_dir": 0.0, "reg_lambda": 3.0}
    data, g, h = make_binned_problem(3, 800, 2, 25)
    hist = tile_histogram(data, g, h, 0)
    got = _split.score_histogram(hist, int(data.n_bins[0]), params)
    n_present = int((hist["count"].sum(axis=1) > 0).sum())
    np.testing.assert_allclose(got["mean"] * n_present, got["gain"], rtol=1e-10)


@pytest.mark.parametrize("era_gain", ["realized", "newton"])
def test_one_era_reduces_to_newton_gain(era_gain, split_params):
    params = {**split_params, "era_gain": era_gain, "lambda_dro": 0.0, "lambda_dir": 0.0}
    data, g, h = make_binned_problem(4, 500, 3, 1)
    for feature in range(3):
        hist = tile_histogram(data, g, h, feature)
        got = _split.score_histogram(hist, int(data.n_bins[feature]), params)
        pooled = _reference.first_best(_reference.candidates(
            hist["sum_gradients"], hist["sum_hessians"], hist["count"].astype(float),
            int(data.n_bins[feature]), params, pooled_gain_only=True))
        np.testing.assert_allclose(got["score"], pooled["gain"], rtol=1e-10)
        assert (got["threshold"], got["missing_left"]) == (pooled["threshold"],
                                                           pooled["missing_left"])


def test_stable_moments_with_large_common_offset(split_params):
    """Era gains that share a huge offset: Welford keeps the small spread that
    E[x^2] - E[x]^2 would lose entirely."""
    params = {**split_params, "era_gain": "newton", "lambda_dir": 0.0, "reg_lambda": 0.0}
    n_eras, rng = 200, np.random.default_rng(5)
    hist = np.zeros((n_eras, 3), dtype=_histogram.HIST_DTYPE)
    # Every era: bin 0 has gradient +G, bin 1 -G (huge gain), plus tiny noise.
    big = 1e7
    hist["sum_gradients"][:, 0] = big + rng.normal(scale=1e-2, size=n_eras)
    hist["sum_gradients"][:, 1] = -big
    hist["sum_hessians"][:, :2] = 1.0
    hist["count"][:, :2] = 1
    got = _split.score_histogram(hist, 2, params)
    want = reference_best(hist, 2, params)
    assert got["threshold"] == want["threshold"] == 0
    assert want["std"] > 0
    np.testing.assert_allclose(got["mean"], want["mean"], rtol=1e-12)
    np.testing.assert_allclose(got["std"], want["std"], rtol=1e-6)
    left_g = hist["sum_gradients"][:, 0]
    era_g = hist["sum_gradients"].sum(axis=1)
    gains = _reference.era_gains(era_g, np.full(n_eras, 2.0), left_g, np.ones(n_eras), 0.0,
                                 "newton")
    naive = np.sqrt(max(0.0, np.mean(gains**2) - np.mean(gains) ** 2))
    assert naive != pytest.approx(want["std"], rel=1e-3)


def test_count_weights_differ_from_equal_when_eras_differ_in_size(split_params):
    rng = np.random.default_rng(11)
    hist = np.zeros((3, 3), dtype=_histogram.HIST_DTYPE)
    # A big era where bin 0 is good and two small eras where it is bad.
    hist["count"] = [[500, 500, 0], [5, 5, 0], [5, 5, 0]]
    hist["sum_hessians"] = hist["count"]
    hist["sum_gradients"] = [[-200, 200, 0], [3, -3, 0], [2.5, -2.5, 0]]
    hist["sum_gradients"] += rng.normal(scale=1e-3, size=(3, 3)) * (hist["count"] > 0)
    equal = _split.score_histogram(hist, 2, {**split_params, "era_weighting": "equal"})
    count = _split.score_histogram(hist, 2, {**split_params, "era_weighting": "count"})
    assert count["mean"] > equal["mean"]
    for params in ({**split_params, "era_weighting": "count", "era_alpha": 7.0},
                   {**split_params, "era_weighting": "equal"}):
        got = _split.score_histogram(hist, 2, params)
        want = reference_best(hist, 2, params)
        np.testing.assert_allclose([got["mean"], got["std"], got["score"]],
                                   [want["mean"], want["std"], want["score"]], rtol=1e-10)
    # Equal-size eras: count weights are equal weights.
    hist_equal = hist.copy()
    hist_equal["count"] = 10
    a = _split.score_histogram(hist_equal, 2, {**split_params, "era_weighting": "equal"})
    b = _split.score_histogram(hist_equal, 2, {**split_params, "era_weighting": "count"})
    np.testing.assert_allclose(a["score"], b["score"], rtol=1e-12)


def test_direction_sees_flipped_eras(split_params):
    """Direction is +1 when all eras agree, lower when some flip; newton
    gains are blind to the flip but realized gains turn negative."""
    hist = np.zeros((4, 3), dtype=_histogram.HIST_DTYPE)
    hist["count"][:, :2] = 10
    hist["sum_hessians"][:, :2] = 10.0
    hist["sum_gradients"][:, 0] = [-5.0, -5.0, -5.0, -5.0]
    hist["sum_gradients"][:, 1] = [5.0, 5.0, 5.0, 5.0]
    agree = _split.score_histogram(hist, 2, {**split_params, "dir_tanh_scale": 0.0})
    assert agree["direction"] == pytest.approx(1.0)
    hist["sum_gradients"][3] = [5.0, -5.0, 0.0]
    flipped = _split.score_histogram(hist, 2, {**split_params, "dir_tanh_scale": 0.0})
    assert flipped["direction"] == pytest.approx(0.5)
    newton = _split.score_histogram(hist, 2, {**split_params, "era_gain": "newton",
                                              "lambda_dro": 0.0, "lambda_dir": 0.0})
    realized = _split.score_histogram(hist, 2, {**split_params, "lambda_dro": 0.0,
                                                "lambda_dir": 0.0})
    assert realized["mean"] < newton["mean"]


def test_ties_break_by_lower_threshold_then_missing_left(split_params):
    # Symmetric bins: thresholds 0 and 1 of [+1, -1, -1 ... ] mirror; no missing.
    hist = np.zeros((1, 4), dtype=_histogram.HIST_DTYPE)
    hist["count"][0, :3] = 10
    hist["sum_hessians"][0, :3] = 10.0
    hist["sum_gradients"][0, :3] = [4.0, 0.0, -4.0]
    params = {**split_params, "lambda_dro": 0.0, "lambda_dir": 0.0}
    got = _split.score_histogram(hist, 3, params)
    assert got["threshold"] == 0 and got["missing_left"] is True


@pytest.mark.parametrize("era_weighting", ["equal", "count"])
@pytest.mark.parametrize("shape", [(1, 1), (60, 7), (3000, 120)])
def test_between_era_std_matches_reference(shape, era_weighting, split_params):
    """era_std="between": engine and oracle agree for a positive gradient variance."""
    n_rows, n_eras = shape
    params = {**split_params, "era_std": "between", "lambda_dro": 1.0,
              "era_weighting": era_weighting, "era_alpha": 3.0}
    data, g, h = make_binned_problem(n_rows + 11, n_rows, 3, n_eras, one_sided_eras=True)
    variance = float(np.var(g)) if n_rows > 1 else 0.5
    for feature in range(3):
        assert_best_matches_reference(tile_histogram(data, g, h, feature),
                                      int(data.n_bins[feature]), params, variance)


def assert_best_matches_reference(hist, n_bins, params, variance):
    """score_histogram's choice, score, mean and std are the oracle's."""
    got = _split.score_histogram(hist, n_bins, params, variance)
    want = _reference.first_best(_reference.candidates(
        hist["sum_gradients"], hist["sum_hessians"], hist["count"].astype(float), n_bins,
        params, gradient_variance=variance))
    if want is None:
        assert got is None
        return
    assert (got["threshold"], got["missing_left"]) == (want["threshold"], want["missing_left"])
    for key in ("score", "mean", "std"):
        np.testing.assert_allclose(got[key], want[key], rtol=1e-9, atol=1e-12, err_msg=key)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("era_std", ["between", "total"])
@pytest.mark.parametrize("era_weighting", ["equal", "count"])
@pytest.mark.parametrize("lambda_dir", [0.0, 0.5])
def test_best_first_scan_keeps_the_reference_best(seed, era_std, era_weighting, lambda_dir,
                                                   split_params):
    """Many eras and many close candidates (20 bins), where best-first scoring
    skips most era passes: the choice and its numbers are the oracle's, which
    scores every candidate in full."""
    params = {**split_params, "era_std": era_std, "lambda_dro": 2.0, "lambda_dir": lambda_dir,
              "era_weighting": era_weighting, "era_alpha": 3.0, "min_samples_leaf": 5}
    data, g, h = make_binned_problem(100 + seed, 9000, 2, 300, n_bins=20)
    variance = float(np.var(g))
    for feature in range(2):
        assert_best_matches_reference(tile_histogram(data, g, h, feature),
                                      int(data.n_bins[feature]), params, variance)


def _pure_noise_histogram(seed, n_eras=200, rows_per_era=400, effect=0.0, flip=False):
    """Two bins, unit-variance gradients; the left bin's mean gradient is -effect,
    +effect in every fourth era when ``flip``."""
    rng = np.random.default_rng(seed)
    hist = np.zeros((n_eras, 3), dtype=_histogram.HIST_DTYPE)
    for era in range(n_eras):
        side = rng.integers(0, 2, size=rows_per_era)
        sign = -1.0 if flip and era % 4 == 0 else 1.0
        g = rng.standard_normal(rows_per_era) - sign * effect * (side == 0)
        for b in range(2):
            hist[era, b] = (g[side == b].sum(), float((side == b).sum()), int((side == b).sum()))
    return hist


def test_between_era_std_removes_sampling_noise(split_params):
    """Same true effect in every era: the total std is mostly sampling noise,
    the between-era std is close to zero; eras that truly disagree keep it."""
    params = {**split_params, "lambda_dro": 1.0, "lambda_dir": 0.0}
    stable = _pure_noise_histogram(0, effect=0.1)
    total = _split.score_histogram(stable, 2, {**params, "era_std": "total"}, 1.0)
    between = _split.score_histogram(stable, 2, {**params, "era_std": "between"}, 1.0)
    assert total["mean"] == pytest.approx(between["mean"], rel=1e-12)
    assert between["std"] < 0.35 * total["std"]
    assert total["score"] < 0 < between["score"]  # noise alone no longer vetoes the split

    flipping = _pure_noise_histogram(1, effect=0.1, flip=True)
    flip_total = _split.score_histogram(flipping, 2, {**params, "era_std": "total"}, 1.0)
    flip_between = _split.score_histogram(flipping, 2, {**params, "era_std": "between"}, 1.0)
    assert flip_between["std"] > 0.5 * flip_total["std"]
    assert flip_between["std"] > 2.0 * between["std"]


def test_between_era_std_without_variance_is_total(split_params):
    params = {**split_params, "lambda_dro": 1.0}
    data, g, h = make_binned_problem(9, 900, 1, 30)
    hist = tile_histogram(data, g, h, 0)
    n_bins = int(data.n_bins[0])
    assert (_split.score_histogram(hist, n_bins, {**params, "era_std": "between"}, 0.0)
            == _split.score_histogram(hist, n_bins, {**params, "era_std": "total"}, 1.0))
    newton = {**params, "era_gain": "newton"}
    assert (_split.score_histogram(hist, n_bins, {**newton, "era_std": "between"}, 1.0)
            == _split.score_histogram(hist, n_bins, {**newton, "era_std": "total"}, 1.0))


def _best_of_table(data, g, h, n_slots, params, n_threads, best_per_slot, seed, **kwargs):
    from packboost.backends.interface import BestSplits

    fixed = to_fixed_point(g, h, data.era_offsets, 1)
    rng = np.random.default_rng(seed)
    pack_size = 2
    slot_tree = (np.arange(n_slots) % pack_size).astype(np.int32)
    node_of_row = np.full((data.n_rows, pack_size), -1, dtype=np.int32)
    for tree in range(pack_size):
        own = np.flatnonzero(slot_tree == tree)
        node_of_row[:, tree] = rng.choice(own, size=data.n_rows)
    features = np.arange(data.n_features, dtype=np.int32)
    uses = (rng.random((len(features), pack_size)) < 0.8).astype(np.uint8)
    found = _split.find_best_splits(
        data.X_binned, fixed, data.all_rows, data.era_offsets, node_of_row, slot_tree,
        np.ones(n_slots, np.uint8), features, uses, data.n_bins, dict(params), n_threads,
        features_per_pass=3, best_per_slot=best_per_slot, **kwargs)
    return BestSplits.of_table(found), found


def _assert_pruning_keeps_winners(full, table, pruned, pruned_table):
    for field in ("column", "score", "gain", "threshold", "missing_left"):
        np.testing.assert_array_equal(getattr(pruned, field), getattr(full, field), field)
    # what was pruned only ever lost: a (slot, feature) it changed is below its slot's winner
    changed = (pruned_table["found"] != table["found"]) | (pruned_table["score"] != table["score"])
    winners = np.asarray(full.score)[:, None]
    assert np.all(table["score"][changed] < np.broadcast_to(winners, changed.shape)[changed])
    return changed


@pytest.mark.parametrize("params", [{}, {"lambda_dir": 1.0}, {"era_gain": "newton"},
                                    {"era_weighting": "count", "era_alpha": 5.0},
                                    {"lambda_dro": 3.0, "era_std": "total"}])
@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("n_threads", [1, 3])
def test_best_per_slot_pruning_keeps_every_slots_winner(params, seed, n_threads):
    """Skipping the era pass of candidates below a score their slot reached
    elsewhere leaves each slot's first maximum as it was, ties included
    (duplicate features, few gradient values)."""
    data, g, h = make_binned_problem(seed, 3000, 9, 40, duplicate_feature=True)
    g = np.round(g * 2) / 2  # few distinct gradients: tied candidates
    split = {**DEFAULT_SPLIT_PARAMS, **params}
    full, table = _best_of_table(data, g, h, 6, split, n_threads, False, seed)
    pruned, pruned_table = _best_of_table(data, g, h, 6, split, n_threads, True, seed)
    assert (full.column >= 0).any()
    changed = _assert_pruning_keeps_winners(full, table, pruned, pruned_table)
    if not params:
        assert changed.any()  # the case prunes something (else this test shows nothing)


@pytest.mark.parametrize("shape", [(3000, 12, 60), (40, 5, 60), (500, 7, 1), (1, 3, 4)],
                         ids=["many-eras", "empty-eras", "one-era", "one-row"])
@pytest.mark.parametrize("weighted", [False, True], ids=["constant-hessian", "hessian-cells"])
@pytest.mark.parametrize("constrained", [False, True])
@pytest.mark.parametrize("n_threads", [1, 2, 4])  # 4: fewer slots than 2 per thread
def test_pooled_tile_bounds_keep_every_slots_winner(shape, weighted, constrained, n_threads):
    """With realized gains and equal era weights, best_per_slot bounds each
    tile from its cells summed over eras and leaves unread the tiles that
    cannot reach their slot's best score (bound_slot_tiles): the winners are
    those of scoring every tile, with one- and two-word cells, monotone
    bounds, interaction constraints, slot groups and empty eras."""
    n_rows, n_features, n_eras = shape
    data, g, h = make_binned_problem(n_rows + n_features, n_rows, n_features, n_eras,
                                     weighted=weighted, duplicate_feature=True)
    split = {**DEFAULT_SPLIT_PARAMS, "min_samples_leaf": 5 if n_rows > 100 else 1,
             "min_child_weight": 0.5}
    n_slots = 6
    kwargs = {}
    if constrained:
        rng = np.random.default_rng(n_rows)
        kwargs = dict(
            slot_bounds=np.array([[-np.inf, np.inf], [-0.05, 0.1]] * (n_slots // 2)),
            feature_monotone=rng.integers(-1, 2, size=n_features).astype(np.int8),
            slot_allows_feature=(rng.random((n_slots, n_features)) < 0.7).astype(np.uint8),
            histogram_budget_bytes=4096)   # slots in groups
    full, table = _best_of_table(data, g, h, n_slots, split, n_threads, False, 0, **kwargs)
    pruned, pruned_table = _best_of_table(data, g, h, n_slots, split, n_threads, True, 0,
                                          **kwargs)
    _assert_pruning_keeps_winners(full, table, pruned, pruned_table)
    # Only tiles that would be scored are read, and the winners always are.
    assert not np.any(pruned_table["unpacked"] & ~table["unpacked"])
    assert np.all(pruned_table["found"] <= pruned_table["unpacked"])
    winners = np.flatnonzero(full.column >= 0)
    assert np.all(pruned_table["unpacked"][winners, full.column[winners]])
    if n_rows == 3000:
        assert (full.column >= 0).all()
        if n_threads == 1:  # (with more, what is pruned depends on the schedule)
            # many tiles lose to their slot's best without being read (most
            # when a slot's features are ordered in blocks of more than one)
            read, readable = pruned_table["unpacked"].sum(), table["unpacked"].sum()
            assert read <= readable * (0.75 if constrained else 0.5), (read, readable)


@pytest.mark.parametrize("weighted", [False, True], ids=["one-word", "two-words"])
@pytest.mark.parametrize("n_threads", [1, 2])
@pytest.mark.parametrize("budget", [_split.DEFAULT_HISTOGRAM_BUDGET_BYTES, 2048],
                         ids=["one-group", "slot-groups"])
@pytest.mark.parametrize("best_per_slot", [False, True])
def test_runs_per_tree_find_the_splits_of_block_wide_runs(monkeypatch, weighted, n_threads,
                                                          budget, best_per_slot):
    """Below the roots a slot's run of cells holds only the features its tree
    uses (tree_cell_offsets): the table is the one block-wide runs give, field
    for field -- features of 4 to 6 cells, feature pairs (enough rows per slot
    and era), two-word cells, slot groups, pooled bounds -- and the cells
    written end where the trees' shorter runs end."""
    data, g, h = make_binned_problem(7, 4000, 11, 8, weighted=weighted)
    fixed = to_fixed_point(g, h, data.era_offsets, 1)
    words = 1 if fixed.hessian_fixed.size == 0 else 2
    rng = np.random.default_rng(3)
    pack_size, n_slots = 3, 6                     # two slots per tree: below the roots
    slot_tree = np.repeat(np.arange(pack_size), 2).astype(np.int32)
    node_of_row = (2 * np.arange(pack_size)
                   + rng.integers(0, 2, size=(data.n_rows, pack_size))).astype(np.int32)
    node_of_row[rng.random(node_of_row.shape) < 0.1] = -1      # rows not in some trees
    features = np.arange(data.n_features, dtype=np.int32)
    uses = (rng.random((len(features), pack_size)) < 0.5).astype(np.uint8)
    uses[0] = uses[-1] = [1, 0, 1]                # no tree uses every feature
    uses[1] = [0, 1, 1]
    slot_open = np.ones(n_slots, np.uint8)
    rows, era_offsets = _partition.active_rows(node_of_row, slot_open, data.era_offsets)
    sentinel = -0x5A5A5A5A5A5A5A5A
    widths = data.n_bins + 1

    def table(per_tree):
        monkeypatch.setattr(_split, "RUNS_PER_TREE", per_tree)
        threads = 1 if best_per_slot else n_threads
        _, size = _split.block_buffer_cells(features, data.n_bins, uses, n_slots, data.n_eras,
                                            words, threads, budget, len(features))
        cells = np.full(max(size, data.n_eras * n_slots * int(widths.sum()) * words), sentinel,
                        np.int64)
        found = _split.find_best_splits(
            data.X_binned, fixed, rows, era_offsets, node_of_row, slot_tree, slot_open,
            features, uses, data.n_bins, dict(DEFAULT_SPLIT_PARAMS), threads, budget,
            features_per_pass=len(features), cell_buffer=cells, best_per_slot=best_per_slot)
        return found, cells

    block_wide, block_cells = table(False)
    per_tree, tree_cells = table(True)
    for field in block_wide:
        np.testing.assert_array_equal(per_tree[field], block_wide[field], field)
    assert block_wide["found"].sum() >= n_slots
    if budget == _split.DEFAULT_HISTOGRAM_BUDGET_BYTES:   # one group: the extent is known
        longest = max(int(widths[uses[:, tree] == 1].sum()) for tree in range(pack_size))
        assert longest < widths.sum()
        written = data.n_eras * n_slots * longest * words
        assert np.all(tree_cells[:written] != sentinel)
        assert np.all(tree_cells[written:] == sentinel)
        assert np.all(block_cells[:written * widths.sum() // longest] != sentinel)


def whole_era_pack(data_seed, seed, pack_size, hessian):
    """2,500 rows x 7 features in 30 eras, its fixed-point gradients (hessians
    of 1 with ``hessian="constant"``), a generator, and which eras each of
    ``pack_size`` trees draws (whole eras, 3 in 4)."""
    data, g, h = make_binned_problem(data_seed, 2500, 7, 30)
    if hessian == "constant":
        h = np.ones_like(h)
    rng = np.random.default_rng(seed)
    kept = rng.random((pack_size, data.n_eras)) < 0.75
    return data, to_fixed_point(g, h, data.era_offsets), rng, kept


@pytest.mark.parametrize("n_threads", [1, 2])
@pytest.mark.parametrize("hessian", ["varying", "constant"])
def test_shared_roots_find_the_splits_of_per_tree_passes(n_threads, hessian):
    """find_best_splits on a pack's roots whose trees sample whole eras (the
    eras then shared, build_pack_histograms) returns the table of per-tree
    passes, in slot groups too (a small histogram budget)."""
    pack_size = 6
    data, fixed, rng, kept = whole_era_pack(11, 4, pack_size, hessian)
    node_of_row = np.where(kept[:, data.row_era].T, np.arange(pack_size),
                           -2 - np.arange(pack_size)).astype(np.int32)
    slot_tree = np.arange(pack_size, dtype=np.int32)
    features = np.arange(data.n_features, dtype=np.int32)
    uses = (rng.random((len(features), pack_size)) < 0.5).astype(np.uint8)
    rows, era_offsets = _partition.active_rows(node_of_row, np.ones(pack_size, np.uint8),
                                               data.era_offsets)
    for budget in (_split.DEFAULT_HISTOGRAM_BUDGET_BYTES, 1):
        tables = [_split.find_best_splits(
            data.X_binned, fixed, rows, era_offsets, node_of_row, slot_tree,
            np.ones(pack_size, np.uint8), features, uses, data.n_bins,
            dict(DEFAULT_SPLIT_PARAMS), n_threads, budget, share_equal_rows=share)
            for share in (False, True)]
        for field in tables[0]:
            np.testing.assert_array_equal(tables[1][field], tables[0][field], field)
        assert tables[0]["found"].sum() > pack_size


@pytest.mark.parametrize("hessian", ["varying", "constant"])
def test_era_flags_skip_only_eras_a_tree_did_not_draw(hessian):
    """``era_tree_rows`` (a pack's era flags when trees draw whole eras, as
    the CPU backend passes them): the pass skips the (era, tree) flagged 0,
    and the pooled bounds do not read their cells, which changes nothing
    when the flags are the draws, in slot groups too and with each slot's
    best only (pooled bounds); a tree flagged out of every era gets no cells
    (the flags are obeyed)."""
    pack_size = 4
    data, fixed, rng, kept = whole_era_pack(12, 5, pack_size, hessian)
    # depth 1: two slots per tree, rows of kept eras split at random
    side = rng.integers(0, 2, size=(data.n_rows, pack_size))
    node_of_row = np.where(kept[:, data.row_era].T, 2 * np.arange(pack_size) + side,
                           -2 - 2 * np.arange(pack_size)).astype(np.int32)
    slot_tree = np.repeat(np.arange(pack_size), 2).astype(np.int32)
    slot_open = np.ones(2 * pack_size, np.uint8)
    features = np.arange(data.n_features, dtype=np.int32)
    uses = (rng.random((len(features), pack_size)) < 0.6).astype(np.uint8)
    rows, era_offsets = _partition.active_rows(node_of_row, slot_open, data.era_offsets)

    def table(flags, budget=_split.DEFAULT_HISTOGRAM_BUDGET_BYTES, best_per_slot=False):
        # With best_per_slot a losing tile's entry depends on which thread
        # scored what before it: one thread, so that the whole table (which
        # tiles the bounds left unread included) must repeat.
        return _split.find_best_splits(
            data.X_binned, fixed, rows, era_offsets, node_of_row, slot_tree, slot_open,
            features, uses, data.n_bins, dict(DEFAULT_SPLIT_PARAMS),
            1 if best_per_slot else 2, budget, era_tree_rows=flags,
            best_per_slot=best_per_slot)

    flags = np.ascontiguousarray(kept.T, dtype=np.uint8)
    for budget in (_split.DEFAULT_HISTOGRAM_BUDGET_BYTES, 1):
        for best_per_slot in (False, True):
            plain = table(None, budget, best_per_slot)
            flagged = table(flags, budget, best_per_slot)
            for field in plain:
                np.testing.assert_array_equal(flagged[field], plain[field], field)
    plain = table(None)
    assert plain["found"].sum() > pack_size
    without_tree_0 = flags.copy()
    without_tree_0[:, 0] = 0
    cut = table(without_tree_0)
    assert cut["found"][:2].sum() == 0 and plain["found"][:2].sum() > 0
    np.testing.assert_array_equal(cut["found"][2:], plain["found"][2:])
    with pytest.raises(ValueError, match="era_tree_rows"):
        table(flags[:-1])


@pytest.mark.parametrize("best_per_slot", [False, True])
@pytest.mark.parametrize("weighted", [False, True], ids=["one-word", "two-words"])
def test_slot_left_is_the_winners_left_child_whatever_the_threads(best_per_slot, weighted):
    """find_best_splits' slot_left: each slot's winning candidate (the
    table's first maximum) and the pooled sums of its left child -- the rows
    of the slot on the left of the threshold, missing ones when they go
    left -- the same on 1, 2 and 3 threads; NaN for a slot without one."""
    data, g, h = make_binned_problem(21, n_rows=900, n_features=5, n_eras=12,
                                     missing_rate=0.15)
    if not weighted:
        h = np.ones_like(h)
    results = [_best_of_table(data, g, h, 7, DEFAULT_SPLIT_PARAMS, n_threads, best_per_slot, 3)
               for n_threads in (1, 2, 3)]
    first = results[0][1]["slot_left"]
    for _, found in results[1:]:
        np.testing.assert_array_equal(found["slot_left"], first)
    best, _ = results[0]
    fixed = to_fixed_point(g, h, data.era_offsets, 1)
    rng = np.random.default_rng(3)   # _best_of_table's node_of_row, again
    slot_tree = np.arange(7) % 2
    node_of_row = np.stack([rng.choice(np.flatnonzero(slot_tree == tree), size=data.n_rows)
                            for tree in range(2)], axis=1)
    assert (best.column >= 0).sum() >= 5
    for slot in range(7):
        if best.column[slot] < 0:
            assert np.isnan(first[slot]).all()
            continue
        feature = best.column[slot]   # features are 0 .. n_features - 1
        codes = data.X_binned[feature].astype(np.int64)
        missing = codes == data.n_bins[feature]
        left = ((~missing & (codes <= best.threshold[slot]))
                | (missing & (best.missing_left[slot] == 1)))
        rows = (node_of_row[:, slot_tree[slot]] == slot) & left
        assert first[slot, 0] == best.column[slot]
        assert first[slot, 1] == np.sum(fixed.gradients[rows])
        assert first[slot, 2] == np.sum(fixed.hessians[rows])
        assert first[slot, 3] == rows.sum()
        np.testing.assert_array_equal(
            [best.left_gradients[slot], best.left_hessians[slot], best.left_count[slot]],
            first[slot, 1:])


def _best_of_table_oracle(found):
    """BestSplits.of_table's fields as NumPy expressions (what the typed
    _split.best_of_table replaced)."""
    score, has = found["score"], found["found"] != 0
    masked = np.where(has, score, -np.inf)
    column = np.full(len(score), -1, dtype=np.int64)
    for slot in range(len(score)):
        candidates = np.flatnonzero(has[slot])
        if len(candidates):
            best = candidates[np.argmax(masked[slot, candidates])]   # first maximum
            column[slot] = best
    slots, chosen, known = np.arange(len(column)), np.maximum(column, 0), column >= 0
    out = dict(column=column,
               score=np.where(known, score[slots, chosen], -np.inf),
               gain=np.where(known, found["gain"][slots, chosen], 0.0),
               threshold=np.where(known, found["threshold"][slots, chosen], 0),
               missing_left=np.where(known, found["missing_left"][slots, chosen], 0))
    if "slot_left" in found:
        first = found["slot_left"]
        winner = known & (first[:, 0] == column)
        for name, field in (("left_gradients", 1), ("left_hessians", 2), ("left_count", 3)):
            out[name] = np.where(winner, first[:, field], np.nan)
    return out


@pytest.mark.parametrize("n_slots,n_candidates", [(0, 3), (1, 1), (5, 4), (37, 9)])
@pytest.mark.parametrize("with_left", [False, True])
def test_best_of_table_matches_its_numpy_oracle(n_slots, n_candidates, with_left):
    """Each slot's first maximum over the found candidates (ties to the
    lower column), -1 / -inf / 0 without one, and the winner's left sums
    only where the record names the winner (NaN otherwise)."""
    rng = np.random.default_rng(n_slots * 10 + n_candidates)
    shape = (n_slots, n_candidates)
    found = dict(score=rng.integers(-2, 3, shape).astype(np.float64),   # many ties
                 gain=rng.normal(size=shape),
                 threshold=rng.integers(0, 7, shape).astype(np.int32),
                 missing_left=rng.integers(0, 2, shape).astype(np.uint8),
                 found=(rng.random(shape) < 0.6).astype(np.uint8))
    if n_slots:
        found["found"][0] = 0                       # a slot without a candidate
    if with_left:
        left = rng.normal(size=(n_slots, 4))
        left[:, 0] = rng.integers(-1, n_candidates, n_slots)   # sometimes not the winner
        left[rng.random(n_slots) < 0.2, 0] = np.nan
        found["slot_left"] = left
    got, expected = _split.best_of_table(found), _best_of_table_oracle(found)
    assert set(got) == set(expected)
    for name in expected:
        np.testing.assert_array_equal(got[name], expected[name], err_msg=name)
    assert got["threshold"].dtype == np.int32 and got["missing_left"].dtype == np.uint8


@pytest.mark.parametrize("per_tree", [False, True])
@pytest.mark.parametrize("n_candidates,features_per_pass", [(1, 64), (7, 3), (20, 64), (70, 64)])
def test_block_buffer_cells_holds_the_longest_run(monkeypatch, per_tree, n_candidates,
                                                  features_per_pass):
    """The block buffer's run is a block's widths summed (whole runs), or
    with runs per tree the longest tree's share; the group as many slots as
    the budget holds, at least one."""
    monkeypatch.setattr(_split, "RUNS_PER_TREE", per_tree)
    rng = np.random.default_rng(n_candidates)
    n_bins = rng.integers(1, 9, 80).astype(np.int32)
    features = np.sort(rng.choice(80, n_candidates, replace=False)).astype(np.int32)
    uses = (rng.random((n_candidates, 4)) < 0.5).astype(np.uint8)
    widths = n_bins[features].astype(np.int64) + 1
    per_pass, n_blocks = _split.feature_blocks(n_candidates, features_per_pass)
    whole = max(int(widths[b * per_pass:(b + 1) * per_pass].sum()) for b in range(n_blocks))
    tree_runs = max(int((widths[b * per_pass:(b + 1) * per_pass, None]
                         * uses[b * per_pass:(b + 1) * per_pass]).sum(axis=0).max())
                    for b in range(n_blocks))
    for n_slots, budget in ((1, 1), (16, 1 << 20), (64, 1 << 12)):
        group, size = _split.block_buffer_cells(features, n_bins, uses, n_slots, 5, 2, 2,
                                                budget, features_per_pass)
        assert 1 <= group <= n_slots
        run = size // (5 * group * 2)
        assert size == 5 * group * run * 2
        assert run == whole if not per_tree else run in (whole, tree_runs)
        assert run >= tree_runs
        if group > 1:
            assert group * run * 5 * 2 * 8 <= 2 * budget


def _slot_first_maximum_oracle(records):
    """slot_first_maximum as NumPy expressions (what the typed loop replaced)."""
    slots = np.arange(records.shape[1])
    score = records[:, :, 0]
    top = score == score.max(axis=0, initial=-np.inf)
    thread = np.argmin(np.where(top, records[:, :, 1], np.inf), axis=0)
    chosen = records[thread, slots, 1:].copy()
    chosen[~np.isfinite(chosen[:, 0])] = np.nan
    return chosen


@pytest.mark.parametrize("n_threads,n_slots", [(1, 1), (2, 7), (5, 30)])
def test_slot_first_maximum_matches_its_numpy_oracle(n_threads, n_slots):
    """Of the threads' records, each slot's highest score, then its lowest
    position (the first such thread); NaN for a slot no thread found."""
    rng = np.random.default_rng(n_threads * 100 + n_slots)
    records = np.zeros((n_threads, n_slots, 5))
    records[:, :, 0] = rng.integers(-1, 2, (n_threads, n_slots))        # ties
    records[:, :, 1] = rng.integers(0, 3, (n_threads, n_slots))         # tied positions too
    records[:, :, 2:] = rng.normal(size=(n_threads, n_slots, 3))
    none = rng.random((n_threads, n_slots)) < 0.3                       # no tile on a thread
    records[none, 0], records[none, 1] = -np.inf, np.inf
    records[:, 0, 0], records[:, 0, 1] = -np.inf, np.inf                 # a slot no thread found
    got = _split.slot_first_maximum(records)
    np.testing.assert_array_equal(got, _slot_first_maximum_oracle(records))
    assert np.isnan(got[0]).all()
