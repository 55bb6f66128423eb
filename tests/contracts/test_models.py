"""Models: genesis, the round state machine and its quorum rule, model views, the model token."""

import ape
import pytest

from mcfl_chain.chain.cids import cid_to_bytes
from mcfl_chain.dag.model_id import ROOT_MODEL_ID, model_id

from .conftest import (
    AGGREGATE,
    ALL,
    CID_LENGTH_REASON,
    CID_SHAPE_REASON,
    DURATION,
    GENESIS,
    MIN_TRAINERS,
    NOT_STARTED,
    PROPOSE,
    TASK,
    ZERO,
    aggregate,
    cid_bin,
    cid_str,
    deploy,
    propose,
    propose_all,
    read_data_url,
    vote,
    vote_all,
)

ALREADY_VOTED = "Models: this trainer already voted in this phase"
VOTED_THIS_ROUND = "Trainers: this trainer voted in this round; it may exit from the next round on"
PRINTABLE_REASON = (
    "Models: the task descriptor must be printable ASCII without quotes or backslashes"
)
COHORT_REASON = "Models: cohortBps must be between 100 and 10000"


def _past_deadline(models, chain):
    chain.pending_timestamp = models.phaseDeadline()


# -- deployment -----------------------------------------------------------------------------


def test_genesis_root_exists_with_its_cid_and_task(network, deployer):
    _, models, _ = network
    assert models.modelExists(ROOT_MODEL_ID) and models.totalSupply() == 1
    assert (models.roundOf(ROOT_MODEL_ID), models.popularityOf(ROOT_MODEL_ID)) == (0, 1)
    assert models.indexOf(ROOT_MODEL_ID) == 0
    assert models.genesisCid() == cid_to_bytes(GENESIS)
    assert models.task() == TASK and models.minTrainers() == MIN_TRAINERS
    assert models.phaseDuration() == DURATION
    assert models.ownerOf(0) == deployer and models.balanceOf(deployer) == 1


def test_bounds_are_readable(network):
    _, models, updates = network
    assert (
        models.MAX_PROPOSALS(),
        models.MAX_AGGREGATIONS(),
        models.MAX_PARENTS(),
        models.MAX_UPDATES(),
        models.MAX_CALL_UPDATES(),
    ) == (16, 16, 16, 256, 512)
    assert models.CID_LENGTH() == updates.CID_LENGTH() == 36
    assert models.MAX_TASK_LENGTH() == 128
    assert (models.PROPOSE(), models.AGGREGATE()) == (PROPOSE, AGGREGATE)


@pytest.mark.parametrize(
    "args, reason",
    [
        (("bad", TASK, 1, 60, ALL), CID_LENGTH_REASON),
        (("dagcbor", TASK, 1, 60, ALL), CID_SHAPE_REASON),
        (("ok", "", 1, 60, ALL), "Models: the task descriptor must not be empty"),
        (("ok", 'lenet:"x"', 1, 60, ALL), PRINTABLE_REASON),
        (("ok", "lenet:a\\b", 1, 60, ALL), PRINTABLE_REASON),
        (("ok", "lenet:\n", 1, 60, ALL), PRINTABLE_REASON),
        (("ok", "lenet:é", 1, 60, ALL), PRINTABLE_REASON),
        (("ok", TASK, 0, 60, ALL), "Models: minTrainers must be between 1 and 2**32 - 1"),
        (
            ("ok", TASK, 1, 0, ALL),
            "Models: phaseDuration must be between 1 and 2**32 - 1 seconds "
            "(deadlines are mandatory)",
        ),
        (
            ("ok", TASK, 1, 2**32, ALL),
            "Models: phaseDuration must be between 1 and 2**32 - 1 seconds "
            "(deadlines are mandatory)",
        ),
        (("ok", TASK, 1, 60, 99), COHORT_REASON),
        (("ok", TASK, 1, 60, 10_001), COHORT_REASON),
    ],
)
def test_constructor_refuses_bad_parameters(project, deployer, args, reason):
    # Prepare
    trainers = project.Trainers.deploy(0, ZERO, 0, 0, sender=deployer)
    cid = {"ok": cid_bin("g"), "bad": b"\x01\x55", "dagcbor": b"\x01\x71\x12\x20" + bytes(32)}[
        args[0]
    ]
    # Execute / Assert
    with ape.reverts(reason):
        project.Models.deploy(trainers, cid, *args[1:], sender=deployer)


