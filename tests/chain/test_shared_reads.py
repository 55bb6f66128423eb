"""A host's trainers share their chain reads (mcfl_chain.host.chain), on a real devnet:
events are fetched once for all, a status is read again only on a new head or after
the trainer's own transaction."""

from __future__ import annotations

import pytest

from mcfl_chain.chain.client import ChainClient
from mcfl_chain.host.chain import HostedChainClient, SharedReads


def test_hosted_clients_fetch_events_once_and_reread_their_status_after_their_own_transaction(
    new_devnet,
):
    # Prepare: a head read once for the whole test (refresh of an hour)
    deployment = new_devnet(min_trainers=2)
    reader = ChainClient.read_only(deployment)
    shared = SharedReads(reader, refresh=3600)
    first = HostedChainClient.adopt(ChainClient(deployment, account_index=1), shared)
    second = HostedChainClient.adopt(ChainClient(deployment, account_index=2), shared)

    # Execute / Assert: another trainer's transaction leaves the cached status (no read)
    before = first.status()
    assert not before.started
    second.register()
    assert first.status() is before
    # its own transaction makes it read again: the second registration opened round 0
    first.register()
    after = first.status()
    assert after.started and after.round == 0 and after is not before

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
