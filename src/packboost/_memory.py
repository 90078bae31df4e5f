"""Fit's working memory: estimated before allocating, checked against the machine.

A fit allocates, besides the data the caller already holds, a binned copy of
``X``, a handful of per-row arrays and, per thread, histogram buffers of
``features per pass x eras x slots x bins`` cells. A request that cannot fit
(eras given as row ids with ``max_bins=65535``, say) would otherwise either
fail deep inside a kernel or, where the operating system overcommits, be
killed by the OOM killer while the buffers are first written: a crashed
interpreter instead of an exception.

:func:`check_fit_memory` adds up the allocations a fit is *certain* to make
(a lower bound: trees whose frontier grows wider need more) and raises
:class:`MemoryError` naming the estimate, what was available and what to
reduce when the sum exceeds :func:`available_memory_bytes`. The check is meant
to be cheap and conservative: it never refuses a fit that could run, it only
turns a certain failure into a clear, early one.
"""

from __future__ import annotations

import os

import numpy as np

__all__ = ["available_memory_bytes", "check_fit_memory", "data_memory_estimate",
           "training_memory_estimate"]

# Bytes of one fixed-point histogram cell: one int64 (gradient sum | count),
# a second one for the hessian sum when hessians differ between rows
# (_fixed_point.py); the lower bound counts one.
_HIST_CELL_BYTES = 8
# Bytes of one cell of a thread's unpacked (g, h, count) tile: HIST_DTYPE.itemsize.
_TILE_CELL_BYTES = 24
# Per-row arrays alive while X is binned (bytes per row): y as float64 and the
# era codes as int32; the era sort order (int64) unless the rows are already
# era-sorted; the sample weights (float64) when given.
_DATA_BYTES_PER_ROW = 8 + 4
# Per-row arrays of the boosting loop: gradients, hessians, raw predictions
# (float64), the row indices every tree samples from (int32), and the
# round's fixed-point copies (rounded gradients and hessians, packed cells).
_TRAINING_BYTES_PER_ROW = 3 * 8 + 4 + 3 * 8
# Per row and tree of a pack: node_of_row and the training rows' leaves (int32).
_BYTES_PER_ROW_AND_TREE = 4 + 4
# Per row and output beyond the first (several targets or classes): its target
# column, raw predictions, gradients and hessians (float64); the fixed-point
# copies are made one output at a time and reused.
_BYTES_PER_ROW_AND_OUTPUT = 4 * 8
_GIB = 1024 ** 3


def available_memory_bytes() -> tuple[int | None, str]:
    """Memory a new allocation of this process can get, and where the figure comes from.

    The smaller of the system's available memory (``MemAvailable`` plus
    ``SwapFree`` from ``/proc/meminfo``; else the physical memory from
    ``os.sysconf``) and the room left under a cgroup memory limit (v2
    ``memory.max - memory.current``, v1 ``memory.limit_in_bytes -
    memory.usage_in_bytes``). ``(None, reason)`` when nothing is known.
    """
    candidates = []
    meminfo = _read_meminfo()
    if "MemAvailable" in meminfo:
        candidates.append((meminfo["MemAvailable"] + meminfo.get("SwapFree", 0),
                           "MemAvailable + SwapFree in /proc/meminfo"))
    else:
        try:
            physical = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
            if physical > 0:
                candidates.append((physical, "physical memory (os.sysconf)"))
        except (AttributeError, ValueError, OSError):
            pass
    cgroup = _cgroup_room()
    if cgroup is not None:
        candidates.append(cgroup)
    if not candidates:
        return None, "unknown on this platform"
    return min(candidates)


def _read_meminfo() -> dict:
    values = {}
    try:
        with open("/proc/meminfo") as handle:
            for line in handle:
                name, _, rest = line.partition(":")
                fields = rest.split()
                if fields and fields[0].isdigit():
                    values[name] = int(fields[0]) * (1024 if fields[1:2] == ["kB"] else 1)
    except OSError:
        pass
    return values


def _read_int(path: str) -> int | None:
    try:
        with open(path) as handle:
            text = handle.read().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def _cgroup_room() -> tuple[int, str] | None:
    """Bytes left under this process's cgroup memory limit, if it has one."""
    limit = _read_int("/sys/fs/cgroup/memory.max")  # v2; "max" reads as None
    if limit is not None:
        used = _read_int("/sys/fs/cgroup/memory.current") or 0
        return max(0, limit - used), "cgroup memory.max - memory.current"
    limit = _read_int("/sys/fs/cgroup/memory/memory.limit_in_bytes")  # v1
    if limit is not None and limit < 1 << 60:  # v1 writes ~2**63 for "no limit"
        used = _read_int("/sys/fs/cgroup/memory/memory.usage_in_bytes") or 0
        return max(0, limit - used), "cgroup memory.limit_in_bytes - memory.usage_in_bytes"
    return None