def test_constructor_refuses_a_trainers_address_without_code(project, deployer, people):
    with ape.reverts("Models: the Trainers address is not a contract"):
        project.Models.deploy(people[0], cid_bin("g"), TASK, 1, 60, ALL, sender=deployer)


def test_dag_pb_genesis_cid_round_trips(project, deployer):
    trainers = project.Trainers.deploy(0, ZERO, 0, 0, sender=deployer)
    cid = cid_bin("g", "dag-pb")
    models = project.Models.deploy(trainers, cid, TASK, 1, 60, ALL, sender=deployer)
    assert models.genesisCid() == cid
    traits = {a["trait_type"]: a["value"] for a in read_data_url(models.tokenURI(0))["attributes"]}
    assert traits["weights CID"] == cid_str("g", "dag-pb")


def test_set_updates_is_once_deployer_only_and_checked(project, deployer, people):
    _, models, updates = deploy(project, deployer, link=False)
    _, _, foreign = deploy(project, deployer, link=False)
    with ape.reverts("Models: only the deployer may link the Updates contract"):
        models.setUpdates(updates, sender=people[0])
    with ape.reverts("Models: the Updates address is not a contract"):
        models.setUpdates(people[0], sender=deployer)
    with ape.reverts("Models: that Updates contract belongs to another Models contract"):
        models.setUpdates(foreign, sender=deployer)
    models.setUpdates(updates, sender=deployer)
    assert models.updates() == updates.address
    with ape.reverts("Models: the Updates contract is already linked"):
        models.setUpdates(updates, sender=deployer)


# -- round 0 ------------------------------------------------------------------------------


def test_round_zero_opens_when_min_trainers_registered(network, people):
    # Prepare
    trainers, models, _ = network
    for p in people[: MIN_TRAINERS - 1]:
        trainers.register(sender=p)
    assert not models.started() and models.quorum() == 0 and models.phaseDeadline() == 0
    # Execute
    receipt = trainers.register(sender=people[MIN_TRAINERS - 1])
    # Assert
    assert models.started() and (models.round(), models.phase()) == (0, PROPOSE)
    assert (models.quorum(), models.votes(), models.voters()) == (MIN_TRAINERS, 0, 0)
    assert models.phaseDeadline() == models.phaseStart() + DURATION
    (changed,) = receipt.decode_logs(models.PhaseChanged)
    assert (changed.round, changed.phase, changed.quorum) == (0, PROPOSE, MIN_TRAINERS)


def test_round_zero_quorum_is_the_live_trainers_when_it_opens(network, people):
    # Prepare: trainer 1 leaves before the round opens; trainer 4 opens it.
    trainers, models, _ = network
    for p in people[:2]:
        trainers.register(sender=p)
    trainers.exit(sender=people[0])
    trainers.register(sender=people[2])
    assert not models.started()
    # Execute
    trainers.register(sender=people[3])
    trainers.register(sender=people[4])
    # Assert: ids 2, 3, 4 are the members; 5 registered after the opening
    assert models.quorum() == 3
    assert [models.statusOf(p)[4] for p in people[1:5]] == [True, True, True, False]
    vote_all(models, people[1:4], PROPOSE)
    assert models.phase() == AGGREGATE


def test_only_trainers_reports_registrations(network, people):
    _, models, _ = network
    with ape.reverts("Models: only the Trainers contract may report registrations"):
        models.trainerRegistered(1, 10, sender=people[0])


def test_votes_before_round_zero_are_refused(network, people):
    trainers, models, _ = network
    trainers.register(sender=people[0])
    with ape.reverts(NOT_STARTED):
        vote(models, people[0], PROPOSE)
    with ape.reverts(NOT_STARTED):
        vote(models, people[0], AGGREGATE)


