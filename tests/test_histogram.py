"""Per-era pack histogram kernel vs the NumPy oracle."""

import numpy as np
import pytest

from packboost import _histogram, _partition
from packboost._fixed_point import to_fixed_point

from conftest import make_binned_problem
from oracles import reference as _reference


def random_slots(rng, n_rows, pack_size, n_slots_per_tree):
    """node_of_row for a pack: each tree's rows spread over its slots, some -1."""
    node_of_row = np.full((n_rows, pack_size), -1, dtype=np.int32)
    for tree in range(pack_size):
        slots = tree * n_slots_per_tree + rng.integers(0, n_slots_per_tree, n_rows)
        used = rng.random(n_rows) < 0.8
        node_of_row[used, tree] = slots[used]
    return node_of_row


# 129 and 261 rows: row chunks (ROW_CHUNK = 128) and groups of four end mid-era
@pytest.mark.parametrize("n_rows, n_eras", [(1, 1), (7, 3), (129, 1), (261, 2), (500, 40),
                                           (2000, 1)])
@pytest.mark.parametrize("dtype", [np.uint8, np.uint16])
@pytest.mark.parametrize("hessian", ["varying", "constant"])
@pytest.mark.parametrize("scattered", [False, True], ids=["branch", "masks"])
def test_pack_histogram_matches_reference(n_rows, n_eras, dtype, hessian, scattered):
    data, g, h = make_binned_problem(n_rows + n_eras, n_rows, 4, n_eras)
    if hessian == "constant":
        h = np.full_like(h, 2.0)
    # The kernel sums the round's fixed-point values exactly; so does the
    # oracle's float sum of the same rounded values (see _fixed_point).
    fixed = to_fixed_point(g, h, data.era_offsets)
    X = data.X_binned.astype(dtype)
    rng = np.random.default_rng(n_rows)
    pack_size, per_tree = 3, 4
    node_of_row = random_slots(rng, n_rows, pack_size, per_tree)
    n_slots = pack_size * per_tree
    for feature in range(X.shape[0]):
        uses = np.array([1, 0, 1], dtype=np.uint8) if feature % 2 else np.ones(3, np.uint8)
        width = int(data.n_bins[feature]) + 1
        hist = _histogram.build_histograms(X, feature, g, h, data.all_rows, data.era_offsets,
                                           node_of_row, uses, n_slots, width,
                                           scattered_samples=scattered)
        assert hist.shape == (n_eras, n_slots, width)
        for slot in range(n_slots):
            tree = slot // per_tree
            rows = np.flatnonzero(node_of_row[:, tree] == slot) if uses[tree] else \
                np.zeros(0, dtype=np.int64)
            ref_g, ref_h, ref_c = _reference.histogram(X, feature, rows, fixed.gradients,
                                                       fixed.hessians, data.row_era,
                                                       n_eras, width)
            np.testing.assert_array_equal(hist["sum_gradients"][:, slot], ref_g)
            np.testing.assert_array_equal(hist["sum_hessians"][:, slot], ref_h)
            np.testing.assert_array_equal(hist["count"][:, slot], ref_c)
            # and the rounding moved no sum by more than half a unit per row
            raw_g = _reference.histogram(X, feature, rows, g, h, data.row_era, n_eras,
                                         width)[0]
            np.testing.assert_allclose(ref_g, raw_g, rtol=0,
                                       atol=0.5 * max(1, len(rows)) / fixed.gradient_scale)


def test_rows_outside_every_slot_are_ignored():
    data, g, h = make_binned_problem(0, 10, 2, 3)
    node_of_row = np.full((10, 2), -1, dtype=np.int32)
    hist = _histogram.build_histograms(data.X_binned, 0, g, h, data.all_rows, data.era_offsets,
                                       node_of_row, np.ones(2, np.uint8), 2,
                                       int(data.n_bins[0]) + 1)
    assert hist["count"].sum() == 0 and not hist["sum_gradients"].any()


