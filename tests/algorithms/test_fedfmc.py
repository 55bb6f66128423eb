"""FedFMC's rules on hand-computed cases: fork eligibility, the forking test, move or
fork, the stages, and the strategy over a small made-up chain history."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pytest
import torch
from torch import nn

from mcfl_chain.strategies import (
    Candidate,
    FedFMCStrategy,
    ModelInfo,
    StrategyContext,
    UpdateInfo,
    make_strategy,
)
from mcfl_chain.strategies.fedfmc import (
    Stage,
    fork_eligible,
    fork_or_move,
    performs_poorly,
    poorly_served,
    stage_of,
    update_drift,
)

# -- pure rules ------------------------------------------------------------------------------


def test_fork_eligible_rounds_with_the_papers_values():
    # T = 25: from round 5, every 4 rounds, none in the last 5 rounds (20-24)
    assert [t for t in range(30) if fork_eligible(t, 25)] == [5, 9, 13, 17]


def test_fork_eligible_rounds_with_small_values():
    # T = 6, start 1, gap 2, end 1: rounds 1 and 3 (5 is in the last round of the stage)
    assert [t for t in range(10) if fork_eligible(t, 6, start=1, gap=2, end=1)] == [1, 3]
    # end 0: the stage's last round may fork
    assert [t for t in range(10) if fork_eligible(t, 4, start=1, gap=1, end=0)] == [1, 2, 3]


def test_performs_poorly_by_hand():
    # Prepare: figures 1, 2, 3: min 1, σ = sqrt(2/3) ≈ 0.816
    group = [1.0, 2.0, 3.0]
    # Assert: h_f = 1 flags 3 (2 > 0.816) and 2 (1 > 0.816), not 1 (0)
    assert [performs_poorly(x, group, 1.0) for x in group] == [False, True, True]
    # h_f = 2 (1.633): only 3
    assert [performs_poorly(x, group, 2.0) for x in group] == [False, False, True]
    # equal figures flag nobody, even at h_f = 0
    assert not any(performs_poorly(x, [0.5, 0.5], 0.0) for x in [0.5, 0.5])


def test_poorly_served_names_the_trainers():
    assert poorly_served({1: 0.1, 2: 0.1, 3: 0.7}, 1.0) == {3}
    assert poorly_served({1: 0.1, 2: 0.2, 3: 0.3}, 0.0) == {2, 3}
    assert poorly_served({4: 0.3}, 0.0) == frozenset()


def test_below_two_standard_deviations_every_groups_top_member_is_flagged():
    # max − min ≥ 2σ for any figures: h_f < 2 always flags the top member; at h_f = 2
    # a group of two never splits
    rng = np.random.default_rng(0)
    for _ in range(200):
        figures = dict(enumerate(rng.random(int(rng.integers(2, 9)))))
        assert max(figures, key=figures.__getitem__) in poorly_served(figures, 1.99)
    assert poorly_served({1: 0.1, 2: 0.9}, 2.0) == frozenset()
    # two equal halves: max − min = 2σ exactly, split only below 2
    halves = {1: 0.1, 2: 0.1, 3: 0.9, 4: 0.9}
    assert poorly_served(halves, 2.0) == frozenset()
    assert poorly_served(halves, 1.9) == {3, 4}


def test_fork_or_move():
    # a smaller loss elsewhere: move there; own model the best (or tied): fork
    assert fork_or_move("a", {"a": 0.5, "b": 0.3, "c": 0.4}) == "b"
    assert fork_or_move("a", {"a": 0.3, "b": 0.5}) is None
    assert fork_or_move("a", {"a": 0.3, "b": 0.3}) is None
    assert fork_or_move("a", {"a": float("nan"), "b": 0.9}) == "b"
    with pytest.raises(ValueError, match="no candidate"):
        fork_or_move("a", {"a": float("nan")})


def test_update_drift_is_relative():
    assert update_drift(np.array([3.0, 4.0]), np.array([0.0, 4.0])) == pytest.approx(0.75)
    assert update_drift(np.array([3.0, 4.0]), np.zeros(2)) == pytest.approx(5.0)


def test_stages():
    # T = 2, M = 2, three groups: merges of group 1 (rounds 2, 3) and 2 (4, 5), then done
    stages = [stage_of(r, 2, 2, 3) for r in range(2, 7)]
    assert stages == [
        Stage("merge", 1, 0),
        Stage("merge", 1, 1),
        Stage("merge", 2, 0),
        Stage("merge", 2, 1),
        Stage("done"),
    ]
    assert stage_of(1, 2, 2, 3) == Stage("fork")
    assert stage_of(2, 2, 2, 1) == Stage("done")


def test_options_are_checked_and_the_papers_values_are_the_defaults():
    s = make_strategy("fedfmc")
    assert isinstance(s, FedFMCStrategy)
    assert (s.fork_rounds, s.fork_start, s.fork_gap, s.fork_end) == (25, 5, 4, 5)
    assert (s.merge_rounds, s.fork_threshold, s.ewc) == (10, 2.0, True)
    with pytest.raises(ValueError, match="merge_rounds must be at least 1, not 0"):
        FedFMCStrategy(merge_rounds=0)
    with pytest.raises(ValueError, match="fork_threshold"):
        FedFMCStrategy(fork_threshold=-1.0)


# -- the strategy over a made-up history -------------------------------------------------------


class History:
    """A chain history: models, updates, their weights (one-entry state dicts)."""

    def __init__(self) -> None:
        self.models: dict[str, ModelInfo] = {"r": ModelInfo("r", (), None, (), 1)}
        self.updates: dict[int, UpdateInfo] = {}
        self.weights: dict[str, Any] = {"r": {"w": np.array([1.0, 0.0])}}
        self.vectors: dict[int, np.ndarray] = {}
        self.fisher_calls: list[Any] = []

    def model(self, key: str, parents: tuple[str, ...], round_: int, updates: dict) -> None:
        """``updates``: update id → (trainer id, parent, vector)."""
        for uid, (trainer, parent, vector) in updates.items():
            self.updates[uid] = UpdateInfo(uid, trainer, parent, round_)
            self.vectors[uid] = np.asarray(vector, dtype=float)
        trainers = {t for t, _, _ in updates.values()}
        self.models[key] = ModelInfo(key, parents, round_, tuple(sorted(updates)), len(trainers))
        self.weights[key] = {"w": torch.tensor([float(len(key)), 0.0])}

    def context(self, trainer_id: int) -> StrategyContext:
        def fisher(weights: Any) -> dict[str, torch.Tensor]:
            self.fisher_calls.append(weights)
            return {"w": torch.tensor([1.0, 2.0])}

        return StrategyContext(
            trainer_id=trainer_id,
            seed=0,
            initial_weights=lambda seed: {},
            validation_loss=lambda weights: 0.0,
            model_info=lambda key: self.models[key],
            update_info=lambda uid: self.updates[uid],
            models_of_round=lambda r: [k for k, m in self.models.items() if m.round == r],
            model_weights=lambda key: self.weights[key],
            update_vector=lambda uid: self.vectors[uid],
            fisher_diagonal=fisher,
        )


def fork_history() -> History:
    """Round 0: trainers 1-3 made m0 from the root (drifts 0.1, 0.1, 0.7: trainer 3 is
    poorly served at h_f = 1), trainer 4 made n0 alone. Round 1 is fork-eligible."""
    h = History()
    h.model(
        "m0",
        ("r",),
        0,
        {1: (1, "r", [1.1, 0.0]), 2: (2, "r", [0.9, 0.0]), 3: (3, "r", [1.0, 0.7])},
    )
    h.model("n0", ("r",), 0, {4: (4, "r", [1.0, 0.2])})
    return h


def fedfmc(h: History, trainer_id: int, round_: int, **options: Any) -> FedFMCStrategy:
    options = {"fork_rounds": 4, "fork_start": 1, "fork_gap": 2, "fork_end": 0, **options}
    strategy = FedFMCStrategy(**options)
    strategy.bind(h.context(trainer_id))
    strategy.begin_round(round_)
    return strategy


def test_the_poorly_served_member_is_flagged_from_the_public_drifts():
    s = fedfmc(fork_history(), trainer_id=1, round_=1)
    assert s.flagged("m0") == {3}
    assert s.flagged("n0") == frozenset()


def test_a_poorly_served_trainer_moves_to_a_better_model_or_forks():
    # Prepare: trainer 3's own model m0 vs n0
    h = fork_history()
    better_elsewhere = [
        Candidate("m0", 0.5, 3, loss=2.0, mine=True),
        Candidate("n0", 0.6, 1, loss=1.0),
    ]
    best_at_home = [
        Candidate("m0", 0.5, 3, loss=1.0, mine=True),
        Candidate("n0", 0.6, 1, loss=2.0),
    ]
    # Assert: it moves to n0, or forks (trains m0 again)
    assert fedfmc(h, 3, 1).choose_models(better_elsewhere) == ["n0"]
    assert fedfmc(h, 3, 1).choose_models(best_at_home) == ["m0"]
    # a well-served trainer stays whatever the losses
    stay = [Candidate("m0", 0.5, 3, loss=2.0), Candidate("n0", 0.6, 1, loss=1.0)]
    stay[0] = Candidate("m0", 0.5, 3, loss=2.0, mine=True)
    assert fedfmc(h, 1, 1).choose_models(stay) == ["m0"]
    # outside fork rounds nobody moves (round 2 is not eligible with gap 2)
    assert fedfmc(h, 3, 2).choose_models(better_elsewhere) == ["m0"]


def test_in_a_fork_round_forkers_and_stayers_split_the_updates():
    # Prepare: round 1, everybody of m0 proposed on it (trainer 3 forked)
    h = fork_history()
    for uid, trainer in ((11, 1), (12, 2), (13, 3)):
        h.updates[uid] = UpdateInfo(uid, trainer, "m0", 1)
    vectors = {11: np.zeros(2), 12: np.zeros(2), 13: np.zeros(2)}
    # Execute / Assert: the forker keeps its own alone, the others exclude it
    assert fedfmc(h, 3, 1).choose_updates(13, vectors) == [13]
    assert fedfmc(h, 1, 1).choose_updates(11, vectors) == [11, 12]
    # outside fork rounds every update is kept
    for uid in vectors:
        h.updates[uid] = UpdateInfo(uid, h.updates[uid].trainer_id, "m0", 2)
    assert fedfmc(h, 3, 2).choose_updates(13, vectors) == [11, 12, 13]


def merge_history() -> History:
    """Fork stage of 2 rounds ending with groups A (2 trainers), B and C (1 each); the
    merge of B (step 1) made AB in round 2, C carried on as C2; round 3 made AB3, C3."""
    h = History()
    for key, trainers in (("A", (1, 2)), ("B", (3,)), ("C", (4,))):
        h.model(key, ("r",), 1, {10 * t: (t, "r", [1.0, 0.0]) for t in trainers})
    h.model(
        "AB",
        ("A", "B"),
        2,
        {
            **{100 + t: (t, "A", [1.0, 0.0]) for t in (1, 2, 3)},
            **{200 + t: (t, "B", [1.0, 0.0]) for t in (1, 2, 3)},
        },
    )
    h.model("C2", ("C",), 2, {304: (4, "C", [1.0, 0.0])})
    h.model("AB3", ("AB",), 3, {400 + t: (t, "AB", [1.0, 0.0]) for t in (1, 2, 3)})
    h.model("C3", ("C2",), 3, {504: (4, "C2", [1.0, 0.0])})
    return h


def merging(h: History, trainer_id: int, round_: int, **options: Any) -> FedFMCStrategy:
    return fedfmc(h, trainer_id, round_, fork_rounds=2, merge_rounds=2, **options)


def test_groups_are_ordered_and_every_model_knows_its_origin():
    s = merging(merge_history(), 1, 2)
    assert s.groups() == ["A", "B", "C"]
    assert s.origin("AB3") == {"A", "B"} and s.origin("C3") == {"C"}
    assert s.merge_pair(1) == ("A", "B")
    assert s.merge_pair(2) == ("AB3", "C3")


def test_a_merge_round_trains_both_models_and_merges_them():
    # Prepare: round 2, the merge of group B into A
    h = merge_history()
    candidates = [
        Candidate("A", 0.9, 2, loss=0.1, mine=True),
        Candidate("B", 0.5, 1, loss=0.9),
        Candidate("C", 0.5, 1, loss=0.9),
    ]
    # Execute
    s = merging(h, 1, 2)
    chosen = s.choose_models(candidates)
    # Assert: A's and B's trainers train both; C's trainer its own; one merge of A and B
    assert chosen == ["A", "B"]
    assert s.merges(chosen) == [("A", "B")]
    in_b = [Candidate(c.key, c.metric, c.popularity, c.loss, c.key == "B") for c in candidates]
    assert merging(h, 3, 2).choose_models(in_b) == ["A", "B"]
    in_c = [Candidate(c.key, c.metric, c.popularity, c.loss, c.key == "C") for c in candidates]
    assert merging(h, 4, 2).choose_models(in_c) == ["C"]
    # outside a merge round, one aggregation per parent
    assert merging(h, 1, 3).merges(["AB", "C2"]) == [("AB",), ("C2",)]


def test_consolidation_rounds_train_the_consolidated_model_with_ewc():
    # Prepare: round 3, the second round of step 1
    h = merge_history()
    candidates = [
        Candidate("AB", 0.8, 3, loss=0.2, mine=True),
        Candidate("C2", 0.5, 1, loss=0.9),
    ]
    s = merging(h, 1, 3)
    # Execute
    chosen = s.choose_models(candidates)
    penalty = s.regulariser("AB")
    # Assert: the consolidated model, with EWC anchored at A (the step's start) and
    # λ = 1/3 (three groups); C's trainer trains without it
    assert chosen == ["AB"]
    assert penalty is not None
    assert h.fisher_calls == [h.weights["A"]]
    model = nn.Module()
    model.w = nn.Parameter(torch.tensor([2.0, 1.0]))  # θ − θ*(A) = (1, 1)
    assert penalty(model).item() == pytest.approx((1 * 1 + 2 * 1) / 3)
    assert s.regulariser("C2") is None
    assert merging(h, 1, 3, ewc=False).regulariser("AB") is None


def test_after_the_last_merge_everybody_trains_the_consolidated_model():
    # Prepare: round 6 is past both merges (rounds 2-3 and 4-5)
    h = merge_history()
    h.model("ABC", ("AB3", "C3"), 4, {601: (1, "AB3", [1.0, 0.0]), 604: (4, "C3", [1.0, 0.0])})
    h.model("ABC5", ("ABC",), 5, {701: (1, "ABC", [1.0, 0.0])})
    h.model("X5", ("C3",), 5, {704: (4, "C3", [1.0, 0.0])})
    candidates = [Candidate("X5", 0.9, 1, loss=0.1, mine=True), Candidate("ABC5", 0.5, 1)]
    # Execute / Assert
    assert merging(h, 4, 6).choose_models(candidates) == ["ABC5"]
    assert merging(h, 4, 6).regulariser("ABC5") is None


def test_a_member_whose_update_cannot_be_had_is_left_out():
    # Prepare: trainer 3's update of m0 is gone from storage
    h = fork_history()
    del h.vectors[3]
    context = h.context(1)
    vectors = dict(h.vectors)

    def update_vector(uid: int) -> np.ndarray:
        if uid not in vectors:
            raise LookupError(f"update {uid} unreachable")
        return vectors[uid]

    s = FedFMCStrategy(fork_rounds=4, fork_start=1, fork_gap=2, fork_end=0)
    s.bind(replace(context, update_vector=update_vector))
    # Execute / Assert: trainers 1 and 2 have equal drifts: nobody is flagged
    assert s.flagged("m0") == frozenset()