# -- the round state machine --------------------------------------------------------------


def test_full_round_moves_phases_only_with_the_quorum(running, people):
    # Prepare
    trainers, models, _ = running
    ids = propose_all(models, trainers, people[:2], ROOT_MODEL_ID, "r0")
    assert (models.phase(), models.votes(), models.voters()) == (PROPOSE, 2, 2)
    assert models.hasVoted(people[0]) and not models.hasVoted(people[2])
    # Execute
    last = vote(models, people[2], PROPOSE)
    # Assert
    assert (models.round(), models.phase(), models.votes(), models.quorum()) == (0, AGGREGATE, 0, 3)
    (changed,) = last.decode_logs(models.PhaseChanged)
    assert (changed.round, changed.phase, changed.quorum) == (0, AGGREGATE, 3)
    (voted,) = last.decode_logs(models.TrainerVoted)
    assert (voted.round, voted.trainerId, voted.phase) == (0, 3, PROPOSE)
    assert (voted.counted, voted.votes, voted.voters) == (True, 3, 3)
    aggregate(models, people[0], [([ROOT_MODEL_ID], sorted(ids), b"")])
    vote_all(models, people[1:2], AGGREGATE)
    final = vote(models, people[2], AGGREGATE)
    assert (models.round(), models.phase()) == (1, PROPOSE)
    (new_round,) = final.decode_logs(models.NewRound)
    assert (new_round.prevRound, new_round.round) == (0, 1)


def test_vote_refusals(running, people):
    # Prepare
    _, models, _ = running
    vote(models, people[0], PROPOSE)
    # Execute / Assert
    with ape.reverts(ALREADY_VOTED):
        vote(models, people[0], PROPOSE)
    with ape.reverts("Models: the caller is not a registered trainer"):
        vote(models, people[7], PROPOSE)
    with ape.reverts("Models: aggregations are only submitted in the AGGREGATE phase"):
        vote(models, people[1], AGGREGATE)
    vote_all(models, people[1:3], PROPOSE)
    with ape.reverts("Models: proposals are only submitted in the PROPOSE phase"):
        vote(models, people[0], PROPOSE)


def test_key_rotation_cannot_vote_twice(running, people):
    trainers, models, _ = running
    vote(models, people[0], PROPOSE)
    trainers.transferFrom(people[0], people[6], 1, sender=people[0])
    with ape.reverts(ALREADY_VOTED):
        vote(models, people[6], PROPOSE)
    assert models.hasVoted(people[6]) and not models.hasVoted(people[0])


# -- the quorum rule and deadlines ----------------------------------------------------------


def test_a_newcomer_is_recorded_then_counts_from_the_next_phase(running, people):
    # Prepare
    trainers, models, _ = running
    trainers.register(sender=people[3])
    # Execute
    receipt = vote(models, people[3], PROPOSE)
    # Assert: recorded, not counted, quorum unchanged
    (voted,) = receipt.decode_logs(models.TrainerVoted)
    assert not voted.counted and (voted.votes, voted.voters) == (0, 1)
    assert models.statusOf(people[3])[3:5] == (True, False)
    vote_all(models, people[:3], PROPOSE)
    assert models.phase() == AGGREGATE and models.quorum() == 4
    assert models.statusOf(people[3])[3:5] == (False, True)
    vote_all(models, people[:3], AGGREGATE)
    assert models.phase() == AGGREGATE, "the newcomer is now a member the phase waits for"
    vote(models, people[3], AGGREGATE)
    assert (models.round(), models.quorum()) == (1, 4)


