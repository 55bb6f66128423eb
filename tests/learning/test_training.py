"""Local training and evaluation on small real data (scikit-learn's digits)."""

from __future__ import annotations

import math

import pytest
import torch

from mcfl_chain.learning.models import create_model
from mcfl_chain.learning.scenario import TrainerDataSpec, build_trainer_data
from mcfl_chain.learning.training import (
    Evaluation,
    epoch_order,
    evaluate,
    selection_metric,
    train,
)


@pytest.fixture(scope="module")
def digits_data():  # type: ignore[no-untyped-def]
    return build_trainer_data(TrainerDataSpec("digits", seed=0, split=(0.7, 0.1, 0.2)))


def test_classifier_learns_digits(digits_data) -> None:  # type: ignore[no-untyped-def]
    # Prepare
    model = create_model("lenet5", seed=0)
    before = evaluate(model, digits_data.test_x, digits_data.test_y)
    epochs_seen: list[int] = []
    # Execute
    report = train(
        model,
        digits_data,
        epochs=4,
        batch_size=32,
        lr=0.05,
        seed=1,
        on_epoch=lambda epoch, loss: epochs_seen.append(epoch),
    )
    after = evaluate(model, digits_data.test_x, digits_data.test_y)
    # Assert
    assert before.accuracy is not None and before.accuracy < 0.3
    assert after.accuracy is not None and after.accuracy > 0.85
    assert after.loss < before.loss
    assert report.num_samples == digits_data.train_y.shape[0] and report.epochs == 4
    assert epochs_seen == [1, 2, 3, 4]
    assert (
        report.validation is not None
        and report.validation.num_samples == digits_data.val_y.shape[0]
    )
    assert math.isfinite(report.loss) and report.seconds > 0


def test_training_is_reproducible_from_the_seed(digits_data) -> None:  # type: ignore[no-untyped-def]
    states = []
    for _ in range(2):
        model = create_model("lenet-light", seed=3)
        train(model, digits_data, epochs=1, seed=9)
        states.append(model.state_dict())
    assert all(torch.equal(states[0][k], states[1][k]) for k in states[0])


def test_autoencoder_reduces_reconstruction_error(digits_data) -> None:  # type: ignore[no-untyped-def]
    model = create_model("lenet-cae", seed=0)
    before = evaluate(model, digits_data.test_x, digits_data.test_y)
    train(model, digits_data, epochs=3, lr=0.1, seed=0)
    after = evaluate(model, digits_data.test_x, digits_data.test_y)
    assert before.accuracy is None and after.accuracy is None
    assert after.loss < 0.6 * before.loss


def test_evaluation_matches_a_hand_count() -> None:
    # A "model" that always predicts class 1 with logits [0, 1]: known accuracy and loss.
    class Constant(torch.nn.Module):
        kind = "classifier"

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.tensor([[0.0, 1.0]]).expand(x.shape[0], 2)

    y = torch.tensor([1, 1, 0, 1])
    result = evaluate(Constant(), torch.zeros(4, 1, 28, 28), y, batch_size=3)
    assert result.accuracy == 0.75 and result.num_samples == 4
    ce_right, ce_wrong = math.log(1 + math.e**-1), math.log(1 + math.e)
    assert result.loss == pytest.approx((3 * ce_right + ce_wrong) / 4)


def test_evaluation_restores_training_mode() -> None:
    model = create_model("lenet5", 0)
    model.train()
    evaluate(model, torch.zeros(2, 1, 28, 28), torch.zeros(2, dtype=torch.int64))
    assert model.training


def test_evaluating_an_empty_split_is_an_error() -> None:
    with pytest.raises(ValueError, match="empty"):
        evaluate(create_model("lenet5", 0), torch.zeros(0, 1, 28, 28), torch.zeros(0))


def test_selection_metric() -> None:
    assert selection_metric(Evaluation(0.9, 0.3, 10), "classifier") == 0.9
    assert selection_metric(Evaluation(None, 0.02, 10), "autoencoder") == pytest.approx(50.0)
    assert selection_metric(Evaluation(None, 0.0, 10), "autoencoder") == math.inf


def test_a_penalty_is_added_to_the_training_loss(digits_data) -> None:  # type: ignore[no-untyped-def]
    # Prepare: a strong pull back to the starting weights (an EWC-like regulariser)
    start = create_model("lenet-light", seed=3)
    anchor = {k: v.clone() for k, v in start.state_dict().items()}

    def pull(model: torch.nn.Module) -> torch.Tensor:
        return 100.0 * sum(((p - anchor[n]) ** 2).sum() for n, p in model.named_parameters())

    free, held = create_model("lenet-light", seed=3), create_model("lenet-light", seed=3)

    # Execute
    train(free, digits_data, epochs=1, lr=0.01, seed=9)
    train(held, digits_data, epochs=1, lr=0.01, seed=9, penalty=pull)

    # Assert: the penalised model stays far nearer to its start
    def moved(model: torch.nn.Module) -> float:
        return sum(float((p - anchor[n]).norm()) for n, p in model.named_parameters())

    assert moved(held) < 0.5 * moved(free)


def test_an_epoch_draws_a_permutation_or_with_replacement():
    # Prepare / Execute: one epoch of 500 indices each way, from equal generators.
    shuffled = epoch_order(500, torch.Generator().manual_seed(1))
    drawn = epoch_order(500, torch.Generator().manual_seed(1), "replacement")

    # Assert: shuffle visits each sample once; with replacement n draws repeat some and
    # miss about (1 - 1/n)^n ≈ 37 % of them; the same seed, the same draws.
    assert sorted(shuffled.tolist()) == list(range(500))
    assert len(drawn) == 500 and 0 <= int(drawn.min()) and int(drawn.max()) < 500
    assert 0.30 < 1 - len(set(drawn.tolist())) / 500 < 0.44
    assert torch.equal(drawn, epoch_order(500, torch.Generator().manual_seed(1), "replacement"))
    with pytest.raises(ValueError, match="unknown sampling 'bootstrap'"):
        epoch_order(5, torch.Generator(), "bootstrap")
