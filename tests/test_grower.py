"""Whole packs: the engine's trees vs trees grown by the NumPy oracle."""

import numpy as np
import pytest

from packboost import _constraints, _predict, grower
from packboost._fixed_point import to_fixed_point
from packboost.backends.cpu import CpuBackend
from packboost.booster import draw_round, grower_params
from packboost.grower import grow_output_packs, grow_pack

from conftest import make_binned_problem
from oracles import reference as _reference

BASE = dict(
    n_estimators=1, pack_size=3, max_depth=4, learning_rate=0.3, reg_lambda=1.0, reg_alpha=0.0,
    min_samples_leaf=2, min_child_weight=0.0, min_split_gain=0.0, max_delta_step=0.0,
    era_gain="realized", era_weighting="equal", era_alpha=0.0, lambda_dro=0.25,
    lambda_dir=0.5, dir_tanh_scale=1.0, era_std="between", era_subsample=0.7, row_subsample=0.8,
    layer_feature_fraction=0.8, tree_feature_fraction=0.7, feature_sampling="depth",
    random_state=0,
)

CASES = {
    "many-eras": dict(n_rows=1500, n_features=6, n_eras=60),
    "few-rows-absent-eras": dict(n_rows=40, n_features=4, n_eras=30),
    "one-row": dict(n_rows=1, n_features=3, n_eras=1),
    "one-era": dict(n_rows=300, n_features=5, n_eras=1),
    "ties-duplicated-feature": dict(n_rows=500, n_features=4, n_eras=10,
                                    duplicate_feature=True),
    "one-sided-eras": dict(n_rows=600, n_features=4, n_eras=12, one_sided_eras=True),
    "no-missing": dict(n_rows=400, n_features=4, n_eras=8, missing_rate=0.0),
    "many-bins-uint16": dict(n_rows=500, n_features=3, n_eras=5, n_bins=300),
    # The histogram pass sums features of at most 5 bins in pairs where eras
    # hold >= 32 rows per slot (_histogram.pxd), with one int64 per cell
    # (equal hessians) or two (the hessian too); 5-7 bins per feature mixes
    # paired and single features in one tree, 7 features leave one unpaired.
    "equal-hessians-paired-and-single": dict(n_rows=2000, n_features=7, n_eras=4, n_bins=7,
                                             weighted=False),
    "equal-hessians-all-paired": dict(n_rows=1200, n_features=5, n_eras=2, weighted=False),
    "paired-and-single": dict(n_rows=2000, n_features=7, n_eras=4, n_bins=7),
    "all-paired": dict(n_rows=1200, n_features=5, n_eras=2),
}

PARAMS = {
    "realized": {},
    "newton": dict(era_gain="newton"),
    "total-std": dict(era_std="total", lambda_dro=1.0),
    "count-weights": dict(era_weighting="count", era_alpha=2.0, dir_tanh_scale=0.0),
    "max-delta-step": dict(max_delta_step=0.05, lambda_dro=1.0),
    "min-split-gain": dict(min_split_gain=5.0, min_samples_leaf=7),
    "l1": dict(reg_alpha=3.0, lambda_dro=1.0),
    "l1-newton-direction": dict(reg_alpha=1.0, era_gain="newton", lambda_dir=1.0),
    "no-sampling": dict(era_subsample=1.0, row_subsample=1.0, layer_feature_fraction=1.0,
                        tree_feature_fraction=1.0, pack_size=2),
}


def grow_on_cpu(data, g, h, draws, settings, n_threads, **backend_options):
    """One pack through the driver on the CPU backend; the backend is returned
    too when ``backend_options`` has ``keep_backend=True``."""
    keep = backend_options.pop("keep_backend", False)
    backend = CpuBackend(data, len(draws.tree_samples), n_threads, **backend_options)
    pack = grow_pack(backend, data, g, h, draws.tree_samples, draws.layer_features,
                     draws.tree_feature_masks, settings, n_threads)
    return (pack, backend) if keep else pack


def grow_both(case, overrides, seed=0, n_threads=2, with_data=False, monotone=None,
              interaction_sets=None):
    """The engine's pack and the oracle's trees; ``monotone`` and
    ``interaction_sets`` are constraints as the user gives them (lists),
    resolved for the engine (packboost._constraints) and read as is by the
    oracle."""
    problem = dict(CASES[case])
    data, g, h = make_binned_problem(seed, **problem)
    if data.X_binned.max() > 255:
        data.X_binned = data.X_binned.astype(np.uint16)
    params = {**BASE, **overrides}
    if monotone is not None:
        monotone = monotone[:data.n_features]   # one pattern for every case
    params["monotone_constraints"] = _constraints.resolve_monotone(monotone, data.n_features,
                                                                   None)
    params["interaction_constraints"] = _constraints.resolve_interactions(
        interaction_sets, data.n_features, None)
    draws = draw_round(np.random.default_rng(seed), data, params)
    settings = grower_params(params)
    pack, backend = grow_on_cpu(data, g, h, draws, settings, n_threads, keep_backend=True)
    # The engine rounds a round's gradients to fixed point first (see
    # _fixed_point); the oracle grows on the same rounded values.
    fixed = to_fixed_point(g, h, data.era_offsets)
    g, h = fixed.gradients, fixed.hessians
    reference = [
        _reference.grow_tree(data.X_binned, data.n_bins, g, h, data.row_era, data.n_eras,
                             draws.tree_samples[tree], draws.layer_features,
                             [None if m is None else m[tree] for m in draws.tree_feature_masks],
                             params, monotone=monotone, interaction_sets=interaction_sets)
        for tree in range(params["pack_size"])
    ]
    if with_data:
        return pack, reference, settings, data, draws.tree_samples, backend
    return pack, reference, settings


