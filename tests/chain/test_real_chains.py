"""What a public chain does that a devnet does not, played on real Anvil nodes.

Bounded ``eth_getLogs`` ranges (providers cap them), confirmations and reorgs (with
Anvil's ``anvil_reorg``, which replaces the last blocks by new ones and drops their
transactions unless given again), fees above the user's cap, and a node whose answers
are errors rather than silence.
"""

from __future__ import annotations

import math

import pytest
from conftest import fake_cid
from web3 import Web3
from web3.exceptions import Web3RPCError

from mcfl_chain.chain._tx import GWEI, FeePolicy
from mcfl_chain.chain.client import ChainClient, ChainError, Phase, ProposalArg
from mcfl_chain.chain.errors import FeeCapExceeded
from mcfl_chain.dag.graph import ROOT_ID


def _mine(w3: Web3, blocks: int) -> None:
    for _ in range(blocks):
        w3.provider.make_request("evm_mine", [])


def _reorg(w3: Web3, depth: int, transactions: list | None = None) -> None:
    """Anvil replaces the last ``depth`` blocks (their transactions are dropped, unless
    given again as ``[raw transaction, block offset]`` pairs)."""
    answer = w3.provider.make_request("anvil_reorg", [depth, transactions or []])
    assert "error" not in answer, answer


def _count_log_requests(client: ChainClient, monkeypatch, refuse_above: int | None = None):
    """Record the block range of every ``eth_getLogs`` the client makes; optionally refuse
    ranges wider than ``refuse_above`` blocks as a capped provider does."""
    spans: list[tuple[int, int]] = []
    real = client.w3.eth.get_logs

    def get_logs(params):
        span = (int(params["fromBlock"]), int(params["toBlock"]))
        spans.append(span)
        if refuse_above is not None and span[1] - span[0] + 1 > refuse_above:
            raise Web3RPCError(f"query exceeds max block range {refuse_above}")
        return real(params)

    monkeypatch.setattr(client.w3.eth, "get_logs", get_logs)
    return spans


@pytest.fixture
def busy_network(new_devnet):
    """A devnet whose history holds one round with proposals and votes, then 30 blocks."""
    deployment = new_devnet(min_trainers=2, accounts=4)
    trainers = [ChainClient(deployment, account_index=i) for i in (1, 2)]
    for trainer in trainers:
        trainer.register()
    for i, trainer in enumerate(trainers):
        trainer.submit_proposals([ProposalArg(ROOT_ID, fake_cid(f"update {i}"), 10)])
    _mine(trainers[0].w3, 30)
    return deployment


# -- bounded log ranges -----------------------------------------------------------------


def test_a_sync_over_more_blocks_than_the_log_range_takes_several_requests(
    busy_network, monkeypatch
):
    # Prepare
    whole = ChainClient.read_only(busy_network)
    bounded = ChainClient(busy_network, max_log_range=4)
    spans = _count_log_requests(bounded, monkeypatch)
    start, head = busy_network.deployment_block, whole.block_number()

    # Execute
    events = bounded.events(start, head)

    # Assert: the same events as one request over the whole range, read in ranges of at
    # most 4 blocks that tile it exactly.
    assert events == whole.events(start, head)
    assert {e.name for e in events} >= {"UpdateProposed", "TrainerVoted", "PhaseChanged"}
    assert len(spans) == math.ceil((head - start + 1) / 4) >= 8
    assert spans[0][0] == start and spans[-1][1] == head
    assert all(b - a + 1 <= 4 for a, b in spans)
    assert all(nxt[0] == prev[1] + 1 for prev, nxt in zip(spans, spans[1:], strict=False))


def test_a_provider_refusing_a_wide_range_is_read_in_halves(busy_network, monkeypatch, caplog):
    # Prepare: the provider refuses more than 5 blocks per request; the client asks 32.
    whole = ChainClient.read_only(busy_network)
    capped = ChainClient(busy_network, max_log_range=32)
    spans = _count_log_requests(capped, monkeypatch, refuse_above=5)
    start, head = busy_network.deployment_block, whole.block_number()

    # Execute
    with caplog.at_level("INFO", logger="mcfl_chain.chain"):
        events = capped.events(start, head)

    # Assert: 32 -> 16 -> 8 -> 4 blocks per request, said once per halving.
    assert events == whole.events(start, head)
    assert [b - a + 1 for a, b in spans[:4]] == [32, 16, 8, 4]
    assert all(b - a + 1 <= 4 for a, b in spans[4:])
    assert sum("4 blocks at a time" in r.getMessage() for r in caplog.records) == 1


