"""Where a fit's rows live and its kernels run: the backends of the one driver.

:func:`packboost.grower.grow_pack` is the only depth loop of the package; it
calls a backend for every pass over the rows. A backend implements the
interface documented in :mod:`packboost.backends.interface` (and
docs/engine.md); there are two:

* :class:`packboost.backends.cpu.CpuBackend` -- the Cython/OpenMP kernels;
* :class:`packboost.backends.cuda.CudaBackend` -- libpackboost_cuda.so on a GPU.

:func:`open_backend` is the one place where ``device`` picks between them.
"""

from __future__ import annotations

import contextlib

DEVICES = ("cpu", "cuda")


def check_device(device: str) -> None:
    """Fail fast, before any work, when ``device`` cannot run here
    (:class:`packboost.CudaError` with CUDA's own message)."""
    if device == "cuda":
        from packboost._device import require_cuda

        require_cuda()
    elif device != "cpu":
        raise ValueError(f"device must be one of {list(DEVICES)}, got {device!r}")


def grows_outputs_in_one_pass(device: str) -> bool:
    """Does the backend of ``device`` grow several outputs' packs as one pack
    (``grows_outputs_in_one_pass``, grower.grow_output_packs)? Asked before
    it is opened (the memory estimate of a fit)."""
    if device == "cpu":
        from packboost.backends.cpu import CpuBackend

        return CpuBackend.grows_outputs_in_one_pass
    return False  # the CUDA backend grows the outputs' packs one after the other


def open_backend(device: str, data, pack_size: int, n_threads: int):
    """Context manager giving the backend of a fit on ``device``.

    The backend holds the fit's working memory (for CUDA: the device copy of
    the training data) and frees it on exit.
    """
    check_device(device)
    if device == "cpu":
        from packboost.backends.cpu import CpuBackend

        return contextlib.closing(CpuBackend(data, pack_size, n_threads))
    if device == "cuda":
        from packboost.backends.cuda import CudaBackend

        return contextlib.closing(CudaBackend.on_gpu(data, pack_size, n_threads=n_threads))
    raise AssertionError(device)  # check_device accepted it


def predict_raw(device: str, ensemble, X, n_threads: int, n_rounds=None, start_round=0):
    """Raw scores of ``ensemble`` (base score plus the selected rounds) on
    ``device``; a model with categorical features on the CPU whatever the
    device (the GPU predictor walks thresholds, not category sets)."""
    if device == "cuda" and "category_words" in ensemble.nodes:
        device = "cpu"
    check_device(device)
    if device == "cuda":
        from packboost.backends.cuda import predict_raw_on_gpu

        # Every output's trees on one upload of X (the per-output copies it
        # replaces sent X to the device once per output).
        return predict_raw_on_gpu(ensemble, X, n_rounds=n_rounds, start_round=start_round)
    return ensemble.predict_raw(X, n_threads, n_rounds=n_rounds, start_round=start_round)