def test_a_silent_trainer_costs_two_deadlines_then_leaves_the_quorum(running, people, chain):
    # Prepare: trainer 3 stays silent
    _, models, _ = running
    vote_all(models, people[:2], PROPOSE)
    assert models.phase() == PROPOSE
    with ape.reverts(ALREADY_VOTED):
        vote(models, people[0], PROPOSE)
    # Execute: after the deadline, a repeated (empty) vote ends the phase
    _past_deadline(models, chain)
    ended = vote(models, people[0], PROPOSE)
    # Assert: no TrainerVoted for a repeat; the silent member is carried over once: the
    # next phase waits for it (or its deadline) too
    assert not ended.decode_logs(models.TrainerVoted)
    (changed,) = ended.decode_logs(models.PhaseChanged)
    assert (changed.phase, changed.quorum) == (AGGREGATE, 3)
    assert models.statusOf(people[2])[4]
    vote_all(models, people[:2], AGGREGATE)
    assert (models.phase(), models.votes(), models.quorum()) == (AGGREGATE, 2, 3)
    _past_deadline(models, chain)
    vote(models, people[0], AGGREGATE)
    # ... and no further: silent through the carry-over phase, it is out of the next one
    assert (models.round(), models.phase(), models.quorum()) == (1, PROPOSE, 2)
    assert not models.statusOf(people[2])[4]
    vote_all(models, people[:2], PROPOSE)
    assert (models.phase(), models.quorum()) == (AGGREGATE, 2)
    # The silent trainer comes back: recorded, a member again from the next phase
    vote(models, people[2], AGGREGATE)
    assert models.votes() == 0 and models.voters() == 1
    vote_all(models, people[:2], AGGREGATE)
    assert (models.round(), models.phase(), models.quorum()) == (2, PROPOSE, 3)


def test_organisations_back_within_a_phase_after_a_pause_are_waited_for(running, people, chain):
    # Prepare: round 0 played by all three; then all stop past round 1's first deadline.
    _, models, _ = running
    vote_all(models, people[:3], PROPOSE)
    vote_all(models, people[:3], AGGREGATE)
    _past_deadline(models, chain)
    # Execute: the first one back ends the overdue phase alone
    vote(models, people[0], PROPOSE)
    # Assert: the two others are still members; the first one's vote does not end the
    # phase before they act (it would have been the whole quorum)
    assert (models.round(), models.phase(), models.quorum()) == (1, AGGREGATE, 3)
    assert [models.statusOf(p)[4] for p in people[:3]] == [True, True, True]
    vote(models, people[0], AGGREGATE)
    assert (models.phase(), models.votes()) == (AGGREGATE, 1)
    back = [vote(models, p, AGGREGATE) for p in people[1:3]]
    assert [r.decode_logs(models.TrainerVoted)[0].counted for r in back] == [True, True]
    assert (models.round(), models.phase(), models.quorum()) == (2, PROPOSE, 3)


def test_the_first_phase_carries_its_silent_members_over(running, people, chain):
    # A trainer registered after round 0 opened is not one of them.
    trainers, models, _ = running
    trainers.register(sender=people[3])
    vote(models, people[0], PROPOSE)
    _past_deadline(models, chain)
    vote(models, people[3], PROPOSE)
    assert (models.phase(), models.quorum()) == (AGGREGATE, 4)
    assert [models.statusOf(p)[4] for p in people[:4]] == [True, True, True, True]
    assert not models.statusOf(people[4])[4]


def test_an_exiting_carried_member_leaves_the_quorum(running, people, chain):
    # Prepare: round 1's PROPOSE phase ends at its deadline without trainer 3
    trainers, models, _ = running
    vote_all(models, people[:3], PROPOSE)
    vote_all(models, people[:3], AGGREGATE)
    vote_all(models, people[:2], PROPOSE)
    _past_deadline(models, chain)
    vote(models, people[0], PROPOSE)
    vote_all(models, people[:2], AGGREGATE)
    assert (models.phase(), models.votes(), models.quorum()) == (AGGREGATE, 2, 3)
    # Execute: it leaves instead of coming back
    receipt = trainers.exit(sender=people[2])
    # Assert: the phase had only waited for it
    assert (models.round(), models.phase(), models.quorum()) == (2, PROPOSE, 2)
    (changed,) = receipt.decode_logs(models.PhaseChanged)
    assert (changed.round, changed.quorum) == (2, 2)