def tree_of(pack, tree):
    start, end = pack.tree_offsets[tree], pack.tree_offsets[tree + 1]
    nodes = {name: values[start:end] for name, values in pack.nodes.items()}
    for child in ("left_child", "right_child"):
        nodes[child] = np.where(nodes[child] >= 0, nodes[child] - start, -1)
    return nodes


def goes_left(X_binned, n_bins, nodes, node, rows):
    """Which of ``rows`` node ``node``'s split sends left."""
    feature = nodes["feature"][node]
    bins = X_binned[feature, rows].astype(np.int64)
    missing = bins == n_bins[feature]
    return np.where(missing, bool(nodes["missing_left"][node]),
                    bins <= nodes["threshold_bin"][node])


def rows_reaching(X_binned, n_bins, nodes, node, rows):
    """The rows of ``rows`` that the tree ``nodes`` routes through ``node``."""
    path, child = [], node
    parents = {int(c): (int(p), side) for side in ("left_child", "right_child")
               for p, c in enumerate(nodes[side]) if c >= 0}
    while child != 0:
        parent, side = parents[child]
        path.append((parent, side == "left_child"))
        child = parent
    for parent, left in reversed(path):
        rows = rows[goes_left(X_binned, n_bins, nodes, parent, rows) == left]
    return rows


def first_rounding_tie(data, rows, got, want):
    """Index of the first node where engine and oracle chose different splits,
    provided the two splits are the same partition of the node's rows (or its
    mirror image) with scores equal to rounding -- an exact tie in exact
    arithmetic that the two float evaluation orders break differently. None
    when the trees agree; fails on any other difference."""
    differs = ((got["feature"] != want["feature"])
               | ((want["feature"] >= 0) & ((got["threshold_bin"] != want["threshold_bin"])
                                            | (got["missing_left"] != want["missing_left"]))))
    if not differs.any():
        return None
    node = int(np.flatnonzero(differs)[0])
    assert got["feature"][node] >= 0 and want["feature"][node] >= 0, "split vs leaf"
    np.testing.assert_allclose(got["des_score"][node], want["des_score"][node], rtol=1e-12)
    node_rows = rows_reaching(data.X_binned, data.n_bins, want, node, rows)
    a = goes_left(data.X_binned, data.n_bins, got, node, node_rows)
    b = goes_left(data.X_binned, data.n_bins, want, node, node_rows)
    assert np.array_equal(a, b) or np.array_equal(a, ~b), "different partitions"
    return node


@pytest.mark.parametrize("overrides", PARAMS.values(), ids=PARAMS.keys())
@pytest.mark.parametrize("case", CASES)
def test_pack_matches_reference(case, overrides):
    assert_pack_matches(*grow_both(case, overrides, with_data=True)[:5])


CONSTRAINTS = {
    "monotone": dict(monotone=[1, -1, 0, 1, 0, -1]),
    "interactions": dict(interaction_sets=[[0, 1], [1, 2]]),
    "both": dict(monotone=[-1, 0, 1, 0, 1, 0], interaction_sets=[[0, 2], [1, 2, 3]]),
}


@pytest.mark.parametrize("overrides", [{}, PARAMS["newton"], PARAMS["max-delta-step"],
                                       PARAMS["l1"], PARAMS["no-sampling"]],
                         ids=["realized", "newton", "max-delta-step", "l1", "no-sampling"])
@pytest.mark.parametrize("constraints", CONSTRAINTS.values(), ids=CONSTRAINTS.keys())
@pytest.mark.parametrize("case", ["many-eras", "one-era", "no-missing", "few-rows-absent-eras"])
def test_constrained_pack_matches_reference(case, constraints, overrides):
    """Bounds passed down, values clipped, the order rule and the allowed
    features: the driver's bookkeeping against the oracle's node-by-node one."""
    assert_pack_matches(*grow_both(case, overrides, with_data=True, **constraints)[:5])


def assert_pack_matches(pack, reference, settings, data, samples):
    for tree, want in enumerate(reference):
        got = tree_of(pack, tree)
        want = {name: np.asarray(values) for name, values in want.items()}
        # Up to a rounding tie (tiny nodes of many-bin features), the trees
        # are equal node for node; past it they may legitimately differ.
        tie = first_rounding_tie(data, samples[tree], got, want)
        end = len(want["feature"]) if tie is None else tie
        if tie is not None:
            assert len(got["feature"]) > tie
        got = {name: values[:end] for name, values in got.items()}
        want = {name: values[:end] for name, values in want.items()}
        for field in ("feature", "left_child", "right_child", "n_samples"):
            np.testing.assert_array_equal(got[field], want[field], err_msg=field)
        split = want["feature"] >= 0
        np.testing.assert_array_equal(got["threshold_bin"][split], want["threshold_bin"][split])
        np.testing.assert_array_equal(got["missing_left"][split], want["missing_left"][split])
        np.testing.assert_allclose(got["value"], settings.shrinkage * want["value"],
                                   rtol=1e-9, atol=1e-15)
        np.testing.assert_allclose(got["des_score"], want["des_score"], rtol=1e-8, atol=1e-12)
        np.testing.assert_allclose(got["gain"], want["gain"], rtol=1e-8, atol=1e-12)


def test_reference_cases_are_not_trivial():
    """The comparisons above must involve real splits, or they prove nothing."""
    n_splits = 0
    for case in ("many-eras", "one-era", "one-sided-eras", "ties-duplicated-feature"):
        pack, _, _ = grow_both(case, {})
        n_splits += int((pack.nodes["feature"] >= 0).sum())
        assert (pack.nodes["feature"] >= 0).any(), case
    assert n_splits > 20


