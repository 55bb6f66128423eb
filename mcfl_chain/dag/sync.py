"""Rebuild the model DAG of a deployment from its contract events, resumably.

The events are the ones the worker reads (:func:`mcfl_chain.dag.events.event_record`
records, replayed with :func:`~mcfl_chain.dag.events.apply_events`), so the
inspection tools and the trainers share one picture of the network. An optional cache
directory keeps the records read so far (``events.jsonl``) and the last block read
(``position.json``): the next call only asks the node for the blocks after it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mcfl_chain.chain.client import ChainClient
from mcfl_chain.dag.events import apply_events, event_record
from mcfl_chain.dag.graph import ROOT_ID, ModelDAG, short_id

BLOCKS_PER_REQUEST = 5_000
"""Block span of one ``eth_getLogs`` call: public nodes refuse much wider ranges."""


class CacheError(RuntimeError):
    """The cache directory belongs to another network or range, or cannot be read."""


@dataclass
class EventLog:
    """Protocol event records of one deployment from ``from_block`` to ``last_block``.

    Attributes
    ----------
    from_block
        First block read.
    last_block
        Last block read (``from_block - 1`` before any read).
    records
        :func:`~mcfl_chain.dag.events.event_record` records in chain order.
    trainers
        Trainer token id (decimal string) to holder address, from the Trainers
        contract's ``Transfer`` events (mints and key rotations).
    """

    from_block: int
    last_block: int
    records: list[dict[str, Any]] = field(default_factory=list)
    trainers: dict[str, str] = field(default_factory=dict)


def _identity(client: ChainClient) -> dict[str, Any]:
    return {"chain_id": client.deployment.chain_id, "models": client.deployment.addresses["Models"]}


class EventCache:
    """An :class:`EventLog` kept on disk between calls.

    Parameters
    ----------
    directory
        Where ``position.json`` and ``events.jsonl`` live; created when missing.
    """

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)
        self.position_path = self.directory / "position.json"
        self.events_path = self.directory / "events.jsonl"

    def load(self, client: ChainClient, from_block: int) -> EventLog:
        """The log cached for this deployment and start block, or an empty one.

        Raises
        ------
        CacheError
            When the cache was written for another chain, deployment or start block.
        """
        try:
            position = json.loads(self.position_path.read_text())
        except FileNotFoundError:
            return EventLog(from_block, from_block - 1)
        except ValueError as exc:
            raise CacheError(
                f"{self.position_path} is not valid JSON ({exc}); delete "
                f"{self.directory} to read the chain again"
            ) from exc
        expected = {**_identity(client), "from_block": from_block}
        found = {k: position.get(k) for k in expected}
        if found != expected:
            raise CacheError(
                f"the cache {self.directory} holds events of {found}, not of "
                f"{expected}; use another --cache-dir or delete it"
            )
        last_block = int(position["last_block"])
        records = []
        try:
            lines = self.events_path.read_text().splitlines()
        except FileNotFoundError:
            lines = []
        for line in lines:
            try:
                record = json.loads(line)
            except ValueError:
                break  # torn by an interrupted write: those blocks are read again
            if record["block"] <= last_block:
                records.append(record)
        return EventLog(from_block, last_block, records, dict(position.get("trainers", {})))

    def save(self, client: ChainClient, log: EventLog, new_records: list[dict[str, Any]]) -> None:
        """Append ``new_records`` then move the recorded position to ``log.last_block``.

        In that order, so an interruption leaves records past the position, which
        :meth:`load` ignores and the next call reads again.
        """
        self.directory.mkdir(parents=True, exist_ok=True)
        if not self.position_path.exists():
            self.events_path.write_text("")
        if new_records:
            with open(self.events_path, "a") as f:
                f.writelines(json.dumps(r) + "\n" for r in new_records)
                f.flush()
                os.fsync(f.fileno())
        position = {
            **_identity(client),
            "from_block": log.from_block,
            "last_block": log.last_block,
            "trainers": log.trainers,
        }
        tmp = self.position_path.with_name(f".{self.position_path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(position, indent=1))
        tmp.replace(self.position_path)


def read_events(
    client: ChainClient,
    log: EventLog,
    to_block: int,
    progress: Callable[[int, int], None] | None = None,
) -> list[dict[str, Any]]:
    """Read blocks ``log.last_block + 1`` .. ``to_block`` into ``log``; returns the new records.

    Parameters
    ----------
    client
        A (read-only) client of the deployment.
    log
        The log to extend: its records, trainers and ``last_block`` are updated.
    to_block
        Last block to read.
    progress
        Called with (blocks read, blocks to read) after each request.
    """
    start, total = log.last_block + 1, max(0, to_block - log.last_block)
    new: list[dict[str, Any]] = []
    transfer = client.trainers.events.Transfer()
    for low in range(start, to_block + 1, BLOCKS_PER_REQUEST):
        high = min(to_block, low + BLOCKS_PER_REQUEST - 1)
        new += [event_record(e) for e in client.events(low, high)]
        for entry in transfer.get_logs(from_block=low, to_block=high):
            args = entry["args"]
            log.trainers[str(int(args["tokenId"]))] = args["receiver"]
        if progress is not None:
            progress(high - log.last_block, total)
    log.records += new
    log.last_block = max(log.last_block, to_block)
    return new


def sync_events(
    client: ChainClient,
    from_block: int | None = None,
    to_block: int | None = None,
    cache_dir: Path | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> EventLog:
    """Events of the deployment in ``[from_block, to_block]``, from the cache and the node.

    Parameters
    ----------
    client
        A (read-only) client of the deployment.
    from_block
        First block; by default the deployment block (the whole history).
    to_block
        Last block; by default the node's latest block.
    cache_dir
        Cache directory (see :class:`EventCache`); None reads everything from the node.
    progress
        Called with (blocks read, blocks to read) while reading.

    Returns
    -------
    EventLog
        The records up to ``to_block`` (a cache that reaches further is filtered).
    """
    start = client.deployment.deployment_block if from_block is None else from_block
    end = client.block_number() if to_block is None else to_block
    if end < start:
        raise ValueError(
            f"the block range {start}..{end} is empty: --to-block must not be "
            f"before --from-block (the deployment is at block "
            f"{client.deployment.deployment_block})"
        )
    cache = EventCache(cache_dir) if cache_dir is not None else None
    log = cache.load(client, start) if cache else EventLog(start, start - 1)
    if end > log.last_block:
        new = read_events(client, log, end, progress)
        if cache:
            cache.save(client, log, new)
    elif end < log.last_block:
        # The trainers map cannot be cut at a block; it is the latest known.
        log = EventLog(start, end, [r for r in log.records if r["block"] <= end], log.trainers)
    return log


def build_dag(log: EventLog, genesis_cid: str | None) -> ModelDAG:
    """The DAG those events describe (the root carries ``genesis_cid``)."""
    dag = ModelDAG(genesis_cid=genesis_cid)
    apply_events(dag, log.records)
    return dag


def check_against_chain(dag: ModelDAG, client: ChainClient) -> list[str]:
    """Compare every model of ``dag`` with the Models contract's views.

    Returns
    -------
    list[str]
        One line per disagreement (empty when events and views agree): a model the
        contract does not know, or another parent, round, popularity or weights CID.
        A DAG read from a partial block range shows lower popularities.
    """
    problems = []
    for model in dag.models.values():
        if model.model_id == ROOT_ID:
            continue
        name = short_id(model.model_id)
        if not client.model_exists(model.model_id):
            problems.append(f"model {name}: unknown to the Models contract")
            continue
        found: dict[str, Any] = {
            "parent": client.parent_of(model.model_id),
            "round": client.round_of(model.model_id),
            "popularity": client.popularity_of(model.model_id),
            "weights CID": client.weights_cid_of(model.model_id),
        }
        expected: dict[str, Any] = {
            "parent": model.parent,
            "round": model.round,
            "popularity": model.popularity,
            "weights CID": model.weights_cid,
        }
        for key, value in expected.items():
            if found[key] != value:
                shown = (
                    found[key].hex() if isinstance(found[key], bytes) else found[key],
                    value.hex() if isinstance(value, bytes) else value,
                )
                problems.append(f"model {name}: {key} on chain {shown[0]}, from events {shown[1]}")
    return problems


def network_status(client: ChainClient, block: int) -> dict[str, Any]:
    """The round state views at ``block``: started, round, phase name, votes, quorum,
    trainers, block, and the phase deadline (unix seconds, 0 for none)."""
    started, round_, phase = client.round_state(block)
    # Read at the same block as the round, so votes belong to the phase shown.
    votes = int(client.models.functions.votes().call(block_identifier=block))
    quorum = int(client.models.functions.quorum().call(block_identifier=block))
    trainers = int(client.trainers.functions.totalSupply().call(block_identifier=block))
    return {
        "started": started,
        "round": round_,
        "phase": phase.name,
        "votes": votes,
        "quorum": quorum,
        "trainers": trainers,
        "block": block,
        "deadline": client.phase_deadline(block),
    }


def network_facts(client: ChainClient, log: EventLog) -> dict[str, Any]:
    """What identifies the network and the block range read."""
    dep = client.deployment
    return {
        "chain_id": dep.chain_id,
        "task": dep.task,
        "genesis_cid": dep.genesis_cid,
        "addresses": dict(dep.addresses),
        "deployment_block": dep.deployment_block,
        "min_trainers": dep.min_trainers,
        "phase_duration": dep.phase_duration,
        "from_block": log.from_block,
        "last_block": log.last_block,
    }
