"""Trainers in host processes (:mod:`mcfl_chain.host`): shared chain reads and data, and
one compute for all of a host's training and scoring, on the CPU or a GPU.

On a GPU, by default one host per 4 cores, each a share of the trainers and of the cores,
training its share's phase as one batched (vmap) computation on the shared device: one
host for all trainers keeps the batches largest, but its per-trainer Python runs on one
core (``hosts`` sets the count). On the CPU, one host per core, each running its
share of the trainers on one core, their models one by one (the faster kernels there:
:mod:`mcfl_chain.host.compute`): a host's trainers are Python threads under one
interpreter lock, and a host's per-trainer work between kernels (scoring, encoding,
chain reads) held a second core's work back when both ran in one process.

Each trainer still has its own account, state directory, log and metrics file in the
run directory, exactly where the process engine puts them.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from mcfl_chain._utils.forked import ChildProcess, start_module
from mcfl_chain.compute.device import resolve_device
from mcfl_chain.host.engine import HostedTrainer, write_plan

if TYPE_CHECKING:
    from mcfl_chain.simulation.runner import Network


def host_shares(count: int, hosts: int) -> list[range]:
    """Positions ``0..count-1`` cut into ``hosts`` near-equal contiguous shares (fewer
    when there are fewer trainers than hosts)."""
    hosts = max(1, min(hosts, count))
    bounds = [count * k // hosts for k in range(hosts + 1)]
    return [range(bounds[k], bounds[k + 1]) for k in range(hosts)]


GPU_CORES_PER_HOST = 4
"""On a GPU, a host per this many cores by default: on one H200 with 16 cores a 38-trainer
MCFL round took 10.2 s with one host, 5.8 s with 4 and 6.6 s with 8
(docs/discussion/performance.md, "Engines on a GPU")."""


def default_hosts(cores: int, on_cpu: bool) -> int:
    """Host processes when ``hosts`` is not given: one per core on the CPU (each trains its
    trainers' models one by one), one per :data:`GPU_CORES_PER_HOST` cores on a GPU (one
    host's per-trainer Python, under one interpreter lock, held the GPU's rounds back)."""
    return cores if on_cpu else max(1, cores // GPU_CORES_PER_HOST)


def hosted_trainers(network: Network) -> list[HostedTrainer]:
    """Every trainer of ``network`` as a host runs it (its folder made): its worker's
    options, the device and threads left to the host."""
    trainers = []
    for index in network.trainers:
        folder = network.trainer_dir(index)
        folder.mkdir(parents=True, exist_ok=True)
        # The host decides the device and threads for all of its trainers.
        config = replace(network.worker_config(index), device="cpu", threads=1)
        trainers.append(HostedTrainer(index, config, folder / "worker.log"))
    return trainers


class BatchedEngine:
    name: ClassVar[str] = "batched"

    def start(self, network: Network, extra_args: dict[int, list[str]]) -> list[ChildProcess]:
        if any(extra_args.values()):
            raise ValueError(
                "the batched engine takes no per-trainer worker options; use the process engine"
            )
        trainers = hosted_trainers(network)
        cfg = network.config
        cores = cfg.threads or os.cpu_count() or 1
        on_cpu = resolve_device(cfg.device).type == "cpu"
        shares = host_shares(len(trainers), cfg.hosts or default_hosts(cores, on_cpu))
        # On the CPU one core a host; on a GPU the cores split between the hosts.
        per_host = 1 if on_cpu else max(1, cores // len(shares))
        procs = []
        for k, share in enumerate(shares):
            plan = network.run_dir / f"host-{k}.json"
            write_plan(plan, [trainers[i] for i in share])
            procs.append(
                start_module(
                    "mcfl_chain.host",
                    [
                        str(plan),
                        "--device",
                        cfg.device,
                        "--threads",
                        str(per_host),
                    ],
                    log=network.run_dir / f"host-{k}.log",
                    env={**os.environ, "PYTHONWARNINGS": "ignore"},
                )
            )
        return procs

    def log_of(self, network: Network, position: int) -> tuple[int | None, Path]:
        return None, network.run_dir / f"host-{position}.log"

    def stop(self, network: Network) -> None:
        """Nothing: the host processes are the runner's to stop."""
