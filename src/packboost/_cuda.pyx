# cython: language_level=3
"""Python face of the CUDA backend, libpackboost_cuda.so (csrc/packboost_cuda.h).

# Notes:
Built only when Meson finds nvcc (``-Dcuda=auto|enabled``); it links the
library with an ``$ORIGIN`` rpath, both installed in the package directory.
Importing it never touches the GPU: every CUDA error surfaces at a call, as a
``packboost._device.CudaError`` carrying CUDA's own message and code.

``CudaContext`` holds a fit's device state and exposes one method per kernel
step of a depth (the contract :class:`packboost.backends.cuda.CudaBackend`
drives, and that the test oracle ``tests/oracles/host_kernels.py`` implements
on the host).
"""

import numpy as np

from libc.stdint cimport uint8_t, uint16_t, int8_t, int32_t, int64_t

from packboost._device import CudaError
from packboost._split_params cimport make_split_params, pb_split_params


cdef extern from "packboost_cuda.h" nogil:
    ctypedef struct pbc_context:
        pass
    int PBC_N_TIMERS
    int PBC_MAX_PACK_SIZE
    int PBC_DTYPE_FLOAT64
    int PBC_DTYPE_FLOAT32
    int PBC_DTYPE_INT8
    int PBC_DTYPE_UINT8
    const char *pbc_error_string(int code)
    int pbc_api_version()
    const char *pbc_build_arch()
    int pbc_runtime_version(int *version)
    int pbc_driver_version(int *version)
    int pbc_device_count(int *count)
    int pbc_device_name(int device, char *name, int length)
    int pbc_device_memory(int device, int64_t *free_bytes, int64_t *total_bytes)
    int pbc_context_create(int device, const void *X_binned, int bytes_per_bin,
                           int64_t n_features, int64_t n_rows, const int32_t *n_bins,
                           const int32_t *row_era, int32_t n_eras, int32_t pack_size,
                           int64_t histogram_budget_bytes, pbc_context **context)
    int pbc_context_destroy(pbc_context *context)
    int pbc_set_timing(pbc_context *context, int enabled)
    int pbc_read_timers(pbc_context *context, double *times, int reset)
    int pbc_begin_round(pbc_context *context, const double *gradients, const double *hessians,
                        const int32_t *const *tree_rows, const int64_t *tree_n_rows,
                        double scale_gradients, double scale_hessians,
                        double scale_gradients_squared)
    int PBC_OBJECTIVE_SQUARED_ERROR
    int PBC_OBJECTIVE_HUBER
    int PBC_ERROR_GRADIENTS_NOT_FINITE
    int PBC_ERROR_GRADIENTS_TOO_SMALL
    int pbc_device_round_setup(pbc_context *context, int objective, double parameter,
                               const double *y, const double *sample_weight,
                               const double *raw_prediction, const double *hessians,
                               double gradient_multiplier, double scale_hessians,
                               int32_t count_bits, int32_t squared_bound_bits)
    int pbc_device_round_gradients(pbc_context *context)
    int pbc_round_scales(pbc_context *context, double *scales)
    int pbc_read_fixed_gradients(pbc_context *context, int64_t *gradients, int64_t *hessians,
                                 int64_t *gradients_squared)
    int pbc_read_predictions(pbc_context *context, int64_t first, int64_t stride,
                             int64_t n_out, double *out)
    int pbc_start_samples(pbc_context *context, const uint8_t *era_keep,
                          const int64_t *kept_before, const uint8_t *const *row_keep,
                          const int64_t *row_keep_length)
    int pbc_slot_sums(pbc_context *context, int32_t n_slots, int64_t *sum_gradients,
                      int64_t *sum_hessians, int64_t *count, int64_t *sum_gradients_squared)
    int pbc_find_splits(pbc_context *context, int32_t n_slots, const int32_t *slot_tree,
                        const uint8_t *slot_open, int32_t n_candidates,
                        const int32_t *features, const uint8_t *tree_uses_feature,
                        const double *slot_gradient_variance,
                        const pb_split_params *params, int32_t *best_column,
                        double *best_score, double *best_gain, int32_t *best_threshold,
                        uint8_t *best_missing_left)
    int pbc_route_rows(pbc_context *context, int32_t n_slots, const int32_t *split_feature,
                       const int32_t *split_threshold, const uint8_t *split_missing_left,
                       const int32_t *left_child_slot, const int32_t *slot_node)
    int pbc_add_leaf_values(pbc_context *context, int64_t n_nodes, const double *value,
                            const int64_t *tree_roots, double *out)
    int pbc_read_node_of_row(pbc_context *context, int32_t *node_of_row)
    int pbc_write_node_of_row(pbc_context *context, const int32_t *node_of_row)
    int pbc_predict_raw(int device, const void *X, int dtype, int64_t n_rows,
                        int64_t n_features, int64_t n_nodes, const int32_t *feature,
                        const double *threshold, const uint8_t *missing_left,
                        const int32_t *left_child, const int32_t *right_child,
                        const double *value, int64_t n_trees, const int64_t *tree_roots,
                        int64_t n_outputs, const int64_t *output_tree_starts, double *out)
    ctypedef struct pbc_rows:
        pass
    int pbc_rows_create(int device, const void *X, int dtype, int64_t n_rows,
                        int64_t n_features, pbc_rows **rows)
    int pbc_rows_predict(pbc_rows *rows, int64_t n_nodes, const int32_t *feature,
                         const double *threshold, const uint8_t *missing_left,
                         const int32_t *left_child, const int32_t *right_child,
                         const double *value, int64_t n_trees, const int64_t *tree_roots,
                         int64_t n_outputs, const int64_t *output_tree_starts, double *out)
    int pbc_rows_destroy(pbc_rows *rows)

