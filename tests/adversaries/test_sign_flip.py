"""Sign flipping and scaling publish parent ∓ λ·(update − parent)."""

from __future__ import annotations

import pytest
import torch

from mcfl_chain.adversaries import make_adversary
from mcfl_chain.adversaries.sign_flip import moved_from_parent
from mcfl_chain.learning.codec import decode_weights
from mcfl_chain.learning.models import create_model

ARCH = "lenet5"

PARENT = {"w": torch.tensor([1.0, 2.0]), "steps": torch.tensor(3)}
UPDATE = {"w": torch.tensor([2.0, 0.0]), "steps": torch.tensor(4)}


def test_sign_flip_formula_by_hand() -> None:
    # Step Δ = (1, −2). λ = 2: parent − 2Δ = (1 − 2, 2 + 4) = (−1, 6); λ = 1: (0, 4).
    assert torch.equal(moved_from_parent(UPDATE, PARENT, -2.0)["w"], torch.tensor([-1.0, 6.0]))
    assert torch.equal(moved_from_parent(UPDATE, PARENT, -1.0)["w"], torch.tensor([0.0, 4.0]))
    # Scaling λ = 3: parent + 3Δ = (4, −4). Integer buffers are published as trained.
    boosted = moved_from_parent(UPDATE, PARENT, 3.0)
    assert torch.equal(boosted["w"], torch.tensor([4.0, -4.0])) and boosted["steps"].item() == 4


def test_sign_flip_publishes_the_reversed_step_of_a_real_model(publish) -> None:
    # Prepare
    parent = create_model(ARCH, seed=0).state_dict()
    trained = create_model(ARCH, seed=1).state_dict()
    publication, store = publish(trained, parent)

    # Execute
    cid = make_adversary("sign-flip", scale=4.0).publish_update(publication)

    # Assert: published − parent = −4·(trained − parent), up to float32 rounding.
    published = decode_weights(store[cid], ARCH)
    for key, tensor in published.items():
        expected = parent[key].double() - 4.0 * (trained[key].double() - parent[key].double())
        assert torch.allclose(tensor.double(), expected, rtol=1e-6, atol=1e-6)
        assert tensor.dtype == trained[key].dtype


@pytest.mark.parametrize("scale", [0.0, -1.0, float("inf")])
def test_scale_must_be_positive_and_finite(scale: float) -> None:
    with pytest.raises(ValueError, match="finite number > 0"):
        make_adversary("sign-flip", scale=scale)
    with pytest.raises(ValueError, match="finite number > 0"):
        make_adversary("scaling", scale=scale)
