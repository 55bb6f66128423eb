"""FedProx (Li et al. 2020, "Federated Optimization in Heterogeneous Networks"): FedAvg
whose local training adds the proximal term ``(μ/2) ‖w − wᵗ‖²`` to the loss.

Each trainer minimises ``Fₖ(w) + (μ/2) ‖w − wᵗ‖²`` from the global model ``wᵗ`` it
trains (paper Eq. 2). The term pulls the local solution back towards ``wᵗ``, which
bounds the client drift that non-IID data causes; its gradient is ``μ (w − wᵗ)``. Every
rule on chain is FedAvg's (:mod:`~mcfl_chain.strategies.fedavg`): the most popular
model, every update, so the DAG stays one chain of models. Only the local objective
differs, which is the strategy's :meth:`~FedProxStrategy.regulariser`. It is a quadratic
penalty (:func:`~mcfl_chain.algorithms.proximal.proximal_penalty`), which the batched
compute applies to many models at once.

What this implementation leaves out of the paper: its tolerance on inexact local
solutions (γ-inexactness; every trainer here runs the configured epochs) and its
partial-work stragglers. With μ = 0 it is FedAvg exactly.

Like FedAvg's, a defence runs on every update of the parent. The penalty is local:
nobody can check from an update whether it was trained with it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mcfl_chain.algorithms.proximal import proximal_penalty
from mcfl_chain.strategies.base import K, StrategyOption, register_strategy
from mcfl_chain.strategies.fedavg import FedAvgStrategy


@register_strategy("fedprox")
class FedProxStrategy(FedAvgStrategy):
    """FedAvg's rules; local training with FedProx's proximal term."""

    mu = StrategyOption(
        float,
        0.01,
        "FedProx: μ, the weight of the proximal term (μ/2)·‖w − w_global‖² added to the "
        "local loss (the paper tunes it over 0.001-1; 0 is FedAvg).",
        minimum=0,
    )

    def regulariser(self, parent: K) -> Callable[[Any], Any] | None:
        """``(μ/2) ‖w − w_parent‖²``, the parent being the global model trained (None
        when μ is 0: plain training)."""
        if self.mu == 0:
            return None
        anchor = self._context().need("model_weights")(parent)
        return proximal_penalty(self.personalise(anchor), self.mu)