# -- confirmations and reorgs -----------------------------------------------------------


@pytest.fixture
def round_zero(new_devnet):
    """Two registered trainers with 3 confirmations, round 0's PROPOSE phase confirmed."""
    deployment = new_devnet(min_trainers=2, accounts=4)
    trainers = [ChainClient(deployment, account_index=i, confirmations=3) for i in (1, 2)]
    for trainer in trainers:
        trainer.register()
    _mine(trainers[0].w3, 4)  # the opening is 3 deep; the last blocks are empty
    return deployment, trainers


def _votes(client: ChainClient, trainer: ChainClient) -> list:
    head = client.latest_block()
    return [
        e
        for e in client.events(client.deployment.deployment_block, head)
        if e.name == "TrainerVoted" and e.args["trainerId"] == trainer.trainer_id()
    ]


def test_with_confirmations_the_client_acts_on_blocks_that_deep(round_zero):
    # Prepare
    deployment, (first, _) = round_zero
    latest = first.latest_block()

    # Execute
    status = first.status()

    # Assert: views and the sync position lag the head by 3 blocks.
    assert first.block_number() == latest - 3
    assert status.started and status.round == 0 and status.phase is Phase.PROPOSE
    assert not status.voted


def test_a_vote_a_reorg_dropped_is_sent_again_once(round_zero, caplog):
    # Prepare: trainer 1 votes; the vote is mined but not 3 deep yet.
    deployment, (first, _) = round_zero
    w3 = first.w3
    first.submit_proposals([])
    assert not first._status_at(first.address, first.block_number()).voted
    assert first.status().voted  # its own vote counts at once: it is not sent twice

    # Execute: a reorg of 2 blocks (shallower than 3) drops the vote's block.
    _reorg(w3, 2)
    with caplog.at_level("WARNING", logger="mcfl_chain.chain"):
        after = first.status()

    # Assert: the vote is missing again, said so, and sent again with the right nonce.
    assert not after.voted
    assert "no longer on chain (a reorg dropped it)" in caplog.text
    assert _votes(first, first) == []
    first.submit_proposals([])
    _mine(w3, 3)
    assert first.status().voted
    assert len(_votes(first, first)) == 1


def test_a_vote_back_in_the_pool_after_a_reorg_is_not_sent_twice(round_zero):
    # Prepare: trainer 2 votes, then a reorg drops its block and, as real nodes do, the
    # transaction goes back to the pool (here: sent again by hand, mining paused).
    deployment, (_, second) = round_zero
    w3 = second.w3
    second.submit_proposals([])
    (tx_hash,) = second._my_votes.values()
    raw = w3.eth.get_raw_transaction(tx_hash)
    nonce = w3.eth.get_transaction_count(second.address)
    w3.provider.make_request("evm_setAutomine", [False])
    try:
        _reorg(w3, 1)
        w3.eth.send_raw_transaction(raw)

        # Execute
        pending = second.status()

        # Assert: the pending vote counts; nothing else was sent.
        assert pending.voted
        _mine(w3, 4)
    finally:
        w3.provider.make_request("evm_setAutomine", [True])
    assert second.status().voted
    assert len(_votes(second, second)) == 1
    assert w3.eth.get_transaction_count(second.address) == nonce


