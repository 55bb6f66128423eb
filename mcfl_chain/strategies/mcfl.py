"""The MCFL strategy (paper §4): Algorithm 1 to choose models, Algorithm 2 to choose updates."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal

import numpy as np

from mcfl_chain.algorithms.divergence import cosine_distance, weight_divergence
from mcfl_chain.algorithms.model_selection import select_best_models
from mcfl_chain.algorithms.update_selection import select_updates
from mcfl_chain.strategies.base import Candidate, K, Strategy, register_strategy

DivergenceName = Literal["l2", "cosine"]


@register_strategy("mcfl")
class MCFLStrategy(Strategy):
    """MultiConfederated Learning's rules.

    Parameters
    ----------
    tolerance : float, default 2.0
        Standard deviations above the median divergence still accepted (paper: 1–3).
    divergence : {"l2", "cosine"}, default "l2"
        ``"l2"``: relative L2 weight divergence between the updates' weights (paper
        Eq. 2). ``"cosine"``: cosine distance between the update deltas (update − parent)
        when the parent is given, else between the weights (thesis §7.3).
    """

    def __init__(self, tolerance: float = 2.0, divergence: DivergenceName = "l2") -> None:
        if divergence not in ("l2", "cosine"):
            raise ValueError(f"divergence must be 'l2' or 'cosine', got {divergence!r}")
        if not tolerance >= 0:
            raise ValueError(f"tolerance must be >= 0 standard deviations, got {tolerance}")
        self.tolerance = float(tolerance)
        self.divergence = divergence

    def __repr__(self) -> str:
        return f"MCFLStrategy(tolerance={self.tolerance}, divergence={self.divergence!r})"

    def choose_models(self, candidates: Sequence[Candidate[K]]) -> list[K]:
        return select_best_models(
            {c.key: c.metric for c in candidates}, {c.key: c.popularity for c in candidates}
        )

    def choose_updates(
        self, own: K, vectors: Mapping[K, np.ndarray], parent: np.ndarray | None = None
    ) -> list[K]:
        if self.divergence == "l2":
            return select_updates(own, vectors, self.tolerance, weight_divergence)
        if parent is not None:
            vectors = {key: vector - parent for key, vector in vectors.items()}
        return select_updates(own, vectors, self.tolerance, cosine_distance)
