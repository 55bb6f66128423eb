"""Starting and stopping the local js-ipfs node, from Python and from the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from mcfl_chain._utils.process import ServiceError, free_port, pid_alive, port_in_use
from mcfl_chain.cli.ipfs import ipfs
from mcfl_chain.storage import open_storage
from mcfl_chain.storage.daemon import ipfs_status, jsipfs_binary, storage_spec

# ipfshttpclient 0.8.0a2 passes urllib3 a deprecated argument (pytest resets the filter
# mcfl_chain.storage.ipfs installs for users).
pytestmark = pytest.mark.filterwarnings("ignore:The 'strict' parameter:FutureWarning")


def test_cli_up_status_down(tmp_path: Path) -> None:
    # Prepare
    runner = CliRunner()
    repo, port = tmp_path / "node", free_port()

    # Execute: up, then a second up must refuse, then status.
    up = runner.invoke(ipfs, ["up", "--offline", "--repo", str(repo), "--port", str(port)])
    try:
        again = runner.invoke(ipfs, ["up", "--offline", "--repo", str(repo), "--port", str(port)])
        status = runner.invoke(ipfs, ["status", "--repo", str(repo)])
        state = ipfs_status(repo)
        assert state is not None
        with open_storage(storage_spec(state)) as store:
            cid = store.put(b"through the CLI-started node")
            fetched = store.get(cid)
        config = json.loads((repo / "ipfs-repo" / "config").read_text())
    finally:
        down = runner.invoke(ipfs, ["down", "--repo", str(repo)])

    # Assert: the node served only its loopback API, and was stopped by its PID.
    assert up.exit_code == 0, up.output
    assert f"--storage ipfs:/ip4/127.0.0.1/tcp/{port}" in up.output
    assert again.exit_code != 0 and "already runs" in again.output
    assert status.exit_code == 0 and f"port {port}" in status.output
    assert fetched == b"through the CLI-started node"
    assert config["Addresses"]["API"] == f"/ip4/127.0.0.1/tcp/{port}"
    assert config["Addresses"]["Swarm"] == [] and config["Addresses"]["Gateway"] == ""
    assert down.exit_code == 0 and f"pid {state.pid}" in down.output
    assert not pid_alive(state.pid)
    assert not port_in_use(port)
    after = runner.invoke(ipfs, ["status", "--repo", str(repo)])
    assert after.exit_code == 1 and "no IPFS node runs" in after.output


def test_down_without_a_node(tmp_path: Path) -> None:
    result = CliRunner().invoke(ipfs, ["down", "--repo", str(tmp_path)])
    assert result.exit_code == 0
    assert "no IPFS node was recorded" in result.output


def test_missing_jsipfs_says_how_to_install(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("MCFL_JSIPFS", str(tmp_path / "jsipfs"))
    with pytest.raises(ServiceError, match="make node"):
        jsipfs_binary()
