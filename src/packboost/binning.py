"""Feature binning: raw values to small integer bin codes (docs/data-layout.md §1).

Every split PackBoost considers is a threshold on a bin code, so the binned
matrix is all the tree kernels ever read. :class:`BinMapper` learns, per feature,
a sorted list of cut points and maps each value to the number of cuts below it;
NaN gets a dedicated code one past the last ordinary bin. The mapper is part of
the model (``to_arrays`` / ``from_arrays``), so prediction bins raw values with
exactly the cuts used in training.
"""

# Notes:
#
# For feature k with cuts c_0 < c_1 < ... < c_{m-1} (m = n_bins_[k] - 1):
#
#     x <= c_0 | c_0 < x <= c_1 | ... | c_{m-2} < x <= c_{m-1} | x > c_{m-1} |   NaN
#      bin 0   |     bin 1      | ... |        bin m-1         |    bin m    | bin m+1
#                                                                           (missing)
#
# bin(x) = #{cuts < x} = np.searchsorted(cuts, x, side="left"), so a value equal
# to a cut goes left and "bin <= t" is exactly "x <= c_t". Cuts are finite and
# strictly increasing, which keeps that equivalence exact and lets model files
# store them as plain float64.
#
# Integer input already in [0, max_bins) (Numerai's int8 0..4) is taken as bin
# codes. Its cuts are 0, 1, ..., n_bins-2, so the same searchsorted rule is the
# identity on in-range integers and clips out-of-range ones; no special case is
# needed at prediction time.

from __future__ import annotations

import numpy as np

from packboost._binning import map_to_bins
from packboost._threads import available_cpus

__all__ = ["BinMapper"]

# The largest finite float64; cuts are clipped into [-_FLOAT_MAX, _FLOAT_MAX].
_FLOAT_MAX = float(np.finfo(np.float64).max)

_MAX_BINS_LIMIT = 65535  # non-missing bins; the missing code must still fit in uint16

_ARRAY_KEYS = ("bin_n_bins", "bin_cuts", "bin_cut_offsets")

# Input dtypes the binning kernel reads directly (packboost/_types.pxd X_RAW_C).
_KERNEL_DTYPES = {np.dtype(t) for t in (np.float64, np.float32, np.int8, np.uint8, np.int16,
                                        np.int32, np.int64)}


