"""The CPU backend: the Cython/OpenMP kernels (docs/cpu-kernels.md).

Rows stay in their era-sorted order for good; ``node_of_row[row, tree]``
(packboost/_partition.pyx) says which slot each row is in, and
``leaf_of_row[row, tree]`` collects every training row's leaf as the pack
grows, so that the prediction update is a lookup. Rows still in a slot when
the pack ends (no slot splits) are not routed again: the update reads their
leaf from the last frontier's node ids.

Histogram subtraction (docs/cpu-kernels.md §3): when the driver says the next
depth scans the same features (``keep_for_children``), this depth's per-era
cells of every slot are kept; at the next depth each pair of children sums
only its smaller child's rows and takes the other as parent minus sibling.
Cells are exact integers, so the trees are those of the full passes.
"""

from __future__ import annotations

import numpy as np

from packboost import _partition, _predict, _split
from packboost._histogram import slot_kind as _slot_kind
from packboost._samples import TreeSamples
from packboost.backends.interface import BestSplits, SlotSums

# Cap on the kept histograms of two consecutive depths (parent and children);
# past it a depth is histogrammed in full passes. Also capped at a quarter of
# the memory available when the backend opens.
DEFAULT_SUBTRACTION_BUDGET_BYTES = 2 * 1024**3
# Rows per kept cell (one slot's rows in one era, over its feature's bins)
# below which a depth is histogrammed in full passes: see _subtraction_plan.
SUBTRACTION_MIN_ROWS_PER_CELL = 12.0
# The node-ordered route (find_best_splits_by_node; docs/cpu-kernels.md §3,
# "The node-ordered route") reads a row-major copy of the depth's features,
# made only when it costs at most this (and an eighth of the available
# memory): it won 1.9-2.4x on 150k rows x 200 features (30 MB) and lost
# 1.5-1.8x at Numerai scale with feature_sampling="pack" (2.7M x 50, 135 MB:
# a node's rows' codes then come from memory, not cache; RESULTS.md,
# 2026-11-26 a674e34).
NODE_ROUTE_MAX_COPY_BYTES = 64 * 1024**2
SLOT_SKIP, SLOT_BUILD, SLOT_DERIVE = (int(_slot_kind.SLOT_SKIP), int(_slot_kind.SLOT_BUILD),
                                      int(_slot_kind.SLOT_DERIVE))


def _one_of_two(buffers: list, size: int, avoid) -> np.ndarray:
    """``size`` int64 from one of two buffers that take turns as a depth's
    parent and children (grown in place when short), never the one holding
    ``avoid``."""
    for index, buffer in enumerate(buffers):
        if avoid is not None and np.shares_memory(buffer, avoid):
            continue
        if buffer.size < size:
            buffer = buffers[index] = np.empty(size, dtype=np.int64)
        return buffer[:size]
    raise AssertionError("two buffers, one parent")


def category_cells(data, node_of_row, fixed, slot_tree, slot_open, features,
                   n_threads) -> np.ndarray:
    """Per (feature, slot, era, code) of the categorical ``features``: the
    sums of g, h and the rows of the slots' rows (``node_of_row``'s codes),
    in row order (packboost/_categorical.pyx). Shared by the backends whose
    rows' slots are at hand on the host."""
    from packboost import _categorical

    width = int(np.max(data.n_bins[data.categorical])) + 1
    return _categorical.category_histograms(
        data.X_binned, np.ascontiguousarray(features, dtype=np.int32), node_of_row,
        np.ascontiguousarray(slot_tree, dtype=np.int32),
        np.ascontiguousarray(slot_open, dtype=np.uint8), fixed.gradients, fixed.hessians,
        data.row_era, data.n_eras, width, n_threads)


def score_category_cells(data, hist, slot_tree, slot_open, features, tree_uses_feature,
                         slot_variance, params, constraints, n_threads) -> dict:
    """find_category_splits' choice from the category cells of every era."""
    from packboost import _categorical

    n_categories = np.ascontiguousarray(data.n_bins[features], dtype=np.int32)
    constraints = constraints or {}
    return _categorical.best_category_splits(
        hist, n_categories, np.ascontiguousarray(slot_open, dtype=np.uint8),
        np.ascontiguousarray(slot_tree, dtype=np.int32),
        np.ascontiguousarray(tree_uses_feature, dtype=np.uint8), slot_variance,
        params.split, params.max_cat_to_onehot, params.max_cat_threshold,
        params.cat_smooth, params.min_data_per_group, n_threads,
        slot_bounds=constraints.get("slot_bounds"),
        slot_allows_feature=constraints.get("slot_allows_feature"),
        order_by_eras=params.cat_order == "era", search_steps=params.cat_search_steps)


