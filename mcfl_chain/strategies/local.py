"""Local training alone: the lower bracket of every collaborative method.

Each trainer starts from its own initialisation (as MCFL's own-branch start), trains only
the model its own aggregation produced in the previous round, and aggregates only its
own update. It runs on the same chain as the others, so its rounds, data, seeds and
reporting are theirs; only the collaboration is missing. A defence has nothing to do:
the own update is the only one kept.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from mcfl_chain.strategies.base import Candidate, K, Strategy, own_branch_seed, register_strategy


@register_strategy("local")
class LocalStrategy(Strategy):
    """No collaboration: one's own lineage, one's own update."""

    own_lineage_only = True

    def starting_weights(self) -> Any | None:
        context = self._context()
        return context.initial_weights(own_branch_seed(context.seed, context.trainer_id))

    def choose_models(self, candidates: Sequence[Candidate[K]]) -> list[K]:
        """The candidate this trainer produced; the root (the only candidate of the first
        round) otherwise. A trainer that lost its lineage (its last aggregation failed)
        takes its best-scoring candidate rather than sit out."""
        mine = [c.key for c in candidates if c.mine]
        if mine:
            return mine[:1]
        if len(candidates) == 1:
            return [candidates[0].key]
        best = min(candidates, key=lambda c: (-c.metric, c.key))
        return [best.key]

    def choose_updates(
        self,
        own: K,
        vectors: Mapping[K, np.ndarray],
        parent: np.ndarray | None = None,
        *,
        first_round: bool = False,
    ) -> list[K]:
        """Only the own update."""
        if own not in vectors:
            raise KeyError(f"the own update {own!r} is not among the updates to select from")
        return [own]
