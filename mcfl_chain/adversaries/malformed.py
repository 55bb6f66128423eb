"""Peers whose updates cannot be used at all: the worker must exclude them, not crash.

- ``garbage-weights``  stores bytes that are no weights blob;
- ``nan-weights``      stores well-formed weights full of NaN;
- ``unreachable-cid``  proposes a well-formed CID whose content was never stored.
"""

from __future__ import annotations

import torch

from mcfl_chain.adversaries.base import Adversary, Publication, register_adversary
from mcfl_chain.storage.cid import cid_for_bytes


@register_adversary("garbage-weights")
class GarbageWeights(Adversary):
    """Publishes a blob that does not decode as weights."""

    def publish_update(self, publication: Publication) -> str:
        return publication.put(b"not a weights blob " + publication.trainer.encode())


@register_adversary("nan-weights")
class NanWeights(Adversary):
    """Publishes the update's tensors with every floating-point value set to NaN."""

    def publish_update(self, publication: Publication) -> str:
        poisoned = {
            k: torch.full_like(v, float("nan")) if v.is_floating_point() else v
            for k, v in publication.weights.items()
        }
        return publication.put(publication.encode(poisoned))


@register_adversary("unreachable-cid")
class UnreachableCid(Adversary):
    """Proposes the CID of content it never stored anywhere."""

    def publish_update(self, publication: Publication) -> str:
        return cid_for_bytes(b"never stored " + publication.trainer.encode())
