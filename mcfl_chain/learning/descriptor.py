"""The network's task descriptor: which architecture trains on which datasets.

Recorded on chain at deployment (``Models.task``), read by every worker, by
``devnet up`` to initialise the genesis weights and by the explorer to decode
weights. One parser, so every reader agrees on aliases and errors.

Format (printable ASCII, at most :data:`MAX_DESCRIPTOR_LENGTH` characters)::

    <architecture>:<dataset>[+<dataset>...][#fp=<fingerprint>]

e.g. ``lenet5:fashion-mnist`` or ``breast-cancer-mlp:clinic-data#fp=3f9c2a4be01d7c55``.
The optional fragment after ``#`` holds ``key=value`` pairs separated by ``&``; the only
key is ``fp``, the model fingerprint of :mod:`mcfl_chain.learning.fingerprint` (8 to 64
hex digits). Architecture and dataset names are letters, digits, ``.``, ``_`` and ``-``.

By default only registered architectures (:data:`~mcfl_chain.learning.models.ARCHITECTURES`)
are accepted; ``registered_only=False`` also accepts the name of a task's own model
(:mod:`mcfl_chain.learning.tasks`), whose fingerprint then says what the model must be.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

from mcfl_chain.learning.fingerprint import fingerprints_match, normalize_fingerprint
from mcfl_chain.learning.models import ARCHITECTURES, MULTI_HEAD_BASES, is_architecture

ARCH_ALIASES = {"lenet": "lenet5", "lenet-5": "lenet5"}
"""Spellings of an architecture that name the same registered one."""

MAX_DESCRIPTOR_LENGTH = 128
"""Longest descriptor :func:`format_task` writes and :func:`parse_task` reads."""

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
_FINGERPRINT_KEY = "fp"


class TaskError(ValueError):
    """A task descriptor or architecture name this package cannot run."""


def canonical_arch(name: str) -> str:
    """The registered architecture ``name`` stands for (aliases resolved, lower case).

    Raises
    ------
    TaskError
        When no registered architecture has that name.
    """
    key = name.strip().lower()
    arch = ARCH_ALIASES.get(key, key)
    if not is_architecture(arch):
        raise TaskError(
            f"unknown architecture {name!r}; known: {', '.join(sorted(ARCHITECTURES))}, "
            f"<base>-heads<k> for base {' or '.join(sorted(MULTI_HEAD_BASES))} "
            f"(aliases: {', '.join(sorted(ARCH_ALIASES))})"
        )
    return arch


def _check_name(kind: str, name: str, text: str) -> str:
    if not _NAME.fullmatch(name):
        raise TaskError(
            f"the task {text!r} has the {kind} name {name!r}: use 1 to 64 letters, digits, "
            f"'.', '_' or '-', starting with a letter or digit"
        )
    return name


@dataclass(frozen=True)
class Task:
    """A parsed task descriptor (see the module docstring for the format).

    Attributes
    ----------
    arch
        Architecture name: a registered one (``lenet`` is read as ``lenet5``), or the
        lower-cased name of a task's own model when parsed with ``registered_only=False``.
    datasets
        The datasets the network's trainers hold, in the descriptor's order.
    fingerprint
        The model fingerprint (lower-case hex) the network's weights have, or None.
    """

    arch: str
    datasets: tuple[str, ...]
    fingerprint: str | None = None

    @property
    def registered(self) -> bool:
        """True when :attr:`arch` is a registered (built-in) architecture."""
        return is_architecture(self.arch)

    @classmethod
    def parse(cls, text: str, *, registered_only: bool = True) -> Task:
        """Parse a descriptor; :class:`TaskError` says what is wrong with it."""
        return parse_task(text, registered_only=registered_only)

    def with_fingerprint(self, fingerprint: str | None) -> Task:
        """The same task carrying ``fingerprint`` (None removes it)."""
        return replace(self, fingerprint=_fingerprint(fingerprint, str(self)))

    def fingerprint_matches(self, fingerprint: str) -> bool:
        """True when the descriptor has no fingerprint or it names ``fingerprint``'s layout."""
        return self.fingerprint is None or fingerprints_match(self.fingerprint, fingerprint)

    def format(self) -> str:
        """The descriptor text; :func:`parse_task` reads it back to an equal :class:`Task`."""
        return format_task(self.arch, self.datasets, self.fingerprint)

    def __str__(self) -> str:
        return self.format()


