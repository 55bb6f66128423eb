"""ChainClient against a real Anvil: two rounds with a merge, events, registration
policies, deadlines, and the revert reasons of refused calls."""

from __future__ import annotations

import pytest
from conftest import fake_cid
from eth_abi import encode as abi_encode

from mcfl_chain.chain import (
    AggregationArg,
    ChainClient,
    ChainError,
    Phase,
    ProposalArg,
    ProtocolLimits,
)
from mcfl_chain.chain._tx import dev_account
from mcfl_chain.chain.client import _revert_reason_of
from mcfl_chain.dag.model_id import ROOT_MODEL_ID, model_id, update_id

from .conftest import GENESIS, advance_time

ROOT = ROOT_MODEL_ID


def _by_name(events, name):
    return [e for e in events if e.name == name]


def test_two_rounds_with_a_merge_through_the_client(devnet):
    # Prepare: three trainers (minTrainers 3) and an observer without account.
    _, deployment = devnet
    c1, c2, c3 = (ChainClient(deployment, account_index=i) for i in (1, 2, 3))
    observer = ChainClient.read_only(deployment)
    start = observer.block_number()

    # Execute: round 0 — everyone proposes on the root; c1 and c3 aggregate all three
    # updates (one model, popularity 2), c2 only its own (a second model).
    ids = [c1.register(), c2.register()]
    before_start = observer.status()
    ids.append(c3.register())
    opened = c1.status()
    r0 = [
        c.submit_proposals([ProposalArg(ROOT, fake_cid(f"r0-{i}"), 100 + i)])
        for i, c in enumerate((c1, c2, c3), 1)
    ]
    u1, u2, u3 = (r[ROOT] for r in r0)
    in_aggregate = c1.status()
    [a] = c1.submit_aggregations([AggregationArg((ROOT,), (u3, u1, u2), fake_cid("model-a"))])
    [b] = c2.submit_aggregations([AggregationArg((ROOT,), (u2,))])
    [a_again] = c3.submit_aggregations([AggregationArg((ROOT,), (u1, u2, u3))])
    # Round 1 — c1 trains both models, c2 only b, c3 only votes; then c1 merges a and b
    # (parents given out of order), c2 aggregates b alone, c3 only votes.
    r1 = [
        c1.submit_proposals(
            [ProposalArg(a, fake_cid("r1-1a"), 10), ProposalArg(b, fake_cid("r1-1b"), 20)]
        ),
        c2.submit_proposals([ProposalArg(b, fake_cid("r1-2b"), 30)]),
        c3.submit_proposals([]),
    ]
    v1a, v1b, v2b = r1[0][a], r1[0][b], r1[1][b]
    merged = c1.submit_aggregations([AggregationArg((b, a), (v2b, v1b, v1a), fake_cid("merge"))])
    single = c2.submit_aggregations([AggregationArg((b,), (v2b,))])
    voted_only = c3.submit_aggregations([])
    events = observer.events(start, observer.block_number())
    end = c1.status()

    # Assert: ids, model ids and the state after each step.
    assert ids == [1, 2, 3] and not before_start.started
    assert opened == (True, 0, Phase.PROPOSE, False, True, opened.deadline, 0, 3, 0)
    assert opened.deadline > 0
    assert [u1, u2, u3] == [update_id(t, ROOT, 0) for t in (1, 2, 3)]
    assert (in_aggregate.phase, in_aggregate.quorum, in_aggregate.votes) == (Phase.AGGREGATE, 3, 0)
    assert a == a_again == model_id(ROOT, sorted([u1, u2, u3])) and b == model_id(ROOT, [u2])
    assert r1[2] == {} and voted_only == []
    assert (v1a, v1b, v2b) == (update_id(1, a, 1), update_id(1, b, 1), update_id(2, b, 1))
    merge_id = model_id(sorted([a, b]), sorted([v1a, v1b, v2b]))
    assert merged == [merge_id] and single == [model_id(b, [v2b])]
    assert (end.round, end.phase, end.voted, end.member, end.quorum) == (
        2,
        Phase.PROPOSE,
        False,
        True,
        3,
    )
    # Views.
    assert observer.popularity_of(a) == 2 and observer.popularity_of(b) == 1
    assert [observer.index_of(m) for m in (ROOT, a, b, merge_id, single[0])] == [0, 1, 2, 3, 4]
    assert observer.round_of(merge_id) == 1 and observer.model_exists(merge_id)
    assert observer.model_count() == 5 and observer.trainer_count() == 3
    assert observer.update_of(1, a, 1) == v1a and observer.update_of(3, a, 1) is None
    assert observer.update_of(2, b, 1) == v2b and observer.update_of(2, b, 0) is None
    assert observer.num_samples_of(v1b) == 20 and observer.update_round_of(v1a) == 1
    assert observer.parent_index_of(v1b) == 2 and observer.update_exists(u3)
    assert observer.holder_of(1) == c1.address and observer.holder_of(99) is None
    assert observer.genesis_cid() == GENESIS and observer.task() == "lenet:mnist"
    # Events: kinds, order and argument types.
    assert [(e.block_number, e.log_index) for e in events] == sorted(
        (e.block_number, e.log_index) for e in events
    )
    assert len(_by_name(events, "UpdateProposed")) == 6
    assert len(_by_name(events, "TrainerVoted")) == 12
    assert [e.args["round"] for e in _by_name(events, "NewRound")] == [1, 2]
    assert [
        (e.args["round"], e.args["phase"], e.args["quorum"])
        for e in events
        if e.name == "PhaseChanged"
    ] == [
        (0, 0, 3),
        (0, 1, 3),
        (1, 0, 3),
        (1, 1, 3),
        (2, 0, 3),
    ]
    proposed = _by_name(events, "UpdateProposed")[0]
    assert proposed.args == {
        "updateId": u1,
        "parent": ROOT,
        "trainerId": 1,
        "round": 0,
        "proposer": c1.address,
        "cid": fake_cid("r0-1"),
        "numSamples": 101,
    }
    created = _by_name(events, "ModelCreated")
    assert [e.args["modelId"] for e in created] == [a, b, merge_id, single[0]]
    merge = created[2].args
    assert merge["parents"] == tuple(sorted([a, b])) and merge["index"] == 3
    assert merge["updateIds"] == tuple(sorted([v1a, v1b, v2b])) and merge["trainerId"] == 1
    assert merge["weightsCid"] == fake_cid("merge") and merge["aggregator"] == c1.address
    assert created[1].args["weightsCid"] is None and created[1].args["parents"] == (ROOT,)
    appended = _by_name(events, "ModelAppended")
    assert [(e.args["modelId"], e.args["trainerId"], e.args["popularity"]) for e in appended] == [
        (a, 1, 1),
        (b, 2, 1),
        (a, 3, 2),
        (merge_id, 1, 1),
        (single[0], 2, 1),
    ]
    voted = _by_name(events, "TrainerVoted")[0].args
    assert voted == {
        "round": 0,
        "trainerId": 1,
        "phase": 0,
        "counted": True,
        "votes": 1,
        "voters": 1,
    }
    # A ModelCreated directly follows its mint and precedes its ModelAppended.
    first = events.index(created[0])
    assert events[first + 1].name == "ModelAppended"
    # The client's own decoding gives web3's values for every log of every kind.
    assert _decoded_by_web3(observer, start) == [(e.name, e.args) for e in events]


