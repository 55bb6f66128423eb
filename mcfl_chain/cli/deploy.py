"""``mcfl-chain deploy``: the MCFL contracts on any EVM JSON-RPC endpoint."""

from __future__ import annotations

from pathlib import Path

import click
from eth_account.signers.local import LocalAccount

from mcfl_chain.chain._rpc import DEFAULT_GIVE_UP_AFTER, redact_url
from mcfl_chain.chain._tx import FeePolicy
from mcfl_chain.chain.client import ChainClient, ChainError, connect
from mcfl_chain.chain.deploy import deploy_network
from mcfl_chain.chain.deployment import (
    DEFAULT_MAX_SAMPLES,
    REGISTRATION_POLICIES,
    Deployment,
    cohort_bps,
)
from mcfl_chain.chain.devnet import DEFAULT_PHASE_DURATION
from mcfl_chain.chain.errors import ChainUnusable
from mcfl_chain.cli import _network_options as options
from mcfl_chain.cli.account import ACCOUNT_INDEX, signer, signing_options
from mcfl_chain.storage import DEFAULT_STORAGE, open_storage
from mcfl_chain.storage.errors import StorageError

DEFAULT_TASK = "lenet5:fashion-mnist"


@click.command("deploy")
@click.option(
    "--rpc",
    required=True,
    help="JSON-RPC URL of the chain (http:// or https://): a devnet, a testnet, any EVM chain.",
)
@signing_options
@ACCOUNT_INDEX
@click.option(
    "--task",
    default=None,
    help=f"Task descriptor recorded on chain, architecture:dataset[+dataset...] [default: "
    f"{DEFAULT_TASK}]; a built-in architecture gets its model fingerprint appended "
    f"(#fp=...), so that workers with another model refuse to join.",
)
@click.option(
    "--task-from",
    "task_ref",
    default=None,
    metavar="REF",
    help="A task of one's own (module:attribute, path/to/file.py:attribute or an entry "
    "point of mcfl_chain.tasks): the descriptor, with its model's fingerprint, and the "
    "initial weights come from it. Instead of --task.",
)
@click.option(
    "--genesis-cid",
    default=None,
    help="CIDv1 (raw or dag-pb, sha2-256) of initial weights stored beforehand where the "
    "workers can fetch them. Default: initialise the task's model from --seed and store "
    "it in --storage.",
)
@click.option(
    "--storage",
    default=DEFAULT_STORAGE,
    show_default=True,
    help="Where to store the initial weights (without --genesis-cid): local:DIR or "
    "ipfs:/ip4/127.0.0.1/tcp/PORT.",
)
@options.SEED
@options.MIN_TRAINERS
@click.option(
    "--phase-duration",
    type=click.IntRange(min=1),
    default=DEFAULT_PHASE_DURATION,
    show_default=True,
    help="Seconds from a phase's start after which any trainer's vote ends it without the "
    "full quorum (deadlines are mandatory). Must exceed the slowest honest trainer's "
    "phase: 600-1800 on a public chain (docs/PROTOCOL.md §2).",
)
@click.option(
    "--registration",
    type=click.Choice(list(REGISTRATION_POLICIES)),
    default="open",
    show_default=True,
    help="Who may register: anyone (open), addresses the admin admits (allowlist), or "
    "anyone paying --deposit (deposit).",
)
@click.option(
    "--admin",
    default=None,
    metavar="ADDRESS",
    help="Keeper of the allowlist (allowlist only) [default: the deploying account].",
)
@click.option(
    "--allow",
    default=None,
    metavar="ADDRESSES",
    help="Comma-separated addresses the admin admits right after deployment (allowlist "
    "only; the deploying account must then be the admin).",
)
@options.DEPOSIT
@options.COOLDOWN
@options.max_samples_option(default=None)
@options.COHORT
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=Path("deployment.json"),
    show_default=True,
    help="Where to write the deployment file workers read.",
)
@click.option(
    "--publish",
    default=None,
    metavar="STORAGE",
    help="Also put the deployment file in this store (local:DIR or ipfs:...) and print "
    "ipfs://CID, which workers join with (--deployment ipfs://CID).",
)
@click.option(
    "--max-fee-gwei",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help="Cap on the fee per gas, in gwei: refuse to send while the base fee is above it.",
)
@click.option(
    "--priority-fee-gwei",
    type=click.FloatRange(min=0),
    default=None,
    help="Tip per gas for the block producer, in gwei [default: 1 wei].",
)
@click.option(
    "--give-up-after",
    type=click.FloatRange(min=0),
    default=DEFAULT_GIVE_UP_AFTER,
    show_default=True,
    help="Seconds to keep retrying a chain node that does not answer.",
)
def deploy(
    rpc: str,
    keystore: Path | None,
    account_alias: str | None,
    password_file: Path | None,
    account_index: int | None,
    task: str | None,
    task_ref: str | None,
    genesis_cid: str | None,
    storage: str,
    seed: int,
    min_trainers: int,
    phase_duration: int,
    registration: str,
    admin: str | None,
    allow: str | None,
    deposit: int,
    cooldown: int,
    max_samples: int | None,
    cohort: float,
    out: Path,
    publish: str | None,
    max_fee_gwei: float | None,
    priority_fee_gwei: float | None,
    give_up_after: float,
) -> None:
    """Deploy Trainers, Models and Updates to any EVM chain and write the deployment file.

    Signs with --keystore FILE, --account ALIAS (an ape account), --account-index N
    (Anvil's dev accounts) or the key in MCFL_PRIVATE_KEY (CI only). The deployment is
    then read back from the chain and checked as a worker checks it. Details go to
    stderr; stdout gets one line: the deployment's ipfs://CID with --publish, else the
    file's path.
    """
    if task is not None and task_ref is not None:
        raise click.UsageError("give --task or --task-from, not both")
    deployer: LocalAccount = signer(keystore, account_alias, password_file, account_index)
    descriptor, genesis_cid = _task_and_genesis(task, task_ref, genesis_cid, storage, seed)
    if max_samples is None:
        max_samples = DEFAULT_MAX_SAMPLES
        info(sample_cap_warning(_training_set_size(descriptor), min_trainers))
    allowed = _addresses(allow) if allow else []
    if registration == "allowlist":
        admin = _addresses(admin)[0] if admin else str(deployer.address)
    if allowed and (registration != "allowlist" or admin != deployer.address):
        raise click.UsageError(
            "--allow needs --registration allowlist with the deploying account as admin"
        )
    fees = FeePolicy.from_gwei(max_fee_gwei, priority_fee_gwei)
    try:
        w3 = connect(rpc, give_up_after=give_up_after)
        shown = redact_url(rpc)
        info(f"deploying from {deployer.address} to chain {w3.eth.chain_id} at {shown}")
        deployment = deploy_network(
            w3,
            deployer,
            genesis_cid,
            descriptor,
            min_trainers,
            phase_duration,
            registration=registration,
            admin=admin,
            deposit=deposit,
            cooldown=cooldown,
            max_samples=max_samples,
            cohort_bps=cohort_bps(cohort),
            fees=fees,
        )
        if allowed:
            keeper = ChainClient(deployment, deployer, w3=w3, fees=fees)
            for start in range(0, len(allowed), 64):
                keeper.set_allowed(allowed[start : start + 64])
        _verify(deployment, rpc, shown)
    except (ChainError, ChainUnusable, ValueError) as exc:
        raise click.ClickException(str(exc)) from None
    path = deployment.save(out)
    for name, address in deployment.addresses.items():
        info(f"  {name:9s} {address}")
    info(
        f"task {deployment.task}, genesis weights {deployment.genesis_cid}, phase deadline "
        f"{deployment.phase_duration} s, {deployment.min_trainers} trainers to start, "
        f"registration {deployment.registration}"
        + (f" ({len(allowed)} admitted)" if allowed else "")
    )
    info(f"deployment file: {path}")
    if publish is None:
        click.echo(str(path))
        return
    uri = _publish(deployment, publish)
    info(f"deployment published in {publish}: workers join with --deployment {uri}")
    click.echo(uri)


