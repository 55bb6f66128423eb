"""FACADE's per-head FedAvg: hand-computed cases, the head choice, and clear refusals."""

from __future__ import annotations

import math

import pytest
import torch

from mcfl_chain.algorithms.facade import (
    HEAD_CHOICE,
    head_choice,
    head_count,
    head_of_tensor,
    lowest_loss_head,
    per_head_fedavg,
    with_head,
)
from mcfl_chain.algorithms.fedavg import fedavg
from mcfl_chain.algorithms.robust import rule_from_chain


def _state(core: float, head0: float, head1: float, choice: int) -> dict[str, torch.Tensor]:
    """A two-head model: one core weight, a bias per head, and the head choice."""
    return {
        "core.weight": torch.tensor([core, -core]),
        "heads.0.bias": torch.tensor([head0]),
        "heads.1.bias": torch.tensor([head1]),
        HEAD_CHOICE: torch.tensor(choice, dtype=torch.int64),
    }


def test_core_over_all_updates_each_head_over_those_that_chose_it() -> None:
    # Prepare: updates 7 and 3 chose head 0, update 5 head 1.
    updates = [
        (7, 10, _state(core=1.0, head0=2.0, head1=9.0, choice=0)),
        (5, 20, _state(core=4.0, head0=9.0, head1=6.0, choice=1)),
        (3, 30, _state(core=2.0, head0=6.0, head1=9.0, choice=0)),
    ]

    # Execute
    result = per_head_fedavg(updates)

    # Assert
    # core: (1·10 + 4·20 + 2·30) / 60 = 150 / 60 = 2.5
    assert torch.equal(result["core.weight"], torch.tensor([2.5, -2.5]))
    # head 0 over updates 7 and 3: (2·10 + 6·30) / 40 = 200 / 40 = 5.0 (update 5's 9 ignored)
    assert torch.equal(result["heads.0.bias"], torch.tensor([5.0]))
    # head 1 over update 5 alone: 6.0 (the others' 9 ignored)
    assert torch.equal(result["heads.1.bias"], torch.tensor([6.0]))
    # the aggregate predicts with the head most updates chose
    assert result[HEAD_CHOICE].item() == 0 and result[HEAD_CHOICE].dtype == torch.int64
    assert list(result) == sorted(result)


def test_a_head_nobody_chose_keeps_the_parents_value_exactly() -> None:
    # Prepare: both chose head 0; each carries the parent's head 1 untouched, a value
    # that is not a short binary fraction.
    parent_head = torch.tensor([0.1], dtype=torch.float32)
    updates = [
        (1, 17, _state(core=1.0, head0=1.0, head1=parent_head.item(), choice=0)),
        (2, 29, _state(core=3.0, head0=4.0, head1=parent_head.item(), choice=0)),
    ]

    # Execute
    result = per_head_fedavg(updates)

    # Assert
    assert torch.equal(result["heads.1.bias"], parent_head)
    assert result[HEAD_CHOICE].item() == 0


def test_with_one_head_it_is_fedavg() -> None:
    # Prepare
    updates = [
        (
            1,
            3,
            {
                "w": torch.tensor([1.0]),
                "heads.0.b": torch.tensor([2.0]),
                HEAD_CHOICE: torch.tensor(0),
            },
        ),
        (
            2,
            1,
            {
                "w": torch.tensor([5.0]),
                "heads.0.b": torch.tensor([6.0]),
                HEAD_CHOICE: torch.tensor(0),
            },
        ),
    ]

    # Execute
    result = per_head_fedavg(updates)

    # Assert
    expected = fedavg(updates)
    assert all(torch.equal(result[name], expected[name]) for name in expected)


def test_ties_in_the_choice_go_to_the_lower_head_and_order_does_not_matter() -> None:
    # Prepare
    updates = [
        (4, 1, _state(core=1.0, head0=1.0, head1=1.0, choice=1)),
        (9, 1, _state(core=2.0, head0=2.0, head1=2.0, choice=0)),
    ]

    # Execute
    forward = per_head_fedavg(updates)
    backward = per_head_fedavg(list(reversed(updates)))

    # Assert
    assert forward[HEAD_CHOICE].item() == 0
    assert all(torch.equal(forward[name], backward[name]) for name in forward)


def test_rule_code_four_is_facades() -> None:
    updates = [(1, 2, _state(1.0, 2.0, 3.0, 1)), (2, 2, _state(3.0, 4.0, 5.0, 1))]
    rebuilt = rule_from_chain(4).aggregate(updates)
    assert torch.equal(rebuilt["heads.1.bias"], torch.tensor([4.0]))


def test_a_choice_naming_no_head_is_refused_with_the_update() -> None:
    updates = [(1, 2, _state(1.0, 2.0, 3.0, 0)), (8, 2, _state(3.0, 4.0, 5.0, 2))]
    with pytest.raises(
        ValueError, match=r"update 8: head_choice is 2, but the model's heads are 0 to 1"
    ):
        per_head_fedavg(updates)


def test_a_model_without_heads_is_refused() -> None:
    with pytest.raises(ValueError, match="needs models with heads"):
        per_head_fedavg([(1, 1, {"w": torch.tensor([1.0])})])


def test_head_helpers() -> None:
    state = _state(1.0, 2.0, 3.0, 1)
    assert head_of_tensor("heads.12.weight") == 12 and head_of_tensor("core.weight") is None
    assert head_count(state) == 2 and head_choice(state) == 1
    switched = with_head(state, 0)
    assert head_choice(switched) == 0 and head_choice(state) == 1
    assert switched["core.weight"] is state["core.weight"]
    with pytest.raises(ValueError, match="head 2 does not exist"):
        with_head(state, 2)


def test_lowest_loss_head_ties_to_the_lower_index_and_skips_nan() -> None:
    assert lowest_loss_head([0.7, 0.3, 0.3]) == 1
    assert lowest_loss_head([math.nan, 0.9]) == 1
    assert lowest_loss_head([math.nan, math.nan]) == 0
    with pytest.raises(ValueError, match="no head"):
        lowest_loss_head([])
