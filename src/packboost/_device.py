"""Is the CUDA backend here, and can it run: build facts, GPU, CudaError.

(Which backend a fit or a prediction uses is decided in one place,
:mod:`packboost.backends`.) The CUDA backend is the shared library ``libpackboost_cuda.so`` and its
Cython face ``packboost._cuda``; both exist only when the package was built
with nvcc (``-Csetup-args=-Dcuda=enabled``, or ``auto`` where nvcc is on
PATH). Whether a GPU and a driver are usable is known only at run time: every
failure becomes a :class:`CudaError` with CUDA's own message and code.
"""

from __future__ import annotations


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
        if info["driver_version"] == 0:
            # No driver at all: say so plainly rather than CUDA's "driver version
            # is insufficient" (error 35), which reads like an upgrade problem.
            info["error"] = "no GPU: no NVIDIA driver is installed"
            return info
        count = module.device_count()
        info["devices"] = [module.device_name(device) for device in range(count)]
        info["available"] = count > 0
        if count == 0:
            info["error"] = "no CUDA device found"
    except CudaError as error:
        info["error"] = str(error)
    return info