def test_ties_pick_the_lower_feature_index():
    """Feature 2 is a copy of feature 0: it may never be chosen over it."""
    pack, _, _ = grow_both("ties-duplicated-feature", dict(PARAMS["no-sampling"], lambda_dro=0.0))
    assert (pack.nodes["feature"] == 0).any()
    assert not (pack.nodes["feature"] == 2).any()


@pytest.mark.parametrize("era_gain", ["realized", "newton"])
def test_one_era_without_risk_is_a_plain_histogram_gbdt(era_gain):
    """docs/des.md §11 reduction: one era, lambda_dro = lambda_dir = 0 -> the tree of
    a depth-wise Newton-gain GBDT on the same bins."""
    overrides = dict(PARAMS["no-sampling"], era_gain=era_gain, lambda_dro=0.0, lambda_dir=0.0)
    data, g, h = make_binned_problem(3, 700, 5, 1)
    params = {**BASE, **overrides, "max_depth": 5}
    draws = draw_round(np.random.default_rng(0), data, params)
    pack = grow_on_cpu(data, g, h, draws, grower_params(params), 2)
    plain = _reference.grow_tree(data.X_binned, data.n_bins, g, h, data.row_era, 1,
                                 draws.tree_samples[0], draws.layer_features,
                                 [None] * params["max_depth"], params, pooled_gain_only=True)
    got = tree_of(pack, 0)
    assert (plain["feature"] >= 0).sum() > 5
    np.testing.assert_array_equal(got["feature"], plain["feature"])
    np.testing.assert_array_equal(got["threshold_bin"], plain["threshold_bin"])


def test_realized_equal_weights_rank_like_pooled_gain():
    """docs/des.md §11 reduction: many eras, realized gains, equal weights, no risk
    or direction -> the same tree as the pooled Newton gain."""
    overrides = dict(PARAMS["no-sampling"], lambda_dro=0.0, lambda_dir=0.0)
    data, g, h = make_binned_problem(8, 2000, 5, 40)
    params = {**BASE, **overrides}
    draws = draw_round(np.random.default_rng(0), data, params)
    pack = grow_on_cpu(data, g, h, draws, grower_params(params), 2)
    plain = _reference.grow_tree(data.X_binned, data.n_bins, g, h, data.row_era, data.n_eras,
                                 draws.tree_samples[0], draws.layer_features,
                                 [None] * params["max_depth"], params, pooled_gain_only=True)
    got = tree_of(pack, 0)
    np.testing.assert_array_equal(got["feature"], plain["feature"])
    np.testing.assert_array_equal(got["threshold_bin"], plain["threshold_bin"])


def test_des_changes_the_tree_on_unstable_data():
    """With a strong risk penalty, DES must not grow the pooled-gain tree
    (otherwise the risk term is not wired in)."""
    data, g, h = make_binned_problem(8, 2000, 5, 40)
    trees = []
    for dro in (0.0, 3.0):
        params = {**BASE, **PARAMS["no-sampling"], "lambda_dro": dro, "lambda_dir": 0.0}
        draws = draw_round(np.random.default_rng(0), data, params)
        pack = grow_on_cpu(data, g, h, draws, grower_params(params), 2)
        trees.append(tree_of(pack, 0))
    assert not (np.array_equal(trees[0]["feature"], trees[1]["feature"])
                and np.array_equal(trees[0]["threshold_bin"], trees[1]["threshold_bin"]))


@pytest.mark.parametrize("case", ["many-eras", "one-era", "few-rows-absent-eras", "one-row",
                                  "equal-hessians-paired-and-single", "paired-and-single"])
@pytest.mark.parametrize("options", [{}, {"histogram_budget_bytes": 1},
                                     {"subtraction_budget_bytes": 2**40}])
def test_thread_count_does_not_change_the_pack(case, options):
    """Threads split a block's eras -- and its features too when eras are
    fewer than the threads' work items (one era) -- then its tiles: any
    thread count gives the same cells and the same pack."""
    data, g, h = make_binned_problem(3, **CASES[case])
    params = {**BASE, "max_depth": 4, "feature_sampling": "pack", "pack_size": 3}
    draws = draw_round(np.random.default_rng(3), data, params)
    packs = [grow_on_cpu(data, g, h, draws, grower_params(params), n_threads, **options)
             for n_threads in (1, 2, 3, 7)]
    if case != "one-row":
        assert (packs[0].nodes["feature"] >= 0).sum() > 0
    for pack in packs[1:]:
        for name in packs[0].nodes:
            np.testing.assert_array_equal(packs[0].nodes[name], pack.nodes[name], err_msg=name)


def test_trees_in_a_pack_differ():
    pack, _, _ = grow_both("many-eras", {})
    trees = [tree_of(pack, t) for t in range(3)]
    signatures = {(tuple(t["feature"]), tuple(t["threshold_bin"])) for t in trees}
    assert len(signatures) == 3


def assert_same_pack_under(seed, overrides, case="many-eras"):
    """Grow one pack with default grower settings and once per settings
    override; every node array must be identical (same cells, same summation
    order), and the pack must have real splits."""
    data, g, h = make_binned_problem(seed, **CASES[case])
    params = {**BASE, "max_depth": 5, "lambda_dro": 0.0}
    draws = draw_round(np.random.default_rng(seed), data, params)
    packs = []
    for override in ({}, *overrides):
        packs.append(grow_on_cpu(data, g, h, draws, grower_params(params), 2, **override))
    assert (packs[0].nodes["feature"] >= 0).sum() > 10
    for pack in packs[1:]:
        for name in packs[0].nodes:
            np.testing.assert_array_equal(packs[0].nodes[name], pack.nodes[name], err_msg=name)


