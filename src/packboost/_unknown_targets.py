"""Targets unknown in some rows: NaN in a column of a 2-D ``y`` (docs/packs.md §10).

Numerai's auxiliary targets start later than the main one, or are undefined
where their horizon runs past the data. A row whose target ``j`` is NaN is
left out of output ``j`` the way a row that no tree drew is left out:

* output ``j``'s round samples (:class:`~packboost._samples.TreeSamples`) keep
  only its known rows, and no era without one (the era is absent for ``j``:
  neither its statistics nor its count enter DES);
* its gradients and hessians are 0 on the unknown rows (the kernels never
  read them, but the round's magnitudes, rescaling and fixed-point grid must
  not see a NaN);
* its fixed-point grid (``to_fixed_point``'s ``counted_rows``) sizes the row
  counts by its known rows per era, and judges a constant hessian on them;
* its starting score and its eval metrics use its known rows only.

The round's draws stay shared by the outputs (drawn over every row and era,
then cut to each output's known rows), so with every sampling off output
``j``'s trees are exactly those of a one-output fit on column ``j``'s known
rows (with the same bins).
"""

from __future__ import annotations

import numpy as np

from packboost import _partition
from packboost._samples import TreeSamples


class KnownTargets:
    """Which rows each output's target is known in.

    Parameters
    ----------
    y : float64 array (n_outputs, n_rows)
        The targets, output-major, rows era-sorted; NaN where unknown.
    era_offsets : int64 array (n_eras + 1,)
    """

    def __init__(self, y: np.ndarray, era_offsets: np.ndarray):
        self.known = ~np.isnan(y)
        self.era_offsets = np.asarray(era_offsets, dtype=np.int64)
        self.complete = self.known.all(axis=1)
        running = np.zeros((len(y), y.shape[1] + 1), dtype=np.int64)
        np.cumsum(self.known, axis=1, out=running[:, 1:])
        # (n_outputs, n_eras): each era's known rows, per output.
        self.era_counts = running[:, self.era_offsets[1:]] - running[:, self.era_offsets[:-1]]

    @classmethod
    def of(cls, y: np.ndarray, era_offsets: np.ndarray) -> KnownTargets | None:
        """For an output-major ``y`` of several targets with a NaN; else None."""
        if y.ndim != 2 or y.dtype.kind != "f" or not np.isnan(y).any():
            return None
        return cls(y, era_offsets)

    def of_outputs(self, first: int, end: int) -> KnownTargets:
        """The known rows of outputs ``first .. end - 1`` alone (numbered from 0)."""
        part = object.__new__(KnownTargets)
        part.known = self.known[first:end]
        part.era_offsets = self.era_offsets
        part.complete = self.complete[first:end]
        part.era_counts = self.era_counts[first:end]
        return part

    def clear_unknown(self, gradients: np.ndarray, hessians: np.ndarray) -> None:
        """Zero the (n_outputs, n_rows) gradients and hessians of unknown rows."""
        unknown = ~self.known
        gradients[unknown] = 0.0
        hessians[unknown] = 0.0

    def counted_rows(self, output: int) -> np.ndarray | None:
        """The rows output ``output``'s trees may hold (None: every row)."""
        return None if self.complete[output] else self.known[output]

    def tree_samples(self, output: int, samples: TreeSamples) -> TreeSamples:
        """The round's ``samples`` cut to output ``output``'s known rows."""
        if self.complete[output]:
            return samples
        known, era_offsets = self.known[output], self.era_offsets
        era_keep = samples.era_keep & (self.era_counts[output] > 0).astype(np.uint8)
        # Eras where the target is known in every row: a tree keeping whole
        # eras and only such eras keeps whole eras still (no row flags: the
        # kernels' faster pass for whole eras, the same sums).
        whole = self.era_counts[output] == np.diff(era_offsets)
        row_keep = []
        for tree in range(len(samples)):
            if samples.row_keep[tree] is None and np.all(whole[era_keep[tree] > 0]):
                row_keep.append(None)
                continue
            kept_rows = _partition.rows_of_eras(era_keep[tree], era_offsets)
            keep = known[kept_rows]
            if samples.row_keep[tree] is not None:
                # The draw's flags are over the rows of the tree's drawn eras.
                drawn = np.zeros(len(known), dtype=bool)
                drawn[_partition.rows_of_eras(samples.era_keep[tree], era_offsets)[
                    samples.row_keep[tree]]] = True
                keep &= drawn[kept_rows]
            row_keep.append(keep)
        return TreeSamples(era_keep, row_keep, era_offsets)

