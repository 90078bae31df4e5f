"""The shard kernels of distributed training (packboost._distributed) against
NumPy oracles: reading the CPU backend's per-era cells, pooling them, and the
era pass's independence from the thread count."""

import numpy as np
import pytest

from packboost import _distributed, _split
from packboost._fixed_point import to_fixed_point
from packboost._histogram import slot_kind as _slot_kind

from conftest import DEFAULT_SPLIT_PARAMS, make_binned_problem


def _depth(seed, weighted, n_rows=900, n_features=7, n_eras=9, pack_size=2, n_slots=6,
           layout="per-tree", skip_eras=False):
    """A depth's per-era cells as find_best_splits leaves them in
    ``depth_cells``: scored as a local fit with subtraction scores them
    ("scored", block-wide), or cells only, block-wide ("cells-only") or per
    tree ("per-tree", the shard's layout when no child derives).
    ``skip_eras``: each tree draws some eras only (an era subsample: the
    others' rows in no slot of the tree, the pass told by ``era_tree_rows``)."""
    cells_only = layout != "scored"
    data, g, h = make_binned_problem(seed, n_rows, n_features, n_eras, weighted=weighted)
    if not weighted:
        h = np.ones_like(h)
    fixed = to_fixed_point(g, h, data.era_offsets, 1)
    rng = np.random.default_rng(seed)
    slot_tree = np.sort(np.arange(n_slots) % pack_size).astype(np.int32)
    node_of_row = np.empty((data.n_rows, pack_size), dtype=np.int32)
    for tree in range(pack_size):
        node_of_row[:, tree] = rng.choice(np.flatnonzero(slot_tree == tree), size=data.n_rows)
    node_of_row[rng.random(node_of_row.shape) < 0.1] = -1
    era_tree_rows = None
    if skip_eras:
        era_tree_rows = (rng.random((data.n_eras, pack_size)) < 0.6).astype(np.uint8)
        era_of_row = np.repeat(np.arange(data.n_eras), np.diff(data.era_offsets))
        node_of_row[era_tree_rows[era_of_row] == 0] = -1
    slot_open = np.ones(n_slots, np.uint8)
    slot_open[1] = 0
    features = np.array([0, 2, 3, 5, 6], dtype=np.int32)
    uses = (rng.random((len(features), pack_size)) < 0.7).astype(np.uint8)
    uses[0] = 1   # every tree uses a feature
    words = 1 if fixed.hessian_is_constant else 2
    origin = np.empty((len(features), pack_size), np.int64)
    stride = np.empty(len(features), np.int64)
    # The cells pooled by the pass itself, block by block (cells only).
    in_pass = (np.full(_split.pooled_cells_size(n_slots, features, data.n_bins, fixed), -3,
                       np.int64) if cells_only else None)
    # Stale values in the buffer (a fit reuses it from depth to depth).
    cells = np.full(_split.depth_cells_size(data.n_eras, n_slots, features, data.n_bins, words),
                    -7, np.int64)
    found = _split.find_best_splits(
        data.X_binned, fixed, data.all_rows, data.era_offsets, node_of_row, slot_tree,
        slot_open, features, uses, data.n_bins, dict(DEFAULT_SPLIT_PARAMS), 2,
        features_per_pass=2, depth_cells=cells,
        slot_kind=np.where(slot_open != 0, int(_slot_kind.SLOT_BUILD),
                           int(_slot_kind.SLOT_SKIP)).astype(np.uint8),
        slot_parent=np.full(n_slots, -1, np.int32),
        tree_extra_feature=np.zeros((len(features), pack_size), np.uint8),
        cells_only=cells_only, cell_origin=origin, cell_stride=stride,
        cells_per_tree=layout == "per-tree", pooled_cells=in_pass, era_tree_rows=era_tree_rows)
    # cells_only: the cells and nothing scored.
    assert found["found"].any() != cells_only
    # Runs per tree: a feature's cells start at different places for the two trees.
    # A block's (era, slot) run (features_per_pass=2): every feature's
    # cells, or, per tree, the longest tree's features' cells.
    widths = data.n_bins[features] + 1
    for first in range(0, len(features), 2):
        block = slice(first, first + 2)
        run = (np.max(uses[block].T @ widths[block]) if layout == "per-tree"
               else widths[block].sum())
        assert np.all(stride[block] == run * words)
    if cells_only:
        # pooled in the pass: every open slot's rows' sums over all eras
        widths = np.ascontiguousarray(widths, dtype=np.int64)
        expected = _pooled_oracle(data, fixed, node_of_row, slot_tree, slot_open, features, uses)
        for n_threads in (1, 3):
            np.testing.assert_array_equal(
                _distributed.pooled_from_cells(in_pass, _distributed.cell_prefix(widths),
                                               widths, n_slots, int(widths.max()), fixed,
                                               n_threads), expected)
    return (data, fixed, node_of_row, slot_tree, slot_open, features, uses, cells, words,
            (origin, stride))


