"""Coordinate-wise median (Yin et al., ICML 2018): aggregation rule code 1.

Each coordinate of the aggregate is the median of that coordinate over the updates:
the middle value for an odd count, ``(a + b) / 2`` of the two middle values for an even
count. Up to half the updates minus one can be arbitrary without dragging a coordinate
outside the range of the honest values. The sample counts are not used: a Byzantine
trainer could inflate its own.

Recomputation: :func:`~.aggregate.sorted_coordinates` (float64, ``-0.0`` made ``+0.0``,
sorted along the update axis), explicit indexing of the middle, one IEEE addition and
one division by 2 for an even count, cast to the tensor's dtype. For an odd count the
result is one of the inputs, so casting back is exact.
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

RULE = "coordinate-wise median"


def coordinate_median(updates: Sequence[Update]) -> StateDict:
    """Coordinate-wise median of ``updates``, bit-identical on every machine.

    Parameters
    ----------
    updates : Sequence[tuple[int, int, Mapping[str, torch.Tensor]]]
        ``(update id, num_samples, state dict)`` in any order; the counts are ignored.

    Returns
    -------
    dict[str, torch.Tensor]
        New CPU tensors, keys sorted, original dtypes; non-floating tensors take the
        element-wise maximum, as in FedAvg.

    Raises
    ------
    ValueError
        If there is no update, an id repeats, the state dicts differ, or a value is not
        finite.
    """
    ordered = ordered_updates(updates, RULE)
    states = [state for _, _, state in ordered]
    n = len(ordered)
    middle = n // 2
    result: StateDict = {}
    for key in sorted(states[0]):
        reference = states[0][key]
        if not reference.is_floating_point():
            result[key] = non_floating_maximum(states, key)
            continue
        column = sorted_coordinates(ordered, key, RULE)
        if n % 2:
            median = column[middle]
        else:
            median = np.add(column[middle - 1], column[middle])
            np.divide(median, 2.0, out=median)
        result[key] = torch.from_numpy(np.ascontiguousarray(median)).to(reference.dtype)
    return result


@register_aggregation_rule("median", code=1)
class CoordinateMedian(AggregationRule):
    """Coordinate-wise median; no parameter."""

    def aggregate(
        self, updates: Sequence[Update], parent: Mapping[str, torch.Tensor] | None = None
    ) -> StateDict:
        return coordinate_median(updates)
