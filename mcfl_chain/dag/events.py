"""Contract events as plain JSON records, and how they change the model DAG.

Records are what the worker appends to its events log and replays after a restart, so
they hold only JSON types: ids as 0x-hex, update ids as decimal strings (they exceed
the 53-bit integers of JSON readers in browsers).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from mcfl_chain.chain.client import ChainEvent
from mcfl_chain.dag.graph import ModelDAG, UpdateRecord


def _hex(value: bytes) -> str:
    return "0x" + bytes(value).hex()


def event_record(event: ChainEvent) -> dict[str, Any]:
    """Flatten a decoded chain event into a JSON-ready record."""
    record: dict[str, Any] = {
        "event": event.name,
        "block": event.block_number,
        "tx": event.tx_hash,
        "log": event.log_index,
    }
    args = event.args
    if event.name == "UpdateProposed":
        record.update(
            proposer=args["proposer"],
            parent=_hex(args["parent"]),
            update_id=str(args["updateId"]),
            round=int(args["round"]),
            cid=args["cid"],
            num_samples=int(args["numSamples"]),
        )
    elif event.name == "ModelAppended":
        record.update(
            model_id=_hex(args["modelId"]),
            parents=[_hex(p) for p in args["parents"]]
            if "parents" in args
            else [_hex(args["parent"])],
            round=int(args["round"]),
            update_ids=[str(u) for u in args["updateIds"]],
            popularity=int(args["popularity"]),
            aggregator=args["aggregator"],
            weights_cid=args.get("weightsCid") or None,
        )
    else:
        record.update({k: (_hex(v) if isinstance(v, bytes) else v) for k, v in args.items()})
    return record


def apply_events(dag: ModelDAG, records: Iterable[dict[str, Any]]) -> None:
    """Apply records in chain order; phase and vote events are kept for display."""
    for r in records:
        kind = r["event"]
        if kind == "UpdateProposed":
            dag.add_update(
                UpdateRecord(
                    update_id=int(r["update_id"]),
                    proposer=r["proposer"],
                    parent=bytes.fromhex(r["parent"][2:]),
                    round=r["round"],
                    cid=r["cid"],
                    num_samples=r["num_samples"],
                    tx_hash=r["tx"],
                    block=r["block"],
                )
            )
        elif kind == "ModelAppended":
            dag.add_aggregation(
                model_id=bytes.fromhex(r["model_id"][2:]),
                parents=tuple(bytes.fromhex(p[2:]) for p in r.get("parents", [r.get("parent")])),
                round_=r["round"],
                update_ids=tuple(int(u) for u in r["update_ids"]),
                aggregator=r["aggregator"],
                popularity=r["popularity"],
                weights_cid=r.get("weights_cid"),
                tx_hash=r["tx"],
                block=r["block"],
            )
        elif kind in ("PhaseChanged", "NewRound"):
            dag.phases.append(r)
        elif kind == "TrainerVoted":
            dag.votes.append(r)