def _decoded_by_web3(client, start):
    from mcfl_chain.chain.client import _plain_args
    from mcfl_chain.chain.events import EVENT_SOURCES

    decoded = []
    for name, source in EVENT_SOURCES.items():
        contract = {"Models": client.models, "Updates": client.updates}[source]
        for entry in contract.events[name].get_logs(from_block=start):
            key = (entry["blockNumber"], entry["logIndex"])
            decoded.append((key, name, _plain_args(entry["args"])))
    return [(name, args) for _, name, args in sorted(decoded, key=lambda d: d[0])]


def test_limits_are_read_from_the_contracts(devnet):
    # Prepare
    _, deployment = devnet
    observer = ChainClient.read_only(deployment)

    # Execute
    limits = observer.limits()

    # Assert
    assert limits == ProtocolLimits(16, 16, 16, 256, 512, 36, 1_000_000)
    assert observer.max_samples() == deployment.max_samples == 1_000_000


def test_end_phase_only_ends_the_named_phase_after_the_deadline(new_devnet):
    # Prepare: two members; only c1 acts, c2 stays silent.
    deployment = new_devnet(min_trainers=2, phase_duration=60)
    c1, c2 = (ChainClient(deployment, account_index=i) for i in (1, 2))
    c1.register()
    c2.register()
    c1.submit_proposals([])

    # Execute
    with pytest.raises(ChainError) as early:
        c1.end_phase(Phase.PROPOSE)
    advance_time(c1.w3, 61)
    with pytest.raises(ChainError) as wrong_phase:
        c1.end_phase(Phase.AGGREGATE)
    c1.end_phase(Phase.PROPOSE)
    after = c1.status()
    silent = c2.status()
    c1.submit_aggregations([])  # the next phase also waits for the silent member

    # Assert: before the deadline a repeat is refused; naming another phase never votes;
    # the silent trainer is carried over into the next quorum (once).
    assert early.value.reason == "Models: this trainer already voted in this phase"
    assert wrong_phase.value.reason == (
        "Models: aggregations are only submitted in the AGGREGATE phase"
    )
    assert (after.phase, after.quorum, after.votes, after.member) == (Phase.AGGREGATE, 2, 0, True)
    assert silent.member and not silent.voted
    assert c2.status()[1:3] == (0, Phase.AGGREGATE)
    assert c1.deadline_passed() is False


