"""FedAvg, bit-identical on every machine (SPEC §3).

The model id on chain names only a parent and a set of updates, so every trainer that
rebuilds a model must get the very same bytes. The aggregate is the sample-weighted
mean ``Σ nᵢ·wᵢ / Σ nᵢ`` computed with a fixed sequence of IEEE-754 operations:

1. updates sorted by ascending update id;
2. per tensor, ``acc = 0`` in float64, then for each update ``acc = acc + (wᵢ·nᵢ)``
   with the product and the sum as two separate element-wise operations (never a
   fused multiply-add, whose single rounding some CPUs would give and others not);
3. ``acc / Σ nᵢ`` in float64, then cast (round to nearest) to the tensor's dtype.

Element-wise float64 products, sums and quotients are correctly rounded by IEEE-754,
so the result does not depend on the CPU, the thread count or the SIMD width.

Non-floating tensors (integer counters such as BatchNorm's ``num_batches_tracked``,
boolean flags) are not averaged: the aggregate takes their element-wise maximum, which
keeps counters monotone.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import reduce

import numpy as np
import torch

Update = tuple[int, int, Mapping[str, torch.Tensor]]
"""(update id, number of training samples, state dict)."""


def check_updates(updates: Sequence[Update], rule: str = "FedAvg") -> None:
    """Refuse what no aggregation rule can average: no update, a repeated id, a sample
    count below 1, or state dicts whose keys, shapes or dtypes differ.

    Raises
    ------
    ValueError
        Naming the offending update and ``rule`` (the aggregation that refused it).
    """
    if not updates:
        raise ValueError(f"{rule} needs at least one update")
    ids = [update_id for update_id, _, _ in updates]
    if len(set(ids)) != len(ids):
        raise ValueError(f"{rule} got the same update id twice: {sorted(ids)}")
    for update_id, num_samples, _ in updates:
        if num_samples < 1:
            raise ValueError(f"update {update_id} has {num_samples} samples; {rule} needs >= 1")
    _, _, reference = updates[0]
    for update_id, _, state in updates[1:]:
        if set(state) != set(reference):
            raise ValueError(
                f"update {update_id} has tensors {sorted(set(state) ^ set(reference))} "
                "that the other updates lack or have"
            )
        for key, tensor in state.items():
            if tensor.shape != reference[key].shape or tensor.dtype != reference[key].dtype:
                raise ValueError(
                    f"update {update_id}: tensor {key!r} is {tuple(tensor.shape)} {tensor.dtype}, "
                    f"others are {tuple(reference[key].shape)} {reference[key].dtype}"
                )


def as_numpy(tensor: torch.Tensor) -> np.ndarray:
    """A CPU tensor's values as a NumPy array of the same dtype (bfloat16 widened to float64)."""
    source = tensor.detach().cpu()
    # NumPy has no bfloat16; widening to float64 is exact.
    return (source.to(torch.float64) if source.dtype == torch.bfloat16 else source).numpy()


def fedavg(updates: Sequence[Update]) -> dict[str, torch.Tensor]:
    """Sample-weighted average of updates, bit-identical across machines and runs.

    Parameters
    ----------
    updates : Sequence[tuple[int, int, Mapping[str, torch.Tensor]]]
        ``(update id, num_samples, state dict)`` for each update, in any order. All state
        dicts must have the same keys, shapes and dtypes; ``num_samples >= 1``.

    Returns
    -------
    dict[str, torch.Tensor]
        The aggregated state dict (new CPU tensors, keys sorted, original dtypes).

    Raises
    ------
    ValueError
        If there is no update, an id repeats, a count is < 1 or the state dicts differ.
    """
    check_updates(updates)
    ordered = sorted(updates, key=lambda update: update[0])
    total = float(sum(num_samples for _, num_samples, _ in ordered))
    states = [state for _, _, state in ordered]
    result: dict[str, torch.Tensor] = {}
    for key in sorted(states[0]):
        reference = states[0][key]
        if not reference.is_floating_point():
            result[key] = reduce(torch.maximum, (s[key].detach().cpu() for s in states)).clone()
            continue
        # NumPy ufuncs, one IEEE operation each: torch may rewrite x / c as x * (1/c).
        accumulator = np.zeros(tuple(reference.shape), dtype=np.float64)
        weighted = np.empty_like(accumulator)
        for _, num_samples, state in ordered:
            np.multiply(as_numpy(state[key]), float(num_samples), out=weighted, dtype=np.float64)
            np.add(accumulator, weighted, out=accumulator)
        np.divide(accumulator, total, out=accumulator)
        result[key] = torch.from_numpy(accumulator).to(reference.dtype)
    return result
