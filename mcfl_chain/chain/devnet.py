"""A local development chain: Anvil from npm on loopback, with the contracts deployed.

Files in the state directory: ``anvil.json`` (the process this package started),
``anvil.log`` and ``deployment.json`` (what workers read).
"""

from __future__ import annotations

import os
import platform
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mcfl_chain._utils.process import (
    LOOPBACK,
    ServiceError,
    ServiceState,
    is_running,
    node_binary,
    npm_install,
    port_in_use,
    start_service,
    stop_service,
)
from mcfl_chain.chain.deployment import Deployment

ANVIL_PACKAGE = "@foundry-rs/anvil@1.7.1"
DEFAULT_PORT = 8545
DEFAULT_STATE_DIR = Path(".mcfl/devnet")
CHAIN_ID = 31337
DEFAULT_PHASE_DURATION = 30
"""Phase deadline of a devnet, in seconds: enough for small datasets' training and a
transaction on a local chain (docs/PROTOCOL.md §2). Deadlines are mandatory."""


class DevnetError(ServiceError):
    """The devnet could not be started, inspected or stopped."""


def state_file(state_dir: Path) -> Path:
    return Path(state_dir) / "anvil.json"


def deployment_file(state_dir: Path) -> Path:
    """Where ``start_devnet`` writes the deployment of a state directory."""
    return Path(state_dir) / "deployment.json"


def anvil_home(state_dir: Path) -> Path:
    """The home folder Anvil runs with: where it spills the states of old blocks
    (``.foundry/anvil/tmp``, some 20 MB a thousand blocks), removed when the devnet stops.

    Anvil never removes that spill itself, not even on SIGTERM; with the user's home,
    every devnet and test chain left its states in ``~/.foundry/anvil/tmp`` (61 GB after
    one day of campaigns filled this machine's disk)."""
    return Path(state_dir) / "anvil-home"


def anvil_environment(home: Path) -> dict[str, str]:
    """This process's environment for an Anvil whose home is ``home`` (created)."""
    home.mkdir(parents=True, exist_ok=True)
    return {**os.environ, "HOME": str(home)}


def remove_anvil_home(home: Path) -> None:
    """Remove an Anvil's home (:func:`anvil_home`) once it no longer runs."""
    shutil.rmtree(home, ignore_errors=True)


DEFAULT_DEPLOYMENT = deployment_file(DEFAULT_STATE_DIR)
"""The deployment file of the default devnet, which every command reads by default."""


def find_anvil(install: bool = True) -> Path:
    """Path of the Anvil binary from npm, installing ``@foundry-rs/anvil`` if allowed.

    Looked up in ``$MCFL_ANVIL``, this checkout's ``node_modules`` (``make node``) and the
    user cache; both the platform package and the copy its installer leaves in the
    main package (``npm install --omit=optional``) are accepted.
    """
    override = os.environ.get("MCFL_ANVIL")
    if override:
        if not Path(override).is_file():
            raise DevnetError(
                f"MCFL_ANVIL is set to {override}, which is not a file: point it "
                f"to an anvil binary or unset it"
            )
        return Path(override)
    arch = {"x86_64": "amd64", "aarch64": "arm64", "arm64": "arm64"}.get(
        platform.machine(), platform.machine()
    )
    candidates = (
        f"@foundry-rs/anvil-{platform.system().lower()}-{arch}/bin/anvil",
        "@foundry-rs/anvil/anvil",
    )
    for relative in candidates:
        found = node_binary(relative, "MCFL_ANVIL")
        if found is not None and found.is_file():
            return found
    if install:
        npm_install([ANVIL_PACKAGE])
        return find_anvil(install=False)
    raise DevnetError(
        "Anvil is not installed: run `make node` in the mcfl-chain checkout "
        f"(or `npm install {ANVIL_PACKAGE}`), or set MCFL_ANVIL to an anvil binary"
    )


