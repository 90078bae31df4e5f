"""The node-ordered route (_split.find_best_splits_by_node, pool_era_cells)
against the era-major split finder and a NumPy oracle of pooled cells."""

import numpy as np
import pytest

from packboost import _split
from packboost._fixed_point import to_fixed_point
from packboost._histogram import slot_kind as _slot_kind
from packboost.backends.interface import BestSplits

from conftest import DEFAULT_SPLIT_PARAMS, make_binned_problem

SLOT_SKIP, SLOT_BUILD, SLOT_DERIVE = (int(_slot_kind.SLOT_SKIP), int(_slot_kind.SLOT_BUILD),
                                      int(_slot_kind.SLOT_DERIVE))
SHAPES = {"many-eras": (3000, 12, 60), "empty-eras": (40, 5, 60), "one-era": (500, 7, 1),
          "one-row": (1, 3, 4)}


def _frontier(data, n_slots, pack_size, seed, *, closed=()):
    """Random slots of ``pack_size`` trees: node_of_row (a row out of a tree's
    sample now and then, -1), slot_tree, slot_open (``closed`` slots 0)."""
    rng = np.random.default_rng(seed)
    slot_tree = (np.arange(n_slots) % pack_size).astype(np.int32)
    node_of_row = np.empty((data.n_rows, pack_size), dtype=np.int32)
    for tree in range(pack_size):
        node_of_row[:, tree] = rng.choice(np.flatnonzero(slot_tree == tree), size=data.n_rows)
    node_of_row[rng.random(node_of_row.shape) < 0.1] = -1
    slot_open = np.ones(n_slots, np.uint8)
    slot_open[list(closed)] = 0
    return node_of_row, slot_tree, slot_open


def _by_node(data, fixed, node_of_row, slot_tree, slot_open, features, uses, params, n_threads,
             **kwargs):
    return _split.find_best_splits_by_node(
        np.ascontiguousarray(data.X_binned[features].T), data.X_binned, fixed, data.row_era,
        data.n_eras,
        node_of_row, slot_tree, slot_open, features, uses, data.n_bins, dict(params), n_threads,
        **kwargs)


def _era_major(data, fixed, node_of_row, slot_tree, slot_open, features, uses, params,
               n_threads, **kwargs):
    return _split.find_best_splits(
        data.X_binned, fixed, data.all_rows, data.era_offsets, node_of_row, slot_tree,
        slot_open, features, uses, data.n_bins, dict(params), n_threads, features_per_pass=4,
        best_per_slot=False, **kwargs)


def pooled_oracle(data, fixed, node_of_row, slot_tree, features, slot):
    """A slot's pooled cells by NumPy: (sum of g_q, count[, sum of h_q]) per
    (feature, bin), features in order, each n_bins + 1 wide."""
    rows = np.flatnonzero(node_of_row[:, slot_tree[slot]] == slot)
    g_q = fixed.packed[rows] >> fixed.count_bits
    words = [g_q, np.ones_like(g_q)]
    if not fixed.hessian_is_constant:
        words.append(fixed.hessian_fixed[rows])
    out = []
    for feature in features:
        codes = data.X_binned[feature, rows].astype(np.intp)
        width = int(data.n_bins[feature]) + 1
        out.append(np.stack([[np.sum(w[codes == b], dtype=np.int64) for b in range(width)]
                             for w in words], axis=1))
    return np.concatenate(out)


def _assert_same_winners(expected, found):
    a, b = BestSplits.of_table(expected), BestSplits.of_table(found)
    for field in ("column", "score", "gain", "threshold", "missing_left"):
        np.testing.assert_array_equal(getattr(b, field), getattr(a, field), err_msg=field)
    return a


