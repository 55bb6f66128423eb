"""Model weights ⇄ bytes: safetensors with a header naming the architecture.

A blob is a safetensors file whose metadata holds one entry, ``mcfl-chain``, a JSON
object ``{"architecture": ..., "format": 1}``; safetensors' own header records every
tensor's shape and dtype. Encoding is deterministic (same state dict → same bytes →
same CID): tensors are written contiguous, and the single metadata entry leaves no key
order to vary.

Blobs come from other trainers, so decoding trusts nothing. Before safetensors parses
anything, the size and the JSON header are checked; then the architecture, the set of
tensor names, every shape and dtype against the expected architecture's own state dict,
the finiteness of every value, and what the architecture's own check asks (a multi-head
model's ``head_choice`` must name one of its heads). Each failure raises a
:class:`WeightsError` subclass saying what is wrong.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Mapping
from functools import cache
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load as load_safetensors
from safetensors.torch import save as save_safetensors

from mcfl_chain.learning.models import create_model, get_architecture, is_architecture

FORMAT_VERSION = 1
METADATA_KEY = "mcfl-chain"
DEFAULT_MAX_BYTES = 16 * 1024 * 1024
"""Default bound on a blob's size: 16 MiB, ~64× a LeNet-5 state dict (~250 KB)."""

DTYPE_NAMES: dict[torch.dtype, str] = {
    torch.float64: "F64",
    torch.float32: "F32",
    torch.float16: "F16",
    torch.bfloat16: "BF16",
    torch.int64: "I64",
    torch.int32: "I32",
    torch.int16: "I16",
    torch.int8: "I8",
    torch.uint8: "U8",
    torch.bool: "BOOL",
}
"""PyTorch dtype → the name safetensors records for it (``F32``, ``I64``, ...)."""

Layout = dict[str, tuple[tuple[int, ...], str]]
"""Tensor name → (shape, safetensors dtype name): what a state dict looks like."""


class WeightsError(ValueError):
    """A weights blob cannot be used."""


class WeightsTooLargeError(WeightsError):
    """The blob is larger than the accepted bound."""


class MalformedWeightsError(WeightsError):
    """The blob is not a safetensors file written by this codec."""


class ArchitectureMismatchError(WeightsError):
    """The blob names another architecture than the expected one."""


class ShapeMismatchError(WeightsError):
    """Tensor names, shapes or dtypes differ from the expected architecture's."""


class NonFiniteWeightsError(WeightsError):
    """A tensor holds NaN or infinity."""


class RefusedValuesError(WeightsError):
    """A value the architecture's own check refuses (:attr:`Architecture.check`)."""


def encode_weights(
    arch: str, state_dict: Mapping[str, torch.Tensor], *, registered: bool = True
) -> bytes:
    """Serialise a state dict with its architecture's name (deterministic bytes).

    Parameters
    ----------
    arch : str
        Architecture name (see :data:`~mcfl_chain.learning.models.ARCHITECTURES`).
    state_dict : Mapping[str, torch.Tensor]
        The model's tensors; they are copied to contiguous CPU tensors.
    registered : bool, default True
        Require ``arch`` to be a registered architecture; False for a task's own model
        (:class:`~mcfl_chain.learning.tasks.LearningTask`), whose name is free.

    Returns
    -------
    bytes
        A safetensors file.
    """
    if registered:
        get_architecture(arch)
    tensors = {name: t.detach().to("cpu").contiguous().clone() for name, t in state_dict.items()}
    header = json.dumps({"architecture": arch, "format": FORMAT_VERSION}, sort_keys=True)
    return save_safetensors(tensors, metadata={METADATA_KEY: header})


def dtype_name(dtype: torch.dtype) -> str:
    """The safetensors name of a PyTorch dtype (``F32``), or ``str(dtype)`` for others."""
    return DTYPE_NAMES.get(dtype, str(dtype).removeprefix("torch."))


def layout_of(state_dict: Mapping[str, torch.Tensor]) -> Layout:
    """The :data:`Layout` of a state dict: each tensor's shape and dtype name."""
    return {name: (tuple(t.shape), dtype_name(t.dtype)) for name, t in state_dict.items()}


@cache
def expected_layout(arch: str) -> Layout:
    """Tensor name → (shape, safetensors dtype name) of an architecture's state dict."""
    return layout_of(create_model(arch, seed=0).state_dict())


