"""A personal model: one only its trainer trains, kept off chain (Ditto's personal solver).

Ditto (:mod:`~mcfl_chain.strategies.ditto`) and MCFL-plus's ``plus_personal`` keep, beside
the shared models on chain, a model that trainer k trains on its own data with the loss
``Fₖ(v) + (λ/2) ‖v − w‖²``, ``w`` the shared model of the round (Ditto, Li et al. 2021,
Eq. 2 and Algorithm 1's personal solver). Not a strategy: the step both of them take.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mcfl_chain.algorithms.proximal import proximal_penalty

TrainView = Callable[[Any, Any, int | None], Any]
"""The context's ``train`` view: ``(weights, penalty, epochs or None) → weights``."""


class PersonalModel:
    """The personal model ``v`` of one trainer, and its step of a round."""

    def __init__(self) -> None:
        self.weights: Any | None = None
        """``v`` as the last step left it (None before the first)."""
        self._round_start: tuple[int | None, Any | None] | None = None
        # (round, v at its start): a second step in one round trains from the same start,
        # so the round's personal step is taken once.

    def step(
        self, train: TrainView, round_: int | None, anchor: Any, lam: float, epochs: int | None
    ) -> Any:
        """``v`` trained for the round towards ``anchor`` (the shared model), with ``λ =
        lam`` (0: no pull, local training); from ``anchor`` itself before the first step
        (Ditto's ``vₖ = w⁰``, one round on)."""
        if self._round_start is None or self._round_start[0] != round_:
            self._round_start = (round_, self.weights)
        start = self._round_start[1]
        penalty = proximal_penalty(anchor, lam) if lam else None
        self.weights = train(anchor if start is None else start, penalty, epochs)
        return self.weights
