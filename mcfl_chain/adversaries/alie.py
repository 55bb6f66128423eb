"""ALIE, "a little is enough" (Baruch, Baruch & Goldberg, NeurIPS 2019).

Every coordinate of the malicious update is the honest updates' mean minus ``z_max``
of their standard deviations. Each coordinate then stays within the spread honest
updates show, so that distance- and rank-based rules (Krum, the median, trimmed mean)
take it for a typical update, while every coordinate is pushed the same way.

``z_max`` comes from the number of trainers ``n`` and of attackers ``m``, as in the
paper's Algorithm 3: the attackers need ``s = ⌊n/2 + 1⌋ − m`` honest "supporters" for a
majority, and ``z_max`` is the largest ``z`` with ``Φ(z) < (n − s)/n`` (``Φ`` the standard
normal CDF): the malicious value stays closer to the mean than ``s`` of the honest ones
are expected to be. (Several reimplementations use ``(n − m − s)/(n − m)`` instead, the
share among the honest updates only; ``z`` overrides the formula.) When the attackers
alone are a majority (``s ≤ 0``) the formula has no finite value; ``s = 1`` is taken.

Here ``n`` is the updates on the parent: the ``k`` honest ones read plus the ``m``
identities of the coalition. The standard deviation is the population one (``ddof = 0``),
as in Algorithm 2's statistics.

**Knows**: the honest updates proposed on its parent this round (it proposes last:
:mod:`.round_reader`), its coalition's size. **Controls**: its proposals' weights.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from statistics import NormalDist

import numpy as np

from mcfl_chain.adversaries.base import register_adversary
from mcfl_chain.adversaries.round_reader import RoundReader


def alie_z_max(n: int, m: int) -> float:
    """``z_max`` for ``m`` attackers among ``n`` trainers (module docstring).

    Raises
    ------
    ValueError
        Unless ``1 <= m < n``.
    """
    if not 1 <= m < n:
        raise ValueError(f"ALIE needs 1 <= m < n attackers among n trainers, got n={n}, m={m}")
    supporters = max(1, math.floor(n / 2 + 1) - m)
    return NormalDist().inv_cdf((n - supporters) / n)


def alie(honest: np.ndarray, z: float) -> np.ndarray:
    """``mean − z·std`` per coordinate of the ``k × d`` honest updates (population std)."""
    return honest.mean(axis=0) - z * honest.std(axis=0)


@register_adversary("alie")
class Alie(RoundReader):
    """Publishes the honest updates' mean minus ``z_max`` standard deviations.

    Parameters
    ----------
    coalition : Iterable[str] or str, default ()
        The coalition's addresses (:class:`~.round_reader.RoundReader`).
    z : float, optional
        A fixed ``z`` instead of the paper's ``z_max`` for ``n`` and ``m``.
    """

    def __init__(self, coalition: Iterable[str] | str = (), z: float | None = None) -> None:
        super().__init__(coalition)
        if z is not None and not math.isfinite(z):
            raise ValueError(f"ALIE's z must be a finite number of standard deviations, got {z}")
        self.z = z

    def __repr__(self) -> str:
        return f"Alie(attackers={self.attackers}, z={self.z})"

    def craft(self, honest: np.ndarray, parent: np.ndarray) -> np.ndarray:
        z = (
            self.z
            if self.z is not None
            else alie_z_max(honest.shape[0] + self.attackers, self.attackers)
        )
        return alie(honest, z)