# 50 rows in 30 eras: absent eras; 1 row; threads share out the eras
@pytest.mark.parametrize("n_rows, n_eras", [(600, 9), (50, 30), (1, 1)])
@pytest.mark.parametrize("n_threads", [1, 3])
def test_active_rows_are_the_rows_of_open_slots(n_rows, n_eras, n_threads):
    data, g, h = make_binned_problem(5, n_rows, 3, n_eras)
    rng = np.random.default_rng(5)
    node_of_row = random_slots(rng, n_rows, 3, 4)
    slot_open = (rng.random(12) < 0.6).astype(np.uint8)
    rows, era_offsets = _partition.active_rows(node_of_row, slot_open, data.era_offsets,
                                               n_threads)
    in_open = ((node_of_row >= 0) & (slot_open[np.maximum(node_of_row, 0)] == 1)).any(axis=1)
    np.testing.assert_array_equal(rows, np.flatnonzero(in_open))
    np.testing.assert_array_equal(
        era_offsets, np.searchsorted(data.row_era[rows], np.arange(n_eras + 1), side="left"))
    with pytest.raises(ValueError, match="era_rows"):
        _partition.active_rows(node_of_row, slot_open, data.era_offsets[:-1], n_threads)
    # Into a kept buffer (stale values in it): the same rows, written there.
    buffer = np.full(n_rows, 7, dtype=np.int32)
    into, into_offsets = _partition.active_rows(node_of_row, slot_open, data.era_offsets,
                                                n_threads, out=buffer)
    np.testing.assert_array_equal(into, rows)
    np.testing.assert_array_equal(into_offsets, era_offsets)
    assert len(rows) == 0 or np.shares_memory(into, buffer)
    for bad in (np.empty(n_rows + 1, np.int32), np.empty(n_rows, np.int64)):
        with pytest.raises(ValueError, match="out"):
            _partition.active_rows(node_of_row, slot_open, data.era_offsets, n_threads, out=bad)
    # Histograms over the active rows equal histograms over all rows with the
    # closed slots' rows removed.
    closed = ~slot_open.astype(bool)[np.maximum(node_of_row, 0)] | (node_of_row < 0)
    masked = np.where(closed, -1, node_of_row).astype(np.int32)
    for feature in range(3):
        width = int(data.n_bins[feature]) + 1
        uses = np.ones(3, np.uint8)
        a = _histogram.build_histograms(data.X_binned, feature, g, h, rows, era_offsets,
                                        node_of_row, uses, 12, width,
                                        row_era_offsets=data.era_offsets)
        b = _histogram.build_histograms(data.X_binned, feature, g, h, data.all_rows,
                                        data.era_offsets, masked, uses, 12, width)
        open_slots = slot_open.astype(bool)
        np.testing.assert_array_equal(a[:, open_slots], b[:, open_slots])


def block_problem(seed, n_rows, n_features, n_eras, hessian):
    """A block pass's inputs but the slots: binned data, the fixed-point
    gradients (hessians of 1 with ``hessian="constant"``), one width for
    every feature, and the features."""
    data, g, h = make_binned_problem(seed, n_rows, n_features, n_eras)
    if hessian == "constant":
        h = np.ones_like(h)
    fixed = to_fixed_point(g, h, data.era_offsets)
    width = int(data.n_bins.max()) + 1
    return data, fixed, width, np.arange(n_features, dtype=np.int32)


