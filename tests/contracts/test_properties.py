"""Property-based tests: ids against Python, arbitrary aggregation lists."""

import pytest
from ape.exceptions import ContractLogicError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mcfl_chain.dag.model_id import ROOT_MODEL_ID, model_id, update_id

from .conftest import AGGREGATE, aggregate, deploy, propose_all

bytes32 = st.binary(min_size=32, max_size=32)
uint256 = st.integers(min_value=0, max_value=2**256 - 1)
ascending_ids = st.lists(uint256, min_size=1, max_size=40, unique=True).map(sorted)
ascending_parents = st.lists(bytes32, min_size=2, max_size=6, unique=True).map(sorted)
# (code, word) pairs the contract accepts: rule 0 with word 0, or a code 1..255 and any word.
rules = st.just((0, 0)) | st.tuples(st.integers(min_value=1, max_value=255), uint256)
FIXTURES = [HealthCheck.function_scoped_fixture]


@settings(max_examples=40, suppress_health_check=FIXTURES)
@given(parent=bytes32, ids=ascending_ids, rule=rules)
def test_model_id_matches_the_contract(network, parent, ids, rule):
    _, models, _ = network
    expected = model_id(parent, ids, *rule)
    assert models.modelIdOf([parent], ids, *rule) == expected == model_id([parent], ids, *rule)
    assert (expected == model_id(parent, ids)) == (rule == (0, 0))


@settings(max_examples=30, suppress_health_check=FIXTURES)
@given(parents=ascending_parents, ids=ascending_ids, rule=rules)
def test_merged_model_id_matches_the_contract(network, parents, ids, rule):
    _, models, _ = network
    merged = model_id(parents, ids, *rule)
    assert models.modelIdOf(parents, ids, *rule) == merged
    assert merged != model_id(parents[0], ids, *rule)


@settings(max_examples=30, suppress_health_check=FIXTURES)
@given(
    trainer=st.integers(min_value=1, max_value=2**32),
    parent=bytes32,
    round_=st.integers(min_value=0, max_value=2**64),
)
def test_update_id_matches_the_contract(network, trainer, parent, round_):
    _, _, updates = network
    assert updates.updateIdOf(trainer, parent, round_) == update_id(trainer, parent, round_)


TRAINERS_IN_ROUND = 6


@pytest.fixture
def six_in_aggregate(project, deployer, people, chain):
    """Six trainers proposed on the root in round 0, now in AGGREGATE, and a snapshot of it."""
    trainers, models, updates = deploy(project, deployer, min_trainers=TRAINERS_IN_ROUND)
    for p in people[:TRAINERS_IN_ROUND]:
        trainers.register(sender=p)
    ids = propose_all(models, trainers, people[:TRAINERS_IN_ROUND], ROOT_MODEL_ID, "p")
    assert models.phase() == AGGREGATE
    return models, ids, [chain.snapshot()]


@settings(max_examples=20, suppress_health_check=FIXTURES, deadline=None)
@given(data=st.data())
def test_arbitrary_update_lists(six_in_aggregate, people, chain, data):
    # Prepare: any list drawn from this round's ids plus foreign ids, in any order
    models, ids, snapshot = six_in_aggregate
    # A snapshot is consumed by restoring it: take a new one for the next example.
    chain.restore(snapshot[0])
    snapshot[0] = chain.snapshot()
    caller = data.draw(st.integers(0, TRAINERS_IN_ROUND - 1))
    pool = st.sampled_from(ids) | st.integers(1, 2**256 - 1)
    chosen = data.draw(st.lists(pool, min_size=1, max_size=8))
    rule, word = data.draw(rules | st.tuples(st.integers(0, 2**256 - 1), uint256))
    own = update_id(caller + 1, ROOT_MODEL_ID, 0)
    ascending = all(a < b for a, b in zip(chosen, chosen[1:], strict=False))
    valid_rule = rule <= 255 and (rule != 0 or word == 0)
    valid = ascending and set(chosen) <= set(ids) and own in chosen and valid_rule
    # Execute
    try:
        receipt = aggregate(models, people[caller], [([ROOT_MODEL_ID], chosen, b"", rule, word)])
    except ContractLogicError:
        accepted = False
    else:
        accepted = True
    # Assert: accepted exactly when the list is valid, under the id Python computes
    assert accepted == valid
    if accepted:
        (event,) = receipt.decode_logs(models.ModelCreated)
        assert event.modelId == model_id(ROOT_MODEL_ID, chosen, rule, word)
        assert (event.rule, event.ruleParameter) == (rule, word)
        assert models.ruleOf(event.modelId) == (rule, word)
        assert models.popularityOf(event.modelId) == 1
