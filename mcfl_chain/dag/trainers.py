"""Who holds each trainer identity: the ``Trainers`` contract's token transfers.

A trainer is known by its trainer token id (1, 2, …); the address holding the token
can change (key rotation, ``transferFrom``) and the token is burnt when the trainer
exits (ids are never reused). The DAG shows trainer ids; this map gives, for each, the
address that holds it now, or held it last.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

ZERO_ADDRESS = "0x" + "00" * 20
TRANSFER = "TrainerTransfer"
"""Record kind of a ``Trainers.Transfer`` event (the model and update tokens' transfers
are not recorded)."""


@dataclass
class TrainerInfo:
    """One trainer identity.

    Attributes
    ----------
    trainer_id
        The trainer token id.
    holders
        Every address that held the token, in order (the registering one first, when
        the registration was read).
    registered_block
        Block of the mint; None when it came before the blocks read.
    exited_block
        Block of the burn (``exit()``); None while the trainer is registered.
    """

    trainer_id: int
    holders: list[str] = field(default_factory=list)
    registered_block: int | None = None
    exited_block: int | None = None

    @property
    def exited(self) -> bool:
        """Whether the token was burnt."""
        return self.exited_block is not None

    @property
    def holder(self) -> str | None:
        """The address holding the token now; None once the trainer exited."""
        return None if self.exited or not self.holders else self.holders[-1]

    @property
    def last_holder(self) -> str | None:
        """The address that holds it now, or held it when it exited."""
        return self.holders[-1] if self.holders else None

    def to_json(self) -> dict[str, Any]:
        """Plain JSON: trainer_id, holder (None after exit), holders, blocks, exited."""
        return {
            "trainer_id": self.trainer_id,
            "holder": self.holder,
            "holders": list(self.holders),
            "exited": self.exited,
            "registered_block": self.registered_block,
            "exited_block": self.exited_block,
        }


def transfer_record(
    *, block: int, tx: str, log: int, trainer_id: int, sender: str, receiver: str
) -> dict[str, Any]:
    """The record of one ``Trainers.Transfer`` (mint: from 0; burn: to 0)."""
    return {
        "event": TRANSFER,
        "block": block,
        "tx": tx,
        "log": log,
        "trainer_id": int(trainer_id),
        "sender": sender,
        "receiver": receiver,
    }


def _is_zero(address: str) -> bool:
    return int(address, 16) == 0


def trainers_map(records: Iterable[Mapping[str, Any]]) -> dict[int, TrainerInfo]:
    """Trainer id → :class:`TrainerInfo`, from the transfer records among ``records``
    (in chain order; other kinds are skipped)."""
    trainers: dict[int, TrainerInfo] = {}
    for r in records:
        if r.get("event") != TRANSFER:
            continue
        tid = int(r["trainer_id"])
        info = trainers.setdefault(tid, TrainerInfo(tid))
        if _is_zero(r["sender"]):
            info.registered_block = int(r["block"])
        elif not info.holders:
            info.holders.append(r["sender"])  # registered before the blocks read
        if _is_zero(r["receiver"]):
            info.exited_block = int(r["block"])
        elif not info.holders or info.holders[-1] != r["receiver"]:
            info.holders.append(r["receiver"])
    return dict(sorted(trainers.items()))