@pytest.mark.parametrize("hessian", ["varying", "constant"])
def test_block_of_features_in_one_pass_matches_one_at_a_time(hessian):
    """The kernel's multi-feature pass (each feature with its own trees)
    equals single-feature passes, cell for cell."""
    data, fixed, width, features = block_problem(3, 900, 6, 11, hessian)
    rng = np.random.default_rng(3)
    node_of_row = random_slots(rng, 900, 4, 3)
    uses = (rng.random((6, 4)) < 0.6).astype(np.uint8)
    uses[0] = 0  # a feature no tree uses
    block = _histogram.build_histograms(data.X_binned, features, fixed, None, data.all_rows,
                                        data.era_offsets, node_of_row, uses, 12, width)
    assert block.shape == (6, 11, 12, width)
    assert block[0]["count"].sum() == 0 and block["count"].sum() > 0
    for feature in features:
        one = _histogram.build_histograms(data.X_binned, int(feature), fixed, None,
                                          data.all_rows, data.era_offsets, node_of_row,
                                          uses[feature], 12, width)
        np.testing.assert_array_equal(block[feature], one)


@pytest.mark.parametrize("hessian", ["varying", "constant"])
def test_kept_cell_buffer_gives_the_same_cells(hessian):
    """A buffer kept across calls (as the benchmarks keep one, and a fit its
    block buffer) holding stale cells of another pass gives the cells of a
    fresh array: the kernel clears every cell it sums into."""
    data, fixed, width, features = block_problem(5, 700, 5, 9, hessian)
    rng = np.random.default_rng(5)
    node_of_row = random_slots(rng, 700, 3, 4)
    uses = (rng.random((5, 3)) < 0.7).astype(np.uint8)
    call = (data.X_binned, features, fixed, None, data.all_rows, data.era_offsets,
            node_of_row, uses, 12, width)
    fresh = _histogram.build_histograms(*call, unpack=False)
    buffer = rng.integers(-2**40, 2**40, size=fresh.size + 17)  # stale values, spare room
    kept = _histogram.build_histograms(*call, unpack=False, cell_buffer=buffer)
    np.testing.assert_array_equal(kept, fresh)
    assert np.shares_memory(kept, buffer)
    np.testing.assert_array_equal(_histogram.build_histograms(*call, cell_buffer=buffer),
                                  _histogram.build_histograms(*call))
    for bad in (np.empty(fresh.size - 1, dtype=np.int64), np.empty(fresh.size, dtype=np.int32),
                [0] * fresh.size):
        with pytest.raises(ValueError, match="cell_buffer"):
            _histogram.build_histograms(*call, cell_buffer=bad)


# Feature pairs (_histogram.pxd, PAIR_*): features of at most 5 bins are
# summed two by two into joint cells and folded back, when a tree has at most
# 32 slots and the era >= 32 rows per slot; with one int64 per cell (equal
# hessians) or two (the hessian's word too). Widths 3 and 6 (paired) and 7
# (never); 1, 9 and 33 slots per tree (33: never; 9: only in eras of 288+
# rows); odd feature counts leave one feature alone.
# ``runs_per_tree``: each slot's run holds its tree's features only
# (find_best_splits' layout below the roots), the same histograms.
# ``listed``: every row (an era's rows consecutive: when every feature is
# paired, no list -- each row's joint tables from its code, rows outside
# the tree's slots into trash tables) or every row but each fifth (listed);
# ``scattered``: the era pass finds a row's tables by a branch or by masks.
@pytest.mark.parametrize("listed", [False, True], ids=["era-rows", "listed-rows"])
@pytest.mark.parametrize("hessian", ["constant", "varying"])
@pytest.mark.parametrize("width", [3, 6, 7])
@pytest.mark.parametrize("per_tree", [1, 9, 33])
@pytest.mark.parametrize("n_rows, n_eras, n_features", [(1, 1, 2), (261, 2, 5), (900, 13, 7),
                                                        (60, 40, 3), (2500, 3, 7)])
