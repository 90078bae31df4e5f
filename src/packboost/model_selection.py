"""Cross-validation over eras: whole eras per fold, an embargo around each test block.

Rows of one era share a time (and, on Numerai, overlapping targets), so a fold
must keep every era whole, and the eras right next to a test block leak into
it through the target's horizon: ``embargo`` of them are dropped from training
on each side. Both splitters follow scikit-learn's protocol (``split(X, y,
groups)`` and ``get_n_splits``) with ``groups`` the era label of every row, so
they work with ``cross_val_score``, ``cross_validate`` and ``GridSearchCV``
(``cv=EraKFold(5, embargo=4)``, ``groups=era``) without scikit-learn being
needed to import them. Eras are ordered by their labels (``np.unique``): give
labels that sort in time (ints, zero-padded strings, dates).

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


class EraNotPassedWarning(UserWarning):
    """A model was fitted without eras inside a cross-validation over eras."""


def _check_int(name: str, value, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an int, got {value!r}")
    if value < low:
        raise ValueError(f"{name} must be at least {low}, got {value}")
    return int(value)


def _era_codes(X, groups) -> tuple[np.ndarray, int]:
    """(era index of every row in time order, number of eras) from ``groups``."""
    if groups is None:
        raise ValueError("groups must be the era label of every row (groups=era), got None")
    groups = np.asarray(groups)
    if groups.ndim != 1:
        raise ValueError(f"groups must be 1-D (one era label per row), got shape {groups.shape}")
    n_rows = getattr(X, "shape", (len(X),))[0] if X is not None else len(groups)
    if len(groups) != n_rows:
        raise ValueError(f"groups has {len(groups)} labels but X has {n_rows} rows")
    if groups.dtype.kind == "f" and np.isnan(groups).any():
        raise ValueError("groups contains NaN: every row needs an era label")
    if groups.dtype == object and any(label is None for label in groups):
        raise ValueError("groups contains None: every row needs an era label")
    labels, codes = np.unique(groups, return_inverse=True)
    return codes.reshape(-1), len(labels)


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
