"""Inner-product manipulation: −ε times the honest mean step."""

from __future__ import annotations

import numpy as np
import pytest

from mcfl_chain.adversaries import make_adversary
from mcfl_chain.adversaries.ipm import inner_product_manipulation
from mcfl_chain.algorithms.divergence import flatten_state
from mcfl_chain.learning.codec import decode_weights
from mcfl_chain.learning.models import create_model

ARCH = "lenet5"


def test_the_step_points_against_the_honest_mean() -> None:
    # By hand: steps (1, 2) and (3, 0): mean (2, 1); ε = 0.5 gives (−1, −0.5).
    steps = np.array([[1.0, 2.0], [3.0, 0.0]])
    assert np.array_equal(inner_product_manipulation(steps, 0.5), np.array([-1.0, -0.5]))
    # Its inner product with the honest mean is −ε‖mean‖² < 0, whatever the steps.
    rng = np.random.default_rng(1)
    for epsilon in (0.1, 0.5, 4.0):
        steps = rng.normal(loc=0.3, size=(6, 40))
        mean = steps.mean(axis=0)
        crafted = inner_product_manipulation(steps, epsilon)
        assert crafted @ mean == pytest.approx(-epsilon * (mean @ mean))
        assert crafted @ mean < 0


def test_ipm_publishes_parent_minus_epsilon_mean_step(publish) -> None:
    # Prepare
    parent = create_model(ARCH, seed=0).state_dict()
    honest = {uid: create_model(ARCH, seed=uid).state_dict() for uid in (2, 4, 7)}
    publication, store = publish(
        create_model(ARCH, seed=9).state_dict(), parent, round_peers=honest
    )

    # Execute
    cid = make_adversary("ipm", epsilon=0.2).publish_update(publication)

    # Assert: its step from the parent is −0.2 × the honest mean step
    start = flatten_state(parent)
    mean_step = np.stack([flatten_state(w) for w in honest.values()]).mean(axis=0) - start
    step = flatten_state(decode_weights(store[cid], ARCH)) - start
    assert np.allclose(step, -0.2 * mean_step, atol=1e-6)
    assert step @ mean_step < 0


@pytest.mark.parametrize("epsilon", [0.0, -1.0, float("nan")])
def test_epsilon_must_be_positive(epsilon: float) -> None:
    with pytest.raises(ValueError, match="epsilon must be > 0"):
        make_adversary("ipm", epsilon=epsilon)
