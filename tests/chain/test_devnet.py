"""`mcfl-chain devnet up | status | down` on real Anvil processes."""

import json
import socket
from pathlib import Path

import pytest
from click.testing import CliRunner

from mcfl_chain._utils.process import LOOPBACK, free_port, pid_alive
from mcfl_chain.chain import ChainClient
from mcfl_chain.chain._tx import dev_account
from mcfl_chain.chain.deployment import Deployment
from mcfl_chain.chain.devnet import DevnetError, anvil_home, find_anvil, start_devnet
from mcfl_chain.cli import main

from .conftest import GENESIS


def test_up_status_down_and_a_second_up(tmp_path):
    # Prepare
    runner = CliRunner()
    state = str(tmp_path / "net")
    port = free_port()
    up_args = [
        "devnet",
        "up",
        "--state-dir",
        state,
        "--port",
        str(port),
        "--genesis-cid",
        GENESIS,
        "--min-trainers",
        "1",
        "--task",
        "lenet:digits",
    ]
    try:
        # Execute
        up = runner.invoke(main, up_args)
        status = runner.invoke(main, ["devnet", "status", "--state-dir", state])
        again = runner.invoke(
            main, [*up_args[:-4], "--port", str(free_port()), "--min-trainers", "1"]
        )
        deployment = Deployment.load(tmp_path / "net" / "deployment.json")
        # Assert
        assert up.exit_code == 0, up.output
        assert f"http://{LOOPBACK}:{port}" in up.output
        assert status.exit_code == 0 and "running" in status.output
        assert "PROPOSE" in status.output
        assert again.exit_code != 0 and "already running" in again.output
        assert deployment.task == "lenet:digits" and deployment.min_trainers == 1
        assert set(deployment.addresses) == {"Trainers", "Models", "Updates"}
        # Defaults: a 30 s deadline, open registration, the default sample cap.
        models = ChainClient.read_only(deployment).models
        assert deployment.phase_duration == 30 == models.functions.phaseDuration().call()
        assert (deployment.registration, deployment.admin, deployment.deposit) == ("open", None, 0)
        assert deployment.max_samples == 1_000_000
        assert "phase deadline 30 s, registration open" in up.output
        assert "deadline" in status.output and "voters" in status.output
        # Anvil's home, where it spills old blocks' states, is the devnet's own
        pid = json.loads((tmp_path / "net" / "anvil.json").read_text())["pid"]
        environment = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        assert f"HOME={anvil_home(tmp_path / 'net')}".encode() in environment
        (anvil_home(tmp_path / "net") / "spilled").write_text("a state")
    finally:
        down = runner.invoke(main, ["devnet", "down", "--state-dir", state])
    assert down.exit_code == 0 and "stopped the devnet" in down.output
    assert not (tmp_path / "net" / "deployment.json").exists()
    assert not anvil_home(tmp_path / "net").exists()  # Anvil never removes its spill
    after = runner.invoke(main, ["devnet", "status", "--state-dir", state])
    assert after.exit_code == 1 and "no devnet running" in after.output
    assert (
        "no devnet was running"
        in runner.invoke(main, ["devnet", "down", "--state-dir", state]).output
    )


def test_up_refuses_a_taken_port(tmp_path):
    with socket.socket() as sock:
        sock.bind((LOOPBACK, 0))
        sock.listen()
        port = sock.getsockname()[1]
        result = CliRunner().invoke(
            main,
            [
                "devnet",
                "up",
                "--state-dir",
                str(tmp_path),
                "--port",
                str(port),
                "--genesis-cid",
                GENESIS,
            ],
        )
    assert result.exit_code != 0 and f"port {port}" in result.output
    assert "already in use" in result.output


def test_up_refuses_a_bad_genesis_cid_and_stops_anvil(tmp_path):
    result = CliRunner().invoke(
        main,
        [
            "devnet",
            "up",
            "--state-dir",
            str(tmp_path),
            "--port",
            str(free_port()),
            "--genesis-cid",
            "nope",
        ],
    )
    assert result.exit_code != 0 and "is not a CID" in result.output
    assert not (tmp_path / "anvil.json").exists()


