"""Free riders: the parent's exact weights, or a copy of a peer's update with its own CID."""

from __future__ import annotations

import pytest
import torch

from mcfl_chain.adversaries import make_adversary
from mcfl_chain.adversaries.free_rider import disguised_copy
from mcfl_chain.learning.codec import decode_weights, encode_weights
from mcfl_chain.learning.models import create_model
from mcfl_chain.storage.cid import cid_for_bytes

ARCH = "lenet5"


@pytest.fixture
def states() -> dict[str, dict[str, torch.Tensor]]:
    return {name: create_model(ARCH, seed=seed).state_dict() for seed, name in enumerate("abcd")}


def test_publishes_the_parents_exact_weights_and_does_not_train(publish, states) -> None:
    # Prepare
    publication, store = publish(states["a"], states["b"])
    adversary = make_adversary("free-rider")

    # Execute
    cid = adversary.publish_update(publication)

    # Assert: byte for byte the parent's blob.
    assert store[cid] == encode_weights(ARCH, states["b"])
    assert cid == cid_for_bytes(encode_weights(ARCH, states["b"]))
    assert adversary.trains is False


def test_peer_copy_differs_from_the_smallest_id_peer_in_one_ulp(publish, states) -> None:
    # Prepare: peers 9 and 4 of the previous round; the copy takes 4.
    peers = {9: states["c"], 4: states["d"]}
    publication, store = publish(states["a"], states["b"], peers=peers)

    # Execute
    cid = make_adversary("free-rider", source="peer").publish_update(publication)

    # Assert
    copied = decode_weights(store[cid], ARCH)
    differing = [
        (key, int((copied[key] != states["d"][key]).sum()))
        for key in copied
        if not torch.equal(copied[key], states["d"][key])
    ]
    assert len(differing) == 1 and differing[0][1] == 1
    key = differing[0][0]
    assert key == sorted(copied)[0]
    changed = copied[key] != states["d"][key]
    before, after = states["d"][key][changed], copied[key][changed]
    towards_zero = torch.where(before > 0, float("-inf"), float("inf"))
    assert torch.equal(after, torch.nextafter(before, towards_zero))
    assert after.abs() < before.abs() or before == 0
    assert cid != cid_for_bytes(encode_weights(ARCH, states["d"]))


def test_two_free_riders_copying_the_same_peer_get_different_cids(states) -> None:
    first = disguised_copy(states["d"], "0x1111")
    second = disguised_copy(states["d"], "0x2222")
    assert encode_weights(ARCH, first) != encode_weights(ARCH, second)
    assert encode_weights(ARCH, disguised_copy(states["d"], "0x1111")) == encode_weights(
        ARCH, first
    )


def test_peer_copy_falls_back_to_the_parent_in_round_zero(publish, states) -> None:
    publication, store = publish(states["a"], states["b"], peers={})
    cid = make_adversary("free-rider", source="peer").publish_update(publication)
    assert store[cid] == encode_weights(ARCH, states["b"])


def test_unknown_source_is_refused() -> None:
    with pytest.raises(ValueError, match="one of \\('parent', 'peer'\\)"):
        make_adversary("free-rider", source="model")
