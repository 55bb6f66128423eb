"""Maths the robust aggregation rules share, each step a fixed sequence of IEEE operations.

Coordinate-wise rules sort each coordinate's values across the updates. Sorting gives
the same array on every machine only if equal values are bit-identical, which ``-0.0``
and ``+0.0`` are not (they compare equal, so an unstable or SIMD sort may put either
first). :func:`sorted_coordinates` therefore adds ``+0.0`` to every value first — IEEE
round-to-nearest turns ``-0.0 + 0.0`` into ``+0.0`` and leaves every other value as it
is — after which the sorted array is a function of the multiset of values alone.

Norms are exact: the squares are summed with :func:`math.fsum`, which returns the
correctly rounded sum whatever the order, instead of a BLAS or pairwise NumPy reduction
whose order (and so rounding) depends on the CPU's vector width.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from functools import reduce

import numpy as np
import torch

from mcfl_chain.algorithms.fedavg import Update, as_numpy, check_updates


def ordered_updates(updates: Sequence[Update], rule: str) -> list[Update]:
    """``updates`` validated (see :func:`~mcfl_chain.algorithms.fedavg.check_updates`)
    and sorted by ascending update id, the order every rule works in."""
    check_updates(updates, rule)
    return sorted(updates, key=lambda update: update[0])


def float64_values(tensor: torch.Tensor) -> np.ndarray:
    """A tensor's values as a new float64 array (widening is exact)."""
    return as_numpy(tensor).astype(np.float64, copy=True)


def non_floating_maximum(states: Sequence[Mapping[str, torch.Tensor]], key: str) -> torch.Tensor:
    """Element-wise maximum of an integer or boolean tensor, as FedAvg takes it: counters
    such as BatchNorm's ``num_batches_tracked`` are not weights and stay monotone."""
    return reduce(torch.maximum, (state[key].detach().cpu() for state in states)).clone()


def sorted_coordinates(ordered: Sequence[Update], key: str, rule: str) -> np.ndarray:
    """Tensor ``key`` of every update stacked on a new first axis, each coordinate sorted
    ascending along it, in float64 with ``-0.0`` made ``+0.0``.

    Raises
    ------
    ValueError
        If a value is NaN or infinite (no order statistic of those is meaningful).
    """
    stacked = np.stack([float64_values(state[key]) for _, _, state in ordered])
    finite = np.isfinite(stacked).reshape(len(ordered), -1).all(axis=1)
    if not finite.all():
        bad = [ordered[i][0] for i in np.flatnonzero(~finite)]
        raise ValueError(f"{rule}: tensor {key!r} of updates {bad} holds NaN or infinite values")
    np.add(stacked, 0.0, out=stacked)
    return np.sort(stacked, axis=0)


def exact_norm(vector: np.ndarray) -> float:
    """``‖v‖₂`` of a float64 vector: correctly rounded sum of the (rounded) squares, then
    a correctly rounded square root, so the same on every machine."""
    squares = np.multiply(vector, vector)
    return math.sqrt(math.fsum(squares.tolist()))


def median_of(values: Sequence[float]) -> float:
    """Median of floats: the middle one, or ``(a + b) / 2`` of the two middle ones."""
    ordered = sorted(values)
    n = len(ordered)
    if n == 0:
        raise ValueError("the median of no value is undefined")
    middle = n // 2
    return ordered[middle] if n % 2 else (ordered[middle - 1] + ordered[middle]) / 2.0
