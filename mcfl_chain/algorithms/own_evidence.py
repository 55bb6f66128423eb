"""Rules that weigh what a trainer sees by its own evidence (MCFL-plus's pure parts).

Algorithms 1 and 2 trust two signals a trainer cannot check: a model's popularity (how
many identities aggregated it) and the spread of this round's divergences (which the
updates being judged set themselves). The functions here replace each with something
the trainer measured itself: its own validation split and its own past decisions.
:mod:`mcfl_chain.strategies.mcfl_plus` argues each mechanism; this module only computes.

- :func:`guarded_candidates` — the own-validation guard: drop the candidates that score
  worse than the best model the trainer already holds (by a relative margin);
- :func:`identity_votes`, :func:`update_agreement`, :func:`weighted_popularity` —
  popularity counted over identities, each weighted by how well the models it
  aggregated scored on the trainer's own validation split, as a running mean;
- :func:`history_threshold`, :func:`cap_by_history` — a divergence cap taken from the
  divergences the trainer accepted in earlier rounds, which this round's updates cannot
  move;
- :func:`agreeing_steps` — the peers whose step from the parent points the way the
  trainer's own step does (its own update as the root of trust, as FLTrust's server
  update is, Cao et al., NDSS 2021), which no count of peers can outvote;
- :func:`chance_rate`, :func:`above_chance` — the score of the best constant guess on the
  trainer's validation split, and the candidates that beat it: a model at chance for
  the trainer's data is no evidence for anything, however popular;
- :func:`unchanged_models` — the models whose weights are one of their parents' (no
  training changed them): a free rider's republished copy of an older model, which
  would take a trainer back to where that model stood.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import TypeVar

import numpy as np

from mcfl_chain.algorithms.divergence import cosine_distances

K = TypeVar("K", bound=Hashable)


def guarded_candidates(metrics: Mapping[K, float], held: Iterable[K], margin: float) -> list[K]:
    """The candidates a trainer may move to: those scoring at least the best model it
    holds, less a relative ``margin`` (``metric ≥ best_held − margin·|best_held|``).

    Parameters
    ----------
    metrics : Mapping[K, float]
        Candidate → metric on the trainer's own validation split (higher is better).
    held : Iterable[K]
        The candidates the trainer's own aggregations produced; those missing from
        ``metrics`` are ignored.
    margin : float
        Relative slack (>= 0): 0.05 lets a candidate score 5 % below the held best.

    Returns
    -------
    list[K]
        The allowed candidates, in ``metrics``' order; every candidate when the trainer
        holds none (the first round, a newcomer): there is then nothing to guard.

    Raises
    ------
    ValueError
        If the margin is negative or not finite.
    """
    if not (math.isfinite(margin) and margin >= 0):
        raise ValueError(f"the guard's margin must be a finite number >= 0, got {margin}")
    references = [metrics[key] for key in held if key in metrics]
    if not references:
        return list(metrics)
    best = max(references)
    floor = best - margin * abs(best)
    return [key for key, metric in metrics.items() if metric >= floor]


def identity_votes(
    metrics: Mapping[K, float], aggregators: Mapping[K, Sequence[int]], floor: float = 0.0
) -> dict[int, float]:
    """How far each identity's choice agrees with the trainer's own validation this round:
    the metric of the best candidate it aggregated over the best metric of all, both
    counted above ``floor``, in ``[0, 1]``.

    Parameters
    ----------
    metrics : Mapping[K, float]
        Candidate → metric on the trainer's validation split (higher is better).
    aggregators : Mapping[K, Sequence[int]]
        Candidate → the trainer ids whose aggregations produced it.
    floor : float, default 0
        The metric that counts as no evidence (0, or the chance rate of
        :func:`chance_rate` with a margin): a vote is ``(metric − floor) / (best −
        floor)``, so a model at or below it votes 0.

    Returns
    -------
    dict[int, float]
        Trainer id → vote; empty when no candidate scores above ``floor`` (nothing to
        agree on: where every model is at chance, every identity would vote near 1).
    """
    best = max((metrics[key] for key in aggregators if key in metrics), default=floor)
    if not best > floor:
        return {}
    votes: dict[int, float] = {}
    for key, who in aggregators.items():
        if key not in metrics:
            continue
        vote = min(1.0, max(0.0, (metrics[key] - floor) / (best - floor)))
        for identity in who:
            votes[identity] = max(votes.get(identity, 0.0), vote)
    return votes


def chance_rate(labels: Sequence[int]) -> float | None:
    """The accuracy of the best constant guess on a split with these labels: the share of
    its most frequent label; None for an empty split.

    A classifier that predicts one class everywhere (the state a collapsed network or a
    model trained on other classes leaves) scores at most this on the split.
    """
    if not len(labels):
        return None
    return max(Counter(map(int, labels)).values()) / len(labels)


def above_chance(metrics: Mapping[K, float], floor: float) -> list[K]:
    """The candidates whose metric exceeds ``floor`` (a chance rate plus a margin), in
    ``metrics``' order."""
    return [key for key, metric in metrics.items() if metric > floor]


