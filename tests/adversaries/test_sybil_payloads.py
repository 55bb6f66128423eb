"""Sybils that carry a backdoor or a sign flip: the coalition's choices of a Sybil, the
updates of the payload, the payload's parameters on the command line."""

from __future__ import annotations

import numpy as np
import torch

from mcfl_chain.adversaries import (
    CandidateView,
    adversary_parameters,
    assign_adversaries,
    make_adversary,
    parse_adversary,
    with_coalitions,
)
from mcfl_chain.adversaries.backdoor import Backdoor
from mcfl_chain.adversaries.sign_flip import moved_from_parent
from mcfl_chain.adversaries.sybil import Sybil
from mcfl_chain.learning.codec import decode_weights
from mcfl_chain.learning.models import create_model

ARCH = "lenet5"
COALITION = "0xAA+0xBB"


def test_the_payloads_parameters_are_the_adversarys() -> None:
    assert adversary_parameters("sybil-backdoor") == [
        "coalition",
        "target",
        "fraction",
        "size",
        "value",
    ]
    assert adversary_parameters("sybil-sign-flip") == ["coalition", "scale"]
    carrier = parse_adversary("sybil-backdoor:target=7:fraction=0.5")
    assert isinstance(carrier, Sybil) and isinstance(carrier.payload, Backdoor)
    assert (carrier.payload.target, carrier.payload.fraction) == (7, 0.5)


def test_a_backdoor_sybil_poisons_its_data_as_the_backdoor_does(trainer_data) -> None:
    # Prepare
    carrier = make_adversary("sybil-backdoor", coalition=COALITION, target=3, fraction=0.5)
    alone = Backdoor(target=3, fraction=0.5)

    # Execute
    poisoned = carrier.training_data(trainer_data, np.random.default_rng(7))
    expected = alone.training_data(trainer_data, np.random.default_rng(7))

    # Assert: the same images and labels, half of them triggered and labelled 3
    assert torch.equal(poisoned.train_x, expected.train_x)
    assert torch.equal(poisoned.train_y, expected.train_y)
    assert int((poisoned.train_y != trainer_data.train_y).sum()) > 0


def test_a_sign_flip_sybil_publishes_the_reversed_step_and_colludes(publish) -> None:
    # Prepare
    parent = create_model(ARCH, seed=0).state_dict()
    trained = create_model(ARCH, seed=1).state_dict()
    publication, store = publish(trained, parent)
    carrier = make_adversary("sybil-sign-flip", coalition=COALITION, scale=2.0)
    candidates = [
        CandidateView(b"a", 0.9, 4, frozenset({"0x01"})),
        CandidateView(b"b", 0.1, 2, frozenset({"0xaa", "0xbb"})),
    ]

    # Execute
    published = decode_weights(store[carrier.publish_update(publication)], ARCH)

    # Assert: parent − 2·Δ, and the Sybil's choices (the coalition's model, its updates)
    expected = moved_from_parent(trained, parent, -2.0)
    assert all(torch.allclose(published[k], expected[k], atol=1e-6) for k in expected)
    assert carrier.choose_models(candidates, [b"a"]) == [b"b"]
    assert carrier.choose_updates(5, [2, 5], {2: "0x01", 5: "0xAA", 7: "0xbb"}) == [5, 7]


def test_the_simulator_tells_each_carrier_its_coalition() -> None:
    # Prepare
    assignment = assign_adversaries("sybil-backdoor:0.5:target=2", 4, seed=0)
    addresses = ["0xA0", "0xA1", "0xA2", "0xA3"]

    # Execute
    told = with_coalitions(assignment, addresses)

    # Assert
    members = sorted(assignment)
    assert len(members) == 2
    for index in members:
        rebuilt = parse_adversary(str(told[index]))
        assert isinstance(rebuilt, Sybil) and isinstance(rebuilt.payload, Backdoor)
        assert rebuilt.coalition == {addresses[i].lower() for i in members}
        assert rebuilt.payload.target == 2
