"""Sybils: every identity picks the same model and the same coalition-only update set."""

from __future__ import annotations

import numpy as np
import pytest

from mcfl_chain.adversaries import CandidateView, make_adversary
from mcfl_chain.adversaries.sign_flip import SignFlip

COALITION = ["0xAA", "0xBB", "0xCC"]
# Usable updates on one parent: 1, 4 and 6 by the coalition, 2, 3 and 5 by honest trainers.
PROPOSERS = {1: "0xaa", 2: "0x01", 3: "0x02", 4: "0xBB", 5: "0x03", 6: "0xcc"}


def test_every_identity_submits_the_same_coalition_only_set() -> None:
    # Prepare: each Sybil's strategy (Algorithm 2) kept different honest peers.
    sybils = [make_adversary("sybil", coalition=COALITION) for _ in COALITION]
    own_and_honest = [(1, [1, 2, 3]), (4, [2, 4, 5]), (6, [3, 6])]

    # Execute
    chosen = [
        s.choose_updates(own, honest, PROPOSERS)
        for s, (own, honest) in zip(sybils, own_and_honest, strict=True)
    ]

    # Assert: one id list, hence one model id submitted 3 times (popularity 3).
    assert chosen == [[1, 4, 6]] * 3


def test_models_made_by_the_coalition_are_preferred_then_popularity() -> None:
    # Prepare: b is the honest favourite; c and d are the coalition's (d more popular).
    sybil = make_adversary("sybil", coalition=COALITION)
    candidates = [
        CandidateView(b"a", 0.9, 1, frozenset({"0xaa", "0x01"})),
        CandidateView(b"b", 0.95, 5, frozenset({"0x01", "0x02"})),
        CandidateView(b"c", 0.2, 2, frozenset({"0xaa"})),
        CandidateView(b"d", 0.1, 3, frozenset({"0xBB", "0xcc"})),
    ]

    # Execute / Assert
    assert sybil.choose_models(candidates, [b"b", b"a"]) == [b"d"]
    honest_only = candidates[:2]
    assert sybil.choose_models(honest_only, [b"a"]) == [b"b"]  # most popular
    root = [CandidateView(bytes(32), 0.1, 1)]
    assert sybil.choose_models(root, [bytes(32)]) == [bytes(32)]


def test_payload_supplies_the_other_hooks(trainer_data) -> None:
    sybil = make_adversary("sybil", coalition=COALITION, payload="sample-inflation")
    assert sybil.declared_samples(10, 99) == 99
    flipping = make_adversary("sybil", payload="sign-flip")
    assert isinstance(flipping.payload, SignFlip)  # type: ignore[attr-defined]
    rider = make_adversary("sybil", payload="free-rider")
    assert rider.trains is False
    honest = make_adversary("sybil")
    assert honest.training_data(trainer_data, np.random.default_rng(0)) is trainer_data
    with pytest.raises(ValueError, match="unknown sybil payload 'x'"):
        make_adversary("sybil", payload="x")