def start_devnet(
    state_dir: Path,
    port: int = DEFAULT_PORT,
    *,
    genesis_cid: str,
    task: str = "lenet:fashion-mnist",
    block_time: float | None = None,
    accounts: int = 20,
    admin_index: int | None = None,
    allowed: Sequence[int] | None = None,
    **settings: Any,
) -> tuple[ServiceState, Deployment]:
    """Start Anvil on 127.0.0.1:``port``, deploy the contracts, write the deployment file.

    Parameters
    ----------
    state_dir
        Directory for the process record, the log and ``deployment.json``.
    port
        TCP port on loopback; refused when something listens there.
    genesis_cid
        CIDv1 of the initial weights (raw or dag-pb, sha2-256).
    task
        Task descriptor recorded on chain, e.g. "lenet:fashion-mnist".
    block_time
        Seconds between blocks; None mines one block per transaction.
    accounts
        Number of funded dev accounts (index 0 deploys; trainers use 1, 2, ...).
    admin_index
        Dev account keeping the allowlist (ALLOWLIST only; default 0, the deployer).
    allowed
        Dev accounts the admin admits right after deployment (ALLOWLIST only; default
        every dev account, so that workers can register at once).
    **settings
        The network settings (:func:`~mcfl_chain.chain.deploy.deploy_network`), each
        at its default unless given: ``min_trainers``, ``phase_duration`` (at least 1:
        deadlines are mandatory), ``registration`` (docs/PROTOCOL.md §3), ``deposit``,
        ``cooldown``, ``max_samples``.

    Returns
    -------
    tuple[ServiceState, Deployment]
        The started process and the deployment (also saved to ``deployment.json``).

    Raises
    ------
    DevnetError
        When a devnet of this state directory runs, the port is taken, Anvil is
        missing, or the deployment fails (Anvil is then stopped again).
    """
    from mcfl_chain.chain._tx import dev_account
    from mcfl_chain.chain.client import ChainClient, connect
    from mcfl_chain.chain.deploy import check_settings, deploy_network

    state_dir = Path(state_dir)
    previous = ServiceState.load(state_file(state_dir))
    if previous is not None and is_running(previous):
        raise DevnetError(
            f"a devnet is already running for {state_dir} (pid {previous.pid}, "
            f"http://{LOOPBACK}:{previous.port}); stop it with "
            f"`mcfl-chain devnet down --state-dir {state_dir}` first"
        )
    if port_in_use(port):
        raise DevnetError(
            f"port {port} on {LOOPBACK} is already in use; choose another with "
            f"--port or stop what listens there"
        )
    if accounts < 1:
        raise ValueError(f"accounts must be at least 1, got {accounts}")
    values = check_settings(**settings)  # checked before Anvil starts
    registration = values["registration"]
    if registration != "allowlist" and (admin_index is not None or allowed is not None):
        raise ValueError("an admin and an allowlist only apply to registration 'allowlist'")
    if registration == "allowlist":
        admin_index = 0 if admin_index is None else admin_index
        allowed = range(accounts) if allowed is None else allowed
        for index in (admin_index, *allowed):
            if not 0 <= index < accounts:
                raise ValueError(
                    f"dev account {index} does not exist: the devnet has accounts 0 to "
                    f"{accounts - 1} (--accounts)"
                )
    command = [
        str(find_anvil()),
        "--host",
        LOOPBACK,
        "--port",
        str(port),
        "--chain-id",
        str(CHAIN_ID),
        "--accounts",
        str(accounts),
    ]
    if block_time:
        command += ["--block-time", f"{block_time:g}"]
    home = anvil_home(state_dir)
    remove_anvil_home(home)  # a killed devnet's spill
    state = start_service(
        "anvil",
        command,
        port,
        state_file(state_dir),
        state_dir / "anvil.log",
        env=anvil_environment(home),
    )
    try:
        w3 = connect(f"http://{LOOPBACK}:{port}")
        admin = None if admin_index is None else dev_account(admin_index)
        deployment = deploy_network(
            w3, 0, genesis_cid, task, admin=None if admin is None else str(admin.address), **values
        )
        if admin is not None and allowed:
            keeper = ChainClient(deployment, admin, w3=w3)
            addresses = [str(dev_account(i).address) for i in allowed]
            for start in range(0, len(addresses), 64):
                keeper.set_allowed(addresses[start : start + 64])
        deployment.save(deployment_file(state_dir))
    except Exception as exc:
        # Never leave a chain without contracts running behind the caller's back.
        stop_service(state_file(state_dir))
        remove_anvil_home(home)
        raise DevnetError(f"deploying the contracts on the devnet failed: {exc}") from exc
    return state, deployment


def stop_devnet(state_dir: Path) -> ServiceState | None:
    """Stop the Anvil this package started for ``state_dir``; None when none ran.

    Only the recorded PID is signalled. The deployment file is removed with it: the
    chain it described is gone.
    """
    stopped = stop_service(state_file(state_dir))
    deployment_file(state_dir).unlink(missing_ok=True)
    remove_anvil_home(anvil_home(state_dir))  # no Anvil of this folder runs now
    return stopped


def devnet_status(state_dir: Path) -> dict[str, Any]:
    """What runs for ``state_dir``: process, chain head and round state.

    Returns
    -------
    dict
        ``running`` (bool); when running also ``pid``, ``rpc_url``, ``block``,
        ``deployment`` (path), ``started``, ``round``, ``phase``, ``votes``, ``quorum``,
        ``voters``, ``deadline`` (unix time, 0 before round 0), ``phase_duration``,
        ``registration``, ``trainers``, ``models``.
    """
    from mcfl_chain.chain.client import ChainClient

    state = ServiceState.load(state_file(state_dir))
    if state is None or not is_running(state):
        return {"running": False}
    status: dict[str, Any] = {
        "running": True,
        "pid": state.pid,
        "rpc_url": f"http://{LOOPBACK}:{state.port}",
        "log": state.log,
    }
    path = deployment_file(state_dir)
    if not path.is_file():
        return status
    deployment = Deployment.load(path)
    client = ChainClient.read_only(deployment, rpc_url=status["rpc_url"])
    now = client.status()
    status.update(
        deployment=str(path),
        block=client.block_number(),
        started=now.started,
        round=now.round,
        phase=now.phase.name,
        votes=now.votes,
        quorum=now.quorum,
        voters=now.voters,
        deadline=now.deadline,
        phase_duration=deployment.phase_duration,
        registration=deployment.registration,
        trainers=client.trainer_count(),
        models=client.model_count(),
    )
    return status
