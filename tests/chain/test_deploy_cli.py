"""``mcfl-chain deploy --rpc URL`` on a bare Anvil node (not a devnet: another chain id,
no deployment of its own), the deployment published in storage, and how a worker
checks an ``ipfs://CID`` deployment against the chain."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from web3 import Web3

from mcfl_chain._utils.process import LOOPBACK, free_port, start_service, stop_service
from mcfl_chain.chain._tx import GWEI, dev_account
from mcfl_chain.chain.accounts import PASSWORD_ENV, PRIVATE_KEY_ENV, create_keystore
from mcfl_chain.chain.artifacts import load_artifacts
from mcfl_chain.chain.client import ChainClient
from mcfl_chain.chain.deployment import Deployment
from mcfl_chain.chain.devnet import anvil_environment, find_anvil, remove_anvil_home
from mcfl_chain.cli import main
from mcfl_chain.learning.codec import decode_weights, read_layout
from mcfl_chain.learning.fingerprint import model_fingerprint
from mcfl_chain.learning.models import create_model
from mcfl_chain.learning.tasks import load_task
from mcfl_chain.storage import LocalStorage
from mcfl_chain.worker.preflight import (
    ChainOptions,
    WorkerSetupError,
    check_network,
    connect_chain,
    load_deployment,
    publish_deployment,
)

CHAIN_ID = 4242
PASSWORD = "deployer's long passphrase"
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "breast_cancer_mlp.py"


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    """A bare Anvil node (chain id 4242) started here, not through `devnet up`."""
    folder = tmp_path_factory.mktemp("bare-anvil")
    port = free_port()
    command = [str(find_anvil()), "--host", LOOPBACK, "--port", str(port)]
    command += ["--chain-id", str(CHAIN_ID), "--accounts", "4"]
    env = anvil_environment(folder / "home")
    start_service("anvil", command, port, folder / "anvil.json", folder / "anvil.log", env)
    yield f"http://{LOOPBACK}:{port}"
    stop_service(folder / "anvil.json")
    remove_anvil_home(folder / "home")


@pytest.fixture(autouse=True)
def no_secrets_in_environment(monkeypatch):
    for name in (PASSWORD_ENV, PRIVATE_KEY_ENV, "MCFL_KEY"):
        monkeypatch.delenv(name, raising=False)


def _funded_keystore(node: str, folder: Path) -> tuple[str, Path, Path]:
    """A new account's keystore and password file, funded by a dev account."""
    address, keystore = create_keystore(
        PASSWORD, folder / "deployer.json", kdf="pbkdf2", iterations=1000
    )
    w3 = Web3(Web3.HTTPProvider(node))
    funder = w3.eth.accounts[0]
    tx = w3.eth.send_transaction({"from": funder, "to": address, "value": 10**19})
    w3.eth.wait_for_transaction_receipt(tx)
    password_file = folder / "password"
    password_file.write_text(PASSWORD + "\n")
    return address, keystore, password_file


def _deploy(args: list[str], env: dict[str, str] | None = None):
    runner = CliRunner(mix_stderr=False)
    return runner.invoke(main, ["deploy", *args], env=env, catch_exceptions=False)


def test_deploy_signs_with_a_keystore_writes_publishes_and_reads_back(node, tmp_path):
    # Prepare
    address, keystore, password_file = _funded_keystore(node, tmp_path)
    blobs = f"local:{tmp_path / 'blobs'}"
    out = tmp_path / "deployment.json"

    # Execute
    result = _deploy(
        [
            "--rpc", node, "--keystore", str(keystore), "--password-file", str(password_file),
            "--task", "lenet5:digits", "--storage", blobs, "--publish", blobs,
            "--min-trainers", "3", "--phase-duration", "45", "--registration", "deposit",
            "--deposit", "1000", "--cooldown", "5", "--max-samples", "5000",
            "--out", str(out),
        ]
    )  # fmt: skip

    # Assert: stdout is the deployment's URI alone; stderr says what was done.
    assert result.exit_code == 0, result.stderr
    (uri,) = result.stdout.split()
    assert uri.startswith("ipfs://bafk")
    assert f"deploying from {address} to chain {CHAIN_ID}" in result.stderr
    assert f"--deployment {uri}" in result.stderr
    assert PASSWORD not in result.stdout + result.stderr
    assert "no --max-samples given" not in result.stderr
    # the file: the network as asked, the built-in model's fingerprint in the task
    deployment = Deployment.load(out)
    fingerprint = model_fingerprint(create_model("lenet5", 0))
    assert deployment.chain_id == CHAIN_ID and deployment.rpc_url == node
    assert deployment.task == f"lenet5:digits#fp={fingerprint}"
    assert (deployment.min_trainers, deployment.phase_duration) == (3, 45)
    assert (deployment.registration, deployment.deposit, deployment.cooldown) == (
        "deposit",
        1000,
        5,
    )
    assert deployment.max_samples == 5000
    # the initial weights are in the store, the published file is the written one
    store = LocalStorage(tmp_path / "blobs")
    assert decode_weights(store.get(deployment.genesis_cid), "lenet5")
    fetched = load_deployment(uri, blobs, give_up_after=1.0)
    assert fetched == deployment
    # and the chain holds what the file says, as a worker checks it
    chain = ChainClient.read_only(fetched, node)
    check_network(chain, uri, node)
    assert chain.network_parameters()["links"] is True
    assert chain.foreign_code() == []


