"""Weights of updates and models, fetched from storage and never trusted.

An update's weights are a blob named by the CID its proposer put on chain. A model's
weights are recomputed from its updates with the deterministic rule its id commits to,
so nobody has to trust the aggregator: the aggregation rule its ``ModelCreated`` event
records (median, trimmed mean, norm clipping...: :func:`~mcfl_chain.algorithms.robust.
rule_from_chain`), or for rule 0 the network's default: FedAvg, or the rule the
network's architecture names (:attr:`~mcfl_chain.learning.models.Architecture.
aggregation`; FACADE's ``<base>-heads<k>`` models: ``per-head-fedavg``), which the task
descriptor on chain gives every reader. Only when some update cannot be had does the
worker fall back to the weights CID the first aggregator recorded (checked like any
peer blob).
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence

import torch

from mcfl_chain.algorithms.robust import AggregationRule, make_aggregation_rule, rule_from_chain
from mcfl_chain.dag.graph import ROOT_ID, ModelDAG, ModelRecord, short_id
from mcfl_chain.learning.codec import Layout, WeightsError, decode_weights, encode_weights
from mcfl_chain.learning.models import get_architecture, is_architecture
from mcfl_chain.storage.errors import NoPeers, StorageError

StateDict = dict[str, torch.Tensor]
log = logging.getLogger(__name__)


class Unavailable(Exception):
    """Weights that cannot be used, with the reason a person should read in the log.

    ``lasting`` is False when the cause is this reader's own (its storage node reached
    no peer): the weights may be had later, so the reason is not remembered.
    """

    def __init__(self, reason: str, lasting: bool = True) -> None:
        super().__init__(reason)
        self.lasting = lasting


class _LRU(OrderedDict[object, object]):
    """A bounded mapping that evicts the least recently *used* entry (read or written);
    an entry put with its round can also be dropped with its round (:meth:`forget_before`)."""

    def __init__(self, size: int) -> None:
        super().__init__()
        self.size = size
        self.rounds: dict[object, int] = {}

    def lookup(self, key: object) -> object | None:
        """The value under ``key`` (now the most recently used), or None."""
        if key not in self:
            return None
        self.move_to_end(key)
        return self[key]

    def put(self, key: object, value: object, round_: int | None = None) -> None:
        self[key] = value
        self.move_to_end(key)
        if round_ is not None:
            self.rounds[key] = round_
        while len(self) > self.size:
            old, _ = self.popitem(last=False)
            self.rounds.pop(old, None)

    def forget_before(self, round_: int) -> int:
        """Drop the entries put with a round before ``round_``; how many."""
        old = [key for key, r in self.rounds.items() if r < round_]
        for key in old:
            self.pop(key, None)
            del self.rounds[key]
        return len(old)


class SharedLRU(_LRU):
    """An :class:`_LRU` several threads may use at once (the books of a host's trainers)."""

    def __init__(self, size: int) -> None:
        super().__init__(size)
        self._lock = threading.Lock()

    def lookup(self, key: object) -> object | None:
        with self._lock:
            return super().lookup(key)

    def put(self, key: object, value: object, round_: int | None = None) -> None:
        with self._lock:
            super().put(key, value, round_)

    def forget_before(self, round_: int) -> int:
        with self._lock:
            return super().forget_before(round_)


def aggregation_of(arch: str) -> str:
    """The aggregation rule's name for a network of architecture ``arch``: the one it
    names, FedAvg for a name this package does not know (a task's own model)."""
    return get_architecture(arch).aggregation if is_architecture(arch) else "fedavg"


class WeightsBook:
    """Decoded weights by update id and by model id, with small LRU caches.

    Parameters
    ----------
    fetch
        ``cid -> bytes``: the storage backend's verified read.
    arch
        The architecture every blob must declare (the network's task).
    dag
        The chain's picture of models and updates.
    layout
        The tensors every blob must hold (name → shape, dtype); by default the registered
        architecture's. Give it for a task's own model, which this process cannot build.
    prefetch
        ``cids -> None``: read these blobs ahead, together, before ``fetch`` asks for
        them one by one (a worker's parallel reads); none by default.
    """

    def __init__(
        self,
        fetch: Callable[[str], bytes],
        arch: str,
        dag: ModelDAG,
        cache_size: int = 256,
        layout: Layout | None = None,
        prefetch: Callable[[Iterable[str]], None] | None = None,
    ) -> None:
        self._fetch = fetch
        self._prefetch = prefetch
        self._arch = arch
        self._layout = layout
        self._dag = dag
        self._updates = _LRU(cache_size)
        self._models = _LRU(max(8, cache_size // 8))
        self._rejected: dict[int, str] = {}
        self.rule: AggregationRule = make_aggregation_rule(aggregation_of(arch))
        """The network's default rule (rule 0 on chain): the architecture's."""

    def share_caches(self, updates: SharedLRU, models: SharedLRU) -> None:
        """Keep decoded updates and rebuilt models in caches shared with other books of
        the same network (the trainers of one host): update ids and model ids name the
        same weights for every reader, so each is decoded or rebuilt once per host.
        Rejections stay this book's own."""
        self._updates, self._models = updates, models

    def rule_of(self, model: ModelRecord) -> AggregationRule:
        """The rule that rebuilds ``model``: the one its id commits to, :attr:`rule` for 0.

        Raises
        ------
        Unavailable
            If this package knows no rule of that code and parameter word.
        """
        if model.rule == 0:
            return self.rule
        try:
            return rule_from_chain(model.rule, model.rule_parameter)
        except ValueError as exc:
            raise Unavailable(f"model {short_id(model.model_id)}: {exc}") from exc

    def blob(self, cid: str) -> StateDict:
        """Fetch and decode one blob; :class:`Unavailable` says why it is unusable."""
        try:
            data = self._fetch(cid)
        except StorageError as exc:
            lasting = not isinstance(exc, NoPeers)
            raise Unavailable(f"unreachable CID {cid}: {exc}", lasting) from exc
        try:
            return decode_weights(data, self._arch, layout=self._layout)
        except WeightsError as exc:
            raise Unavailable(f"invalid weights at {cid}: {exc}") from exc

    def update(self, update_id: int) -> StateDict:
        """The weights of one proposal; rejection reasons are remembered, not retried."""
        if update_id in self._rejected:
            raise Unavailable(self._rejected[update_id])
        cached = self._updates.lookup(update_id)
        if cached is not None:
            return cached  # type: ignore[return-value]
        record = self._dag.updates.get(update_id)
        if record is None:
            raise Unavailable(f"update {update_id} is not on chain")
        try:
            weights = self.blob(record.cid)
        except Unavailable as exc:
            if exc.lasting:
                self._rejected[update_id] = str(exc)
            raise
        self._updates.put(update_id, weights, record.round)
        return weights

    def forget_updates_before(self, round_: int) -> int:
        """Drop the decoded updates of rounds before ``round_`` (how many): called when
        ``round_``'s aggregate phase opens, after which a trainer reads only that round's
        updates (its candidates, scored in the propose phase, were models of the round
        before). A later need refetches one from storage. At 200 FedAvg trainers, a
        host's cache otherwise kept the previous round's 200 updates (50 MB) beside the
        current round's."""
        return self._updates.forget_before(round_)

    def usable_updates(self, update_ids: list[int]) -> tuple[dict[int, StateDict], dict[int, str]]:
        """Split ids into decoded weights and exclusion reasons (untrusted peers)."""
        self._read_ahead(update_ids)
        good: dict[int, StateDict] = {}
        bad: dict[int, str] = {}
        for uid in update_ids:
            try:
                good[uid] = self.update(uid)
            except Unavailable as exc:
                bad[uid] = str(exc)
        return good, bad

    def _read_ahead(self, update_ids: Iterable[int], extra: Iterable[str] = ()) -> None:
        """Have ``prefetch`` read the blobs of the updates not decoded nor rejected yet."""
        if self._prefetch is None:
            return
        cids = [
            record.cid
            for uid in update_ids
            if uid not in self._rejected
            and uid not in self._updates
            and (record := self._dag.updates.get(uid)) is not None
        ]
        wanted = [*cids, *extra]
        if wanted:
            self._prefetch(wanted)

    def prefetch_models(self, model_ids: Iterable[bytes]) -> None:
        """Read ahead, together, the blobs that rebuilding these models takes (their
        updates', the genesis weights'), before :meth:`model` asks for each in turn."""
        update_ids: list[int] = []
        extra: list[str] = []
        for model_id in model_ids:
            record = self._dag.models.get(model_id)
            if record is None or model_id in self._models:
                continue
            if model_id == ROOT_ID:
                extra += [record.weights_cid] if record.weights_cid else []
            else:
                update_ids += record.update_ids
        self._read_ahead(update_ids, extra)

    def aggregate(
        self,
        update_ids: list[int],
        weights: Mapping[int, StateDict],
        rule: AggregationRule | None = None,
        parent: Mapping[str, torch.Tensor] | None = None,
    ) -> StateDict:
        """The deterministic aggregate of the given updates (ascending id, with their
        sample counts) by ``rule``, :attr:`rule` by default; ``parent`` (the parent's
        weights) for rules working on deltas (norm clipping).

        Raises
        ------
        ValueError
            If the rule refuses the updates (e.g. norm clipping without a parent).
        """
        updates = [
            (uid, self._dag.updates[uid].num_samples, weights[uid]) for uid in sorted(update_ids)
        ]
        return (rule or self.rule).aggregate(updates, parent)

    def aggregated(
        self,
        model_id: bytes,
        parents: Sequence[bytes],
        update_ids: list[int],
        weights: Mapping[int, StateDict],
        rule: AggregationRule | None = None,
        parent: Mapping[str, torch.Tensor] | None = None,
    ) -> StateDict:
        """:meth:`aggregate` of an aggregation on ``parents``, kept as the weights of
        ``model_id`` (the id the chain gives it: the caller vouches for that) when
        :meth:`rebuild` would give the same: with rule 0, or on a single parent (whose
        weights ``parent`` are). The trainers of a host that make the same aggregation
        (all of FedAvg's) then compute it once.

        Raises
        ------
        ValueError
            As :meth:`aggregate`.
        """
        if not (rule is None or rule.code == 0 or len(parents) == 1):
            # A merge under a rule of its own: rebuild gives that rule no parent.
            return self.aggregate(update_ids, weights, rule, parent)
        cached = self._models.lookup(model_id)
        if cached is not None:
            return cached  # type: ignore[return-value]
        result = self.aggregate(update_ids, weights, rule, parent)
        self._models.put(model_id, result)
        return result

    def rebuild(self, model: ModelRecord, weights: Mapping[int, StateDict]) -> StateDict:
        """``model``'s weights from its updates' ``weights``, by the rule it records.

        The parent's weights are given to the rule when the model has one parent and
        a rule of its own (rule 0 never needs them).

        Raises
        ------
        Unavailable
            If the rule is unknown, the parent cannot be had, or the rule refuses.
        """
        rule = self.rule_of(model)
        parent = self.model(model.parents[0]) if model.rule and len(model.parents) == 1 else None
        try:
            return self.aggregate(list(model.update_ids), weights, rule, parent)
        except ValueError as exc:
            raise Unavailable(f"model {short_id(model.model_id)}: {rule.name}: {exc}") from exc

    def model(self, model_id: bytes) -> StateDict:
        """Weights of a model version: genesis blob, or its rule over its updates."""
        cached = self._models.lookup(model_id)
        if cached is not None:
            return cached  # type: ignore[return-value]
        record = self._dag.models.get(model_id)
        if record is None:
            raise Unavailable(f"model {short_id(model_id)} is not on chain")
        if model_id == ROOT_ID:
            if not record.weights_cid:
                raise Unavailable("the deployment names no genesis weights CID")
            weights = self.blob(record.weights_cid)
        else:
            good, bad = self.usable_updates(list(record.update_ids))
            if not bad:
                weights = self.rebuild(record, good)
            elif record.weights_cid:
                log.info(
                    "model %s: recomputing is impossible (%s); using its published weights %s",
                    short_id(model_id),
                    next(iter(bad.values())),
                    record.weights_cid,
                )
                weights = self.blob(record.weights_cid)
            else:
                raise Unavailable(
                    f"model {short_id(model_id)}: {next(iter(bad.values()))} "
                    f"and no published weights"
                )
        self._models.put(model_id, weights)
        return weights


def check_published_weights(
    dag: ModelDAG, book: WeightsBook, fetch: Callable[[str], bytes], arch: str
) -> tuple[int, list[str]]:
    """Rebuild every model whose first aggregator published weights from its update ids
    and blobs alone (:meth:`WeightsBook.rebuild`: the rule the chain records for it, or
    the network's) and compare the bytes with the published blob.

    Parameters
    ----------
    dag
        The DAG rebuilt from the chain's events.
    book
        A weights book of that DAG (its rule is the architecture's).
    fetch
        ``cid -> bytes``: reads a published blob.
    arch
        The network's architecture, to encode the recomputed weights.

    Returns
    -------
    tuple[int, list[str]]
        How many models were found bit-identical, and one line per model that differs
        or cannot be rebuilt (an update blob or the published blob unreachable).
    """
    checked, problems = 0, []
    for model in dag.models.values():
        if model.model_id == ROOT_ID or not model.weights_cid or not model.update_ids:
            continue
        name = f"model {short_id(model.model_id)}"
        good, bad = book.usable_updates(list(model.update_ids))
        if bad:
            problems.append(f"{name}: cannot be rebuilt: {next(iter(bad.values()))}")
            continue
        try:
            rule = book.rule_of(model)
            recomputed = encode_weights(arch, book.rebuild(model, good))
        except Unavailable as exc:
            problems.append(f"{name}: cannot be rebuilt: {exc}")
            continue
        try:
            published = fetch(model.weights_cid)
        except StorageError as exc:
            problems.append(f"{name}: its published weights {model.weights_cid}: {exc}")
            continue
        if published != recomputed:
            problems.append(
                f"{name}: its published weights {model.weights_cid} are not the "
                f"{rule.name} of its {len(good)} updates"
            )
            continue
        checked += 1
    return checked, problems
