"""Deploy and link Trainers, Models and Updates with ape: `ape run deploy`.

    ape run deploy --network ethereum:local:foundry --genesis-cid bafk... \\
        --task lenet:fashion-mnist --min-trainers 2 --phase-duration 30 --out deployment.json

Uses the ape account chosen interactively (or the first test account on local networks),
checks the parameters as `mcfl_chain.chain.deploy.deploy_network` does, and writes the
same deployment file as `mcfl-chain devnet up`. Recommended deadlines: docs/PROTOCOL.md §2.
"""

from __future__ import annotations

from pathlib import Path

import click
from ape import chain, networks, project
from ape.cli import ConnectedProviderCommand, account_option

from mcfl_chain.chain.cids import cid_to_bytes
from mcfl_chain.chain.deploy import check_parameters
from mcfl_chain.chain.deployment import (
    ALL_TRAINERS_BPS,
    DEFAULT_MAX_SAMPLES,
    REGISTRATION_POLICIES,
    Deployment,
)

ZERO_ADDRESS = "0x" + "00" * 20


@click.command(cls=ConnectedProviderCommand)
@account_option()
@click.option(
    "--genesis-cid",
    required=True,
    help="CIDv1 (raw or dag-pb, sha2-256) of the initial model weights.",
)
@click.option(
    "--task",
    default="lenet:fashion-mnist",
    show_default=True,
    help="Task descriptor recorded on chain (architecture:dataset).",
)
@click.option(
    "--min-trainers",
    type=click.IntRange(min=1),
    default=2,
    show_default=True,
    help="Registered trainers needed before round 0 opens.",
)
@click.option(
    "--phase-duration",
    type=click.IntRange(min=1),
    default=30,
    show_default=True,
    help="Seconds after which any vote ends a phase (deadlines are mandatory); "
    "900-1800 on a public chain.",
)
@click.option(
    "--registration",
    type=click.Choice(list(REGISTRATION_POLICIES)),
    default="open",
    show_default=True,
    help="Who may register: anyone, addresses --admin admits, or anyone paying --deposit.",
)
@click.option("--admin", default=None, help="Allowlist keeper's address (allowlist only).")
@click.option(
    "--deposit", type=click.IntRange(min=0), default=0, help="Wei per registration (deposit)."
)
@click.option(
    "--cooldown",
    type=click.IntRange(min=0),
    default=0,
    help="Seconds between an exit and its refund (deposit).",
)
@click.option(
    "--max-samples",
    type=click.IntRange(min=1),
    default=DEFAULT_MAX_SAMPLES,
    show_default=True,
    help="Largest sample count one update may declare.",
)
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=Path("deployment.json"),
    show_default=True,
    help="Where to write the deployment file workers read.",
)
def cli(
    account,
    genesis_cid: str,
    task: str,
    min_trainers: int,
    phase_duration: int,
    registration: str,
    admin: str | None,
    deposit: int,
    cooldown: int,
    max_samples: int,
    out: Path,
) -> None:
    """Deploy the MCFL contracts, link them and write the deployment file."""
    try:
        policy = check_parameters(
            task,
            min_trainers,
            phase_duration,
            registration=registration,
            admin=admin,
            deposit=deposit,
            cooldown=cooldown,
            max_samples=max_samples,
        )
        genesis = cid_to_bytes(genesis_cid)
    except ValueError as exc:
        raise click.ClickException(str(exc)) from exc
    first_block = chain.blocks.head.number + 1
    trainers = account.deploy(project.Trainers, policy, admin or ZERO_ADDRESS, deposit, cooldown)
    # Every trainer in every round (cohortBps 10,000): this script deploys no cohorts.
    models = account.deploy(
        project.Models, trainers, genesis, task, min_trainers, phase_duration, ALL_TRAINERS_BPS
    )
    updates = account.deploy(project.Updates, models, max_samples)
    trainers.setModels(models, sender=account)
    models.setUpdates(updates, sender=account)
    contracts = {"Trainers": trainers, "Models": models, "Updates": updates}
    deployment = Deployment(
        chain_id=chain.chain_id,
        rpc_url=str(getattr(networks.provider, "uri", "") or ""),
        addresses={name: c.address for name, c in contracts.items()},
        abis={
            name: [abi.model_dump(mode="json", by_alias=True) for abi in c.contract_type.abi]
            for name, c in contracts.items()
        },
        deployment_block=first_block,
        genesis_cid=genesis_cid,
        task=task,
        min_trainers=min_trainers,
        phase_duration=phase_duration,
        registration=registration,
        admin=str(trainers.admin()) if admin else None,
        deposit=deposit,
        cooldown=cooldown,
        max_samples=max_samples,
    )
    click.echo(f"deployment written to {deployment.save(out)}")
