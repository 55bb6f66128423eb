"""The malformed-update adversaries publish exactly what an honest peer must reject."""

from __future__ import annotations

import pytest
import safetensors.torch
import torch

from mcfl_chain.adversaries import ADVERSARIES, Publication, make_adversary
from mcfl_chain.learning.codec import (
    NonFiniteWeightsError,
    WeightsError,
    decode_weights,
    encode_weights,
)
from mcfl_chain.learning.models import create_model
from mcfl_chain.storage.cid import cid_for_bytes

ARCH = "lenet5"


@pytest.fixture
def publication():
    store: dict[str, bytes] = {}

    def put(blob: bytes) -> str:
        cid = cid_for_bytes(blob)
        store[cid] = blob
        return cid

    weights = create_model(ARCH, seed=1).state_dict()
    parent = create_model(ARCH, seed=0).state_dict()
    pub = Publication(
        weights=weights,
        parent_weights=parent,
        trainer="0xabc",
        encode=lambda s: encode_weights(ARCH, s),
        put=put,
    )
    return pub, store


def test_registry_names_each_adversary():
    assert {"garbage-weights", "nan-weights", "unreachable-cid"} <= set(ADVERSARIES)
    assert make_adversary("nan-weights").name == "nan-weights"


def test_unknown_adversary_is_refused_with_the_known_names():
    with pytest.raises(ValueError, match="known: .*garbage-weights"):
        make_adversary("label-flop")


def test_garbage_weights_stores_a_blob_that_does_not_decode(publication):
    # Prepare
    pub, store = publication

    # Execute
    cid = make_adversary("garbage-weights").publish_update(pub)

    # Assert
    with pytest.raises(WeightsError):
        decode_weights(store[cid], ARCH)


def test_nan_weights_are_well_formed_but_every_float_is_nan(publication):
    # Prepare
    pub, store = publication

    # Execute
    cid = make_adversary("nan-weights").publish_update(pub)

    # Assert: the codec names the poisoned tensors; the same blob without its NaN checks
    # holds the honest shapes.
    with pytest.raises(NonFiniteWeightsError, match="NaN"):
        decode_weights(store[cid], ARCH)
    tensors = safetensors.torch.load(store[cid])
    assert {k: v.shape for k, v in tensors.items()} == {k: v.shape for k, v in pub.weights.items()}
    assert all(torch.isnan(v).all() for v in tensors.values() if v.is_floating_point())


def test_unreachable_cid_names_content_never_stored(publication):
    pub, store = publication

    cid = make_adversary("unreachable-cid").publish_update(pub)

    assert cid not in store and store == {}
    assert cid == cid_for_bytes(b"never stored 0xabc")
