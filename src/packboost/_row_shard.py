"""A shard of the training rows: this worker's whole eras, and what the one
driver needs to know of the others (docs/distributed.md §1, §3).

On a Dask cluster every worker runs the driver (:func:`packboost.booster.train`)
over its own shard: a set of whole eras (the eras its input partitions hold
where that moves fewer rows, else a contiguous range), their rows in the
local fit's era-sorted order.
The driver's decisions must be those of one machine holding every row, so
wherever it reads *all* rows it asks the shard instead:

* the round's random draws are made over the global rows and eras (every
  worker draws the same numbers from the same seed) and then cut to this
  shard's rows (:meth:`RowShard.local_samples`);
* the fit's gradient rescaling takes the largest magnitudes of all rows
  (:meth:`RowShard.maximum`, exact);
* the fixed-point grid takes the per-era bounds of all eras, added in era
  order exactly as one machine adds them, whichever shard holds which era
  (:meth:`RowShard.grid_bounds`).

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


def era_runs(eras: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Ascending era codes as runs of consecutive eras: (first, end) arrays
    (one run for a contiguous range)."""
    eras = np.asarray(eras, dtype=np.int64)
    if not len(eras):
        return eras, eras
    breaks = np.flatnonzero(np.diff(eras) != 1) + 1
    return (eras[np.concatenate([[0], breaks])],
            eras[np.concatenate([breaks - 1, [len(eras) - 1]])] + 1)


class RowShard:
    """The eras ``shard_eras[rank]`` of all (``global_era_offsets``), held
    here; ``shard_eras``: every rank's eras (ascending; together each era
    once); ``collective`` reaches the other shards."""

    def __init__(self, collective, global_era_offsets: np.ndarray, shard_eras: list, rank: int,
                 n_features: int):
        self.collective = collective
        self.global_rows = GlobalRows(np.asarray(global_era_offsets, dtype=np.int64),
                                      n_features)
        self.shard_eras = [np.asarray(eras, dtype=np.int64) for eras in shard_eras]
        self.eras = self.shard_eras[rank]
        if len(self.eras) and (np.any(np.diff(self.eras) <= 0) or self.eras[0] < 0
                               or self.eras[-1] >= self.global_rows.n_eras):
            raise ValueError("a shard's eras must be ascending era codes")

    @property
    def total_rows(self) -> int:
        return self.global_rows.n_rows

    @cached_property
    def local_era_offsets(self) -> np.ndarray:
        sizes = np.diff(self.global_rows.era_offsets)[self.eras]
        return np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)

    @cached_property
    def n_rows(self) -> int:
        return int(self.local_era_offsets[-1])

    @cached_property
    def _runs(self) -> tuple[np.ndarray, np.ndarray]:
        return era_runs(self.eras)

    def local_samples(self, samples: TreeSamples) -> TreeSamples:
        """The draws of all rows (:func:`packboost.booster.draw_round`) cut to
        this shard's eras: its era flags, and of each tree's row flags (one
        per row of the eras it kept, in row order) those of its kept eras
        here, one slice per run of consecutive eras."""
        era_sizes = np.diff(self.global_rows.era_offsets)
        firsts, ends = self._runs
        row_keep = []
        for tree, keep in enumerate(samples.row_keep):
            if keep is None:
                row_keep.append(None)
                continue
            kept_offsets = np.concatenate(
                [[0], np.cumsum(era_sizes * (samples.era_keep[tree] != 0))])
            pieces = [keep[kept_offsets[first]:kept_offsets[end]]
                      for first, end in zip(firsts.tolist(), ends.tolist(), strict=True)]
            row_keep.append(pieces[0] if len(pieces) == 1 else np.concatenate(
                pieces or [keep[:0]]))
        return TreeSamples(np.ascontiguousarray(samples.era_keep[:, self.eras]), row_keep,
                           self.local_era_offsets)

    def in_era_order(self, parts: list, axis: int = 0) -> np.ndarray:
        """Every rank's per-era arrays (``parts``, in rank order, each over
        its shard's eras along ``axis``) as one array over all eras in era
        order: what one machine holding every era computes."""
        return np.take(np.concatenate(parts, axis=axis), self._era_order, axis=axis)

    @cached_property
    def _era_order(self) -> np.ndarray:
        """The places of eras 0, 1, 2, ... in the ranks' eras laid end to end
        (in_era_order runs at every depth of a categorical fit: sorted once)."""
        return np.argsort(np.concatenate(self.shard_eras), kind="stable")

    def known_targets(self, y: np.ndarray, era_offsets: np.ndarray, n_outputs: int):
        """:class:`packboost._unknown_targets.KnownTargets` of this shard's
        rows of an output-major ``y`` of ``n_outputs`` outputs, with each
        target complete only where it is known in every shard's rows (so
        every shard takes the same path for it); None where every target is
        known everywhere."""
        from packboost._unknown_targets import KnownTargets

        floats = y.ndim == 2 and y.dtype.kind == "f"
        # One flag per output, the same length on every shard: class labels
        # (one row of codes for several outputs) are never unknown.
        unknown = (np.isnan(y).any(axis=1) if floats
                   else np.zeros(n_outputs, dtype=bool))
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
        of its rows), their per-era sums in era order."""
        from packboost._fixed_point import combine_grid_bounds

        parts = self.collective.allgather(bounds)
        era_sums = {name: self.in_era_order([part[name] for part in parts])
                    for name in ("gradient_sums", "hessian_sums")}
        return combine_grid_bounds(parts, era_sums)