# Names of the kernel timers, in the order of PBC_TIMER_* (packboost_cuda.h).
TIMER_NAMES = ("init", "slot_sums", "histogram", "score", "select", "route", "predict",
               "transfer", "gradients")
# The objectives whose gradients the device computes (pbc_device_round_setup).
DEVICE_OBJECTIVES = {"squared_error": PBC_OBJECTIVE_SQUARED_ERROR, "huber": PBC_OBJECTIVE_HUBER}
MAX_PACK_SIZE = PBC_MAX_PACK_SIZE


def error_string(int code):
    """CUDA's message for a cudaError_t (> 0) or the library's for its own codes (< 0)."""
    return pbc_error_string(code).decode("utf-8", "replace")


cdef int check(int code, str what) except -1:
    if code != 0:
        raise CudaError(f"{what} failed: CUDA error {code}: {error_string(code)}", code)
    return 0


def api_version():
    return pbc_api_version()


def build_arch():
    """nvcc architecture flags the library was compiled with."""
    return pbc_build_arch().decode()


def runtime_version():
    cdef int version = 0
    check(pbc_runtime_version(&version), "cudaRuntimeGetVersion")
    return version


def driver_version():
    """The driver's CUDA version (0 when no driver is installed)."""
    cdef int version = 0
    check(pbc_driver_version(&version), "cudaDriverGetVersion")
    return version


def device_count():
    """Number of CUDA devices; raises CudaError where no driver or GPU is usable."""
    cdef int count = 0
    check(pbc_device_count(&count), "cudaGetDeviceCount")
    return count


def device_name(int device=0):
    cdef char name[256]
    check(pbc_device_name(device, name, 256), "cudaGetDeviceProperties")
    return name.decode("utf-8", "replace")


def device_memory(int device=0):
    """(free, total) bytes of GPU ``device``'s memory now (cudaMemGetInfo)."""
    cdef int64_t free_bytes = 0, total_bytes = 0
    check(pbc_device_memory(device, &free_bytes, &total_bytes), "cudaMemGetInfo")
    return int(free_bytes), int(total_bytes)




