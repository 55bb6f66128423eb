"""Norm clipping before FedAvg (Sun et al. 2019, "Can you really backdoor FL?"): aggregation
rule code 3.

Each update's delta from the parent, ``Δᵢ = wᵢ − w_parent`` over all floating-point
tensors, is scaled down to the norm bound ``τ`` when longer: ``cᵢ = min(1, τ / ‖Δᵢ‖₂)``.
The aggregate is the parent plus the sample-weighted mean of the clipped deltas,
``w_parent + Σ nᵢ·(cᵢ·Δᵢ) / Σ nᵢ`` — FedAvg of the clipped updates. A boosted (scaled)
update then weighs no more than an honest one of norm ``τ``. ``τ`` is a fixed bound, or
by default the median of the deltas' norms (adaptive: at least half the updates are
left untouched).

Recomputation, in ascending update-id order:

1. ``Δᵢ = wᵢ − w_parent`` per tensor in float64 (one IEEE subtraction per element);
   ``‖Δᵢ‖₂ = sqrt(fsum(Δᵢ²))`` over the tensors in sorted key order (exact sum, see
   :func:`~.aggregate.exact_norm`);
2. ``τ`` = the bound, or the median of the norms (:func:`~.aggregate.median_of`);
   ``cᵢ = τ / ‖Δᵢ‖₂`` if ``‖Δᵢ‖₂ > τ`` else ``1``, one Python float division;
3. per tensor, ``acc = 0``, then ``acc = acc + ((Δᵢ·cᵢ)·nᵢ)``, three separate IEEE
   operations; then ``w_parent + acc / Σ nᵢ``, cast to the tensor's dtype.

The parameter word is 0 for the median bound, else the IEEE-754 bits of the float64
bound (never 0: a bound must be > 0).
"""

from __future__ import annotations

import math
import struct
from collections.abc import Mapping, Sequence

import numpy as np
import torch

from mcfl_chain.algorithms.fedavg import Update
from mcfl_chain.algorithms.robust.aggregate import (
    exact_norm,
    float64_values,
    median_of,
    non_floating_maximum,
    ordered_updates,
)
from mcfl_chain.algorithms.robust.base import (
    AggregationRule,
    StateDict,
    register_aggregation_rule,
)

RULE = "norm clipping"


def _floating_keys(parent: Mapping[str, torch.Tensor], update: Update) -> list[str]:
    update_id, _, state = update
    if set(state) != set(parent):
        raise ValueError(
            f"{RULE}: update {update_id} has tensors {sorted(set(state) ^ set(parent))} "
            "that the parent lacks or has"
        )
    for key, tensor in state.items():
        if tensor.shape != parent[key].shape or tensor.dtype != parent[key].dtype:
            raise ValueError(
                f"{RULE}: update {update_id}: tensor {key!r} is {tuple(tensor.shape)} "
                f"{tensor.dtype}, the parent's is {tuple(parent[key].shape)} {parent[key].dtype}"
            )
    return [key for key in sorted(parent) if parent[key].is_floating_point()]


def delta_norms(updates: Sequence[Update], parent: Mapping[str, torch.Tensor]) -> dict[int, float]:
    """``‖wᵢ − w_parent‖₂`` over all floating-point tensors, per update id, exactly rounded.

    Raises
    ------
    ValueError
        If an update's tensors differ from the parent's, or a norm is not finite.
    """
    norms: dict[int, float] = {}
    for update in updates:
        keys = _floating_keys(parent, update)
        update_id, _, state = update
        delta = np.concatenate(
            [float64_values(state[k]).ravel() - float64_values(parent[k]).ravel() for k in keys]
            or [np.zeros(0)]
        )
        norms[update_id] = exact_norm(delta)
        if not math.isfinite(norms[update_id]):
            raise ValueError(f"{RULE}: update {update_id} lies at a non-finite distance")
    return norms


