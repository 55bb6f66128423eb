"""FedAvg as aggregation rule code 0: today's network-wide rule behind the same interface."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch

from mcfl_chain.algorithms.fedavg import Update, fedavg
from mcfl_chain.algorithms.robust.base import (
    AggregationRule,
    StateDict,
    register_aggregation_rule,
)


@register_aggregation_rule("fedavg", code=0)
class FedAvgRule(AggregationRule):
    """Sample-weighted FedAvg (:func:`~mcfl_chain.algorithms.fedavg.fedavg`); no parameter."""

    defence = False  # the network's default: rule 0 on chain

    def aggregate(
        self, updates: Sequence[Update], parent: Mapping[str, torch.Tensor] | None = None
    ) -> StateDict:
        return fedavg(updates)