def data_memory_estimate(*, n_rows: int, n_features: int, binned_bytes_per_value: int,
                         weighted: bool = False, sorted_by_era: bool = True) -> dict:
    """Lower bound of what a fit holds while it bins X: the binned copy of X
    (``binned_bytes_per_value`` 1 or 2, 0 when the binned matrix is a view of
    X) and the per-row arrays. ``{component: (bytes, how)}``."""
    per_row = _DATA_BYTES_PER_ROW + 8 * bool(weighted) + 8 * (not sorted_by_era)
    return {
        "binned matrix": (n_rows * n_features * binned_bytes_per_value,
                          f"{n_rows} rows x {n_features} features x "
                          f"{binned_bytes_per_value} B"),
        "era-sorted rows": (n_rows * per_row, f"{n_rows} rows x {per_row} B"),
    }


def training_memory_estimate(*, n_rows: int, pack_size: int, n_threads: int, bin_widths,
                             n_eras: int, n_candidates: int, max_depth: int,
                             min_samples_leaf: int, n_estimators: int, eval_rows: int = 0,
                             histogram_budget_bytes: int | None = None,
                             features_per_pass: int | None = None, n_outputs: int = 1) -> dict:
    """Lower bound of what the boosting loop allocates, once the data is binned.

    Parameters
    ----------
    bin_widths : array of int
        Bins per feature, the missing bin included.
    n_candidates : int
        Features scored per depth (``layer_feature_fraction`` of them).
    eval_rows : int
        Rows of the eval sets (one float64 raw prediction each, per output).
    n_outputs : int
        Targets or classes: each beyond the first adds its own target, raw
        scores, gradients and hessians per row (float64 each).

    Returns
    -------
    dict
        ``{component: (bytes, how it was counted)}``.
    """
    per_row = _TRAINING_BYTES_PER_ROW + _BYTES_PER_ROW_AND_TREE * pack_size
    components = {
        "per-row training arrays": (
            n_rows * per_row + 8 * eval_rows,
            f"{n_rows} rows x ({_TRAINING_BYTES_PER_ROW} B + pack_size {pack_size} x "
            f"{_BYTES_PER_ROW_AND_TREE} B)"),
    }
    if n_outputs > 1:
        components["per-output arrays"] = (
            (n_outputs - 1) * (n_rows * _BYTES_PER_ROW_AND_OUTPUT + 8 * eval_rows),
            f"{n_outputs - 1} more outputs x {n_rows} rows x {_BYTES_PER_ROW_AND_OUTPUT} B")
    grows = n_estimators >= 1 and max_depth >= 1 and n_rows >= 2 * max(1, min_samples_leaf)
    if len(bin_widths) and grows:
        from packboost import _split

        budget = (_split.DEFAULT_HISTOGRAM_BUDGET_BYTES if histogram_budget_bytes is None
                  else histogram_budget_bytes)
        per_pass = (_split.DEFAULT_FEATURES_PER_PASS if features_per_pass is None
                    else features_per_pass)
        n_candidates = max(1, min(n_candidates, len(bin_widths)))
        per_pass, _ = _split.feature_blocks(n_candidates, per_pass)
        threads = max(1, n_threads)
        # Whatever subset K_d is drawn, its widest feature is at least the
        # n_candidates-th narrowest of all features.
        width = int(np.sort(np.asarray(bin_widths, dtype=np.int64))[n_candidates - 1])
        unit = per_pass * n_eras * width * _HIST_CELL_BYTES
        # At depth 0 the frontier is the pack's roots, histogrammed in groups of
        # as many slots as the threads' budget allows (at least one), into one
        # buffer the threads share; each thread scores in its own tile.
        group = max(1, min(pack_size, threads * budget // unit))
        components["histogram buffers"] = (
            unit * group + threads * n_eras * width * _TILE_CELL_BYTES,
            f"{per_pass} features per pass x {n_eras} eras x {width} bins x {group} slots x "
            f"{_HIST_CELL_BYTES} B + {threads} threads x one {n_eras} x {width} tile of "
            f"{_TILE_CELL_BYTES} B cells")
    return components


def check_fit_memory(components: dict, *, who: str = "fit") -> None:
    """Raise :class:`MemoryError` when the estimated ``components`` cannot fit."""
    available, source = available_memory_bytes()
    needed = sum(size for size, _ in components.values())
    if available is None or needed <= available:
        return
    largest = max(components, key=lambda name: components[name][0])
    advice = {
        "histogram buffers": "fewer eras (are the era labels row ids?), a smaller max_bins, "
                             "fewer threads (n_jobs) or a smaller layer_feature_fraction",
        "binned matrix": "fewer rows or features (or pass int8 features already in bins, "
                         "column-major and era-sorted, which are used without a copy)",
        "era-sorted rows": "fewer rows",
        "per-row training arrays": "fewer rows or a smaller pack_size",
        "per-output arrays": "fewer rows or fewer targets per model",
    }.get(largest, "the data or the parameters")
    detail = "; ".join(f"{name} {_gib(size)} ({how})" for name, (size, how) in
                       sorted(components.items(), key=lambda item: -item[1][0]))
    raise MemoryError(
        f"{who} needs at least {_gib(needed)} of working memory but only {_gib(available)} is "
        f"available ({source}): {detail}. Reduce {advice}."
    )


def _gib(nbytes: int) -> str:
    return f"{nbytes / _GIB:.3g} GiB" if nbytes >= _GIB / 100 else f"{nbytes / 1024**2:.3g} MiB"
