"""A round's row samples: which rows each tree of the pack is grown on.

``booster.draw_round`` draws them (docs/packs.md): each tree keeps a subset of
the eras (``era_subsample``) and, with ``row_subsample``, a subset of their
rows. Rows are era-sorted, so a tree is described by one flag per era and,
with a row subsample, one per row of its eras, and its rows never need
listing: the CPU backend starts a pack from the flags
(``_partition.start_pack_eras``, one streaming write of the row table), where
listing the rows of every tree and finding them again cost 3% of a round at
Numerai scale and 10% at 90k rows (benchmarks/RESULTS.md, 2026-11-26 f90d90e;
with a row subsample, 2026-11-27 6973e8a).

:class:`TreeSamples` is also the sequence of each tree's rows (ascending
int32), listed on first use, for what needs rows: the CUDA and Dask backends,
quantile leaves, tests.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from packboost import _partition


class TreeSamples(Sequence):
    """Per tree: the eras it keeps and, optionally, which of their rows.

    Parameters
    ----------
    era_keep : uint8 array (pack_size, n_eras)
        1 where the tree keeps the era.
    row_keep : list of (bool array or None), one per tree
        With ``row_subsample``: which rows of the tree's kept eras (in row
        order) it keeps; None keeps them all.
    era_offsets : int64 array (n_eras + 1,)
        Era ``e``'s rows are ``era_offsets[e] .. era_offsets[e + 1] - 1``.
    """

    def __init__(self, era_keep: np.ndarray, row_keep: list, era_offsets: np.ndarray):
        era_keep = np.ascontiguousarray(era_keep, dtype=np.uint8)
        era_offsets = np.asarray(era_offsets, dtype=np.int64)
        if era_keep.ndim != 2 or era_keep.shape[1] != len(era_offsets) - 1:
            raise ValueError(f"era_keep must have shape (pack_size, {len(era_offsets) - 1})")
        if len(row_keep) != era_keep.shape[0]:
            raise ValueError(f"row_keep must have {era_keep.shape[0]} entries")
        self.era_keep = era_keep
        self.row_keep = list(row_keep)
        self.era_offsets = era_offsets
        self._rows = [None] * len(row_keep)

    @property
    def whole_eras(self) -> bool:
        """Does every tree keep whole eras (no row subsample)? Then
        ``era_keep`` alone says which rows each tree has."""
        return all(keep is None for keep in self.row_keep)

    def __len__(self) -> int:
        return self.era_keep.shape[0]

    def __getitem__(self, tree: int) -> np.ndarray:
        """The rows of tree ``tree``, ascending int32 (listed once)."""
        if not -len(self) <= tree < len(self):
            raise IndexError(f"tree {tree} out of range for {len(self)} trees")
        tree = tree % len(self)
        if self._rows[tree] is None:
            rows = _partition.rows_of_eras(self.era_keep[tree], self.era_offsets)
            if self.row_keep[tree] is not None:
                rows = rows[self.row_keep[tree]]
            self._rows[tree] = np.ascontiguousarray(rows, dtype=np.int32)
        return self._rows[tree]
