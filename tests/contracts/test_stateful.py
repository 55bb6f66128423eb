"""Stateful test: random sequences of protocol calls against a Python reference model.

Rules drive registration (under open registration, and under an allowlist whose admin
admits and revokes addresses), exit, key rotation (trainer-token transfer), proposals,
single and merged aggregations (with the caller's own update sometimes left out, and each
with an aggregation rule: FedAvg, median or a trimmed mean), bare votes, ``join`` (a bare
vote in either phase) and waiting past the phase deadline. Each call must succeed exactly
when the reference model says it may, and after every step these invariants hold:

- one proposal and one aggregation per (trainer id, parent, round), whichever address
  held the trainer token, read from the events;
- every parent of a model exists and comes from an earlier round (the root excepted),
  and following parents from any model reaches the root: the DAG has no cycle;
- each model's popularity equals the number of accepted aggregations with its id;
- each model's id commits to its rule, which its event and ``ruleOf`` report;
- (round, phase) only moves forward, and a phase ended only on a vote that completed
  its quorum or came after its deadline (checked on every vote);
- the quorum of a phase is the set of trainers that voted in the previous one (round 0's
  first phase: the trainers live when it opened), plus, when that phase ended at its
  deadline and was not itself a carry-over, its members that did not vote: a member
  silent through one phase is waited for in the next, one silent through two is no
  longer a member, and a returning one (or one that joined) is a member again from the
  phase after its vote;
- every member voted in the previous phase or, in a carry-over phase, the one before,
  and no carry-over phase follows another (members stay at most one phase without
  acting); ``join`` is accepted in either phase from every registered trainer that has
  not voted in it;
- the counted votes are the distinct members that voted, never above the quorum;
- an exit is refused in a round in which the trainer voted, and a member that exits
  leaves the current quorum (the phase ends when that completes it): every voter of a
  phase is live, so a burnt id is never a member of the next quorum;
- under the allowlist, registering uses the address's admission up: the trainer ids
  ever registered (so the live ones too) are at most the admissions granted.
"""

import random

import pytest
from ape.exceptions import ContractLogicError
from hypothesis import event, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from mcfl_chain.dag.model_id import ROOT_MODEL_ID, model_id, update_id

from .conftest import AGGREGATE, ALLOWLIST, OPEN, PROPOSE, ZERO, cid_bin, deploy

ACCOUNTS = 7
MIN_TRAINERS = 3
DURATION = 100_000  # far above a test's run time: only the wait rule expires a phase
RULES = [(0, 0), (0, 0), (1, 0), (2, 2000)]
"""(code, parameter) an aggregation may carry: FedAvg twice as often, median, trimmed mean."""


class _Views:
    """Reads of a contract's views through web3, each made once per chain state.

    The invariants read the state after every step, and through ape each call also
    re-validates its arguments and looks up the contract's code (about three times the
    EVM's own work). A step that changed nothing on chain (a refused call: a revert undoes
    everything) is checked against the same reads; :meth:`forget` drops them when a call
    went through or the clock moved. Calls name their (funded) sender, or web3 asks the
    node for its accounts before each one.
    """

    def __init__(self, contract, sender):
        abi = [item.model_dump(mode="json", by_alias=True) for item in contract.contract_type.abi]
        web3 = contract.provider.web3
        self._functions = web3.eth.contract(address=contract.address, abi=abi).functions
        self._sender = {"from": sender}
        self._read: dict[tuple, object] = {}

    def __getattr__(self, name):
        def read(*args):
            key = (name, *args)
            if key not in self._read:
                self._read[key] = getattr(self._functions, name)(*args).call(self._sender)
            return self._read[key]

        return read

    def forget(self):
        self._read.clear()


