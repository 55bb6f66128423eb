"""Registration policies against a Sybil coalition, on a real Anvil chain.

Under ``allowlist`` the simulator's admin admits one identity per coalition: the other
identity really sends its registration, which reverts on chain, and the network plays
on without it. Under ``deposit`` every identity pays, and the run records what the
coalition locked.
"""

from __future__ import annotations

import io
import json

import pytest
import torch
from rich.console import Console

from mcfl_chain.chain._tx import dev_account
from mcfl_chain.chain.client import ChainClient
from mcfl_chain.chain.deployment import Deployment
from mcfl_chain.chain.devnet import stop_devnet
from mcfl_chain.simulation.adversarial import sybil_adoption
from mcfl_chain.simulation.runner import Network, SimulationConfig, run_simulation

pytestmark = pytest.mark.slow

NOT_ALLOWED = "Trainers: this address is not on the allowlist"


def _config(**overrides) -> SimulationConfig:
    base = dict(
        name="registration",
        dataset="digits",
        scenario="iid",
        n_trainers=5,
        rounds=2,
        samples=300,
        epochs=2,
        adversaries="sybil:0.4",
        round_timeout=240,
    )
    base.update(overrides)
    return SimulationConfig(**base)


def _address(index: int) -> str:
    """The address trainer ``index`` signs with (dev account index + 1)."""
    return str(dev_account(index + 1).address)


def test_the_allowlist_admits_one_sybil_identity_and_refuses_the_other_on_chain(tmp_path):
    # Prepare: 0.4 of 5 trainers -> a coalition of two identities.
    config = _config(registration="allowlist")
    kept, refused = sorted(config.adversary_assignment())
    admitted = [i for i in range(5) if i != refused]
    output = io.StringIO()

    # Execute
    try:
        summary = run_simulation(
            config, tmp_path, Console(file=output, width=200), keep_running=True
        )
        chain = ChainClient.read_only(Deployment.load(tmp_path / "devnet" / "deployment.json"))
        registered = {i: chain.is_registered(_address(i)) for i in range(5)}
        live = chain.trainer_count()
        sent = [
            (tx["hash"], tx["to"])
            for n in range(chain.deployment.deployment_block, chain.block_number() + 1)
            for tx in chain.w3.eth.get_block(n, full_transactions=True)["transactions"]
            if tx["from"] == _address(refused)
        ]
        statuses = [chain.w3.eth.get_transaction_receipt(h)["status"] for h, _ in sent]
    finally:
        stop_devnet(tmp_path / "devnet")

    # Assert: the refusal is recorded with the contract's reason, and printed.
    record = summary["registration"]
    assert record["policy"] == "allowlist"
    assert record["refused"] == [
        {"trainer_index": refused, "address": _address(refused), "reason": NOT_ALLOWED}
    ]
    assert f"trainer {refused} ({_address(refused)}) was refused registration: {NOT_ALLOWED}" in (
        output.getvalue()
    )
    assert (record["sybils"], record["sybils_registered"]) == ([kept, refused], [kept])
    assert record["deposit_locked_wei"] == 0 and record["trainers"] == 4
    # The summary says what the run computed on: the CPU's kernels decide whether
    # another run repeats it bit for bit.
    assert summary["platform"]["cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    # The refused identity really sent its registration: one transaction, mined, reverted;
    # it holds no trainer token, and runs no worker.
    assert [to for _, to in sent] == [chain.deployment.addresses["Trainers"]]
    assert statuses == [0]
    assert registered == {i: i != refused for i in range(5)} and live == 4
    assert not (tmp_path / "trainers" / f"{refused:03d}").exists()
    # The four others played both rounds, and the measures read the run.
    assert [(r["round"], r["trainers"]) for r in summary["rounds"]] == [(0, 4), (1, 4)]
    lines = [json.loads(raw) for raw in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert sorted((line["trainer_index"], line["round"]) for line in lines) == [
        (i, r) for i in admitted for r in (0, 1)
    ]
    assert 0.0 <= sybil_adoption(tmp_path) <= 1.0


def test_under_deposit_every_sybil_identity_pays_and_the_run_records_the_stake(tmp_path):
    # Prepare: the network's services, without workers: each trainer registers as a
    # worker does (ChainClient.register pays the network's deposit).
    deposit = 3 * 10**17
    config = _config(registration="deposit", deposit=deposit, max_samples=250)
    sybils = sorted(config.adversary_assignment())
    net = Network(config, tmp_path, Console(quiet=True))
    net.start()
    try:
        before = {i: _balance(net, i) for i in sybils}
        for index in net.trainers:
            ChainClient(net.deployment, account_index=net.account_index(index)).register()

        # Execute
        record = net.registration()
        after = {i: _balance(net, i) for i in sybils}
        cap = ChainClient.read_only(net.deployment).max_samples()
    finally:
        net.stop()

    # Assert: no refusal; the coalition locked two deposits, the contract holds five.
    assert net.trainers == [0, 1, 2, 3, 4] and net.refusals == []
    assert record == {
        "policy": "deposit",
        "deposit_wei": deposit,
        "trainers": 5,
        "refused": [],
        "sybils": sybils,
        "sybils_registered": sybils,
        "deposit_locked_wei": 2 * deposit,
        "deposits_held_wei": 5 * deposit,
    }
    assert all(before[i] - after[i] >= deposit for i in sybils)
    assert cap == 250  # the scenario's max_samples reaches the contracts


def _balance(net: Network, index: int) -> int:
    assert net.deployment is not None
    chain = ChainClient.read_only(net.deployment)
    return int(chain.w3.eth.get_balance(_address(index)))