def test_deploy_a_task_of_ones_own_with_an_allowlist_and_the_key_from_the_environment(
    node, tmp_path, restore_architectures
):
    # Prepare: the deployer's key only in the environment (CI).
    key = "0x" + dev_account(1).key.hex().removeprefix("0x")
    admitted = [str(dev_account(i).address) for i in (2, 3)]
    blobs = f"local:{tmp_path / 'blobs'}"

    # Execute
    result = _deploy(
        [
            "--rpc", node, "--task-from", f"{EXAMPLE}:task", "--storage", blobs,
            "--registration", "allowlist", "--allow", ",".join(a.lower() for a in admitted),
            "--out", str(tmp_path / "d.json"),
        ],
        env={PRIVATE_KEY_ENV: key},
    )  # fmt: skip

    # Assert: the descriptor and the genesis weights are the task's; the allowlist is
    # kept by the deployer and admits the two addresses; the key is never shown.
    assert result.exit_code == 0, result.stderr
    task = load_task(f"{EXAMPLE}:task")
    deployment = Deployment.load(tmp_path / "d.json")
    assert deployment.task == str(task.descriptor())
    genesis = LocalStorage(tmp_path / "blobs").get(deployment.genesis_cid)
    assert read_layout(genesis) == task.layout
    assert deployment.admin == dev_account(1).address
    trainers = ChainClient.read_only(deployment, node).trainers
    assert all(trainers.functions.isAllowed(a).call() for a in admitted)
    assert not trainers.functions.isAllowed(str(dev_account(0).address)).call()
    assert result.stdout.strip() == str(tmp_path / "d.json")
    # no cap given: deployed with the default, and a warning says what it allows
    assert deployment.max_samples == 1_000_000
    assert "warning: no --max-samples given" in result.stderr and "0.9994" in result.stderr
    output = (result.stdout + result.stderr).lower()
    assert key.removeprefix("0x").lower() not in output


def test_deploy_refuses_to_pay_above_the_fee_cap(node, tmp_path):
    # Prepare: the base fee jumps to 80 gwei.
    w3 = Web3(Web3.HTTPProvider(node))
    w3.provider.make_request("anvil_setNextBlockBaseFeePerGas", [hex(80 * GWEI)])
    w3.provider.make_request("evm_mine", [])
    deployer = str(dev_account(0).address)
    nonce = w3.eth.get_transaction_count(deployer)

    # Execute
    result = _deploy(
        [
            "--rpc", node, "--account-index", "0", "--max-fee-gwei", "10",
            "--genesis-cid", "bafkreigh2akiscaildcqabsyg3dfr6chu3fgpregiymsck7e7aqa4s52zy",
            "--out", str(tmp_path / "d.json"),
        ]
    )  # fmt: skip

    # Assert: one line, exit 1, nothing deployed or written.
    assert result.exit_code == 1
    error = result.stderr.strip().splitlines()[-1]
    assert "base fee is 80 gwei" in error and "cap of 10 gwei" in error
    assert "--max-fee-gwei" in error
    assert w3.eth.get_transaction_count(deployer) == nonce
    assert not (tmp_path / "d.json").exists()


