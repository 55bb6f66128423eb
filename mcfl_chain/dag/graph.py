"""The model DAG as the chain records it, rebuilt from contract events.

A model version is a parent model plus the set of updates aggregated into it (paper
§4.3); a merge is a model whose updates were trained from several parents (FedFMC's
merges, the thesis' model composition §3.5), so a model records a tuple of parents.
Everything here is plain data fed by decoded events, so the worker, the simulator and
``mcfl-chain dag`` share one picture of the network and none of them needs more than
the chain to rebuild it.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

ROOT_ID = bytes(32)


def short_id(model_id: bytes) -> str:
    """First 4 bytes in hex, enough to tell models apart on screen."""
    return "root" if model_id == ROOT_ID else model_id.hex()[:8]


@dataclass
class UpdateRecord:
    """One proposal: a trainer's weights trained from ``parent`` during ``round``."""

    update_id: int
    proposer: str
    parent: bytes
    round: int
    cid: str
    num_samples: int
    tx_hash: str = ""
    block: int = 0


@dataclass
class ModelRecord:
    """One model version; ``popularity`` counts the aggregations that produced its id.

    ``parents`` are the models its updates were trained from, ascending (empty for the
    root; one for an ordinary aggregation; several for a merge).
    """

    model_id: bytes
    parents: tuple[bytes, ...]
    round: int | None
    update_ids: tuple[int, ...]
    popularity: int = 0
    aggregators: list[str] = field(default_factory=list)
    weights_cid: str | None = None
    tx_hashes: list[str] = field(default_factory=list)
    block: int = 0

    @property
    def parent(self) -> bytes | None:
        """The first parent (the only one unless the model is a merge); None for the root."""
        return self.parents[0] if self.parents else None

    @property
    def is_merge(self) -> bool:
        """Whether the model combines updates trained from several parents."""
        return len(self.parents) > 1