class ProtocolMachine(RuleBasedStateMachine):
    """Drives the three contracts; the attributes below are the reference model."""

    env: dict = {}

    def __init__(self):
        super().__init__()
        env = self.env
        env["chain"].restore(env["snapshot"])
        env["snapshot"] = env["chain"].snapshot()
        self.trainers, self.models, self.updates = env["contracts"]
        reader = env["people"][0].address
        self.read_trainers = _Views(self.trainers, reader)
        self.read_models = _Views(self.models, reader)
        self.people = env["people"][:ACCOUNTS]
        self.admin = env["admin"]
        self.allowlist = env["policy"] == ALLOWLIST
        self.admitted: set[str] = set()  # addresses with an unused admission
        self.granted = 0  # admissions granted (an address admitted while it had none)
        self.last_vote: dict[int, int] = {}  # trainer id -> round of its last vote
        self.chain = env["chain"]
        self.trainer_of: dict[str, int] = {}  # address -> live trainer id
        self.last_id = 0
        self.started = False
        self.round, self.phase = 0, PROPOSE
        self.quorum = 0
        self.members: set[int] = set()  # live trainer ids whose votes count this phase
        self.carry = False  # this phase's quorum holds the last one's silent members
        self.carries = [False]  # carry flag of every phase so far
        self.voted_in: dict[int, int] = {}  # trainer id -> number of the last phase it voted in
        self.voters: set[int] = set()  # trainer ids that voted this phase
        self.counted: set[int] = set()  # ... and counted in its quorum
        self.expired = False
        self.dag: dict[bytes, dict] = {ROOT_MODEL_ID: {"parents": [], "round": 0, "popularity": 1}}
        self.proposals: dict[tuple[int, bytes, int], int] = {}  # (id, parent, round) -> uid
        self.proposed_events: list[tuple[int, bytes, int]] = []
        self.aggregated_events: list[tuple[int, bytes, int]] = []
        self.position = (0, PROPOSE)
        self.touched: set[bytes] = set()  # models aggregated since the last check

    # -- helpers -----------------------------------------------------------------------

    def _send(self, call, *args, sender):
        try:
            receipt = call(*args, sender=sender)
        except ContractLogicError:
            return None
        self._state_changed()
        return receipt

    def _state_changed(self):
        self.read_trainers.forget()
        self.read_models.forget()

    def _phase_number(self):
        return 2 * self.round + self.phase + 1

    def _is_member(self, trainer):
        return trainer in self.members

    def _may_vote(self, trainer, phase, submitting):
        if not (trainer and self.started and self.phase == phase):
            return False
        return trainer not in self.voters or (self.expired and not submitting)

    def _count_vote(self, trainer):
        """Apply an accepted vote; check the phase moved exactly when it had to."""
        if trainer not in self.voters:
            if self._is_member(trainer):
                self.counted.add(trainer)
            self.voters.add(trainer)
            self.last_vote[trainer] = self.round
            self.voted_in[trainer] = self._phase_number()
        self._check_phase_end(len(self.counted) >= self.quorum or self.expired)

    def _check_phase_end(self, should_end, why=None):
        ended = tuple(self.read_models.statusOf(ZERO)[1:3]) != (self.round, self.phase)
        assert ended == should_end
        if ended:
            event(why or ("phase ended by its deadline" if self.expired else "by quorum"))
            silent = set() if self.carry else self.members - self.voters
            if silent:
                event("silent members carried over")
            self.round += self.phase
            self.phase = 1 - self.phase
            self.members, self.carry = self.voters | silent, bool(silent)
            self.carries.append(self.carry)
            self.quorum = len(self.members)
            self.voters, self.counted, self.expired = set(), set(), False

    def _caller(self, who):
        """Mostly a live trainer, sometimes any account (an outsider, or a former key)."""
        candidates = sorted(self.trainer_of) + [p.address for p in self.people]
        address = candidates[who % len(candidates)]
        return next(p for p in self.people if p.address == address)

    def _pool(self, parent):
        """This round's updates of ``parent``: uid -> proposing trainer id."""
        return {
            uid: t for (t, p, r), uid in self.proposals.items() if p == parent and r == self.round
        }

    # -- rules ---------------------------------------------------------------------------

    @initialize()
    def open_round_zero(self):
        """Four trainers: the third opens round 0, the fourth registers after it opened
        (under the allowlist, each admitted first)."""
        for who in range(MIN_TRAINERS + 1):
            if self.allowlist:
                self.set_allowed([who], True)
            self.register(who)

    @precondition(lambda self: self.allowlist)
    @rule(whom=st.lists(st.integers(0, ACCOUNTS - 1), max_size=3), allowed=st.booleans())
    def set_allowed(self, whom, allowed):
        """The admin admits or revokes addresses (an outsider's try is refused)."""
        accounts = [self.people[w] for w in whom]
        assert (
            self._send(self.trainers.setAllowed, accounts, allowed, sender=self.people[0]) is None
        )
        receipt = self._send(self.trainers.setAllowed, accounts, allowed, sender=self.admin)
        assert receipt is not None
        for account in accounts:
            if allowed and account.address not in self.admitted:
                self.granted += 1
                self.admitted.add(account.address)
            elif not allowed:
                self.admitted.discard(account.address)

    @rule(who=st.integers(0, ACCOUNTS - 1))
    def register(self, who):
        person = self.people[who]
        ok = person.address not in self.trainer_of and (
            not self.allowlist or person.address in self.admitted
        )
        assert (self._send(self.trainers.register, sender=person) is not None) == ok
        if ok:
            self.admitted.discard(person.address)
            self.last_id += 1
            self.trainer_of[person.address] = self.last_id
            if not self.started and len(self.trainer_of) >= MIN_TRAINERS:
                self.started, self.quorum = True, len(self.trainer_of)
                self.members = set(self.trainer_of.values())

    @rule(who=st.integers(0, ACCOUNTS - 1))
    def exit(self, who):
        person = self.people[who]
        trainer = self.trainer_of.get(person.address, 0)
        voted = self.started and self.last_vote.get(trainer) == self.round
        ok = trainer != 0 and not voted
        assert (self._send(self.trainers.exit, sender=person) is not None) == ok
        event(f"exit accepted={ok}" + (" (voted this round)" if voted else ""))
        if ok:
            del self.trainer_of[person.address]
            if self.started and self._is_member(trainer):
                event("a member exited: quorum - 1")
                self.members.discard(trainer)
                self.quorum -= 1
                ends = bool(self.voters) and len(self.counted) >= self.quorum
                self._check_phase_end(ends, "phase ended by a member's exit")

    @rule(who=st.integers(0, ACCOUNTS - 1), to=st.integers(0, ACCOUNTS - 1))
    def rotate_key(self, who, to):
        person, target = self.people[who], self.people[to]
        trainer = self.trainer_of.get(person.address, 0)
        ok = trainer != 0 and target.address not in self.trainer_of
        receipt = self._send(self.trainers.transferFrom, person, target, trainer, sender=person)
        assert (receipt is not None) == ok
        if ok:
            self.trainer_of[target.address] = self.trainer_of.pop(person.address)

    @rule(
        who=st.integers(0, 2 * ACCOUNTS),
        picks=st.lists(st.integers(0, 10**6), max_size=3),
        merge=st.booleans(),
        keep=st.integers(0, 2**16 - 1),
        drop_own=st.booleans(),
    )
    def submit(self, who, picks, merge, keep, drop_own):
        """One call of the current phase, by anyone, possibly invalid."""
        person = self._caller(who)
        if self.phase == PROPOSE:
            candidates = sorted(self.dag)
            self._propose(person, [candidates[p % len(candidates)] for p in picks])
        else:
            self._aggregate(person, len(picks), merge, keep, drop_own)

    @rule(seed=st.integers(0, 2**32), silent=st.just(0) | st.integers(0, 2**ACCOUNTS - 1))
    def everyone_acts(self, seed, silent):
        """Every live trainer that has not voted submits valid work of the phase, except
        the ``silent`` ones (by account); stops once the phase ends."""
        chance = random.Random(seed)
        position = (self.round, self.phase)
        for index, person in enumerate(self.people):
            trainer = self.trainer_of.get(person.address, 0)
            if (
                not trainer
                or trainer in self.voters
                or silent >> index & 1
                or (self.round, self.phase) != position
            ):
                continue
            if self.phase == PROPOSE:
                models = sorted(self.dag)
                self._propose(person, chance.sample(models, min(len(models), chance.randint(1, 2))))
            else:
                self._aggregate(person, 2, chance.random() < 0.5, chance.getrandbits(16), False)

    @precondition(lambda self: self.started)
    @rule(seed=st.integers(0, 2**32), who=st.integers(0, ACCOUNTS - 1))
    def all_act_but_one_who_leaves(self, seed, who):
        """Every live trainer acts but account ``who``, which then exits: refused if it
        voted in this round, else it leaves the quorum, which may end the phase."""
        self.everyone_acts(seed, 1 << who)
        self.exit(who)

    @precondition(lambda self: self.started)
    @rule(seed=st.integers(0, 2**32), who=st.integers(0, 2 * ACCOUNTS))
    def everyone_stops_past_the_deadline_then_returns(self, seed, who):
        """Every trainer stops until the deadline has passed; the first one back (``who``,
        with ``join``) ends the phase alone, then all the others act in the next one,
        which waits for the overdue phase's silent members."""
        self.wait_past_deadline()
        self.join(who)
        self.everyone_acts(seed, 0)

    @rule(who=st.integers(0, 2 * ACCOUNTS))
    def join(self, who):
        """A bare vote in whichever phase is open, by anyone (refused to outsiders, before
        round 0, and to a trainer that voted in the phase before its deadline)."""
        person = self._caller(who)
        trainer = self.trainer_of.get(person.address, 0)
        ok = self._may_vote(trainer, self.phase, False)
        receipt = self._send(self.models.join, sender=person)
        assert (receipt is not None) == ok
        event(f"join accepted={ok}" + (" (a member)" if self._is_member(trainer) else ""))
        if ok:
            self._count_vote(trainer)

    def _propose(self, person, parents):
        trainer = self.trainer_of.get(person.address, 0)
        ok = self._may_vote(trainer, PROPOSE, bool(parents)) and len(set(parents)) == len(parents)
        proposals = [(p, cid_bin(f"{trainer}-{p.hex()}-{self.round}"), 1 + len(p)) for p in parents]
        receipt = self._send(self.models.submitProposals, proposals, sender=person)
        assert (receipt is not None) == ok
        event(f"proposals: {len(parents)} accepted={ok}")
        if not ok:
            return
        events = receipt.decode_logs(self.updates.UpdateProposed)
        assert [e.parent for e in events] == parents
        for e in events:
            key = (e.trainerId, e.parent, e.round)
            self.proposed_events.append(key)
            self.proposals[key] = e.updateId
        self._count_vote(trainer)

    def _aggregate(self, person, count, merge, keep, drop_own):
        """Aggregate up to ``count`` of the caller's parents of this round, separately or
        merged, each with its own update and the others chosen by ``keep``, and an
        aggregation rule chosen by ``keep`` too (FedAvg, median or a trimmed mean);
        ``drop_own`` leaves the caller's own update of the first parent out (a refusal)."""
        trainer = self.trainer_of.get(person.address, 0)
        mine = sorted(p for (t, p, r) in self.proposals if t == trainer and r == self.round)
        chosen = mine[:count]
        groups = [chosen] if merge and chosen else [[p] for p in chosen]
        aggregations = []
        for group in groups:
            ids = {self.proposals[(trainer, parent, self.round)] for parent in group}
            for parent in group:
                ids |= {
                    uid for k, uid in enumerate(sorted(self._pool(parent))) if keep >> (k % 16) & 1
                }
            if drop_own:
                ids.discard(self.proposals[(trainer, group[0], self.round)])
            rule = RULES[(keep >> (2 * len(aggregations))) & 3]
            aggregations.append((group, sorted(ids), rule))
        ok = self._may_vote(trainer, AGGREGATE, bool(aggregations)) and not (
            drop_own and aggregations
        )
        receipt = self._send(
            self.models.submitAggregations,
            [(len(g), len(ids), *rule, b"") for g, ids, rule in aggregations],
            [p for g, _, _ in aggregations for p in g],
            [u for _, ids, _ in aggregations for u in ids],
            sender=person,
        )
        assert (receipt is not None) == ok
        event(f"aggregations: {[len(g) for g, _, _ in aggregations]} accepted={ok}")
        if not ok:
            return
        for e in receipt.decode_logs(self.models.ModelCreated):
            self._record_created(e)
        appended = receipt.decode_logs(self.models.ModelAppended)
        assert [e.modelId for e in appended] == [
            model_id(g, ids, *rule) for g, ids, rule in aggregations
        ]
        for e, (group, _, _) in zip(appended, aggregations, strict=True):
            self.dag[e.modelId]["popularity"] += 1
            self.touched.add(e.modelId)
            assert e.trainerId == trainer
            self.aggregated_events += [(trainer, p, e.round) for p in group]
        self._count_vote(trainer)

    def _record_created(self, e):
        rule = (e.rule, e.ruleParameter)
        assert e.modelId == model_id(list(e.parents), list(e.updateIds), *rule)
        assert rule in RULES and tuple(self.read_models.ruleOf(e.modelId)) == rule
        assert e.modelId not in self.dag
        assert e.round == self.round == self.read_models.roundOf(e.modelId)
        assert all(self.read_models.modelExists(p) for p in e.parents)
        event("merge created" if len(e.parents) > 1 else "model created")
        self.dag[e.modelId] = {"parents": list(e.parents), "round": e.round, "popularity": 0}

    @precondition(lambda self: self.started)
    @rule()
    def wait_past_deadline(self):
        target = self.read_models.phaseDeadline()
        if target > self.chain.blocks.head.timestamp:
            self.chain.pending_timestamp = target
            self._state_changed()
        self.expired = True

    # -- invariants ------------------------------------------------------------------------

    @invariant()
    def one_proposal_and_one_aggregation_per_trainer_parent_and_round(self):
        assert len(set(self.proposed_events)) == len(self.proposed_events)
        assert len(set(self.aggregated_events)) == len(self.aggregated_events)
        for (trainer, parent, round_), uid in self.proposals.items():
            assert uid == update_id(trainer, parent, round_)

    @invariant()
    def dag_is_rooted_acyclic_and_popularity_counts_aggregations(self):
        # On chain: the models aggregated in this step (every model in teardown).
        assert self.read_models.totalSupply() == len(self.dag)
        for model in self.touched:
            assert self.read_models.popularityOf(model) == self.dag[model]["popularity"]
        self.touched = set()
        for record in self.dag.values():
            for parent in record["parents"]:
                assert parent == ROOT_MODEL_ID or self.dag[parent]["round"] < record["round"]
        self._assert_acyclic()

    def teardown(self):
        for model, record in self.dag.items():
            assert self.read_models.popularityOf(model) == record["popularity"]

    def _assert_acyclic(self):
        """Depth-first search over parent links: no node is met again on its own path."""
        done: set[bytes] = set()
        for start in self.dag:
            path, stack = set(), [(start, iter(self.dag[start]["parents"]))]
            path.add(start)
            while stack:
                node, parents = stack[-1]
                parent = next(parents, None)
                if parent is None:
                    stack.pop()
                    path.discard(node)
                    done.add(node)
                elif parent not in done:
                    assert parent not in path, "cycle in the model DAG"
                    path.add(parent)
                    stack.append((parent, iter(self.dag[parent]["parents"])))

    @invariant()
    def voters_are_live_and_admissions_bound_identities(self):
        """A burnt id never voted in its phase (so it is never in the next quorum); under
        the allowlist, identities ever registered <= admissions granted."""
        assert self.voters <= set(self.trainer_of.values())
        if self.allowlist:
            trainers = self.read_trainers
            assert trainers.totalSupply() <= trainers.lastTrainerId() <= self.granted
            for address in (person.address for person in self.people):
                assert trainers.isAllowed(address) == (address in self.admitted)

    @invariant()
    def members_acted_within_a_phase_and_carry_overs_do_not_chain(self):
        """Membership outlives a member's silence by one phase at most."""
        if not self.started:
            return
        assert self.quorum == len(self.members)
        assert self.members <= set(self.trainer_of.values())
        number = self._phase_number()
        if number > 1:
            allowed = {number - 1, number - 2} if self.carry else {number - 1}
            for member in self.members - self.voters:
                # Round 0's first members that never voted count as of phase 0.
                assert self.voted_in.get(member, 0) in allowed
        assert not any(a and b for a, b in zip(self.carries, self.carries[1:], strict=False))

    @invariant()
    def round_state_and_quorum_match_the_reference(self):
        """Read through `statusOf` (one call per live trainer gives everything)."""
        for address in sorted(self.trainer_of) or [ZERO]:
            status = self.read_models.statusOf(address)
            started, round_, phase, voted, member, _, votes, quorum, voters = status
            assert started == self.started
            assert (round_, phase) == (self.round, self.phase) >= self.position
            if not started:
                continue
            assert (quorum, votes, voters) == (self.quorum, len(self.counted), len(self.voters))
            assert votes <= quorum
            trainer = self.trainer_of.get(address, 0)
            if trainer:
                assert voted == (trainer in self.voters)
                assert member == (trainer in self.counted if voted else self._is_member(trainer))
        self.position = (self.round, self.phase)


@pytest.mark.slow  # minutes of calls: `make check` leaves it to `make test`
@pytest.mark.parametrize("policy", [OPEN, ALLOWLIST], ids=["open", "allowlist"])
def test_protocol_state_machine(project, deployer, people, chain, policy):
    # Prepare: one deployment; each example restores its snapshot
    admin = people[10]
    contracts = deploy(
        project,
        deployer,
        min_trainers=MIN_TRAINERS,
        phase_duration=DURATION,
        policy=policy,
        admin=admin if policy == ALLOWLIST else ZERO,
    )
    ProtocolMachine.env = {
        "contracts": contracts,
        "people": people,
        "admin": admin,
        "chain": chain,
        "snapshot": chain.snapshot(),
        "policy": policy,
    }
    # Execute / Assert
    run_state_machine_as_test(
        ProtocolMachine, settings=settings(max_examples=6, stateful_step_count=30, deadline=None)
    )
