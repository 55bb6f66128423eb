"""Coordinate-wise trimmed mean on known arrays, and β held in basis points."""

from __future__ import annotations

import pytest
import torch

from mcfl_chain.algorithms.robust import TrimmedMean, rule_from_chain
from mcfl_chain.algorithms.robust.trimmed_mean import trimmed_count, trimmed_mean

FIVE = [
    (5, 1, {"w": torch.tensor([1.0, -50.0])}),
    (4, 1, {"w": torch.tensor([2.0, 0.0])}),
    (3, 1, {"w": torch.tensor([3.0, 1.0])}),
    (2, 1, {"w": torch.tensor([4.0, 2.0])}),
    (1, 1, {"w": torch.tensor([100.0, 3.0])}),
]


def test_trims_k_values_each_side_then_averages() -> None:
    # β = 0.2, n = 5: k = 1. Coordinate 0: (1, 2, 3, 4, 100) -> (2 + 3 + 4) / 3 = 3;
    # coordinate 1: (-50, 0, 1, 2, 3) -> (0 + 1 + 2) / 3 = 1.
    assert torch.equal(trimmed_mean(FIVE, beta=0.2)["w"], torch.tensor([3.0, 1.0]))


def test_k_rounds_down_so_a_small_beta_is_the_plain_mean() -> None:
    # β = 0.1, n = 5: k = ⌊0.5⌋ = 0. Coordinate 0: 110 / 5 = 22; coordinate 1: -44 / 5.
    assert trimmed_count(5, 1000) == 0 and trimmed_count(10, 1000) == 1
    result = trimmed_mean(FIVE, beta=0.1)["w"]
    assert torch.equal(result, torch.tensor([22.0, -44.0 / 5]))


def test_even_count_and_sample_counts_ignored() -> None:
    # β = 0.25, n = 4: k = 1. (0, 1, 2, 1000) -> (1 + 2) / 2 = 1.5.
    updates = [
        (1, 1, {"w": torch.tensor([1000.0])}),
        (2, 500, {"w": torch.tensor([0.0])}),
        (3, 1, {"w": torch.tensor([1.0])}),
        (4, 1, {"w": torch.tensor([2.0])}),
    ]
    assert trimmed_mean(updates, beta=0.25)["w"].item() == 1.5


def test_result_does_not_depend_on_the_input_order() -> None:
    generator = torch.Generator().manual_seed(5)
    updates = [(i * 3, 1, {"w": torch.randn(40, generator=generator)}) for i in range(9)]
    assert torch.equal(
        trimmed_mean(updates, 0.2)["w"], trimmed_mean(list(reversed(updates)), 0.2)["w"]
    )


@pytest.mark.parametrize(
    ("beta", "message"),
    [(0.5, r"\[0, 0.5\)"), (-0.1, r"\[0, 0.5\)"), (0.12345, "multiple of 0.0001")],
)
def test_beta_is_refused_outside_its_range_or_grid(beta: float, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        TrimmedMean(beta)


def test_parameter_word_is_beta_in_basis_points() -> None:
    # Prepare
    rule = TrimmedMean(beta=0.2)

    # Execute
    rebuilt = rule_from_chain(2, rule.parameter)

    # Assert
    assert rule.parameter == 2000
    assert isinstance(rebuilt, TrimmedMean) and rebuilt.beta == 0.2
    assert torch.equal(rebuilt.aggregate(FIVE)["w"], rule.aggregate(FIVE)["w"])
    with pytest.raises(ValueError, match="not a β in basis points"):
        rule_from_chain(2, 5000)
