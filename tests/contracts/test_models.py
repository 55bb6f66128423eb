"""Models: genesis, the round state machine, model views and the model token."""

import ape
import pytest

from mcfl_chain.chain.cids import cid_to_bytes
from mcfl_chain.dag.model_id import ROOT_MODEL_ID, model_id

from .conftest import (
    CID_LENGTH_REASON,
    CID_SHAPE_REASON,
    GENESIS,
    MIN_TRAINERS,
    TASK,
    cid_bin,
    cid_str,
    deploy,
    propose_all,
    vote_all,
)

ZERO = "0x0000000000000000000000000000000000000000"
PROPOSE, AGGREGATE = 0, 1


def test_genesis_root_exists_with_its_cid_and_task(network, deployer):
    _, models, _ = network
    assert models.modelExists(ROOT_MODEL_ID) and models.totalSupply() == 1
    assert models.parentOf(ROOT_MODEL_ID) == ROOT_MODEL_ID
    assert (models.roundOf(ROOT_MODEL_ID), models.popularityOf(ROOT_MODEL_ID)) == (0, 1)
    assert models.indexOf(ROOT_MODEL_ID) == 0 and models.modelAt(0) == ROOT_MODEL_ID
    assert models.genesisCid() == cid_to_bytes(GENESIS)
    assert models.weightsCidOf(ROOT_MODEL_ID) == cid_to_bytes(GENESIS)
    assert models.task() == TASK and models.minTrainers() == MIN_TRAINERS
    assert models.ownerOf(0) == deployer and models.balanceOf(deployer) == 1


PRINTABLE_REASON = (
    "Models: the task descriptor must be printable ASCII without quotes or backslashes"
)


@pytest.mark.parametrize(
    "args, reason",
    [
        (("bad", TASK, 1, 0), CID_LENGTH_REASON),
        (("dagcbor", TASK, 1, 0), CID_SHAPE_REASON),
        (("ok", "", 1, 0), "Models: the task descriptor must not be empty"),
        (("ok", 'lenet:"x"', 1, 0), PRINTABLE_REASON),
        (("ok", "lenet:a\\b", 1, 0), PRINTABLE_REASON),
        (("ok", "lenet:\n", 1, 0), PRINTABLE_REASON),
        (("ok", TASK, 0, 0), "Models: minTrainers must be between 1 and 2**32 - 1"),
        (("ok", TASK, 1, 2**32), "Models: phaseDuration must be below 2**32 seconds"),
    ],
)
def test_constructor_refuses_bad_parameters(project, deployer, args, reason):
    # Prepare
    trainers = project.Trainers.deploy(sender=deployer)
    cid = {"ok": cid_bin("g"), "bad": b"\x01\x55", "dagcbor": b"\x01\x71\x12\x20" + bytes(32)}[
        args[0]
    ]
    # Execute / Assert
    with ape.reverts(reason):
        project.Models.deploy(trainers, cid, *args[1:], sender=deployer)


def test_constructor_refuses_a_trainers_address_without_code(project, deployer, people):
    with ape.reverts("Models: the Trainers address is not a contract"):
        project.Models.deploy(people[0], cid_bin("g"), TASK, 1, 0, sender=deployer)


def test_dag_pb_genesis_cid_round_trips(project, deployer):
    trainers = project.Trainers.deploy(sender=deployer)
    cid = cid_bin("g", "dag-pb")
    models = project.Models.deploy(trainers, cid, TASK, 1, 0, sender=deployer)
    assert models.genesisCid() == cid
    assert cid_str("g", "dag-pb") in models.tokenURI(0)


def test_set_updates_is_once_and_deployer_only(project, deployer, people):
    _, models, updates = deploy(project, deployer, link=False)
    with ape.reverts("Models: only the deployer may link the Updates contract"):
        models.setUpdates(updates, sender=people[0])
    with ape.reverts("Models: the Updates address is not a contract"):
        models.setUpdates(people[0], sender=deployer)
    models.setUpdates(updates, sender=deployer)
    assert models.updates() == updates.address
    with ape.reverts("Models: the Updates contract is already linked"):
        models.setUpdates(updates, sender=deployer)


def test_round_zero_opens_when_min_trainers_registered(network, people):
    # Prepare
    trainers, models, _ = network
    for p in people[: MIN_TRAINERS - 1]:
        trainers.register(sender=p)
    assert not models.started() and models.quorum() == 0
    # Execute
    receipt = trainers.register(sender=people[MIN_TRAINERS - 1])
    # Assert
    assert models.started() and (models.round(), models.phase()) == (0, PROPOSE)
    assert models.quorum() == MIN_TRAINERS and models.votes() == 0
    (changed,) = receipt.decode_logs(models.PhaseChanged)
    assert (changed.round, changed.phase) == (0, PROPOSE)


