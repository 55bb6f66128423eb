"""MCFL-plus's pure rules (:mod:`mcfl_chain.algorithms.own_evidence`): the own-validation
guard, agreement-weighted popularity, the divergence cap from the trainer's history and
the direction check, the chance floor, unchanged models;
properties with hypothesis, edge cases by example."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mcfl_chain.algorithms.own_evidence import (
    above_chance,
    agreeing_steps,
    cap_by_history,
    chance_rate,
    guarded_candidates,
    history_threshold,
    identity_votes,
    unchanged_models,
    update_agreement,
    weighted_popularity,
)

PROPERTY = settings(max_examples=40, derandomize=True, database=None)
METRICS = st.dictionaries(
    st.integers(0, 50), st.floats(0.0, 1.0, allow_subnormal=False), min_size=1, max_size=12
)


@PROPERTY
@given(metrics=METRICS, data=st.data(), margin=st.floats(0.0, 0.5))
def test_the_guard_keeps_every_held_best_and_nothing_below_its_floor(
    metrics: dict[int, float], data: st.DataObject, margin: float
) -> None:
    # Prepare
    held = data.draw(st.lists(st.sampled_from(sorted(metrics)), max_size=3))
    # Execute
    allowed = guarded_candidates(metrics, held, margin)
    # Assert: holding nothing guards nothing; else the held best stays, and whatever
    # stays scores at least the held best less the margin
    if not held:
        assert allowed == list(metrics)
        return
    best = max(metrics[key] for key in held)
    assert max(held, key=lambda key: metrics[key]) in allowed
    assert all(metrics[key] >= best - margin * best for key in allowed)
    assert [key for key in metrics if metrics[key] >= best] == [
        key for key in allowed if metrics[key] >= best
    ]


def test_the_guard_keeps_a_lone_trainer_off_the_majoritys_model() -> None:
    # rotation-30-2, round 3: its own branch at 70 %, the majority's model at 31 %
    metrics = {"own": 0.70, "majority": 0.31, "close": 0.68}
    assert guarded_candidates(metrics, ["own"], 0.05) == ["own", "close"]
    assert guarded_candidates(metrics, ["own"], 0.0) == ["own"]
    with pytest.raises(ValueError, match="margin"):
        guarded_candidates(metrics, ["own"], -0.1)


def test_votes_are_each_identitys_best_model_over_the_rounds_best() -> None:
    votes = identity_votes({"a": 0.8, "b": 0.4, "c": 0.0}, {"a": [1, 2], "b": [2, 3], "c": [4]})
    assert votes == {1: 1.0, 2: 1.0, 3: 0.5, 4: 0.0}
    assert identity_votes({"a": 0.0}, {"a": [1]}) == {}


def test_votes_above_a_chance_floor_count_only_what_beats_it() -> None:
    # Prepare: chance 0.3 plus a margin of 0.1; the coalition's model sits at chance
    metrics = {"peer": 0.9, "coalition": 0.3, "mine": 0.65}
    aggregators = {"peer": [1], "coalition": [5, 6], "mine": [7]}
    # Execute / Assert: counted above the floor, the model at chance votes 0, not 1/3
    assert identity_votes(metrics, aggregators, 0.4) == {1: 1.0, 5: 0.0, 6: 0.0, 7: 0.5}
    # every model at chance: no evidence, no vote (without the floor, all near 1)
    at_chance = {"coalition": 0.25, "mine": 0.19}
    assert identity_votes(at_chance, {"coalition": [5, 6], "mine": [7]}, 0.4) == {}
    assert identity_votes(at_chance, {"coalition": [5, 6], "mine": [7]})[7] == pytest.approx(0.76)


def test_the_chance_rate_is_the_most_frequent_labels_share() -> None:
    assert chance_rate([0, 1, 1, 2, 1, 3]) == 0.5
    assert chance_rate([4] * 7) == 1.0
    assert chance_rate([]) is None
    assert above_chance({"a": 0.41, "b": 0.4, "c": 0.9}, 0.4) == ["a", "c"]


@PROPERTY
@given(
    old=st.dictionaries(st.integers(0, 9), st.floats(0.0, 1.0), max_size=6),
    votes=st.dictionaries(st.integers(0, 9), st.floats(0.0, 1.0), max_size=6),
    rate=st.floats(0.01, 1.0),
)
def test_agreement_is_a_running_mean_within_the_votes_range(
    old: dict[int, float], votes: dict[int, float], rate: float
) -> None:
    # Execute
    new = update_agreement(old, votes, rate)
    # Assert: unvoted identities keep their value; a vote moves it toward the vote
    assert set(new) == set(old) | set(votes)
    for identity, value in new.items():
        if identity not in votes:
            assert value == old[identity]
        elif identity not in old:
            assert value == votes[identity]
        else:
            low, high = sorted((old[identity], votes[identity]))
            assert low - 1e-12 <= value <= high + 1e-12


def test_agreement_refuses_a_rate_outside_zero_one() -> None:
    with pytest.raises(ValueError, match="rate"):
        update_agreement({}, {}, 0.0)


def test_sybils_whose_models_score_half_the_best_buy_no_bonus() -> None:
    # Prepare: two Sybils (5, 6) agree 0.5, honest peers 1 and 2 fully; trainer 0 is me
    agreement = {1: 1.0, 2: 1.0, 5: 0.5, 6: 0.5}
    aggregators = {"sybil": [5, 6], "group": [0, 1, 2], "unknown": [9], "none": []}
    # Execute
    weighted = weighted_popularity(aggregators, agreement, me=0, unknown=0.5)
    # Assert: the Sybils' two identities count 1, never below 1
    assert weighted == {"sybil": 1.0, "group": 3.0, "unknown": 1.0, "none": 1.0}


@PROPERTY
@given(
    aggregators=st.dictionaries(
        st.integers(0, 20), st.lists(st.integers(0, 9), max_size=8), min_size=1, max_size=8
    ),
    agreement=st.dictionaries(st.integers(0, 9), st.floats(0.0, 1.0), max_size=10),
)
def test_weighted_popularity_lies_between_one_and_the_raw_count(
    aggregators: dict[int, list[int]], agreement: dict[int, float]
) -> None:
    weighted = weighted_popularity(aggregators, agreement, me=0)
    for key, who in aggregators.items():
        assert 1.0 <= weighted[key] <= max(1, len(set(who))) + 1e-9


@PROPERTY
@given(
    history=st.lists(st.floats(0.0, 10.0), max_size=20),
    quantile=st.floats(0.0, 1.0),
    slack=st.floats(0.0, 2.0),
)
def test_the_history_cap_keeps_at_least_the_quantile_of_what_was_accepted(
    history: list[float], quantile: float, slack: float
) -> None:
    # Execute
    cap = history_threshold(history, quantile, slack, min_history=3)
    # Assert: no cap on too short a history; else no value of the history below the
    # quantile would be refused again
    if len(history) < 3:
        assert cap is None
        return
    assert cap is not None
    kept = cap_by_history(dict(enumerate(history)), cap)
    assert len(kept) >= math.floor(quantile * (len(history) - 1)) + 1


def test_the_history_cap_is_not_moved_by_this_rounds_updates() -> None:
    # Prepare: earlier rounds accepted divergences around 0.1
    history = [0.08, 0.1, 0.12, 0.09, 0.11]
    cap = history_threshold(history, 0.9, 0.5)
    assert cap == pytest.approx(0.116 * 1.5)
    # Execute: this round, one honest peer and two attackers far out (they would raise
    # Algorithm 2's median and std)
    kept = cap_by_history({"honest": 0.1, "a1": 0.5, "a2": 0.6, "nan": math.nan}, cap)
    # Assert
    assert kept == ["honest"]
    assert cap_by_history({"x": 5.0, "nan": math.nan}, None) == ["x"]
    with pytest.raises(ValueError, match="quantile"):
        history_threshold(history, 1.5, 0.5)
    with pytest.raises(ValueError, match="slack"):
        history_threshold(history, 0.5, -1.0)


@PROPERTY
@given(
    own=st.lists(st.floats(-1.0, 1.0), min_size=3, max_size=3).filter(
        lambda v: sum(x * x for x in v) > 1e-6
    ),
    scales=st.lists(st.floats(0.1, 100.0), min_size=1, max_size=6),
)
def test_the_direction_check_drops_every_reversed_step_however_many(
    own: list[float], scales: list[float]
) -> None:
    # Prepare: peers that reversed the own step, amplified or not, as many as drawn
    step = np.array(own)
    steps = {0: step, **{i + 1: -scale * step for i, scale in enumerate(scales)}}
    steps[99] = step * 0.5 + 1e-3  # one honest peer, nearly the own direction
    # Execute / Assert: no count of reversed peers outvotes the sign of a cosine
    assert agreeing_steps(steps, 0) == [99]


def test_the_direction_check_judges_only_where_it_has_a_direction() -> None:
    own, peer = np.array([1.0, 0.0]), np.array([0.0, 1.0])
    # orthogonal is not agreeing at floor 0; a lower floor admits it
    assert agreeing_steps({0: own, 1: peer}, 0) == []
    assert agreeing_steps({0: own, 1: peer}, 0, floor=-0.5) == [1]
    # a peer that did not move, or moved to NaN, has no direction
    assert agreeing_steps({0: own, 1: np.zeros(2), 2: np.array([np.nan, 1.0])}, 0) == []
    # an own step of zeros cannot judge: every finite peer is kept
    assert agreeing_steps({0: np.zeros(2), 1: -own, 2: np.array([np.inf, 0])}, 0) == [1]
    with pytest.raises(ValueError, match="floor must be a cosine"):
        agreeing_steps({0: own}, 0, floor=1.0)
    with pytest.raises(KeyError, match="own update"):
        agreeing_steps({1: own}, 0)


@PROPERTY
@given(
    parent=st.lists(st.floats(-10.0, 10.0, width=32), min_size=2, max_size=8).filter(
        lambda v: sum(x * x for x in v) > 1e-3
    ),
    step=st.floats(1e-3, 1.0),
)
def test_a_copy_is_unchanged_and_any_training_step_is_not(parent: list[float], step: float):
    # Prepare: a free rider's copy of the parent, one nudged in the last place (float32),
    # and an honest step of relative size `step` along the first coordinate
    base = np.array(parent, dtype=np.float32)
    nudged = base.copy()
    nudged[0] = np.nextafter(nudged[0], np.float32(0))
    moved = base.copy()
    moved[0] += step * float(np.linalg.norm(base)) * 1.01
    weights = {"copy": base.copy(), "nudged": nudged, "trained": moved, "orphan": base.copy()}
    parents = {"copy": [base], "nudged": [base], "trained": [base]}
    # Execute / Assert: a model without its parents' weights is never called unchanged
    assert unchanged_models(weights, parents, 1e-6) == ["copy", "nudged"]


def test_a_merge_is_unchanged_when_it_is_one_of_its_parents() -> None:
    a, b = np.array([1.0, 0.0]), np.array([0.0, 1.0])
    merged = {"one": a.copy(), "mean": (a + b) / 2}
    parents = {"one": [b, a], "mean": [a, b]}
    assert unchanged_models(merged, parents, 1e-6) == ["one"]
    with pytest.raises(ValueError, match="at least 0"):
        unchanged_models(merged, parents, -1.0)
    with pytest.raises(ValueError, match="its parent"):
        unchanged_models({"x": a}, {"x": [np.ones(3)]}, 0.0)
