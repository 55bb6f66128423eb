"""Assemble a worker from its options: chain, storage, data, strategy, state."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

from mcfl_chain.adversaries import make_adversary
from mcfl_chain.chain.deployment import Deployment, DeploymentError
from mcfl_chain.learning.datasets import DatasetError, release_datasets
from mcfl_chain.learning.scenario import build_trainer_data, scenario_specs
from mcfl_chain.learning.task import Task, TaskError, canonical_arch
from mcfl_chain.strategies import make_strategy
from mcfl_chain.worker.preflight import WorkerSetupError, prepare
from mcfl_chain.worker.rounds import TrainingOptions, Worker, WorkerOptions


def build_worker(
    *,
    rpc: str,
    key: str | None,
    account_index: int | None,
    deployment: str,
    storage: str,
    dataset: str | None,
    scenario: str,
    scenario_params: str,
    n_trainers: int,
    trainer_index: int,
    samples: int | None,
    seed: int,
    arch: str | None,
    strategy: str,
    tolerance: float,
    divergence: str,
    epochs: int,
    batch_size: int,
    lr: float,
    rounds: int | None,
    last_round: int | None = None,
    give_up_after: float = 120.0,
    wait_log_interval: float = 30.0,
    state_dir: str | None,
    metrics: str | None,
    threads: int,
    poll_interval: float,
    adversary: str | None,
) -> Worker:
    """Check every option against the network and build a ready-to-run :class:`Worker`."""
    try:
        dep = Deployment.load(Path(deployment))
    except DeploymentError as exc:
        raise WorkerSetupError(str(exc)) from exc
    try:
        task = Task.parse(dep.task)
        arch = canonical_arch(arch) if arch else task.arch
    except TaskError as exc:
        raise WorkerSetupError(str(exc)) from exc
    if arch != task.arch:
        raise WorkerSetupError(
            f"this network trains {task.arch} (task {dep.task!r}); --model {arch} cannot take part"
        )
    dataset = dataset or task.datasets[0]
    if trainer_index >= n_trainers:
        raise WorkerSetupError(
            f"--trainer-index {trainer_index} must be below --n-trainers {n_trainers}"
        )
    if (key is None) == (account_index is None):
        raise WorkerSetupError("give exactly one of --key (or MCFL_KEY) and --account-index")
    try:
        params: dict[str, Any] = json.loads(scenario_params)
        if not isinstance(params, dict):
            raise ValueError("not a JSON object")
    except ValueError as exc:
        raise WorkerSetupError(f"--scenario-params must be a JSON object: {exc}") from exc

    torch.set_num_threads(threads)
    try:
        spec = scenario_specs(
            scenario, n_trainers, seed, dataset=dataset, samples_per_trainer=samples, **params
        )[trainer_index]
        data = build_trainer_data(spec)
    except (DatasetError, ValueError, TypeError) as exc:
        raise WorkerSetupError(f"cannot build this trainer's data: {exc}") from exc
    finally:
        release_datasets()
    if spec.dataset not in task.datasets:
        raise WorkerSetupError(
            f"this network's task is {dep.task!r}; data from {spec.dataset!r} does not belong to it"
        )
    chain, store, state, dag = prepare(
        dep,
        deployment,
        rpc=rpc,
        key=key,
        account_index=account_index,
        storage=storage,
        state_dir=state_dir,
        give_up_after=give_up_after,
    )
    folder = state.path.parent

    options = WorkerOptions(
        arch=arch,
        training=TrainingOptions(epochs=epochs, batch_size=batch_size, lr=lr, seed=seed),
        rounds=rounds,
        last_round=last_round,
        poll_interval=poll_interval,
        wait_log_interval=wait_log_interval,
        metrics_path=Path(metrics) if metrics else folder / "metrics.jsonl",
        labels={
            "trainer_index": trainer_index,
            "group": spec.group,
            "strategy": strategy,
            "tolerance": tolerance,
            "samples": data.num_samples,
        },
    )
    return Worker(
        chain,
        store,
        data,
        make_strategy(strategy, tolerance=tolerance, divergence=divergence),
        options,
        state,
        dag,
        make_adversary(adversary) if adversary else None,
    )
