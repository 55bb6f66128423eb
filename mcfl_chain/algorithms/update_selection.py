"""Update selection, paper Algorithm 2: which peers' updates a trainer aggregates.

For one parent model, the trainer measures each peer update's divergence from its own
update, then keeps the peers whose divergence is below ``median + tolerance·std`` of
the peers' divergences. Its own update is always kept (thesis §4.3). The tolerance is a
number of standard deviations chosen by each trainer (paper: 1, 2, 3 or mixed); a low
tolerance rejects more peers and forks the DAG more.

Statistics: ``median`` and the population standard deviation (``ddof=0``, NumPy's
default) of the peers' divergences; the own update is not among them.

Edge cases, decided here because the pseudo-code's strict ``<`` alone misbehaves when
``std = 0``:

- **0 peers**: only the own update is returned.
- **1 peer**: median = its divergence, std = 0, so the strict ``d < median + tol·std``
  would reject it however close it is, and a two-trainer network would never
  aggregate. We keep it: see the rule below.
- **all divergences equal** (std = 0): same situation; all peers are kept.
- **2 peers** with divergences a < b: median = (a+b)/2, std = (b−a)/2, so the farther
  peer is kept iff tolerance > 1; at tolerance exactly 1 it sits on the threshold and
  the strict ``<`` rejects it (up to float rounding of the threshold).

The rule applied: a peer is kept iff ``d < median + tolerance·std`` **or** ``d ≤ median``.
A peer at or below the median divergence is typical by definition, never an outlier.
The extra clause changes the paper's outcome only when ``tolerance·std = 0``.
Peers whose divergence is not finite (NaN, inf) are rejected and left out of the
statistics.

**The authors' statistics** (``statistics="authors"``, MCFL's ``--filter-statistics
authors``): what their code did (Mick00/dml, ``WDUpdateSelector``). The own update's
divergence, 0, is one of the values the median and the standard deviation are taken
over, which lowers the median and widens the spread; when there are at most 2 updates
(the own and one peer) every one is kept; otherwise a peer is kept iff
``d <= median + tolerance·std`` (their ``<=``). The own update is still always kept (their
code would drop it should the threshold fall below 0, which a signed divergence such as
:func:`~mcfl_chain.algorithms.divergence.elementwise_divergence` allows), and a peer at a
non-finite divergence is still rejected and left out of the statistics (and of the count
of updates).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Mapping
from typing import Literal, TypeVar

import numpy as np

from mcfl_chain.algorithms.divergence import BATCHED, ROWS_AT_ONCE, weight_divergence

K = TypeVar("K", bound=Hashable)

Divergence = Callable[[np.ndarray, np.ndarray], float]
Statistics = Literal["paper", "authors"]
STATISTICS: tuple[Statistics, ...] = ("paper", "authors")
"""The statistics Algorithm 2 may use (module docstring): the pseudo-code's, over the
peers, or the authors' code's, with the own divergence (0) among them."""


def divergence_threshold(divergences: np.ndarray, tolerance: float) -> float:
    """``median + tolerance·std`` (population std) of the peers' divergences."""
    return float(np.median(divergences) + tolerance * np.std(divergences))


def select_updates(
    own: K,
    vectors: Mapping[K, np.ndarray],
    tolerance: float,
    divergence: Divergence = weight_divergence,
    statistics: Statistics = "paper",
) -> list[K]:
    """Choose the updates to aggregate with the own one (paper Algorithm 2).

    Parameters
    ----------
    own : K
        Key of the trainer's own update; must be in ``vectors``.
    vectors : Mapping[K, numpy.ndarray]
        Every update proposed on the parent (own included), flattened the same way.
    tolerance : float
        Number of standard deviations tolerated above the median (>= 0).
    divergence : callable, default weight_divergence
        ``divergence(own_vector, peer_vector) -> float``; e.g. ``cosine_distance``.
    statistics : {"paper", "authors"}, default "paper"
        Over which divergences the median and std are taken, and the keep rule
        (module docstring).

    Returns
    -------
    list[K]
        Keys kept, own included, sorted ascending.

    Raises
    ------
    KeyError
        If ``own`` is not in ``vectors``.
    ValueError
        If the tolerance is negative or not finite, or the statistics unknown.
    """
    if own not in vectors:
        raise KeyError(f"the own update {own!r} is not among the updates to select from")
    if not (math.isfinite(tolerance) and tolerance >= 0):
        raise ValueError(
            f"tolerance must be a finite number of standard deviations >= 0, got {tolerance}"
        )
    if statistics not in STATISTICS:
        raise ValueError(f"statistics must be one of {', '.join(STATISTICS)}, got {statistics!r}")
    own_vector = vectors[own]
    peers = [key for key in vectors if key != own]
    batched = BATCHED.get(divergence)
    if batched is not None and peers and all(vectors[k].shape == own_vector.shape for k in peers):
        # Array operations over the peers, a block at a time (a block's copy, not all).
        values = np.concatenate(
            [
                batched(own_vector, np.stack([vectors[key] for key in block]))
                for block in (
                    peers[i : i + ROWS_AT_ONCE] for i in range(0, len(peers), ROWS_AT_ONCE)
                )
            ]
        )
        measured = {key: float(d) for key, d in zip(peers, values, strict=True)}
    else:
        measured = {key: divergence(own_vector, vectors[key]) for key in peers}
    finite = {key: d for key, d in measured.items() if math.isfinite(d)}
    selected = [own]
    if statistics == "authors":
        return sorted(selected + _kept_as_the_authors_did(finite, tolerance))  # type: ignore[type-var]
    if finite:
        values = np.array(list(finite.values()), dtype=np.float64)
        median = float(np.median(values))
        threshold = divergence_threshold(values, tolerance)
        selected += [key for key, d in finite.items() if d < threshold or d <= median]
    return sorted(selected)  # type: ignore[type-var]


def _kept_as_the_authors_did(finite: Mapping[K, float], tolerance: float) -> list[K]:
    """The peers the authors' statistics keep (module docstring)."""
    if len(finite) <= 1:  # at most 2 updates, the own one included: keep every one
        return list(finite)
    values = np.array([0.0, *finite.values()], dtype=np.float64)
    threshold = divergence_threshold(values, tolerance)
    return [key for key, d in finite.items() if d <= threshold]
