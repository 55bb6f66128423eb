"""Decoded contract events, as the worker and the DAG tools read them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

DEFAULT_MAX_LOG_RANGE = 2_000
"""Most blocks one ``eth_getLogs`` request spans by default: public providers cap the
range (often at 1,000 to 10,000 blocks) or the number of results."""

# The protocol events a client decodes, and the contract that emits each
# (docs/PROTOCOL.md §8); ERC-721 and Trainers events are left out.
EVENT_SOURCES = {
    "UpdateProposed": "Updates",
    "ModelCreated": "Models",
    "ModelAppended": "Models",
    "PhaseChanged": "Models",
    "NewRound": "Models",
    "TrainerVoted": "Models",
}


@dataclass(frozen=True)
class ChainEvent:
    """One decoded protocol event; events sort by (block_number, log_index).

    Attributes
    ----------
    name
        A key of :data:`EVENT_SOURCES`: "UpdateProposed", "ModelCreated",
        "ModelAppended", "PhaseChanged", "NewRound" or "TrainerVoted".
    block_number, log_index, tx_hash
        Where it was logged (``tx_hash`` as 0x-hex).
    args
        The event's arguments under their contract names (e.g. ``updateId``,
        ``trainerId``, ``numSamples``): bytes32 as ``bytes``, addresses checksummed,
        integers as ``int``, lists as tuples (``ModelCreated.parents`` a tuple of
        32-byte ``bytes``, ``ModelCreated.updateIds`` a tuple of ``int``), CIDs
        (``cid``, ``weightsCid``) as base32 strings, ``weightsCid`` None when the
        aggregation recorded none.
    """

    name: str
    block_number: int
    log_index: int
    tx_hash: str
    args: Mapping[str, Any]
