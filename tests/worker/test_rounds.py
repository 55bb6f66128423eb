"""The round state machine against a scripted chain: budgets, races at deadlines,
unusable parents, services gone, and what a waiting trainer says."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest

from mcfl_chain.chain.client import ChainEvent, Phase, TrainerStatus
from mcfl_chain.chain.errors import ChainUnavailable
from mcfl_chain.dag.graph import ROOT_ID, ModelDAG, UpdateRecord
from mcfl_chain.learning.codec import encode_weights
from mcfl_chain.learning.models import create_model
from mcfl_chain.storage import LocalStorage, StorageUnavailable, cid_for_bytes
from mcfl_chain.worker.rounds import Worker, WorkerHalted, WorkerOptions
from mcfl_chain.worker.state import WorkerState

ME = "0x00000000000000000000000000000000000000A1"
PEER = "0x00000000000000000000000000000000000000B2"
ARCH = "lenet5"


def status(
    round_: int = 0,
    phase: Phase = Phase.PROPOSE,
    voted: bool = False,
    deadline: int = 0,
    votes: int = 0,
    quorum: int = 2,
) -> TrainerStatus:
    return TrainerStatus(True, round_, phase, voted, deadline, votes, quorum)


def voted(trainer_id: int, round_: int, phase: Phase, block: int = 1) -> ChainEvent:
    return ChainEvent(
        "TrainerVoted",
        block,
        trainer_id,
        "0x" + "00" * 32,
        {
            "round": round_,
            "trainer": ME,
            "phase": int(phase),
            "trainerId": trainer_id,
            "counted": True,
            "votes": 1,
        },
    )


def proposed(proposer: str, round_: int, update_id: int = 7, block: int = 1) -> ChainEvent:
    return ChainEvent(
        "UpdateProposed",
        block,
        0,
        "0x" + "00" * 32,
        {
            "proposer": proposer,
            "parent": ROOT_ID,
            "updateId": update_id,
            "round": round_,
            "cid": cid_for_bytes(b"update"),
            "numSamples": 10,
        },
    )


class ScriptedChain:
    """The few calls a worker makes, answered from a script; transactions are recorded.

    ``statuses`` is called for every ``status()``; ``on_advance`` runs when a trainer
    forces a phase forward (like a transaction being mined).
    """

    def __init__(
        self,
        statuses: Callable[[], TrainerStatus],
        events: list[ChainEvent] | None = None,
        trainer_id: int = 1,
        on_advance: Callable[[], None] | None = None,
    ) -> None:
        self.address = ME
        self.deployment = SimpleNamespace(min_trainers=2)
        self.statuses = statuses
        self.chain_events = events or []
        self.id = trainer_id
        self.on_advance = on_advance
        self.sent: list[tuple[Any, ...]] = []

    def is_registered(self) -> bool:
        return True

    def trainer_id(self) -> int:
        return self.id

    def trainer_count(self) -> int:
        return 1

    def status(self) -> TrainerStatus:
        return self.statuses()

    def block_number(self) -> int:
        return 5

    def events(self, from_block: int, to_block: int) -> list[ChainEvent]:
        return [e for e in self.chain_events if from_block <= e.block_number <= to_block]

    def force_advance(self, phase: Phase) -> None:
        self.sent.append(("advance", self.id, phase))
        if self.on_advance is not None:
            self.on_advance()

    def propose(self, parent: bytes, cid: str, samples: int) -> int:
        self.sent.append(("propose", parent, cid))
        return 1

    def finish_proposals(self) -> None:
        self.sent.append(("finishProposals",))

    def next_round(self) -> None:
        self.sent.append(("nextRound",))

    def aggregate(self, update_ids: list[int], cid: str) -> bytes:
        self.sent.append(("aggregate", tuple(update_ids)))
        return b"\x01" * 32


def make_worker(
    tmp_path, chain: ScriptedChain, storage: Any = None, genesis_cid: str | None = None, **options
) -> Worker:
    state = WorkerState.open(tmp_path / f"state-{chain.id}", ME, deployment_block=0)
    options.setdefault("poll_interval", 0.01)
    return Worker(
        chain,  # type: ignore[arg-type]
        storage or LocalStorage(tmp_path / "blobs"),
        SimpleNamespace(train_y=[0] * 10),  # type: ignore[arg-type]  # no training here
        None,  # type: ignore[arg-type]  # strategy: nor select
        WorkerOptions(arch=ARCH, **options),
        state,
        ModelDAG(genesis_cid=genesis_cid),
    )


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


# -- the round budget ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "evidence",
    [proposed(ME, round_=0), voted(1, 0, Phase.AGGREGATE)],
    ids=["a proposal", "a counted vote"],
)
def test_rounds_count_from_the_first_round_taken_part_in_on_chain(tmp_path, evidence):
    # Prepare: a worker rebuilt in round 1 (its state saw round 1 first) that took part
    # in round 0 according to the chain (it proposed, or it missed the proposal deadline
    # and only voted); the network is now in round 3 of a 3-round run.
    chain = ScriptedChain(lambda: status(round_=3), [evidence])
    worker = make_worker(tmp_path, chain, rounds=3)
    worker.state.first_round = 1

    # Execute
    finished, errors = run_briefly(worker, 5.0)

    # Assert: it stops with the network instead of waiting for a round 4 nobody plays.
    assert finished and errors == []
    assert chain.sent == []


def test_last_round_is_an_absolute_bound_for_a_late_joiner(tmp_path):
    # Prepare: a trainer that joins in round 3 and was told the network ends with round 2.
    chain = ScriptedChain(lambda: status(round_=3))
    worker = make_worker(tmp_path, chain, rounds=5, last_round=2)

    # Execute
    finished, errors = run_briefly(worker, 5.0)

    # Assert
    assert finished and errors == [] and chain.sent == []


# -- races at deadlines -------------------------------------------------------------------


def test_a_proposal_is_not_sent_once_the_phase_moved_on(tmp_path):
    # Prepare: the update is already stored (no training); the phase is PROPOSE when the
    # worker starts the parent and AGGREGATE right before it would send the proposal.
    readings = iter([status(), status(phase=Phase.AGGREGATE)])
    chain = ScriptedChain(lambda: next(readings, status(phase=Phase.AGGREGATE)))
    worker = make_worker(tmp_path, chain)
    worker.state.set_chosen(0, [ROOT_ID])
    worker.state.set_uploaded(0, ROOT_ID, cid_for_bytes(b"update"))

    # Execute
    worker._propose_phase(0)

    # Assert: neither the proposal nor the vote, which would both revert on chain.
    assert chain.sent == []


def test_after_a_deadline_one_voter_advances_the_phase_not_all(tmp_path):
    # Prepare: trainers 1 and 2 voted, the deadline has passed; a forced advance takes
    # 0.3 s to be mined, then the network is in the AGGREGATE phase.
    deadline = int(time.time()) - 1
    network = {"phase": Phase.PROPOSE}

    def reading() -> TrainerStatus:
        if network["phase"] is Phase.PROPOSE:
            return status(voted=True, deadline=deadline, votes=2, quorum=3)
        return status(phase=Phase.AGGREGATE, voted=True, deadline=deadline + 600, quorum=3)

    def mined() -> None:
        time.sleep(0.3)
        network["phase"] = Phase.AGGREGATE

    events = [voted(1, 0, Phase.PROPOSE), voted(2, 0, Phase.PROPOSE, block=2)]
    chains = [ScriptedChain(reading, events, trainer_id=i, on_advance=mined) for i in (1, 2)]
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
    assert [c.sent for c in chains] == [[("advance", 1, Phase.PROPOSE)], []]


# -- what cannot be used ------------------------------------------------------------------


def test_an_unusable_parent_does_not_stop_the_round(tmp_path, caplog):
    # Prepare: this trainer's update on a parent the DAG does not know (its events lost).
    storage = LocalStorage(tmp_path / "blobs")
    cid = storage.put(encode_weights(ARCH, create_model(ARCH, seed=1).state_dict()))
    chain = ScriptedChain(lambda: status(round_=1, phase=Phase.AGGREGATE))
    worker = make_worker(tmp_path, chain, storage)
    lost = b"\x09" * 32
    worker.dag.add_update(UpdateRecord(7, ME, lost, 1, cid, 10))

    # Execute
    worker._aggregate_phase(1)

    # Assert: no aggregation on it, a logged reason, and the vote that lets others go on.
    assert chain.sent == [("nextRound",)]
    assert "cannot be had" in caplog.text and "not on chain" in caplog.text


def test_a_round_without_a_proposal_is_not_counted_as_played(tmp_path):
    # Prepare: nothing of this trainer's on chain in round 0.
    chain = ScriptedChain(lambda: status(phase=Phase.AGGREGATE))
    worker = make_worker(tmp_path, chain)

    # Execute
    worker._aggregate_phase(0)

    # Assert: it still votes (others must not wait), but played nothing.
    assert chain.sent == [("nextRound",)]
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
    "deadline, expected",
    [(0, "no phase deadline"), (int(time.time()) + 3600, "the phase deadline passes in")],
)
def test_a_waiting_trainer_says_whom_it_waits_for(tmp_path, caplog, deadline, expected):
    # Prepare: trainer 1 voted in round 2's PROPOSE phase; trainers 2 and 3 did not.
    chain = ScriptedChain(
        lambda: status(round_=2, voted=True, votes=1, quorum=3, deadline=deadline),
        [voted(1, 2, Phase.PROPOSE)],
    )
    worker = make_worker(tmp_path, chain, wait_log_interval=0.2)

    # Execute
    with caplog.at_level("INFO", logger="mcfl_chain.worker"):
        run_briefly(worker, 0.9)

    # Assert: a few lines, each naming the missing trainers and how the wait ends.
    lines = [r.getMessage() for r in caplog.records if "waited" in r.getMessage()]
    assert 2 <= len(lines) <= 5
    assert all("round 2 propose" in m and "trainer(s) 2, 3 (1 of 3 votes)" in m for m in lines)
    assert all(expected in m for m in lines)
