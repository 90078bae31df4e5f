"""Cross-validation over eras: whole eras per fold, an embargo around each test block.

Rows of one era share a time (and, on Numerai, overlapping targets), so a fold
must keep every era whole, and the eras right next to a test block leak into
it through the target's horizon: ``embargo`` of them are dropped from training
on each side. Both splitters follow scikit-learn's protocol (``split(X, y,
groups)`` and ``get_n_splits``) with ``groups`` the era label of every row, so
they work with ``cross_val_score``, ``cross_validate`` and ``GridSearchCV``
(``cv=EraKFold(5, embargo=4)``, ``groups=era``) without scikit-learn being
needed to import them. Eras are in the declared order of an ordered
categorical (pandas ``ordered=True``, polars ``Enum``), otherwise in the order
of their labels (``np.unique``): give labels that sort in time (ints,
zero-padded strings, dates) or declare the order.

The eras must reach the model too, or every fold trains without them (DES
then sees one era). With scikit-learn's metadata routing on
(``sklearn.set_config(enable_metadata_routing=True)``) a search's
``fit(X, y, era=era)`` gives each fold's eras to the splitters (they take
``era`` as their ``groups``: pass ``era=``, not ``groups=``), to the estimator's ``fit`` (after
``set_fit_request(era=True)``) and to the scorers of
:func:`packboost.metrics.make_era_scorer`. Without routing, pass ``era=era``
beside ``groups=era`` (a search's ``fit`` slices it per fold; for
``cross_validate``: ``params={"era": era}``). A PackBoost fit that gets no era
inside a search or cross-validation over one of these splitters warns
(:class:`EraNotPassedWarning`).
"""

from __future__ import annotations

import numbers
import sys
import warnings

import numpy as np

from packboost import _validation


class EraNotPassedWarning(UserWarning):
    """A model was fitted without eras inside a cross-validation over eras."""


