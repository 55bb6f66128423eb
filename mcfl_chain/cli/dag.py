"""``mcfl-chain dag``: rebuild the model DAG from the chain and print it."""

from __future__ import annotations

import io
import json
import shutil
import sys
from pathlib import Path

import click
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn

from mcfl_chain.chain.client import ChainClient
from mcfl_chain.chain.deployment import Deployment
from mcfl_chain.chain.errors import ChainError, DeploymentError
from mcfl_chain.cli._deployment import DEPLOYMENT, RPC, TASK, open_deployment, use_network_task
from mcfl_chain.dag.graph import ModelDAG
from mcfl_chain.dag.render import dag_document, text_tree, to_dot
from mcfl_chain.dag.sync import (
    CacheError,
    build_dag,
    check_against_chain,
    network_facts,
    network_status,
    sync_events,
)
from mcfl_chain.dag.weights import WeightsBook, check_published_weights
from mcfl_chain.learning.descriptor import Task
from mcfl_chain.storage import DEFAULT_STORAGE, open_storage
from mcfl_chain.storage.errors import StorageError

DEFAULT_CACHE = Path(".mcfl/dag-cache")


def default_cache_dir(root: Path, deployment: Deployment, from_block: int) -> Path:
    """One cache per chain, deployment and start block under ``root``."""
    return root / f"{deployment.chain_id}-{deployment.addresses['Models'].lower()}-{from_block}"


