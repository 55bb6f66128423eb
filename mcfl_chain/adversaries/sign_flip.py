"""Sign flipping and scaling: the trainer trains honestly, then publishes a distorted step.

With ``w`` the trained weights and ``p`` the parent's, the honest step is ``Δ = w − p``:

- ``sign-flip`` publishes ``p − λ·Δ``: the step reversed (Damaskinos et al. 2018;
  Allen-Zhu et al. 2021), amplified by ``λ``;
- ``scaling`` publishes ``p + λ·Δ``: the step boosted (Bagdasaryan et al.'s model
  replacement, Bhagoji et al. 2019), so that averaging with ``n`` peers leaves it whole
  when ``λ ≈ n``.

Computed per floating-point tensor in float64, then cast to the tensor's dtype;
integer buffers are published as trained.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import torch

from mcfl_chain.adversaries.base import Adversary, Publication, StateDict, register_adversary


def moved_from_parent(
    weights: Mapping[str, torch.Tensor], parent: Mapping[str, torch.Tensor], factor: float
) -> StateDict:
    """``p + factor·(w − p)`` per floating-point tensor (float64, cast back)."""
    moved: StateDict = {}
    for key, tensor in weights.items():
        if not tensor.is_floating_point():
            moved[key] = tensor.clone()
            continue
        start = parent[key].to(torch.float64)
        moved[key] = (start + factor * (tensor.to(torch.float64) - start)).to(tensor.dtype)
    return moved


def _check_scale(scale: float) -> float:
    if not (math.isfinite(scale) and scale > 0):
        raise ValueError(f"scale λ must be a finite number > 0, got {scale}")
    return float(scale)


@register_adversary("sign-flip")
class SignFlip(Adversary):
    """Publishes ``parent − λ·(update − parent)``.

    Parameters
    ----------
    scale : float, default 1.0
        ``λ > 0``; 1 reverses the step, more also amplifies it.
    """

    def __init__(self, scale: float = 1.0) -> None:
        self.scale = _check_scale(scale)

    def __repr__(self) -> str:
        return f"SignFlip(scale={self.scale})"

    def publish_update(self, publication: Publication) -> str:
        flipped = moved_from_parent(publication.weights, publication.parent_weights, -self.scale)
        return publication.put(publication.encode(flipped))


@register_adversary("scaling")
class Scaling(Adversary):
    """Publishes ``parent + λ·(update − parent)``.

    Parameters
    ----------
    scale : float, default 10.0
        ``λ > 0``, the boost of the honest step.
    """

    def __init__(self, scale: float = 10.0) -> None:
        self.scale = _check_scale(scale)

    def __repr__(self) -> str:
        return f"Scaling(scale={self.scale})"

    def publish_update(self, publication: Publication) -> str:
        boosted = moved_from_parent(publication.weights, publication.parent_weights, self.scale)
        return publication.put(publication.encode(boosted))
