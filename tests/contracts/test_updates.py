"""Proposals (``Models.submitProposals``) and the update token."""

import ape
import pytest

from mcfl_chain.dag.model_id import ROOT_MODEL_ID, model_id, update_id

from .conftest import (
    AGGREGATE,
    CID_LENGTH_REASON,
    CID_SHAPE_REASON,
    MAX_SAMPLES,
    NOT_STARTED,
    PROPOSE,
    ZERO,
    aggregate,
    cid_bin,
    cid_str,
    deploy,
    propose,
    propose_all,
    read_data_url,
    vote_all,
)

SUBMISSIONS_WITH_FIRST_VOTE = (
    "Models: submissions travel with the trainer's first vote of the "
    "phase; after the deadline only an empty call may end the phase"
)


def test_propose_mints_an_update_with_its_record(running, people):
    # Prepare
    _, models, updates = running
    # Execute
    receipt = propose(models, people[0], [(ROOT_MODEL_ID, cid_bin("u"), 1234)])
    # Assert
    (event,) = receipt.decode_logs(updates.UpdateProposed)
    uid = update_id(1, ROOT_MODEL_ID, 0)
    assert (event.updateId, event.parent, event.trainerId, event.round) == (
        uid,
        ROOT_MODEL_ID,
        1,
        0,
    )
    assert event.proposer == people[0] and event.cid == cid_bin("u")
    assert event.numSamples == 1234
    assert updates.updateIdOf(1, ROOT_MODEL_ID, 0) == uid
    assert updates.exists(uid) and updates.ownerOf(uid) == people[0]
    assert updates.balanceOf(people[0]) == 1
    assert updates.parentIndexOf(uid) == 0 and updates.roundOf(uid) == 0
    assert updates.numSamplesOf(uid) == 1234
    (transfer,) = receipt.decode_logs(updates.Transfer)
    assert (transfer.sender, transfer.receiver, transfer.tokenId) == (ZERO, people[0], uid)
    (voted,) = receipt.decode_logs(models.TrainerVoted)
    assert (voted.trainerId, voted.phase, voted.counted) == (1, PROPOSE, True)


def test_one_call_carries_every_proposal_of_the_round(running, people):
    # Prepare: round 0 makes two models; round 1 trains both
    trainers, models, updates = running
    ids = sorted(propose_all(models, trainers, people[:3], ROOT_MODEL_ID, "r0"))
    own = [update_id(t, ROOT_MODEL_ID, 0) for t in (1, 2, 3)]
    aggregate(models, people[0], [([ROOT_MODEL_ID], [own[0]], b"")])
    aggregate(models, people[1], [([ROOT_MODEL_ID], sorted(own[1:]), b"")])
    vote_all(models, people[2:3], AGGREGATE)
    left, right = model_id(ROOT_MODEL_ID, [own[0]]), model_id(ROOT_MODEL_ID, sorted(own[1:]))
    # Execute
    receipt = propose(models, people[0], [(left, cid_bin("a"), 10), (right, cid_bin("b"), 20)])
    # Assert
    events = receipt.decode_logs(updates.UpdateProposed)
    assert [(e.parent, e.numSamples) for e in events] == [(left, 10), (right, 20)]
    assert updates.parentIndexOf(update_id(1, left, 1)) == models.indexOf(left) == 1
    assert updates.parentIndexOf(update_id(1, right, 1)) == models.indexOf(right) == 2
    assert updates.balanceOf(people[0]) == 3 and len(ids) == 3
    assert len(receipt.decode_logs(models.TrainerVoted)) == 1


def test_propose_keeps_a_dag_pb_cid_in_its_event(running, people):
    _, models, updates = running
    receipt = propose(models, people[0], [(ROOT_MODEL_ID, cid_bin("u", "dag-pb"), 1)])
    (event,) = receipt.decode_logs(updates.UpdateProposed)
    assert event.cid == cid_bin("u", "dag-pb")


@pytest.mark.parametrize(
    "samples, cid, reason",
    [
        (0, cid_bin("u"), "Updates: numSamples must be between 1 and maxSamples"),
        (MAX_SAMPLES + 1, cid_bin("u"), "Updates: numSamples must be between 1 and maxSamples"),
        (1, cid_bin("u")[:35], CID_LENGTH_REASON),
        (1, b"\x01\x55\x13\x20" + bytes(32), CID_SHAPE_REASON),
        (1, b"\x00\x55\x12\x20" + bytes(32), CID_SHAPE_REASON),
    ],
)
def test_propose_refuses_bad_arguments(running, people, samples, cid, reason):
    _, models, _ = running
    with ape.reverts(reason):
        propose(models, people[0], [(ROOT_MODEL_ID, cid, samples)])


def test_the_sample_cap_is_inclusive_and_set_at_deployment(project, deployer, people):
    trainers, models, updates = deploy(project, deployer, min_trainers=1, max_samples=50)
    trainers.register(sender=people[0])
    assert updates.maxSamples() == 50 and updates.MAX_SAMPLES_BOUND() == 2**32 - 1
    propose(models, people[0], [(ROOT_MODEL_ID, cid_bin("u"), 50)])
    assert updates.numSamplesOf(update_id(1, ROOT_MODEL_ID, 0)) == 50


