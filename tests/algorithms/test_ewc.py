"""EWC's pieces on cases small enough to compute by hand, and the training hook."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from mcfl_chain.algorithms.ewc import (
    ewc_lambda,
    ewc_penalty,
    expected_fisher_diagonal,
    fisher_diagonal,
)


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


def test_a_classifiers_fisher_is_the_expectation_over_its_own_prediction_by_hand():
    # Prepare: zero weights, biases (log 3, 0): p = (3/4, 1/4) whatever the input. With
    # y drawn from p, E (onehot(y) − p)ₖ² = pₖ(1 − pₖ) = 3/16 on both logits; the
    # empirical Fisher with the true label 1 gives (0 − 3/4)² = (1 − 1/4)² = 9/16.
    model = _zero_linear()
    with torch.no_grad():
        model.bias.copy_(torch.tensor([float(np.log(3.0)), 0.0]))
    x, y = torch.tensor([[2.0]]), torch.tensor([1])

    # Execute
    expected = expected_fisher_diagonal(model, x)
    empirical = fisher_diagonal(model, x, y, nn.functional.cross_entropy)

    # Assert: ∂/∂W multiplies by x = 2 (squared: 4)
    assert torch.allclose(expected["bias"], torch.full((2,), 3 / 16))
    assert torch.allclose(expected["weight"], torch.full((2, 1), 4 * 3 / 16))
    assert torch.allclose(empirical["bias"], torch.full((2,), 9 / 16))


def test_the_fisher_of_a_confidently_wrong_classifier_stays_small():
    # Prepare: logits (20, 0) on a sample of class 1: the true label's gradient is
    # ~1 per logit, the model's own prediction is sure, so the Fisher is ~0
    model = _zero_linear()
    with torch.no_grad():
        model.bias.copy_(torch.tensor([20.0, 0.0]))
    x, y = torch.tensor([[1.0]]), torch.tensor([1])

    # Execute / Assert
    assert expected_fisher_diagonal(model, x)["bias"].max() < 1e-8
    assert fisher_diagonal(model, x, y, nn.functional.cross_entropy)["bias"].min() > 0.99


def test_fisher_diagonal_does_not_depend_on_the_batch_size():
    # Prepare
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 3))
    x, y = torch.randn(10, 3), torch.randint(0, 3, (10,))

    # Execute
    whole = fisher_diagonal(model, x, y, nn.functional.cross_entropy, batch_size=10)
    pieces = fisher_diagonal(model, x, y, nn.functional.cross_entropy, batch_size=3)

    expected_whole = expected_fisher_diagonal(model, x, batch_size=10)
    expected_pieces = expected_fisher_diagonal(model, x, batch_size=3)

    # Assert
    for name in whole:
        assert torch.allclose(whole[name], pieces[name], atol=1e-7)
        assert torch.allclose(expected_whole[name], expected_pieces[name], atol=1e-7)


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
