"""Updates: proposals, aggregations and the update token."""

import ape
import pytest

from mcfl_chain.dag.model_id import ROOT_MODEL_ID, model_id, update_id

from .conftest import (
    CID_LENGTH_REASON,
    CID_SHAPE_REASON,
    cid_bin,
    cid_str,
    deploy,
    propose_all,
    vote_all,
)

ZERO = "0x0000000000000000000000000000000000000000"
PROPOSE, AGGREGATE = 0, 1


@pytest.fixture
def aggregating(running, people):
    """Round 0 in AGGREGATE with one update of the root by each of people[0..2]."""
    _, models, updates = running
    ids = propose_all(updates, people[:3], ROOT_MODEL_ID, "r0")
    vote_all(models, people[:3], PROPOSE)
    return running, sorted(ids)


def test_propose_mints_an_update_with_its_record(running, people):
    # Prepare
    _, _, updates = running
    # Execute
    receipt = updates.propose(ROOT_MODEL_ID, cid_bin("u"), 1234, sender=people[0])
    # Assert
    (event,) = receipt.decode_logs(updates.UpdateProposed)
    uid = update_id(people[0].address, ROOT_MODEL_ID, 0)
    assert event.updateId == uid and event.proposer == people[0] and event.round == 0
    assert event.cid == cid_bin("u") and event.numSamples == 1234
    assert updates.updateIdOf(people[0], ROOT_MODEL_ID, 0) == uid
    assert updates.exists(uid) and updates.ownerOf(uid) == people[0]
    assert updates.balanceOf(people[0]) == 1
    assert updates.parentOf(uid) == ROOT_MODEL_ID and updates.roundOf(uid) == 0
    assert updates.numSamplesOf(uid) == 1234 and updates.cidOf(uid) == cid_bin("u")
    (transfer,) = receipt.decode_logs(updates.Transfer)
    assert (transfer.sender, transfer.tokenId) == (ZERO, uid)


def test_propose_keeps_a_dag_pb_cid(running, people):
    _, _, updates = running
    updates.propose(ROOT_MODEL_ID, cid_bin("u", "dag-pb"), 1, sender=people[0])
    uid = update_id(people[0].address, ROOT_MODEL_ID, 0)
    assert updates.cidOf(uid) == cid_bin("u", "dag-pb")
    assert cid_str("u", "dag-pb") in updates.tokenURI(uid)


@pytest.mark.parametrize(
    "samples, cid, reason",
    [
        (0, cid_bin("u"), "Updates: numSamples must be between 1 and 2**30 - 1"),
        (2**30, cid_bin("u"), "Updates: numSamples must be between 1 and 2**30 - 1"),
        (1, cid_bin("u")[:35], CID_LENGTH_REASON),
        (1, b"\x01\x55\x13\x20" + bytes(32), CID_SHAPE_REASON),
        (1, b"\x00\x55\x12\x20" + bytes(32), CID_SHAPE_REASON),
    ],
)
def test_propose_refuses_bad_arguments(running, people, samples, cid, reason):
    _, _, updates = running
    with ape.reverts(reason):
        updates.propose(ROOT_MODEL_ID, cid, samples, sender=people[0])


def test_propose_refusals_of_state(network, people):
    # Prepare
    trainers, models, updates = network
    trainers.register(sender=people[0])
    # Execute / Assert
    with ape.reverts(
        "Models: rounds have not started: fewer than minTrainers trainers are registered"
    ):
        updates.propose(ROOT_MODEL_ID, cid_bin("u"), 1, sender=people[0])
    for p in people[1:3]:
        trainers.register(sender=p)
    with ape.reverts("Updates: the caller is not a registered trainer"):
        updates.propose(ROOT_MODEL_ID, cid_bin("u"), 1, sender=people[7])
    with ape.reverts("Models: the parent model does not exist"):
        updates.propose(b"\x07" * 32, cid_bin("u"), 1, sender=people[0])
    updates.propose(ROOT_MODEL_ID, cid_bin("u"), 1, sender=people[0])
    with ape.reverts("Updates: the caller already proposed an update of this parent in this round"):
        updates.propose(ROOT_MODEL_ID, cid_bin("v"), 2, sender=people[0])
    vote_all(models, people[:3], PROPOSE)
    with ape.reverts("Models: updates can only be proposed in the PROPOSE phase"):
        updates.propose(ROOT_MODEL_ID, cid_bin("u"), 1, sender=people[1])