def test_join_lands_in_either_phase_and_a_doomed_submission_is_not_sent(new_devnet):
    # Prepare: two members open round 0; a third trainer registers after it opened.
    deployment = new_devnet(min_trainers=2, phase_duration=60)
    c1, c2, late = (ChainClient(deployment, account_index=i) for i in (1, 2, 3))
    for client in (c1, c2, late):
        client.register()
    c1.submit_proposals([])
    c2.submit_proposals([])
    nonce = late.w3.eth.get_transaction_count(late.address)

    # Execute: the late trainer's PROPOSE vote, decided before the phase ended, would
    # revert now; its join lands in the AGGREGATE phase.
    with pytest.raises(ChainError) as doomed:
        late.submit_proposals([])
    unsent = late.w3.eth.get_transaction_count(late.address)
    landed = late.join()
    with pytest.raises(ChainError) as again:
        late.join()

    # Assert: nothing was mined for the doomed vote; the join was recorded where it
    # landed, and the late trainer is a member of the next phase.
    assert unsent == nonce
    assert "not sent: it reverts at the latest block" in str(doomed.value)
    assert doomed.value.reason == "Models: proposals are only submitted in the PROPOSE phase"
    assert again.value.reason == "Models: this trainer already voted in this phase"
    assert landed == (0, Phase.AGGREGATE)
    c1.submit_aggregations([])
    c2.submit_aggregations([])
    status = late.status()
    assert (status.round, status.phase, status.quorum, status.member) == (
        1,
        Phase.PROPOSE,
        3,
        True,
    )


def test_register_pays_the_deposit(new_devnet):
    # Prepare
    deployment = new_devnet(
        min_trainers=1, registration="deposit", deposit=10**15, cooldown=10, accounts=3
    )
    payer, cheapskate = (ChainClient(deployment, account_index=i) for i in (1, 2))
    trainers = deployment.addresses["Trainers"]

    # Execute
    trainer_id = payer.register()
    with pytest.raises(ChainError) as refused:
        cheapskate.register(value=0)

    # Assert
    assert trainer_id == 1 and payer.w3.eth.get_balance(trainers) == 10**15
    assert refused.value.reason == "Trainers: registration takes exactly the deposit"
    assert not cheapskate.is_registered()
    assert (deployment.registration, deployment.deposit, deployment.cooldown) == (
        "deposit",
        10**15,
        10,
    )


def test_allowlist_admits_only_the_allowed(new_devnet):
    # Prepare: account 1 keeps the allowlist, account 2 is admitted at start.
    deployment = new_devnet(
        min_trainers=1, registration="allowlist", admin_index=1, allowed=[2], accounts=4
    )
    admin, allowed, other = (ChainClient(deployment, account_index=i) for i in (1, 2, 3))

    # Execute
    allowed_id = allowed.register()
    with pytest.raises(ChainError) as refused:
        other.register()
    admin.set_allowed([other.address])
    other_id = other.register()

    # Assert
    assert deployment.admin == dev_account(1).address
    assert refused.value.reason == "Trainers: this address is not on the allowlist"
    assert (allowed_id, other_id) == (1, 2)


def test_a_custom_sample_cap_is_read_and_enforced(new_devnet):
    # Prepare
    deployment = new_devnet(min_trainers=1, max_samples=5_000)
    trainer = ChainClient(deployment, account_index=1)
    trainer.register()

    # Execute
    cap = trainer.max_samples()
    with pytest.raises(ChainError, match="1 to 5000 \\(Updates.maxSamples\\)"):
        trainer.submit_proposals([ProposalArg(ROOT, fake_cid("x"), 5_001)])
    accepted = trainer.submit_proposals([ProposalArg(ROOT, fake_cid("x"), 5_000)])

    # Assert
    assert cap == deployment.max_samples == 5_000
    assert trainer.num_samples_of(accepted[ROOT]) == 5_000


def test_refused_calls_raise_chain_error_with_the_reason(devnet):
    # Prepare: an account that never registered.
    _, deployment = devnet
    outsider = ChainClient(deployment, account_index=6)

    # Execute
    with pytest.raises(ChainError) as caught:
        outsider.submit_proposals([])
    with pytest.raises(ChainError) as ended:
        outsider.end_phase(Phase.AGGREGATE)
    with pytest.raises(ChainError, match="no model has this id"):
        outsider.index_of(b"\x05" * 32)
    with pytest.raises(ChainError, match="read-only"):
        ChainClient.read_only(deployment).register()

    # Assert: the submission was not sent (it reverts at the latest block); the empty
    # call that ends a phase is sent without a dry run (a deadline passes by the next
    # block, not the latest), so it reverted on chain
    assert caught.value.reason == "Models: the caller is not a registered trainer"
    assert ended.value.reason == "Models: the caller is not a registered trainer"
    assert "not sent: it reverts at the latest block" in str(caught.value)
    assert "reverted in block" in str(ended.value)