def clip_factors(norms: Mapping[int, float], bound: float | None = None) -> dict[int, float]:
    """``cᵢ = min(1, τ / ‖Δᵢ‖)`` per update id; ``τ`` = ``bound`` or the median norm."""
    tau = median_of(list(norms.values())) if bound is None else bound
    return {key: tau / norm if norm > tau else 1.0 for key, norm in norms.items()}


def norm_clipped_fedavg(
    updates: Sequence[Update], parent: Mapping[str, torch.Tensor], bound: float | None = None
) -> StateDict:
    """FedAvg of the updates after clipping each delta from the parent to norm ``τ``.

    Parameters
    ----------
    updates : Sequence[tuple[int, int, Mapping[str, torch.Tensor]]]
        ``(update id, num_samples, state dict)`` in any order.
    parent : Mapping[str, torch.Tensor]
        The parent model's weights (same keys, shapes and dtypes).
    bound : float, optional
        The norm bound ``τ > 0``; default the median of the deltas' norms.

    Returns
    -------
    dict[str, torch.Tensor]
        New CPU tensors, keys sorted, original dtypes; non-floating tensors take the
        element-wise maximum of the updates, as in FedAvg.

    Raises
    ------
    ValueError
        If the bound is not a finite number > 0, or the updates are refused (see
        :func:`~mcfl_chain.algorithms.fedavg.check_updates`) or differ from the parent.
    """
    if bound is not None and not (math.isfinite(bound) and bound > 0):
        raise ValueError(f"{RULE}: the norm bound must be a finite number > 0, got {bound}")
    ordered = ordered_updates(updates, RULE)
    factors = clip_factors(delta_norms(ordered, parent), bound)
    total = float(sum(num_samples for _, num_samples, _ in ordered))
    states = [state for _, _, state in ordered]
    result: StateDict = {}
    for key in sorted(parent):
        reference = parent[key]
        if not reference.is_floating_point():
            result[key] = non_floating_maximum(states, key)
            continue
        start = float64_values(reference)
        accumulator = np.zeros_like(start)
        delta = np.empty_like(start)
        for update_id, num_samples, state in ordered:
            np.subtract(float64_values(state[key]), start, out=delta)
            np.multiply(delta, factors[update_id], out=delta)
            np.multiply(delta, float(num_samples), out=delta)
            np.add(accumulator, delta, out=accumulator)
        np.divide(accumulator, total, out=accumulator)
        np.add(start, accumulator, out=accumulator)
        result[key] = torch.from_numpy(accumulator).to(reference.dtype)
    return result


def _bound_bits(bound: float) -> int:
    word: int = struct.unpack("<Q", struct.pack("<d", bound))[0]
    return word


@register_aggregation_rule("norm-clipping", code=3)
class NormClipping(AggregationRule):
    """Norm clipping of the deltas, then sample-weighted FedAvg.

    Parameters
    ----------
    bound : float, optional
        Fixed norm bound ``τ > 0``; default (None) the median of the deltas' norms.
        The parameter word is 0 for the median, else the float64 bits of ``τ``.
    """

    def __init__(self, bound: float | None = None) -> None:
        if bound is not None and not (math.isfinite(bound) and bound > 0):
            raise ValueError(f"{RULE}: the norm bound must be a finite number > 0, got {bound}")
        self.bound = None if bound is None else float(bound)

    @property
    def parameter(self) -> int:
        return 0 if self.bound is None else _bound_bits(self.bound)

    @classmethod
    def from_parameter(cls, word: int) -> AggregationRule:
        if word == 0:
            return cls()
        if not 0 < word < 2**64:
            raise ValueError(f"{RULE}: parameter word {word} is not the bits of a float64 bound")
        bound: float = struct.unpack("<d", struct.pack("<Q", word))[0]
        return cls(bound)

    def __repr__(self) -> str:
        return f"NormClipping(bound={'median' if self.bound is None else self.bound})"

    def aggregate(
        self, updates: Sequence[Update], parent: Mapping[str, torch.Tensor] | None = None
    ) -> StateDict:
        if parent is None:
            raise ValueError(f"{RULE} clips each update's delta from the parent: pass the parent")
        return norm_clipped_fedavg(updates, parent, self.bound)
