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
                        double *out)

# Names of the kernel timers, in the order of PBC_TIMER_* (packboost_cuda.h).
TIMER_NAMES = ("init", "slot_sums", "histogram", "score", "select", "route", "predict",
               "transfer")
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
        scales, g * g too) and each tree's sample (int32 rows, distinct, in range)."""
        if (gradients.shape[0] != self.n_rows or hessians.shape[0] != self.n_rows
                or len(tree_samples) != self.pack_size):
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
        cdef pbc_context *context = self.live()
        cdef int code
        with nogil:
            code = pbc_begin_round(context, &gradients[0], &hessians[0],
                                   <const int32_t *const *>&pointer_view[0], &count_view[0],
                                   scale_gradients, scale_hessians, scale_gradients_squared)
        check(code, "starting a round on the GPU")

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
        """out += each training row's recorded leaf values, trees in order."""
        if out.shape[0] != self.n_rows:
            raise ValueError("out must have one entry per training row")
        if tree_roots.shape[0] != self.pack_size:
            raise ValueError(f"tree_roots must have {self.pack_size} entries")
        if value.shape[0] == 0 or self.n_rows == 0:
            return
        cdef pbc_context *context = self.live()
        cdef int code
        with nogil:
            code = pbc_add_leaf_values(context, value.shape[0], &value[0], &tree_roots[0],
                                       &out[0])
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


def predict_raw(X, const int32_t[::1] feature, const double[::1] threshold,
                const uint8_t[::1] missing_left, const int32_t[::1] left_child,
                const int32_t[::1] right_child, const double[::1] value,
                const int64_t[::1] tree_roots, double[::1] out, int device=0):
    """out += the trees on raw rows X (C-contiguous float64/float32/int8/uint8)."""
    X = np.ascontiguousarray(X)
    if X.ndim != 2 or X.dtype not in _RAW_DTYPES:
        raise ValueError("X must be a 2-D float64, float32, int8 or uint8 array")
    if out.shape[0] != X.shape[0]:
        raise ValueError("out must have one entry per row of X")
    cdef int dtype = _RAW_DTYPES[X.dtype]
    cdef Py_ssize_t n_rows = X.shape[0], n_features = X.shape[1]
    if n_rows == 0 or tree_roots.shape[0] == 0 or feature.shape[0] == 0:
        return
    cdef const uint8_t[::1] raw = X.reshape(-1).view(np.uint8)
    cdef int code
    with nogil:
        code = pbc_predict_raw(device, &raw[0], dtype, n_rows, n_features, feature.shape[0],
                               &feature[0], &threshold[0], &missing_left[0], &left_child[0],
                               &right_child[0], &value[0], tree_roots.shape[0], &tree_roots[0],
                               &out[0])
    check(code, "prediction on the GPU")
