"""Signing accounts from keystores, ape's key files and the environment — and no secret
ever shown: every path's messages, output and log records are searched for the key and
the password."""

from __future__ import annotations

import json
import logging
import os
import re
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from eth_account import Account

from mcfl_chain.chain.accounts import (
    PASSWORD_ENV,
    PRIVATE_KEY_ENV,
    AccountError,
    account_from_env,
    ape_accounts_dir,
    ape_aliases,
    create_keystore,
    keystore_address,
    load_ape_account,
    load_keystore,
    load_signing_account,
    read_password,
)

PASSWORD = "correct horse battery staple 7f3a"
# A fixed key so that a leak is searchable; never funded anywhere.
KEY_HEX = "4c0883a69102937d6231471b5dbb6204fe5129617082792ae468d01a3f362318"
ADDRESS = Account.from_key("0x" + KEY_HEX).address


def _keystore_json(password: str = PASSWORD, key_hex: str = KEY_HEX) -> dict:
    # pbkdf2 with few iterations keeps the tests fast; the format is the standard one.
    return Account.encrypt(bytes.fromhex(key_hex), password, kdf="pbkdf2", iterations=2)


@pytest.fixture
def keystore(tmp_path: Path) -> Path:
    path = tmp_path / "trainer.json"
    path.write_text(json.dumps(_keystore_json()))
    return path


@pytest.fixture
def ape_home(tmp_path: Path) -> dict[str, str]:
    """An ape data folder with the account 'trainer1', as `ape accounts import` writes it."""
    folder = tmp_path / "ape" / "accounts"
    folder.mkdir(parents=True)
    (folder / "trainer1.json").write_text(json.dumps(_keystore_json()))
    return {"APE_DATA_FOLDER": str(tmp_path / "ape")}


@pytest.fixture
def no_secret(caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture) -> Iterator[list]:
    """Collects extra texts (messages); afterwards checks them, stdout, stderr and logs."""
    caplog.set_level(logging.DEBUG)
    texts: list[str] = []
    yield texts
    out, err = capsys.readouterr()
    records = [r for phase in ("setup", "call") for r in caplog.get_records(phase)]
    logged = [f"{r.getMessage()} {r.args!r} {r.exc_text or ''}" for r in records]
    _assert_no_secret("\n".join([*texts, out, err, *logged]))


def _assert_no_secret(text: str, *extra: str) -> None:
    lowered = text.lower()
    for secret in (KEY_HEX, PASSWORD.lower(), *[e.lower() for e in extra]):
        assert secret not in lowered
    # Not even a long piece of the key.
    assert not any(KEY_HEX[i : i + 16] in lowered for i in range(0, 48, 8))


def _error(call, *args, **kwargs) -> str:
    with pytest.raises(AccountError) as raised:
        call(*args, **kwargs)
    error = raised.value
    # Nothing chained that a traceback would print (an exception may quote the secret).
    assert error.__cause__ is None
    assert error.__context__ is None or error.__suppress_context__
    return f"{error}\n{error!r}"


def test_keystore_loads_with_its_password(keystore: Path, no_secret: list, caplog) -> None:
    # Execute
    account = load_keystore(keystore, PASSWORD)

    # Assert
    assert account.address == ADDRESS
    assert keystore_address(keystore) == ADDRESS
    assert f"signing as {ADDRESS}" in caplog.text  # the log is captured: it names the address


@pytest.mark.parametrize(
    "content, match",
    [
        (None, "does not exist; create one with `mcfl-chain account new`"),
        ("{not json", "is not a keystore: it is not JSON"),
        ('{"version": 3}', "is not an Ethereum keystore"),
        ("directory", "cannot read the keystore .*IsADirectoryError"),
    ],
)
def test_unusable_keystores_say_why(
    tmp_path: Path, content: str | None, match: str, no_secret: list
) -> None:
    # Prepare
    path = tmp_path / "k.json"
    if content == "directory":
        path.mkdir()
    elif content is not None:
        path.write_text(content)

    # Execute
    message = _error(load_keystore, path, PASSWORD)

    # Assert
    no_secret.append(message)
    assert re.search(match, message)


