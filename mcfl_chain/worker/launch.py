"""Assemble a worker from its configuration: account, chain, storage, task, data, state.

What the trainer trains, in order of precedence:

- ``--task REF``: a task of its own (:mod:`mcfl_chain.learning.tasks`), whose model,
  data and training it brings (``--data PATH`` then goes to the task's ``data(path)``);
  the task is registered so that the whole package (the round state machine, the
  weights codec) runs it by its name;
- ``--data PATH``: its own data (:mod:`mcfl_chain.learning.local_data`) for the
  network's built-in architecture;
- otherwise its share of a built-in dataset under ``--scenario`` (simulations).

Whatever the source, the trainer's model must be the network's: the same architecture
name and, when the task descriptor carries one, the same fingerprint (tensor names,
shapes, dtypes). When they differ, the network's genesis weights say exactly how, and
the worker refuses to join before it registers.
"""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path

import torch
from eth_account.signers.local import LocalAccount

from mcfl_chain.adversaries import parse_adversary, parse_adversary_spec
from mcfl_chain.algorithms.robust import parse_defence
from mcfl_chain.chain._tx import FeePolicy
from mcfl_chain.chain.accounts import PRIVATE_KEY_ENV, AccountError, Prompt, load_signing_account
from mcfl_chain.chain.deployment import Deployment
from mcfl_chain.compute.device import prepare_device, resolve_device
from mcfl_chain.compute.local import Compute, LocalCompute
from mcfl_chain.compute.stand_in import StandInCompute
from mcfl_chain.learning.codec import MalformedWeightsError, read_layout
from mcfl_chain.learning.datasets import DatasetError, release_datasets
from mcfl_chain.learning.descriptor import Task, TaskError, canonical_arch
from mcfl_chain.learning.fingerprint import compare_layouts, layout_fingerprint, model_layout
from mcfl_chain.learning.local_data import DataError
from mcfl_chain.learning.models import create_model, get_architecture
from mcfl_chain.learning.scenario import (
    TrainerData,
    TrainerDataSpec,
    build_trainer_data,
    scenario_specs,
)
from mcfl_chain.learning.tasks import LearningTask, builtin_task, load_task
from mcfl_chain.storage.base import Storage
from mcfl_chain.storage.errors import StorageError
from mcfl_chain.strategies import Strategy, make_strategy
from mcfl_chain.worker.config import WorkerConfig
from mcfl_chain.worker.preflight import (
    ChainOptions,
    WorkerSetupError,
    chain_url,
    load_deployment,
    prepare,
)
from mcfl_chain.worker.rounds import TrainingOptions, Worker, WorkerOptions

LEGACY_KEY_ENV = "MCFL_KEY"
"""The variable that held a raw key before :data:`PRIVATE_KEY_ENV`; no longer read."""


