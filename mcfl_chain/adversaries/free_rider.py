"""Free riders (Lin et al. 2019; Fraboni et al., AISTATS 2021): take the models without
training, and publish something that passes for an update.

- ``source="parent"`` publishes the parent's weights exactly (a zero step);
- ``source="peer"`` publishes a copy of another trainer's update from the previous
  round — the one with the smallest update id — nudged by one unit in the last place
  in a single weight (towards zero, or up from zero, so it stays finite), so that its
  bytes, hence its CID, are its own rather than a
  duplicate anyone could spot on chain. The nudged coordinate is drawn from the
  trainer's address, so two free riders copying the same peer still differ. With no
  peer update to copy (round 0) it publishes the parent's weights.

Either way the worker need not train (:attr:`FreeRider.trains` is False); the declared
sample count stays the honest one.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

import torch

from mcfl_chain.adversaries.base import Adversary, Publication, StateDict, register_adversary

SOURCES = ("parent", "peer")


def disguised_copy(state: Mapping[str, torch.Tensor], trainer: str) -> StateDict:
    """``state`` with one weight of its first floating-point tensor (sorted keys) moved to
    the next representable value towards zero (above, for a zero); which weight is fixed
    by ``trainer``.

    Raises
    ------
    ValueError
        If the state has no floating-point weight to nudge.
    """
    copy = {key: tensor.detach().clone() for key, tensor in state.items()}
    floating = [key for key in sorted(copy) if copy[key].is_floating_point() and copy[key].numel()]
    if not floating:
        raise ValueError("a free rider's copy needs a floating-point weight to make its CID unique")
    flat = copy[floating[0]].view(-1)
    index = int.from_bytes(hashlib.sha256(trainer.lower().encode()).digest()[:8], "big")
    index %= flat.numel()
    weight = flat[index : index + 1]
    direction = torch.full_like(weight, float("-inf") if weight.item() > 0 else float("inf"))
    flat[index : index + 1] = torch.nextafter(weight, direction)
    return copy


@register_adversary("free-rider")
class FreeRider(Adversary):
    """Publishes the parent's weights or a disguised copy of a peer's update; never trains.

    Parameters
    ----------
    source : {"parent", "peer"}, default "parent"
        What to publish (module docstring).
    """

    trains = False

    def __init__(self, source: str = "parent") -> None:
        if source not in SOURCES:
            raise ValueError(f"free-rider source must be one of {SOURCES}, got {source!r}")
        self.source = source

    def __repr__(self) -> str:
        return f"FreeRider(source={self.source!r})"

    def publish_update(self, publication: Publication) -> str:
        if self.source == "peer":
            peers = publication.peer_updates()
            if peers:
                copied = disguised_copy(peers[min(peers)], publication.trainer)
                return publication.put(publication.encode(copied))
        return publication.put(publication.encode(publication.parent_weights))
