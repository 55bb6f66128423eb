"""Aggregations and merges (``Models.submitAggregations``): model creation and its rules."""

import ape
import pytest

from mcfl_chain.dag.model_id import ROOT_MODEL_ID, model_id, update_id

from .conftest import (
    AGGREGATE,
    CID_LENGTH_REASON,
    PROPOSE,
    ZERO,
    aggregate,
    cid_bin,
    propose,
    propose_all,
    vote,
    vote_all,
)

OWN_MISSING = "Models: the caller's own update of every parent must be in the list"
NOT_CURRENT = "Updates: an update in the list was not proposed in the current round"
NOT_CHILD = "Updates: an update in the list is not a child of the aggregation's parents"


@pytest.fixture
def aggregating(running, people):
    """Round 0 in AGGREGATE with one update of the root by each of trainers 1..3."""
    trainers, models, _ = running
    ids = propose_all(models, trainers, people[:3], ROOT_MODEL_ID, "r0")
    return running, sorted(ids)


@pytest.fixture
def two_models(aggregating, people):
    """Round 1, PROPOSE: round 0 made A = {u1} and B = {u2, u3}; returns (A, B) ascending."""
    (_, models, _), _ = aggregating
    own = [update_id(t, ROOT_MODEL_ID, 0) for t in (1, 2, 3)]
    aggregate(models, people[0], [([ROOT_MODEL_ID], [own[0]], b"")])
    aggregate(models, people[1], [([ROOT_MODEL_ID], sorted(own[1:]), b"")])
    vote(models, people[2], AGGREGATE)
    return tuple(
        sorted([model_id(ROOT_MODEL_ID, [own[0]]), model_id(ROOT_MODEL_ID, sorted(own[1:]))])
    )


def test_aggregate_creates_then_repeats_a_model(aggregating, people):
    # Prepare
    (_, models, _), ids = aggregating
    expected = model_id(ROOT_MODEL_ID, ids)
    # Execute
    first = aggregate(models, people[0], [([ROOT_MODEL_ID], ids, cid_bin("m1"))])
    second = aggregate(models, people[1], [([ROOT_MODEL_ID], ids, cid_bin("m2"))])
    # Assert
    (created,) = first.decode_logs(models.ModelCreated)
    assert (created.round, created.modelId, created.trainerId, created.index) == (0, expected, 1, 1)
    assert list(created.parents) == [ROOT_MODEL_ID] and list(created.updateIds) == ids
    assert created.aggregator == people[0] and created.weightsCid == cid_bin("m1")
    (mint,) = first.decode_logs(models.Transfer)
    assert (mint.sender, mint.receiver, mint.tokenId) == (
        ZERO,
        people[0],
        int.from_bytes(expected, "big"),
    )
    appended = [e for r in (first, second) for e in r.decode_logs(models.ModelAppended)]
    assert [(e.modelId, e.trainerId, e.popularity) for e in appended] == [
        (expected, 1, 1),
        (expected, 2, 2),
    ]
    assert not second.decode_logs(models.ModelCreated)
    assert models.popularityOf(expected) == 2 and models.roundOf(expected) == 0
    assert models.indexOf(expected) == 1 and models.totalSupply() == 2
    assert models.ownerOf(int.from_bytes(expected, "big")) == people[0]
    assert models.balanceOf(people[0]) == 1


def test_aggregate_subsets_fork_the_dag(aggregating, people):
    (_, models, _), _ = aggregating
    own = [update_id(t, ROOT_MODEL_ID, 0) for t in (1, 2, 3)]
    aggregate(models, people[0], [([ROOT_MODEL_ID], [own[0]], b"")])
    aggregate(models, people[1], [([ROOT_MODEL_ID], sorted(own[1:]), b"")])
    assert models.modelExists(model_id(ROOT_MODEL_ID, [own[0]]))
    assert models.modelExists(model_id(ROOT_MODEL_ID, sorted(own[1:])))
    assert models.totalSupply() == 3


