"""A model's fingerprint: which tensors it has, their shapes and dtypes — not their values.

Two trainers can exchange weights only if their models have the same state-dict layout.
The fingerprint condenses that layout into a short hex string that fits in the network's
task descriptor (:mod:`mcfl_chain.learning.descriptor`), so a trainer can refuse a network whose
model it cannot build before it trains anything; :func:`compare_layouts` then says
exactly what differs.

Canonical listing (version 1), hashed with SHA-256: one line per state-dict tensor,
sorted by name, ``<name>\\t<dtype>\\t<d1>,<d2>,...\\n`` (a scalar has an empty shape
field), UTF-8. ``dtype`` is the name safetensors records (``F32``, ``I64``, ...), so the
fingerprint of a weights blob's header (:func:`blob_fingerprint`) equals the fingerprint
of the model that wrote it. The fingerprint is the first :data:`FINGERPRINT_LENGTH` hex
digits of the digest; any longer prefix of the digest names the same layout.

A fingerprint is a compatibility check, not a security one: every blob is still
validated tensor by tensor when it is decoded.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass

import torch
from torch import nn

from mcfl_chain.learning.codec import Layout, layout_of, read_layout

FINGERPRINT_LENGTH = 16
"""Hex digits of a fingerprint as written: 64 bits of the SHA-256 digest."""

MIN_FINGERPRINT_LENGTH = 8
"""Fewest hex digits accepted when a fingerprint is read (32 bits)."""

_HEX = re.compile(r"[0-9a-f]+")


def model_layout(model: nn.Module | Mapping[str, torch.Tensor]) -> Layout:
    """The layout of a model or a state dict: tensor name → (shape, dtype name).

    Parameters
    ----------
    model : torch.nn.Module or Mapping[str, torch.Tensor]
        A model (its ``state_dict()``: parameters and buffers) or a state dict.

    Returns
    -------
    Layout
        Shapes as tuples of ints, dtypes as safetensors names (``"F32"``).
    """
    state = model.state_dict() if isinstance(model, nn.Module) else model
    return layout_of(state)


def canonical_listing(layout: Mapping[str, tuple[tuple[int, ...], str]]) -> str:
    """The text the fingerprint hashes (see the module docstring)."""
    return "".join(
        f"{name}\t{dtype}\t{','.join(str(int(d)) for d in shape)}\n"
        for name, (shape, dtype) in sorted(layout.items())
    )


def layout_fingerprint(layout: Mapping[str, tuple[tuple[int, ...], str]]) -> str:
    """The fingerprint of a layout: :data:`FINGERPRINT_LENGTH` lower-case hex digits."""
    digest = hashlib.sha256(canonical_listing(layout).encode("utf-8")).hexdigest()
    return digest[:FINGERPRINT_LENGTH]


def model_fingerprint(model: nn.Module | Mapping[str, torch.Tensor]) -> str:
    """Fingerprint of a model's (or state dict's) tensor names, shapes and dtypes.

    Parameters
    ----------
    model : torch.nn.Module or Mapping[str, torch.Tensor]
        The model or its state dict; values do not matter, only the layout.

    Returns
    -------
    str
        16 lower-case hex digits, e.g. ``"3f9c2a4be01d7c55"``.

    Examples
    --------
    >>> from mcfl_chain.learning.models import create_model
    >>> model_fingerprint(create_model("lenet5", 0)) == model_fingerprint(
    ...     create_model("lenet5", 1))
    True
    """
    return layout_fingerprint(model_layout(model))


def blob_fingerprint(blob: bytes) -> str:
    """Fingerprint of the layout a weights blob declares (no tensor is loaded).

    Raises
    ------
    mcfl_chain.learning.codec.MalformedWeightsError
        If the blob is not a safetensors file.
    """
    return layout_fingerprint(read_layout(blob))


def normalize_fingerprint(text: str) -> str:
    """Check a fingerprint read from outside and return it in lower case.

    Raises
    ------
    ValueError
        If it is not :data:`MIN_FINGERPRINT_LENGTH` to 64 hex digits.
    """
    value = text.strip().lower()
    if not MIN_FINGERPRINT_LENGTH <= len(value) <= 64 or not _HEX.fullmatch(value):
        raise ValueError(
            f"model fingerprint {text!r} is not {MIN_FINGERPRINT_LENGTH} to 64 hex digits "
            f"(e.g. '3f9c2a4be01d7c55', as printed by model_fingerprint)"
        )
    return value


def fingerprints_match(expected: str, actual: str) -> bool:
    """True when two fingerprints name the same layout (one may be a longer prefix).

    Both are prefixes of the same SHA-256 digest, so they match when the shorter one
    is a prefix of the longer one.
    """
    a, b = normalize_fingerprint(expected), normalize_fingerprint(actual)
    return a.startswith(b) if len(a) >= len(b) else b.startswith(a)


def _shape(shape: tuple[int, ...]) -> str:
    return "×".join(str(d) for d in shape) if shape else "scalar"


@dataclass(frozen=True)
class LayoutDifference:
    """What differs between an expected layout and a found one.

    Attributes
    ----------
    missing : tuple of str
        Tensors the expected layout has and the found one lacks, sorted.
    extra : tuple of str
        Tensors the found layout has beyond the expected ones, sorted.
    shapes : tuple of (name, expected shape, found shape)
        Tensors present in both with different shapes.
    dtypes : tuple of (name, expected dtype, found dtype)
        Tensors present in both with different dtypes.
    """

    missing: tuple[str, ...] = ()
    extra: tuple[str, ...] = ()
    shapes: tuple[tuple[str, tuple[int, ...], tuple[int, ...]], ...] = ()
    dtypes: tuple[tuple[str, str, str], ...] = ()

    def __bool__(self) -> bool:
        """True when the layouts differ."""
        return bool(self.missing or self.extra or self.shapes or self.dtypes)

    def message(
        self, expected_name: str = "the expected model", found_name: str = "this model"
    ) -> str:
        """One readable line: what ``found_name`` lacks, adds or changes; "" when equal."""
        if not self:
            return ""
        parts = []
        if self.missing:
            parts.append(f"missing {len(self.missing)} tensor(s): {', '.join(self.missing)}")
        if self.extra:
            parts.append(f"{len(self.extra)} unexpected tensor(s): {', '.join(self.extra)}")
        parts.extend(
            f"{name} has shape {_shape(found)} instead of {_shape(expected)}"
            for name, expected, found in self.shapes
        )
        parts.extend(
            f"{name} has dtype {found} instead of {expected}"
            for name, expected, found in self.dtypes
        )
        return f"{found_name} does not match {expected_name}: {'; '.join(parts)}"

    def __str__(self) -> str:
        return self.message()


def compare_layouts(
    expected: Mapping[str, tuple[tuple[int, ...], str]],
    found: Mapping[str, tuple[tuple[int, ...], str]],
) -> LayoutDifference:
    """Everything that differs between two layouts (empty, hence falsy, when equal).

    Parameters
    ----------
    expected, found : Mapping
        Layouts as returned by :func:`model_layout` or
        :func:`~mcfl_chain.learning.codec.read_layout`.

    Returns
    -------
    LayoutDifference
        ``str()`` of it, or :meth:`LayoutDifference.message`, is one readable line.
    """
    common = sorted(set(expected) & set(found))
    return LayoutDifference(
        missing=tuple(sorted(set(expected) - set(found))),
        extra=tuple(sorted(set(found) - set(expected))),
        shapes=tuple(
            (name, tuple(expected[name][0]), tuple(found[name][0]))
            for name in common
            if tuple(expected[name][0]) != tuple(found[name][0])
        ),
        dtypes=tuple(
            (name, expected[name][1], found[name][1])
            for name in common
            if expected[name][1] != found[name][1]
        ),
    )