class BinMapper:
    """Map raw feature values to per-feature bin codes.

    Parameters
    ----------
    max_bins : int, default=255
        Maximum number of non-missing bins per feature, in ``[2, 65535]``. The
        missing bin comes on top, so ``max_bins=255`` still fits ``uint8``.
    subsample : int, default=200_000
        Number of rows sampled (without replacement) to place quantile cuts
        when a feature has more than ``max_bins`` distinct values. All rows are
        used when there are no more than this.
    random_state : int, numpy.random.Generator or None, default=None
        Seed of the row subsample, passed to :func:`numpy.random.default_rng`.
        An int makes ``fit`` deterministic.

    Attributes
    ----------
    n_features_in_ : int
        Number of features seen in ``fit``.
    n_bins_ : ndarray of int32, shape (n_features,)
        Number of non-missing bins of each feature (at least 1). The missing
        code of feature ``k`` is ``n_bins_[k]``.
    cuts_ : list of ndarray of float64
        ``cuts_[k]`` holds the ``n_bins_[k] - 1`` finite, strictly increasing
        cut points of feature ``k``; a non-NaN value ``x`` goes to bin
        ``np.searchsorted(cuts_[k], x, side="left")``.
    prebinned_ : bool
        True when the training input was integer-typed with every value in
        ``[0, max_bins)`` and was therefore used as bin codes directly.
    binned_dtype_ : type
        ``numpy.uint8`` when every code, the missing code included, fits in
        256 values, else ``numpy.uint16``.

    Notes
    -----
    Features with at most ``max_bins`` distinct non-NaN values get exact cuts,
    at the midpoint of each pair of consecutive distinct values. Others get
    cuts at the ``max_bins``-quantiles of the subsample (midpoint
    interpolation), less repeated cuts and cuts that would bound a bin holding
    no sampled value, so heavily tied features may get fewer bins.
    ``+inf`` and ``-inf`` are ordinary (largest and smallest) values. Integer
    input is binned through float64, so int64 values beyond 2**53 may share
    a bin with their float64 neighbours.
    """

    def __init__(self, max_bins=255, subsample=200_000, random_state=None):
        self.max_bins = max_bins
        self.subsample = subsample
        self.random_state = random_state

    # ------------------------------------------------------------------ fit

    def fit(self, X):
        """Learn the cut points of every feature.

        Parameters
        ----------
        X : ndarray of shape (n_rows, n_features)
            Numeric matrix (any float or integer width; bool is read as 0/1).
            Floats may hold NaN (missing) and +-inf.

        Returns
        -------
        self : BinMapper
        """
        max_bins = _check_max_bins(self.max_bins)
        _check_positive_int(self.subsample, "subsample")
        X = _as_numeric_matrix(X)
        n_rows, n_features = X.shape

        column_max = _prebinned_column_max(X, max_bins)
        self.prebinned_ = column_max is not None
        if self.prebinned_:
            self.n_bins_ = (column_max + 1).astype(np.int32)
            self.cuts_ = [np.arange(n - 1, dtype=np.float64) for n in self.n_bins_]
        else:
            sample_idx = self.sample_rows(n_rows)
            self._set_cuts([_find_cuts(X[:, k], sample_idx, max_bins)
                            for k in range(n_features)])
        self.n_features_in_ = n_features
        self.binned_dtype_ = _binned_dtype(self.n_bins_)
        return self

    def sample_rows(self, n_rows):
        """The rows :meth:`fit` places quantile cuts from, for an ``X`` of
        ``n_rows`` rows that is not pre-binned: ascending indices, or None
        (every row)."""
        subsample = _check_positive_int(self.subsample, "subsample")
        if n_rows <= subsample:
            return None
        rng = np.random.default_rng(self.random_state)
        # One row sample shared by all features; sorted so the gathers walk
        # memory forwards.
        return np.sort(rng.choice(n_rows, size=subsample, replace=False))

    def fit_sample(self, sample, column_distinct):
        """Fit as :meth:`fit` fits an ``X`` that is not pre-binned, without
        ``X``: ``sample`` is ``X[sample_rows(n_rows)]``, and
        ``column_distinct(features)`` returns, for each of ``features``, the
        sorted distinct non-NaN values of the whole column, or None where
        there are more than ``max_bins`` (the features whose sample has at
        most ``max_bins``; :meth:`fit` checks those against the full column).
        The cuts are :meth:`fit`'s exactly. For data too large for one
        machine (:mod:`packboost.dask`: the workers hold the columns)."""
        max_bins = _check_max_bins(self.max_bins)
        sample = _as_numeric_matrix(sample)
        columns = [sample[:, k].astype(np.float64) for k in range(sample.shape[1])]
        columns = [column[~np.isnan(column)] for column in columns]
        distinct = [np.unique(column) for column in columns]
        few = [k for k, values in enumerate(distinct) if values.size <= max_bins]
        everything = dict(zip(few, column_distinct(few) if few else [], strict=True))
        cuts = []
        for k, column in enumerate(columns):
            if k not in everything:
                cuts.append(_quantile_cuts(column, max_bins))
            elif everything[k] is not None:
                # distinct[k] holds every value of the column exactly when the
                # two sets are equal; the exact cuts of all values either way.
                cuts.append(_exact_cuts(np.asarray(everything[k], dtype=np.float64)))
            elif column.size:
                cuts.append(_quantile_cuts(column, max_bins))
            else:
                raise NotImplementedError(
                    f"feature {k}: the row sample holds no value but the column holds more "
                    f"than max_bins={max_bins} distinct ones; bin it first")
        self.prebinned_ = False
        self._set_cuts(cuts)
        self.n_features_in_ = len(cuts)
        self.binned_dtype_ = _binned_dtype(self.n_bins_)
        return self

    def _set_cuts(self, cuts) -> None:
        self.cuts_ = cuts
        self.n_bins_ = np.array([c.size + 1 for c in cuts], dtype=np.int32)

    # ------------------------------------------------------------ transform

    def transform(self, X, row_order=None, n_threads=None):
        """Bin ``X`` into a feature-major matrix of codes.

        Parameters
        ----------
        X : ndarray of shape (n_rows, n_features)
            Numeric matrix with the fitted number of features.
        row_order : ndarray of int, shape (n_rows_out,), optional
            Rows of ``X`` to emit, in this order (e.g. the era-sorted order);
            all rows in order when None.

        Returns
        -------
        X_binned : ndarray of shape (n_features, n_rows_out)
            C-contiguous, dtype ``binned_dtype_``; ``X_binned[k, i]`` is the
            code of ``X[row_order[i], k]``. When the mapper is pre-binned, ``X``
            is an F-contiguous int8/uint8 matrix whose values lie in the fitted
            range and ``row_order`` is None or the identity, this is a
            read-only view of ``X`` (no copy).
        n_threads : int, optional
            Threads of the binning kernel (default: the CPUs available).
        """
        return self._transform(X, row_order, n_threads, range_checked=False)

    def fit_transform(self, X, row_order=None, n_threads=None):
        """Fit on ``X``, then bin it; see :meth:`fit` and :meth:`transform`."""
        X = _as_numeric_matrix(X)
        self.fit(X)
        # A pre-binned fit has just measured every column's range on this very
        # matrix, so the zero-copy path need not scan it again.
        return self._transform(X, row_order, n_threads, range_checked=True)

    def _transform(self, X, row_order, n_threads, range_checked):
        self._check_fitted()
        X = _as_numeric_matrix(X)
        n_rows, n_features = X.shape
        if n_features != self.n_features_in_:
            raise ValueError(
                f"X has {n_features} features, but the BinMapper was fitted with "
                f"{self.n_features_in_} features."
            )
        row_order = _check_row_order(row_order, n_rows)

        # Integers into a pre-binned mapper are their own codes when no value
        # needs clipping; a scan for that is far cheaper than a clip per value.
        integer_codes = self.prebinned_ and X.dtype.kind in "iu"
        in_range = integer_codes and (range_checked or _codes_in_range(X, self.n_bins_))

        if in_range and self._can_share_memory(X, row_order):
            view = X.T.view(np.uint8)
            # The caller's data must not be changed through the binned matrix.
            view.flags.writeable = False
            return view

        n_rows_out = n_rows if row_order is None else row_order.size
        X_binned = np.empty((n_features, n_rows_out), dtype=self.binned_dtype_)
        self._bin(X, X_binned, row_order, None, n_threads, in_range)
        return X_binned

    def transform_into(self, X, out, rows, columns, n_threads=None):
        """Bin rows ``rows`` of ``X`` into columns ``columns`` of ``out``:
        ``out[k, columns[i]]`` becomes the code of ``X[rows[i], k]`` (a
        Dask shard binning the rows of its partitions into their places).

        ``out`` is a C-contiguous (n_features, n) array of ``binned_dtype_``;
        ``rows`` and ``columns`` integer arrays of one length.
        """
        self._check_fitted()
        X = _as_numeric_matrix(X)
        if X.shape[1] != self.n_features_in_:
            raise ValueError(f"X has {X.shape[1]} features, but the BinMapper was fitted "
                             f"with {self.n_features_in_} features.")
        if (not isinstance(out, np.ndarray) or out.dtype != self.binned_dtype_
                or out.ndim != 2 or out.shape[0] != self.n_features_in_
                or not out.flags.c_contiguous or not out.flags.writeable):
            raise ValueError(f"out must be a writeable C-contiguous ({self.n_features_in_}, "
                             f"n) array of {np.dtype(self.binned_dtype_).name}")
        rows = _check_row_order(rows, X.shape[0])
        columns = np.ascontiguousarray(columns, dtype=np.int64)
        if rows is None or columns.shape != rows.shape:
            raise ValueError("rows and columns must be 1-D arrays of one length")
        integer_codes = self.prebinned_ and X.dtype.kind in "iu"
        in_range = integer_codes and _codes_in_range(X, self.n_bins_)
        self._bin(X, out, rows, columns, n_threads, in_range)

    def _bin(self, X, out, row_order, out_columns, n_threads, in_range):
        """The binning kernel (packboost._binning.map_to_bins) on ``X``."""
        if X.dtype not in _KERNEL_DTYPES:
            X = X.astype(np.int64 if X.dtype.kind in "iu" and X.itemsize < 8 else np.float64)
        arrays = self.to_arrays()
        map_to_bins(X, arrays["bin_cuts"], arrays["bin_cut_offsets"], arrays["bin_n_bins"],
                    np.zeros(0, dtype=np.int64) if row_order is None
                    else row_order.astype(np.int64, copy=False),
                    out, available_cpus() if n_threads is None else int(n_threads),
                    codes_are_values=bool(in_range), out_columns=out_columns)

    def _can_share_memory(self, X, row_order):
        """Whether ``X.T`` (in-range codes) can be returned as the binned matrix."""
        if not (
            X.dtype in (np.uint8, np.int8)
            and self.binned_dtype_ is np.uint8
            and X.flags.f_contiguous
        ):
            return False
        n_rows = X.shape[0]
        return row_order is None or (
            row_order.size == n_rows and np.array_equal(row_order, np.arange(n_rows))
        )

    # -------------------------------------------------------- serialisation

    def to_arrays(self):
        """Return the fitted cuts as flat arrays for a model file.

        Returns
        -------
        arrays : dict of str to ndarray
            ``"bin_n_bins"`` (int32, shape (n_features,)), ``"bin_cuts"``
            (float64, every feature's cuts concatenated) and
            ``"bin_cut_offsets"`` (int64, shape (n_features + 1,)); the cuts of
            feature ``k`` are ``bin_cuts[offsets[k]:offsets[k + 1]]``.
        """
        self._check_fitted()
        offsets = np.zeros(self.n_features_in_ + 1, dtype=np.int64)
        np.cumsum(self.n_bins_.astype(np.int64) - 1, out=offsets[1:])
        if self.cuts_:
            cuts = np.concatenate(self.cuts_).astype(np.float64, copy=False)
        else:
            cuts = np.empty(0, dtype=np.float64)
        return {
            "bin_n_bins": self.n_bins_.copy(),
            "bin_cuts": cuts,
            "bin_cut_offsets": offsets,
        }

    def to_metadata(self):
        """Return the scalar settings needed by :meth:`from_arrays` (JSON-safe)."""
        self._check_fitted()
        return {
            "max_bins": int(self.max_bins),
            "subsample": int(self.subsample),
            "prebinned": bool(self.prebinned_),
        }

    @classmethod
    def from_arrays(cls, metadata, arrays):
        """Rebuild a fitted mapper from :meth:`to_metadata` and :meth:`to_arrays`.

        The inputs come from model files, so they are checked for consistency.

        Parameters
        ----------
        metadata : dict
            Must hold ``"max_bins"`` and ``"prebinned"``; ``"subsample"`` is
            optional.
        arrays : mapping of str to ndarray
            Must hold ``"bin_n_bins"``, ``"bin_cuts"`` and ``"bin_cut_offsets"``.

        Returns
        -------
        mapper : BinMapper

        Raises
        ------
        ValueError
            If an entry is missing, has the wrong shape or type, or the arrays
            disagree with one another.
        """
        if not isinstance(metadata, dict):
            raise ValueError(f"metadata must be a dict, got {type(metadata).__name__}.")
        for key in ("max_bins", "prebinned"):
            if key not in metadata:
                raise ValueError(f"BinMapper metadata is missing {key!r}.")
        max_bins = _check_max_bins(metadata["max_bins"])
        subsample = _check_positive_int(metadata.get("subsample", 200_000), "subsample")
        prebinned = metadata["prebinned"]
        if not isinstance(prebinned, (bool, np.bool_)):
            raise ValueError(f"prebinned must be a bool, got {prebinned!r}.")

        missing = [key for key in _ARRAY_KEYS if key not in arrays]
        if missing:
            raise ValueError(f"BinMapper arrays are missing {missing}.")
        n_bins = _checked_array(arrays["bin_n_bins"], "bin_n_bins", "iu", np.int32)
        cuts = _checked_array(arrays["bin_cuts"], "bin_cuts", "f", np.float64)
        offsets = _checked_array(arrays["bin_cut_offsets"], "bin_cut_offsets", "iu", np.int64)

        n_features = n_bins.size
        if n_features and (n_bins.min() < 1 or n_bins.max() > max_bins):
            raise ValueError(f"bin_n_bins must lie in [1, max_bins={max_bins}].")
        if offsets.size != n_features + 1:
            raise ValueError(
                f"bin_cut_offsets has {offsets.size} entries; expected n_features + 1 = "
                f"{n_features + 1}."
            )
        if offsets[0] != 0 or not np.array_equal(np.diff(offsets), n_bins.astype(np.int64) - 1):
            raise ValueError("bin_cut_offsets do not match bin_n_bins - 1 cuts per feature.")
        if offsets[-1] != cuts.size:
            raise ValueError(
                f"bin_cuts has {cuts.size} values; bin_cut_offsets expect {offsets[-1]}."
            )
        if not np.all(np.isfinite(cuts)):
            raise ValueError("bin_cuts must be finite.")
        per_feature = [cuts[offsets[k] : offsets[k + 1]].copy() for k in range(n_features)]
        for feature_idx, feature_cuts in enumerate(per_feature):
            if np.any(np.diff(feature_cuts) <= 0):
                raise ValueError(f"bin_cuts of feature {feature_idx} are not strictly increasing.")
            if prebinned and not np.array_equal(
                feature_cuts, np.arange(feature_cuts.size, dtype=np.float64)
            ):
                raise ValueError(
                    f"bin_cuts of pre-binned feature {feature_idx} must be 0, 1, ..., n_bins - 2."
                )

        mapper = cls(max_bins=max_bins, subsample=subsample)
        mapper.prebinned_ = bool(prebinned)
        mapper.n_bins_ = n_bins
        mapper.cuts_ = per_feature
        mapper.n_features_in_ = n_features
        mapper.binned_dtype_ = _binned_dtype(n_bins)
        return mapper

    def _check_fitted(self):
        if not hasattr(self, "n_bins_"):
            raise ValueError("This BinMapper is not fitted yet; call fit first.")


