"""Property-based tests: ids and rendering against Python, arbitrary aggregation lists."""

import pytest
from ape.exceptions import ContractLogicError
from hypothesis import given, settings
from hypothesis import strategies as st
from multiformats import CID, multihash

from mcfl_chain.dag.model_id import ROOT_MODEL_ID, model_id, update_id

from .conftest import propose_all, vote_all

bytes32 = st.binary(min_size=32, max_size=32)
uint256 = st.integers(min_value=0, max_value=2**256 - 1)
ascending_ids = st.lists(uint256, min_size=1, max_size=40, unique=True).map(sorted)


@settings(max_examples=60)
@given(parent=bytes32, ids=ascending_ids)
def test_model_id_matches_the_contract(network, parent, ids):
    _, models, _ = network
    assert models.modelIdOf(parent, ids) == model_id(parent, ids)


@settings(max_examples=40)
@given(
    proposer=st.binary(min_size=20, max_size=20),
    parent=bytes32,
    round_=st.integers(min_value=0, max_value=2**64),
)
def test_update_id_matches_the_contract(network, proposer, parent, round_):
    _, _, updates = network
    address = "0x" + proposer.hex()
    assert updates.updateIdOf(address, parent, round_) == update_id(address, parent, round_)


@pytest.fixture(scope="module")
def render(project, accounts):
    return project.RenderMock.deploy(sender=accounts[0])


@settings(max_examples=40)
@given(digest=bytes32, dag_pb=st.booleans(), address=st.binary(min_size=20, max_size=20))
def test_metadata_rendering_matches_python(render, digest, dag_pb, address):
    expected_cid = CID(
        "base32", 1, "dag-pb" if dag_pb else "raw", multihash.wrap(digest, "sha2-256")
    )
    assert render.cid(dag_pb, digest) == str(expected_cid)
    assert render.hex32(digest) == "0x" + digest.hex()
    assert render.hexAddress("0x" + address.hex()) == "0x" + address.hex()


TRAINERS_IN_ROUND = 6


@pytest.fixture
def six_in_aggregate(project, deployer, people, chain):
    """Six trainers proposed on the root in round 0, now in AGGREGATE, and a snapshot of it."""
    from .conftest import deploy

    trainers, models, updates = deploy(project, deployer, min_trainers=TRAINERS_IN_ROUND)
    for p in people[:TRAINERS_IN_ROUND]:
        trainers.register(sender=p)
    ids = propose_all(updates, people[:TRAINERS_IN_ROUND], ROOT_MODEL_ID, "p")
    vote_all(models, people[:TRAINERS_IN_ROUND], 0)
    return models, updates, ids, [chain.snapshot()]


@settings(max_examples=25)
@given(data=st.data())
def test_arbitrary_update_lists(six_in_aggregate, people, chain, data):
    # Prepare: any list drawn from this round's ids plus foreign ids, in any order
    models, updates, ids, snapshot = six_in_aggregate
    # A snapshot is consumed by restoring it: take a new one for the next example.
    chain.restore(snapshot[0])
    snapshot[0] = chain.snapshot()
    caller = data.draw(st.integers(0, TRAINERS_IN_ROUND - 1))
    pool = st.sampled_from(ids) | st.integers(1, 2**256 - 1)
    chosen = data.draw(st.lists(pool, min_size=1, max_size=8))
    own = update_id(people[caller].address, ROOT_MODEL_ID, 0)
    ascending = all(a < b for a, b in zip(chosen, chosen[1:], strict=False))
    valid = ascending and set(chosen) <= set(ids) and own in chosen
    # Execute
    try:
        receipt = updates.aggregate(chosen, b"", sender=people[caller])
    except ContractLogicError:
        accepted = False
    else:
        accepted = True
    # Assert: accepted exactly when the list is valid, under the id Python computes
    assert accepted == valid
    if accepted:
        (event,) = receipt.decode_logs(models.ModelAppended)
        assert event.modelId == model_id(ROOT_MODEL_ID, chosen)
        assert models.popularityOf(event.modelId) == 1
