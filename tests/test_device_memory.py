"""The CUDA backend's device memory: the estimate of docs/cuda-kernels.md §11
and the MemoryError raised before the device allocates what cannot fit.

The estimate and the checks are host code: they run everywhere. The chunk
rule they rely on (``pbc_plan_histograms`` in cuda/histogram.cu: consecutive
candidates while their tiles fit the budget, at least one a chunk) is
replayed here by a naive loop, the oracle of :func:`_memory.histogram_floor`.
"""

from __future__ import annotations

import numpy as np
import pytest

from packboost import _device, _memory
from packboost.backends.cuda import CudaBackend

CELL = _memory.DEVICE_CELL_BYTES
GIB = 1024 ** 3


def planned_buffer_cells(slot_tree, slot_open, tree_uses_feature, tile_cells, budget_cells):
    """The largest chunk of pbc_plan_histograms, candidate by candidate."""
    pack = tree_uses_feature.shape[1]
    tree_slots = [int(np.sum(slot_tree == t)) for t in range(pack)]
    tree_open = [bool(np.any(slot_open[slot_tree == t])) for t in range(pack)]
    chunks, chunk = [], 0
    for candidate in range(tree_uses_feature.shape[0]):
        member = sum(tree_slots[t] * tile_cells for t in range(pack)
                     if tree_uses_feature[candidate, t] and tree_open[t])
        if candidate > 0 and chunk + member > budget_cells:
            chunks.append(chunk)
            chunk = 0
        chunk += member
    chunks.append(chunk)
    return max(chunks)


def random_frontier(rng, pack, n_candidates):
    slots_per_tree = rng.integers(1, 9, size=pack)
    slot_tree = np.repeat(np.arange(pack, dtype=np.int32), slots_per_tree)
    slot_open = (rng.random(len(slot_tree)) < 0.7).astype(np.uint8)
    uses = rng.random((n_candidates, pack)) < 0.5
    return slot_tree, slot_open, uses


@pytest.mark.parametrize("seed", range(40))
def test_the_histogram_floor_is_the_planned_buffer_when_it_exceeds_the_budget(seed):
    rng = np.random.default_rng(seed)
    pack, n_candidates = int(rng.integers(1, 9)), int(rng.integers(1, 30))
    slot_tree, slot_open, uses = random_frontier(rng, pack, n_candidates)
    tile_cells = int(rng.integers(1, 50))
    budget_cells = int(rng.integers(1, 400))
    floor, trees, slots = _memory.histogram_floor(slot_tree, slot_open, uses, tile_cells * CELL)
    planned = planned_buffer_cells(slot_tree, slot_open, uses, tile_cells, budget_cells)
    # Every plan holds the floor; it exceeds the budget only by one candidate.
    assert floor <= planned * CELL
    assert planned * CELL <= max(budget_cells * CELL, floor)
    if floor > budget_cells * CELL:
        assert planned * CELL == floor
    assert floor == slots * tile_cells * CELL
    assert trees <= pack


def test_the_histogram_floor_counts_only_open_trees_that_draw_the_candidate():
    slot_tree = np.array([0, 0, 0, 1, 1, 2], dtype=np.int32)
    slot_open = np.array([0, 1, 0, 0, 0, 1], dtype=np.uint8)   # tree 1 has no open slot
    uses = np.array([[1, 1, 0], [1, 1, 1], [0, 1, 1]], dtype=bool)
    # Candidate 1: tree 0 (3 slots) + tree 2 (1 slot); tree 1 is closed.
    assert _memory.histogram_floor(slot_tree, slot_open, uses, 10) == (40, 2, 4)
    assert _memory.histogram_floor(slot_tree, slot_open, uses[:0], 10) == (0, 0, 0)


def deep_recipe(**changes):
    settings = dict(n_rows=2_700_000, n_features=2376, bytes_per_bin=1, pack_size=8,
                    n_eras=600, max_width=6, n_candidates=238, tree_candidates=119,
                    max_depth=10, min_samples_leaf=10_000)
    settings.update(changes)
    return _memory.device_memory_estimate(**settings)