# features summed in pairs (one or two words per cell), split across groups and blocks
SAME_PACK_CASES = ["many-eras", "equal-hessians-paired-and-single", "paired-and-single"]


@pytest.mark.parametrize("case", SAME_PACK_CASES)
def test_histogram_groups_give_the_same_pack(case):
    """A tiny histogram budget forces one pass per slot group."""
    assert_same_pack_under(0, [{"histogram_budget_bytes": 1}], case)


@pytest.mark.parametrize("case", SAME_PACK_CASES)
def test_feature_blocking_gives_the_same_pack(case):
    """Several features per pass over the rows (default 64) vs 1, 3 and more
    than there are features."""
    assert_same_pack_under(1, [{"features_per_pass": k} for k in (1, 3, 64)], case)


@pytest.mark.parametrize("case", ["many-eras", "few-rows-absent-eras", "one-row"])
def test_training_leaves_equal_a_walk_down_every_tree(case):
    """The grower's leaf of every training row -- sampled or not -- is the
    leaf a walk finds, so the prediction update by lookup is bit-identical."""
    pack, _, _, data, samples, backend = grow_both(case, {"row_subsample": 0.6},
                                                   with_data=True)
    leaves = backend.training_leaves()
    assert leaves.shape == (data.n_rows, len(samples)) and (leaves >= 0).all()
    if data.n_rows > 1:  # the case really has rows no tree sampled
        assert min(len(rows) for rows in samples) < data.n_rows
    start = np.linspace(-1.0, 1.0, data.n_rows)
    by_lookup, by_walk = start.copy(), start.copy()
    backend.add_pack(pack, by_lookup)
    nodes = pack.nodes
    _predict.predict_binned(data.X_binned, data.n_bins, nodes["feature"],
                            nodes["threshold_bin"], nodes["missing_left"], nodes["left_child"],
                            nodes["right_child"], nodes["value"],
                            np.ascontiguousarray(pack.tree_offsets[:-1]), by_walk, 2)
    np.testing.assert_array_equal(by_lookup, by_walk)
    assert not np.array_equal(by_walk, start) or not (pack.nodes["value"] != 0).any()
    # each leaf is a leaf of its tree (no children), and the rows of every leaf add its value
    for tree in range(len(samples)):
        node = pack.tree_offsets[tree] + leaves[:, tree]
        assert (pack.nodes["left_child"][node] == -1).all()


def test_era_subsample_keeps_every_row_of_the_kept_eras_and_no_other():
    data, _, _ = make_binned_problem(4, 700, 3, 25)
    params = {**BASE, "era_subsample": 0.6, "row_subsample": 1.0, "pack_size": 5}
    draws = draw_round(np.random.default_rng(4), data, params)
    for rows in draws.tree_samples:
        kept = np.unique(data.row_era[rows])
        assert len(kept) <= round(0.6 * 25)  # drawn eras may have no rows
        np.testing.assert_array_equal(rows, np.flatnonzero(np.isin(data.row_era, kept)))
        assert rows.dtype == np.int32
    assert len({tuple(rows) for rows in draws.tree_samples}) > 1



def _drawn_rows_oracle(rng, data, params):
    """Each tree's rows as draw_round drew them as lists (before TreeSamples):
    its eras' rows, then each with probability row_subsample, from the same
    stream of random numbers."""
    samples = []
    for _ in range(params["pack_size"]):
        rows = np.arange(data.n_rows, dtype=np.int32)
        if params["era_subsample"] < 1.0 and data.n_eras > 1:
            n_keep = int(min(data.n_eras, max(1, round(params["era_subsample"] * data.n_eras))))
            keep_era = np.zeros(data.n_eras, dtype=bool)
            keep_era[rng.choice(data.n_eras, size=n_keep, replace=False)] = True
            rows = np.flatnonzero(keep_era[data.row_era]).astype(np.int32)
        if params["row_subsample"] < 1.0 and len(rows) > 1:
            keep = rng.random(len(rows)) < params["row_subsample"]
            if not keep.any():
                keep[rng.integers(len(rows))] = True
            rows = rows[keep]
        samples.append(rows)
    return samples


@pytest.mark.parametrize("era_subsample", [1.0, 0.6, 0.01])
@pytest.mark.parametrize("row_subsample", [1.0, 0.7, 1e-9])
@pytest.mark.parametrize("n_eras", [1, 25])
def test_tree_samples_are_the_rows_drawn_as_lists(era_subsample, row_subsample, n_eras):
    """draw_round's TreeSamples hold the rows the former row lists held, from
    the same random numbers (so the models do not change), and the pack's
    table starts the same from era flags as from those rows."""
    from packboost._samples import TreeSamples

    data, _, _ = make_binned_problem(5, 700, 3, n_eras)
    params = {**BASE, "era_subsample": era_subsample, "row_subsample": row_subsample,
              "pack_size": 4}
    draws = draw_round(np.random.default_rng(9), data, params)
    expected = _drawn_rows_oracle(np.random.default_rng(9), data, params)
    assert isinstance(draws.tree_samples, TreeSamples) and len(draws.tree_samples) == 4
    for rows, oracle in zip(draws.tree_samples, expected, strict=True):
        assert rows.dtype == np.int32
        np.testing.assert_array_equal(rows, oracle)
    assert draws.tree_samples.whole_eras == (row_subsample == 1.0)
    by_flags = CpuBackend(data, 4, 2)
    by_flags.begin_pack(None, draws.tree_samples)
    by_rows = CpuBackend(data, 4, 2)
    by_rows.begin_pack(None, [np.asarray(rows) for rows in expected])
    np.testing.assert_array_equal(by_flags.node_of_row, by_rows.node_of_row)
    with pytest.raises(IndexError):
        draws.tree_samples[4]

