"""The ``--deployment`` and ``--rpc`` options of the commands that act on a deployed network
(`dag`, `explorer`, `admin`): a file, or the ``ipfs://CID`` a network was published under,
fetched from ``--storage``; and a node of its chain. ``--task`` (`dag`, `explorer`): the
task of a network that trains a model of its own, checked against the chain."""

from __future__ import annotations

import click

from mcfl_chain.chain.client import ChainClient
from mcfl_chain.chain.deployment import Deployment
from mcfl_chain.chain.devnet import DEFAULT_DEPLOYMENT
from mcfl_chain.learning.descriptor import Task, TaskError
from mcfl_chain.learning.tasks import load_task
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


TASK = click.option(
    "--task",
    "task_reference",
    default=None,
    metavar="MODULE:ATTRIBUTE",
    help="The task of a network that trains a model of its own, as its trainers run it "
    "(module:attribute, path/to/file.py:attribute or an entry point of mcfl_chain.tasks): "
    "its model's fingerprint must be the one the chain's task descriptor records; weights "
    "are then decoded and rebuilt with its model.",
)


def use_network_task(reference: str | None, client: ChainClient) -> None:
    """Make the model of the task ``reference`` names known to the package, once the
    chain's task descriptor confirms it is the network's (name and fingerprint).

    Raises
    ------
    click.ClickException
        The task cannot be loaded, or it is not the network's; one line.
    """
    if reference is None:
        return
    try:
        own = load_task(reference)
        network = Task.parse(client.task(), registered_only=False)
        fingerprint = own.fingerprint()
    except TaskError as exc:
        raise click.ClickException(f"--task {reference}: {exc}") from exc
    if own.arch != network.arch:
        raise click.ClickException(
            f"--task {reference} is {own.arch!r}, the network trains {network.arch!r} "
            f"(task {network} on chain): give the network's task"
        )
    if not network.fingerprint_matches(fingerprint):
        raise click.ClickException(
            f"--task {reference}: its model has fingerprint {fingerprint}, the network's "
            f"(task {network} on chain) {network.fingerprint}: not the network's model"
        )
    if network.fingerprint is None:
        click.echo(
            f"warning: the network's task {network} records no fingerprint: the model of "
            f"--task {reference} is taken on trust",
            err=True,
        )
    try:
        own.register()
    except TaskError as exc:
        raise click.ClickException(f"--task {reference}: {exc}") from exc