def test_missing_anvil_is_reported(monkeypatch, tmp_path):
    monkeypatch.setenv("MCFL_ANVIL", str(tmp_path / "no-anvil"))
    with pytest.raises(DevnetError, match="MCFL_ANVIL is set to .* not a file"):
        find_anvil()


def test_down_only_stops_its_own_process(devnet, tmp_path):
    state, _ = devnet
    result = CliRunner().invoke(main, ["devnet", "down", "--state-dir", str(tmp_path)])
    assert "no devnet was running" in result.output and pid_alive(state.pid)


def _up(tmp_path, *options):
    state = str(tmp_path / "net")
    args = ["devnet", "up", "--state-dir", state, "--port", str(free_port())]
    return CliRunner().invoke(main, [*args, "--genesis-cid", GENESIS, *options]), state


@pytest.mark.parametrize(
    "options, message",
    [
        (["--phase-duration", "0"], "0 s: deadlines are mandatory"),
        (["--phase-duration", "-5"], "-5 s: deadlines are mandatory"),
        (
            ["--admin-index", "1"],
            "an admin and an allowlist only apply to registration 'allowlist'",
        ),
        (["--registration", "deposit"], "needs a deposit above 0 wei"),
        (["--deposit", "5"], "deposit and cooldown only apply to registration='deposit'"),
        (["--registration", "allowlist", "--allow", "1,x"], "not a comma-separated list"),
        (["--registration", "allowlist", "--allow", "25"], "dev account 25 does not exist"),
        (["--max-samples", "0"], "--max-samples"),
    ],
)
def test_up_refuses_bad_settings_without_leaving_anvil(tmp_path, options, message):
    # Execute
    result, _ = _up(tmp_path, *options)

    # Assert: a readable message, no process record left behind.
    assert result.exit_code != 0
    assert message in " ".join(result.output.split()), result.output
    assert not (tmp_path / "net" / "anvil.json").exists()


def test_start_devnet_refuses_a_phase_duration_of_zero(tmp_path):
    with pytest.raises(ValueError, match="deadlines are mandatory"):
        start_devnet(tmp_path, free_port(), genesis_cid=GENESIS, phase_duration=0)
    assert not (tmp_path / "anvil.json").exists()


def test_up_with_a_deposit_policy_and_a_sample_cap(tmp_path):
    # Execute
    result, state = _up(
        tmp_path,
        "--registration",
        "deposit",
        "--deposit",
        "1000",
        "--cooldown",
        "60",
        "--max-samples",
        "70000",
        "--phase-duration",
        "45",
    )
    try:
        deployment = Deployment.load(tmp_path / "net" / "deployment.json")
        trainers = ChainClient.read_only(deployment).trainers.functions
        on_chain = (trainers.policy().call(), trainers.deposit().call(), trainers.cooldown().call())
        cap = ChainClient.read_only(deployment).max_samples()
    finally:
        CliRunner().invoke(main, ["devnet", "down", "--state-dir", state])

    # Assert
    assert result.exit_code == 0, result.output
    assert "registration deposit (1000 wei, refund 60 s after exit)" in result.output
    assert (deployment.registration, deployment.deposit, deployment.cooldown) == (
        "deposit",
        1000,
        60,
    )
    assert on_chain == (2, 1000, 60) and cap == deployment.max_samples == 70_000
    assert deployment.phase_duration == 45


def test_up_with_an_allowlist(tmp_path):
    # Execute: account 1 keeps the list, accounts 2 and 3 are admitted at start.
    result, state = _up(
        tmp_path, "--registration", "allowlist", "--admin-index", "1", "--allow", "2,3"
    )
    try:
        deployment = Deployment.load(tmp_path / "net" / "deployment.json")
        trainers = ChainClient.read_only(deployment).trainers.functions
        admitted = [trainers.isAllowed(dev_account(i).address).call() for i in (1, 2, 3, 4)]
        admin = trainers.admin().call()
    finally:
        CliRunner().invoke(main, ["devnet", "down", "--state-dir", state])

    # Assert
    assert result.exit_code == 0, result.output
    assert deployment.registration == "allowlist"
    assert deployment.admin == admin == dev_account(1).address
    assert admitted == [False, True, True, False]
