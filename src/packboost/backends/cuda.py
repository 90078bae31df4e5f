"""The CUDA backend: libpackboost_cuda.so on a GPU (docs/cuda-kernels.md).

The binned matrix, the round's gradients, ``node_of_row`` and every row's
leaf stay on the device for the whole fit; per depth the driver sends the
depth's feature subset and receives one best split per slot (a few small
arrays), so there is no host round trip per node or per row.

``kernels`` is :class:`packboost._cuda.CudaContext` (one method per device
step); the test oracle ``tests/oracles/host_kernels.py`` implements the same
methods on the host, so this class is tested without a GPU too.
"""

from __future__ import annotations

import numpy as np

from packboost import _constraints, _memory
from packboost._device_round import (
    DeviceGradients,
    device_objective,
    gradient_multiplier,
    kept_before,
)
from packboost._fixed_point import squared_sum_bound_bits, to_fixed_point
from packboost._samples import TreeSamples
from packboost.backends.interface import BestSplits, SlotSums


class CudaBackend:
    """:class:`packboost.backends.interface.Backend` over device kernels.

    With ``timings`` (a list), each pack appends a list with one dict of
    kernel times (ms) per depth; the pack update is added to its last depth.
    """

    # The driver may hand the round's gradients to the device (start_device_rounds).
    computes_round_gradients = True

    def __init__(self, kernels, timings: list | None = None, *, data=None, n_threads: int = 1):
        self.kernels = kernels
        self.timings = timings
        self.inverse_scales = (1.0, 1.0, 1.0)
        # The round's gradients are on the device (start_device_rounds): its
        # scales come back with the first node sums; None until then.
        self.device_rounds = False
        # Device memory checks (docs/cuda-kernels.md §11): free_memory() -> bytes
        # free on the GPU (None: no check), the histogram cells of a (candidate,
        # slot) as (n_eras, max_width), the context's budget, the depth in the pack.
        self.free_memory = None
        self.histogram_shape = (0, 0)
        self.histogram_budget_bytes = 1 << 30
        self._depth = 0
        self._histogram_held = 0
        # The training data and the round's gradients on the host: category
        # splits are summed and scored there (find_category_splits).
        self.data = data
        self.n_threads = n_threads
        self.fixed = None
        # The GPU of on_gpu (keep_rows); None over host kernels.
        self.device = None

    @classmethod
    def on_gpu(cls, data, pack_size: int, device: int = 0, timings: list | None = None,
               histogram_budget_bytes: int = 1 << 30, n_threads: int = 1):
        """The backend on GPU ``device``; ``histogram_budget_bytes`` caps a depth's
        device histograms (candidate features are taken in chunks under it)."""
        from packboost._cuda import CudaContext, device_memory

        free, _ = device_memory(device)
        _memory.check_device_context(_memory.device_context_bytes(
            n_rows=data.X_binned.shape[1], n_features=data.X_binned.shape[0],
            bytes_per_bin=data.X_binned.itemsize, pack_size=pack_size, n_eras=data.n_eras),
            free, pack_size=pack_size, n_rows=data.X_binned.shape[1])
        kernels = CudaContext(data.X_binned, data.n_bins, data.row_era, data.n_eras,
                              pack_size, device, histogram_budget_bytes)
        if timings is not None:
            kernels.set_timing(True)
        backend = cls(kernels, timings, data=data, n_threads=n_threads)
        backend.device = device
        backend.free_memory = lambda: device_memory(device)[0]
        backend.histogram_shape = (data.n_eras, int(np.max(data.n_bins, initial=0)) + 1)
        backend.histogram_budget_bytes = histogram_budget_bytes
        return backend

    def close(self) -> None:
        self.kernels.close()

    def keep_rows(self, X):
        """An eval set's rows kept on the GPU for the fit (:class:`KeptRows`),
        or None where they stay on the host (which then predicts them each
        round, as the CPU fit does): host kernels, or rows that would take
        more than a quarter of the GPU's free memory (the depths' histograms
        need the rest, docs/cuda-kernels.md §11)."""
        if self.device is None:
            return None
        from packboost._device import CudaError

        rows_bytes = X.shape[0] * X.shape[1] * (X.dtype.itemsize if X.dtype in _RAW_DTYPES else 8)
        free = self.free_memory() if self.free_memory is not None else None
        if free is not None and rows_bytes > free // 4:
            return None
        try:
            return KeptRows(X, self.device)
        except CudaError:
            return None

    def start_device_rounds(self, objective, y, sample_weight, raw_prediction, scaling,
                            data) -> bool:
        """Compute every round's gradients on the device from here on
        (packboost/_device_round.py, docs/cuda-kernels.md §4.1): keeps ``y``,
        the weights and ``raw_prediction`` (the training rows' raw scores) on
        the device. False (nothing done) where the device does not implement
        the objective or the fit's rescaling; the driver then computes them."""
        spec = device_objective(objective)
        multiplier = gradient_multiplier(scaling)
        if spec is None or multiplier is None or not hasattr(self.kernels, "device_gradients"):
            return False
        y = np.ascontiguousarray(y, dtype=np.float64)
        raw_prediction = np.ascontiguousarray(raw_prediction, dtype=np.float64)
        weight = None if sample_weight is None else np.ascontiguousarray(sample_weight,
                                                                         dtype=np.float64)
        # The fit's hessians (the same every round for these objectives),
        # rescaled, and their grid: to_fixed_point's, which does not depend
        # on the gradients.
        gradients, hessians = np.empty_like(y), np.empty_like(y)
        objective.gradients(y, raw_prediction, weight, gradients, hessians)
        scaling.apply(gradients, hessians)
        fixed = to_fixed_point(np.zeros_like(hessians), hessians, data.era_offsets,
                               self.n_threads)
        self.kernels.setup_device_round(spec[0], spec[1], y, weight, raw_prediction, hessians,
                                        multiplier, fixed.hessian_scale, fixed.count_bits,
                                        squared_sum_bound_bits(len(y)))
        self.device_rounds = True
        return True

    def read_predictions(self, stride: int = 1) -> np.ndarray:
        """Every ``stride``-th training row's raw score, from the device
        (after start_device_rounds)."""
        return self.kernels.read_predictions(0, stride)

    def begin_pack(self, fixed, tree_samples: list) -> None:
        self.fixed = fixed
        flags = isinstance(tree_samples, TreeSamples)
        if isinstance(fixed, DeviceGradients):
            # Queued on the device; its scales arrive with the first slot sums.
            self.kernels.device_gradients()
            self.fixed = None
            self.inverse_scales = None
        else:
            # The values are on the fixed-point grid already: the device's
            # x * scale is an exact integer, so its sums are the CPU's.
            scale_g2 = fixed.squared_scale
            self.kernels.begin_round(fixed.gradients, fixed.hessians,
                                     None if flags else list(tree_samples),
                                     fixed.gradient_scale, fixed.hessian_scale, scale_g2)
            # Powers of two: x / scale is the device's x * (1 / scale), exactly.
            self.inverse_scales = (1.0 / fixed.gradient_scale, 1.0 / fixed.hessian_scale,
                                   1.0 / scale_g2)
        if flags:
            # Flags, not row lists: one byte per (tree, era), and per row only
            # with a row subsample (docs/cuda-kernels.md §4.2).
            self.kernels.start_samples(tree_samples.era_keep,
                                       kept_before(tree_samples.era_keep,
                                                   tree_samples.era_offsets),
                                       tree_samples.row_keep)
        if self.timings is not None:
            self.timings.append([])
        self._depth = 0

    def slot_sums(self, n_slots: int) -> SlotSums:
        fixed_g, fixed_h, count, fixed_g2 = self.kernels.slot_sums(n_slots)
        if self.inverse_scales is None:
            # Came down with these sums (FloatingPointError for gradients the
            # grid cannot hold, as to_fixed_point raises on the host).
            scale_g, scale_h, scale_g2 = self.kernels.round_scales()
            self.inverse_scales = (1.0 / scale_g, 1.0 / scale_h, 1.0 / scale_g2)
        inverse_g, inverse_h, inverse_g2 = self.inverse_scales
        return SlotSums(fixed_g.astype(np.float64) * inverse_g,
                        fixed_h.astype(np.float64) * inverse_h, count,
                        fixed_g2.astype(np.float64) * inverse_g2)

    def find_splits(self, slot_tree, slot_open, features, tree_uses_feature, slot_variance,
                    split_params, *, keep_for_children=False, constraints=None) -> BestSplits:
        if constraints is not None:
            raise _constraints.unsupported("device='cuda'")
        # keep_for_children: the GPU kernels do not subtract histograms (yet); a hint only.
        self.check_histogram_memory(slot_tree, slot_open, tree_uses_feature)
        best = self.kernels.find_splits(np.ascontiguousarray(slot_tree, dtype=np.int32),
                                        slot_open, features, tree_uses_feature, slot_variance,
                                        split_params)
        return BestSplits(**best)

    def check_histogram_memory(self, slot_tree, slot_open, tree_uses_feature) -> None:
        """MemoryError before the kernels allocate a depth's histogram buffer
        that cannot fit (docs/cuda-kernels.md §11)."""
        n_eras, max_width = self.histogram_shape
        if self.free_memory is None or n_eras == 0:
            return
        needed, trees, slots = _memory.histogram_floor(
            slot_tree, slot_open, tree_uses_feature,
            n_eras * max_width * _memory.DEVICE_CELL_BYTES)
        # The buffer is kept between depths: only a larger one allocates.
        if needed <= max(self._histogram_held, self.histogram_budget_bytes):
            return
        _memory.check_device_histogram(
            depth=self._depth, needed_bytes=needed, trees=trees, slots=slots,
            free_bytes=self.free_memory(),
            held_bytes=max(self._histogram_held, self.histogram_budget_bytes), n_eras=n_eras,
            max_width=max_width, pack_size=np.shape(tree_uses_feature)[1])
        self._histogram_held = needed

    def find_category_splits(self, slot_tree, slot_open, features, tree_uses_feature,
                             slot_variance, params, *, constraints=None) -> dict:
        """The CPU backend's category splits: the rows' slots from the device,
        then the per-era category cells and their DES scores on the host by
        the CPU code (packboost/_categorical.pyx), from the round's gradients
        the device holds too: the CPU's sets, scores and ties, exactly."""
        from packboost.backends.cpu import category_cells, score_category_cells

        if constraints is not None:
            raise _constraints.unsupported("device='cuda'")
        hist = category_cells(self.data, self.kernels.read_node_of_row(), self.fixed,
                              slot_tree, slot_open, features, self.n_threads)
        return score_category_cells(self.data, hist, slot_tree, slot_open, features,
                                    tree_uses_feature, slot_variance, params, None,
                                    self.n_threads)

    def route_rows(self, split_feature, split_threshold, split_missing_left, left_child_slot,
                   slot_node, *, split_children=True, category_splits=None) -> None:
        # split_children is a hint this backend does not use (it always sums
        # the squared gradients).
        self.kernels.route_rows(np.ascontiguousarray(split_feature, dtype=np.int32),
                                np.ascontiguousarray(split_threshold, dtype=np.int32),
                                np.ascontiguousarray(split_missing_left, dtype=np.uint8),
                                np.ascontiguousarray(left_child_slot, dtype=np.int32),
                                np.ascontiguousarray(slot_node, dtype=np.int32))
        if category_splits is not None:
            # A set split's threshold (-1) sent its non-missing rows right;
            # the rows whose category is in its set move left, on the host.
            from packboost import _categorical

            node_of_row = self.kernels.read_node_of_row()
            _categorical.move_left_by_category(self.data.X_binned, node_of_row,
                                               category_splits["child_feature"],
                                               category_splits["child_left_set"],
                                               self.n_threads)
            self.kernels.write_node_of_row(node_of_row)
        if self.timings is not None:
            self.timings[-1].append(self.kernels.read_timers(reset=True))
        self._depth += 1

    def add_pack(self, pack, raw_prediction: np.ndarray) -> None:
        """``raw_prediction += `` the pack; after start_device_rounds the
        device's copy is updated instead, in place (``raw_prediction`` is
        not read: read_predictions gives the rows' scores)."""
        self.kernels.add_leaf_values(
            np.ascontiguousarray(pack.nodes["value"], dtype=np.float64),
            np.ascontiguousarray(pack.tree_offsets[:-1], dtype=np.int64),
            None if self.device_rounds else raw_prediction)
        if self.timings is not None and self.timings[-1]:
            last_depth = self.timings[-1][-1]
            for name, value in self.kernels.read_timers(reset=True).items():
                last_depth[name] = last_depth.get(name, 0.0) + value


