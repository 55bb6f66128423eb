"""Decoded contract events, as the worker and the DAG tools read them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

# The protocol events a client decodes, and the contract that emits each.
EVENT_SOURCES = {
    "UpdateProposed": "Updates",
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
        "UpdateProposed", "ModelAppended", "PhaseChanged", "NewRound" or "TrainerVoted".
    block_number, log_index, tx_hash
        Where it was logged (``tx_hash`` as 0x-hex).
    args
        The event's arguments under their contract names (e.g. ``updateId``,
        ``numSamples``): bytes32 as ``bytes``, addresses checksummed, integers as ``int``,
        update id lists as tuples, CIDs as base32 strings (``weightsCid`` None when the
        aggregation recorded none).
    """

    name: str
    block_number: int
    log_index: int
    tx_hash: str
    args: Mapping[str, Any]