def _oracle(data, fixed, node_of_row, slot_tree, slot, position_feature, era):
    """(g, h, count) per bin of one (slot, feature, era): the rows' sums."""
    rows = np.arange(data.era_offsets[era], data.era_offsets[era + 1])
    rows = rows[node_of_row[rows, slot_tree[slot]] == slot]
    width = data.n_bins[position_feature] + 1
    codes = data.X_binned[position_feature, rows]
    return np.stack([np.bincount(codes, fixed.gradients[rows], width),
                     np.bincount(codes, fixed.hessians[rows], width),
                     np.bincount(codes, minlength=width).astype(float)], axis=1)


def _pooled_oracle(data, fixed, node_of_row, slot_tree, slot_open, features, uses):
    """(n_slots, n_features, widest, 3) the open slots' (g, h, count) per bin
    over all eras, from their rows (zeros for a closed slot or a feature its
    tree does not use): what enumerate_candidates reads."""
    widths = data.n_bins[features] + 1
    pooled = np.zeros((len(slot_tree), len(features), int(widths.max()), 3))
    for slot in np.flatnonzero(slot_open):
        for position, feature in enumerate(features):
            if uses[position, slot_tree[slot]]:
                pooled[slot, position, :widths[position]] = sum(
                    _oracle(data, fixed, node_of_row, slot_tree, slot, feature, era)
                    for era in range(data.n_eras))
    return pooled


def _read(data, fixed, node_of_row, slot_tree, slot_open, features, uses, cells, words,
          origin_stride):
    """What a shard reads of its cells: their layout (origin, stride, widths,
    slot_tree), the pooled sums (the rows', which _depth checks the pass's
    against) and the rows per (slot, era)."""
    origin, stride = origin_stride
    widths = np.ascontiguousarray(data.n_bins[features] + 1, dtype=np.int64)
    pooled = _pooled_oracle(data, fixed, node_of_row, slot_tree, slot_open, features, uses)
    era_rows, on_threads = (_distributed.era_rows_from_cells(
        cells, origin, stride, widths, slot_tree, slot_open, uses, data.n_eras, words,
        fixed.count_bits, n_threads) for n_threads in (1, 3))
    np.testing.assert_array_equal(on_threads, era_rows)   # the slots shared among threads
    return (origin, stride, widths, slot_tree), pooled, era_rows