SUBTRACTION_PARAMS = {
    "same-tree-features": dict(tree_feature_fraction=1.0),
    "tree-features-redrawn": dict(tree_feature_fraction=0.6),
    "newton-no-sampling": dict(era_gain="newton", era_subsample=1.0, row_subsample=1.0,
                               tree_feature_fraction=1.0, pack_size=2),
    "pack-sampling": dict(feature_sampling="pack", layer_feature_fraction=0.7),
}


@pytest.mark.parametrize("route", ["era-major", "by-node"])
@pytest.mark.parametrize("constant_hessian", [True, False], ids=["one-word", "two-words"])
@pytest.mark.parametrize("overrides", SUBTRACTION_PARAMS.values(), ids=SUBTRACTION_PARAMS.keys())
@pytest.mark.parametrize("case", ["many-eras", "few-rows-absent-eras", "one-row", "one-era",
                                  "one-sided-eras", "many-bins-uint16"])
def test_histogram_subtraction_gives_the_same_pack(case, overrides, constant_hessian, route,
                                                   monkeypatch):
    """Children derived as parent minus sibling (every depth, however few the
    rows) grow the pack that full passes grow, node array for node array, and
    the derivation really ran where the pack split twice: per-era cells on
    the era-major route, pooled cells on the node-ordered one (which a depth
    below the roots takes where it can: realized gains, equal era weights,
    uint8 codes)."""
    from packboost.backends import cpu

    data, g, h = make_binned_problem(3, **CASES[case])
    if data.X_binned.max() > 255:
        data.X_binned = data.X_binned.astype(np.uint16)
    if constant_hessian:
        h = np.ones_like(h)
    params = {**BASE, "max_depth": 5, "layer_feature_fraction": 1.0, **overrides}
    draws = draw_round(np.random.default_rng(3), data, params)
    assert all(np.array_equal(k, draws.layer_features[0]) for k in draws.layer_features)
    settings = grower_params(params)
    full = grow_on_cpu(data, g, h, draws, settings, 2, subtraction_budget_bytes=0)

    derived = []
    plan = cpu.CpuBackend._subtraction_plan

    def counting_plan(self, *args):
        chosen = plan(self, *args)
        if chosen is not None:
            derived.append(int((chosen["slot_kind"] == cpu.SLOT_DERIVE).sum()))
        return chosen

    by_node = []
    find_by_node = cpu._split.find_best_splits_by_node

    def counting_by_node(*args, **kwargs):
        by_node.append(int((kwargs["slot_kind"] == cpu.SLOT_DERIVE).sum()))
        return find_by_node(*args, **kwargs)

    monkeypatch.setattr(cpu, "SUBTRACTION_MIN_ROWS_PER_CELL", 0.0)
    monkeypatch.setattr(grower, "SUBTRACTION_MAX_NEW_FEATURES", 1.0)
    monkeypatch.setattr(cpu.CpuBackend, "_subtraction_plan", counting_plan)
    monkeypatch.setattr(cpu._split, "find_best_splits_by_node", counting_by_node)
    if route == "era-major":
        monkeypatch.setattr(cpu, "NODE_ROUTE_MAX_COPY_BYTES", 0)
    subtracted = grow_on_cpu(data, g, h, draws, settings, 2,
                             subtraction_budget_bytes=2**40)
    for name in full.nodes:
        np.testing.assert_array_equal(full.nodes[name], subtracted.nodes[name], err_msg=name)
    depth_of_pack = max(int(np.max(np.diff(full.tree_offsets))), 1)
    if depth_of_pack > 3 and (full.nodes["feature"] >= 0).sum() > params["pack_size"]:
        assert sum(derived) + sum(by_node) > 0
        node_route = (route == "by-node" and data.X_binned.dtype == np.uint8
                      and params.get("era_gain", "realized") == "realized")
        assert (len(by_node) > 0) == node_route


def test_subtraction_is_skipped_over_its_budget_and_for_few_rows(monkeypatch):
    """No plan when the kept cells would pass the budget, or when a depth has
    few rows per cell (full passes are cheaper); the pack is the same."""
    from packboost.backends import cpu

    data, g, h = make_binned_problem(4, **CASES["many-eras"])
    params = {**BASE, "max_depth": 4, "layer_feature_fraction": 1.0}
    draws = draw_round(np.random.default_rng(4), data, params)
    settings = grower_params(params)
    plans = []
    plan = cpu.CpuBackend._subtraction_plan
    monkeypatch.setattr(cpu.CpuBackend, "_subtraction_plan",
                        lambda self, *args: plans.append(plan(self, *args)) or plans[-1])
    small_budget = grow_on_cpu(data, g, h, draws, settings, 1, subtraction_budget_bytes=64)
    assert plans and all(p is None for p in plans)
    plans.clear()
    monkeypatch.setattr(cpu, "SUBTRACTION_MIN_ROWS_PER_CELL", 1e9)
    few_rows = grow_on_cpu(data, g, h, draws, settings, 1, subtraction_budget_bytes=2**40)
    assert plans and all(p is None for p in plans)
    for name in small_budget.nodes:
        np.testing.assert_array_equal(small_budget.nodes[name], few_rows.nodes[name])