cdef class CudaContext:
    """A fit's device state: binned data, era tiles, round and depth buffers."""

    cdef pbc_context *context
    cdef readonly Py_ssize_t n_rows
    cdef readonly Py_ssize_t n_features
    cdef readonly int pack_size

    def __cinit__(self, X_binned, n_bins, row_era, int n_eras, int pack_size,
                  int device=0, long long histogram_budget_bytes=1 << 30):
        self.context = NULL
        X_binned = np.ascontiguousarray(X_binned)
        if X_binned.ndim != 2 or X_binned.dtype not in (np.uint8, np.uint16):
            raise ValueError("X_binned must be a 2-D uint8 or uint16 array "
                             "(n_features, n_rows)")
        cdef const int32_t[::1] bins_view = np.ascontiguousarray(n_bins, dtype=np.int32)
        cdef const int32_t[::1] era_view = np.ascontiguousarray(row_era, dtype=np.int32)
        cdef const uint8_t[:, ::1] x8
        cdef const uint16_t[:, ::1] x16
        cdef const void *data
        cdef int bytes_per_bin
        self.n_features, self.n_rows = X_binned.shape
        self.pack_size = pack_size
        if bins_view.shape[0] != self.n_features or era_view.shape[0] != self.n_rows:
            raise ValueError("n_bins and row_era must match X_binned's shape")
        if X_binned.dtype == np.uint8:
            x8 = X_binned
            data = &x8[0, 0]
            bytes_per_bin = 1
        else:
            x16 = X_binned
            data = &x16[0, 0]
            bytes_per_bin = 2
        check(pbc_context_create(device, data, bytes_per_bin, self.n_features, self.n_rows,
                                 &bins_view[0], &era_view[0], n_eras, pack_size,
                                 histogram_budget_bytes, &self.context),
              "creating the CUDA training context")

    def __dealloc__(self):
        if self.context != NULL:
            pbc_context_destroy(self.context)
            self.context = NULL

    def close(self):
        """Free the device memory now (also done when the object is collected)."""
        if self.context != NULL:
            pbc_context_destroy(self.context)
            self.context = NULL

    cdef pbc_context *live(self) except NULL:
        if self.context == NULL:
            raise ValueError("this CudaContext is closed")
        return self.context

    def set_timing(self, bint enabled):
        """Time every kernel with CUDA events (synchronises after each)."""
        check(pbc_set_timing(self.live(), enabled), "pbc_set_timing")

    def read_timers(self, bint reset=True):
        """Milliseconds per kernel kind since the last reset, by TIMER_NAMES."""
        times = np.zeros(PBC_N_TIMERS)
        cdef double[::1] view = times
        check(pbc_read_timers(self.live(), &view[0], reset), "pbc_read_timers")
        return dict(zip(TIMER_NAMES, times.tolist(), strict=True))

    def begin_round(self, const double[::1] gradients, const double[::1] hessians,
                    list tree_samples, double scale_gradients, double scale_hessians,
                    double scale_gradients_squared):
        """Upload a round: g, h (quantised on the device with the given power-of-two
        scales, g * g too) and each tree's sample (int32 rows, distinct, in range);
        ``tree_samples`` None: the samples follow (start_samples)."""
        cdef pbc_context *context = self.live()
        cdef int code
        if gradients.shape[0] != self.n_rows or hessians.shape[0] != self.n_rows:
            raise ValueError("round inputs do not match the context's shape")
        if tree_samples is None:
            with nogil:
                code = pbc_begin_round(context, &gradients[0], &hessians[0], NULL, NULL,
                                       scale_gradients, scale_hessians,
                                       scale_gradients_squared)
            check(code, "starting a round on the GPU")
            return
        if len(tree_samples) != self.pack_size:
            raise ValueError("round inputs do not match the context's shape")
        samples = [np.ascontiguousarray(rows, dtype=np.int32) for rows in tree_samples]
        pointers = np.zeros(self.pack_size, dtype=np.uintp)
        counts = np.array([len(rows) for rows in samples], dtype=np.int64)
        cdef const int32_t[::1] rows_view
        cdef Py_ssize_t tree
        for tree in range(self.pack_size):
            if counts[tree]:
                rows_view = samples[tree]
                pointers[tree] = <size_t>&rows_view[0]
        cdef const size_t[::1] pointer_view = pointers
        cdef const int64_t[::1] count_view = counts
        with nogil:
            code = pbc_begin_round(context, &gradients[0], &hessians[0],
                                   <const int32_t *const *>&pointer_view[0], &count_view[0],
                                   scale_gradients, scale_hessians, scale_gradients_squared)
        check(code, "starting a round on the GPU")

    def start_samples(self, era_keep, kept_before, list row_keep):
        """Every row to its tree's root from flags (pbc_start_samples):
        ``era_keep`` (pack_size, n_eras) uint8, ``kept_before`` (pack_size,
        n_eras) int64 (each era's first byte among the tree's kept rows),
        ``row_keep`` per tree None or one bool/uint8 per row of its kept eras."""
        cdef const uint8_t[:, ::1] keep_view = np.ascontiguousarray(era_keep, dtype=np.uint8)
        cdef const int64_t[:, ::1] before_view = np.ascontiguousarray(kept_before,
                                                                      dtype=np.int64)
        if (keep_view.shape[0] != self.pack_size or before_view.shape[0] != self.pack_size
                or before_view.shape[1] != keep_view.shape[1] or len(row_keep) != self.pack_size):
            raise ValueError("start_samples inputs do not match the context's shape")
        rows = [None if keep is None else np.ascontiguousarray(keep).view(np.uint8)
                if np.asarray(keep).dtype == np.bool_ else
                np.ascontiguousarray(keep, dtype=np.uint8) for keep in row_keep]
        pointers = np.zeros(self.pack_size, dtype=np.uintp)
        lengths = np.zeros(self.pack_size, dtype=np.int64)
        cdef const uint8_t[::1] rows_view
        cdef Py_ssize_t tree
        for tree in range(self.pack_size):
            if rows[tree] is not None:
                lengths[tree] = len(rows[tree])
                if lengths[tree]:
                    rows_view = rows[tree]
                    pointers[tree] = <size_t>&rows_view[0]
                else:  # an empty sample of rows: any valid pointer, nothing is read
                    pointers[tree] = <size_t>&keep_view[0, 0]
        cdef const size_t[::1] pointer_view = pointers
        cdef const int64_t[::1] length_view = lengths
        cdef pbc_context *context = self.live()
        cdef int code
        with nogil:
            code = pbc_start_samples(context, &keep_view[0, 0], &before_view[0, 0],
                                     <const uint8_t *const *>&pointer_view[0],
                                     &length_view[0])
        check(code, "starting the trees' samples on the GPU")

    def setup_device_round(self, str objective, double parameter, const double[::1] y,
                           sample_weight, const double[::1] raw_prediction,
                           const double[::1] hessians, double gradient_multiplier,
                           double scale_hessians, int count_bits, int squared_bound_bits):
        """Keep y, the weights (or None) and the raw predictions on the device
        for the whole fit, and the fit's hessians quantised once (pbc_device_round_setup)."""
        if (y.shape[0] != self.n_rows or raw_prediction.shape[0] != self.n_rows
                or hessians.shape[0] != self.n_rows):
            raise ValueError("y, raw_prediction and hessians must have one entry per row")
        if objective not in DEVICE_OBJECTIVES:
            raise ValueError(f"objective must be one of {sorted(DEVICE_OBJECTIVES)}, "
                             f"got {objective!r}")
        cdef const double[::1] weight_view
        cdef const double *weights = NULL
        if sample_weight is not None:
            weight_view = np.ascontiguousarray(sample_weight, dtype=np.float64)
            if weight_view.shape[0] != self.n_rows:
                raise ValueError("sample_weight must have one entry per row")
            weights = &weight_view[0]
        cdef int code_objective = DEVICE_OBJECTIVES[objective]
        cdef pbc_context *context = self.live()
        cdef int code
        with nogil:
            code = pbc_device_round_setup(context, code_objective, parameter, &y[0], weights,
                                          &raw_prediction[0], &hessians[0],
                                          gradient_multiplier, scale_hessians, count_bits,
                                          squared_bound_bits)
        check(code, "keeping the fit's targets on the GPU")

    def device_gradients(self):
        """Queue the round's gradients, grid and quantisation on the device."""
        check(pbc_device_round_gradients(self.live()), "the round's gradients on the GPU")

    def round_scales(self):
        """(gradient, hessian, squared-gradient) scales of the round started on
        the device; FloatingPointError where its gradients are not finite or too
        small for the grid (as the host's to_fixed_point)."""
        scales = np.zeros(3)
        cdef double[::1] view = scales
        cdef int code = pbc_round_scales(self.live(), &view[0])
        if code == PBC_ERROR_GRADIENTS_NOT_FINITE:
            raise FloatingPointError("gradients or hessians are not finite")
        if code == PBC_ERROR_GRADIENTS_TOO_SMALL:
            raise FloatingPointError(
                "gradients or hessians too small for the fixed-point grid (the grid "
                "needs a scale beyond float64): rescale them by a power of two first "
                "(GradientScaling)")
        check(code, "reading the round's scales from the GPU")
        return tuple(scales.tolist())

    def read_fixed_gradients(self):
        """The round's fixed-point (g, h, g * g), int64 (n_rows,) each."""
        arrays = [np.empty(self.n_rows, dtype=np.int64) for _ in range(3)]
        cdef int64_t[::1] g = arrays[0], h = arrays[1], g2 = arrays[2]
        cdef pbc_context *context = self.live()
        cdef int code
        with nogil:
            code = pbc_read_fixed_gradients(context, &g[0], &h[0], &g2[0])
        check(code, "reading the round's gradients from the GPU")
        return tuple(arrays)

    def read_predictions(self, Py_ssize_t first=0, Py_ssize_t stride=1):
        """The device's raw predictions of rows first, first + stride, ..."""
        if stride < 1 or first < 0:
            raise ValueError("stride must be >= 1 and first >= 0")
        cdef Py_ssize_t n_out = max(0, (self.n_rows - first + stride - 1) // stride)
        out = np.empty(n_out)
        cdef double[::1] view = out
        cdef pbc_context *context = self.live()
        cdef int code = 0
        if n_out:
            with nogil:
                code = pbc_read_predictions(context, first, stride, n_out, &view[0])
        check(code, "reading the predictions from the GPU")
        return out

    def slot_sums(self, int n_slots):
        """Exact fixed-point sums of g, h, row counts and fixed-point sums of g * g
        of slots 0 .. n_slots-1."""
        sum_g = np.zeros(n_slots, dtype=np.int64)
        sum_h = np.zeros(n_slots, dtype=np.int64)
        count = np.zeros(n_slots, dtype=np.int64)
        sum_g2 = np.zeros(n_slots, dtype=np.int64)
        cdef int64_t[::1] g_view = sum_g, h_view = sum_h, c_view = count, g2_view = sum_g2
        cdef pbc_context *context = self.live()
        cdef int code
        if n_slots < 1:
            return sum_g, sum_h, count, sum_g2
        with nogil:
            code = pbc_slot_sums(context, n_slots, &g_view[0], &h_view[0], &c_view[0],
                                 &g2_view[0])
        check(code, "node sums on the GPU")
        return sum_g, sum_h, count, sum_g2

    def find_splits(self, const int32_t[::1] slot_tree, const uint8_t[::1] slot_open,
                    const int32_t[::1] features, const uint8_t[:, ::1] tree_uses_feature,
                    const double[::1] slot_gradient_variance, dict params):
        """Best DES split per slot: dict of (n_slots,) arrays ``column`` (-1: none),
        ``score``, ``gain``, ``threshold``, ``missing_left``."""
        cdef Py_ssize_t n_slots = slot_tree.shape[0], n_candidates = features.shape[0]
        if (slot_open.shape[0] != n_slots or tree_uses_feature.shape[0] != n_candidates
                or tree_uses_feature.shape[1] != self.pack_size
                or slot_gradient_variance.shape[0] != n_slots):
            raise ValueError("find_splits inputs do not match")
        column = np.full(n_slots, -1, dtype=np.int32)
        score = np.full(n_slots, -np.inf)
        gain = np.zeros(n_slots)
        threshold = np.zeros(n_slots, dtype=np.int32)
        missing_left = np.zeros(n_slots, dtype=np.uint8)
        result = dict(column=column, score=score, gain=gain, threshold=threshold,
                      missing_left=missing_left)
        if n_slots == 0 or n_candidates == 0:
            return result
        cdef int32_t[::1] column_view = column, threshold_view = threshold
        cdef double[::1] score_view = score, gain_view = gain
        cdef uint8_t[::1] missing_view = missing_left
        cdef pb_split_params c_params = make_split_params(params)
        cdef pbc_context *context = self.live()
        cdef int code
        with nogil:
            code = pbc_find_splits(context, <int32_t>n_slots, &slot_tree[0], &slot_open[0],
                                   <int32_t>n_candidates, &features[0],
                                   &tree_uses_feature[0, 0], &slot_gradient_variance[0],
                                   &c_params, &column_view[0],
                                   &score_view[0], &gain_view[0], &threshold_view[0],
                                   &missing_view[0])
        check(code, "split finding on the GPU")
        return result

    def route_rows(self, const int32_t[::1] split_feature, const int32_t[::1] split_threshold,
                   const uint8_t[::1] split_missing_left, const int32_t[::1] left_child_slot,
                   const int32_t[::1] slot_node):
        """Rows to their child slots; rows of slots that do not split record
        ``slot_node`` as their leaf (pbc_route_rows)."""
        cdef Py_ssize_t n_slots = split_feature.shape[0]
        if (split_threshold.shape[0] != n_slots or split_missing_left.shape[0] != n_slots
                or left_child_slot.shape[0] != n_slots or slot_node.shape[0] != n_slots):
            raise ValueError("route_rows inputs do not match")
        if n_slots == 0:
            return
        cdef pbc_context *context = self.live()
        cdef int code
        with nogil:
            code = pbc_route_rows(context, <int32_t>n_slots, &split_feature[0],
                                  &split_threshold[0], &split_missing_left[0],
                                  &left_child_slot[0], &slot_node[0])
        check(code, "routing rows on the GPU")

    def add_leaf_values(self, const double[::1] value, const int64_t[::1] tree_roots,
                        double[::1] out):
        """out += each training row's recorded leaf values, trees in order; out
        None: the device's raw predictions (setup_device_round), in place."""
        if out is not None and out.shape[0] != self.n_rows:
            raise ValueError("out must have one entry per training row")
        if tree_roots.shape[0] != self.pack_size:
            raise ValueError(f"tree_roots must have {self.pack_size} entries")
        if value.shape[0] == 0 or self.n_rows == 0:
            return
        cdef pbc_context *context = self.live()
        cdef int code
        cdef double *target = NULL if out is None else &out[0]
        with nogil:
            code = pbc_add_leaf_values(context, value.shape[0], &value[0], &tree_roots[0],
                                       target)
        check(code, "the pack update on the GPU")

    def read_node_of_row(self):
        """(n_rows, pack_size) int32: every row's slot code, from the device."""
        out = np.empty((self.n_rows, self.pack_size), dtype=np.int32)
        cdef int32_t[:, ::1] view = out
        cdef pbc_context *context = self.live()
        cdef int code = 0
        if self.n_rows:
            with nogil:
                code = pbc_read_node_of_row(context, &view[0, 0])
        check(code, "reading the rows' slots from the GPU")
        return out

    def write_node_of_row(self, const int32_t[:, ::1] node_of_row):
        """Replace the device's slot codes of every row (n_rows, pack_size)."""
        if node_of_row.shape[0] != self.n_rows or node_of_row.shape[1] != self.pack_size:
            raise ValueError(f"node_of_row must be ({self.n_rows}, {self.pack_size})")
        cdef pbc_context *context = self.live()
        cdef int code = 0
        if self.n_rows:
            with nogil:
                code = pbc_write_node_of_row(context, &node_of_row[0, 0])
        check(code, "writing the rows' slots to the GPU")


_RAW_DTYPES = {np.dtype(np.float64): PBC_DTYPE_FLOAT64, np.dtype(np.float32): PBC_DTYPE_FLOAT32,
               np.dtype(np.int8): PBC_DTYPE_INT8, np.dtype(np.uint8): PBC_DTYPE_UINT8}


def _raw_rows(X):
    """X as pbc_predict_raw takes it: C-contiguous, 2-D, a supported dtype."""
    X = np.ascontiguousarray(X)
    if X.ndim != 2 or X.dtype not in _RAW_DTYPES:
        raise ValueError("X must be a 2-D float64, float32, int8 or uint8 array")
    return X


def _tree_starts(Py_ssize_t n_trees, Py_ssize_t n_rows, out, output_tree_starts):
    """The trees' grouping by output (one output: None), checked with ``out``."""
    starts = (np.array([0, n_trees], dtype=np.int64) if output_tree_starts is None
              else np.ascontiguousarray(output_tree_starts, dtype=np.int64))
    cdef Py_ssize_t n_outputs = starts.shape[0] - 1
    if (starts.ndim != 1 or n_outputs < 1 or starts[0] != 0 or starts[n_outputs] != n_trees
            or np.any(np.diff(starts) < 0)):
        raise ValueError(f"output_tree_starts must be non-decreasing from 0 to {n_trees}")
    expected = ((int(n_rows),) if output_tree_starts is None
                else (int(n_rows), int(n_outputs)))
    if not isinstance(out, np.ndarray) or out.shape != expected or out.dtype != np.float64 \
            or not out.flags.c_contiguous:
        raise ValueError(f"out must be a C-contiguous float64 array of shape {expected} "
                         "(one entry per row of X and output)")
    return starts


def predict_raw(X, const int32_t[::1] feature, const double[::1] threshold,
                const uint8_t[::1] missing_left, const int32_t[::1] left_child,
                const int32_t[::1] right_child, const double[::1] value,
                const int64_t[::1] tree_roots, out, int device=0, output_tree_starts=None):
    """out += the trees on raw rows X (C-contiguous float64/float32/int8/uint8),
    X copied to the device once.

    ``output_tree_starts`` None: one output, ``out`` (n_rows,). Else (n_outputs
    + 1,) int64 from 0 to len(tree_roots): the trees grouped by output, output
    o's being ``tree_roots[starts[o]:starts[o + 1]]``, and ``out`` (n_rows,
    n_outputs) C-contiguous; each output's trees are summed as a call with
    its trees alone sums them."""
    X = _raw_rows(X)
    cdef Py_ssize_t n_trees = tree_roots.shape[0]
    cdef const int64_t[::1] starts_view = _tree_starts(n_trees, X.shape[0], out,
                                                       output_tree_starts)
    cdef double[::1] out_view = out.reshape(-1)
    cdef int dtype = _RAW_DTYPES[X.dtype]
    cdef Py_ssize_t n_rows = X.shape[0], n_features = X.shape[1]
    cdef Py_ssize_t n_outputs = starts_view.shape[0] - 1
    if n_rows == 0 or n_trees == 0 or feature.shape[0] == 0:
        return
    cdef const uint8_t[::1] raw = X.reshape(-1).view(np.uint8)
    cdef int code
    with nogil:
        code = pbc_predict_raw(device, &raw[0], dtype, n_rows, n_features, feature.shape[0],
                               &feature[0], &threshold[0], &missing_left[0], &left_child[0],
                               &right_child[0], &value[0], n_trees, &tree_roots[0],
                               n_outputs, &starts_view[0], &out_view[0])
    check(code, "prediction on the GPU")


cdef class DeviceRows:
    """Raw rows kept on GPU ``device`` for repeated prediction (a fit's eval
    set: each round's pack walks them, only the trees sent): ``predict`` is
    :func:`predict_raw` without copying X again."""

    cdef pbc_rows *rows
    cdef readonly Py_ssize_t n_rows

    def __cinit__(self, X, int device=0):
        self.rows = NULL
        X = _raw_rows(X)
        self.n_rows = X.shape[0]
        cdef const uint8_t[::1] raw = X.reshape(-1).view(np.uint8)
        cdef const void *data = &raw[0] if raw.shape[0] > 0 else NULL
        check(pbc_rows_create(device, data, _RAW_DTYPES[X.dtype], X.shape[0],
                              max(X.shape[1], 1), &self.rows),
              "copying rows to the GPU")

    def __dealloc__(self):
        self.close()

    def close(self):
        """Free the device copy now (also done when the object is collected)."""
        if self.rows != NULL:
            pbc_rows_destroy(self.rows)
            self.rows = NULL

    def predict(self, const int32_t[::1] feature, const double[::1] threshold,
                const uint8_t[::1] missing_left, const int32_t[::1] left_child,
                const int32_t[::1] right_child, const double[::1] value,
                const int64_t[::1] tree_roots, out, output_tree_starts=None):
        """out += the trees on the kept rows, as :func:`predict_raw`."""
        if self.rows == NULL:
            raise ValueError("these device rows are closed")
        cdef Py_ssize_t n_trees = tree_roots.shape[0]
        cdef const int64_t[::1] starts_view = _tree_starts(n_trees, self.n_rows, out,
                                                           output_tree_starts)
        cdef double[::1] out_view = out.reshape(-1)
        cdef Py_ssize_t n_outputs = starts_view.shape[0] - 1
        if self.n_rows == 0 or n_trees == 0 or feature.shape[0] == 0:
            return
        cdef int code
        with nogil:
            code = pbc_rows_predict(self.rows, feature.shape[0], &feature[0], &threshold[0],
                                    &missing_left[0], &left_child[0], &right_child[0],
                                    &value[0], n_trees, &tree_roots[0], n_outputs,
                                    &starts_view[0], &out_view[0])
        check(code, "prediction on the GPU")
