"""Label flipping: a fixed derangement of the training labels only."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from mcfl_chain.adversaries import make_adversary
from mcfl_chain.adversaries.label_flip import label_permutation


def test_default_flip_on_ten_classes_is_the_documented_shift() -> None:
    assert label_permutation(10).tolist() == [1, 2, 3, 4, 5, 6, 7, 8, 9, 0]


@pytest.mark.parametrize("num_classes", range(2, 11))
def test_every_shift_is_a_permutation_without_fixed_point(num_classes: int) -> None:
    for shift in range(1, num_classes):
        table = label_permutation(num_classes, shift)
        assert sorted(table.tolist()) == list(range(num_classes))  # a permutation
        assert not np.any(table == np.arange(num_classes))  # no class keeps its label


def test_flips_the_train_labels_and_nothing_else(trainer_data) -> None:
    # Prepare: labels 0, 1, …, 9, 0, 1, … over 20 samples.
    adversary = make_adversary("label-flip", shift=3)

    # Execute
    poisoned = adversary.training_data(trainer_data, np.random.default_rng(0))

    # Assert
    assert torch.equal(poisoned.train_y, (trainer_data.train_y + 3) % 10)
    assert (poisoned.train_y != trainer_data.train_y).all()
    assert poisoned.train_x is trainer_data.train_x
    assert torch.equal(poisoned.test_y, trainer_data.test_y)
    assert torch.equal(poisoned.val_y, trainer_data.val_y)


def test_a_shift_that_changes_no_label_is_refused(trainer_data) -> None:
    with pytest.raises(ValueError, match="multiple of the 10 classes"):
        make_adversary("label-flip", shift=10).training_data(trainer_data, np.random.default_rng(0))
    with pytest.raises(ValueError, match="at least 2 classes"):
        label_permutation(1)
