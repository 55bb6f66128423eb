"""ALIE: every coordinate is the honest mean minus z_max standard deviations."""

from __future__ import annotations

import numpy as np
import pytest

from mcfl_chain.adversaries import make_adversary
from mcfl_chain.adversaries.alie import alie, alie_z_max
from mcfl_chain.algorithms.divergence import flatten_state
from mcfl_chain.learning.codec import decode_weights
from mcfl_chain.learning.models import create_model

ARCH = "lenet5"


def test_z_max_follows_the_papers_supporters_by_hand() -> None:
    # n = 4, m = 1: s = ⌊3⌋ − 1 = 2 supporters, Φ(z) < 2/4: z = 0.
    assert alie_z_max(4, 1) == pytest.approx(0.0, abs=1e-12)
    # n = 50, m = 12: s = 26 − 12 = 14, Φ(z) < 36/50 = 0.72: z = 0.5828 (z-table).
    assert alie_z_max(50, 12) == pytest.approx(0.5828, abs=1e-4)
    # n = 12, m = 2: s = 5, Φ(z) < 7/12: z = 0.2104.
    assert alie_z_max(12, 2) == pytest.approx(0.2104, abs=1e-4)
    # n = 4, m = 3: the attackers alone are a majority (s = 0); s = 1 is taken: Φ⁻¹(3/4).
    assert alie_z_max(4, 3) == pytest.approx(0.6745, abs=1e-4)
    # more attackers, more room: z_max grows with m for a fixed n
    assert alie_z_max(20, 2) < alie_z_max(20, 4) < alie_z_max(20, 8)


@pytest.mark.parametrize(("n", "m"), [(4, 0), (4, 4), (3, 5)])
def test_z_max_refuses_impossible_counts(n: int, m: int) -> None:
    with pytest.raises(ValueError, match="1 <= m < n"):
        alie_z_max(n, m)


def test_every_coordinate_is_mean_minus_z_std() -> None:
    # By hand: columns (1, 3) and (2, 6): mean (2, 4), population std (1, 2); z = 0.5.
    honest = np.array([[1.0, 2.0], [3.0, 6.0]])
    assert np.array_equal(alie(honest, 0.5), np.array([1.5, 3.0]))
    # And on random updates, coordinate by coordinate
    rng = np.random.default_rng(0)
    updates = rng.normal(size=(7, 30))
    crafted = alie(updates, 1.3)
    for j in range(30):
        column = updates[:, j]
        assert crafted[j] == pytest.approx(column.mean() - 1.3 * column.std())


def test_alie_publishes_from_the_rounds_honest_updates_with_z_from_n_and_m(publish) -> None:
    # Prepare: 4 honest updates read from the round; a coalition of 2 (n = 6, m = 2).
    parent = create_model(ARCH, seed=0).state_dict()
    honest = {uid: create_model(ARCH, seed=uid).state_dict() for uid in (3, 5, 8, 9)}
    own = create_model(ARCH, seed=99).state_dict()
    attacker = make_adversary("alie", coalition="0xA1+0xA2")
    publication, store = publish(own, parent, trainer="0xA1", round_peers=honest)

    # Execute
    published = flatten_state(decode_weights(store[attacker.publish_update(publication)], ARCH))

    # Assert: mean − z_max(6, 2)·std of the honest weights, as float32 (z_max = 0.4307)
    stacked = np.stack([flatten_state(honest[uid]) for uid in sorted(honest)])
    expected = stacked.mean(axis=0) - alie_z_max(6, 2) * stacked.std(axis=0)
    assert alie_z_max(6, 2) == pytest.approx(0.4307, abs=1e-4)
    assert np.allclose(published, expected, rtol=1e-6, atol=1e-6)
    assert not np.allclose(published, flatten_state(own), atol=1e-3)


def test_a_fixed_z_overrides_the_formula_and_must_be_finite(publish) -> None:
    # Prepare
    parent = create_model(ARCH, seed=0).state_dict()
    honest = {uid: create_model(ARCH, seed=uid).state_dict() for uid in (1, 2)}
    publication, store = publish(parent, parent, round_peers=honest)

    # Execute
    cid = make_adversary("alie", z=0.5).publish_update(publication)

    # Assert
    stacked = np.stack([flatten_state(honest[uid]) for uid in (1, 2)])
    expected = stacked.mean(axis=0) - 0.5 * stacked.std(axis=0)
    published = flatten_state(decode_weights(store[cid], ARCH))
    assert np.allclose(published, expected, rtol=1e-6, atol=1e-6)
    with pytest.raises(ValueError, match="finite"):
        make_adversary("alie", z=float("inf"))
