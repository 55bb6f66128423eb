"""Weights codec: deterministic encoding and every rejection of untrusted blobs."""

from __future__ import annotations

import hashlib
import json
import struct
import subprocess
import sys

import pytest
import torch
from safetensors.torch import save

from mcfl_chain.learning.codec import (
    ArchitectureMismatchError,
    MalformedWeightsError,
    NonFiniteWeightsError,
    ShapeMismatchError,
    WeightsError,
    WeightsTooLargeError,
    decode_weights,
    encode_weights,
)
from mcfl_chain.learning.models import create_model


@pytest.fixture
def state() -> dict[str, torch.Tensor]:
    return create_model("lenet5", seed=4).state_dict()


def _blob(tensors: dict[str, torch.Tensor], metadata: dict[str, str]) -> bytes:
    return save({k: v.contiguous() for k, v in tensors.items()}, metadata=metadata)


def _ours(arch: str = "lenet5", version: int = 1) -> dict[str, str]:
    return {"mcfl-chain": json.dumps({"architecture": arch, "format": version})}


def test_round_trip_is_bit_exact(state: dict[str, torch.Tensor]) -> None:
    decoded = decode_weights(encode_weights("lenet5", state), "lenet5")
    assert decoded.keys() == state.keys()
    assert all(
        torch.equal(decoded[k], state[k]) and decoded[k].dtype == state[k].dtype for k in state
    )


def test_encoding_is_deterministic_whatever_the_key_order(state: dict[str, torch.Tensor]) -> None:
    reversed_state = dict(reversed(list(state.items())))
    assert encode_weights("lenet5", state) == encode_weights("lenet5", reversed_state)


def test_other_weights_other_bytes(state: dict[str, torch.Tensor]) -> None:
    other = create_model("lenet5", seed=5).state_dict()
    assert encode_weights("lenet5", state) != encode_weights("lenet5", other)


def test_rejects_oversized_blob(state: dict[str, torch.Tensor]) -> None:
    blob = encode_weights("lenet5", state)
    with pytest.raises(WeightsTooLargeError, match=f"{len(blob)} bytes exceeds the 1000-byte"):
        decode_weights(blob, "lenet5", max_bytes=1000)


def test_rejects_wrong_architecture(state: dict[str, torch.Tensor]) -> None:
    with pytest.raises(ArchitectureMismatchError, match="'lenet5', expected 'lenet-light'"):
        decode_weights(encode_weights("lenet5", state), "lenet-light")


def test_rejects_a_layout_that_lies_about_its_architecture() -> None:
    light = create_model("lenet-light", 0).state_dict()
    with pytest.raises(ShapeMismatchError, match=r"features.0.weight: \(3, 1, 5, 5\)"):
        decode_weights(_blob(light, _ours("lenet5")), "lenet5")


def test_rejects_wrong_dtype(state: dict[str, torch.Tensor]) -> None:
    state["classifier.5.bias"] = state["classifier.5.bias"].double()
    with pytest.raises(ShapeMismatchError, match="classifier.5.bias: .* F64 instead of .* F32"):
        decode_weights(_blob(state, _ours()), "lenet5")


def test_rejects_missing_and_extra_tensors(state: dict[str, torch.Tensor]) -> None:
    del state["features.0.bias"]
    state["backdoor"] = torch.zeros(1)
    with pytest.raises(
        ShapeMismatchError, match=r"missing \['features.0.bias'\], unexpected \['backdoor'\]"
    ):
        decode_weights(_blob(state, _ours()), "lenet5")


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
def test_rejects_non_finite_values(state: dict[str, torch.Tensor], bad: float) -> None:
    state["features.3.weight"][0, 0, 0, 0] = bad
    with pytest.raises(NonFiniteWeightsError, match=r"\['features.3.weight'\]"):
        decode_weights(encode_weights("lenet5", state), "lenet5")


def test_rejects_foreign_safetensors_without_our_header(state: dict[str, torch.Tensor]) -> None:
    with pytest.raises(MalformedWeightsError, match="no 'mcfl-chain' metadata"):
        decode_weights(_blob(state, {}), "lenet5")


def test_rejects_unknown_format_version(state: dict[str, torch.Tensor]) -> None:
    with pytest.raises(MalformedWeightsError, match="format 2 is not supported"):
        decode_weights(_blob(state, _ours(version=2)), "lenet5")


@pytest.mark.parametrize(
    ("blob", "message"),
    [
        (b"", "too short"),
        (struct.pack("<Q", 10**9) + b"{}", "announces a 1000000000-byte header"),
        (struct.pack("<Q", 4) + b"\xff\xfe{}", "not JSON"),
        (struct.pack("<Q", 2) + b"[]", "not a JSON object"),
    ],
)
def test_rejects_garbage(blob: bytes, message: str) -> None:
    with pytest.raises(MalformedWeightsError, match=message):
        decode_weights(blob, "lenet5")


def test_rejects_a_header_entry_without_shape() -> None:
    header = json.dumps({"__metadata__": _ours(), "w": {"dtype": "F32"}}).encode()
    with pytest.raises(MalformedWeightsError, match="without a shape and dtype"):
        decode_weights(struct.pack("<Q", len(header)) + header, "lenet5")


def test_rejects_a_header_whose_offsets_lie(state: dict[str, torch.Tensor]) -> None:
    blob = bytearray(encode_weights("lenet5", state))
    truncated = bytes(blob[: len(blob) - 100])
    with pytest.raises(MalformedWeightsError, match="not a valid safetensors file"):
        decode_weights(truncated, "lenet5")


def test_every_rejection_is_a_weights_error() -> None:
    for error in (
        WeightsTooLargeError,
        MalformedWeightsError,
        ArchitectureMismatchError,
        ShapeMismatchError,
        NonFiniteWeightsError,
    ):
        assert issubclass(error, WeightsError) and issubclass(error, ValueError)


def test_encoding_is_identical_across_processes() -> None:
    # The CID of a blob must not depend on the process that wrote it.
    script = (
        "import hashlib; from mcfl_chain.learning.codec import encode_weights; "
        "from mcfl_chain.learning.models import create_model; "
        "print(hashlib.sha256(encode_weights('lenet-cae', create_model('lenet-cae', 2)"
        ".state_dict())).hexdigest())"
    )
    # Two fresh interpreters side by side: each spends seconds importing torch.
    procs = [
        subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    digests = {proc.communicate(timeout=300)[0].strip() for proc in procs}
    assert [proc.returncode for proc in procs] == [0, 0]
    local = hashlib.sha256(encode_weights("lenet-cae", create_model("lenet-cae", 2).state_dict()))
    assert digests == {local.hexdigest()}
