"""Min-max and min-sum: as far along the direction as the honest updates' own spread
allows, with γ maximal to the bisection's precision."""

from __future__ import annotations

import numpy as np
import pytest

from mcfl_chain.adversaries import make_adversary
from mcfl_chain.adversaries.min_max import (
    PERTURBATIONS,
    PRECISION,
    largest_gamma,
    min_max,
    min_sum,
    perturbation,
)
from mcfl_chain.algorithms.divergence import flatten_state
from mcfl_chain.learning.codec import decode_weights
from mcfl_chain.learning.models import create_model

ARCH = "lenet5"


def _steps(seed: int, k: int = 6, d: int = 50) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.normal(loc=0.2, scale=1.0, size=(k, d))


def _largest_distance(steps: np.ndarray) -> float:
    return max(np.linalg.norm(a - b) for a in steps for b in steps)


def _worst_distance(vector: np.ndarray, steps: np.ndarray) -> float:
    return max(np.linalg.norm(vector - s) for s in steps)


def _sum_sq(vector: np.ndarray, steps: np.ndarray) -> float:
    return sum(float(np.sum((vector - s) ** 2)) for s in steps)


@pytest.mark.parametrize("kind", PERTURBATIONS)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_min_max_stays_within_the_honest_spread_and_gamma_is_maximal(kind, seed) -> None:
    # Prepare
    steps = _steps(seed)
    mean, direction = steps.mean(axis=0), perturbation(steps, kind)
    bound = _largest_distance(steps)

    # Execute
    crafted, gamma = min_max(steps, kind)

    # Assert: μ + γp, within the largest honest distance of every honest step ...
    assert gamma > 0
    assert np.allclose(crafted, mean + gamma * direction)
    assert _worst_distance(crafted, steps) <= bound * (1 + 1e-12)
    # ... and a γ larger by twice the precision is not
    beyond = mean + gamma * (1 + 2 * PRECISION) * direction
    assert _worst_distance(beyond, steps) > bound


@pytest.mark.parametrize("kind", PERTURBATIONS)
@pytest.mark.parametrize("seed", [0, 3])
def test_min_sum_stays_within_the_largest_honest_sum_and_gamma_is_maximal(kind, seed) -> None:
    # Prepare
    steps = _steps(seed)
    mean, direction = steps.mean(axis=0), perturbation(steps, kind)
    bound = max(_sum_sq(s, steps) for s in steps)

    # Execute
    crafted, gamma = min_sum(steps, kind)

    # Assert
    assert gamma > 0
    assert np.allclose(crafted, mean + gamma * direction)
    assert _sum_sq(crafted, steps) <= bound * (1 + 1e-12)
    assert _sum_sq(mean + gamma * (1 + 2 * PRECISION) * direction, steps) > bound


def test_directions_by_hand() -> None:
    # Steps (3, −1) and (1, −1): mean (2, −1), std (1, 0).
    steps = np.array([[3.0, -1.0], [1.0, -1.0]])
    assert np.allclose(perturbation(steps, "unit"), np.array([-2.0, 1.0]) / np.sqrt(5))
    assert np.array_equal(perturbation(steps, "std"), np.array([-1.0, 0.0]))
    assert np.array_equal(perturbation(steps, "sign"), np.array([-1.0, 1.0]))
    with pytest.raises(ValueError, match="perturbation must be one of"):
        perturbation(steps, "gradient")


def test_identical_steps_leave_no_room() -> None:
    steps = np.tile(np.array([0.5, -1.0, 2.0]), (4, 1))
    for search in (min_max, min_sum):
        crafted, gamma = search(steps, "std")  # std is zero: no direction
        assert gamma == 0.0 and np.array_equal(crafted, steps[0])
        crafted, gamma = search(steps, "unit")  # no spread: the mean only
        assert gamma == pytest.approx(0.0, abs=1e-9)
        assert np.allclose(crafted, steps[0])


def test_largest_gamma_on_a_known_interval() -> None:
    found = largest_gamma(lambda g: g <= 3.7, upper=100.0, precision=1e-6)
    assert 3.7 * (1 - 1e-6) <= found <= 3.7
    assert largest_gamma(lambda g: True, upper=5.0) == 5.0
    # only γ = 0 feasible: 0, after a bounded number of looks
    looks: list[float] = []
    assert largest_gamma(lambda g: looks.append(g) or g == 0.0, upper=2.0) == 0.0
    assert len(looks) < 60


@pytest.mark.parametrize("name", ["min-max", "min-sum"])
def test_the_adversaries_publish_parent_plus_the_crafted_step(publish, name) -> None:
    # Prepare
    parent = create_model(ARCH, seed=0).state_dict()
    honest = {uid: create_model(ARCH, seed=uid).state_dict() for uid in (1, 2, 3, 4)}
    publication, store = publish(parent, parent, round_peers=honest)

    # Execute
    cid = make_adversary(name, perturbation="sign").publish_update(publication)

    # Assert
    start = flatten_state(parent)
    steps = np.stack([flatten_state(honest[uid]) for uid in sorted(honest)]) - start
    expected, _ = (min_max if name == "min-max" else min_sum)(steps, "sign")
    published = flatten_state(decode_weights(store[cid], ARCH))
    assert np.allclose(published - start, expected, atol=1e-5)
    with pytest.raises(ValueError, match="perturbation must be one of"):
        make_adversary(name, perturbation="x")
