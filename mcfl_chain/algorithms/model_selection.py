"""Model selection, paper Algorithm 1: which of the current models a trainer trains.

Each candidate model is scored ``metric × sqrt(popularity)``: the metric is measured on
the trainer's own test split (higher is better: accuracy, or 1/MSE for autoencoders),
the popularity is how many times the model was submitted by aggregators. The popularity
bonus pulls trainers back onto common branches (paper §4.4). How many of the ``n``
ranked candidates a trainer trains is a rule (:data:`COUNT_RULES`), all about √n:

- ``percentile`` — the authors' code (Mick00/dml, ``src/daeclust/state/select_cluster.py``):
  keep the scores at or above the ``(100 − 100·√n/n)``-th percentile (NumPy's linear
  interpolation), i.e. 1, 1, 2, 2, 2, 3, 3, 3, 3, 3 models for n = 1…10 (ties may keep
  more). One guard of ours: a model scoring 0 is not kept while another scores above 0.
  A model of another class group scores exactly 0 (it never predicts the trainer's
  classes); when such models are more than ``1 − √n/n`` of the candidates — 6 trainers
  in 3 groups, unlike the paper's 38 — the percentile is 0 and the bare rule would have
  every trainer train every model, useless ones included;
- ``ceil``  — ``max(1, ⌈√n⌉)``: 1, 2, 2, 2, 3, 3, 3, 3, 3, 4;
- ``floor`` — ``max(1, ⌊√n⌋)``: the pseudo-code's ``ranked[0:sqrt(n)]`` with truncation.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping
from typing import Any, Literal, TypeVar

import numpy as np

K = TypeVar("K", bound=Hashable)

CountRule = Literal["percentile", "ceil", "floor"]
COUNT_RULES: tuple[CountRule, ...] = ("percentile", "ceil", "floor")


def model_score(metric: float, popularity: float) -> float:
    """Algorithm 1's score of one model: ``metric × sqrt(popularity)``."""
    return metric * math.sqrt(popularity)


def selection_count(n_models: int, rule: Literal["ceil", "floor"] = "ceil") -> int:
    """How many of ``n_models`` candidates a trainer trains under a count rule (0 if none):
    ``max(1, ⌈√n⌉)`` for ``ceil``, ``max(1, ⌊√n⌋)`` for ``floor``."""
    if n_models == 0:
        return 0
    root = math.sqrt(n_models)
    return max(1, math.ceil(root) if rule == "ceil" else math.floor(root))


def percentile_threshold(scores: list[float]) -> float:
    """The authors' cut: the ``(100 − 100·√n/n)``-th percentile of the ``n`` scores."""
    n = len(scores)
    return float(np.percentile(np.asarray(scores, dtype=np.float64), 100 - 100 * math.sqrt(n) / n))


def select_best_models(
    metrics: Mapping[K, float], popularity: Mapping[K, float], rule: CountRule = "ceil"
) -> list[K]:
    """Pick the models to train this round (paper Algorithm 1).

    Parameters
    ----------
    metrics : Mapping[K, float]
        Candidate model → metric on the trainer's test split (higher is better).
    popularity : Mapping[K, float]
        Candidate model → popularity (>= 0; a count, or a weighted one as MCFL-plus
        counts it); must cover every candidate.
    rule : {"percentile", "ceil", "floor"}, default "ceil"
        How many to keep (module docstring).

    Returns
    -------
    list[K]
        The best candidates under ``rule``, best first. Ties are broken
        deterministically: higher score, then higher popularity, then higher metric,
        then the smaller key (keys must then be mutually comparable, e.g. all ints).

    Raises
    ------
    ValueError
        If a candidate has no popularity, a negative popularity, or a NaN metric, or
        the rule is unknown.
    """
    if rule not in COUNT_RULES:
        raise ValueError(f"unknown selection rule {rule!r}; known: {', '.join(COUNT_RULES)}")
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

    def rank(key: K) -> tuple[float, float, float, Any]:
        return (-model_score(metrics[key], popularity[key]), -popularity[key], -metrics[key], key)

    ranked = sorted(metrics, key=rank)
    if rule != "percentile" or not ranked:
        return ranked[: selection_count(len(ranked), "floor" if rule == "floor" else "ceil")]
    scores = {key: model_score(metrics[key], popularity[key]) for key in ranked}
    threshold = percentile_threshold(list(scores.values()))
    kept = [key for key in ranked if scores[key] >= threshold]
    useful = [key for key in kept if scores[key] > 0]
    return useful or kept
