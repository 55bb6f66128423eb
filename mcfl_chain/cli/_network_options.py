"""Options that set a network's parameters, made from their declarations
(:data:`~mcfl_chain.chain.deploy.NETWORK_SETTINGS`): `devnet up`, `deploy`,
``scripts/deploy.py`` and, for those a scenario sets, `simulate` and `demo`."""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import replace
from typing import Any, TypeVar

import click

from mcfl_chain.chain.deploy import NETWORK_SETTINGS, SETTINGS
from mcfl_chain.cli._options import declared_option

F = TypeVar("F", bound=Callable[..., Any])

SEED = click.option(
    "--seed",
    type=int,
    default=0,
    show_default=True,
    help="Initialisation seed of the initial weights (without --genesis-cid).",
)


def network_settings(unset: Collection[str] = ()) -> Callable[[F], F]:
    """Every network setting as an option (``--min-trainers`` ... ``--max-samples``);
    those named in ``unset`` default to None, for the command to decide (the help still
    says the declared default)."""

    def decorate(command: F) -> F:
        for spec in reversed(NETWORK_SETTINGS):
            command = declared_option(spec, unset=spec.name in unset)(command)
        return command

    return decorate


def setting(name: str, *, default: Any = None, unset: bool = False) -> Callable[[F], F]:
    """One network setting as an option; ``default`` replaces the declared one (a
    simulation's own); ``unset`` as in :func:`~mcfl_chain.cli._options.declared_option`."""
    spec = SETTINGS[name] if default is None else replace(SETTINGS[name], default=default)
    return declared_option(spec, unset=unset)
