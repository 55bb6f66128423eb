"""``mcfl-chain account`` and the signing options: addresses shown, secrets never."""

from __future__ import annotations

import importlib
import json
import logging
from pathlib import Path

import click
import pytest
from click.testing import CliRunner
from eth_account import Account

from mcfl_chain.chain.accounts import PASSWORD_ENV, PRIVATE_KEY_ENV
from mcfl_chain.cli import main
from mcfl_chain.cli.account import signing_account, signing_options

# The module, not the `account` group that mcfl_chain.cli re-exports under its name.
account_cli = importlib.import_module("mcfl_chain.cli.account")

PASSWORD = "tr0ub4dor&3 cli"


@pytest.fixture(autouse=True)
def isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No real home, ape folder or password in the environment; not a terminal."""
    for name in (PASSWORD_ENV, PRIVATE_KEY_ENV, "MCFL_KEYSTORE_DIR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("APE_DATA_FOLDER", str(tmp_path / "ape"))
    monkeypatch.setattr(account_cli, "_interactive", lambda: False)


def _run(args: list[str], caplog: pytest.LogCaptureFixture, **kwargs) -> tuple[int, str]:
    caplog.set_level(logging.DEBUG)
    result = CliRunner().invoke(main, args, **kwargs)
    logged = "\n".join(r.getMessage() for r in caplog.records)
    return result.exit_code, f"{result.output}\n{logged}"


def _secret_free(text: str, *secrets: str) -> bool:
    return not any(s.lower() in text.lower() for s in secrets if s)


def _password_file(tmp_path: Path) -> Path:
    file = tmp_path / "password"
    file.write_text(PASSWORD + "\n")
    return file


def _key_of(path: Path, password: str = PASSWORD) -> str:
    return Account.decrypt(json.loads(path.read_text()), password).hex()


def test_new_prints_only_address_and_path(tmp_path: Path, caplog) -> None:
    # Execute
    code, output = _run(
        [
            "account",
            "new",
            "--dir",
            str(tmp_path / "keys"),
            "--password-file",
            str(_password_file(tmp_path)),
        ],
        caplog,
    )

    # Assert
    assert code == 0, output
    (path,) = (tmp_path / "keys").glob("UTC--*.json")
    key = _key_of(path)
    address = Account.from_key(key).address
    assert f"address: {address}\nkeystore: {path}\n" in output
    assert _secret_free(output, key.removeprefix("0x"), PASSWORD)


def test_new_from_the_environment_refuses_to_overwrite(
    tmp_path: Path, caplog, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Prepare
    monkeypatch.setenv(PASSWORD_ENV, PASSWORD)
    target = tmp_path / "trainer.json"

    # Execute
    first, output = _run(["account", "new", "--keystore", str(target)], caplog)
    key = _key_of(target)
    second, refused = _run(["account", "new", "--keystore", str(target)], caplog)

    # Assert
    assert first == 0 and second == 1
    assert f"Error: {target} exists already; choose another path" in refused
    assert _key_of(target) == key
    assert _secret_free(output + refused, key.removeprefix("0x"), PASSWORD)


def test_new_asks_twice_in_a_terminal_without_echo(
    tmp_path: Path, caplog, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Prepare
    monkeypatch.setattr(account_cli, "_interactive", lambda: True)
    target = tmp_path / "typed.json"

    # Execute
    code, output = _run(
        ["account", "new", "--keystore", str(target)], caplog, input=f"{PASSWORD}\n{PASSWORD}\n"
    )

    # Assert
    assert code == 0, output
    assert "Password of the new keystore:" in output and "Repeat for confirmation:" in output
    assert _secret_free(output, _key_of(target).removeprefix("0x"), PASSWORD)


def test_new_without_any_password_source_says_what_to_give(tmp_path: Path, caplog) -> None:
    # Execute
    code, output = _run(["account", "new", "--keystore", str(tmp_path / "k.json")], caplog)

    # Assert
    assert code == 1
    assert output.startswith(
        "Error: no password for the new keystore: give --password-file FILE, set "
        f"{PASSWORD_ENV}, or run in a terminal to be asked\n"
    )
    assert not (tmp_path / "k.json").exists()


def _fast_keystore(path: Path, password: str = PASSWORD) -> tuple[str, str]:
    account = Account.create()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(Account.encrypt(account.key, password, kdf="pbkdf2", iterations=2)))
    return account.address, account.key.hex()


def test_show_and_check_a_keystore(tmp_path: Path, caplog) -> None:
    # Prepare
    address, key = _fast_keystore(tmp_path / "k.json")
    wrong = tmp_path / "wrong"
    wrong.write_text("not it\n")

    # Execute
    shown = _run(["account", "show", "--keystore", str(tmp_path / "k.json")], caplog)
    checked = _run(
        [
            "account",
            "show",
            "--keystore",
            str(tmp_path / "k.json"),
            "--check",
            "--password-file",
            str(_password_file(tmp_path)),
        ],
        caplog,
    )
    refused = _run(
        [
            "account",
            "show",
            "--keystore",
            str(tmp_path / "k.json"),
            "--check",
            "--password-file",
            str(wrong),
        ],
        caplog,
    )

    # Assert
    assert shown[0] == 0 and f"address: {address}" in shown[1]
    assert checked[0] == 0 and "password: correct" in checked[1]
    assert refused[0] == 1
    assert f"Error: wrong password for the keystore {tmp_path / 'k.json'}" in refused[1]
    everything = shown[1] + checked[1] + refused[1]
    assert _secret_free(everything, key.removeprefix("0x"), PASSWORD, "not it")


def test_show_and_list_ape_accounts(tmp_path: Path, caplog) -> None:
    # Prepare: an ape account and a keystore in the default folder.
    ape_address, _ = _fast_keystore(tmp_path / "ape" / "accounts" / "alice.json")
    own_address, _ = _fast_keystore(tmp_path / "home" / ".mcfl-chain" / "keystore" / "k.json")

    # Execute
    shown = _run(["account", "show", "--account", "alice"], caplog)
    listed = _run(["account", "list"], caplog)
    unknown = _run(["account", "show", "--account", "bob"], caplog)

    # Assert
    assert shown[0] == 0 and f"address: {ape_address}" in shown[1]
    assert f"{ape_address}  ape:alice" in listed[1]
    assert (
        f"{own_address}  {tmp_path / 'home' / '.mcfl-chain' / 'keystore' / 'k.json'}" in (listed[1])
    )
    assert unknown[0] == 1 and "no ape account 'bob'" in unknown[1]


def test_list_when_there_is_nothing(caplog) -> None:
    # Execute
    code, output = _run(["account", "list"], caplog)

    # Assert
    assert code == 0 and "create one with `mcfl-chain account new`" in output


@click.command()
@signing_options
def _signer(keystore, account_alias, password_file) -> None:
    click.echo(f"signer {signing_account(keystore, account_alias, password_file).address}")


@pytest.mark.parametrize("source", ["keystore", "ape", "environment", "prompt"])
def test_signing_options_load_every_source_without_showing_it(
    tmp_path: Path, caplog, monkeypatch: pytest.MonkeyPatch, source: str
) -> None:
    # Prepare
    address, key = _fast_keystore(tmp_path / "ape" / "accounts" / "bob.json")
    (tmp_path / "k.json").write_text((tmp_path / "ape" / "accounts" / "bob.json").read_text())
    args, stdin = {
        "keystore": (["--keystore", str(tmp_path / "k.json")], None),
        "ape": (["--account", "bob"], None),
        "environment": ([], None),
        "prompt": (["--keystore", str(tmp_path / "k.json")], PASSWORD + "\n"),
    }[source]
    if source in ("keystore", "ape"):
        args += ["--password-file", str(_password_file(tmp_path))]
    if source == "environment":
        monkeypatch.setenv(PRIVATE_KEY_ENV, key)
    if source == "prompt":
        monkeypatch.setattr(account_cli, "_interactive", lambda: True)
    caplog.set_level(logging.DEBUG)

    # Execute
    result = CliRunner().invoke(_signer, args, input=stdin)

    # Assert
    output = result.output + "\n".join(r.getMessage() for r in caplog.records)
    assert result.exit_code == 0, result.output
    assert f"signer {address}" in result.output
    assert _secret_free(output, key.removeprefix("0x"), PASSWORD)


def test_signing_options_fail_in_one_line(caplog, monkeypatch: pytest.MonkeyPatch) -> None:
    # Prepare
    monkeypatch.setenv(PRIVATE_KEY_ENV, "0x1234abcd")

    # Execute
    result = CliRunner().invoke(_signer, [])

    # Assert
    assert result.exit_code == 1
    assert result.output == (
        f"Error: {PRIVATE_KEY_ENV} is not a private key: expected 64 hex digits (32 bytes), "
        "optionally prefixed by 0x\n"
    )