@pytest.mark.parametrize("shape", SHAPES.values(), ids=SHAPES.keys())
@pytest.mark.parametrize("weighted", [False, True], ids=["one-word", "two-words"])
@pytest.mark.parametrize("constrained", [False, True])
@pytest.mark.parametrize("n_threads", [1, 2, 3])
def test_by_node_finds_the_era_major_winners(shape, weighted, constrained, n_threads):
    """Every slot's winner (first maximum: ties by feature, duplicate
    features, few gradient values), its left sums and the pooled cells are
    those of scoring every tile from per-era cells, with one- and two-word
    cells, empty and single eras, rows out of the sample, a closed slot,
    monotone bounds and interaction constraints."""
    n_rows, n_features, n_eras = shape
    data, g, h = make_binned_problem(n_rows + n_features, n_rows, n_features, n_eras,
                                     weighted=weighted, duplicate_feature=True)
    g = np.round(g * 2) / 2
    if not weighted:
        h = np.ones_like(h)
    fixed = to_fixed_point(g, h, data.era_offsets, 1)
    params = {**DEFAULT_SPLIT_PARAMS, "min_samples_leaf": 5 if n_rows > 100 else 1,
              "min_child_weight": 0.5}
    n_slots, pack_size = 7, 2
    node_of_row, slot_tree, slot_open = _frontier(data, n_slots, pack_size, n_rows, closed=[3])
    rng = np.random.default_rng(n_features)
    features = np.arange(n_features, dtype=np.int32)
    uses = (rng.random((n_features, pack_size)) < 0.8).astype(np.uint8)
    kwargs = {}
    if constrained:
        kwargs = dict(
            slot_bounds=np.array([[-np.inf, np.inf], [-0.05, 0.1]] * 3 + [[-1.0, 1.0]]),
            feature_monotone=rng.integers(-1, 2, size=n_features).astype(np.int8),
            slot_allows_feature=(rng.random((n_slots, n_features)) < 0.7).astype(np.uint8))
    variance = rng.uniform(0, 1, n_slots)
    expected = _era_major(data, fixed, node_of_row, slot_tree, slot_open, features, uses,
                          params, n_threads, slot_gradient_variance=variance, **kwargs)
    pooled = np.full(_split.pooled_cells_size(n_slots, features, data.n_bins, fixed), -7,
                     dtype=np.int64)
    found = _by_node(data, fixed, node_of_row, slot_tree, slot_open, features, uses, params,
                     n_threads, slot_gradient_variance=variance, pooled_cells=pooled, **kwargs)
    best = _assert_same_winners(expected, found)
    np.testing.assert_array_equal(found["slot_left"], expected["slot_left"])
    if n_rows > 100:
        assert (best.column >= 0).sum() >= 5
    # the tiles read are tiles era-major scoring reads, and the winners among them
    assert not np.any(found["unpacked"] & ~expected["unpacked"])
    winners = np.flatnonzero(best.column >= 0)
    assert np.all(found["unpacked"][winners, best.column[winners]])
    cells = pooled.reshape(n_slots, -1, 2 if fixed.hessian_is_constant else 3)
    widths = data.n_bins[features] + 1
    starts = np.concatenate([[0], np.cumsum(widths)])
    for slot in np.flatnonzero(slot_open):
        oracle = pooled_oracle(data, fixed, node_of_row, slot_tree, features, slot)
        for position in np.flatnonzero(uses[:, slot_tree[slot]]):
            span = slice(starts[position], starts[position + 1])
            np.testing.assert_array_equal(cells[slot, span], oracle[span])
    assert np.all(cells[3] == -7)   # the closed slot's cells are not written


def test_by_node_sums_in_chunks_when_gradients_are_lopsided():
    """One row carrying nearly all of its era's gradient leaves room for few
    rows' packed values in one int64: the sums are taken a few rows at a
    time and are still exact."""
    data, g, h = make_binned_problem(5, 2000, 6, 3, weighted=False)
    g[17] = 1e6
    h = np.ones_like(h)
    fixed = to_fixed_point(g, h, data.era_offsets, 1)
    largest = np.max(np.abs(fixed.packed >> fixed.count_bits))
    assert (1 << (61 - fixed.count_bits)) // largest < 8   # chunks of a few rows
    node_of_row, slot_tree, slot_open = _frontier(data, 4, 2, 0)
    features = np.arange(6, dtype=np.int32)
    uses = np.ones((6, 2), np.uint8)
    pooled = np.empty(_split.pooled_cells_size(4, features, data.n_bins, fixed), np.int64)
    found = _by_node(data, fixed, node_of_row, slot_tree, slot_open, features, uses,
                     DEFAULT_SPLIT_PARAMS, 2, pooled_cells=pooled)
    _assert_same_winners(_era_major(data, fixed, node_of_row, slot_tree, slot_open, features,
                                    uses, DEFAULT_SPLIT_PARAMS, 2), found)
    cells = pooled.reshape(4, -1, 2)
    for slot in range(4):
        np.testing.assert_array_equal(
            cells[slot], pooled_oracle(data, fixed, node_of_row, slot_tree, features, slot))


