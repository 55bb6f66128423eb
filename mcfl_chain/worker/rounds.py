"""The trainer's round state machine (SPEC §3, paper §4, thesis §3.4–3.6, §7.1).

The worker follows the contracts' events and, for the round and phase the chain is in,
does what is still missing — never more:

PROPOSE    score the candidate models on the local test split, pick some (Algorithm 1),
           train each, store its weights, ``propose``; then ``finishProposals``.
AGGREGATE  for every parent it trained, keep the peers' updates that diverge little from
           its own (Algorithm 2), FedAvg them, store the result, ``aggregate``; then
           ``nextRound``.

Every step asks the chain first whether it was already done, so a worker killed at any
point and restarted neither proposes nor aggregates twice, and checks right before each
transaction that the phase it means is still open. When a phase has a deadline and it
passes, one trainer calls for the phase to advance (the voter with the smallest trainer
id; the next ones step in, one by one, if it does not), so one silent trainer cannot
stall the others; without deadlines the protocol waits for the whole quorum. While it
waits, the worker says now and then whom it waits for.

A chain node or a store that stays unreachable past the retries, or a state directory
that cannot be written, stops the worker with :class:`WorkerHalted`: one line naming
the service.
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
from mcfl_chain.chain.client import ChainClient, ChainError, Phase, TrainerStatus
from mcfl_chain.chain.errors import ChainUnusable
from mcfl_chain.dag.events import apply_events, event_record
from mcfl_chain.dag.graph import ModelDAG, ModelRecord, short_id
from mcfl_chain.dag.model_id import model_id as compute_model_id
from mcfl_chain.dag.weights import StateDict, Unavailable, WeightsBook
from mcfl_chain.learning.codec import encode_weights
from mcfl_chain.learning.models import create_model, get_architecture
from mcfl_chain.learning.scenario import TrainerData
from mcfl_chain.learning.training import evaluate, selection_metric, train
from mcfl_chain.storage.base import Storage
from mcfl_chain.storage.errors import StorageError, StorageUnavailable
from mcfl_chain.strategies.base import Candidate, Strategy
from mcfl_chain.worker.state import StateError, WorkerState
from mcfl_chain.worker.timing import RoundClock

log = logging.getLogger("mcfl_chain.worker")


class WorkerHalted(RuntimeError):
    """The worker cannot go on: a service stayed unreachable past its retries, the
    account cannot pay for gas, or the state cannot be written. One line, naming it."""


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
    """Stop when the network reaches round F + ``rounds``, F being the first round in
    which this trainer took part according to the chain (a proposal, or a vote counted
    in the quorum; with none yet, the first round it saw open). None: no such bound."""
    last_round: int | None = None
    """Stop once the network is past this round (an absolute bound, for late joiners).
    None: no such bound."""
    poll_interval: float = 0.1
    wait_log_interval: float = 30.0
    """Seconds between two log lines saying whom a waiting trainer waits for (0: never)."""
    advance_grace: float = 1.0
    """Seconds a voter lets pass after seeing a phase deadline past before advancing the
    phase: proposals and votes finished right at the deadline (trainers with the same
    work finish together) are mined first instead of reverting behind the advance."""
    advance_stagger: float = 2.0
    """After a phase deadline, the voter of rank k (by trainer id) advances the phase
    only k × this many seconds after rank 0 would, if nobody did before."""
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
        self._trainer_id = 0
        self._first_part: int | None = None
        self._turn: tuple[tuple[int, Phase], float] | None = None
        self._waiting: tuple[bool, int, Phase] | None = None
        self._waiting_since = 0.0
        self._next_wait_log = 0.0

    # -- plumbing ------------------------------------------------------------------------

    def _fetch(self, cid: str) -> bytes:
        with self.clock.measure("storage"):
            try:
                return self.storage.get(cid)
            except StorageUnavailable as exc:
                # Not the blob's fault (WeightsBook would exclude it): our store is gone.
                raise WorkerHalted(f"storage: {exc}") from exc

    def _put(self, blob: bytes) -> str:
        with self.clock.measure("storage"):
            try:
                return self.storage.put(blob)
            except StorageError as exc:
                raise WorkerHalted(f"storage: {exc}") from exc

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
        """Play rounds until the budget is spent or :meth:`stop`; returns the rounds
        played, those in which this trainer had a proposal on chain.

        While idle the worker polls one view (``Models.statusOf``) and nothing else; it
        reads the events (``sync``) only when it has something to do, so that waiting
        trainers leave the CPU to the ones still training.

        Raises
        ------
        WorkerHalted
            When it cannot go on; the message names the service in one line.
        """
        try:
            return self._play()
        except ChainUnusable as exc:
            raise WorkerHalted(f"chain: {exc}") from exc
        except StateError as exc:
            raise WorkerHalted(f"state: {exc}") from exc

    def _play(self) -> int:
        with self.clock.measure("chain"):
            if not self.chain.is_registered():
                try:
                    self.chain.register()
                except ChainError as exc:
                    raise WorkerHalted(
                        f"chain: registering {self.me} as a trainer failed: {exc}"
                    ) from exc
            self._trainer_id = self.chain.trainer_id()
            log.info("trainer %d (%s)", self._trainer_id, self.me)
            # The history first: past participation sets where --rounds counts from.
            self.sync()
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
            else:
                with self.clock.measure("waiting"):
                    self._stop.wait(self.options.poll_interval)
                    status = self.chain.status()
                self._say_whom_it_waits_for(status)
                continue
            with self.clock.measure("chain"):
                status = self.chain.status()
        return self.rounds_done

    def _still_in(self, round_: int, phase: Phase) -> bool:
        """Whether the chain is still in (round, phase): checked right before a vote,
        since a deadline may have moved the network on while this trainer worked."""
        status = self.chain.status()
        return (status.round, status.phase) == (round_, phase)

    def _first_round_taken_part(self) -> int | None:
        """The first round in which this trainer proposed or cast a counted vote, as far
        as the events synced tell (the whole history is synced at start)."""
        if self._first_part is None:
            me = self.me.lower()
            rounds = [u.round for u in self.dag.updates.values() if u.proposer.lower() == me]
            rounds += [
                int(v["round"])
                for v in self.dag.votes
                if v.get("counted") and str(v.get("trainer", "")).lower() == me
            ]
            self._first_part = min(rounds, default=None)
        return self._first_part

    def _budget_spent(self, round_: int) -> bool:
        """Whether the network's round ``round_`` is past this trainer's budget.

        ``--rounds`` counts from the first round this trainer took part in according to
        the chain, so a worker rebuilt from the chain, or one that missed the deadline of
        its first proposals, stops with the network that started with it;
        ``--last-round`` is absolute.
        """
        last = self.options.last_round
        if last is not None and round_ > last:
            return True
        budget = self.options.rounds
        if budget is None:
            return False
        first = self._first_round_taken_part()
        if first is None:
            first = self.state.first_round
        return first is not None and round_ >= first + budget

    def _votes_in(self, round_: int, phase: Phase) -> list[dict[str, Any]]:
        """TrainerVoted records of (round, phase), as synced."""
        return [
            v for v in self.dag.votes if v.get("round") == round_ and v.get("phase") == int(phase)
        ]

    def _advance_turn(self, round_: int, phase: Phase) -> float:
        """When this trainer may advance (round, phase), its deadline being past.

        The voters of the phase, ordered by trainer id, take turns: rank 0 advances
        ``advance_grace`` seconds after it saw the deadline past, rank k
        ``k × advance_stagger`` seconds later still, each only if the phase is still
        open then; so one transaction ends the phase instead of a burst of them of which
        all but one revert.
        """
        if self._turn is None or self._turn[0] != (round_, phase):
            with self.clock.measure("chain"):
                self.sync()
            voters = sorted({int(v["trainerId"]) for v in self._votes_in(round_, phase)})
            rank = voters.index(self._trainer_id) if self._trainer_id in voters else len(voters)
            wait = self.options.advance_grace + rank * self.options.advance_stagger
            self._turn = ((round_, phase), time.time() + wait)
        return self._turn[1]

    def _advance_after_deadline(self, round_: int, phase: Phase) -> None:
        """Past the phase deadline, push the phase forward (thesis §7.1) in turn."""
        due = self._advance_turn(round_, phase)
        if time.time() < due:
            self._next_advance = due
            return
        self._next_advance = time.time() + 1.0  # do not hammer the node
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

    def _say_whom_it_waits_for(self, status: TrainerStatus) -> None:
        """Every ``wait_log_interval`` s of waiting in one phase, log for whom and how long."""
        now = time.monotonic()
        where = (status.started, status.round, status.phase)
        if where != self._waiting:
            self._waiting, self._waiting_since = where, now
            self._next_wait_log = now + self.options.wait_log_interval
            return
        if self.options.wait_log_interval <= 0 or now < self._next_wait_log:
            return
        self._next_wait_log = now + self.options.wait_log_interval
        waited = now - self._waiting_since
        with self.clock.measure("chain"):
            if not status.started:
                log.info(
                    "waited %.0f s for round 0 to open: %d of the %d trainers it needs "
                    "are registered",
                    waited,
                    self.chain.trainer_count(),
                    self.chain.deployment.min_trainers,
                )
                return
            self.sync()
        counted = {int(v["trainerId"]) for v in self._votes_in(status.round, status.phase)}
        missing = [str(i) for i in range(1, status.quorum + 1) if i not in counted]
        if not status.deadline:
            end = "no phase deadline: the wait lasts until they vote"
        elif (left := status.deadline - time.time()) > 0:
            end = f"the phase deadline passes in {left:.0f} s, then the phase ends without them"
        else:
            end = f"the phase deadline passed {-left:.0f} s ago: advancing without them"
        log.info(
            "round %d %s: waited %.0f s for trainer(s) %s (%d of %d votes); %s",
            status.round,
            status.phase.name.lower(),
            waited,
            ", ".join(missing) or "?",
            status.votes,
            status.quorum,
            end,
        )

    # -- PROPOSE ---------------------------------------------------------------------------

    def _propose_phase(self, round_: int) -> None:
        chosen = self.state.chosen_for(round_)
        if chosen is None:
            chosen = self._choose_models(round_)
            self.state.set_chosen(round_, chosen)
        for parent in chosen:
            if self._stop.is_set():
                return
            with self.clock.measure("chain"):
                if not self._still_in(round_, Phase.PROPOSE):
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
            # Training takes a while: a deadline may have ended the phase meanwhile, and
            # a proposal sent now would only revert on chain.
            if not self._still_in(round_, Phase.PROPOSE):
                log.warning(
                    "round %d: the propose phase ended before my update on %s was ready; "
                    "not proposing it",
                    round_,
                    short_id(parent),
                )
                return
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
        try:
            parent_weights = self.book.model(parent)
        except Unavailable as exc:
            log.error(
                "round %d: the weights of %s cannot be had (%s); not aggregating on it",
                round_,
                short_id(parent),
                exc,
            )
            return None
        with self.clock.measure("aggregation"):
            vectors = {uid: flatten_state(w) for uid, w in good.items()}
            start = flatten_state(parent_weights)
            selected = sorted(self.strategy.choose_updates(own, vectors, parent=start))
            weights = self.book.aggregate(selected, good)
        new_id = compute_model_id(parent, selected)
        if not self.dag.aggregated_by(self.me, parent, round_):
            # Only a model's first aggregator has its weights recorded: skip the upload
            # when the model already exists (anyone can recompute it from the updates).
            exists = new_id in self.dag.models
            cid = "" if exists else self._put(encode_weights(self.options.arch, weights))
            with self.clock.measure("chain"):
                if not self._still_in(round_, Phase.AGGREGATE):
                    log.warning(
                        "round %d: the aggregate phase ended before my aggregation on %s "
                        "was ready; not sending it",
                        round_,
                        short_id(parent),
                    )
                    return None
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
        performance on the trainer's own test split, without fine-tuning (§5.1).

        The round counts as played only when this trainer has a proposal in it."""
        if self._my_updates(round_):
            self.rounds_done += 1
        else:
            log.warning("round %d: sat out (no proposal of mine on chain)", round_)
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
