"""The round state machine against a scripted chain: two transactions per round,
restarts, budgets, races at deadlines, unusable parents, services gone, network limits,
and what a waiting trainer says."""

from __future__ import annotations

import dataclasses
import gc
import json
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import FrameType, SimpleNamespace
from typing import Any

import numpy as np
import pytest
import torch
from conftest import tiny_disk

from mcfl_chain.adversaries import Adversary, make_adversary
from mcfl_chain.adversaries.free_rider import FreeRider
from mcfl_chain.adversaries.label_flip import LabelFlip
from mcfl_chain.adversaries.sample_inflation import SampleInflation
from mcfl_chain.adversaries.sign_flip import SignFlip
from mcfl_chain.adversaries.sybil import Sybil
from mcfl_chain.algorithms.robust import parse_defence
from mcfl_chain.chain.client import (
    AggregationArg,
    ChainEvent,
    Phase,
    ProposalArg,
    TrainerStatus,
)
from mcfl_chain.chain.errors import ChainUnavailable, ProtocolLimitError
from mcfl_chain.compute import local as local_compute
from mcfl_chain.dag.graph import ROOT_ID, ModelDAG
from mcfl_chain.dag.model_id import model_id, update_id
from mcfl_chain.learning.codec import decode_weights, encode_weights
from mcfl_chain.learning.models import create_model
from mcfl_chain.learning.scenario import TrainerData, TrainerDataSpec
from mcfl_chain.storage import LocalStorage, StorageUnavailable, cid_for_bytes
from mcfl_chain.strategies import FedAvgStrategy, StrategyContext, make_strategy
from mcfl_chain.worker.rounds import Worker, WorkerHalted, WorkerOptions
from mcfl_chain.worker.state import WorkerState

ME = "0x00000000000000000000000000000000000000A1"
PEER = "0x00000000000000000000000000000000000000B2"
ARCH = "lenet5"
TX = "0x" + "00" * 32


def status(
    round_: int = 0,
    phase: Phase = Phase.PROPOSE,
    voted: bool = False,
    deadline: int | None = None,
    votes: int = 0,
    quorum: int = 2,
    member: bool = True,
) -> TrainerStatus:
    if deadline is None:
        deadline = int(time.time()) + 3600
    return TrainerStatus(
        started=True,
        round=round_,
        phase=phase,
        voted=voted,
        member=member,
        deadline=deadline,
        votes=votes,
        quorum=quorum,
        voters=votes,
    )


def voted(
    trainer_id: int, round_: int, phase: Phase, block: int = 1, counted: bool = True
) -> ChainEvent:
    return ChainEvent(
        "TrainerVoted",
        block,
        trainer_id,
        TX,
        {
            "round": round_,
            "trainerId": trainer_id,
            "phase": int(phase),
            "counted": counted,
            "votes": 1,
            "voters": 1,
        },
    )


def proposed(
    trainer_id: int,
    round_: int,
    parent: bytes = ROOT_ID,
    cid: str | None = None,
    samples: int = 10,
    block: int = 1,
    proposer: str | None = None,
) -> ChainEvent:
    return ChainEvent(
        "UpdateProposed",
        block,
        trainer_id,
        TX,
        {
            "updateId": update_id(trainer_id, parent, round_),
            "parent": parent,
            "trainerId": trainer_id,
            "round": round_,
            "proposer": proposer or (ME if trainer_id == 1 else PEER),
            "cid": cid or cid_for_bytes(b"update"),
            "numSamples": samples,
        },
    )


def created(
    trainer_id: int, round_: int, parent: bytes, update_ids: Sequence[int], block: int = 2
) -> list[ChainEvent]:
    """ModelCreated then ModelAppended, as the chain logs a new model."""
    new = model_id(parent, sorted(update_ids))
    return [
        ChainEvent(
            "ModelCreated",
            block,
            0,
            TX,
            {
                "round": round_,
                "modelId": new,
                "trainerId": trainer_id,
                "index": 1,
                "parents": (parent,),
                "updateIds": tuple(sorted(update_ids)),
                "rule": 0,
                "ruleParameter": 0,
                "aggregator": ME if trainer_id == 1 else PEER,
                "weightsCid": None,
            },
        ),
        ChainEvent(
            "ModelAppended",
            block,
            1,
            TX,
            {"round": round_, "modelId": new, "trainerId": trainer_id, "popularity": 1},
        ),
    ]


GAS_PER_TRANSACTION = 50_000


class ScriptedChain:
    """The calls a worker makes, answered from a script; transactions are recorded.

    ``statuses`` is called for every ``status()``; ``on_end`` runs when a trainer ends a
    phase after its deadline (like a transaction being mined).
    """

    def __init__(
        self,
        statuses: Callable[[], TrainerStatus],
        events: list[ChainEvent] | None = None,
        trainer_id: int = 1,
        on_end: Callable[[], None] | None = None,
        max_samples: int = 1_000_000,
        refuse: ChainUnavailable | ProtocolLimitError | None = None,
    ) -> None:
        self.address = ME
        self.deployment = SimpleNamespace(min_trainers=2)
        self.statuses = statuses
        self.chain_events = events or []
        self.id = trainer_id
        self.on_end = on_end
        self.cap = max_samples
        self.refuse = refuse
        self.sent: list[tuple[Any, ...]] = []

    @property
    def gas_used(self) -> int:
        """A scripted price: :data:`GAS_PER_TRANSACTION` for each transaction sent."""
        return GAS_PER_TRANSACTION * len(self.sent)

    def is_registered(self) -> bool:
        return True

    def trainer_id(self) -> int:
        return self.id

    def trainer_count(self) -> int:
        return 1

    def max_samples(self) -> int:
        return self.cap

    def cohort_bps(self) -> int:
        """Every trainer in every round: no cohorts (PROTOCOL §4)."""
        return 10_000

    def drawn_round(self) -> int:
        return self.statuses().round

    def limits(self) -> SimpleNamespace:
        return SimpleNamespace(max_proposals=16, max_aggregations=16)

    def wait_for_news(self, status: TrainerStatus, seconds: float, stop: Any) -> None:
        stop.wait(seconds)  # as ChainClient waits

    def status(self) -> TrainerStatus:
        return self.statuses()

    def block_number(self) -> int:
        return 5

    def events(self, from_block: int, to_block: int) -> list[ChainEvent]:
        return [e for e in self.chain_events if from_block <= e.block_number <= to_block]

    def end_phase(self, phase: Phase) -> None:
        self.sent.append(("end", self.id, phase))
        if self.on_end is not None:
            self.on_end()

    def join(self) -> tuple[int, Phase]:
        """Recorded; ``on_end`` runs as for an ending call (the vote being mined)."""
        now = self.statuses()
        self.sent.append(("join",))
        if self.on_end is not None:
            self.on_end()
        return now.round, now.phase

    def submit_proposals(self, proposals: Sequence[ProposalArg]) -> dict[bytes, int]:
        if proposals and self.refuse is not None:
            raise self.refuse
        self.sent.append(("submitProposals", tuple(proposals)))
        return {p.parent: update_id(self.id, p.parent, 0) for p in proposals}

    def submit_aggregations(self, aggregations: Sequence[AggregationArg]) -> list[bytes]:
        if aggregations and self.refuse is not None:
            raise self.refuse
        self.sent.append(("submitAggregations", tuple(aggregations)))
        return [
            model_id(
                a.parents[0] if len(a.parents) == 1 else list(a.parents),
                list(a.update_ids),
                a.rule,
                a.rule_parameter,
            )
            for a in aggregations
        ]


def make_worker(
    tmp_path,
    chain: ScriptedChain,
    storage: Any = None,
    genesis_cid: str | None = None,
    data: Any = None,
    strategy: Any = None,
    adversary: Adversary | None = None,
    **options,
) -> Worker:
    state = WorkerState.open(tmp_path / f"state-{chain.id}", ME, deployment_block=0)
    options.setdefault("poll_interval", 0.01)
    options.setdefault("arch", ARCH)
    worker = Worker(
        chain,  # type: ignore[arg-type]
        storage or LocalStorage(tmp_path / "blobs"),
        data or scripted_data(10),  # no training here
        strategy or make_strategy("fedavg"),
        WorkerOptions(**options),
        state,
        ModelDAG(genesis_cid=genesis_cid),
        adversary,
    )
    worker.trainer_id = chain.id
    return worker