@pytest.mark.parametrize("runs_per_tree", [False, True], ids=["block-runs", "tree-runs"])
@pytest.mark.parametrize("scattered", [False, True], ids=["branch", "masks"])
def test_paired_features_match_the_reference(width, per_tree, n_rows, n_eras, n_features,
                                             hessian, runs_per_tree, listed, scattered):
    data, g, h = make_binned_problem(width * 100 + n_rows, n_rows, n_features, n_eras,
                                     n_bins=width - 1)
    if hessian == "constant":
        h = np.ones_like(g)
    fixed = to_fixed_point(g, h, data.era_offsets)
    assert fixed.hessian_is_constant == (hessian == "constant" or n_rows == 1)
    rng = np.random.default_rng(n_rows + per_tree)
    pack_size = 3
    node_of_row = random_slots(rng, n_rows, pack_size, per_tree)
    uses = (rng.random((n_features, pack_size)) < 0.8).astype(np.uint8)
    features = np.arange(n_features, dtype=np.int32)
    slot_tree = np.repeat(np.arange(pack_size), per_tree).astype(np.int32)
    active = data.all_rows
    if listed:
        active = active[np.arange(n_rows) % 5 != 4]
    offsets = np.searchsorted(data.row_era[active], np.arange(n_eras + 1)).astype(np.int64)
    block = _histogram.build_histograms(data.X_binned, features, fixed, None, active,
                                        offsets, node_of_row, uses,
                                        pack_size * per_tree, width, slot_tree=slot_tree,
                                        runs_per_tree=runs_per_tree,
                                        scattered_samples=scattered)
    if runs_per_tree:   # the raw runs are the longest tree's features long
        cells = _histogram.build_histograms(data.X_binned, features, fixed, None, data.all_rows,
                                            data.era_offsets, node_of_row, uses,
                                            pack_size * per_tree, width, unpack=False,
                                            slot_tree=slot_tree, runs_per_tree=True)
        words = 1 if fixed.hessian_is_constant else 2
        assert cells.shape[2] == uses.sum(axis=0).max() * width * words
    for feature in features:
        for slot in range(pack_size * per_tree):
            tree = slot // per_tree
            rows = (np.intersect1d(np.flatnonzero(node_of_row[:, tree] == slot), active)
                    if uses[feature, tree] else np.zeros(0, dtype=np.int64))
            ref_g, ref_h, ref_c = _reference.histogram(data.X_binned, feature, rows,
                                                       fixed.gradients, fixed.hessians,
                                                       data.row_era, n_eras, width)
            np.testing.assert_array_equal(block[feature]["sum_gradients"][:, slot], ref_g)
            np.testing.assert_array_equal(block[feature]["sum_hessians"][:, slot], ref_h)
            np.testing.assert_array_equal(block[feature]["count"][:, slot], ref_c)
    rows_per_tree = (node_of_row[active] >= 0).sum(axis=0)
    assert block["count"].sum() == (uses * rows_per_tree).sum()


def test_slot_trees_of_reads_the_tree_of_each_slot():
    """The block entry point's slot -> tree map (for feature pairs): from the
    table, empty slots with the tree before them; None when a slot is in two
    trees or trees' slots are out of order (no pairs then)."""
    table = np.array([[0, 3], [1, 4], [-1, -3]], dtype=np.int32)
    np.testing.assert_array_equal(_histogram.slot_trees_of(table, 6), [0, 0, 0, 1, 1, 1])
    assert _histogram.slot_trees_of(np.array([[0, 0]], dtype=np.int32), 2) is None
    assert _histogram.slot_trees_of(np.array([[2, 0]], dtype=np.int32), 3) is None


def whole_era_roots(rng, row_era, n_eras, pack_size, *, split_era=None):
    """node_of_row of a pack's roots whose trees sample whole eras (slot t
    for tree t, ``-2 - t`` for its unsampled eras); with ``split_era``, one
    row of that era leaves tree 0's sample (the era's codes then differ)."""
    node_of_row = np.empty((len(row_era), pack_size), dtype=np.int32)
    for tree in range(pack_size):
        kept = rng.random(n_eras) < 0.7
        node_of_row[:, tree] = np.where(kept[row_era], tree, -2 - tree)
    if split_era is not None:
        row = np.flatnonzero(row_era == split_era)[-1]
        node_of_row[row, 0] = -2 if node_of_row[row, 0] == 0 else 0
    return node_of_row