@pytest.mark.parametrize("weighted", [False, True], ids=["one-word", "two-words"])
@pytest.mark.parametrize("redrawn", [False, True], ids=["same-features", "tree-features-redrawn"])
def test_by_node_derives_the_larger_child_from_parent_and_sibling(weighted, redrawn):
    """Children (2k, 2k + 1): the SLOT_BUILD one summed from its rows, the
    SLOT_DERIVE one as parent minus sibling (plus the features its tree did
    not use at the parent's depth, summed), give the cells and winners of
    summing both -- and the parents' cells may come from era-major cells
    kept at their depth (pool_era_cells)."""
    data, g, h = make_binned_problem(11, 4000, 8, 30, weighted=weighted)
    if not weighted:
        h = np.ones_like(h)
    fixed = to_fixed_point(g, h, data.era_offsets, 1)
    params = {**DEFAULT_SPLIT_PARAMS, "min_samples_leaf": 5}
    pack_size, n_parents = 2, 4
    rng = np.random.default_rng(4)
    parents, parent_tree, parent_open = _frontier(data, n_parents, pack_size, 1)
    features = np.arange(8, dtype=np.int32)
    parent_uses = (rng.random((8, pack_size)) < (0.6 if redrawn else 2)).astype(np.uint8)
    uses = (rng.random((8, pack_size)) < 0.8).astype(np.uint8) if redrawn else parent_uses
    # The parents' pooled cells two ways: by node, and from kept era cells.
    parent_pooled = np.empty(_split.pooled_cells_size(n_parents, features, data.n_bins, fixed),
                             np.int64)
    _by_node(data, fixed, parents, parent_tree, parent_open, features, parent_uses, params, 2,
             pooled_cells=parent_pooled)
    words = 1 if fixed.hessian_is_constant else 2
    depth_cells = np.empty(_split.depth_cells_size(data.n_eras, n_parents, features,
                                                   data.n_bins, words), np.int64)
    _split.find_best_splits(
        data.X_binned, fixed, data.all_rows, data.era_offsets, parents, parent_tree,
        parent_open, features, parent_uses, data.n_bins, dict(params), 2, features_per_pass=3,
        depth_cells=depth_cells, slot_kind=np.full(n_parents, SLOT_BUILD, np.uint8),
        slot_parent=np.full(n_parents, -1, np.int32),
        tree_extra_feature=np.zeros((8, pack_size), np.uint8))
    widths = data.n_bins[features] + 1
    from_eras = np.empty_like(parent_pooled)
    _split.pool_era_cells(depth_cells, data.n_eras, n_parents, features, data.n_bins, 3, fixed,
                          from_eras, 2)
    pw = 2 if fixed.hessian_is_constant else 3
    by_node_cells = parent_pooled.reshape(n_parents, -1, pw)
    starts = np.concatenate([[0], np.cumsum(widths)])
    for slot in range(n_parents):
        for position in np.flatnonzero(parent_uses[:, parent_tree[slot]]):
            span = slice(starts[position] * pw, starts[position + 1] * pw)
            np.testing.assert_array_equal(from_eras.reshape(n_parents, -1)[slot, span],
                                          parent_pooled.reshape(n_parents, -1)[slot, span])
    assert by_node_cells.shape[1] == starts[-1]

    # Children: each parent's rows split at random; slot 2k + 1 closed for parent 1.
    n_slots = 2 * n_parents
    slot_tree = np.repeat(parent_tree, 2).astype(np.int32)
    share = np.where(np.arange(data.n_rows) % 3 == 0, 0.8, 0.3)[:, None]
    go_right = rng.random(parents.shape) < share
    children = np.where(parents >= 0, 2 * parents + go_right, -1).astype(np.int32)
    slot_open = np.ones(n_slots, np.uint8)
    slot_open[3] = 0
    counts = np.array([(children[:, slot_tree[s]] == s).sum() for s in range(n_slots)])
    kinds = np.full(n_slots, SLOT_SKIP, np.uint8)
    for k in range(n_parents):
        small, large = ((2 * k, 2 * k + 1) if counts[2 * k] <= counts[2 * k + 1]
                        else (2 * k + 1, 2 * k))
        kinds[small] = SLOT_BUILD
        if slot_open[large]:
            kinds[large] = SLOT_DERIVE
    assert (kinds == SLOT_DERIVE).sum() >= 3
    extra = (uses & (parent_uses == 0)).astype(np.uint8)
    assert extra.any() == redrawn
    full = np.empty(_split.pooled_cells_size(n_slots, features, data.n_bins, fixed), np.int64)
    expected = _by_node(data, fixed, children, slot_tree, slot_open, features, uses, params, 2,
                        pooled_cells=full)
    for parent_cells in (parent_pooled, from_eras):
        derived = np.empty_like(full)
        found = _by_node(data, fixed, children, slot_tree, slot_open, features, uses, params, 2,
                         pooled_cells=derived, parent_pooled=parent_cells, slot_kind=kinds,
                         slot_parent=np.repeat(np.arange(n_parents), 2).astype(np.int32),
                         tree_extra_feature=extra)
        _assert_same_winners(expected, found)
        np.testing.assert_array_equal(found["slot_left"], expected["slot_left"])
        for slot in np.flatnonzero(slot_open):
            for position in np.flatnonzero(uses[:, slot_tree[slot]]):
                span = slice(starts[position] * pw, starts[position + 1] * pw)
                np.testing.assert_array_equal(derived.reshape(n_slots, -1)[slot, span],
                                              full.reshape(n_slots, -1)[slot, span])
    _assert_same_winners(_era_major(data, fixed, children, slot_tree, slot_open, features, uses,
                                    params, 2), expected)