# --------------------------------------------------------------------- helpers


def _check_max_bins(max_bins):
    if (
        isinstance(max_bins, (bool, np.bool_))
        or not isinstance(max_bins, (int, np.integer))
        or not 2 <= max_bins <= _MAX_BINS_LIMIT
    ):
        raise ValueError(f"max_bins must be an int in [2, {_MAX_BINS_LIMIT}], got {max_bins!r}.")
    return int(max_bins)


def _check_positive_int(value, name):
    if (
        isinstance(value, (bool, np.bool_))
        or not isinstance(value, (int, np.integer))
        or value < 1
    ):
        raise ValueError(f"{name} must be a positive int, got {value!r}.")
    return int(value)


def _as_numeric_matrix(X):
    X = np.asarray(X)
    if X.ndim != 2:
        raise ValueError(f"X must be 2-D, got an array with shape {X.shape}.")
    if X.dtype == np.bool_:
        # Same bytes, and 0/1 are valid pre-binned codes: keeps the zero-copy path.
        return X.view(np.uint8)
    if X.dtype.kind not in "iuf":
        raise TypeError(f"X must have a float or integer dtype, got {X.dtype}.")
    return X


def _check_row_order(row_order, n_rows):
    if row_order is None:
        return None
    row_order = np.asarray(row_order)
    if row_order.ndim != 1 or (row_order.dtype.kind not in "iu" and row_order.size > 0):
        raise ValueError(
            f"row_order must be a 1-D integer array, got dtype {row_order.dtype} and "
            f"shape {row_order.shape}."
        )
    row_order = row_order.astype(np.intp, copy=False)
    if row_order.size and (row_order.min() < 0 or row_order.max() >= n_rows):
        raise ValueError(f"row_order must index rows in [0, {n_rows}).")
    return row_order


