"""Inner-product manipulation (Xie, Koyejo & Gupta, UAI 2020, "Fall of empires").

The malicious step is ``−ε`` times the honest steps' mean: its inner product with the
true mean step is ``−ε‖mean‖² < 0``, so an aggregate that lets it in moves against the
descent direction, and a small ``ε`` keeps it near the honest steps, inside the spread
distance-based rules accept. Steps are taken from the parent's weights (update −
parent); the published weights are ``parent − ε·mean(honest − parent)``.

**Knows**: the honest updates proposed on its parent this round (it proposes last:
:mod:`.round_reader`) and the parent's weights. **Controls**: its proposals' weights.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np

from mcfl_chain.adversaries.base import register_adversary
from mcfl_chain.adversaries.round_reader import RoundReader


def inner_product_manipulation(steps: np.ndarray, epsilon: float) -> np.ndarray:
    """``−ε·mean`` of the ``k × d`` honest steps."""
    return -epsilon * steps.mean(axis=0)


@register_adversary("ipm")
class InnerProductManipulation(RoundReader):
    """Publishes ``parent − ε·mean(honest − parent)``.

    Parameters
    ----------
    coalition : Iterable[str] or str, default ()
        The coalition's addresses (:class:`~.round_reader.RoundReader`).
    epsilon : float, default 0.5
        ``ε > 0``; Xie et al. use a small one (0.1) against Krum and the median, a
        large one against the mean.
    """

    def __init__(self, coalition: Iterable[str] | str = (), epsilon: float = 0.5) -> None:
        super().__init__(coalition)
        if not (math.isfinite(epsilon) and epsilon > 0):
            raise ValueError(f"inner-product manipulation's epsilon must be > 0, got {epsilon}")
        self.epsilon = float(epsilon)

    def __repr__(self) -> str:
        return f"InnerProductManipulation(attackers={self.attackers}, epsilon={self.epsilon})"

    def craft(self, honest: np.ndarray, parent: np.ndarray) -> np.ndarray:
        return parent + inner_product_manipulation(honest - parent, self.epsilon)