@pytest.mark.parametrize("skip_eras", [False, True], ids=["every-era", "era-subsample"])
@pytest.mark.parametrize("layout", ["scored", "cells-only", "per-tree"])
@pytest.mark.parametrize("weighted", [False, True], ids=["one-word", "two-words"])
def test_cells_read_pooled_and_counted_as_the_rows_sum(weighted, layout, skip_eras):
    """Every cell of the depth -- in an era its tree skips too, from a buffer
    of stale values -- is its rows' sums, and so are the rows per (slot,
    era) read from them (the pass's pooled cells: _depth)."""
    data, fixed, node_of_row, slot_tree, slot_open, features, uses, cells, words, where = \
        _depth(3, weighted, layout=layout, skip_eras=skip_eras)
    n_slots = len(slot_tree)
    (origin, stride, widths, _), _, era_rows = _read(
        data, fixed, node_of_row, slot_tree, slot_open, features, uses, cells, words, where)
    count_mask = (1 << fixed.count_bits) - 1
    for slot in np.flatnonzero(slot_open):
        for position, feature in enumerate(features):
            if not uses[position, slot_tree[slot]]:
                continue
            width = widths[position]
            per_era = [_oracle(data, fixed, node_of_row, slot_tree, slot, feature, era)
                       for era in range(data.n_eras)]
            for era, expected in enumerate(per_era):
                start = (origin[position, slot_tree[slot]]
                         + (era * n_slots + slot) * stride[position])
                raw = cells[start:start + width * words].reshape(width, words)
                np.testing.assert_array_equal(raw[:, 0] & count_mask, expected[:, 2])
                np.testing.assert_array_equal((raw[:, 0] >> fixed.count_bits)
                                              / fixed.gradient_scale, expected[:, 0])
                assert era_rows[slot, era] == expected[:, 2].sum()
    assert not era_rows[1].any()   # the closed slot


@pytest.mark.parametrize("chunk_bytes", [1, 3000, 1 << 40], ids=["era-by-era", "few", "all"])
@pytest.mark.parametrize("weighted", [False, True], ids=["one-word", "two-words"])
def test_cells_pooled_a_chunk_of_eras_at_a_time_as_after_the_pass(monkeypatch, chunk_bytes,
                                                                  weighted):
    """The pass sums its cells over the eras a chunk of eras at a time
    (POOL_CHUNK_BYTES, while the chunk's cells are in cache): one era a
    chunk, a few, all at once -- the pooled cells are the rows' sums over
    all eras (_depth compares them), block-wide and per tree."""
    monkeypatch.setattr(_split, "POOL_CHUNK_BYTES", chunk_bytes)
    for layout in ("cells-only", "per-tree"):
        _depth(5, weighted, layout=layout)


def test_cells_only_needs_the_cells_to_fill():
    data, g, h = make_binned_problem(0, 50, 3, 2)
    fixed = to_fixed_point(g, h, data.era_offsets, 1)
    with pytest.raises(ValueError, match="cells_only needs depth_cells"):
        _split.find_best_splits(
            data.X_binned, fixed, data.all_rows, data.era_offsets,
            np.zeros((data.n_rows, 1), np.int32), np.zeros(1, np.int32), np.ones(1, np.uint8),
            np.arange(3, dtype=np.int32), np.ones((3, 1), np.uint8), data.n_bins,
            dict(DEFAULT_SPLIT_PARAMS), 1, cells_only=True)