def _prebinned_column_max(X, max_bins):
    """Per-column maxima (int64) if ``X`` holds bin codes already, else None.

    ``X`` holds bin codes when it is integer-typed with every value in
    ``[0, max_bins)``.
    """
    if X.dtype.kind not in "iu":
        return None
    n_features = X.shape[1]
    if X.size == 0:
        return np.zeros(n_features, dtype=np.int64)
    if X.dtype.kind == "i" and X.min() < 0:
        return None
    column_max = X.max(axis=0)
    if n_features and column_max.max() >= max_bins:
        return None
    return column_max.astype(np.int64)


def _checked_array(value, name, kinds, dtype):
    """A 1-D copy of ``value`` as ``dtype``, rejecting other kinds and overflow."""
    array = np.asarray(value)
    if array.ndim != 1 or array.dtype.kind not in kinds:
        raise ValueError(
            f"{name} must be a 1-D array of kind {kinds!r}, got dtype {array.dtype} and "
            f"shape {array.shape}."
        )
    if array.dtype.kind in "iu" and array.size:
        info = np.iinfo(dtype)
        if array.min() < info.min or array.max() > info.max:
            raise ValueError(f"{name} has values outside the range of {np.dtype(dtype)}.")
    # A copy, so the mapper never aliases a memory-mapped model file.
    return array.astype(dtype)