def read_layout(blob: bytes) -> Layout:
    """The :data:`Layout` a weights blob's header declares, without loading any tensor.

    Raises
    ------
    MalformedWeightsError
        If the blob is not a safetensors file or a tensor entry lacks its shape or dtype.
    """
    header = _read_header(blob)
    try:
        return {
            name: (tuple(int(d) for d in entry["shape"]), str(entry["dtype"]))
            for name, entry in header.items()
            if name != "__metadata__"
        }
    except (KeyError, TypeError, ValueError) as error:
        raise MalformedWeightsError(
            f"weights blob header has a tensor entry without a shape and dtype ({error!r})"
        ) from error


def _read_header(blob: bytes) -> dict[str, Any]:
    if len(blob) < 8:
        raise MalformedWeightsError(
            f"weights blob of {len(blob)} bytes is too short to be safetensors"
        )
    (length,) = struct.unpack("<Q", blob[:8])
    if length > len(blob) - 8:
        raise MalformedWeightsError(
            f"weights blob announces a {length}-byte header but holds only {len(blob) - 8} bytes"
        )
    try:
        header = json.loads(blob[8 : 8 + length])
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise MalformedWeightsError(f"weights blob header is not JSON: {error}") from error
    if not isinstance(header, dict):
        raise MalformedWeightsError("weights blob header is not a JSON object")
    return header


def decode_weights(
    blob: bytes,
    expected_arch: str,
    max_bytes: int = DEFAULT_MAX_BYTES,
    *,
    layout: Mapping[str, tuple[tuple[int, ...], str]] | None = None,
) -> dict[str, torch.Tensor]:
    """Deserialise and validate an untrusted weights blob.

    Parameters
    ----------
    blob : bytes
        Bytes fetched from storage.
    expected_arch : str
        The architecture the network runs; the blob must name it and match its layout.
    max_bytes : int, default DEFAULT_MAX_BYTES
        Larger blobs are refused before being parsed.
    layout : Mapping, optional
        The expected :data:`Layout`; by default the registered architecture's
        (:func:`expected_layout`). Give it for a task's own model, whose
        ``expected_arch`` need not be registered.

    Returns
    -------
    dict[str, torch.Tensor]
        The state dict, ready for ``model.load_state_dict``.

    Raises
    ------
    WeightsTooLargeError, MalformedWeightsError, ArchitectureMismatchError,
    ShapeMismatchError, NonFiniteWeightsError, RefusedValuesError
        All subclasses of :class:`WeightsError`.
    """
    if len(blob) > max_bytes:
        raise WeightsTooLargeError(
            f"weights blob of {len(blob)} bytes exceeds the {max_bytes}-byte bound"
        )
    header = _read_header(blob)
    metadata = header.get("__metadata__")
    try:
        info = json.loads(metadata[METADATA_KEY])  # type: ignore[index]
        arch = info["architecture"]
        version = info["format"]
    except (TypeError, KeyError, json.JSONDecodeError) as error:
        raise MalformedWeightsError(
            f"weights blob has no {METADATA_KEY!r} metadata naming its architecture "
            "(not written by mcfl-chain's encode_weights)"
        ) from error
    if version != FORMAT_VERSION:
        raise MalformedWeightsError(
            f"weights blob format {version!r} is not supported (expected {FORMAT_VERSION})"
        )
    if arch != expected_arch:
        raise ArchitectureMismatchError(
            f"weights blob is for architecture {arch!r}, expected {expected_arch!r}"
        )
    expected = dict(layout) if layout is not None else expected_layout(expected_arch)
    found = read_layout(blob)
    if set(found) != set(expected):
        missing = sorted(set(expected) - set(found))
        extra = sorted(set(found) - set(expected))
        raise ShapeMismatchError(
            f"weights blob for {expected_arch!r} has wrong tensors: missing {missing}, "
            f"unexpected {extra}"
        )
    wrong = [
        f"{name}: {found[name][0]} {found[name][1]} instead of {shape} {dtype}"
        for name, (shape, dtype) in sorted(expected.items())
        if found[name] != (shape, dtype)
    ]
    if wrong:
        raise ShapeMismatchError(
            f"weights blob for {expected_arch!r} has wrong shapes or dtypes: {'; '.join(wrong)}"
        )
    try:
        tensors = load_safetensors(blob)
    except (SafetensorError, ValueError, RuntimeError) as error:
        raise MalformedWeightsError(
            f"weights blob is not a valid safetensors file: {error}"
        ) from error
    bad = sorted(
        name for name, t in tensors.items() if t.is_floating_point() and not torch.isfinite(t).all()
    )
    if bad:
        raise NonFiniteWeightsError(f"weights blob holds NaN or infinite values in {bad}")
    check = get_architecture(expected_arch).check if is_architecture(expected_arch) else None
    if check is not None:
        try:
            check(tensors)
        except ValueError as error:
            raise RefusedValuesError(f"weights blob for {expected_arch!r}: {error}") from error
    return tensors