@pytest.mark.parametrize("era_weighting", ["equal", "count"])
@pytest.mark.parametrize("era_gain", ["realized", "newton"])
def test_candidates_enumerated_on_several_threads_are_those_of_one(era_gain, era_weighting):
    """enumerate_candidates shares the slots among threads, each slot's
    candidates written in a region of its own and the regions closed up:
    the same candidates, fields and order as on one thread -- with and
    without constraints (value bounds, monotone features, pairs not
    allowed), with count weights' era-weighted sums, slots closed or
    without candidates."""
    data, fixed, node_of_row, slot_tree, slot_open, features, uses, cells, words, where = \
        _depth(7, True, n_eras=11)
    _, pooled, era_rows = _read(data, fixed, node_of_row, slot_tree, slot_open, features,
                                uses, cells, words, where)
    n_slots, n_positions, width = pooled.shape[:3]
    era_stats = np.ascontiguousarray(np.stack(
        [(era_rows > 0).sum(axis=1), era_rows.sum(axis=1), (era_rows ** 2).sum(axis=1)],
        axis=1).astype(np.float64))
    rng = np.random.default_rng(3)
    params = {**DEFAULT_SPLIT_PARAMS, "lambda_dir": 0.3, "era_gain": era_gain,
              "era_weighting": era_weighting}
    weighted = ((rng.normal(size=(n_slots, n_positions, 4)),
                 rng.normal(size=(n_slots, n_positions, width, 2)))
                if era_weighting == "count" else (None, None))
    bounds = np.tile([-np.inf, np.inf], (n_slots, 1))
    bounds[::2] = [-0.05, 0.08]
    constrained = {"slot_bounds": bounds,
                   "feature_monotone": rng.integers(-1, 2, n_positions).astype(np.int8),
                   "slot_allows_feature": (rng.random((n_slots, n_positions)) < 0.7
                                           ).astype(np.uint8)}
    for constraints in (None, constrained):
        one, several = (_distributed.enumerate_candidates(
            pooled, era_stats, slot_tree, slot_open, features, uses, data.n_bins, params,
            *weighted, constraints, n_threads) for n_threads in (1, 4))
        assert len(one["slot"]) > 20 and set(one) == set(several)
        assert np.all(np.diff(one["slot"]) >= 0)   # slot after slot
        for name in one:
            assert one[name].dtype == several[name].dtype
            np.testing.assert_array_equal(one[name], several[name], err_msg=name)
        # Each candidate's fields are its own tile's (whole grid steps: exact
        # in any order): its node, its left side with the missing bin where
        # it goes left, its node's value bounds.
        for i, (slot, position, threshold) in enumerate(zip(
                one["slot"], one["position"], one["threshold"], strict=True)):
            assert slot_open[slot] and uses[position, slot_tree[slot]]
            tile = pooled[slot, position, :data.n_bins[features[position]] + 1]
            left = tile[:threshold + 1].sum(axis=0) + (tile[-1] if one["missing_left"][i] else 0)
            assert (one["sum_g"][i], one["sum_h"][i]) == (tile[:, 0].sum(), tile[:, 1].sum())
            assert (one["left_g"][i], one["left_h"][i], one["left_count"][i]) == tuple(left)
            bound = bounds[slot] if constraints else [-np.inf, np.inf]
            assert (one["lower"][i], one["upper"][i]) == tuple(bound)


