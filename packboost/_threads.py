"""How many threads the kernels get.

The count is decided once per call at the public boundary and passed
explicitly to every ``prange`` (a known pitfall: defaulting to every core a
machine *has*, instead of the cores a process *may use*, oversubscribes under
CPU quotas and under pytest-xdist).
"""

from __future__ import annotations

import math
import os
from numbers import Integral


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
    a positive int = that many, -k = all but k-1 (as in scikit-learn)."""
    if n_jobs is None:
        return available_cpus()
    if isinstance(n_jobs, bool) or not isinstance(n_jobs, Integral):
        raise TypeError(f"n_jobs must be an int or None, got {n_jobs!r}")
    n_jobs = int(n_jobs)
    if n_jobs == 0:
        raise ValueError("n_jobs must not be 0 (use None or -1 for all CPUs)")
    if n_jobs < 0:
        return max(1, available_cpus() + 1 + n_jobs)
    return n_jobs
