"""The root model's weights: one seeded initialisation every trainer starts from."""

from __future__ import annotations

from mcfl_chain.learning.codec import encode_weights
from mcfl_chain.learning.models import create_model
from mcfl_chain.storage.base import Storage


def publish_genesis(arch: str, seed: int, storage: Storage) -> str:
    """Store the deterministic initial weights of ``arch`` and return their CID.

    The same (arch, seed) gives the same bytes, hence the same CID, on every machine.
    """
    return storage.put(encode_weights(arch, create_model(arch, seed=seed).state_dict()))
