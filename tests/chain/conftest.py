"""A real Anvil devnet on a free loopback port, with the contracts deployed."""

from __future__ import annotations

import pytest

from mcfl_chain._utils.process import free_port
from mcfl_chain.chain.devnet import start_devnet, stop_devnet
from mcfl_chain.chain.gas import fake_cid

GENESIS = fake_cid("genesis")


@pytest.fixture(scope="module")
def devnet(tmp_path_factory):
    """(ServiceState, Deployment) of a devnet with minTrainers 3 and a 60 s phase deadline."""
    state_dir = tmp_path_factory.mktemp("devnet")
    state, deployment = start_devnet(
        state_dir,
        free_port(),
        genesis_cid=GENESIS,
        task="lenet:mnist",
        min_trainers=3,
        phase_duration=60,
        accounts=8,
    )
    yield state, deployment
    stop_devnet(state_dir)
