"""The personalised-FL baselines: FedProx's proximal term, Ditto's personal model,
FedAvg-FT's fine-tuning, each behind the strategy interface."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch import nn

from mcfl_chain.algorithms.proximal import proximal_penalty
from mcfl_chain.learning.models import create_model
from mcfl_chain.learning.scenario import TrainerData, TrainerDataSpec
from mcfl_chain.learning.training import train
from mcfl_chain.strategies import Candidate, StrategyContext, make_strategy

ARCH = "lenet-light"


def _context(**views: Any) -> StrategyContext:
    return StrategyContext(
        trainer_id=1,
        seed=5,
        initial_weights=lambda seed: create_model(ARCH, seed).state_dict(),
        validation_loss=lambda weights: 1.0,
        **views,
    )


def _data(n: int = 48) -> TrainerData:
    generator = torch.Generator().manual_seed(0)
    x = torch.rand(n, 1, 28, 28, generator=generator)
    y = torch.randint(0, 10, (n,), generator=generator)
    return TrainerData(
        spec=TrainerDataSpec("digits"),
        num_classes=10,
        train_images=x,
        train_y=y,
        val_images=x[:0],
        val_y=y[:0],
        test_images=x[:0],
        test_y=y[:0],
        indices=torch.arange(n).numpy(),
    )


def _distance(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> float:
    return sum(float((a[k] - b[k]).square().sum()) for k in a) ** 0.5


def test_fedprox_penalty_gradient_is_mu_times_the_distance_to_the_global_model() -> None:
    # Prepare: the parent (global) model's weights, and a model elsewhere
    anchor = {"w": torch.tensor([1.0, -2.0, 0.5]), "steps": torch.tensor(3)}
    strategy = make_strategy("fedprox", mu=0.3)
    strategy.bind(_context(model_weights=lambda key: {"parent": anchor}[key]))
    model = nn.Module()
    model.w = nn.Parameter(torch.tensor([2.0, 0.0, 0.5]))
    # Execute
    penalty = strategy.regulariser("parent")
    assert penalty is not None
    value = penalty(model)
    value.backward()
    # Assert: (μ/2)‖w − w_g‖² and its gradient μ (w − w_g); the integer buffer is no weight
    assert value.item() == pytest.approx(0.15 * (1 + 4))
    torch.testing.assert_close(model.w.grad, 0.3 * (model.w.detach() - anchor["w"]))
    assert set(penalty.coefficients) == {"w"}
    # FedAvg's rules otherwise, and μ = 0 is FedAvg exactly
    candidates = [Candidate("a", 0.9, 1), Candidate("b", 0.5, 3)]
    assert strategy.choose_models(candidates) == make_strategy("fedavg").choose_models(candidates)
    assert make_strategy("fedprox", mu=0.0).regulariser("parent") is None
    with pytest.raises(ValueError, match=">= 0"):
        proximal_penalty(anchor, -1.0)


def test_ditto_personal_model_is_pulled_towards_the_global_model() -> None:
    # Prepare: real training of the personal model on a trainer's data
    data = _data()
    calls: list[int | None] = []

    def train_view(weights: Any, penalty: Any, epochs: int | None) -> Any:
        calls.append(epochs)
        model = create_model(ARCH, 0)
        model.load_state_dict(weights)
        train(model, data, epochs or 1, lr=0.05, penalty=penalty, validate=False)
        return model.state_dict()

    global_model = create_model(ARCH, 1).state_dict()
    start = create_model(ARCH, 2).state_dict()
    personal = {}
    for lam in (0.0, 5.0):
        strategy = make_strategy("ditto", ditto_lambda=lam)
        strategy.bind(_context(train=train_view))
        strategy.personal = start
        strategy.begin_round(4)
        # Execute
        personal[lam] = strategy.deployed(global_model)
        # Assert: a second call in the round starts from the same personal model
        again = strategy.deployed(global_model)
        assert all(torch.equal(again[k], personal[lam][k]) for k in again)
    # the penalty pulls the personal model towards the global one (λ = 0: local training)
    assert _distance(personal[5.0], global_model) < 0.9 * _distance(personal[0.0], global_model)
    # the next round trains on from the personal model, not from the global one
    strategy.begin_round(5)
    later = strategy.deployed(global_model)
    restarted = make_strategy("ditto", ditto_lambda=5.0)
    restarted.bind(_context(train=train_view))
    restarted.begin_round(5)
    fresh = restarted.deployed(global_model)  # no personal model yet: starts from global
    assert _distance(later, fresh) > 1e-3
    assert calls == [None] * len(calls)  # the network's epochs (personal_epochs 0)


def test_fedavg_ft_fine_tunes_only_what_the_trainer_reports() -> None:
    # Prepare: a train view that records what it is asked
    asked: list[tuple[Any, Any, int | None]] = []

    def train_view(weights: Any, penalty: Any, epochs: int | None) -> Any:
        asked.append((weights, penalty, epochs))
        return {k: v + 1 for k, v in weights.items()}

    strategy = make_strategy("fedavg-ft", finetune_epochs=3)
    strategy.bind(_context(train=train_view))
    global_model = {"w": torch.zeros(2)}
    # Execute
    reported = strategy.deployed(global_model)
    # Assert: the report is the fine-tuned copy (3 epochs, no penalty); the global model,
    # what the trainer trains from and aggregates, is untouched
    assert torch.equal(reported["w"], torch.ones(2))
    assert torch.equal(global_model["w"], torch.zeros(2))
    assert asked == [(global_model, None, 3)]
    assert strategy.personalise(global_model) is global_model
    assert strategy.starting_weights() is None and strategy.regulariser("p") is None
    assert make_strategy("fedavg").deployed(global_model) is global_model
