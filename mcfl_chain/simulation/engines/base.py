"""What an engine does for the runner: start the trainers, say where each one logs, release
what it holds."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, Protocol

from mcfl_chain._utils.forked import ChildProcess

if TYPE_CHECKING:
    from mcfl_chain.simulation.runner import Network


class Engine(Protocol):
    """Runs the trainers of one simulated network."""

    name: ClassVar[str]

    def start(self, network: Network, extra_args: dict[int, list[str]]) -> list[ChildProcess]:
        """Start every trainer of ``network`` (``network.trainers``, in order); the
        processes returned end with code 0 once every trainer played its rounds.
        ``extra_args`` adds worker options to some trainers, by trainer index."""
        ...

    def log_of(self, network: Network, position: int) -> tuple[int | None, Path]:
        """The trainer index (None: several) and the log of ``start``'s process at
        ``position``, for the message of a failed run."""
        ...

    def stop(self, network: Network) -> None:
        """Release what ``start`` holds besides its processes (the ray engine's cluster),
        once the runner stopped them or they ended."""
        ...
