"""Paper Algorithm 1 properties (hypothesis): how many models each rule keeps, in which
order, and that a better and more popular model is never ranked below a worse one.

The rules (module docstring of :mod:`mcfl_chain.algorithms.model_selection`): ``ceil``
keeps ``max(1, ⌈√n⌉)`` of ``n`` candidates, ``floor`` ``max(1, ⌊√n⌋)``, ``percentile``
every score at or above the ``(100 − 100·√n/n)``-th percentile, zero scores left out
while a score is above zero. Scores are ``metric × √popularity``; metrics are accuracies
or 1/MSE, never below 0.
"""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from mcfl_chain.algorithms.model_selection import CountRule, model_score, select_best_models

PROPERTY = settings(max_examples=40, derandomize=True, database=None)

RULES: st.SearchStrategy[CountRule] = st.sampled_from(["ceil", "floor", "percentile"])
# A few values only, so that equal metrics, popularities and scores are frequent; a
# metric of 0 is a model of another class group.
METRICS = st.one_of(
    st.sampled_from([0.0, 0.25, 0.5, 1.0]), st.floats(0.0, 1000.0, allow_subnormal=False)
)
POPULARITY = st.integers(0, 9)


@st.composite
def candidates(draw: st.DrawFn, min_size: int = 0) -> tuple[dict[int, float], dict[int, int]]:
    """Candidate model ids → metric, and → popularity."""
    keys = draw(st.lists(st.integers(0, 10**6), min_size=min_size, max_size=30, unique=True))
    metrics = {key: draw(METRICS) for key in keys}
    popularity = {key: draw(POPULARITY) for key in keys}
    return metrics, popularity


def _score(metrics: dict[int, float], popularity: dict[int, int], key: int) -> float:
    return model_score(metrics[key], popularity[key])


@PROPERTY
@given(pool=candidates(), rule=RULES)
def test_the_chosen_are_distinct_candidates_best_score_first(
    pool: tuple[dict[int, float], dict[int, int]], rule: CountRule
) -> None:
    # Prepare
    metrics, popularity = pool

    # Execute
    chosen = select_best_models(metrics, popularity, rule=rule)

    # Assert: a subset without repeats, non-empty when there is a candidate, ordered by
    # score, then popularity, then metric (the documented tie-breaks), then the key.
    assert set(chosen) <= set(metrics) and len(set(chosen)) == len(chosen)
    assert bool(chosen) == bool(metrics)
    ranks = [(-_score(metrics, popularity, k), -popularity[k], -metrics[k], k) for k in chosen]
    assert ranks == sorted(ranks)


@PROPERTY
@given(pool=candidates(), rule=RULES)
def test_no_model_left_out_outranks_a_chosen_one(
    pool: tuple[dict[int, float], dict[int, int]], rule: CountRule
) -> None:
    # Prepare
    metrics, popularity = pool

    # Execute
    chosen = select_best_models(metrics, popularity, rule=rule)

    # Assert: every model left out scores no more than the last one chosen, and under
    # the percentile rule strictly less (a score tied with a kept one is kept too, as
    # the module docstring says: "ties may keep more"), zero scores aside.
    if not chosen:
        return
    worst = _score(metrics, popularity, chosen[-1])
    for key in set(metrics) - set(chosen):
        left_out = _score(metrics, popularity, key)
        assert left_out <= worst
        if rule == "percentile" and left_out > 0:
            assert left_out < worst


@PROPERTY
@given(pool=candidates(min_size=1), rule=st.sampled_from(["ceil", "floor"]))
def test_ceil_and_floor_keep_their_square_root_count(
    pool: tuple[dict[int, float], dict[int, int]], rule: CountRule
) -> None:
    # Prepare
    metrics, popularity = pool
    n = len(metrics)
    expected = max(1, math.isqrt(n) + (rule == "ceil" and math.isqrt(n) ** 2 != n))

    # Execute
    chosen = select_best_models(metrics, popularity, rule=rule)

    # Assert: max(1, ⌈√n⌉) or max(1, ⌊√n⌋), computed here in integers.
    assert len(chosen) == expected


@PROPERTY
@given(scores=st.lists(st.integers(1, 10**6), min_size=1, max_size=40, unique=True))
def test_percentile_keeps_its_count_of_distinct_scores(scores: list[int]) -> None:
    # Prepare: n distinct whole scores (popularity 1, so score = metric, exactly).
    # np.percentile's linear interpolation puts the (100 − 100/√n)-th percentile at
    # position h = (n − 1)·(1 − 1/√n) of the sorted scores; strictly between two of them
    # unless h is whole, so the scores at or above it are the last n − ⌈h⌉.
    n = len(scores)
    metrics = {key: float(score) for key, score in enumerate(scores)}
    h = (n - 1) * (1 - 1 / math.sqrt(n))
    expected = n - math.ceil(h - 1e-9)

    # Execute
    chosen = select_best_models(metrics, dict.fromkeys(metrics, 1), rule="percentile")

    # Assert: the count, which the docstring tabulates for n = 1…10, and the best ones.
    if n <= 10:
        assert expected == [1, 1, 2, 2, 2, 3, 3, 3, 3, 3][n - 1]
    assert chosen == sorted(metrics, key=lambda key: -metrics[key])[:expected]


@PROPERTY
@given(pool=candidates(min_size=1))
def test_percentile_keeps_no_zero_score_while_one_is_above_zero(
    pool: tuple[dict[int, float], dict[int, int]],
) -> None:
    metrics, popularity = pool
    chosen = select_best_models(metrics, popularity, rule="percentile")
    scores = [_score(metrics, popularity, key) for key in chosen]
    if any(_score(metrics, popularity, key) > 0 for key in metrics):
        assert all(score > 0 for score in scores)
    else:  # every model useless: all tied at the threshold, all kept
        assert sorted(chosen) == sorted(metrics)


@PROPERTY
@given(pool=candidates(min_size=2), rule=RULES, data=st.data())
def test_a_dominating_model_is_never_ranked_below_the_one_it_dominates(
    pool: tuple[dict[int, float], dict[int, int]], rule: CountRule, data: st.DataObject
) -> None:
    # Prepare: model a gets a metric and a popularity at least b's, one of them higher.
    metrics, popularity = pool
    a, b = data.draw(st.permutations(sorted(metrics)))[:2]
    metrics[a] = metrics[b] + data.draw(st.sampled_from([0.0, 0.5, 7.0]))
    popularity[a] = popularity[b] + data.draw(st.integers(0 if metrics[a] > metrics[b] else 1, 3))

    # Execute
    chosen = select_best_models(metrics, popularity, rule=rule)

    # Assert: whenever b is chosen, a is chosen before it.
    if b in chosen:
        assert a in chosen and chosen.index(a) < chosen.index(b)


@PROPERTY
@given(pool=candidates(), rule=RULES, data=st.data())
def test_the_order_the_candidates_are_listed_in_changes_nothing(
    pool: tuple[dict[int, float], dict[int, int]], rule: CountRule, data: st.DataObject
) -> None:
    metrics, popularity = pool
    order = data.draw(st.permutations(list(metrics)))
    shuffled_metrics = {key: metrics[key] for key in order}
    shuffled_popularity = {key: popularity[key] for key in reversed(order)}
    assert select_best_models(
        shuffled_metrics,
        shuffled_popularity,
        rule=rule,
    ) == select_best_models(metrics, popularity, rule=rule)
