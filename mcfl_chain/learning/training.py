"""Local training and evaluation of one model on one trainer's preloaded tensors.

Training is mini-batch SGD with momentum, or another preset of
:mod:`mcfl_chain.learning.optimisers` (a fresh optimiser per call, as each round starts
from a new parent model): cross-entropy for classifiers, MSE between the
input and its reconstruction for autoencoders. The batches are index slices of the
preloaded tensors in an order drawn from ``seed``, so there is no per-sample work in
the loop. The number of CPU threads is the caller's choice (``torch.set_num_threads``).

A model built by :func:`~mcfl_chain.learning.models.create_model` from a task of one's
own that brings its own training or scoring (:mod:`mcfl_chain.learning.tasks`) is
trained and scored by those instead: :func:`train` and :func:`evaluate` hand it over,
so every caller (the worker among them) runs the task's code without knowing of it.
Inside that code, these functions are the package's own again (a task's training may
call :func:`train` for plain SGD).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from mcfl_chain.learning.models import ModelKind, architecture_of, model_kind
from mcfl_chain.learning.optimisers import get_optimiser
from mcfl_chain.learning.scenario import TrainerData

_IN_OWN_CODE: ContextVar[bool] = ContextVar("mcfl_in_own_code", default=False)


def _own(model: nn.Module, what: str) -> Callable[..., Any] | None:
    """The task's own ``train`` or ``evaluate`` for ``model``, unless already inside one."""
    if _IN_OWN_CODE.get():
        return None
    architecture = architecture_of(model)
    return None if architecture is None else getattr(architecture, what)


@contextmanager
def task_code() -> Iterator[None]:
    """Run a task's own training or scoring: :func:`train` and :func:`evaluate` called
    inside are the package's own, never the task's again."""
    token = _IN_OWN_CODE.set(True)
    try:
        yield
    finally:
        _IN_OWN_CODE.reset(token)


@dataclass(frozen=True)
class Evaluation:
    """A model's score on a set of samples.

    Attributes
    ----------
    accuracy : float or None
        Fraction of correct predictions (classifiers); None for autoencoders.
    loss : float
        Mean cross-entropy (classifiers) or mean squared error per pixel (autoencoders).
    num_samples : int
        Number of samples evaluated.
    """

    accuracy: float | None
    loss: float
    num_samples: int


@dataclass(frozen=True)
class TrainReport:
    """What one call of :func:`train` did.

    Attributes
    ----------
    num_samples : int
        Training samples (the update's weight in FedAvg).
    epochs : int
        Epochs run.
    loss : float
        Mean training loss over the last epoch.
    seconds : float
        Wall-clock time of the training loop.
    validation : Evaluation or None
        Score on the validation split after training; None when it is empty.
    """

    num_samples: int
    epochs: int
    loss: float
    seconds: float
    validation: Evaluation | None


def _loss_function(kind: ModelKind) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    return nn.functional.cross_entropy if kind == "classifier" else nn.functional.mse_loss


SAMPLINGS = {
    "shuffle": "each epoch visits every training sample once, in a fresh random order",
    "replacement": "each epoch draws as many samples with replacement (the MCFL authors' "
    "WeightedRandomSampler): some twice, about a third not at all",
}
"""How an epoch draws its training samples (``--sampling``)."""


def epoch_order(n: int, generator: torch.Generator, sampling: str = "shuffle") -> torch.Tensor:
    """The ``n`` training-sample indices of one epoch, in batch order (see
    :data:`SAMPLINGS`), drawn from ``generator``.

    Raises
    ------
    ValueError
        An unknown ``sampling``.
    """
    if sampling == "shuffle":
        return torch.randperm(n, generator=generator)
    if sampling == "replacement":
        return torch.randint(0, n, (n,), generator=generator)
    raise ValueError(f"unknown sampling {sampling!r}; choose one of {', '.join(SAMPLINGS)}")


