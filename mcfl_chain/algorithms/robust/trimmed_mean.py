"""Coordinate-wise trimmed mean (Yin et al., ICML 2018): aggregation rule code 2.

For each coordinate, the ``k = ⌊β·n⌋`` largest and ``k`` smallest of the ``n`` values are
dropped and the ``n − 2k`` others averaged (unweighted: a Byzantine trainer could inflate
its own sample count). ``β`` is the fraction trimmed on each side, ``0 ≤ β < 1/2``.

``β`` is held in basis points (``β = p / 10 000``, ``p`` an integer): the parameter word
the model id commits to is ``p``, and ``k = ⌊p·n / 10 000⌋`` is computed in integers, so
no float rounding of ``β·n`` can make two machines trim differently.

Recomputation: :func:`~.aggregate.sorted_coordinates` (float64, ``-0.0`` made ``+0.0``,
sorted along the update axis); ``acc = 0``, then ``acc = acc + sorted[i]`` for
``i = k … n−k−1`` in that order, one IEEE addition each; ``acc / (n − 2k)``; cast to the
tensor's dtype.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import torch

from mcfl_chain.algorithms.fedavg import Update
from mcfl_chain.algorithms.robust.aggregate import (
    non_floating_maximum,
    ordered_updates,
    sorted_coordinates,
)
from mcfl_chain.algorithms.robust.base import (
    AggregationRule,
    StateDict,
    register_aggregation_rule,
)

RULE = "trimmed mean"
BASIS = 10_000
"""β is a whole number of basis points (1/10 000)."""


def beta_basis_points(beta: float) -> int:
    """``β`` as a whole number of basis points.

    Raises
    ------
    ValueError
        If ``β`` is outside ``[0, 1/2)`` or not a multiple of 1/10 000.
    """
    if not 0.0 <= beta < 0.5:
        raise ValueError(f"trimmed mean: beta, cut on each side, must be in [0, 0.5); got {beta}")
    points = round(beta * BASIS)
    if abs(beta * BASIS - points) > 1e-6:
        raise ValueError(f"trimmed mean: beta must be a multiple of 0.0001, got {beta}")
    return points


def trimmed_count(n: int, basis_points: int) -> int:
    """Values cut on each side of ``n``: ``⌊p·n / 10 000⌋``, in integers."""
    return basis_points * n // BASIS


def trimmed_mean(updates: Sequence[Update], beta: float) -> StateDict:
    """Coordinate-wise ``β``-trimmed mean of ``updates``, bit-identical on every machine.

    Parameters
    ----------
    updates : Sequence[tuple[int, int, Mapping[str, torch.Tensor]]]
        ``(update id, num_samples, state dict)`` in any order; the counts are ignored.
    beta : float
        Fraction trimmed on each side, in ``[0, 1/2)``, a multiple of 1/10 000.

    Returns
    -------
    dict[str, torch.Tensor]
        New CPU tensors, keys sorted, original dtypes; non-floating tensors take the
        element-wise maximum, as in FedAvg.

    Raises
    ------
    ValueError
        If ``beta`` is refused, there is no update, an id repeats, the state dicts
        differ, or a value is not finite.
    """
    points = beta_basis_points(beta)
    ordered = ordered_updates(updates, RULE)
    states = [state for _, _, state in ordered]
    n = len(ordered)
    k = trimmed_count(n, points)  # β < 1/2, so n − 2k >= 1
    result: StateDict = {}
    for key in sorted(states[0]):
        reference = states[0][key]
        if not reference.is_floating_point():
            result[key] = non_floating_maximum(states, key)
            continue
        column = sorted_coordinates(ordered, key, RULE)
        accumulator = np.zeros(column.shape[1:], dtype=np.float64)
        for i in range(k, n - k):
            np.add(accumulator, column[i], out=accumulator)
        np.divide(accumulator, float(n - 2 * k), out=accumulator)
        result[key] = torch.from_numpy(accumulator).to(reference.dtype)
    return result


@register_aggregation_rule("trimmed-mean", code=2)
class TrimmedMean(AggregationRule):
    """Coordinate-wise trimmed mean.

    Parameters
    ----------
    beta : float, default 0.1
        Fraction trimmed on each side, in ``[0, 1/2)``, a multiple of 1/10 000; the
        parameter word is ``β`` in basis points.
    """

    def __init__(self, beta: float = 0.1) -> None:
        self.basis_points = beta_basis_points(beta)
        self.beta = self.basis_points / BASIS

    @property
    def parameter(self) -> int:
        return self.basis_points

    @classmethod
    def from_parameter(cls, word: int) -> AggregationRule:
        if not 0 <= word < BASIS // 2:
            raise ValueError(f"trimmed mean: parameter word {word} is not a β in basis points")
        return cls(word / BASIS)

    def __repr__(self) -> str:
        return f"TrimmedMean(beta={self.beta})"

    def aggregate(
        self, updates: Sequence[Update], parent: Mapping[str, torch.Tensor] | None = None
    ) -> StateDict:
        return trimmed_mean(updates, self.beta)