def build_worker(
    config: WorkerConfig,
    prompt: Prompt | None = None,
    compute: Compute | None = None,
    *,
    keep_datasets: bool = False,
    network_checked: bool = False,
) -> Worker:
    """Check ``config`` against the network and build a ready-to-run :class:`Worker`.

    Parameters
    ----------
    config
        The worker's options.
    prompt
        Asks a person for the keystore's password when no file or variable gives it.
    compute
        Where it trains and scores models; by default alone on ``config.device``. A
        host of many trainers gives them one shared compute.
    keep_datasets
        Keep whole datasets loaded after cutting this trainer's share, for the next
        trainer a host builds (a lone worker lets them go), and keep the share as rows
        of the dataset's bytes where it can
        (:class:`~mcfl_chain.learning.scenario.SharedImages`): a host holds each
        dataset once for all its trainers.
    network_checked
        The chain at this config's RPC URL was just found to hold its deployment's
        network (a host's earlier trainer of the same deployment): not checked again.

    Raises
    ------
    WorkerSetupError
        If the account, the network, its task, the data, the chain, the storage or the
        state directory do not fit ``config``; the message says what to change.
    """
    account = signing_account(config, prompt)
    dep = load_deployment(config.deployment, config.storage, config.give_up_after)
    rpc = chain_url(config.rpc, dep)
    try:
        network = Task.parse(dep.task, registered_only=False)
    except TaskError as exc:
        raise WorkerSetupError(f"{config.deployment}: {exc}") from exc
    torch.set_num_threads(config.threads)
    try:
        device = resolve_device(config.device)
    except ValueError as exc:
        raise WorkerSetupError(f"--device {config.device}: {exc}") from exc
    prepare_device(device)
    own_task, data, group = _trainer_task_and_data(config, dep, network, keep_datasets)
    arch = network.arch if own_task is None else own_task.arch
    strategy = make_strategy(
        config.strategy,
        defence=parse_defence(config.defence) if config.defence else None,
        **config.strategy_options(),
    )
    check_heads(strategy, arch, dep.task)
    chain, store, state, dag = prepare(
        dep,
        config.deployment,
        rpc=rpc,
        account=account,
        storage=config.storage,
        state_dir=config.state_dir,
        options=ChainOptions(
            give_up_after=config.give_up_after,
            confirmations=config.confirmations,
            max_log_range=config.max_log_range,
            fees=_fees(config),
        ),
        network_checked=network_checked,
    )
    try:
        check_model(network, arch, dep, store, custom=own_task is not None)
    except BaseException:
        store.close()
        raise
    folder = state.path.parent

    training = TrainingOptions(
        epochs=config.epochs,
        batch_size=config.batch_size,
        lr=config.lr,
        seed=config.seed,
        optimiser=config.optimiser,
        sampling=config.sampling,
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
            # Lines of several networks may share a file: each names its own.
            "network": dep.network,
            "deployment": str(config.deployment),
            "trainer_index": config.trainer_index,
            "group": group,
            "strategy": config.strategy,
            "tolerance": config.tolerance,
            "samples": data.num_samples,
            # Reports tell honest trainers (None) from adversaries by this name.
            "adversary": parse_adversary_spec(config.adversary).name if config.adversary else None,
            "defence": config.defence,
            "device": device.type,
            **({"training": config.training} if config.training != "real" else {}),
        },
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
            compute=compute or _compute(config, device),
        )
    except ValueError as exc:  # an adversary that cannot poison this trainer's data
        store.close()
        raise WorkerSetupError(f"--adversary {config.adversary}: {exc}") from exc


def _compute(config: WorkerConfig, device: torch.device) -> Compute:
    """A lone worker's compute: its device, or the stand-in for training."""
    if config.training == "stand-in":
        return StandInCompute(device)
    return LocalCompute(device)


def check_heads(strategy: Strategy, arch: str, task: str) -> None:
    """Refuse a strategy that needs a model with heads the network's model has not.

    Raises
    ------
    WorkerSetupError
        Naming the architecture the network would need (``lenet5-heads3``).
    """
    wanted = strategy.model_heads()
    if wanted is None:
        return
    heads = get_architecture(arch).heads
    if heads == wanted:
        return
    network = f"this network's {arch!r} (task {task!r})"
    if heads is None:
        raise WorkerSetupError(
            f"--strategy {strategy.name} needs a model with heads; {network} has none: "
            f"deploy a network for <base>-heads{wanted} (e.g. lenet5-heads{wanted})"
        )
    raise WorkerSetupError(
        f"--strategy {strategy.name} with --clusters {wanted} needs a model with {wanted} "
        f"heads; {network} has {heads}: give --clusters {heads}"
    )


