"""The strategies (MCFL and its options, FedAvg, local, IFCA, FACADE) behind the common
interface, and the registry."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pytest
import torch

from mcfl_chain.algorithms.divergence import DIVERGENCE_MEASURES
from mcfl_chain.algorithms.facade import HEAD_CHOICE, head_choice
from mcfl_chain.algorithms.robust import CoordinateMedian, TrimmedMean, parse_defence
from mcfl_chain.algorithms.robust.krum import multi_krum
from mcfl_chain.strategies import (
    STRATEGIES,
    Candidate,
    FACADEStrategy,
    FedAvgStrategy,
    IFCAStrategy,
    LocalStrategy,
    MCFLPlusStrategy,
    MCFLStrategy,
    ModelInfo,
    Strategy,
    StrategyContext,
    make_strategy,
    own_branch_seed,
)
from mcfl_chain.strategies.ifca import cluster_seed


def _context(trainer_id: int = 7, losses: dict[int, float] | None = None) -> StrategyContext:
    """Weights are stood in by a one-entry dict naming the seed they come from; the
    validation loss of such weights is read from ``losses``."""
    return StrategyContext(
        trainer_id=trainer_id,
        seed=5,
        initial_weights=lambda seed: {"w": np.full(3, float(seed % 1000))},
        validation_loss=lambda weights: (losses or {}).get(int(weights["w"][0]), 1.0),
    )


CANDIDATES = [
    Candidate("a", metric=0.90, popularity=1),
    Candidate("b", metric=0.80, popularity=4),
    Candidate("c", metric=0.85, popularity=2),
    Candidate("d", metric=0.95, popularity=1),
]

# Own is key 0; divergences 1, 1, 1, 1, 10 from own (median 1, std 3.6).
VECTORS = {
    0: np.array([1.0]),
    1: np.array([2.0]),
    2: np.array([0.0]),
    3: np.array([2.0]),
    4: np.array([0.0]),
    5: np.array([11.0]),
}


def test_registry_builds_both_strategies() -> None:
    assert set(STRATEGIES) >= {"mcfl", "fedavg"}
    mcfl = make_strategy("mcfl", tolerance=3.0, divergence="cosine")
    assert isinstance(mcfl, MCFLStrategy) and isinstance(mcfl, Strategy)
    assert (mcfl.tolerance, mcfl.divergence, mcfl.name) == (3.0, "cosine", "mcfl")
    assert isinstance(make_strategy("fedavg"), FedAvgStrategy)


def test_registry_errors_are_clear() -> None:
    known = ", ".join(sorted(STRATEGIES))
    with pytest.raises(ValueError, match=f"unknown strategy 'krum'; known: {known}"):
        make_strategy("krum")
    with pytest.raises(ValueError, match=r"unknown options \['tolerence'\]"):
        make_strategy("mcfl", tolerence=1.0)
    with pytest.raises(
        ValueError, match="divergence must be one of l2, cosine, elementwise, not 'l1'"
    ):
        MCFLStrategy(divergence="l1")  # type: ignore[arg-type]


def test_options_of_other_strategies_are_dropped() -> None:
    # A command line passes --tolerance and --divergence whatever the strategy.
    assert isinstance(make_strategy("fedavg", tolerance=1.0, divergence="l2"), FedAvgStrategy)


def test_mcfl_chooses_models_by_algorithm_1() -> None:
    assert MCFLStrategy().choose_models(CANDIDATES) == ["b", "c"]


def test_mcfl_chooses_updates_by_algorithm_2() -> None:
    assert MCFLStrategy(tolerance=2.0).choose_updates(0, VECTORS) == [0, 1, 2, 3, 4]
    assert MCFLStrategy(tolerance=3.0).choose_updates(0, VECTORS) == [0, 1, 2, 3, 4, 5]


def test_mcfl_cosine_compares_update_directions_from_the_parent() -> None:
    parent = np.array([10.0, 10.0])
    vectors = {
        0: parent + np.array([1.0, 0.0]),  # own moved along +x
        1: parent + np.array([2.0, 0.1]),  # same direction
        2: parent + np.array([1.0, -0.1]),  # same direction
        3: parent + np.array([-1.0, 0.0]),  # opposite direction
    }
    strategy = MCFLStrategy(tolerance=1.0, divergence="cosine")
    assert strategy.choose_updates(0, vectors, parent=parent) == [0, 1, 2]


def test_fedavg_trains_the_single_most_popular_model() -> None:
    assert FedAvgStrategy().choose_models(CANDIDATES) == ["b"]
    tied = [Candidate(3, 0.5, 2), Candidate(1, 0.7, 2), Candidate(2, 0.7, 2)]
    assert FedAvgStrategy().choose_models(tied) == [1]
    assert FedAvgStrategy().choose_models([]) == []


def test_fedavg_accepts_every_update() -> None:
    assert FedAvgStrategy().choose_updates(0, VECTORS) == [0, 1, 2, 3, 4, 5]
    with pytest.raises(KeyError):
        FedAvgStrategy().choose_updates(9, VECTORS)


def test_mcfl_defaults_are_the_authors_and_the_old_readings_are_options() -> None:
    default = MCFLStrategy()
    assert (default.start, default.aggregate_on_rule, default.selection) == (
        "own",
        "best",
        "percentile",
    )
    v1 = make_strategy("mcfl", start="shared", aggregate_on="all", selection="ceil")
    assert isinstance(v1, MCFLStrategy)
    assert (v1.start, v1.aggregate_on_rule, v1.selection) == ("shared", "all", "ceil")
    for bad, message in (
        ({"start": "mine"}, "start must be one of"),
        ({"aggregate_on": "some"}, "aggregate_on must be one of"),
        ({"selection": "sqrt"}, "selection must be one of"),
    ):
        with pytest.raises(ValueError, match=message):
            MCFLStrategy(**bad)  # type: ignore[arg-type]


def test_mcfl_own_start_trains_the_trainers_own_initialisation() -> None:
    strategy = MCFLStrategy()
    strategy.bind(_context(trainer_id=7))
    weights = strategy.starting_weights()
    assert weights is not None
    assert weights["w"][0] == own_branch_seed(5, 7) % 1000
    # another trainer of the same network starts elsewhere
    other = MCFLStrategy()
    other.bind(_context(trainer_id=8))
    assert own_branch_seed(5, 7) != own_branch_seed(5, 8)
    # the shared start trains the root
    shared = MCFLStrategy(start="shared")
    shared.bind(_context())
    assert shared.starting_weights() is None


def test_a_strategy_needs_its_context_before_choosing_a_start() -> None:
    with pytest.raises(RuntimeError, match="bind"):
        MCFLStrategy().starting_weights()


def test_mcfl_own_start_aggregates_only_the_own_update_on_the_root() -> None:
    strategy = MCFLStrategy(tolerance=3.0)
    assert strategy.choose_updates(0, VECTORS, first_round=True) == [0]
    # later rounds (and the shared start) run Algorithm 2
    assert strategy.choose_updates(0, VECTORS) == [0, 1, 2, 3, 4, 5]
    shared = MCFLStrategy(tolerance=3.0, start="shared")
    assert shared.choose_updates(0, VECTORS, first_round=True) == [0, 1, 2, 3, 4, 5]


def test_mcfl_aggregates_on_the_best_ranked_model_or_on_all() -> None:
    assert MCFLStrategy().aggregate_on(["b", "c"]) == ["b"]
    assert MCFLStrategy(aggregate_on="all").aggregate_on(["b", "c"]) == ["b", "c"]
    assert MCFLStrategy().aggregate_on([]) == []


def test_mcfl_selection_rule_sets_how_many_models_are_trained() -> None:
    two = [Candidate("x", 0.9, 1), Candidate("y", 0.8, 1)]
    # n = 2: the authors' percentile and the floor train one, the ceiling two.
    assert MCFLStrategy().choose_models(two) == ["x"]
    assert MCFLStrategy(selection="floor").choose_models(two) == ["x"]
    assert MCFLStrategy(selection="ceil").choose_models(two) == ["x", "y"]


def test_local_training_keeps_to_its_own_lineage() -> None:
    strategy = LocalStrategy()
    strategy.bind(_context(trainer_id=3))
    assert strategy.starting_weights()["w"][0] == own_branch_seed(5, 3) % 1000
    candidates = [
        Candidate("a", 0.9, 5),
        Candidate("mine", 0.1, 1, mine=True),
        Candidate("c", 0.95, 2),
    ]
    assert strategy.choose_models(candidates) == ["mine"]
    assert strategy.choose_models([Candidate("root", 0.1, 1)]) == ["root"]
    # lineage lost (its last aggregation failed): the best candidate rather than nothing
    assert strategy.choose_models(candidates[::2]) == ["c"]
    assert strategy.choose_updates(0, VECTORS) == [0]
    assert strategy.choose_updates(0, VECTORS, first_round=True) == [0]


def test_ifca_starts_from_the_lowest_loss_of_k_seeded_models() -> None:
    # Cluster j's weights are filled with cluster_seed(5, j) % 1000; make cluster 1 best.
    tags = [cluster_seed(5, j) % 1000 for j in range(3)]
    strategy = IFCAStrategy(clusters=3)
    strategy.bind(_context(losses={tags[0]: 0.9, tags[1]: 0.2, tags[2]: 0.5}))
    assert strategy.starting_weights()["w"][0] == tags[1]


def test_ifca_trains_the_lowest_loss_candidate() -> None:
    candidates = [
        Candidate("a", 0.9, 5, loss=0.40),
        Candidate("b", 0.7, 1, loss=0.30),
        Candidate("c", 0.8, 1, loss=0.30),
    ]
    assert IFCAStrategy().choose_models(candidates) == ["b"]  # tie on loss: smaller key
    assert IFCAStrategy().choose_models([Candidate("a", 0.2, 1), Candidate("b", 0.3, 1)]) == ["b"]
    assert IFCAStrategy().choose_models([]) == []


def test_ifca_first_round_groups_updates_by_nearest_starting_model() -> None:
    strategy = IFCAStrategy(clusters=2)
    strategy.bind(_context())
    start0, start1 = (cluster_seed(5, j) % 1000 for j in range(2))
    vectors = {
        10: np.full(3, start0 + 0.5),
        11: np.full(3, start1 - 0.5),
        12: np.full(3, start0 - 0.2),
        13: np.full(3, start1 + 0.1),
    }
    assert strategy.choose_updates(10, vectors, first_round=True) == [10, 12]
    assert strategy.choose_updates(13, vectors, first_round=True) == [11, 13]
    # later rounds: FedAvg over every update on the model
    assert strategy.choose_updates(10, vectors) == [10, 11, 12, 13]
    with pytest.raises(ValueError, match="at least 1"):
        IFCAStrategy(clusters=0)


def test_ifca_offers_again_the_model_of_a_cluster_nobody_chose() -> None:
    # Prepare: what the chain holds by round 3 — clusters a and b on the root in round
    # 0, both continued in round 1, only a in round 2.
    rounds = {0: ["a0", "b0"], 1: ["a1", "b1"], 2: ["a2"]}
    parents = {"a0": ("root",), "b0": ("root",), "a1": ("a0",), "b1": ("b0",), "a2": ("a1",)}
    strategy = IFCAStrategy(clusters=2)
    strategy.bind(
        StrategyContext(
            trainer_id=7,
            seed=5,
            initial_weights=lambda seed: {},
            validation_loss=lambda weights: 1.0,
            model_info=lambda key: ModelInfo(key, parents[key], None, (), 1),
            models_of_round=lambda r: rounds.get(r, []),
        )
    )

    # Execute / Assert: b1 is carried forward (a2 is a round-2 model anyway)
    assert strategy.carried_models(3) == ["a2", "b1"]
    assert strategy.carried_models(2) == ["a1", "b1"]
    assert strategy.carried_models(0) == []
    # the other strategies offer nothing more than the previous round's models
    assert MCFLStrategy().carried_models(3) == [] == FedAvgStrategy().carried_models(3)


def test_fedavg_first_round_by_trainer_one_alone_when_told() -> None:
    # Prepare
    root = [Candidate("root", 0.1, 1)]
    published, authors, first = (
        FedAvgStrategy(),
        FedAvgStrategy(fedavg_start="one"),
        FedAvgStrategy(fedavg_start="one"),
    )
    for strategy, trainer in ((published, 7), (authors, 7), (first, 1)):
        strategy.bind(_context(trainer_id=trainer))
        strategy.begin_round(0)

    # Assert: by default everyone trains the root; the authors' way only trainer 1,
    # and from round 1 on everyone trains the most popular model again.
    assert published.choose_models(root) == ["root"] == first.choose_models(root)
    assert authors.choose_models(root) == []
    authors.begin_round(1)
    assert authors.choose_models(CANDIDATES) == ["b"]
    assert published.fedavg_start == "all"


def test_mcfl_runs_the_authors_divergence_and_statistics_when_told() -> None:
    # Prepare: own 1; peers at 2 (|1|/1), 0 (1), 1.5 (0.5), 4 (3).
    vectors = {0: np.array([1.0]), 1: np.array([2.0]), 2: np.array([0.0]), 3: np.array([1.5]),
               4: np.array([4.0])}  # fmt: skip
    default = MCFLStrategy(tolerance=1.0)
    authors = make_strategy(
        "mcfl", tolerance=1.0, divergence="elementwise", filter_statistics="authors"
    )

    # Assert: the defaults are the published runs' (L2, the peers' statistics).
    assert (default.divergence, default.filter_statistics) == ("l2", "paper")
    # Paper: peers 1, 1, 0.5, 3 → median 1, std ≈ 0.960, threshold ≈ 1.960: 4 rejected.
    assert default.choose_updates(0, vectors) == [0, 1, 2, 3]
    # Authors: with the own 0 → median 1, std ≈ 1.020, threshold ≈ 2.020: 4 rejected too,
    # and with a negative own weight the signed divergences turn negative.
    assert authors.choose_updates(0, vectors) == [0, 1, 2, 3]
    flipped = {key: -vector for key, vector in vectors.items()}
    assert authors.choose_updates(0, flipped) == [0, 1, 2, 3, 4]  # all <= threshold
    with pytest.raises(ValueError, match="filter_statistics"):
        MCFLStrategy(filter_statistics="median")


# -- defences on top of a strategy's update choice ----------------------------------------

# VECTORS plus a second outlier: divergences from own 1, 1, 1, 1, 10, 11.
TWO_OUTLIERS = {**VECTORS, 6: np.array([12.0])}


def test_without_a_defence_a_strategy_selects_what_it_chooses() -> None:
    # Prepare
    strategy = make_strategy("mcfl", tolerance=3.0)

    # Execute / Assert
    assert strategy.defence is None
    assert strategy.select_updates(0, VECTORS) == strategy.choose_updates(0, VECTORS)


def test_mcfl_defence_removes_what_algorithm_2_let_through() -> None:
    # Prepare: at tolerance 3 Algorithm 2 keeps the outlier 5 (divergence 10 < 1 + 3·3.6).
    strategy = make_strategy("mcfl", tolerance=3.0, defence=parse_defence("multi-krum"))
    assert strategy.choose_updates(0, VECTORS) == [0, 1, 2, 3, 4, 5]

    # Execute
    selected = strategy.select_updates(0, VECTORS)

    # Assert: Multi-Krum (f=1, n=6, 3 neighbours) scores 0..4 at 3 or 5 and 5 at
    # 81 + 81 + 100 = 262, and keeps the m = 5 lowest.
    assert selected == [0, 1, 2, 3, 4]


def test_mcfl_defence_runs_after_algorithm_2_not_instead_of_it() -> None:
    # Prepare: tolerance 1 drops both outliers (threshold 1 + 4.49); Multi-Krum alone,
    # over all seven updates, drops only the farthest (6) and would keep 5.
    strategy = make_strategy("mcfl", tolerance=1.0, defence=parse_defence("multi-krum"))
    assert multi_krum(TWO_OUTLIERS, f=1) == [0, 1, 2, 3, 4, 5]

    # Execute
    selected = strategy.select_updates(0, TWO_OUTLIERS)

    # Assert: the defence saw only Algorithm 2's five (n = 5 = 2f + 3: Multi-Krum runs,
    # keeps four by score, and the own update is added back).
    assert selected == [0, 1, 2, 3, 4]


def test_mcfl_defence_keeps_the_own_update_alone_when_too_few_are_left() -> None:
    # Prepare: Algorithm 2 keeps three updates; Krum with f=1 needs 2f + 3 = 5.
    vectors = {0: np.array([1.0]), 1: np.array([1.5]), 2: np.array([0.5])}
    strategy = make_strategy("mcfl", tolerance=2.0, defence=parse_defence("krum"))

    # Execute / Assert
    assert strategy.choose_updates(0, vectors) == [0, 1, 2]
    assert strategy.select_updates(0, vectors) == [0]


def test_mcfl_own_start_first_round_has_nothing_to_defend() -> None:
    strategy = make_strategy("mcfl", defence=parse_defence("multi-krum"))
    assert strategy.select_updates(0, VECTORS, first_round=True) == [0]


def test_fedavg_defence_replaces_every_update() -> None:
    # Prepare
    strategy = make_strategy("fedavg", defence=parse_defence("multi-krum"))

    # Execute / Assert: Multi-Krum over all six drops the outlier (scores as above).
    assert strategy.select_updates(0, VECTORS) == [0, 1, 2, 3, 4]
    # Krum keeps the lowest score, update 0 (1 + 1 + 1 = 3), and trainer 1's own update.
    krum = make_strategy("fedavg", defence=parse_defence("krum"))
    assert krum.select_updates(1, VECTORS) == [0, 1]


def test_local_training_has_nothing_to_defend() -> None:
    strategy = make_strategy("local", defence=parse_defence("multi-krum"))
    assert strategy.select_updates(0, VECTORS) == [0]


def _two_head_weights(choice: int = 0) -> dict[str, torch.Tensor]:
    return {
        "core": torch.tensor([1.0]),
        "heads.0.bias": torch.tensor([0.0]),
        "heads.1.bias": torch.tensor([1.0]),
        HEAD_CHOICE: torch.tensor(choice),
    }


def _head_loss_context(losses: list[float]) -> StrategyContext:
    """The validation loss of two-head weights is ``losses`` of the head they predict with."""
    return StrategyContext(
        trainer_id=1,
        seed=5,
        initial_weights=lambda seed: _two_head_weights(),
        validation_loss=lambda weights: losses[int(weights[HEAD_CHOICE])],
    )


def test_facade_personalises_a_model_with_its_lowest_loss_head() -> None:
    # Prepare
    strategy = make_strategy("facade", clusters=2, tolerance=1.0)
    strategy.bind(_head_loss_context([0.9, 0.4]))
    weights = _two_head_weights(choice=0)

    # Execute
    mine = strategy.personalise(weights)

    # Assert: head 1 has the lower loss; the model given is left as it was
    assert isinstance(strategy, FACADEStrategy) and strategy.model_heads() == 2
    assert head_choice(mine) == 1 and head_choice(weights) == 0
    assert mine["core"] is weights["core"]
    assert strategy.personal_labels(mine) == {"head": 1}


def test_facade_trains_the_most_popular_model_with_every_update() -> None:
    strategy = FACADEStrategy(clusters=2)
    assert strategy.choose_models(CANDIDATES) == FedAvgStrategy().choose_models(CANDIDATES)
    assert strategy.choose_updates(0, VECTORS) == sorted(VECTORS)


def test_facade_refuses_a_model_with_another_number_of_heads() -> None:
    strategy = FACADEStrategy(clusters=3)
    strategy.bind(_head_loss_context([0.9, 0.4]))
    with pytest.raises(ValueError, match="FACADE with 3 heads got a model with 2"):
        strategy.personalise(_two_head_weights())
    with pytest.raises(ValueError, match="at least 1"):
        FACADEStrategy(clusters=0)


def test_other_strategies_neither_personalise_nor_need_heads() -> None:
    weights = _two_head_weights()
    for name in ("mcfl", "fedavg", "local", "ifca"):
        strategy = make_strategy(name)
        assert strategy.personalise(weights) is weights and strategy.model_heads() is None
        assert strategy.personal_labels(weights) == {}


# -- MCFL-plus: each mechanism against the plain MCFL choice it changes ---------------------


def _plus_context(aggregators: dict[str, tuple[int, ...]], trainer_id: int = 7) -> StrategyContext:
    """A context whose chain view says who aggregated each candidate."""

    def info(key: str) -> ModelInfo:
        return ModelInfo(key, ("root",), 0, (), len(aggregators[key]), aggregators[key])

    return replace(_context(trainer_id), model_info=info)


def test_mcfl_plus_is_mcfl_with_each_mechanism_an_option() -> None:
    plus = make_strategy("mcfl-plus", tolerance=2.0)
    assert isinstance(plus, MCFLPlusStrategy) and isinstance(plus, MCFLStrategy)
    assert (plus.tolerance, plus.start, plus.aggregate_on_rule) == (2.0, "own", "best")
    assert (plus.plus_guard, plus.plus_agreement, plus.plus_history) == (True, True, True)
    off = make_strategy("mcfl-plus", plus_guard="off", plus_history="off", plus_robust="off")
    assert (off.plus_guard, off.plus_history, off.aggregation_rule) == (False, False, None)
    # the robust rule inside the group: trimmed mean by default, or the median; a
    # --defence aggregation rule takes precedence, a selection rule runs as for MCFL
    assert isinstance(plus.aggregation_rule, TrimmedMean) and plus.aggregation_rule.beta == 0.2
    assert isinstance(
        make_strategy("mcfl-plus", plus_robust="median").aggregation_rule, CoordinateMedian
    )
    defended = make_strategy("mcfl-plus", defence=parse_defence("median"))
    assert isinstance(defended.aggregation_rule, CoordinateMedian)
    krum = make_strategy("mcfl-plus", defence=parse_defence("krum"))
    assert isinstance(krum.aggregation_rule, TrimmedMean)
    with pytest.raises(ValueError, match="plus_robust must be one of"):
        make_strategy("mcfl-plus", plus_robust="mean")


def test_mcfl_plus_guard_keeps_a_lone_trainer_on_the_branch_its_data_prefers() -> None:
    # rotation-30-2, round 3: its own branch (70 %, popularity 1) against the majority's
    # model (31 % on its rotated data, 15 aggregators): Algorithm 1 takes the majority's
    candidates = [
        Candidate("own", metric=0.70, popularity=1, mine=True),
        Candidate("majority", metric=0.31, popularity=15),
    ]
    assert MCFLStrategy().choose_models(candidates) == ["majority"]
    assert MCFLPlusStrategy().choose_models(candidates) == ["own"]
    assert MCFLPlusStrategy(plus_guard="off").choose_models(candidates) == ["majority"]


def test_mcfl_plus_counts_popularity_by_agreement_so_sybils_buy_no_bonus() -> None:
    # Prepare: trainer 7 holds a weak model; peer 1's model is best on its data; two
    # Sybil identities (5, 6) aggregate one model scoring 78 % of the best
    candidates = [
        Candidate("group", metric=0.90, popularity=1),
        Candidate("sybil", metric=0.70, popularity=2),
        Candidate("mine", metric=0.66, popularity=1, mine=True),
    ]
    aggregators = {"group": (1,), "sybil": (5, 6), "mine": (7,)}
    plus, unweighted = MCFLPlusStrategy(), MCFLPlusStrategy(plus_agreement="off")
    for strategy in (plus, unweighted):
        strategy.bind(_plus_context(aggregators))
        strategy.begin_round(3)
    # Execute / Assert: √2 ranks the Sybils' model first, weighted popularity does not
    assert MCFLStrategy().choose_models(candidates)[0] == "sybil"
    assert unweighted.choose_models(candidates)[0] == "sybil"
    assert plus.choose_models(candidates)[0] == "group"


def test_mcfl_plus_chance_floor_keeps_a_trainer_at_chance_on_its_own_lineage() -> None:
    # Prepare: the third declared benchmark, label flip 40 % concentrated, seed 223, round
    # 2 at lr 0.01: the honest trainer's own model and the three flippers' models all at
    # chance on its data (chance rate 0.27: its most frequent label's share)
    candidates = [
        Candidate("own", metric=0.19, popularity=1, mine=True),
        Candidate("flippers", metric=0.25, popularity=3),
    ]
    aggregators = {"own": (7,), "flippers": (1, 2, 3)}
    context = replace(_plus_context(aggregators), chance_metric=0.27)
    plus, floored = MCFLPlusStrategy(), MCFLPlusStrategy(plus_chance="on")
    for strategy in (plus, floored):
        strategy.bind(context)
        strategy.begin_round(2)
    # Execute / Assert: without the floor the guard lets the flippers' model in (its
    # score beats the held one) and popularity ranks it first; with it, nothing beats
    # chance, so the trainer stays on its own model
    assert plus.choose_models(candidates) == ["flippers"]
    assert floored.choose_models(candidates) == ["own"]
    # once a model beats chance it is followed, and the ones at chance are never trained
    better = [*candidates, Candidate("peer", metric=0.6, popularity=1)]
    floored.begin_round(3)
    assert floored.choose_models(better) == ["peer"]
    # the metrics tell how often it acted, in totals since the start: round 2 set both
    # candidates aside and left the trainer alone, round 3 set two of three aside
    assert floored.personal_labels({}) == {"chance_set_aside": 4, "chance_alone_rounds": 1}
    assert "chance_set_aside" not in plus.personal_labels({})
    # an autoencoder (no chance rate) is unaffected, and its metrics say nothing of it
    blind = MCFLPlusStrategy(plus_chance="on")
    blind.bind(_plus_context(aggregators))
    blind.begin_round(2)
    assert blind.choose_models(candidates) == ["flippers"]
    assert blind.personal_labels({}) == {}


def test_mcfl_plus_refuses_a_free_riders_copy_of_an_older_model() -> None:
    # Prepare: the fourth declared benchmark, free riders at 40 % concentrated, seed 231,
    # round 8: a free rider's model is trainer 10's round-6 model again (its copy "r7"
    # of "r6" has r6's weights), and scores 88.3 % on its validation split against 85.0
    # for the trainer's newer model
    weights = {
        "r6": {"w": torch.tensor([1.0, 2.0])},
        "r7": {"w": torch.tensor([1.0, 2.0])},
        "own6": {"w": torch.tensor([1.0, 2.0])},
        "own7": {"w": torch.tensor([1.3, 1.6])},
    }
    parents = {"r7": ("r6",), "own7": ("own6",)}

    def info(key: str) -> ModelInfo:
        return ModelInfo(key, parents[key], 7, (), 1, (1,))

    context = replace(_context(10), model_info=info, model_weights=lambda key: weights[key])
    candidates = [
        Candidate("r7", metric=0.883, popularity=1),
        Candidate("own7", metric=0.850, popularity=1, mine=True),
    ]
    plain, refusing = MCFLPlusStrategy(), MCFLPlusStrategy(plus_replicas="on")
    for strategy in (plain, refusing):
        strategy.bind(context)
        strategy.begin_round(8)
    # Execute / Assert: the copy ranks first unless copies are refused
    assert plain.choose_models(candidates) == ["r7"]
    assert refusing.choose_models(candidates) == ["own7"]
    # once the free rider's model holds new weights it is a candidate like any other
    weights["r7"] = {"w": torch.tensor([1.1, 2.2])}
    refusing.begin_round(9)
    assert refusing.choose_models(candidates) == ["r7"]
    # a trainer offered only copies (it holds nothing) still trains one
    weights["r7"] = weights["r6"]
    assert refusing.choose_models(candidates[:1]) == ["r7"]


def test_mcfl_plus_leaves_zero_steps_out_of_algorithm_2() -> None:
    # Prepare: the fourth declared benchmark, free riders at 40 % concentrated, seed 230,
    # round 9: on one parent the trainer's update, an honest peer's (its own step, about
    # orthogonal) and a free rider's zero step; the zero step is nearer the trainer's
    # update (its own step's length) than the honest peer is
    parent = np.array([4.0, 0.0, 0.0])
    vectors = {0: parent + [0.0, 1.0, 0.0], 1: parent.copy(), 2: parent + [0.1, 0.0, 1.0]}
    options = {"tolerance": 1.0, "plus_own_update": "off", "plus_history": "off"}
    plain = MCFLPlusStrategy(**options)
    refusing = MCFLPlusStrategy(**options, plus_replicas="on")
    # Execute / Assert: Algorithm 2 keeps the nearer of two peers, the zero step; left
    # out first, the honest peer is the one peer and is kept
    assert plain.choose_updates(0, vectors, parent) == [0, 1]
    assert refusing.choose_updates(0, vectors, parent) == [0, 2]
    # the trainer's own update is never left out, nor is anything without the parent
    assert 1 in refusing.choose_updates(1, vectors, parent)
    assert refusing.choose_updates(0, vectors) == [0, 1]


def test_mcfl_plus_caps_algorithm_2_by_the_divergences_it_accepted_before() -> None:
    # Prepare: round 1, four honest peers at divergence 0.1 from the own update
    own = np.array([1.0])
    honest = {
        0: own,
        1: np.array([1.1]),
        2: np.array([0.9]),
        3: np.array([1.1]),
        4: np.array([0.9]),
    }
    # round 2: one honest peer and an attacker that widens Algorithm 2's band
    attacked = {0: own, 1: np.array([1.1]), 9: np.array([1.6])}
    plus, plain = (
        MCFLPlusStrategy(tolerance=2.0),
        MCFLPlusStrategy(tolerance=2.0, plus_history="off"),
    )
    for strategy in (plus, plain):
        strategy.begin_round(1)
        assert strategy.choose_updates(0, honest) == [0, 1, 2, 3, 4]
        strategy.begin_round(2)
    # Execute / Assert: Algorithm 2 keeps the attacker (median 0.35 + 2·std 0.25), the
    # history (0.1 × 1.5) does not
    assert MCFLStrategy(tolerance=2.0).choose_updates(0, attacked) == [0, 1, 9]
    assert plain.choose_updates(0, attacked) == [0, 1, 9]
    assert plus.choose_updates(0, attacked) == [0, 1]
    # the first round of the own start keeps the own update alone, as MCFL does
    assert plus.choose_updates(0, attacked, first_round=True) == [0]


@pytest.mark.parametrize("divergence", ["l2", "cosine", "elementwise"])
def test_mcfl_plus_caps_by_the_divergence_algorithm_2_uses(divergence: str) -> None:
    # the history records the chosen measure, of deltas where it takes them
    own, peer, parent = np.array([1.0, 2.0]), np.array([1.5, 1.0]), np.array([0.5, 0.5])
    plus = MCFLPlusStrategy(divergence=divergence)
    measure = DIVERGENCE_MEASURES[divergence]
    start = parent if measure.on_deltas else 0.0
    expected = measure.measure(own - start, peer - start)
    assert plus._divergences(0, [1], {0: own, 1: peer}, parent) == {1: expected}


def test_mcfl_plus_keeps_its_own_update_alone_when_the_groups_mean_serves_it_worse() -> None:
    # Prepare: one weight; the validation loss is the distance to what the trainer's
    # data wants (its own update, 1.0, or the group's mean, 1.5)
    vectors = {0: np.array([1.0]), 1: np.array([2.0]), 2: np.array([1.5])}

    def strategy(wants: float, **options: str) -> MCFLPlusStrategy:
        plus = MCFLPlusStrategy(tolerance=3.0, plus_history="off", **options)
        plus.bind(
            replace(
                _context(),
                initial_weights=lambda seed: {"w": torch.zeros(1)},
                validation_loss=lambda weights: abs(float(weights["w"][0]) - wants),
            )
        )
        return plus

    # Execute / Assert
    assert strategy(wants=1.0).choose_updates(0, vectors) == [0]
    assert strategy(wants=1.5).choose_updates(0, vectors) == [0, 1, 2]
    assert strategy(wants=1.0, plus_own_update="off").choose_updates(0, vectors) == [0, 1, 2]


def test_mcfl_plus_aggregates_on_no_parent_whose_trained_update_scores_far_worse() -> None:
    # Prepare: round 1 of the first declared defence benchmark's seed 202 in small: the
    # Sybils' model ranked first (popularity 2 at chance like everyone's), so MCFL
    # aggregates on it; the update trained from it stayed at chance (one weight: its
    # accuracy is the weight), the one from the honest peer's model learned
    updates = {"sybil": 11, "peer": 12, "close": 13}
    scores = {11: 0.37, 12: 0.86, 13: 0.84, 14: float("nan")}

    def strategy(**options: str) -> MCFLPlusStrategy:
        plus = MCFLPlusStrategy(**options)
        plus.bind(
            replace(
                _context(),
                initial_weights=lambda seed: {"w": torch.zeros(1)},
                validation_metric=lambda weights: float(weights["w"][0]),
                update_vector=lambda update_id: np.array([scores[update_id]]),
            )
        )
        return plus

    # Execute / Assert: the first trained parent within the margin (5 % of 0.86) of the
    # best update, in Algorithm 1's order
    assert MCFLStrategy().aggregate_on(["sybil", "peer"], updates) == ["sybil"]
    assert strategy().aggregate_on(["sybil", "peer"], updates) == ["peer"]
    assert strategy().aggregate_on(["sybil", "close", "peer"], updates) == ["close"]
    assert strategy(aggregate_on="all").aggregate_on(["sybil", "close", "peer"], updates) == [
        "close",
        "peer",
    ]
    assert strategy(plus_trained_guard="off").aggregate_on(["sybil", "peer"], updates) == ["sybil"]
    # no evidence, no judgement: updates unknown, unreadable or scoring NaN
    assert strategy().aggregate_on(["sybil", "peer"]) == ["sybil"]
    assert strategy().aggregate_on(["sybil", "peer"], {"sybil": 14, "peer": 12}) == ["sybil"]
    assert strategy().aggregate_on(["sybil", "gone"], {"sybil": 11, "gone": 99}) == ["sybil"]


def _scored_plus(train: Any = None, **options: object) -> MCFLPlusStrategy:
    """MCFL-plus whose validation metric of a model is its one weight ``w``."""
    plus = MCFLPlusStrategy(**options)
    plus.bind(
        replace(_context(), validation_metric=lambda weights: float(weights["w"][0]), train=train)
    )
    return plus


def _deploy_rounds(
    plus: MCFLPlusStrategy, scores: list[float], calls: int = 1
) -> list[tuple[float, dict[str, Any]]]:
    """What ``plus`` deploys, and its labels, in rounds 0, 1, … whose aggregation scores
    ``scores`` (asked ``calls`` times a round)."""
    deployed = []
    for round_, score in enumerate(scores):
        plus.begin_round(round_)
        weights = {"w": torch.tensor([score])}
        mine = [plus.deployed(weights) for _ in range(calls)][0]
        deployed.append((round(float(mine["w"][0]), 3), plus.personal_labels(weights)))
    return deployed


def test_mcfl_plus_keeps_the_best_model_deployed_through_a_last_round_that_goes_wrong() -> None:
    # Prepare: one weight whose value is the validation accuracy; seed 231's trainer 10
    # in small: 0.86 and 0.883, then a round-9 aggregation at 0.733
    strategy, play = _scored_plus, _deploy_rounds

    # Execute
    keeping = play(strategy(plus_keep_best="on"), [0.86, 0.883, 0.85, 0.733, float("nan"), 0.9])
    plain = play(strategy(), [0.883, 0.733])

    # Assert: within the margin (5 % of 0.883) the new one is deployed, below it the
    # best so far, and a better one becomes the best
    assert keeping == [
        (0.86, {}),
        (0.883, {}),
        (0.85, {}),
        (0.883, {"kept_from_round": 1}),
        (0.883, {"kept_from_round": 1}),
        (0.9, {}),
    ]
    assert plain == [(0.883, {}), (0.733, {})]
    tight = play(strategy(plus_keep_best="on", plus_keep_margin=0.0), [0.883, 0.85])
    assert tight[1] == (0.883, {"kept_from_round": 0})
    wide = play(strategy(plus_keep_best="on", plus_keep_margin=0.2), [0.883, 0.733])
    assert wide[1] == (0.733, {})


def test_mcfl_plus_deploys_its_personal_model_only_where_its_validation_prefers_it() -> None:
    # Prepare: one weight whose value is the validation accuracy; a train view that moves
    # the weight by a fixed step (+0.02: personalising pays, -0.02: it does not) and
    # records what it was asked
    asked: list[tuple[float, Any, int | None]] = []

    def stepping(step: float) -> Any:
        def train_view(weights: Any, penalty: Any, epochs: int | None) -> Any:
            asked.append((round(float(weights["w"][0]), 3), penalty, epochs))
            return {"w": weights["w"] + step}

        return train_view

    # Execute: each round asks twice, as a worker may; the second trains from the same
    # start, so a round takes one personal step
    pays = _deploy_rounds(_scored_plus(stepping(0.02), plus_personal=0.5), [0.8, 0.83, 0.87], 2)
    pays_asked, asked[:] = list(asked), []
    costs = _deploy_rounds(_scored_plus(stepping(-0.02), plus_personal=0.5), [0.8, 0.85], 2)
    asked[:] = []
    off = _deploy_rounds(_scored_plus(stepping(0.02)), [0.8])

    # Assert: the personal model is deployed where it scores higher, the shared one
    # otherwise; it trains on from its own last state, pulled towards the shared model
    assert pays == [
        (0.82, {"personal_rounds": 1}),
        (0.84, {"personal_rounds": 2}),
        (0.87, {"personal_rounds": 2}),  # the personal model, at 0.86, scores lower
    ]
    assert [start for start, _, _ in pays_asked] == [0.8, 0.8, 0.82, 0.82, 0.84, 0.84]
    assert all(penalty is not None and epochs is None for _, penalty, epochs in pays_asked)
    assert costs == [(0.8, {"personal_rounds": 0}), (0.85, {"personal_rounds": 0})]
    assert off == [(0.8, {})] and asked == []
    assert MCFLPlusStrategy(plus_personal=0.5).regulariser("p") is None


def test_mcfl_plus_scores_and_deploys_calibrated_weights_only_with_plus_calibrate() -> None:
    # Prepare: a calibrate view that adds 0.1 to the one weight and records its calls
    asked: list[float] = []
    solvers: list[str] = []

    def calibrate(weights: Any, solver: str) -> Any:
        asked.append(round(float(weights["w"][0]), 3))
        solvers.append(solver)
        return {"w": weights["w"] + 0.1}

    def plus(**options: object) -> MCFLPlusStrategy:
        strategy = MCFLPlusStrategy(**options)
        strategy.bind(replace(_context(), calibrate=calibrate))
        return strategy

    weights = {"w": torch.tensor([0.5])}

    # Execute
    on, off = plus(plus_calibrate="on"), plus()
    scored_on, deployed_on = on.scored(weights), on.deployed(weights)
    on_asked, asked[:] = list(asked), []
    scored_off, deployed_off = off.scored(weights), off.deployed(weights)
    plus(plus_calibrate="on", plus_calibrate_fit="newton").scored(weights)
    asked.pop()

    # Assert: with the option, both the score and the deployed model go through the view;
    # without it, the weights themselves and the view is never asked
    assert float(scored_on["w"][0]) == pytest.approx(0.6)
    assert float(deployed_on["w"][0]) == pytest.approx(0.6)
    assert on_asked == [0.5, 0.5]
    assert scored_off is weights and deployed_off is weights and asked == []
    assert solvers == ["lbfgs", "lbfgs", "newton"]
    with pytest.raises(ValueError, match="plus_calibrate_fit"):
        MCFLPlusStrategy(plus_calibrate_fit="adam")
    with pytest.raises(RuntimeError, match="'calibrate' view"):
        bare = MCFLPlusStrategy(plus_calibrate="on")
        bare.bind(_context())
        bare.scored(weights)


def test_mcfl_plus_direction_check_drops_sign_flippers_who_are_half_the_group() -> None:
    # Prepare: seed 212 of the second declared defence benchmark, round 8, in small:
    # the own update, one honest peer and two sign flippers (the peer's step reversed)
    # on one parent; Algorithm 2's median sits among the flippers and keeps everyone
    parent = np.zeros(2)
    vectors = {
        0: np.array([1.0, 0.2]),
        1: np.array([0.9, 0.4]),
        2: np.array([-0.9, -0.4]),
        3: np.array([-1.0, -0.3]),
    }

    def strategy(**options: Any) -> MCFLPlusStrategy:
        return MCFLPlusStrategy(plus_history="off", plus_own_update="off", **options)

    # Execute / Assert
    assert MCFLStrategy().choose_updates(0, vectors, parent) == [0, 1, 2, 3]
    assert strategy().choose_updates(0, vectors, parent) == [0, 1, 2, 3]
    assert strategy(plus_direction="on").choose_updates(0, vectors, parent) == [0, 1]
    # no parent, no steps: nothing to judge by
    assert strategy(plus_direction="on").choose_updates(0, vectors) == [0, 1, 2, 3]
    assert MCFLPlusStrategy().plus_direction is False
    # late on iid data honest steps are near orthogonal: a floor below 0 keeps a peer
    # somewhat the other way (cosine -0.18) and still drops the flippers (about -1)
    vectors[4] = np.array([-0.2, 0.5])
    on = strategy(plus_direction="on")
    assert on.choose_updates(0, vectors, parent) == [0, 1]
    assert on.personal_labels(None)["direction_dropped"] == 3
    lower = strategy(plus_direction="on", plus_direction_floor=-0.3)
    assert lower.choose_updates(0, vectors, parent) == [0, 1, 4]
    assert lower.personal_labels(None)["direction_dropped"] == 2
    assert "direction_dropped" not in strategy().personal_labels(None)
    with pytest.raises(ValueError, match=r"\[-1, 1\)"):
        strategy(plus_direction="on", plus_direction_floor=1.0)
