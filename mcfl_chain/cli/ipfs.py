"""``mcfl-chain ipfs up|status|down``: a local IPFS node for the blob store."""

from __future__ import annotations

from pathlib import Path

import click

from mcfl_chain._utils.process import ServiceError
from mcfl_chain.storage.daemon import (
    DEFAULT_PORT,
    DEFAULT_REPO,
    ipfs_status,
    start_ipfs,
    stop_ipfs,
    storage_spec,
)

_REPO_OPTION = click.option(
    "--repo",
    "repo",
    type=click.Path(file_okay=False, path_type=Path),
    default=DEFAULT_REPO,
    show_default=True,
    help="Directory holding the node's IPFS repo, its PID state file and its log.",
)


@click.group("ipfs")
def ipfs() -> None:
    """Run a local IPFS node (js-ipfs, offline, API on 127.0.0.1 only).

    Workers then use it with `--storage ipfs:/ip4/127.0.0.1/tcp/PORT`. The node is
    installed by `make node`.
    """


@ipfs.command("up")
@click.option(
    "--port",
    type=click.IntRange(1, 65535),
    default=DEFAULT_PORT,
    show_default=True,
    help="TCP port of the node's HTTP RPC API on 127.0.0.1.",
)
@_REPO_OPTION
def up(port: int, repo: Path) -> None:
    """Start the node in the background (initialising its repo on first use)."""
    try:
        state = start_ipfs(repo, port)
    except ServiceError as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(f"IPFS node running (pid {state.pid}, log {state.log})")
    click.echo(f"use: --storage {storage_spec(state)}")


@ipfs.command("status")
@_REPO_OPTION
def status(repo: Path) -> None:
    """Say whether the node runs and which --storage value reaches it (exit 1 if not)."""
    state = ipfs_status(repo)
    if state is None:
        click.echo(f"no IPFS node runs for {repo}")
        raise SystemExit(1)
    click.echo(f"IPFS node running (pid {state.pid}, port {state.port}, log {state.log})")
    click.echo(f"use: --storage {storage_spec(state)}")


@ipfs.command("down")
@_REPO_OPTION
def down(repo: Path) -> None:
    """Stop the node started by `up` for this repo (by its recorded PID)."""
    state = stop_ipfs(repo)
    click.echo(
        f"IPFS node stopped (pid {state.pid})"
        if state is not None
        else f"no IPFS node was recorded for {repo}"
    )
