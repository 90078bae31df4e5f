"""packboost._heap: a fit in a Dask worker reuses freed memory instead of
faulting in fresh pages at every depth, and gives it back afterwards."""

import os
import subprocess
import sys
import textwrap

import pytest

from packboost import _heap


class _RecordingLibc:
    def __init__(self):
        self.calls = []

    def mallopt(self, parameter, value):
        self.calls.append(("mallopt", parameter, value))
        return 1

    def malloc_trim(self, pad):
        self.calls.append(("malloc_trim", pad))
        return 1


@pytest.fixture
def libc(monkeypatch):
    recording = _RecordingLibc()
    monkeypatch.setattr(_heap, "_glibc", lambda: recording)
    return recording


def test_nothing_changes_where_the_environment_fixed_no_threshold(libc, monkeypatch):
    monkeypatch.delenv("MALLOC_TRIM_THRESHOLD_", raising=False)
    with _heap.freed_memory_kept():
        pass
    assert libc.calls == []


@pytest.mark.parametrize("mmap_variable", [None, "262144"])
def test_the_thresholds_raised_then_the_environments_again(libc, monkeypatch, mmap_variable):
    monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", "65536")
    if mmap_variable is None:
        monkeypatch.delenv("MALLOC_MMAP_THRESHOLD_", raising=False)
    else:
        monkeypatch.setenv("MALLOC_MMAP_THRESHOLD_", mmap_variable)
    with pytest.raises(KeyError), _heap.freed_memory_kept():
        assert libc.calls == [("mallopt", _heap._M_MMAP_THRESHOLD, _heap.KEPT_MMAP_THRESHOLD),
                              ("mallopt", _heap._M_TRIM_THRESHOLD, _heap.KEPT_TRIM_THRESHOLD)]
        raise KeyError("the fit failed")   # restored all the same
    mmap = _heap.GLIBC_MMAP_THRESHOLD if mmap_variable is None else int(mmap_variable)
    assert libc.calls[2:] == [("mallopt", _heap._M_MMAP_THRESHOLD, mmap),
                              ("mallopt", _heap._M_TRIM_THRESHOLD, 65536),
                              ("malloc_trim", 0)]


_FAULTS = textwrap.dedent("""
    import resource
    import numpy as np
    from packboost._heap import freed_memory_kept

    def faults_of_a_fresh_array():
        np.ones(1 << 20)            # 8 MiB, freed at once
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        np.ones(1 << 20)
        return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before

    outside = faults_of_a_fresh_array()
    with freed_memory_kept():
        inside = faults_of_a_fresh_array()
    after = faults_of_a_fresh_array()
    print(outside, inside, after)
""")


@pytest.mark.skipif(_heap._glibc() is None, reason="glibc's allocator only")
def test_a_freed_array_is_reused_without_page_faults_within_only():
    """A process started as Dask starts its workers: 8 MiB arrays made and
    freed again fault in ~2,048 fresh pages each time, except within
    freed_memory_kept, and again after it."""
    environment = dict(os.environ, MALLOC_TRIM_THRESHOLD_="65536",
                       NUMPY_MADVISE_HUGEPAGE="0")   # 4 KiB pages: countable faults
    found = subprocess.run([sys.executable, "-c", _FAULTS], env=environment, check=True,
                           capture_output=True, text=True).stdout.split()
    outside, inside, after = map(int, found)
    assert outside >= 1000 and after >= 1000
    assert inside < 100
