"""Configuration files: read a TOML or JSON table, match its keys to known names.

A misspelled key must not run silently with the default, so :func:`match_keys` refuses
every key it does not know and names the closest known one.
"""

from __future__ import annotations

import difflib
import json
import tomllib
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any, Self


class ConfigError(ValueError):
    """A configuration is unreadable or holds a wrong key or value; the message says which."""


def read_mapping(path: str | Path) -> dict[str, Any]:
    """The table of a TOML file, or the object of a ``.json`` file.

    Raises
    ------
    ConfigError
        If the file cannot be read or parsed, or does not hold a table of keys.
    """
    path = Path(path)
    try:
        text = path.read_text()
        data = json.loads(text) if path.suffix == ".json" else tomllib.loads(text)
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read {path}: {exc}") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"{path} must hold an object of keys, not a {type(data).__name__}")
    return data


def match_keys(
    data: Mapping[str, Any],
    names: Collection[str],
    source: str,
    aliases: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """``data`` re-keyed by the known ``names`` it spells, in dash-case or snake_case.

    Parameters
    ----------
    data : Mapping[str, Any]
        Keys as a person wrote them: ``n-trainers`` or ``n_trainers``.
    names : Collection[str]
        The known names, in snake_case.
    source : str
        Where ``data`` comes from (a file name), to open error messages.
    aliases : Mapping[str, str], optional
        Other accepted spellings (snake_case) and the name each stands for.

    Raises
    ------
    ConfigError
        Naming every unknown key with the closest known one, or a name given twice.
    """
    aliases = {**(aliases or {}), **{name: name for name in names}}
    matched: dict[str, Any] = {}
    spelled: dict[str, str] = {}
    problems: list[str] = []
    for key, value in data.items():
        snake = key.replace("-", "_")
        name = aliases.get(snake)
        if name is None:
            problems.append(_unknown(key, sorted(aliases)))
        elif name in matched:
            problems.append(f"{spelled[name]!r} and {key!r} both set {name!r}, keep one")
        else:
            matched[name], spelled[name] = value, key
    if problems:
        raise ConfigError(f"{source}: " + "; ".join(problems))
    return matched


class FileConfig:
    """A configuration that files hold: :meth:`load_file` reads one through the
    class's :meth:`from_mapping`."""

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any], source: str) -> Self:
        """The configuration of keys and values ``data`` read from ``source``."""
        raise NotImplementedError

    @classmethod
    def load_file(cls, path: str | Path) -> Self:
        """The configuration in a TOML file, or a JSON file if its name ends in ``.json``.

        Raises
        ------
        ConfigError
            If the file cannot be read, or as :meth:`from_mapping`.
        """
        return cls.from_mapping(read_mapping(path), source=str(path))


def _unknown(key: str, known: list[str]) -> str:
    """The message for an unknown key: the closest known one, or all of them."""
    dashed = "-" in key
    close = difflib.get_close_matches(key.replace("-", "_"), known, n=1)
    if close:
        suggestion = close[0].replace("_", "-") if dashed else close[0]
        return f"unknown key {key!r} (did you mean {suggestion!r}?)"
    return f"unknown key {key!r} (known keys: {', '.join(known)})"