def test_a_reader_with_confirmations_never_sees_an_event_a_shallow_reorg_removed(round_zero):
    # Prepare: trainer 1 proposes an update; a reader without confirmations sees it.
    deployment, (first, _) = round_zero
    w3 = first.w3
    hasty = ChainClient.read_only(deployment)
    careful = ChainClient(deployment, confirmations=3)
    first.submit_proposals([ProposalArg(ROOT_ID, fake_cid("short-lived"), 10)])
    seen_by_hasty = hasty.events(deployment.deployment_block, hasty.block_number())
    seen_by_careful = careful.events(deployment.deployment_block, careful.block_number())

    # Execute: the proposal's block is reorged away, then the chain grows past 3 deep.
    _reorg(w3, 1)
    _mine(w3, 5)
    later = careful.events(deployment.deployment_block, careful.block_number())

    # Assert: the hasty reader acted on an update that no longer exists; the careful one
    # never saw it.
    def proposed(events):
        return [e for e in events if e.name == "UpdateProposed"]

    assert len(proposed(seen_by_hasty)) == 1
    assert proposed(seen_by_careful) == [] and proposed(later) == []


def test_with_confirmations_a_transaction_the_latest_block_refuses_is_not_sent(round_zero):
    # Prepare: trainer 1 voted; its confirmed view still shows PROPOSE unvoted.
    deployment, (first, second) = round_zero
    second.submit_proposals([])
    first.submit_proposals([])  # both voted: AGGREGATE opened at the latest block
    nonce = first.w3.eth.get_transaction_count(first.address)

    # Execute / Assert: a second PROPOSE submission reverts at the latest block, so it is
    # refused before it is sent (no gas paid).
    with pytest.raises(ChainError, match="not sent: it reverts at the latest block"):
        first.submit_proposals([ProposalArg(ROOT_ID, fake_cid("late"), 10)])
    assert first.w3.eth.get_transaction_count(first.address) == nonce


# -- fees -------------------------------------------------------------------------------


def _set_base_fee(w3: Web3, gwei: int) -> None:
    w3.provider.make_request("anvil_setNextBlockBaseFeePerGas", [hex(gwei * GWEI)])
    _mine(w3, 1)


def test_transactions_are_refused_while_the_base_fee_is_above_the_cap(new_devnet):
    # Prepare: the base fee jumps to 50 gwei; the trainer caps its fees at 20 gwei.
    deployment = new_devnet(min_trainers=2, accounts=3)
    capped = ChainClient(deployment, account_index=1, fees=FeePolicy.from_gwei(20))
    w3 = capped.w3
    _set_base_fee(w3, 50)
    nonce = w3.eth.get_transaction_count(capped.address)

    # Execute
    with pytest.raises(FeeCapExceeded) as refused:
        capped.register()

    # Assert: one line saying why, with both figures and the option; nothing sent.
    message = str(refused.value)
    assert "\n" not in message and "not sent" in message
    assert "base fee is 50 gwei" in message and "cap of 20 gwei" in message
    assert "--max-fee-gwei" in message
    assert w3.eth.get_transaction_count(capped.address) == nonce


def test_fees_stay_under_the_cap_when_it_is_above_the_base_fee(new_devnet):
    # Prepare: base fee 30 gwei, cap 40 gwei (below twice the base fee), tip 2 gwei.
    deployment = new_devnet(min_trainers=2, accounts=3)
    client = ChainClient(deployment, account_index=1, fees=FeePolicy.from_gwei(40, 2))
    _set_base_fee(client.w3, 30)

    # Execute
    client.register()

    # Assert: the registration is mined with maxFeePerGas = the cap.
    block = client.w3.eth.get_block("latest", full_transactions=True)
    (tx,) = [t for t in block["transactions"] if t["from"] == client.address]
    assert tx["maxFeePerGas"] == 40 * GWEI and tx["maxPriorityFeePerGas"] == 2 * GWEI
    assert block["baseFeePerGas"] <= 40 * GWEI


def test_fee_policy_from_gwei_and_its_tip_under_a_tight_cap():
    # Execute
    default = FeePolicy.from_gwei()
    capped = FeePolicy.from_gwei(1.5, 0.25)

    # Assert
    assert default == FeePolicy(max_fee_per_gas=None, priority_fee_per_gas=1)
    assert capped == FeePolicy(max_fee_per_gas=1_500_000_000, priority_fee_per_gas=250_000_000)
    with pytest.raises(ValueError, match="above 0 wei"):
        FeePolicy(max_fee_per_gas=0)
