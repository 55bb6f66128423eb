"""A trainer's signing account, kept as the Ethereum ecosystem keeps keys.

Three sources, for three situations:

- an encrypted JSON keystore (Web3 Secret Storage, "keystore v3", as geth, Foundry's
  ``cast wallet`` and :func:`create_keystore` write): ``--keystore FILE``;
- an account of ape (``ape accounts generate|import ALIAS``), whose key file is such a
  keystore at ``$APE_DATA_FOLDER/accounts/ALIAS.json`` (``~/.ape/accounts`` by
  default, ape 0.8): ``--account ALIAS``. The file is read directly, so ape's own
  interactive unlock prompt is never involved;
- a raw private key in the environment variable :data:`PRIVATE_KEY_ENV`, for CI only
  (never on a command line, where every user of the machine can read it).

The password of a keystore comes, in order, from a password file (its first line),
the environment variable :data:`PASSWORD_ENV`, for an ape account from ape's own
``APE_ACCOUNTS_<alias>_PASSPHRASE``, then from an interactive prompt when the caller
provides one (:func:`read_password`).

No key and no password is ever written to a message, a log record or an exception
chained to one: errors name the file, the address and what to do.
"""

from __future__ import annotations

import json
import logging
import os
import re
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Literal

from eth_account import Account
from eth_account.signers.local import LocalAccount
from eth_utils import to_checksum_address

from mcfl_chain.chain.errors import ChainError

log = logging.getLogger(__name__)

PASSWORD_ENV = "MCFL_KEYSTORE_PASSWORD"
"""Environment variable holding a keystore's password (non-interactive use)."""

PRIVATE_KEY_ENV = "MCFL_PRIVATE_KEY"
"""Environment variable holding a raw hex private key (CI only)."""

KEYSTORE_DIR_ENV = "MCFL_KEYSTORE_DIR"
"""Environment variable naming the folder where ``account new`` writes keystores."""

APE_DATA_FOLDER_ENV = "APE_DATA_FOLDER"
"""ape's own variable moving its data folder (``~/.ape`` by default)."""

_KEY = re.compile(r"(0x)?[0-9a-fA-F]{64}")

Prompt = Callable[[str], str]
"""Asks a person for a password: ``prompt(question) -> answer`` (input not echoed)."""


class AccountError(ChainError):
    """A signing account cannot be loaded or created; the message says what to do."""


def default_keystore_dir(env: Mapping[str, str] | None = None) -> Path:
    """Where ``mcfl-chain account new`` writes keystores: ``$MCFL_KEYSTORE_DIR`` or
    ``~/.mcfl-chain/keystore``."""
    env = os.environ if env is None else env
    if env.get(KEYSTORE_DIR_ENV):
        return Path(env[KEYSTORE_DIR_ENV]).expanduser()
    return Path.home() / ".mcfl-chain" / "keystore"


def ape_accounts_dir(env: Mapping[str, str] | None = None) -> Path:
    """ape's account folder: ``$APE_DATA_FOLDER/accounts``, by default ``~/.ape/accounts``."""
    env = os.environ if env is None else env
    data = Path(env[APE_DATA_FOLDER_ENV]) if env.get(APE_DATA_FOLDER_ENV) else Path.home() / ".ape"
    return data.expanduser() / "accounts"


def ape_aliases(env: Mapping[str, str] | None = None) -> list[str]:
    """The aliases of ape's accounts (its key files' names), sorted."""
    folder = ape_accounts_dir(env)
    return sorted(p.stem for p in folder.glob("*.json")) if folder.is_dir() else []


def ape_keyfile(alias: str, env: Mapping[str, str] | None = None) -> Path:
    """The key file of ape's account ``alias``.

    Raises
    ------
    AccountError
        No such account (the message lists the known aliases).
    """
    folder = ape_accounts_dir(env)
    if not alias or "/" in alias or alias.startswith("."):
        raise AccountError(f"{alias!r} is not an ape account alias")
    path = folder / f"{alias}.json"
    if not path.is_file():
        known = ", ".join(ape_aliases(env)) or "none"
        raise AccountError(
            f"no ape account {alias!r} in {folder} (known: {known}); create it with "
            f"`ape accounts generate {alias}` or `ape accounts import {alias}`, or set "
            f"{APE_DATA_FOLDER_ENV} to ape's data folder"
        )
    return path