def _binned_dtype(n_bins):
    # +1 for the missing code, which sits one past the last ordinary bin.
    largest = int(n_bins.max()) + 1 if n_bins.size else 1
    return np.uint8 if largest <= 256 else np.uint16


def _codes_in_range(X, n_bins):
    """Whether every value of integer ``X`` lies in ``[0, n_bins[k])`` for its column."""
    if X.size == 0:
        return True
    if X.dtype.kind == "i" and X.min() < 0:
        return False
    return bool(np.all(X.max(axis=0) < n_bins))


def distinct_values(column, max_bins):
    """The sorted distinct non-NaN values of ``column``, or None where there
    are more than ``max_bins`` (a part of a column: :meth:`BinMapper.fit_sample`
    takes the union of its parts')."""
    column = np.asarray(column, dtype=np.float64)
    values = np.unique(column[~np.isnan(column)])
    return None if values.size > max_bins else values


def _find_cuts(column, sample_idx, max_bins):
    """Cut points of one feature (see the module notes for the rule)."""
    column = column.astype(np.float64, copy=False)
    sample = column if sample_idx is None else column[sample_idx]
    sample = sample[~np.isnan(sample)]
    distinct = np.unique(sample)
    if distinct.size > max_bins:
        return _quantile_cuts(sample, max_bins)
    if sample_idx is not None:
        # The subsample may have missed rare values; exact cuts must separate
        # every value of the column, so check it in full (a binary search per
        # value, cheaper than sorting the column).
        present = column[~np.isnan(column)]
        if not _all_in(present, distinct):
            distinct = np.unique(present)
            if distinct.size > max_bins:
                return _quantile_cuts(sample if sample.size else present, max_bins)
    return _exact_cuts(distinct)


