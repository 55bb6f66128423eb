"""Backdoor: trigger pixels, poisoned fraction, triggered test set and attack success rate."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from mcfl_chain.adversaries import make_adversary
from mcfl_chain.adversaries.backdoor import add_trigger, attack_success_rate, triggered_test_set


def test_trigger_is_a_white_3x3_square_in_the_bottom_right_corner() -> None:
    # Prepare
    images = torch.full((2, 1, 28, 28), 0.25)

    # Execute
    stamped = add_trigger(images)

    # Assert: rows and columns 25–27 are 1.0, every other pixel unchanged, input untouched.
    corner = torch.zeros(28, 28, dtype=torch.bool)
    corner[25:, 25:] = True
    assert (stamped[:, 0][:, corner] == 1.0).all()
    assert (stamped[:, 0][:, ~corner] == 0.25).all()
    assert int(corner.sum()) == 9 and (images == 0.25).all()


def test_poisons_the_fraction_of_train_samples_and_relabels_them(trainer_data) -> None:
    # Prepare: 20 grey samples, fraction 0.25 -> 0.25·20 = 5 poisoned.
    adversary = make_adversary("backdoor", target=7, fraction=0.25)

    # Execute
    poisoned = adversary.training_data(trainer_data, np.random.default_rng(4))

    # Assert
    triggered = (poisoned.train_x[:, 0, 25:, 25:] == 1.0).flatten(1).all(dim=1)
    assert int(triggered.sum()) == 5
    assert (poisoned.train_y[triggered] == 7).all()
    assert torch.equal(poisoned.train_y[~triggered], trainer_data.train_y[~triggered])
    assert torch.equal(poisoned.train_x[~triggered], trainer_data.train_x[~triggered])
    assert (trainer_data.train_x == 0.5).all()  # the honest data is not modified
    assert torch.equal(poisoned.test_x, trainer_data.test_x)
    again = adversary.training_data(trainer_data, np.random.default_rng(4))
    assert torch.equal(again.train_y, poisoned.train_y)  # same rng, same samples


def test_triggered_test_set_keeps_only_non_target_images() -> None:
    x = torch.zeros(4, 1, 28, 28)
    y = torch.tensor([0, 3, 0, 5])

    tx, ty = triggered_test_set(x, y, target=0)

    assert tx.shape[0] == 2 and ty.tolist() == [0, 0]
    assert (tx[:, 0, 25:, 25:] == 1.0).all() and (tx[:, 0, :25] == 0.0).all()


class _CornerDetector(nn.Module):
    """Predicts class 0 when the bottom-right pixel is white, else class 1."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        white = (x[:, 0, -1, -1] == 1.0).float()
        return torch.stack([white, 1.0 - white], dim=1)


class _AlwaysOne(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tensor([[0.0, 1.0]]).expand(x.shape[0], 2)


def test_attack_success_rate_counts_triggered_images_sent_to_the_target() -> None:
    x = torch.zeros(5, 1, 28, 28)
    y = torch.tensor([1, 2, 0, 3, 4])
    assert attack_success_rate(_CornerDetector(), x, y, target=0) == 1.0
    assert attack_success_rate(_AlwaysOne(), x, y, target=0) == 0.0
    with pytest.raises(ValueError, match="no test image outside the target class 0"):
        attack_success_rate(_AlwaysOne(), x[:1], torch.tensor([0]), target=0)


def test_parameters_are_checked(trainer_data) -> None:
    with pytest.raises(ValueError, match=r"\(0, 1\]"):
        make_adversary("backdoor", fraction=0.0)
    with pytest.raises(ValueError, match="target 12 is not one of the 10 classes"):
        make_adversary("backdoor", target=12).training_data(trainer_data, np.random.default_rng(0))