@pytest.mark.parametrize("era_gain", ["realized", "newton"])
def test_era_pass_over_any_split_of_the_eras_gives_the_sums_of_all_eras(era_gain):
    """The era pass on a grid (docs/des.md §6.3): the largest terms and the
    integer sums of any split of the eras (contiguous, interleaved, one era
    alone, nothing), combined, are those of all eras at once, on any number
    of threads (tests/test_dask.py: the models are the local fit's)."""
    data, fixed, node_of_row, slot_tree, slot_open, features, uses, cells, words, where = \
        _depth(5, False, n_eras=13)
    n_slots = len(slot_tree)
    params = {**DEFAULT_SPLIT_PARAMS, "lambda_dro": 0.5, "lambda_dir": 0.3,
              "era_gain": era_gain, "era_std": "between"}
    layout, pooled, era_rows = _read(data, fixed, node_of_row, slot_tree, slot_open, features,
                                     uses, cells, words, where)
    era_stats = np.ascontiguousarray(np.stack(
        [(era_rows > 0).sum(axis=1), era_rows.sum(axis=1), (era_rows ** 2).sum(axis=1)],
        axis=1).astype(np.float64))
    candidates = _distributed.enumerate_candidates(
        pooled, era_stats, slot_tree, slot_open, features, uses, data.n_bins, params)
    n = len(candidates["slot"])
    assert n > 20
    variance = np.ones(n_slots)
    modes = ((_distributed.MODE_NEWTON_MAX, _distributed.MODE_NEWTON_SUM) if era_gain == "newton"
             else (_distributed.MODE_TERMS_MAX, _distributed.MODE_TERMS_SUM))

    def era_pass(rows, grid=None, threads=1):
        arguments = (cells, layout, np.ascontiguousarray(rows), fixed, n_slots,
                     threads)
        if grid is None:
            return _distributed.candidate_pass(candidates, variance, params, modes[0],
                                               *arguments)
        return _distributed.candidate_pass(candidates, variance, params, modes[1], *arguments,
                                           grid=grid)

    largest = era_pass(era_rows)
    assert np.all(largest > 0)
    n_terms = np.ascontiguousarray(era_stats[candidates["slot"], 0])
    if era_gain == "newton":
        grid = _distributed.newton_grid_exponents(largest, n_terms)
    else:
        grid = _distributed.grid_exponents(largest, np.ones(n), n_terms, params)
    steps = era_pass(era_rows, grid)
    assert steps.dtype == np.int64 and np.any(steps != 0)
    np.testing.assert_array_equal(era_pass(era_rows, grid, threads=3), steps)
    # The terms kept by the maximum pass, rounded by the sum pass: the same
    # integers (the votes, lambda_dir != 0, are computed again, not kept).
    for lambda_dir in (0.0, 0.3):
        voting = {**params, "lambda_dir": lambda_dir}
        arguments = (cells, layout, era_rows, fixed, n_slots, 2)
        kept = np.full((n, data.n_eras, _distributed.kept_terms(modes[0])), np.nan)
        np.testing.assert_array_equal(
            _distributed.candidate_pass(candidates, variance, voting, modes[0], *arguments,
                                        kept=kept), largest)
        np.testing.assert_array_equal(
            _distributed.candidate_pass(candidates, variance, voting, modes[1], *arguments,
                                        grid=grid, kept=kept),
            _distributed.candidate_pass(candidates, variance, voting, modes[1], *arguments,
                                        grid=grid))
    with pytest.raises(ValueError, match="kept must be"):
        _distributed.candidate_pass(candidates, variance, params, modes[0],
                                    cells, layout, era_rows, fixed, n_slots,
                                    kept=np.empty((n, data.n_eras, 3)))
    rng = np.random.default_rng(0)
    for owner in (np.arange(13) >= 6, np.arange(13) % 2, np.arange(13) == 4,
                  np.zeros(13, bool), rng.integers(0, 3, 13)):
        owner = np.asarray(owner, dtype=np.int64)
        parts = [era_rows * (owner == rank) for rank in range(owner.max() + 1)]
        np.testing.assert_array_equal(np.maximum.reduce([era_pass(p) for p in parts]),
                                      largest)
        np.testing.assert_array_equal(sum(era_pass(p, grid) for p in parts), steps)


@pytest.mark.parametrize("n_threads", [1, 2])
@pytest.mark.parametrize("cut", [0, 1, 501, 1299, 1300])
def test_slot_sums_of_any_split_of_the_rows_add_to_the_local_sums(n_threads, cut):
    """The slot sums of two shards cut at row ``cut`` (a shard may be empty),
    added, are the local slot_sums bit for bit, on any number of threads:
    every value is on a grid on which its sums are exact (the squared
    gradients on theirs, FixedPointGradients.squared), over magnitudes
    spread across six decades."""
    from packboost import _partition

    rng = np.random.default_rng(cut)
    n_rows, n_slots, pack_size = 1300, 5, 2
    raw = rng.normal(size=n_rows) * 10.0 ** rng.integers(-3, 4, size=n_rows)
    fixed = to_fixed_point(raw, rng.uniform(0.1, 2.0, size=n_rows),
                           np.array([0, 700, n_rows]), 1)
    node_of_row = rng.integers(-1, n_slots, size=(n_rows, pack_size)).astype(np.int32)
    expected = _partition.slot_sums(fixed.gradients, fixed.hessians, node_of_row, n_slots, 1,
                                    squared_gradients=fixed.squared)
    assert np.all(expected[3] > 0)
    parts = [_partition.slot_sums(fixed.gradients[first:end], fixed.hessians[first:end],
                                  np.ascontiguousarray(node_of_row[first:end]), n_slots,
                                  n_threads, squared_gradients=fixed.squared[first:end])
             for first, end in ((0, cut), (cut, n_rows))]
    for column, want in enumerate(expected):
        np.testing.assert_array_equal(parts[1][column] + parts[0][column], want)
    # The squared gradients: within half a step per row of the float squares.
    np.testing.assert_allclose(fixed.squared, fixed.gradients ** 2, rtol=0,
                               atol=0.5 / fixed.squared_scale)


