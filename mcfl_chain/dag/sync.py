"""Rebuild the model DAG of a deployment from its contract events, resumably.

The events are the ones the worker reads (:func:`mcfl_chain.dag.events.event_record`
records, replayed with :func:`~mcfl_chain.dag.events.apply_events`) plus the
``Trainers`` contract's token transfers (:mod:`mcfl_chain.dag.trainers`: who holds each
trainer id), so the inspection tools and the trainers share one picture of the network.
An optional cache directory keeps the records read so far (``events.jsonl``) and the
last block read (``position.json``): the next call only asks the node for the blocks
after it.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from web3.exceptions import ContractCustomError, ContractLogicError, Web3Exception

from mcfl_chain.chain.cids import cid_from_bytes, cid_to_bytes
from mcfl_chain.chain.client import ChainClient
from mcfl_chain.chain.errors import ChainError
from mcfl_chain.dag.events import apply_events, event_record
from mcfl_chain.dag.graph import ROOT_ID, ModelDAG, short_id
from mcfl_chain.dag.model_id import model_id as compute_model_id
from mcfl_chain.dag.model_id import update_id as compute_update_id
from mcfl_chain.dag.render import PHASE_NAMES
from mcfl_chain.dag.trainers import ZERO_ADDRESS, TrainerInfo, trainers_map, transfer_record

BLOCKS_PER_REQUEST = 5_000
"""Block span of one ``eth_getLogs`` call: public nodes refuse much wider ranges."""

CACHE_FORMAT = 2
"""Version of the cache's records (2: protocol v2 records and trainer transfers); a
cache of another version is read again from the node."""

log = logging.getLogger(__name__)


class CacheError(RuntimeError):
    """The cache directory belongs to another network or range, or cannot be read."""


@dataclass
class EventLog:
    """Records of one deployment from ``from_block`` to ``last_block``.

    Attributes
    ----------
    from_block
        First block read.
    last_block
        Last block read (``from_block - 1`` before any read).
    records
        :func:`~mcfl_chain.dag.events.event_record` records and trainer transfer
        records (:func:`~mcfl_chain.dag.trainers.transfer_record`), in chain order.
    """

    from_block: int
    last_block: int
    records: list[dict[str, Any]] = field(default_factory=list)

    @property
    def trainers(self) -> dict[int, TrainerInfo]:
        """Trainer id → holder and history, as of ``last_block`` (mints, key
        rotations, burns on exit)."""
        return trainers_map(self.records)


def _anchor(client: ChainClient) -> str:
    """Hash of the deployment block: tells a devnet started again (same addresses and
    chain id) from the one a cache was written for."""
    try:
        block = client.w3.eth.get_block(client.deployment.deployment_block)
    except Web3Exception as exc:
        raise ChainError(
            f"the node has no block {client.deployment.deployment_block} (the deployment "
            f"block): wrong deployment file or node ({exc})"
        ) from exc
    return "0x" + bytes(block["hash"]).hex()


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
        self._anchor: str | None = None

    def _identity(self, client: ChainClient, from_block: int) -> dict[str, Any]:
        return {
            "chain_id": client.deployment.chain_id,
            "models": client.deployment.addresses["Models"],
            "from_block": from_block,
        }

    def load(self, client: ChainClient, from_block: int) -> EventLog:
        """The log cached for this deployment and start block, or an empty one.

        A cache of an older format, or of a chain started again at the same addresses
        (another deployment block hash), is dropped: those blocks are read again.

        Raises
        ------
        CacheError
            When the cache was written for another chain, deployment or start block.
        """
        self._anchor = _anchor(client)
        try:
            position = json.loads(self.position_path.read_text())
        except FileNotFoundError:
            return EventLog(from_block, from_block - 1)
        except ValueError as exc:
            raise CacheError(
                f"{self.position_path} is not valid JSON ({exc}); delete "
                f"{self.directory} to read the chain again"
            ) from exc
        expected = self._identity(client, from_block)
        found = {k: position.get(k) for k in expected}
        if found != expected:
            raise CacheError(
                f"the cache {self.directory} holds events of {found}, not of "
                f"{expected}; use another --cache-dir or delete it"
            )
        if position.get("format") != CACHE_FORMAT or position.get("anchor") != self._anchor:
            log.info(
                "the cache %s was written by another version or for a chain started "
                "again; reading the events again",
                self.directory,
            )
            self.position_path.unlink(missing_ok=True)
            self.events_path.unlink(missing_ok=True)
            return EventLog(from_block, from_block - 1)
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
        return EventLog(from_block, last_block, records)

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
            **self._identity(client, log.from_block),
            "format": CACHE_FORMAT,
            "anchor": self._anchor or _anchor(client),
            "last_block": log.last_block,
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
        The log to extend: its records and ``last_block`` are updated.
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
        batch = [event_record(e) for e in client.events(low, high)]
        try:
            entries = transfer.get_logs(from_block=low, to_block=high)
        except Web3Exception as exc:
            raise ChainError(
                f"reading the trainer transfers of blocks {low}..{high}: {exc}"
            ) from exc
        batch += [
            transfer_record(
                block=int(e["blockNumber"]),
                tx="0x" + bytes(e["transactionHash"]).hex(),
                log=int(e["logIndex"]),
                trainer_id=int(e["args"]["tokenId"]),
                sender=e["args"]["sender"],
                receiver=e["args"]["receiver"],
            )
            for e in entries
        ]
        batch.sort(key=lambda r: (r["block"], r["log"]))
        new += batch
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
        log = EventLog(start, end, [r for r in log.records if r["block"] <= end])
    return log


def build_dag(log: EventLog, genesis_cid: str | None) -> ModelDAG:
    """The DAG those events describe (the root carries ``genesis_cid``)."""
    dag = ModelDAG(genesis_cid=genesis_cid)
    apply_events(dag, log.records)
    return dag


class _Views:
    """Contract views read at one block; a revert is returned as its message."""

    def __init__(self, client: ChainClient, block: int) -> None:
        self.client, self.block = client, block

    def __call__(self, function: Any) -> Any:
        try:
            return function.call(block_identifier=self.block)
        except (ContractLogicError, ContractCustomError) as exc:
            return _Reverted(str(exc.message or exc))
        except Web3Exception as exc:
            raise ChainError(f"reading the contract views at block {self.block}: {exc}") from exc


@dataclass(frozen=True)
class _Reverted:
    reason: str

    def __str__(self) -> str:
        return f"reverts ({self.reason})"


def _shown(value: Any) -> Any:
    if isinstance(value, bytes):
        return "0x" + value.hex()
    return value


def check_against_chain(
    dag: ModelDAG,
    client: ChainClient,
    *,
    block: int | None = None,
    trainers: Mapping[int, TrainerInfo] | None = None,
    complete: bool = True,
) -> list[str]:
    """Compare the DAG rebuilt from events with the contract views, and every id with
    the formulas of docs/PROTOCOL.md §7.

    Per model: ``Models.modelExists``, ``roundOf``, ``popularityOf``, ``indexOf``,
    ``ruleOf`` (the aggregation rule its event names), its id recomputed from its
    parents, update ids and rule (:func:`~mcfl_chain.dag.model_id.model_id`),
    and each of its updates trained from one of its parents in its round. Per update:
    ``Updates.exists``, ``roundOf``, ``numSamplesOf``, ``parentIndexOf`` (the parent's
    creation index) and its id recomputed from (trainer id, parent, round). Per trainer
    (when ``trainers`` is given): ``Trainers.ownerOf`` is the holder the transfers
    name, and a burnt token has no owner. The root: the genesis CID.

    Parameters
    ----------
    dag
        The DAG rebuilt from events.
    client
        A client of the deployment.
    block
        Block the views are read at: the last block the events were read to (default
        the latest; a DAG read up to an earlier block shows lower popularities).
    trainers
        The trainers map read with the events, to check as well.
    complete
        Whether the events were read from the deployment block: then the number of
        models must be ``Models.totalSupply``.

    Returns
    -------
    list[str]
        One line per disagreement; empty when events, views and formulas agree.
    """
    at = client.block_number() if block is None else block
    view = _Views(client, at)
    models, updates = client.models.functions, client.updates.functions
    problems: list[str] = []

    def compare(what: str, key: str, on_chain: Any, from_events: Any) -> None:
        if on_chain != from_events:
            problems.append(
                f"{what}: {key} on chain {_shown(on_chain)}, from events {_shown(from_events)}"
            )

    genesis = view(models.genesisCid())
    if not isinstance(genesis, _Reverted):
        try:
            expected = cid_from_bytes(cid_to_bytes(dag.genesis_cid)) if dag.genesis_cid else None
        except ValueError:
            expected = dag.genesis_cid
        compare("root", "genesis CID", cid_from_bytes(bytes(genesis)), expected)
    if complete:
        compare("the DAG", "number of models", view(models.totalSupply()), len(dag.models))
    for model in dag.models.values():
        if model.model_id == ROOT_ID:
            continue
        name = f"model {short_id(model.model_id)}"
        if view(models.modelExists(model.model_id)) is not True:
            problems.append(f"{name}: unknown to the Models contract")
            continue
        compare(name, "round", view(models.roundOf(model.model_id)), model.round)
        compare(name, "popularity", view(models.popularityOf(model.model_id)), model.popularity)
        if not model.created_in_range:
            continue  # created before the blocks read: parents and updates unknown
        compare(name, "creation index", view(models.indexOf(model.model_id)), model.index)
        rule = view(models.ruleOf(model.model_id))
        compare(
            name,
            "aggregation rule (code, parameter)",
            rule if isinstance(rule, _Reverted) else tuple(rule),
            (model.rule, model.rule_parameter),
        )
        try:
            recomputed = compute_model_id(
                model.parents, model.update_ids, model.rule, model.rule_parameter
            )
        except ValueError as exc:
            problems.append(f"{name}: its parents, updates and rule make no model id ({exc})")
        else:
            compare(
                name,
                "id recomputed from its parents, updates and rule",
                model.model_id,
                recomputed,
            )
        for uid in model.update_ids:
            update = dag.updates.get(uid)
            if update is None:
                continue  # proposed before the blocks read
            if update.parent not in model.parents or update.round != model.round:
                problems.append(
                    f"{name}: update {uid} was trained from {short_id(update.parent)} in "
                    f"round {update.round}, not from one of its parents in round {model.round}"
                )
    for update in dag.updates.values():
        name = f"update {str(update.update_id)[:10]}…"
        if view(updates.exists(update.update_id)) is not True:
            problems.append(f"{name}: unknown to the Updates contract")
            continue
        compare(name, "round", view(updates.roundOf(update.update_id)), update.round)
        compare(name, "samples", view(updates.numSamplesOf(update.update_id)), update.num_samples)
        parent = dag.models.get(update.parent)
        if parent is not None and parent.index is not None:
            compare(
                name, "parent index", view(updates.parentIndexOf(update.update_id)), parent.index
            )
        try:
            recomputed_uid = compute_update_id(update.trainer_id, update.parent, update.round)
        except ValueError as exc:
            problems.append(f"{name}: its trainer, parent and round make no update id ({exc})")
        else:
            compare(
                name,
                "id recomputed from (trainer id, parent, round)",
                update.update_id,
                recomputed_uid,
            )
    for info in (trainers or {}).values():
        name = f"trainer #{info.trainer_id}"
        owner = view(client.trainers.functions.ownerOf(info.trainer_id))
        if info.exited:
            if not isinstance(owner, _Reverted):
                problems.append(f"{name}: exited in the events, held by {owner} on chain")
        elif info.holder is not None:
            compare(name, "holder", owner, info.holder)
    return problems


def network_status(client: ChainClient, block: int) -> dict[str, Any]:
    """The round state views at ``block`` (``Models.statusOf``, read atomically):
    started, round, phase name, votes, quorum, voters, the deadline (unix seconds, 0
    before round 0), live trainers and the block."""
    view = _Views(client, block)
    status = view(client.models.functions.statusOf(ZERO_ADDRESS))
    trainers = view(client.trainers.functions.totalSupply())
    if isinstance(status, _Reverted) or isinstance(trainers, _Reverted):
        raise ChainError(f"the round state views revert at block {block}: {status}")
    started, round_, phase, _voted, _member, deadline, votes, quorum, voters = status
    return {
        "started": bool(started),
        "round": int(round_),
        "phase": PHASE_NAMES[int(phase)],
        "votes": int(votes),
        "quorum": int(quorum),
        "voters": int(voters),
        "trainers": int(trainers),
        "block": block,
        "deadline": int(deadline),
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
        "registration": dep.registration,
        "max_samples": dep.max_samples,
        "from_block": log.from_block,
        "last_block": log.last_block,
    }
