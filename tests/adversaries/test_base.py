"""The adversary interface's honest defaults and the registry's parameters."""

from __future__ import annotations

import numpy as np
import pytest

from mcfl_chain.adversaries import (
    ADVERSARIES,
    Adversary,
    CandidateView,
    adversary_parameters,
    make_adversary,
)
from mcfl_chain.adversaries.sign_flip import SignFlip
from mcfl_chain.learning.codec import decode_weights, encode_weights
from mcfl_chain.learning.models import create_model

ARCH = "lenet5"


def test_every_hook_defaults_to_the_honest_behaviour(publish, trainer_data) -> None:
    # Prepare
    honest = Adversary()
    weights = create_model(ARCH, seed=1).state_dict()
    publication, store = publish(weights, create_model(ARCH, seed=0).state_dict())
    candidates = [CandidateView(b"a", 0.5, 1), CandidateView(b"b", 0.9, 3)]

    # Execute
    cid = honest.publish_update(publication)

    # Assert
    assert store[cid] == encode_weights(ARCH, weights)
    assert honest.training_data(trainer_data, np.random.default_rng(0)) is trainer_data
    assert honest.declared_samples(120, 2**30 - 1) == 120
    assert honest.trains
    assert honest.choose_models(candidates, [b"b"]) == [b"b"]
    proposers = {2: "0x1", 5: "0x2", 9: "0x3", 11: "0x4"}
    assert honest.choose_updates(5, [9, 5, 2], proposers) == [2, 5, 9]
    assert decode_weights(store[cid], ARCH).keys() == weights.keys()


def test_registry_names_every_adversary_with_its_parameters() -> None:
    assert {
        "garbage-weights",
        "nan-weights",
        "unreachable-cid",
        "label-flip",
        "backdoor",
        "sign-flip",
        "scaling",
        "free-rider",
        "sample-inflation",
        "sybil",
    } <= set(ADVERSARIES)
    assert adversary_parameters("backdoor") == ["target", "fraction", "size", "value"]
    assert adversary_parameters("nan-weights") == []


def test_make_adversary_passes_parameters_and_refuses_unknown_ones() -> None:
    # Execute
    adversary = make_adversary("sign-flip", scale=4.0)

    # Assert
    assert isinstance(adversary, SignFlip) and adversary.scale == 4.0
    with pytest.raises(ValueError, match="'sign-flip' has no parameter lambda; it accepts: scale"):
        make_adversary("sign-flip", **{"lambda": 2.0})
    with pytest.raises(ValueError, match="accepts: none"):
        make_adversary("nan-weights", scale=2)
