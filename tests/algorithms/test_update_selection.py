"""Paper Algorithm 2: hand-computed thresholds and every edge case of the module docstring."""

from __future__ import annotations

import numpy as np
import pytest

from mcfl_chain.algorithms.divergence import cosine_distance
from mcfl_chain.algorithms.update_selection import divergence_threshold, select_updates


def _vectors(own: float, peers: dict[int, float]) -> dict[int, np.ndarray]:
    """Own update [own] is key 0; a peer at value v has divergence |v − own| / |own|."""
    return {0: np.array([own]), **{key: np.array([value]) for key, value in peers.items()}}


def test_zero_peers_keeps_only_the_own_update() -> None:
    assert select_updates(0, _vectors(1.0, {}), tolerance=1.0) == [0]


def test_one_peer_is_kept_despite_zero_std() -> None:
    # median = 5, std = 0: the strict rule alone (5 < 5) would reject it.
    assert select_updates(0, _vectors(1.0, {3: 6.0}), tolerance=1.0) == [0, 3]


def test_two_peers_at_tolerance_one_rejects_the_farther() -> None:
    # Divergences 1 and 3: median 2, std 1, threshold 3 → 3 < 3 is false.
    vectors = _vectors(1.0, {1: 2.0, 2: 4.0})
    assert divergence_threshold(np.array([1.0, 3.0]), 1.0) == 3.0
    assert select_updates(0, vectors, tolerance=1.0) == [0, 1]
    # Tolerance above 1 accepts it: threshold 2 + 1.5 = 3.5.
    assert select_updates(0, vectors, tolerance=1.5) == [0, 1, 2]


def test_all_equal_divergences_keep_every_peer() -> None:
    # Peers at +1 and −1 around own = 1: every divergence is 1, std 0.
    vectors = _vectors(1.0, {1: 2.0, 2: 0.0, 3: 2.0})
    assert select_updates(0, vectors, tolerance=0.0) == [0, 1, 2, 3]
    assert select_updates(0, vectors, tolerance=3.0) == [0, 1, 2, 3]


def test_outlier_is_rejected_hand_computed() -> None:
    # Divergences 1, 1, 1, 1, 10: median 1, std 3.6 → threshold 1 + 3.6·t.
    vectors = _vectors(1.0, {1: 2.0, 2: 0.0, 3: 2.0, 4: 0.0, 5: 11.0})
    assert np.std([1, 1, 1, 1, 10]) == pytest.approx(3.6)
    assert select_updates(0, vectors, tolerance=2.0) == [0, 1, 2, 3, 4]  # 10 < 8.2 false
    assert select_updates(0, vectors, tolerance=2.6) == [0, 1, 2, 3, 4, 5]  # 10 < 10.36


def test_lower_tolerance_rejects_more() -> None:
    # Divergences 1..6: median 3.5, std ≈ 1.708.
    vectors = _vectors(1.0, {k: 1.0 + k for k in range(1, 7)})
    assert select_updates(0, vectors, tolerance=0.0) == [0, 1, 2, 3]
    assert select_updates(0, vectors, tolerance=1.0) == [0, 1, 2, 3, 4, 5]
    assert select_updates(0, vectors, tolerance=2.0) == [0, 1, 2, 3, 4, 5, 6]


def test_result_is_sorted_with_own_among_them() -> None:
    vectors = {9: np.array([1.0]), 4: np.array([1.1]), 12: np.array([0.9])}
    assert select_updates(9, vectors, tolerance=2.0) == [4, 9, 12]


def test_non_finite_divergences_are_rejected_and_ignored_in_statistics() -> None:
    vectors = _vectors(1.0, {1: 2.0, 2: float("nan"), 3: 0.0})
    assert select_updates(0, vectors, tolerance=1.0) == [0, 1, 3]


def test_cosine_variant() -> None:
    own = np.array([1.0, 0.0])
    vectors = {0: own, 1: np.array([1.0, 0.1]), 2: np.array([1.0, -0.1]), 3: np.array([-1.0, 0.0])}
    assert select_updates(0, vectors, tolerance=1.0, divergence=cosine_distance) == [0, 1, 2]


def test_missing_own_and_bad_tolerance_are_errors() -> None:
    with pytest.raises(KeyError, match="own update 7"):
        select_updates(7, _vectors(1.0, {}), tolerance=1.0)
    with pytest.raises(ValueError, match="tolerance"):
        select_updates(0, _vectors(1.0, {}), tolerance=-1.0)


# -- the authors' statistics (statistics="authors") ------------------------------------


def test_authors_statistics_keep_every_update_when_there_are_two() -> None:
    # own + one peer, however far: their code skips the filter
    assert select_updates(0, _vectors(1.0, {3: 100.0}), 0.0, statistics="authors") == [0, 3]
    assert select_updates(0, _vectors(1.0, {}), 1.0, statistics="authors") == [0]


def test_authors_statistics_count_the_own_divergence_hand_computed() -> None:
    # Peers at divergences 1 and 3. Paper: median 2, std 1 → threshold 2 + t.
    # Authors: over 0, 1, 3: median 1, std √(42/27) ≈ 1.247 → threshold 1 + 1.247·t.
    vectors = _vectors(1.0, {1: 2.0, 2: 4.0})
    assert divergence_threshold(np.array([0.0, 1.0, 3.0]), 1.0) == pytest.approx(
        1 + np.sqrt(42 / 27)
    )
    assert select_updates(0, vectors, 1.5, statistics="paper") == [0, 1, 2]  # 3 < 3.5
    assert select_updates(0, vectors, 1.5, statistics="authors") == [0, 1]  # 3 > 2.87
    assert select_updates(0, vectors, 2.0, statistics="authors") == [0, 1, 2]  # 3 <= 3.49


def test_authors_statistics_reject_the_outlier_the_paper_keeps() -> None:
    # Divergences 1, 1, 1, 1, 10. Paper at 2.6: 10 < 1 + 2.6·3.6 = 10.36, kept.
    # Authors over 0, 1, 1, 1, 1, 10: median 1, std ≈ 3.448, 1 + 2.6·3.448 ≈ 9.97.
    vectors = _vectors(1.0, {1: 2.0, 2: 0.0, 3: 2.0, 4: 0.0, 5: 11.0})
    assert select_updates(0, vectors, 2.6, statistics="paper") == [0, 1, 2, 3, 4, 5]
    assert select_updates(0, vectors, 2.6, statistics="authors") == [0, 1, 2, 3, 4]
    assert select_updates(0, vectors, 3.0, statistics="authors") == [0, 1, 2, 3, 4, 5]


def test_authors_statistics_keep_a_peer_on_the_threshold() -> None:
    # Peers at 1, 1, 2, tolerance 0: over 0, 1, 1, 2 the threshold is the median, 1;
    # their "<=" keeps the peers at 1.
    vectors = _vectors(1.0, {1: 2.0, 2: 0.0, 3: 3.0})
    assert select_updates(0, vectors, 0.0, statistics="authors") == [0, 1, 2]


def test_unknown_statistics_are_an_error() -> None:
    with pytest.raises(ValueError, match="statistics must be one of paper, authors"):
        select_updates(0, _vectors(1.0, {}), 1.0, statistics="median")  # type: ignore[arg-type]
