"""Click options made from declared options (:class:`~mcfl_chain._utils.options.OptionSpec`):
the strategies' options of `simulate`, the network settings of `deploy`, `devnet up`
and `scripts/deploy.py`. Flag, type, range, choices, help and default come from the
declaration; a command only says whether the default is shown or left to a file."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import click

from mcfl_chain._utils.config_files import ConfigError
from mcfl_chain._utils.options import KINDS, OptionSpec

F = TypeVar("F", bound=Callable[..., Any])


class Declared(click.ParamType):
    """A value the declaration checks, refused with the declaration's own message
    (``phase_duration must be at least 1 s, not 0 s: deadlines are mandatory ...``);
    with ``mixed``, the text ``mixed`` too."""

    def __init__(self, spec: OptionSpec, mixed: bool = False) -> None:
        self.spec = spec
        self.mixed = mixed
        self.name = {int: "integer", float: "float"}.get(spec.kind, "text")

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if self.mixed and value == "mixed":
            return value
        if isinstance(value, str) and self.spec.kind in (int, float):
            try:
                value = self.spec.kind(value)
            except ValueError:
                either = " nor 'mixed'" if self.mixed else ""
                self.fail(f"{value!r} is not {KINDS[self.spec.kind]}{either}", param, ctx)
        try:
            return self.spec.convert(value)
        except ConfigError as exc:
            self.fail(str(exc), param, ctx)


def click_type(spec: OptionSpec, mixed: bool = False) -> click.ParamType:
    """The click type that checks a value as ``spec`` does (click's own range and
    choice types where they say the same, for their help)."""
    if spec.choices:
        return click.Choice(spec.choices)
    if mixed or spec.why:
        return Declared(spec, mixed)
    if spec.minimum is not None or spec.maximum is not None:
        bounded = click.IntRange if spec.kind is int else click.FloatRange
        return bounded(min=spec.minimum, max=spec.maximum)
    return click.types.convert_type(spec.kind)


def declared_option(
    spec: OptionSpec, *, unset: bool = False, mixed: Sequence[Any] = ()
) -> Callable[[F], F]:
    """``spec`` as a click option whose parameter is ``spec.name``.

    Parameters
    ----------
    unset : bool
        The option defaults to None, for a scenario file or the command to decide;
        the help says the declared default.
    mixed : Sequence
        Values the option may take in turn when given ``mixed``, said in the help.
    """
    text = spec.help
    if mixed:
        values = ", ".join(spec.describe(value) for value in mixed)
        text += f" Or 'mixed': the trainers take {values} in turn."
    if unset:
        text += f"  [default: {spec.describe(spec.default)}]"
    return click.option(
        spec.flag,
        spec.name,
        type=click_type(spec, bool(mixed)),
        default=None if unset else spec.default,
        show_default=not unset,
        help=text,
    )
