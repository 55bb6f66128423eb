"""Organisations on a chain that behaves like a public one, end to end.

Each test starts a bare Anvil node (its own chain id, blocks every second or two, not
`devnet up`), deploys with `mcfl-chain deploy`, publishes the deployment in storage and
runs `mcfl-chain worker` processes that join with `--deployment ipfs://CID`, each with
its own key and its own data: the custom task of ``examples/`` (an MLP on tabular
records, a disjoint share of patients per organisation) or an ``.npz`` file for the
built-in LeNet. They check what the chain recorded and what each process said.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from web3 import Web3

from mcfl_chain._utils.forked import start_module
from mcfl_chain._utils.process import LOOPBACK, free_port, start_service, stop_service
from mcfl_chain.chain._tx import dev_account
from mcfl_chain.chain.accounts import PASSWORD_ENV, PRIVATE_KEY_ENV, create_keystore
from mcfl_chain.chain.client import ChainClient, Phase
from mcfl_chain.chain.deployment import Deployment
from mcfl_chain.chain.devnet import anvil_environment, find_anvil, remove_anvil_home
from mcfl_chain.simulation.runner import WORKER_PRELOAD
from mcfl_chain.worker.preflight import load_deployment

pytestmark = pytest.mark.slow

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "breast_cancer_mlp.py"
TASK = f"{EXAMPLE}:task"
SECRET_ENV = (PASSWORD_ENV, PRIVATE_KEY_ENV, "MCFL_KEY", "MCFL_EXAMPLE_PART")


@pytest.fixture
def anvil(tmp_path):
    """``anvil(block_time)``: a bare Anvil node (chain 4243) started here; its URL."""
    started: list[Path] = []

    def start(block_time: float | None = None) -> str:
        folder = tmp_path / f"anvil{len(started)}"
        port = free_port()
        command = [str(find_anvil()), "--host", LOOPBACK, "--port", str(port)]
        command += ["--chain-id", "4243", "--accounts", "8"]
        if block_time:
            command += ["--block-time", f"{block_time:g}"]
        env = anvil_environment(folder / "home")
        start_service("anvil", command, port, folder / "anvil.json", folder / "anvil.log", env)
        started.append(folder)
        return f"http://{LOOPBACK}:{port}"

    yield start
    for folder in started:
        stop_service(folder / "anvil.json")
        remove_anvil_home(folder / "home")


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in SECRET_ENV}
    return {**env, "PYTHONWARNINGS": "ignore", **extra}


def _cli(*args: str, env: dict[str, str] | None = None, timeout: float = 300):
    return subprocess.run(
        [sys.executable, "-m", "mcfl_chain", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env or _env(),
    )


def _deploy(url: str, folder: Path, *args: str, env: dict[str, str] | None = None) -> str:
    """Deploy with ``mcfl-chain deploy`` and publish the file in ``folder/blobs``; the URI."""
    storage = f"local:{folder / 'blobs'}"
    result = _cli(
        "deploy", "--rpc", url, "--storage", storage, "--publish", storage,
        "--out", str(folder / "deployment.json"), *args,
        env=env,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    uri = result.stdout.strip()
    assert uri.startswith("ipfs://"), result.stdout
    return uri


def _fund(url: str, address: str, wei: int = 10**19) -> None:
    w3 = Web3(Web3.HTTPProvider(url))
    tx = w3.eth.send_transaction({"from": w3.eth.accounts[0], "to": address, "value": wei})
    w3.eth.wait_for_transaction_receipt(tx)


def _start_worker(folder: Path, name: str, args: list[str], env: dict[str, str]):
    """`mcfl-chain worker` with ``args``, its output in ``folder/<name>.log``: forked as
    the simulator forks its workers, which then behave exactly as `python -m` would
    (tests/simulation/test_forked_workers.py), without a fresh interpreter's seconds of
    imports each."""
    args = [*args, "--state-dir", str(folder / name), "--wait-log-interval", "10"]
    return start_module(
        "mcfl_chain", ["worker", *args], log=folder / f"{name}.log", env=env, preload=WORKER_PRELOAD
    )


def _finish(workers, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    try:
        for proc in workers:
            proc.wait(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        for proc in workers:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def _models_transactions(chain: ChainClient) -> Counter[str]:
    w3, to = chain.w3, chain.deployment.addresses["Models"]
    senders: Counter[str] = Counter()
    for n in range(chain.deployment.deployment_block, w3.eth.block_number + 1):
        for tx in w3.eth.get_block(n, full_transactions=True)["transactions"]:
            if tx["to"] == to:
                senders[tx["from"]] += 1
    return senders


def _votes(chain: ChainClient) -> Counter[tuple[int, int, int]]:
    """TrainerVoted events per (trainer id, round, phase) on the chain as it is now."""
    events = chain.events(chain.deployment.deployment_block, chain.latest_block())
    return Counter(
        (e.args["trainerId"], e.args["round"], e.args["phase"])
        for e in events
        if e.name == "TrainerVoted"
    )


def test_organisations_join_a_two_second_chain_by_cid_with_their_own_keys_and_task(anvil, tmp_path):
    # Prepare: a chain with a block every 2 s; the deployer's key in a keystore.
    url = anvil(block_time=2)
    password = "deployer passphrase, not shown"
    deployer, keystore = create_keystore(
        password, tmp_path / "deployer.json", kdf="pbkdf2", iterations=1000
    )
    _fund(url, deployer)
    (tmp_path / "deployer.pw").write_text(password + "\n")
    uri = _deploy(
        url, tmp_path, "--keystore", str(keystore), "--password-file",
        str(tmp_path / "deployer.pw"), "--task-from", TASK, "--min-trainers", "3",
        "--phase-duration", "120",
    )  # fmt: skip
    # Three organisations, three ways to hold a key: a keystore (password in the
    # environment), an ape account (password file), a raw key in the environment (CI).
    passwords = {"hospital-a": "alpha pass phrase", "hospital-b": "bravo pass phrase"}
    _, keystore_a = create_keystore(
        passwords["hospital-a"], tmp_path / "a.json", kdf="pbkdf2", iterations=1000
    )
    ape_home = tmp_path / "ape"
    _, keyfile_b = create_keystore(
        passwords["hospital-b"], ape_home / "accounts" / "hospital-b.json", kdf="pbkdf2",
        iterations=1000,
    )  # fmt: skip
    (tmp_path / "b.pw").write_text(passwords["hospital-b"] + "\n")
    key_c = dev_account(5).key.hex()
    addresses = {
        "hospital-a": Web3.to_checksum_address(
            "0x" + json.loads(keystore_a.read_text())["address"]
        ),
        "hospital-b": Web3.to_checksum_address("0x" + json.loads(keyfile_b.read_text())["address"]),
        "hospital-c": str(dev_account(5).address),
    }
    for address in list(addresses.values())[:2]:
        _fund(url, address)
    common = [
        "--rpc", url, "--deployment", uri, "--storage", f"local:{tmp_path / 'blobs'}",
        "--task", TASK, "--rounds", "2", "--confirmations", "1", "--max-log-range", "5",
        "--max-fee-gwei", "100", "--lr", "0.01",
    ]  # fmt: skip
    setups = {
        "hospital-a": (
            ["--keystore", str(keystore_a)],
            {PASSWORD_ENV: passwords["hospital-a"]},
        ),
        "hospital-b": (
            ["--account", "hospital-b", "--password-file", str(tmp_path / "b.pw")],
            {"APE_DATA_FOLDER": str(ape_home)},
        ),
        "hospital-c": ([], {PRIVATE_KEY_ENV: key_c}),
    }

    # Execute: the three organisations, each its own share of the patients.
    workers = [
        _start_worker(
            tmp_path,
            name,
            [*common, *args],
            _env(MCFL_EXAMPLE_PART=f"{i}/3", **extra),
        )
        for i, (name, (args, extra)) in enumerate(setups.items())
    ]
    # Meanwhile a fourth organisation brings a model with wider layers: refused.
    (tmp_path / "wide.py").write_text(
        EXAMPLE.read_text().replace("nn.Linear(FEATURES, 32)", "nn.Linear(FEATURES, 48)")
        .replace("nn.Linear(32, 16)", "nn.Linear(48, 16)")
    )  # fmt: skip
    intruder = _cli(
        "worker", *common[:6], "--task", f"{tmp_path / 'wide.py'}:task",
        "--state-dir", str(tmp_path / "intruder"),
        env=_env(**{PRIVATE_KEY_ENV: dev_account(6).key.hex()}),
    )  # fmt: skip
    _finish(workers, timeout=900)

    # Assert: every organisation played its two rounds and stopped cleanly.
    logs = {name: (tmp_path / f"{name}.log").read_text() for name in setups}
    for proc, name in zip(workers, setups, strict=True):
        assert proc.returncode == 0, logs[name][-3000:]
        assert "played 2 round(s)" in logs[name]
    deployment = load_deployment(uri, f"local:{tmp_path / 'blobs'}", 1.0)
    assert deployment == Deployment.load(tmp_path / "deployment.json")
    chain = ChainClient.read_only(deployment, url)
    assert chain.status().round == 2
    # two transactions per organisation and round, none reverted or sent twice
    sent = _models_transactions(chain)
    assert {name: sent[address] for name, address in addresses.items()} == {
        name: 4 for name in addresses
    }
    assert set(_votes(chain).values()) == {1} and len(_votes(chain)) == 3 * 2 * 2
    # the intruder was refused in one line naming what differs, and never registered
    lines = intruder.stderr.strip().splitlines()
    assert intruder.returncode == 1 and len(lines) == 1, intruder.stderr[-2000:]
    assert (
        "refusing to join" in lines[0] and "0.weight has shape 48×30 instead of 32×30" in lines[0]
    )
    assert not chain.is_registered(str(dev_account(6).address))
    # no key and no password anywhere in what the processes wrote
    written = "\n".join([*logs.values(), intruder.stdout, intruder.stderr]).lower()
    for secret in (*passwords.values(), password, key_c.removeprefix("0x")):
        assert secret.lower() not in written


def _images(path: Path, trainer: int) -> Path:
    """A hospital's scans as an .npz of 28×28 images (scikit-learn's digits, upscaled)."""
    from sklearn.datasets import load_digits

    x, y = load_digits(return_X_y=True)
    rows = np.random.default_rng(7).permutation(len(y))[trainer::2][:400]
    images = np.kron(x[rows].reshape(-1, 8, 8), np.ones((3, 3)))  # 24×24
    images = np.pad(images, ((0, 0), (2, 2), (2, 2))) / 16.0
    cut = int(0.8 * len(rows))
    np.savez(
        path,
        x_train=images[:cut].astype(np.float32), y_train=y[rows][:cut],
        x_test=images[cut:].astype(np.float32), y_test=y[rows][cut:],
    )  # fmt: skip
    return path


def test_own_image_files_train_the_builtin_lenet_on_a_bare_chain(anvil, tmp_path):
    # Prepare: the network trains the built-in LeNet-5; each hospital has its own .npz.
    url = anvil()
    uri = _deploy(
        url, tmp_path, "--task", "lenet5:scans", "--min-trainers", "2",
        env=_env(**{PRIVATE_KEY_ENV: dev_account(0).key.hex()}),
    )  # fmt: skip
    workers = [
        _start_worker(
            tmp_path,
            f"hospital-{i}",
            [
                "--rpc",
                url,
                "--deployment",
                uri,
                "--storage",
                f"local:{tmp_path / 'blobs'}",
                "--data",
                str(_images(tmp_path / f"scans-{i}.npz", i)),
                "--rounds",
                "2",
                "--epochs",
                "1",
                "--account-index",
                str(i + 1),
            ],  # fmt: skip
            _env(),
        )
        for i in range(2)
    ]

    # Execute
    _finish(workers, timeout=900)

    # Assert: both played 2 rounds on their own files; accuracy is reported per round.
    for i, proc in enumerate(workers):
        log = (tmp_path / f"hospital-{i}.log").read_text()
        assert proc.returncode == 0, log[-3000:]
        assert "played 2 round(s)" in log
        metrics = (tmp_path / f"hospital-{i}" / "metrics.jsonl").read_text().splitlines()
        assert len(metrics) == 2 and '"group": "own data"' in metrics[0]
    chain = ChainClient.read_only(Deployment.load(tmp_path / "deployment.json"), url)
    assert chain.status().round == 2


class _Reorgs(threading.Thread):
    """Reorgs the chain (depth 2) each time a vote is mined, ``times`` times: the votes
    in the last two blocks are dropped, as a public chain's short reorgs may drop them."""

    def __init__(self, url: str, deployment: Deployment, times: int) -> None:
        super().__init__(daemon=True)
        self.w3 = Web3(Web3.HTTPProvider(url))
        self.chain = ChainClient.read_only(deployment, url)
        self.times = times
        self.done = 0
        self.stop = threading.Event()

    def run(self) -> None:
        seen = self.w3.eth.block_number
        while not self.stop.is_set() and self.done < self.times:
            head = self.w3.eth.block_number
            if head > seen:
                voted = [e for e in self.chain.events(seen + 1, head) if e.name == "TrainerVoted"]
                seen = head
                if voted and self.chain.status().started:
                    self.w3.provider.make_request("anvil_reorg", [2, []])
                    self.done += 1
                    seen = self.w3.eth.block_number
            self.stop.wait(0.1)