def _fingerprint(value: str | None, text: str) -> str | None:
    if value is None:
        return None
    try:
        return normalize_fingerprint(value)
    except ValueError as exc:
        raise TaskError(f"the task {text!r}: {exc}") from None


def parse_task(text: str, *, registered_only: bool = True) -> Task:
    """Parse ``"<arch>:<dataset>[+<dataset>...][#fp=<hex>]"`` into a :class:`Task`.

    Parameters
    ----------
    text
        The descriptor, e.g. ``"lenet5:fashion-mnist#fp=3f9c2a4be01d7c55"``.
    registered_only
        Refuse architectures that are not registered (the default, as before
        fingerprints existed); False accepts any well-formed name.

    Returns
    -------
    Task
        Aliases resolved, fingerprint in lower case.

    Raises
    ------
    TaskError
        The descriptor is malformed, too long, names an unknown architecture (with
        ``registered_only``) or carries an unknown or malformed fragment.
    """
    if len(text) > MAX_DESCRIPTOR_LENGTH or not text.isprintable() or not text.isascii():
        raise TaskError(
            f"the task {text[:40]!r}... is not a descriptor: at most {MAX_DESCRIPTOR_LENGTH} "
            f"printable ASCII characters"
        )
    body, hash_sign, fragment = text.partition("#")
    arch, sep, datasets = body.partition(":")
    names = tuple(d.strip() for d in datasets.split("+")) if sep else ()
    if not sep or not all(names):
        raise TaskError(
            f"the task {text!r} is not '<architecture>:<dataset>[+<dataset>...][#fp=<hex>]', "
            f"e.g. 'lenet5:fashion-mnist'"
        )
    for name in names:
        _check_name("dataset", name, text)
    fingerprint = None
    if hash_sign:
        fields = dict(item.partition("=")[::2] for item in fragment.split("&"))
        unknown = sorted(set(fields) - {_FINGERPRINT_KEY})
        if unknown or not fields.get(_FINGERPRINT_KEY):
            raise TaskError(
                f"the task {text!r} has the fragment {fragment!r}; the only one understood "
                f"is '#fp=<hex>' (a model fingerprint)"
            )
        fingerprint = _fingerprint(fields[_FINGERPRINT_KEY], text)
    try:
        arch_name = canonical_arch(arch)
    except TaskError as exc:
        if registered_only:
            raise TaskError(
                f"the task {text!r} names an architecture this package cannot run: {exc}"
            ) from exc
        arch_name = _check_name("architecture", arch.strip(), text).lower()
    return Task(arch_name, names, fingerprint)


def format_task(arch: str, datasets: Sequence[str], fingerprint: str | None = None) -> str:
    """Write a descriptor (inverse of :func:`parse_task`).

    Parameters
    ----------
    arch
        Architecture name (registered, or a task's own model name).
    datasets
        One or more dataset names.
    fingerprint
        Optional model fingerprint, appended as ``#fp=<hex>``.

    Returns
    -------
    str
        E.g. ``"lenet5:fashion-mnist#fp=3f9c2a4be01d7c55"``.

    Raises
    ------
    TaskError
        A name is malformed, no dataset is given, the fingerprint is not hex, or the
        result exceeds :data:`MAX_DESCRIPTOR_LENGTH` characters.
    """
    names = tuple(datasets)
    text = f"{arch}:{'+'.join(names)}"
    if not names:
        raise TaskError(f"the task for {arch!r} names no dataset; give at least one")
    _check_name("architecture", arch, text)
    for name in names:
        _check_name("dataset", name, text)
    fp = _fingerprint(fingerprint, text)
    if fp is not None:
        text += f"#{_FINGERPRINT_KEY}={fp}"
    if len(text) > MAX_DESCRIPTOR_LENGTH:
        raise TaskError(
            f"the task {text!r} has {len(text)} characters, more than the "
            f"{MAX_DESCRIPTOR_LENGTH} allowed: use shorter dataset names"
        )
    return text