@dataclass
class ModelDAG:
    """Models and updates indexed the ways the protocol asks for them."""

    genesis_cid: str | None = None
    models: dict[bytes, ModelRecord] = field(default_factory=dict)
    updates: dict[int, UpdateRecord] = field(default_factory=dict)
    phases: list[dict[str, Any]] = field(default_factory=list)
    votes: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        if ROOT_ID not in self.models:
            self.models[ROOT_ID] = ModelRecord(
                ROOT_ID, (), None, (), 1, weights_cid=self.genesis_cid
            )
        self._by_parent_round: dict[tuple[bytes, int], list[int]] = defaultdict(list)
        self._models_by_round: dict[int, list[bytes]] = defaultdict(list)
        for update in self.updates.values():
            self._by_parent_round[(update.parent, update.round)].append(update.update_id)
        for model in self.models.values():
            if model.round is not None:
                self._models_by_round[model.round].append(model.model_id)

    # -- feeding -------------------------------------------------------------------

    def add_update(self, update: UpdateRecord) -> None:
        if update.update_id in self.updates:
            return
        self.updates[update.update_id] = update
        self._by_parent_round[(update.parent, update.round)].append(update.update_id)

    def add_aggregation(
        self,
        model_id: bytes,
        parents: bytes | tuple[bytes, ...],
        round_: int,
        update_ids: tuple[int, ...],
        aggregator: str,
        popularity: int,
        weights_cid: str | None,
        tx_hash: str = "",
        block: int = 0,
    ) -> None:
        """Record one accepted aggregation (a ModelAppended event); ``parents`` is one
        id or the ascending ids of a merge's parents."""
        if isinstance(parents, bytes):
            parents = (parents,)
        model = self.models.get(model_id)
        if model is None:
            model = ModelRecord(
                model_id, tuple(sorted(parents)), round_, tuple(update_ids), block=block
            )
            self.models[model_id] = model
            self._models_by_round[round_].append(model_id)
        model.popularity = max(model.popularity + 1, popularity)
        model.aggregators.append(aggregator)
        if tx_hash:
            model.tx_hashes.append(tx_hash)
        if weights_cid and model.weights_cid is None:
            model.weights_cid = weights_cid

    # -- queries ---------------------------------------------------------------------

    def updates_for(self, parent: bytes, round_: int) -> list[UpdateRecord]:
        """Proposals made from ``parent`` during ``round_``, by ascending update id."""
        ids = sorted(self._by_parent_round.get((parent, round_), ()))
        return [self.updates[i] for i in ids]

    def proposal_by(self, proposer: str, parent: bytes, round_: int) -> UpdateRecord | None:
        """``proposer``'s update of ``parent`` in ``round_``, if the chain recorded one."""
        who = proposer.lower()
        return next(
            (u for u in self.updates_for(parent, round_) if u.proposer.lower() == who), None
        )

    def aggregated_by(self, aggregator: str, parent: bytes, round_: int) -> bool:
        """Whether ``aggregator`` submitted an aggregation of ``parent``'s updates in
        ``round_`` (the contract allows one per trainer, parent and round)."""
        who = aggregator.lower()
        return any(
            parent in m.parents and who in (a.lower() for a in m.aggregators)
            for m in self.models_of_round(round_)
        )

    def models_of_round(self, round_: int) -> list[ModelRecord]:
        """Models first appended during ``round_``, in the order they appeared."""
        return [self.models[m] for m in self._models_by_round.get(round_, ())]

    def last_round_with_models(self, before: int) -> int | None:
        """Latest round < ``before`` in which some model was appended, if any."""
        rounds = [r for r in self._models_by_round if r < before and self._models_by_round[r]]
        return max(rounds) if rounds else None

    def candidates(self, round_: int) -> list[ModelRecord]:
        """The models a trainer may train in ``round_`` (paper Algorithm 1's input).

        Those appended in the previous round; when that round appended none (every
        aggregation failed), the latest round that did; and the root for round 0.
        """
        previous = self.last_round_with_models(round_)
        if previous is None:
            return [self.models[ROOT_ID]]
        return self.models_of_round(previous)

    def lineage(self, model_id: bytes) -> list[bytes]:
        """Ids from ``model_id`` up to the root (inclusive) through first parents."""
        chain = [model_id]
        while (parent := self.models[chain[-1]].parent) is not None:
            chain.append(parent)
        return chain

    def ancestors(self, model_id: bytes) -> set[bytes]:
        """Every model reachable from ``model_id`` through parents (merges included)."""
        seen: set[bytes] = set()
        todo = list(self.models[model_id].parents)
        while todo:
            current = todo.pop()
            if current not in seen:
                seen.add(current)
                todo.extend(self.models[current].parents if current in self.models else ())
        return seen

    # -- export / import ---------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        """A plain-JSON picture of the DAG (ids as 0x-hex)."""

        def hexid(b: bytes | None) -> str | None:
            return None if b is None else "0x" + b.hex()

        return {
            "genesis_cid": self.genesis_cid,
            "models": [
                {
                    "id": hexid(m.model_id),
                    "short": short_id(m.model_id),
                    "parent": hexid(m.parent),
                    "parents": [hexid(p) for p in m.parents],
                    "round": m.round,
                    "updates": [str(u) for u in m.update_ids],
                    "popularity": m.popularity,
                    "aggregators": m.aggregators,
                    "weights_cid": m.weights_cid,
                    "tx_hashes": m.tx_hashes,
                    "block": m.block,
                }
                for m in self.models.values()
            ],
            "updates": [
                {
                    "id": str(u.update_id),
                    "proposer": u.proposer,
                    "parent": hexid(u.parent),
                    "round": u.round,
                    "cid": u.cid,
                    "num_samples": u.num_samples,
                    "tx_hash": u.tx_hash,
                    "block": u.block,
                }
                for u in sorted(self.updates.values(), key=lambda u: (u.round, u.update_id))
            ],
            "phases": self.phases,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ModelDAG:
        """Inverse of :meth:`to_json` (used to resume without re-reading old events)."""

        def unhex(s: str | None) -> bytes | None:
            return None if s is None else bytes.fromhex(s[2:])

        models = {}
        for m in data["models"]:
            model_id = unhex(m["id"])
            assert model_id is not None
            parents = m.get("parents", [] if m["parent"] is None else [m["parent"]])
            models[model_id] = ModelRecord(
                model_id,
                tuple(bytes.fromhex(p[2:]) for p in parents),
                m["round"],
                tuple(int(u) for u in m["updates"]),
                m["popularity"],
                list(m["aggregators"]),
                m["weights_cid"],
                list(m["tx_hashes"]),
                m["block"],
            )
        updates = {}
        for u in data["updates"]:
            parent = unhex(u["parent"])
            assert parent is not None
            updates[int(u["id"])] = UpdateRecord(
                int(u["id"]),
                u["proposer"],
                parent,
                u["round"],
                u["cid"],
                u["num_samples"],
                u["tx_hash"],
                u["block"],
            )
        return cls(
            genesis_cid=data.get("genesis_cid"),
            models=models,
            updates=updates,
            phases=list(data.get("phases", [])),
        )
