"""The filter-aware attack: kept by every honest trainer's Algorithm 2 it can reach, and
pushed along the harmful direction until one more step would be rejected."""

from __future__ import annotations

import numpy as np
import pytest

from mcfl_chain.adversaries import make_adversary
from mcfl_chain.adversaries.filter_aware import (
    PRECISION,
    as_published,
    filter_aware_update,
    kept_by,
)
from mcfl_chain.adversaries.min_max import perturbation
from mcfl_chain.algorithms.divergence import cosine_distance, flatten_state, weight_divergence
from mcfl_chain.algorithms.update_selection import select_updates
from mcfl_chain.learning.codec import decode_weights
from mcfl_chain.learning.models import create_model

ARCH = "lenet5"
TOLERANCE = 1.0


def _round(seed: int = 0, k: int = 6, d: int = 60) -> tuple[np.ndarray, np.ndarray]:
    """A parent and ``k`` honest updates: one common step plus each trainer's noise."""
    rng = np.random.default_rng(seed)
    parent = rng.normal(size=d)
    step = rng.normal(scale=0.3, size=d)
    return parent, parent + step + rng.normal(scale=0.1, size=(k, d))


def _keeps(honest: np.ndarray, own: int, candidate: np.ndarray, copies: int = 1) -> bool:
    """Honest trainer ``own``'s Algorithm 2, run here directly, on the honest updates and
    ``copies`` copies of the candidate (keys −1, −2, …)."""
    vectors = {i: honest[i] for i in range(len(honest))}
    vectors |= {-(c + 1): candidate for c in range(copies)}
    kept = select_updates(own, vectors, TOLERANCE, weight_divergence)
    return all(-(c + 1) in kept for c in range(copies))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_every_honest_trainer_keeps_it_and_one_step_further_one_does_not(seed) -> None:
    # Prepare
    parent, honest = _round(seed)
    centre = honest.mean(axis=0)
    direction = perturbation(honest - parent, "unit")

    # Execute
    update, gamma, targets = filter_aware_update(honest, parent, TOLERANCE)

    # Assert: every honest trainer is a target and keeps the update as published ...
    assert targets == set(range(len(honest)))
    assert gamma > 0 and np.allclose(update, centre + gamma * direction)
    assert all(_keeps(honest, j, as_published(update)) for j in targets)
    # ... which lies farther from the honest mean than any honest update does ...
    spread = max(np.linalg.norm(w - centre) for w in honest)
    assert np.linalg.norm(update - centre) > spread
    # ... and a γ larger by twice the bisection's precision is rejected by some trainer
    beyond = as_published(centre + gamma * (1 + 2 * PRECISION) * direction)
    assert not all(_keeps(honest, j, beyond) for j in targets)


def test_a_plain_sign_flip_is_rejected_where_the_filter_aware_update_is_kept() -> None:
    # Prepare: the sign flipper reverses an honest trainer's step (parent − Δ₀).
    parent, honest = _round(4)
    flipped = parent - (honest[0] - parent)

    # Execute
    update, _, _ = filter_aware_update(honest, parent, TOLERANCE)

    # Assert
    assert not any(_keeps(honest, j, flipped) for j in range(len(honest)))
    assert all(_keeps(honest, j, as_published(update)) for j in range(len(honest)))


def test_a_coalitions_update_is_kept_with_one_copy_or_all_of_them() -> None:
    parent, honest = _round(5, k=8)
    update, gamma, targets = filter_aware_update(honest, parent, TOLERANCE, attackers=3)
    assert gamma > 0 and targets
    for copies in (1, 2, 3):
        assert all(_keeps(honest, j, as_published(update), copies) for j in targets)


def test_the_cosine_divergence_compares_steps() -> None:
    # Prepare
    parent, honest = _round(6)
    rows = {i: honest[i] for i in range(len(honest))}

    # Execute
    update, gamma, targets = filter_aware_update(honest, parent, TOLERANCE, divergence="cosine")

    # Assert: MCFL's cosine variant (on update − parent) keeps it for every target
    assert gamma > 0 and targets
    steps = {key: vector - parent for key, vector in rows.items()}
    steps[-1] = as_published(update) - parent
    for j in targets:
        assert -1 in select_updates(j, steps, TOLERANCE, cosine_distance)
    assert kept_by(rows, parent, as_published(update), TOLERANCE, "cosine") >= targets


def test_kept_by_refuses_what_it_cannot_judge() -> None:
    parent, honest = _round(0, k=3)
    rows = {i: honest[i] for i in range(3)}
    with pytest.raises(ValueError, match="divergence must be one of"):
        kept_by(rows, parent, honest[0], TOLERANCE, "l1")
    with pytest.raises(ValueError, match="at least one copy"):
        kept_by(rows, parent, honest[0], TOLERANCE, copies=0)
    with pytest.raises(ValueError, match="keys >= 0"):
        kept_by({-1: honest[0], 0: honest[1]}, parent, honest[2], TOLERANCE)


def test_the_adversary_publishes_the_crafted_update(publish) -> None:
    # Prepare
    parent = create_model(ARCH, seed=0).state_dict()
    honest = {uid: create_model(ARCH, seed=uid).state_dict() for uid in (4, 1, 6, 3)}
    publication, store = publish(parent, parent, round_peers=honest)

    # Execute
    attacker = make_adversary("filter-aware", tolerance=2.0, perturbation="std")
    cid = attacker.publish_update(publication)

    # Assert: what the pure function gives for the honest updates in update-id order
    stacked = np.stack([flatten_state(honest[uid]) for uid in sorted(honest)])
    expected, _, _ = filter_aware_update(stacked, flatten_state(parent), 2.0, kind="std")
    published = flatten_state(decode_weights(store[cid], ARCH))
    assert np.allclose(published, as_published(expected))


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"tolerance": -1.0}, "tolerance"),
        ({"divergence": "l1"}, "divergence"),
        ({"perturbation": "x"}, "perturbation"),
        ({"reach": 0.0}, "reach"),
    ],
)
def test_parameters_are_checked(params, message) -> None:
    with pytest.raises(ValueError, match=message):
        make_adversary("filter-aware", **params)
