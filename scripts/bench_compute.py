"""The compute floor of a round: N trainers' local training and scoring, nothing else.

Builds the shares of N LeNet-5 trainers on Fashion-MNIST's `groups` scenario (as a host
holds them: the dataset's bytes once, each trainer's rows of it), then times, on the
device asked for:

- one phase's training: every trainer trains one model for 2 epochs at batch 32 on its
  share (1,050 of its 1,500 samples), as one :func:`~mcfl_chain.compute.batched.train_batched`
  call (the batched engine's ``vmap`` kernel), or one model after another
  (``--kernel loop``, what a worker process or the CPU's loop kernel does);
- scoring: each trainer's 10 candidate models on its 225-image validation split
  (:func:`~mcfl_chain.compute.batched.evaluate_batched`).

This is what a round costs with no chain, storage or Python per trainer around it: the
floor the simulator's round time is compared with (docs/discussion/performance.md). A
first, untimed call warms the kernels up. Records go to ``results/bench-compute.jsonl``
(device, machine, commit). Last line: ``training N trainers: X s (Y samples/s) on DEVICE``
for the largest N.

Usage: python scripts/bench_compute.py [--sizes 38,200,1000] [--device cuda] [--kernel vmap]
"""

from __future__ import annotations

import json
import os
import time
from datetime import UTC, datetime
from pathlib import Path

import click
import psutil
import torch
from rich.console import Console

from mcfl_chain._utils.provenance import source_commit
from mcfl_chain.compute.batched import TrainJob, evaluate_batched, train_batched
from mcfl_chain.compute.device import DEVICES, prepare_device, resolve_device
from mcfl_chain.compute.local import LocalCompute, StateDict
from mcfl_chain.learning.models import create_model
from mcfl_chain.learning.scenario import TrainerData, build_trainer_data, scenario_specs

ROOT = Path(__file__).resolve().parents[1]
RECORDS = ROOT / "results" / "bench-compute.jsonl"
ARCH = "lenet5"
CANDIDATES = 10
"""Models a trainer scores a round (the last round's models it may pick from)."""


def _synchronise(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _train(jobs: list[TrainJob], on: torch.device, kernel: str, max_models: int) -> None:
    if kernel == "vmap":
        train_batched(ARCH, jobs, on, max_models=max_models, validate=False)
        return
    local = LocalCompute(on)
    for job in jobs:
        local.train(
            ARCH,
            job.start,
            job.data,
            epochs=job.epochs,
            batch_size=job.batch_size,
            lr=job.lr,
            momentum=job.momentum,
            seed=job.seed,
        )


def _score(
    shares: list[TrainerData], candidates: list[StateDict], on: torch.device, kernel: str
) -> None:
    """Each trainer scores every candidate on its validation split (one request each)."""
    local = LocalCompute(on)
    kind = create_model(ARCH, 0).kind
    for share in shares:
        if kernel == "vmap":
            count = len(candidates)
            evaluate_batched(ARCH, candidates, [share.val_x] * count, [share.val_y] * count, on)
        else:
            local.evaluate_many(ARCH, candidates, share.val_x, share.val_y, kind)


@click.command()
@click.option(
    "--sizes", default="38,200,1000", show_default=True, help="Trainers, comma-separated."
)
@click.option("--device", type=click.Choice(list(DEVICES)), default="auto", show_default=True)
@click.option(
    "--kernel",
    type=click.Choice(["vmap", "loop"]),
    default="vmap",
    show_default=True,
    help="vmap: one batched computation of all models; loop: one model after another.",
)
@click.option("--max-models", type=int, default=256, show_default=True, help="Models per vmap.")
@click.option(
    "--records",
    type=click.Path(dir_okay=False, path_type=Path),
    default=RECORDS,
    show_default=True,
    help="JSON-lines file the figures are appended to.",
)
def main(sizes: str, device: str, kernel: str, max_models: int, records: Path) -> None:
    """Time N trainers' training and scoring alone (see the module docstring)."""
    console = Console()
    on = resolve_device(device)
    prepare_device(on)
    wanted = [int(n) for n in sizes.split(",") if n.strip()]
    start = create_model(ARCH, 0).state_dict()
    last = ""
    for n in wanted:
        specs = scenario_specs("groups", n, 0, dataset="fashion-mnist", samples_per_trainer=1500)
        shares = [build_trainer_data(spec, shared=True) for spec in specs]
        jobs = [
            TrainJob(start, share, epochs=2, batch_size=32, lr=0.01, seed=i)
            for i, share in enumerate(shares)
        ]
        samples = 2 * sum(len(share.train_y) for share in shares)

        candidates = [create_model(ARCH, k).state_dict() for k in range(CANDIDATES)]

        # Warm-up on a few trainers (kernel selection, allocation), not timed.
        _train(jobs[:8], on, kernel, max_models)
        figures = {}
        for name in ("training", "scoring"):
            _synchronise(on)
            began = time.perf_counter()
            if name == "training":
                _train(jobs, on, kernel, max_models)
            else:
                _score(shares, candidates, on, kernel)
            _synchronise(on)
            figures[name] = time.perf_counter() - began
        record = {
            "trainers": n,
            "device": on.type,
            "gpu": torch.cuda.get_device_name(on) if on.type == "cuda" else None,
            "kernel": kernel,
            "arch": ARCH,
            "train_s": figures["training"],
            "train_samples_per_s": samples / figures["training"],
            "score_s": figures["scoring"],
            "scored_images_per_s": CANDIDATES
            * sum(len(s.val_y) for s in shares)
            / figures["scoring"],
            "threads": torch.get_num_threads(),
            "machine": f"{os.cpu_count()} cores, {psutil.virtual_memory().total / 2**30:.0f} GiB",
            "torch": torch.__version__,
            "commit": source_commit(ROOT),
            "date": datetime.now(UTC).isoformat(timespec="seconds"),
        }
        # Plain JSON lines: this script needs torch and the data only (no chain stack), so
        # that it runs on a bare GPU machine before anything else is installed there.
        records.parent.mkdir(parents=True, exist_ok=True)
        with records.open("a", encoding="utf-8") as file:
            file.write(json.dumps(record) + "\n")
        console.print(
            f"{n} trainers on {on.type} ({kernel}): training {figures['training']:.2f} s "
            f"({record['train_samples_per_s']:,.0f} samples/s), scoring {CANDIDATES} candidates "
            f"each {figures['scoring']:.2f} s ({record['scored_images_per_s']:,.0f} images/s)"
        )
        last = (
            f"training {n} trainers: {figures['training']:.2f} s "
            f"({record['train_samples_per_s']:,.0f} samples/s) on {on.type}"
        )
    click.echo(last)


if __name__ == "__main__":
    main()
