"""Startup checks against real Anvil devnets: each mistake is one line saying what to do."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from conftest import fake_cid
from eth_account import Account
from web3 import Web3

from mcfl_chain._utils.process import free_port
from mcfl_chain.chain.deploy import deploy_network
from mcfl_chain.chain.devnet import start_devnet, stop_devnet
from mcfl_chain.storage import LocalStorage, cid_for_bytes
from mcfl_chain.worker.config import WorkerConfig
from mcfl_chain.worker.launch import build_worker
from mcfl_chain.worker.preflight import (
    STORAGE_PROBE,
    ChainOptions,
    WorkerSetupError,
    check_account,
    check_network,
    connect_chain,
    open_state,
    open_store,
    prepare,
)
from mcfl_chain.worker.state import WorkerState

TASK = "lenet5:digits"


@pytest.fixture(scope="module")
def devnets(tmp_path_factory):
    """Two fresh devnets: same task and addresses, different genesis weights."""
    dirs = [tmp_path_factory.mktemp(f"devnet{i}") for i in (0, 1)]
    try:
        deployments = [
            start_devnet(d, free_port(), genesis_cid=fake_cid(f"g{i}"), task=TASK, accounts=4)[1]
            for i, d in enumerate(dirs)
        ]
        yield deployments
    finally:
        for d in dirs:
            stop_devnet(d)


def client(dep, rpc=None, account=1):
    return connect_chain(
        dep, rpc or dep.rpc_url, account=account, options=ChainOptions(give_up_after=1.0)
    )


# -- the network --------------------------------------------------------------------------


def test_the_right_network_passes(devnets):
    # Execute
    chain = client(devnets[0])
    check_network(chain, "deployment.json", devnets[0].rpc_url)
    check_account(chain, 1, devnets[0].rpc_url)


def test_another_devnet_at_the_same_addresses_is_refused(devnets):
    # Prepare: the first network's file, the second network's node.
    first, second = devnets
    assert first.addresses == second.addresses
    chain = client(first, rpc=second.rpc_url)

    # Execute / Assert
    with pytest.raises(WorkerSetupError, match="runs another network than first.json") as err:
        check_network(chain, "first.json", second.rpc_url)
    assert fake_cid("g0") in str(err.value) and fake_cid("g1") in str(err.value)


def test_addresses_without_contract_code_are_refused(devnets):
    # Prepare: a deployment file whose addresses hold nothing on this chain.
    nowhere = {
        name: Web3.to_checksum_address(f"0x{i + 1:040x}")
        for i, name in enumerate(devnets[0].addresses)
    }
    dep = dataclasses.replace(devnets[0], addresses=nowhere)

    # Execute / Assert
    with pytest.raises(WorkerSetupError, match=r"no contract code at Trainers \(0x0+1\)"):
        check_network(client(dep), "deployment.json", dep.rpc_url)


def test_a_deployment_past_the_chain_head_is_refused(devnets):
    dep = dataclasses.replace(devnets[0], deployment_block=10**6)
    with pytest.raises(WorkerSetupError, match="deployed at block 1000000"):
        check_network(client(dep), "deployment.json", dep.rpc_url)


# -- the account --------------------------------------------------------------------------


def test_an_unfunded_key_names_the_address_to_fund(devnets):
    # Prepare
    account = Account.create()
    chain = client(devnets[0], account=account)

    # Execute / Assert
    with pytest.raises(WorkerSetupError) as err:
        check_account(chain, None, devnets[0].rpc_url)
    message = str(err.value)
    assert account.address in message and "no native currency to pay for gas" in message
    assert account.key.hex().removeprefix("0x") not in message


def test_an_account_index_past_the_devnet_accounts_is_named(devnets):
    chain = client(devnets[0], account=7)
    with pytest.raises(WorkerSetupError, match=r"--account-index 7 is past the 4 funded .*0 to 3"):
        check_account(chain, 7, devnets[0].rpc_url)


def test_an_rpc_url_without_scheme_is_named(devnets):
    rpc = devnets[0].rpc_url.removeprefix("http://")
    with pytest.raises(WorkerSetupError, match=f"lacks its scheme: write http://{rpc}"):
        client(devnets[0], rpc=rpc)


def _prepare(dep, tmp_path, **overrides):
    options = dict(
        rpc=dep.rpc_url,
        account=1,
        storage=f"local:{tmp_path / 'blobs'}",
        state_dir=tmp_path / "state",
        options=ChainOptions(give_up_after=1.0),
    )
    options.update(overrides)
    return prepare(dep, "deployment.json", **options)


def test_a_chain_node_that_never_answers_is_one_line(devnets, tmp_path):
    rpc = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(WorkerSetupError, match=f"^chain: the chain node at {rpc} has not answered"):
        _prepare(devnets[0], tmp_path, rpc=rpc)


# -- the storage --------------------------------------------------------------------------


def test_a_store_that_cannot_be_written_is_refused_at_start(tmp_path):
    # Prepare: the probe blob's shard directory cannot be created.
    store = LocalStorage(tmp_path / "blobs")
    store.path_for(cid_for_bytes(STORAGE_PROBE)).parent.write_text("")

    # Execute / Assert
    with pytest.raises(WorkerSetupError, match="^storage: cannot write blob .* --storage$"):
        open_store(f"local:{tmp_path / 'blobs'}", give_up_after=1.0)


def test_an_ipfs_node_that_never_answers_is_retried_then_refused(tmp_path):
    spec = f"ipfs:/ip4/127.0.0.1/tcp/{free_port()}"
    with pytest.raises(
        WorkerSetupError, match=r"^storage: .*over \d s: cannot connect to the IPFS"
    ):
        open_store(spec, give_up_after=1.5)


# -- the state ----------------------------------------------------------------------------


def _state_file(tmp_path, dep, **fields):
    state = WorkerState.fresh(tmp_path / "state", client(dep).address, dep.deployment_block)
    for name, value in fields.items():
        setattr(state, name, value)
    state.save()
    return state


@pytest.mark.parametrize(
    "fields",
    [{"deployment_block_hash": "ab" * 32}, {"last_block": 10**6, "events_recorded": None}],
    ids=["another-chain", "past-the-head"],
)
def test_a_state_of_another_chain_is_set_aside_and_rebuilt(devnets, tmp_path, fields):
    # Prepare: a state written by a devnet since stopped (same addresses, same block).
    dep = devnets[0]
    _state_file(tmp_path, dep, **fields)

    # Execute
    state, dag = open_state(client(dep), tmp_path / "state")

    # Assert: read again from the deployment block; the old file kept aside.
    assert state.last_block == dep.deployment_block - 1 and len(dag.models) == 1
    assert len(list((tmp_path / "state").glob("state.json.damaged-*"))) == 1
    assert state.deployment_block_hash not in ("", "ab" * 32)


def test_an_events_log_that_disagrees_with_the_chain_is_read_again(devnets, tmp_path, caplog):
    # Prepare: a state file from before events were counted, whose log tells of a model
    # the chain never had.
    dep = devnets[0]
    chain = client(dep)
    state = _state_file(tmp_path, dep, last_block=chain.block_number(), events_recorded=None)
    where = {"block": dep.deployment_block + 1, "tx": "0x" + "22" * 32}
    records = [
        {
            "event": "ModelCreated",
            **where,
            "log": 0,
            "model_id": "0x" + "11" * 32,
            "round": 0,
            "trainer_id": 1,
            "index": 1,
            "parents": ["0x" + "00" * 32],
            "update_ids": ["1"],
            "aggregator": chain.address,
            "weights_cid": None,
        },
        {
            "event": "ModelAppended",
            **where,
            "log": 1,
            "model_id": "0x" + "11" * 32,
            "round": 0,
            "trainer_id": 1,
            "popularity": 1,
        },
    ]
    state.events_path.write_text("".join(json.dumps(r) + "\n" for r in records))

    # Execute
    again, dag = open_state(chain, tmp_path / "state")

    # Assert
    assert again.last_block == dep.deployment_block - 1 and len(dag.models) == 1
    assert len(list((tmp_path / "state").glob("events.jsonl.damaged-*"))) == 1
    assert "tells of 2 models" in caplog.text


def test_a_garbage_record_in_the_events_log_is_quoted_briefly(devnets, tmp_path, caplog):
    # Prepare: a log whose second line is a record holding 49,000 characters of garbage.
    dep = devnets[0]
    chain = client(dep)
    state = _state_file(tmp_path, dep, last_block=chain.block_number(), events_recorded=2)
    block = {"block": dep.deployment_block + 1, "tx": "0x" + "22" * 32, "log": 0}
    records = [{"event": "NewRound", **block, "prev_round": 0, "round": 1}]
    records.append({"event": "UpdateProposed", **block, "update_id": "x" * 49_000})
    state.events_path.write_text("".join(json.dumps(r) + "\n" for r in records))

    # Execute
    again, _ = open_state(chain, tmp_path / "state")

    # Assert: read again; the warning names the line and quotes a little of it.
    assert again.last_block == dep.deployment_block - 1
    (warning,) = [r.getMessage() for r in caplog.records if "malformed" in r.getMessage()]
    assert "line 2" in warning and len(warning) < 600


def test_a_sound_state_is_kept(devnets, tmp_path):
    # Prepare
    dep = devnets[0]
    first, _ = open_state(client(dep), tmp_path / "state")
    first.record([], head=client(dep).block_number())

    # Execute
    again, dag = open_state(client(dep), tmp_path / "state")

    # Assert
    assert again.last_block == first.last_block >= dep.deployment_block
    assert again.deployment_block_hash == first.deployment_block_hash != ""
    assert list((tmp_path / "state").glob("*.damaged-*")) == []


# -- the worker as a whole ----------------------------------------------------------------


def _worker(deployment_file, tmp_path, **options):
    """A worker of dev account 1 built as `mcfl-chain worker` builds it; storage closed."""
    config = WorkerConfig(
        deployment=str(deployment_file),
        storage=f"local:{tmp_path / 'blobs'}",
        account_index=1,
        give_up_after=1.0,
        **options,
    )
    worker = build_worker(config)
    worker.storage.close()
    return worker


def test_networks_joined_from_one_folder_keep_their_own_state_and_metrics(
    devnets, tmp_path, monkeypatch
):
    # Prepare: a second network on the first one's chain (other addresses), each in a
    # file; the worker runs from one folder without --state-dir or --metrics.
    first = devnets[0]
    w3 = Web3(Web3.HTTPProvider(first.rpc_url))
    second = deploy_network(w3, 3, fake_cid("second"), TASK, min_trainers=2, phase_duration=30)
    first.save(tmp_path / "first.json")
    second.save(tmp_path / "second.json")
    monkeypatch.chdir(tmp_path)

    # Execute: join the first, the second, then the first again.
    one, two, again = (
        _worker(name, tmp_path, rpc=first.rpc_url)
        for name in ("first.json", "second.json", "first.json")
    )

    # Assert: a state folder per network, none set aside; the first one's kept.
    assert one.state.path.parent != two.state.path.parent
    assert one.state.path.parent.parent.name == first.network
    assert again.state.path == one.state.path
    assert again.state.deployment_block_hash == one.state.deployment_block_hash != ""
    assert list(Path(".mcfl").rglob("*.damaged-*")) == []
    # metrics in each network's folder, every line naming its network and deployment
    assert one.options.metrics_path.parent == one.state.path.parent
    assert two.options.metrics_path.parent == two.state.path.parent
    assert {k: two.options.labels[k] for k in ("network", "deployment")} == {
        "network": second.network,
        "deployment": "second.json",
    }
    assert first.network != second.network


def test_without_rpc_the_deployments_url_is_used_and_said(devnets, tmp_path, caplog):
    # Prepare: the devnet's file, and one published without the provider's API key.
    devnets[0].save(tmp_path / "devnet.json")
    redacted = dataclasses.replace(devnets[0], rpc_url="https://rpc.example.org/v3/***")
    redacted.save(tmp_path / "published.json")

    # Execute
    caplog.set_level("INFO", logger="mcfl_chain.worker")
    worker = _worker(tmp_path / "devnet.json", tmp_path, state_dir=tmp_path / "state")
    with pytest.raises(WorkerSetupError) as refused:
        _worker(tmp_path / "published.json", tmp_path, state_dir=tmp_path / "other")

    # Assert: the file's node, named in the log; a URL without its key is one line.
    assert worker.chain.w3.provider.endpoint_uri == devnets[0].rpc_url
    assert f"no --rpc: using the deployment's RPC URL {devnets[0].rpc_url}" in caplog.text
    assert str(refused.value) == (
        "give --rpc: the deployment's RPC URL https://rpc.example.org/v3/*** was written "
        "without its API key or password; pass your own node's or provider's URL"
    )