def test_few_new_features_counts_the_next_depths_new_tree_feature_pairs():
    """The share of the next depth's (tree, feature) pairs its trees did not
    scan at this depth, against SUBTRACTION_MAX_NEW_FEATURES (None: every
    feature)."""
    few = grower.few_new_features
    limit = grower.SUBTRACTION_MAX_NEW_FEATURES
    mask = np.zeros((2, 8), dtype=bool)
    mask[:, :4] = True
    assert few(None, None) and few(mask, mask)
    assert few(None, mask)           # a subset of every feature: nothing new
    assert not few(mask, None)       # every feature next: half of them new
    assert few(mask, np.zeros_like(mask))
    for n_new in range(5):
        following = mask.copy()
        following[0, :n_new] = False
        following[0, 4:4 + n_new] = True
        assert few(mask, following) == (n_new <= limit * 8)


@pytest.mark.parametrize("tree_feature_fraction, kept", [(0.5, False), (1.0, True)])
def test_the_driver_keeps_no_cells_for_children_with_redrawn_features(
        tree_feature_fraction, kept, monkeypatch):
    """Trees whose features are redrawn at every depth (about half of them
    new at a depth) get full passes, no kept cells (cheaper: the derived
    children would sum their new features from their rows with a list);
    the same features at every depth keep them. The pack does not change."""
    from packboost.backends import cpu

    data, g, h = make_binned_problem(4, **CASES["many-eras"])
    params = {**BASE, "max_depth": 4, "layer_feature_fraction": 1.0,
              "tree_feature_fraction": tree_feature_fraction}
    draws = draw_round(np.random.default_rng(4), data, params)
    settings = grower_params(params)
    hints = []
    find_splits = cpu.CpuBackend.find_splits

    def recording(self, *args, keep_for_children=False, **kwargs):
        hints.append(keep_for_children)
        return find_splits(self, *args, keep_for_children=keep_for_children, **kwargs)

    monkeypatch.setattr(cpu.CpuBackend, "find_splits", recording)
    chosen = grow_on_cpu(data, g, h, draws, settings, 1)
    assert len(hints) >= 2 and any(hints) == kept
    # uint16 codes have no pass without a list: they keep their cells.
    wide = make_binned_problem(4, **CASES["many-eras"])[0]
    wide.X_binned = wide.X_binned.astype(np.uint16)
    hints.clear()
    grow_on_cpu(wide, g, h, draws, settings, 1)
    assert any(hints)
    monkeypatch.setattr(grower, "SUBTRACTION_MAX_NEW_FEATURES", 1.0)
    hints.clear()
    always = grow_on_cpu(data, g, h, draws, settings, 1)
    assert any(hints)
    for name in chosen.nodes:
        np.testing.assert_array_equal(chosen.nodes[name], always.nodes[name], err_msg=name)


def test_find_best_splits_refuses_an_inconsistent_subtraction_plan():
    from packboost import _split
    from packboost.backends import cpu

    data, g, h = make_binned_problem(5, n_rows=200, n_features=3, n_eras=4)
    fixed = to_fixed_point(g, np.ones_like(g), data.era_offsets)
    node_of_row = np.zeros((data.n_rows, 1), dtype=np.int32)
    node_of_row[::2] = 1
    features = np.arange(3, dtype=np.int32)
    uses = np.ones((3, 1), dtype=np.uint8)
    size = _split.depth_cells_size(data.n_eras, 2, features, data.n_bins, 1)
    args = (data.X_binned, fixed, data.all_rows, data.era_offsets, node_of_row,
            np.zeros(2, dtype=np.int32), np.ones(2, dtype=np.uint8), features, uses,
            data.n_bins, grower_params(BASE).split, 1)
    common = dict(depth_cells=np.empty(size, dtype=np.int64),
                  slot_parent=np.zeros(2, dtype=np.int32),
                  tree_extra_feature=np.zeros((3, 1), dtype=np.uint8))
    with pytest.raises(ValueError, match="SLOT_SKIP"):
        _split.find_best_splits(*args, slot_kind=np.array([cpu.SLOT_BUILD, cpu.SLOT_SKIP],
                                                          dtype=np.uint8), **common)
    with pytest.raises(ValueError, match="SLOT_DERIVE"):
        _split.find_best_splits(*args, slot_kind=np.array([cpu.SLOT_BUILD, cpu.SLOT_DERIVE],
                                                          dtype=np.uint8), **common)
    with pytest.raises(ValueError, match="depth_cells_size"):
        _split.find_best_splits(*args, **{**common, "depth_cells": np.empty(3, dtype=np.int64)},
                                slot_kind=np.ones(2, dtype=np.uint8))


def test_pack_feature_sampling_draws_once_per_pack():
    """feature_sampling="pack": every depth gets depth 0's K and tree masks;
    "depth" draws them afresh (different at some depth, same seed)."""
    data, _, _ = make_binned_problem(6, n_rows=300, n_features=20, n_eras=5)
    params = {**BASE, "max_depth": 5, "layer_feature_fraction": 0.5,
              "tree_feature_fraction": 0.5}
    pack = draw_round(np.random.default_rng(6), data, {**params, "feature_sampling": "pack"})
    depth = draw_round(np.random.default_rng(6), data, params)
    for k, mask in zip(pack.layer_features, pack.tree_feature_masks, strict=True):
        np.testing.assert_array_equal(k, pack.layer_features[0])
        np.testing.assert_array_equal(mask, pack.tree_feature_masks[0])
    assert len(pack.layer_features[0]) == 10 and pack.tree_feature_masks[0].sum(axis=1).max() == 5
    assert not all(np.array_equal(k, depth.layer_features[0]) for k in depth.layer_features)


