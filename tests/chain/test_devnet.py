"""`mcfl-chain devnet up | status | down` on real Anvil processes."""

import socket

import pytest
from click.testing import CliRunner

from mcfl_chain._utils.process import LOOPBACK, free_port, pid_alive
from mcfl_chain.chain.deployment import Deployment
from mcfl_chain.chain.devnet import DevnetError, find_anvil
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
    finally:
        down = runner.invoke(main, ["devnet", "down", "--state-dir", state])
    assert down.exit_code == 0 and "stopped the devnet" in down.output
    assert not (tmp_path / "net" / "deployment.json").exists()
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
