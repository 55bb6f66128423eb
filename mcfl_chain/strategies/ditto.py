"""Ditto (Li et al. 2021, "Ditto: Fair and Robust Federated Learning Through
Personalization"): FedAvg's global model, and beside it one personal model per trainer,
pulled towards the global one; a trainer reports its personal model.

Each round a trainer

1. trains the global model as in FedAvg (:mod:`~mcfl_chain.strategies.fedavg`: the most
   popular model, every update aggregated), which is the global objective ``G``;
2. trains its personal model ``vₖ`` on its own data for the round's epochs, with
   ``Fₖ(v) + (λ/2) ‖v − w‖²`` (paper Eq. 2, Algorithm 1's personal solver), where ``w``
   is the global model; its gradient is ``∇Fₖ(v) + λ (v − w)``;
3. reports ``vₖ``: its selection and test figures are the personal model's
   (:meth:`DittoStrategy.deployed`).

λ interpolates between local training (λ = 0) and FedAvg (λ → ∞); the paper tunes it per
data set. The penalty is a quadratic one
(:func:`~mcfl_chain.algorithms.proximal.proximal_penalty`), so the batched compute
trains the personal models of all its trainers at once, as it does their updates.

**Where the personal model lives: off chain.** The chain's DAG holds the models that
several trainers build from each other's updates and anybody can recompute: here the
single chain of global models, exactly as FedAvg's. ``vₖ`` is different in kind: only
trainer k trains it, only from its own data and from the global models already on
chain, and nobody else ever reads it. Putting it on chain would cost one more blob and
one more aggregation per trainer and round, a one-trainer branch that merges nothing,
and it would prove nothing: local training is never checkable from its result, so a
recorded ``vₖ`` would say no more than the trainer's word. FACADE's head choice stays
private in the same way (:meth:`~mcfl_chain.strategies.base.Strategy.personalise`: what
a trainer does with a shared model is its own business). So ``vₖ`` stays in the
worker's memory, trained through the context's ``train`` view, and its figures are
what the trainer reports.

Readings: the personal update of a round is anchored at the round's new global model,
the one the trainer's aggregation produced (the paper anchors round t's personal step
at ``wᵗ``, the model received at its start: the same steps, one aggregation later, so
the reported model has seen the newest global model). ``vₖ`` starts as the first global
model the trainer aggregates, the paper's ``vₖ = w⁰`` one round on. A worker that
restarts has lost ``vₖ`` and starts it again from the current global model.

A defence runs on every update of the parent, as for FedAvg. The adversaries of this
project act on the global updates; the paper's robustness claim rests on the personal
models, which attacks on the global model reach only through the penalty.
"""

from __future__ import annotations

from typing import Any

from mcfl_chain.strategies.base import StrategyOption, register_strategy
from mcfl_chain.strategies.fedavg import FedAvgStrategy
from mcfl_chain.strategies.personal import PersonalModel


@register_strategy("ditto")
class DittoStrategy(FedAvgStrategy):
    """FedAvg's rules for the global model; a personal model per trainer, reported."""

    ditto_lambda = StrategyOption(
        float,
        0.1,
        "Ditto: λ, the weight of (λ/2)·‖v − w_global‖² in the personal model's local loss "
        "(0: local training; large: FedAvg; the paper tunes it per data set).",
        minimum=0,
    )
    personal_epochs = StrategyOption(
        int,
        0,
        "Ditto: local epochs of the personal model per round (0: the network's epochs per "
        "round, as the global update's).",
        minimum=0,
    )

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self._personal = PersonalModel()

    @property
    def personal(self) -> Any | None:
        """The personal model as the last round left it (None before the first)."""
        return self._personal.weights

    @personal.setter
    def personal(self, weights: Any | None) -> None:
        self._personal.weights = weights

    def deployed(self, weights: Any) -> Any:
        """The personal model after this round's step towards ``weights``, the global
        model the trainer's aggregation produced (module docstring)."""
        train = self._context().need("train")
        return self._personal.step(
            train, self.round, weights, self.ditto_lambda, self.personal_epochs or None
        )