def check_node_sums(monkeypatch):
    """Make every CpuBackend.slot_sums compare its sums with a slot_sums pass
    over the routed table, bit for bit (the squared gradients where given).
    Returns two lists it fills: whether each route_rows took the children's
    sums from the splits, and the frontier sizes whose squares were left out."""
    from packboost import _partition

    derived, without_squares = [], []
    children_sums = CpuBackend._children_sums
    slot_sums = CpuBackend.slot_sums

    def recording_children(self, *args):
        children = children_sums(self, *args)
        derived.append(children is not None)
        return children

    def checking_sums(self, n_slots):
        sums = slot_sums(self, n_slots)
        again = _partition.slot_sums(self.fixed.gradients, self.fixed.hessians,
                                     self.node_of_row, n_slots, 1)
        np.testing.assert_array_equal(sums.gradients, again[0])
        np.testing.assert_array_equal(sums.hessians, again[1])
        np.testing.assert_array_equal(sums.count, again[2])
        assert sums.count.dtype == np.int64
        if sums.gradients_squared is None:
            without_squares.append(n_slots)
        else:
            np.testing.assert_array_equal(sums.gradients_squared, again[3])
        return sums

    monkeypatch.setattr(CpuBackend, "_children_sums", recording_children)
    monkeypatch.setattr(CpuBackend, "slot_sums", checking_sums)
    return derived, without_squares


@pytest.mark.parametrize("constant_hessian", [True, False], ids=["one-word", "two-words"])
@pytest.mark.parametrize("overrides", [{}, PARAMS["newton"], PARAMS["no-sampling"],
                                       dict(layer_feature_fraction=1.0, era_subsample=1.0)],
                         ids=["realized", "newton", "no-sampling", "every-feature"])
@pytest.mark.parametrize("case", ["many-eras", "few-rows-absent-eras", "one-row", "one-era",
                                  "one-sided-eras", "ties-duplicated-feature",
                                  "many-bins-uint16", "all-paired"])
def test_node_sums_from_the_splits_equal_a_pass_over_the_rows(case, overrides,
                                                               constant_hessian, monkeypatch):
    """The CPU backend takes the children's gradient, hessian and count sums
    from the splits' left sums and sums only the squared gradients while
    routing (none at the last depth): at every depth they must be a pass
    over the rows' numbers, bit for bit, and the split-derived path must
    have run where the pack split."""
    data, g, h = make_binned_problem(5, **CASES[case])
    if data.X_binned.max() > 255:
        data.X_binned = data.X_binned.astype(np.uint16)
    if constant_hessian:
        h = np.ones_like(h)
    params = {**BASE, "max_depth": 5, **overrides}
    draws = draw_round(np.random.default_rng(5), data, params)
    settings = grower_params(params)
    derived, without_squares = check_node_sums(monkeypatch)
    pack = grow_on_cpu(data, g, h, draws, settings, 2)
    if (pack.nodes["feature"] >= 0).any():
        assert any(derived)
    depth = 0   # the packs' deepest level: squares are left out only there
    for tree in range(params["pack_size"]):
        nodes = tree_of(pack, tree)
        level = np.zeros(len(nodes["feature"]), dtype=int)
        for node in range(len(level)):
            if nodes["left_child"][node] >= 0:
                level[nodes["left_child"][node]] = level[nodes["right_child"][node]] = \
                    level[node] + 1
        depth = max(depth, int(level.max()))
    assert bool(without_squares) == (depth == params["max_depth"])


@pytest.mark.parametrize("constraints", CONSTRAINTS.values(), ids=CONSTRAINTS.keys())
@pytest.mark.parametrize("case", ["many-eras", "one-era", "no-missing"])
def test_constrained_node_sums_from_the_splits_equal_a_pass_over_the_rows(case, constraints,
                                                                          monkeypatch):
    """As above with monotone and interaction constraints (bounded gains keep
    the candidate's left sums too)."""
    derived, _ = check_node_sums(monkeypatch)
    pack = grow_both(case, {}, **constraints)[0]
    if (pack.nodes["feature"] >= 0).any():
        assert any(derived)


def test_raw_threshold_is_the_cut_above_the_bin_or_inf():
    """A split's raw threshold: the cut that ends its bin, +inf past the
    feature's last cut (features without cuts included)."""
    from packboost.grower import TrainingData

    rng = np.random.default_rng(0)
    cuts = [np.sort(rng.normal(size=n)) for n in (0, 1, 4, 254)]
    data = TrainingData(X_binned=np.zeros((4, 1), dtype=np.uint8),
                        n_bins=np.array([len(c) + 1 for c in cuts], dtype=np.int32),
                        row_era=np.zeros(1, dtype=np.int32), n_eras=1, cuts=cuts)
    feature = rng.integers(0, 4, 500).astype(np.int32)
    threshold = np.array([rng.integers(0, len(cuts[k]) + 1) for k in feature], dtype=np.int32)
    want = [cuts[k][t] if t < len(cuts[k]) else np.inf
            for k, t in zip(feature, threshold, strict=True)]
    np.testing.assert_array_equal(data.raw_threshold(feature, threshold), want)
    assert data.raw_threshold(feature[:0], threshold[:0]).shape == (0,)


