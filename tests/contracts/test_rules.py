"""Aggregation rules on chain: the model id commits to (rule code, parameter word)."""

import ape
import pytest
from eth_abi import encode
from eth_utils import keccak

from mcfl_chain.algorithms.robust import make_aggregation_rule
from mcfl_chain.dag.model_id import ROOT_MODEL_ID, model_id, update_id

from .conftest import AGGREGATE, aggregate, cid_bin, propose, propose_all, vote, vote_all

MEDIAN = make_aggregation_rule("median")
TRIMMED = make_aggregation_rule("trimmed-mean", beta=0.2)


@pytest.fixture
def aggregating(running, people):
    """Round 0 in AGGREGATE with one update of the root by each of trainers 1..3."""
    trainers, models, _ = running
    ids = propose_all(models, trainers, people[:3], ROOT_MODEL_ID, "r0")
    return running, sorted(ids)


def test_the_id_formula_by_hand():
    # Hand-encoded: rule 0 is the formula of before rules; any other rule hashes that
    # base id again with its code and parameter word (three 32-byte words).
    parent, ids = b"\x07" * 32, [3, 9]
    old = keccak(
        parent
        + (64).to_bytes(32, "big")
        + (2).to_bytes(32, "big")
        + bytes(31)
        + b"\x03"
        + bytes(31)
        + b"\x09"
    )
    assert old == keccak(encode(["bytes32", "uint256[]"], [parent, ids]))
    ruled = keccak(old + (2).to_bytes(32, "big") + (2000).to_bytes(32, "big"))
    base_merge = keccak(encode(["bytes32[]", "uint256[]"], [[bytes(32), parent], ids]))
    merged = keccak(base_merge + (1).to_bytes(32, "big") + bytes(32))
    assert model_id(parent, ids) == model_id(parent, ids, 0, 0) == old
    assert model_id(parent, ids, 2, 2000) == ruled
    assert model_id([bytes(32), parent], ids, 1, 0) == merged
    assert len({old, ruled, model_id(parent, ids, 1, 0), model_id(parent, ids, 2, 2001)}) == 4


def test_model_id_of_matches_the_python_formula(running):
    _, models, _ = running
    parent, ids = b"\x07" * 32, [3, 9]
    for rule, word in [(0, 0), (1, 0), (2, 2000), (3, 2**64 - 1), (255, 2**256 - 1)]:
        assert models.modelIdOf([parent], ids, rule, word) == model_id(parent, ids, rule, word)
        merge = [bytes(32), parent]
        assert models.modelIdOf(merge, ids, rule, word) == model_id(merge, ids, rule, word)


def test_a_rule_makes_another_model_of_the_same_ids(aggregating, people):
    # Prepare
    (_, models, _), ids = aggregating
    fedavg = model_id(ROOT_MODEL_ID, ids)
    median = model_id(ROOT_MODEL_ID, ids, MEDIAN.code, MEDIAN.parameter)
    trimmed = model_id(ROOT_MODEL_ID, ids, TRIMMED.code, TRIMMED.parameter)
    # Execute: three trainers, the same ids, three rules
    receipts = [
        aggregate(models, people[0], [([ROOT_MODEL_ID], ids, cid_bin("f"))]),
        aggregate(models, people[1], [([ROOT_MODEL_ID], ids, cid_bin("m"), MEDIAN.code, 0)]),
        aggregate(
            models,
            people[2],
            [([ROOT_MODEL_ID], ids, b"", TRIMMED.code, TRIMMED.parameter)],
        ),
    ]
    # Assert
    created = [r.decode_logs(models.ModelCreated)[0] for r in receipts]
    assert [c.modelId for c in created] == [fedavg, median, trimmed]
    assert [(c.rule, c.ruleParameter) for c in created] == [(0, 0), (1, 0), (2, 2000)]
    assert len({fedavg, median, trimmed}) == 3
    assert models.ruleOf(fedavg) == (0, 0) and models.ruleOf(ROOT_MODEL_ID) == (0, 0)
    assert models.ruleOf(median) == (1, 0) and models.ruleOf(trimmed) == (2, 2000)
    assert [models.popularityOf(m) for m in (fedavg, median, trimmed)] == [1, 1, 1]
    assert models.totalSupply() == 4


def test_the_same_rule_adds_popularity(aggregating, people):
    (_, models, _), ids = aggregating
    word = TRIMMED.parameter
    aggregate(models, people[0], [([ROOT_MODEL_ID], ids, b"", 2, word)])
    second = aggregate(models, people[1], [([ROOT_MODEL_ID], ids, b"", 2, word)])
    assert not second.decode_logs(models.ModelCreated)
    (appended,) = second.decode_logs(models.ModelAppended)
    assert appended.modelId == model_id(ROOT_MODEL_ID, ids, 2, word) and appended.popularity == 2


def test_a_merge_commits_to_its_rule(aggregating, people):
    # Prepare: round 0 makes two models; trainers 1 and 2 train both in round 1
    (_, models, _), _ = aggregating
    own = [update_id(t, ROOT_MODEL_ID, 0) for t in (1, 2, 3)]
    aggregate(models, people[0], [([ROOT_MODEL_ID], [own[0]], b"")])
    aggregate(models, people[1], [([ROOT_MODEL_ID], sorted(own[1:]), b"")])
    vote(models, people[2], AGGREGATE)
    left, right = sorted(
        [model_id(ROOT_MODEL_ID, [own[0]]), model_id(ROOT_MODEL_ID, sorted(own[1:]))]
    )
    for p in people[:2]:
        propose(models, p, [(left, cid_bin(f"l{p}"), 1), (right, cid_bin(f"r{p}"), 1)])
    vote(models, people[2], 0)
    chosen = sorted(update_id(t, m, 1) for t in (1, 2) for m in (left, right))
    # Execute
    receipt = aggregate(models, people[0], [([left, right], chosen, b"", 1, 0)])
    # Assert
    (created,) = receipt.decode_logs(models.ModelCreated)
    assert (
        created.modelId == model_id([left, right], chosen, 1, 0) != model_id([left, right], chosen)
    )
    assert models.ruleOf(created.modelId) == (1, 0)


@pytest.mark.parametrize(
    "rule, word, reason",
    [
        (256, 0, "Models: the aggregation rule code is above MAX_RULE"),
        (2**256 - 1, 0, "Models: the aggregation rule code is above MAX_RULE"),
        (0, 1, "Models: rule 0 (the network's default aggregation) takes parameter 0"),
    ],
)
def test_invalid_rules_are_refused(aggregating, people, rule, word, reason):
    (_, models, _), ids = aggregating
    with ape.reverts(reason):
        aggregate(models, people[0], [([ROOT_MODEL_ID], ids, b"", rule, word)])
    assert models.MAX_RULE() == 255


def test_the_highest_rule_code_is_accepted(aggregating, people):
    (_, models, _), ids = aggregating
    aggregate(models, people[0], [([ROOT_MODEL_ID], ids, b"", 255, 2**256 - 1)])
    assert models.ruleOf(model_id(ROOT_MODEL_ID, ids, 255, 2**256 - 1)) == (255, 2**256 - 1)
    vote_all(models, people[1:3], AGGREGATE)
    assert models.round() == 1


def test_rule_of_an_unknown_model_reverts(running):
    _, models, _ = running
    with ape.reverts("Models: no model has this id"):
        models.ruleOf(b"\x01" * 32)
