"""Real Anvil devnets on free loopback ports, with the contracts deployed."""

from __future__ import annotations

import pytest
from conftest import fake_cid

from mcfl_chain._utils.process import free_port
from mcfl_chain.chain.devnet import start_devnet, stop_devnet

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


@pytest.fixture
def new_devnet(tmp_path_factory):
    """Start a devnet of its own for one test: ``new_devnet(**start_devnet keywords)``."""
    started = []

    def start(**options):
        state_dir = tmp_path_factory.mktemp("own-devnet")
        options = {"genesis_cid": GENESIS, "task": "lenet:mnist", "accounts": 6, **options}
        _, deployment = start_devnet(state_dir, free_port(), **options)
        started.append(state_dir)
        return deployment

    yield start
    for state_dir in started:
        stop_devnet(state_dir)


def advance_time(w3, seconds: int) -> None:
    """Move the devnet's clock forward and mine a block."""
    w3.provider.make_request("evm_increaseTime", [seconds])
    w3.provider.make_request("evm_mine", [])
