"""Deterministic ids, computed exactly as the contracts compute them."""

from __future__ import annotations

from collections.abc import Sequence

from eth_abi import encode
from eth_utils import keccak, to_canonical_address

ROOT_MODEL_ID = bytes(32)
UINT256_MAX = 2**256 - 1


def model_id(parent: bytes, update_ids: Sequence[int]) -> bytes:
    """Id of the model made of ``parent`` plus ``update_ids``.

    ``keccak256(abi.encode(bytes32 parent, uint256[] updateIds))``, as ``Models.vy``.

    Parameters
    ----------
    parent
        The 32-byte id of the parent model (the root is 32 zero bytes).
    update_ids
        The aggregated update ids, strictly ascending, at least one.

    Returns
    -------
    bytes
        The 32-byte model id; its token id is ``int.from_bytes(id, "big")``.

    Raises
    ------
    ValueError
        If ``parent`` is not 32 bytes, the list is empty, an id is outside uint256 or the
        ids are not strictly ascending (the contract refuses such a list).
    """
    if len(parent) != 32:
        raise ValueError(f"parent must be a 32-byte model id, got {len(parent)} bytes")
    ids = list(update_ids)
    if not ids:
        raise ValueError("a model aggregates at least one update; the id list is empty")
    for i, uid in enumerate(ids):
        if not 0 <= uid <= UINT256_MAX:
            raise ValueError(f"update id {uid} at position {i} is not a uint256")
        if i and uid <= ids[i - 1]:
            raise ValueError(
                f"update ids must be strictly ascending: position {i} ({uid:#x}) "
                f"is not above {ids[i - 1]:#x}; sort them and drop duplicates"
            )
    return keccak(encode(["bytes32", "uint256[]"], [bytes(parent), ids]))


def update_id(proposer: str, parent: bytes, round_: int) -> int:
    """Id of the update ``proposer`` proposes for ``parent`` in ``round_``.

    ``uint256(keccak256(abi.encode(address proposer, bytes32 parent, uint256 round)))``,
    as ``Updates.vy``; one proposal per (trainer, parent, round) follows from it.

    Parameters
    ----------
    proposer
        Address of the proposing trainer (hex, any case).
    parent
        The 32-byte parent model id.
    round_
        The round number.

    Returns
    -------
    int
        The update id (its token id).
    """
    if len(parent) != 32:
        raise ValueError(f"parent must be a 32-byte model id, got {len(parent)} bytes")
    encoded = encode(
        ["address", "bytes32", "uint256"], [to_canonical_address(proposer), bytes(parent), round_]
    )
    return int.from_bytes(keccak(encoded), "big")
