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


@pytest.mark.parametrize(
    ("n", "count"),
    [(1, 1), (2, 1), (3, 2), (4, 2), (5, 2), (6, 3), (7, 3), (8, 3), (9, 3), (10, 3), (38, 7)],
)
def test_percentile_rule_keeps_what_the_authors_code_keeps(n: int, count: int) -> None:
    # Prepare: n distinct scores (the audit's table: 1,1,2,2,2,3,3,3,3,3 for n = 1…10).
    metrics = {k: 0.5 + k / 100 for k in range(n)}

    # Execute
    chosen = select_best_models(metrics, dict.fromkeys(metrics, 1), rule="percentile")

    # Assert: the best scores, best first
    assert chosen == sorted(metrics, key=lambda k: -metrics[k])[:count]


def test_percentile_rule_keeps_every_tied_score_at_the_threshold() -> None:
    chosen = select_best_models({1: 0.8, 2: 0.8, 3: 0.8}, {1: 1, 2: 1, 3: 1}, rule="percentile")
    assert chosen == [1, 2, 3]


def test_percentile_rule_does_not_keep_zero_scores_while_a_model_is_useful() -> None:
    # 6 candidates, 4 of another class group scoring 0: the 59.2th percentile is 0, so
    # the bare rule would keep all six; the guard keeps the two useful ones.
    metrics = {1: 0.0, 2: 0.0, 3: 0.7, 4: 0.0, 5: 0.4, 6: 0.0}
    popularity = dict.fromkeys(metrics, 1)
    assert select_best_models(metrics, popularity, rule="percentile") == [3, 5]
    # Every model useless: the rule as the authors wrote it (all tied at the threshold).
    zeros = dict.fromkeys(metrics, 0.0)
    assert select_best_models(zeros, popularity, rule="percentile") == [1, 2, 3, 4, 5, 6]


@pytest.mark.parametrize(("n", "ceil", "floor"), [(2, 2, 1), (3, 2, 1), (4, 2, 2), (8, 3, 2)])
def test_ceil_and_floor_rules_differ_between_squares(n: int, ceil: int, floor: int) -> None:
    metrics = {k: float(k) for k in range(n)}
    popularity = dict.fromkeys(metrics, 1)
    assert len(select_best_models(metrics, popularity, rule="ceil")) == ceil
    assert len(select_best_models(metrics, popularity, rule="floor")) == floor


def test_an_unknown_rule_is_refused_with_the_known_ones() -> None:
    with pytest.raises(ValueError, match="percentile, ceil, floor"):
        select_best_models({1: 1.0}, {1: 1}, rule="sqrt")  # type: ignore[arg-type]
