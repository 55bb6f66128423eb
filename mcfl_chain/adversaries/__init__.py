"""Misbehaving trainers: one module per adversary behind :class:`~.base.Adversary`.

- ``malformed``  garbage-weights, nan-weights, unreachable-cid (updates no one can use)

``make_adversary(name)`` builds one by name; the worker runs honestly without one.
"""

from mcfl_chain.adversaries import malformed
from mcfl_chain.adversaries.base import (
    ADVERSARIES,
    Adversary,
    Publication,
    make_adversary,
    register_adversary,
)

__all__ = [
    "ADVERSARIES",
    "Adversary",
    "Publication",
    "make_adversary",
    "malformed",
    "register_adversary",
]
