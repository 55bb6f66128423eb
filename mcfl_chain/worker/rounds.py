"""The trainer's round state machine (docs/PROTOCOL.md §11, paper §4, thesis §3.4–3.6).

The worker follows the contracts' events and, for the round and phase the chain is in,
does what is still missing — never more. A round is two transactions per trainer:

PROPOSE    score the candidate models on the local selection split, pick some
           (Algorithm 1), train each and store its weights; then ONE ``submitProposals``
           carries every update and the trainer's PROPOSE vote (an empty list: a bare
           vote). On the root (the network's first round) training starts from the
           strategy's starting weights: MCFL's own branch, IFCA's nearest cluster.
AGGREGATE  for the parents the strategy aggregates on (MCFL: the best-ranked one), keep
           the peers' updates that diverge little from its own (Algorithm 2) and FedAvg
           them, storing the weights of model ids that are new; then ONE
           ``submitAggregations`` carries every aggregation and the AGGREGATE vote.

A strategy may personalise a model (:meth:`Strategy.personalise`, FACADE: the trainer's
lowest-loss head): the trainer then trains from, and scores, its own version of every
model; the aggregate is still rebuilt from the updates alone. What a trainer reports
is the model it deploys (:meth:`Strategy.deployed`), by default its version of its
aggregation; Ditto's personal model and FedAvg-FT's fine-tuned one are trained off chain
for that, through the context's ``train`` view.

Two splits of the trainer's data play two roles: Algorithm 1 scores candidates on the
*selection* split (the validation split; the paper's "test dataset" of §4.2), and the
figure reported for a round is the deployed model's performance on the *test* split,
which no choice ever saw. The deployed model is the trainer's aggregation with the best
selection metric (with MCFL's ``aggregate_on="best"``, its only one).

Submissions and vote are one transaction, so ``statusOf(me).voted`` alone tells whether
this phase's work reached the chain: a worker killed at any point and restarted neither
proposes nor aggregates twice, and the models it chose and the updates it stored are
kept in its state so it does not train again. Right before each transaction it checks
that the phase it means is still open.

A phase ends when every member voted (its quorum: the trainers that voted in the phase
before) or, after its deadline, on any trainer's call. Deadlines are mandatory: past
one, a voter ends the phase with an empty call (the voter with the smallest trainer id
first; the next ones step in, one by one, if it does not). A member silent until then is
carried over into the next phase's quorum once (it may be restarting), so a silent
trainer costs the others two deadlines and is then out of the quorum. While it waits,
the worker says now and then whom it waits for.

A trainer out of the quorum (a newcomer, or one away for longer) races the members: a
phase may end before its transaction is mined. It tries its proposals once; after that,
and in an AGGREGATE phase (where it has nothing to aggregate), it votes with ``join``,
which counts in whatever phase it lands in, so the next phase waits for it (PROTOCOL
§4, the rejoin rule). Every submission is dry-run against the latest block first: a
transaction the chain says would revert is not sent.

In a cohort network (``Models.cohortBps`` below 10,000) a trainer takes part only in
the rounds it is drawn for (PROTOCOL §4, "Cohorts"): out of the round's cohort it
neither trains nor proposes, and waits; with no draw ahead (a newcomer, or one that
missed its round) it draws its next round with ``join``. It still ends a phase that is
over (past its deadline, or without members), in turn, so that no phase needs a member
to end.

A chain node or a store that stays unreachable past the retries, or a state directory
that cannot be written, stops the worker with :class:`WorkerHalted`: one line naming
the service.

An adversary (tests and benchmarks; :mod:`mcfl_chain.adversaries`) replaces the steps it
corrupts through its hooks, each called where the table of
:mod:`mcfl_chain.adversaries.base` says: ``training_data`` once when the worker is built
(the poisoned data is trained on; selection and test splits stay honest), ``trains`` and
``publish_update`` for every update, ``declared_samples`` before proposing (within the
network's cap), ``choose_models`` after Algorithm 1 and ``choose_updates`` after
Algorithm 2 (and the defence). An adaptive adversary, which crafts its update from the
round's honest ones, proposes last: when it asks for them, the worker waits until the
other members of the phase have proposed, or the deadline is near
(:meth:`Worker._await_round_proposals`). Without an adversary none of this runs.
"""

from __future__ import annotations

import contextlib
import copy
import gc
import hashlib
import logging
import math
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from mcfl_chain.adversaries import Adversary, CandidateView, Publication
from mcfl_chain.algorithms.calibration import CALIBRATION_SAMPLES, fit_class_bias
from mcfl_chain.algorithms.divergence import flatten_state
from mcfl_chain.algorithms.ewc import expected_fisher_diagonal, fisher_diagonal
from mcfl_chain.algorithms.own_evidence import chance_rate
from mcfl_chain.chain.client import (
    AggregationArg,
    ChainClient,
    ChainError,
    Phase,
    ProposalArg,
    TrainerStatus,
)
from mcfl_chain.chain.deployment import ALL_TRAINERS_BPS
from mcfl_chain.chain.errors import ChainUnusable, ProtocolLimitError
from mcfl_chain.chain.events import ChainEvent
from mcfl_chain.compute.local import Compute, LocalCompute
from mcfl_chain.dag.events import apply_events, event_record
from mcfl_chain.dag.graph import ROOT_ID, ModelDAG, ModelRecord, UpdateRecord, short_id
from mcfl_chain.dag.model_id import model_id as compute_model_id
from mcfl_chain.dag.quorum import voters_in
from mcfl_chain.dag.weights import StateDict, Unavailable, WeightsBook
from mcfl_chain.learning.codec import encode_weights
from mcfl_chain.learning.models import create_model, get_architecture
from mcfl_chain.learning.scenario import TrainerData
from mcfl_chain.learning.training import Evaluation, selection_metric
from mcfl_chain.storage.base import Storage
from mcfl_chain.strategies.base import (
    Candidate,
    ModelInfo,
    Strategy,
    StrategyContext,
    UpdateInfo,
)
from mcfl_chain.worker.blobs import Blobs
from mcfl_chain.worker.budget import nothing_left
from mcfl_chain.worker.deadlines import Deadlines
from mcfl_chain.worker.errors import WorkerHalted
from mcfl_chain.worker.reporting import Reporter
from mcfl_chain.worker.state import StateError, WorkerState
from mcfl_chain.worker.timing import RoundClock

log = logging.getLogger("mcfl_chain.worker")


FISHER_SAMPLES = 256
"""Training samples a strategy's Fisher information is estimated on, at most."""

ROUND_READ_MARGIN = 0.1
"""Share of the phase duration before the PROPOSE deadline at which an adversary that
reads the round's updates stops waiting for the last ones and proposes."""

ROUND_READ_POLL = 0.25
"""Seconds between two looks at the chain while an adversary waits for the round's
proposals (each look reads the new events)."""