def run_briefly(worker: Worker, seconds: float) -> tuple[bool, list[BaseException]]:
    """Run the worker in a thread for at most ``seconds``; (finished, errors)."""
    errors: list[BaseException] = []

    def target() -> None:
        try:
            worker.run()
        except BaseException as exc:  # reported to the test
            errors.append(exc)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(seconds)
    finished = not thread.is_alive()
    worker.stop()
    thread.join(10)
    return finished, errors


def run_until(worker: Worker, done: Callable[[], bool], timeout: float = 60.0) -> bool:
    """Run the worker in a thread until ``done()`` holds (or ``timeout`` s); whether it did."""
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    limit = time.monotonic() + timeout
    while not done() and time.monotonic() < limit and thread.is_alive():
        time.sleep(0.01)
    reached = done()
    worker.stop()
    thread.join(10)
    return reached


def weights_blob(seed: int) -> bytes:
    return encode_weights(ARCH, create_model(ARCH, seed=seed).state_dict())


def scripted_data(n: int = 8) -> SimpleNamespace:
    return SimpleNamespace(
        spec=SimpleNamespace(seed=0),
        train_y=torch.zeros(n, dtype=torch.int64),
        val_x=torch.zeros(n, 1, 28, 28),
        val_y=torch.zeros(n, dtype=torch.int64),
        test_x=torch.zeros(n, 1, 28, 28),
        test_y=torch.zeros(n, dtype=torch.int64),
    )


# -- two transactions per round -----------------------------------------------------------


def test_every_update_of_a_round_and_the_vote_go_in_one_transaction(tmp_path):
    # Prepare: two parents chosen, both updates already stored (no training here).
    other = b"\x07" * 32
    chain = ScriptedChain(lambda: status())
    worker = make_worker(tmp_path, chain)
    worker.state.set_chosen(0, [ROOT_ID, other])
    worker.state.set_uploaded(0, ROOT_ID, cid_for_bytes(b"u1"))
    worker.state.set_uploaded(0, other, cid_for_bytes(b"u2"))

    # Execute
    worker._propose_phase(0)

    # Assert: one submitProposals with both updates and the training-set size.
    assert chain.sent == [
        (
            "submitProposals",
            (
                ProposalArg(parent=ROOT_ID, cid=cid_for_bytes(b"u1"), num_samples=10),
                ProposalArg(parent=other, cid=cid_for_bytes(b"u2"), num_samples=10),
            ),
        )
    ]


def test_every_aggregation_of_a_round_and_the_vote_go_in_one_transaction(tmp_path, caplog):
    # Prepare: round 1; this trainer (id 1) and a peer (id 2) proposed on the root and on
    # model X of round 0, whose updates and weights are stored.
    storage = LocalStorage(tmp_path / "blobs")
    genesis = storage.put(weights_blob(0))
    x_updates = [proposed(i, 0, cid=storage.put(weights_blob(10 + i))) for i in (1, 2)]
    x_ids = [e.args["updateId"] for e in x_updates]
    x = model_id(ROOT_ID, sorted(x_ids))
    events = [*x_updates, *created(2, 0, ROOT_ID, x_ids)]
    for i, parent in ((1, ROOT_ID), (2, ROOT_ID), (1, x), (2, x)):
        cid = storage.put(weights_blob(20 + i + (0 if parent == ROOT_ID else 5)))
        events.append(proposed(i, 1, parent=parent, cid=cid, block=3))
    chain = ScriptedChain(lambda: status(round_=1, phase=Phase.AGGREGATE), events)
    worker = make_worker(
        tmp_path, chain, storage, genesis, scripted_data(), make_strategy("fedavg")
    )
    worker.sync()
    caplog.set_level("INFO", logger="mcfl_chain.worker")

    # Execute
    worker._aggregate_phase(1)

    # Assert: one submitAggregations, one aggregation per parent trained (ascending
    # parents as the updates come), each of both updates, weights stored for new models.
    ((name, aggregations),) = chain.sent
    assert name == "submitAggregations"
    assert sorted(a.parents for a in aggregations) == sorted([(ROOT_ID,), (x,)])
    for a in aggregations:
        (parent,) = a.parents
        assert a.update_ids == tuple(sorted(update_id(i, parent, 1) for i in (1, 2)))
        assert a.weights_cid is not None and storage.get(a.weights_cid)
    # and one metrics line with both aggregations
    assert worker.rounds_done == 1 and worker.state.reported == [1]
    # its state held no choice for the round: it ranked the parents again, trained none
    assert "training" not in caplog.text
    assert "candidates ranked again to aggregate on" in caplog.text


def test_a_phase_leaves_no_cycle_holding_its_weights_for_a_later_collection(tmp_path):
    # Prepare: round 1's aggregate phase with four peers' updates on the root. Automatic
    # collection is off, as good as in a worker whose heap is torch's: full collections
    # come too seldom to free a phase's cycles (multiformats makes some on every read).
    storage = LocalStorage(tmp_path / "blobs")
    genesis = storage.put(weights_blob(0))
    events = [
        proposed(i, 1, parent=ROOT_ID, cid=storage.put(weights_blob(30 + i)), block=3)
        for i in (1, 2, 3, 4)
    ]
    chain = ScriptedChain(lambda: status(1, Phase.AGGREGATE, voted=bool(chain.sent)), events)
    worker = make_worker(
        tmp_path, chain, storage, genesis, scripted_data(), make_strategy("fedavg")
    )
    gc.collect()
    gc.disable()
    try:
        # Execute
        finished, errors = run_briefly(worker, 3.0)

        # Assert: the phase ran; what it leaves to collect holds none of its frames.
        assert errors == [] and [name for name, *_ in chain.sent] == ["submitAggregations"]
        gc.set_debug(gc.DEBUG_SAVEALL)
        gc.collect()
        frames = {o.f_code.co_name for o in gc.garbage if isinstance(o, FrameType)}
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
    assert not frames & {"_plan_aggregation", "_aggregate_phase", "usable_updates"}, frames


def test_a_worker_whose_transaction_of_the_phase_was_mined_sends_nothing_again(tmp_path):
    # Prepare: restarted in round 0's PROPOSE phase; the chain says it voted already
    # (its proposals went in the same transaction).
    chain = ScriptedChain(lambda: status(voted=True, votes=1))
    worker = make_worker(tmp_path, chain, wait_log_interval=0)
    worker.state.set_chosen(0, [ROOT_ID])
    worker.state.set_uploaded(0, ROOT_ID, cid_for_bytes(b"update"))

    # Execute
    finished, errors = run_briefly(worker, 1.0)

    # Assert: it waits for the others instead of proposing again.
    assert not finished and errors == []
    assert chain.sent == []


def test_a_proposal_list_over_a_network_limit_becomes_a_bare_vote(tmp_path, caplog):
    # Prepare: the client refuses the list before sending it.
    refusal = ProtocolLimitError(
        "17 proposals in one call: the contracts take at most 16 (MAX_PROPOSALS)",
        "MAX_PROPOSALS",
    )
    chain = ScriptedChain(lambda: status(), refuse=refusal)
    worker = make_worker(tmp_path, chain)
    worker.state.set_chosen(0, [ROOT_ID])
    worker.state.set_uploaded(0, ROOT_ID, cid_for_bytes(b"update"))

    # Execute
    worker._propose_phase(0)

    # Assert: the others need not wait for the deadline; the log says why.
    assert chain.sent == [("submitProposals", ())]
    assert "MAX_PROPOSALS" in caplog.text and "voting without them" in caplog.text


def test_the_declared_samples_stay_within_the_networks_cap(tmp_path, caplog):
    # Prepare: 10 training samples, a network that weighs an update by at most 4.
    chain = ScriptedChain(lambda: status(), max_samples=4)
    worker = make_worker(tmp_path, chain)
    worker.state.set_chosen(0, [ROOT_ID])
    worker.state.set_uploaded(0, ROOT_ID, cid_for_bytes(b"update"))

    # Execute
    worker._propose_phase(0)

    # Assert
    ((_, (proposal,)),) = chain.sent
    assert proposal.num_samples == 4 and "maxSamples" in caplog.text


