"""Model selection, paper Algorithm 1: which of the current models a trainer trains.

Each candidate model is scored ``metric × sqrt(popularity)``: the metric is measured on
the trainer's own test split (higher is better: accuracy, or 1/MSE for autoencoders),
the popularity is how many times the model was submitted by aggregators. The popularity
bonus pulls trainers back onto common branches (paper §4.4). The trainer trains the
``max(1, ⌈√n⌉)`` best of the ``n`` candidates, so the work per round grows as √n.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping
from typing import Any, TypeVar

K = TypeVar("K", bound=Hashable)


def model_score(metric: float, popularity: int) -> float:
    """Algorithm 1's score of one model: ``metric × sqrt(popularity)``."""
    return metric * math.sqrt(popularity)


def selection_count(n_models: int) -> int:
    """How many of ``n_models`` candidates a trainer trains: ``max(1, ⌈√n⌉)`` (0 if none)."""
    return 0 if n_models == 0 else max(1, math.ceil(math.sqrt(n_models)))


def select_best_models(metrics: Mapping[K, float], popularity: Mapping[K, int]) -> list[K]:
    """Pick the models to train this round (paper Algorithm 1).

    Parameters
    ----------
    metrics : Mapping[K, float]
        Candidate model → metric on the trainer's test split (higher is better).
    popularity : Mapping[K, int]
        Candidate model → popularity (>= 0); must cover every candidate.

    Returns
    -------
    list[K]
        The ``max(1, ⌈√n⌉)`` best candidates, best first. Ties are broken
        deterministically: higher score, then higher popularity, then higher metric,
        then the smaller key (keys must then be mutually comparable, e.g. all ints).

    Raises
    ------
    ValueError
        If a candidate has no popularity, a negative popularity, or a NaN metric.
    """
    missing = [key for key in metrics if key not in popularity]
    if missing:
        raise ValueError(f"no popularity for candidate models {missing}")
    for key, metric in metrics.items():
        if math.isnan(metric):
            raise ValueError(
                f"metric of model {key!r} is NaN: exclude models that fail to evaluate"
            )
        if popularity[key] < 0:
            raise ValueError(f"popularity of model {key!r} is negative ({popularity[key]})")

    def rank(key: K) -> tuple[float, int, float, Any]:
        return (-model_score(metrics[key], popularity[key]), -popularity[key], -metrics[key], key)

    return sorted(metrics, key=rank)[: selection_count(len(metrics))]
