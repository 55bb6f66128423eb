"""Label flipping (Tolpegin et al., ESORICS 2020; Fang et al., USENIX Security 2020): the
trainer trains honestly on wrongly labelled data.

Every training label ``y`` becomes ``(y + shift) mod C`` for ``C`` classes: a fixed
cyclic shift, which is a derangement (no class keeps its label) for any ``shift`` not a
multiple of ``C``. With the default ``shift = 1`` on ten classes: 0→1, 1→2, …, 8→9, 9→0.
Only the train split is flipped; the validation split, on which the trainer scores
models, and the test split, on which it reports, stay as they are.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import torch

from mcfl_chain.adversaries.base import Adversary, register_adversary
from mcfl_chain.learning.scenario import TrainerData


def label_permutation(num_classes: int, shift: int = 1) -> np.ndarray:
    """The flip as a table: entry ``c`` is the label class ``c`` is trained as.

    Raises
    ------
    ValueError
        If there are fewer than two classes, or ``shift`` is a multiple of
        ``num_classes`` (every label would keep its class).
    """
    if num_classes < 2:
        raise ValueError(f"label flipping needs at least 2 classes, got {num_classes}")
    if shift % num_classes == 0:
        raise ValueError(
            f"label-flip shift {shift} is a multiple of the {num_classes} classes: no label "
            f"would change; use a shift between 1 and {num_classes - 1}"
        )
    return (np.arange(num_classes) + shift) % num_classes


@register_adversary("label-flip")
class LabelFlip(Adversary):
    """Trains on labels shifted cyclically by ``shift`` classes.

    Parameters
    ----------
    shift : int, default 1
        Classes each label moves by (mod the number of classes); not a multiple of it.
    """

    def __init__(self, shift: int = 1) -> None:
        if int(shift) != shift:
            raise ValueError(f"label-flip shift must be a whole number of classes, got {shift}")
        self.shift = int(shift)

    def __repr__(self) -> str:
        return f"LabelFlip(shift={self.shift})"

    def training_data(self, data: TrainerData, rng: np.random.Generator) -> TrainerData:
        table = torch.from_numpy(label_permutation(data.num_classes, self.shift))
        return dataclasses.replace(data, train_y=table[data.train_y])