def test_grid_exponents_are_the_smallest_steps_that_cannot_overflow():
    """csrc/des.h des_grid_exponent (docs/des.md §6.3): the step 2^k is the
    smallest power of two with largest * n_terms < 2^(k + 62); no term, or
    terms of 0, give the smallest step; a tiny maximum stops at 2^-1022."""
    rng = np.random.default_rng(3)
    largest = np.ascontiguousarray(
        np.abs(rng.normal(size=300)) * 10.0 ** rng.integers(-200, 200, size=300))
    n_terms = np.ascontiguousarray(rng.integers(1, 5000, size=300).astype(np.float64))
    exponents = _distributed.newton_grid_exponents(largest, n_terms).astype(np.int64)
    bound = largest * n_terms
    assert np.all(bound < np.ldexp(1.0, exponents + 62))
    assert np.all(bound >= np.ldexp(1.0, exponents + 61))
    # a whole number of steps per term: at most 2^62 / n_terms of them
    assert np.all(np.ldexp(largest, -exponents) <= np.ldexp(1.0, 62) / n_terms)
    edge = _distributed.newton_grid_exponents(np.array([0.0, 1e-320, 1.0]),
                                              np.array([5.0, 5.0, 1.0]))
    assert list(edge) == [-1022, -1022, -61]


def test_era_pass_sums_on_the_grid_are_the_float_sums_to_rounding():
    """The grid sums times their steps are the exact sums of the same float
    terms (those the maximum pass keeps) to within half a step per term."""
    import math

    data, fixed, node_of_row, slot_tree, slot_open, features, uses, cells, words, where = \
        _depth(7, True, n_eras=11)
    n_slots = len(slot_tree)
    layout, pooled, era_rows = _read(data, fixed, node_of_row, slot_tree, slot_open, features,
                                     uses, cells, words, where)
    era_stats = np.ascontiguousarray(np.stack(
        [(era_rows > 0).sum(axis=1), era_rows.sum(axis=1), (era_rows ** 2).sum(axis=1)],
        axis=1).astype(np.float64))
    arguments = (cells, layout, era_rows, fixed, n_slots, 1)
    variance = np.full(n_slots, 0.7)
    for era_gain, modes in (("newton", (_distributed.MODE_NEWTON_MAX,
                                        _distributed.MODE_NEWTON_SUM)),
                            ("realized", (_distributed.MODE_TERMS_MAX,
                                          _distributed.MODE_TERMS_SUM))):
        params = {**DEFAULT_SPLIT_PARAMS, "lambda_dro": 0.5, "era_gain": era_gain,
                  "era_std": "between"}
        candidates = _distributed.enumerate_candidates(
            pooled, era_stats, slot_tree, slot_open, features, uses, data.n_bins, params)
        n = len(candidates["slot"])
        n_terms = np.ascontiguousarray(era_stats[candidates["slot"], 0])
        kept = np.zeros((n, data.n_eras, _distributed.kept_terms(modes[0])))
        largest = _distributed.candidate_pass(candidates, variance, params, modes[0],
                                              *arguments, kept=kept)
        if era_gain == "newton":
            grid = _distributed.newton_grid_exponents(largest, n_terms)
        else:
            grid = _distributed.grid_exponents(largest, np.ones(n), n_terms, params)
        steps = _distributed.candidate_pass(candidates, variance, params, modes[1],
                                            *arguments, grid=grid)
        # the kept terms: the newton gains, or the squares and the noise
        steps = steps.reshape(n, -1)[:, :kept.shape[2]]
        grid = grid.reshape(n, -1)[:, :kept.shape[2]]
        for i in range(n):
            for j in range(kept.shape[2]):
                exact = math.fsum(kept[i, :, j])
                step = math.ldexp(1.0, int(grid[i, j]))
                assert abs(math.ldexp(float(steps[i, j]), int(grid[i, j])) - exact) \
                    <= 0.5 * step * n_terms[i] * (1 + 1e-12)
        assert n > 10 and np.any(steps != 0)


