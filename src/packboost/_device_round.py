"""The round on the device: which fits compute their gradients on the GPU.

Between two rounds the host used to compute the objective's gradients, their
fixed-point grid (:func:`packboost._fixed_point.to_fixed_point`), list every
tree's rows and upload all of it, then download the predictions to add a pack
to them: ~60 ms a round at Numerai scale, as much as half a round's kernels
(docs/cuda-kernels.md §4). For the objectives the device implements
(squared error and Huber loss, with or without weights), a one-output fit
keeps ``y``, the weights and the raw predictions on the device for the whole
fit and the device computes each round's gradients, grid and quantised
values from them: the same float operations in the same order, the same
exact power-of-two scales, hence the integers the CPU backend sums
(``tests/test_cuda.py`` checks them row by row). The trees' samples go up as
flags (one byte per era and tree, one per row with a row subsample) and the
pack update stays on the device.

Everything else (several outputs, unknown targets, categorical features,
quantile leaves, custom objectives, row shards) takes the host's path.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class DeviceGradients:
    """``begin_pack``'s gradients when the device computes them: nothing of
    the round is on the host (its scales come back with the first node sums)."""


DEVICE_GRADIENTS = DeviceGradients()


def device_objective(objective) -> tuple[str, float] | None:
    """``(name, parameter)`` of an objective whose gradients the device
    computes (cuda/round.cu), or None."""
    from packboost.objectives import Huber, SquaredError

    if objective is SquaredError or isinstance(objective, SquaredError):
        return "squared_error", 0.0
    if isinstance(objective, Huber):
        return "huber", float(objective.alpha)
    return None


def gradient_multiplier(scaling) -> float | None:
    """``2**-gradient_exponent`` of a :class:`~packboost._fixed_point.GradientScaling`
    as a normal float64 (then ``g * m`` is ``ldexp(g, -exponent)`` exactly), or None."""
    exponent = -scaling.gradient_exponent
    if not -1022 <= exponent <= 1023:
        return None
    return math.ldexp(1.0, exponent)


def kept_before(era_keep: np.ndarray, era_offsets: np.ndarray) -> np.ndarray:
    """(pack_size, n_eras) int64: the rows of each tree's kept eras before each
    era, where its row flags (TreeSamples.row_keep) of that era begin."""
    sizes = np.diff(np.asarray(era_offsets, dtype=np.int64))
    kept = np.asarray(era_keep, dtype=np.int64) * sizes
    return np.ascontiguousarray(np.cumsum(kept, axis=1) - kept)
