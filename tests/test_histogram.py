"""Per-era histogram kernel vs the NumPy oracle."""

import numpy as np
import pytest

from packboost import _histogram, _reference

from conftest import make_binned_problem


@pytest.mark.parametrize("n_rows, n_eras", [(1, 1), (7, 3), (500, 40), (2000, 1)])
@pytest.mark.parametrize("dtype", [np.uint8, np.uint16])
def test_histogram_matches_reference(n_rows, n_eras, dtype):
    data, g, h = make_binned_problem(n_rows + n_eras, n_rows, 4, n_eras)
    X = data.X_binned.astype(dtype)
    rng = np.random.default_rng(n_rows)
    rows = np.sort(rng.choice(n_rows, size=max(1, n_rows // 2), replace=False)).astype(np.int32)
    for feature in range(X.shape[0]):
        width = int(data.n_bins[feature]) + 1
        hist = _histogram.build_histogram(X, feature, rows, g, h, data.row_era, n_eras, width)
        ref_g, ref_h, ref_c = _reference.histogram(X, feature, rows, g, h, data.row_era,
                                                   n_eras, width)
        np.testing.assert_allclose(hist["sum_gradients"], ref_g, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(hist["sum_hessians"], ref_h, rtol=1e-12, atol=1e-12)
        np.testing.assert_array_equal(hist["count"], ref_c)
        assert hist["count"].sum() == len(rows)


def test_histogram_of_no_rows_is_zero():
    data, g, h = make_binned_problem(0, 10, 2, 3)
    hist = _histogram.build_histogram(data.X_binned, 0, np.zeros(0, np.int32), g, h,
                                      data.row_era, 3, int(data.n_bins[0]) + 1)
    assert hist["count"].sum() == 0 and not hist["sum_gradients"].any()