@pytest.mark.parametrize(
    "shape, reason",
    [
        (([(0, 3, 0, 0, b"")], [], "ids"), "Models: an aggregation needs at least one parent"),
        (
            ([(2, 3, 0, 0, b"")], ["root"], "ids"),
            "Models: the aggregations take more parents than the call carries",
        ),
        (
            ([(1, 0, 0, 0, b"")], ["root"], []),
            "Models: an aggregation needs at least one update id",
        ),
        (
            ([(1, 257, 0, 0, b"")], ["root"], "ids"),
            "Models: an aggregation holds at most MAX_UPDATES update ids",
        ),
        (
            ([(1, 4, 0, 0, b"")], ["root"], "ids"),
            "Models: the aggregations take more update ids than the call carries",
        ),
        (
            ([(1, 3, 0, 0, b"")], ["root", "other"], "ids"),
            "Models: the aggregations must use every parent and update id of the call",
        ),
        (
            ([], ["root"], []),
            "Models: the aggregations must use every parent and update id of the call",
        ),
        (([(1, 3, 0, 0, b"\x01")], ["root"], "ids"), CID_LENGTH_REASON),
    ],
)
def test_aggregation_shapes_that_do_not_add_up_are_refused(aggregating, people, shape, reason):
    (_, models, _), ids = aggregating
    shapes, parents, update_ids = shape
    parents = [ROOT_MODEL_ID if p == "root" else b"\x05" * 32 for p in parents]
    with ape.reverts(reason):
        models.submitAggregations(
            shapes, parents, ids if update_ids == "ids" else update_ids, sender=people[0]
        )


def test_aggregation_list_refusals(aggregating, people):
    (_, models, _), ids = aggregating
    mine = update_id(1, ROOT_MODEL_ID, 0)
    others = [u for u in ids if u != mine]
    with ape.reverts(OWN_MISSING):
        aggregate(models, people[0], [([ROOT_MODEL_ID], others, b"")])
    with ape.reverts("Updates: update ids must be strictly ascending"):
        aggregate(models, people[0], [([ROOT_MODEL_ID], list(reversed(ids)), b"")])
    with ape.reverts("Updates: update ids must be strictly ascending"):
        aggregate(models, people[0], [([ROOT_MODEL_ID], [mine, mine], b"")])
    with ape.reverts("Updates: an update id in the list does not exist"):
        aggregate(models, people[0], [([ROOT_MODEL_ID], sorted([mine, 5]), b"")])


def test_aggregation_refusals_of_the_caller_and_phase(aggregating, people, chain):
    (_, models, _), ids = aggregating
    with ape.reverts("Models: the caller is not a registered trainer"):
        aggregate(models, people[7], [([ROOT_MODEL_ID], ids, b"")])
    aggregate(models, people[0], [([ROOT_MODEL_ID], ids, b"")])
    with ape.reverts("Models: this trainer already voted in this phase"):
        aggregate(models, people[0], [([ROOT_MODEL_ID], ids, b"")])
    chain.pending_timestamp = models.phaseDeadline()
    with ape.reverts(
        "Models: submissions travel with the trainer's first vote of the phase; "
        "after the deadline only an empty call may end the phase"
    ):
        aggregate(models, people[0], [([ROOT_MODEL_ID], ids, b"")])
    vote(models, people[0], AGGREGATE)
    with ape.reverts("Models: aggregations are only submitted in the AGGREGATE phase"):
        aggregate(models, people[1], [([ROOT_MODEL_ID], ids, b"")])


def test_key_rotation_gives_no_second_aggregation(aggregating, people):
    # Prepare: trainer 1 aggregates, then moves its token to a fresh address
    (trainers, models, _), ids = aggregating
    aggregate(models, people[0], [([ROOT_MODEL_ID], ids, b"")])
    trainers.transferFrom(people[0], people[6], 1, sender=people[0])
    mine = update_id(1, ROOT_MODEL_ID, 0)
    # Execute / Assert
    with ape.reverts("Models: this trainer already voted in this phase"):
        aggregate(models, people[6], [([ROOT_MODEL_ID], [mine], b"")])
    assert not models.modelExists(model_id(ROOT_MODEL_ID, [mine]))


def test_a_rotated_key_still_aggregates_its_trainers_update(aggregating, people):
    (trainers, models, _), ids = aggregating
    trainers.transferFrom(people[0], people[6], 1, sender=people[0])
    aggregate(models, people[6], [([ROOT_MODEL_ID], ids, b"")])
    assert models.ownerOf(int.from_bytes(model_id(ROOT_MODEL_ID, ids), "big")) == people[6]


