"""Paper Algorithm 1 on hand-computed examples."""

from __future__ import annotations

import math

import pytest

from mcfl_chain.algorithms.model_selection import model_score, select_best_models, selection_count


@pytest.mark.parametrize(
    ("n", "count"), [(0, 0), (1, 1), (2, 2), (3, 2), (4, 2), (5, 3), (9, 3), (10, 4), (38, 7)]
)
def test_selection_count_is_ceil_sqrt(n: int, count: int) -> None:
    assert selection_count(n) == count


def test_popularity_bonus_can_beat_a_better_metric() -> None:
    # Prepare: scores a = 0.90·√1 = 0.90, b = 0.80·√4 = 1.60, c = 0.85·√2 ≈ 1.202, d = 0.95·√1.
    metrics = {"a": 0.90, "b": 0.80, "c": 0.85, "d": 0.95}
    popularity = {"a": 1, "b": 4, "c": 2, "d": 1}
    # Execute
    chosen = select_best_models(metrics, popularity)
    # Assert: ⌈√4⌉ = 2 models, best score first.
    assert chosen == ["b", "c"]
    assert model_score(0.85, 2) == pytest.approx(0.85 * math.sqrt(2))


def test_single_candidate_is_always_trained() -> None:
    assert select_best_models({7: 0.1}, {7: 1}) == [7]


def test_no_candidate_gives_nothing() -> None:
    assert select_best_models({}, {}) == []


def test_ties_break_by_popularity_then_metric_then_key() -> None:
    # 0.5·√4 = 1.0·√1 = 1.0: equal scores, the more popular model wins.
    assert select_best_models({1: 1.0, 2: 0.5}, {1: 1, 2: 4})[0] == 2
    # Identical metric and popularity: the smaller key wins.
    assert select_best_models({5: 0.7, 3: 0.7, 4: 0.7, 9: 0.1}, {5: 2, 3: 2, 4: 2, 9: 2}) == [3, 4]


def test_autoencoder_metric_inverse_mse() -> None:
    # 1/MSE: the lower-loss model wins unless popularity compensates.
    metrics = {"x": 1 / 0.01, "y": 1 / 0.02, "z": 1 / 0.04}
    assert select_best_models(metrics, {"x": 1, "y": 1, "z": 1}) == ["x", "y"]
    assert select_best_models(metrics, {"x": 1, "y": 9, "z": 1}) == ["y", "x"]


def test_zero_popularity_scores_zero() -> None:
    assert select_best_models({"a": 0.99, "b": 0.1, "c": 0.5}, {"a": 0, "b": 1, "c": 1}) == [
        "c",
        "b",
    ]


@pytest.mark.parametrize(
    ("metrics", "popularity", "message"),
    [
        ({"a": 0.5}, {}, "no popularity"),
        ({"a": float("nan")}, {"a": 1}, "NaN"),
        ({"a": 0.5}, {"a": -1}, "negative"),
    ],
)
def test_bad_inputs_are_refused(metrics: dict, popularity: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        select_best_models(metrics, popularity)
