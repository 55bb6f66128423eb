"""Model fingerprints: what they depend on, and the message saying what differs."""

from __future__ import annotations

import hashlib

import pytest
import torch
from torch import nn

from mcfl_chain.learning.codec import encode_weights
from mcfl_chain.learning.fingerprint import (
    FINGERPRINT_LENGTH,
    blob_fingerprint,
    canonical_listing,
    compare_layouts,
    fingerprints_match,
    model_fingerprint,
    model_layout,
    normalize_fingerprint,
)
from mcfl_chain.learning.models import create_model


def test_same_architecture_same_fingerprint_whatever_the_weights() -> None:
    # Execute
    a = model_fingerprint(create_model("lenet5", seed=1))
    b = model_fingerprint(create_model("lenet5", seed=2))

    # Assert
    assert a == b
    assert len(a) == FINGERPRINT_LENGTH and int(a, 16) >= 0


def test_each_registered_architecture_has_its_own_fingerprint() -> None:
    # Execute
    fingerprints = {
        arch: model_fingerprint(create_model(arch, seed=0))
        for arch in ("lenet5", "lenet-light", "lenet-cae")
    }

    # Assert
    assert len(set(fingerprints.values())) == 3


def test_fingerprint_is_the_documented_sha256_of_the_listing() -> None:
    # Prepare
    state = {"b": torch.zeros(3, 2), "a": torch.zeros((), dtype=torch.int64)}

    # Execute
    listing = canonical_listing(model_layout(state))
    fingerprint = model_fingerprint(state)

    # Assert: sorted names, safetensors dtype names, comma-separated shapes.
    assert listing == "a\tI64\t\nb\tF32\t3,2\n"
    assert fingerprint == hashlib.sha256(listing.encode()).hexdigest()[:FINGERPRINT_LENGTH]


@pytest.mark.parametrize(
    "change",
    [
        lambda s: s.update({"w": torch.zeros(4, 3)}),  # shape
        lambda s: s.update({"w": torch.zeros(3, 4, dtype=torch.float64)}),  # dtype
        lambda s: s.update({"extra": torch.zeros(1)}),  # a tensor more
        lambda s: s.pop("bias"),  # a tensor less
        lambda s: s.update({"v": s.pop("w")}),  # a renamed tensor
    ],
)
def test_names_shapes_and_dtypes_all_change_the_fingerprint(change) -> None:
    # Prepare
    state = {"w": torch.zeros(3, 4), "bias": torch.zeros(3)}
    other = dict(state)
    change(other)

    # Execute / Assert
    assert model_fingerprint(other) != model_fingerprint(state)


def test_blob_fingerprint_equals_the_model_fingerprint() -> None:
    # Prepare
    model = create_model("lenet-light", seed=3)

    # Execute
    from_blob = blob_fingerprint(encode_weights("lenet-light", model.state_dict()))

    # Assert
    assert from_blob == model_fingerprint(model)


def test_buffers_count_too() -> None:
    # Prepare: BatchNorm adds buffers (running mean/var, counter) beside its parameters.
    plain = nn.Sequential(nn.Linear(4, 4))
    normed = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4))

    # Execute
    names = set(model_layout(normed))

    # Assert
    assert "1.running_mean" in names and "1.num_batches_tracked" in names
    assert model_fingerprint(plain) != model_fingerprint(normed)


def test_compare_says_exactly_what_differs() -> None:
    # Prepare
    expected = model_layout(create_model("lenet5", seed=0))
    found = dict(expected)
    del found["classifier.5.bias"]
    found["head.weight"] = ((2, 84), "F32")
    found["classifier.5.weight"] = ((2, 84), "F32")
    found["classifier.1.bias"] = ((120,), "F64")

    # Execute
    difference = compare_layouts(expected, found)
    message = difference.message("the network's model", "this trainer's model")

    # Assert
    assert difference
    assert difference.missing == ("classifier.5.bias",)
    assert difference.extra == ("head.weight",)
    assert difference.shapes == (("classifier.5.weight", (10, 84), (2, 84)),)
    assert difference.dtypes == (("classifier.1.bias", "F32", "F64"),)
    assert message == (
        "this trainer's model does not match the network's model: missing 1 tensor(s): "
        "classifier.5.bias; 1 unexpected tensor(s): head.weight; classifier.5.weight has "
        "shape 2×84 instead of 10×84; classifier.1.bias has dtype F64 instead of F32"
    )
    assert "\n" not in message


def test_equal_layouts_compare_empty() -> None:
    # Prepare
    layout = model_layout(create_model("lenet-cae", seed=0))

    # Execute
    difference = compare_layouts(layout, dict(layout))

    # Assert
    assert not difference and str(difference) == ""


def test_fingerprints_match_by_prefix_only() -> None:
    # Prepare
    full = hashlib.sha256(b"x").hexdigest()

    # Execute / Assert
    assert fingerprints_match(full[:8], full)
    assert fingerprints_match(full.upper(), full[:16])
    assert not fingerprints_match(full[:16], "0" * 16)


@pytest.mark.parametrize("bad", ["", "1234567", "xyz12345", "1" * 65, "12345678 9"])
def test_malformed_fingerprints_are_refused(bad: str) -> None:
    with pytest.raises(ValueError, match="hex digits"):
        normalize_fingerprint(bad)