@pytest.mark.parametrize("change", ["none", "threshold", "missing-side"])
def test_node_sums_come_from_the_rows_when_the_splits_are_not_the_ones_found(change):
    """Routed by other splits than find_splits found (a caller's choice), the
    children's sums are summed from the rows, not taken from the found
    splits' left sums: the next slot_sums equals a pass over the rows."""
    from packboost import _partition
    from packboost.grower import tree_uses_feature_table

    data, g, h = make_binned_problem(11, n_rows=800, n_features=4, n_eras=8)
    params = {**BASE, "era_subsample": 1.0, "row_subsample": 1.0}
    draws = draw_round(np.random.default_rng(11), data, params)
    settings = grower_params(params)
    pack_size = params["pack_size"]
    backend = CpuBackend(data, pack_size, 1)
    backend.begin_pack(to_fixed_point(g, h, data.era_offsets), draws.tree_samples)
    sums = backend.slot_sums(pack_size)
    features = np.ascontiguousarray(draws.layer_features[0], dtype=np.int32)
    best = backend.find_splits(np.arange(pack_size, dtype=np.int32),
                               np.ones(pack_size, dtype=np.uint8), features,
                               tree_uses_feature_table(draws.tree_feature_masks[0],
                                                       len(features), pack_size),
                               np.zeros(pack_size), settings.split)
    assert (best.column >= 0).all()
    threshold = best.threshold.copy()
    missing_left = best.missing_left.copy()
    if change == "threshold":
        threshold[0] = 0 if threshold[0] > 0 else 1
    elif change == "missing-side":
        missing_left[0] ^= 1
    backend.route_rows(features[best.column], threshold, missing_left,
                       2 * np.arange(pack_size, dtype=np.int32), np.zeros(pack_size, np.int32))
    children = backend.slot_sums(2 * pack_size)
    again = _partition.slot_sums(backend.fixed.gradients, backend.fixed.hessians,
                                 backend.node_of_row, 2 * pack_size, 1)
    for got, want in zip((children.gradients, children.hessians, children.count,
                          children.gradients_squared), again, strict=True):
        np.testing.assert_array_equal(got, want)
    assert np.sum(children.count) == np.sum(sums.count)


# -- several outputs in one pack (grow_output_packs, docs/packs.md §10) --------------


def _outputs_problem(case, seed, n_outputs, weighted=True):
    """The case's data with ``n_outputs`` gradient columns of different
    scales, hessians constant in every output or in none."""
    data, g, h = make_binned_problem(seed, **dict(CASES[case], weighted=weighted))
    if data.X_binned.max() > 255:
        data.X_binned = data.X_binned.astype(np.uint16)
    rng = np.random.default_rng(seed + 1)
    gradients = np.stack([g * (1.0 + 3 * output) + rng.normal(0, output, len(g))
                          for output in range(n_outputs)])
    hessians = np.stack([h if output == 0 or not weighted
                         else rng.uniform(0.2, 2.0, len(h)) for output in range(n_outputs)])
    return data, gradients, hessians


@pytest.mark.parametrize("overrides", [{}, PARAMS["newton"], PARAMS["no-sampling"],
                                       dict(row_subsample=1.0, pack_size=4),
                                       dict(era_subsample=1.0, pack_size=1)])
@pytest.mark.parametrize("case", ["many-eras", "few-rows-absent-eras", "one-row", "one-era",
                                  "equal-hessians-paired-and-single", "all-paired"])
@pytest.mark.parametrize("n_threads", [1, 2])
def test_output_packs_are_the_packs_grown_one_by_one(case, overrides, n_threads):
    """One pack of k x pack_size trees, each summing its output's gradients,
    gives every output the pack grown alone, bit for bit, and the same
    update of its raw scores; the backend then grows a one-output pack again."""
    weighted = not case.startswith("equal-hessians")
    data, gradients, hessians = _outputs_problem(case, 3, 3, weighted)
    params = {**BASE, **overrides}
    draws = draw_round(np.random.default_rng(5), data, params)
    settings = grower_params(params)
    backend = CpuBackend(data, params["pack_size"], n_threads)
    packs = grow_output_packs(backend, data, gradients, hessians, draws.tree_samples,
                              draws.layer_features, draws.tree_feature_masks, settings,
                              n_threads)
    assert packs is not None and len(packs) == 3
    scores = np.zeros((3, data.n_rows))
    for output, pack in enumerate(packs):
        backend.add_output_pack(pack, scores[output], output)
    for output, pack in enumerate(packs):
        alone, alone_backend = grow_on_cpu(data, gradients[output], hessians[output], draws,
                                           settings, n_threads, keep_backend=True)
        for name, values in alone.nodes.items():
            np.testing.assert_array_equal(pack.nodes[name], values, err_msg=name)
        np.testing.assert_array_equal(pack.tree_offsets, alone.tree_offsets)
        alone_scores = np.zeros(data.n_rows)
        alone_backend.add_pack(alone, alone_scores)
        np.testing.assert_array_equal(scores[output], alone_scores)
    # The same backend, one output again (its tables narrowed back).
    again = grow_pack(backend, data, gradients[1], hessians[1], draws.tree_samples,
                      draws.layer_features, draws.tree_feature_masks, settings, n_threads)
    np.testing.assert_array_equal(again.nodes["feature"], packs[1].nodes["feature"])


def test_output_packs_need_one_cell_format():
    """Outputs whose rounded hessians differ in kind (constant in one, not in
    another) cannot share the cells of one pass: nothing is grown."""
    data, gradients, hessians = _outputs_problem("many-eras", 3, 2)
    hessians[1] = 1.0
    params = dict(BASE)
    draws = draw_round(np.random.default_rng(5), data, params)
    backend = CpuBackend(data, params["pack_size"], 1)
    assert grow_output_packs(backend, data, gradients, hessians, draws.tree_samples,
                             draws.layer_features, draws.tree_feature_masks,
                             grower_params(params), 1) is None