def test_by_node_rejects_what_it_cannot_do():
    data, g, h = make_binned_problem(2, 200, 4, 5)
    fixed = to_fixed_point(g, h, data.era_offsets, 1)
    node_of_row, slot_tree, slot_open = _frontier(data, 2, 1, 0)
    features = np.arange(4, dtype=np.int32)
    uses = np.ones((4, 1), np.uint8)
    with pytest.raises(ValueError, match="era_gain='realized'"):
        _by_node(data, fixed, node_of_row, slot_tree, slot_open, features, uses,
                 {**DEFAULT_SPLIT_PARAMS, "era_gain": "newton"}, 1)
    with pytest.raises(ValueError, match="SLOT_DERIVE"):
        _by_node(data, fixed, node_of_row, slot_tree, slot_open, features, uses,
                 DEFAULT_SPLIT_PARAMS, 1,
                 slot_kind=np.array([SLOT_BUILD, SLOT_DERIVE], np.uint8))
    with pytest.raises(ValueError, match="SLOT_SKIP"):
        _by_node(data, fixed, node_of_row, slot_tree, slot_open, features, uses,
                 DEFAULT_SPLIT_PARAMS, 1, slot_kind=np.array([SLOT_BUILD, SLOT_SKIP], np.uint8))
    with pytest.raises(ValueError, match="pooled_cells"):
        _by_node(data, fixed, node_of_row, slot_tree, slot_open, features, uses,
                 DEFAULT_SPLIT_PARAMS, 1, pooled_cells=np.empty(3, np.int64))
    with pytest.raises(ValueError, match="era_of_row"):
        _split.find_best_splits_by_node(
            np.ascontiguousarray(data.X_binned.T), data.X_binned, fixed, data.row_era[:-1],
            data.n_eras, node_of_row, slot_tree, slot_open, features, uses, data.n_bins,
            dict(DEFAULT_SPLIT_PARAMS), 1)


@pytest.mark.parametrize("n_features", [3, 8, 9])
@pytest.mark.parametrize("weighted", [False, True], ids=["one-word", "two-words"])
def test_by_node_every_feature_of_one_width(weighted, n_features):
    """A tree using every feature, all of one width (Numerai's levels: the
    every-feature benchmark's shape; pb_pool_rows takes their codes four at
    a time, then one by one: counts below, at and past a multiple of four),
    and one with a gap in its features: same winners and pooled cells."""
    data, g, h = make_binned_problem(8, 2500, n_features, 20, weighted=weighted)
    data.n_bins[:] = data.n_bins.max()    # codes stay valid; every feature as wide
    if not weighted:
        h = np.ones_like(h)
    fixed = to_fixed_point(g, h, data.era_offsets, 1)
    node_of_row, slot_tree, slot_open = _frontier(data, 6, 2, 5)
    features = np.arange(n_features, dtype=np.int32)
    uses = np.ones((n_features, 2), np.uint8)
    uses[1, 1] = 0                        # tree 1's features are not consecutive
    pooled = np.empty(_split.pooled_cells_size(6, features, data.n_bins, fixed), np.int64)
    found = _by_node(data, fixed, node_of_row, slot_tree, slot_open, features, uses,
                     DEFAULT_SPLIT_PARAMS, 2, pooled_cells=pooled)
    _assert_same_winners(_era_major(data, fixed, node_of_row, slot_tree, slot_open, features,
                                    uses, DEFAULT_SPLIT_PARAMS, 2), found)
    pw = 2 if fixed.hessian_is_constant else 3
    cells = pooled.reshape(6, -1, pw)
    width = int(data.n_bins[0]) + 1
    for slot in range(6):
        oracle = pooled_oracle(data, fixed, node_of_row, slot_tree, features, slot)
        for position in np.flatnonzero(uses[:, slot_tree[slot]]):
            span = slice(position * width, (position + 1) * width)
            np.testing.assert_array_equal(cells[slot, span], oracle[span])