# Rows per GPU prediction call: bounds the device copy of X (rows x features).
PREDICT_CHUNK_BYTES = 1 << 30
_RAW_DTYPES = (np.float64, np.float32, np.int8, np.uint8)


def _device_trees(ensemble, n_rounds=None, start_round=0):
    """The selected rounds' trees as the GPU predictor takes them: the node
    arrays, the roots grouped by output, and the groups' starts (None for
    one output)."""
    n_outputs = ensemble.n_outputs
    starts = None
    if n_outputs == 1:
        roots = ensemble.tree_roots(n_rounds, start_round)
    else:
        per_output = [ensemble.tree_roots(n_rounds, start_round, output=output)
                      for output in range(n_outputs)]
        roots = np.ascontiguousarray(np.concatenate(per_output), dtype=np.int64)
        starts = np.concatenate([[0], np.cumsum([len(item) for item in per_output])]
                                ).astype(np.int64)
    nodes = ensemble.nodes
    arrays = [np.ascontiguousarray(nodes[name], dtype=dtype) for name, dtype in (
        ("feature", np.int32), ("threshold", np.float64), ("missing_left", np.uint8),
        ("left_child", np.int32), ("right_child", np.int32), ("value", np.float64))]
    return arrays, np.ascontiguousarray(roots, dtype=np.int64), starts


