"""The trainer's round state machine (SPEC §3, paper §4, thesis §3.4–3.6, §7.1).

The worker follows the contracts' events and, for the round and phase the chain is in,
does what is still missing — never more:

PROPOSE    score the candidate models on the local test split, pick some (Algorithm 1),
           train each, store its weights, ``propose``; then ``finishProposals``.
AGGREGATE  for every parent it trained, keep the peers' updates that diverge little from
           its own (Algorithm 2), FedAvg them, store the result, ``aggregate``; then
           ``nextRound``.

Every step asks the chain first whether it was already done, so a worker killed at any
point and restarted neither proposes nor aggregates twice. When a phase has a deadline
and it passes, the worker calls for the phase to advance, so one silent trainer cannot
stall the others; without deadlines the protocol waits for the whole quorum.
"""

from __future__ import annotations

import copy
import json
import logging
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from mcfl_chain.adversaries import Adversary, Publication
from mcfl_chain.algorithms.divergence import flatten_state
from mcfl_chain.chain.client import ChainClient, ChainError, Phase
from mcfl_chain.dag.events import apply_events, event_record
from mcfl_chain.dag.graph import ModelDAG, ModelRecord, short_id
from mcfl_chain.dag.model_id import model_id as compute_model_id
from mcfl_chain.dag.weights import StateDict, Unavailable, WeightsBook
from mcfl_chain.learning.codec import encode_weights
from mcfl_chain.learning.models import create_model, get_architecture
from mcfl_chain.learning.scenario import TrainerData
from mcfl_chain.learning.training import evaluate, selection_metric, train
from mcfl_chain.storage.base import Storage
from mcfl_chain.strategies.base import Candidate, Strategy
from mcfl_chain.worker.state import WorkerState
from mcfl_chain.worker.timing import RoundClock

log = logging.getLogger("mcfl_chain.worker")


@dataclass(frozen=True)
class TrainingOptions:
    epochs: int = 2
    batch_size: int = 32
    lr: float = 0.05
    momentum: float = 0.9
    seed: int = 0


@dataclass
class WorkerOptions:
    """Everything that tunes one worker besides its chain, storage and data."""

    arch: str
    training: TrainingOptions = field(default_factory=TrainingOptions)
    rounds: int | None = None
    """Stop after taking part in this many rounds (None: run until stopped)."""
    poll_interval: float = 0.1
    metrics_path: Path | None = None
    labels: dict[str, Any] = field(default_factory=dict)
    """Written into every metrics line (trainer index, data group, tolerance...)."""


