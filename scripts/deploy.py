"""Deploy and link Trainers, Models and Updates with ape: `ape run deploy`.

    ape run deploy --network ethereum:local:foundry --genesis-cid bafk... \\
        --task lenet:fashion-mnist --min-trainers 2 --phase-duration 0 --out deployment.json

Uses the ape account chosen interactively (or the first test account on local networks),
and writes the same deployment file as `mcfl-chain devnet up`.
"""

from __future__ import annotations

from pathlib import Path

import click
from ape import chain, networks, project
from ape.cli import ConnectedProviderCommand, account_option

from mcfl_chain.chain.cids import cid_to_bytes
from mcfl_chain.chain.deployment import Deployment


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
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="Seconds after which any vote ends a phase; 0 for no deadline.",
)
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=Path("deployment.json"),
    show_default=True,
    help="Where to write the deployment file workers read.",
)
def cli(
    account, genesis_cid: str, task: str, min_trainers: int, phase_duration: int, out: Path
) -> None:
    """Deploy the MCFL contracts, link them and write the deployment file."""
    first_block = chain.blocks.head.number + 1
    trainers = account.deploy(project.Trainers)
    models = account.deploy(
        project.Models, trainers, cid_to_bytes(genesis_cid), task, min_trainers, phase_duration
    )
    updates = account.deploy(project.Updates, trainers, models)
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
    )
    click.echo(f"deployment written to {deployment.save(out)}")
