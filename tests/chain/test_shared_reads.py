"""A host's trainers share their chain reads (mcfl_chain.host.chain), on a real devnet:
events are fetched once for all, a status is read again only on a new head or after
the trainer's own transaction."""

from __future__ import annotations

import threading
import time

import pytest

from mcfl_chain.chain.client import ChainClient, ChainError
from mcfl_chain.dag.cohort import cohort_of
from mcfl_chain.host.chain import WAIT_AT_MOST, HostedChainClient, SharedReads


def test_hosted_clients_fetch_events_once_and_reread_their_status_after_their_own_transaction(
    new_devnet,
):
    # Prepare: a head read once for the whole test (refresh of an hour)
    deployment = new_devnet(min_trainers=2)
    reader = ChainClient.read_only(deployment)
    shared = SharedReads(reader, refresh=3600)
    first = HostedChainClient.adopt(ChainClient(deployment, account_index=1), shared)
    second = HostedChainClient.adopt(ChainClient(deployment, account_index=2), shared)
    # one set of contract objects for the host: the reader's
    assert first.models is second.models is reader.models
    assert first.trainers is reader.trainers and second.updates is reader.updates

    # Execute / Assert: another trainer's transaction leaves the cached status (no read)
    before = first.status()
    assert not before.started
    second.register()
    assert first.status() is before
    # its own transaction makes it read again: the second registration opened round 0
    first.register()
    after = first.status()
    assert after.started and after.round == 0 and after is not before

    # the head: its own after its own transaction, then the host's (read once here)
    latest = reader.block_number()
    assert first.block_number() == latest
    assert first.block_number() == shared.head() < latest

    # events: the first trainer's sync fetches, the second's reads the host's copy
    head = reader.block_number()
    mine = first.events(deployment.deployment_block, head)
    fetches = shared.fetches
    assert second.events(deployment.deployment_block, head) == mine
    assert shared.fetches == fetches
    assert mine == reader.events(deployment.deployment_block, head)
    assert "PhaseChanged" in {e.name for e in mine}


def test_a_client_waiting_for_confirmations_is_not_hosted(new_devnet):
    deployment = new_devnet()
    shared = SharedReads(ChainClient.read_only(deployment))
    client = ChainClient(deployment, account_index=1, confirmations=2)

    with pytest.raises(ValueError, match="confirmations"):
        HostedChainClient.adopt(client, shared)


def test_a_cohort_trainers_draw_is_read_again_only_after_its_own_transaction(new_devnet):
    # Prepare: a cohort network; count the node requests of one trainer's client
    deployment = new_devnet(min_trainers=2, cohort=0.5)
    client = ChainClient(deployment, account_index=1)
    other = ChainClient(deployment, account_index=2)
    client.register()
    sent: list[str] = []
    post = client.w3.provider._make_request

    def counting(method, request_data):
        sent.append(method)
        return post(method, request_data)

    client.w3.provider._make_request = counting
    drawn = client.drawn_round()
    reads = len(sent)

    # Execute / Assert: asked again (a trainer sitting out asks before every look),
    # it answers from memory, even after another trainer's transaction
    other.register()
    assert [client.drawn_round() for _ in range(3)] == [drawn] * 3
    assert len(sent) == reads
    assert (
        drawn
        == ChainClient.read_only(deployment)._view(
            client.models.functions.drawnRoundOf(client.trainer_id())
        )[1]
    )

    # round 0's cohort as the worker computes it is whom the contract counts as members
    cohort = cohort_of(client.cohort_seed(), 0, client.cohort_bps(), client.last_trainer_id())
    assert client.last_trainer_id() == 2
    for trainer in (client, other):
        assert trainer.status().member == (trainer.trainer_id() in cohort)

    # its own transaction may move the draw: the next look reads the chain again (a
    # trainer drawn for a later round is refused a new draw, before anything is sent)
    status = client.status()
    assert status.started
    if status.member:
        client.submit_proposals([])
    else:
        with pytest.raises(ChainError, match="drawn for a later round"):
            client.join()
    sent.clear()
    again = client.drawn_round()
    assert sent, "the draw was not read again after the trainer's own transaction"
    view = ChainClient.read_only(deployment)._view(
        client.models.functions.drawnRoundOf(client.trainer_id())
    )
    assert (again is not None, again or 0) == (bool(view[0]), int(view[1]))


def test_a_waiting_hosted_trainer_wakes_when_its_status_changes_not_on_a_timer(new_devnet):
    # Prepare: trainer 1 registered, waiting for round 0 (minTrainers 2)
    deployment = new_devnet(min_trainers=2)
    shared = SharedReads(ChainClient.read_only(deployment), refresh=0.05)
    first = HostedChainClient.adopt(ChainClient(deployment, account_index=1), shared)
    second = ChainClient(deployment, account_index=2)
    first.register()
    first.status()  # its own read, after its own transaction
    status = first.status()  # the host's snapshot
    assert not status.started
    stop = threading.Event()
    # nothing changes: it sleeps its longest wait, not the poll interval it asks for
    began = time.monotonic()
    first.wait_for_news(status, 0.01, stop)
    assert time.monotonic() - began >= 0.9 * WAIT_AT_MOST
    status = first.status()
    woke: list[float] = []

    def wait() -> None:
        began = time.monotonic()
        first.wait_for_news(status, 60.0, stop)
        woke.append(time.monotonic() - began)

    # Execute: another trainer's registration opens round 0 while it waits
    waiter = threading.Thread(target=wait)
    waiter.start()
    time.sleep(0.3)
    second.register()
    waiter.join(30)

    # Assert: it woke for the change, long before its 60 s, and sees round 0 open
    assert woke and woke[0] < 30
    assert first.status().started
    shared.close()


def test_within_a_phase_one_round_state_read_updates_every_hosted_status(new_devnet):
    # Prepare: three trainers, two of them hosted; round 0 open, nobody voted yet
    deployment = new_devnet(min_trainers=3)
    shared = SharedReads(ChainClient.read_only(deployment), refresh=0)
    first = HostedChainClient.adopt(ChainClient(deployment, account_index=1), shared)
    second = HostedChainClient.adopt(ChainClient(deployment, account_index=2), shared)
    third = ChainClient(deployment, account_index=3)
    for trainer in (first, second, third):
        trainer.register()
    first.status(), second.status()  # their own reads, after their own transactions
    assert first.status().started and second.status().votes == 0  # the host's
    full = shared.full_reads
    assert full >= 1

    # Execute / Assert: an outside vote: the votes move for both, without a full read
    third.submit_proposals([])
    assert (first.status().votes, second.status().votes) == (1, 1)
    assert shared.full_reads == full
    # its own vote: it reads its status itself, and the host's later refreshes keep it
    first.submit_proposals([])
    assert first.status().voted
    assert not second.status().voted and second.status().votes == 2
    assert first.status().voted and first.status().votes == 2
    assert shared.full_reads == full
    # the last vote ends the phase: everyone's status read again, nobody has voted
    second.submit_proposals([])
    second.status()  # its own read
    after = first.status()
    assert after.phase != 0 and not after.voted and after.member and after.votes == 0
    assert shared.full_reads == full + 1
    assert after == ChainClient.read_only(deployment).status(first.address)
