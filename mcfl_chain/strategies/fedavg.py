"""The decentralized FedAvg baseline (paper §5.1) on the same network.

Every trainer trains the single most popular model and aggregates every update, so all
trainers submit the same update set and the DAG stays a chain.

With a defence (``--defence``, e.g. Multi-Krum) a trainer aggregates the updates the
rule keeps out of every usable update on the parent, instead of all of them: the
classic robust FedAvg. Trainers with the same rule and the same updates keep the same
set, so the DAG still stays a chain among them. An aggregation-rule defence (e.g.
``--defence median``) keeps every update and aggregates them with that rule instead of
FedAvg; the model id commits to the rule, so trainers with the same rule agree on one
model and those with another make another.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from mcfl_chain.strategies.base import Candidate, K, Strategy, register_strategy


@register_strategy("fedavg")
class FedAvgStrategy(Strategy):
    """FedAvg's rules: the most popular model, every update."""

    def choose_models(self, candidates: Sequence[Candidate[K]]) -> list[K]:
        """The single most popular candidate; ties go to the higher metric, then the smaller key."""
        if not candidates:
            return []
        best = min(candidates, key=lambda c: (-c.popularity, -c.metric, c.key))
        return [best.key]

    def choose_updates(
        self,
        own: K,
        vectors: Mapping[K, np.ndarray],
        parent: np.ndarray | None = None,
        *,
        first_round: bool = False,
    ) -> list[K]:
        """Every update, sorted ascending."""
        if own not in vectors:
            raise KeyError(f"the own update {own!r} is not among the updates to select from")
        return sorted(vectors)  # type: ignore[type-var]
