"""Synthetic era-structured data shaped like the Numerai tournament.

:func:`make_numerai_like` draws a panel of rows grouped into eras, with
per-era quintile-binned ``uint8`` features, a 5-level target and a weak,
drifting signal: the setting PackBoost is built for (docs/README.md §1). It
backs the ``packboost demo`` command, the tests and the benchmarks.

Notes
-----
The data are generated one era at a time, so the working memory beyond the
output is one era's latent block (``n_features x rows_per_era``); the output
is written straight into a feature-major (Fortran-ordered) matrix that a
histogram pass can read column by column without a copy.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = ["EraDataset", "make_categorical_flip", "make_numerai_like", "make_sign_flip",
           "make_smooth_drift"]

# Number of ordered levels of the features and of the target (Numerai: 0..4).
N_LEVELS = 5
# Features per correlated group, and the correlation inside a group.
FEATURES_PER_GROUP = 10
GROUP_CORRELATION = 0.3
# Drift starts at this fraction of the era timeline and completes at its end.
DRIFT_START = 0.5
# Size of the interaction / curvature terms relative to the RMS linear coefficient.
NONLINEAR_SCALE = 0.5
# Upper bound of the per-feature era-to-era jitter, relative to |coefficient|.
MAX_ERA_JITTER = 1.0


@dataclass(frozen=True, eq=False)
class EraDataset:
    """Rows grouped into eras: features, target and era labels.

    Attributes
    ----------
    X : ndarray of shape (n_rows, n_features), uint8, Fortran-ordered
        Feature levels ``0 .. 4``.
    y : ndarray of shape (n_rows,), float32
        Target in ``{0, 0.25, 0.5, 0.75, 1}``.
    era : ndarray of shape (n_rows,), int32
        Era id of each row; rows are sorted by era.
    feature_names : tuple of str
        One name per column of ``X``.
    informative_features : ndarray of int
        Column indices of the features that drive the target (ground truth,
        for diagnostics; a model must not be given it).
    coefficients : ndarray of shape (n_eras_total, n_informative), float64
        Linear coefficient of each informative feature's latent factor in
        every era, indexed by era id (so it stays valid after a split).
    """

    X: np.ndarray = field(repr=False)
    y: np.ndarray = field(repr=False)
    era: np.ndarray = field(repr=False)
    feature_names: tuple[str, ...] = field(repr=False)
    informative_features: np.ndarray = field(repr=False, default_factory=lambda: np.empty(0, int))
    coefficients: np.ndarray = field(repr=False, default_factory=lambda: np.empty((0, 0)))
    # Columns of X holding category codes (fit with categorical_features=),
    # and each category's effect on the latent target in every era.
    categorical_features: tuple[int, ...] = field(repr=False, default=())
    category_effects: np.ndarray = field(repr=False, default_factory=lambda: np.empty((0, 0)))

    @property
    def n_rows(self) -> int:
        return int(self.X.shape[0])

    @property
    def n_features(self) -> int:
        return int(self.X.shape[1])

    @property
    def n_eras(self) -> int:
        """Number of distinct eras present in this dataset."""
        return int(np.unique(self.era).size)

    def __repr__(self) -> str:
        return (
            f"EraDataset(n_rows={self.n_rows}, n_features={self.n_features}, "
            f"n_eras={self.n_eras})"
        )

    def split_by_era(self, holdout_fraction: float = 0.25) -> tuple[EraDataset, EraDataset]:
        """Split into (train, held-out) with the last eras held out.

        The eras are ordered by value; the last ``round(holdout_fraction *
        n_eras)`` of them (at least one, and at least one era left to train
        on) form the held-out part. Rows keep their order. Both parts own
        Fortran-ordered copies of their features.

        Parameters
        ----------
        holdout_fraction : float, default=0.25
            Fraction of eras to hold out, strictly between 0 and 1.

        Returns
        -------
        train, test : EraDataset
        """
        holdout_fraction = float(holdout_fraction)
        if not 0.0 < holdout_fraction < 1.0:
            raise ValueError(
                f"holdout_fraction must be strictly between 0 and 1, got {holdout_fraction!r}"
            )
        eras = np.unique(self.era)
        if eras.size < 2:
            raise ValueError(f"split_by_era needs at least 2 eras, the dataset has {eras.size}")
        n_holdout = min(max(int(round(holdout_fraction * eras.size)), 1), eras.size - 1)
        is_test = self.era >= eras[eras.size - n_holdout]
        return self._take(~is_test), self._take(is_test)

    def _take(self, row_mask: np.ndarray) -> EraDataset:
        rows = np.flatnonzero(row_mask)
        if rows.size and rows[-1] - rows[0] + 1 == rows.size:
            # Contiguous rows (eras sorted): slice, then one copy to Fortran order.
            rows = slice(int(rows[0]), int(rows[-1]) + 1)
        return EraDataset(
            X=np.asfortranarray(self.X[rows]),
            y=self.y[rows].copy(),
            era=self.era[rows].copy(),
            feature_names=self.feature_names,
            informative_features=self.informative_features,
            coefficients=self.coefficients,
            categorical_features=self.categorical_features,
            category_effects=self.category_effects,
        )


def make_numerai_like(
    n_rows: int = 100_000,
    n_features: int = 100,
    n_eras: int = 100,
    *,
    n_informative: int | None = None,
    signal: float = 0.1,
    drift: float = 1.0,
    random_state=0,
) -> EraDataset:
    """Generate Numerai-like era data with a weak signal that drifts late.

    Generating process (era ``e = 0 .. n_eras-1`` at time
    ``t_e = e / (n_eras - 1)``; ``N(0, 1)`` draws are independent):

    1. **Eras.** ``n_rows`` rows split into ``n_eras`` consecutive eras whose
       sizes differ by at most one; rows are sorted by era.
    2. **Latent factors.** Features fall into groups of about
       ``FEATURES_PER_GROUP`` (random assignment). For row ``i`` and feature
       ``j`` of group ``g``: ``z_ij = sqrt(rho) * u_ig + sqrt(1 - rho) * eps_ij``
       with ``rho = GROUP_CORRELATION``, group factor ``u_ig`` and noise
       ``eps_ij`` both ``N(0, 1)``.
    3. **Features.** ``X_ij`` is the quintile (0..4) of ``z_ij`` among the rows
       of its era: each level holds a fifth of the era (up to ties and to
       rounding when the era size is not a multiple of 5).
    4. **Coefficients.** ``n_informative`` features ``k`` (a random subset)
       get a base coefficient ``b_k ~ N(0, 1)`` and a kind: about half are
       *stable*, a quarter *fade* and a quarter *flip*. With
       ``r(t) = smoothstep((t - DRIFT_START) / (1 - DRIFT_START))`` (0 before
       the middle of the timeline, 1 at its end)::

           c_k(t) = b_k * (1 - m_k * drift * r(t)),   m_k = 0, 1, 2

       for stable, fading and flipping features: with ``drift=1`` a fading
       feature's effect vanishes and a flipping one's reverses by the last
       era. Each era adds its own jitter,
       ``c_ke = c_k(t_e) + a_k * |b_k| * N(0, 1)`` with ``a_k`` uniform in
       ``[0, MAX_ERA_JITTER]``, so some features are consistent across eras
       and others are not.
    5. **Latent target.** With three informative factors ``p, q, s`` and
       ``gamma = NONLINEAR_SCALE * rms(b)``::

           f_i  = sum_k c_ke z_ik + gamma * z_ip z_iq + gamma * (z_is^2 - 1) / sqrt(2)
           t_i  = signal * f_i / sqrt(sum_k b_k^2 + 2 gamma^2) + N(0, 1)

       so ``signal`` is roughly the ratio of signal to noise standard
       deviations (the normaliser is fixed, so eras still differ in strength).
    6. **Target.** ``y_i`` is the quintile of ``t_i`` within its era, divided
       by 4: ``{0, 0.25, 0.5, 0.75, 1}``.

    The data are a pure function of the arguments and the seed.

    Parameters
    ----------
    n_rows : int, default=100_000
        Number of rows, at least ``n_eras``.
    n_features : int, default=100
        Number of features.
    n_eras : int, default=100
        Number of eras.
    n_informative : int or None, default=None
        Number of features that drive the target; ``None`` means
        ``max(1, n_features // 10)``.
    signal : float, default=0.1
        Signal-to-noise scale of the latent target (``0`` gives pure noise).
        The default keeps per-era correlations small, as on Numerai: a
        least-squares fit on 150k rows reaches about 0.09 before the drift
        and about half that on the last quarter of eras.
    drift : float, default=1.0
        Strength of the late drift of the fading/flipping coefficients
        (``0`` disables drift).
    random_state : int, numpy.random.Generator or None, default=0
        Seed of :func:`numpy.random.default_rng`.

    Returns
    -------
    EraDataset
        ``X`` uint8 (Fortran-ordered), ``y`` float32, ``era`` int32 in
        ``0 .. n_eras-1``, ``feature_names`` ``("feature_000", ...)``, and the
        ground truth ``informative_features`` and ``coefficients``.

    Examples
    --------
    >>> data = make_numerai_like(n_rows=2_000, n_features=20, n_eras=10)
    >>> train, test = data.split_by_era(0.25)
    >>> data.X.shape, train.n_eras, test.n_eras
    ((2000, 20), 8, 2)
    """
    n_rows, n_features, n_eras = _check_panel(n_rows, n_features, n_eras)
    if n_informative is None:
        n_informative = max(1, n_features // 10)
    n_informative = _check_int(n_informative, "n_informative", minimum=1)
    if n_informative > n_features:
        raise ValueError(
            f"n_informative must be <= n_features ({n_features}), got {n_informative}"
        )
    signal = _check_nonnegative(signal, "signal")
    drift = _check_nonnegative(drift, "drift")
    rng = np.random.default_rng(random_state)

    # Global structure: groups, informative features, coefficient paths.
    n_groups = max(1, round(n_features / FEATURES_PER_GROUP))
    feature_group = rng.integers(n_groups, size=n_features)
    informative = np.sort(rng.choice(n_features, size=n_informative, replace=False))
    base_coef = rng.standard_normal(n_informative)
    drift_multiplier = np.zeros(n_informative)
    kind_order = rng.permutation(n_informative)
    n_stable = (n_informative + 1) // 2
    n_fading = (n_informative - n_stable + 1) // 2
    drift_multiplier[kind_order[n_stable : n_stable + n_fading]] = 1.0
    drift_multiplier[kind_order[n_stable + n_fading :]] = 2.0
    jitter_scale = rng.uniform(0.0, MAX_ERA_JITTER, size=n_informative) * np.abs(base_coef)
    era_time = np.arange(n_eras) / max(n_eras - 1, 1)
    ramp = np.clip((era_time - DRIFT_START) / (1.0 - DRIFT_START), 0.0, 1.0)
    ramp = ramp * ramp * (3.0 - 2.0 * ramp)
    coefficients = base_coef * (1.0 - drift * np.outer(ramp, drift_multiplier))
    coefficients += jitter_scale * rng.standard_normal((n_eras, n_informative))
    # Nonlinear terms on (up to) three distinct informative factors.
    pair_a, pair_b, curved = (informative[i % n_informative] for i in range(3))
    gamma = NONLINEAR_SCALE * float(np.sqrt(np.mean(base_coef**2)))
    normaliser = float(np.sqrt(np.sum(base_coef**2) + 2.0 * gamma**2))
    def nonlinear(latent):
        terms = gamma * latent[pair_a].astype(np.float64) * latent[pair_b]
        terms += gamma * (latent[curved].astype(np.float64) ** 2 - 1.0) / np.sqrt(2.0)
        return terms

    return _draw_panel(
        rng, n_rows, n_features, n_eras, feature_group, informative, coefficients,
        scale=signal / normaliser, nonlinear=nonlinear,
    )


def make_sign_flip(
    n_rows: int = 100_000,
    n_features: int = 100,
    n_eras: int = 100,
    *,
    n_strong: int | None = None,
    n_stable: int | None = None,
    strong_signal: float = 0.2,
    stable_signal: float = 0.1,
    flip_start: float = 0.1,
    flip_end: float = 0.45,
    random_state=0,
) -> EraDataset:
    """Era-shift data: strong features that flip sign in some eras, weak stable ones.

    The case DES exists for (docs/des.md): a learner that ranks splits
    by pooled gain leans on the strong features, which pay in most eras and
    cost in the others; the weaker stable features pay in every era.

    Generating process (era ``e`` at time ``t_e = e / (n_eras - 1)``; rows,
    latent factors, quintile features and the quintile target exactly as in
    :func:`make_numerai_like`, steps 1-3 and 6):

    1. ``n_strong`` *strong* and ``n_stable`` *stable* features (disjoint
       random subsets); the others carry nothing.
    2. **Regimes.** Era ``e`` is *flipped* with probability
       ``p(t_e) = flip_start + (flip_end - flip_start) * t_e``, independently
       across eras: flips are a minority, and more frequent late (with the
       defaults, about 23% of the first three quarters of eras and 41% of the
       last quarter, the usual held-out part).
    3. **Coefficients.** Strong: ``c_ke = s_e * strong_signal * u_k / ||u||``
       with ``u_k ~ N(0, 1)`` and ``s_e = -1`` in flipped eras, ``+1``
       otherwise (all strong features flip together). Stable:
       ``c_ke = stable_signal * (v_k + 0.25 |v_k| N(0, 1)) / ||v||`` with
       ``v_k ~ N(0, 1)``: the sign almost never changes.
    4. **Latent target.** ``t_i = sum_k c_ke z_ik + N(0, 1)``: the strong
       part has standard deviation about ``strong_signal``, the stable part
       about ``stable_signal``.

    Parameters
    ----------
    n_rows, n_features, n_eras : int
        As in :func:`make_numerai_like`.
    n_strong : int or None, default=None
        Number of strong, flipping features; ``None`` means
        ``max(1, n_features // 50)``.
    n_stable : int or None, default=None
        Number of weak, stable features; ``None`` means
        ``max(1, n_features // 10)``.
    strong_signal, stable_signal : float
        Signal-to-noise scale of the strong and of the stable part.
    flip_start, flip_end : float
        Probability that an era is flipped at the first and at the last era,
        each in ``[0, 1]``.
    random_state : int, numpy.random.Generator or None, default=0
        Seed of :func:`numpy.random.default_rng`.

    Returns
    -------
    EraDataset
        ``informative_features`` lists the strong features, then the stable
        ones; ``coefficients`` is ``(n_eras, n_strong + n_stable)`` in the
        same order.

    Examples
    --------
    >>> data = make_sign_flip(n_rows=2_000, n_features=50, n_eras=20)
    >>> data.coefficients.shape
    (20, 6)
    """
    n_rows, n_features, n_eras = _check_panel(n_rows, n_features, n_eras)
    n_strong = _check_int(max(1, n_features // 50) if n_strong is None else n_strong,
                          "n_strong", minimum=1)
    n_stable = _check_int(max(1, n_features // 10) if n_stable is None else n_stable,
                          "n_stable", minimum=0)
    if n_strong + n_stable > n_features:
        raise ValueError(
            f"n_strong + n_stable must be <= n_features ({n_features}), "
            f"got {n_strong} + {n_stable}"
        )
    strong_signal = _check_nonnegative(strong_signal, "strong_signal")
    stable_signal = _check_nonnegative(stable_signal, "stable_signal")
    for name, value in (("flip_start", flip_start), ("flip_end", flip_end)):
        if not 0.0 <= _check_nonnegative(value, name) <= 1.0:
            raise ValueError(f"{name} must be in [0, 1], got {value!r}")
    rng = np.random.default_rng(random_state)

    feature_group = rng.integers(max(1, round(n_features / FEATURES_PER_GROUP)), size=n_features)
    chosen = rng.choice(n_features, size=n_strong + n_stable, replace=False)
    strong, stable = np.sort(chosen[:n_strong]), np.sort(chosen[n_strong:])
    era_time = np.arange(n_eras) / max(n_eras - 1, 1)
    flip_probability = flip_start + (float(flip_end) - float(flip_start)) * era_time
    era_sign = np.where(rng.random(n_eras) < flip_probability, -1.0, 1.0)

    strong_base = rng.standard_normal(n_strong)
    strong_base *= strong_signal / np.linalg.norm(strong_base)
    stable_base = rng.standard_normal(n_stable)
    stable_coef = stable_base + 0.25 * np.abs(stable_base) * rng.standard_normal((n_eras, n_stable))
    if n_stable:
        stable_coef *= stable_signal / np.linalg.norm(stable_base)
    coefficients = np.hstack([np.outer(era_sign, strong_base), stable_coef])
    return _draw_panel(rng, n_rows, n_features, n_eras, feature_group,
                       np.concatenate([strong, stable]), coefficients, scale=1.0)


def make_smooth_drift(
    n_rows: int = 100_000,
    n_features: int = 100,
    n_eras: int = 100,
    *,
    n_informative: int | None = None,
    signal: float = 0.15,
    drift: float = 1.0,
    random_state=0,
) -> EraDataset:
    """Era data whose feature effects drift smoothly over time.

    Generating process (era ``e`` at time ``t_e = e / (n_eras - 1)``; rows,
    latent factors, quintile features and the quintile target as in
    :func:`make_numerai_like`, steps 1-3 and 6):

    1. ``n_informative`` features (a random subset); half of them (rounded
       down) *drift*, the others are *stable*.
    2. **Coefficients.** ``b_k ~ N(0, 1)``; a drifting feature moves along
       a straight line from ``b_k - drift * d_k`` at the first era to
       ``b_k + drift * d_k`` at the last, ``d_k ~ N(0, 1)``; a stable one
       keeps ``b_k``. Each era adds ``0.25 |b_k| N(0, 1)``. The paths are
       smooth, so the last quarter of eras (held out) continues a trend the
       training eras only partly show.
    3. **Latent target.** ``t_i = signal * sum_k c_ke z_ik / ||b|| + N(0, 1)``.

    Parameters
    ----------
    n_rows, n_features, n_eras : int
        As in :func:`make_numerai_like`.
    n_informative : int or None, default=None
        ``None`` means ``max(1, n_features // 10)``.
    signal : float, default=0.15
        Signal-to-noise scale of the latent target.
    drift : float, default=1.0
        Size of the drift relative to the base coefficients (``0``: none).
    random_state : int, numpy.random.Generator or None, default=0
        Seed of :func:`numpy.random.default_rng`.

    Returns
    -------
    EraDataset

    Examples
    --------
    >>> data = make_smooth_drift(n_rows=2_000, n_features=20, n_eras=10)
    >>> data.coefficients.shape
    (10, 2)
    """
    n_rows, n_features, n_eras = _check_panel(n_rows, n_features, n_eras)
    n_informative = _check_int(max(1, n_features // 10) if n_informative is None
                               else n_informative, "n_informative", minimum=1)
    if n_informative > n_features:
        raise ValueError(
            f"n_informative must be <= n_features ({n_features}), got {n_informative}"
        )
    signal = _check_nonnegative(signal, "signal")
    drift = _check_nonnegative(drift, "drift")
    rng = np.random.default_rng(random_state)

    feature_group = rng.integers(max(1, round(n_features / FEATURES_PER_GROUP)), size=n_features)
    informative = np.sort(rng.choice(n_features, size=n_informative, replace=False))
    base_coef = rng.standard_normal(n_informative)
    slope = rng.standard_normal(n_informative)
    slope[rng.permutation(n_informative)[n_informative // 2 :]] = 0.0  # the stable half
    era_time = np.arange(n_eras) / max(n_eras - 1, 1)
    coefficients = base_coef + drift * np.outer(2.0 * era_time - 1.0, slope)
    coefficients += 0.25 * np.abs(base_coef) * rng.standard_normal((n_eras, n_informative))
    return _draw_panel(rng, n_rows, n_features, n_eras, feature_group, informative,
                       coefficients, scale=signal / float(np.linalg.norm(base_coef)))


def make_categorical_flip(
    n_rows: int = 100_000,
    n_features: int = 20,
    n_eras: int = 100,
    *,
    n_categories: int = 24,
    strong_signal: float = 0.3,
    stable_signal: float = 0.15,
    numeric_signal: float = 0.1,
    flip_start: float = 0.1,
    flip_end: float = 0.45,
    random_state=0,
) -> EraDataset:
    """Era-shift data whose driver is a category: a sector, a store, a country.

    Column 0 of ``X`` is a categorical feature (codes ``0 .. n_categories - 1``,
    in no meaningful order; fit with ``categorical_features=[0]``); columns
    ``1 .. n_features`` are quintile features as in :func:`make_numerai_like`.

    Generating process (era ``e`` at time ``t_e = e / (n_eras - 1)``):

    1. Every row draws its category uniformly; the numeric latent factors,
       quintile features and quintile target are those of
       :func:`make_numerai_like` (steps 1-3 and 6), with ``max(1, n_features
       // 5)`` of the numeric features carrying a stable effect of total size
       ``numeric_signal``.
    2. **Regimes.** Era ``e`` is *flipped* with probability ``flip_start +
       (flip_end - flip_start) t_e``, independently (as in
       :func:`make_sign_flip`).
    3. **Category effects.** Category ``c`` adds ``a_c + s_e b_c`` to the
       latent target of its rows, with ``s_e = -1`` in flipped eras and ``+1``
       otherwise: ``a_c`` (standard deviation ``stable_signal`` over the
       categories) pays in every era, ``b_c`` (standard deviation
       ``strong_signal``) is stronger but flips. A split that groups the
       categories by the pooled effect ``a_c + b_c`` wins most eras and loses
       the flipped ones; one that groups them by ``a_c`` wins every era.

    Returns
    -------
    EraDataset
        ``categorical_features == (0,)``; ``category_effects`` is
        ``(n_eras, n_categories)``, the effect of each category in each era;
        ``informative_features`` lists column 0, then the informative numeric
        columns, whose ``coefficients`` are ``(n_eras, n_informative)``.

    Examples
    --------
    >>> data = make_categorical_flip(n_rows=2_000, n_features=10, n_eras=20)
    >>> data.X.shape, data.categorical_features
    ((2000, 11), (0,))
    """
    n_rows, n_features, n_eras = _check_panel(n_rows, n_features, n_eras)
    n_categories = _check_int(n_categories, "n_categories", minimum=2)
    if n_categories > 255:
        raise ValueError(f"n_categories must be <= 255 (uint8 codes), got {n_categories}")
    strong_signal = _check_nonnegative(strong_signal, "strong_signal")
    stable_signal = _check_nonnegative(stable_signal, "stable_signal")
    numeric_signal = _check_nonnegative(numeric_signal, "numeric_signal")
    for name, value in (("flip_start", flip_start), ("flip_end", flip_end)):
        if not 0.0 <= _check_nonnegative(value, name) <= 1.0:
            raise ValueError(f"{name} must be in [0, 1], got {value!r}")
    rng = np.random.default_rng(random_state)

    era_time = np.arange(n_eras) / max(n_eras - 1, 1)
    flip_probability = flip_start + (float(flip_end) - float(flip_start)) * era_time
    era_sign = np.where(rng.random(n_eras) < flip_probability, -1.0, 1.0)
    stable_effect = rng.standard_normal(n_categories)
    stable_effect *= stable_signal / max(float(np.std(stable_effect)), 1e-12)
    flip_effect = rng.standard_normal(n_categories)
    flip_effect *= strong_signal / max(float(np.std(flip_effect)), 1e-12)
    effects = stable_effect[np.newaxis, :] + era_sign[:, np.newaxis] * flip_effect
    category = rng.integers(0, n_categories, size=n_rows).astype(np.uint8)

    n_informative = max(1, n_features // 5)
    feature_group = rng.integers(max(1, round(n_features / FEATURES_PER_GROUP)), size=n_features)
    informative = np.sort(rng.choice(n_features, size=n_informative, replace=False))
    base = rng.standard_normal(n_informative)
    coefficients = np.tile(base * numeric_signal / np.linalg.norm(base), (n_eras, 1))

    era_sizes = np.full(n_eras, n_rows // n_eras, dtype=np.int64)
    era_sizes[: n_rows % n_eras] += 1
    era_offsets = np.concatenate(([0], np.cumsum(era_sizes)))
    era_at = iter(range(n_eras))

    def category_term(latent):
        era = next(era_at)
        rows = category[era_offsets[era]:era_offsets[era + 1]]
        return effects[era][rows]

    numeric = _draw_panel(rng, n_rows, n_features, n_eras, feature_group, informative,
                          coefficients, scale=1.0, nonlinear=category_term)
    X = np.empty((n_rows, n_features + 1), dtype=np.uint8, order="F")
    X[:, 0] = category
    X[:, 1:] = numeric.X
    return EraDataset(
        X=X, y=numeric.y, era=numeric.era,
        feature_names=("category",) + numeric.feature_names,
        informative_features=np.concatenate([[0], informative + 1]),
        coefficients=coefficients,
        categorical_features=(0,),
        category_effects=effects,
    )


def _check_panel(n_rows, n_features, n_eras) -> tuple[int, int, int]:
    n_rows = _check_int(n_rows, "n_rows", minimum=1)
    n_features = _check_int(n_features, "n_features", minimum=1)
    n_eras = _check_int(n_eras, "n_eras", minimum=1)
    if n_rows < n_eras:
        raise ValueError(f"n_rows must be >= n_eras ({n_eras}), got {n_rows}")
    return n_rows, n_features, n_eras


def _draw_panel(rng, n_rows, n_features, n_eras, feature_group, informative,
                coefficients, *, scale, nonlinear=None) -> EraDataset:
    """Draw features and target era by era (steps 1-3, 5, 6 of make_numerai_like).

    ``coefficients[e]`` are the linear coefficients of the informative
    latent factors in era ``e``; the latent target of a row is
    ``scale * (coefficients[e] @ z_informative + nonlinear(z)) + N(0, 1)``.
    The random stream (latent, group factors, target noise, per era) is the
    same for every generator, so they share one documented process.
    """
    n_groups = int(feature_group.max()) + 1
    group_weight = np.float32(np.sqrt(GROUP_CORRELATION))
    noise_weight = np.float32(np.sqrt(1.0 - GROUP_CORRELATION))

    X = np.empty((n_rows, n_features), dtype=np.uint8, order="F")
    X_by_feature = X.T  # C-ordered view: one contiguous row per feature
    y = np.empty(n_rows, dtype=np.float32)
    era_sizes = np.full(n_eras, n_rows // n_eras, dtype=np.int64)
    era_sizes[: n_rows % n_eras] += 1
    era_offsets = np.concatenate(([0], np.cumsum(era_sizes)))

    for era_idx in range(n_eras):
        start, stop = int(era_offsets[era_idx]), int(era_offsets[era_idx + 1])
        size = stop - start
        latent = rng.standard_normal((n_features, size), dtype=np.float32)
        latent *= noise_weight
        group_factors = rng.standard_normal((n_groups, size), dtype=np.float32)
        group_factors *= group_weight
        latent += group_factors[feature_group]
        X_by_feature[:, start:stop] = _quintiles(latent)

        factors = latent[informative].astype(np.float64)
        target = coefficients[era_idx] @ factors
        if nonlinear is not None:
            target += nonlinear(latent)
        target *= scale
        target += rng.standard_normal(size)
        y[start:stop] = _quintiles(target[np.newaxis, :])[0]

    y /= N_LEVELS - 1
    width = len(str(n_features - 1))
    return EraDataset(
        X=X,
        y=y,
        era=np.repeat(np.arange(n_eras, dtype=np.int32), era_sizes),
        feature_names=tuple(f"feature_{j:0{width}d}" for j in range(n_features)),
        informative_features=informative,
        coefficients=coefficients,
    )



def _quintiles(values: np.ndarray) -> np.ndarray:
    """Level 0..4 of each entry among its row of ``values`` (2-D), as uint8.

    The level of the entry of rank ``r`` (0-based) among ``m`` is
    ``floor(5 r / m)``; it is computed from the sorted values at the first
    rank of each level instead of from ranks, which is exact without ties.
    """
    n_cols = values.shape[1]
    levels = np.zeros(values.shape, dtype=np.uint8)
    first_rank = -(-np.arange(1, N_LEVELS) * n_cols // N_LEVELS)  # ceil(q m / 5)
    first_rank = first_rank[first_rank < n_cols]
    if first_rank.size == 0:
        return levels
    cuts = np.sort(values, axis=1)[:, first_rank]
    for level in range(first_rank.size):
        levels += values >= cuts[:, level : level + 1]
    return levels


def _check_int(value, name: str, *, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return int(value)


def _check_nonnegative(value, name: str) -> float:
    value = float(value)
    if not np.isfinite(value) or value < 0:
        raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
    return value
