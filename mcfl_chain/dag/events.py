"""Contract events as plain JSON records, and how they change the model DAG.

Records are what the worker appends to its events log and replays after a restart, so
they hold only JSON types: ids as 0x-hex, update ids as decimal strings (they exceed
the 53-bit integers of JSON readers in browsers). Every record has ``event`` (the
event's name), ``block``, ``tx`` (0x-hex hash) and ``log`` (log index), then, by kind
(docs/PROTOCOL.md §8):

=================  ====================================================================
``UpdateProposed`` ``update_id`` (str), ``parent`` (0x-hex), ``trainer_id``, ``round``,
                   ``proposer`` (address), ``cid``, ``num_samples``
``ModelCreated``   ``model_id``, ``round``, ``trainer_id``, ``index``, ``parents``
                   (0x-hex, ascending), ``update_ids`` (str, ascending), ``rule``
                   (aggregation rule code), ``rule_parameter`` (its parameter word, a
                   decimal str), ``aggregator`` (address), ``weights_cid`` (None when
                   none was given); a record without ``rule`` (written before rules
                   existed) reads as rule 0
``ModelAppended``  ``model_id``, ``round``, ``trainer_id``, ``popularity`` (after it)
``PhaseChanged``   ``round``, ``phase`` (0 PROPOSE, 1 AGGREGATE), ``quorum``
``NewRound``       ``prev_round``, ``round``
``TrainerVoted``   ``round``, ``trainer_id``, ``phase``, ``counted``, ``votes``, ``voters``
``TrainerTransfer`` ``trainer_id``, ``sender``, ``receiver`` (``Trainers.Transfer``, see
                   :mod:`mcfl_chain.dag.trainers`)
=================  ====================================================================
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any, cast

from mcfl_chain.chain.events import ChainEvent
from mcfl_chain.dag.graph import ModelDAG, UpdateRecord

RECORD_KINDS = (
    "UpdateProposed",
    "ModelCreated",
    "ModelAppended",
    "PhaseChanged",
    "NewRound",
    "TrainerVoted",
)
"""The protocol events a record is made of (:data:`mcfl_chain.chain.events.EVENT_SOURCES`)."""


def _hex(value: bytes | bytearray) -> str:
    return "0x" + bytes(value).hex()


def _unhex(value: str) -> bytes:
    if not isinstance(value, str) or not value.startswith("0x") or len(value) != 66:
        raise ValueError(f"expected a 0x-prefixed 32-byte id, got {value!r}")
    return bytes.fromhex(value[2:])


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


class SharedRecord(dict[str, Any]):
    """A record that many trainers of one process hold (a host's): never mutated once
    made, so its JSON line for the events log is made once too (:func:`record_line`)."""

    __slots__ = ("_line", "_update")

    def json_line(self) -> str:
        try:
            return self._line
        except AttributeError:
            self._line: str = json.dumps(self)
            return self._line

    def update_record(self) -> UpdateRecord:
        """The proposal this ``UpdateProposed`` record tells of, made once: every DAG of
        the process holds the same (a host of N trainers kept N copies of each of the
        network's proposals, O(N² x rounds) objects)."""
        try:
            return self._update
        except AttributeError:
            self._update: UpdateRecord = _new_update(self)
            return self._update


def record_line(record: Mapping[str, Any]) -> str:
    """``record`` as one line of JSON (without its newline)."""
    if isinstance(record, SharedRecord):
        return record.json_line()
    return json.dumps(record)


def event_record(event: ChainEvent) -> dict[str, Any]:
    """Flatten a decoded chain event into a JSON-ready record (see the module's table).

    An event of another kind keeps its arguments under snake_case names, bytes as
    0x-hex and lists as lists; :func:`apply_events` ignores it.
    """
    record: dict[str, Any] = {
        "event": event.name,
        "block": int(event.block_number),
        "tx": event.tx_hash,
        "log": int(event.log_index),
    }
    a = event.args
    if event.name == "UpdateProposed":
        record.update(
            update_id=str(int(a["updateId"])),
            parent=_hex(a["parent"]),
            trainer_id=int(a["trainerId"]),
            round=int(a["round"]),
            proposer=a["proposer"],
            cid=a["cid"],
            num_samples=int(a["numSamples"]),
        )
    elif event.name == "ModelCreated":
        record.update(
            model_id=_hex(a["modelId"]),
            round=int(a["round"]),
            trainer_id=int(a["trainerId"]),
            index=int(a["index"]),
            parents=[_hex(p) for p in a["parents"]],
            update_ids=[str(int(u)) for u in a["updateIds"]],
            rule=int(a["rule"]),
            rule_parameter=str(int(a["ruleParameter"])),
            aggregator=a["aggregator"],
            weights_cid=a.get("weightsCid") or None,
        )
    elif event.name == "ModelAppended":
        record.update(
            model_id=_hex(a["modelId"]),
            round=int(a["round"]),
            trainer_id=int(a["trainerId"]),
            popularity=int(a["popularity"]),
        )
    elif event.name == "PhaseChanged":
        record.update(round=int(a["round"]), phase=int(a["phase"]), quorum=int(a["quorum"]))
    elif event.name == "NewRound":
        record.update(prev_round=int(a["prevRound"]), round=int(a["round"]))
    elif event.name == "TrainerVoted":
        record.update(
            round=int(a["round"]),
            trainer_id=int(a["trainerId"]),
            phase=int(a["phase"]),
            counted=bool(a["counted"]),
            votes=int(a["votes"]),
            voters=int(a["voters"]),
        )
    else:
        record.update({_snake(k): _plain(v) for k, v in a.items()})
    return record


def _plain(value: Any) -> Any:
    if isinstance(value, bytes | bytearray):
        return _hex(value)
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def _kept(record: Mapping[str, Any]) -> dict[str, Any]:
    """``record`` as the DAG keeps it: the dict itself (records are not mutated once
    made, and the trainers of a host share theirs), a copy of any other mapping."""
    if type(record) is dict or type(record) is SharedRecord:
        return cast(dict[str, Any], record)
    return dict(record)


def _new_update(r: Mapping[str, Any]) -> UpdateRecord:
    return UpdateRecord(
        update_id=int(r["update_id"]),
        proposer=r["proposer"],
        trainer_id=int(r["trainer_id"]),
        parent=_unhex(r["parent"]),
        round=int(r["round"]),
        cid=r["cid"],
        num_samples=int(r["num_samples"]),
        tx_hash=r["tx"],
        block=int(r["block"]),
    )


def apply_events(dag: ModelDAG, records: Iterable[Mapping[str, Any]]) -> None:
    """Apply records in chain order.

    Updates and models feed the graph (an update, creation or aggregation applied
    twice changes nothing); ``PhaseChanged`` and ``NewRound`` records are appended to
    ``dag.phases``, ``TrainerVoted`` to ``dag.votes`` (apply each once; the record
    dicts themselves are kept, so do not mutate them afterwards); other kinds (trainer
    transfers) are skipped.

    Raises
    ------
    KeyError, ValueError
        For a record that lacks a field or holds a malformed id (e.g. a record of
        protocol v1): the caller should read the events again.
    """
    for r in records:
        kind = r["event"]
        if kind == "UpdateProposed":
            dag.add_update(r.update_record() if isinstance(r, SharedRecord) else _new_update(r))
        elif kind == "ModelCreated":
            dag.add_creation(
                model_id=_unhex(r["model_id"]),
                parents=tuple(_unhex(p) for p in r["parents"]),
                round_=int(r["round"]),
                update_ids=tuple(int(u) for u in r["update_ids"]),
                index=int(r["index"]),
                aggregator=r["aggregator"],
                weights_cid=r["weights_cid"],
                block=int(r["block"]),
                rule=int(r.get("rule", 0)),
                rule_parameter=int(r.get("rule_parameter", "0")),
            )
        elif kind == "ModelAppended":
            dag.add_appended(
                _unhex(r["model_id"]),
                int(r["trainer_id"]),
                int(r["popularity"]),
                r["tx"],
                int(r["block"]),
                round_=int(r["round"]),
            )
        elif kind in ("PhaseChanged", "NewRound"):
            dag.phases.append(_kept(r))
        elif kind == "TrainerVoted":
            dag.votes.append(_kept(r))
