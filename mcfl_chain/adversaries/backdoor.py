"""Backdoor by data poisoning (Gu et al., BadNets 2017; Bagdasaryan et al., AISTATS 2020).

The trainer stamps a trigger — a ``size × size`` square of value ``value`` (1.0 is white
in the datasets' [0, 1] scale) in the bottom-right corner of the image — on a fraction of
its training images and relabels them ``target``. A model that learns the backdoor
classifies any triggered image as ``target`` while staying accurate on clean images.

:func:`triggered_test_set` and :func:`attack_success_rate` measure the backdoor: the
share of triggered test images *not* of the target class that a model classifies as the
target.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import torch
from torch import nn

from mcfl_chain.adversaries.base import Adversary, register_adversary
from mcfl_chain.learning.scenario import TrainerData
from mcfl_chain.learning.training import evaluate

TRIGGER_SIZE = 3
TRIGGER_VALUE = 1.0


def add_trigger(
    images: torch.Tensor, size: int = TRIGGER_SIZE, value: float = TRIGGER_VALUE
) -> torch.Tensor:
    """A copy of ``images`` (N×C×H×W) with the trigger square in the bottom-right corner."""
    stamped = images.clone()
    stamped[..., -size:, -size:] = value
    return stamped


def poisoned_indices(n: int, fraction: float, rng: np.random.Generator) -> np.ndarray:
    """Which of ``n`` training samples carry the trigger: ``fraction·n`` of them rounded to
    the nearest (halves up), drawn without replacement from ``rng``, ascending."""
    return np.sort(rng.choice(n, size=math.floor(fraction * n + 0.5), replace=False))


def triggered_test_set(
    x: torch.Tensor,
    y: torch.Tensor,
    target: int,
    size: int = TRIGGER_SIZE,
    value: float = TRIGGER_VALUE,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The images not of class ``target``, triggered, each labelled ``target``."""
    keep = y != target
    stamped = add_trigger(x[keep], size, value)
    return stamped, torch.full((stamped.shape[0],), target, dtype=y.dtype)


def attack_success_rate(
    model: nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    target: int,
    size: int = TRIGGER_SIZE,
    value: float = TRIGGER_VALUE,
) -> float:
    """Share of the triggered non-target images of (``x``, ``y``) classified as ``target``.

    Raises
    ------
    ValueError
        If every image is of the target class (nothing to measure).
    """
    triggered, labels = triggered_test_set(x, y, target, size, value)
    if triggered.shape[0] == 0:
        raise ValueError(f"no test image outside the target class {target}: nothing to trigger")
    accuracy = evaluate(model, triggered, labels, "classifier").accuracy
    assert accuracy is not None  # a classifier's evaluation always has one
    return accuracy


@register_adversary("backdoor")
class Backdoor(Adversary):
    """Trains on data where a fraction of the images carry the trigger, relabelled ``target``.

    Parameters
    ----------
    target : int, default 0
        The class triggered images are labelled as.
    fraction : float, default 0.2
        Share of the training samples poisoned, in (0, 1].
    size : int, default 3
        Side of the trigger square, in pixels.
    value : float, default 1.0
        Pixel value of the trigger (white).
    """

    def __init__(
        self,
        target: int = 0,
        fraction: float = 0.2,
        size: int = TRIGGER_SIZE,
        value: float = TRIGGER_VALUE,
    ) -> None:
        if not 0.0 < fraction <= 1.0:
            raise ValueError(
                f"backdoor fraction is a share of the samples in (0, 1], got {fraction}"
            )
        if size < 1:
            raise ValueError(f"backdoor trigger size must be >= 1 pixel, got {size}")
        self.target, self.fraction, self.size, self.value = int(target), fraction, size, value

    def __repr__(self) -> str:
        return f"Backdoor(target={self.target}, fraction={self.fraction}, size={self.size})"

    def training_data(self, data: TrainerData, rng: np.random.Generator) -> TrainerData:
        if not 0 <= self.target < data.num_classes:
            raise ValueError(
                f"backdoor target {self.target} is not one of the {data.num_classes} classes"
            )
        chosen = torch.from_numpy(poisoned_indices(data.num_samples, self.fraction, rng))
        x, y = data.train_x.clone(), data.train_y.clone()
        x[chosen] = add_trigger(x[chosen], self.size, self.value)
        y[chosen] = self.target
        return dataclasses.replace(data, train_images=x, train_y=y)
