"""A local IPFS node (js-ipfs, ``jsipfs daemon --offline``) for tests and users without one.

The node keeps everything in one directory: its repo (``ipfs-repo/``), the JSON state
file recording its PID (``daemon.json``) and its log (``daemon.log``). It serves only
the HTTP RPC API, on loopback; it has no swarm, gateway or gRPC listeners and stays
offline. It is stopped by the PID it was started with, never by name.

The ``jsipfs`` program comes from the npm package ``ipfs`` that ``make node`` installs
into ``node_modules`` (pinned in package.json; ``MCFL_JSIPFS`` overrides its path).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from mcfl_chain._utils.process import (
    LOOPBACK,
    ServiceError,
    ServiceState,
    free_port,
    is_running,
    node_binary,
    start_service,
    stop_service,
)

#: Where ``mcfl-chain ipfs up`` keeps the node when no ``--repo`` is given.
DEFAULT_REPO = Path(".mcfl/ipfs")
#: The API port of ``mcfl-chain ipfs up`` when no ``--port`` is given (Kubo's default).
DEFAULT_PORT = 5001

_SERVICE = "ipfs"


def _paths(repo_dir: Path) -> tuple[Path, Path, Path]:
    """(IPFS repo, state file, log file) inside ``repo_dir``."""
    return repo_dir / "ipfs-repo", repo_dir / "daemon.json", repo_dir / "daemon.log"


def jsipfs_binary() -> Path:
    """Path of the ``jsipfs`` program.

    Raises
    ------
    ServiceError
        If Node.js or the npm package ``ipfs`` is not installed (says how to install).
    """
    if shutil.which("node") is None:
        raise ServiceError(
            "Node.js is not installed (no `node` on PATH); install it, then "
            "run `make node` in the mcfl-chain checkout"
        )
    binary = node_binary(".bin/jsipfs", "MCFL_JSIPFS")
    if binary is None or not binary.is_file():
        where = f" ({binary} does not exist)" if binary is not None else ""
        raise ServiceError(
            f"the js-ipfs node is not installed{where}: run `make node` in the "
            f"mcfl-chain checkout (or set MCFL_JSIPFS to a jsipfs executable)"
        )
    return binary


def _configure(ipfs_repo: Path, port: int) -> None:
    """Serve the API on ``LOOPBACK:port`` only; no swarm, gateway or gRPC listener."""
    config_file = ipfs_repo / "config"
    config = json.loads(config_file.read_text())
    addresses = config.setdefault("Addresses", {})
    addresses.update(
        {
            "API": f"/ip4/{LOOPBACK}/tcp/{port}",
            "Gateway": "",
            "RPC": "",
            "Swarm": [],
            "Announce": [],
            "Delegates": [],
        }
    )
    config["Bootstrap"] = []
    config.setdefault("Discovery", {}).setdefault("MDNS", {})["Enabled"] = False
    tmp = config_file.with_suffix(".tmp")
    tmp.write_text(json.dumps(config, indent=2))
    tmp.replace(config_file)


def _initialise(binary: Path, ipfs_repo: Path, env: dict[str, str]) -> None:
    if (ipfs_repo / "config").is_file():
        return
    ipfs_repo.mkdir(parents=True, exist_ok=True)
    result = subprocess.run(
        [str(binary), "init", "--profile", "test"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    if result.returncode != 0:
        raise ServiceError(
            f"`jsipfs init` failed for the repo {ipfs_repo} (exit "
            f"{result.returncode}):\n{(result.stderr or result.stdout)[-2000:]}"
        )


def start_ipfs(
    repo_dir: str | os.PathLike[str] = DEFAULT_REPO,
    port: int | None = None,
    ready_timeout: float = 90.0,
) -> ServiceState:
    """Start an offline js-ipfs node serving its HTTP RPC API on loopback.

    Parameters
    ----------
    repo_dir
        Directory for the node's repo, state file and log; created and initialised
        (``jsipfs init --profile test``) on first use, reused afterwards.
    port
        API port on 127.0.0.1; a free one when ``None``.
    ready_timeout
        Seconds to wait for the API to listen.

    Returns
    -------
    ServiceState
        The PID and port; :func:`storage_spec` turns it into a ``--storage`` value.

    Raises
    ------
    ServiceError
        If js-ipfs is not installed, the node already runs, the port is taken or the
        node does not come up (the message includes the end of its log).
    """
    repo = Path(repo_dir).expanduser().resolve()
    ipfs_repo, state_file, log_file = _paths(repo)
    previous = ServiceState.load(state_file)
    if previous is not None and is_running(previous):
        raise ServiceError(
            f"an IPFS node already runs for {repo} (pid {previous.pid}, port "
            f"{previous.port}); stop it with `mcfl-chain ipfs down`"
        )
    binary = jsipfs_binary()
    env = {**os.environ, "IPFS_PATH": str(ipfs_repo)}
    _initialise(binary, ipfs_repo, env)
    port = free_port() if port is None else port
    _configure(ipfs_repo, port)
    # A node killed without shutting down leaves its lock (a directory) and its API file
    # behind; no node of ours runs on this repo (checked above), so they are stale.
    shutil.rmtree(ipfs_repo / "repo.lock", ignore_errors=True)
    (ipfs_repo / "api").unlink(missing_ok=True)
    # js-ipfs renames its process "ipfs" (process.title): record that name for PID checks.
    return start_service(
        _SERVICE,
        [str(binary), "daemon", "--offline"],
        port,
        state_file,
        log_file,
        env=env,
        cwd=repo,
        ready_timeout=ready_timeout,
        title="ipfs",
    )


def stop_ipfs(
    repo_dir: str | os.PathLike[str] = DEFAULT_REPO, timeout: float = 15.0
) -> ServiceState | None:
    """Stop the node started by :func:`start_ipfs` for ``repo_dir`` (by its PID).

    Returns
    -------
    ServiceState | None
        What was stopped, or ``None`` when no node was recorded.
    """
    _, state_file, _ = _paths(Path(repo_dir).expanduser().resolve())
    return stop_service(state_file, timeout=timeout)


def ipfs_status(repo_dir: str | os.PathLike[str] = DEFAULT_REPO) -> ServiceState | None:
    """The running node recorded for ``repo_dir``, or ``None`` if none runs."""
    _, state_file, _ = _paths(Path(repo_dir).expanduser().resolve())
    state = ServiceState.load(state_file)
    return state if state is not None and is_running(state) else None


def storage_spec(state: ServiceState) -> str:
    """The ``--storage`` value that reaches the node described by ``state``."""
    return f"ipfs:/ip4/{LOOPBACK}/tcp/{state.port}"


@contextmanager
def running_ipfs(repo_dir: str | os.PathLike[str], port: int | None = None) -> Iterator[str]:
    """Run a node for the duration of a ``with`` block; yields its ``--storage`` spec.

    Meant for test fixtures and simulations::

        with running_ipfs(tmp_path / "ipfs") as spec:
            store = open_storage(spec)
    """
    state = start_ipfs(repo_dir, port)
    try:
        yield storage_spec(state)
    finally:
        stop_ipfs(repo_dir)