def test_aggregate_creates_then_repeats_a_model(aggregating, people):
    # Prepare
    (_, models, updates), ids = aggregating
    expected = model_id(ROOT_MODEL_ID, ids)
    # Execute
    first = updates.aggregate(ids, cid_bin("m1"), sender=people[0])
    second = updates.aggregate(ids, cid_bin("m2"), sender=people[1])
    # Assert
    (created,) = first.decode_logs(models.ModelAppended)
    (repeated,) = second.decode_logs(models.ModelAppended)
    assert created.modelId == expected and created.parent == ROOT_MODEL_ID
    assert list(created.updateIds) == ids and created.popularity == 1
    assert created.aggregator == people[0] and created.weightsCid == cid_bin("m1")
    assert repeated.popularity == 2 and repeated.weightsCid == b""
    assert models.popularityOf(expected) == 2 and models.roundOf(expected) == 0
    assert models.weightsCidOf(expected) == cid_bin("m1")  # only the first is recorded
    assert models.ownerOf(int.from_bytes(expected, "big")) == people[0]
    assert updates.hasAggregated(people[0], ROOT_MODEL_ID, 0)
    assert not updates.hasAggregated(people[2], ROOT_MODEL_ID, 0)


def test_aggregate_subsets_fork_the_dag(aggregating, people):
    (_, models, updates), ids = aggregating
    own = [update_id(p.address, ROOT_MODEL_ID, 0) for p in people[:3]]
    updates.aggregate([own[0]], b"", sender=people[0])
    updates.aggregate(sorted(own[1:]), b"", sender=people[1])
    assert models.modelExists(model_id(ROOT_MODEL_ID, [own[0]]))
    assert models.modelExists(model_id(ROOT_MODEL_ID, sorted(own[1:])))
    assert models.totalSupply() == 3


def test_aggregate_refusals_of_the_list(aggregating, people):
    (_, _, updates), ids = aggregating
    with ape.reverts("Updates: the list of update ids is empty"):
        updates.aggregate([], b"", sender=people[0])
    with ape.reverts("Updates: an update id in the list does not exist"):
        updates.aggregate([5], b"", sender=people[0])
    with ape.reverts("Updates: an update id in the list does not exist"):
        updates.aggregate([ids[0], 2**256 - 1], b"", sender=people[0])
    with ape.reverts("Updates: update ids must be strictly ascending"):
        updates.aggregate(list(reversed(ids)), b"", sender=people[0])
    with ape.reverts("Updates: update ids must be strictly ascending"):
        updates.aggregate([ids[0], ids[0]], b"", sender=people[0])
    outsider_list = [u for u in ids if u != update_id(people[0].address, ROOT_MODEL_ID, 0)]
    with ape.reverts(
        "Updates: the caller's own update of this parent in this round must be in the list"
    ):
        updates.aggregate(outsider_list, b"", sender=people[0])
    with ape.reverts(CID_LENGTH_REASON):
        updates.aggregate(ids, b"\x01", sender=people[0])


def test_aggregate_refusals_of_the_caller_and_phase(aggregating, people, project, deployer):
    (trainers, models, updates), ids = aggregating
    with ape.reverts("Updates: the caller is not a registered trainer"):
        updates.aggregate(ids, b"", sender=people[7])
    updates.aggregate(ids, b"", sender=people[0])
    with ape.reverts("Updates: the caller already aggregated updates of this parent in this round"):
        updates.aggregate(ids, b"", sender=people[0])
    with ape.reverts("Updates: the caller already aggregated updates of this parent in this round"):
        own = update_id(people[0].address, ROOT_MODEL_ID, 0)
        updates.aggregate([own], b"", sender=people[0])
    vote_all(models, people[:3], AGGREGATE)
    with ape.reverts("Models: updates can only be aggregated in the AGGREGATE phase"):
        updates.aggregate(ids, b"", sender=people[1])