def info(text: str) -> None:
    click.echo(text, err=True)


#: Samples of an honest update the sample-cap warning compares the default cap with.
HONEST_SAMPLES = 600


def sample_cap_warning(training_set: int | None, min_trainers: int) -> str:
    """The warning `deploy` prints when no --max-samples is given: what the default cap
    lets one update weigh, and a cap fitted to the task when its training set is known
    (an equal share of it among ``min_trainers`` trainers)."""
    weight = DEFAULT_MAX_SAMPLES / (DEFAULT_MAX_SAMPLES + HONEST_SAMPLES)
    text = (
        f"warning: no --max-samples given: the network caps an update at the default "
        f"{DEFAULT_MAX_SAMPLES:,} samples, so one update declaring that many weighs "
        f"{weight:.4f} in a FedAvg with an honest update of {HONEST_SAMPLES} samples. Give "
        f"--max-samples fitted to the task: the largest local training set one trainer holds"
    )
    if training_set is None:
        return text + "."
    share = -(-training_set // min_trainers)
    return (
        f"{text}; the task's training set has {training_set:,} samples: shared equally by "
        f"{min_trainers} or more trainers, none holds more than --max-samples {share}."
    )


def _training_set_size(descriptor: str) -> int | None:
    """Training samples of the task's built-in datasets (summed), None when unknown."""
    from mcfl_chain.learning.datasets import DatasetError, load_dataset
    from mcfl_chain.learning.descriptor import Task, TaskError

    try:
        datasets = Task.parse(descriptor, registered_only=False).datasets
        loaded = [load_dataset(name) for name in datasets]
    except (TaskError, DatasetError):
        return None
    return sum(d.official_train_size or len(d) for d in loaded)


def _task_and_genesis(
    task: str | None, task_ref: str | None, genesis_cid: str | None, storage: str, seed: int
) -> tuple[str, str]:
    """The descriptor to record and the genesis CID (stored now when not given)."""
    # Imported here: only deploying needs torch and the learning package.
    from mcfl_chain.learning.descriptor import Task, TaskError
    from mcfl_chain.learning.fingerprint import model_fingerprint
    from mcfl_chain.learning.models import create_model
    from mcfl_chain.learning.tasks import load_task
    from mcfl_chain.worker.genesis import publish_genesis

    try:
        if task_ref is not None:
            own = load_task(task_ref)
            own.register()
            parsed = own.descriptor()
        else:
            parsed = Task.parse(task or DEFAULT_TASK, registered_only=False)
            if parsed.registered:
                fingerprint = model_fingerprint(create_model(parsed.arch, seed=0))
                if not parsed.fingerprint_matches(fingerprint):
                    raise TaskError(
                        f"the task {parsed} says fingerprint {parsed.fingerprint}, but the "
                        f"built-in {parsed.arch} has {fingerprint}"
                    )
                parsed = parsed.with_fingerprint(parsed.fingerprint or fingerprint)
            elif genesis_cid is None:
                raise TaskError(
                    f"{parsed.arch!r} is not a built-in architecture: give the task itself "
                    f"with --task-from REF (its initial weights are made from it), or "
                    f"--genesis-cid of weights stored beforehand"
                )
        if genesis_cid is None:
            with open_storage(storage) as store:
                genesis_cid = publish_genesis(parsed.arch, seed, store)
            info(f"initial {parsed.arch} weights (seed {seed}) stored in {storage}: {genesis_cid}")
    except (TaskError, StorageError) as exc:
        raise click.ClickException(str(exc)) from None
    return str(parsed), genesis_cid


def _addresses(text: str) -> list[str]:
    from web3 import Web3

    addresses = [a.strip() for a in text.split(",") if a.strip()]
    wrong = [a for a in addresses if not Web3.is_address(a)]
    if wrong:
        raise click.BadParameter(f"{wrong[0]!r} is not an address", param_hint="--allow")
    return [Web3.to_checksum_address(a) for a in addresses]


def _verify(deployment: Deployment, rpc: str, shown: str) -> None:
    """Read the new network back from the chain as a worker would; refuse a mismatch."""
    from mcfl_chain.worker.preflight import WorkerSetupError, check_network

    try:
        check_network(ChainClient.read_only(deployment, rpc), "the new deployment", shown)
    except WorkerSetupError as exc:
        raise ChainError(f"the deployment does not read back from the chain: {exc}") from exc


def _publish(deployment: Deployment, spec: str) -> str:
    from mcfl_chain.worker.preflight import publish_deployment

    try:
        with open_storage(spec) as store:
            return publish_deployment(deployment, store)
    except StorageError as exc:
        raise click.ClickException(f"cannot publish the deployment in {spec}: {exc}") from None
