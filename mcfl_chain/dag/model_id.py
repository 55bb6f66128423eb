"""Deterministic ids, computed exactly as the contracts compute them (docs/PROTOCOL.md)."""

from __future__ import annotations

from collections.abc import Sequence

from eth_abi import encode
from eth_utils import keccak

from mcfl_chain.chain.client import MAX_RULE

ROOT_MODEL_ID = bytes(32)
UINT256_MAX = 2**256 - 1


def model_id(
    parents: bytes | Sequence[bytes],
    update_ids: Sequence[int],
    rule: int = 0,
    parameter: int = 0,
) -> bytes:
    """Id of the model made of ``parents`` plus ``update_ids`` with aggregation rule
    (``rule``, ``parameter``), as ``Models.vy`` (``protocol._rule_model_id``).

    The base id: one parent ``keccak256(abi.encode(bytes32 parent, uint256[]
    updateIds))``; a merge of several parents ``keccak256(abi.encode(bytes32[] parents,
    uint256[] updateIds))``. Rule 0 (the network's default: FedAvg, or the rule the
    architecture names) is the base id, as before rules existed. Any other rule hashes
    it again with its code and parameter word, ``keccak256(abi.encode(bytes32 baseId,
    uint256 rule, uint256 parameter))``, so the same ids aggregated by another rule are
    another model.

    Parameters
    ----------
    parents
        The 32-byte id of the parent model (the root is 32 zero bytes), or a sequence
        of parent ids, strictly ascending; a sequence of one is the single-parent case.
    update_ids
        The aggregated update ids, strictly ascending, at least one.
    rule
        The aggregation rule's code, 0 to :data:`MAX_RULE`
        (:attr:`~mcfl_chain.algorithms.robust.AggregationRule.code`).
    parameter
        The rule's parameter word, a uint256 (0 for rule 0).

    Returns
    -------
    bytes
        The 32-byte model id; its token id is ``int.from_bytes(id, "big")``.

    Raises
    ------
    ValueError
        If a parent is not 32 bytes, the parents are empty or not strictly ascending,
        the update list is empty, an id is outside uint256 or the ids are not strictly
        ascending, or the rule is out of range or rule 0 has a parameter (the contract
        refuses all of these).
    """
    if isinstance(rule, bool) or not isinstance(rule, int) or not 0 <= rule <= MAX_RULE:
        raise ValueError(f"the aggregation rule code must be 0 to {MAX_RULE}, got {rule!r}")
    if not 0 <= parameter <= UINT256_MAX:
        raise ValueError(f"the rule parameter word {parameter} is not a uint256")
    if rule == 0 and parameter != 0:
        raise ValueError(f"rule 0 (the network's default) takes parameter 0, got {parameter}")
    parent_list = [parents] if isinstance(parents, bytes | bytearray) else list(parents)
    if not parent_list:
        raise ValueError("a model has at least one parent; the parent list is empty")
    for i, parent in enumerate(parent_list):
        if len(parent) != 32:
            raise ValueError(f"parent {i} must be a 32-byte model id, got {len(parent)} bytes")
        if i and bytes(parent) <= bytes(parent_list[i - 1]):
            raise ValueError(
                f"parents must be strictly ascending: parent {i} (0x{parent.hex()}) "
                f"is not above 0x{parent_list[i - 1].hex()}; sort them and drop "
                f"duplicates"
            )
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
    if len(parent_list) == 1:
        base = keccak(encode(["bytes32", "uint256[]"], [bytes(parent_list[0]), ids]))
    else:
        base = keccak(encode(["bytes32[]", "uint256[]"], [[bytes(p) for p in parent_list], ids]))
    if rule == 0:  # the id models had before rules existed
        return base
    return keccak(encode(["bytes32", "uint256", "uint256"], [base, rule, parameter]))


def update_id(trainer_id: int, parent: bytes, round_: int) -> int:
    """Id of the update trainer ``trainer_id`` proposes for ``parent`` in ``round_``.

    ``uint256(keccak256(abi.encode(uint256 trainerId, bytes32 parent, uint256 round)))``,
    as ``Updates.vy``: keyed by the trainer id, not the address holding its token, so
    one update per (trainer, parent, round) follows from it across key rotations.

    Parameters
    ----------
    trainer_id
        The proposing trainer's id (its trainer token id, from 1).
    parent
        The 32-byte parent model id.
    round_
        The round number.

    Returns
    -------
    int
        The update id (its token id).

    Raises
    ------
    ValueError
        If ``trainer_id`` is not a positive integer (an address, say: ids are keyed by
        trainer id since protocol v2) or ``parent`` is not 32 bytes.
    """
    if isinstance(trainer_id, bool) or not isinstance(trainer_id, int) or trainer_id < 1:
        raise ValueError(
            f"trainer_id must be a trainer id (an integer from 1), got "
            f"{trainer_id!r}; read it with Trainers.trainerId(address)"
        )
    if len(parent) != 32:
        raise ValueError(f"parent must be a 32-byte model id, got {len(parent)} bytes")
    encoded = encode(["uint256", "bytes32", "uint256"], [trainer_id, bytes(parent), round_])
    return int.from_bytes(keccak(encoded), "big")
