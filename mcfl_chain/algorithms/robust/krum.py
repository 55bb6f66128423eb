"""Krum and Multi-Krum (Blanchard, El Mhamdi, Guerraoui & Stainer, NeurIPS 2017).

With ``n`` updates of which at most ``f`` are Byzantine, each update ``i`` is scored by
the sum of its squared Euclidean distances to its ``n − f − 2`` closest other updates;
an update close to many others scores low. Krum keeps the lowest-scoring update,
Multi-Krum the ``m`` lowest (scores computed once over all ``n``). The guarantee needs
``n > 2f + 2``.

These are selection rules: they only choose ids, and the model stays the network's
FedAvg of the ids (aggregation rule 0). The scores need not be bit-identical across
machines — only the chosen ids go on chain, and anyone recomputes the model from them.
Ties in score go to the smaller key.

In MCFL the aggregator must own one of the ids it submits (thesis §4.3), so the rules
add the trainer's own update to what (Multi-)Krum keeps; with fewer than ``2f + 3``
updates Krum cannot tell an outlier apart, and the rules keep the own update alone.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from mcfl_chain.algorithms.robust.base import K, SelectionRule, register_selection_rule


def _check_f(n: int, f: int) -> None:
    if f < 0:
        raise ValueError(f"Krum: f is a number of Byzantine updates >= 0, got {f}")
    if n < 2 * f + 3:
        raise ValueError(
            f"Krum needs n > 2f + 2 updates: {n} updates cannot outvote f={f}; "
            f"assume fewer Byzantine updates (f <= {max(0, (n - 3) // 2)}) or gather more"
        )


def krum_scores(vectors: Mapping[K, np.ndarray], f: int) -> dict[K, float]:
    """Krum's score of every update: the sum of its ``n − f − 2`` smallest squared distances
    to the other updates.

    Parameters
    ----------
    vectors : Mapping[K, numpy.ndarray]
        Flattened updates (or deltas: distances are the same), all of one size.
    f : int
        Assumed number of Byzantine updates, ``0 <= f`` and ``n >= 2f + 3``.

    Raises
    ------
    ValueError
        If ``f`` is negative or too large for ``n``, or the vectors differ in size.
    """
    keys = list(vectors)
    n = len(keys)
    _check_f(n, f)
    sizes = {np.shape(vectors[key]) for key in keys}
    if len(sizes) > 1:
        raise ValueError(f"Krum: updates of different sizes {sorted(sizes)}")
    squared = np.zeros((n, n), dtype=np.float64)
    for i in range(n):
        for j in range(i + 1, n):
            difference = np.asarray(vectors[keys[i]], np.float64) - vectors[keys[j]]
            squared[i, j] = squared[j, i] = float(np.dot(difference, difference))
    neighbours = n - f - 2
    return {
        key: float(np.sort(np.delete(squared[i], i))[:neighbours].sum())
        for i, key in enumerate(keys)
    }


def _ranked(scores: Mapping[K, float]) -> list[K]:
    return sorted(scores, key=lambda key: (scores[key], key))


def krum(vectors: Mapping[K, np.ndarray], f: int) -> K:
    """The update Krum keeps: the lowest score (ties: the smaller key)."""
    return _ranked(krum_scores(vectors, f))[0]


def multi_krum(vectors: Mapping[K, np.ndarray], f: int, m: int | None = None) -> list[K]:
    """The ``m`` updates Multi-Krum keeps (default ``m = n − f``), sorted ascending.

    Raises
    ------
    ValueError
        As :func:`krum_scores`, or if ``m`` is not in ``1 … n``.
    """
    n = len(vectors)
    count = n - f if m is None else m
    if not 1 <= count <= n:
        raise ValueError(f"Multi-Krum keeps m in 1..{n} of {n} updates, got m={count}")
    return sorted(_ranked(krum_scores(vectors, f))[:count])  # type: ignore[type-var]


@register_selection_rule("krum")
class KrumSelection(SelectionRule):
    """Krum's choice plus the own update.

    Parameters
    ----------
    f : int, default 1
        Assumed number of Byzantine updates on a parent.
    """

    def __init__(self, f: int = 1) -> None:
        if f < 0:
            raise ValueError(f"Krum: f is a number of Byzantine updates >= 0, got {f}")
        self.f = f

    def __repr__(self) -> str:
        return f"KrumSelection(f={self.f})"

    def select(
        self, own: K, vectors: Mapping[K, np.ndarray], parent: np.ndarray | None = None
    ) -> list[K]:
        if own not in vectors:
            raise KeyError(f"the own update {own!r} is not among the updates to select from")
        if len(vectors) < 2 * self.f + 3:
            return [own]
        return sorted({krum(vectors, self.f), own})  # type: ignore[type-var]


@register_selection_rule("multi-krum")
class MultiKrumSelection(SelectionRule):
    """Multi-Krum's ``m`` choices plus the own update.

    Parameters
    ----------
    f : int, default 1
        Assumed number of Byzantine updates on a parent.
    m : int, optional
        Updates kept by score (capped at ``n``); default ``n − f``.
    """

    def __init__(self, f: int = 1, m: int | None = None) -> None:
        if f < 0:
            raise ValueError(f"Multi-Krum: f is a number of Byzantine updates >= 0, got {f}")
        if m is not None and m < 1:
            raise ValueError(f"Multi-Krum keeps m >= 1 updates, got m={m}")
        self.f, self.m = f, m

    def __repr__(self) -> str:
        return f"MultiKrumSelection(f={self.f}, m={self.m})"

    def select(
        self, own: K, vectors: Mapping[K, np.ndarray], parent: np.ndarray | None = None
    ) -> list[K]:
        if own not in vectors:
            raise KeyError(f"the own update {own!r} is not among the updates to select from")
        n = len(vectors)
        if n < 2 * self.f + 3:
            return [own]
        m = None if self.m is None else min(self.m, n)
        return sorted({*multi_krum(vectors, self.f, m), own})  # type: ignore[type-var]