class Worker:
    """One sovereign trainer. ``run()`` blocks until the round budget is spent."""

    def __init__(
        self,
        chain: ChainClient,
        storage: Storage,
        data: TrainerData,
        strategy: Strategy,
        options: WorkerOptions,
        state: WorkerState,
        dag: ModelDAG,
        adversary: Adversary | None = None,
    ) -> None:
        self.chain = chain
        self.adversary = adversary
        """None for an honest trainer; otherwise what it corrupts (tests, benchmarks)."""
        self.storage = storage
        self.data = data
        self.strategy = strategy
        self.options = options
        self.state = state
        self.dag = dag
        self.kind = get_architecture(options.arch).kind
        self._template = create_model(options.arch, seed=0)
        self.book = WeightsBook(self._fetch, options.arch, dag)
        self.clock = RoundClock()
        self.me = chain.address
        self.rounds_done = 0
        self._round_started = time.perf_counter()
        self._aggregated: dict[int, list[dict[str, Any]]] = {}
        self._next_advance = 0.0
        self._stop = threading.Event()

    # -- plumbing ------------------------------------------------------------------------

    def _fetch(self, cid: str) -> bytes:
        with self.clock.measure("storage"):
            return self.storage.get(cid)

    def _put(self, blob: bytes) -> str:
        with self.clock.measure("storage"):
            return self.storage.put(blob)

    def stop(self) -> None:
        self._stop.set()

    def sync(self) -> None:
        """Apply the events of new blocks to the DAG and persist the position."""
        head = self.chain.block_number()
        if head <= self.state.last_block:
            return
        events = [event_record(e) for e in self.chain.events(self.state.last_block + 1, head)]
        apply_events(self.dag, events)
        self.state.record(events, head)

    # -- main loop -------------------------------------------------------------------------

    def run(self) -> int:
        """Play rounds until the budget is spent or :meth:`stop`; returns rounds played.

        While idle the worker polls one view (``Models.statusOf``) and nothing else; it
        reads the events (``sync``) only when it has something to do, so that waiting
        trainers leave the CPU to the ones still training.
        """
        with self.clock.measure("chain"):
            if not self.chain.is_registered():
                self.chain.register()
                log.info("registered as trainer %s", self.chain.trainer_id())
            status = self.chain.status()
        acted: tuple[int, Phase] | None = None
        while not self._stop.is_set():
            if status.started and self.state.first_round is None:
                self.state.first_round = status.round
                self.state.save()
            if status.started and self._budget_spent(status.round):
                break
            if status.started and not status.voted:
                if acted == (status.round, status.phase):
                    # The vote did not go through and the phase did not move: say so and
                    # retry calmly rather than spin.
                    log.warning(
                        "round %d: still no vote recorded in the %s phase; retrying",
                        status.round,
                        status.phase.name.lower(),
                    )
                    self._stop.wait(1.0)
                acted = (status.round, status.phase)
                with self.clock.measure("chain"):
                    self.sync()
                if status.phase is Phase.PROPOSE:
                    self._propose_phase(status.round)
                else:
                    self._aggregate_phase(status.round)
            elif status.deadline and time.time() >= max(status.deadline, self._next_advance):
                self._advance_after_deadline(status.round, status.phase)
                self._next_advance = time.time() + 1.0  # do not hammer the node
            else:
                with self.clock.measure("waiting"):
                    self._stop.wait(self.options.poll_interval)
                    status = self.chain.status()
                continue
            with self.clock.measure("chain"):
                status = self.chain.status()
        return self.rounds_done

    def _still_in(self, round_: int, phase: Phase) -> bool:
        """Whether the chain is still in (round, phase): checked right before a vote,
        since a deadline may have moved the network on while this trainer worked."""
        status = self.chain.status()
        return (status.round, status.phase) == (round_, phase)

    def _budget_spent(self, round_: int) -> bool:
        budget, first = self.options.rounds, self.state.first_round
        return budget is not None and first is not None and round_ >= first + budget

    def _advance_after_deadline(self, round_: int, phase: Phase) -> None:
        """Past the phase deadline, push the phase forward (thesis §7.1)."""
        with self.clock.measure("chain"):
            if not self._still_in(round_, phase):
                return
            try:
                self.chain.force_advance(phase)
                log.info(
                    "round %d: %s deadline passed; advanced without the full quorum",
                    round_,
                    phase.name.lower(),
                )
            except ChainError as exc:
                # Another trainer advanced it first: the next view shows the new phase.
                log.debug("advance after deadline refused: %s", exc)

    # -- PROPOSE ---------------------------------------------------------------------------

    def _propose_phase(self, round_: int) -> None:
        chosen = self.state.chosen_for(round_)
        if chosen is None:
            chosen = self._choose_models(round_)
            self.state.set_chosen(round_, chosen)
        for parent in chosen:
            if self._stop.is_set():
                return
            self._propose(round_, parent)
        with self.clock.measure("chain"):
            if self._still_in(round_, Phase.PROPOSE):
                self._vote(self.chain.finish_proposals)

    def _choose_models(self, round_: int) -> list[bytes]:
        """Paper Algorithm 1 over the round's candidates, scored on the test split."""
        candidates: list[Candidate[bytes]] = []
        for model in self.dag.candidates(round_):
            try:
                metric = self._score(model)
            except Unavailable as exc:
                log.warning(
                    "round %d: candidate %s skipped: %s", round_, short_id(model.model_id), exc
                )
                continue
            candidates.append(Candidate(model.model_id, metric, max(1, model.popularity)))
        if not candidates:
            log.error("round %d: no candidate model is usable; sitting this round out", round_)
            return []
        chosen = self.strategy.choose_models(candidates)
        log.info(
            "round %d: %d candidates, training %s",
            round_,
            len(candidates),
            ", ".join(short_id(m) for m in chosen),
        )
        return list(chosen)

    def _score(self, model: ModelRecord) -> float:
        net = self._load(self.book.model(model.model_id))
        with self.clock.measure("evaluation"):
            result = evaluate(net, self.data.test_x, self.data.test_y, self.kind)
        metric = selection_metric(result, self.kind)
        if not math.isfinite(metric):
            raise Unavailable(f"non-finite metric {metric}")
        return metric

    def _load(self, weights: dict[str, torch.Tensor]) -> torch.nn.Module:
        net = copy.deepcopy(self._template)
        net.load_state_dict(weights)
        return net

    def _propose(self, round_: int, parent: bytes) -> None:
        # The DAG holds every event up to the last sync, which ran after this trainer's
        # last transaction (and, after a restart, over the whole history).
        if self.dag.proposal_by(self.me, parent, round_) is not None:
            return
        cid = self.state.uploaded_cid(round_, parent)
        samples = len(self.data.train_y)
        if cid is None:
            try:
                start = self.book.model(parent)
            except Unavailable as exc:
                log.warning("round %d: cannot train %s: %s", round_, short_id(parent), exc)
                return
            net = self._load(start)
            opts = self.options.training
            with self.clock.measure("training"):
                train(
                    net,
                    self.data,
                    epochs=opts.epochs,
                    batch_size=opts.batch_size,
                    lr=opts.lr,
                    momentum=opts.momentum,
                    seed=opts.seed * 1_000_003 + round_,
                )
            cid = self._publish_update(net, start)
            self.state.set_uploaded(round_, parent, cid)
        with self.clock.measure("chain"):
            try:
                update_id = self.chain.propose(parent, cid, samples)
            except ChainError as exc:
                log.warning("round %d: proposal on %s refused: %s", round_, short_id(parent), exc)
                return
        log.info(
            "round %d: proposed update %s on %s (%d samples, %s)",
            round_,
            str(update_id)[:10],
            short_id(parent),
            samples,
            cid,
        )

    def _publish_update(self, net: torch.nn.Module, parent_weights: StateDict) -> str:
        weights = net.state_dict()
        if self.adversary is not None:
            return self.adversary.publish_update(
                Publication(
                    weights=weights,
                    parent_weights=parent_weights,
                    trainer=self.me,
                    encode=lambda state: encode_weights(self.options.arch, state),
                    put=self._put,
                )
            )
        return self._put(encode_weights(self.options.arch, weights))

    def _vote(self, call: Callable[[], object]) -> None:
        try:
            call()
        except ChainError as exc:
            log.debug("vote refused (the phase moved on): %s", exc)

    # -- AGGREGATE -----------------------------------------------------------------------

    def _aggregate_phase(self, round_: int) -> None:
        mine = self._my_updates(round_)
        results = []
        for own in mine:
            if self._stop.is_set():
                return
            result = self._aggregate(round_, own.parent, own.update_id)
            if result is not None:
                results.append(result)
        self._aggregated[round_] = results
        with self.clock.measure("chain"):
            if self._still_in(round_, Phase.AGGREGATE):
                self._vote(self.chain.next_round)
        self._report(round_)

    def _my_updates(self, round_: int) -> list[Any]:
        return sorted(
            (
                u
                for u in self.dag.updates.values()
                if u.round == round_ and u.proposer.lower() == self.me.lower()
            ),
            key=lambda u: u.update_id,
        )

    def _aggregate(self, round_: int, parent: bytes, own: int) -> dict[str, Any] | None:
        """Paper Algorithm 2 + FedAvg for one parent; returns the metrics of the result."""
        proposals = [u.update_id for u in self.dag.updates_for(parent, round_)]
        good, bad = self.book.usable_updates(proposals)
        for uid, reason in bad.items():
            log.warning("round %d: update %s excluded: %s", round_, str(uid)[:10], reason)
        if own not in good:
            log.error(
                "round %d: my own update on %s is unusable (%s); not aggregating",
                round_,
                short_id(parent),
                bad.get(own),
            )
            return None
        with self.clock.measure("aggregation"):
            vectors = {uid: flatten_state(w) for uid, w in good.items()}
            start = flatten_state(self.book.model(parent))
            selected = sorted(self.strategy.choose_updates(own, vectors, parent=start))
            weights = self.book.aggregate(selected, good)
        new_id = compute_model_id(parent, selected)
        if not self.dag.aggregated_by(self.me, parent, round_):
            # Only a model's first aggregator has its weights recorded: skip the upload
            # when the model already exists (anyone can recompute it from the updates).
            exists = new_id in self.dag.models
            cid = "" if exists else self._put(encode_weights(self.options.arch, weights))
            with self.clock.measure("chain"):
                try:
                    self.chain.aggregate(selected, cid)
                except ChainError as exc:
                    log.warning(
                        "round %d: aggregation on %s refused: %s", round_, short_id(parent), exc
                    )
                    return None
        with self.clock.measure("evaluation"):
            result = evaluate(self._load(weights), self.data.test_x, self.data.test_y, self.kind)
        log.info(
            "round %d: aggregated %d/%d updates on %s -> model %s (%s)",
            round_,
            len(selected),
            len(proposals),
            short_id(parent),
            short_id(new_id),
            _fmt(result),
        )
        return {
            "parent": "0x" + parent.hex(),
            "model": "0x" + new_id.hex(),
            "selected": len(selected),
            "proposals": len(proposals),
            "excluded": {str(k): v for k, v in bad.items()},
            "accuracy": result.accuracy,
            "loss": result.loss,
        }

    # -- metrics ---------------------------------------------------------------------------

    def _report(self, round_: int) -> None:
        """One JSON line per round: the paper's metric is the aggregated model's
        performance on the trainer's own test split, without fine-tuning (§5.1)."""
        self.rounds_done += 1
        if round_ in self.state.reported:
            return
        results = self._aggregated.pop(round_, [])
        best = max(
            results,
            key=lambda r: r["accuracy"] if r["accuracy"] is not None else -r["loss"],
            default=None,
        )
        now = time.perf_counter()
        line = {
            "round": round_,
            "trainer": self.me,
            **self.options.labels,
            "accuracy": None if best is None else best["accuracy"],
            "loss": None if best is None else best["loss"],
            "model": None if best is None else best["model"],
            "aggregations": results,
            "trained": [("0x" + m.hex()) for m in (self.state.chosen_for(round_) or [])],
            "seconds": round(now - self._round_started, 3),
            "split": self.clock.split(),
            "time": time.time(),
        }
        self._round_started = now
        if self.options.metrics_path is not None:
            self.options.metrics_path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.options.metrics_path, "a") as f:
                f.write(json.dumps(line) + "\n")
        self.state.mark_reported(round_)


def _fmt(result: Any) -> str:
    if result.accuracy is not None:
        return f"accuracy {result.accuracy:.3f}, loss {result.loss:.3f}"
    return f"mse {result.loss:.5f}"