def train(
    model: nn.Module,
    data: TrainerData,
    epochs: int,
    *,
    batch_size: int = 32,
    lr: float = 0.01,
    momentum: float = 0.9,
    weight_decay: float = 0.0,
    seed: int = 0,
    on_epoch: Callable[[int, float], None] | None = None,
    penalty: Callable[[nn.Module], torch.Tensor] | None = None,
    validate: bool = True,
    optimiser: str = "sgd",
    sampling: str = "shuffle",
) -> TrainReport:
    """Train ``model`` in place on ``data``'s train split for ``epochs`` epochs.

    Parameters
    ----------
    model : torch.nn.Module
        A model from :func:`~mcfl_chain.learning.models.create_model` (its ``kind``
        chooses the loss).
    data : TrainerData
        The trainer's preloaded tensors.
    epochs : int
        Passes over the train split (paper: 2 per round, 10 for the local baseline).
    batch_size : int, default 32
        Samples per SGD step; the last batch of an epoch may be smaller.
    lr : float, default 0.01
        SGD learning rate.
    momentum : float, default 0.9
        SGD momentum (classical, not Nesterov).
    weight_decay : float, default 0.0
        L2 penalty of SGD.
    seed : int, default 0
        Seed of the batch order, so a training run is reproducible.
    on_epoch : callable, optional
        Called after each epoch with (epoch number from 1, mean loss), e.g. for progress.
    penalty : callable, optional
        ``model → scalar tensor`` added to every batch's loss (a strategy's regulariser,
        e.g. FedFMC's EWC term); the reported losses are the data loss alone.
    validate : bool, default True
        Score the trained model on the validation split for the report (a worker, which
        scores its models itself, saves that forward pass with False).

    optimiser : str, default "sgd"
        The optimiser preset (:mod:`mcfl_chain.learning.optimisers`).
    sampling : str, default "shuffle"
        How each epoch draws its samples (:data:`SAMPLINGS`).

    Returns
    -------
    TrainReport
        Sample count, last-epoch loss, seconds and the validation score.

    Raises
    ------
    ValueError
        If ``epochs`` or ``batch_size`` is below one, the optimiser preset or the
        sampling is unknown, or a penalty, another optimiser than ``sgd`` or another
        sampling than ``shuffle`` is given for a task that trains with its own code
        (which has no place for them).
    """
    if epochs < 1 or batch_size < 1:
        raise ValueError(f"epochs and batch_size must be >= 1, got {epochs} and {batch_size}")
    preset = get_optimiser(optimiser)
    if sampling not in SAMPLINGS:
        raise ValueError(f"unknown sampling {sampling!r}; choose one of {', '.join(SAMPLINGS)}")
    own = _own(model, "train")
    if own is not None and optimiser != "sgd":
        raise ValueError(
            f"this task trains with its own code, which takes SGD's settings only: the "
            f"optimiser preset {optimiser!r} cannot be applied; use sgd"
        )
    if own is not None and sampling != "shuffle":
        raise ValueError(
            f"this task trains with its own code, which draws its own batches: the sampling "
            f"{sampling!r} cannot be applied; use shuffle"
        )
    if own is not None and penalty is not None:
        raise ValueError(
            "this task trains with its own code, which takes no loss penalty: the "
            "strategy's regulariser (e.g. FedFMC's EWC) cannot be applied; turn it off"
        )
    if own is not None:
        with task_code():
            report = own(
                model,
                data,
                epochs=epochs,
                batch_size=batch_size,
                lr=lr,
                momentum=momentum,
                weight_decay=weight_decay,
                seed=seed,
            )
        if not isinstance(report, TrainReport):
            raise TypeError(f"a task's training returned {type(report).__name__}, not TrainReport")
        return report
    kind = model_kind(model)
    loss_function = _loss_function(kind)
    torch_optimiser, end_of_epoch = preset.build(
        model.parameters(), lr=lr, momentum=momentum, weight_decay=weight_decay
    )
    generator = torch.Generator().manual_seed(seed)
    x, y = data.train_x, data.train_y
    target = y if kind == "classifier" else x
    n = x.shape[0]
    model.train()
    started = time.perf_counter()
    epoch_loss = math.nan
    for epoch in range(1, epochs + 1):
        order = epoch_order(n, generator, sampling)
        total = 0.0
        for start in range(0, n, batch_size):
            batch = order[start : start + batch_size]
            torch_optimiser.zero_grad(set_to_none=True)
            loss = loss_function(model(x[batch]), target[batch])
            (loss if penalty is None else loss + penalty(model)).backward()
            torch_optimiser.step()
            total += loss.item() * batch.shape[0]
        if end_of_epoch is not None:
            end_of_epoch()
        epoch_loss = total / n
        if on_epoch is not None:
            on_epoch(epoch, epoch_loss)
    seconds = time.perf_counter() - started
    validation = (
        evaluate(model, data.val_x, data.val_y, kind) if validate and data.val_y.shape[0] else None
    )
    return TrainReport(
        num_samples=n, epochs=epochs, loss=epoch_loss, seconds=seconds, validation=validation
    )


