"""The MCFL and FedAvg strategies behind the common interface, and the registry."""

from __future__ import annotations

import numpy as np
import pytest

from mcfl_chain.strategies import (
    STRATEGIES,
    Candidate,
    FedAvgStrategy,
    MCFLStrategy,
    Strategy,
    make_strategy,
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
    with pytest.raises(
        ValueError, match="unknown strategy 'krum'; known: fedavg, ifca, local, mcfl"
    ):
        make_strategy("krum")
    with pytest.raises(ValueError, match=r"unknown options \['tolerence'\]"):
        make_strategy("mcfl", tolerence=1.0)
    with pytest.raises(ValueError, match="'l2' or 'cosine'"):
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
