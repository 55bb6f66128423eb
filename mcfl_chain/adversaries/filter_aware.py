"""A filter-aware attack on MCFL: an update placed inside Algorithm 2's tolerance, as far
along a harmful direction as the tolerance lets it.

MCFL's honest trainer keeps a peer's update when its divergence from the trainer's own
is below ``median + tolerance·std`` of the divergences of every peer update on the
parent, or at most their median (Algorithm 2,
:func:`~mcfl_chain.algorithms.update_selection.select_updates`). Updates are public
before anyone aggregates them, so an attacker that proposes last can run that very
function for every honest trainer on the parent, and place its update where all of them
keep it.

The update is ``c + γ·p``: ``c`` the mean of the honest updates, ``p`` a harmful direction
(:func:`~.min_max.perturbation`; by default the honest mean step reversed, normalised)
and ``γ`` the largest, found by bisection (:func:`~.min_max.largest_gamma`), for which
every *target* keeps it. The targets are the honest trainers whose Algorithm 2 keeps
``c`` itself (those that would reject even the mean cannot be reached; if none keeps it,
``c`` is published). The check counts the attacker's own update among the peers of each
honest trainer, with 1 to ``m`` identical copies for a coalition of ``m`` (however many
of its members land on that parent), and evaluates the update as published, cast to
float32. ``γ`` is capped at ``reach`` times the honest mean step's length: with enough
copies to own the median, the tolerance would admit any ``γ``.

Unlike min-max, the acceptance of ``c + γp`` need not shrink monotonically with ``γ`` (its
own divergences move the median and the spread), so the bisection finds *a* boundary of
the accepted ``γ``, the largest one only where they form an interval from 0, which they
do when the attacker's copies are a minority of each trainer's peers.

**Knows**: the honest updates proposed on its parent this round (it proposes last:
:mod:`.round_reader`), the parent's weights, the tolerance and divergence the honest
trainers use (``tolerance``, ``divergence``; against mixed tolerances the lowest, 1: a
lower tolerance filters more, so an update it keeps passes the others too), its
coalition's size. **Controls**: its proposals' weights.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

import numpy as np

from mcfl_chain.adversaries.base import register_adversary
from mcfl_chain.adversaries.min_max import PERTURBATIONS, largest_gamma, perturbation
from mcfl_chain.adversaries.round_reader import RoundReader
from mcfl_chain.algorithms.divergence import cosine_distance, weight_divergence
from mcfl_chain.algorithms.update_selection import select_updates

DIVERGENCES = ("l2", "cosine")
PRECISION = 1e-4
"""Relative precision of the bisection on ``γ``."""


def as_published(vector: np.ndarray) -> np.ndarray:
    """The vector as honest trainers read it back: cast to float32 (the weights' dtype)."""
    return vector.astype(np.float32).astype(np.float64)


def kept_by(
    honest: Mapping[int, np.ndarray],
    parent: np.ndarray,
    candidate: np.ndarray,
    tolerance: float,
    divergence: str = "l2",
    copies: int = 1,
) -> frozenset[int]:
    """The honest updates (keys, >= 0) whose trainer's Algorithm 2 keeps ``copies``
    copies of ``candidate`` proposed beside them on the parent.

    ``"l2"`` compares weights with the relative L2 divergence (paper Eq. 2); ``"cosine"``
    compares steps (weights − parent) with the cosine distance, as MCFL does.

    Raises
    ------
    ValueError
        For an unknown divergence, a negative key, or fewer than one copy.
    """
    if divergence not in DIVERGENCES:
        raise ValueError(f"divergence must be one of {', '.join(DIVERGENCES)}, got {divergence!r}")
    if copies < 1 or any(key < 0 for key in honest):
        raise ValueError("need at least one copy, and honest keys >= 0 (copies take -1, -2, …)")
    vectors = {**honest, **{-(i + 1): candidate for i in range(copies)}}
    measure = weight_divergence
    if divergence == "cosine":
        vectors = {key: vector - parent for key, vector in vectors.items()}
        measure = cosine_distance
    mine = {-(i + 1) for i in range(copies)}
    return frozenset(
        own for own in honest if mine <= set(select_updates(own, vectors, tolerance, measure))
    )


def filter_aware_update(
    honest: np.ndarray,
    parent: np.ndarray,
    tolerance: float,
    *,
    divergence: str = "l2",
    kind: str = "unit",
    attackers: int = 1,
    reach: float = 10.0,
    precision: float = PRECISION,
) -> tuple[np.ndarray, float, frozenset[int]]:
    """The filter-aware update for the ``k × d`` honest updates (module docstring).

    Returns
    -------
    tuple
        The update's weights (``c + γp``), ``γ``, and the targets: the rows of ``honest``
        whose Algorithm 2 keeps it.
    """
    rows = {i: honest[i] for i in range(honest.shape[0])}
    steps = honest - parent
    centre = honest.mean(axis=0)
    direction = perturbation(steps, kind)

    def kept(gamma: float) -> frozenset[int]:
        candidate = as_published(centre + gamma * direction)
        keepers = kept_by(rows, parent, candidate, tolerance, divergence, 1)
        for copies in range(2, attackers + 1):
            keepers &= kept_by(rows, parent, candidate, tolerance, divergence, copies)
        return keepers

    targets = kept(0.0)
    length, norm = float(np.linalg.norm(steps.mean(axis=0))), float(np.linalg.norm(direction))
    if not targets or length == 0.0 or norm == 0.0:
        return centre, 0.0, targets
    gamma = largest_gamma(lambda g: targets <= kept(g), reach * length / norm, precision)
    return centre + gamma * direction, gamma, targets


@register_adversary("filter-aware")
class FilterAware(RoundReader):
    """Publishes the honest mean pushed along ``p`` as far as every reachable honest
    trainer's Algorithm 2 still keeps it (module docstring).

    Parameters
    ----------
    coalition : Iterable[str] or str, default ()
        The coalition's addresses (:class:`~.round_reader.RoundReader`).
    tolerance : float, default 1.0
        The honest trainers' tolerance, in standard deviations (the lowest, if mixed).
    divergence : {"l2", "cosine"}, default "l2"
        The honest trainers' divergence.
    perturbation : {"unit", "std", "sign"}, default "unit"
        The harmful direction ``p``.
    reach : float, default 10.0
        Cap on ``γ‖p‖``, in lengths of the honest mean step.
    """

    def __init__(
        self,
        coalition: Iterable[str] | str = (),
        tolerance: float = 1.0,
        divergence: str = "l2",
        perturbation: str = "unit",
        reach: float = 10.0,
    ) -> None:
        super().__init__(coalition)
        if not (math.isfinite(tolerance) and tolerance >= 0):
            raise ValueError(f"tolerance must be a finite number >= 0, got {tolerance}")
        if divergence not in DIVERGENCES:
            raise ValueError(
                f"divergence must be one of {', '.join(DIVERGENCES)}, got {divergence!r}"
            )
        if perturbation not in PERTURBATIONS:
            raise ValueError(
                f"perturbation must be one of {', '.join(PERTURBATIONS)}, got {perturbation!r}"
            )
        if not (math.isfinite(reach) and reach > 0):
            raise ValueError(f"reach must be a finite number > 0, got {reach}")
        self.tolerance = float(tolerance)
        self.divergence = divergence
        self.perturbation = perturbation
        self.reach = float(reach)

    def __repr__(self) -> str:
        return (
            f"FilterAware(attackers={self.attackers}, tolerance={self.tolerance}, "
            f"divergence={self.divergence!r}, perturbation={self.perturbation!r}, "
            f"reach={self.reach})"
        )

    def craft(self, honest: np.ndarray, parent: np.ndarray) -> np.ndarray:
        update, _, _ = filter_aware_update(
            honest,
            parent,
            self.tolerance,
            divergence=self.divergence,
            kind=self.perturbation,
            attackers=self.attackers,
            reach=self.reach,
        )
        return update
