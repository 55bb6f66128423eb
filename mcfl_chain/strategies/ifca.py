"""IFCA, the Iterative Federated Clustering Algorithm (Ghosh et al. 2020; MCFL paper ref. [4]).

The network keeps ``clusters`` = k models. Each round a trainer evaluates them on its own
data, trains the one with the lowest loss, and each model is the FedAvg of the updates
of the trainers that chose it. Here the k models are not held by a server:

- **First round.** The k starting models are initialisations derived from the network
  seed (:func:`cluster_seed`), which anybody can rebuild. Every trainer scores them on
  its selection split, trains the lowest-loss one and proposes the update on the root
  (the only model on chain). To aggregate, a trainer assigns every update on the root to
  the starting model it is nearest to in L2 (two epochs from a random initialisation
  stay far nearer to it than to another one), and averages those in its own cluster —
  a deterministic rule, so every member of a cluster submits the same update set and
  the chain records one model per cluster.
- **Later rounds.** The candidates are the k cluster models: the models appended in the
  previous round, and the newest model of every cluster that nobody chose since
  (:meth:`IFCAStrategy.carried_models`). The trainer trains the one with the lowest
  loss and aggregates every update on it.

**Clusters persist**, as server-side IFCA's k models do: a model no trainer chose in a
round keeps its weights and is offered again the next round. On the DAG a cluster is a
lineage (a first-round model on the root, then each model aggregated on the previous
one); its model now is the lineage's newest
(:func:`~mcfl_chain.algorithms.ifca.cluster_heads`). Nothing is resubmitted to carry it
forward: the Models contract takes a proposal on any model that exists, whatever its
round, and an update's id commits to (trainer, parent, round), so a trainer that returns
to a dormant cluster trains its newest model and proposes on it in the current round,
and its cluster's members aggregate every update on it, as in any round. Every trainer
finds the heads from the chain alone (each model's first parent, in the order they were
appended), so all agree on the candidates without a server, and a dormant cluster costs
no gas. What does not persist: a starting model that no trainer chose in the first round
never reaches the chain (the starting models are rebuilt from the seed, not recorded),
so fewer than k clusters exist from then on; server-side IFCA would keep offering that
initialisation, which a trainer whose data fit none of the trained models could still
pick.

**k.** The campaign (:func:`mcfl_chain.simulation.campaign.true_group_count`) gives IFCA
the number of data groups the scenario declares (two datasets: 2; ``n_groups`` of a
grouped scenario; IID: 1) and 3 only where it declares none (gaussian, Dirichlet); the
run's ``config.json`` records it as ``clusters``.

A defence (``--defence``) runs on the updates IFCA keeps: every update on the trained
model, or in the first round those of the own cluster.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from mcfl_chain.algorithms.divergence import flatten_state
from mcfl_chain.algorithms.ifca import cluster_heads
from mcfl_chain.strategies.base import Candidate, K, Strategy, StrategyOption, register_strategy


def cluster_seed(seed: int, cluster: int) -> int:
    """Initialisation seed of IFCA's starting model ``cluster`` in a network seeded ``seed``."""
    return (seed * 1_000_003 + 2 * cluster) % 2**63


@register_strategy("ifca")
class IFCAStrategy(Strategy):
    """IFCA's rules."""

    clusters = StrategyOption(
        int, 3, "IFCA: k, the number of models the network trains.", minimum=1
    )

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self._models: list[Any] | None = None
        self._starts: list[np.ndarray] | None = None

    def _starting_models(self) -> list[Any]:
        """The k starting models, built once (a round-0 trainer needs them to train and
        again to aggregate)."""
        if self._models is None:
            context = self._context()
            self._models = [
                context.initial_weights(cluster_seed(context.seed, j)) for j in range(self.clusters)
            ]
        return self._models

    def _starting_vectors(self) -> list[np.ndarray]:
        if self._starts is None:
            self._starts = [flatten_state(w) for w in self._starting_models()]
        return self._starts

    def starting_weights(self) -> Any | None:
        """The starting model with the lowest loss on the trainer's selection split."""
        context = self._context()
        models = self._starting_models()
        losses = [context.validation_loss(w) for w in models]
        return models[int(np.argmin(losses))]

    def nearest_start(self, vector: np.ndarray) -> int:
        """The index of the starting model nearest (L2) to ``vector``; ties to the lower."""
        distances = [float(np.linalg.norm(vector - start)) for start in self._starting_vectors()]
        return int(np.argmin(distances))

    def carried_models(self, round_: int) -> list[Any]:
        """The newest model of every cluster (lineage) on chain before ``round_``, so a
        cluster nobody chose lately is a candidate still (module docstring)."""
        context = self._context()
        models_of_round = context.need("models_of_round")
        model_info = context.need("model_info")
        appended = []
        for earlier in range(round_):
            for key in models_of_round(earlier):
                parents = model_info(key).parents
                appended.append((key, parents[0] if parents else None))
        return cluster_heads(appended)

    def choose_models(self, candidates: Sequence[Candidate[K]]) -> list[K]:
        """The candidate with the lowest loss; ties to the smaller key. Without a measured
        loss (NaN), the highest metric."""
        if not candidates:
            return []
        if len(candidates) == 1:
            return [candidates[0].key]
        measured = [c for c in candidates if not np.isnan(c.loss)]
        if measured:
            return [min(measured, key=lambda c: (c.loss, c.key)).key]
        return [min(candidates, key=lambda c: (-c.metric, c.key)).key]

    def choose_updates(
        self,
        own: K,
        vectors: Mapping[K, np.ndarray],
        parent: np.ndarray | None = None,
        *,
        first_round: bool = False,
    ) -> list[K]:
        """Every update on the parent; in the first round, those of the own cluster."""
        if own not in vectors:
            raise KeyError(f"the own update {own!r} is not among the updates to select from")
        if not first_round:
            return sorted(vectors)  # type: ignore[type-var]
        mine = self.nearest_start(vectors[own])
        return sorted(k for k, v in vectors.items() if self.nearest_start(v) == mine)  # type: ignore[type-var]
