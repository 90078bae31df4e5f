"""What this build is and where its Cython API lives.

:func:`show_config` reports the build (version, distribution, compiler,
architecture, OpenMP, CUDA) -- the first thing to ask for in a bug report;
:func:`get_include` is the include directory for ``cimport packboost``.
"""

from __future__ import annotations

import platform
import sys
from importlib import metadata
from pathlib import Path

from packboost._version import __version__

# Distributions that install the ``packboost`` import (README "Install").
DISTRIBUTIONS = ("packboost", "packboost-cu13")


def get_include() -> str:
    """Directory to put on Cython's include path (``-I``) for ``cimport packboost``.

    It is the directory that holds the installed ``packboost`` package, so
    Cython finds ``packboost/__init__.pxd`` and ``packboost/tree.pxd`` in it
    (the public API: tree layout types and nogil prediction kernels, all
    inline, so nothing needs linking). Packboost's C headers are in
    ``<get_include()>/packboost/include``. With an editable install this is
    the source checkout, where the same ``.pxd`` files live.
    """
    return str(Path(__file__).resolve().parent.parent)


def installed_distributions() -> list[str]:
    """Names of the installed distributions that provide the ``packboost`` import."""
    found = []
    for name in DISTRIBUTIONS:
        try:
            metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        found.append(name)
    return found


def _cuda_config() -> tuple[dict | None, bool | None]:
    """(CUDA build facts or None when not built, whether a GPU is usable or None)."""
    try:
        from packboost import _device
    except ImportError:
        return None, None
    build_info = getattr(_device, "cuda_build_info", None)
    info = build_info() if build_info is not None else None
    if not info or not info.get("built", True):
        return None, None
    if "available" in info:
        return dict(info), bool(info["available"])
    available = getattr(_device, "cuda_available", None)
    return dict(info), (bool(available()) if available is not None else None)


def show_config() -> dict:
    """Print and return how this build was made.

    Keys: ``version``, ``distribution`` (``packboost`` or ``packboost-cu13``;
    two names mean both are installed over each other: uninstall one),
    ``python``, ``numpy``, ``compiler``, ``arch``, ``buildtype``, ``cython``,
    ``openmp`` (kernels compiled with OpenMP), ``openmp_version``,
    ``omp_max_threads``, ``available_cpus``, ``cuda`` (CUDA backend built;
    printed "built" or "not built"), ``cuda_build`` (its build facts, or None)
    and ``cuda_device`` (a usable GPU was found; None when CUDA is not built;
    printed "found" or "none found").
    """
    import numpy

    from packboost._openmp import omp_max_threads, openmp_enabled
    from packboost._threads import available_cpus

    try:
        from packboost._build_config import BUILD_CONFIG
    except ImportError:  # running the uncompiled source tree
        BUILD_CONFIG = {}
    cuda_build, cuda_device = _cuda_config()
    config = {
        "version": __version__,
        "distribution": ", ".join(installed_distributions()) or "not installed (source tree)",
        "python": f"{platform.python_implementation()} {platform.python_version()}"
                  f" ({sys.executable})",
        "numpy": numpy.__version__,
        "compiler": BUILD_CONFIG.get("c_compiler", "unknown"),
        "arch": f"{BUILD_CONFIG.get('host_cpu', platform.machine())}"
                f"-{BUILD_CONFIG.get('host_system', sys.platform)}",
        "buildtype": BUILD_CONFIG.get("buildtype", "unknown"),
        "cython": BUILD_CONFIG.get("cython", "unknown"),
        "openmp": openmp_enabled(),
        "openmp_version": BUILD_CONFIG.get("openmp_version", "") or None,
        "omp_max_threads": omp_max_threads(),
        "available_cpus": available_cpus(),
        "cuda": cuda_build is not None,
        "cuda_build": cuda_build,
        "cuda_device": cuda_device,
    }
    for key, value in config.items():
        print(f"{key}: {_printed(key, value)}")
    return config


def _printed(key: str, value) -> str:
    """How :func:`show_config` prints one entry: the CUDA ones say what they mean.

    ``cuda`` is whether the backend was *built*, which on a machine without a
    GPU is still true (the packboost-cu13 wheel): "True" read as "a GPU is
    used", so the line says "built" and ``cuda_device`` says whether one was found.
    """
    if key == "cuda":
        return "built" if value else "not built"
    if key == "cuda_device":
        if value is None:
            return "none (CUDA not built)"
        return "found" if value else "none found (device='cuda' raises CudaError)"
    if key == "cuda_build" and value is not None:
        return ", ".join(f"{name}={item}" for name, item in value.items())
    return str(value)