def test_a_reorg_shallower_than_the_confirmations_neither_loses_nor_repeats_a_vote(anvil, tmp_path):
    # Prepare: blocks every second; workers act on blocks 3 deep; the deployer signs
    # with the key in the environment.
    url = anvil(block_time=1)
    uri = _deploy(
        url, tmp_path, "--task-from", TASK, "--min-trainers", "2", "--phase-duration", "300",
        env=_env(**{PRIVATE_KEY_ENV: dev_account(0).key.hex()}),
    )  # fmt: skip
    deployment = load_deployment(uri, f"local:{tmp_path / 'blobs'}", 1.0)
    reorgs = _Reorgs(url, deployment, times=4)
    workers = [
        _start_worker(
            tmp_path,
            f"org-{i}",
            [
                "--rpc",
                url,
                "--deployment",
                uri,
                "--storage",
                f"local:{tmp_path / 'blobs'}",
                "--task",
                TASK,
                "--rounds",
                "2",
                "--confirmations",
                "3",
                "--account-index",
                str(i + 1),
            ],  # fmt: skip
            _env(MCFL_EXAMPLE_PART=f"{i}/2"),
        )
        for i in range(2)
    ]

    # Execute: a reorg of 2 blocks right after each of the first four votes mined.
    reorgs.start()
    try:
        _finish(workers, timeout=900)
    finally:
        reorgs.stop.set()
        reorgs.join()

    # Assert: the reorgs happened and dropped votes, which were sent again; the network
    # completed its rounds with exactly one vote per trainer and phase on chain.
    logs = [(tmp_path / f"org-{i}.log").read_text() for i in range(2)]
    for proc, log in zip(workers, logs, strict=True):
        assert proc.returncode == 0, log[-3000:]
    assert reorgs.done == 4
    # A vote the reorg removes after the worker saw it mined is "a reorg dropped it";
    # one removed before the worker saw its receipt is "dropped before it was mined"
    # (the same transaction is then sent again). Which one happens is a matter of timing.
    dropped = ("a reorg dropped it", "was dropped before it was mined")
    assert sum(log.count(text) for log in logs for text in dropped) >= 1, logs
    chain = ChainClient.read_only(deployment, url)
    assert chain.status().round == 2
    votes = _votes(chain)
    expected = {(t, r, int(p)) for t in (1, 2) for r in (0, 1) for p in Phase}
    assert set(votes) == expected and set(votes.values()) == {1}