def test_only_trainers_reports_registrations(network, people):
    _, models, _ = network
    with ape.reverts("Models: only the Trainers contract may report registrations"):
        models.trainerRegistered(10, sender=people[0])


def test_votes_before_round_zero_are_refused(network, people):
    trainers, models, _ = network
    trainers.register(sender=people[0])
    with ape.reverts(
        "Models: rounds have not started: fewer than minTrainers trainers are registered"
    ):
        models.finishProposals(sender=people[0])


def test_full_round_moves_phases_only_with_the_quorum(running, people):
    # Prepare
    trainers, models, updates = running
    ids = propose_all(updates, people[:3], ROOT_MODEL_ID, "r0")
    # Execute: two of three votes keep the phase
    vote_all(models, people[:2], PROPOSE)
    assert (models.phase(), models.votes()) == (PROPOSE, 2)
    assert models.hasVoted(people[0]) and not models.hasVoted(people[2])
    last = models.finishProposals(sender=people[2])
    # Assert
    assert (models.round(), models.phase(), models.votes()) == (0, AGGREGATE, 0)
    (changed,) = last.decode_logs(models.PhaseChanged)
    assert (changed.round, changed.phase) == (0, AGGREGATE)
    (voted,) = last.decode_logs(models.TrainerVoted)
    assert (voted.trainer, voted.trainerId, voted.counted, voted.votes) == (people[2], 3, True, 3)
    updates.aggregate(sorted(ids), b"", sender=people[0])
    vote_all(models, people[:2], AGGREGATE)
    final = models.nextRound(sender=people[2])
    assert (models.round(), models.phase()) == (1, PROPOSE)
    (new_round,) = final.decode_logs(models.NewRound)
    assert (new_round.prevRound, new_round.round) == (0, 1)


def test_vote_refusals(running, people):
    # Prepare
    _, models, _ = running
    models.finishProposals(sender=people[0])
    # Execute / Assert
    with ape.reverts("Models: this trainer already voted in this phase"):
        models.finishProposals(sender=people[0])
    with ape.reverts("Models: the caller is not a registered trainer"):
        models.finishProposals(sender=people[7])
    with ape.reverts("Models: nextRound is only allowed in the AGGREGATE phase"):
        models.nextRound(sender=people[1])
    vote_all(models, people[1:3], PROPOSE)
    with ape.reverts("Models: finishProposals is only allowed in the PROPOSE phase"):
        models.finishProposals(sender=people[0])


def test_mid_round_registration_counts_from_the_next_round(running, people):
    # Prepare
    trainers, models, _ = running
    trainers.register(sender=people[3])
    # Execute
    receipt = models.finishProposals(sender=people[3])
    # Assert: accepted, not counted, quorum unchanged
    (voted,) = receipt.decode_logs(models.TrainerVoted)
    assert not voted.counted and models.votes() == 0 and models.quorum() == 3
    vote_all(models, people[:3], PROPOSE)
    vote_all(models, people[:3], AGGREGATE)
    assert models.round() == 1 and models.quorum() == 4


def test_key_rotation_cannot_vote_twice(running, people):
    trainers, models, _ = running
    models.finishProposals(sender=people[0])
    trainers.transferFrom(people[0], people[6], 1, sender=people[0])
    with ape.reverts("Models: this trainer already voted in this phase"):
        models.finishProposals(sender=people[6])
    assert models.hasVoted(people[6]) and not models.hasVoted(people[0])


def test_deadline_lets_any_trainer_advance(project, deployer, people, chain):
    # Prepare
    trainers, models, _ = deploy(project, deployer, min_trainers=3, phase_duration=60)
    for p in people[:3]:
        trainers.register(sender=p)
    models.finishProposals(sender=people[0])
    deadline = models.phaseDeadline()
    assert deadline == models.phaseStart() + 60
    # Execute: before the deadline a second vote is refused, after it the same vote advances
    with ape.reverts("Models: this trainer already voted in this phase"):
        models.finishProposals(sender=people[0])
    chain.pending_timestamp = deadline + 1
    models.finishProposals(sender=people[0])
    # Assert
    assert (models.phase(), models.votes()) == (AGGREGATE, 0)
    chain.pending_timestamp = models.phaseDeadline() + 1
    models.nextRound(sender=people[1])
    assert (models.round(), models.phase()) == (1, PROPOSE)


def test_no_deadline_reports_zero(running):
    _, models, _ = running
    assert models.phaseDeadline() == 0 and models.phaseDuration() == 0


