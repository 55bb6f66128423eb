"""Stateful test: random sequences of protocol calls against a Python reference model.

Rules drive register / propose / finishProposals / aggregate / nextRound / trainer-token
transfer / waiting past the phase deadline across several trainers. Each call must succeed
exactly when the reference model says it may, and after every step the invariants hold:

- every model's parent exists and was appended in an earlier round (the root excepted);
- following parents from any model reaches the root: the DAG has no cycle;
- each model's popularity equals the number of accepted aggregations with its id;
- (round, phase) only moves forward;
- the counted votes of the phase equal the distinct quorum members that voted in it, so
  no trainer is counted twice, and never exceed the quorum;
- a phase only advanced on a vote that completed the quorum or came after the deadline.
"""

from ape.exceptions import ContractLogicError
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from mcfl_chain.dag.model_id import ROOT_MODEL_ID, model_id, update_id

from .conftest import cid_bin, deploy

ACCOUNTS = 6  # five trainers may register; the sixth receives rotated keys
DURATION = 1000
PROPOSE, AGGREGATE = 0, 1


class ProtocolMachine(RuleBasedStateMachine):
    """Drives the three contracts; the attributes below are the reference model."""

    env: dict = {}

    def __init__(self):
        super().__init__()
        env = self.env
        env["chain"].restore(env["snapshot"])
        env["snapshot"] = env["chain"].snapshot()
        self.trainers, self.models, self.updates = env["contracts"]
        self.people = env["people"][:ACCOUNTS]
        self.chain = env["chain"]
        self.trainer_of: dict[str, int] = {}  # address -> trainer id
        self.started = False
        self.round = 0
        self.phase = PROPOSE
        self.quorum = 0
        self.votes = 0
        self.voted: set[int] = set()  # trainer ids that voted this phase
        self.expired = False  # the test moved time past the deadline
        self.popularity: dict[bytes, int] = {ROOT_MODEL_ID: 1}
        self.model_round: dict[bytes, int] = {ROOT_MODEL_ID: 0}
        self.proposals: dict[int, tuple[str, bytes, int]] = {}  # id -> proposer, parent, round
        self.aggregated: set[int] = set()
        self.position = (0, PROPOSE)

    def _send(self, call, *args, sender):
        try:
            return call(*args, sender=sender)
        except ContractLogicError:
            return None

    def _current_updates(self, parent):
        return sorted(
            u for u, (_, p, r) in self.proposals.items() if p == parent and r == self.round
        )

    # -- rules ---------------------------------------------------------------------

    @rule(who=st.integers(0, ACCOUNTS - 2))
    def register(self, who):
        person = self.people[who]
        ok = person.address not in self.trainer_of
        receipt = self._send(self.trainers.register, sender=person)
        assert (receipt is not None) == ok
        if ok:
            self.trainer_of[person.address] = len(self.trainer_of) + 1
            if not self.started and len(self.trainer_of) >= self.env["min_trainers"]:
                self.started, self.quorum = True, len(self.trainer_of)

    @rule(
        who=st.integers(0, ACCOUNTS - 1), pick=st.integers(0, 10**6), samples=st.integers(1, 10_000)
    )
    def propose(self, who, pick, samples):
        person = self.people[who]
        candidates = sorted(self.model_round)
        parent = candidates[pick % len(candidates)]
        uid = update_id(person.address, parent, self.round)
        ok = (
            person.address in self.trainer_of
            and self.started
            and self.phase == PROPOSE
            and uid not in self.proposals
        )
        receipt = self._send(
            self.updates.propose, parent, cid_bin(f"{uid}"), samples, sender=person
        )
        assert (receipt is not None) == ok
        if ok:
            self.proposals[uid] = (person.address, parent, self.round)

    def _vote(self, who, expected_phase, call):
        person = self.people[who]
        trainer = self.trainer_of.get(person.address, 0)
        repeat = trainer in self.voted
        ok = (
            trainer != 0
            and self.started
            and self.phase == expected_phase
            and (not repeat or self.expired)
        )
        receipt = self._send(call, sender=person)
        assert (receipt is not None) == ok
        if not ok:
            return
        if not repeat:
            self.voted.add(trainer)
            if trainer <= self.quorum:
                self.votes += 1
        advanced = self.models.phase() != self.phase or self.models.round() != self.round
        # Only the quorum or the deadline advances a phase, and they always do.
        assert advanced == (self.votes >= self.quorum or self.expired)
        if advanced:
            if self.phase == AGGREGATE:
                self.round += 1
                self.quorum = len(self.trainer_of)
            self.phase = 1 - self.phase
            self.votes, self.voted, self.expired = 0, set(), False

    @rule(who=st.integers(0, ACCOUNTS - 1))
    def finish_proposals(self, who):
        self._vote(who, PROPOSE, self.models.finishProposals)

    @rule(who=st.integers(0, ACCOUNTS - 1))
    def next_round(self, who):
        self._vote(who, AGGREGATE, self.models.nextRound)

    @rule(
        who=st.integers(0, ACCOUNTS - 1),
        pick=st.integers(0, 10**6),
        mask=st.integers(0, 2**8 - 1),
        keep_own=st.booleans(),
    )
    def aggregate(self, who, pick, mask, keep_own):
        person = self.people[who]
        parents = sorted({p for _, p, r in self.proposals.values() if r == self.round})
        if not parents:
            return
        parent = parents[pick % len(parents)]
        pool = self._current_updates(parent)
        chosen = [u for i, u in enumerate(pool) if mask >> (i % 8) & 1]
        own = update_id(person.address, parent, self.round)
        if keep_own and own in pool and own not in chosen:
            chosen = sorted([*chosen, own])
        ok = (
            person.address in self.trainer_of
            and self.started
            and self.phase == AGGREGATE
            and bool(chosen)
            and own in chosen
            and own not in self.aggregated
        )
        receipt = self._send(self.updates.aggregate, chosen, b"", sender=person)
        assert (receipt is not None) == ok
        if ok:
            new = model_id(parent, chosen)
            self.aggregated.add(own)
            self.popularity[new] = self.popularity.get(new, 0) + 1
            self.model_round.setdefault(new, self.round)

    @rule(who=st.integers(0, ACCOUNTS - 2))
    def rotate_key(self, who):
        person, spare = self.people[who], self.people[ACCOUNTS - 1]
        trainer = self.trainer_of.get(person.address)
        ok = trainer is not None and spare.address not in self.trainer_of
        receipt = self._send(self.trainers.transferFrom, person, spare, trainer or 0, sender=person)
        assert (receipt is not None) == ok
        if ok:
            self.trainer_of[spare.address] = self.trainer_of.pop(person.address)
            # Send the identity back so the same five addresses keep playing.
            self.trainers.transferFrom(spare, person, trainer, sender=spare)
            self.trainer_of[person.address] = self.trainer_of.pop(spare.address)

    @precondition(lambda self: self.started)
    @rule()
    def wait_past_deadline(self):
        target = self.models.phaseDeadline() + 1
        if target > self.chain.blocks.head.timestamp:
            self.chain.pending_timestamp = target
        self.expired = True

    # -- invariants ----------------------------------------------------------------

    @invariant()
    def dag_is_rooted_acyclic_and_popularity_counts_aggregations(self):
        assert self.models.totalSupply() == len(self.popularity)
        for model, count in self.popularity.items():
            assert self.models.popularityOf(model) == count
            if model == ROOT_MODEL_ID:
                continue
            parent = self.models.parentOf(model)
            assert self.models.modelExists(parent)
            assert (
                self.models.roundOf(parent) < self.models.roundOf(model)
                or parent == ROOT_MODEL_ID
                and self.models.roundOf(model) == 0
            )
            seen, node = set(), model
            while node != ROOT_MODEL_ID:
                assert node not in seen
                seen.add(node)
                node = self.models.parentOf(node)

    @invariant()
    def round_and_phase_only_move_forward(self):
        position = (self.models.round(), self.models.phase())
        assert position >= self.position
        assert position == (self.round, self.phase)
        self.position = position

    @invariant()
    def votes_count_each_quorum_member_once(self):
        counted = {t for t in self.voted if t <= self.quorum}
        assert self.models.votes() == len(counted) == self.votes
        assert self.models.votes() <= self.models.quorum() or not self.started
        assert self.models.quorum() == self.quorum


def test_protocol_state_machine(project, deployer, people, chain):
    # Prepare: one deployment with a deadline; each example restores its snapshot
    contracts = deploy(project, deployer, min_trainers=3, phase_duration=DURATION)
    ProtocolMachine.env = {
        "contracts": contracts,
        "people": people,
        "chain": chain,
        "snapshot": chain.snapshot(),
        "min_trainers": 3,
    }
    # Execute / Assert
    run_state_machine_as_test(
        ProtocolMachine, settings=settings(max_examples=10, stateful_step_count=25, deadline=None)
    )
