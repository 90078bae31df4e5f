"""Which backend trains and predicts: ``device="cpu"`` or ``device="cuda"``.

The CUDA backend is the shared library ``libpackboost_cuda.so`` and its
Cython face ``packboost._cuda``; both exist only when the package was built
with nvcc (``-Csetup-args=-Dcuda=enabled``, or ``auto`` where nvcc is on
PATH). Whether a GPU and a driver are usable is known only at run time: every
failure becomes a :class:`CudaError` with CUDA's own message and code.
"""

from __future__ import annotations

import contextlib

import numpy as np


class CudaError(RuntimeError):
    """The CUDA backend is missing or a CUDA call failed.

    ``code`` is the cudaError_t (> 0) or libpackboost_cuda error (< 0), or
    None when the backend was not built.
    """

    def __init__(self, message: str, code: int | None = None):
        super().__init__(message)
        self.code = code


_NOT_BUILT = (
    "packboost was built without its CUDA backend (nvcc was not found when it was "
    "built). Reinstall on a machine with the CUDA toolkit: pip install packboost "
    "--no-binary packboost -Csetup-args=-Dcuda=enabled; or use device='cpu'."
)


def _cuda_module():
    """``packboost._cuda`` or None when the CUDA backend was not built."""
    try:
        from packboost import _cuda
    except ImportError:
        return None
    return _cuda


def cuda_built() -> bool:
    """True when this build contains the CUDA backend (says nothing of a GPU)."""
    return _cuda_module() is not None


def cuda_available() -> bool:
    """True when ``device="cuda"`` can run: the backend is built and a GPU is usable."""
    module = _cuda_module()
    if module is None:
        return False
    try:
        return module.device_count() > 0
    except CudaError:
        return False


def require_cuda() -> None:
    """Raise :class:`CudaError` (CUDA's message included) unless a GPU is usable."""
    module = _cuda_module()
    if module is None:
        raise CudaError(_NOT_BUILT)
    try:
        count = module.device_count()
    except CudaError as error:
        raise CudaError(f"device='cuda' needs a usable NVIDIA GPU and driver: {error}",
                        error.code) from None
    if count < 1:
        raise CudaError("device='cuda' needs a usable NVIDIA GPU: no CUDA device found", 100)


def cuda_build_info() -> dict:
    """What the CUDA backend of this build is and sees (for ``show_config``).

    Keys: ``built``, ``available``, ``api_version``, ``arch`` (nvcc flags),
    ``runtime_version``, ``driver_version``, ``devices`` (names), ``error``
    (why it is not available, CUDA's message, or None).
    """
    info = {"built": False, "available": False, "api_version": None, "arch": None,
            "runtime_version": None, "driver_version": None, "devices": [], "error": None}
    module = _cuda_module()
    if module is None:
        info["error"] = "not built (no nvcc at build time)"
        return info
    info["built"] = True
    info["api_version"] = module.api_version()
    info["arch"] = module.build_arch()
    try:
        info["runtime_version"] = module.runtime_version()
        info["driver_version"] = module.driver_version()
        count = module.device_count()
        info["devices"] = [module.device_name(device) for device in range(count)]
        info["available"] = count > 0
        if count == 0:
            info["error"] = "no CUDA device found"
    except CudaError as error:
        info["error"] = str(error)
    return info


def check_device(device: str) -> None:
    """Fail fast, before any work, when ``device`` cannot run here."""
    if device == "cuda":
        require_cuda()


def training_backend(device: str, data, pack_size: int):
    """Context manager giving ``booster.train``'s ``backend`` for ``device``.

    None for the CPU (the Cython engine); for CUDA, a backend holding the
    fit's device memory, freed on exit.
    """
    if device != "cuda":
        return contextlib.nullcontext(None)
    require_cuda()
    from packboost._cuda_grower import DeviceBackend

    return contextlib.closing(DeviceBackend.on_gpu(data, pack_size))


# Rows per GPU prediction call: bounds the device copy of X (rows x features).
PREDICT_CHUNK_BYTES = 1 << 30
_RAW_DTYPES = (np.float64, np.float32, np.int8, np.uint8)


def predict_raw(ensemble, X, n_rounds=None, start_round=0) -> np.ndarray:
    """``ensemble.predict_raw`` on the GPU: base score plus the selected rounds."""
    require_cuda()
    module = _cuda_module()
    out = np.full(X.shape[0], ensemble.base_score, dtype=np.float64)
    roots = ensemble.tree_roots(n_rounds, start_round)
    if X.shape[0] == 0 or len(roots) == 0:
        return out
    if X.dtype not in _RAW_DTYPES:
        # Integers wider than a byte: float64 holds them exactly (|x| < 2**53).
        X = X.astype(np.float64)
    nodes = ensemble.nodes
    arrays = [np.ascontiguousarray(nodes[name], dtype=dtype) for name, dtype in (
        ("feature", np.int32), ("threshold", np.float64), ("missing_left", np.uint8),
        ("left_child", np.int32), ("right_child", np.int32), ("value", np.float64))]
    row_bytes = max(1, X.shape[1] * X.dtype.itemsize)
    step = max(1, PREDICT_CHUNK_BYTES // row_bytes)
    for start in range(0, X.shape[0], step):
        stop = min(start + step, X.shape[0])
        block = np.ascontiguousarray(X[start:stop])
        part = out[start:stop].copy()
        module.predict_raw(block, *arrays, roots, part)
        out[start:stop] = part
    return out
