"""Weight divergence (paper Eq. 2), cosine distance and state flattening."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from mcfl_chain.algorithms.divergence import (
    DIVERGENCE_MEASURES,
    cosine_distance,
    elementwise_divergence,
    flatten_state,
    weight_divergence,
)


def test_weight_divergence_hand_computed() -> None:
    own = np.array([3.0, 4.0])  # ‖own‖ = 5
    peer = np.array([6.0, 8.0])  # ‖peer − own‖ = 5
    assert weight_divergence(own, peer) == pytest.approx(1.0)
    assert weight_divergence(own, own) == 0.0
    assert weight_divergence(own, np.array([3.0, 4.5])) == pytest.approx(0.1)


def test_weight_divergence_is_relative_to_the_own_update() -> None:
    a, b = np.array([1.0, 0.0]), np.array([3.0, 0.0])
    assert weight_divergence(a, b) == pytest.approx(2.0)
    assert weight_divergence(b, a) == pytest.approx(2 / 3)


def test_cosine_distance_hand_computed() -> None:
    x = np.array([1.0, 0.0])
    assert cosine_distance(x, np.array([5.0, 0.0])) == pytest.approx(0.0)
    assert cosine_distance(x, np.array([0.0, 2.0])) == pytest.approx(1.0)
    assert cosine_distance(x, np.array([-1.0, 0.0])) == pytest.approx(2.0)
    assert cosine_distance(x, np.array([1.0, 1.0])) == pytest.approx(1 - 1 / np.sqrt(2))


def test_elementwise_divergence_is_the_authors_signed_sum() -> None:
    # Σ |peer − own| / own: 1/1 + 2/2 = 2; relative to own, so not symmetric.
    assert elementwise_divergence(np.array([1.0, 2.0]), np.array([2.0, 4.0])) == 2.0
    assert elementwise_divergence(np.array([2.0, 4.0]), np.array([1.0, 2.0])) == 1.0
    # signed by the own weight: 1/2 + 2/(−4) = 0 although the peer differs
    assert elementwise_divergence(np.array([2.0, -4.0]), np.array([3.0, -2.0])) == 0.0
    # a zero own weight: no divergence where the peer's is zero too, infinite otherwise
    assert elementwise_divergence(np.array([0.0, 1.0]), np.array([0.0, 1.5])) == 0.5
    assert elementwise_divergence(np.array([0.0, 1.0]), np.array([0.1, 1.0])) == np.inf
    with pytest.raises(ValueError, match="different sizes"):
        elementwise_divergence(np.ones(3), np.ones(4))


def test_the_measures_are_registered_by_name() -> None:
    assert DIVERGENCE_MEASURES["l2"].measure is weight_divergence
    assert DIVERGENCE_MEASURES["elementwise"].measure is elementwise_divergence
    assert DIVERGENCE_MEASURES["cosine"].on_deltas
    assert not DIVERGENCE_MEASURES["elementwise"].on_deltas


@pytest.mark.parametrize("function", [weight_divergence, cosine_distance])
def test_undefined_cases_are_errors(function) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValueError, match="different sizes"):
        function(np.ones(3), np.ones(4))
    with pytest.raises(ValueError, match="zero"):
        function(np.zeros(3), np.ones(3))


def test_flatten_uses_sorted_keys_and_skips_integer_buffers() -> None:
    state = {
        "b": torch.tensor([[3.0, 4.0]]),
        "a": torch.tensor([1.0, 2.0], dtype=torch.float16),
        "count": torch.tensor(7),
    }
    flat = flatten_state(state)
    assert flat.dtype == np.float64
    np.testing.assert_array_equal(flat, [1.0, 2.0, 3.0, 4.0])
    reordered = {"count": state["count"], "a": state["a"], "b": state["b"]}
    np.testing.assert_array_equal(flatten_state(reordered), flat)
    np.testing.assert_array_equal(flatten_state({"x": np.array([5.0])}), [5.0])
