"""ChainClient against a real Anvil: a full round, events, revert reasons, deadlines."""

import pytest

from mcfl_chain.chain.client import ChainClient, ChainError, Phase
from mcfl_chain.chain.gas import fake_cid
from mcfl_chain.dag.model_id import ROOT_MODEL_ID, model_id, update_id

from .conftest import GENESIS


def test_a_full_round_through_the_client(devnet):
    # Prepare
    _, deployment = devnet
    clients = [ChainClient(deployment, account_index=i) for i in (1, 2, 3)]
    observer = ChainClient.read_only(deployment)
    start = observer.block_number()
    # Execute
    ids = [c.register() for c in clients]
    started, round_, phase = observer.round_state()
    updates = [c.propose(ROOT_MODEL_ID, fake_cid(f"u{i}"), 100 + i) for i, c in enumerate(clients)]
    for c in clients:
        c.finish_proposals()
    mid_state = observer.round_state()
    first = clients[0].aggregate(updates, fake_cid("model"))
    second = clients[1].aggregate(list(reversed(updates)), "")
    for c in clients:
        c.next_round()
    events = observer.events(start, observer.block_number())
    # Assert
    assert ids == [1, 2, 3] and (started, round_, phase) == (True, 0, Phase.PROPOSE)
    assert updates == [update_id(c.address, ROOT_MODEL_ID, 0) for c in clients]
    assert mid_state == (True, 0, Phase.AGGREGATE)
    assert first == second == model_id(ROOT_MODEL_ID, sorted(updates))
    assert observer.popularity_of(first) == 2 and observer.parent_of(first) == ROOT_MODEL_ID
    assert observer.round_of(first) == 0 and observer.model_exists(first)
    assert observer.weights_cid_of(first) == fake_cid("model")
    assert observer.round_state() == (True, 1, Phase.PROPOSE)
    assert observer.votes_and_quorum() == (0, 3) and observer.model_count() == 2
    assert clients[0].has_aggregated(clients[0].address, ROOT_MODEL_ID, 0)
    assert not clients[2].has_aggregated(clients[2].address, ROOT_MODEL_ID, 0)
    assert observer.update_of(clients[1].address, ROOT_MODEL_ID, 0) == updates[1]
    assert observer.update_of(clients[1].address, ROOT_MODEL_ID, 1) is None
    assert observer.update_cid(updates[2]) == fake_cid("u2")
    assert observer.num_samples_of(updates[2]) == 102
    assert observer.genesis_cid() == GENESIS and observer.task() == "lenet:mnist"
    names = [e.name for e in events]
    assert names.count("UpdateProposed") == 3 and names.count("ModelAppended") == 2
    assert names.count("TrainerVoted") == 6 and names.count("NewRound") == 1
    assert [(e.block_number, e.log_index) for e in events] == sorted(
        (e.block_number, e.log_index) for e in events
    )
    proposed = next(e for e in events if e.name == "UpdateProposed")
    assert proposed.args["cid"] == fake_cid("u0") and proposed.args["numSamples"] == 100
    appended = [e for e in events if e.name == "ModelAppended"]
    assert appended[0].args["weightsCid"] == fake_cid("model")
    assert appended[1].args["weightsCid"] is None
    assert appended[0].args["updateIds"] == tuple(sorted(updates))
    assert events[-1].name == "PhaseChanged" and events[-1].args["round"] == 1


def test_refused_calls_raise_chain_error_with_the_reason(devnet):
    _, deployment = devnet
    outsider = ChainClient(deployment, account_index=6)
    with pytest.raises(ChainError) as caught:
        outsider.finish_proposals()
    assert caught.value.reason == "Models: the caller is not a registered trainer"
    with pytest.raises(ChainError, match="no model has this id"):
        outsider.parent_of(b"\x05" * 32)
    with pytest.raises(ChainError, match="read-only"):
        ChainClient.read_only(deployment).register()
    with pytest.raises(ValueError, match="not a CID"):
        outsider.propose(ROOT_MODEL_ID, "not-a-cid", 1)


def test_deadline_passed_and_force_advance(devnet):
    # Prepare: a registered trainer that votes alone, then time moves past the deadline
    _, deployment = devnet
    late = ChainClient(deployment, account_index=4)
    late.register()
    started, round_, phase = late.round_state()
    assert started
    assert not late.deadline_passed()
    status = late.status()
    assert (status.started, status.round, status.phase) == (started, round_, phase)
    assert status.deadline == late.phase_deadline() > 0 and not status.voted
    assert (status.votes, status.quorum) == late.votes_and_quorum()
    # Execute
    late.w3.provider.make_request("evm_increaseTime", [61])
    late.w3.provider.make_request("evm_mine", [])
    passed = late.deadline_passed()
    other = Phase.AGGREGATE if phase is Phase.PROPOSE else Phase.PROPOSE
    with pytest.raises(ChainError, match="only allowed in the"):
        late.force_advance(other)  # naming a phase that is not current never votes
    late.force_advance(phase)
    # Assert
    assert passed
    after = late.round_state()
    assert after[1:] != (round_, phase)


def test_client_refuses_a_node_of_another_chain(devnet):
    from dataclasses import replace

    _, deployment = devnet
    with pytest.raises(ChainError, match="runs chain 31337"):
        ChainClient.read_only(replace(deployment, chain_id=5))
    with pytest.raises(ValueError, match="not several"):
        ChainClient(deployment, 1, account_index=2)
