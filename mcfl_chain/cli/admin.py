"""``mcfl-chain admin allow | revoke | show | join``: keep a deployed network's
registration, and put a trainer back in the quorum by hand.

Under the allowlist policy one admission gives one identity: registering uses it up, and
the admin admits the address again for another (docs/PROTOCOL.md §3). These commands let
the admin admit an organisation after deployment, revoke an admission, and let anyone
read the registration settings. ``join`` is a trainer's own call (``Models.join``, the
rejoin rule of PROTOCOL.md §4), for when its worker is not the one to make it.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import click
from web3 import Web3

from mcfl_chain.chain.client import ChainClient, ChainError, Phase
from mcfl_chain.chain.errors import ChainUnusable
from mcfl_chain.cli._deployment import DEPLOYMENT, RPC, open_deployment
from mcfl_chain.cli.account import ACCOUNT_INDEX, signer, signing_options
from mcfl_chain.storage import DEFAULT_STORAGE

#: Accounts one ``Trainers.setAllowed`` call takes (``MAX_ALLOWLIST_BATCH``).
BATCH = 64

STORAGE = click.option(
    "--storage",
    default=DEFAULT_STORAGE,
    show_default=True,
    help="Blob store to fetch an ipfs://CID --deployment from.",
)


def _checksummed(addresses: Sequence[str]) -> list[str]:
    wrong = [a for a in addresses if not Web3.is_address(a)]
    if wrong:
        raise click.BadParameter(f"{wrong[0]!r} is not an address", param_hint="ADDRESS")
    return [Web3.to_checksum_address(a) for a in addresses]


@click.group("admin")
def admin() -> None:
    """Keep a network's registration: admit or revoke addresses (allowlist networks) and
    show the registration settings; put a registered trainer back in the quorum (join).

    Under the allowlist policy an admission gives one registration: the address's next
    `register` uses it up, and another identity needs the admin to admit it again.
    """


def _set_allowed(
    addresses: tuple[str, ...],
    allowed: bool,
    deployment: str,
    rpc: str | None,
    storage: str,
    keystore: Path | None,
    account_alias: str | None,
    password_file: Path | None,
    account_index: int | None,
) -> None:
    accounts = _checksummed(addresses)
    keeper = signer(keystore, account_alias, password_file, account_index)
    try:
        client = ChainClient(open_deployment(deployment, storage), keeper, rpc_url=rpc)
        registration = client.network_parameters()["registration"]
        if registration != "allowlist":
            raise click.ClickException(
                f"this network's registration is {registration}: it has no allowlist"
            )
        if client.admin() != keeper.address:
            raise click.ClickException(
                f"only the admin {client.admin()} may change the allowlist; you sign as "
                f"{keeper.address}"
            )
        for start in range(0, len(accounts), BATCH):
            client.set_allowed(accounts[start : start + BATCH], allowed)
    except (ChainError, ChainUnusable, ValueError) as exc:
        raise click.ClickException(str(exc)) from None
    for account in accounts:
        if allowed:
            click.echo(f"admitted {account} (one registration)")
        else:
            click.echo(f"revoked {account}")


def _admin_command(name: str, allowed: bool, summary: str, doc: str) -> click.Command:
    """``admin allow`` or ``admin revoke``: the same options, one flag apart."""

    @admin.command(name, help=doc, short_help=summary)
    @click.argument("addresses", nargs=-1, required=True, metavar="ADDRESS...")
    @DEPLOYMENT
    @RPC
    @STORAGE
    @signing_options
    @ACCOUNT_INDEX
    def command(addresses: tuple[str, ...], **options: object) -> None:
        _set_allowed(addresses, allowed, **options)  # type: ignore[arg-type]

    return command


allow = _admin_command(
    "allow",
    True,
    "Admit addresses for one registration each.",
    "Admit ADDRESS... for one registration each (again, if an earlier admission was "
    "used); signed by the allowlist's admin.",
)
revoke = _admin_command(
    "revoke",
    False,
    "Revoke addresses' admissions.",
    "Revoke the admission of ADDRESS... (a token already registered stays); signed by "
    "the allowlist's admin.",
)


@admin.command("show")
@click.argument("addresses", nargs=-1, metavar="[ADDRESS]...")
@DEPLOYMENT
@RPC
@STORAGE
def show(addresses: tuple[str, ...], deployment: str, rpc: str | None, storage: str) -> None:
    """Print the registration settings as the contracts hold them, and for each ADDRESS
    whether it is admitted and registered."""
    accounts = _checksummed(addresses)
    try:
        client = ChainClient.read_only(open_deployment(deployment, storage), rpc_url=rpc)
        settings = client.network_parameters()
        keeper = client.admin()
        rows = [(a, client.admission(a) if keeper else "-", client.trainer_id(a)) for a in accounts]
        live = client.trainer_count()
    except (ChainError, ChainUnusable, ValueError) as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"registration: {settings['registration']}")
    click.echo(f"admin: {keeper or 'none'}")
    click.echo(f"deposit: {settings['deposit']} wei")
    click.echo(f"cooldown: {settings['cooldown']} s")
    click.echo(f"max samples: {settings['max_samples']}")
    click.echo(f"live trainers: {live}")
    for account, admission, trainer in rows:
        click.echo(
            f"{account}: admission {admission}, "
            + (f"trainer id {trainer}" if trainer else "not registered")
        )


@admin.command("join")
@DEPLOYMENT
@RPC
@STORAGE
@signing_options
@ACCOUNT_INDEX
def join(
    deployment: str,
    rpc: str | None,
    storage: str,
    keystore: Path | None,
    account_alias: str | None,
    password_file: Path | None,
    account_index: int | None,
) -> None:
    """Put this registered trainer back in the quorum: a bare vote (`Models.join`) in
    the phase open when it is mined, so that the next phase waits for its vote.

    A worker does this by itself when it finds itself out of the quorum; a person needs
    it when no worker will in time: an organisation back after the others went on that
    wants its seat before its worker starts (its machine or its training is slow), or a
    trainer run by a client of its own. Then start the worker (or vote) within
    `phaseDuration`: a member that stays silent costs the others that phase's deadline.
    Refused, with nothing sent, when the account is not registered, when it is already a
    member of the open phase (its worker's proposals or aggregations are its vote there),
    or when it already voted in it.
    """
    trainer = signer(keystore, account_alias, password_file, account_index)
    try:
        client = ChainClient(open_deployment(deployment, storage), trainer, rpc_url=rpc)
        trainer_id = client.trainer_id()
        if not trainer_id:
            raise click.ClickException(
                f"{trainer.address} is not a registered trainer of this network: register "
                f"first (`mcfl-chain worker` registers when it starts; under the allowlist "
                f"policy the admin admits the address with `admin allow`)"
            )
        status = client.status()
        where = f"round {status.round}'s {status.phase.name} phase"
        if not status.started:
            raise click.ClickException(
                "rounds have not started (fewer than minTrainers trainers registered): "
                "the trainers registered when round 0 opens are its members; nothing to "
                "join yet"
            )
        if status.voted:
            raise click.ClickException(
                f"trainer {trainer_id} ({trainer.address}) already voted in {where}: it is "
                f"a member of the next phase; nothing to join"
            )
        if status.member:
            raise click.ClickException(
                f"trainer {trainer_id} ({trainer.address}) is already a member of {where}: "
                f"its vote there is its worker's "
                f"{'proposals' if status.phase is Phase.PROPOSE else 'aggregations'}, "
                f"which a bare vote would replace; start its worker instead"
            )
        landed = client.join()
    except (ChainError, ChainUnusable, ValueError) as exc:
        raise click.ClickException(str(exc)) from None
    if landed is None:
        raise click.ClickException(
            f"the join of trainer {trainer_id} ended an overdue phase instead of counting "
            f"as a vote (it had voted there meanwhile); run `admin join` again"
        )
    round_, phase = landed
    click.echo(
        f"trainer {trainer_id} ({trainer.address}) joined with a bare vote in round "
        f"{round_}'s {phase.name} phase: it is a member of the next phase, which waits for "
        f"its vote until its deadline; start its worker now"
    )
