"""``mcfl-chain ipfs up|status|peers|connect|down``: each trainer its own IPFS node."""

from __future__ import annotations

from pathlib import Path

import click

from mcfl_chain._utils.process import ServiceError, ServiceState
from mcfl_chain.storage import IpfsStorage, StorageError
from mcfl_chain.storage.daemon import (
    DEFAULT_PORT,
    DEFAULT_REPO,
    DEFAULT_SWARM,
    connect_peer,
    connected_peers,
    ipfs_status,
    peer_id,
    start_ipfs,
    stop_ipfs,
    storage_spec,
    swarm_addresses,
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
    """Run this trainer's IPFS node (js-ipfs; API on 127.0.0.1 only).

    Online by default: the node listens for the other trainers' nodes on --swarm and
    knows only the peers given with --peer (no public bootstrap, DHT, mDNS or UPnP).
    Workers use it with `--storage ipfs:/ip4/127.0.0.1/tcp/PORT`. The node is installed
    by `make node`.
    """


def _running(repo: Path) -> ServiceState:
    state = ipfs_status(repo)
    if state is None:
        raise click.ClickException(
            f"no IPFS node runs for {repo}; start it with `mcfl-chain ipfs up`"
        )
    return state


def _describe(state: ServiceState, repo: Path) -> None:
    click.echo(f"peer id: {peer_id(repo)}")
    addresses = swarm_addresses(repo)
    if not addresses:
        click.echo("offline: no swarm listener, no peers")
    for address in addresses:
        click.echo(f"swarm: {address}")
        click.echo(f"  other trainers add: --peer {address}")
        if "/0.0.0.0/" in address:
            click.echo("  (0.0.0.0 listens on every interface: give peers this machine's address)")
    click.echo(f"use: --storage {storage_spec(state)}")


@ipfs.command("up")
@click.option(
    "--port",
    type=click.IntRange(1, 65535),
    default=DEFAULT_PORT,
    show_default=True,
    help="TCP port of the node's HTTP RPC API on 127.0.0.1.",
)
@click.option(
    "--swarm",
    default=DEFAULT_SWARM,
    show_default=True,
    metavar="MULTIADDR",
    help="Where the node listens for other nodes (/ip4/A.B.C.D/tcp/PORT; PORT 0: a free one). "
    "Use this machine's network address for peers on other machines.",
)
@click.option(
    "--peer",
    "peers",
    multiple=True,
    metavar="MULTIADDR",
    help="Another trainer's node, /ip4/HOST/tcp/PORT/p2p/PEER_ID as its `ipfs up` prints "
    "(repeatable). Its only peers: no public bootstrap.",
)
@click.option("--offline", is_flag=True, help="A node of one: no swarm listener and no peers.")
@_REPO_OPTION
def up(port: int, swarm: str, peers: tuple[str, ...], offline: bool, repo: Path) -> None:
    """Start the node in the background (initialising its repo on first use)."""
    if offline and peers:
        raise click.UsageError("--offline and --peer exclude each other")
    try:
        state = start_ipfs(repo, port, swarm=None if offline else swarm, peers=peers)
    except ServiceError as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(f"IPFS node running (pid {state.pid}, log {state.log})")
    _describe(state, repo)
    if peers:
        try:
            with _store(state) as store:
                connected = len(store.peer_health().answering)
        except StorageError:
            connected = 0
        click.echo(f"connected to {connected} of {len(peers)} peer(s) (the others are redialled)")
        if not connected:
            click.echo(
                "warning: your IPFS node has no peers yet: until one answers, it can fetch "
                "nothing from the other organisations (a deployment CID included); check "
                "the --peer addresses and that their swarm ports are open, then "
                "`mcfl-chain ipfs status`",
                err=True,
            )


def _store(state: ServiceState) -> IpfsStorage:
    return IpfsStorage(storage_spec(state).removeprefix("ipfs:"))


@ipfs.command("status")
@_REPO_OPTION
def status(repo: Path) -> None:
    """Say whether the node runs, how peers reach it, which --storage value reaches it,
    and how many peers it really reaches: those that answer a ping now (a cut link
    leaves a peer listed as connected for a long time)."""
    state = ipfs_status(repo)
    if state is None:
        click.echo(f"no IPFS node runs for {repo}")
        raise SystemExit(1)
    click.echo(f"IPFS node running (pid {state.pid}, port {state.port}, log {state.log})")
    _describe(state, repo)
    if not swarm_addresses(repo):
        return
    with _store(state) as store:
        try:
            health = store.peer_health()
        except StorageError as exc:
            click.echo(f"connected peers: unknown ({exc})")
        else:
            # Only peers that answer now count: a cut link leaves connections listed.
            silent = (
                f" ({len(health.silent)} more listed but silent: no answer to a ping within "
                f"{store.ping_timeout:g} s; their link is cut or they are frozen)"
                if health.silent
                else ""
            )
            click.echo(f"connected peers: {len(health.answering)}{silent}")
            if not health.answering:
                click.echo(
                    "warning: your IPFS node has no peers: it can fetch no blob from the "
                    "other organisations; check its network link and the --peer addresses "
                    "it was started with (`mcfl-chain ipfs connect ADDRESS` adds one)",
                    err=True,
                )
        try:
            stats = store.exchange_stats()
            click.echo(
                f"received from peers (bitswap): {stats.blocks_received} block(s), "
                f"{stats.bytes_received} bytes"
            )
        except StorageError as exc:
            click.echo(f"received from peers (bitswap): unknown ({exc})")


@ipfs.command("peers")
@_REPO_OPTION
def peers(repo: Path) -> None:
    """List the peer ids the node lists as connected (`status` says which answer)."""
    state = _running(repo)
    try:
        found = connected_peers(state)
    except ServiceError as exc:
        raise click.ClickException(str(exc)) from exc
    for peer in found:
        click.echo(peer)
    if not found:
        click.echo("no connected peer", err=True)


@ipfs.command("connect")
@click.argument("address", metavar="MULTIADDR")
@_REPO_OPTION
def connect(address: str, repo: Path) -> None:
    """Connect the running node to another trainer's node now."""
    state = _running(repo)
    try:
        connect_peer(state, address)
    except ServiceError as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(f"connected to {address}")


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
