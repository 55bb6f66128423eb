"""Every trainer in one host process (:mod:`mcfl_chain.host`): shared chain reads and
one batched computation per phase for all their training, on the CPU or a GPU.

Each trainer still has its own account, state directory, log and metrics file in the
run directory, exactly where the process engine puts them.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from mcfl_chain._utils.forked import ChildProcess, start_module
from mcfl_chain.host.engine import HostedTrainer, write_plan

if TYPE_CHECKING:
    from mcfl_chain.simulation.runner import Network


class BatchedEngine:
    name: ClassVar[str] = "batched"

    def start(self, network: Network, extra_args: dict[int, list[str]]) -> list[ChildProcess]:
        if any(extra_args.values()):
            raise ValueError(
                "the batched engine takes no per-trainer worker options; use the process engine"
            )
        trainers = []
        for index in network.trainers:
            folder = network.trainer_dir(index)
            folder.mkdir(parents=True, exist_ok=True)
            # The host decides the device and threads for all of its trainers.
            config = replace(network.worker_config(index), device="cpu", threads=1)
            trainers.append(HostedTrainer(index, config, folder / "worker.log"))
        plan = network.run_dir / "host.json"
        write_plan(plan, trainers)
        cfg = network.config
        return [
            start_module(
                "mcfl_chain.host",
                [
                    str(plan),
                    "--device",
                    cfg.device,
                    "--threads",
                    str(cfg.threads or os.cpu_count() or 1),
                ],
                log=network.run_dir / "host.log",
                env={**os.environ, "PYTHONWARNINGS": "ignore"},
            )
        ]

    def log_of(self, network: Network, position: int) -> tuple[int | None, Path]:
        return None, network.run_dir / "host.log"