@pytest.mark.parametrize("n_threads", [1, 3])
def test_rank_in_slot_orders_each_slots_candidates_highest_first(n_threads):
    """The order of the Dask era pass's rounds (best first, as the local scan
    goes): within each slot by value, the largest 0, ties to the lower
    index, NaN after every number (-inf included) -- against sorting each
    slot alone; slots in any order, some empty; the slots sorted on one
    thread or shared among several."""
    rng = np.random.default_rng(4)
    for n in (0, 1, 7, 200, 3000):
        slot = rng.integers(0, 5, n).astype(np.int32)
        value = rng.integers(-3, 3, n).astype(float)   # ties
        value[rng.random(n) < 0.1] = -np.inf
        value[rng.random(n) < 0.2] = np.nan
        rank = _distributed.rank_in_slot(slot, value, 6, n_threads)
        assert rank.dtype == np.int64 and rank.shape == (n,)
        for one in range(6):
            members = np.flatnonzero(slot == one)
            ordered = [i for _, _, i in sorted(
                (bool(np.isnan(value[i])), -value[i] if not np.isnan(value[i]) else 0.0, i)
                for i in members)]
            np.testing.assert_array_equal(rank[ordered], np.arange(len(members)))
    with pytest.raises(ValueError, match="slot 5"):
        _distributed.rank_in_slot(np.array([0, 5], dtype=np.int32), np.zeros(2), 5)
    with pytest.raises(ValueError, match="one entry per candidate"):
        _distributed.rank_in_slot(np.zeros(2, dtype=np.int32), np.zeros(3), 5)


def test_best_first_round_takes_the_window_of_ranks_reaching_their_floor():
    """A best-first round's candidates: place in the slot within [first,
    first + width), bound at or above the slot's floor (NaN never, -inf
    against an open floor), ascending -- against NumPy's expression."""
    rng = np.random.default_rng(7)
    for n in (0, 1, 13, 400):
        slot = rng.integers(0, 5, n).astype(np.int32)
        bound = rng.integers(-3, 3, n).astype(float)   # ties with the floors
        bound[rng.random(n) < 0.1] = np.nan
        bound[rng.random(n) < 0.1] = -np.inf
        rank = _distributed.rank_in_slot(slot, bound, 5)
        floor = rng.integers(-3, 3, 5).astype(float)
        floor[0] = -np.inf
        for first, width in ((0, 1), (0, 4), (4, 8), (2, 1000)):
            chosen = _distributed.best_first_round(rank, bound, slot, floor, first, width)
            assert chosen.dtype == np.int64
            np.testing.assert_array_equal(
                chosen, np.flatnonzero((rank >= first) & (rank < first + width)
                                       & (bound >= floor[slot])))
    with pytest.raises(ValueError, match="one entry per candidate"):
        _distributed.best_first_round(np.zeros(2, np.int64), np.zeros(3),
                                      np.zeros(2, np.int32), np.zeros(1), 0, 1)


