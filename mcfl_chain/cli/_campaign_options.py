"""Options the campaign scripts share (``scripts/run_experiments.py``,
``scripts/bench_adversaries.py``, ``scripts/rerun_defence.py``): kept apart from the
commands' options, since they bring in the experiment framework."""

from __future__ import annotations

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
