"""``mcfl-chain devnet up | status | down``."""

from __future__ import annotations

from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from mcfl_chain._utils.process import ServiceError
from mcfl_chain.chain.deployment import REGISTRATION_POLICIES, cohort_bps
from mcfl_chain.chain.devnet import (
    DEFAULT_PHASE_DURATION,
    DEFAULT_PORT,
    DEFAULT_STATE_DIR,
    deployment_file,
    devnet_status,
    start_devnet,
    stop_devnet,
)
from mcfl_chain.cli import _network_options as options

_STATE_DIR = click.option(
    "--state-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=DEFAULT_STATE_DIR,
    show_default=True,
    help="Directory holding the devnet's process record, log and deployment.json.",
)


@click.group()
def devnet() -> None:
    """A local chain (Anvil on 127.0.0.1) with the MCFL contracts deployed."""


@devnet.command("up")
@click.option(
    "--port",
    type=click.IntRange(1, 65535),
    default=DEFAULT_PORT,
    show_default=True,
    help="TCP port of the JSON-RPC endpoint on 127.0.0.1.",
)
@_STATE_DIR
@click.option(
    "--genesis-cid",
    default=None,
    help="CIDv1 (raw or dag-pb, sha2-256) of the initial model weights, stored "
    "beforehand in the storage the workers use; every trainer starts from it. "
    "Default: initialise the task's architecture from --seed and store it in "
    "--storage.",
)
@click.option(
    "--storage",
    default="local:.mcfl/blobs",
    show_default=True,
    help="Where to store the initial weights when --genesis-cid is not given.",
)
@options.SEED
@click.option(
    "--task",
    default="lenet:fashion-mnist",
    show_default=True,
    help="Task descriptor recorded on chain (architecture:dataset); workers refuse "
    "a network whose task they cannot run.",
)
@options.MIN_TRAINERS
@click.option(
    "--phase-duration",
    type=int,
    default=DEFAULT_PHASE_DURATION,
    show_default=True,
    help="Seconds from a phase's start after which any trainer's vote ends it without "
    "the full quorum (at least 1: deadlines are mandatory). Must exceed the slowest "
    "honest trainer's work in a phase.",
)
@click.option(
    "--registration",
    type=click.Choice(list(REGISTRATION_POLICIES)),
    default="open",
    show_default=True,
    help="Who may register: anyone (open), addresses the admin admits (allowlist), "
    "or anyone paying --deposit (deposit).",
)
@click.option(
    "--admin-index",
    type=click.IntRange(min=0),
    default=None,
    help="Dev account keeping the allowlist (allowlist only) [default: 0, the deployer].",
)
@click.option(
    "--allow",
    default=None,
    metavar="INDEXES",
    help="Comma-separated dev accounts the admin admits at start (allowlist only) "
    "[default: every dev account].",
)
@options.DEPOSIT
@options.COOLDOWN
@options.MAX_SAMPLES
@options.COHORT
@click.option(
    "--block-time",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help="Seconds between blocks; by default a block is mined per transaction.",
)
@click.option(
    "--accounts",
    type=click.IntRange(min=1),
    default=20,
    show_default=True,
    help="Funded dev accounts (index 0 deploys, trainers use 1, 2, ...).",
)
def up(
    port: int,
    state_dir: Path,
    genesis_cid: str | None,
    storage: str,
    seed: int,
    task: str,
    min_trainers: int,
    phase_duration: int,
    registration: str,
    admin_index: int | None,
    allow: str | None,
    deposit: int,
    cooldown: int,
    max_samples: int,
    cohort: float,
    block_time: float | None,
    accounts: int,
) -> None:
    """Start Anvil, deploy Trainers, Models and Updates, write the deployment file."""
    if phase_duration < 1:
        raise click.BadParameter(
            f"{phase_duration} s: deadlines are mandatory (a silent trainer would stall "
            f"the network), give at least 1 s; {DEFAULT_PHASE_DURATION} s suits a local devnet",
            param_hint="--phase-duration",
        )
    allowed = None
    if allow is not None:
        try:
            allowed = [int(i) for i in allow.split(",") if i.strip()]
        except ValueError:
            raise click.BadParameter(
                f"{allow!r} is not a comma-separated list of account indexes", param_hint="--allow"
            ) from None
    if genesis_cid is None:
        genesis_cid = _store_genesis(task, seed, storage)
    try:
        state, deployment = start_devnet(
            state_dir,
            port,
            genesis_cid=genesis_cid,
            task=task,
            min_trainers=min_trainers,
            phase_duration=phase_duration,
            block_time=block_time,
            accounts=accounts,
            registration=registration,
            admin_index=admin_index,
            allowed=allowed,
            deposit=deposit,
            cooldown=cooldown,
            max_samples=max_samples,
            cohort_bps=cohort_bps(cohort),
        )
    except (ServiceError, ValueError) as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(
        f"devnet running: {deployment.rpc_url} (pid {state.pid}, chain {deployment.chain_id})"
    )
    for name, address in deployment.addresses.items():
        click.echo(f"  {name:9s} {address}")
    policy = deployment.registration
    if policy == "allowlist":
        policy += f" (admin {deployment.admin})"
    elif policy == "deposit":
        policy += f" ({deployment.deposit} wei, refund {deployment.cooldown} s after exit)"
    click.echo(
        f"phase deadline {deployment.phase_duration} s, registration {policy}, "
        f"at most {deployment.max_samples} samples per update"
    )
    click.echo(f"deployment file: {deployment_file(state_dir)}")


def _store_genesis(task: str, seed: int, storage: str) -> str:
    # Imported here: only this path needs torch and the worker's task rules.
    from mcfl_chain.learning.descriptor import Task, TaskError
    from mcfl_chain.storage import open_storage
    from mcfl_chain.storage.errors import StorageError
    from mcfl_chain.worker.genesis import publish_genesis

    try:
        arch = Task.parse(task).arch
        with open_storage(storage) as store:
            cid = publish_genesis(arch, seed, store)
    except (TaskError, StorageError) as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(f"initial {arch} weights (seed {seed}) stored in {storage}: {cid}")
    return cid


@devnet.command("status")
@_STATE_DIR
def status(state_dir: Path) -> None:
    """Show whether the devnet runs, its chain head and the round state (exit 1 if not running)."""
    try:
        info = devnet_status(state_dir)
    except Exception as exc:  # any failure to query is reported, the process may be stuck
        raise click.ClickException(f"the devnet of {state_dir} does not answer: {exc}") from exc
    if not info["running"]:
        click.echo(f"no devnet running for {state_dir}")
        raise SystemExit(1)
    table = Table(show_header=False, box=None)
    for key, value in info.items():
        table.add_row(key, str(value))
    Console().print(table)


@devnet.command("down")
@_STATE_DIR
def down(state_dir: Path) -> None:
    """Stop the Anvil process `up` started (and only that one)."""
    stopped = stop_devnet(state_dir)
    if stopped is None:
        click.echo(f"no devnet was running for {state_dir}")
    else:
        click.echo(f"stopped the devnet (pid {stopped.pid}, port {stopped.port})")