@dataclass(frozen=True)
class TrainingOptions:
    epochs: int = 2
    batch_size: int = 32
    lr: float = 0.05
    momentum: float = 0.9
    seed: int = 0
    optimiser: str = "sgd"
    """The optimiser preset (:mod:`mcfl_chain.learning.optimisers`)."""
    sampling: str = "shuffle"
    """How an epoch draws its samples (:data:`~mcfl_chain.learning.training.SAMPLINGS`)."""


@dataclass
class WorkerOptions:
    """Everything that tunes one worker besides its chain, storage and data."""

    arch: str
    training: TrainingOptions = field(default_factory=TrainingOptions)
    rounds: int | None = None
    """Stop when the network reaches round F + ``rounds``, F being the first round in
    which this trainer took part according to the chain (a proposal, or a vote counted
    in the quorum, but not the empty one right after its ``join``: it only admits it;
    with none yet, the round it first saw open if it was a member then). A trainer out
    of the quorum counts nothing until it is admitted, which joining bounds to about
    two rounds. None: no such bound."""
    last_round: int | None = None
    """Stop once the network is past this round (an absolute bound, for late joiners).
    None: no such bound."""
    poll_interval: float = 0.1
    wait_log_interval: float = 10.0
    """Seconds between two log lines saying whom a waiting trainer waits for (0: never)."""
    advance_grace: float = 1.0
    """Seconds a voter lets pass after seeing a phase deadline past before ending the
    phase: submissions finished right at the deadline (trainers with the same work
    finish together) are mined first instead of reverting behind the end."""
    advance_stagger: float = 2.0
    """After a phase deadline, the voter of rank k (by trainer id) ends the phase only
    k × this many seconds after rank 0 would, if nobody did before."""
    metrics_path: Path | None = None
    labels: dict[str, Any] = field(default_factory=dict)
    """Written into every metrics line (trainer index, data group, tolerance...)."""


class _Flattened(Mapping[int, np.ndarray]):
    """Updates as flat vectors (:func:`flatten_state`), each made when first read: a
    strategy that keeps every update without measuring it reads none."""

    def __init__(self, weights: Mapping[int, StateDict]) -> None:
        self._weights = weights
        self._vectors: dict[int, np.ndarray] = {}

    def __getitem__(self, update_id: int) -> np.ndarray:
        vector = self._vectors.get(update_id)
        if vector is None:
            vector = self._vectors[update_id] = flatten_state(self._weights[update_id])
        return vector

    def __iter__(self) -> Iterator[int]:
        return iter(self._weights)

    def __len__(self) -> int:
        return len(self._weights)


@dataclass
class _Aggregation:
    """One aggregation as this trainer computes it (Algorithm 2 + its rule): on one
    parent, or a merge of several (``parents``, ascending; ``parent`` is the first)."""

    parent: bytes
    selected: list[int]
    proposals: int
    excluded: dict[int, str]
    model_id: bytes
    weights: StateDict
    rule: tuple[int, int] = (0, 0)
    """(code, parameter word) submitted with the ids; (0, 0): the network's default."""
    parents: tuple[bytes, ...] = ()


CALIBRATIONS_KEPT = 64
"""Label-mix shifts a trainer keeps (a few rounds' worth: about seven models a round)."""


