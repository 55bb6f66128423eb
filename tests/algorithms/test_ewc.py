"""EWC's pieces on cases small enough to compute by hand, and the training hook."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from mcfl_chain.algorithms.ewc import ewc_lambda, ewc_penalty, fisher_diagonal


def _zero_linear() -> nn.Linear:
    """Two classes from one feature, every weight zero: softmax gives 1/2 to each."""
    model = nn.Linear(1, 2)
    with torch.no_grad():
        model.weight.zero_()
        model.bias.zero_()
    return model


def test_fisher_diagonal_of_a_zero_linear_classifier_by_hand():
    # Prepare: p = (1/2, 1/2) for every input, so ∂(−log p_y)/∂logits = p − onehot(y)
    # = ±1/2 per class; ∂/∂W = (p − onehot) x, squared 1/4 x²; ∂/∂b squared 1/4.
    model = _zero_linear()
    x = torch.tensor([[1.0], [2.0]])
    y = torch.tensor([0, 1])

    # Execute
    fisher = fisher_diagonal(model, x, y, nn.functional.cross_entropy)

    # Assert: F_W = 1/4 · (1² + 2²) / 2 = 0.625 for both rows; F_b = 0.25
    assert torch.allclose(fisher["weight"], torch.full((2, 1), 0.625))
    assert torch.allclose(fisher["bias"], torch.full((2,), 0.25))


def test_fisher_diagonal_does_not_depend_on_the_batch_size():
    # Prepare
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 3))
    x, y = torch.randn(10, 3), torch.randint(0, 3, (10,))

    # Execute
    whole = fisher_diagonal(model, x, y, nn.functional.cross_entropy, batch_size=10)
    pieces = fisher_diagonal(model, x, y, nn.functional.cross_entropy, batch_size=3)

    # Assert
    for name in whole:
        assert torch.allclose(whole[name], pieces[name], atol=1e-7)


def test_fisher_diagonal_refuses_an_empty_split():
    with pytest.raises(ValueError, match="at least one sample"):
        fisher_diagonal(_zero_linear(), torch.zeros(0, 1), torch.zeros(0), nn.functional.mse_loss)


def test_ewc_penalty_by_hand():
    # Prepare: θ − θ* = (1, 1) on the weight, 0 on the bias; F = (1, 2) on the weight
    model = nn.Linear(2, 1)
    with torch.no_grad():
        model.weight.copy_(torch.tensor([[1.0, 1.0]]))
        model.bias.zero_()
    anchor = {"weight": torch.zeros(1, 2), "bias": torch.zeros(1)}
    fisher = {"weight": torch.tensor([[1.0, 2.0]]), "bias": torch.tensor([5.0])}

    # Execute: λ = 1/3, three groups
    penalty = ewc_penalty(model, anchor, fisher, ewc_lambda(3))

    # Assert: 1/3 · (1·1² + 2·1² + 5·0²) = 1, and its gradient is 2λF(θ − θ*)
    assert penalty.item() == pytest.approx(1.0)
    penalty.backward()
    assert torch.allclose(model.weight.grad, torch.tensor([[2 / 3, 4 / 3]]))
    assert torch.allclose(model.bias.grad, torch.zeros(1))


def test_ewc_lambda_is_one_over_the_number_of_groups():
    assert ewc_lambda(1) == 1.0
    assert ewc_lambda(4) == 0.25
    with pytest.raises(ValueError, match="positive integer"):
        ewc_lambda(0)


def test_ewc_penalty_names_a_missing_parameter():
    # Prepare: a model with one parameter "w", an anchor without it
    model = nn.Module()
    model.w = nn.Parameter(torch.ones(1))

    # Execute / Assert
    with pytest.raises(KeyError, match="'w' .* anchor"):
        ewc_penalty(model, {}, {"w": torch.ones(1)}, 1.0)
