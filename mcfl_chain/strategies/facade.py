"""FACADE (thesis Algorithm 1): one shared core and k heads; each trainer trains the
core with its lowest-loss head, and each head is averaged over the trainers that chose it.

The network's model is ``<arch>-heads<k>`` (:func:`~mcfl_chain.learning.models.multi_head_arch`):
its state dict holds the core, the k heads and ``head_choice``, the head it predicts with.
Every round a trainer

1. takes the most popular model of the previous round (everybody aggregates every
   update, as in the FedAvg baseline, so the DAG stays one chain of models: the chain
   plays the thesis' gossip, every trainer receives every update);
2. scores the k heads on its selection split and keeps the lowest loss (Algorithm 1,
   line 3, :meth:`FACADEStrategy.personalise`): it trains the core with that head, the
   other heads get no gradient, and its update carries the choice in ``head_choice``;
3. aggregates every update with the architecture's rule ``per-head-fedavg``
   (:mod:`mcfl_chain.algorithms.facade`): the core over every update, head j over the
   updates that chose j. The rule reads the update blobs alone, so anybody recomputes
   the model from its ids.

A trainer's reported figure is the model with its own head, so majority and minority
clusters are each judged on the head they chose; its metrics line says which
(``"personal": {"head": j}``). The k heads start as the root's: the
network's seeded initialisation (``devnet up``, ``simulate``), which anybody rebuilds.

Two readings of the thesis: the heads are scored on the selection (validation) split,
as IFCA's models are here, where the thesis scores them on (a subset of) the training
set; and the thesis' remedy for heads that never settle (a few rounds of shared heads
first, §4.4) is not implemented: with few trainers every cluster may settle on one head.

A selection-rule defence (``--defence``) runs on every update of the parent, as for
FedAvg. An aggregation-rule defence (median, ...) is refused: it would replace the
per-head rule the architecture names.
"""

from __future__ import annotations

from typing import Any

from mcfl_chain.algorithms.facade import head_choice, head_count, lowest_loss_head, with_head
from mcfl_chain.strategies.base import StrategyOption, register_strategy
from mcfl_chain.strategies.fedavg import FedAvgStrategy


@register_strategy("facade")
class FACADEStrategy(FedAvgStrategy):
    """FACADE's rules: FedAvg's choice of model and updates on a model with k heads."""

    clusters = StrategyOption(
        int,
        3,
        "FACADE: k, the number of heads (the network trains the model's <base>-heads<k> version).",
        minimum=1,
    )

    def model_heads(self) -> int | None:
        return self.clusters

    def personalise(self, weights: Any) -> Any:
        """The weights with the head of lowest loss on the trainer's selection split.

        Raises
        ------
        ValueError
            If the model has not the k heads this strategy was built for.
        """
        heads = head_count(weights)
        if heads != self.clusters:
            raise ValueError(
                f"FACADE with {self.clusters} heads got a model with {heads}: the network's "
                f"architecture must be <base>-heads{self.clusters}"
            )
        context = self._context()
        losses = [context.validation_loss(with_head(weights, j)) for j in range(heads)]
        return with_head(weights, lowest_loss_head(losses))

    def personal_labels(self, weights: Any) -> dict[str, Any]:
        """The head this trainer's version of the model predicts with, for the metrics
        (which head each cluster settles on: thesis §4.4)."""
        return {"head": head_choice(weights)}