# -- the round budget ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "evidence",
    [proposed(1, round_=0), voted(1, 0, Phase.AGGREGATE)],
    ids=["a proposal", "a counted vote"],
)
def test_rounds_count_from_the_first_round_taken_part_in_on_chain(tmp_path, evidence, caplog):
    # Prepare: a worker rebuilt in round 1 (its state saw round 1 first) that took part
    # in round 0 according to the chain (it proposed, or it missed the proposal deadline
    # and only voted); the network is now in round 3 of a 3-round run.
    chain = ScriptedChain(lambda: status(round_=3), [evidence])
    worker = make_worker(tmp_path, chain, rounds=3)
    worker.state.first_round = 1

    # Execute
    finished, errors = run_briefly(worker, 5.0)

    # Assert: it stops with the network instead of waiting for a round 4 nobody plays,
    # and says why it plays nothing.
    assert finished and errors == []
    assert chain.sent == []
    assert (
        "the network is at round 3, past round 2, the last of this trainer's budget of 3 "
        "round(s) from its first round 0 (--rounds 3); nothing left to play"
    ) in caplog.text


def test_last_round_is_an_absolute_bound_for_a_late_joiner(tmp_path, caplog):
    # Prepare: a trainer that joins in round 3 and was told the network ends with round 2.
    chain = ScriptedChain(lambda: status(round_=3))
    worker = make_worker(tmp_path, chain, rounds=5, last_round=2)

    # Execute
    finished, errors = run_briefly(worker, 5.0)

    # Assert
    assert finished and errors == [] and chain.sent == []
    assert "the network is at round 3, past --last-round 2; nothing left to play" in caplog.text


# -- races at deadlines -------------------------------------------------------------------


def test_a_proposal_is_not_sent_once_the_phase_moved_on(tmp_path, caplog):
    # Prepare: the update is already stored (no training); the phase is PROPOSE when the
    # worker starts the parent and AGGREGATE right before it would send the proposal.
    readings = iter([status(), status(phase=Phase.AGGREGATE)])
    chain = ScriptedChain(lambda: next(readings, status(phase=Phase.AGGREGATE)))
    worker = make_worker(tmp_path, chain)
    worker.state.set_chosen(0, [ROOT_ID])
    worker.state.set_uploaded(0, ROOT_ID, cid_for_bytes(b"update"))

    # Execute
    worker._propose_phase(0)

    # Assert: nothing sent (it would revert on chain), and the log says so.
    assert chain.sent == []
    assert "not proposing them" in caplog.text


def test_out_of_the_quorum_in_an_aggregate_phase_it_joins_instead_of_racing(tmp_path, caplog):
    # Prepare: not a member of round 1's AGGREGATE phase (it has no update to aggregate);
    # its vote is mined once sent.
    network = {"voted": False}
    chain = ScriptedChain(
        lambda: status(1, Phase.AGGREGATE, voted=network["voted"], member=False),
        on_end=lambda: network.update(voted=True),
    )
    worker = make_worker(tmp_path, chain)

    # Execute
    with caplog.at_level("INFO", logger="mcfl_chain.worker"):
        run_until(worker, lambda: bool(chain.sent))

    # Assert: one join, which cannot arrive after its phase, and no typed vote that could
    assert chain.sent == [("join",)]
    assert "joined with a bare vote (in round 1's aggregate phase)" in caplog.text


def test_out_of_the_quorum_it_tries_its_proposals_once_then_joins(tmp_path, caplog):
    # Prepare: not a member of round 1's PROPOSE phase, its update already stored; the
    # members end the phase before it is sent, and round 2's PROPOSE phase follows.
    readings = iter([status(1, member=False), status(1, member=False)])
    network = {"voted": False}

    def reading() -> TrainerStatus:
        return next(readings, None) or status(2, voted=network["voted"], member=False)

    chain = ScriptedChain(reading, on_end=lambda: network.update(voted=True))
    worker = make_worker(tmp_path, chain)
    worker.state.set_chosen(1, [ROOT_ID])
    worker.state.set_uploaded(1, ROOT_ID, cid_for_bytes(b"update"))

    # Execute
    run_until(worker, lambda: bool(chain.sent))

    # Assert: the late proposal was not sent, and it did not race again: it joined.
    assert chain.sent == [("join",)]
    assert "not proposing them" in caplog.text


def test_rounds_are_not_counted_before_the_trainer_is_admitted(tmp_path):
    # Prepare: with --rounds 1, a trainer out of the quorum first sees round 1 (its
    # vote of that phase is on chain, not counted); round 2 opens and it is still out.
    readings = iter([status(1, voted=True, member=False)] * 2)
    network = {"voted": False}

    def reading() -> TrainerStatus:
        return next(readings, None) or status(
            2, Phase.AGGREGATE, voted=network["voted"], member=False
        )

    chain = ScriptedChain(reading, on_end=lambda: network.update(voted=True))
    worker = make_worker(tmp_path, chain, rounds=1)

    # Execute
    run_until(worker, lambda: bool(chain.sent))

    # Assert: it goes on and gets in instead of stopping having played nothing
    assert chain.sent == [("join",)]


def test_the_vote_right_after_a_join_does_not_start_the_rounds_budget(tmp_path, caplog):
    # Prepare: the trainer joined in round 3's PROPOSE phase (not counted), cast its
    # counted but empty AGGREGATE vote, and proposed from round 4 on; round 5 is open.
    events = [
        voted(1, 3, Phase.PROPOSE, counted=False),
        voted(1, 3, Phase.AGGREGATE),
        proposed(1, round_=4),
        voted(1, 4, Phase.PROPOSE),
    ]
    chain = ScriptedChain(lambda: status(round_=5), events)
    worker = make_worker(tmp_path, chain, rounds=1)

    # Execute
    finished, errors = run_briefly(worker, 5.0)

    # Assert: its one round was round 4
    assert finished and errors == [] and chain.sent == []
    assert "budget of 1 round(s) from its first round 4" in caplog.text


def test_after_a_deadline_one_voter_ends_the_phase_not_all(tmp_path):
    # Prepare: trainers 1 and 2 voted, the deadline has passed; ending the phase takes
    # 0.3 s to be mined, then the network is in the AGGREGATE phase.
    deadline = int(time.time()) - 1
    network = {"phase": Phase.PROPOSE}

    def reading() -> TrainerStatus:
        if network["phase"] is Phase.PROPOSE:
            return status(voted=True, deadline=deadline, votes=2, quorum=3)
        return status(phase=Phase.AGGREGATE, voted=True, deadline=deadline + 600, quorum=2)

    def mined() -> None:
        time.sleep(0.3)
        network["phase"] = Phase.AGGREGATE

    events = [voted(1, 0, Phase.PROPOSE), voted(2, 0, Phase.PROPOSE, block=2)]
    chains = [ScriptedChain(reading, events, trainer_id=i, on_end=mined) for i in (1, 2)]
    workers = [make_worker(tmp_path, c, wait_log_interval=0) for c in chains]

    # Execute: both follow the chain at once for 2 s.
    threads = [threading.Thread(target=w.run, daemon=True) for w in workers]
    for t in threads:
        t.start()
    time.sleep(2.0)
    for w, t in zip(workers, threads, strict=True):
        w.stop()
        t.join(10)

    # Assert: one transaction ended the phase, sent by the voter with the smallest id.
    assert [c.sent for c in chains] == [[("end", 1, Phase.PROPOSE)], []]


def test_the_next_voter_ends_the_phase_when_the_first_does_not(tmp_path):
    # Prepare: trainers 1 and 2 voted and the deadline has passed; trainer 1 is gone.
    deadline = int(time.time()) - 1
    network = {"phase": Phase.PROPOSE}

    def reading() -> TrainerStatus:
        if network["phase"] is Phase.PROPOSE:
            return status(voted=True, deadline=deadline, votes=2, quorum=3)
        return status(phase=Phase.AGGREGATE, voted=True, quorum=2)

    def mined() -> None:
        network["phase"] = Phase.AGGREGATE

    events = [voted(1, 0, Phase.PROPOSE), voted(2, 0, Phase.PROPOSE, block=2)]
    chain = ScriptedChain(reading, events, trainer_id=2, on_end=mined)
    worker = make_worker(tmp_path, chain, wait_log_interval=0, advance_stagger=0.5)

    # Execute
    started = time.monotonic()
    run_briefly(worker, 3.0)

    # Assert: trainer 2 ended it, one grace and one stagger after the deadline.
    assert chain.sent == [("end", 2, Phase.PROPOSE)]
    assert time.monotonic() - started >= 1.5


