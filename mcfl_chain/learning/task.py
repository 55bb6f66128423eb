"""The network's task descriptor: which architecture trains on which datasets.

Recorded on chain at deployment (``Models.task``), read by every worker, by
``devnet up`` to initialise the genesis weights and by the explorer to decode
weights. One parser, so every reader agrees on aliases and errors.
"""

from __future__ import annotations

from dataclasses import dataclass

from mcfl_chain.learning.models import ARCHITECTURES

ARCH_ALIASES = {"lenet": "lenet5", "lenet-5": "lenet5"}
"""Spellings of an architecture that name the same registered one."""


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
    if arch not in ARCHITECTURES:
        raise TaskError(
            f"unknown architecture {name!r}; known: {', '.join(sorted(ARCHITECTURES))} "
            f"(aliases: {', '.join(sorted(ARCH_ALIASES))})"
        )
    return arch


@dataclass(frozen=True)
class Task:
    """A parsed task descriptor, ``"<architecture>:<dataset>[+<dataset>...]"``.

    Attributes
    ----------
    arch
        Registered architecture name (``lenet`` is read as ``lenet5``).
    datasets
        The datasets the network's trainers hold, in the descriptor's order.
    """

    arch: str
    datasets: tuple[str, ...]

    @classmethod
    def parse(cls, text: str) -> Task:
        """Parse a descriptor; :class:`TaskError` says what is wrong with it."""
        arch, sep, datasets = text.partition(":")
        names = tuple(d.strip() for d in datasets.split("+")) if sep else ()
        if not sep or not all(names):
            raise TaskError(
                f"the task {text!r} is not '<architecture>:<dataset>[+<dataset>...]', "
                f"e.g. 'lenet5:fashion-mnist'"
            )
        try:
            return cls(canonical_arch(arch), names)
        except TaskError as exc:
            raise TaskError(
                f"the task {text!r} names an architecture this package cannot run: {exc}"
            ) from exc

    def __str__(self) -> str:
        return f"{self.arch}:{'+'.join(self.datasets)}"
