"""Deploy and link Trainers, Models and Updates with ape: `ape run deploy`.

    ape run deploy --network ethereum:local:foundry --genesis-cid bafk... \\
        --task lenet:fashion-mnist --min-trainers 2 --phase-duration 30 --out deployment.json

Uses the ape account chosen interactively (or the first test account on local networks),
checks the parameters as `mcfl_chain.chain.deploy.deploy_network` does, and writes the
same deployment file as `mcfl-chain devnet up`. Recommended deadlines: docs/PROTOCOL.md §2.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
from ape import chain, networks, project
from ape.cli import ConnectedProviderCommand, account_option

from mcfl_chain.chain.cids import cid_to_bytes
from mcfl_chain.chain.deploy import check_parameters, check_settings
from mcfl_chain.chain.deployment import Deployment, cohort_bps
from mcfl_chain.cli._network_options import OUT, network_settings

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
@network_settings()
@click.option("--admin", default=None, help="Allowlist keeper's address (allowlist only).")
@OUT
def cli(
    account,
    genesis_cid: str,
    task: str,
    settings: dict[str, Any],
    admin: str | None,
    out: Path,
) -> None:
    """Deploy the MCFL contracts, link them and write the deployment file."""
    try:
        values = check_settings(**settings)
        policy = check_parameters(task, admin=admin, **values)
        genesis = cid_to_bytes(genesis_cid)
    except ValueError as exc:
        raise click.ClickException(str(exc)) from exc
    first_block = chain.blocks.head.number + 1
    trainers = account.deploy(
        project.Trainers, policy, admin or ZERO_ADDRESS, values["deposit"], values["cooldown"]
    )
    # The contracts take the cohort's share in basis points, and so does the file.
    bps = cohort_bps(values.pop("cohort"))
    models = account.deploy(
        project.Models,
        trainers,
        genesis,
        task,
        values["min_trainers"],
        values["phase_duration"],
        bps,
    )
    updates = account.deploy(project.Updates, models, values["max_samples"])
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
        admin=str(trainers.admin()) if admin else None,
        cohort_bps=bps,
        **values,
    )
    click.echo(f"deployment written to {deployment.save(out)}")