def test_old_updates_and_foreign_parents_are_refused(two_models, running, people):
    # Prepare: round 1 trains both models of round 0
    _, models, _ = running
    left, right = two_models
    propose(models, people[0], [(left, cid_bin("a"), 1), (right, cid_bin("b"), 1)])
    propose(models, people[1], [(right, cid_bin("c"), 1)])
    vote(models, people[2], PROPOSE)
    new_left = update_id(1, left, 1)
    other_right = update_id(2, right, 1)
    stale = update_id(2, ROOT_MODEL_ID, 0)
    # Execute / Assert
    with ape.reverts(NOT_CHILD):
        aggregate(models, people[0], [([left], sorted([new_left, other_right]), b"")])
    with ape.reverts(NOT_CURRENT):
        aggregate(models, people[0], [([left], sorted([new_left, stale]), b"")])
    with ape.reverts(OWN_MISSING):
        aggregate(models, people[1], [([ROOT_MODEL_ID], [stale], b"")])


def test_parents_of_a_call_are_ascending_distinct_and_existing(two_models, running, people):
    _, models, _ = running
    left, right = two_models
    propose(models, people[0], [(left, cid_bin("a"), 1), (right, cid_bin("b"), 1)])
    vote_all(models, people[1:3], PROPOSE)
    mine_left, mine_right = update_id(1, left, 1), update_id(1, right, 1)
    with ape.reverts("Models: the parents of an aggregation must be strictly ascending"):
        aggregate(models, people[0], [([right, left], sorted([mine_left, mine_right]), b"")])
    with ape.reverts("Models: a parent appears twice in the call"):
        aggregate(
            models,
            people[0],
            [([left], [mine_left], b""), ([left, right], sorted([mine_left, mine_right]), b"")],
        )
    ghost = b"\x09" * 32
    with ape.reverts("Models: the parent model does not exist"):
        aggregate(models, people[0], [([ghost], [update_id(1, ghost, 1)], b"")])


def test_one_call_carries_every_aggregation_of_the_round(two_models, running, people):
    # Prepare
    _, models, _ = running
    left, right = two_models
    for p in people[:3]:
        propose(models, p, [(left, cid_bin(f"l{p}"), 1), (right, cid_bin(f"r{p}"), 1)])
    lefts = sorted(update_id(t, left, 1) for t in (1, 2, 3))
    rights = sorted(update_id(t, right, 1) for t in (1, 2, 3))
    # Execute
    receipt = aggregate(models, people[0], [([left], lefts, b""), ([right], rights, b"")])
    # Assert
    created = receipt.decode_logs(models.ModelCreated)
    assert [c.modelId for c in created] == [model_id(left, lefts), model_id(right, rights)]
    assert [c.index for c in created] == [3, 4]
    assert len(receipt.decode_logs(models.TrainerVoted)) == 1


def test_a_merge_combines_several_parents(two_models, running, people):
    # Prepare: trainers 1 and 2 train both models, trainer 3 only the left one
    _, models, _ = running
    left, right = two_models
    for p in people[:2]:
        propose(models, p, [(left, cid_bin(f"l{p}"), 1), (right, cid_bin(f"r{p}"), 1)])
    propose(models, people[2], [(left, cid_bin("l3"), 1)])
    chosen = sorted(
        [
            update_id(1, left, 1),
            update_id(1, right, 1),
            update_id(2, left, 1),
            update_id(2, right, 1),
        ]
    )
    merged = model_id([left, right], chosen)
    # Execute
    first = aggregate(models, people[0], [([left, right], chosen, cid_bin("merged"))])
    second = aggregate(models, people[1], [([left, right], chosen, b"")])
    # Assert
    (created,) = first.decode_logs(models.ModelCreated)
    assert created.modelId == merged and list(created.parents) == [left, right]
    assert list(created.updateIds) == chosen and created.weightsCid == cid_bin("merged")
    assert models.popularityOf(merged) == 2 and models.roundOf(merged) == 1
    assert models.modelIdOf([left, right], chosen, 0, 0) == merged
    assert merged != model_id(left, chosen)
    (appended,) = second.decode_logs(models.ModelAppended)
    assert appended.popularity == 2
    with ape.reverts(OWN_MISSING):
        aggregate(
            models,
            people[2],
            [([left, right], sorted([update_id(3, left, 1), update_id(1, right, 1)]), b"")],
        )