def _all_in(values, distinct):
    """Whether every element of ``values`` occurs in the sorted ``distinct``."""
    if distinct.size == 0:
        return values.size == 0
    positions = np.minimum(np.searchsorted(distinct, values), distinct.size - 1)
    return bool(np.array_equal(distinct[positions], values))


def _exact_cuts(distinct):
    """Midpoints between consecutive sorted distinct values."""
    if distinct.size < 2:
        return np.empty(0, dtype=np.float64)
    # Clipping to finite values can make neighbouring cuts equal; drop repeats.
    return np.unique(_midpoints(distinct[:-1], distinct[1:]))


def _quantile_cuts(values, max_bins):
    """Cuts at the ``max_bins``-quantiles of ``values`` (midpoint interpolation).

    Quantile ``j / max_bins`` sits at position ``j * (n - 1) / max_bins`` of the
    sorted values; it is computed in integers so ties between positions do not
    depend on float rounding.
    """
    sorted_values = np.sort(values)
    n_values = sorted_values.size
    numerators = np.arange(1, max_bins, dtype=np.int64) * (n_values - 1)
    lower = numerators // max_bins
    upper = lower + (numerators % max_bins != 0)
    cuts = _midpoints(sorted_values[lower], sorted_values[upper])
    # With ties, neighbouring quantiles can bound a bin that holds no sampled
    # value (e.g. cuts 0.0 and 0.5 inside a run of zeros followed by ones), and
    # a cut at the largest value opens an empty top bin. Such bins only spend the
    # bin budget on thresholds that split nothing: keep a cut only if it takes at
    # least one more value to its left than the cut before it, and leaves some
    # to its right. This also removes repeated cuts.
    n_left = np.searchsorted(sorted_values, cuts, side="right")
    keep = (np.diff(n_left, prepend=0) > 0) & (n_left < n_values)
    return cuts[keep]


def _midpoints(low, high):
    """Finite cuts ``m`` with ``low <= m < high`` (``m = low`` where they are equal).

    ``(low + high) / 2`` can overflow, turn inf into NaN, or round onto
    ``high`` for neighbouring floats; any of those would break the rule
    "``x <= cut`` goes left". The one pair that has no finite cut between them,
    ``(-inf, -FLOAT_MAX)``, ends up sharing a bin.
    """
    low_finite = np.clip(low, -_FLOAT_MAX, _FLOAT_MAX)
    high_finite = np.clip(high, -_FLOAT_MAX, _FLOAT_MAX)
    # Halving first cannot overflow.
    mid = 0.5 * low_finite + 0.5 * high_finite
    rounded_up = mid >= high
    with np.errstate(over="ignore"):  # below -FLOAT_MAX is -inf; clipped at the end
        mid[rounded_up] = np.nextafter(high[rounded_up], -np.inf)
    mid = np.maximum(mid, low)
    mid = np.where(low == high, low, mid)
    return np.clip(mid, -_FLOAT_MAX, _FLOAT_MAX)