def update_agreement(
    agreement: Mapping[int, float], votes: Mapping[int, float], rate: float
) -> dict[int, float]:
    """The running agreement of each identity: ``(1 − rate)·old + rate·vote`` for one seen
    before, its vote for a new one; identities without a vote keep their value.

    Raises
    ------
    ValueError
        If ``rate`` is not in ``(0, 1]``.
    """
    if not 0 < rate <= 1:
        raise ValueError(f"the agreement's rate must be in (0, 1], got {rate}")
    updated = dict(agreement)
    for identity, vote in votes.items():
        old = agreement.get(identity)
        updated[identity] = vote if old is None else (1 - rate) * old + rate * vote
    return updated


def weighted_popularity(
    aggregators: Mapping[K, Sequence[int]],
    agreement: Mapping[int, float],
    me: int,
    unknown: float = 1.0,
) -> dict[K, float]:
    """Each candidate's popularity counted over identities, each weighted by its agreement
    (the trainer's own identity by 1, one it has no record of by ``unknown``), never
    below 1: popularity only ever adds a bonus to a model's own score.

    Returns
    -------
    dict[K, float]
        Candidate → ``max(1, Σ weights of its aggregators)``.
    """
    return {
        key: max(
            1.0,
            math.fsum(1.0 if i == me else agreement.get(i, unknown) for i in dict.fromkeys(who)),
        )
        for key, who in aggregators.items()
    }


def history_threshold(
    history: Sequence[float], quantile: float, slack: float, min_history: int = 1
) -> float | None:
    """The divergence cap a trainer's own past sets: the ``quantile`` of the divergences
    it accepted before, times ``1 + slack``; None (no cap) with fewer than
    ``min_history`` finite values.

    The slack keeps the cap from ratcheting down: values up to ``(1 + slack)`` times the
    quantile are accepted and enter the history, so the cap follows the honest spread.

    Raises
    ------
    ValueError
        If ``quantile`` is not in ``[0, 1]`` or ``slack`` is negative.
    """
    if not 0 <= quantile <= 1:
        raise ValueError(f"the history quantile must be in [0, 1], got {quantile}")
    if not (math.isfinite(slack) and slack >= 0):
        raise ValueError(f"the history slack must be a finite number >= 0, got {slack}")
    values = np.array([d for d in history if math.isfinite(d)], dtype=np.float64)
    if values.size < max(1, min_history):
        return None
    return float(np.quantile(values, quantile)) * (1 + slack)


def cap_by_history(divergences: Mapping[K, float], cap: float | None) -> list[K]:
    """The peers whose divergence from the own update is at most ``cap`` (all of those
    with a finite divergence when ``cap`` is None), in ``divergences``' order."""
    return [
        key
        for key, divergence in divergences.items()
        if math.isfinite(divergence) and (cap is None or divergence <= cap)
    ]


def agreeing_steps(steps: Mapping[K, np.ndarray], own: K, floor: float = 0.0) -> list[K]:
    """The keys of ``steps`` (each update's step from the parent, ``own``'s included)
    whose cosine with the own step is above ``floor``, ``own`` excepted, in
    ``steps``' order.

    A peer whose step is all zeros (it moved nowhere) or not finite has no direction and
    is left out. If the own step is all zeros, the trainer has no direction to judge by
    and every peer with a finite step is kept.

    Raises
    ------
    ValueError
        If ``floor`` is not in ``[-1, 1)``, or ``own`` is not among ``steps``.
    """
    if not -1 <= floor < 1:
        raise ValueError(f"the direction floor must be a cosine in [-1, 1), got {floor}")
    if own not in steps:
        raise KeyError(f"the own update {own!r} is not among the steps")
    mine = np.asarray(steps[own], dtype=np.float64)
    peers: dict[K, np.ndarray] = {}
    for key, step in steps.items():
        vector = np.asarray(step, dtype=np.float64)
        if key != own and np.all(np.isfinite(vector)):
            peers[key] = vector
    mine_norm = float(np.linalg.norm(mine))
    if mine_norm == 0 or not math.isfinite(mine_norm):
        return list(peers)
    directed = [key for key, vector in peers.items() if np.any(vector)]
    if not directed:
        return []
    cosines = 1.0 - cosine_distances(mine, np.stack([peers[key] for key in directed]))
    return [key for key, cosine in zip(directed, cosines, strict=True) if cosine > floor]


def unchanged_models(
    weights: Mapping[K, np.ndarray], parents: Mapping[K, Sequence[np.ndarray]], tolerance: float
) -> list[K]:
    """The models whose flattened ``weights`` lie within ``tolerance`` (relative to the
    parent's L2 norm) of one of their ``parents``' weights, in ``weights``' order. A model
    without parents' weights is kept out of the answer (nothing shows it unchanged).

    Raises
    ------
    ValueError
        If ``tolerance`` is negative, or a parent's shape differs from its model's.
    """
    if tolerance < 0:
        raise ValueError(f"the tolerance must be at least 0, got {tolerance}")
    unchanged = []
    for key, vector in weights.items():
        for parent in parents.get(key, ()):
            if parent.shape != vector.shape:
                raise ValueError(
                    f"model {key!r} has {vector.shape} weights, its parent {parent.shape}"
                )
            if np.linalg.norm(vector - parent) <= tolerance * np.linalg.norm(parent):
                unchanged.append(key)
                break
    return unchanged
