"""One compute for every trainer a host runs: their training requests, gathered into one
batched computation.

The trainers of a host run as threads, each through its own round state machine; in a
PROPOSE phase they all ask to train at about the same moment. :class:`BatchingCompute`
holds each request until every hosted trainer that is still playing has asked, or until
no new request came for ``linger`` seconds, then trains all of them at once with
:func:`~mcfl_chain.compute.batched.train_batched` (one ``vmap`` over stacked parameters
instead of a Python loop per trainer) and hands each thread its own result. A request
that cannot be batched (a loss penalty other than a quadratic one, a task that trains
with its own code) runs alone, as :class:`~mcfl_chain.compute.local.LocalCompute` would.
Quadratic penalties (FedProx's, Ditto's, FedFMC's EWC:
:mod:`mcfl_chain.algorithms.proximal`) and every optimiser preset are batched.

What a trainer gets is what training alone gives, to float rounding: the batch order,
the loss and the optimiser are the same (:mod:`mcfl_chain.compute.batched`). Scoring runs per
request on the host's device, without a rendezvous: a trainer's candidates of a round as
one vmapped forward pass (:func:`~mcfl_chain.compute.batched.evaluate_batched`), a lone
model (the reported test figure) as :class:`~mcfl_chain.compute.local.LocalCompute` does.

That is the ``vmap`` kernel, the default on a GPU. On the CPU the default is ``loop``:
each trainer trains and scores its own models one by one, as a lone worker does, at most
``parallel`` trainers at a time (one core each), with no rendezvous at all. Per core, the
plain per-model kernels are the faster ones for LeNet-sized models: on a 2-core machine
(2026-11-28, torch 2.13, one intra-op thread) LeNet-5 training at batch 32 ran 9,300
samples/s looped against 5,900 vmapped over 32 models, and scoring 225 images 23,000
against 9,000; a vmapped convolution becomes a grouped one, whose CPU kernels are slow.
The loop gives each trainer exactly the bits a lone worker gets.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Literal, cast

import torch

from mcfl_chain._utils.memory import release_freed_memory
from mcfl_chain.compute.batched import (
    Quadratic,
    TrainJob,
    can_batch,
    evaluate_batched,
    train_batched,
)
from mcfl_chain.compute.local import LocalCompute, Penalty, StateDict
from mcfl_chain.learning.models import ModelKind
from mcfl_chain.learning.scenario import TrainerData
from mcfl_chain.learning.training import Evaluation

Kernel = Literal["vmap", "loop"]
KERNELS: tuple[Kernel, ...] = ("vmap", "loop")


def default_kernel(device: torch.device | str) -> Kernel:
    """``vmap`` on a GPU, ``loop`` on the CPU (see the module docstring for why)."""
    return "loop" if torch.device(device).type == "cpu" else "vmap"


@dataclass(eq=False)  # compared by identity: a request is one thread's
class _Request:
    arch: str
    jobs: list[TrainJob]
    done: threading.Event = field(default_factory=threading.Event)
    results: list[StateDict] | None = None
    error: BaseException | None = None


class BatchingCompute:
    """A :class:`~mcfl_chain.compute.local.Compute` shared by the trainers of one host.

    Parameters
    ----------
    device
        Where everything runs.
    expected
        How many requests to wait for at most: the hosted trainers still playing (each
        sends one request a phase, with all its updates).
    linger
        Seconds without a new request after which the requests in hand are trained
        without waiting for the others (a trainer with nothing to train this phase, or
        one still scoring candidates, does not hold the rest back longer than this).
    max_models
        Most models in one batched computation (memory bound). None: 256 on a GPU, 32
        on the CPU, where a larger batch runs no faster (the cores are already busy) but
        its activations grow with it: 136 LeNet-5 models took a host past 5 GB.
    parallel
        On the CPU, how many parts of a batch run side by side (one per core, with
        torch's intra-op threads set to 1 by the host); with the ``loop`` kernel, how
        many trainers train or score at a time.
    kernel
        ``vmap`` (one batched computation a phase) or ``loop`` (each trainer's models
        one by one, no rendezvous). None: :func:`default_kernel` of the device.
    """

    def __init__(
        self,
        device: torch.device | str,
        expected: Callable[[], int],
        *,
        linger: float = 0.3,
        max_models: int | None = None,
        parallel: int = 1,
        kernel: Kernel | None = None,
    ) -> None:
        self.device = torch.device(device)
        if kernel is not None and kernel not in KERNELS:
            raise ValueError(f"kernel must be one of {', '.join(KERNELS)}, got {kernel!r}")
        self.kernel: Kernel = kernel or default_kernel(self.device)
        if max_models is None:
            max_models = 32 if self.device.type == "cpu" else 256
        self._expected = expected
        self._linger = linger
        self._max_models = max_models
        self._parallel = parallel
        self._local = LocalCompute(self.device)
        # Scoring (and, with the loop kernel, training) runs in the trainers' own
        # threads: one per core at a time, since more only queue for the same cores while
        # each holds its activations in memory.
        self._slots = threading.BoundedSemaphore(max(1, parallel))
        self._pending: list[_Request] = []
        self._last_arrival = 0.0
        self._cond = threading.Condition()
        self.batches: list[int] = []
        """Models in every batched computation run so far (for the host's report)."""

    def train_many(
        self,
        arch: str,
        starts: list[StateDict],
        data: TrainerData,
        *,
        epochs: int,
        batch_size: int,
        lr: float,
        momentum: float,
        seed: int,
        penalties: list[Penalty | None],
        optimiser: str = "sgd",
        sampling: str = "shuffle",
    ) -> list[StateDict]:
        settings: dict[str, Any] = dict(
            epochs=epochs,
            batch_size=batch_size,
            lr=lr,
            momentum=momentum,
            seed=seed,
            optimiser=optimiser,
            sampling=sampling,
        )
        if self.kernel == "loop":
            with self._slots:
                return self._local.train_many(arch, starts, data, penalties=penalties, **settings)
        results: list[StateDict | None] = [None] * len(starts)
        batched: list[int] = []
        for i, (start, penalty) in enumerate(zip(starts, penalties, strict=True)):
            if not (penalty is None or isinstance(penalty, Quadratic)) or not can_batch(arch):
                # Another penalty closes over one model; a task's own training is its own code.
                results[i] = self._local.train(arch, start, data, penalty=penalty, **settings)
            else:
                batched.append(i)
        if batched:
            jobs = [
                TrainJob(
                    start=starts[i],
                    data=data,
                    penalty=cast(Quadratic | None, penalties[i]),  # checked above
                    **settings,
                )
                for i in batched
            ]
            for i, weights in zip(batched, self._wait_for(_Request(arch, jobs)), strict=True):
                results[i] = weights
        return [r for r in results if r is not None]

    def _wait_for(self, request: _Request) -> list[StateDict]:
        with self._cond:
            self._pending.append(request)
            self._last_arrival = time.monotonic()
            self._cond.notify_all()
        while not request.done.is_set():
            batch = self._claim(request)
            if batch:
                self._run(batch)
        if request.error is not None:
            raise request.error
        assert request.results is not None
        return request.results

    def _claim(self, request: _Request) -> list[_Request]:
        """The requests this thread must train now, or [] once another thread took
        ``request`` (or after a short wait)."""
        with self._cond:
            if request.done.is_set() or not any(r is request for r in self._pending):
                self._cond.wait(0.05)
                return []
            full = len(self._pending) >= max(1, self._expected())
            quiet = time.monotonic() - self._last_arrival >= self._linger
            if not (full or quiet):
                self._cond.wait(min(self._linger, 0.05))
                return []
            batch, self._pending = self._pending, []
            return batch

    def _run(self, batch: list[_Request]) -> None:
        by_arch: dict[str, list[_Request]] = {}
        for request in batch:
            by_arch.setdefault(request.arch, []).append(request)
        for arch, requests in by_arch.items():
            jobs = [job for r in requests for job in r.jobs]
            try:
                results = [weights for weights, _report in self._train(arch, jobs)]
                for request in requests:
                    request.results, results = (
                        results[: len(request.jobs)],
                        results[len(request.jobs) :],
                    )
            except BaseException as exc:  # every waiting trainer must hear of it
                for request in requests:
                    request.error = exc
            finally:
                self.batches.append(len(jobs))
                release_freed_memory()
                for request in requests:
                    request.done.set()
        with self._cond:
            self._cond.notify_all()

    def _train(self, arch: str, jobs: list[TrainJob]) -> list[tuple[StateDict, Any]]:
        """``train_batched`` of ``jobs``; on the CPU, in ``parallel`` near-equal parts run
        side by side, one core each (a vmapped LeNet step gains nothing from a second
        intra-op thread, and two parts on two cores take half the time)."""
        parts = 1 if self.device.type != "cpu" else max(1, min(self._parallel, len(jobs) // 2))
        if parts == 1:
            return train_batched(
                arch, jobs, self.device, max_models=self._max_models, validate=False
            )
        bounds = [len(jobs) * k // parts for k in range(parts + 1)]
        chunks = [jobs[bounds[k] : bounds[k + 1]] for k in range(parts)]
        with ThreadPoolExecutor(parts) as pool:
            done = pool.map(
                lambda chunk: train_batched(
                    arch, chunk, self.device, max_models=self._max_models, validate=False
                ),
                chunks,
            )
            return [result for part in done for result in part]

    def evaluate(
        self, arch: str, weights: StateDict, x: torch.Tensor, y: torch.Tensor, kind: ModelKind
    ) -> Evaluation:
        return self._local.evaluate(arch, weights, x, y, kind)

    def evaluate_many(
        self,
        arch: str,
        weights: list[StateDict],
        x: torch.Tensor,
        y: torch.Tensor,
        kind: ModelKind,
    ) -> list[Evaluation]:
        if self.kernel == "loop" or len(weights) < 2 or not can_batch(arch):
            with self._slots:
                return self._local.evaluate_many(arch, weights, x, y, kind)
        count = len(weights)
        with self._slots:
            scores = evaluate_batched(arch, weights, [x] * count, [y] * count, self.device)
            release_freed_memory()
            return scores