# -- restarts ------------------------------------------------------------------------------


def test_a_worker_stopped_after_its_aggregations_were_mined_writes_the_rounds_metrics(
    tmp_path,
):
    # Prepare: the chain holds this trainer's round-0 update, its aggregation and its
    # AGGREGATE vote; its state has no metrics line for round 0 (it was killed first).
    storage = LocalStorage(tmp_path / "blobs")
    genesis = storage.put(weights_blob(0))
    mine = proposed(1, 0, cid=storage.put(weights_blob(1)))
    events = [
        mine,
        *created(1, 0, ROOT_ID, [mine.args["updateId"]]),
        voted(1, 0, Phase.AGGREGATE, block=2),
    ]
    chain = ScriptedChain(lambda: status(round_=1, voted=True), events)
    metrics = tmp_path / "metrics.jsonl"
    worker = make_worker(
        tmp_path,
        chain,
        storage,
        genesis,
        scripted_data(),
        make_strategy("fedavg"),
        metrics_path=metrics,
        rounds=1,
    )

    # Execute
    finished, errors = run_briefly(worker, 10.0)

    # Assert: the round's line names the chain's model; nothing was sent.
    assert finished and errors == [] and chain.sent == []
    (line,) = metrics.read_text().splitlines()
    assert '"round": 0' in line
    assert model_id(ROOT_ID, [mine.args["updateId"]]).hex() in line


def test_a_metrics_line_of_another_network_does_not_count_as_this_rounds(tmp_path):
    # Prepare: as above, with a --metrics file shared with another network, which holds
    # this trainer's line of its own round 0.
    storage = LocalStorage(tmp_path / "blobs")
    genesis = storage.put(weights_blob(0))
    mine = proposed(1, 0, cid=storage.put(weights_blob(1)))
    events = [
        mine,
        *created(1, 0, ROOT_ID, [mine.args["updateId"]]),
        voted(1, 0, Phase.AGGREGATE, block=2),
    ]
    chain = ScriptedChain(lambda: status(round_=1, voted=True), events)
    metrics = tmp_path / "metrics.jsonl"
    metrics.write_text(json.dumps({"round": 0, "trainer": ME, "network": "1-0xother"}) + "\n")
    worker = make_worker(
        tmp_path,
        chain,
        storage,
        genesis,
        scripted_data(),
        make_strategy("fedavg"),
        metrics_path=metrics,
        labels={"network": "31337-0xthis"},
        rounds=1,
    )

    # Execute
    finished, errors = run_briefly(worker, 10.0)

    # Assert: this network's round-0 line was written beside the other's.
    assert finished and errors == []
    lines = [json.loads(line) for line in metrics.read_text().splitlines()]
    assert [(line["round"], line["network"]) for line in lines] == [
        (0, "1-0xother"),
        (0, "31337-0xthis"),
    ]


def test_a_full_disk_stops_the_worker_with_one_line_and_no_torn_metrics_line(tmp_path):
    # Prepare: the round-0 metrics line of the previous test is due, and the metrics
    # file is on a disk that is full.
    storage = LocalStorage(tmp_path / "blobs")
    genesis = storage.put(weights_blob(0))
    mine = proposed(1, 0, cid=storage.put(weights_blob(1)))
    events = [
        mine,
        *created(1, 0, ROOT_ID, [mine.args["updateId"]]),
        voted(1, 0, Phase.AGGREGATE, block=2),
    ]
    chain = ScriptedChain(lambda: status(round_=1, voted=True), events)
    metrics = tmp_path / "disk" / "metrics.jsonl"
    with tiny_disk(tmp_path / "disk") as fill:
        fill()
        worker = make_worker(
            tmp_path, chain, storage, genesis, scripted_data(), metrics_path=metrics, rounds=1
        )

        # Execute
        finished, errors = run_briefly(worker, 10.0)

        # Assert: it stops in one line naming the file and the full disk; no line is
        # left torn, and the round is not marked as written (a restart writes it).
        assert finished and [type(e) for e in errors] == [WorkerHalted]
        message = str(errors[0])
        assert message.startswith(f"state: cannot append to {metrics}: the disk is full")
        assert "\n" not in message
        assert not metrics.exists() or metrics.read_bytes() == b""
        assert worker.state.reported == []


# -- what cannot be used ------------------------------------------------------------------


def test_an_unusable_parent_does_not_stop_the_round(tmp_path, caplog):
    # Prepare: this trainer's update on a parent the DAG does not know (its events lost).
    storage = LocalStorage(tmp_path / "blobs")
    cid = storage.put(weights_blob(1))
    lost = b"\x09" * 32
    chain = ScriptedChain(
        lambda: status(round_=1, phase=Phase.AGGREGATE), [proposed(1, 1, parent=lost, cid=cid)]
    )
    worker = make_worker(tmp_path, chain, storage)
    worker.sync()

    # Execute
    worker._aggregate_phase(1)

    # Assert: no aggregation on it, a logged reason, and the vote that lets others go on.
    assert chain.sent == [("submitAggregations", ())]
    assert "cannot be had" in caplog.text and "not on chain" in caplog.text


def test_a_round_without_a_proposal_is_not_counted_as_played(tmp_path):
    # Prepare: nothing of this trainer's on chain in round 0.
    chain = ScriptedChain(lambda: status(phase=Phase.AGGREGATE))
    worker = make_worker(tmp_path, chain)

    # Execute
    worker._aggregate_phase(0)

    # Assert: it still votes (others must not wait), but played nothing.
    assert chain.sent == [("submitAggregations", ())]
    assert worker.rounds_done == 0


# -- services gone ------------------------------------------------------------------------


class GoneStorage(LocalStorage):
    def get(self, cid: str, max_bytes: int | None = None) -> bytes:
        raise StorageUnavailable(
            f"reading {cid} failed after 9 attempt(s) over 60 s: cannot connect to the "
            f"IPFS node at /ip4/127.0.0.1/tcp/1/http (Connection refused)"
        )


def test_a_storage_gone_stops_the_worker_with_one_line_instead_of_sitting_rounds_out(tmp_path):
    # Prepare: round 0 is open and the store cannot be reached (after its retries).
    chain = ScriptedChain(lambda: status())
    worker = make_worker(
        tmp_path, chain, GoneStorage(tmp_path / "blobs"), genesis_cid=cid_for_bytes(b"g")
    )

    # Execute
    finished, errors = run_briefly(worker, 10.0)

    # Assert: it stops, names the storage in one line, and sent nothing.
    assert finished and len(errors) == 1 and isinstance(errors[0], WorkerHalted)
    message = str(errors[0])
    assert message.startswith("storage: ") and "IPFS node" in message and "\n" not in message
    assert chain.sent == [] and worker.rounds_done == 0


def test_a_chain_gone_stops_the_worker_with_one_line(tmp_path):
    # Prepare
    def gone() -> TrainerStatus:
        raise ChainUnavailable("the chain node at http://127.0.0.1:1 has not answered for 5 s")

    worker = make_worker(tmp_path, ScriptedChain(gone))

    # Execute / Assert
    with pytest.raises(WorkerHalted, match=r"^chain: the chain node at .* has not answered"):
        worker.run()


# -- saying whom it waits for -------------------------------------------------------------


@pytest.mark.parametrize(
    "offset, expected",
    [(3600, "the phase deadline passes in"), (-5, "the phase deadline passed")],
    ids=["before the deadline", "after it"],
)
def test_a_waiting_trainer_says_whom_it_waits_for(tmp_path, caplog, offset, expected):
    # Prepare: trainers 1, 2 and 4 voted in round 1's AGGREGATE phase (the members of
    # round 2's PROPOSE phase); trainer 1 voted in round 2's PROPOSE phase, 2 and 4 not.
    deadline = int(time.time()) + offset
    chain = ScriptedChain(
        lambda: status(round_=2, voted=True, votes=1, quorum=3, deadline=deadline),
        [*(voted(i, 1, Phase.AGGREGATE) for i in (1, 2, 4)), voted(1, 2, Phase.PROPOSE, 2)],
    )
    worker = make_worker(tmp_path, chain, wait_log_interval=0.2, advance_grace=60)

    # Execute
    with caplog.at_level("INFO", logger="mcfl_chain.worker"):
        run_briefly(worker, 0.9)

    # Assert: a few lines, each naming the missing members and how the wait ends.
    lines = [r.getMessage() for r in caplog.records if "waited" in r.getMessage()]
    assert 2 <= len(lines) <= 5
    assert all("round 2 propose" in m and "trainer(s) 2, 4 (1 of 3 votes)" in m for m in lines)
    assert all(expected in m for m in lines)