def test_the_deep_recipe_fits_an_80_gb_card():
    estimate = deep_recipe()
    context = estimate["context"]
    assert context["binned matrix"][0] == 2_700_000 * 2376
    assert context["per-row arrays"][0] == 2_700_000 * (60 + 8 * 12)
    depths = estimate["depths"]
    assert [d["slots_per_tree"] for d in depths] == [1, 2, 4, 8, 16, 32, 64, 128, 256, 270]
    last = depths[-1]
    assert last["tile_bytes"] == 600 * 6 * CELL
    assert last["all_tiles_bytes"] == 8 * 119 * 270 * 600 * 6 * CELL   # 22.2 GB in chunks
    assert last["histogram_buffer_bytes"] == GIB
    assert last["chunks"] == -(-last["all_tiles_bytes"] // GIB)
    assert estimate["peak_bytes"] < 9e9 < 80e9


def test_the_estimate_grows_with_the_depth_and_respects_its_bounds():
    for min_samples_leaf in (1, 20, 10_000, 10**9):
        for max_width in (6, 256):
            estimate = deep_recipe(min_samples_leaf=min_samples_leaf, max_width=max_width,
                                   max_depth=12)
            budget = GIB
            previous = 0
            for depth in estimate["depths"]:
                slots = depth["slots_per_tree"]
                assert 1 <= slots <= 2 ** depth["depth"]
                if depth["depth"] > 0:
                    assert slots <= max(1, 2_700_000 // min_samples_leaf)
                assert slots >= previous
                previous = slots
                buffer = depth["histogram_buffer_bytes"]
                assert buffer <= max(budget, depth["largest_candidate_bytes"])
                assert buffer <= max(depth["all_tiles_bytes"], depth["largest_candidate_bytes"])
                assert depth["chunks"] * buffer >= depth["all_tiles_bytes"]
            largest = max(d["histogram_buffer_bytes"] for d in estimate["depths"])
            context = sum(size for size, _ in estimate["context"].values())
            assert estimate["peak_bytes"] >= context + largest


def test_255_bins_at_depth_13_do_not_fit_one_candidate_on_80_gb():
    # One candidate drawn by 8 trees over 4,096 nodes of 600 eras x 256 bins
    # (at depth 11, max_depth 12, it is 60 GB: it fits beside the 6.8 GB of data).
    estimate = deep_recipe(max_width=256, min_samples_leaf=1, max_depth=13)
    assert estimate["depths"][11]["largest_candidate_bytes"] < 80e9 - 7e9
    depth = estimate["depths"][12]
    assert depth["largest_candidate_bytes"] == 8 * 4096 * 600 * 256 * CELL
    assert depth["histogram_buffer_bytes"] == depth["largest_candidate_bytes"] > 80e9


class StubKernels:
    """Stands for CudaContext: counts the split searches it is asked for."""

    def __init__(self):
        self.calls = 0

    def find_splits(self, slot_tree, *args):
        self.calls += 1
        n_slots = len(slot_tree)
        return dict(column=np.full(n_slots, -1, dtype=np.int32), score=np.full(n_slots, -np.inf),
                    gain=np.zeros(n_slots), threshold=np.zeros(n_slots, dtype=np.int32),
                    missing_left=np.zeros(n_slots, dtype=np.uint8))


def backend_with(free_bytes, *, n_eras=600, max_width=256, budget=GIB):
    probes = []

    def free_memory():
        probes.append(free_bytes)
        return free_bytes

    backend = CudaBackend(StubKernels())
    backend.free_memory = free_memory
    backend.histogram_shape = (n_eras, max_width)
    backend.histogram_budget_bytes = budget
    return backend, probes


def frontier(pack, slots_per_tree, n_candidates=3):
    slot_tree = np.repeat(np.arange(pack, dtype=np.int32), slots_per_tree)
    return (slot_tree, np.ones(len(slot_tree), dtype=np.uint8),
            np.zeros(n_candidates, dtype=np.int32), np.ones((n_candidates, pack), dtype=np.uint8),
            np.zeros(len(slot_tree)))


def find_splits(backend, pack, slots_per_tree):
    slot_tree, slot_open, features, uses, variance = frontier(pack, slots_per_tree)
    return backend.find_splits(slot_tree, slot_open, features, uses, variance, {})


def test_a_depth_that_cannot_fit_fails_before_the_kernels_run():
    pack, slots = 8, 512
    needed = pack * slots * 600 * 256 * CELL   # 14 GiB for one candidate
    backend, probes = backend_with(free_bytes=4 * GIB)
    backend._depth = 9
    with pytest.raises(MemoryError) as caught:
        find_splits(backend, pack, slots)
    assert backend.kernels.calls == 0
    message = str(caught.value)
    assert "depth 9" in message and "max_depth <= 9" in message
    # 4 GiB free + the 1 GiB budget the buffer may hold: 2 trees x 512 nodes x 3.5 MiB
    # fit, and 90 bins (91 cells a slot and era) for all 8 trees.
    assert "pack_size <= 2 (now 8)" in message
    assert "max_bins <= 90 (now 255)" in message
    assert f"{needed / GIB:.3g} GiB" in message
    assert len(probes) == 1
    # What the message says would fit does fit.
    backend, _ = backend_with(free_bytes=4 * GIB)
    find_splits(backend, 2, slots)
    backend, _ = backend_with(free_bytes=4 * GIB, max_width=91)
    find_splits(backend, pack, slots)
    assert backend.kernels.calls == 1


def test_depths_within_the_budget_or_the_held_buffer_do_not_ask_the_device():
    backend, probes = backend_with(free_bytes=0, max_width=6)
    find_splits(backend, 8, 270)                 # 187 MB a candidate: under the 1 GiB budget
    assert probes == [] and backend.kernels.calls == 1
    backend, probes = backend_with(free_bytes=20 * GIB)
    find_splits(backend, 8, 512)                 # 14 GiB: asks, fits, holds it
    find_splits(backend, 8, 256)                 # half of it: the buffer is kept
    find_splits(backend, 8, 512)
    assert len(probes) == 1 and backend.kernels.calls == 3


def test_a_backend_without_a_device_probe_never_checks():
    backend = CudaBackend(StubKernels())          # the host oracle's case
    find_splits(backend, 8, 512)
    assert backend.kernels.calls == 1


def test_the_context_check_names_the_data_and_the_pack():
    components = _memory.device_context_bytes(n_rows=2_700_000, n_features=2376,
                                              bytes_per_bin=1, pack_size=8, n_eras=600)
    needed = sum(size for size, _ in components.values())
    per_tree = 2_700_000 * 12
    _memory.check_device_context(components, needed, pack_size=8, n_rows=2_700_000)
    with pytest.raises(MemoryError, match=r"binned matrix 5\.97 GiB .*pack_size <= 7 \(now 8\)"):
        _memory.check_device_context(components, needed - 1, pack_size=8, n_rows=2_700_000)
    with pytest.raises(MemoryError, match=r"pack_size <= 1 \(now 8\)"):
        _memory.check_device_context(components, needed - 7 * per_tree, pack_size=8,
                                     n_rows=2_700_000)
    with pytest.raises(MemoryError, match=r"no pack_size fits \(now 8\)"):
        _memory.check_device_context(components, needed - 7 * per_tree - 1, pack_size=8,
                                     n_rows=2_700_000)


@pytest.mark.cuda
@pytest.mark.skipif(not _device.cuda_available(), reason="needs a usable CUDA GPU")
def test_a_gpu_fit_whose_data_cannot_fit_fails_before_the_context_is_made(monkeypatch):
    from packboost import PackBoostRegressor, _cuda

    free, total = _cuda.device_memory(0)
    assert 0 < free <= total
    monkeypatch.setattr(_cuda, "device_memory", lambda device=0: (1000, total))
    X = np.random.default_rng(0).integers(0, 5, size=(500, 4)).astype(np.uint8)
    model = PackBoostRegressor(n_estimators=1, max_depth=2, device="cuda")
    with pytest.raises(MemoryError, match="the GPU has 0.000954 MiB free"):
        model.fit(X, np.arange(500.0), era=np.repeat(np.arange(5), 100))