def test_any_first_vote_after_the_deadline_ends_the_phase(running, people, chain):
    # Prepare: a trainer that is not a member registers; nobody votes in time
    trainers, models, _ = running
    trainers.register(sender=people[5])
    _past_deadline(models, chain)
    # Execute
    receipt = vote(models, people[5], PROPOSE)
    # Assert: the newcomer's vote ended the phase; it and the three silent members are
    # the next quorum (never 0)
    (voted,) = receipt.decode_logs(models.TrainerVoted)
    assert not voted.counted
    assert (models.phase(), models.quorum()) == (AGGREGATE, 4)
    vote(models, people[5], AGGREGATE)
    assert models.phase() == AGGREGATE
    _past_deadline(models, chain)
    vote(models, people[5], AGGREGATE)
    assert (models.round(), models.quorum()) == (1, 1)


# -- join: a bare vote in whichever phase is open -------------------------------------------


@pytest.mark.parametrize("phase", [PROPOSE, AGGREGATE], ids=["propose", "aggregate"])
def test_join_is_a_vote_in_either_phase_that_makes_a_member_of_the_next(running, people, phase):
    # Prepare: round 0 at `phase`; trainer 4 registered after it opened
    trainers, models, _ = running
    trainers.register(sender=people[3])
    if phase == AGGREGATE:
        vote_all(models, people[:3], PROPOSE)
    # Execute
    receipt = models.join(sender=people[3])
    # Assert: recorded, not counted; a member of the next phase, which waits for it
    (voted,) = receipt.decode_logs(models.TrainerVoted)
    assert (voted.round, voted.trainerId, voted.phase, voted.counted) == (0, 4, phase, False)
    vote_all(models, people[:3], phase)
    assert models.quorum() == 4 and models.statusOf(people[3])[3:5] == (False, True)
    vote_all(models, people[:3], 1 - phase)
    assert models.votes() == 3 and models.phase() != phase
    vote(models, people[3], 1 - phase)
    assert models.phase() == phase and models.quorum() == 4


def test_a_members_join_is_its_bare_vote(running, people):
    _, models, _ = running
    receipt = models.join(sender=people[0])
    (voted,) = receipt.decode_logs(models.TrainerVoted)
    assert voted.counted and (voted.votes, voted.voters) == (1, 1)
    with ape.reverts(ALREADY_VOTED):
        models.join(sender=people[0])
    with ape.reverts(ALREADY_VOTED):
        vote(models, people[0], PROPOSE)


def test_join_refusals(network, people, chain):
    trainers, models, _ = network
    trainers.register(sender=people[0])
    with ape.reverts(NOT_STARTED):
        models.join(sender=people[0])
    for person in people[1:MIN_TRAINERS]:
        trainers.register(sender=person)
    with ape.reverts("Models: the caller is not a registered trainer"):
        models.join(sender=people[7])
    # After the deadline, a repeated join ends the phase (as a repeated empty call)
    models.join(sender=people[0])
    _past_deadline(models, chain)
    ended = models.join(sender=people[0])
    assert not ended.decode_logs(models.TrainerVoted)
    assert (models.phase(), models.quorum()) == (AGGREGATE, 3)


def test_a_repeated_vote_after_the_deadline_carries_no_submission(running, people, chain):
    _, models, _ = running
    vote(models, people[0], PROPOSE)
    _past_deadline(models, chain)
    with ape.reverts(
        "Models: submissions travel with the trainer's first vote of the phase; "
        "after the deadline only an empty call may end the phase"
    ):
        models.submitProposals([(ROOT_MODEL_ID, cid_bin("late"), 1)], sender=people[0])


def test_an_exited_member_leaves_the_quorum_at_once(running, people):
    trainers, models, _ = running
    trainers.exit(sender=people[2])
    assert models.quorum() == 2
    vote_all(models, people[:2], PROPOSE)
    assert (models.phase(), models.quorum()) == (AGGREGATE, 2)