def test_a_waiting_trainer_names_the_members_carried_over(tmp_path, caplog):
    # Prepare: round 1's AGGREGATE phase ended at its deadline without trainer 4, a
    # member (it proposed in round 1): round 2's PROPOSE phase (quorum 3) waits for it
    # too. Trainer 1 voted in it, 2 and 4 not.
    chain = ScriptedChain(
        lambda: status(round_=2, voted=True, votes=1, quorum=3),
        [
            *(voted(i, 1, Phase.PROPOSE) for i in (1, 2, 4)),
            *(voted(i, 1, Phase.AGGREGATE, block=2) for i in (1, 2)),
            voted(1, 2, Phase.PROPOSE, 3),
        ],
    )
    worker = make_worker(tmp_path, chain, wait_log_interval=0.2, advance_grace=60)

    # Execute
    with caplog.at_level("INFO", logger="mcfl_chain.worker"):
        run_until(worker, lambda: "waited" in caplog.text)

    # Assert
    assert "round 2 propose" in caplog.text and "trainer(s) 2, 4 (1 of 3 votes)" in caplog.text


# -- adversaries' hooks and defences --------------------------------------------------------

THIRD = "0x00000000000000000000000000000000000000C3"


def trainer_data(n_train: int = 10) -> TrainerData:
    """Real trainer data (an adversary may poison it): labels 0..9 cyclically."""
    return TrainerData(
        spec=TrainerDataSpec("digits", seed=1),
        num_classes=10,
        train_images=torch.full((n_train, 1, 28, 28), 0.5),
        train_y=torch.arange(n_train) % 10,
        val_images=torch.zeros(4, 1, 28, 28),
        val_y=torch.tensor([0, 1, 2, 3]),
        test_images=torch.zeros(4, 1, 28, 28),
        test_y=torch.tensor([4, 5, 6, 7]),
        indices=np.arange(n_train + 8),
    )


class Recorder(Adversary):
    """An adversary that records what its model and update hooks are given."""

    name = "recorder"

    def __init__(self, models: Callable[..., list] | None = None, updates: Any = None) -> None:
        self.models, self.updates = models, updates
        self.calls: list[tuple[str, Any, Any]] = []

    def choose_models(self, candidates, honest):  # type: ignore[no-untyped-def]
        self.calls.append(("models", list(candidates), list(honest)))
        return self.models(candidates) if self.models else list(honest)

    def choose_updates(self, own, honest, proposers):  # type: ignore[no-untyped-def]
        self.calls.append(("updates", list(honest), dict(proposers)))
        return self.updates if self.updates is not None else sorted(honest)


def test_an_honest_worker_trains_on_its_own_data(tmp_path):
    data = trainer_data()
    worker = make_worker(tmp_path, ScriptedChain(lambda: status()), data=data)
    assert worker.train_data is worker.data is data


def test_the_adversarys_poisoned_data_is_trained_on_and_the_splits_stay_honest(
    tmp_path, monkeypatch
):
    # Prepare: a label flipper; training is replaced by a recorder.
    storage = LocalStorage(tmp_path / "blobs")
    genesis = storage.put(weights_blob(0))
    trained_on: list[Any] = []
    monkeypatch.setattr(local_compute, "train", lambda net, data, **kw: trained_on.append(data))
    data = trainer_data()
    worker = make_worker(
        tmp_path,
        ScriptedChain(lambda: status()),
        storage,
        genesis,
        data,
        adversary=LabelFlip(shift=1),
    )
    worker.sync()

    # Execute
    worker._trained_update(0, ROOT_ID)

    # Assert: labels shifted by one for training; what models are judged on is untouched.
    assert torch.equal(worker.train_data.train_y, (torch.arange(10) + 1) % 10)
    assert trained_on == [worker.train_data]
    assert worker.data is data and torch.equal(data.train_y, torch.arange(10) % 10)
    assert torch.equal(worker.train_data.val_y, data.val_y)
    assert torch.equal(worker.train_data.test_y, data.test_y)


