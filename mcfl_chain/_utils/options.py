"""An option declared once: its name, type, default, help and the values it accepts.

Strategies (:class:`~mcfl_chain.strategies.base.StrategyOption`), the network settings
of a deployment (:data:`~mcfl_chain.chain.deploy.NETWORK_SETTINGS`) and the worker's
options (:class:`~mcfl_chain.worker.config.Option`) are declared with it; the command
line, configuration files and the simulator are made from those declarations, and
:meth:`OptionSpec.convert` is the one check of a value they all apply.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from mcfl_chain._utils.config_files import ConfigError

KINDS: dict[type, str] = {
    int: "an integer",
    float: "a number",
    str: "a string",
    bool: "on or off",
}
"""How a message names a value of each plain kind."""


@dataclass(frozen=True)
class OptionSpec:
    """One option, as a person sets it.

    Attributes
    ----------
    name : str
        snake_case; its flag is ``--`` and the name in dash-case (:attr:`flag`).
    kind : type
        ``int``, ``float``, ``str`` or ``bool`` (subclasses add others).
    default : Any
        The value when nobody sets it.
    help : str
        One or two sentences for ``--help``, without the default (shown apart).
    choices : tuple[str, ...]
        The accepted values, if the option is one of a few names.
    minimum, maximum : float or None
        The accepted range, bounds included.
    unit : str
        Said after a number in a refusal (``"s"``: ``not 0 s``).
    why : str
        Said after a refusal of a number out of range: why the range is what it is.
    alias : str
        The flag's name when it is not the option's (``model`` for ``arch``).
    """

    name: str
    kind: type
    default: Any
    help: str
    choices: tuple[str, ...] = ()
    minimum: float | None = None
    maximum: float | None = None
    unit: str = ""
    why: str = ""
    alias: str = ""

    @property
    def flag(self) -> str:
        """``--`` and the name (or :attr:`alias`) in dash-case."""
        return "--" + (self.alias or self.name).replace("_", "-")

    def convert(self, value: Any) -> Any:
        """``value`` checked for this option: an integer converted for a number, ``on`` or
        ``off`` for a bool.

        Raises
        ------
        ConfigError
            Naming the option, what it accepts and the value it got.
        """
        if self.kind is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        elif self.kind is bool and value in ("on", "off"):
            value = value == "on"
        if not isinstance(value, self.kind) or (self.kind is not bool and isinstance(value, bool)):
            raise ConfigError(f"{self.name} must be {KINDS[self.kind]}, not {value!r}")
        if self.choices and value not in self.choices:
            raise ConfigError(
                f"{self.name} must be one of {', '.join(self.choices)}, not {value!r}"
            )
        if isinstance(value, int | float) and not isinstance(value, bool):
            self._check_range(value)
        return value

    def _check_range(self, value: float) -> None:
        low, high = self.minimum, self.maximum
        # NaN fails both comparisons: refused too.
        if (low is None or value >= low) and (high is None or value <= high):
            return
        unit = f" {self.unit}" if self.unit else ""
        if high is None:
            wanted = f"at least {_number(low)}{unit}"
        elif low is None:
            wanted = f"at most {_number(high)}{unit}"
        else:
            wanted = f"between {_number(low)} and {_number(high)}{unit}"
        why = f": {self.why}" if self.why else ""
        raise ConfigError(f"{self.name} must be {wanted}, not {value!r}{unit}{why}")

    def spelled(self) -> OptionSpec:
        """This option as files and command lines spell it: a bool as the choice of the
        texts ``on`` and ``off`` (which :meth:`convert` takes for True and False)."""
        if self.kind is not bool:
            return self
        return replace(self, kind=str, default=self.describe(self.default), choices=("on", "off"))

    def describe(self, value: Any) -> str:
        """``value`` as a person writes it after the flag (``on``/``off`` for a bool)."""
        if isinstance(value, bool):
            return "on" if value else "off"
        return str(value)


def _number(bound: float | None) -> str:
    """A bound as written in a message: ``2**32 - 1`` rather than 4294967295."""
    if bound == 2**32 - 1:
        return "2**32 - 1"
    return f"{bound:g}" if isinstance(bound, float) else str(bound)