@pytest.fixture(scope="module")
def deployed(node, tmp_path_factory):
    """A network deployed on the bare node, its file and the store it was published in."""
    folder = tmp_path_factory.mktemp("deployed")
    blobs = f"local:{folder / 'blobs'}"
    result = _deploy(
        [
            "--rpc", node, "--account-index", "0", "--task", "lenet5:digits",
            "--storage", blobs, "--publish", blobs, "--out", str(folder / "d.json"),
        ]
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    return Deployment.load(folder / "d.json"), folder


def _tampered(deployed, **changes) -> tuple[str, str]:
    """Publish a copy of the deployment with ``changes``; its URI and store."""
    deployment, folder = deployed
    store = LocalStorage(folder / "blobs")
    return publish_deployment(dataclasses.replace(deployment, **changes), store), (
        f"local:{folder / 'blobs'}"
    )


def _join(node: str, uri: str, storage: str) -> None:
    """What a worker checks of ``--deployment uri`` before it registers."""
    deployment = load_deployment(uri, storage, give_up_after=1.0)
    chain = connect_chain(deployment, node, account=2, options=ChainOptions(give_up_after=1.0))
    check_network(chain, uri, node)


def test_the_published_deployment_joins(node, deployed):
    uri, storage = _tampered(deployed)
    _join(node, uri, storage)


def test_a_published_deployment_is_read_with_this_versions_abis(node, deployed):
    # Prepare: the file's ABI calls Models' submitProposals what is Trainers' exit
    # (a doctored file could make a worker sign something else than it means).
    deployment = deployed[0]
    doctored = [
        {**entry, "name": "submitProposals"} if entry.get("name") == "exit" else entry
        for entry in deployment.abis["Trainers"]
    ]
    abis = {**deployment.abis, "Models": doctored}
    uri, storage = _tampered(deployed, abis=abis)

    # Execute
    fetched = load_deployment(uri, storage, give_up_after=1.0)

    # Assert: the ABIs are the ones compiled here, whatever the file says.
    assert fetched.abis == {name: a.abi for name, a in load_artifacts().items()}
    assert fetched.abis["Models"] != doctored
    _join(node, uri, storage)


def _swapped(deployed) -> dict:
    addresses = dict(deployed[0].addresses)
    addresses["Trainers"], addresses["Updates"] = addresses["Updates"], addresses["Trainers"]
    return {"addresses": addresses}


@pytest.mark.parametrize(
    "changes, expected",
    [
        (lambda d: {"chain_id": 1}, f"runs chain {CHAIN_ID}, the deployment was made on chain 1"),
        (
            lambda d: {"min_trainers": 7, "phase_duration": 99},
            "runs another network than ipfs://.*: min trainers 2 there, 7 in the file; "
            "phase duration 30 there, 99 in the file",
        ),
        (lambda d: {"task": "lenet5:mnist"}, r"task 'lenet5:digits#fp=\w+' there, 'lenet5:mnist'"),
        (_swapped, r"the code at Trainers \(0x\w+\), Updates \(0x\w+\) .* is not this "),
        (
            lambda d: {"addresses": {**d[0].addresses, "Models": "0x" + "00" * 19 + "01"}},
            r"no contract code at Models \(0x0+1\)",
        ),
    ],
    ids=["chain id", "settings", "task", "other contracts", "no code"],
)
def test_a_published_deployment_the_chain_does_not_hold_is_refused(
    node, deployed, changes, expected
):
    # Prepare
    uri, storage = _tampered(deployed, **changes(deployed))

    # Execute / Assert: one line saying what differs.
    with pytest.raises(WorkerSetupError, match=expected) as refused:
        _join(node, uri, storage)
    assert "\n" not in str(refused.value)


def test_a_deployment_cid_missing_altered_or_not_a_deployment_is_refused(node, deployed):
    # Prepare
    deployment, folder = deployed
    store = LocalStorage(folder / "blobs")
    storage = f"local:{folder / 'blobs'}"
    uri, _ = _tampered(deployed, task="lenet5:fashion-mnist")
    cid = uri.removeprefix("ipfs://")
    other = store.put(b'{"not": "a deployment"}')
    missing = "bafkreigh2akiscaildcqabsyg3dfr6chu3fgpregiymsck7e7aqa4s52zy"

    # Execute / Assert
    with pytest.raises(WorkerSetupError, match=f"ipfs://{missing} is not in storage"):
        load_deployment(f"ipfs://{missing}", storage, 1.0)
    with pytest.raises(WorkerSetupError, match="is not an mcfl-chain deployment file"):
        load_deployment(f"ipfs://{other}", storage, 1.0)
    with pytest.raises(WorkerSetupError, match="is not a CID"):
        load_deployment("ipfs://not-a-cid", storage, 1.0)
    store.path_for(cid).write_text(json.dumps({"forged": True}))  # bytes not the CID's
    with pytest.raises(WorkerSetupError, match="do not match"):
        load_deployment(uri, storage, 1.0)
