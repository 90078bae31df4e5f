"""Routing rows to child slots, and the slot sums that come with it, vs NumPy oracles."""

import itertools

import numpy as np
import pytest

from packboost import _partition
from packboost._samples import TreeSamples


def random_frontier(rng, n_rows, pack_size, slots_per_tree, n_features, n_bins,
                    era_rows=None):
    """A pack mid-growth: codes per (row, tree) (sampled slot, unsampled -2 - slot,
    leaf -1), each slot's split or none, and binned data with missing codes.
    era_rows: rows are sampled or not by blocks of era_rows (whole eras),
    not one by one (a row subsample)."""
    n_slots = pack_size * slots_per_tree
    slot = (np.arange(pack_size) * slots_per_tree
            + rng.integers(0, slots_per_tree, (n_rows, pack_size)))
    kind = rng.random((n_rows, pack_size))
    if era_rows is not None:  # a tree samples all or none of an era's rows
        era_kind = rng.random((n_rows // era_rows + 1, pack_size))
        kind = np.where(kind < 0.9, np.repeat(era_kind, era_rows, axis=0)[:n_rows] * 0.9,
                        kind)
    codes = np.where(kind < 0.7, slot, np.where(kind < 0.9, -2 - slot, -1)).astype(np.int32)
    X = rng.integers(0, n_bins + 1, (n_features, n_rows)).astype(np.uint8)  # n_bins = missing
    splits = rng.random(n_slots) < 0.6
    feature = np.where(splits, rng.integers(0, n_features, n_slots), -1).astype(np.int32)
    threshold = rng.integers(0, n_bins, n_slots).astype(np.int32)
    missing_left = rng.integers(0, 2, n_slots).astype(np.uint8)
    left_child = np.full(n_slots, -1, dtype=np.int32)
    left_child[splits] = 2 * np.arange(int(splits.sum()), dtype=np.int32)
    slot_node = rng.integers(0, 1000, n_slots).astype(np.int32)
    n_bins_of = np.full(n_features, n_bins, dtype=np.int32)
    return codes, X, feature, threshold, missing_left, left_child, slot_node, n_bins_of



def kept_eras(rng, sizes, pack_size, fraction):
    """Eras of ``sizes`` rows (era-sorted: their offsets and the row count)
    and each tree's era flags (pack_size, n_eras): the first tree keeps every
    era, the second none, the others each era with probability ``fraction``."""
    era_offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    era_keep = (rng.random((pack_size, len(sizes))) < fraction).astype(np.uint8)
    era_keep[0] = 1
    if pack_size > 1:
        era_keep[1] = 0
    return era_offsets, int(era_offsets[-1]), era_keep

def route_oracle(codes, X, feature, threshold, missing_left, left_child, slot_node, n_bins):
    codes = codes.copy()
    leaves = np.full(codes.shape, -7, dtype=np.int32)
    for row, tree in np.ndindex(*codes.shape):
        code = codes[row, tree]
        if code == -1:
            continue
        slot = code if code >= 0 else -2 - code
        if feature[slot] < 0:
            leaves[row, tree] = slot_node[slot]
            codes[row, tree] = -1
            continue
        value = X[feature[slot], row]
        left = missing_left[slot] if value == n_bins[feature[slot]] else value <= threshold[slot]
        child = left_child[slot] + (0 if left else 1)
        codes[row, tree] = child if code >= 0 else -2 - child
    return codes, leaves


# "wide": 64 slots splitting on up to 40 columns, past the count from which
# route_rows prefetches the split columns (PREFETCH_MIN_COLUMNS), uint16 codes
@pytest.mark.parametrize("n_rows", [1, 17, 1000])
@pytest.mark.parametrize("n_threads", [1, 2, 3])
@pytest.mark.parametrize("shape", ["narrow", "wide"])
@pytest.mark.parametrize("scattered", [False, True], ids=["branch", "masks"])
def test_route_rows_moves_rows_and_sums_the_next_frontier(n_rows, n_threads, shape, scattered):
    rng = np.random.default_rng(n_rows * 10 + n_threads)
    pack_size, per_tree, n_features = (3, 4, 5) if shape == "narrow" else (8, 8, 40)
    codes, X, feature, threshold, missing_left, left_child, slot_node, n_bins = random_frontier(
        rng, n_rows, pack_size, per_tree, n_features, 4)
    if shape == "wide":
        X = X.astype(np.uint16)
        split = feature >= 0  # on distinct columns, as many as there are
        feature[split] = rng.permutation(np.arange(split.sum()) % n_features)
        assert len(np.unique(feature[split])) >= 24
    gradients = rng.normal(size=n_rows)
    gradients[rng.random(n_rows) < 0.2] = 0.5  # ties
    hessians = rng.uniform(0.5, 2.0, n_rows)
    n_next = 2 * int((feature >= 0).sum())
    expected_codes, expected_leaves = route_oracle(codes, X, feature, threshold, missing_left,
                                                   left_child, slot_node, n_bins)

    plain = codes.copy()
    plain_leaves = np.full(codes.shape, -7, dtype=np.int32)
    assert _partition.route_rows(X, plain, feature, threshold, missing_left, left_child, n_bins,
                                 slot_node, plain_leaves, n_threads,
                                 scattered_samples=scattered) is None
    np.testing.assert_array_equal(plain, expected_codes)
    np.testing.assert_array_equal(plain_leaves, expected_leaves)

    summed = codes.copy()
    summed_leaves = np.full(codes.shape, -7, dtype=np.int32)
    sums = _partition.route_rows(X, summed, feature, threshold, missing_left, left_child, n_bins,
                                 slot_node, summed_leaves, n_threads, gradients, hessians, n_next,
                                 scattered_samples=scattered)
    np.testing.assert_array_equal(summed, expected_codes)
    np.testing.assert_array_equal(summed_leaves, expected_leaves)
    # the same numbers, bit for bit, as a pass of slot_sums after routing
    again = _partition.slot_sums(gradients, hessians, expected_codes, n_next, n_threads)
    for got, want in zip(sums, again, strict=True):
        np.testing.assert_array_equal(got, want)
    # squares_only: the fourth of those sums alone, the same numbers
    squared = codes.copy()
    squares = _partition.route_rows(X, squared, feature, threshold, missing_left, left_child,
                                    n_bins, slot_node, np.full(codes.shape, -7, dtype=np.int32),
                                    n_threads, gradients, hessians, n_next, squares_only=True,
                                    scattered_samples=scattered)
    np.testing.assert_array_equal(squared, expected_codes)
    assert squares.shape == (n_next,)
    np.testing.assert_array_equal(squares, again[3])
    # and what they mean, within rounding
    in_slot = [(expected_codes == slot) for slot in range(n_next)]
    np.testing.assert_array_equal(sums[2], [mask.sum() for mask in in_slot])
    np.testing.assert_allclose(sums[0], [(mask * gradients[:, None]).sum() for mask in in_slot],
                               atol=1e-9)
    np.testing.assert_allclose(sums[1], [(mask * hessians[:, None]).sum() for mask in in_slot],
                               atol=1e-9)
    np.testing.assert_allclose(sums[3], [(mask * gradients[:, None] ** 2).sum()
                                         for mask in in_slot], atol=1e-9)


@pytest.mark.parametrize("n_rows", [1, 17, 1000])
@pytest.mark.parametrize("n_threads", [1, 3])
@pytest.mark.parametrize("squares", [False, True])
@pytest.mark.parametrize("scattered", [False, True], ids=["branch", "masks"])
def test_route_rows_from_a_row_major_copy_moves_rows_alike(n_rows, n_threads, squares,
                                                           scattered):
    """With the depth's features row-major (codes_by_row, the node-ordered
    route's copy of a block of features holding every split feature), the
    same children, leaves and squared sums as from the feature-major
    matrix; a split feature outside the block, or uint16 codes, refused."""
    rng = np.random.default_rng(n_rows + n_threads)
    codes, X, feature, threshold, missing_left, left_child, slot_node, n_bins = random_frontier(
        rng, n_rows, 8, 6, 30, 5)
    block = np.union1d(feature[feature >= 0], rng.choice(30, 8, replace=False)).astype(np.int32)
    by_row = np.ascontiguousarray(X[block].T)
    gradients = rng.normal(size=n_rows)
    hessians = np.ones(n_rows)
    n_next = 2 * int((feature >= 0).sum())
    extra = (gradients, hessians, n_next) if squares else ()
    options = dict(squares_only=True) if squares else {}
    options["scattered_samples"] = scattered
    expected_codes, expected_leaves = route_oracle(codes, X, feature, threshold, missing_left,
                                                   left_child, slot_node, n_bins)
    results = []
    for kwargs in ({}, dict(codes_by_row=by_row, block_features=block)):
        moved = codes.copy()
        leaves = np.full(codes.shape, -7, dtype=np.int32)
        out = _partition.route_rows(X, moved, feature, threshold, missing_left, left_child,
                                    n_bins, slot_node, leaves, n_threads, *extra, **options,
                                    **kwargs)
        np.testing.assert_array_equal(moved, expected_codes)
        np.testing.assert_array_equal(leaves, expected_leaves)
        results.append(out)
    if squares:
        np.testing.assert_array_equal(results[1], results[0])
    if (feature >= 0).any():
        outside = np.setdiff1d(block, [feature[feature >= 0][0]])
        with pytest.raises(ValueError, match="block_features"):
            _partition.route_rows(X, codes.copy(), feature, threshold, missing_left, left_child,
                                  n_bins, slot_node, np.empty_like(codes), 1,
                                  codes_by_row=np.ascontiguousarray(X[outside].T),
                                  block_features=outside)
    with pytest.raises(ValueError, match="uint8"):
        _partition.route_rows(X.astype(np.uint16), codes.copy(), feature, threshold,
                              missing_left, left_child, n_bins, slot_node, np.empty_like(codes),
                              1, codes_by_row=by_row, block_features=block)


def cpu_has_avx2():
    try:
        with open("/proc/cpuinfo") as info:
            return any(line.startswith("flags") and " avx2" in line for line in info)
    except OSError:
        return False


@pytest.mark.parametrize("pack_size", [1, 2, 3, 4, 8, 16])
@pytest.mark.parametrize("n_rows", [1, 3, 4, 5, 11, 64, 65, 1000, 3001])
@pytest.mark.parametrize("mode", ["plain", "squares"])
@pytest.mark.parametrize("sampling", ["rows", "eras"])
def test_vector_route_matches_the_scalar_loop_and_the_oracle(pack_size, n_rows, mode, sampling):
    """The vector loop (_route.pxd; power-of-two packs, uint8 codes) moves
    every (row, tree) as the oracle does and adds the squared gradients in
    the scalar loop's order: equal bit for bit, on the matrix's first rows
    (read as the top byte of a word) and its last code, with leaves,
    unsampled and finished codes, missing codes and ties; with rows
    sampled one by one and by eras of 150 rows, the squares' slots chosen
    by a branch and by masks (scattered_samples) for either."""
    if cpu_has_avx2():
        assert _partition.vector_route_available()
    rng = np.random.default_rng(pack_size * 10_000 + n_rows)
    codes, X, feature, threshold, missing_left, left_child, slot_node, n_bins = random_frontier(
        rng, n_rows, pack_size, 4, 3, 4, era_rows=150 if sampling == "eras" else None)
    # the last column's last code is read by some split
    feature[np.flatnonzero(feature >= 0)[:1]] = 2
    gradients = rng.normal(size=n_rows)
    gradients[rng.random(n_rows) < 0.3] = 0.25  # ties
    hessians = np.ones(n_rows)
    n_next = 2 * int((feature >= 0).sum())
    extra, options = ((gradients, hessians, n_next), dict(squares_only=True)) \
        if mode != "plain" else ((), {})
    expected_codes, expected_leaves = route_oracle(codes, X, feature, threshold, missing_left,
                                                   left_child, slot_node, n_bins)
    results = []
    try:
        for vector, n_threads, scattered in itertools.product((False, True), (1, 3),
                                                              (False, True)):
            _partition.VECTOR_ROUTE = vector
            moved = codes.copy()
            leaves = np.full(codes.shape, -7, dtype=np.int32)
            out = _partition.route_rows(X, moved, feature, threshold, missing_left,
                                        left_child, n_bins, slot_node, leaves, n_threads,
                                        *extra, scattered_samples=scattered, **options)
            np.testing.assert_array_equal(moved, expected_codes)
            np.testing.assert_array_equal(leaves, expected_leaves)
            results.append(out)
    finally:
        _partition.VECTOR_ROUTE = True
    if mode != "plain":
        for out in results[1:]:
            np.testing.assert_array_equal(out, results[0])
        np.testing.assert_allclose(results[0], [(expected_codes == slot).sum(axis=1)
                                                @ gradients ** 2 for slot in range(n_next)])



@pytest.mark.parametrize("pack_size", [4, 8, 16])
@pytest.mark.parametrize("n_rows", [1, 5, 64, 65, 1000])
@pytest.mark.parametrize("slots_per_tree", [1, 2, 4, 5])
@pytest.mark.parametrize("sampling", ["rows", "eras"])
def test_squares_in_lanes_are_the_squares_entry_by_entry(pack_size, n_rows, slots_per_tree,
                                                         sampling):
    """Given each slot's tree, the vector loop keeps the squares of trees
    with at most four children in vector lanes (pb_add_squares_by_lanes;
    eight in packs of 8k with AVX-512): the same sums, to the bit, as the
    loop entry by entry and the scalar loop -- one to ten children per tree
    (over the lanes' limit: refused, entry by entry),
    trees without a split, unsampled and finished codes, ties."""
    rng = np.random.default_rng(pack_size * 1000 + n_rows * 10 + slots_per_tree)
    codes, X, feature, threshold, missing_left, left_child, slot_node, n_bins = random_frontier(
        rng, n_rows, pack_size, slots_per_tree, 3, 4,
        era_rows=150 if sampling == "eras" else None)
    feature[:slots_per_tree] = -1  # the first tree does not split
    left_child[:] = -1
    left_child[feature >= 0] = 2 * np.arange(int((feature >= 0).sum()), dtype=np.int32)
    slot_tree = np.repeat(np.arange(pack_size, dtype=np.int32), slots_per_tree)
    gradients = rng.normal(size=n_rows) * np.exp(rng.normal(size=n_rows) * 4)
    gradients[rng.random(n_rows) < 0.3] = 0.25  # ties
    n_next = 2 * int((feature >= 0).sum())
    children = _partition.tree_children(slot_tree, left_child, pack_size)
    if slots_per_tree <= 2:
        assert children is not None
        assert children[1].max() == 2 * max(
            int((feature[slot_tree == tree] >= 0).sum()) for tree in range(pack_size))
    results = []
    try:
        for vector, trees, scattered in itertools.product((False, True), (None, slot_tree),
                                                          (False, True)):
            _partition.VECTOR_ROUTE = vector
            moved = codes.copy()
            leaves = np.full(codes.shape, -7, dtype=np.int32)
            results.append(_partition.route_rows(
                X, moved, feature, threshold, missing_left, left_child, n_bins, slot_node,
                leaves, 2, gradients, np.ones(n_rows), n_next, squares_only=True,
                scattered_samples=scattered, slot_tree=trees))
    finally:
        _partition.VECTOR_ROUTE = True
    for out in results[1:]:
        np.testing.assert_array_equal(out, results[0])
        np.testing.assert_array_equal(np.signbit(out), np.signbit(results[0]))


def test_tree_children_are_each_trees_range_or_refused():
    left = np.array([0, -1, 2, 4, -1, 6], dtype=np.int32)
    slot_tree = np.array([0, 0, 1, 1, 2, 3], dtype=np.int32)
    np.testing.assert_array_equal(_partition.tree_children(slot_tree, left, 4),
                                  [[0, 2, 0, 6], [2, 4, 0, 2]])
    assert _partition.tree_children(slot_tree, left, 2) is None        # fewer than four trees
    unordered = np.array([0, -1, 4, 2, -1, 6], dtype=np.int32)   # tree 1: 4, 5 then 2, 3
    np.testing.assert_array_equal(_partition.tree_children(slot_tree, unordered, 4)[1],
                                  [2, 4, 0, 2])
    crossing = np.array([0, 4, 2, -1, -1, 6], dtype=np.int32)          # tree 0: 0..5, tree 1: 2..3
    assert _partition.tree_children(slot_tree, crossing, 4) is None
    many = np.arange(0, 6, 2, dtype=np.int32)                           # six children of one tree
    assert _partition.tree_children(np.array([0, 0, 0], np.int32), many, 4) is None
    assert _partition.most_lane_children(4) == 4                       # AVX2's lanes
    assert _partition.most_lane_children(8) in (4, 8)                  # 8 with AVX-512
    np.testing.assert_array_equal(
        _partition.tree_children(np.array([0, 0, 0], np.int32), many, 4, max_children=6),
        [[0, 0, 0, 0], [6, 0, 0, 0]])
    assert _partition.tree_children(np.array([0, 0, 0], np.int32), many, 8,
                                    max_children=5) is None
    with pytest.raises(ValueError, match="is not a tree of a pack of 4"):
        _partition.tree_children(np.array([0, 0, 1, 1, 2, 7], np.int32), left, 4)
    with pytest.raises(ValueError, match="6 entries"):
        _partition.tree_children(slot_tree[:5], left, 4)

def test_vector_tables_pack_each_split_or_refuse():
    """vector_tables: a slot's column start and its threshold, missing code,
    missing side and left child in one word; None (the scalar loop) when a
    field does not fit."""
    rng = np.random.default_rng(5)
    codes, X, feature, threshold, missing_left, left_child, slot_node, n_bins = random_frontier(
        rng, 10, 4, 4, 6, 5)
    routes = _partition.slot_routes(feature, threshold, missing_left, left_child, n_bins, 10)
    column, word = _partition.vector_tables(routes)
    splits = feature >= 0
    np.testing.assert_array_equal(column, np.where(splits, feature * 10, -1))
    np.testing.assert_array_equal((word & 255)[splits], threshold[splits])
    np.testing.assert_array_equal(((word >> 8) & 255)[splits], n_bins[feature[splits]])
    np.testing.assert_array_equal(((word >> 16) & 1)[splits], missing_left[splits] == 0)
    np.testing.assert_array_equal((word >> 17)[splits], left_child[splits])
    wide = left_child.copy()
    wide[splits] += 2**15
    assert _partition.vector_tables(_partition.slot_routes(
        feature, threshold, missing_left, wide, n_bins, 10)) is None


def test_route_rows_checks_the_gradients_length():
    rng = np.random.default_rng(0)
    codes, X, feature, threshold, missing_left, left_child, slot_node, n_bins = random_frontier(
        rng, 10, 2, 2, 3, 4)
    with pytest.raises(ValueError, match="gradients and hessians must have 10 entries"):
        _partition.route_rows(X, codes, feature, threshold, missing_left, left_child, n_bins,
                              slot_node, np.zeros_like(codes), 1, np.zeros(9), np.zeros(9), 4)


@pytest.mark.parametrize("n_rows", [0, 1, 17, 40_000])
@pytest.mark.parametrize("n_threads", [1, 3])
def test_start_pack_equals_start_tree_per_tree(n_rows, n_threads):
    """One pass over the table, in blocks, writes what start_tree writes tree by
    tree: sampled rows in the tree's root, the others as -2 - tree."""
    rng = np.random.default_rng(n_rows + n_threads)
    pack_size = 5
    samples = [np.flatnonzero(rng.random(n_rows) < fraction).astype(np.int32)
               for fraction in (1.0, 0.0, 0.5, 0.97, 0.03)]
    expected = np.full((n_rows, pack_size), 99, dtype=np.int32)
    for tree, rows in enumerate(samples):
        _partition.start_tree(expected, rows, tree, n_threads)
    got = np.full((n_rows, pack_size), 99, dtype=np.int32)
    _partition.start_pack(got, samples, n_threads)
    np.testing.assert_array_equal(got, expected)
    for tree, rows in enumerate(samples):
        assert set(np.flatnonzero(got[:, tree] == tree)) == set(rows)


def test_start_pack_checks_its_samples():
    table = np.zeros((10, 2), dtype=np.int32)
    with pytest.raises(ValueError, match="expected 2 tree samples"):
        _partition.start_pack(table, [np.arange(3, dtype=np.int32)], 1)
    with pytest.raises(ValueError, match="rows 0 .. 9"):
        _partition.start_pack(table, [np.arange(3, dtype=np.int32),
                                      np.array([4, 10], dtype=np.int32)], 1)


@pytest.mark.parametrize("sizes", [[0], [1], [3], [2, 0, 5, 1], [1] * 9, [7000, 0, 30000, 3000]])
@pytest.mark.parametrize("pack_size", [1, 3, 8])
@pytest.mark.parametrize("n_threads", [1, 2, 3])
def test_start_pack_eras_equals_start_pack_of_the_kept_eras_rows(sizes, pack_size, n_threads):
    """Trees that keep whole eras: the table written from the era flags is
    the one start_pack writes from the kept eras' rows (every era kept, none,
    empty eras, one era, one row)."""
    rng = np.random.default_rng(len(sizes) * 10 + pack_size)
    era_offsets, n_rows, era_keep = kept_eras(rng, sizes, pack_size, 0.5)
    expected = np.full((n_rows, pack_size), 99, dtype=np.int32)
    _partition.start_pack(expected, [_partition.rows_of_eras(keep, era_offsets)
                                     for keep in era_keep], n_threads)
    got = np.full((n_rows, pack_size), 99, dtype=np.int32)
    _partition.start_pack_eras(got, era_keep, era_offsets, n_threads)
    np.testing.assert_array_equal(got, expected)
    # A row subsample within the kept eras (the second tree, if any, keeps
    # them whole; the samples as TreeSamples lists them).
    row_keep = [rng.random(len(_partition.rows_of_eras(keep, era_offsets))) < 0.4
                for keep in era_keep]
    if pack_size > 2:
        row_keep[2] = None
    samples = TreeSamples(era_keep, row_keep, era_offsets)
    _partition.start_pack(expected, list(samples), n_threads)
    _partition.start_pack_eras(got, era_keep, era_offsets, n_threads, row_keep=row_keep)
    np.testing.assert_array_equal(got, expected)


def test_start_pack_eras_checks_its_arguments():
    table = np.zeros((10, 2), dtype=np.int32)
    offsets = np.array([0, 4, 10], dtype=np.int64)
    with pytest.raises(ValueError, match="one per tree"):
        _partition.start_pack_eras(table, np.ones((3, 2), np.uint8), offsets, 1)
    with pytest.raises(ValueError, match="from 0 to 10"):
        _partition.start_pack_eras(table, np.ones((2, 2), np.uint8),
                                   np.array([0, 4, 9], dtype=np.int64), 1)
    with pytest.raises(ValueError, match="4 entries"):  # three eras flagged, two given
        _partition.start_pack_eras(table, np.ones((2, 3), np.uint8), offsets, 1)
    with pytest.raises(ValueError, match="one per tree"):
        _partition.start_pack_eras(table, np.ones((2, 2), np.uint8), offsets, 1,
                                   row_keep=[None])
    with pytest.raises(ValueError, match=r"row_keep\[1\] must be a bool array over the 10"):
        _partition.start_pack_eras(table, np.ones((2, 2), np.uint8), offsets, 1,
                                   row_keep=[None, np.ones(9, bool)])
    with pytest.raises(ValueError, match=r"row_keep\[0\] must be a bool array over the 4"):
        _partition.start_pack_eras(table, np.array([[1, 0], [1, 1]], np.uint8), offsets, 1,
                                   row_keep=[np.ones(4, np.uint8), None])


@pytest.mark.parametrize("sizes", [[0], [3], [2, 0, 5, 1], [1] * 9])
def test_rows_of_eras_are_the_kept_eras_rows(sizes):
    era_offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    row_era = np.repeat(np.arange(len(sizes)), sizes)
    rng = np.random.default_rng(len(sizes))
    for _ in range(5):
        keep = (rng.random(len(sizes)) < 0.5).astype(np.uint8)
        rows = _partition.rows_of_eras(keep, era_offsets)
        assert rows.dtype == np.int32
        np.testing.assert_array_equal(rows, np.flatnonzero(keep[row_era] == 1))
    with pytest.raises(ValueError, match="era_offsets must have"):
        _partition.rows_of_eras(np.ones(2, np.uint8), np.zeros(2, np.int64))


@pytest.mark.parametrize("n_rows", [1, 17, 1000])
@pytest.mark.parametrize("n_threads", [1, 3])
def test_add_leaf_values_reads_the_last_frontiers_leaves(n_rows, n_threads):
    """Rows still in a slot when a pack ends (no slot splits) are in that
    slot's leaf: add_leaf_values with node_of_row and slot_node adds what a
    routing pass writing their leaves and the plain lookup add, bit for bit."""
    from packboost import _predict

    rng = np.random.default_rng(n_rows)
    codes, X, _, threshold, missing_left, left_child, slot_node, n_bins = random_frontier(
        rng, n_rows, 3, 4, 5, 4)
    no_split = np.full(len(slot_node), -1, dtype=np.int32)
    leaf_of_row = rng.integers(0, 1000, codes.shape).astype(np.int32)  # earlier leaves
    routed = codes.copy()
    written = leaf_of_row.copy()
    _partition.route_rows(X, routed, no_split, threshold, missing_left, np.full_like(no_split, -1),
                          n_bins, slot_node, written, n_threads)
    assert (routed == -1).all()
    value = rng.normal(size=1000)
    roots = np.array([0, 0, 0], dtype=np.int64)
    start = rng.normal(size=n_rows)
    by_pass, lazily = start.copy(), start.copy()
    _predict.add_leaf_values(written, value, roots, by_pass, n_threads)
    _predict.add_leaf_values(leaf_of_row, value, roots, lazily, n_threads,
                             node_of_row=codes, slot_node=slot_node)
    np.testing.assert_array_equal(lazily, by_pass)
    assert not np.array_equal(by_pass, start)
    expected = start.copy()            # the trees' values added in order, one by one
    for tree in range(written.shape[1]):
        expected += value[roots[tree] + written[:, tree]]
    np.testing.assert_array_equal(by_pass, expected)
    with pytest.raises(ValueError, match="not slots"):
        _predict.add_leaf_values(leaf_of_row, value, roots, lazily, n_threads,
                                 node_of_row=codes, slot_node=slot_node[:2])
    with pytest.raises(ValueError, match="go together"):
        _predict.add_leaf_values(leaf_of_row, value, roots, lazily, n_threads,
                                 node_of_row=codes)


def test_slot_routes_hold_each_slots_split_and_check_it():
    """The per-slot split record route_rows reads: the column's start, the
    threshold, the missing code and both children; bad splits raise."""
    feature = np.array([2, -1, 0], dtype=np.int32)
    threshold = np.array([1, 0, 3], dtype=np.int32)
    missing_left = np.array([1, 0, 0], dtype=np.uint8)
    left_child = np.array([0, -1, 2], dtype=np.int32)
    n_bins = np.array([4, 5, 6], dtype=np.int32)
    routes = _partition.slot_routes(feature, threshold, missing_left, left_child, n_bins, 100)
    assert routes.dtype == _partition.ROUTE_DTYPE
    np.testing.assert_array_equal(routes["column_start"], [200, -1, 0])
    np.testing.assert_array_equal(routes["missing_code"][[0, 2]], [6, 4])
    np.testing.assert_array_equal(routes["missing_child"][[0, 2]], [0, 3])
    with pytest.raises(ValueError, match="3 entries"):
        _partition.slot_routes(feature, threshold[:2], missing_left, left_child, n_bins, 100)
    with pytest.raises(ValueError, match="below 3"):
        _partition.slot_routes(np.array([3, -1, 0], np.int32), threshold, missing_left,
                               left_child, n_bins, 100)
    with pytest.raises(ValueError, match="left child"):
        _partition.slot_routes(feature, threshold, missing_left,
                               np.array([-1, -1, 2], np.int32), n_bins, 100)


@pytest.mark.parametrize("pack_size", [1, 3, 8, 9])
@pytest.mark.parametrize("n_rows", [0, 1, 5, 1000])
@pytest.mark.parametrize("sampling", ["rows", "eras"])
def test_slot_sums_match_the_oracle_with_unsampled_rows(pack_size, n_rows, sampling):
    """slot_sums adds a row to its slot in every tree that sampled it; the
    unsampled (-2 - slot) and finished (-1) are skipped by a branch, or go
    to trash rows by masks (scattered_samples; nine trees: two share a trash
    row). Counts exact, sums as NumPy's, and the same bits whatever the
    threads and the choice."""
    rng = np.random.default_rng(n_rows * 10 + pack_size)
    codes, *_ = random_frontier(rng, n_rows, pack_size, 3, 2, 4,
                                era_rows=40 if sampling == "eras" else None)
    n_slots = 3 * pack_size
    gradients, hessians = rng.normal(size=n_rows), rng.uniform(0.5, 2, n_rows)
    g, h, count, g2 = _partition.slot_sums(gradients, hessians, codes, n_slots, 1,
                                           scattered_samples=sampling == "rows")
    for slot in range(n_slots):
        rows = np.flatnonzero((codes == slot).any(axis=1))
        assert count[slot] == len(rows)
        np.testing.assert_allclose([g[slot], h[slot], g2[slot]],
                                   [gradients[rows].sum(), hessians[rows].sum(),
                                    (gradients[rows] ** 2).sum()], rtol=1e-12, atol=1e-12)
    for scattered in (False, True):  # the same sums by a branch and by masks
        for got, expected in zip(_partition.slot_sums(gradients, hessians, codes, n_slots, 3,
                                                      scattered_samples=scattered),
                                 (g, h, count, g2), strict=True):
            np.testing.assert_array_equal(got, expected)



@pytest.mark.parametrize("pack_size, n_outputs", [(1, 1), (3, 1), (4, 2), (9, 3), (8, 8)])
@pytest.mark.parametrize("n_rows", [0, 1, 5, 1000])
@pytest.mark.parametrize("sampling", ["rows", "eras"])
def test_squares_only_are_the_fourth_slot_sums_bit_for_bit(pack_size, n_outputs, n_rows,
                                                          sampling):
    """slot_sums(squares_only=True) gives the squared gradients' sums of
    slot_sums bit for bit (the same chunks and order), with one output or
    several (each tree squaring its output's gradients: tree_output), by a
    branch or by masks, whatever the threads; and each equals the NumPy
    oracle's sum of its rows' squares."""
    rng = np.random.default_rng(n_rows * 10 + pack_size + 100 * n_outputs)
    codes, *_ = random_frontier(rng, n_rows, pack_size, 3, 2, 4,
                                era_rows=40 if sampling == "eras" else None)
    n_slots = 3 * pack_size
    tree_output = None
    if n_outputs > 1:
        tree_output = np.sort(rng.integers(0, n_outputs, pack_size)).astype(np.int32)
        tree_output[:n_outputs] = np.arange(n_outputs)   # every output has a tree
        tree_output.sort()
    gradients = rng.normal(size=n_outputs * n_rows) * 3.0
    hessians = rng.uniform(0.5, 2, n_outputs * n_rows)
    *_, squares = _partition.slot_sums(gradients, hessians, codes, n_slots, 1,
                                       scattered_samples=sampling == "rows",
                                       tree_output=tree_output)
    for scattered in (False, True):
        for n_threads in (1, 3):
            got = _partition.slot_sums(gradients, hessians, codes, n_slots, n_threads,
                                       scattered_samples=scattered, tree_output=tree_output,
                                       squares_only=True)
            assert got.shape == (n_slots,)
            np.testing.assert_array_equal(got, squares)
    outputs = np.zeros(pack_size, dtype=np.int64) if tree_output is None else tree_output
    for slot in range(n_slots):
        expected = 0.0
        for tree in range(pack_size):
            rows = np.flatnonzero(codes[:, tree] == slot)
            expected += (gradients[outputs[tree] * n_rows + rows] ** 2).sum()
        np.testing.assert_allclose(squares[slot], expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("sizes", [[0], [1], [3], [2, 0, 5, 1], [1] * 9, [0, 17, 0, 0, 40, 3],
                                   [7000, 0, 30000, 3000]])
@pytest.mark.parametrize("pack_size", [1, 3, 4, 8, 9])
@pytest.mark.parametrize("n_threads", [1, 3])
def test_root_sums_are_slot_sums_of_the_roots_bit_for_bit(sizes, pack_size, n_threads):
    """A pack's roots from the era flags (root_sums) give slot_sums' four
    sums of the table start_pack_eras writes, to the bit (sign of zero
    included) -- on gradients off any grid, where the order of additions
    shows: empty eras, chunks cut inside an era, a tree keeping every era or
    none, -0.0 gradients, more trees than a vector's lanes."""
    rng = np.random.default_rng(len(sizes) * 100 + pack_size)
    era_offsets, n_rows, era_keep = kept_eras(rng, sizes, pack_size, 0.6)
    gradients = rng.normal(size=n_rows) * np.exp(rng.normal(size=n_rows) * 5)
    gradients[::7] = -0.0
    hessians = rng.uniform(0.1, 3.0, n_rows)
    table = np.empty((n_rows, pack_size), dtype=np.int32)
    _partition.start_pack_eras(table, era_keep, era_offsets, 2)
    expected = _partition.slot_sums(gradients, hessians, table, pack_size, 2)
    got = _partition.root_sums(gradients, hessians, np.ascontiguousarray(era_keep.T),
                               era_offsets, n_threads)
    for name, a, b in zip(("gradients", "hessians", "count", "squares"), got, expected,
                          strict=True):
        assert a.dtype == b.dtype, name
        np.testing.assert_array_equal(a, b, err_msg=name)
        np.testing.assert_array_equal(np.signbit(a), np.signbit(b), err_msg=name)
    assert got[2][1 if pack_size > 1 else 0] == (0 if pack_size > 1 else n_rows)


def test_root_sums_check_their_arguments():
    offsets = np.array([0, 4, 10], dtype=np.int64)
    with pytest.raises(ValueError, match="hessians must have 10"):
        _partition.root_sums(np.zeros(10), np.zeros(9), np.ones((2, 2), np.uint8), offsets)
    with pytest.raises(ValueError, match="from 0 to 10"):
        _partition.root_sums(np.zeros(10), np.zeros(10), np.ones((2, 2), np.uint8),
                             np.array([0, 4, 9], dtype=np.int64))
    with pytest.raises(ValueError, match="4 entries"):  # three eras flagged, two given
        _partition.root_sums(np.zeros(10), np.zeros(10), np.ones((3, 2), np.uint8), offsets)

@pytest.mark.parametrize("n_slots", [0, 1, 6, 40])
def test_split_column_starts_are_the_distinct_split_columns(n_slots):
    """route_rows' prefetch list: each split column's start once, ascending
    (np.unique of the slots' starts), none for slots that do not split."""
    rng = np.random.default_rng(n_slots)
    n_features, n_rows = 9, 50
    feature = rng.integers(-1, n_features, n_slots).astype(np.int32)
    threshold = rng.integers(0, 3, n_slots).astype(np.int32)
    missing_left = rng.integers(0, 2, n_slots).astype(np.uint8)
    left_child = np.where(feature >= 0, 2 * np.arange(n_slots), -1).astype(np.int32)
    n_bins = np.full(n_features, 4, np.int32)
    routes = _partition.slot_routes(feature, threshold, missing_left, left_child, n_bins, n_rows)
    starts = routes["column_start"]
    np.testing.assert_array_equal(_partition.split_column_starts(routes, n_features, n_rows),
                                  np.unique(starts[starts >= 0]))
    assert len(_partition.split_column_starts(routes, n_features, 0)) == 0


@pytest.mark.parametrize("shape", [(16, 1), (16, 7), (16, 5, 4)])
def test_in_chunk_order_adds_the_chunks_in_order(shape):
    """The chunks' partial sums added first to last, entry by entry: the
    numbers of NumPy's chunk-by-chunk +=, bit for bit (float addition is
    not associative, so another order could differ)."""
    rng = np.random.default_rng(len(shape))
    partial = rng.normal(size=shape) * 10.0 ** rng.integers(-8, 8, size=shape)
    expected = partial[0].copy()
    for chunk in range(1, shape[0]):
        expected += partial[chunk]
    got = _partition.in_chunk_order(partial)
    assert got.shape == shape[1:]
    np.testing.assert_array_equal(got, expected)


def _children_arguments(rng, n_slots, n_candidates):
    """A frontier whose best candidates are the splits made: children_sums'
    arguments and the split slots."""
    candidate_features = np.sort(rng.choice(30, n_candidates, replace=False)).astype(np.int32)
    column = rng.integers(-1, n_candidates, n_slots).astype(np.int64)
    split = np.flatnonzero(column >= 0).astype(np.int64)
    split_feature = np.where(column >= 0, candidate_features[np.maximum(column, 0)], -1)
    threshold = rng.integers(0, 5, n_slots).astype(np.int32)
    missing = rng.integers(0, 2, n_slots).astype(np.uint8)
    count = rng.integers(10, 100, n_slots).astype(np.int64)
    left_count = np.floor(count * rng.random(n_slots))
    grid = 2.0 ** -20    # fixed-point grid values: the differences are exact
    gradients = rng.integers(-2**20, 2**20, n_slots) * grid
    left_gradients = rng.integers(-2**20, 2**20, n_slots) * grid
    hessians = count.astype(np.float64)
    left_hessians = left_count.copy()
    args = dict(split=split, column=column, candidate_features=candidate_features,
                split_feature=split_feature.astype(np.int32), split_threshold=threshold,
                split_missing_left=missing, best_threshold=threshold.copy(),
                best_missing_left=missing.copy(), left_gradients=left_gradients,
                left_hessians=left_hessians, left_count=left_count, gradients=gradients,
                hessians=hessians, count=count)
    return args


@pytest.mark.parametrize("n_slots", [1, 8, 33])
def test_children_sums_from_the_best_left_sums(n_slots):
    """Children 2k, 2k + 1 of split slot k: the best candidate's left sums
    and the slot's minus them; None (the routing sums the rows) when a split
    is not its slot's best candidate or the left sums are not known."""
    rng = np.random.default_rng(n_slots)
    args = _children_arguments(rng, n_slots, 6)
    split = args["split"]
    got = _partition.children_sums(**args)
    if len(split) == 0:
        assert [len(part) for part in got] == [0, 0, 0]
        return
    for name, parent, left, out in (("g", args["gradients"], args["left_gradients"], got[0]),
                                    ("h", args["hessians"], args["left_hessians"], got[1]),
                                    ("c", args["count"], args["left_count"], got[2])):
        np.testing.assert_array_equal(out[0::2], left[split], err_msg=name)
        np.testing.assert_array_equal(out[1::2], parent[split] - left[split], err_msg=name)
    assert got[2].dtype == np.int64
    slot = split[-1]
    for field, change in (("split_feature", 100), ("split_threshold", 1),
                          ("split_missing_left", 1)):
        other = dict(args)
        other[field] = args[field].copy()
        other[field][slot] = (other[field][slot] + change) % (200 if field != "split_missing_left"
                                                              else 2)
        assert _partition.children_sums(**other) is None, field
    unknown = dict(args, left_gradients=args["left_gradients"].copy())
    unknown["left_gradients"][slot] = np.nan
    assert _partition.children_sums(**unknown) is None
    short = dict(args, count=args["count"][:-1])
    assert _partition.children_sums(**short) is None


@pytest.mark.parametrize("n_rows", [0, 1, 17, 1000])
@pytest.mark.parametrize("sampling", ["rows", "eras"])
@pytest.mark.parametrize("squares_only", [False, True])
def test_several_outputs_sum_each_output_as_a_fit_on_its_counted_rows(n_rows, sampling,
                                                                      squares_only):
    """slot_sums of several outputs, each trained on its counted rows (the
    others in no slot of its trees, zero gradients): every slot's sums are
    bit for bit those of its output's trees summed alone over its counted
    rows only (a compact fit), whatever the threads -- the squared gradients
    on the grid of its counted rows (to_fixed_point(counted_rows=...))."""
    from packboost._fixed_point import to_fixed_point

    rng = np.random.default_rng(n_rows + (7 if sampling == "rows" else 0))
    n_outputs, trees_per_output = 3, 2
    pack_size = n_outputs * trees_per_output
    codes, *_ = random_frontier(rng, n_rows, pack_size, 3, 2, 4,
                                era_rows=40 if sampling == "eras" else None)
    n_slots = 3 * pack_size
    tree_output = np.repeat(np.arange(n_outputs, dtype=np.int32), trees_per_output)
    counted = [np.ones(n_rows, bool), rng.random(n_rows) < 0.6, np.arange(n_rows) >= n_rows // 3]
    for output, mask in enumerate(counted):     # no tree holds an uncounted row
        for tree in np.flatnonzero(tree_output == output):
            column = codes[:, tree]
            column[~mask & (column >= 0)] = -2 - column[~mask & (column >= 0)]
    era_offsets = np.array([0, n_rows])
    fixed = []
    for mask in counted:
        gradients = np.where(mask, rng.normal(size=n_rows) * 3.0, 0.0)
        hessians = np.where(mask, rng.uniform(0.5, 2, n_rows), 0.0)
        fixed.append(to_fixed_point(gradients, hessians, era_offsets, counted_rows=mask))

    def sums(n_threads):
        found = _partition.slot_sums(
            np.concatenate([item.gradients for item in fixed]),
            np.concatenate([item.hessians for item in fixed]), codes, n_slots, n_threads,
            scattered_samples=sampling == "rows", tree_output=tree_output,
            squares_only=squares_only,
            squared_gradients=np.concatenate([item.squared for item in fixed]))
        return [found] if squares_only else list(found)

    got = sums(1)
    for one, three in zip(got, sums(3), strict=True):
        np.testing.assert_array_equal(one, three)
    for output, mask in enumerate(counted):
        trees = np.flatnonzero(tree_output == output)
        own = slice(trees[0] * 3, (trees[-1] + 1) * 3)       # its trees' slots
        compact = np.ascontiguousarray(codes[mask][:, trees[0]:trees[-1] + 1])
        alone_fixed = to_fixed_point(fixed[output].gradients[mask],
                                     fixed[output].hessians[mask],
                                     np.array([0, int(mask.sum())]))
        alone = _partition.slot_sums(alone_fixed.gradients, alone_fixed.hessians, compact,
                                     n_slots, 1, scattered_samples=sampling == "rows",
                                     squared_gradients=alone_fixed.squared)
        expected = [alone[3]] if squares_only else list(alone)
        for got_sum, alone_sum in zip(got, expected, strict=True):
            np.testing.assert_array_equal(got_sum[own], alone_sum[own])
