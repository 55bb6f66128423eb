"""Min-max and min-sum (Shejwalkar & Houmansadr, NDSS 2021), the aggregation-agnostic
attacks: as far as possible from the honest mean along a harmful direction, while no
farther from the honest updates than they are from one another.

With the honest steps ``Δ₁ … Δ_k`` (update − parent), their mean ``μ`` and a
perturbation direction ``p``, the malicious step is ``μ + γ·p`` with the largest ``γ``
such that

- ``min-max``: its largest distance to an honest step is at most the largest distance
  between two honest steps, ``max_i ‖μ + γp − Δ_i‖ ≤ max_{i,j} ‖Δ_i − Δ_j‖``;
- ``min-sum``: its sum of squared distances to the honest steps is at most the largest
  such sum of an honest step, ``Σ_i ‖μ + γp − Δ_i‖² ≤ max_i Σ_j ‖Δ_i − Δ_j‖²``.

Directions (``perturbation``): ``unit``, the honest mean reversed and normalised
(``−μ/‖μ‖``); ``std``, minus the per-coordinate standard deviation; ``sign``, minus the
mean's sign. ``γ = 0`` (the mean) always satisfies both conditions, and each condition
holds on an interval of ``γ`` (a bound on convex functions of ``γ``), so a bisection
between 0 and a ``γ`` the triangle inequality proves too large finds the largest
``γ`` to its precision: the result satisfies the condition and ``γ/(1 − precision)``
does not. (The paper's search halves a step from ``γ_init = 10``; this one starts from
a proven bound instead.)

**Knows**: the honest updates proposed on its parent this round (it proposes last:
:mod:`.round_reader`) and the parent's weights. **Controls**: its proposals' weights.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np

from mcfl_chain.adversaries.base import register_adversary
from mcfl_chain.adversaries.round_reader import RoundReader

PERTURBATIONS = ("unit", "std", "sign")
PRECISION = 1e-5
"""Relative precision of the bisection on ``γ``."""


def perturbation(steps: np.ndarray, kind: str) -> np.ndarray:
    """The direction ``p`` for the ``k × d`` honest steps (module docstring); zeros when the
    mean step is zero and ``kind`` is ``unit``.

    Raises
    ------
    ValueError
        For a kind not in :data:`PERTURBATIONS`.
    """
    mean = steps.mean(axis=0)
    if kind == "unit":
        norm = float(np.linalg.norm(mean))
        return -mean / norm if norm > 0 else np.zeros_like(mean)
    if kind == "std":
        return -steps.std(axis=0)
    if kind == "sign":
        return -np.sign(mean)
    raise ValueError(f"perturbation must be one of {', '.join(PERTURBATIONS)}, got {kind!r}")


def largest_gamma(
    feasible: Callable[[float], bool], upper: float, precision: float = PRECISION
) -> float:
    """The largest ``γ`` in ``[0, upper]`` with ``feasible(γ)``, by bisection.

    ``feasible(0)`` is assumed true. ``upper`` when it is feasible; else a ``γ`` with
    ``feasible(γ)`` and ``not feasible(hi)`` for some ``hi ≤ γ/(1 − precision)``: where the
    feasible ``γ`` form an interval from 0, the largest one to that precision. When no
    ``γ`` above ``upper·precision²`` is feasible, 0.
    """
    if feasible(upper):
        return upper
    low, high = 0.0, upper
    while high - low > precision * high and high > upper * precision**2:
        middle = (low + high) / 2
        if feasible(middle):
            low = middle
        else:
            high = middle
    return low


def pairwise_squared_distances(vectors: np.ndarray) -> np.ndarray:
    """``k × k`` squared L2 distances between the rows (computed row by row, not from a
    Gram matrix, so that nearby rows do not lose their distance to cancellation)."""
    return np.stack([((vectors - row) ** 2).sum(axis=1) for row in vectors])


def _gamma_search(
    steps: np.ndarray, kind: str, precision: float, minimise_sum: bool
) -> tuple[np.ndarray, float]:
    mean = steps.mean(axis=0)
    direction = perturbation(steps, kind)
    p2 = float(direction @ direction)
    if p2 == 0.0:
        return mean, 0.0
    offsets = mean - steps  # a_i: ‖μ + γp − Δ_i‖² = ‖a_i‖² + 2γ⟨a_i, p⟩ + γ²‖p‖²
    a2 = (offsets**2).sum(axis=1)
    ap = offsets @ direction
    distances = pairwise_squared_distances(steps)
    longest = float(np.sqrt(a2.max()))
    if minimise_sum:
        bound = float(distances.sum(axis=1).max())

        def feasible(gamma: float) -> bool:
            return float((a2 + 2 * gamma * ap + gamma**2 * p2).sum()) <= bound

        # Σ_i ‖a_i + γp‖² ≥ k·(γ‖p‖ − max‖a_i‖)², above the bound past this γ.
        reach = longest + float(np.sqrt(bound / steps.shape[0]))
    else:
        bound = float(distances.max())

        def feasible(gamma: float) -> bool:
            return float((a2 + 2 * gamma * ap + gamma**2 * p2).max()) <= bound

        # ‖a_i + γp‖ ≥ γ‖p‖ − ‖a_i‖, above the largest honest distance past this γ.
        reach = longest + float(np.sqrt(bound))
    gamma = largest_gamma(feasible, 2.0 * reach / np.sqrt(p2), precision)
    return mean + gamma * direction, gamma


def min_max(
    steps: np.ndarray, kind: str = "unit", precision: float = PRECISION
) -> tuple[np.ndarray, float]:
    """The min-max step for the ``k × d`` honest steps, and its ``γ``."""
    return _gamma_search(steps, kind, precision, minimise_sum=False)


def min_sum(
    steps: np.ndarray, kind: str = "unit", precision: float = PRECISION
) -> tuple[np.ndarray, float]:
    """The min-sum step for the ``k × d`` honest steps, and its ``γ``."""
    return _gamma_search(steps, kind, precision, minimise_sum=True)


class _MinMaxFamily(RoundReader):
    def __init__(self, coalition: Iterable[str] | str = (), perturbation: str = "unit") -> None:
        super().__init__(coalition)
        if perturbation not in PERTURBATIONS:
            raise ValueError(
                f"perturbation must be one of {', '.join(PERTURBATIONS)}, got {perturbation!r}"
            )
        self.perturbation = perturbation

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(attackers={self.attackers}, perturbation={self.perturbation!r})"
        )


@register_adversary("min-max")
class MinMax(_MinMaxFamily):
    """Publishes ``parent + μ + γp`` with min-max's largest ``γ`` (module docstring).

    Parameters
    ----------
    coalition : Iterable[str] or str, default ()
        The coalition's addresses (:class:`~.round_reader.RoundReader`).
    perturbation : {"unit", "std", "sign"}, default "unit"
        The direction ``p``.
    """

    def craft(self, honest: np.ndarray, parent: np.ndarray) -> np.ndarray:
        return parent + min_max(honest - parent, self.perturbation)[0]


@register_adversary("min-sum")
class MinSum(_MinMaxFamily):
    """Publishes ``parent + μ + γp`` with min-sum's largest ``γ`` (module docstring).

    Parameters
    ----------
    coalition : Iterable[str] or str, default ()
        The coalition's addresses (:class:`~.round_reader.RoundReader`).
    perturbation : {"unit", "std", "sign"}, default "unit"
        The direction ``p``.
    """

    def craft(self, honest: np.ndarray, parent: np.ndarray) -> np.ndarray:
        return parent + min_sum(honest - parent, self.perturbation)[0]
