"""FedAvg with local fine-tuning (FedAvg-FT), the simplest personalised baseline: the
global FedAvg model, trained for a few more epochs on the trainer's own data before it
is evaluated.

Everything on chain is FedAvg's (:mod:`~mcfl_chain.strategies.fedavg`): the most popular
model, every update aggregated, one chain of global models, trained from the global
model every round. The fine-tuned copy is made for the trainer's report alone
(:meth:`FedAvgFTStrategy.deployed`, through the context's ``train`` view): its selection
and test figures are the fine-tuned model's, which never goes on chain and is never
trained from again (next round starts from the global model once more). This is the
usual "FedAvg + fine-tuning" baseline of the personalisation literature (e.g. Wang et
al. 2019, "Federated Evaluation of On-device Personalization"): a global model adapted
to each client at evaluation time.

A defence runs on every update of the parent, as for FedAvg.
"""

from __future__ import annotations

from typing import Any

from mcfl_chain.strategies.base import StrategyOption, register_strategy
from mcfl_chain.strategies.fedavg import FedAvgStrategy


@register_strategy("fedavg-ft")
class FedAvgFTStrategy(FedAvgStrategy):
    """FedAvg's rules; the model fine-tuned locally before it is reported."""

    finetune_epochs = StrategyOption(
        int,
        1,
        "FedAvg-FT: local epochs of fine-tuning of the global model before the trainer "
        "reports it (off chain, never trained from again).",
        minimum=1,
    )

    def deployed(self, weights: Any) -> Any:
        """``weights`` fine-tuned for :attr:`finetune_epochs` epochs on the trainer's
        training split, without penalty."""
        return self._context().need("train")(weights, None, self.finetune_epochs)
