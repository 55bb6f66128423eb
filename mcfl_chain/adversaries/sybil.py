"""Sybil popularity attack (Douceur 2002; Fung et al.'s FoolsGold threat model, 2020).

``k`` identities controlled by one attacker form a coalition. Each round they all train
the same model and all aggregate the same set — the coalition's own updates only — so
they submit one model id ``k`` times: its popularity, which multiplies every honest
trainer's score of it by ``sqrt(popularity)`` (paper Algorithm 1), is ``k`` for a model
made only of the attacker's updates.

Their shared rules use only what the chain shows, so colluders agree without talking:

- ``choose_models``: among the candidates whose updates were all proposed by the
  coalition, the most popular (ties: the smaller id); if there is none, the most
  popular candidate of all (ties: the smaller id). One model only.
- ``choose_updates``: every usable update proposed by a coalition member, and the own.

``payload`` names another adversary whose data, training and publication hooks the
Sybils use (e.g. ``"backdoor"`` or ``"sign-flip"``, with its default parameters), so
that the popular model carries an attack; without one, the Sybils train honestly.
:mod:`.sybil_payloads` registers Sybils that carry a backdoor or a sign flip with that
attack's parameters (``sybil-backdoor:target=7``, ``sybil-sign-flip:scale=4``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from mcfl_chain.adversaries.base import (
    ADVERSARIES,
    Adversary,
    CandidateView,
    K,
    Publication,
    register_adversary,
)
from mcfl_chain.learning.scenario import TrainerData


@register_adversary("sybil")
class Sybil(Adversary):
    """One identity of a colluding coalition that inflates its model's popularity.

    Parameters
    ----------
    coalition : Iterable[str] or str, default ()
        Addresses of every identity of the coalition (this one's included), or one text
        of them joined by ``+`` (as written in ``sybil:coalition=0xA…+0xB…``); the
        simulator fills it (:func:`~mcfl_chain.adversaries.spec.build_adversaries`,
        :func:`~mcfl_chain.adversaries.spec.with_coalitions`).
    payload : str or Adversary, optional
        Name of a registered adversary whose data, training and publication hooks to use
        (with its default parameters), or such an adversary already built.
    """

    def __init__(
        self, coalition: Iterable[str] | str = (), payload: str | Adversary | None = None
    ) -> None:
        if isinstance(coalition, str):
            coalition = [address.strip() for address in coalition.split("+") if address.strip()]
        self.coalition = frozenset(address.lower() for address in coalition)
        if isinstance(payload, Sybil) or payload == "sybil":
            raise ValueError("a sybil's payload must be another adversary, not 'sybil'")
        if isinstance(payload, str) and payload not in ADVERSARIES:
            known = ", ".join(sorted(set(ADVERSARIES) - {"sybil"}))
            raise ValueError(f"unknown sybil payload {payload!r}; known: {known}")
        if isinstance(payload, Adversary):
            self.payload = payload
        else:
            self.payload = ADVERSARIES[payload]() if payload is not None else Adversary()
        self.trains = self.payload.trains

    def __repr__(self) -> str:
        return f"Sybil(coalition={sorted(self.coalition)}, payload={self.payload!r})"

    def training_data(self, data: TrainerData, rng: np.random.Generator) -> TrainerData:
        return self.payload.training_data(data, rng)

    def publish_update(self, publication: Publication) -> str:
        return self.payload.publish_update(publication)

    def declared_samples(self, honest: int, cap: int) -> int:
        return self.payload.declared_samples(honest, cap)

    def choose_models(self, candidates: Sequence[CandidateView[K]], honest: Sequence[K]) -> list[K]:
        if not candidates:
            return list(honest)
        ours = [
            c
            for c in candidates
            if c.proposers and {proposer.lower() for proposer in c.proposers} <= self.coalition
        ]
        best = min(ours or candidates, key=lambda c: (-c.popularity, c.key))
        return [best.key]

    def choose_updates(self, own: K, honest: Sequence[K], proposers: Mapping[K, str]) -> list[K]:
        ours = {key for key, proposer in proposers.items() if proposer.lower() in self.coalition}
        return sorted(ours | {own})  # type: ignore[type-var]