def _weights_digest(weights: StateDict) -> bytes:
    """A digest of ``weights``' names, dtypes, shapes and values: equal for equal
    weights, whichever tensors hold them."""
    h = hashlib.blake2b(digest_size=32)
    for name, value in weights.items():
        tensor = value.detach().cpu().contiguous()
        h.update(f"{name}:{tensor.dtype}:{tuple(tensor.shape)};".encode())
        h.update(tensor.reshape(-1).view(torch.uint8).numpy().tobytes())
    return h.digest()


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
        compute: Compute | None = None,
    ) -> None:
        self.chain = chain
        self.compute: Compute = compute or LocalCompute()
        """Where models train and are scored: this process's CPU or GPU, or a host's
        batched computation shared with the trainers it hosts."""
        self.adversary: Adversary = adversary or Adversary()
        """What this trainer corrupts (tests, benchmarks): the base class, whose every
        hook is the honest behaviour, for an honest trainer."""
        self.honest = adversary is None
        self.storage = storage
        self.data = data
        """The trainer's data: its selection and test splits are what models are judged on."""
        self.train_data = data
        """What it trains on: ``data``, or the adversary's poisoned version of it."""
        self.train_data = self.adversary.training_data(data, np.random.default_rng(data.spec.seed))
        self.strategy = strategy
        self.options = options
        self.state = state
        self.dag = dag
        self.kind = get_architecture(options.arch).kind
        self._template = create_model(options.arch, seed=0)
        self._calibrated_biases: dict[int, weakref.ref[torch.Tensor]] = {}
        """The output biases :meth:`_calibrated` made, by id, while they live."""
        self._calibrations: OrderedDict[bytes, torch.Tensor] = OrderedDict()
        """The last output-bias shifts :meth:`_calibrated` fitted, by the digest of the
        weights they were fitted for."""
        if data.val_y.shape[0] > 0:
            self._select_x, self._select_y = data.val_x, data.val_y
        else:
            # No validation split (a custom dataset without one): select on the test split
            # and say that the figures reported are then not held out.
            log.warning(
                "this trainer has no validation split: models are selected on the test "
                "split, so the reported figures are not held out"
            )
            self._select_x, self._select_y = data.test_x, data.test_y
        self.clock = RoundClock()
        self.blobs = Blobs(storage, self.clock)
        self.book = WeightsBook(self.blobs.fetch, options.arch, dag, prefetch=self.blobs.prefetch)
        rule = strategy.aggregation_rule
        if rule is not None and self.book.rule.code != 0:
            # A robust rule replaces the whole aggregation: it would average FACADE's
            # heads over every update, which the architecture's rule must not.
            raise ValueError(
                f"defence {rule.name!r} replaces the network's aggregation "
                f"({self.book.rule.name}, named by architecture {options.arch!r}); "
                f"choose a selection rule instead"
            )
        self.me = chain.address
        self.deadlines = Deadlines(
            chain,
            dag,
            self.clock,
            self.sync,
            grace=options.advance_grace,
            stagger=options.advance_stagger,
            wait_log_interval=options.wait_log_interval,
        )
        """When to end a phase whose deadline passed, and the lines of a waiting trainer."""
        self.reporter = Reporter(
            chain, self.clock, self.blobs, options.metrics_path, options.labels
        )
        """Its metrics file: one line per round."""
        self.trainer_id = 0
        """This trainer's identity on chain (its trainer token), set when ``run`` starts."""
        self.rounds_done = 0
        self._aggregated: dict[int, list[dict[str, Any]]] = {}
        self._scored: dict[bytes, tuple[StateDict, Evaluation]] = {}
        """Its last round's aggregations scored on its selection split, by model id, with
        the very weights scored: the next round's candidates are often these models, and
        scoring the same tensors on the same split again gives the same figures."""
        self._stop = threading.Event()
        self._first_part: int | None = None
        self._raced = False
        self._cohorts: bool | None = None
        """Its last proposals came too late: out of the quorum, it joins instead."""
        self._looked = False
        """Whether it looked at the chain's round yet (``state.first_round``)."""
        self._samples: int | None = None
        self._awaited: int | None = None
        """The last round whose proposals an adaptive adversary waited for."""
        self._coalition_ids: set[int] | None = None
        """Trainer ids of this trainer and its adversary's coalition, once looked up."""
        self.collect_garbage: Callable[[], object] = gc.collect
        """Run after each phase (see ``_play``); a host shares one that runs at most
        once a second for all of its trainers."""
        self.heavy_work: AbstractContextManager[Any] = contextlib.nullcontext()
        """Held while planning aggregations (every update decoded and flattened): a host
        lets only a few of its trainers do that at once, to bound its memory."""
        self.event_records: Callable[[list[ChainEvent]], list[dict[str, Any]]] = _records_of
        """Turns the chain's events into the records the DAG and the state take; a host
        makes each event's record once for all of its trainers (records are never
        mutated once made)."""

    # -- plumbing ------------------------------------------------------------------------

    def stop(self) -> None:
        self._stop.set()

    def sync(self) -> None:
        """Apply the events of new blocks to the DAG and persist the position."""
        head = self.chain.block_number()
        if head <= self.state.last_block:
            return
        events = self.event_records(self.chain.events(self.state.last_block + 1, head))
        apply_events(self.dag, events)
        self.state.record(events, head)

    # -- what strategies may read (StrategyContext's views) --------------------------------

    def _model_info(self, model_id: bytes) -> ModelInfo:
        m = self.dag.models[model_id]
        return ModelInfo(
            m.model_id, m.parents, m.round, m.update_ids, m.popularity, tuple(m.aggregator_ids)
        )

    def _update_info(self, update_id: int) -> UpdateInfo:
        u = self.dag.updates[update_id]
        return UpdateInfo(u.update_id, u.trainer_id, u.parent, u.round)

    def _model_weights(self, model_id: bytes) -> StateDict:
        try:
            return self.book.model(model_id)
        except Unavailable as exc:
            raise LookupError(str(exc)) from exc

    def _update_vector(self, update_id: int) -> np.ndarray:
        try:
            return flatten_state(self.book.update(update_id))
        except Unavailable as exc:
            raise LookupError(str(exc)) from exc

    def _fisher_diagonal(self, weights: StateDict) -> dict[str, torch.Tensor]:
        # A sample of the (shuffled) training split bounds the cost: one per-sample
        # gradient pass per class and sample.
        x = self.train_data.train_x[:FISHER_SAMPLES]
        with self.clock.measure("training"):
            if self.kind == "classifier":
                return expected_fisher_diagonal(self._load(weights), x)
            return fisher_diagonal(self._load(weights), x, x, torch.nn.functional.mse_loss)

    def _calibrated(self, weights: StateDict, solver: str = "lbfgs") -> StateDict:
        """``weights`` with the output layer's bias shifted to this trainer's label mix
        (:func:`~mcfl_chain.algorithms.calibration.fit_class_bias` on its training
        split, by ``solver``); an autoencoder's unchanged. The other tensors are shared,
        not copied."""
        if self.kind != "classifier" or any(
            (ref := self._calibrated_biases.get(id(v))) is not None and ref() is v
            for v in weights.values()
        ):
            return weights  # already this trainer's: the fit would find 0 again
        x = self.train_data.train_x[:CALIBRATION_SAMPLES]
        y = self.train_data.train_y[:CALIBRATION_SAMPLES]
        if y.shape[0] == 0:
            return weights
        # The same weights give the same shift, and a trainer meets them again: its
        # aggregation's model among the next round's candidates, its own update scored
        # as an update and, kept alone, as a model. Hashing them costs far less than the
        # forward pass and the fit.
        key = _weights_digest(weights) + solver.encode()
        shift = self._calibrations.get(key)
        if shift is None:
            with self.clock.measure("evaluation"):
                net = self._load(weights)
                net.eval()
                with torch.inference_mode():
                    logits = net(x)
                shift = fit_class_bias(logits, y, solver)
            self._calibrations[key] = shift
            if len(self._calibrations) > CALIBRATIONS_KEPT:
                self._calibrations.popitem(last=False)
        else:
            self._calibrations.move_to_end(key)
        # The output layer's bias: the last 1-D tensor as wide as the output.
        name = next(
            (k for k in reversed(list(weights)) if tuple(weights[k].shape) == (shift.shape[0],)),
            None,
        )
        if name is None:
            raise ValueError(
                f"{self.options.arch}: no output bias of {shift.shape[0]} classes to calibrate"
            )
        bias = weights[name] + shift.to(weights[name])
        made_id = id(bias)

        def forget(_: object) -> None:
            self._calibrated_biases.pop(made_id, None)

        self._calibrated_biases[made_id] = weakref.ref(bias, forget)
        return {**weights, name: bias}

    def _train_off_chain(
        self, weights: StateDict, penalty: Any, epochs: int | None = None
    ) -> StateDict:
        """``weights`` trained as an update would be (an adversary that does not train
        keeps them), with another batch order: a model the strategy keeps off chain."""
        if not self.adversary.trains:
            return {k: v.clone() for k, v in weights.items()}
        round_ = -1 if self.strategy.round is None else self.strategy.round
        # 2**32 on the seed: not the batch order of the round's updates
        return self._train_many([weights], [penalty], round_, 2**32, epochs)[0]

    def _train_many(
        self,
        starts: list[StateDict],
        penalties: list[Any],
        round_: int,
        seed_offset: int = 0,
        epochs: int | None = None,
    ) -> list[StateDict]:
        """``starts`` trained with the network's settings on this trainer's training
        split, with the round's batch order (shifted by ``seed_offset``)."""
        opts = self.options.training
        with self.clock.measure("training"):
            return self.compute.train_many(
                self.options.arch,
                starts,
                self.train_data,
                epochs=opts.epochs if epochs is None else epochs,
                batch_size=opts.batch_size,
                lr=opts.lr,
                momentum=opts.momentum,
                seed=opts.seed * 1_000_003 + round_ + seed_offset,
                penalties=penalties,
                optimiser=opts.optimiser,
                sampling=opts.sampling,
            )

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
            # Rounds report their own transactions' gas; the one-off registration is not one.
            self.reporter.start()
            self.trainer_id = self.deadlines.trainer_id = self.chain.trainer_id()
            log.info("trainer %d (%s)", self.trainer_id, self.me)
            # The history first: past participation sets where --rounds counts from.
            self.sync()
            status = self.chain.status()
        self.strategy.bind(
            StrategyContext(
                trainer_id=self.trainer_id,
                seed=network_seed(self.dag.genesis_cid),
                initial_weights=lambda seed: create_model(self.options.arch, seed).state_dict(),
                validation_loss=lambda weights: self._evaluate(weights).loss,
                validation_metric=lambda weights: selection_metric(
                    self._evaluate(weights), self.kind
                ),
                model_info=self._model_info,
                update_info=self._update_info,
                models_of_round=lambda r: [m.model_id for m in self.dag.models_of_round(r)],
                model_weights=self._model_weights,
                update_vector=self._update_vector,
                fisher_diagonal=self._fisher_diagonal,
                train=self._train_off_chain,
                calibrate=self._calibrated,
                chance_metric=(
                    chance_rate(self._select_y.tolist()) if self.kind == "classifier" else None
                ),
            )
        )
        self._report_interrupted_round()
        acted: tuple[int, Phase] | None = None
        while not self._stop.is_set():
            if status.started and self.state.first_round is None and not self._looked:
                # A member from its first look counts its rounds from there even if it
                # misses every deadline; one out of the quorum from its admission.
                self._looked = True
                if status.member or self._in_cohorts():
                    self.state.first_round = status.round
                    self.state.save()
            if status.started and self._budget_spent(status.round):
                if self.rounds_done == 0:  # e.g. a restart after the last round: say why
                    first = self._first_round_taken_part()
                    first = self.state.first_round if first is None else first
                    o = self.options
                    log.warning("%s", nothing_left(status.round, o.rounds, o.last_round, first))
                break
            sitting_out = status.started and not status.voted and self._sits_out(status)
            if status.started and not status.voted and not sitting_out:
                if acted == (status.round, status.phase):
                    # The transaction did not go through and the phase did not move: say
                    # so and retry calmly rather than spin.
                    log.warning(
                        "round %d: still no vote recorded in the %s phase; retrying",
                        status.round,
                        status.phase.name.lower(),
                    )
                    self._stop.wait(1.0)
                acted = (status.round, status.phase)
                with self.clock.measure("chain"):
                    self.sync()
                if status.member:
                    self._raced = False
                if not status.member and (
                    status.phase is Phase.AGGREGATE or self._raced or self._in_cohorts()
                ):
                    self._join(status)
                elif status.phase is Phase.PROPOSE:
                    self._propose_phase(status.round)
                else:
                    self._aggregate_phase(status.round)
                # multiformats' type checks raise and catch exceptions whose tracebacks
                # form reference cycles; a finished frame in such a cycle keeps its
                # callers' frames, and so a phase's decoded weights, alive until a full
                # collection, which torch's large heap makes rare: 38 FedAvg trainers
                # were killed for memory by round 18. One collection per phase returns
                # it (milliseconds once the start-up objects are frozen: cli.worker).
                self.collect_garbage()
            elif self.deadlines.may_end(status, without_members=sitting_out):
                self.deadlines.end_phase(status.round, status.phase)
            else:
                with self.clock.measure("waiting"):
                    self.chain.wait_for_news(status, self.options.poll_interval, self._stop)
                    status = self.chain.status()
                self.deadlines.say_whom_it_waits_for(status)
                continue
            with self.clock.measure("chain"):
                status = self.chain.status()
        return self.rounds_done

    def _in_cohorts(self) -> bool:
        """Whether the network draws a cohort each round (read once)."""
        if self._cohorts is None:
            self._cohorts = self.chain.cohort_bps() < ALL_TRAINERS_BPS
        return self._cohorts

    def _sits_out(self, status: TrainerStatus) -> bool:
        """Out of this round's cohort with its own round still ahead: nothing to train,
        propose or vote now (PROTOCOL §4, "Cohorts"); the chain refuses it anyway."""
        if status.member or not self._in_cohorts():
            return False
        drawn = self.chain.drawn_round()
        return drawn is not None and drawn > status.round

    def _still_in(self, round_: int, phase: Phase) -> bool:
        """Whether the chain is still in (round, phase): checked right before a
        transaction, since a deadline may have moved the network on while this trainer
        worked."""
        status = self.chain.status()
        return (status.round, status.phase) == (round_, phase)

    def _first_round_taken_part(self) -> int | None:
        """The first round in which this trainer proposed or cast a counted vote, as far
        as the events synced tell (the whole history is synced at start). A vote counted
        in an AGGREGATE phase does not count when the trainer's PROPOSE vote of that
        round was not (it joined then: it had no update to aggregate)."""
        if self._first_part is None:
            rounds = [u.round for u in self.dag.updates.values() if u.trainer_id == self.trainer_id]
            mine = [v for v in self.dag.votes if int(v.get("trainer_id", 0)) == self.trainer_id]
            joined = {
                int(v["round"])
                for v in mine
                if v.get("phase") == int(Phase.PROPOSE) and not v.get("counted")
            }
            rounds += [
                int(v["round"])
                for v in mine
                if v.get("counted")
                and not (v.get("phase") == int(Phase.AGGREGATE) and int(v["round"]) in joined)
            ]
            self._first_part = min(rounds, default=None)
        return self._first_part

    def _budget_spent(self, round_: int) -> bool:
        """Whether the network's round ``round_`` is past this trainer's budget.

        ``--rounds`` counts from the first round this trainer took part in according to
        the chain, so a worker rebuilt from the chain, or one that missed the deadline of
        its first proposals, stops with the network that started with it (a member
        when it first looked that never got a vote in counts from that round); one out
        of the quorum counts from its admission (watching rounds is not playing them).
        ``--last-round`` is absolute. In a cohort network it counts the network's rounds
        from the first one it saw, drawn for it or not, so that every trainer of a run
        stops with the network.
        """
        last = self.options.last_round
        if last is not None and round_ > last:
            return True
        budget = self.options.rounds
        if budget is None:
            return False
        first = None if self._in_cohorts() else self._first_round_taken_part()
        if first is None:
            first = self.state.first_round
        return first is not None and round_ >= first + budget

    # -- PROPOSE ---------------------------------------------------------------------------

    def _propose_phase(self, round_: int) -> None:
        """Train every chosen model, then send all updates and the vote in one call."""
        self.strategy.begin_round(round_)
        chosen = self.state.chosen_for(round_)
        if chosen is None:
            chosen = self._choose_models(round_)
            self.state.set_chosen(round_, chosen)
        samples = self._declared_samples()
        if self._stop.is_set():
            return
        with self.clock.measure("chain"):
            # Choosing took a while: a deadline may have ended the phase meanwhile.
            if not self._still_in(round_, Phase.PROPOSE):
                self._too_late(round_, chosen)
                return
        cids = self._trained_updates(round_, chosen)
        proposals = [
            ProposalArg(parent=parent, cid=cids[parent], num_samples=samples)
            for parent in chosen
            if parent in cids
        ]
        if self._stop.is_set():
            return
        with self.clock.measure("chain"):
            # Training takes a while: a deadline may have ended the phase meanwhile.
            if not self._still_in(round_, Phase.PROPOSE):
                self._too_late(round_, chosen)
                return
            self._submit_proposals(round_, proposals)

    def _too_late(self, round_: int, chosen: list[bytes]) -> None:
        self._raced = True
        log.warning(
            "round %d: the propose phase ended before my update(s) on %s were ready; "
            "not proposing them",
            round_,
            ", ".join(short_id(p) for p in chosen) or "nothing",
        )

    def _submit_proposals(self, round_: int, proposals: list[ProposalArg]) -> None:
        """One ``submitProposals``: the updates and the vote (a bare vote when empty)."""
        try:
            ids = self.chain.submit_proposals(proposals)
        except ProtocolLimitError as exc:
            log.error(
                "round %d: my proposals break a network limit (%s); voting without them",
                round_,
                exc,
            )
            self._vote_only(Phase.PROPOSE)
            return
        except ChainError as exc:
            log.warning("round %d: proposals refused: %s", round_, exc)
            return
        if not proposals:
            log.info("round %d: voted without a proposal", round_)
        for proposal in proposals:
            log.info(
                "round %d: proposed update %s on %s (%d samples, %s)",
                round_,
                str(ids.get(proposal.parent, "?"))[:10],
                short_id(proposal.parent),
                proposal.num_samples,
                proposal.cid,
            )

    def _join(self, status: TrainerStatus) -> None:
        """Out of this phase's quorum: vote with ``join``, which counts in whatever phase
        is open when it is mined, so the next phase waits for this trainer. In an
        AGGREGATE phase it has no update to aggregate anyway; in a PROPOSE phase it
        comes here once its proposals came too late."""
        where = f"round {status.round} {status.phase.name.lower()}"
        with self.clock.measure("chain"):
            try:
                landed = self.chain.join()
            except ChainError as exc:
                log.warning("%s: joining the quorum not done: %s", where, exc)
                return
        if landed is not None:
            log.info(
                "%s: not a member of this phase's quorum: joined with a bare vote (in round "
                "%d's %s phase); the next phase waits for this trainer",
                where,
                landed[0],
                landed[1].name.lower(),
            )
        elif self._in_cohorts() and (drawn := self.chain.drawn_round()) is not None:
            log.info("%s: out of this round's cohort: drawn for round %d", where, drawn)
            return  # no vote, no round of its own to report
        if status.phase is Phase.AGGREGATE:
            self._report(status.round)

    def _vote_only(self, phase: Phase) -> None:
        """Vote with nothing, so that the others need not wait for the deadline."""
        try:
            if phase is Phase.PROPOSE:
                self.chain.submit_proposals([])
            else:
                self.chain.submit_aggregations([])
        except ChainError as exc:
            log.warning("%s vote refused: %s", phase.name.lower(), exc)

    def _declared_samples(self) -> int:
        """The training samples behind each update (or the adversary's claim), within
        the network's cap."""
        if self._samples is None:
            honest = len(self.data.train_y)
            cap = self.chain.max_samples()
            declared = self.adversary.declared_samples(honest, cap)
            if declared != honest:
                log.info(
                    "adversary %s: declaring %d samples for my %d",
                    self.adversary.name,
                    declared,
                    honest,
                )
            if declared > cap:
                log.warning(
                    "this trainer has %d training samples; the network weighs an update "
                    "by at most %d (maxSamples): declaring %d",
                    declared,
                    cap,
                    cap,
                )
            self._samples = max(1, min(declared, cap))
        return self._samples

    def _choose_models(self, round_: int, *, to_train: bool = True) -> list[bytes]:
        """Paper Algorithm 1 over the round's candidates, scored on the selection split
        (then the adversary's choice, if any); ``to_train`` False when a worker that lost
        its state only ranks again the parents it trained, to aggregate on them."""
        candidates: list[Candidate[bytes]] = []
        records: dict[bytes, ModelRecord] = {}
        models = list(self.dag.candidates(round_))
        offered = {m.model_id for m in models}
        models += [
            self.dag.models[key]
            for key in self.strategy.carried_models(round_)
            if key not in offered and key in self.dag.models
        ]
        if self.strategy.own_lineage_only and self.honest:
            # Peers' models would be fetched (untrusted blobs) only to be passed over.
            mine = [m for m in models if self.trainer_id in m.aggregator_ids]
            models = mine or models
        usable: list[ModelRecord] = []
        weights: list[StateDict] = []
        self.book.prefetch_models(m.model_id for m in models)
        for model in models:
            try:
                weights.append(self.strategy.personalise(self.book.model(model.model_id)))
            except Unavailable as exc:
                log.warning(
                    "round %d: candidate %s skipped: %s", round_, short_id(model.model_id), exc
                )
                continue
            usable.append(model)
        for model, result in zip(usable, self._scores(usable, weights), strict=True):
            metric = selection_metric(result, self.kind)
            if not math.isfinite(metric):
                log.warning(
                    "round %d: candidate %s skipped: non-finite metric %s",
                    round_,
                    short_id(model.model_id),
                    metric,
                )
                continue
            candidates.append(
                Candidate(
                    model.model_id,
                    metric,
                    max(1, model.popularity),
                    loss=result.loss,
                    mine=self.trainer_id in model.aggregator_ids,
                )
            )
            records[model.model_id] = model
        if not candidates:
            log.error("round %d: no candidate model is usable; sitting this round out", round_)
            return []
        chosen = list(self.strategy.choose_models(candidates))
        chosen = self._adversarys_models(round_, candidates, records, chosen)
        cap = self.chain.limits().max_proposals
        if len(chosen) > cap:
            log.warning(
                "round %d: %d models chosen, one transaction carries at most %d "
                "proposals (MAX_PROPOSALS): training the first %d",
                round_,
                len(chosen),
                cap,
                cap,
            )
            chosen = chosen[:cap]
        log.info(
            "round %d: %d candidates, training %s"
            if to_train
            else "round %d: %d candidates ranked again to aggregate on (the state had lost "
            "this round's choice), nothing trained: %s",
            round_,
            len(candidates),
            ", ".join(short_id(m) for m in chosen),
        )
        return chosen

    def _adversarys_models(
        self,
        round_: int,
        candidates: list[Candidate[bytes]],
        records: dict[bytes, ModelRecord],
        honest: list[bytes],
    ) -> list[bytes]:
        """The adversary's ``choose_models`` given Algorithm 1's choice, with what the
        chain shows of each scored candidate; only candidates are kept."""
        views = [
            CandidateView(
                key=c.key,
                metric=c.metric,
                popularity=records[c.key].popularity,
                proposers=self._proposers(records[c.key]),
            )
            for c in candidates
        ]
        chosen = self.adversary.choose_models(views, honest)
        known = {c.key for c in candidates}
        kept = [key for key in dict.fromkeys(chosen) if key in known]
        if len(kept) != len(chosen):
            log.warning(
                "round %d: adversary %s chose models that are not candidates; ignoring them",
                round_,
                self.adversary.name,
            )
        if kept != honest:
            log.info(
                "round %d: adversary %s trains %s instead of %s",
                round_,
                self.adversary.name,
                ", ".join(short_id(m) for m in kept) or "nothing",
                ", ".join(short_id(m) for m in honest) or "nothing",
            )
        return kept

    def _proposers(self, model: ModelRecord) -> frozenset[str]:
        """Lower-case addresses of the proposers of a model's updates (none for the root)."""
        return frozenset(
            self.dag.updates[uid].proposer.lower()
            for uid in model.update_ids
            if uid in self.dag.updates
        )

    def _evaluate(self, weights: StateDict, split: str = "selection") -> Evaluation:
        """The model's performance on the selection split (as the strategy scores it:
        :meth:`~mcfl_chain.strategies.base.Strategy.scored`), or on the held-out test
        split."""
        if split == "selection":
            weights = self.strategy.scored(weights)
        x, y = (
            (self._select_x, self._select_y)
            if split == "selection"
            else (self.data.test_x, self.data.test_y)
        )
        with self.clock.measure("evaluation"):
            return self.compute.evaluate(self.options.arch, weights, x, y, self.kind)

    def _scores(self, models: list[ModelRecord], weights: list[StateDict]) -> list[Evaluation]:
        """Algorithm 1's scores of ``models`` (their ``weights`` as this trainer sees them):
        those it scored after aggregating them, when the weights are the very tensors it
        scored; the others in one request, which a batching compute runs as one
        computation."""
        known: dict[int, Evaluation] = {}
        for i, (model, w) in enumerate(zip(models, weights, strict=True)):
            kept = self._scored.get(model.model_id)
            if kept is not None and kept[0] is w:
                known[i] = kept[1]
        fresh = iter(self._evaluate_many([w for i, w in enumerate(weights) if i not in known]))
        return [known[i] if i in known else next(fresh) for i in range(len(weights))]

    def _evaluate_many(self, weights: list[StateDict]) -> list[Evaluation]:
        """Each model's performance on the selection split (Algorithm 1's scores)."""
        if not weights:
            return []
        weights = [self.strategy.scored(w) for w in weights]
        with self.clock.measure("evaluation"):
            return self.compute.evaluate_many(
                self.options.arch, weights, self._select_x, self._select_y, self.kind
            )

    def _load(self, weights: dict[str, torch.Tensor]) -> torch.nn.Module:
        net = copy.deepcopy(self._template)
        net.load_state_dict(weights)
        return net

    def _trained_update(self, round_: int, parent: bytes) -> str | None:
        """The CID of this round's update on ``parent`` (:meth:`_trained_updates`);
        None when the parent is unusable."""
        return self._trained_updates(round_, [parent]).get(parent)

    def _trained_updates(self, round_: int, parents: list[bytes]) -> dict[bytes, str]:
        """The CIDs of this round's updates on ``parents``: stored earlier (a restart
        does not train again), or trained now, all of them in one request to the compute
        (which a host batches with its other trainers'), then stored. A parent whose
        weights cannot be had is left out, with a logged reason."""
        cids: dict[bytes, str] = {}
        starts: dict[bytes, StateDict] = {}
        for parent in parents:
            cid = self.state.uploaded_cid(round_, parent)
            if cid is not None:
                cids[parent] = cid
                continue
            try:
                start = self.book.model(parent)
            except Unavailable as exc:
                log.warning("round %d: cannot train %s: %s", round_, short_id(parent), exc)
                continue
            if parent == ROOT_ID:
                start = self.strategy.starting_weights() or start
            starts[parent] = self.strategy.personalise(start)
        if not starts:
            return cids
        if self.adversary.trains:
            penalties = [self.strategy.regulariser(parent) for parent in starts]
            for parent, penalty in zip(starts, penalties, strict=True):
                if penalty is not None:
                    log.info(
                        "round %d: training %s with the strategy's penalty",
                        round_,
                        short_id(parent),
                    )
            trained = self._train_many(list(starts.values()), penalties, round_)
        else:
            for parent in starts:
                log.info(
                    "round %d: adversary %s does not train %s",
                    round_,
                    self.adversary.name,
                    short_id(parent),
                )
            trained = [{k: v.clone() for k, v in start.items()} for start in starts.values()]
        for (parent, start), weights in zip(starts.items(), trained, strict=True):
            cid = self._publish_update(round_, parent, weights, start)
            self.state.set_uploaded(round_, parent, cid)
            cids[parent] = cid
        return cids

    def _publish_update(
        self, round_: int, parent: bytes, weights: StateDict, parent_weights: StateDict
    ) -> str:
        return self.adversary.publish_update(
            Publication(
                weights=weights,
                parent_weights=parent_weights,
                trainer=self.me,
                encode=lambda state: encode_weights(self.options.arch, state),
                put=self.blobs.put,
                peer_updates=lambda: self._peer_updates(round_ - 1),
                round_updates=lambda: self._round_updates(round_, parent),
            )
        )

    def _round_updates(self, round_: int, parent: bytes) -> dict[int, StateDict]:
        """The usable updates proposed on ``parent`` in ``round_`` by trainers other than
        this one and its adversary's coalition, once they are on chain
        (:meth:`_await_round_proposals`), for an adversary that crafts its update from
        them; fetched from storage like any peer update."""
        self._await_round_proposals(round_)
        with self.clock.measure("chain"):
            self.sync()
        ids = sorted(
            u.update_id
            for u in self.dag.updates_for(parent, round_)
            if u.trainer_id != self.trainer_id
            and u.proposer.lower() not in self.adversary.coalition
        )
        good, bad = self.book.usable_updates(ids)
        log.info(
            "round %d: adversary %s read %d update(s) of the round on %s (%d unusable)",
            round_,
            self.adversary.name,
            len(good),
            short_id(parent),
            len(bad),
        )
        return good

    def _await_round_proposals(self, round_: int) -> None:
        """Wait until every member of ``round_``'s PROPOSE phase outside this trainer's
        coalition has voted (its proposals, sent in the same transaction, are then on
        chain), or until the phase is nearly over: :data:`ROUND_READ_MARGIN` of its
        duration before its deadline, so that this trainer's own proposals still make
        it. Once a round: later calls return at once."""
        if self._awaited == round_:
            return
        self._awaited = round_
        ours = self._coalition_ids
        if ours is None:
            with self.clock.measure("chain"):
                ids = {self.chain.trainer_id(a) for a in sorted(self.adversary.coalition)}
            ours = self._coalition_ids = (ids | {self.trainer_id}) - {0}
        margin = ROUND_READ_MARGIN * self.chain.deployment.phase_duration
        log.info(
            "round %d: adversary %s waits for the other trainers' proposals before proposing",
            round_,
            self.adversary.name,
        )
        with self.clock.measure("waiting"):
            while not self._stop.is_set():
                status = self.chain.status()
                if (status.round, status.phase) != (round_, Phase.PROPOSE):
                    return  # too late anyway: the proposals will not be sent
                self.sync()
                voted = voters_in(self.dag, round_, Phase.PROPOSE)
                members = self.deadlines.members(round_, Phase.PROPOSE, status.quorum)
                waiting = members - voted - ours
                if not waiting:
                    return
                if time.time() >= status.deadline - margin:
                    log.warning(
                        "round %d: the propose deadline is near; reading the round's "
                        "updates without those of trainer(s) %s",
                        round_,
                        ", ".join(map(str, sorted(waiting))),
                    )
                    return
                self._stop.wait(max(self.options.poll_interval, ROUND_READ_POLL))

    def _peer_updates(self, round_: int) -> dict[int, StateDict]:
        """The usable updates other trainers proposed in ``round_`` (none before round 0),
        for an adversary that copies a peer."""
        if round_ < 0:
            return {}
        ids = sorted(
            u.update_id
            for u in self.dag.updates.values()
            if u.round == round_ and u.trainer_id != self.trainer_id
        )
        good, _ = self.book.usable_updates(ids)
        return good

    # -- AGGREGATE -----------------------------------------------------------------------

    def _aggregate_phase(self, round_: int) -> None:
        """Aggregate on the parents the strategy picks among those trained (one
        aggregation per parent, or the merges it asks for), then send all of it and the
        vote in one call."""
        self.strategy.begin_round(round_)
        self._scored = {}
        self.book.forget_updates_before(round_)
        plans = []
        with self.heavy_work:
            for owns in self._aggregations_to_make(round_):
                if self._stop.is_set():
                    return
                plan = self._plan_aggregation(
                    round_, tuple(u.parent for u in owns), tuple(u.update_id for u in owns)
                )
                if plan is not None:
                    plans.append(plan)
        if self._stop.is_set():
            return
        # Only a model's first aggregator has its weights recorded: upload them for new
        # ids only (anyone can recompute a model from its updates anyway).
        with self.clock.measure("chain"):
            self.sync()
        args = [
            AggregationArg(
                parents=plan.parents,
                update_ids=tuple(plan.selected),
                weights_cid=None
                if plan.model_id in self.dag.models
                else self.blobs.put(encode_weights(self.options.arch, plan.weights)),
                rule=plan.rule[0],
                rule_parameter=plan.rule[1],
            )
            for plan in plans
        ]
        with self.clock.measure("chain"):
            if not self._still_in(round_, Phase.AGGREGATE):
                log.warning(
                    "round %d: the aggregate phase ended before my aggregation(s) were "
                    "ready; not sending them",
                    round_,
                )
                plans = []
            elif not self._submit_aggregations(round_, plans, args):
                plans = []
        self._aggregated[round_] = [self._evaluated(round_, plan) for plan in plans]
        self._report(round_)

    def _submit_aggregations(
        self, round_: int, plans: list[_Aggregation], args: list[AggregationArg]
    ) -> bool:
        """One ``submitAggregations``: the aggregations and the vote; whether they went in."""
        try:
            model_ids = self.chain.submit_aggregations(args)
        except ProtocolLimitError as exc:
            log.error(
                "round %d: my aggregations break a network limit (%s); voting without them",
                round_,
                exc,
            )
            self._vote_only(Phase.AGGREGATE)
            return False
        except ChainError as exc:
            log.warning("round %d: aggregations refused: %s", round_, exc)
            return False
        for plan, on_chain in zip(plans, model_ids, strict=False):
            if on_chain != plan.model_id:  # the formulas disagree: a bug, say it loudly
                log.error(
                    "round %d: the chain recorded model %s for my aggregation on %s, "
                    "computed here as %s",
                    round_,
                    short_id(on_chain),
                    short_id(plan.parent),
                    short_id(plan.model_id),
                )
                plan.model_id = on_chain
        if not plans:
            log.info("round %d: voted without an aggregation", round_)
        return True

    def _updates_to_aggregate(self, round_: int) -> list[UpdateRecord]:
        """This trainer's updates of the round on the parents its strategy aggregates on.

        The parents are ranked as Algorithm 1 ranked them; a worker restarted without its
        state ranks them again (same candidates, same data: the same ranking)."""
        mine = {u.parent: u for u in self._my_updates(round_)}
        if not mine:
            return []
        chosen = self.state.chosen_for(round_)
        if chosen is None or set(mine) - set(chosen):
            chosen = self._choose_models(round_, to_train=False)
        ranked = [parent for parent in chosen if parent in mine]
        ranked += sorted(set(mine) - set(ranked))
        updates = {parent: mine[parent].update_id for parent in ranked}
        parents = self.strategy.aggregate_on(ranked, updates)
        if parents and ranked[0] not in parents:  # e.g. MCFL-plus's trained-update guard
            log.info(
                "round %d: aggregating on %s, not on the best-ranked %s (%s judged the "
                "updates trained from them)",
                round_,
                ", ".join(short_id(p) for p in parents),
                short_id(ranked[0]),
                self.strategy.name,
            )
        return [mine[parent] for parent in parents]

    def _aggregations_to_make(self, round_: int) -> list[list[UpdateRecord]]:
        """This trainer's own updates of the round, grouped as the strategy aggregates
        them: one list per aggregation, several parents for a merge."""
        owns = {u.parent: u for u in self._updates_to_aggregate(round_)}
        groups = self.strategy.merges(list(owns))
        return [[owns[parent] for parent in group if parent in owns] for group in groups]

    def _my_updates(self, round_: int) -> list[UpdateRecord]:
        return sorted(
            (
                u
                for u in self.dag.updates.values()
                if u.round == round_ and u.trainer_id == self.trainer_id
            ),
            key=lambda u: u.update_id,
        )

    def _plan_aggregation(
        self, round_: int, parents: tuple[bytes, ...], owns: tuple[int, ...]
    ) -> _Aggregation | None:
        """Paper Algorithm 2, then the aggregation (the trainer's aggregation-rule defence,
        whose code and parameter go to the chain, or the network's default rule) for one
        parent, or for a merge of several (the updates on all of them; this trainer's own
        on each is kept, as the contract demands); None when it cannot be done."""
        order = sorted(range(len(parents)), key=lambda i: parents[i])
        parents, owns = tuple(parents[i] for i in order), tuple(owns[i] for i in order)
        parent, own = parents[0], owns[0]
        proposals = [u.update_id for p in parents for u in self.dag.updates_for(p, round_)]
        good, bad = self.book.usable_updates(proposals)
        for uid, reason in bad.items():
            log.warning("round %d: update %s excluded: %s", round_, str(uid)[:10], reason)
        for mine, on in zip(owns, parents, strict=True):
            if mine not in good:
                log.error(
                    "round %d: my own update on %s is unusable (%s); not aggregating",
                    round_,
                    short_id(on),
                    bad.get(mine),
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
            vectors = _Flattened(good)  # FedAvg's selection never reads one
            start = flatten_state(parent_weights)
            selected = sorted(
                set(
                    self.strategy.select_updates(
                        own, vectors, parent=start, first_round=parent == ROOT_ID
                    )
                )
                | set(owns)
            )
            selected = self._adversarys_updates(round_, own, selected, good)
            rule = self.strategy.aggregation_rule
            code = (rule.code, rule.parameter) if rule is not None else (0, 0)
            model_id = compute_model_id(parents, selected, *code)
            try:
                weights = self.book.aggregated(
                    model_id, parents, selected, good, rule, parent_weights
                )
            except ValueError as exc:
                log.error(
                    "round %d: %s refuses the updates on %s (%s); not aggregating on it",
                    round_,
                    (rule or self.book.rule).name,
                    short_id(parent),
                    exc,
                )
                return None
        return _Aggregation(
            parent=parent,
            selected=selected,
            proposals=len(proposals),
            excluded=bad,
            model_id=model_id,
            weights=weights,
            rule=code,
            parents=parents,
        )

    def _adversarys_updates(
        self, round_: int, own: int, honest: list[int], usable: Mapping[int, StateDict]
    ) -> list[int]:
        """The adversary's ``choose_updates`` given the strategy's choice, with every
        usable update's proposer; kept to usable ids, own included, ascending."""
        proposers = {uid: self.dag.updates[uid].proposer for uid in usable}
        chosen = self.adversary.choose_updates(own, honest, proposers)
        kept = sorted({uid for uid in chosen if uid in usable} | {own})
        if kept != sorted(set(chosen)):
            log.warning(
                "round %d: adversary %s chose unusable updates or left out its own; "
                "aggregating %d usable ones with its own",
                round_,
                self.adversary.name,
                len(kept),
            )
        if kept != honest:
            log.info(
                "round %d: adversary %s aggregates %d updates instead of %d",
                round_,
                self.adversary.name,
                len(kept),
                len(honest),
            )
        return kept

    def _evaluated(self, round_: int, plan: _Aggregation) -> dict[str, Any]:
        """One aggregation's model, as this trainer deploys it, on its selection and test
        splits."""
        personal = self.strategy.personalise(plan.weights)
        mine = self.strategy.deployed(personal)
        scored = self._evaluate(mine)
        if mine is plan.weights:
            self._scored[plan.model_id] = (mine, scored)
        selection = selection_metric(scored, self.kind)
        result = self._evaluate(mine, split="test")
        log.info(
            "round %d: aggregated %d/%d updates on %s -> model %s (%s)",
            round_,
            len(plan.selected),
            plan.proposals,
            short_id(plan.parent),
            short_id(plan.model_id),
            _fmt(result),
        )
        merge = {"parents": ["0x" + p.hex() for p in plan.parents]} if len(plan.parents) > 1 else {}
        return {
            "parent": "0x" + plan.parent.hex(),
            **merge,
            "model": "0x" + plan.model_id.hex(),
            "selected": len(plan.selected),
            "proposals": plan.proposals,
            "excluded": {str(k): v for k, v in plan.excluded.items()},
            "selection_metric": selection if math.isfinite(selection) else None,
            "accuracy": result.accuracy,
            "loss": result.loss,
            "personal": self.strategy.personal_labels(personal),
        }

    def _report_interrupted_round(self) -> None:
        """Write the metrics of a round whose aggregations reached the chain but whose
        line was not written (the worker was stopped in between).

        Only the last round with this trainer's AGGREGATE vote is looked at, and only
        if neither the state nor the metrics file has it (a state rebuilt from the chain
        must not write a round twice). The models are those the chain recorded.
        """
        rounds = [
            int(v["round"])
            for v in self.dag.votes
            if int(v.get("trainer_id", 0)) == self.trainer_id
            and v.get("phase") == int(Phase.AGGREGATE)
        ]
        if not rounds:
            return
        round_ = max(rounds)
        if round_ in self.state.reported or self.reporter.written(round_):
            return
        self.strategy.begin_round(round_)
        on_chain = {
            parent: model.model_id
            for model in self.dag.models_of_round(round_)
            if self.trainer_id in model.aggregator_ids
            for parent in model.parents
        }
        results = []
        mine = {u.parent: u.update_id for u in self._my_updates(round_)}
        done: set[bytes] = set()
        for own in self._my_updates(round_):
            model_id = on_chain.get(own.parent)
            if model_id is None or model_id in done:
                continue
            done.add(model_id)
            parents = tuple(p for p in self.dag.models[model_id].parents if p in mine)
            plan = self._plan_aggregation(round_, parents, tuple(mine[p] for p in parents))
            if plan is None:
                continue
            if plan.model_id != model_id:
                # Recomputed otherwise now (a blob gone since?): report the chain's model.
                try:
                    plan.weights, plan.model_id = self.book.model(model_id), model_id
                except Unavailable as exc:
                    log.warning("round %d: model %s: %s", round_, short_id(model_id), exc)
                    continue
            results.append(self._evaluated(round_, plan))
        log.info("round %d: my aggregations were on chain before the restart", round_)
        self._aggregated[round_] = results
        self._report(round_)

    # -- metrics ---------------------------------------------------------------------------

    def _report(self, round_: int) -> None:
        """Write the round's metrics line (:mod:`mcfl_chain.worker.reporting`), once.

        The round counts as played only when this trainer has a proposal in it."""
        if round_ in self.state.reported:
            # Aggregations sent again after a reorg dropped them: counted and written once.
            return
        if self._my_updates(round_):
            self.rounds_done += 1
        else:
            log.warning("round %d: sat out (no proposal of mine on chain)", round_)
        self.reporter.write(
            round_,
            self.trainer_id,
            self._aggregated.pop(round_, []),
            self.state.chosen_for(round_) or [],
        )
        self.state.mark_reported(round_)


def _records_of(events: list[ChainEvent]) -> list[dict[str, Any]]:
    """Each event's record (:func:`~mcfl_chain.dag.events.event_record`)."""
    return [event_record(e) for e in events]


def network_seed(genesis_cid: str | None) -> int:
    """A seed every trainer of the network derives alike: from the root's CID."""
    digest = hashlib.sha256((genesis_cid or "").encode()).digest()
    return int.from_bytes(digest[:4], "big")


def _fmt(result: Any) -> str:
    if result.accuracy is not None:
        return f"accuracy {result.accuracy:.3f}, loss {result.loss:.3f}"
    return f"mse {result.loss:.5f}"
