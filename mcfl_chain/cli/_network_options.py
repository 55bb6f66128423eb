"""Options that set a network's parameters, shared by `devnet up`, `deploy` and `simulate`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from mcfl_chain.chain.deployment import DEFAULT_MAX_SAMPLES

F = TypeVar("F", bound=Callable[..., Any])

SEED = click.option(
    "--seed",
    type=int,
    default=0,
    show_default=True,
    help="Initialisation seed of the initial weights (without --genesis-cid).",
)
MIN_TRAINERS = click.option(
    "--min-trainers",
    type=click.IntRange(min=1),
    default=2,
    show_default=True,
    help="Registered trainers needed before round 0 opens.",
)


def deposit_option(
    default: int | None = 0,
    help: str = "Wei a registration takes (deposit only, then required above 0).",
) -> Callable[[F], F]:
    """``--deposit`` in wei; ``default`` None leaves the value to a scenario file."""
    return click.option(
        "--deposit",
        type=click.IntRange(min=0),
        default=default,
        show_default=default is not None,
        help=help,
    )


DEPOSIT = deposit_option()


def cohort_option(default: float | None = 1.0) -> Callable[[F], F]:
    """``--cohort``, a share of the trainers; ``default`` None leaves it to a scenario file."""
    return click.option(
        "--cohort",
        type=click.FloatRange(min=0.01, max=1.0),
        default=default,
        show_default=default is not None,
        help="Share of the trainers drawn for each round (like Flower's fraction_fit): only "
        "they train, propose and aggregate in it, and no phase waits for the others; for "
        "networks larger than an aggregation (docs/PROTOCOL.md §4, Cohorts)."
        + ("" if default is not None else "  [default: 1, every trainer in every round]"),
    )


COHORT = cohort_option()
COOLDOWN = click.option(
    "--cooldown",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="Seconds between a trainer's exit and its deposit refund (deposit only).",
)


def max_samples_option(default: int | None = DEFAULT_MAX_SAMPLES) -> Callable[[F], F]:
    """``--max-samples``; ``default`` None leaves the value to a scenario file."""
    return click.option(
        "--max-samples",
        type=click.IntRange(min=1),
        default=default,
        show_default=default is not None,
        help="Largest sample count one update may declare (caps a trainer's FedAvg weight)."
        + ("" if default is not None else f"  [default: {DEFAULT_MAX_SAMPLES:,}]"),
    )


MAX_SAMPLES = max_samples_option()
