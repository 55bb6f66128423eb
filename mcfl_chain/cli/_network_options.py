"""Options that set a network's parameters, made from their declarations
(:data:`~mcfl_chain.chain.deploy.NETWORK_SETTINGS`): `devnet up`, `deploy`,
``scripts/deploy.py`` and, for those a scenario sets, `simulate` and `demo`; and the
deployment's initial weights (``--seed``) and file (``--out``)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Collection
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar, cast

import click

from mcfl_chain.chain.deploy import NETWORK_SETTINGS, SETTINGS
from mcfl_chain.cli._options import declared_option

F = TypeVar("F", bound=Callable[..., Any])

OUT = click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=Path("deployment.json"),
    show_default=True,
    help="Where to write the deployment file workers read.",
)
SEED = click.option(
    "--seed",
    type=int,
    default=0,
    show_default=True,
    help="Initialisation seed of the initial weights (without --genesis-cid).",
)


def network_settings(unset: Collection[str] = ()) -> Callable[[F], F]:
    """Every network setting as an option (``--min-trainers`` ... ``--max-samples``),
    handed to the command together as its parameter ``settings`` (name → value, as
    :func:`~mcfl_chain.chain.deploy.deploy_network` takes them); those named in
    ``unset`` are None unless given, for the command to decide (the help still says the
    declared default)."""

    def decorate(command: F) -> F:
        @functools.wraps(command)
        def gathered(*args: Any, **values: Any) -> Any:
            settings = {spec.name: values.pop(spec.name) for spec in NETWORK_SETTINGS}
            return command(*args, settings=settings, **values)

        for spec in reversed(NETWORK_SETTINGS):
            gathered = declared_option(spec, unset=spec.name in unset)(gathered)
        return cast(F, gathered)

    return decorate


def setting(name: str, *, default: Any = None, unset: bool = False) -> Callable[[F], F]:
    """One network setting as an option; ``default`` replaces the declared one (a
    simulation's own); ``unset`` as in :func:`~mcfl_chain.cli._options.declared_option`."""
    spec = SETTINGS[name] if default is None else replace(SETTINGS[name], default=default)
    return declared_option(spec, unset=unset)
