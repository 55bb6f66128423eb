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

``fedavg_start``: ``"all"`` (default, the published runs): in the network's first round
every trainer trains the root and aggregates every update, like any round. ``"one"``:
the authors' first round (Mick00/dml, ``fed_avg/start_training.py``: the peer with the
lowest id creates the seed model): only trainer id 1, the lowest (the contracts mint ids
from 1, and round 0's members are ids 1 to its quorum), trains the root in round 0; the
others vote without a proposal and train its model from round 1 on, so round 0's model
is one trainer's update alone. Should trainer 1 not take part (a cohort that did not
draw it), round 0 appends no model and everyone trains the root in round 1, as usual.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from mcfl_chain.strategies.base import Candidate, K, Strategy, StrategyOption, register_strategy

FEDAVG_STARTS = ("all", "one")
FIRST_TRAINER_ID = 1
"""The lowest trainer id of a network: the trainer that plays round 0 alone when
``fedavg_start`` is ``"one"``."""


@register_strategy("fedavg")
class FedAvgStrategy(Strategy):
    """FedAvg's rules: the most popular model, every update."""

    fedavg_start = StrategyOption(
        str,
        "all",
        "FedAvg's first round: all (every trainer trains the root) or one (trainer 1 "
        "alone, the others from round 1 on; the authors' code).",
        choices=FEDAVG_STARTS,
    )

    def choose_models(self, candidates: Sequence[Candidate[K]]) -> list[K]:
        """The single most popular candidate; ties go to the higher metric, then the
        smaller key. Nothing in round 0 when ``fedavg_start`` is ``"one"`` and this
        trainer is not trainer 1."""
        if not candidates:
            return []
        if (
            self.fedavg_start == "one"
            and self.round == 0
            and self._context().trainer_id != FIRST_TRAINER_ID
        ):
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