def _check_int(name: str, value, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an int, got {value!r}")
    if value < low:
        raise ValueError(f"{name} must be at least {low}, got {value}")
    return int(value)


def _era_codes(X, groups) -> tuple[np.ndarray, int]:
    """(era index of every row in time order, number of eras) from ``groups``.

    Time order is the declared order of an ordered categorical (pandas
    ``ordered=True``, polars ``Enum``), otherwise the labels' own order
    (numbers, strings, dates); labels that cannot be ordered, and missing
    ones (NaN, None, NaT, ``pd.NA``), are refused as the estimators refuse
    them for ``era``.
    """
    if groups is None:
        raise ValueError("groups must be the era label of every row (groups=era), got None")
    n_rows = (getattr(X, "shape", (len(X),))[0] if X is not None
              else len(groups) if hasattr(groups, "__len__") else None)
    declared = _declared_order_codes(groups)
    if declared is not None:
        if declared.ndim == 1 and len(declared) != n_rows:
            raise ValueError(f"groups has {len(declared)} labels but X has {n_rows} rows")
        # Positions in the declared order, made consecutive (unused categories dropped).
        ranks, codes = np.unique(declared, return_inverse=True)
        return codes.reshape(-1), len(ranks)
    shape = np.shape(groups)
    if len(shape) != 1:
        raise ValueError(f"groups must be 1-D (one era label per row), got shape {shape}")
    if shape[0] != n_rows:
        raise ValueError(f"groups has {shape[0]} labels but X has {n_rows} rows")
    codes, labels = _validation.encode_eras(groups, n_rows, argument="groups")
    return codes.astype(np.intp), len(labels)


def _declared_order_codes(groups) -> np.ndarray | None:
    """Each row's position in the categories of an ordered categorical, or
    None for labels without a declared order. A missing label is refused."""
    dtype = getattr(groups, "dtype", None)
    if hasattr(dtype, "categories") and hasattr(dtype, "ordered"):
        # pandas: a Series, Categorical or CategoricalIndex
        codes = np.asarray(getattr(groups, "cat", groups).codes)
        missing = codes < 0
        if not dtype.ordered:
            _check_unordered_categories(dtype.categories, codes[~missing])
            return None
    elif type(dtype).__name__ == "Enum" and type(dtype).__module__.startswith("polars"):
        physical = groups.to_physical()
        missing = physical.is_null().to_numpy()
        codes = physical.fill_null(0).to_numpy()
    else:
        return None
    if missing.any():
        row = int(np.argmax(missing))
        raise ValueError(f"groups contains NaN or another missing label (at row {row}): "
                         "every row needs an era")
    return codes.astype(np.int64)


def _check_unordered_categories(categories, codes: np.ndarray) -> None:
    """An unordered pandas categorical is ordered by its labels, as plain
    labels are; pandas itself sorts it by its categories. Where the two
    orders of its eras differ, which one is time is not said: refused."""
    present = list(categories[np.unique(codes)])
    try:
        agree = present == sorted(present)
    except TypeError:
        agree = False
    if not agree:
        raise ValueError(
            f"groups is an unordered categorical whose categories {present[:6]} are not in "
            "the order of their labels, so the eras' time order is ambiguous: declare it "
            "(pd.Categorical(..., ordered=True) orders eras by the categories) or pass the "
            "labels themselves (ordered as they sort)")


def _rows(codes: np.ndarray, eras: np.ndarray) -> np.ndarray:
    keep = np.zeros(codes.max() + 1 if len(codes) else 0, dtype=bool)
    keep[eras] = True
    return np.flatnonzero(keep[codes])


class EraKFold:
    """K folds of consecutive eras; each fold's eras are the test set once.

    Parameters
    ----------
    n_splits : int, default=5
        Number of folds (at least 2, at most the number of eras).
    embargo : int, default=0
        Eras dropped from training on each side of the test block.

    With 10 eras, ``EraKFold(5, embargo=1)`` tests on eras 4-5 while training
    on eras 0-2 and 7-9 (3 and 6 are embargoed).
    """

    def __init__(self, n_splits: int = 5, *, embargo: int = 0):
        self.n_splits = _check_int("n_splits", n_splits, 2)
        self.embargo = _check_int("embargo", embargo, 0)

    def __repr__(self) -> str:
        return f"EraKFold(n_splits={self.n_splits}, embargo={self.embargo})"

    def get_n_splits(self, X=None, y=None, groups=None) -> int:
        return self.n_splits

    def get_metadata_routing(self):
        """scikit-learn's routing: ``split`` takes the routed ``era`` as its ``groups``."""
        return _split_request(type(self).__name__)

    def split(self, X, y=None, groups=None):
        """Yield ``(train_rows, test_rows)`` index arrays, folds in era order."""
        codes, n_eras = _era_codes(X, groups)
        if self.n_splits > n_eras:
            raise ValueError(f"n_splits={self.n_splits} is more than the {n_eras} eras")
        bounds = np.linspace(0, n_eras, self.n_splits + 1).round().astype(int)
        all_eras = np.arange(n_eras)
        for begin, end in zip(bounds[:-1], bounds[1:], strict=True):
            held = (all_eras >= begin - self.embargo) & (all_eras < end + self.embargo)
            train = all_eras[~held]
            if len(train) == 0:
                raise ValueError(f"embargo={self.embargo} leaves no training era for the "
                                 f"test eras {begin}..{end - 1} of {n_eras}")
            yield _rows(codes, train), _rows(codes, all_eras[begin:end])


class WalkForwardSplit:
    """Test blocks that walk forward in time; train only on eras before each.

    Parameters
    ----------
    n_splits : int, default=5
        Number of test blocks, the last ones of the era range.
    test_eras : int or None, default=None
        Eras per test block; None: ``n_eras // (n_splits + 1)``.
    embargo : int, default=0
        Eras dropped between the end of training and the test block.
    max_train_eras : int or None, default=None
        Train on at most this many eras (the most recent ones: a rolling
        window); None: every era before the embargo (an expanding window).
    """

    def __init__(self, n_splits: int = 5, *, test_eras: int | None = None, embargo: int = 0,
                 max_train_eras: int | None = None):
        self.n_splits = _check_int("n_splits", n_splits, 1)
        self.test_eras = None if test_eras is None else _check_int("test_eras", test_eras, 1)
        self.embargo = _check_int("embargo", embargo, 0)
        self.max_train_eras = (None if max_train_eras is None
                               else _check_int("max_train_eras", max_train_eras, 1))

    def __repr__(self) -> str:
        return (f"WalkForwardSplit(n_splits={self.n_splits}, test_eras={self.test_eras}, "
                f"embargo={self.embargo}, max_train_eras={self.max_train_eras})")

    def get_n_splits(self, X=None, y=None, groups=None) -> int:
        return self.n_splits

    def get_metadata_routing(self):
        """scikit-learn's routing: ``split`` takes the routed ``era`` as its ``groups``."""
        return _split_request(type(self).__name__)

    def split(self, X, y=None, groups=None):
        """Yield ``(train_rows, test_rows)``, test blocks in time order."""
        codes, n_eras = _era_codes(X, groups)
        test_eras = self.test_eras or n_eras // (self.n_splits + 1)
        first_test = n_eras - self.n_splits * test_eras
        if test_eras < 1 or first_test - self.embargo < 1:
            raise ValueError(
                f"{n_eras} eras are too few for {self.n_splits} test blocks of "
                f"{max(test_eras, 1)} eras after an embargo of {self.embargo} "
                "(at least one training era is needed before the first block)")
        for block in range(self.n_splits):
            begin = first_test + block * test_eras
            train_end = begin - self.embargo
            train_begin = (0 if self.max_train_eras is None
                           else max(0, train_end - self.max_train_eras))
            yield (_rows(codes, np.arange(train_begin, train_end)),
                   _rows(codes, np.arange(begin, begin + test_eras)))


def _split_request(owner: str):
    from sklearn.utils.metadata_routing import MetadataRequest

    request = MetadataRequest(owner=owner)
    request.split.add_request(param="groups", alias="era")
    return request


ERA_SPLITTERS = (EraKFold, WalkForwardSplit)
# Frames searched above a fit for the cross-validation running it: a search's
# fit, joblib's sequential dispatch, _fit_and_score, a Pipeline, the fit.
_CALLER_FRAMES = 40


def warn_if_fitted_without_era(estimator_name: str) -> None:
    """Warn when a fit without eras runs inside a scikit-learn cross-validation
    or search over an era splitter (called by a fit whose ``era`` is None).

    The splitter is found among the callers' locals (``cross_validate``'s
    ``cv``, a search's ``self.cv``), so this sees the fits run in the
    caller's thread (``n_jobs=None`` or 1), not those joblib runs in other
    threads or processes.
    """
    splitter = _era_splitter_above(sys._getframe(2))
    if splitter is None:
        return
    warnings.warn(
        f"{estimator_name}.fit got no era inside a cross-validation over {splitter!r}: the "
        "fold is trained as one era (DES off). Pass the eras to fit: with "
        "sklearn.set_config(enable_metadata_routing=True) and set_fit_request(era=True), "
        "fit(X, y, era=era) of the search (or params={'era': era} of cross_validate); "
        "without routing, fit(X, y, groups=era, era=era)",
        EraNotPassedWarning, stacklevel=3)


def _era_splitter_above(frame):
    for _ in range(_CALLER_FRAMES):
        if frame is None:
            return None
        names = frame.f_code.co_varnames
        if "cv" in names or "self" in names:
            local = frame.f_locals
            splitter = local.get("cv")
            if not isinstance(splitter, ERA_SPLITTERS):
                splitter = getattr(local.get("self"), "cv", None)
            if isinstance(splitter, ERA_SPLITTERS):
                return splitter
        frame = frame.f_back
    return None
