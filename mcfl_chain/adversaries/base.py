"""The small interface a misbehaving trainer implements, and the adversary registry.

The worker plays the honest protocol; an adversary replaces only the steps it corrupts,
through the hooks below (today: what an update publishes). Adding an adversary means
adding a module that subclasses :class:`Adversary` and decorates it with
:func:`register_adversary`; the worker and the CLI pick it up by name.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import torch

StateDict = dict[str, torch.Tensor]


@dataclass(frozen=True)
class Publication:
    """What an honest trainer would publish for one trained update, and how to publish.

    Attributes
    ----------
    weights
        The honestly trained weights.
    parent_weights
        The weights of the model they were trained from.
    trainer
        The trainer's address (adversaries make their fakes unique with it).
    encode
        ``state -> blob``: the network's weights codec for the task's architecture.
    put
        ``blob -> CID``: stores a blob in the trainer's storage.
    """

    weights: StateDict
    parent_weights: StateDict
    trainer: str
    encode: Callable[[StateDict], bytes]
    put: Callable[[bytes], str]


class Adversary(ABC):
    """A trainer that follows the protocol's calls but corrupts what it publishes."""

    name: str = ""

    @abstractmethod
    def publish_update(self, publication: Publication) -> str:
        """Store (or not) this adversary's version of an update; return the CID to propose."""


ADVERSARIES: dict[str, type[Adversary]] = {}
"""Registry: adversary name → class."""

A = TypeVar("A", bound=type[Adversary])


def register_adversary(name: str) -> Callable[[A], A]:
    """Class decorator registering an adversary under ``name``."""

    def decorate(cls: A) -> A:
        cls.name = name
        ADVERSARIES[name] = cls
        return cls

    return decorate


def make_adversary(name: str) -> Adversary:
    """Instantiate a registered adversary by name.

    Raises
    ------
    ValueError
        If no adversary has that name.
    """
    if name not in ADVERSARIES:
        raise ValueError(f"unknown adversary {name!r}; known: {', '.join(sorted(ADVERSARIES))}")
    return ADVERSARIES[name]()