class CpuBackend:
    """:class:`packboost.backends.interface.Backend` on this machine's cores.

    ``histogram_budget_bytes`` per thread caps the histogram buffer the
    threads share (n_eras x slots x bins cells of a block of features; past
    it the slots of a depth are histogrammed in groups, one pass each);
    ``features_per_pass`` features are histogrammed
    per pass over the rows (a row's gradient and slots are read once per
    block of features). ``subtraction_budget_bytes`` caps the histograms kept
    for subtraction (None: the default, or a quarter of the available memory
    if less; 0 turns subtraction off). None of them changes the trees.

    It grows several outputs' packs as one pack (``grows_outputs_in_one_pass``,
    grower.grow_output_packs): ``begin_pack`` then takes an
    :class:`~packboost._fixed_point.OutputsFixedPoint`, the histogram pass
    sums each tree's output's gradients, and the node sums are taken per
    output (``_output_sums``).
    """

    grows_outputs_in_one_pass = True

    def __init__(self, data, pack_size: int, n_threads: int, *,
                 histogram_budget_bytes: int = _split.DEFAULT_HISTOGRAM_BUDGET_BYTES,
                 features_per_pass: int = _split.DEFAULT_FEATURES_PER_PASS,
                 subtraction_budget_bytes: int | None = None):
        self.data = data
        self.pack_size = pack_size
        self.n_threads = n_threads
        self.histogram_budget_bytes = histogram_budget_bytes
        self.features_per_pass = features_per_pass
        if subtraction_budget_bytes is None:
            from packboost._memory import available_memory_bytes

            available, _ = available_memory_bytes()
            subtraction_budget_bytes = DEFAULT_SUBTRACTION_BUDGET_BYTES
            if available is not None:
                subtraction_budget_bytes = min(subtraction_budget_bytes, available // 4)
        self.subtraction_budget_bytes = subtraction_budget_bytes
        self.node_of_row = np.empty((data.n_rows, pack_size), dtype=np.int32)
        self.leaf_of_row = np.empty((data.n_rows, pack_size), dtype=np.int32)
        self.fixed = None
        # (n_eras, pack_size) era flags of the pack's trees (begin_pack's
        # TreeSamples), else None: see find_best_splits.
        self._era_tree_rows = None
        self._scattered_samples = True
        # (features, their codes row-major) for the node-ordered route.
        self._codes_block = None
        self._forget_depth()
        self._free_buffers()

    def _forget_depth(self) -> None:
        # What subtraction carries from one depth to the next: the kept cells
        # and what they were built over, the last node counts, and each
        # current slot's parent (from route_rows).
        self._kept = None
        self._counts = None
        self._slot_parent = None
        self._routed_sums = None
        # The frontier's sums and best splits (slot_sums, find_splits): the
        # children's sums come from them (route_rows).
        self._sums = None
        self._best = None
        # The node ids of the last frontier once no slot splits (route_rows):
        # rows still in its slots are in those leaves (add_pack).
        self._last_slot_node = None
        # The frontier's slot_tree (find_splits), for route_rows.
        self._slot_tree = None
        # Is the table still at the pack's roots (begin_pack, until the first
        # route_rows)? Where trees keep whole eras, slot_sums of the roots
        # comes from the era flags then.
        self._at_roots = False

    def _free_buffers(self) -> None:
        self._buffers = [np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)]
        self._pooled_buffers = [np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)]
        self._active_rows_buffer = None

    def _active_rows(self, visit):
        """_partition.active_rows of the slots ``visit``, into a row buffer
        kept for the fit (a depth's row list is dead once its pass is done)."""
        if self._active_rows_buffer is None:
            self._active_rows_buffer = np.empty(self.data.n_rows, dtype=np.int32)
        return _partition.active_rows(self.node_of_row, visit, self.data.era_offsets,
                                      self.n_threads, out=self._active_rows_buffer)

    def close(self) -> None:
        self.node_of_row = self.leaf_of_row = self.fixed = None
        self._codes_block = None
        self._forget_depth()
        self._free_buffers()

    def begin_pack(self, fixed, tree_samples: list) -> None:
        n_trees = self.pack_size
        if getattr(fixed, "outputs", None) is not None:
            n_trees = len(fixed.tree_output)   # every output's trees (grow_output_packs)
        if len(tree_samples) != n_trees:
            raise ValueError(f"expected {n_trees} tree samples, got {len(tree_samples)}")
        if self.node_of_row is not None and self.node_of_row.shape[1] != n_trees:
            self.node_of_row = np.empty((self.data.n_rows, n_trees), dtype=np.int32)
            self.leaf_of_row = np.empty((self.data.n_rows, n_trees), dtype=np.int32)
        self.fixed = fixed
        self._forget_depth()
        self._era_tree_rows = None
        # Rows sampled one by one (route_rows' scattered_samples), not whole eras.
        self._scattered_samples = not (isinstance(tree_samples, TreeSamples)
                                       and tree_samples.whole_eras)
        if isinstance(tree_samples, TreeSamples):
            # The histogram pass skips the (era, tree) a tree did not draw,
            # with or without a row subsample within the eras it did.
            self._era_tree_rows = np.ascontiguousarray(tree_samples.era_keep.T,
                                                       dtype=np.uint8)
        if isinstance(tree_samples, TreeSamples):
            # The table from the era (and row) flags, no row lists: with a
            # row subsample, listing each tree's rows and finding them in the
            # table took 6% of a small fit.
            _partition.start_pack_eras(self.node_of_row, tree_samples.era_keep,
                                       self.data.era_offsets, self.n_threads,
                                       row_keep=tree_samples.row_keep)
        else:
            _partition.start_pack(self.node_of_row, list(tree_samples), self.n_threads)
        self._at_roots = True

    def slot_sums(self, n_slots: int) -> SlotSums:
        fixed = self.fixed
        routed, self._routed_sums = self._routed_sums, None
        if routed is not None and routed[0] == n_slots:
            sums = routed[1]
        elif getattr(fixed, "outputs", None) is not None:
            sums = self._output_sums(n_slots)
        elif self._roots_from_era_flags(n_slots):
            # The roots from the era flags, not the table: the same sums
            # (root_sums), in under half the time.
            sums = SlotSums(*_partition.root_sums(fixed.gradients, fixed.hessians,
                                                  self._era_tree_rows, self.data.era_offsets,
                                                  self.n_threads, fixed.squared))
        else:
            sums = SlotSums(*_partition.slot_sums(fixed.gradients, fixed.hessians,
                                                  self.node_of_row, n_slots, self.n_threads,
                                                  scattered_samples=self._scattered_samples,
                                                  squared_gradients=fixed.squared))
        self._counts = sums.count
        self._sums = sums
        return sums

    def _roots_from_era_flags(self, n_slots: int) -> bool:
        """Can slot_sums take the pack's roots from the era flags
        (_partition.root_sums): at the roots, trees keeping whole eras of
        rows that all count (no target unknown in a row)."""
        return (self._at_roots and self._era_tree_rows is not None
                and not self._scattered_samples and self.fixed.counts_every_row
                and n_slots == self.node_of_row.shape[1])

    def _output_table(self, output: int) -> np.ndarray:
        """The columns of ``node_of_row`` of one output's trees (an
        OutputsFixedPoint pack), contiguous, as a one-output pack's table."""
        trees = np.flatnonzero(self.fixed.tree_output == output)
        return np.ascontiguousarray(self.node_of_row[:, trees[0]:trees[-1] + 1])

    def _output_sums(self, n_slots: int) -> SlotSums:
        """slot_sums of a pack of several outputs: each tree adds its
        output's gradients, so every slot's sums are those of its output's
        pack alone, bit for bit (the routing sums one gradient per row)."""
        fixed = self.fixed
        if self._roots_from_era_flags(n_slots) and np.all(np.diff(fixed.tree_output) >= 0):
            # Each output's roots from its trees' era flags, as its own pack's
            # (root_sums): the same numbers without a pass over the table.
            parts = []
            for output, output_fixed in enumerate(fixed.outputs):
                trees = np.flatnonzero(fixed.tree_output == output)
                parts.append(_partition.root_sums(
                    output_fixed.gradients, output_fixed.hessians,
                    np.ascontiguousarray(self._era_tree_rows[:, trees]), self.data.era_offsets,
                    self.n_threads, output_fixed.squared))
            return SlotSums(*(np.concatenate(columns) for columns in zip(*parts, strict=True)))
        return SlotSums(*_partition.slot_sums(fixed.gradients, fixed.hessians,
                                              self.node_of_row, n_slots, self.n_threads,
                                              scattered_samples=self._scattered_samples,
                                              tree_output=fixed.tree_output,
                                              squared_gradients=fixed.squared))

    def find_splits(self, slot_tree, slot_open, features, tree_uses_feature, slot_variance,
                    split_params, *, keep_for_children=False, constraints=None) -> BestSplits:
        # Each slot's tree: the routing keeps its squares in vector lanes by tree.
        self._slot_tree = np.ascontiguousarray(slot_tree, dtype=np.int32)
        if self._takes_node_route(features, split_params):
            return self._find_splits_by_node(slot_tree, slot_open, features, tree_uses_feature,
                                             slot_variance, split_params, constraints)
        data = self.data
        plan = self._subtraction_plan(slot_tree, slot_open, features, tree_uses_feature,
                                      keep_for_children)
        visit = slot_open if plan is None else plan["visit"]
        if np.all(visit):
            # Every slot's rows are summed: the pass skips a row where no
            # tree holds it by its codes, so listing the rows of open slots
            # first would only copy the row ids (3% of a small fit).
            rows, era_offsets = data.all_rows, data.era_offsets
        else:
            rows, era_offsets = self._active_rows(visit)
        subtraction = {} if plan is None else {
            name: plan[name] for name in ("depth_cells", "parent_cells", "slot_kind",
                                          "slot_parent", "tree_extra_feature")}
        found = _split.find_best_splits(
            data.X_binned, self.fixed, rows, era_offsets, self.node_of_row, slot_tree,
            slot_open, features, tree_uses_feature, data.n_bins, split_params, self.n_threads,
            self.histogram_budget_bytes, self.features_per_pass, slot_variance, **subtraction,
            **(constraints or {}),
            cell_buffer=self._block_buffer(plan, len(slot_tree), features, tree_uses_feature),
            best_per_slot=True, era_tree_rows=self._era_tree_rows,
            scattered_samples=self._scattered_samples)
        self._kept = None
        if plan is not None and keep_for_children:
            self._kept = dict(cells=plan["depth_cells"], features=features,
                              uses=tree_uses_feature, n_slots=len(slot_tree))
        best = BestSplits.of_table(found)
        self._best = (best, features)
        return best

    def find_category_splits(self, slot_tree, slot_open, features, tree_uses_feature,
                             slot_variance, params, *, constraints=None) -> dict:
        """The best category-set split of every open slot over the depth's
        categorical ``features`` (packboost/_categorical.pyx): its per-era
        category cells from the slots' rows, scored by DES."""
        hist = self._category_cells(slot_tree, slot_open, features)
        return self._score_category_cells(hist, slot_tree, slot_open, features,
                                          tree_uses_feature, slot_variance, params,
                                          constraints)

    def _category_cells(self, slot_tree, slot_open, features) -> np.ndarray:
        """Per (feature, slot, era, code) of the categorical ``features``: the
        sums of g, h and the rows of this backend's rows (its eras)."""
        return category_cells(self.data, self.node_of_row, self.fixed, slot_tree, slot_open,
                              features, self.n_threads)

    def _score_category_cells(self, hist, slot_tree, slot_open, features, tree_uses_feature,
                              slot_variance, params, constraints) -> dict:
        """find_category_splits' choice from the cells of every era."""
        return score_category_cells(self.data, hist, slot_tree, slot_open, features,
                                    tree_uses_feature, slot_variance, params, constraints,
                                    self.n_threads)

    def _takes_node_route(self, features, split_params) -> bool:
        """Does this depth take the node-ordered route? Below a pack's roots
        (whose eras the trees share, which the era-major pass sums once),
        with the parent depth's histograms at hand over the same features to
        subtract from, realized era gains with equal era weights (the pooled
        bounds), uint8 codes, and a row-major copy of the features within
        its budget (NODE_ROUTE_MAX_COPY_BYTES)."""
        kept, data = self._kept, self.data
        if (kept is None or self._slot_parent is None or self._counts is None
                or data.X_binned.dtype != np.uint8
                or split_params.get("era_gain") != "realized"
                or split_params.get("era_weighting") != "equal"
                or not np.array_equal(kept["features"], features)):
            return False
        return self._codes_by_row(features) is not None

    def _codes_by_row(self, features):
        """The candidate features' codes, row-major (n_rows, len(features)),
        gathered once for a set of features (a fit's, at every feature; a
        pack's with feature_sampling="pack"); None over the copy's budget."""
        cached = self._codes_block
        if cached is not None and np.array_equal(cached[0], features):
            return cached[1]
        self._codes_block = None
        data = self.data
        if not self._copy_fits(data.n_rows * len(features)):
            return None
        block = np.ascontiguousarray(data.X_binned[np.asarray(features)].T)
        self._codes_block = (np.array(features, dtype=np.int32, copy=True), block)
        return block

    def _copy_fits(self, size: int) -> bool:
        """May the copy take ``size`` bytes: NODE_ROUTE_MAX_COPY_BYTES and an
        eighth of the available memory (read only when the first allows it:
        a depth over the cap, as at Numerai scale, reads no /proc file)."""
        if size > NODE_ROUTE_MAX_COPY_BYTES:
            return False
        from packboost._memory import available_memory_bytes

        available, _ = available_memory_bytes()
        return available is None or size <= available // 8

    def _find_splits_by_node(self, slot_tree, slot_open, features, tree_uses_feature,
                             slot_variance, split_params, constraints) -> BestSplits:
        """find_splits by _split.find_best_splits_by_node: each slot's cells
        pooled over eras from its own rows (the smaller child of a pair) or
        its parent's minus its sibling's; the few tiles the pooled bounds
        leave get their per-era cells from the slot's rows."""
        data, kept = self.data, self._kept
        n_slots = len(slot_tree)
        parent = kept.get("pooled")
        if parent is None:
            # The parents took the era-major pass: their kept cells, summed over eras.
            parent = self._pooled_buffer(
                _split.pooled_cells_size(kept["n_slots"], features, data.n_bins, self.fixed),
                avoid=None)
            _split.pool_era_cells(kept["cells"], data.n_eras, kept["n_slots"], features,
                                  data.n_bins, self.features_per_pass, self.fixed, parent,
                                  self.n_threads)
        slot_kind, extra = self._pair_kinds(slot_open, tree_uses_feature, kept["uses"])
        pooled = self._pooled_buffer(
            _split.pooled_cells_size(n_slots, features, data.n_bins, self.fixed), avoid=parent)
        found = _split.find_best_splits_by_node(
            self._codes_by_row(features), data.X_binned, self.fixed, data.row_era, data.n_eras,
            self.node_of_row,
            slot_tree, slot_open, features, tree_uses_feature, data.n_bins, split_params,
            self.n_threads, slot_variance, pooled_cells=pooled, parent_pooled=parent,
            slot_kind=slot_kind, slot_parent=self._slot_parent, tree_extra_feature=extra,
            **(constraints or {}))
        # Pooled cells are a few KiB per slot: kept whatever the next depth scans.
        self._kept = dict(pooled=pooled, features=features, uses=tree_uses_feature,
                          n_slots=n_slots)
        best = BestSplits.of_table(found)
        self._best = (best, features)
        return best

    def _pooled_buffer(self, size: int, avoid) -> np.ndarray:
        """_cell_buffer for the node-ordered route's pooled cells."""
        return _one_of_two(self._pooled_buffers, size, avoid)

    def _pair_kinds(self, slot_open, tree_uses_feature, parent_uses):
        """Of each pair of children (2k, 2k + 1) with an open child, the one
        with fewer rows SLOT_BUILD, the other, if open, SLOT_DERIVE (its
        parent's cells minus its sibling's), every other slot SLOT_SKIP; and
        the features a tree uses now but did not at the parent's depth
        (n_candidates, pack_size), which a derived slot sums itself."""
        n_slots = len(slot_open)
        counts = self._counts
        left = np.arange(0, n_slots, 2)
        right = left + 1
        needed = (slot_open[left] != 0) | (slot_open[right] != 0)
        build_left = counts[left] <= counts[right]
        smaller = np.where(build_left, left, right)
        larger = np.where(build_left, right, left)
        slot_kind = np.full(n_slots, SLOT_SKIP, dtype=np.uint8)
        slot_kind[smaller[needed]] = SLOT_BUILD
        open_larger = larger[needed][slot_open[larger[needed]] != 0]
        slot_kind[open_larger] = SLOT_DERIVE
        extra = np.ascontiguousarray((tree_uses_feature & (parent_uses == 0)).astype(np.uint8))
        return slot_kind, extra

    def _block_buffer(self, plan, n_slots, features, tree_uses_feature):
        """find_best_splits' block buffer for full passes: one of the two
        buffers subtraction keeps for the fit (no depth then faults in fresh
        pages); None with subtraction, whose cells live in the plan's
        depth_cells."""
        if plan is not None or len(features) == 0:
            return None
        words = 1 if self.fixed.hessian_is_constant else 2
        size = _split.block_buffer_cells(features, self.data.n_bins, tree_uses_feature, n_slots,
                                         self.data.n_eras, words, self.n_threads,
                                         self.histogram_budget_bytes, self.features_per_pass)[1]
        return self._cell_buffer(size, avoid=None)

    def _subtraction_plan(self, slot_tree, slot_open, features, tree_uses_feature,
                          keep_for_children, always=False):
        """What each slot's histograms come from this depth, or None for full
        passes (no kept parent and nothing to keep, or over the budget).
        ``always``: a plan whatever the budget and the rows per cell, every
        slot's cells kept (the Dask backend reads them every depth); where
        subtraction does not pay, every open slot is summed from its rows."""
        kept = self._kept
        derive = (kept is not None and "cells" in kept and self._slot_parent is not None
                  and np.array_equal(kept["features"], features))
        if not (derive or keep_for_children) or self._counts is None:
            return None
        words = 1 if self.fixed.hessian_is_constant else 2
        n_eras = self.data.n_eras
        size = _split.depth_cells_size(n_eras, len(slot_tree), features, self.data.n_bins,
                                       words)
        # (With ``always`` and no parent to derive from, the checks below
        # could only turn derive off: skipped.)
        if derive or not always:
            kept_bytes = kept["cells"].nbytes if derive else 0
            if 8 * size + kept_bytes > self.subtraction_budget_bytes:
                if not always:
                    return None
                derive = False
            # Worth it only when a (slot, era) has many rows per cell: a derived
            # slot saves about half its rows' updates (~1.3 ns each) but every
            # kept cell is cleared, written and subtracted (~4 ns per cell, for
            # the slot and its parent). With few rows per era (small data, deep
            # nodes) full passes are cheaper (benchmarks/RESULTS.md).
            rows_per_cell = (np.sum(self._counts, dtype=np.float64)
                             / max(1, n_eras * len(slot_tree))
                             / max(1.0, float(np.mean(self.data.n_bins[features] + 1))))
            if rows_per_cell < SUBTRACTION_MIN_ROWS_PER_CELL:
                if not always:
                    return None
                derive = False
        n_slots = len(slot_tree)
        slot_kind = np.where(slot_open != 0, SLOT_BUILD, SLOT_SKIP).astype(np.uint8)
        slot_parent = np.full(n_slots, -1, dtype=np.int32)
        extra = np.zeros_like(tree_uses_feature)
        parent_cells = None
        if derive:
            # Children come in pairs (2k, 2k + 1) of one parent (grower.grow_pack).
            slot_parent = self._slot_parent
            slot_kind, extra = self._pair_kinds(slot_open, tree_uses_feature, kept["uses"])
            parent_cells = kept["cells"]
        visit = (slot_kind == SLOT_BUILD) | ((slot_kind == SLOT_DERIVE)
                                             & extra[:, slot_tree].any(axis=0))
        return dict(depth_cells=self._cell_buffer(size, avoid=parent_cells),
                    parent_cells=parent_cells,
                    slot_kind=slot_kind, slot_parent=slot_parent,
                    tree_extra_feature=np.ascontiguousarray(extra),
                    visit=visit.astype(np.uint8))

    def _cell_buffer(self, size: int, avoid) -> np.ndarray:
        """``size`` int64 cells from two buffers kept for the fit (parent and
        children take turns), so that a depth does not fault in fresh pages;
        never the one holding ``avoid`` (the parent's cells)."""
        return _one_of_two(self._buffers, size, avoid)

    def route_rows(self, split_feature, split_threshold, split_missing_left, left_child_slot,
                   slot_node, *, split_children=True, category_splits=None) -> None:
        data = self.data
        self._at_roots = False  # the table moves on from the roots
        split = np.flatnonzero(np.asarray(left_child_slot) >= 0)
        best, self._best = self._best, None
        if category_splits is not None and len(split):
            self._route_by_categories(split_feature, split_threshold, split_missing_left,
                                      left_child_slot, slot_node, split, category_splits)
            return
        if len(split) == 0:
            # No slot splits: the pack ends here (the driver grows no further).
            # A pass would only copy each row's slot to its leaf (a sixth of a
            # pack's routing at Numerai scale); add_pack reads the leaf of
            # every row still in a slot from node_of_row and these node ids.
            self._last_slot_node = np.ascontiguousarray(slot_node, dtype=np.int32)
            self._slot_parent = self._routed_sums = None
            return
        # Children numbered otherwise than in pairs: no subtraction, and their
        # sums from the rows.
        in_pairs = self._note_parents(left_child_slot, split)
        n_next = 2 * len(split)
        children = None
        if in_pairs:
            children = self._children_sums(best, split, split_feature, split_threshold,
                                           split_missing_left)
        route = (data.X_binned, self.node_of_row, split_feature, split_threshold,
                 split_missing_left, left_child_slot, data.n_bins, slot_node, self.leaf_of_row,
                 self.n_threads)
        several_outputs = getattr(self.fixed, "outputs", None) is not None
        options = dict(scattered_samples=self._scattered_samples)
        squared = dict(squared_gradients=self.fixed.squared)
        block = self._codes_block
        if block is not None and best is not None and np.array_equal(block[0], best[1]):
            # The depth's features row-major (the node-ordered route's copy):
            # a row's split codes for every tree from one run of its codes.
            options.update(codes_by_row=block[1], block_features=block[0])
        if several_outputs:
            # Several outputs: the routing sums one gradient per row, so the
            # next frontier's sums are taken per output (_output_sums).
            _partition.route_rows(*route, **options)
            if children is None:
                sums = self._output_sums(n_next)
            elif split_children:
                fixed = self.fixed
                sums = SlotSums(*children, _partition.slot_sums(
                    fixed.gradients, fixed.hessians, self.node_of_row, n_next, self.n_threads,
                    scattered_samples=self._scattered_samples, tree_output=fixed.tree_output,
                    squares_only=True, squared_gradients=fixed.squared))
            else:
                # The last depth: its squared gradients are not read (route_rows'
                # split_children), the rest comes from the splits.
                sums = SlotSums(*children, None)
        elif children is None:
            # The next frontier's sums come with the routing (one pass over
            # the table, same numbers as slot_sums): slot_sums hands them out.
            sums = SlotSums(*_partition.route_rows(*route, self.fixed.gradients,
                                                   self.fixed.hessians, n_next, **options,
                                                   **squared))
        else:
            # Gradient, hessian and count from the splits (exact); the
            # squared gradients only where the driver splits the children.
            # Each (row, tree) then adds one number to its child, or none:
            # the four sums' read-modify-writes were a third of the routing.
            squares = None
            if split_children:
                squares = _partition.route_rows(*route, self.fixed.gradients,
                                                self.fixed.hessians, n_next, squares_only=True,
                                                slot_tree=self._slot_tree, **options, **squared)
            else:
                _partition.route_rows(*route, **options)
            sums = SlotSums(*children, squares)
        self._routed_sums = (n_next, sums) if n_next else None

    def _route_by_categories(self, split_feature, split_threshold, split_missing_left,
                             left_child_slot, slot_node, split, category_splits) -> None:
        """route_rows with category-set splits: every split by its threshold
        (a set split's is -1: all non-missing rows right, the missing ones to
        their side), then the rows of a set's right child whose category is
        in the set move left. The next frontier's sums then come from the
        rows (slot_sums)."""
        from packboost import _categorical

        self._route_without_sums(split_feature, split_threshold, split_missing_left,
                                 left_child_slot, slot_node, split)
        _categorical.move_left_by_category(self.data.X_binned, self.node_of_row,
                                           category_splits["child_feature"],
                                           category_splits["child_left_set"], self.n_threads)

    def _note_parents(self, left_child_slot, split) -> bool:
        """Do the next depth's slots 2k and 2k + 1 hold the children of the
        split slot ``split[k]`` (its left_child_slot 2k)? Then their parents
        are kept (``_slot_parent``: subtraction derives a child from its
        parent's cells, the children's sums come from the split); else None."""
        in_pairs = np.array_equal(np.asarray(left_child_slot)[split], 2 * np.arange(len(split)))
        self._slot_parent = np.repeat(split, 2).astype(np.int32) if in_pairs else None
        return in_pairs

    def _route_without_sums(self, split_feature, split_threshold, split_missing_left,
                            left_child_slot, slot_node, split) -> None:
        """Every row to its child slot by its threshold, without the next
        frontier's sums (slot_sums then takes them from the rows); the
        children's parents, where they come in pairs, for subtraction."""
        data = self.data
        self._note_parents(left_child_slot, split)
        _partition.route_rows(data.X_binned, self.node_of_row, split_feature, split_threshold,
                              split_missing_left, left_child_slot, data.n_bins, slot_node,
                              self.leaf_of_row, self.n_threads,
                              scattered_samples=self._scattered_samples)
        self._routed_sums = None

    def _children_sums(self, best, split, split_feature, split_threshold, split_missing_left):
        """The next frontier's gradient, hessian and count sums from this
        depth's, for children numbered 2k, 2k + 1 in the order of the split
        slots ``split``: a split slot's left child has its best candidate's
        left sums (find_best_splits' slot_left), the right one the slot's
        sums minus them.
        Exact, so they are the numbers summing the rows gives. None where
        those are not at hand or describe other splits than these (then the
        routing sums the rows)."""
        sums = self._sums
        if best is None or sums is None or len(split) == 0:
            return None
        best, features = best
        if best.left_gradients is None:
            return None
        as_array = np.ascontiguousarray
        return _partition.children_sums(
            as_array(split, dtype=np.int64), as_array(best.column, dtype=np.int64),
            as_array(features, dtype=np.int32), as_array(split_feature, dtype=np.int32),
            as_array(split_threshold, dtype=np.int32), as_array(split_missing_left, dtype=np.uint8),
            as_array(best.threshold, dtype=np.int32), as_array(best.missing_left, dtype=np.uint8),
            as_array(best.left_gradients, dtype=np.float64),
            as_array(best.left_hessians, dtype=np.float64),
            as_array(best.left_count, dtype=np.float64),
            as_array(sums.gradients, dtype=np.float64), as_array(sums.hessians, dtype=np.float64),
            as_array(sums.count, dtype=np.int64))

    def training_leaves(self) -> np.ndarray:
        """Every training row's leaf (node id in its tree) in every tree of
        the grown pack, (n_rows, pack_size): what add_pack looks up."""
        if self._last_slot_node is None:
            raise RuntimeError("the pack is not grown to its end")
        codes = self.node_of_row
        slots = np.where(codes >= 0, codes, -2 - codes)
        in_slot = codes != -1
        return np.where(in_slot, self._last_slot_node[np.where(in_slot, slots, 0)],
                        self.leaf_of_row)

    def add_output_pack(self, pack, raw_prediction: np.ndarray, output: int) -> None:
        """add_pack for output ``output``'s pack of a pack of several outputs
        (grower.grow_output_packs): its trees' leaves, into its raw scores."""
        if self._last_slot_node is None:
            raise RuntimeError("add_output_pack before the pack's last route_rows")
        trees = np.flatnonzero(self.fixed.tree_output == output)
        columns = slice(trees[0], trees[-1] + 1)
        _predict.add_leaf_values(np.ascontiguousarray(self.leaf_of_row[:, columns]),
                                 pack.nodes["value"],
                                 np.ascontiguousarray(pack.tree_offsets[:-1]), raw_prediction,
                                 self.n_threads, node_of_row=self._output_table(output),
                                 slot_node=self._last_slot_node)

    def add_pack(self, pack, raw_prediction: np.ndarray) -> None:
        if self._last_slot_node is None:
            raise RuntimeError("add_pack before the pack's last route_rows")
        _predict.add_leaf_values(self.leaf_of_row, pack.nodes["value"],
                                 np.ascontiguousarray(pack.tree_offsets[:-1]), raw_prediction,
                                 self.n_threads, node_of_row=self.node_of_row,
                                 slot_node=self._last_slot_node)
