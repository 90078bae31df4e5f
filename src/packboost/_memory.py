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

__all__ = ["available_memory_bytes", "check_device_context", "check_device_histogram",
           "check_fit_memory", "data_memory_estimate", "device_memory_estimate",
           "histogram_floor", "training_memory_estimate"]

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
# A round's fixed-point copies of one output's gradients, per row: rounded
# gradients and hessians (float64), packed cells (int64), squared gradients
# on their grid (float64).
_FIXED_POINT_BYTES_PER_ROW = 4 * 8
# Per-row arrays of the boosting loop: gradients, hessians, raw predictions
# (float64), the row indices every tree samples from (int32), and the
# round's fixed-point copies.
_TRAINING_BYTES_PER_ROW = 3 * 8 + 4 + _FIXED_POINT_BYTES_PER_ROW
# Per row and tree of a pack: node_of_row and the training rows' leaves (int32).
_BYTES_PER_ROW_AND_TREE = 4 + 4
# Per row and output beyond the first (several targets or classes): its target
# column, raw predictions, gradients and hessians (float64).
_BYTES_PER_ROW_AND_OUTPUT = 4 * 8
# Per row and output of a pass shared by several outputs (booster.outputs_per_pass,
# grower.grow_output_packs): its fixed-point copies, all alive at once, and
# its share of their rounded gradients, hessians and squared gradients laid
# end to end (OutputsFixedPoint.gradients, .hessians and .squared, the node
# sums' input).
_PASS_BYTES_PER_ROW_AND_OUTPUT = _FIXED_POINT_BYTES_PER_ROW + 3 * 8
_GIB = 1024 ** 3

