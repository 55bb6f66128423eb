"""One ``mcfl-chain worker`` process per trainer: a network of processes on one machine,
each as a trainer on another machine would run it."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from mcfl_chain._utils.forked import ChildProcess

if TYPE_CHECKING:
    from mcfl_chain.simulation.runner import Network


class ProcessEngine:
    name: ClassVar[str] = "process"

    def start(self, network: Network, extra_args: dict[int, list[str]]) -> list[ChildProcess]:
        return [network.spawn(index, extra_args.get(index, [])) for index in network.trainers]

    def log_of(self, network: Network, position: int) -> tuple[int | None, Path]:
        trainers = network.trainers
        index = trainers[position] if position < len(trainers) else position
        return index, network.trainer_dir(index) / "worker.log"

    def stop(self, network: Network) -> None:
        """Nothing: the worker processes are the runner's to stop."""
