"""Assemble a worker from its configuration: chain, storage, data, strategy, state."""

from __future__ import annotations

import torch

from mcfl_chain.adversaries import parse_adversary, parse_adversary_spec
from mcfl_chain.algorithms.robust import parse_defence
from mcfl_chain.chain.deployment import Deployment, DeploymentError
from mcfl_chain.learning.datasets import DatasetError, release_datasets
from mcfl_chain.learning.scenario import build_trainer_data, scenario_specs
from mcfl_chain.learning.task import Task, TaskError, canonical_arch
from mcfl_chain.strategies import make_strategy
from mcfl_chain.worker.config import WorkerConfig
from mcfl_chain.worker.preflight import WorkerSetupError, prepare
from mcfl_chain.worker.rounds import TrainingOptions, Worker, WorkerOptions


def build_worker(config: WorkerConfig) -> Worker:
    """Check ``config`` against the network and build a ready-to-run :class:`Worker`.

    Raises
    ------
    WorkerSetupError
        If the network, its task, the chain, the storage or the state directory do not
        fit ``config``; the message says what to change.
    """
    try:
        dep = Deployment.load(config.deployment)
    except DeploymentError as exc:
        raise WorkerSetupError(str(exc)) from exc
    try:
        task = Task.parse(dep.task)
        arch = canonical_arch(config.arch) if config.arch else task.arch
    except TaskError as exc:
        raise WorkerSetupError(str(exc)) from exc
    if arch != task.arch:
        raise WorkerSetupError(
            f"this network trains {task.arch} (task {dep.task!r}); --model {arch} cannot take part"
        )
    dataset = config.dataset or task.datasets[0]
    if config.trainer_index >= config.n_trainers:
        raise WorkerSetupError(
            f"--trainer-index {config.trainer_index} must be below --n-trainers {config.n_trainers}"
        )
    if (config.key is None) == (config.account_index is None):
        raise WorkerSetupError("give exactly one of --key (or MCFL_KEY) and --account-index")

    torch.set_num_threads(config.threads)
    try:
        spec = scenario_specs(
            config.scenario,
            config.n_trainers,
            config.seed,
            dataset=dataset,
            samples_per_trainer=config.samples,
            **config.scenario_params,
        )[config.trainer_index]
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
        config.deployment,
        rpc=config.rpc,
        key=config.key,
        account_index=config.account_index,
        storage=config.storage,
        state_dir=config.state_dir,
        give_up_after=config.give_up_after,
    )
    folder = state.path.parent

    training = TrainingOptions(
        epochs=config.epochs, batch_size=config.batch_size, lr=config.lr, seed=config.seed
    )
    options = WorkerOptions(
        arch=arch,
        training=training,
        rounds=config.rounds,
        last_round=config.last_round,
        poll_interval=config.poll_interval,
        wait_log_interval=config.wait_log_interval,
        metrics_path=config.metrics or folder / "metrics.jsonl",
        labels={
            "trainer_index": config.trainer_index,
            "group": spec.group,
            "strategy": config.strategy,
            "tolerance": config.tolerance,
            "samples": data.num_samples,
            # Reports tell honest trainers (None) from adversaries by this name.
            "adversary": parse_adversary_spec(config.adversary).name if config.adversary else None,
            "defence": config.defence,
        },
    )
    strategy = make_strategy(
        config.strategy,
        tolerance=config.tolerance,
        divergence=config.divergence,
        start=config.start,
        aggregate_on=config.aggregate_on,
        selection=config.selection,
        clusters=config.clusters,
        defence=parse_defence(config.defence) if config.defence else None,
    )
    try:
        return Worker(
            chain,
            store,
            data,
            strategy,
            options,
            state,
            dag,
            parse_adversary(config.adversary) if config.adversary else None,
        )
    except ValueError as exc:  # an adversary that cannot poison this trainer's data
        raise WorkerSetupError(f"--adversary {config.adversary}: {exc}") from exc