@click.command("dag")
@DEPLOYMENT
@RPC
@click.option(
    "--storage",
    default=DEFAULT_STORAGE,
    show_default=True,
    help="Blob store to fetch an ipfs://CID --deployment from (local:DIR or "
    "ipfs:/ip4/127.0.0.1/tcp/PORT, your own IPFS node).",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["tree", "json", "dot"]),
    default="tree",
    show_default=True,
    help="tree: readable text by round; json: the full document (models, updates, "
    "trainers, status); dot: Graphviz, e.g. `| dot -Tsvg > dag.svg`.",
)
@click.option(
    "--brief",
    is_flag=True,
    help="Tree format: one line per model, without ids, CIDs, updates and transactions.",
)
@click.option(
    "--from-block",
    type=click.IntRange(min=0),
    default=None,
    help="First block to read. Default: the deployment block (the whole history). "
    "Models whose parent or updates came earlier show them as unknown.",
)
@click.option(
    "--to-block",
    type=click.IntRange(min=0),
    default=None,
    help="Last block to read: the DAG as it was then. Default: the latest block.",
)
@click.option(
    "--cache-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=DEFAULT_CACHE,
    show_default=True,
    help="Where the events read are kept (one subfolder per deployment and start "
    "block), so the next call only reads the new blocks.",
)
@click.option("--no-cache", is_flag=True, help="Read every event from the node; keep nothing.")
@click.option(
    "--check",
    is_flag=True,
    help="Also compare the DAG with the contract views at the last block read (each "
    "model's existence, round, popularity and creation index; each update's round, "
    "samples and parent index; each trainer's holder), recompute every model id from "
    "its parents and updates and every update id from its trainer, parent and round; "
    "exit with status 1 if anything differs.",
)
@click.option(
    "--check-weights",
    "storage_spec",
    metavar="STORAGE",
    default=None,
    help="Also rebuild every model whose weights were published from its update ids and "
    "blobs alone, with the rule the task's architecture names (FedAvg; per-head FedAvg "
    "for a <base>-heads<k> model), and compare the bytes; STORAGE is where the blobs are "
    "(local:DIR or ipfs:/ip4/127.0.0.1/tcp/PORT). Exit with status 1 if any differs. A "
    "network that trains a model of its own needs its --task.",
)
@TASK
@click.option(
    "--output",
    "-o",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write to this file instead of the standard output.",
)
def dag(
    deployment: str,
    rpc: str | None,
    storage: str,
    fmt: str,
    brief: bool,
    from_block: int | None,
    to_block: int | None,
    cache_dir: Path,
    no_cache: bool,
    check: bool,
    storage_spec: str | None,
    task_reference: str | None,
    output: Path | None,
) -> None:
    """Rebuild the model DAG from contract events and print it.

    Every model version with its parents (several for a merge), round, popularity, the
    updates aggregated into it (trainer id, CID, samples), its aggregators (trainer ids
    and the addresses holding them), its published weights CID and the transactions,
    grouped by round; the trainers (key rotations, exits); the current round, phase and
    votes. Reads only public chain data.
    """
    err = Console(stderr=True)
    try:
        dep = open_deployment(deployment, storage)
        client = ChainClient.read_only(dep, rpc_url=rpc)
        use_network_task(task_reference, client)
        start = dep.deployment_block if from_block is None else from_block
        cache = None if no_cache else default_cache_dir(cache_dir, dep, start)
        with Progress(
            TextColumn("reading events"),
            BarColumn(),
            TextColumn("{task.completed}/{task.total} blocks"),
            console=err,
            transient=True,
        ) as bar:
            task = bar.add_task("events", total=None)
            log = sync_events(
                client,
                start,
                to_block,
                cache,
                progress=lambda done, total: bar.update(task, completed=done, total=total),
            )
        graph = build_dag(log, dep.genesis_cid)
        trainers = log.trainers
        document = dag_document(
            graph,
            network=network_facts(client, log),
            status=network_status(client, log.last_block),
            trainers=trainers,
        )
        problems = (
            check_against_chain(
                graph,
                client,
                block=log.last_block,
                trainers=trainers,
                complete=start <= dep.deployment_block,
            )
            if check
            else []
        )
        checked = 0
        if storage_spec is not None:
            checked, weight_problems = _check_weights(graph, dep.task, storage_spec)
            problems += weight_problems
    except (DeploymentError, ChainError, CacheError, ValueError) as exc:
        raise click.ClickException(str(exc)) from exc
    if fmt == "json":
        if check:
            document["check"] = problems
        text = json.dumps(document, indent=1) + "\n"
    elif fmt == "dot":
        text = to_dot(document)
    else:
        # Ids, CIDs and hashes must stay on one line when piped or written to a file.
        buffer = io.StringIO()
        to_terminal = output is None and sys.stdout.isatty()
        width = shutil.get_terminal_size().columns if to_terminal else 240
        Console(
            file=buffer, width=width, force_terminal=to_terminal, no_color=not to_terminal
        ).print(text_tree(document, details=not brief))
        text = buffer.getvalue()
    if output is not None:
        output.write_text(text)
    else:
        click.echo(text, nl=False)
    if check or storage_spec is not None:
        for line in problems:
            err.print(f"[red]mismatch[/red] {line}")
        if problems:
            sys.exit(1)
    if check:
        err.print(
            f"checked {len(graph.models) - 1} models, {len(graph.updates)} updates and "
            f"{len(trainers)} trainers against the contract views and the id formulas: "
            f"all agree"
        )
    if storage_spec is not None:
        err.print(
            f"rebuilt {checked} models with published weights from their updates: bit-identical"
        )


def _check_weights(graph: ModelDAG, task: str, storage_spec: str) -> tuple[int, list[str]]:
    """:func:`check_published_weights` over the blobs of ``storage_spec``."""
    network = Task.parse(task, registered_only=False)
    if not network.registered:
        raise click.ClickException(
            f"--check-weights: this network trains a model of its own ({task}): give "
            f"its task with --task module:attribute, as its trainers run it"
        )
    arch = network.arch
    try:
        with open_storage(storage_spec) as storage:
            book = WeightsBook(storage.get, arch, graph)
            return check_published_weights(graph, book, storage.get, arch)
    except StorageError as exc:
        raise click.ClickException(f"--check-weights {storage_spec}: {exc}") from exc
