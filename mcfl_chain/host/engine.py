"""Many trainers in one process: each its own round state machine, all on shared services.

A host builds every trainer it is given exactly as ``mcfl-chain worker`` would
(:func:`~mcfl_chain.worker.launch.build_worker`: its account, its checks against the
network, its data share, its state directory) and runs each in a thread of its own.
What the trainers share instead of paying for it once each:

- one interpreter, one torch runtime, one copy of each dataset (its bytes, of which each
  trainer's share is a list of rows: :class:`~mcfl_chain.learning.scenario.SharedImages`);
- the chain's events and head (:mod:`mcfl_chain.host.chain`);
- one compute for every hosted trainer's training and scoring: on a GPU a phase's
  updates as one batched computation, on the CPU model by model, a core at a time
  (:mod:`mcfl_chain.host.compute`).

Each trainer still signs and sends its own two transactions a round, keeps its own
state and log, and writes its own metrics, so the run directory of a hosted network
reads like a network of processes, and so does the chain.
"""

from __future__ import annotations

import gc
import importlib
import json
import logging
import signal
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import IO, Any

import torch

from mcfl_chain._utils.memory import SharedCollector, limit_malloc_arenas, resident_mb
from mcfl_chain.chain.client import ChainClient, connect
from mcfl_chain.compute.device import prepare_device, resolve_device
from mcfl_chain.compute.stand_in import StandInCompute
from mcfl_chain.dag.weights import SharedLRU
from mcfl_chain.host.chain import HostedChainClient, SharedReads, SharedRecords
from mcfl_chain.host.compute import BatchingCompute
from mcfl_chain.learning.datasets import release_datasets
from mcfl_chain.worker.config import WorkerConfig
from mcfl_chain.worker.errors import WorkerHalted
from mcfl_chain.worker.launch import WorkerSetupError, build_worker
from mcfl_chain.worker.rounds import Worker

log = logging.getLogger("mcfl_chain.host")

_current = threading.local()
"""The hosted trainer whose work this thread is doing (its log file)."""


@dataclass(frozen=True)
class HostedTrainer:
    """One trainer of a host: its index in the run, its options and its log file."""

    index: int
    config: WorkerConfig
    log: Path

    def to_json(self) -> dict[str, Any]:
        options = {
            name: str(value) if isinstance(value, Path) else value
            for name, value in (
                (f.name, getattr(self.config, f.name)) for f in fields(WorkerConfig)
            )
        }
        return {"index": self.index, "log": str(self.log), "options": options}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> HostedTrainer:
        config = WorkerConfig.from_mapping(data["options"], source=f"trainer {data['index']}")
        return cls(int(data["index"]), config, Path(data["log"]))


class _PerTrainerLog(logging.Handler):
    """Sends each record to the log file of the trainer the thread works for (the
    host's own lines, and any outside a trainer's work, to the host's stream)."""

    def __init__(self, fallback: IO[str]) -> None:
        super().__init__()
        self.fallback = fallback
        self.streams: dict[int, IO[str]] = {}
        self.setFormatter(
            logging.Formatter("%(asctime)s %(levelname)s %(message)s", datefmt="%H:%M:%S")
        )

    def emit(self, record: logging.LogRecord) -> None:
        stream = self.streams.get(getattr(_current, "index", -1), self.fallback)
        try:
            stream.write(self.format(record) + "\n")
            stream.flush()
        except Exception:
            self.handleError(record)


