"""How many threads the kernels get.

The count is decided once per call at the public boundary and passed
explicitly to every ``prange`` (a known pitfall: defaulting to every core a
machine *has*, instead of the cores a process *may use*, oversubscribes under
CPU quotas and under pytest-xdist).

**Fork.** GNU libgomp's thread pool does not survive ``fork``: in a child
forked after the parent ran a parallel region, the next parallel region of
more than one thread waits forever for threads that exist only in the parent
(``multiprocessing`` with the ``fork`` start method, joblib, Dask process
workers, ``os.fork``). So a process created by ``fork`` runs every kernel on
one thread: :func:`resolve_n_threads` answers 1 there, and OpenMP's
max-active-levels is set to 0 in the child so that a kernel given a larger
count by another route runs serially too (a one-thread region never touches
the pool). The kernels' results do not depend on the thread count, only the
speed does. Children started with ``spawn`` are fresh processes and use every
CPU they may; ``forkserver`` children are forks of the server, so they run on
one thread when the server had imported packboost.
"""

from __future__ import annotations

import math
import os
from numbers import Integral

from packboost import _openmp

_forked_child = False


def _after_fork_in_child() -> None:
    global _forked_child
    _forked_child = True
    _openmp.make_serial()


os.register_at_fork(after_in_child=_after_fork_in_child)


def forked_child() -> bool:
    """Whether this process was created by ``fork`` from one that had imported
    packboost (its kernels then run on one thread; see the module docstring)."""
    return _forked_child


def available_cpus() -> int:
    """CPUs this process may run on: affinity mask and cgroup CPU quota."""
    try:
        count = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        count = os.cpu_count() or 1
    quota = _cgroup_cpu_quota()
    if quota is not None:
        count = min(count, quota)
    return max(1, count)


def _cgroup_cpu_quota() -> int | None:
    """CPU limit from cgroup v2 ``cpu.max`` or v1 ``cpu.cfs_*``, if any."""
    try:
        with open("/sys/fs/cgroup/cpu.max") as handle:
            quota, period = handle.read().split()[:2]
        if quota != "max":
            return max(1, math.ceil(int(quota) / int(period)))
        return None
    except (OSError, ValueError):
        pass
    try:
        with open("/sys/fs/cgroup/cpu/cpu.cfs_quota_us") as handle:
            quota_us = int(handle.read())
        with open("/sys/fs/cgroup/cpu/cpu.cfs_period_us") as handle:
            period_us = int(handle.read())
        if quota_us > 0 and period_us > 0:
            return max(1, math.ceil(quota_us / period_us))
    except (OSError, ValueError):
        pass
    return None


def resolve_n_threads(n_jobs) -> int:
    """Thread count for ``n_jobs``: None or -1 = all available CPUs,
    a positive int = that many, -k = all but k-1 (as in scikit-learn).

    Always 1 in a process created by ``fork`` (see the module docstring).
    """
    if n_jobs is not None:
        if isinstance(n_jobs, bool) or not isinstance(n_jobs, Integral):
            raise TypeError(f"n_jobs must be an int or None, got {n_jobs!r}")
        if n_jobs == 0:
            raise ValueError("n_jobs must not be 0 (use None or -1 for all CPUs)")
    if _forked_child:
        return 1
    if n_jobs is None:
        return available_cpus()
    n_jobs = int(n_jobs)
    if n_jobs < 0:
        return max(1, available_cpus() + 1 + n_jobs)
    return n_jobs