def test_propose_refusals_of_state(network, people):
    # Prepare
    trainers, models, _ = network
    trainers.register(sender=people[0])
    # Execute / Assert
    with ape.reverts(NOT_STARTED):
        propose(models, people[0], [(ROOT_MODEL_ID, cid_bin("u"), 1)])
    for p in people[1:3]:
        trainers.register(sender=p)
    with ape.reverts("Models: the caller is not a registered trainer"):
        propose(models, people[7], [(ROOT_MODEL_ID, cid_bin("u"), 1)])
    with ape.reverts("Models: the parent model does not exist"):
        propose(models, people[0], [(b"\x07" * 32, cid_bin("u"), 1)])
    with ape.reverts(
        "Updates: the trainer already proposed an update of this parent in this round"
    ):
        propose(
            models, people[0], [(ROOT_MODEL_ID, cid_bin("u"), 1), (ROOT_MODEL_ID, cid_bin("v"), 2)]
        )
    propose(models, people[0], [(ROOT_MODEL_ID, cid_bin("u"), 1)])
    with ape.reverts("Models: this trainer already voted in this phase"):
        propose(models, people[0], [(ROOT_MODEL_ID, cid_bin("v"), 2)])
    vote_all(models, people[1:3], PROPOSE)
    with ape.reverts("Models: proposals are only submitted in the PROPOSE phase"):
        propose(models, people[1], [(ROOT_MODEL_ID, cid_bin("u"), 1)])


def test_key_rotation_gives_no_second_proposal(running, people, chain):
    # Prepare: trainer 1 proposes, then moves its token to a fresh address
    trainers, models, updates = running
    propose(models, people[0], [(ROOT_MODEL_ID, cid_bin("u"), 1)])
    trainers.transferFrom(people[0], people[6], 1, sender=people[0])
    # Execute / Assert: the fresh address is the same trainer, which already voted
    with ape.reverts("Models: this trainer already voted in this phase"):
        propose(models, people[6], [(ROOT_MODEL_ID, cid_bin("v"), 1)])
    chain.pending_timestamp = models.phaseDeadline()
    with ape.reverts(SUBMISSIONS_WITH_FIRST_VOTE):
        propose(models, people[6], [(ROOT_MODEL_ID, cid_bin("v"), 1)])
    assert updates.balanceOf(people[6]) == 0


def test_only_models_records_proposals(running, people):
    _, _, updates = running
    with ape.reverts("Updates: only the Models contract may record proposals"):
        updates.recordProposals(
            people[0], 1, 0, [(ROOT_MODEL_ID, cid_bin("u"), 1)], [0], sender=people[0]
        )


def test_updates_constructor_refusals(project, deployer, people):
    _, models, _ = deploy(project, deployer, link=False)
    with ape.reverts("Updates: the Models address is not a contract"):
        project.Updates.deploy(people[0], 10, sender=deployer)
    for cap in (0, 2**32):
        with ape.reverts("Updates: maxSamples must be between 1 and 2**32 - 1"):
            project.Updates.deploy(models, cap, sender=deployer)


def test_transferred_update_still_counts_for_its_proposer(running, people):
    # Prepare
    trainers, models, updates = running
    ids = sorted(propose_all(models, trainers, people[:3], ROOT_MODEL_ID, "r0"))
    mine = update_id(1, ROOT_MODEL_ID, 0)
    updates.transferFrom(people[0], people[9], mine, sender=people[0])
    # Execute
    aggregate(models, people[0], [([ROOT_MODEL_ID], ids, b"")])
    # Assert
    assert updates.ownerOf(mine) == people[9] and updates.balanceOf(people[9]) == 1
    assert models.popularityOf(model_id(ROOT_MODEL_ID, ids)) == 1


def test_update_token_approvals_and_refusals(running, people, project, deployer):
    _, models, updates = running
    propose(models, people[0], [(ROOT_MODEL_ID, cid_bin("u"), 1)])
    mine = update_id(1, ROOT_MODEL_ID, 0)
    updates.approve(people[8], mine, sender=people[0])
    assert updates.getApproved(mine) == people[8]
    updates.safeTransferFrom(people[0], people[9], mine, sender=people[8])
    assert updates.ownerOf(mine) == people[9]
    refusing = project.ReceiverMock.deploy(False, sender=deployer)
    with ape.reverts("ERC721: the receiving contract does not accept ERC-721 tokens"):
        updates.safeTransferFrom(people[9], refusing, mine, sender=people[9])
    with ape.reverts("ERC721: only the owner of the token or its operator may approve"):
        updates.approve(people[1], mine, sender=people[1])
    with ape.reverts("ERC721: the sender does not own this token"):
        updates.transferFrom(people[0], people[1], mine, sender=people[0])


def test_update_views_refuse_unknown_ids(running):
    _, _, updates = running
    assert not updates.exists(7)
    for view in (
        updates.parentIndexOf,
        updates.roundOf,
        updates.numSamplesOf,
        updates.ownerOf,
        updates.getApproved,
        updates.tokenURI,
    ):
        with ape.reverts("Updates: no update has this id"):
            view(7)
    with ape.reverts("ERC721: the zero address owns no token"):
        updates.balanceOf(ZERO)


def test_update_metadata_and_interfaces(running, people):
    _, models, updates = running
    propose(models, people[0], [(ROOT_MODEL_ID, cid_bin("u"), 77)])
    document = read_data_url(updates.tokenURI(update_id(1, ROOT_MODEL_ID, 0)))
    assert document["name"].startswith("MCFL update 0x")
    assert cid_str("u") not in str(document)  # CIDs live in the events
    assert (updates.name(), updates.symbol()) == ("MCFL Update", "MCFLU")
    assert updates.supportsInterface("0x5b5e139f")
    assert updates.models() == models.address
