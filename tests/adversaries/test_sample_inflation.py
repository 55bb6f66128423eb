"""Sample inflation declares the contract's cap and publishes honest weights."""

from __future__ import annotations

from mcfl_chain.adversaries import make_adversary
from mcfl_chain.learning.codec import encode_weights
from mcfl_chain.learning.models import create_model

ARCH = "lenet5"

MAX_SAMPLES = 2**30 - 1  # Updates.vy


def test_declares_the_cap_whatever_it_trained_on(publish) -> None:
    # Prepare
    adversary = make_adversary("sample-inflation")
    weights = create_model(ARCH, seed=1).state_dict()
    publication, store = publish(weights, create_model(ARCH, seed=0).state_dict())

    # Execute
    declared = [adversary.declared_samples(honest, MAX_SAMPLES) for honest in (1, 350, 60_000)]
    cid = adversary.publish_update(publication)

    # Assert
    assert declared == [MAX_SAMPLES] * 3
    assert store[cid] == encode_weights(ARCH, weights)