def signing_account(config: WorkerConfig, prompt: Prompt | None = None) -> LocalAccount | int:
    """The trainer's account: a keystore, an ape account, an Anvil dev-account index, or
    the key in ``MCFL_PRIVATE_KEY``; never shown in a message.

    Raises
    ------
    WorkerSetupError
        Several sources or none, or the chosen one fails (wrong password, ...).
    """
    given = [
        flag
        for flag, value in (
            ("--keystore", config.keystore),
            ("--account", config.account),
            ("--account-index", config.account_index),
        )
        if value is not None
    ]
    if len(given) > 1:
        raise WorkerSetupError(
            f"give one of --keystore, --account and --account-index, not {' and '.join(given)}"
        )
    if config.account_index is not None:
        if config.password_file is not None:
            raise WorkerSetupError("--password-file goes with --keystore or --account")
        return config.account_index
    if not given and not os.environ.get(PRIVATE_KEY_ENV):
        renamed = (
            f" ({LEGACY_KEY_ENV} is no longer read: name it {PRIVATE_KEY_ENV})"
            if os.environ.get(LEGACY_KEY_ENV)
            else ""
        )
        raise WorkerSetupError(
            f"no signing account: give --keystore FILE (create one with `mcfl-chain account "
            f"new`), --account ALIAS (an ape account), --account-index N (Anvil's dev "
            f"accounts, local devnets only), or set {PRIVATE_KEY_ENV} (CI only){renamed}"
        )
    try:
        return load_signing_account(
            keystore=config.keystore,
            account=config.account,
            password_file=config.password_file,
            prompt=prompt,
        )
    except AccountError as exc:
        raise WorkerSetupError(str(exc)) from None


def _fees(config: WorkerConfig) -> FeePolicy:
    try:
        return FeePolicy.from_gwei(config.max_fee_gwei, config.priority_fee_gwei)
    except ValueError as exc:
        raise WorkerSetupError(f"--max-fee-gwei / --priority-fee-gwei: {exc}") from exc


@functools.lru_cache(maxsize=4)
def _scenario(
    kind: str, n_trainers: int, seed: int, dataset: str, samples: int | None, params: str
) -> tuple[TrainerDataSpec, ...]:
    """Every trainer's data spec of a scenario, made once for all the trainers a host
    builds (each needs one, and a 1,000-trainer scenario cut anew per trainer made a
    host's start quadratic). ``params``: the scenario's parameters as JSON."""
    return tuple(
        scenario_specs(
            kind,
            n_trainers,
            seed,
            dataset=dataset,
            samples_per_trainer=samples,
            **json.loads(params),
        )
    )


def _trainer_task_and_data(
    config: WorkerConfig, dep: Deployment, network: Task, keep_datasets: bool = False
) -> tuple[LearningTask | None, TrainerData, str]:
    """The task of one's own (None for a built-in architecture), the trainer's data and
    the group its metrics are labelled with."""
    if config.task is not None:
        clash = [
            flag
            for flag, value in (("--model", config.arch), ("--dataset", config.dataset))
            if value is not None
        ]
        if clash:
            raise WorkerSetupError(f"--task brings its own model and data: drop {', '.join(clash)}")
        if config.data is not None and not config.data.exists():
            raise WorkerSetupError(f"--data {config.data}: no such file or folder")
        own = _own_task(config.task, network)
        return own, _checked_data(own, f"the task {config.task}", config.data), "own data"
    if not network.registered:
        raise WorkerSetupError(
            f"this network trains a model of its own ({dep.task!r}), not a built-in "
            f"architecture: run its task with --task module:attribute (ask the network for it)"
        )
    try:
        arch = canonical_arch(config.arch) if config.arch else network.arch
    except TaskError as exc:
        raise WorkerSetupError(str(exc)) from exc
    if arch != network.arch:
        raise WorkerSetupError(
            f"this network trains {network.arch} (task {dep.task!r}); --model {arch} "
            f"cannot take part"
        )
    if config.data is not None:
        if config.dataset is not None:
            raise WorkerSetupError("--data is this trainer's dataset: drop --dataset")
        builtin = builtin_task(arch, config.data, seed=config.seed)
        return None, _checked_data(builtin, f"--data {config.data}"), "own data"
    dataset = config.dataset or network.datasets[0]
    if config.trainer_index >= config.n_trainers:
        raise WorkerSetupError(
            f"--trainer-index {config.trainer_index} must be below --n-trainers {config.n_trainers}"
        )
    try:
        spec = _scenario(
            config.scenario,
            config.n_trainers,
            config.seed,
            dataset,
            config.samples,
            json.dumps(config.scenario_params, sort_keys=True),
        )[config.trainer_index]
        data = build_trainer_data(spec, shared=keep_datasets)
    except (DatasetError, ValueError, TypeError) as exc:
        raise WorkerSetupError(f"cannot build this trainer's data: {exc}") from exc
    finally:
        if not keep_datasets:
            release_datasets()
    if spec.dataset not in network.datasets:
        raise WorkerSetupError(
            f"this network's task is {dep.task!r}; data from {spec.dataset!r} does not belong to it"
        )
    return None, data, spec.group


