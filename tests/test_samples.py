"""packboost._samples.TreeSamples: a round's per-tree samples as era flags."""

import numpy as np
import pytest

from packboost._samples import TreeSamples


def test_rows_come_from_the_flags_and_are_listed_once():
    era_offsets = np.array([0, 3, 3, 7, 8], dtype=np.int64)  # era 1 is empty
    era_keep = np.array([[1, 1, 1, 1], [0, 1, 1, 0], [0, 0, 0, 0]], dtype=np.uint8)
    row_keep = [None, np.array([True, False, False, True]), None]
    samples = TreeSamples(era_keep, row_keep, era_offsets)
    assert len(samples) == 3 and not samples.whole_eras
    np.testing.assert_array_equal(samples[0], np.arange(8))
    np.testing.assert_array_equal(samples[1], [3, 6])     # rows 3..6 of era 2, first and last
    assert samples[2].dtype == np.int32 and len(samples[2]) == 0
    assert samples[1] is samples[1] and samples[-2] is samples[1]
    assert TreeSamples(era_keep, [None] * 3, era_offsets).whole_eras


def test_bad_samples_are_refused():
    offsets = np.array([0, 2, 5], dtype=np.int64)
    with pytest.raises(ValueError, match="era_keep must have shape"):
        TreeSamples(np.ones((2, 3), np.uint8), [None, None], offsets)
    with pytest.raises(ValueError, match="row_keep must have 2 entries"):
        TreeSamples(np.ones((2, 2), np.uint8), [None], offsets)
    with pytest.raises(IndexError):
        TreeSamples(np.ones((2, 2), np.uint8), [None, None], offsets)[2]