# The CUDA backend's device memory (docs/cuda-kernels.md §11; cuda/context.cu).
# One histogram cell: fixed-point g, h sums and a row count (pbc_cell, 3 x int64).
DEVICE_CELL_BYTES = 24
# Per row: g, h, g * g (int64), the round's upload staging and the
# prediction output (float64), the row's era (int32), and for the round on
# the device y and the weights (float64; cuda/round.cu).
_DEVICE_BYTES_PER_ROW = 3 * 8 + 8 + 8 + 4 + 8 + 8
# Per row and tree of a pack: the tree's sample list, node_of_row, leaf_of_row (int32).
_DEVICE_BYTES_PER_ROW_AND_TREE = 3 * 4
# Per era-aligned row tile of at most PBC_TILE_ROWS rows: begin, end (int64), era (int32).
_DEVICE_TILE_ROWS = 4096
_DEVICE_BYTES_PER_TILE = 8 + 8 + 4
# Per (slot, candidate): its tile's best split (score, gain, threshold,
# missing side, found) in the depth's scratch.
_DEVICE_BYTES_PER_TILE_RESULT = 8 + 8 + 4 + 1 + 1
# Per histogram item (pbc_hist_item) and its block index.
_DEVICE_BYTES_PER_ITEM = 40 + 4


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
                             features_per_pass: int | None = None, n_outputs: int = 1,
                             outputs_per_pass: int = 1) -> dict:
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
    outputs_per_pass : int
        Outputs whose packs a round grows as one pack
        (:func:`packboost.booster.outputs_per_pass`): its row tables have a
        column per tree of all of them, and every one of them holds its
        fixed-point copies at once.

    Returns
    -------
    dict
        ``{component: (bytes, how it was counted)}``.
    """
    outputs_per_pass = max(1, min(outputs_per_pass, n_outputs))
    trees = pack_size * outputs_per_pass   # the trees of one pass
    per_row = _TRAINING_BYTES_PER_ROW + _BYTES_PER_ROW_AND_TREE * trees
    how = (f"{n_rows} rows x ({_TRAINING_BYTES_PER_ROW} B + pack_size {pack_size} x "
           f"{_BYTES_PER_ROW_AND_TREE} B)")
    if outputs_per_pass > 1:
        per_row += (outputs_per_pass * _PASS_BYTES_PER_ROW_AND_OUTPUT
                    - _FIXED_POINT_BYTES_PER_ROW)
        how = (f"{n_rows} rows x ({_TRAINING_BYTES_PER_ROW - _FIXED_POINT_BYTES_PER_ROW} B + "
               f"{outputs_per_pass} outputs in one pass x ({_PASS_BYTES_PER_ROW_AND_OUTPUT} B + "
               f"pack_size {pack_size} x {_BYTES_PER_ROW_AND_TREE} B))")
    components = {"per-row training arrays": (n_rows * per_row + 8 * eval_rows, how)}
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
        group = max(1, min(trees, threads * budget // unit))
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


def device_context_bytes(*, n_rows: int, n_features: int, bytes_per_bin: int, pack_size: int,
                         n_eras: int) -> dict:
    """What ``pbc_context_create`` allocates on the device for a whole fit.
    ``{component: (bytes, how)}``."""
    n_tiles = n_eras + n_rows // _DEVICE_TILE_ROWS  # at most, for era-aligned tiles
    per_row = _DEVICE_BYTES_PER_ROW + _DEVICE_BYTES_PER_ROW_AND_TREE * pack_size
    return {
        "binned matrix": (n_rows * n_features * bytes_per_bin,
                          f"{n_rows} rows x {n_features} features x {bytes_per_bin} B"),
        "per-row arrays": (n_rows * per_row,
                           f"{n_rows} rows x ({_DEVICE_BYTES_PER_ROW} B + pack_size "
                           f"{pack_size} x {_DEVICE_BYTES_PER_ROW_AND_TREE} B)"),
        "row tiles": (n_tiles * _DEVICE_BYTES_PER_TILE,
                      f"{n_tiles} era-aligned row tiles x {_DEVICE_BYTES_PER_TILE} B"),
    }


def device_memory_estimate(*, n_rows: int, n_features: int, bytes_per_bin: int, pack_size: int,
                           n_eras: int, max_width: int, n_candidates: int,
                           tree_candidates: int, max_depth: int, min_samples_leaf: int,
                           histogram_budget_bytes: int = 1 << 30) -> dict:
    """Upper bound of the CUDA backend's device memory, depth by depth
    (docs/cuda-kernels.md §11).

    Parameters
    ----------
    max_width : int
        Histogram cells per (era, feature): the most bins of a feature, plus
        the missing bin.
    n_candidates, tree_candidates : int
        Features drawn per depth (``layer_feature_fraction`` of them) and, of
        those, scored by each tree (``tree_feature_fraction`` of them).
    histogram_budget_bytes : int
        The context's budget: candidates are histogrammed in chunks whose
        tiles fit it, but a chunk holds at least one candidate.

    Returns
    -------
    dict
        ``context`` (:func:`device_context_bytes`), ``depths`` (one dict per
        depth that searches splits: ``depth``, ``slots_per_tree`` -- at most
        ``2**depth`` and, below the root, at most ``n_rows //
        min_samples_leaf``, as every node keeps that many rows --,
        ``tile_bytes`` of one (candidate, slot), ``all_tiles_bytes`` of the
        depth, ``largest_candidate_bytes`` (one candidate drawn by every
        tree), ``histogram_buffer_bytes`` (what the chunk buffer may reach),
        ``chunks`` (at least) and ``scratch_bytes``), and ``peak_bytes``: the
        context plus the largest histogram buffer and scratch (each is kept
        and grown from depth to depth, never shrunk within a fit).
    """
    context = device_context_bytes(n_rows=n_rows, n_features=n_features,
                                   bytes_per_bin=bytes_per_bin, pack_size=pack_size,
                                   n_eras=n_eras)
    tile_bytes = n_eras * max_width * DEVICE_CELL_BYTES
    budget = max(DEVICE_CELL_BYTES, histogram_budget_bytes)
    depths = []
    for depth in range(max(0, max_depth)):
        slots_per_tree = 1 if depth == 0 else min(
            2 ** depth, max(1, n_rows // max(1, min_samples_leaf)))
        all_tiles = pack_size * tree_candidates * slots_per_tree * tile_bytes
        largest = pack_size * slots_per_tree * tile_bytes
        buffer = largest if largest > budget else min(all_tiles, budget)
        n_slots = pack_size * slots_per_tree
        depths.append({
            "depth": depth, "slots_per_tree": slots_per_tree, "tile_bytes": tile_bytes,
            "all_tiles_bytes": all_tiles, "largest_candidate_bytes": largest,
            "histogram_buffer_bytes": buffer, "chunks": -(-all_tiles // max(buffer, 1)),
            "scratch_bytes": n_slots * n_candidates * _DEVICE_BYTES_PER_TILE_RESULT
            + n_candidates * pack_size * (8 + _DEVICE_BYTES_PER_ITEM)})
    largest_buffer = max((d["histogram_buffer_bytes"] for d in depths), default=0)
    largest_scratch = max((d["scratch_bytes"] for d in depths), default=0)
    return {"context": context, "depths": depths,
            "peak_bytes": sum(size for size, _ in context.values()) + largest_buffer
            + largest_scratch}


def check_device_context(components: dict, free_bytes: int, *, pack_size: int,
                         n_rows: int) -> None:
    """Raise :class:`MemoryError` when the fit's device data
    (:func:`device_context_bytes`) cannot fit ``free_bytes`` (before anything
    is allocated); names the ``pack_size`` that would fit, if one does."""
    needed = sum(size for size, _ in components.values())
    if needed <= free_bytes:
        return
    detail = "; ".join(f"{name} {_gib(size)} ({how})" for name, (size, how) in
                       sorted(components.items(), key=lambda item: -item[1][0]))
    per_tree = n_rows * _DEVICE_BYTES_PER_ROW_AND_TREE
    fitting_pack = (free_bytes - needed + pack_size * per_tree) // max(1, per_tree)
    pack_advice = (f"pack_size <= {fitting_pack} (now {pack_size}) would fit"
                   if fitting_pack >= 1 else f"no pack_size fits (now {pack_size})")
    raise MemoryError(
        f"device='cuda' needs {_gib(needed)} of GPU memory for the training data but the GPU "
        f"has {_gib(free_bytes)} free: {detail}. {pack_advice}; reduce the rows or features, "
        f"or fit with device='cpu'.")


def histogram_floor(slot_tree, slot_open, tree_uses_feature, tile_bytes: int) -> tuple:
    """The least histogram buffer a depth of the CUDA backend reserves.

    ``pbc_plan_histograms`` (cuda/histogram.cu) puts at least one candidate in
    a chunk, and a candidate's tiles are every slot of every open tree that
    draws it: ``(bytes, trees, slots)`` of the largest candidate.
    """
    uses = np.asarray(tree_uses_feature, dtype=bool)          # (n_candidates, pack_size)
    slot_tree = np.asarray(slot_tree, dtype=np.int64)
    pack_size = uses.shape[1]
    if uses.shape[0] == 0 or len(slot_tree) == 0:
        return 0, 0, 0
    tree_slots = np.bincount(slot_tree, minlength=pack_size)
    tree_open = np.bincount(slot_tree, weights=np.asarray(slot_open, dtype=np.float64),
                            minlength=pack_size) > 0
    counted = uses & tree_open
    slots = counted @ tree_slots
    largest = int(np.argmax(slots))
    return (int(slots[largest]) * tile_bytes, int(counted[largest].sum()),
            int(slots[largest]))


def check_device_histogram(*, depth: int, needed_bytes: int, trees: int, slots: int,
                           free_bytes: int, held_bytes: int, n_eras: int, max_width: int,
                           pack_size: int) -> None:
    """Raise :class:`MemoryError` when a depth's least histogram buffer
    (:func:`histogram_floor`) cannot fit: ``free_bytes`` plus ``held_bytes``,
    the most the buffer of the previous depths may hold (it is freed before
    it grows). Names what would fit."""
    available = free_bytes + held_bytes
    if needed_bytes <= available:
        return
    slot_bytes = n_eras * max_width * DEVICE_CELL_BYTES
    fitting_pack = available * trees // max(1, slots * slot_bytes)
    fitting_bins = available // max(1, slots * n_eras * DEVICE_CELL_BYTES) - 1
    raise MemoryError(
        f"device='cuda' cannot hold depth {depth}'s histograms: one candidate feature drawn "
        f"by {trees} trees of the pack needs {_gib(needed_bytes)} of GPU memory ({slots} "
        f"nodes at depth {depth} x {n_eras} eras x {max_width} bins x {DEVICE_CELL_BYTES} B), "
        f"and the GPU has {_gib(free_bytes)} free besides the {_gib(held_bytes)} it may hold. "
        f"At this depth pack_size <= {max(0, fitting_pack)} (now {pack_size}) or max_bins <= "
        f"{max(0, fitting_bins)} (now {max_width - 1}) would fit; or max_depth <= {depth}, a "
        f"larger min_samples_leaf (a tree keeps at most n_rows / min_samples_leaf nodes a "
        f"depth), fewer eras, or device='cpu' (docs/cuda-kernels.md §11).")