def _own_task(reference: str, network: Task) -> LearningTask:
    """Load and register the task ``reference`` names; refuse another architecture."""
    try:
        own = load_task(reference)
    except TaskError as exc:
        raise WorkerSetupError(str(exc)) from exc
    if own.arch != network.arch:
        raise WorkerSetupError(
            f"the network trains {network.arch!r} (task {network}), the task {reference} "
            f"is {own.arch!r}: run a task for {network.arch!r}"
        )
    try:
        own.register()
    except TaskError as exc:
        raise WorkerSetupError(str(exc)) from exc
    return own


def _checked_data(task: LearningTask, what: str, path: Path | None = None) -> TrainerData:
    """``task``'s data (read from ``path``, --data, if given), checked to fit its model
    (features, number of classes)."""
    try:
        data = task.load_data(path)
        task.check_data(data)
    except (DataError, TaskError) as exc:
        raise WorkerSetupError(f"{what}: {exc}") from exc
    except Exception as exc:  # the task's own code may fail in any way: one line
        raise WorkerSetupError(
            f"{what}: loading its data failed: {type(exc).__name__}: {exc}"
        ) from exc
    return data


def check_model(network: Task, arch: str, dep: Deployment, store: Storage, *, custom: bool) -> None:
    """Refuse to join when this trainer's model is not the network's.

    The descriptor's fingerprint decides; when it differs (or, for a task of one's own,
    when the descriptor has none) the network's genesis weights are read to say which
    tensors differ.

    Raises
    ------
    WorkerSetupError
        The layouts differ (every difference named), or the genesis weights needed for
        the comparison cannot be read.
    """
    layout = model_layout(create_model(arch, seed=0))
    fingerprint = layout_fingerprint(layout)
    if network.fingerprint_matches(fingerprint) and (network.fingerprint or not custom):
        return
    what = f"the network's model (its genesis weights {dep.genesis_cid})"
    try:
        found = read_layout(store.get(dep.genesis_cid))
    except (StorageError, MalformedWeightsError) as exc:
        if network.fingerprint is not None:
            raise WorkerSetupError(
                f"this trainer's {arch!r} model has fingerprint {fingerprint}, the network's "
                f"(task {dep.task!r}) {network.fingerprint}: the model definitions differ "
                f"(its genesis weights, which would say how, cannot be read: {exc})"
            ) from exc
        raise WorkerSetupError(
            f"cannot read {what} to check this trainer's model against it: {exc}"
        ) from exc
    difference = compare_layouts(found, layout)
    if difference:
        mine = f"this trainer's {arch!r} model"
        raise WorkerSetupError(f"refusing to join: {difference.message(what, mine)}")
    if network.fingerprint is not None:
        raise WorkerSetupError(
            f"this trainer's {arch!r} model has fingerprint {fingerprint}, the network's task "
            f"{dep.task!r} says {network.fingerprint}, though its genesis weights have this "
            f"model's layout: the descriptor was written for another model"
        )