def test_an_adversary_that_does_not_train_publishes_the_parents_weights(tmp_path, monkeypatch):
    # Prepare: a free rider; training would fail the test.
    storage = LocalStorage(tmp_path / "blobs")
    genesis = storage.put(weights_blob(0))

    def no_training(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("a free rider does not train")

    monkeypatch.setattr(local_compute, "train", no_training)
    worker = make_worker(
        tmp_path,
        ScriptedChain(lambda: status()),
        storage,
        genesis,
        trainer_data(),
        adversary=FreeRider(source="parent"),
    )
    worker.sync()

    # Execute
    cid = worker._trained_update(0, ROOT_ID)

    # Assert: the parent's weights, as the network's codec writes them.
    assert cid == genesis


def test_a_free_rider_copies_a_peers_update_of_the_previous_round(tmp_path, monkeypatch):
    # Prepare: in round 0 this trainer and a peer proposed on the root; it is round 1.
    storage = LocalStorage(tmp_path / "blobs")
    genesis = storage.put(weights_blob(0))
    peer_weights = create_model(ARCH, seed=12).state_dict()
    events = [
        proposed(1, 0, cid=storage.put(weights_blob(11))),
        proposed(2, 0, cid=storage.put(encode_weights(ARCH, peer_weights))),
    ]
    monkeypatch.setattr(local_compute, "train", lambda *a, **k: None)
    worker = make_worker(
        tmp_path,
        ScriptedChain(lambda: status(round_=1), events),
        storage,
        genesis,
        trainer_data(),
        adversary=FreeRider(source="peer"),
    )
    worker.sync()

    # Execute
    cid = worker._trained_update(1, ROOT_ID)

    # Assert: the peer's weights with one value moved by one ulp (its own CID); the own
    # round-0 update is not among the peers'.
    published = decode_weights(storage.get(cid), ARCH)
    differing = sum(int((published[key] != peer_weights[key]).sum().item()) for key in peer_weights)
    assert differing == 1


class GrowingChain(ScriptedChain):
    """A scripted chain whose head moves on as events are added, that knows the trainer
    ids of three addresses and the phase duration."""

    def __init__(self, statuses: Callable[[], TrainerStatus], events: list[ChainEvent]) -> None:
        super().__init__(statuses, events)
        self.deployment = SimpleNamespace(min_trainers=3, phase_duration=600)
        self.head = max(e.block_number for e in events)

    def add(self, *events: ChainEvent) -> None:
        self.head += 1
        self.chain_events += [dataclasses.replace(e, block_number=self.head) for e in events]

    def block_number(self) -> int:
        return self.head

    def trainer_id(self, addr: str | None = None) -> int:  # type: ignore[override]
        return {ME.lower(): 1, PEER.lower(): 2, THIRD.lower(): 3}[(addr or ME).lower()]


def test_an_adaptive_adversary_reads_the_rounds_updates_once_the_others_proposed(tmp_path):
    # Prepare: round 0, members 1 (this trainer), 2 (honest) and 3 (its colluder). The
    # colluder proposed and voted already; the honest trainer does so on the third look.
    storage = LocalStorage(tmp_path / "blobs")
    genesis = storage.put(weights_blob(0))
    honest = create_model(ARCH, seed=22).state_dict()
    colluder = proposed(3, 0, cid=storage.put(weights_blob(33)), proposer=THIRD)
    looks = 0

    def statuses() -> TrainerStatus:
        nonlocal looks
        looks += 1
        if looks == 3:
            cid = storage.put(encode_weights(ARCH, honest))
            chain.add(proposed(2, 0, cid=cid), voted(2, 0, Phase.PROPOSE))
        return status(quorum=3)

    chain = GrowingChain(statuses, [colluder, voted(3, 0, Phase.PROPOSE)])
    adversary = make_adversary("ipm", coalition=f"{ME}+{THIRD}")
    worker = make_worker(tmp_path, chain, storage, genesis, trainer_data(), adversary=adversary)
    worker.sync()

    # Execute
    read = worker._round_updates(0, ROOT_ID)

    # Assert: it waited for the honest proposal, and reads it alone (not its colluder's)
    assert looks >= 3
    assert list(read) == [update_id(2, ROOT_ID, 0)]
    assert all(torch.equal(read[update_id(2, ROOT_ID, 0)][k], honest[k]) for k in honest)
    # a second parent of the same round is read without waiting again
    before = looks
    assert worker._round_updates(0, b"\x01" * 32) == {} and looks == before


def test_an_adaptive_adversary_stops_waiting_near_the_deadline(tmp_path, caplog):
    # Prepare: the honest member 2 never votes; the deadline is 30 s away, within the
    # last 10 % of a 600 s phase.
    storage = LocalStorage(tmp_path / "blobs")
    genesis = storage.put(weights_blob(0))
    chain = GrowingChain(
        lambda: status(quorum=3, deadline=int(time.time()) + 30),
        [proposed(3, 0, cid=storage.put(weights_blob(33)), proposer=THIRD)],
    )
    worker = make_worker(
        tmp_path,
        chain,
        storage,
        genesis,
        trainer_data(),
        adversary=make_adversary("alie", coalition=[ME, THIRD]),
    )
    worker.sync()

    # Execute
    started = time.monotonic()
    read = worker._round_updates(0, ROOT_ID)

    # Assert: at once, with nothing honest to read, saying whom it did not wait for
    assert time.monotonic() - started < 5 and read == {}
    assert "deadline is near" in caplog.text and "without those of trainer(s) 2" in caplog.text


def test_the_adversarys_sample_count_is_declared_within_the_networks_cap(tmp_path, caplog):
    # Prepare: 10 training samples; the network weighs an update by at most 1000.
    chain = ScriptedChain(lambda: status(), max_samples=1000)
    worker = make_worker(tmp_path, chain, adversary=SampleInflation())
    worker.state.set_chosen(0, [ROOT_ID])
    worker.state.set_uploaded(0, ROOT_ID, cid_for_bytes(b"update"))

    # Execute
    with caplog.at_level("INFO", logger="mcfl_chain.worker"):
        worker._propose_phase(0)

    # Assert
    ((_, (proposal,)),) = chain.sent
    assert proposal.num_samples == 1000 and "declaring 1000 samples for my 10" in caplog.text


def test_a_sample_count_over_the_cap_is_cut_to_it(tmp_path):
    # Prepare: an adversary claiming more than the network takes.
    class Boastful(Adversary):
        def declared_samples(self, honest: int, cap: int) -> int:
            return 10 * cap

    chain = ScriptedChain(lambda: status(), max_samples=50)
    worker = make_worker(tmp_path, chain, adversary=Boastful())
    worker.state.set_chosen(0, [ROOT_ID])
    worker.state.set_uploaded(0, ROOT_ID, cid_for_bytes(b"update"))

    # Execute
    worker._propose_phase(0)

    # Assert
    ((_, (proposal,)),) = chain.sent
    assert proposal.num_samples == 50


def _two_models_of_round_0(storage: LocalStorage) -> tuple[list[ChainEvent], bytes, bytes]:
    """This trainer's model M (its own update) and the peer's model P, both of round 0."""
    mine = proposed(1, 0, cid=storage.put(weights_blob(11)))
    peer = proposed(2, 0, cid=storage.put(weights_blob(12)))
    events = [
        mine,
        peer,
        *created(1, 0, ROOT_ID, [mine.args["updateId"]]),
        *created(2, 0, ROOT_ID, [peer.args["updateId"]], block=3),
    ]
    m = model_id(ROOT_ID, [mine.args["updateId"]])
    p = model_id(ROOT_ID, [peer.args["updateId"]])
    return events, m, p


def test_the_adversary_chooses_models_after_algorithm_1_seeing_their_proposers(tmp_path):
    # Prepare: two candidates; the adversary trains the one its peer's updates made.
    storage = LocalStorage(tmp_path / "blobs")
    genesis = storage.put(weights_blob(0))
    events, m, p = _two_models_of_round_0(storage)
    recorder = Recorder(
        models=lambda views: [b"\x01" * 32, *(v.key for v in views if PEER.lower() in v.proposers)]
    )
    chain = ScriptedChain(lambda: status(round_=1), events)
    honest = make_worker(tmp_path, chain, storage, genesis, scripted_data())
    worker = make_worker(
        tmp_path / "adversary", chain, storage, genesis, scripted_data(), adversary=recorder
    )
    for w in (honest, worker):
        w.sync()

    # Execute
    chosen = worker._choose_models(1)

    # Assert: it saw FedAvg's choice and each candidate's proposers and popularity; a
    # model that is no candidate is dropped.
    ((hook, views, given),) = recorder.calls
    assert hook == "models" and given == honest._choose_models(1)
    assert {v.key: (v.proposers, v.popularity) for v in views} == {
        m: (frozenset({ME.lower()}), 1),
        p: (frozenset({PEER.lower()}), 1),
    }
    assert chosen == [p]


class ReadLog(LocalStorage):
    """Local storage that records the CIDs read from it."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.read: list[str] = []

    def get(self, cid: str, max_bytes: int | None = None) -> bytes:
        self.read.append(cid)
        return super().get(cid, max_bytes)


def _scoring_worker(tmp_path, strategy: Any = None) -> tuple[Worker, ReadLog, bytes, str]:
    """A worker in round 1 with two candidates of round 0 (its own model M and the
    peer's P), on storage that logs reads: (worker, storage, M, the peer update's CID)."""
    storage = ReadLog(tmp_path / "blobs")
    genesis = storage.put(weights_blob(0))
    events, m, _ = _two_models_of_round_0(storage)
    chain = ScriptedChain(lambda: status(round_=1), events)
    worker = make_worker(tmp_path, chain, storage, genesis, scripted_data(), strategy)
    worker.sync()
    peer_cid = next(
        e.args["cid"] for e in events if e.args.get("trainerId") == 2 and "cid" in e.args
    )
    return worker, storage, m, peer_cid


def test_local_training_neither_fetches_nor_scores_its_peers_models(tmp_path):
    # Prepare
    worker, storage, m, peer_cid = _scoring_worker(tmp_path, make_strategy("local"))

    # Execute
    chosen = worker._choose_models(1)

    # Assert: its own lineage, and the peer's weights were never read.
    assert chosen == [m]
    assert peer_cid not in storage.read
    assert storage.read  # its own model was read and scored


def test_fedavg_scores_every_candidate(tmp_path):
    # Prepare: a strategy that collaborates.
    worker, storage, _, peer_cid = _scoring_worker(tmp_path)

    # Execute
    worker._choose_models(1)

    # Assert
    assert peer_cid in storage.read


def test_sybils_aggregate_only_their_coalitions_updates(tmp_path):
    # Prepare: three updates on the root in round 0, from this trainer, PEER and THIRD.
    storage = LocalStorage(tmp_path / "blobs")
    genesis = storage.put(weights_blob(0))
    events = [
        proposed(i, 0, cid=storage.put(weights_blob(10 + i)), proposer=address)
        for i, address in ((1, ME), (2, PEER), (3, THIRD))
    ]
    ids = [e.args["updateId"] for e in events]
    chain = ScriptedChain(lambda: status(phase=Phase.AGGREGATE), events)
    worker = make_worker(
        tmp_path,
        chain,
        storage,
        genesis,
        scripted_data(),
        adversary=Sybil(coalition=[ME, PEER]),
    )
    worker.sync()
    worker.state.set_chosen(0, [ROOT_ID])

    # Execute
    worker._aggregate_phase(0)

    # Assert: FedAvg would take all three; the Sybil keeps its coalition's.
    ((_, (aggregation,)),) = chain.sent
    assert aggregation.update_ids == tuple(sorted(ids[:2]))


def test_the_adversarys_update_choice_is_kept_to_usable_ids_and_its_own(tmp_path, caplog):
    # Prepare: an adversary naming THIRD's update and an id nobody proposed, not its own.
    storage = LocalStorage(tmp_path / "blobs")
    genesis = storage.put(weights_blob(0))
    events = [
        proposed(i, 0, cid=storage.put(weights_blob(10 + i)), proposer=address)
        for i, address in ((1, ME), (2, PEER), (3, THIRD))
    ]
    ids = [e.args["updateId"] for e in events]
    recorder = Recorder(updates=[ids[2], 12345])
    chain = ScriptedChain(lambda: status(phase=Phase.AGGREGATE), events)
    worker = make_worker(tmp_path, chain, storage, genesis, scripted_data(), adversary=recorder)
    worker.sync()
    worker.state.set_chosen(0, [ROOT_ID])

    # Execute
    worker._aggregate_phase(0)

    # Assert: it was given FedAvg's choice and every usable update's proposer.
    ((hook, honest, proposers),) = recorder.calls
    assert hook == "updates" and honest == sorted(ids)
    assert proposers == dict(zip(ids, (ME, PEER, THIRD), strict=True))
    ((_, (aggregation,)),) = chain.sent
    assert aggregation.update_ids == tuple(sorted([ids[0], ids[2]]))
    assert "chose unusable updates or left out its own" in caplog.text


def test_a_defence_chooses_among_the_updates_the_strategy_keeps(tmp_path):
    # Prepare: five updates on the root; trainer 5's weights are scaled far away.
    storage = LocalStorage(tmp_path / "blobs")
    genesis = storage.put(weights_blob(0))
    far = {k: v * 50 for k, v in create_model(ARCH, seed=15).state_dict().items()}
    blobs = {i: weights_blob(10 + i) for i in range(1, 5)} | {5: encode_weights(ARCH, far)}
    events = [proposed(i, 0, cid=storage.put(blob)) for i, blob in blobs.items()]
    ids = [e.args["updateId"] for e in events]
    chain = ScriptedChain(lambda: status(phase=Phase.AGGREGATE), events)
    strategy = make_strategy("fedavg", defence=parse_defence("multi-krum"))
    worker = make_worker(tmp_path, chain, storage, genesis, scripted_data(), strategy)
    worker.sync()
    worker.state.set_chosen(0, [ROOT_ID])

    # Execute
    worker._aggregate_phase(0)

    # Assert: Multi-Krum (n = 5, f = 1) keeps the four close updates, not every one.
    ((_, (aggregation,)),) = chain.sent
    assert aggregation.update_ids == tuple(sorted(ids[:4]))


def test_an_aggregation_rule_defence_aggregates_with_its_rule_and_submits_its_code(
    tmp_path, caplog
):
    # Prepare: five updates on the root; trainer 5's weights are scaled far away.
    storage = LocalStorage(tmp_path / "blobs")
    genesis = storage.put(weights_blob(0))
    far = {k: v * 50 for k, v in create_model(ARCH, seed=15).state_dict().items()}
    blobs = {i: weights_blob(10 + i) for i in range(1, 5)} | {5: encode_weights(ARCH, far)}
    events = [proposed(i, 0, cid=storage.put(blob)) for i, blob in blobs.items()]
    ids = sorted(e.args["updateId"] for e in events)
    chain = ScriptedChain(lambda: status(phase=Phase.AGGREGATE), events)
    rule = parse_defence("trimmed-mean:beta=0.2")
    strategy = make_strategy("fedavg", defence=rule)
    worker = make_worker(tmp_path, chain, storage, genesis, scripted_data(), strategy)
    worker.sync()
    worker.state.set_chosen(0, [ROOT_ID])

    # Execute
    worker._aggregate_phase(0)

    # Assert: every update kept, aggregated by the trimmed mean, whose code and parameter
    # word go to the chain with the ids (and into the model id the worker expects)
    ((_, (aggregation,)),) = chain.sent
    assert aggregation.update_ids == tuple(ids)
    assert (aggregation.rule, aggregation.rule_parameter) == (2, 2000)
    assert aggregation.weights_cid is not None
    published = decode_weights(storage.get(aggregation.weights_cid), ARCH)
    updates = [(uid, worker.dag.updates[uid].num_samples, worker.book.update(uid)) for uid in ids]
    expected = rule.aggregate(updates)
    assert all(torch.equal(published[k], expected[k]) for k in expected)
    # the id the worker computed is the chain's (ScriptedChain hashes the rule as Models)
    assert "the chain recorded model" not in caplog.text


def test_a_robust_aggregation_rule_is_refused_where_the_architecture_names_its_own(tmp_path):
    chain = ScriptedChain(lambda: status())
    strategy = make_strategy("fedavg", defence=parse_defence("median"))
    with pytest.raises(ValueError, match="replaces the network's aggregation"):
        make_worker(tmp_path, chain, strategy=strategy, arch="lenet5-heads2")


def test_the_adversary_publishes_its_version_of_the_trained_update(tmp_path, monkeypatch):
    # Prepare: "training" adds 0.5 to every weight; a sign flipper with λ = 2.
    storage = LocalStorage(tmp_path / "blobs")
    genesis = storage.put(weights_blob(0))

    def step(net: torch.nn.Module, data: Any, **kwargs: Any) -> None:
        with torch.no_grad():
            for parameter in net.parameters():
                parameter.add_(0.5)

    monkeypatch.setattr(local_compute, "train", step)
    worker = make_worker(
        tmp_path,
        ScriptedChain(lambda: status()),
        storage,
        genesis,
        trainer_data(),
        adversary=SignFlip(scale=2.0),
    )
    worker.sync()

    # Execute
    cid = worker._trained_update(0, ROOT_ID)

    # Assert: parent − 2·(+0.5) = parent − 1 in every trained weight.
    published = decode_weights(storage.get(cid), ARCH)
    parent = create_model(ARCH, seed=0).state_dict()
    for key, value in parent.items():
        assert torch.allclose(published[key], value - 1.0), key


# -- strategy hooks: merges and a training penalty ------------------------------------------


class MergeAll(FedAvgStrategy):
    """FedAvg whose trained parents are aggregated together, as one merge."""

    def merges(self, parents):  # type: ignore[no-untyped-def]
        return [tuple(parents)]

    def regulariser(self, parent):  # type: ignore[no-untyped-def]
        return ("penalty on", parent)


def test_a_strategys_merge_is_one_aggregation_with_several_parents(tmp_path):
    # Prepare: as above, this trainer and a peer proposed on the root and on model X in
    # round 1; the strategy merges what it trained.
    storage = LocalStorage(tmp_path / "blobs")
    genesis = storage.put(weights_blob(0))
    x_updates = [proposed(i, 0, cid=storage.put(weights_blob(10 + i))) for i in (1, 2)]
    x_ids = [e.args["updateId"] for e in x_updates]
    x = model_id(ROOT_ID, sorted(x_ids))
    events = [*x_updates, *created(2, 0, ROOT_ID, x_ids)]
    for i, parent in ((1, ROOT_ID), (2, ROOT_ID), (1, x), (2, x)):
        cid = storage.put(weights_blob(20 + i + (0 if parent == ROOT_ID else 5)))
        events.append(proposed(i, 1, parent=parent, cid=cid, block=3))
    chain = ScriptedChain(lambda: status(round_=1, phase=Phase.AGGREGATE), events)
    metrics = tmp_path / "metrics.jsonl"
    worker = make_worker(
        tmp_path, chain, storage, genesis, scripted_data(), MergeAll(), metrics_path=metrics
    )
    worker.sync()

    # Execute
    worker._aggregate_phase(1)

    # Assert: one aggregation, both parents ascending, every update on either
    ((name, (aggregation,)),) = chain.sent
    assert name == "submitAggregations"
    assert aggregation.parents == tuple(sorted([ROOT_ID, x]))
    every = sorted(update_id(i, p, 1) for i in (1, 2) for p in (ROOT_ID, x))
    assert list(aggregation.update_ids) == every
    # its weights are the FedAvg of the four, and the metrics name both parents
    merged = model_id(sorted([ROOT_ID, x]), every)
    assert aggregation.weights_cid is not None
    line = json.loads(metrics.read_text().splitlines()[-1])
    assert line["model"] == "0x" + merged.hex()
    assert line["aggregations"][0]["parents"] == ["0x" + p.hex() for p in sorted([ROOT_ID, x])]
    # and the gas of the round's one transaction
    assert line["gas"] == GAS_PER_TRANSACTION


class FineTunes(FedAvgStrategy):
    """FedAvg that reports its aggregate trained further off chain (as FedAvg-FT)."""

    def deployed(self, weights):  # type: ignore[no-untyped-def]
        self.given = weights
        self.reported = self._context().need("train")(weights, None, 2)
        return self.reported


def _bind_with_off_chain_training(strategy: Any, worker: Worker) -> None:
    """Bind ``strategy`` as trainer 1 with ``worker``'s off-chain training view."""
    strategy.bind(
        StrategyContext(
            trainer_id=1,
            seed=0,
            initial_weights=lambda seed: {},
            validation_loss=lambda weights: 0.0,
            train=worker._train_off_chain,
        )
    )


def test_a_trainer_reports_the_model_its_strategy_deploys(tmp_path):
    # Prepare: this trainer and a peer proposed on the root in round 0; the strategy
    # trains the aggregate further, off chain, through the worker's train view
    storage = LocalStorage(tmp_path / "blobs")
    genesis = storage.put(weights_blob(0))
    events = [proposed(i, 0, cid=storage.put(weights_blob(10 + i))) for i in (1, 2)]
    chain = ScriptedChain(lambda: status(round_=0, phase=Phase.AGGREGATE), events)
    metrics = tmp_path / "metrics.jsonl"
    strategy = FineTunes()
    worker = make_worker(
        tmp_path, chain, storage, genesis, trainer_data(), strategy, metrics_path=metrics
    )
    _bind_with_off_chain_training(strategy, worker)
    worker.sync()

    # Execute
    worker._aggregate_phase(0)

    # Assert: the chain gets the FedAvg aggregate; the metrics, the deployed model's figure
    ((name, (aggregation,)),) = chain.sent
    assert name == "submitAggregations" and len(aggregation.update_ids) == 2
    aggregate = decode_weights(storage.get(aggregation.weights_cid), ARCH)
    assert all(torch.equal(strategy.given[k], aggregate[k]) for k in aggregate)
    assert any(not torch.equal(strategy.reported[k], aggregate[k]) for k in aggregate)
    line = json.loads(metrics.read_text().splitlines()[-1])
    expected = worker._evaluate(strategy.reported, split="test")
    assert line["aggregations"][0]["loss"] == pytest.approx(expected.loss)
    assert line["aggregations"][0]["loss"] != pytest.approx(
        worker._evaluate(aggregate, split="test").loss
    )


def test_a_strategys_regulariser_is_handed_to_training(tmp_path, monkeypatch):
    # Prepare: training replaced by a recorder
    storage = LocalStorage(tmp_path / "blobs")
    genesis = storage.put(weights_blob(0))
    penalties: list[Any] = []
    monkeypatch.setattr(
        local_compute, "train", lambda net, data, **kw: penalties.append(kw["penalty"])
    )
    worker = make_worker(
        tmp_path, ScriptedChain(lambda: status()), storage, genesis, trainer_data(), MergeAll()
    )
    worker.sync()

    # Execute
    worker._trained_update(0, ROOT_ID)

    # Assert
    assert penalties == [("penalty on", ROOT_ID)]


@pytest.mark.parametrize(("strategy", "scored"), [(FedAvgStrategy, 1), (FineTunes, 2)])
def test_a_model_scored_after_aggregating_it_is_not_scored_again_as_a_candidate(
    tmp_path, strategy, scored
):
    # Prepare: round 0's aggregate phase, this trainer and a peer having proposed
    storage = LocalStorage(tmp_path / "blobs")
    genesis = storage.put(weights_blob(0))
    ours = [proposed(i, 0, cid=storage.put(weights_blob(10 + i))) for i in (1, 2)]
    ids = [e.args["updateId"] for e in ours]
    now = {"status": status(round_=0, phase=Phase.AGGREGATE)}
    chain = ScriptedChain(lambda: now["status"], ours)
    made = strategy()
    worker = make_worker(tmp_path, chain, storage, genesis, trainer_data(), made)
    _bind_with_off_chain_training(made, worker)
    worker.sync()
    worker._aggregate_phase(0)
    # round 1: its aggregation and the peer's own model are the candidates
    mine, peer = model_id(ROOT_ID, sorted(ids)), model_id(ROOT_ID, [ids[1]])
    chain.chain_events += [
        *created(1, 0, ROOT_ID, ids, block=6),
        *created(2, 0, ROOT_ID, ids[1:], block=7),
    ]
    chain.block_number = lambda: 7  # type: ignore[method-assign]
    now["status"] = status(round_=1)
    worker.sync()
    assert {m.model_id for m in worker.dag.candidates(1)} == {mine, peer}
    seen: list[int] = []
    evaluate_many = worker.compute.evaluate_many

    def counted(arch: str, weights: list[Any], *rest: Any) -> Any:
        seen.append(len(weights))
        return evaluate_many(arch, weights, *rest)

    worker.compute.evaluate_many = counted  # type: ignore[method-assign]

    # Execute
    worker._choose_models(1)

    # Assert: when it deployed its aggregate's very weights, that score is reused (and is
    # what scoring them again gives); a fine-tuned deployment was scored on other
    # weights, so the candidate is scored anew
    assert seen == [scored]
    if scored == 1:
        weights, kept = worker._scored[mine]
        assert kept == worker._evaluate(worker.book.model(mine))
        assert weights is worker.book.model(mine)


def test_calibrated_weights_shift_only_the_output_bias_towards_the_trainers_label_mix(tmp_path):
    # Prepare: a trainer whose training labels are class 3 four times in five; a worker
    # whose strategy records what the selection split is scored with
    data = dataclasses.replace(trainer_data(40), train_y=torch.tensor([3, 3, 3, 3, 7] * 8))
    strategy = make_strategy("fedavg")
    scored: list[Any] = []
    strategy.scored = lambda w: scored.append(w) or w  # type: ignore[method-assign]
    worker = make_worker(tmp_path, ScriptedChain(lambda: status()), data=data, strategy=strategy)
    weights = create_model(ARCH, seed=0).state_dict()
    bias = list(weights)[-1]

    # Execute
    calibrated = worker._calibrated(weights)
    again = worker._calibrated(calibrated)
    worker._evaluate(weights)
    worker._evaluate(weights, split="test")

    # Assert: the last layer's bias moves, class 3 up most; every other tensor is the
    # very same object; calibrated weights are not fitted twice; only the selection
    # split goes through the strategy's scored version
    shift = calibrated[bias] - weights[bias]
    assert int(shift.argmax()) == 3 and float(shift[3]) > float(shift[7]) > float(shift[0])
    assert all(calibrated[k] is weights[k] for k in weights if k != bias)
    assert again is calibrated
    assert len(scored) == 1 and scored[0] is weights


def test_calibrating_equal_weights_again_reuses_the_fit_of_the_last_ones(tmp_path, monkeypatch):
    # Prepare: a classifier's trainer that counts its label-mix fits and keeps two
    from mcfl_chain.worker import rounds

    fits: list[str] = []
    fit = rounds.fit_class_bias

    def counted(logits: torch.Tensor, labels: torch.Tensor, solver: str) -> torch.Tensor:
        fits.append(solver)
        return fit(logits, labels, solver)

    monkeypatch.setattr(rounds, "fit_class_bias", counted)
    monkeypatch.setattr(rounds, "CALIBRATIONS_KEPT", 2)
    data = dataclasses.replace(trainer_data(40), train_y=torch.tensor([3, 3, 3, 3, 7] * 8))
    worker = make_worker(tmp_path, ScriptedChain(lambda: status()), data=data)
    weights = create_model(ARCH, seed=0).state_dict()
    bias = list(weights)[-1]
    fresh = worker._calibrated(weights)
    others = [create_model(ARCH, seed=s).state_dict() for s in (1, 2)]

    # Execute: the same tensors in a new dict, then equal values in other tensors, then
    # two other models, then the first again, then by the other solver
    again = worker._calibrated(dict(weights))
    copied = worker._calibrated({k: v.clone() for k, v in weights.items()})
    for other in others:
        worker._calibrated(other)
    evicted = worker._calibrated(weights)
    newton = worker._calibrated(weights, "newton")

    # Assert: equal weights are fitted once and shifted by the same bits; the oldest
    # fit is forgotten beyond the kept number and made again, to the same bits
    assert fits[:-1] == ["lbfgs"] * 4
    assert torch.equal(again[bias], fresh[bias]) and torch.equal(copied[bias], fresh[bias])
    assert all(again[k] is weights[k] for k in weights if k != bias)
    assert torch.equal(evicted[bias], fresh[bias])
    assert len(worker._calibrations) == 2
    # another solver is another fit, of the same optimum
    assert fits[-1] == "newton"
    assert torch.allclose(newton[bias], fresh[bias], atol=5e-3)
