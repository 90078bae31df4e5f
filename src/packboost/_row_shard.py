"""A shard of the training rows: this worker's whole eras, and what the one
driver needs to know of the others (docs/distributed.md §1, §3).

On a Dask cluster every worker runs the driver (:func:`packboost.booster.train`)
over its own shard: a contiguous range of whole eras of the era-sorted rows.
The driver's decisions must be those of one machine holding every row, so
wherever it reads *all* rows it asks the shard instead:

* the round's random draws are made over the global rows and eras (every
  worker draws the same numbers from the same seed) and then cut to this
  shard's rows (:meth:`RowShard.local_samples`);
* the fit's gradient rescaling takes the largest magnitudes of all rows
  (:meth:`RowShard.maximum`, exact);
* the fixed-point grid takes the per-era bounds of all eras, added in era
  order exactly as one machine adds them (:meth:`RowShard.grid_bounds`).

Everything else per row (targets, weights, gradients, predictions) stays on
the worker; the exchanges go through the fit's
:class:`packboost._collective.Collective`.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from packboost._samples import TreeSamples


@dataclass
class GlobalRows:
    """The driver's view of all training rows for its draws (no data)."""

    era_offsets: np.ndarray     # (n_eras + 1,) int64, of all rows
    n_features: int

    @property
    def n_eras(self) -> int:
        return len(self.era_offsets) - 1

    @property
    def n_rows(self) -> int:
        return int(self.era_offsets[-1])


class RowShard:
    """Eras ``first_era .. end_era - 1`` of all (``global_era_offsets``), held
    here; ``collective`` reaches the other shards (rank order = era order)."""

    def __init__(self, collective, global_era_offsets: np.ndarray, first_era: int,
                 end_era: int, n_features: int):
        self.collective = collective
        self.global_rows = GlobalRows(np.asarray(global_era_offsets, dtype=np.int64),
                                      n_features)
        self.first_era = int(first_era)
        self.end_era = int(end_era)

    @property
    def first_row(self) -> int:
        return int(self.global_rows.era_offsets[self.first_era])

    @property
    def total_rows(self) -> int:
        return self.global_rows.n_rows

    @cached_property
    def local_era_offsets(self) -> np.ndarray:
        offsets = self.global_rows.era_offsets[self.first_era:self.end_era + 1]
        return offsets - offsets[0]

    @cached_property
    def n_rows(self) -> int:
        return int(self.local_era_offsets[-1])

    def local_samples(self, samples: TreeSamples) -> TreeSamples:
        """The draws of all rows (:func:`packboost.booster.draw_round`) cut to
        this shard's eras: its era flags, and of each tree's row flags (one
        per row of the eras it kept, in row order) those of its kept eras here."""
        era_sizes = np.diff(self.global_rows.era_offsets)
        first, end = self.first_era, self.end_era
        row_keep = []
        for tree, keep in enumerate(samples.row_keep):
            if keep is None:
                row_keep.append(None)
                continue
            kept_sizes = era_sizes * (samples.era_keep[tree] != 0)
            start = int(kept_sizes[:first].sum())
            row_keep.append(keep[start:start + int(kept_sizes[first:end].sum())])
        return TreeSamples(samples.era_keep[:, first:end], row_keep, self.local_era_offsets)

    def known_targets(self, y: np.ndarray, era_offsets: np.ndarray):
        """:class:`packboost._unknown_targets.KnownTargets` of this shard's
        rows of an output-major ``y``, with each target complete only where
        it is known in every shard's rows (so every shard takes the same
        path for it); None where every target is known everywhere."""
        from packboost._unknown_targets import KnownTargets

        floats = y.ndim == 2 and y.dtype.kind == "f"
        unknown = np.isnan(y).any(axis=1) if floats else np.zeros(len(y), dtype=bool)
        anywhere = self.maximum(unknown.astype(np.float64)) > 0
        if not anywhere.any():
            return None
        known = KnownTargets(y, era_offsets)
        known.complete = ~anywhere
        return known

    def maximum(self, values):
        """Elementwise maximum over all shards (exact; NaN wins)."""
        return self.collective.allreduce(np.asarray(values, dtype=np.float64), "max")

    def grid_bounds(self, bounds: dict):
        """What :func:`packboost._fixed_point.to_fixed_point` chooses the grid
        from, over all shards' rows: :func:`~packboost._fixed_point.combine_grid_bounds`
        of every shard's ``bounds`` (:func:`~packboost._fixed_point.grid_bounds_of_rows`
        of its rows)."""
        from packboost._fixed_point import combine_grid_bounds

        return combine_grid_bounds(self.collective.allgather(bounds))
