"""The backend interface that :func:`packboost.grower.grow_pack` drives.

A pack is grown in lockstep: every open node of every tree of the pack is a
*slot* of the frontier (trees in order, then nodes in order of creation), and
each row is, per tree, in one slot (docs/data-layout.md, ``node_of_row``).
The driver owns the frontier and every decision; a backend owns the rows and
runs the passes over them. Per pack:

    begin_pack(fixed, tree_samples)       every row at its tree's root (slot t)
    for each depth:
        slot_sums(n_slots)                -> pooled sums of every slot
        find_splits(...)                  -> best split of every slot (DES)
        route_rows(...)                   rows to child slots; rows of slots that
                                          did not split record their leaf
    add_pack(pack, raw_prediction)        += the pack on the training rows (a
                                          lookup of the recorded leaves)

A backend with ``grows_outputs_in_one_pass = True`` (the CPU one) also
takes the packs of several outputs as one pack of all their trees
(grower.grow_output_packs, docs/packs.md §10): ``begin_pack`` then gets a
:class:`packboost._fixed_point.OutputsFixedPoint` (tree ``t`` sums output
``tree_output[t]``'s gradients, each output on its own grids: an output
trained on its known rows sums those of a fit on them alone) and
``add_output_pack(pack, raw_prediction, output)`` adds one output's trees;
without it the driver grows the outputs' packs one after the other.

Both backends take the round's gradients in the one fixed-point form
(:mod:`packboost._fixed_point`, docs/fixed-point.md), so their sums are exact
and equal, and both grow the same trees for the same inputs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np


@dataclass
class SlotSums:
    """Pooled sums of every slot's sampled rows (float64; ``count`` int64)."""

    gradients: np.ndarray
    hessians: np.ndarray
    count: np.ndarray
    # For the slot's gradient variance (era_std="between"); None after
    # route_rows(..., split_children=False): the driver does not read it then.
    gradients_squared: np.ndarray | None


@dataclass
class BestSplits:
    """The best DES candidate of every slot (n_slots,).

    ``column`` indexes the depth's candidate features (-1: no candidate met
    the constraints); ties went to the lower feature, then the lower
    threshold, then missing-left (docs/des.md).
    """

    column: np.ndarray          # int32/int64
    score: np.ndarray           # float64 DES score, -inf without a candidate
    gain: np.ndarray            # float64 pooled Newton gain
    threshold: np.ndarray       # int32 bin threshold (left: bin <= threshold)
    missing_left: np.ndarray    # uint8
    # The best candidate's left child: pooled gradient, hessian and row
    # count sums (float64; missing rows included when they go left; NaN for
    # a slot whose winner's sums are not known), or None where a backend does
    # not report them. Exact (fixed-point grid values), so a backend may take
    # the children's node sums from them.
    left_gradients: np.ndarray | None = None
    left_hessians: np.ndarray | None = None
    left_count: np.ndarray | None = None

    @classmethod
    def of_table(cls, found: dict) -> BestSplits:
        """Each slot's best from a (n_slots, n_candidates) table of every
        (slot, feature)'s best candidate (``score``, ``gain``, ``threshold``,
        ``missing_left``, ``found``; :func:`packboost._split.find_best_splits`'
        result): the first maximum over the features, in their order."""
        from packboost import _split

        return cls(**_split.best_of_table(found))


class Backend(Protocol):
    """What the driver calls; see the module docstring for the order."""

    def begin_pack(self, fixed, tree_samples: Sequence) -> None:
        """Start a pack: the round's fixed-point gradients
        (:class:`packboost._fixed_point.FixedPointGradients`) and each tree's
        rows (ascending int32): a sequence of row arrays, usually the round's
        :class:`packboost._samples.TreeSamples` (whose era flags a backend
        may use instead). Rows outside a tree's sample are routed along
        (never summed) so that every training row ends in a leaf."""

    def slot_sums(self, n_slots: int) -> SlotSums:
        """Pooled gradient, hessian, count and squared-gradient sums of slots
        0 .. n_slots-1 over the rows each tree sampled. A backend whose sums
        travel between machines may leave ``gradients_squared`` None (the
        Dask shards: they go with the next find_splits' first exchange); the
        driver then passes ``slot_variance=None`` and the backend computes
        it (grower.gradient_variance of the completed sums)."""

    def find_splits(self, slot_tree: np.ndarray, slot_open: np.ndarray,
                    features: np.ndarray, tree_uses_feature: np.ndarray,
                    slot_variance: np.ndarray, split_params: dict, *,
                    keep_for_children: bool = False,
                    constraints: dict | None = None) -> BestSplits:
        """Best DES split of every open slot over ``features`` (ascending
        int32, the depth's K_d); ``tree_uses_feature`` (n_features_d,
        pack_size) uint8 says which trees may use each; ``slot_variance`` is
        each slot's per-row gradient variance (None: see slot_sums); ``split_params`` the split
        kernels' parameters (:func:`packboost._split.split_params_as_dict`).

        ``keep_for_children``: the next depth scans the same features, and
        its trees mostly the ones they scan now (grower.few_new_features), so
        a backend may keep this depth's histograms and derive the children's
        from them (histogram subtraction; a hint, never a change of the result).

        ``constraints``: None, or the monotone and interaction constraints of
        this depth as :func:`packboost._split.find_best_splits` takes them
        (``slot_bounds``, ``feature_monotone``, ``slot_allows_feature``;
        docs/des.md §14). A backend without them raises
        :func:`packboost._constraints.unsupported` (the CUDA and Dask ones)."""

    def route_rows(self, split_feature: np.ndarray, split_threshold: np.ndarray,
                   split_missing_left: np.ndarray, left_child_slot: np.ndarray,
                   slot_node: np.ndarray, *, split_children: bool = True) -> None:
        """Move every row to its child slot (``left_child_slot[k]`` or +1 for
        a slot k with ``split_feature[k] >= 0``); rows of a slot that did not
        split record its node id in its tree (``slot_node[k]``) as their leaf.
        ``split_children=False`` (the last depth): the driver will not look
        for splits in the children, so the next ``slot_sums`` may leave
        ``gradients_squared`` out (None); a hint, like ``keep_for_children``."""

    def add_pack(self, pack, raw_prediction: np.ndarray) -> None:
        """``raw_prediction += `` the pack's trees on the training rows, each
        row adding its trees' leaf values in tree order (bit-identical to a
        walk down the trees)."""

    def close(self) -> None:
        """Free the fit's working memory."""