def test_wrong_password_is_one_line_naming_file_and_address(
    keystore: Path, no_secret: list
) -> None:
    # Execute
    message = _error(load_keystore, keystore, PASSWORD + "x")

    # Assert
    no_secret.append(message)
    assert str(message).splitlines()[0] == (
        f"wrong password for the keystore {keystore} (address {ADDRESS})"
    )


def test_a_keystore_whose_address_was_altered_is_refused(tmp_path: Path, no_secret: list) -> None:
    # Prepare
    data = _keystore_json()
    data["address"] = "00" * 20
    path = tmp_path / "altered.json"
    path.write_text(json.dumps(data))

    # Execute
    message = _error(load_keystore, path, PASSWORD)

    # Assert
    no_secret.append(message)
    assert f"its key belongs to {ADDRESS}: the file was altered" in message


def test_ape_account_from_its_key_file(ape_home: dict, no_secret: list) -> None:
    # Execute
    account = load_ape_account("trainer1", PASSWORD, env=ape_home)

    # Assert
    assert account.address == ADDRESS
    assert ape_aliases(ape_home) == ["trainer1"]
    assert ape_accounts_dir(ape_home) == Path(ape_home["APE_DATA_FOLDER"]) / "accounts"


def test_ape_default_folder_is_home_dot_ape(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    # Prepare
    monkeypatch.setenv("HOME", str(tmp_path))

    # Execute / Assert
    assert ape_accounts_dir({}) == tmp_path / ".ape" / "accounts"


def test_unknown_ape_alias_lists_the_known_ones(ape_home: dict, no_secret: list) -> None:
    # Execute
    message = _error(load_ape_account, "trainer2", PASSWORD, env=ape_home)

    # Assert
    no_secret.append(message)
    assert "no ape account 'trainer2'" in message and "(known: trainer1)" in message
    assert "ape accounts generate trainer2" in message


def test_wrong_ape_password(ape_home: dict, no_secret: list) -> None:
    # Execute
    message = _error(load_ape_account, "trainer1", "nope", env=ape_home)

    # Assert
    no_secret.append(message)
    assert message.startswith("wrong password for ape account 'trainer1'")


def test_password_sources_in_order(tmp_path: Path, no_secret: list) -> None:
    # Prepare
    file = tmp_path / "password.txt"
    file.write_text(PASSWORD + "\r\nsecond line ignored\n")
    env = {PASSWORD_ENV: "from-env", "APE_ACCOUNTS_t1_PASSPHRASE": "from-ape"}
    asked: list[str] = []

    def prompt(question: str) -> str:
        asked.append(question)
        return "typed"

    # Execute
    found = [
        read_password(password_file=file, env=env, prompt=prompt),
        read_password(env=env, prompt=prompt, alias="t1"),
        read_password(env={"APE_ACCOUNTS_t1_PASSPHRASE": "from-ape"}, prompt=prompt, alias="t1"),
        read_password(env={}, prompt=prompt, what="the keystore k.json"),
    ]

    # Assert
    assert found == [PASSWORD, "from-env", "from-ape", "typed"]
    assert asked == ["Password of the keystore k.json"]


def test_no_password_source_says_which_to_give(tmp_path: Path, no_secret: list) -> None:
    # Execute
    missing_file = _error(read_password, password_file=tmp_path / "absent", env={})
    nothing = _error(read_password, env={}, alias="t1")

    # Assert
    no_secret.extend([missing_file, nothing])
    assert "the password file" in missing_file and "does not exist" in missing_file
    assert f"--password-file FILE, set {PASSWORD_ENV}, APE_ACCOUNTS_t1_PASSPHRASE" in nothing


@pytest.mark.parametrize("value", [KEY_HEX, "0x" + KEY_HEX, f"  0x{KEY_HEX.upper()}\n"])
def test_key_from_the_environment(value: str, no_secret: list) -> None:
    # Execute
    account = account_from_env({PRIVATE_KEY_ENV: value})

    # Assert
    assert account.address == ADDRESS


@pytest.mark.parametrize(
    "value, match",
    [
        (None, f"{PRIVATE_KEY_ENV} is not set"),
        (KEY_HEX[:-1], "expected 64 hex digits"),
        (KEY_HEX[:-1] + "g", "expected 64 hex digits"),
        ("0x" + KEY_HEX + "00", "expected 64 hex digits"),
        ("0" * 64, "not a valid secp256k1 private key"),
        ("f" * 64, "not a valid secp256k1 private key"),
    ],
)
def test_malformed_environment_keys_are_never_echoed(
    value: str | None, match: str, no_secret: list
) -> None:
    # Execute
    message = _error(account_from_env, {} if value is None else {PRIVATE_KEY_ENV: value})

    # Assert
    no_secret.append(message)
    assert match in message
    if value is not None:
        _assert_no_secret(message, value.strip()[-40:])


def test_load_signing_account_picks_the_source_given(
    keystore: Path, ape_home: dict, tmp_path: Path, no_secret: list
) -> None:
    # Prepare
    other = Account.create()
    env = {**ape_home, PASSWORD_ENV: PASSWORD, PRIVATE_KEY_ENV: other.key.hex()}
    password_file = tmp_path / "pw"
    password_file.write_text(PASSWORD)

    # Execute
    from_keystore = load_signing_account(keystore=keystore, password_file=password_file, env=env)
    from_ape = load_signing_account(account="trainer1", env=env)
    from_env = load_signing_account(env=env)

    # Assert
    assert from_keystore.address == from_ape.address == ADDRESS
    assert from_env.address == other.address


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"keystore": "k.json", "account": "a"}, "not both"),
        ({}, "no signing account: give --keystore FILE"),
        ({"keystore": "absent.json"}, "does not exist"),
    ],
)
def test_load_signing_account_errors(
    tmp_path: Path, kwargs: dict, match: str, no_secret: list
) -> None:
    # Prepare
    if "keystore" in kwargs:
        kwargs = {**kwargs, "keystore": tmp_path / kwargs["keystore"]}
    asked: list[str] = []

    # Execute: a missing file fails before anyone is asked for a password.
    message = _error(load_signing_account, env={}, prompt=asked.append, **kwargs)

    # Assert
    no_secret.append(message)
    assert match in message and asked == []


def test_create_keystore_writes_a_standard_owner_only_keystore(
    tmp_path: Path, no_secret: list
) -> None:
    # Execute
    address, path = create_keystore(PASSWORD, directory=tmp_path / "keys", kdf="pbkdf2")

    # Assert
    assert path.parent == tmp_path / "keys"
    assert path.name.startswith("UTC--") and path.name.endswith(f"--{address[2:].lower()}.json")
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    key = Account.decrypt(json.loads(path.read_text()), PASSWORD)
    assert Account.from_key(key).address == address == keystore_address(path)
    no_secret.append(path.read_text())  # the file holds neither the key nor the password
    _assert_no_secret(path.read_text(), key.hex())


def test_create_keystore_refuses_empty_passwords_and_overwrites(
    keystore: Path, no_secret: list
) -> None:
    # Prepare
    before = keystore.read_bytes()

    # Execute
    empty = _error(create_keystore, "", keystore.parent / "new.json")
    exists = _error(create_keystore, PASSWORD, keystore, kdf="pbkdf2")

    # Assert
    no_secret.extend([empty, exists])
    assert "refusing an empty password" in empty
    assert "exists already" in exists
    assert keystore.read_bytes() == before
    assert not (keystore.parent / "new.json").exists()
