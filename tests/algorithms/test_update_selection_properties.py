"""Paper Algorithm 2 properties (hypothesis): what a trainer keeps grows with its
tolerance, always holds its own update and at least half of the peers, and holds every
peer once the tolerance is large enough.

The rule (:mod:`mcfl_chain.algorithms.update_selection`): a peer is kept iff its
divergence ``d < median + tolerance·std`` or ``d <= median`` (median and population std
of the peers' finite divergences); the own update is always kept; peers whose divergence
is not finite are rejected.
"""

from __future__ import annotations

import math

import numpy as np
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from mcfl_chain.algorithms.divergence import (
    BATCHED,
    cosine_distance,
    elementwise_divergence,
    weight_divergence,
)
from mcfl_chain.algorithms.update_selection import Divergence, select_updates

PROPERTY = settings(max_examples=30, derandomize=True, database=None)

OWN = 0
DIVERGENCES = st.sampled_from([weight_divergence, cosine_distance])
# Multiples of 1/16: any difference is exact, and near-equal divergences (ties at the
# median or the threshold) are frequent.
COORDINATE = st.integers(-64, 64).map(lambda i: i / 16)
TOLERANCES = st.one_of(st.sampled_from([0.0, 0.5, 1.0, 2.0, 3.0]), st.floats(0.0, 10.0))


@st.composite
def proposals(draw: st.DrawFn, min_peers: int = 0, max_peers: int = 12) -> dict[int, np.ndarray]:
    """The own update (key 0, not all zeros) and its peers', flattened, on one parent."""
    size = draw(st.integers(1, 4))
    vector = st.lists(COORDINATE, min_size=size, max_size=size).map(np.array)
    own = draw(vector.filter(lambda v: bool(np.any(v))))
    peers = draw(st.lists(vector, min_size=min_peers, max_size=max_peers))
    # A repeated peer (a Sybil, or two trainers with one data set) ties divergences.
    peers += draw(st.lists(st.sampled_from(peers), max_size=3)) if peers else []
    return {OWN: own, **{key: peer for key, peer in enumerate(peers, start=1)}}


def _usable(vectors: dict[int, np.ndarray], divergence: Divergence) -> bool:
    """Cosine distance has no direction for an all-zero peer (it raises): leave those out."""
    return divergence is weight_divergence or all(np.any(v) for v in vectors.values())


@PROPERTY
@given(vectors=proposals(), drawn=st.lists(TOLERANCES, max_size=4), divergence=DIVERGENCES)
def test_a_higher_tolerance_keeps_a_superset(
    vectors: dict[int, np.ndarray], drawn: list[float], divergence: Divergence
) -> None:
    # Prepare: the drawn tolerances among a fixed ladder, in increasing order.
    assume(_usable(vectors, divergence))
    tolerances = sorted({0.0, 0.25, 0.5, 1.0, 1.5, 2.0, 3.0, 5.0, *drawn})

    # Execute
    kept = [set(select_updates(OWN, vectors, t, divergence)) for t in tolerances]

    # Assert: each set holds the one of the tolerance below.
    for lower, higher in zip(kept, kept[1:], strict=False):
        assert lower <= higher


@PROPERTY
@given(vectors=proposals(), tolerance=TOLERANCES, divergence=DIVERGENCES)
def test_the_own_update_and_at_least_half_the_peers_are_kept(
    vectors: dict[int, np.ndarray], tolerance: float, divergence: Divergence
) -> None:
    # Prepare
    assume(_usable(vectors, divergence))
    peers = len(vectors) - 1

    # Execute
    kept = select_updates(OWN, vectors, tolerance, divergence)

    # Assert: sorted distinct keys, own among them; every peer at or below the median
    # divergence is kept (typical by definition), which is at least half of them.
    assert kept == sorted(set(kept)) and set(kept) <= set(vectors)
    assert OWN in kept
    assert len(kept) - 1 >= math.ceil(peers / 2)


@PROPERTY
@given(vectors=proposals(min_peers=1), divergence=DIVERGENCES)
def test_a_large_enough_tolerance_keeps_every_peer(
    vectors: dict[int, np.ndarray], divergence: Divergence
) -> None:
    # Prepare: for m values, max − median <= (max − mean) + |mean − median|
    # <= std·√(m − 1) + std, so any tolerance above √(m − 1) + 1 lets every peer under
    # the threshold (twice that leaves room for float rounding).
    assume(_usable(vectors, divergence))
    m = len(vectors) - 1
    tolerance = 2 * (math.sqrt(m - 1) + 1)

    # Execute / Assert
    assert select_updates(OWN, vectors, tolerance, divergence) == sorted(vectors)
    assert select_updates(OWN, vectors, 1e12, divergence) == sorted(vectors)