# 1 row, 1 era, absent eras (50 rows in 30 eras), rows past a chunk (129)
@pytest.mark.parametrize("n_rows, n_eras", [(1, 1), (50, 30), (129, 1), (900, 11)])
@pytest.mark.parametrize("hessian", ["varying", "constant"])
@pytest.mark.parametrize("split_one_era", [False, True])
def test_shared_roots_give_every_used_features_cells(n_rows, n_eras, hessian, split_one_era):
    """share_equal_rows sums an era once for every root holding all its rows
    and copies the cells: the cells of each slot's used features are those of
    the per-tree passes, whether an era shares (whole-era samples) or not
    (one row of an era in one tree only), in groups of slots too."""
    data, fixed, width, features = block_problem(7, n_rows, 6, n_eras, hessian)
    rng = np.random.default_rng(n_rows)
    pack_size = 5
    split_era = int(data.row_era[-1]) if split_one_era else None
    node_of_row = whole_era_roots(rng, data.row_era, n_eras, pack_size, split_era=split_era)
    uses = (rng.random((6, pack_size)) < 0.5).astype(np.uint8)
    uses[1] = 0  # a feature no tree uses
    call = (data.X_binned, features, fixed, None, data.all_rows, data.era_offsets,
            node_of_row, uses, pack_size, width)
    per_tree = _histogram.build_histograms(*call)
    shared = _histogram.build_histograms(*call, share_equal_rows=True)
    used = uses.astype(bool)  # (feature, tree); slot t is tree t's root
    for feature in features:
        np.testing.assert_array_equal(shared[feature][:, used[feature]],
                                      per_tree[feature][:, used[feature]])
    assert per_tree["count"].sum() > 0
    if n_rows > 1 and not split_one_era:
        # the sharing ran: a slot holds sums of a feature its tree does not use
        unused = ~used & used.any(axis=1, keepdims=True)
        assert any(shared[f][:, unused[f]]["count"].sum() > 0 for f in features)


def test_build_histograms_skips_the_eras_a_tree_did_not_draw():
    """``era_tree_rows`` as find_best_splits takes it: flags that are a
    pack's whole-era draws change no cell; a tree flagged out of every era
    gets none (its slots' cells stay zero), the other trees' are unchanged."""
    pack_size = 3
    data, g, h = make_binned_problem(5, 1200, 4, 12)
    rng = np.random.default_rng(2)
    kept = rng.random((pack_size, data.n_eras)) < 0.75
    node_of_row = np.where(kept[:, data.row_era].T, np.arange(pack_size),
                           -2 - np.arange(pack_size)).astype(np.int32)
    rows, era_offsets = _partition.active_rows(node_of_row, np.ones(pack_size, np.uint8),
                                               data.era_offsets)
    fixed = to_fixed_point(g, h, data.era_offsets)
    features = np.arange(4, dtype=np.int32)
    uses = np.ones((4, pack_size), dtype=np.uint8)
    width = int(data.n_bins.max()) + 1

    def cells(flags):
        return _histogram.build_histograms(data.X_binned, features, fixed, None, rows,
                                           era_offsets, node_of_row, uses, pack_size, width,
                                           unpack=False, era_tree_rows=flags)

    flags = np.ascontiguousarray(kept.T, dtype=np.uint8)
    plain = cells(None)
    np.testing.assert_array_equal(cells(flags), plain)
    assert np.any(plain[:, 0] != 0)
    without_tree_0 = flags.copy()
    without_tree_0[:, 0] = 0
    cut = cells(without_tree_0)
    assert not np.any(cut[:, 0])
    np.testing.assert_array_equal(cut[:, 1:], plain[:, 1:])
    with pytest.raises(ValueError, match="era_tree_rows"):
        cells(flags[:-1])
