"""Freed memory kept for reuse while a fit runs in a process whose C
allocator hands it back at once (a Dask worker).

Dask's nanny starts every worker with ``MALLOC_TRIM_THRESHOLD_=65536`` in
its environment (``distributed.nanny.pre-spawn-environ``), so that a
long-lived worker returns freed memory to the operating system. Setting a
threshold also switches off glibc's dynamic one: the mmap threshold stays at
its 128 KiB default, so every array above it is a fresh ``mmap`` and every
``free`` an ``munmap``. A fit makes such arrays at every depth (a depth's
candidates, its pooled cells, NumPy temporaries), and each then costs page
faults on first touch, with transparent huge pages a 2 MiB zeroing (or a
memory compaction) each. Measured: the shard's rounds at 750k x 400 took
193-196 ms instead of 130-165 ms, with 25 times the page faults
(benchmarks/RESULTS.md, 2026-11-29).

:func:`freed_memory_kept` raises both thresholds for the fit's duration to
what glibc's dynamic rule itself reaches (an mmap threshold of 32 MiB, its
largest on 64-bit, and a trim threshold of twice that), and afterwards puts
back those the environment asked for and trims the heap: the worker ends the
fit holding what it held before, as Dask wants. Elsewhere (no such
variable, another allocator than glibc's) it does nothing.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import sys

# mallopt parameters (glibc's malloc.h)
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
# glibc's defaults and the largest mmap threshold its dynamic rule reaches
# on 64-bit (DEFAULT_MMAP_THRESHOLD_MAX, 4 MiB x sizeof(long)).
GLIBC_MMAP_THRESHOLD = 128 << 10
GLIBC_TRIM_THRESHOLD = 128 << 10
KEPT_MMAP_THRESHOLD = 32 << 20
KEPT_TRIM_THRESHOLD = 2 * KEPT_MMAP_THRESHOLD


def _glibc():
    """The process's glibc (mallopt, malloc_trim), or None."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None)
        if not hasattr(libc, "gnu_get_libc_version"):
            return None   # not glibc (musl): other mallopt numbers
        libc.mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
        libc.malloc_trim.argtypes = (ctypes.c_size_t,)
    except OSError:
        return None
    return libc


def _threshold(name: str, default: int) -> int:
    """A threshold from glibc's environment variable ``name``, else ``default``."""
    try:
        return int(os.environ[name])
    except (KeyError, ValueError):
        return default


@contextlib.contextmanager
def freed_memory_kept():
    """Within: freed memory stays in the process for the next allocation
    (module docstring) where the environment fixed glibc's trim threshold;
    after: the environment's thresholds again and the heap trimmed."""
    libc = _glibc() if "MALLOC_TRIM_THRESHOLD_" in os.environ else None
    if libc is None:
        yield
        return
    libc.mallopt(_M_MMAP_THRESHOLD, KEPT_MMAP_THRESHOLD)
    libc.mallopt(_M_TRIM_THRESHOLD, KEPT_TRIM_THRESHOLD)
    try:
        yield
    finally:
        libc.mallopt(_M_MMAP_THRESHOLD,
                     _threshold("MALLOC_MMAP_THRESHOLD_", GLIBC_MMAP_THRESHOLD))
        libc.mallopt(_M_TRIM_THRESHOLD,
                     _threshold("MALLOC_TRIM_THRESHOLD_", GLIBC_TRIM_THRESHOLD))
        libc.malloc_trim(0)
