"""Checks at the public boundary: inputs become arrays the kernels accept.

Every problem raises ``ValueError`` or ``TypeError`` naming the argument; the
kernels downstream assume valid input.
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
        row, column = (int(index[0]) for index in np.nonzero(np.isinf(X)))
        raise ValueError(
            f"Input {argument} contains infinity ({show(X[row, column])} at row {row}, column "
            f"{column}); use NaN for missing values"
        )
    return X, feature_names


def check_y(y, n_rows: int, *, argument: str = "y", several: bool = False) -> np.ndarray:
    """A finite float64 vector of ``n_rows`` targets, no larger than :data:`MAX_MAGNITUDE`.

    With ``several``, a 2-D ``y`` of two or more columns (one per target) is
    taken too and returned as a ``(n_rows, n_targets)`` float64 array; its
    values are finite or NaN (an unknown target), each column known somewhere.
    """
    if y is None:
        raise ValueError(f"fit requires y to be passed, but the target {argument} is None")
    if isinstance(y, (str, bytes)):
        raise TypeError(f"{argument} must be array-like, got {type(y).__name__} {y!r:.40}")
    y = _as_1d_array(y, argument)
    if y.ndim == 2 and y.shape[1] == 1:
        warnings.warn(
            f"A column-vector {argument} was passed when a 1d array was expected; "
            "it is ravelled.", _data_conversion_warning(), stacklevel=3)
        y = y[:, 0]
    if several and y.ndim == 2:
        if y.shape[1] == 0:
            raise ValueError(f"{argument} has no target column (shape {y.shape})")
    elif y.ndim != 1:
        raise ValueError(f"{argument} must be 1-dimensional" + (
            " or 2-dimensional (rows x targets)" if several else "")
            + f", got shape {y.shape}")
    if len(y) != n_rows:
        raise ValueError(f"{argument} has {len(y)} rows but X has {n_rows}")
    if np.iscomplexobj(y):
        raise ValueError(f"Complex data not supported: {argument} has dtype {y.dtype}")
    if y.dtype == object:
        missing = _missing_labels(y)
        if missing.any():
            row = int(np.argmax(missing))
            raise ValueError(f"Input {argument} contains NaN or another missing value "
                             f"({show(y[row])} at row {row})")
    if y.dtype.kind not in "biuf" and y.dtype != object and y.dtype.kind not in "US":
        raise ValueError(f"{argument} must be numeric, got dtype {y.dtype}")
    try:
        y = y.astype(np.float64)
    except (ValueError, TypeError):
        raise ValueError(f"{argument} must be numeric, got dtype {y.dtype}") from None
    if y.ndim == 2:
        # Several targets may be NaN where a target is unknown (Numerai's
        # auxiliary targets in their first and last eras): the row is left
        # out of that target's fit and metrics (docs/packs.md §10).
        for target in range(y.shape[1]):
            column = y[:, target]
            known = ~np.isnan(column)
            if n_rows and not known.any():
                raise ValueError(f"Input {argument}[:, {target}] is NaN in every row: a target "
                                 "needs a known value in at least one row")
            _check_finite(np.where(known, column, 0.0), f"{argument}[:, {target}]", "Input ")
            _check_magnitude(np.where(known, column, 0.0), f"{argument}[:, {target}]")
        return y
    _check_finite(y, argument, "Input ")
    _check_magnitude(y, argument)
    return y


def check_sample_weight(sample_weight, n_rows: int) -> np.ndarray | None:
    """None, or a finite non-negative float64 vector with a positive sum."""
    if sample_weight is None:
        return None
    if isinstance(sample_weight, (str, bytes)):
        raise TypeError(f"sample_weight must be array-like or a number, got "
                        f"{type(sample_weight).__name__} {sample_weight!r:.40}")
    if isinstance(sample_weight, numbers.Number) and not isinstance(sample_weight, bool):
        sample_weight = np.full(n_rows, sample_weight)
    weights = _as_1d_array(sample_weight, "sample_weight")
    if weights.ndim != 1 or len(weights) != n_rows:
        raise ValueError(
            f"sample_weight must have shape ({n_rows},) like X's rows, got {weights.shape}"
        )
    if weights.dtype.kind not in "biuf":
        raise TypeError(f"sample_weight must be numeric, got dtype {weights.dtype}")
    weights = weights.astype(np.float64)
    _check_finite(weights, "sample_weight", "")
    if (weights < 0).any():
        row = int(np.argmax(weights < 0))
        raise ValueError(
            f"sample_weight must be non-negative; found negative weights ({show(weights[row])} "
            f"at row {row})"
        )
    if weights.sum() <= 0:
        raise ValueError("sample_weight sums to zero: no row would count")
    _check_magnitude(weights, "sample_weight")
    return weights


# Targets, weights and their product are bounded, far from float64's 1.8e308,
# so that sums over rows (the base score, the gradients F - y) and the squares
# of errors (squared-error metrics, a user's own included) stay finite. Training
# itself does not depend on the scale: every round is grown on gradients and
# hessians rescaled by a power of two (_fixed_point.GradientScaling), so y * c
# gives the same trees for any c down to the smallest float64s; before, split
# gains of G**2 and era-gain variances of G**4 underflowed (no split for
# targets of 1e-150) or overflowed (other splits for targets of 1e80).
MAX_MAGNITUDE = 1e100


def check_gradient_scale(y: np.ndarray, sample_weight: np.ndarray | None) -> None:
    """Refuse targets x weights beyond :data:`MAX_MAGNITUDE` (the gradients' bound)."""
    if sample_weight is None or not len(y):
        return
    scale = float(np.nanmax(np.abs(y))) * float(np.max(sample_weight))  # NaN: unknown targets
    if scale > MAX_MAGNITUDE:
        raise ValueError(
            f"y times sample_weight reaches {scale:.3g} (max |y| = {np.nanmax(np.abs(y)):.3g}, "
            f"max sample_weight = {np.max(sample_weight):.3g}), beyond {MAX_MAGNITUDE:g}: squared "
            "weighted errors would near float64's limit (1.8e308); rescale y or the weights"
        )


def warn_unusual_params(params: dict) -> None:
    """Warn (``UserWarning``) about values that are allowed but rarely meant."""
    learning_rate = params["learning_rate"]
    if learning_rate > 1.0:
        warnings.warn(
            f"learning_rate={learning_rate!r} is above 1: every round overshoots its Newton "
            "step (for squared error, rates of 2 or more diverge and the predictions grow "
            "without bound); usual values are 0.01 to 0.3", UserWarning, stacklevel=5)


def era_order(codes: np.ndarray) -> np.ndarray:
    """The rows sorted by era code, stable (each era one contiguous span, its
    rows in their order; any small non-negative codes, as the Dask loading's
    shard codes). Codes of fewer than 2^16 eras are sorted as uint16,
    for which NumPy's stable sort is a radix sort: 5x faster than int32's
    merge sort at 2M rows."""
    codes = np.asarray(codes)
    if codes.size and 0 <= codes.min() and codes.max() < 1 << 16:
        codes = codes.astype(np.uint16)
    return np.argsort(codes, kind="stable")


def encode_eras(era, n_rows: int, *, argument: str = "era"):
    """Era labels -> (codes int32 0..n_eras-1 in sorted label order, labels).

    Any sortable labels: ints, floats, strings, bytes, dates, booleans, pandas
    categoricals. A missing label (NaN, None, NaT, ``pd.NA``) is an error:
    every row needs an era.
    """
    if era is None:
        return np.zeros(n_rows, dtype=np.int32), np.zeros(1, dtype=np.int64)
    if isinstance(era, (str, bytes)):
        raise TypeError(
            f"{argument}={era!r:.40} is a single label; pass one era per row, or the name of a "
            "column of a table X"
        )
    era = _as_1d_array(era, argument)
    if era.ndim != 1 or len(era) != n_rows:
        raise ValueError(f"{argument} must have shape ({n_rows},) like X's rows, got {era.shape}")
    if era.dtype.kind in "cV" or era.dtype.fields is not None:
        raise TypeError(f"{argument} labels must be sortable scalars, got dtype {era.dtype}")
    missing = _missing_labels(era)
    if missing is not None and missing.any():
        row = int(np.argmax(missing))
        raise ValueError(
            f"{argument} contains NaN or another missing label ({show(era[row])} at row {row}): "
            "every row needs an era"
        )
    try:
        labels, codes = np.unique(era, return_inverse=True)
    except TypeError as error:
        raise ValueError(f"{argument} labels cannot be ordered: {error}") from None
    return codes.astype(np.int32).ravel(), labels


def _as_1d_array(values, argument: str) -> np.ndarray:
    """``np.asarray`` of a vector-like (pandas/polars Series, arrow arrays, lists)."""
    if hasattr(values, "to_numpy") and not isinstance(values, np.ndarray):
        try:
            if type(values).__module__.startswith("pyarrow"):
                values = values.to_numpy(zero_copy_only=False)  # nulls need a copy
            else:
                values = values.to_numpy()
        except (TypeError, ValueError) as error:
            raise ValueError(f"{argument} cannot be converted to an array: {error}") from None
    try:
        return np.asarray(values)
    except (ValueError, TypeError) as error:
        raise ValueError(f"{argument} cannot be converted to an array: {error}") from None


def _missing_labels(era: np.ndarray) -> np.ndarray | None:
    """Boolean mask of missing era labels, or None when the dtype cannot hold any."""
    if era.dtype.kind == "f":
        return np.isnan(era)
    if era.dtype.kind in "mM":
        return np.isnat(era)
    if era.dtype == object:
        return np.fromiter((_is_missing_scalar(value) for value in era), dtype=bool,
                           count=len(era))
    return None


def _is_missing_scalar(value) -> bool:
    if value is None:
        return True
    if isinstance(value, float):
        return value != value
    if isinstance(value, (np.floating, np.datetime64, np.timedelta64)):
        return bool(np.isnan(value)) if isinstance(value, np.floating) else bool(np.isnat(value))
    # pandas.NA, pandas.NaT and friends, recognised without importing pandas.
    return type(value).__name__ in ("NAType", "NaTType")


def _check_finite(values: np.ndarray, argument: str, prefix: str) -> None:
    """NaN and infinity named with the first offending row (the phrases scikit-learn expects)."""
    nan = np.isnan(values)
    if nan.any():
        raise ValueError(f"{prefix}{argument} contains NaN (first at row {int(np.argmax(nan))})")
    inf = np.isinf(values)
    if inf.any():
        row = int(np.argmax(inf))
        raise ValueError(f"{prefix}{argument} contains infinity ({show(values[row])} at row {row})")


def _check_magnitude(values: np.ndarray, argument: str) -> None:
    if not len(values):
        return
    largest = float(np.max(np.abs(values)))
    if largest > MAX_MAGNITUDE:
        row = int(np.argmax(np.abs(values)))
        raise ValueError(
            f"{argument} has values up to {show(values[row])} (row {row}), beyond "
            f"{MAX_MAGNITUDE:g} in magnitude: squared errors would near float64's limit "
            f"(1.8e308); rescale {argument}"
        )


def show(value) -> str:
    """``repr`` of a value as Python writes it (NumPy 2 writes ``np.float64(1.0)``)."""
    if isinstance(value, (np.datetime64, np.timedelta64)):
        return str(value)
    if isinstance(value, np.generic):
        value = value.item()
    return repr(value)


def _data_conversion_warning():
    try:
        from sklearn.exceptions import DataConversionWarning
        return DataConversionWarning
    except ImportError:  # pragma: no cover
        return UserWarning


# Rows compared first: a feature that differs from y there cannot be y.
_TARGET_PROBE_ROWS = 1024


def warn_if_a_feature_is_the_target(X, y: np.ndarray, feature_names) -> None:
    """Warn when a column of ``X`` equals ``y`` (a table passed whole, its target
    column still in it): the model would learn nothing but that column.

    Cheap at any size: a probe of the first rows rules out almost every column
    before any is compared in full.
    """
    n_rows = X.shape[0]
    if n_rows < 2 or not np.issubdtype(np.asarray(X[:0]).dtype, np.number):
        return
    if y.ndim == 2:  # several targets: each of them
        for column in y.T:
            warn_if_a_feature_is_the_target(X, np.ascontiguousarray(column), feature_names)
        return
    probe = slice(0, min(n_rows, _TARGET_PROBE_ROWS))
    candidates = np.flatnonzero(np.all(np.asarray(X[probe], dtype=np.float64)
                                       == y[probe, np.newaxis], axis=0))
    equal = [int(column) for column in candidates
             if np.array_equal(np.asarray(X[:, column], dtype=np.float64), y)]
    if equal and np.ptp(y) > 0:
        names = [feature_names[column] if feature_names is not None else f"column {column}"
                 for column in equal]
        warnings.warn(f"X has a feature equal to the target y ({', '.join(map(str, names))}): "
                      "is the target column still in the table? The model would only learn "
                      "to copy it", UserWarning, stacklevel=4)