def test_the_exit_of_the_last_silent_member_ends_the_phase(running, people):
    # Prepare
    trainers, models, _ = running
    vote_all(models, people[:2], PROPOSE)
    # Execute
    receipt = trainers.exit(sender=people[2])
    # Assert: the next quorum is the two voters
    assert (models.round(), models.phase(), models.quorum()) == (0, AGGREGATE, 2)
    (changed,) = receipt.decode_logs(models.PhaseChanged)
    assert (changed.round, changed.phase, changed.quorum) == (0, AGGREGATE, 2)


def test_a_quorum_emptied_by_exits_ends_on_the_next_vote(running, people):
    trainers, models, _ = running
    for person in people[:MIN_TRAINERS]:
        trainers.exit(sender=person)
    assert (models.phase(), models.quorum(), models.voters()) == (PROPOSE, 0, 0)
    trainers.register(sender=people[3])
    vote(models, people[3], PROPOSE)
    assert (models.phase(), models.quorum()) == (AGGREGATE, 1)


def test_exit_and_register_again_in_a_round_gives_no_second_voice(running, people):
    # Prepare: trainer 1 proposes on the root in round 0
    trainers, models, _ = running
    propose(models, people[0], [(ROOT_MODEL_ID, cid_bin("once"), 10)])
    # Execute / Assert: it cannot leave (and come back with a new id) in this round
    with ape.reverts(VOTED_THIS_ROUND):
        trainers.exit(sender=people[0])
    with ape.reverts("Trainers: this address is already registered"):
        trainers.register(sender=people[0])
    vote_all(models, people[1:3], PROPOSE)
    assert (models.phase(), models.quorum()) == (AGGREGATE, 3)
    with ape.reverts(VOTED_THIS_ROUND):
        trainers.exit(sender=people[0])
    vote_all(models, people[:3], AGGREGATE)
    assert (models.round(), models.phase(), models.quorum()) == (1, PROPOSE, 3)


def test_the_burnt_id_is_not_a_member_of_the_next_quorum(running, people):
    # Prepare: round 1, every trainer a member; trainer 1 leaves before voting
    trainers, models, _ = running
    vote_all(models, people[:3], PROPOSE)
    vote_all(models, people[:3], AGGREGATE)
    trainers.exit(sender=people[0])
    # Execute: its address registers again (id 4) and votes, as do trainers 2 and 3
    trainers.register(sender=people[0])
    vote_all(models, people[:3], PROPOSE)
    # Assert: one voice per address; the next quorum is the three live voters
    assert (models.round(), models.phase(), models.quorum()) == (1, AGGREGATE, 3)
    assert trainers.trainerId(people[0]) == 4
    assert all(models.statusOf(p)[4] for p in people[:3])
    vote_all(models, people[:3], AGGREGATE)
    assert (models.round(), models.phase()) == (2, PROPOSE)


def test_only_trainers_reports_exits(network, people):
    _, models, _ = network
    with ape.reverts("Models: only the Trainers contract may report exits"):
        models.trainerExited(1, sender=people[0])


def test_status_of_reads_the_round_state_for_one_trainer(project, deployer, people):
    # Prepare: nothing registered yet
    trainers, models, _ = deploy(project, deployer)
    assert models.statusOf(people[0]) == (False, 0, 0, False, False, 0, 0, 0, 0)
    for person in people[:MIN_TRAINERS]:
        trainers.register(sender=person)
    # Execute
    vote(models, people[0], PROPOSE)
    voter, other, outsider = (models.statusOf(p) for p in (people[0], people[1], people[9]))
    # Assert: same round state for all, each with its own vote and membership
    deadline = models.phaseDeadline()
    assert voter == (True, 0, PROPOSE, True, True, deadline, 1, MIN_TRAINERS, 1)
    assert other == (True, 0, PROPOSE, False, True, deadline, 1, MIN_TRAINERS, 1)
    assert outsider == (True, 0, PROPOSE, False, False, deadline, 1, MIN_TRAINERS, 1)
    assert not models.hasVoted(people[9])