def _read_keystore(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise AccountError(
            f"the keystore {path} does not exist; create one with `mcfl-chain account new` "
            f"or check the path"
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise AccountError(f"cannot read the keystore {path}: {exc.__class__.__name__}") from None
    try:
        data = json.loads(text)
    except ValueError:
        raise AccountError(f"{path} is not a keystore: it is not JSON") from None
    crypto = data.get("crypto", data.get("Crypto")) if isinstance(data, dict) else None
    if not isinstance(crypto, dict) or "ciphertext" not in crypto:
        raise AccountError(
            f"{path} is not an Ethereum keystore (no 'crypto' section with a ciphertext)"
        )
    return data  # type: ignore[no-any-return]


def _declared_address(data: Mapping[str, Any]) -> str | None:
    address = data.get("address")
    if not isinstance(address, str):
        return None
    try:
        return str(to_checksum_address(address if address.startswith("0x") else "0x" + address))
    except ValueError:
        return None


def keystore_address(path: str | os.PathLike[str]) -> str | None:
    """The checksummed address a keystore declares (read without its password), or None.

    Raises
    ------
    AccountError
        The file is missing, unreadable or not a keystore.
    """
    return _declared_address(_read_keystore(Path(path)))


def read_password(
    *,
    password_file: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    prompt: Prompt | None = None,
    alias: str | None = None,
    what: str = "the keystore",
) -> str:
    """A keystore's password from the first source that has one.

    Parameters
    ----------
    password_file
        A file whose first line is the password (the line ending is not part of it).
    env
        Environment to read :data:`PASSWORD_ENV` (and ape's variable) from;
        ``os.environ`` by default.
    prompt
        Asks a person; only called when no other source has a password.
    alias
        For an ape account: also read ``APE_ACCOUNTS_<alias>_PASSPHRASE``.
    what
        Names the keystore in the prompt and errors.

    Raises
    ------
    AccountError
        The password file is unreadable, or no source has a password.
    """
    env = os.environ if env is None else env
    if password_file is not None:
        file = Path(password_file)
        try:
            lines = file.read_text(encoding="utf-8").splitlines()
        except FileNotFoundError:
            raise AccountError(f"the password file {file} does not exist") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise AccountError(
                f"cannot read the password file {file}: {exc.__class__.__name__}"
            ) from None
        return lines[0] if lines else ""
    if env.get(PASSWORD_ENV):
        return env[PASSWORD_ENV]
    ape_variable = f"APE_ACCOUNTS_{alias}_PASSPHRASE" if alias else None
    if ape_variable and env.get(ape_variable):
        return env[ape_variable]
    if prompt is not None:
        return prompt(f"Password of {what}")
    also = f", {ape_variable}" if ape_variable else ""
    raise AccountError(
        f"no password for {what}: give --password-file FILE, set {PASSWORD_ENV}{also}, "
        f"or run in a terminal to be asked"
    )


def _decrypt(data: Mapping[str, Any], password: str, where: str) -> LocalAccount:
    try:
        key = Account.decrypt(dict(data), password)
    except ValueError as exc:
        if "MAC mismatch" in str(exc):
            address = _declared_address(data)
            shown = f" (address {address})" if address else ""
            raise AccountError(f"wrong password for {where}{shown}") from None
        raise AccountError(
            f"{where} cannot be decrypted: unsupported or damaged keystore"
        ) from None
    except (KeyError, TypeError, NotImplementedError):
        raise AccountError(
            f"{where} cannot be decrypted: unsupported or damaged keystore"
        ) from None
    account: LocalAccount = Account.from_key(key)
    declared = _declared_address(data)
    if "address" in data and declared != account.address:
        raise AccountError(
            f"{where} declares the address {declared or data['address']!r} but its key "
            f"belongs to {account.address}: the file was altered; do not use it"
        )
    return account


def load_keystore(path: str | os.PathLike[str], password: str) -> LocalAccount:
    """Decrypt a JSON keystore.

    Raises
    ------
    AccountError
        Missing or unreadable file, not a keystore, wrong password, or a key that does
        not match the address the file declares.
    """
    file = Path(path).expanduser()
    account = _decrypt(_read_keystore(file), password, f"the keystore {file}")
    log.debug("signing as %s (keystore %s)", account.address, file)
    return account


def load_ape_account(
    alias: str, password: str, env: Mapping[str, str] | None = None
) -> LocalAccount:
    """Decrypt ape's account ``alias`` from its key file (no ape import, no prompt).

    Raises
    ------
    AccountError
        Unknown alias, damaged key file or wrong password.
    """
    path = ape_keyfile(alias, env)
    account = _decrypt(_read_keystore(path), password, f"ape account {alias!r} ({path})")
    log.debug("signing as %s (ape account %r)", account.address, alias)
    return account


def account_from_env(env: Mapping[str, str] | None = None) -> LocalAccount:
    """The account whose raw hex private key is in :data:`PRIVATE_KEY_ENV` (CI only).

    Raises
    ------
    AccountError
        The variable is not set, or does not hold 64 hex digits of a valid key (the
        value itself is never shown).
    """
    env = os.environ if env is None else env
    value = env.get(PRIVATE_KEY_ENV, "").strip()
    if not value:
        raise AccountError(
            f"{PRIVATE_KEY_ENV} is not set; give --keystore FILE or --account ALIAS instead"
        )
    if not _KEY.fullmatch(value):
        raise AccountError(
            f"{PRIVATE_KEY_ENV} is not a private key: expected 64 hex digits (32 bytes), "
            f"optionally prefixed by 0x"
        )
    try:
        account: LocalAccount = Account.from_key(value)
    except Exception:  # eth-keys refuses 0 and keys beyond the curve order
        raise AccountError(
            f"{PRIVATE_KEY_ENV} is not a valid secp256k1 private key (zero or too large)"
        ) from None
    log.debug("signing as %s (key from %s)", account.address, PRIVATE_KEY_ENV)
    return account


def load_signing_account(
    *,
    keystore: str | os.PathLike[str] | None = None,
    account: str | None = None,
    password_file: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    prompt: Prompt | None = None,
) -> LocalAccount:
    """The trainer's signing account from the first source given.

    Parameters
    ----------
    keystore
        A JSON keystore file (``--keystore``).
    account
        An ape account alias (``--account``).
    password_file
        The password's file (``--password-file``); see :func:`read_password`.
    env
        Environment for :data:`PASSWORD_ENV` and :data:`PRIVATE_KEY_ENV`.
    prompt
        Asks a person for the password when nothing else gives it.

    Returns
    -------
    eth_account.signers.local.LocalAccount
        Ready for :class:`~mcfl_chain.chain.client.ChainClient` (``account=``).

    Raises
    ------
    AccountError
        Both or neither of a keystore and an alias without :data:`PRIVATE_KEY_ENV`, or
        any failure of the chosen source.
    """
    if keystore is not None and account is not None:
        raise AccountError("give --keystore FILE or --account ALIAS, not both")
    if keystore is not None:
        path = Path(keystore).expanduser()
        _read_keystore(path)  # a missing file fails before any prompt
        password = read_password(
            password_file=password_file, env=env, prompt=prompt, what=f"the keystore {path}"
        )
        return load_keystore(path, password)
    if account is not None:
        ape_keyfile(account, env)
        password = read_password(
            password_file=password_file,
            env=env,
            prompt=prompt,
            alias=account,
            what=f"ape account {account!r}",
        )
        return load_ape_account(account, password, env)
    if (os.environ if env is None else env).get(PRIVATE_KEY_ENV):
        return account_from_env(env)
    raise AccountError(
        f"no signing account: give --keystore FILE (create one with `mcfl-chain account "
        f"new`), --account ALIAS (an ape account), or set {PRIVATE_KEY_ENV} (CI only)"
    )


def create_keystore(
    password: str,
    path: str | os.PathLike[str] | None = None,
    *,
    directory: str | os.PathLike[str] | None = None,
    kdf: Literal["scrypt", "pbkdf2"] = "scrypt",
    iterations: int | None = None,
) -> tuple[str, Path]:
    """Generate a key and write it encrypted as a JSON keystore (owner-only permissions).

    Parameters
    ----------
    password
        Encrypts the key; must not be empty.
    path
        The file to write; by default ``UTC--<time>--<address>.json`` (geth's naming)
        in ``directory``.
    directory
        Folder for the default name; :func:`default_keystore_dir` by default.
    kdf
        ``"scrypt"`` (the standard, ~1 s to unlock) or ``"pbkdf2"``.
    iterations
        KDF work factor; the eth-account default when None.

    Returns
    -------
    tuple of (str, pathlib.Path)
        The new account's checksummed address and the keystore's path.

    Raises
    ------
    AccountError
        Empty password, or the file exists already or cannot be written.
    """
    if not password:
        raise AccountError("refusing an empty password: it would leave the key unprotected")
    account: LocalAccount = Account.create()
    if path is None:
        folder = Path(directory).expanduser() if directory is not None else default_keystore_dir()
        stamp = time.strftime("%Y-%m-%dT%H-%M-%S", time.gmtime())
        target = folder / f"UTC--{stamp}--{account.address[2:].lower()}.json"
    else:
        target = Path(path).expanduser()
    keystore = Account.encrypt(account.key, password, kdf=kdf, iterations=iterations)
    try:
        target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        descriptor = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        raise AccountError(f"{target} exists already; choose another path") from None
    except OSError as exc:
        raise AccountError(f"cannot write the keystore {target}: {exc.strerror}") from None
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        json.dump(keystore, handle)
    log.info("created account %s (keystore %s)", account.address, target)
    return account.address, target
