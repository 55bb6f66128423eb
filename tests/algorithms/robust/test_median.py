"""Coordinate-wise median on known arrays."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from mcfl_chain.algorithms.robust.median import coordinate_median


def test_odd_count_takes_the_middle_value_per_coordinate() -> None:
    # Prepare: per coordinate, sorted: (1, 2, 3) -> 2 ; (-1, 5, 100) -> 5 ; (-2, 0, 4) -> 0
    updates = [
        (3, 10, {"w": torch.tensor([1.0, 5.0, -2.0])}),
        (1, 10, {"w": torch.tensor([3.0, -1.0, 0.0])}),
        (2, 999, {"w": torch.tensor([2.0, 100.0, 4.0])}),
    ]

    # Execute
    result = coordinate_median(updates)

    # Assert: the sample counts play no part.
    assert torch.equal(result["w"], torch.tensor([2.0, 5.0, 0.0]))


def test_even_count_averages_the_two_middle_values() -> None:
    # Sorted: (0, 1, 2, 3) -> 1.5 ; (-1, 0, 5, 100) -> 2.5 ; (-2, 0, 4, 10) -> 2
    updates = [
        (1, 1, {"w": torch.tensor([1.0, 5.0, -2.0])}),
        (2, 1, {"w": torch.tensor([3.0, -1.0, 0.0])}),
        (3, 1, {"w": torch.tensor([2.0, 100.0, 4.0])}),
        (4, 1, {"w": torch.tensor([0.0, 0.0, 10.0])}),
    ]
    assert torch.equal(coordinate_median(updates)["w"], torch.tensor([1.5, 2.5, 2.0]))


def test_one_outlier_moves_no_coordinate_outside_the_honest_range() -> None:
    honest = [(i, 1, {"w": torch.tensor([[1.0, 2.0], [3.0, 4.0]]) + 0.1 * i}) for i in range(4)]
    attacker = (9, 10**6, {"w": torch.full((2, 2), 1e30)})
    result = coordinate_median([*honest, attacker])["w"]
    # Sorted per coordinate: x, x+.1, x+.2, x+.3, 1e30 -> x + 0.2 (float32 of it).
    expected = torch.tensor([[1.0, 2.0], [3.0, 4.0]]) + 0.1 * 2
    assert torch.equal(result, expected)


def test_equals_numpy_median_and_keeps_dtypes() -> None:
    # Prepare
    generator = torch.Generator().manual_seed(3)
    updates = [
        (i, 5, {"w": torch.randn(6, 5, generator=generator), "n": torch.tensor(i)})
        for i in range(6)
    ]
    stacked = np.stack([state["w"].double().numpy() for _, _, state in updates])

    # Execute
    result = coordinate_median(updates)

    # Assert
    assert result["w"].dtype == torch.float32 and result["n"].dtype == torch.int64
    assert torch.equal(result["w"], torch.from_numpy(np.median(stacked, axis=0)).float())
    assert result["n"].item() == 5
    assert list(result) == ["n", "w"]


def test_negative_zero_does_not_decide_the_bits() -> None:
    # -0.0 and +0.0 compare equal; the result is +0.0 whatever the order.
    values = [-0.0, 0.0, -0.0]
    for order in (values, list(reversed(values)), [0.0, -0.0, -0.0]):
        updates = [(i, 1, {"w": torch.tensor([v])}) for i, v in enumerate(order)]
        result = coordinate_median(updates)["w"]
        assert result.item() == 0.0 and not torch.signbit(result).item()


def test_non_finite_values_are_refused_by_update() -> None:
    updates = [(1, 1, {"w": torch.zeros(2)}), (7, 1, {"w": torch.tensor([0.0, float("nan")])})]
    with pytest.raises(ValueError, match=r"updates \[7\] holds NaN"):
        coordinate_median(updates)
    with pytest.raises(ValueError, match="median needs at least one update"):
        coordinate_median([])