def evaluate(
    model: nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    kind: ModelKind | None = None,
    *,
    batch_size: int = 2048,
) -> Evaluation:
    """Score ``model`` on samples ``x`` with labels ``y`` (labels unused for autoencoders).

    Parameters
    ----------
    model : torch.nn.Module
        The model; its training/eval mode is restored afterwards.
    x, y : torch.Tensor
        Images N×1×28×28 and int64 labels N.
    kind : {"classifier", "autoencoder"}, optional
        Defaults to the model's own ``kind``.
    batch_size : int, default 2048
        Samples per forward pass (memory bound only; the result does not depend on it
        beyond float rounding).

    Returns
    -------
    Evaluation
        Accuracy and mean cross-entropy for classifiers; MSE per pixel for autoencoders.

    Raises
    ------
    ValueError
        If there is no sample to evaluate.
    """
    if x.shape[0] == 0:
        raise ValueError("cannot evaluate on an empty set: the trainer's split has no sample")
    own = _own(model, "evaluate")
    if own is not None:
        with task_code():
            result = own(model, x, y)
        if not isinstance(result, Evaluation):
            raise TypeError(f"a task's evaluation returned {type(result).__name__}, not Evaluation")
        return result
    kind = kind or model_kind(model)
    was_training = model.training
    model.eval()
    loss_sum = 0.0
    correct = 0
    try:
        with torch.inference_mode():
            for start in range(0, x.shape[0], batch_size):
                batch_x = x[start : start + batch_size]
                output = model(batch_x)
                if kind == "classifier":
                    batch_y = y[start : start + batch_size]
                    loss_sum += nn.functional.cross_entropy(output, batch_y, reduction="sum").item()
                    correct += int((output.argmax(dim=1) == batch_y).sum().item())
                else:
                    loss_sum += nn.functional.mse_loss(output, batch_x, reduction="sum").item()
    finally:
        model.train(was_training)
    n = x.shape[0]
    if kind == "classifier":
        return Evaluation(accuracy=correct / n, loss=loss_sum / n, num_samples=n)
    return Evaluation(accuracy=None, loss=loss_sum / x.numel(), num_samples=n)


def selection_metric(evaluation: Evaluation, kind: ModelKind) -> float:
    """The paper's model-selection metric (Algorithm 1): higher is better.

    Accuracy for classifiers; ``1 / MSE`` for autoencoders (a perfect reconstruction,
    MSE 0, scores ``inf``).
    """
    if kind == "classifier":
        if evaluation.accuracy is None:
            raise ValueError("a classifier's evaluation must carry an accuracy")
        return evaluation.accuracy
    return math.inf if evaluation.loss == 0.0 else 1.0 / evaluation.loss
