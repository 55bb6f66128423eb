"""``mcfl-chain explorer``: serve the DAG explorer page on 127.0.0.1."""

from __future__ import annotations

import signal
import threading
from pathlib import Path

import click
from rich.console import Console

from mcfl_chain._utils.process import LOOPBACK, port_in_use
from mcfl_chain.chain.client import ChainClient
from mcfl_chain.chain.errors import ChainError, DeploymentError
from mcfl_chain.cli._deployment import DEPLOYMENT, RPC, TASK, open_deployment, use_network_task
from mcfl_chain.dag.sync import CacheError
from mcfl_chain.explorer.server import ExplorerServer, NetworkView
from mcfl_chain.storage import DEFAULT_STORAGE, StorageError, open_storage

DEFAULT_PORT = 8600


@click.command("explorer")
@DEPLOYMENT
@RPC
@click.option(
    "--storage",
    default=DEFAULT_STORAGE,
    show_default=True,
    help="Blob store the trainers publish weights to (local:DIR or "
    "ipfs:/ip4/127.0.0.1/tcp/PORT), for the weights downloads and an ipfs://CID "
    "--deployment.",
)
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=DEFAULT_PORT,
    show_default=True,
    help=f"TCP port on {LOOPBACK} (the page is never served on other addresses; from "
    f"another machine, forward it: ssh -N -L PORT:{LOOPBACK}:PORT HOST, the same port on "
    f"both ends); 0 picks a free one.",
)
@click.option(
    "--poll",
    "poll_seconds",
    type=click.FloatRange(min=0.1),
    default=1.0,
    show_default=True,
    help="Seconds between two looks at the chain for new blocks.",
)
@click.option(
    "--cache-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Keep the events read in this folder so a restart only reads new blocks "
    "(do not share it with a running `mcfl-chain dag`).",
)
@TASK
def explorer(
    deployment: str,
    rpc: str | None,
    storage: str,
    port: int,
    poll_seconds: float,
    cache_dir: Path | None,
    task_reference: str | None,
) -> None:
    """Serve a web page that draws the model DAG and follows the chain live.

    Models laid out by round with edges parent → child, popularity, forks and dead
    branches; the current round, phase and trainers' votes; click a model for its
    updates, aggregators, CIDs and transactions, and download its weights. The page
    reads only public chain data and the weights blobs, and stops with Ctrl-C.
    """
    console = Console(stderr=True)
    if port and port_in_use(port):
        raise click.ClickException(
            f"port {port} on {LOOPBACK} is already in use; choose "
            f"another with --port (0 picks a free one)"
        )
    try:
        client = ChainClient.read_only(open_deployment(deployment, storage), rpc_url=rpc)
        use_network_task(task_reference, client)
        store = open_storage(storage)
        with console.status("reading the network's events"):
            view = NetworkView(client, store, cache_dir)
    except (DeploymentError, ChainError, CacheError, StorageError) as exc:
        raise click.ClickException(str(exc)) from exc
    server = ExplorerServer(view, port, poll_seconds)
    stopping = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopping.set())
    server.start()
    _, document = view.snapshot()
    console.print(
        f"explorer at [bold]{server.url}[/bold]  ({len(document['models'])} models, "
        f"block {document['status']['block']}); Ctrl-C to stop"
    )
    try:
        stopping.wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
        store.close()
