"""Options the campaign scripts share (``scripts/run_experiments.py``,
``scripts/bench_adversaries.py``, ``scripts/rerun_defence.py``,
``scripts/rerun_clean.py``): kept apart from the
commands' options, since they bring in the experiment framework."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import click

from mcfl_chain.simulation.experiment import parse_until


class WallClock(click.ParamType):
    """A local wall-clock time (:func:`~mcfl_chain.simulation.experiment.parse_until`),
    as seconds since the epoch."""

    name = "time"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if value is None or isinstance(value, float):
            return value
        try:
            return parse_until(str(value)).timestamp()
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


UNTIL = click.option(
    "--until",
    type=WallClock(),
    default=None,
    metavar="TIME",
    help="Start no run that would end after TIME (local; HH:MM is its next occurrence, or "
    "YYYY-MM-DD HH:MM), by the durations of the runs of its kind finished so far: the "
    "campaign stops between runs and the same command resumes it. A run with no such "
    "estimate yet is started.  [default: no limit]",
)
"""``--until``: the campaign scripts' time budget (``until``, seconds since the epoch, or
None), for :func:`~mcfl_chain.simulation.experiment.execute`."""

SCENARIOS = click.option(
    "--scenarios",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    default=Path("scenarios/paper"),
    show_default=True,
    help="Scenario files.",
)
"""``--scenarios``: the folder of scenario files a rerun script plans from."""

REPORT_ONLY = click.option("--report-only", is_flag=True, help="Print the comparison; run nothing.")
"""``--report-only``: a rerun script prints its comparison from the records it has."""


def parse_option(text: str) -> tuple[str, object]:
    """``NAME=VALUE`` → (name, value), the name as the declaration writes it and the value
    as its TOML would give it (``plus_keep_margin=0.1`` a number); a bare word such as
    ``on``, which TOML does not read, stays a string."""
    name, sep, value = text.partition("=")
    if not sep or not name.strip() or not value.strip():
        raise click.BadParameter(f"{text!r}: write NAME=VALUE, e.g. plus_chance=on")
    try:
        parsed: object = tomllib.loads(f"value = {value.strip()}")["value"]
    except tomllib.TOMLDecodeError:
        parsed = value.strip()
    return name.strip().replace("-", "_"), parsed