def test_aggregate_refuses_old_updates_and_mixed_parents(aggregating, people):
    # Prepare: round 0 makes two models, round 1 trains on both
    (_, models, updates), ids = aggregating
    own = [update_id(p.address, ROOT_MODEL_ID, 0) for p in people[:3]]
    updates.aggregate([own[0]], b"", sender=people[0])
    updates.aggregate(sorted(own[1:]), b"", sender=people[1])
    vote_all(models, people[:3], AGGREGATE)
    left, right = model_id(ROOT_MODEL_ID, [own[0]]), model_id(ROOT_MODEL_ID, sorted(own[1:]))
    updates.propose(left, cid_bin("a"), 1, sender=people[0])
    updates.propose(right, cid_bin("b"), 1, sender=people[1])
    vote_all(models, people[:3], PROPOSE)
    new_left = update_id(people[0].address, left, 1)
    new_right = update_id(people[1].address, right, 1)
    # Execute / Assert
    with ape.reverts("Updates: the updates in the list do not all share one parent"):
        updates.aggregate(sorted([new_left, new_right]), b"", sender=people[0])
    with ape.reverts("Updates: an update in the list was not proposed in the current round"):
        updates.aggregate([own[2]], b"", sender=people[2])
    stale_first = sorted([own[0], new_left])
    reason = (
        "Updates: an update in the list was not proposed in the current round"
        if stale_first[0] == own[0]
        else "Updates: the updates in the list do not all share one parent"
    )
    with ape.reverts(reason):
        updates.aggregate(stale_first, b"", sender=people[0])


def test_transferred_update_still_counts_for_its_proposer(aggregating, people):
    # Prepare
    (_, models, updates), ids = aggregating
    own = update_id(people[0].address, ROOT_MODEL_ID, 0)
    updates.transferFrom(people[0], people[9], own, sender=people[0])
    # Execute
    updates.aggregate(ids, b"", sender=people[0])
    # Assert
    assert updates.ownerOf(own) == people[9] and updates.balanceOf(people[9]) == 1
    assert updates.hasAggregated(people[0], ROOT_MODEL_ID, 0)
    assert '"aggregated by its proposer","value":true' in updates.tokenURI(own)


def test_update_token_approvals_and_refusals(aggregating, people, project, deployer):
    (_, _, updates), ids = aggregating
    own = update_id(people[0].address, ROOT_MODEL_ID, 0)
    updates.approve(people[8], own, sender=people[0])
    assert updates.getApproved(own) == people[8]
    updates.safeTransferFrom(people[0], people[9], own, sender=people[8])
    assert updates.ownerOf(own) == people[9]
    refusing = project.ReceiverMock.deploy(False, sender=deployer)
    with ape.reverts("ERC721: the receiving contract does not accept ERC-721 tokens"):
        updates.safeTransferFrom(people[9], refusing, own, sender=people[9])
    with ape.reverts("ERC721: only the owner of the token or its operator may approve"):
        updates.approve(people[1], own, sender=people[1])
    with ape.reverts("ERC721: the sender does not own this token"):
        updates.transferFrom(people[0], people[1], own, sender=people[0])


def test_update_views_refuse_unknown_ids(running):
    _, _, updates = running
    assert not updates.exists(7)
    for view in (
        updates.parentOf,
        updates.roundOf,
        updates.numSamplesOf,
        updates.cidOf,
        updates.ownerOf,
        updates.getApproved,
        updates.tokenURI,
    ):
        with ape.reverts("Updates: no update has this id"):
            view(7)
    with ape.reverts("ERC721: the zero address owns no token"):
        updates.balanceOf(ZERO)


def test_update_metadata_and_interfaces(running, people):
    _, _, updates = running
    updates.propose(ROOT_MODEL_ID, cid_bin("u"), 77, sender=people[0])
    uid = update_id(people[0].address, ROOT_MODEL_ID, 0)
    uri = updates.tokenURI(uid)
    assert uri.startswith('data:application/json,{"name":"MCFL update 0x')
    assert '"samples","value":77' in uri and cid_str("u") in uri
    assert '"aggregated by its proposer","value":false' in uri
    assert (updates.name(), updates.symbol()) == ("MCFL Update", "MCFLU")
    assert updates.supportsInterface("0x5b5e139f")


def test_updates_constructor_refuses_addresses_without_code(project, deployer, people):
    trainers, models, _ = deploy(project, deployer, link=False)
    with ape.reverts("Updates: the Trainers address is not a contract"):
        project.Updates.deploy(people[0], models, sender=deployer)
    with ape.reverts("Updates: the Models address is not a contract"):
        project.Updates.deploy(trainers, people[0], sender=deployer)
