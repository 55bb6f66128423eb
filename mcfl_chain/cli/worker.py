"""``mcfl-chain worker``: run one sovereign trainer."""

from __future__ import annotations

import gc
import logging
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from mcfl_chain.cli._options import click_type
from mcfl_chain.worker.config import OPTIONS, ConfigError, Option, WorkerConfig

F = TypeVar("F", bound=Callable[..., Any])


class _Converted(click.ParamType):
    """A value the option itself parses and checks: a JSON object given as text (flag,
    environment) or as a table (configuration file), or a ``NAME[:KEY=VALUE...]`` text."""

    def __init__(self, option: Option, name: str) -> None:
        self.option = option
        self.name = name

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        try:
            return self.option.convert(value)
        except ConfigError as exc:
            self.fail(str(exc), param, ctx)


def _click_type(option: Option) -> click.ParamType:
    """The click type that parses and checks ``option`` as the configuration does."""
    if option.kind is Path:
        return click.Path(
            file_okay=option.directory is not True,
            dir_okay=option.directory is not False,
            path_type=Path,
        )
    if option.kind is dict:
        return _Converted(option, "json")
    if option.check is not None:
        return _Converted(option, "text")
    return click_type(option)


def _worker_options(command: F) -> F:
    """One click option per :data:`~mcfl_chain.worker.config.OPTIONS` entry, in order."""
    for option in reversed(OPTIONS):
        command = click.option(
            option.flag,
            option.name,
            type=_click_type(option),
            default=option.default,
            show_default=option.default is not None,
            help=option.help,
        )(command)
    return command


def _load_config(ctx: click.Context, _param: click.Parameter, value: str | None) -> None:
    """Option values from a TOML or JSON file; flags and environment variables still win."""
    if not value:
        return
    try:
        config = WorkerConfig.load_file(value)
    except ConfigError as exc:
        raise click.BadParameter(str(exc)) from exc
    ctx.default_map = {option.name: getattr(config, option.name) for option in OPTIONS}


def _refuse_key_flag(_ctx: click.Context, _param: click.Parameter, value: str | None) -> None:
    """``--key`` is gone: a key on a command line is readable by every user (``ps``)."""
    if value is not None:
        raise click.UsageError(
            "--key is no longer accepted: a private key on the command line is visible to "
            "every user of the machine. Use --keystore FILE (`mcfl-chain account new`) or "
            "--account ALIAS, or, in CI only, put the key in the environment variable "
            "MCFL_PRIVATE_KEY."
        )


def _setup_logging(verbose: int) -> None:
    """-v: this worker's debug lines; -vv: also every JSON-RPC and HTTP request."""
    logging.basicConfig(
        level=logging.DEBUG if verbose >= 2 else logging.INFO,
        format="%(asctime)s %(levelname)s %(message)s",
        datefmt="%H:%M:%S",
        stream=sys.stderr,
    )
    logging.getLogger("mcfl_chain").setLevel(logging.DEBUG if verbose else logging.INFO)


@click.command("worker", context_settings={"auto_envvar_prefix": "MCFL"})
@click.option(
    "--config",
    type=click.Path(dir_okay=False),
    is_eager=True,
    expose_value=False,
    callback=_load_config,
    help="TOML or JSON file of option values (keys are option names, dash-case or "
    "snake_case; an unknown key is an error); flags and MCFL_* environment variables "
    "override it.",
)
@_worker_options
@click.option(
    "--key",
    hidden=True,
    expose_value=False,
    allow_from_autoenv=False,
    callback=_refuse_key_flag,
    help="Removed: use --keystore, --account or MCFL_PRIVATE_KEY.",
)
@click.option(
    "-v", "--verbose", count=True, help="-v: the worker's debug lines; -vv: also every RPC request."
)
def worker(verbose: int, **values: Any) -> None:
    """Run one sovereign MCFL trainer against a deployed network.

    The worker signs with --keystore FILE, --account ALIAS (ape) or --account-index N
    (Anvil's dev accounts), or with the key in MCFL_PRIVATE_KEY (CI only). It trains the
    scenario's share of a built-in dataset, its own data (--data FILE.npz|DIR), or a task
    of its own (--task module:attribute). It joins the network of --deployment (a file,
    or ipfs://CID fetched from --storage) once the chain holds that network and the
    network's model is its own, registers its account if needed, then plays rounds as
    the contracts dictate, two transactions each: score the candidate models on its
    validation split and train the best (paper Algorithm 1), then propose every update
    with its vote in one transaction; keep the peers' updates that diverge little from
    its own (Algorithm 2), FedAvg them, then submit every aggregation with its vote in
    one transaction. Past a phase deadline it ends the phase without the trainers that
    stayed silent. It follows contract events, persists its position in --state-dir,
    and after a crash or restart resumes without proposing or aggregating twice. Peers'
    data is untrusted: unreachable or malformed updates are excluded with a logged
    reason.
    """
    from mcfl_chain.cli.account import password_prompt
    from mcfl_chain.worker.errors import WorkerHalted
    from mcfl_chain.worker.launch import WorkerSetupError, build_worker

    try:
        config = WorkerConfig(**values)
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from exc
    _setup_logging(verbose)
    try:
        node = build_worker(config, prompt=password_prompt())
    except WorkerSetupError as exc:
        raise click.ClickException(str(exc)) from exc
    signal.signal(signal.SIGTERM, lambda *_: node.stop())
    # Everything loaded so far (torch, web3, the data) lives as long as the process:
    # frozen, it is left out of the collection the worker runs after each phase.
    gc.collect()
    gc.freeze()
    try:
        played = node.run()
    except KeyboardInterrupt:
        node.stop()
        played = node.rounds_done
    except WorkerHalted as exc:
        raise click.ClickException(str(exc)) from exc
    finally:
        node.blobs.close()
        node.storage.close()
    click.echo(f"played {played} round(s); state in {node.state.path.parent}", err=True)
