"""Krum and Multi-Krum on hand-computed scores, and their selection rules."""

from __future__ import annotations

import numpy as np
import pytest

from mcfl_chain.algorithms.robust import KrumSelection, MultiKrumSelection, make_selection_rule
from mcfl_chain.algorithms.robust.krum import krum, krum_scores, multi_krum

# Five updates on a line (second coordinate 0), one outlier far away. n = 5, f = 1, so
# each score sums the n − f − 2 = 2 smallest squared distances to the others:
#   10 at 0:   to 11: 1, 12: 4, 13: 16, 14: 10000  -> 1 + 4  = 5
#   11 at 1:   to 10: 1, 12: 1, 13: 9,  14: 9801   -> 1 + 1  = 2
#   12 at 2:   to 10: 4, 11: 1, 13: 4,  14: 9604   -> 1 + 4  = 5
#   13 at 4:   to 10: 16, 11: 9, 12: 4, 14: 9216   -> 4 + 9  = 13
#   14 at 100: to 13: 9216, 12: 9604, ...          -> 9216 + 9604 = 18820
VECTORS = {
    10: np.array([0.0, 0.0]),
    11: np.array([1.0, 0.0]),
    12: np.array([2.0, 0.0]),
    13: np.array([4.0, 0.0]),
    14: np.array([100.0, 0.0]),
}


def test_krum_scores_are_the_hand_computed_sums() -> None:
    # Execute
    scores = krum_scores(VECTORS, f=1)

    # Assert
    assert scores == {10: 5.0, 11: 2.0, 12: 5.0, 13: 13.0, 14: 18820.0}


def test_krum_keeps_the_update_closest_to_its_neighbours() -> None:
    assert krum(VECTORS, f=1) == 11


def test_multi_krum_drops_the_outlier_and_breaks_ties_by_key() -> None:
    # Default m = n − f = 4: every update but the outlier.
    assert multi_krum(VECTORS, f=1) == [10, 11, 12, 13]
    # m = 2: 11 (score 2), then 10 and 12 tie at 5 and the smaller key wins.
    assert multi_krum(VECTORS, f=1, m=2) == [10, 11]


@pytest.mark.parametrize(("n", "f"), [(4, 1), (2, 0), (6, 2)])
def test_krum_refuses_too_few_updates_for_f(n: int, f: int) -> None:
    vectors = {i: np.array([float(i)]) for i in range(n)}
    with pytest.raises(ValueError, match="n > 2f"):
        krum_scores(vectors, f)


def test_krum_refuses_updates_of_different_sizes() -> None:
    vectors = {i: np.zeros(2) for i in range(4)} | {9: np.zeros(3)}
    with pytest.raises(ValueError, match="different sizes"):
        krum_scores(vectors, f=1)


def test_selection_rules_always_keep_the_own_update() -> None:
    # Prepare
    krum_rule = make_selection_rule("krum", f=1)
    multi = MultiKrumSelection(f=1, m=2)

    # Execute / Assert: the outlier's own trainer keeps itself and Krum's choice.
    assert krum_rule.select(11, VECTORS) == [11]
    assert krum_rule.select(14, VECTORS) == [11, 14]
    assert multi.select(13, VECTORS) == [10, 11, 13]
    assert MultiKrumSelection(f=1).select(10, VECTORS) == [10, 11, 12, 13]


def test_selection_rules_keep_only_the_own_update_below_2f_plus_3() -> None:
    few = {k: VECTORS[k] for k in (10, 11, 14)}
    assert KrumSelection(f=1).select(10, few) == [10]
    assert MultiKrumSelection(f=1).select(14, few) == [14]
    # With f = 0 three updates suffice; one neighbour each: 10 and 11 tie at 1 (the
    # smaller key wins), the outlier scores 99² = 9801.
    assert KrumSelection(f=0).select(14, few) == [10, 14]


def test_selection_rule_errors_are_clear() -> None:
    with pytest.raises(KeyError, match="own update 99"):
        KrumSelection().select(99, VECTORS)
    with pytest.raises(ValueError, match="f is a number"):
        KrumSelection(f=-1)
    with pytest.raises(ValueError, match="m >= 1"):
        MultiKrumSelection(m=0)
    with pytest.raises(ValueError, match=r"unknown options \['q'\]"):
        make_selection_rule("krum", q=1)
    with pytest.raises(ValueError, match="known: krum, multi-krum"):
        make_selection_rule("bulyan")
