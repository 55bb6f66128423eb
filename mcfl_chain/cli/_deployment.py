"""The ``--deployment`` and ``--rpc`` options of the commands that act on a deployed network
(`dag`, `explorer`, `admin`): a file, or the ``ipfs://CID`` a network was published under,
fetched from ``--storage``; and a node of its chain."""

from __future__ import annotations

import click

from mcfl_chain.chain.deployment import Deployment
from mcfl_chain.chain.devnet import DEFAULT_DEPLOYMENT
from mcfl_chain.worker.preflight import WorkerSetupError, load_deployment

#: Seconds a read-only command waits for a published deployment to arrive from peers.
FETCH_PATIENCE = 30.0

DEPLOYMENT = click.option(
    "--deployment",
    default=str(DEFAULT_DEPLOYMENT),
    show_default=True,
    metavar="FILE|ipfs://CID",
    help="The network: its deployment file (written by `mcfl-chain deploy`, `devnet up` or "
    "a simulation run), or the ipfs://CID `deploy --publish` printed, read from --storage.",
)

RPC = click.option(
    "--rpc", default=None, help="JSON-RPC URL of a node of that chain. Default: the deployment's."
)


def open_deployment(source: str, storage: str) -> Deployment:
    """The deployment named by ``--deployment`` (a CID is verified by the store).

    Raises
    ------
    click.ClickException
        Missing or malformed file, a CID the store cannot find, an unreachable store.
    """
    try:
        return load_deployment(source, storage, FETCH_PATIENCE)
    except WorkerSetupError as exc:
        raise click.ClickException(str(exc)) from exc