@PROPERTY
@given(vectors=proposals(min_peers=1), tolerance=TOLERANCES, data=st.data())
def test_peers_that_cannot_be_measured_are_rejected_and_change_nothing(
    vectors: dict[int, np.ndarray], tolerance: float, data: st.DataObject
) -> None:
    # Prepare: a peer with a NaN or an infinite weight lies at no finite divergence.
    bad = data.draw(st.sampled_from([np.nan, np.inf, -np.inf]))
    broken = {**vectors, 99: np.full_like(vectors[OWN], bad)}

    # Execute
    kept = select_updates(OWN, broken, tolerance)

    # Assert: rejected, and left out of the statistics.
    assert 99 not in kept
    assert kept == select_updates(OWN, vectors, tolerance)


@PROPERTY
@given(vectors=proposals(), tolerance=TOLERANCES, data=st.data())
def test_the_order_the_updates_are_listed_in_changes_nothing(
    vectors: dict[int, np.ndarray], tolerance: float, data: st.DataObject
) -> None:
    order = data.draw(st.permutations(list(vectors)))
    shuffled = {key: vectors[key] for key in order}
    assert select_updates(OWN, shuffled, tolerance) == select_updates(OWN, vectors, tolerance)


@PROPERTY
@given(
    vectors=proposals(),
    drawn=st.lists(TOLERANCES, max_size=4),
    divergence=st.sampled_from([weight_divergence, elementwise_divergence]),
)
def test_the_authors_statistics_keep_the_own_update_and_grow_with_the_tolerance(
    vectors: dict[int, np.ndarray], drawn: list[float], divergence: Divergence
) -> None:
    # Prepare
    tolerances = sorted({0.0, 0.5, 1.0, 2.0, 3.0, *drawn})

    # Execute
    kept = [select_updates(OWN, vectors, t, divergence, statistics="authors") for t in tolerances]

    # Assert: sorted keys with the own among them, a superset at each higher tolerance,
    # and with at most one measurable peer, every measurable one.
    measured = {
        k for k in vectors if k != OWN and math.isfinite(divergence(vectors[OWN], vectors[k]))
    }
    for chosen in kept:
        assert chosen == sorted(set(chosen)) and OWN in chosen
        assert set(chosen) - {OWN} <= measured
        if len(measured) <= 1:
            assert set(chosen) == measured | {OWN}
    for lower, higher in zip(kept, kept[1:], strict=False):
        assert set(lower) <= set(higher)


@PROPERTY
@given(vectors=proposals(min_peers=1), scale=st.sampled_from([0.5, 2.0, 8.0]))
def test_the_elementwise_divergence_is_relative_and_signed_by_the_own_weights(
    vectors: dict[int, np.ndarray], scale: float
) -> None:
    # Prepare
    own, peer = vectors[OWN], vectors[1]

    # Execute
    divergence = elementwise_divergence(own, peer)

    # Assert: 0 from itself; unchanged when both are scaled (powers of 2: exact);
    # negated when both are (the sign of each term is the own weight's).
    assert elementwise_divergence(own, own) == 0.0
    assert elementwise_divergence(scale * own, scale * peer) == divergence
    if math.isfinite(divergence):
        assert elementwise_divergence(-own, -peer) == -divergence


@PROPERTY
@given(
    vectors=proposals(min_peers=1, max_peers=150),
    measure=st.sampled_from([weight_divergence, cosine_distance, elementwise_divergence]),
)
def test_the_batched_divergences_are_the_pairwise_ones(
    vectors: dict[int, np.ndarray], measure: Divergence
) -> None:
    # Algorithm 2 measures every peer in array operations, blocks of ROWS_AT_ONCE rows
    own = vectors[OWN]
    peers = [k for k in vectors if k != OWN]
    try:
        pairwise = [measure(own, vectors[k]) for k in peers]
    except ValueError:  # an all-zero peer has no direction: both forms refuse it
        assume(False)
    batched = BATCHED[measure](own, np.stack([vectors[k] for k in peers]))
    np.testing.assert_allclose(batched, pairwise, rtol=1e-12, atol=1e-12)