def test_only_updates_appends_models(running, people):
    _, models, _ = running
    with ape.reverts("Models: only the Updates contract may append models"):
        models.appendGeneration(0, [1], people[0], b"", sender=people[0])


def test_model_id_of_matches_python(network):
    _, models, _ = network
    assert models.modelIdOf(ROOT_MODEL_ID, [1, 5, 9]) == model_id(ROOT_MODEL_ID, [1, 5, 9])


def test_model_views_refuse_unknown_ids(network):
    _, models, _ = network
    unknown = b"\x01" * 32
    assert not models.modelExists(unknown)
    for view in (
        models.parentOf,
        models.roundOf,
        models.popularityOf,
        models.indexOf,
        models.weightsCidOf,
    ):
        with ape.reverts("Models: no model has this id"):
            view(unknown)
    with ape.reverts("Models: no model has this id"):
        models.ownerOf(5)
    with ape.reverts("Models: no model has this creation index"):
        models.modelAt(1)
    with ape.reverts("ERC721: the zero address owns no token"):
        models.balanceOf(ZERO)


def test_appended_model_views_metadata_and_transfer(running, people):
    # Prepare
    _, models, updates = running
    ids = sorted(propose_all(updates, people[:3], ROOT_MODEL_ID, "r0"))
    vote_all(models, people[:3], PROPOSE)
    updates.aggregate(ids, cid_bin("agg", "dag-pb"), sender=people[1])
    new = model_id(ROOT_MODEL_ID, ids)
    token = int.from_bytes(new, "big")
    # Execute
    uri = models.tokenURI(token)
    models.approve(people[8], token, sender=people[1])
    models.transferFrom(people[1], people[9], token, sender=people[8])
    # Assert
    assert models.parentOf(new) == ROOT_MODEL_ID and models.indexOf(new) == 1
    assert models.weightsCidOf(new) == cid_bin("agg", "dag-pb")
    assert '"trait_type":"popularity","value":1' in uri and cid_str("agg", "dag-pb") in uri
    assert "0x" + new.hex() in uri and TASK in uri
    assert models.ownerOf(token) == people[9] and models.balanceOf(people[1]) == 0
    assert models.getApproved(token) == ZERO
    with ape.reverts(
        "ERC721: caller is neither the owner, nor approved for this token, nor an operator"
    ):
        models.transferFrom(people[9], people[1], token, sender=people[1])
    with ape.reverts("ERC721: only the owner of the token or its operator may approve"):
        models.approve(people[1], token, sender=people[1])


def test_model_without_weights_cid_reports_none(running, people):
    _, models, updates = running
    ids = sorted(propose_all(updates, people[:3], ROOT_MODEL_ID, "r0"))
    vote_all(models, people[:3], PROPOSE)
    updates.aggregate(ids, b"", sender=people[0])
    new = model_id(ROOT_MODEL_ID, ids)
    assert models.weightsCidOf(new) == b""
    assert '"weights CID","value":"none"' in models.tokenURI(int.from_bytes(new, "big"))


def test_model_safe_transfer_and_interfaces(project, network, deployer, people):
    _, models, _ = network
    refusing = project.ReceiverMock.deploy(False, sender=deployer)
    with ape.reverts("ERC721: the receiving contract does not accept ERC-721 tokens"):
        models.safeTransferFrom(deployer, refusing, 0, sender=deployer)
    models.safeTransferFrom(deployer, people[0], 0, sender=deployer)
    assert models.ownerOf(0) == people[0]
    assert (models.name(), models.symbol()) == ("MCFL Model", "MCFLM")
    assert models.supportsInterface("0x80ac58cd") and not models.supportsInterface("0x12345678")


def test_status_of_reads_the_round_state_for_one_trainer(project, deployer, people):
    # Prepare: a network with a 60 s phase deadline; nothing registered yet
    trainers, models, _ = deploy(project, deployer, phase_duration=60)
    assert models.statusOf(people[0]) == (False, 0, 0, False, 0, 0, 0)
    for person in people[:MIN_TRAINERS]:
        trainers.register(sender=person)
    # Execute
    models.finishProposals(sender=people[0])
    voter, other, outsider = (models.statusOf(p) for p in (people[0], people[1], people[9]))
    # Assert: same round state for all, each with its own vote, the views agree
    assert voter == (True, 0, PROPOSE, True, models.phaseDeadline(), 1, MIN_TRAINERS)
    assert other[:3] == outsider[:3] == voter[:3]
    assert not other[3] and not outsider[3]
    assert voter[4] == models.phaseStart() + 60