@pytest.mark.parametrize("n_threads", [1, 2, 3])
@pytest.mark.parametrize("weighted", [False, True], ids=["one-word", "two-words"])
def test_by_node_sums_a_slot_in_pieces_on_many_threads(monkeypatch, weighted, n_threads):
    """Built slots cut into pieces of a few rows (as near the roots with
    many threads): each piece summed apart and added to its slot gives the
    same pooled cells and winners as whole slots, and as the oracle."""
    data, g, h = make_binned_problem(21, 1500, 7, 9, weighted=weighted)
    if not weighted:
        h = np.ones_like(h)
    fixed = to_fixed_point(g, h, data.era_offsets, 1)
    node_of_row, slot_tree, slot_open = _frontier(data, 6, 3, 2, closed=[4])
    node_of_row[node_of_row == 5] = 2     # slot 5 (tree 2) has no rows
    features = np.arange(7, dtype=np.int32)
    uses = np.ones((7, 3), np.uint8)
    uses[2, 0] = 0
    cells = {}
    for label, min_rows in (("whole", 10**9), ("pieces", 1), ("pairs", 2)):
        monkeypatch.setattr(_split, "POOL_MIN_PIECE_ROWS", min_rows)
        monkeypatch.setattr(_split, "POOL_PIECES_PER_THREAD", 10**6 if min_rows < 10**9 else 4)
        pooled = np.full(_split.pooled_cells_size(6, features, data.n_bins, fixed), -3, np.int64)
        found = _by_node(data, fixed, node_of_row, slot_tree, slot_open, features, uses,
                         DEFAULT_SPLIT_PARAMS, n_threads, pooled_cells=pooled)
        _assert_same_winners(_era_major(data, fixed, node_of_row, slot_tree, slot_open,
                                        features, uses, DEFAULT_SPLIT_PARAMS, n_threads), found)
        cells[label] = pooled
    np.testing.assert_array_equal(cells["pieces"], cells["whole"])
    np.testing.assert_array_equal(cells["pairs"], cells["whole"])
    pw = 2 if fixed.hessian_is_constant else 3
    for slot in np.flatnonzero(slot_open):
        oracle = pooled_oracle(data, fixed, node_of_row, slot_tree, features, slot)
        got = cells["pieces"].reshape(6, -1, pw)[slot]
        used = np.concatenate([np.full(int(data.n_bins[f]) + 1, uses[f, slot_tree[slot]])
                               for f in features]).astype(bool)
        np.testing.assert_array_equal(got[used], oracle[used])


@pytest.mark.parametrize("n_threads", [1, 2, 16])
@pytest.mark.parametrize("lengths", [[0], [1], [40_000] * 8, [90_000, 5, 0, 20_000, 2047]])
def test_slot_pieces_cover_every_row_once_and_share_the_rows_out(lengths, n_threads):
    """The pooled pass's work items: each slot's pieces tile its rows (as the
    kernel cuts them), a piece past the first has its own partial cells,
    consecutive per slot, and no piece is longer than the threads' share
    of the rows (or POOL_MIN_PIECE_ROWS): enough pieces for the threads."""
    lengths = np.asarray(lengths)
    built = np.arange(len(lengths))[::-1]
    item_slot, item_piece, item_pieces, item_partial = _split.slot_pieces(built, lengths,
                                                                          n_threads)
    partials = item_partial[item_piece > 0]
    np.testing.assert_array_equal(partials, np.arange(len(partials)))
    for slot, n in zip(built, lengths, strict=True):
        mine = np.flatnonzero(item_slot == slot)
        assert np.all(np.diff(mine) == 1) and np.array_equal(item_piece[mine],
                                                             np.arange(len(mine)))
        assert np.all(item_pieces[mine] == len(mine))
        bounds = [n * piece // len(mine) for piece in range(len(mine) + 1)]
        assert bounds[0] == 0 and bounds[-1] == n and np.all(np.diff(bounds) >= (1 if n else 0))
        share = -(-int(lengths.sum()) // (n_threads * _split.POOL_PIECES_PER_THREAD))
        assert np.max(np.diff(bounds)) <= max(_split.POOL_MIN_PIECE_ROWS, share)
