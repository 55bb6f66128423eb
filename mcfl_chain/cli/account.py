"""``mcfl-chain account new|show|list``: a trainer's key in an encrypted keystore.

Also the options every signing command shares (:func:`signing_options`) and the one
call that turns them into an account (:func:`signing_account`), so that every command
reads keys the same way and never prints one.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click
from eth_account.signers.local import LocalAccount

from mcfl_chain.chain._tx import as_account
from mcfl_chain.chain.accounts import (
    PASSWORD_ENV,
    PRIVATE_KEY_ENV,
    AccountError,
    ape_accounts_dir,
    ape_aliases,
    ape_keyfile,
    create_keystore,
    default_keystore_dir,
    keystore_address,
    load_signing_account,
    read_password,
)

F = TypeVar("F", bound=Callable[..., Any])


def _interactive() -> bool:
    """True when a person can answer a password prompt on this terminal."""
    return sys.stdin.isatty()


def _prompt(question: str) -> str:
    return str(click.prompt(question, hide_input=True, err=True))


def password_prompt() -> Callable[[str], str] | None:
    """A hidden-input password prompt when a person is at the terminal, else None."""
    return _prompt if _interactive() else None


def _prompt_new(question: str) -> str:
    return str(click.prompt(question, hide_input=True, confirmation_prompt=True, err=True))


def signing_options(command: F) -> F:
    """Add ``--keystore``, ``--account`` and ``--password-file`` to a click command."""
    options = [
        click.option(
            "--keystore",
            type=click.Path(dir_okay=False, path_type=Path),
            default=None,
            help="Encrypted JSON keystore of the signing account (`mcfl-chain account new` "
            "writes one).",
        ),
        click.option(
            "--account",
            "account_alias",
            default=None,
            metavar="ALIAS",
            help="An ape account (`ape accounts generate ALIAS`), read from ape's key file.",
        ),
        click.option(
            "--password-file",
            type=click.Path(dir_okay=False, path_type=Path),
            default=None,
            help=f"File whose first line is the keystore's password (else {PASSWORD_ENV}, "
            f"else a prompt). Without --keystore/--account: the key in {PRIVATE_KEY_ENV} "
            f"(CI only).",
        ),
    ]
    return functools.reduce(lambda cmd, option: option(cmd), reversed(options), command)


ACCOUNT_INDEX = click.option(
    "--account-index",
    type=click.IntRange(min=0),
    default=None,
    help="Sign with Anvil's dev account N instead (local devnets only).",
)
"""``--account-index N``, next to :func:`signing_options` on commands that may sign on a
devnet; :func:`signer` turns both into an account."""


def signer(
    keystore: Path | None,
    account_alias: str | None,
    password_file: Path | None,
    account_index: int | None,
) -> LocalAccount:
    """The account of :func:`signing_options` or of :data:`ACCOUNT_INDEX` (not both)."""
    if account_index is not None and (keystore or account_alias or password_file):
        raise click.UsageError("give --account-index or --keystore/--account, not both")
    if account_index is not None:
        return as_account(account_index)
    return signing_account(keystore, account_alias, password_file)


def signing_account(
    keystore: Path | None, account_alias: str | None, password_file: Path | None
) -> LocalAccount:
    """The account :func:`signing_options` name; a one-line ``ClickException`` on failure."""
    try:
        return load_signing_account(
            keystore=keystore,
            account=account_alias,
            password_file=password_file,
            prompt=_prompt if _interactive() else None,
        )
    except AccountError as exc:
        raise click.ClickException(str(exc)) from None


@click.group("account")
def account() -> None:
    """Create and inspect signing accounts (encrypted keystores, ape accounts).

    A worker signs with --keystore FILE or --account ALIAS (an ape account); the
    password comes from --password-file, from MCFL_KEYSTORE_PASSWORD, or from a prompt.
    Keys and passwords are never printed.
    """


@account.command("new")
@click.option(
    "--keystore",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="File to write (refused if it exists). Default: UTC--<time>--<address>.json in --dir.",
)
@click.option(
    "--dir",
    "directory",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Folder for the default file name. Default: $MCFL_KEYSTORE_DIR or ~/.mcfl-chain/keystore.",
)
@click.option(
    "--password-file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help=f"File whose first line is the new password (else {PASSWORD_ENV}, else a prompt).",
)
def new(keystore: Path | None, directory: Path | None, password_file: Path | None) -> None:
    """Generate a key and write it to an encrypted keystore; print its address and path."""
    try:
        password = read_password(
            password_file=password_file,
            prompt=_prompt_new if _interactive() else None,
            what="the new keystore",
        )
        address, path = create_keystore(password, keystore, directory=directory)
    except AccountError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"address: {address}")
    click.echo(f"keystore: {path}")
    click.echo(f"fund the address, then sign with: --keystore {path}", err=True)


@account.command("show")
@click.option(
    "--keystore", type=click.Path(dir_okay=False, path_type=Path), default=None, help="Keystore."
)
@click.option("--account", "account_alias", default=None, metavar="ALIAS", help="ape account.")
@click.option(
    "--check",
    is_flag=True,
    help="Also decrypt it (asks for the password) to check the password and the key.",
)
@click.option(
    "--password-file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Password file for --check.",
)
def show(
    keystore: Path | None, account_alias: str | None, check: bool, password_file: Path | None
) -> None:
    """Print the address of a keystore or an ape account (without its password)."""
    if (keystore is None) == (account_alias is None):
        raise click.UsageError("give --keystore FILE or --account ALIAS")
    try:
        path = keystore if keystore is not None else ape_keyfile(account_alias or "")
        address = keystore_address(path)
    except AccountError as exc:
        raise click.ClickException(str(exc)) from None
    if check:
        loaded = signing_account(keystore, account_alias, password_file)
        address = loaded.address
        click.echo("password: correct")
    click.echo(f"address: {address or 'not recorded in the file (use --check)'}")
    click.echo(f"keystore: {path}")


@account.command("list")
@click.option(
    "--dir",
    "directory",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Keystore folder. Default: $MCFL_KEYSTORE_DIR or ~/.mcfl-chain/keystore.",
)
def list_accounts(directory: Path | None) -> None:
    """List the keystores of a folder and ape's accounts, with their addresses."""
    folder = directory if directory is not None else default_keystore_dir()
    rows: list[tuple[str, str]] = []
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            rows.append((keystore_address(path) or "?", str(path)))
        except AccountError:
            continue
    for alias in ape_aliases():
        try:
            rows.append((keystore_address(ape_keyfile(alias)) or "?", f"ape:{alias}"))
        except AccountError:
            continue
    if not rows:
        click.echo(
            f"no keystore in {folder} and no ape account in {ape_accounts_dir()}; "
            f"create one with `mcfl-chain account new`"
        )
        return
    for address, where in rows:
        click.echo(f"{address}  {where}")
