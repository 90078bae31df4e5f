"""Checks at the public boundary: inputs become arrays the kernels accept.

Every problem raises ``ValueError`` or ``TypeError`` naming the argument; the
kernels downstream assume valid input (STYLE.md 9).
"""

from __future__ import annotations

import numbers
import warnings

import numpy as np

from packboost import _inputs

# dtypes the raw predictor and the binner take without a copy; others are
# converted to the nearest of these.
RAW_DTYPES = {np.dtype(t) for t in (np.float64, np.float32, np.int8, np.uint8, np.int16,
                                    np.int32, np.int64)}
_DTYPE_PROMOTION = {
    np.dtype(np.bool_): np.uint8,
    np.dtype(np.uint16): np.int32,
    np.dtype(np.uint32): np.int64,
    np.dtype(np.uint64): np.float64,
    np.dtype(np.float16): np.float32,
}


def _is_sparse(X) -> bool:
    return hasattr(X, "tocsr") or type(X).__module__.startswith("scipy.sparse")


def frame_column(X, name, argument: str):
    """Column ``name`` of a table ``X`` as an array, and X without it."""
    return _inputs.frame_column(X, name, argument)


def check_X(X, *, argument: str = "X"):
    """Validate a feature matrix.

    ``X`` may be a NumPy array, anything ``np.asarray`` takes, or a pandas,
    polars or pyarrow table. Returns ``(array, feature_names)``: a 2-D array
    of a dtype in :data:`RAW_DTYPES` (no copy when X already is one; int8
    Numerai data stays int8) and the column names of a table (None otherwise).
    NaN is allowed (missing); +-inf is not.
    """
    if X is None:
        raise TypeError(f"{argument} must be array-like, got None")
    if _is_sparse(X):
        raise TypeError(
            f"{argument} is a sparse matrix, which PackBoost does not support; "
            "convert it with X.toarray()"
        )
    X, feature_names = _inputs.as_matrix(X, argument=argument)

    if np.iscomplexobj(X):
        raise ValueError(f"Complex data not supported: {argument} has dtype {X.dtype}")
    if X.dtype == object or X.dtype.kind in "USV":
        try:
            X = X.astype(np.float64)
        except (ValueError, TypeError) as error:
            raise type(error)(
                f"{argument} must be numeric; converting dtype {X.dtype} to float failed: "
                f"{error}"
            ) from None
    if X.dtype.kind not in "biuf":
        raise TypeError(f"{argument} must be numeric, got dtype {X.dtype}")
    if X.ndim != 2:
        raise ValueError(
            f"Expected 2D array for {argument}, got {X.ndim}D array instead "
            f"(shape={X.shape}). Reshape your data with X.reshape(-1, 1) for a single "
            "feature or X.reshape(1, -1) for a single sample."
        )
    if X.shape[0] == 0:
        raise ValueError(
            f"Found array with 0 sample(s) (shape={X.shape}) while a minimum of 1 is "
            f"required ({argument})."
        )
    if X.shape[1] == 0:
        raise ValueError(
            f"Found array with 0 feature(s) (shape={X.shape}) while a minimum of 1 is "
            f"required ({argument})."
        )
    if X.dtype in _DTYPE_PROMOTION:
        X = X.astype(_DTYPE_PROMOTION[X.dtype])
    if X.dtype.byteorder not in "=|":
        X = X.astype(X.dtype.newbyteorder("="))
    if X.dtype.kind == "f" and np.isinf(X).any():
        raise ValueError(
            f"Input {argument} contains infinity; use NaN for missing values"
        )
    return X, feature_names


def check_y(y, n_rows: int, *, argument: str = "y") -> np.ndarray:
    """A finite float64 vector of ``n_rows`` targets."""
    if y is None:
        raise ValueError(f"fit requires y to be passed, but the target {argument} is None")
    y = np.asarray(y)
    if y.ndim == 2 and y.shape[1] == 1:
        warnings.warn(
            f"A column-vector {argument} was passed when a 1d array was expected; "
            "it is ravelled.", _data_conversion_warning(), stacklevel=3)
        y = y[:, 0]
    if y.ndim != 1:
        raise ValueError(f"{argument} must be 1-dimensional, got shape {y.shape}")
    if len(y) != n_rows:
        raise ValueError(f"{argument} has {len(y)} rows but X has {n_rows}")
    if np.iscomplexobj(y):
        raise ValueError(f"Complex data not supported: {argument} has dtype {y.dtype}")
    try:
        y = y.astype(np.float64)
    except (ValueError, TypeError):
        raise ValueError(f"{argument} must be numeric, got dtype {y.dtype}") from None
    if np.isnan(y).any():
        raise ValueError(f"Input {argument} contains NaN.")
    if np.isinf(y).any():
        raise ValueError(f"Input {argument} contains infinity.")
    return y


def check_sample_weight(sample_weight, n_rows: int) -> np.ndarray | None:
    """None, or a finite non-negative float64 vector with a positive sum."""
    if sample_weight is None:
        return None
    if isinstance(sample_weight, numbers.Number):
        sample_weight = np.full(n_rows, sample_weight, dtype=np.float64)
    weights = np.asarray(sample_weight)
    if weights.ndim != 1 or len(weights) != n_rows:
        raise ValueError(
            f"sample_weight must have shape ({n_rows},) like X's rows, got {weights.shape}"
        )
    try:
        weights = weights.astype(np.float64)
    except (ValueError, TypeError):
        raise ValueError(f"sample_weight must be numeric, got dtype {weights.dtype}") from None
    if not np.isfinite(weights).all():
        raise ValueError("sample_weight contains NaN or infinity")
    if (weights < 0).any():
        raise ValueError("sample_weight must be non-negative; found negative weights")
    if weights.sum() <= 0:
        raise ValueError("sample_weight sums to zero: no row would count")
    return weights


def encode_eras(era, n_rows: int, *, argument: str = "era"):
    """Era labels -> (codes int32 0..n_eras-1 in sorted label order, labels)."""
    if era is None:
        return np.zeros(n_rows, dtype=np.int32), np.zeros(1, dtype=np.int64)
    era = np.asarray(era)
    if era.ndim != 1 or len(era) != n_rows:
        raise ValueError(f"{argument} must have shape ({n_rows},) like X's rows, got {era.shape}")
    if era.dtype.kind == "f" and np.isnan(era).any():
        raise ValueError(f"{argument} contains NaN: every row needs an era")
    if era.dtype == object and any(value is None for value in era):
        raise ValueError(f"{argument} contains None: every row needs an era")
    try:
        labels, codes = np.unique(era, return_inverse=True)
    except TypeError as error:
        raise ValueError(f"{argument} labels cannot be ordered: {error}") from None
    return codes.astype(np.int32).ravel(), labels


def _data_conversion_warning():
    try:
        from sklearn.exceptions import DataConversionWarning
        return DataConversionWarning
    except ImportError:  # pragma: no cover
        return UserWarning