# -- model ids, views and the model token ---------------------------------------------------


def test_model_id_of_matches_python(network):
    _, models, _ = network
    parents = sorted([b"\x01" * 32, b"\x02" * 32])
    root = [ROOT_MODEL_ID]
    assert models.modelIdOf(root, [1, 5, 9], 0, 0) == model_id(ROOT_MODEL_ID, [1, 5, 9])
    assert models.modelIdOf(parents, [3, 4], 0, 0) == model_id(parents, [3, 4])
    assert models.modelIdOf(parents, [3, 4], 1, 0) == model_id(parents, [3, 4], 1, 0)
    with ape.reverts("Models: an aggregation needs at least one parent"):
        models.modelIdOf([], [1], 0, 0)


def test_model_views_refuse_unknown_ids(network):
    _, models, _ = network
    unknown = b"\x01" * 32
    assert not models.modelExists(unknown)
    for view in (models.roundOf, models.popularityOf, models.indexOf, models.ruleOf):
        with ape.reverts("Models: no model has this id"):
            view(unknown)
    for view in (models.ownerOf, models.getApproved, models.tokenURI):
        with ape.reverts("Models: no model has this id"):
            view(5)
    with ape.reverts("ERC721: the zero address owns no token"):
        models.balanceOf(ZERO)


def test_model_token_approval_and_transfer(running, people):
    # Prepare
    trainers, models, _ = running
    ids = sorted(propose_all(models, trainers, people[:3], ROOT_MODEL_ID, "r0"))
    aggregate(models, people[1], [([ROOT_MODEL_ID], ids, b"")])
    token = int.from_bytes(model_id(ROOT_MODEL_ID, ids), "big")
    # Execute
    models.approve(people[8], token, sender=people[1])
    models.transferFrom(people[1], people[9], token, sender=people[8])
    # Assert
    assert models.ownerOf(token) == people[9] and models.balanceOf(people[1]) == 0
    assert models.getApproved(token) == ZERO
    with ape.reverts(
        "ERC721: caller is neither the owner, nor approved for this token, nor an operator"
    ):
        models.transferFrom(people[9], people[1], token, sender=people[1])
    with ape.reverts("ERC721: only the owner of the token or its operator may approve"):
        models.approve(people[1], token, sender=people[1])


def test_model_safe_transfer_and_interfaces(project, network, deployer, people):
    _, models, _ = network
    refusing = project.ReceiverMock.deploy(False, sender=deployer)
    with ape.reverts("ERC721: the receiving contract does not accept ERC-721 tokens"):
        models.safeTransferFrom(deployer, refusing, 0, sender=deployer)
    models.safeTransferFrom(deployer, people[0], 0, sender=deployer)
    assert models.ownerOf(0) == people[0]
    assert (models.name(), models.symbol()) == ("MCFL Model", "MCFLM")
    assert models.supportsInterface("0x80ac58cd") and not models.supportsInterface("0x12345678")


def test_erc721_calls_declared_payable_take_no_payment(running, people, deployer):
    # IERC721 declares approve, transferFrom and safeTransferFrom payable; the
    # three collections take no payment, so a call with value reverts.
    trainers, models, updates = running
    ids = propose_all(models, trainers, people[:1], ROOT_MODEL_ID, "paid")
    owner = people[0]
    for collection, token in ((trainers, 1), (updates, ids[0])):
        with ape.reverts("ERC721: this call takes no payment"):
            collection.approve(people[8], token, sender=owner, value=1)
        with ape.reverts("ERC721: this call takes no payment"):
            collection.transferFrom(owner, people[9], token, sender=owner, value=1)
        with ape.reverts("ERC721: this call takes no payment"):
            collection.safeTransferFrom(owner, people[9], token, sender=owner, value=1)
        collection.transferFrom(owner, people[9], token, sender=owner)
        assert collection.ownerOf(token) == people[9]
    with ape.reverts("ERC721: this call takes no payment"):
        models.transferFrom(deployer, people[9], 0, sender=deployer, value=1)
