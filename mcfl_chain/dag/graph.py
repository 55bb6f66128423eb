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


@dataclass(slots=True, frozen=True)
class UpdateRecord:
    """One proposal: trainer ``trainer_id``'s weights trained from ``parent`` in ``round``.

    ``proposer`` is the address that sent it (and received the update token); the
    trainer id is the identity every protocol rule is keyed by (a key rotation keeps it).
    Slotted, a third of the size with a ``__dict__`` each; frozen, since the trainers of
    a host share theirs (:meth:`~mcfl_chain.dag.events.SharedRecord.update_record`).
    """

    update_id: int
    proposer: str
    trainer_id: int
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
    root; one for an ordinary aggregation; several for a merge). ``aggregator_ids`` and
    ``tx_hashes`` hold one entry per accepted aggregation (``ModelAppended``), the
    creation first. ``index`` is the creation index (root 0); None for a model created
    before the first block read, whose parents, updates and creator are then unknown.
    ``creator`` is the address that created it (``ModelCreated.aggregator``).
    ``rule`` and ``rule_parameter`` are the aggregation rule its id commits to (code and
    parameter word; 0 and 0: the network's default, FedAvg or the architecture's rule).
    """

    model_id: bytes
    parents: tuple[bytes, ...]
    round: int | None
    update_ids: tuple[int, ...]
    popularity: int = 0
    aggregator_ids: list[int] = field(default_factory=list)
    weights_cid: str | None = None
    tx_hashes: list[str] = field(default_factory=list)
    block: int = 0
    index: int | None = None
    creator: str | None = None
    rule: int = 0
    rule_parameter: int = 0

    @property
    def parent(self) -> bytes | None:
        """The first parent (the only one unless the model is a merge); None for the root."""
        return self.parents[0] if self.parents else None

    @property
    def is_merge(self) -> bool:
        """Whether the model combines updates trained from several parents."""
        return len(self.parents) > 1

    @property
    def created_in_range(self) -> bool:
        """Whether its creation was read (false: only later aggregations were)."""
        return self.index is not None


def _trainer_id(value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(
            f"{what} takes a trainer id (an int from 1), got {value!r}: since protocol v2 "
            f"a trainer is known by its trainer token id, not by an address"
        )
    return value


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
                ROOT_ID, (), None, (), 1, weights_cid=self.genesis_cid, index=0
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
        """Record one proposal (an ``UpdateProposed`` event); a known id is ignored."""
        if update.update_id in self.updates:
            return
        self.updates[update.update_id] = update
        self._by_parent_round[(update.parent, update.round)].append(update.update_id)

    def add_creation(
        self,
        model_id: bytes,
        parents: bytes | tuple[bytes, ...],
        round_: int,
        update_ids: tuple[int, ...],
        index: int,
        aggregator: str,
        weights_cid: str | None,
        block: int = 0,
        rule: int = 0,
        rule_parameter: int = 0,
    ) -> ModelRecord:
        """Record a new model (a ``ModelCreated`` event) with popularity 0: the
        ``ModelAppended`` of the same transaction counts its first aggregation.

        ``parents`` is one id or the ids of a merge's parents (kept ascending);
        ``rule``/``rule_parameter`` its aggregation rule. A model already created is
        left as it is.
        """
        if isinstance(parents, bytes):
            parents = (parents,)
        model = self.models.get(model_id)
        if model is not None and model.created_in_range:
            return model
        if model is None:
            model = ModelRecord(model_id, (), round_, ())
            self.models[model_id] = model
            self._models_by_round[round_].append(model_id)
        model.parents = tuple(sorted(parents))
        model.update_ids = tuple(sorted(update_ids))
        model.index = index
        model.creator = aggregator
        model.weights_cid = weights_cid or None
        model.block = block
        model.rule, model.rule_parameter = rule, rule_parameter
        return model

    def add_appended(
        self,
        model_id: bytes,
        trainer_id: int,
        popularity: int,
        tx_hash: str = "",
        block: int = 0,
        *,
        round_: int | None = None,
    ) -> ModelRecord:
        """Record one accepted aggregation (a ``ModelAppended`` event).

        ``popularity`` is the event's (after this aggregation); an event whose
        popularity the model already reached is one applied before, and is ignored.
        A model whose creation was not read (a block range starting later) is added
        with unknown parents and updates; ``round_`` is then its round.
        """
        model = self.models.get(model_id)
        if model is None:
            if round_ is None:
                raise ValueError(
                    f"model {short_id(model_id)} was appended before it was created: "
                    f"give the event's round"
                )
            model = ModelRecord(model_id, (), round_, (), block=block)
            self.models[model_id] = model
            self._models_by_round[round_].append(model_id)
        if popularity <= model.popularity:
            return model
        model.popularity = popularity
        model.aggregator_ids.append(int(trainer_id))
        model.tx_hashes.append(tx_hash)
        return model

    # -- queries ---------------------------------------------------------------------

    def updates_for(self, parent: bytes, round_: int) -> list[UpdateRecord]:
        """Proposals made from ``parent`` during ``round_``, by ascending update id."""
        ids = sorted(self._by_parent_round.get((parent, round_), ()))
        return [self.updates[i] for i in ids]

    def proposal_by(self, trainer_id: int, parent: bytes, round_: int) -> UpdateRecord | None:
        """Trainer ``trainer_id``'s update of ``parent`` in ``round_``, if the chain
        recorded one (whichever address held the trainer token then)."""
        who = _trainer_id(trainer_id, "proposal_by")
        return next((u for u in self.updates_for(parent, round_) if u.trainer_id == who), None)

    def aggregated_by(self, trainer_id: int, parent: bytes, round_: int) -> bool:
        """Whether trainer ``trainer_id`` submitted an aggregation touching ``parent``
        in ``round_`` (the contracts allow one per trainer id, parent and round)."""
        who = _trainer_id(trainer_id, "aggregated_by")
        return any(
            parent in m.parents and who in m.aggregator_ids for m in self.models_of_round(round_)
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
        """Ids from ``model_id`` up to the root (inclusive) through first parents.

        From a partial block range it stops at the first model whose parents are unknown.
        """
        chain = [model_id]
        while (parent := self.models[chain[-1]].parent) is not None and parent in self.models:
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
        """A plain-JSON picture of the DAG (ids as 0x-hex, update ids and rule parameter
        words as decimal strings)."""
        return {
            "genesis_cid": self.genesis_cid,
            "models": [
                {
                    "id": _hexid(m.model_id),
                    "short": short_id(m.model_id),
                    "parent": None if m.parent is None else _hexid(m.parent),
                    "parents": [_hexid(p) for p in m.parents],
                    "round": m.round,
                    "index": m.index,
                    "updates": [str(u) for u in m.update_ids],
                    "popularity": m.popularity,
                    "aggregator_ids": list(m.aggregator_ids),
                    "creator": m.creator,
                    "weights_cid": m.weights_cid,
                    "rule": m.rule,
                    "rule_parameter": str(m.rule_parameter),
                    "tx_hashes": list(m.tx_hashes),
                    "block": m.block,
                }
                for m in self.models.values()
            ],
            "updates": [
                {
                    "id": str(u.update_id),
                    "proposer": u.proposer,
                    "trainer_id": u.trainer_id,
                    "parent": _hexid(u.parent),
                    "round": u.round,
                    "cid": u.cid,
                    "num_samples": u.num_samples,
                    "tx_hash": u.tx_hash,
                    "block": u.block,
                }
                for u in sorted(self.updates.values(), key=lambda u: (u.round, u.update_id))
            ],
            "phases": list(self.phases),
            "votes": list(self.votes),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ModelDAG:
        """Inverse of :meth:`to_json` (used to resume without re-reading old events)."""
        models = {}
        for m in data["models"]:
            model_id = _unhex(m["id"])
            models[model_id] = ModelRecord(
                model_id,
                tuple(_unhex(p) for p in m["parents"]),
                m["round"],
                tuple(int(u) for u in m["updates"]),
                m["popularity"],
                [int(t) for t in m["aggregator_ids"]],
                m["weights_cid"],
                list(m["tx_hashes"]),
                m["block"],
                m["index"],
                m["creator"],
                # a picture written before rules existed: every model is rule 0
                int(m.get("rule", 0)),
                int(m.get("rule_parameter", "0")),
            )
        updates = {}
        for u in data["updates"]:
            updates[int(u["id"])] = UpdateRecord(
                int(u["id"]),
                u["proposer"],
                int(u["trainer_id"]),
                _unhex(u["parent"]),
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
            votes=list(data.get("votes", [])),
        )


def _hexid(value: bytes) -> str:
    return "0x" + value.hex()


def _unhex(value: str) -> bytes:
    if not value.startswith("0x") or len(value) != 66:
        raise ValueError(f"expected a 0x-prefixed 32-byte hex id, got {value!r}")
    return bytes.fromhex(value[2:])