class Host:
    """The trainers of one host and the services they share.

    Parameters
    ----------
    trainers
        Who to run, in the order their workers are built.
    device
        ``auto``, ``cpu`` or ``cuda``: where every hosted trainer trains and scores.
    threads
        CPU cores the host uses: on the CPU, this many trainers train or score at a
        time (a vmap batch: in this many parts side by side), one core each.
    engine
        The simulator's engine that runs the host, as its trainers' metrics name it.
    """

    def __init__(
        self,
        trainers: Sequence[HostedTrainer],
        device: str = "cpu",
        threads: int = 1,
        engine: str = "batched",
    ) -> None:
        if not trainers:
            raise ValueError("a host needs at least one trainer")
        self.trainers = list(trainers)
        self.device = resolve_device(device)
        prepare_device(self.device)
        self.threads = threads
        self.engine = engine
        self.workers: dict[int, Worker] = {}
        self.failures: dict[int, str] = {}
        self.played: dict[int, int] = {}
        self._alive = 0
        self._lock = threading.Lock()
        self.compute = BatchingCompute(self.device, expected=lambda: self._alive, parallel=threads)
        self._handler = _PerTrainerLog(sys.stderr)
        self._shared: SharedReads | None = None
        # Every trainer reads the round's updates and scores the last round's models:
        # room for a few rounds of them, decoded or rebuilt once for the whole host.
        # 200 FedAvg trainers each flattening 200 updates at once took 23 GB: a few at
        # a time plan their aggregations.
        self._heavy = threading.BoundedSemaphore(max(1, threads))
        self._collect = SharedCollector(interval=1.0)
        self._records = SharedRecords()
        self._updates = SharedLRU(max(256, 4 * len(self.trainers)))
        self._models = SharedLRU(max(32, 3 * len(self.trainers)))

    def _trainer_log(self, trainer: HostedTrainer) -> None:
        trainer.log.parent.mkdir(parents=True, exist_ok=True)
        self._handler.streams[trainer.index] = trainer.log.open("a", encoding="utf-8")

    def build(self) -> None:
        """Build every trainer's worker, one after the other (a setup error names the
        trainer and stops the host before anything runs)."""
        root = logging.getLogger()
        root.addHandler(self._handler)
        root.setLevel(logging.INFO)
        logging.getLogger("mcfl_chain").setLevel(logging.INFO)
        # The first optimiser a process builds imports torch._dynamo (~1.7 s of CPU):
        # here, rather than inside round 0's training. (Not preloaded by the forkserver:
        # its own copy of torch would count in the run's resident memory.)
        importlib.import_module("torch._dynamo")
        shared: SharedReads | None = None
        checked: set[tuple[str, str | None]] = set()
        """(deployment file, RPC URL) of the networks found on their chain so far."""
        try:
            for trainer in self.trainers:
                network = (str(trainer.config.deployment), trainer.config.rpc)
                self._trainer_log(trainer)
                _current.index = trainer.index
                compute = (
                    StandInCompute(self.device)
                    if trainer.config.training == "stand-in"
                    else self.compute
                )
                try:
                    worker = build_worker(
                        trainer.config,
                        compute=compute,
                        keep_datasets=True,
                        network_checked=network in checked,
                    )
                except WorkerSetupError as exc:
                    raise WorkerSetupError(f"trainer {trainer.index}: {exc}") from exc
                finally:
                    _current.index = -1
                checked.add(network)
                if shared is None:
                    # As patient with the node as the trainers' own connections: a node
                    # restarting must not stop the host's reads.
                    rpc = trainer.config.rpc or worker.chain.deployment.rpc_url
                    reader = connect(rpc, give_up_after=trainer.config.give_up_after)
                    shared = SharedReads(ChainClient(worker.chain.deployment, w3=reader))
                self._shared = shared
                worker.chain = HostedChainClient.adopt(worker.chain, shared)
                worker.reporter.labels.update(engine=self.engine, device=self.device.type)
                worker.book.share_caches(self._updates, self._models)
                worker.heavy_work = self._heavy
                worker.collect_garbage = self._collect
                worker.event_records = self._records
                self.workers[trainer.index] = worker
        finally:
            release_datasets()
        # On the CPU, parallelism is across models (the batch's parts, the trainers'
        # scoring), one core each: a LeNet op is too small to split between cores.
        torch.set_num_threads(1 if self.device.type == "cpu" else self.threads)
        self._log_memory(f"{len(self.workers)} trainer(s) built")

    def run(self) -> int:
        """Play every trainer's rounds; returns 0 when all of them ended well, else 1
        (each failure is one line in its trainer's log and in the host's)."""
        gc.collect()
        gc.freeze()  # start-up objects live as long as the host: out of every collection
        self._alive = len(self.workers)
        threads = [
            threading.Thread(target=self._play, args=(index,), name=f"trainer-{index}")
            for index in self.workers
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            while thread.is_alive():
                thread.join(0.5)
        if self._shared is not None:
            self._shared.close()
        sizes = self.compute.batches
        log.info(
            "training (%s kernel): %d batched computation(s) of %s model(s) on %s; %d "
            "trainer(s) hosted, chain logs read %d time(s), their statuses refreshed %d "
            "time(s), all of them read in %d batch(es) (the phase had moved)",
            self.compute.kernel,
            len(sizes),
            f"{min(sizes)}-{max(sizes)}" if sizes else "0",
            self.device,
            len(self.workers),
            self._shared.fetches if self._shared is not None else 0,
            self._shared.status_batches if self._shared is not None else 0,
            self._shared.full_reads if self._shared is not None else 0,
        )
        self._log_memory("trainers done")
        for index, reason in sorted(self.failures.items()):
            print(f"trainer {index}: {reason}", file=sys.stderr)
        return 1 if self.failures else 0

    @staticmethod
    def _log_memory(when: str) -> None:
        """The host's resident memory, now and at its peak (what a trainer costs)."""
        memory = resident_mb()
        if memory is not None:
            log.info("%s: resident memory %.0f MB, peak %.0f MB", when, *memory)

    def stop(self) -> None:
        for worker in self.workers.values():
            worker.stop()
        if self._shared is not None:
            self._shared.close()  # wakes the waiting trainers

    def _play(self, index: int) -> None:
        _current.index = index
        worker = self.workers[index]
        started = time.monotonic()
        try:
            self.played[index] = worker.run()
            log.info(
                "played %d round(s) in %.0f s; state in %s",
                self.played[index],
                time.monotonic() - started,
                worker.state.path.parent,
            )
        except WorkerHalted as exc:
            self.failures[index] = str(exc)
            log.error("%s", exc)
        except BaseException as exc:  # one trainer's bug must not hang the others
            self.failures[index] = f"{type(exc).__name__}: {exc}"
            log.exception("the trainer stopped on an unexpected error")
            self.stop()
        finally:
            with self._lock:
                self._alive -= 1
            worker.blobs.close()
            worker.storage.close()


def write_plan(path: Path, trainers: Sequence[HostedTrainer]) -> None:
    """The file a host process reads its trainers from."""
    path.write_text(json.dumps([t.to_json() for t in trainers], indent=1))


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m mcfl_chain.host PLAN.json [--device D] [--threads N]``."""
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m mcfl_chain.host",
        description="Run the trainers of a plan file (written by the simulator's batched "
        "engine) in this one process, sharing chain reads and batched compute.",
    )
    parser.add_argument("plan", type=Path, help="JSON list of {index, log, args}")
    parser.add_argument("--device", default="cpu", choices=("auto", "cpu", "cuda"))
    parser.add_argument("--threads", type=int, default=1, help="CPU cores to use")
    args = parser.parse_args(argv)
    trainers = [HostedTrainer.from_json(t) for t in json.loads(args.plan.read_text())]
    # Before the trainers' threads exist: they would each get an arena of their own.
    limit_malloc_arenas(2 * max(1, args.threads))
    try:
        host = Host(trainers, device=args.device, threads=args.threads)
        host.build()
    except (WorkerSetupError, ValueError) as exc:
        print(f"host: {exc}", file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, lambda *_: host.stop())
    return host.run()