def _raw_dtype(X):
    """X in a dtype the GPU predictor reads: integers wider than a byte as
    float64 (which holds them exactly, |x| < 2**53)."""
    return X if X.dtype in _RAW_DTYPES else X.astype(np.float64)


def predict_raw_on_gpu(ensemble, X, n_rounds=None, start_round=0) -> np.ndarray:
    """``ensemble.predict_raw`` on the GPU: base score plus the selected rounds,
    (n_rows,) or (n_rows, n_outputs). Every output's trees walk one copy of
    each block of X on the device (its trees grouped by output, each summed
    in tree order: the numbers of a one-output model of its trees)."""
    from packboost import _cuda

    if ensemble.n_outputs == 1:
        out = np.full(X.shape[0], ensemble.base_score, dtype=np.float64)
    else:
        out = np.repeat(np.asarray(ensemble.base_scores, dtype=np.float64)[np.newaxis, :],
                        X.shape[0], axis=0)
    arrays, roots, starts = _device_trees(ensemble, n_rounds, start_round)
    if X.shape[0] == 0 or len(roots) == 0:
        return out
    X = _raw_dtype(X)
    row_bytes = max(1, X.shape[1] * X.dtype.itemsize)
    step = max(1, PREDICT_CHUNK_BYTES // row_bytes)
    for start in range(0, X.shape[0], step):
        stop = min(start + step, X.shape[0])
        block = np.ascontiguousarray(X[start:stop])
        part = out[start:stop].copy()
        _cuda.predict_raw(block, *arrays, roots, part, output_tree_starts=starts)
        out[start:stop] = part
    return out


class KeptRows:
    """An eval set's raw rows kept on the GPU for the fit
    (:meth:`CudaBackend.keep_rows`): each round's pack walks them there and
    only its trees and the rows' predictions cross."""

    def __init__(self, X, device: int = 0):
        from packboost import _cuda

        self._rows = _cuda.DeviceRows(_raw_dtype(np.asarray(X)), device)

    def add_predictions(self, ensemble, out: np.ndarray) -> None:
        """``out += ensemble.predict_raw(X)`` (base score 0): the same sums
        in the same order (the trees of each output in tree order from 0.0,
        then added to ``out``)."""
        arrays, roots, starts = _device_trees(ensemble)
        if len(roots):
            self._rows.predict(*arrays, roots, out, output_tree_starts=starts)

    def close(self) -> None:
        self._rows.close()