def test_a_read_only_status_reads_nobody(devnet):
    _, deployment = devnet
    status = ChainClient.read_only(deployment).status()
    assert not status.voted and not status.member


def test_status_reads_send_one_request_each_once_the_chain_id_is_known(devnet):
    # Prepare: count the requests that reach the node
    _, deployment = devnet
    client = ChainClient(deployment, account_index=1)
    sent: list[str] = []
    provider = client.w3.provider
    post = provider._make_request  # the HTTP round trip, under web3's cache

    def counting(method, request_data):
        sent.append(method)
        return post(method, request_data)

    provider._make_request = counting
    client.status()
    sent.clear()
    # Execute
    for _ in range(5):
        client.status()
    # Assert: one eth_call per read; web3's validation asks for the chain id no more
    assert sent == ["eth_call"] * 5


def test_client_refuses_a_node_of_another_chain(devnet):
    from dataclasses import replace

    _, deployment = devnet
    with pytest.raises(ChainError, match="runs chain 31337"):
        ChainClient.read_only(replace(deployment, chain_id=5))
    with pytest.raises(ValueError, match="not several"):
        ChainClient(deployment, 1, account_index=2)


def test_the_largest_calls_fit_their_gas_limits(new_devnet):
    # Prepare: 16 members; round 0 gives 16 models (each aggregates only its own update).
    # A 17th trainer registers late: its first call ever (fresh storage slots) will be
    # 16 proposals. Every member then proposes on all 16 models.
    deployment = new_devnet(min_trainers=16, accounts=18, phase_duration=3_600)
    clients = [ChainClient(deployment, account_index=i) for i in range(1, 17)]
    late = ChainClient(deployment, account_index=17)
    for c in clients:
        c.register()
    late.register()
    own = [
        c.submit_proposals([ProposalArg(ROOT, fake_cid(f"g{i}"), 1)]) for i, c in enumerate(clients)
    ]
    models = [
        c.submit_aggregations([AggregationArg((ROOT,), (o[ROOT],))])[0]
        for c, o in zip(clients, own, strict=True)
    ]

    # Execute: the late trainer's 16 proposals, then one merge of 16 parents and 256 ids.
    late.submit_proposals([ProposalArg(m, fake_cid(f"late-{k}"), 1) for k, m in enumerate(models)])
    first_call = _last_transaction(late)
    proposals = [
        c.submit_proposals([ProposalArg(m, fake_cid(f"p{i}-{k}"), 1) for k, m in enumerate(models)])
        for i, c in enumerate(clients)
    ]
    ids = tuple(uid for p in proposals for uid in p.values())
    [merge] = clients[0].submit_aggregations([AggregationArg(tuple(models), ids)])
    merge_call = _last_transaction(clients[0])

    # Assert: each used at most 70 % of the gas limit the client sent it with.
    assert len(ids) == 256 and merge == model_id(sorted(models), sorted(ids))
    for gas_used, limit in (first_call, merge_call):
        assert gas_used <= 0.7 * limit, (gas_used, limit)


def _last_transaction(client):
    w3 = client.w3
    block = w3.eth.get_block("latest", full_transactions=True)
    [tx] = [t for t in block["transactions"] if t["from"] == client.address]
    return w3.eth.get_transaction_receipt(tx["hash"])["gasUsed"], tx["gas"]


@pytest.mark.parametrize(
    "error, reason",
    [
        (  # Error(string) in data, as Anvil answers
            {
                "code": 3,
                "message": "execution reverted",
                "data": "0x08c379a0" + abi_encode(["string"], ["Models: no"]).hex(),
            },
            "Models: no",
        ),
        (
            {
                "code": 3,
                "message": "x",
                "data": {"data": "0x08c379a0" + abi_encode(["string"], ["nested"]).hex()},
            },
            "nested",
        ),  # fmt: skip
        ({"code": -32000, "message": "execution reverted: Updates: bad"}, "Updates: bad"),
        ({"code": 3, "message": "execution reverted", "data": "0xdeadbeef"}, None),
        ({"code": -32000, "message": "insufficient funds for gas"}, None),
        ("not an object", None),
    ],
)
def test_a_dry_runs_revert_reason_is_read_from_the_error_data_or_message(error, reason):
    assert _revert_reason_of(error) == reason