def _candidates_of_tiles(rng, n, n_slots, n_positions):
    """``n`` candidates spread over (slot, position) tiles, scores with ties,
    -inf and NaN, and their pooled left sums."""
    candidates = {
        "slot": rng.integers(0, n_slots, n).astype(np.int32),
        "position": rng.integers(0, n_positions, n).astype(np.int32),
        "threshold": rng.integers(0, 6, n).astype(np.int32),
        "missing_left": rng.integers(0, 2, n).astype(np.uint8),
        "left_g": rng.normal(size=n), "left_h": rng.random(n),
        "left_count": rng.integers(1, 50, n).astype(float)}
    score = rng.integers(-2, 2, n).astype(float)   # ties
    score[rng.random(n) < 0.2] = -np.inf
    score[rng.random(n) < 0.2] = np.nan
    return candidates, score, rng.normal(size=n)


def test_tile_table_takes_score_tiles_choice_then_each_slots_first_best():
    """Each (slot, feature) tile's choice as score_tile makes it: the first
    candidate (lowest index) of the largest score; none where every score is
    -inf or NaN; each slot's winner the first tile of the largest score, with
    its candidate's left sums -- against loops over the candidates."""
    rng = np.random.default_rng(5)
    n_slots, n_positions = 4, 3
    for n in (0, 1, 9, 500):
        candidates, score, gain = _candidates_of_tiles(rng, n, n_slots, n_positions)
        table = _distributed.tile_table(candidates, score, gain, n_slots, n_positions)
        chosen = np.full((n_slots, n_positions), -1)
        for s in range(n_slots):
            for p in range(n_positions):
                members = [i for i in np.flatnonzero((candidates["slot"] == s)
                                                     & (candidates["position"] == p))
                           if score[i] > -np.inf]
                if members:
                    chosen[s, p] = min(members, key=lambda i: (-score[i], i))
        found = chosen >= 0

        def of_chosen(values, none, found=found, chosen=chosen):
            return np.where(found, np.append(values, none)[chosen], none)

        np.testing.assert_array_equal(table["found"], found)
        np.testing.assert_array_equal(table["score"], of_chosen(score, -np.inf))
        np.testing.assert_array_equal(table["gain"], of_chosen(gain, 0.0))
        for name in ("threshold", "missing_left"):
            np.testing.assert_array_equal(table[name], of_chosen(candidates[name], 0))
            assert table[name].dtype == candidates[name].dtype
        if not found.any():
            assert "slot_left" not in table
            continue
        for s in range(n_slots):
            tiles = [p for p in range(n_positions) if found[s, p]]
            if not tiles:
                assert np.isnan(table["slot_left"][s]).all()
                continue
            winner = min(tiles, key=lambda p: (-score[chosen[s, p]], p))
            i = chosen[s, winner]
            np.testing.assert_array_equal(
                table["slot_left"][s], [winner, candidates["left_g"][i],
                                        candidates["left_h"][i], candidates["left_count"][i]])
    candidates, score, gain = _candidates_of_tiles(rng, 1, n_slots, n_positions)
    candidates["slot"][:] = n_slots
    with pytest.raises(ValueError, match="outside"):
        _distributed.tile_table(candidates, np.zeros(1), gain, n_slots, n_positions)
    with pytest.raises(ValueError, match="one entry per candidate"):
        _distributed.tile_table(candidates, np.zeros(2), gain, n_slots, n_positions)


def test_era_row_stats_are_the_eras_with_rows_the_rows_and_their_squares():
    """Per slot: eras with rows, rows, squared rows summed -- against NumPy,
    with empty eras, empty slots and a single era."""
    rng = np.random.default_rng(6)
    for n_slots, n_eras in ((1, 1), (3, 1), (5, 40), (0, 4)):
        era_rows = rng.integers(0, 4, (n_slots, n_eras)).astype(float) * \
            rng.integers(1, 100_000, (n_slots, n_eras))
        stats = _distributed.era_row_stats(era_rows)
        assert stats.dtype == np.int64 and stats.shape == (n_slots, 3)
        rows = era_rows.astype(np.int64)
        np.testing.assert_array_equal(
            stats, np.stack([(rows > 0).sum(axis=1), rows.sum(axis=1), (rows ** 2).sum(axis=1)],
                            axis=1).reshape(n_slots, 3))

