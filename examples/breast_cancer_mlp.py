"""A task of one's own: a small MLP on tabular data (scikit-learn's breast-cancer set).

Nothing here is built into mcfl-chain: the model is an MLP, not a LeNet; the data are
30 numeric features per patient, not images; the training is Adam, not the package's
SGD. The worker only needs the object ``task`` (see ``README.md`` beside this file)::

    mcfl-chain worker --task examples/breast_cancer_mlp.py:task ...

Each trainer stands for one hospital. A hospital reads its own records from the file
the worker's ``--data`` names (``load_data(path)``): an ``.npz`` with arrays ``x``
(patients × 30 features) and ``y`` (0 malignant, 1 benign), or a ``.csv`` with a header
line, 30 feature columns, then the label. Without ``--data`` it takes scikit-learn's 569
patients; to play several hospitals on one machine they are cut into disjoint shares:
``MCFL_EXAMPLE_PART=i/n`` (default ``0/1``, all of them) makes this process trainer
``i`` of ``n``.
"""

from __future__ import annotations

import math
import os
import time
from pathlib import Path

import numpy as np
import torch
from sklearn.datasets import load_breast_cancer
from torch import nn

from mcfl_chain.learning.local_data import trainer_data_from_arrays
from mcfl_chain.learning.scenario import TrainerData
from mcfl_chain.learning.tasks import LearningTask, TrainConfig
from mcfl_chain.learning.training import TrainReport

FEATURES = 30
CLASSES = 2  # 0 malignant, 1 benign
PART_ENV = "MCFL_EXAMPLE_PART"


def build_model() -> nn.Module:
    """30 features → 32 → 16 → 2 logits."""
    return nn.Sequential(
        nn.Linear(FEATURES, 32),
        nn.ReLU(),
        nn.Linear(32, 16),
        nn.ReLU(),
        nn.Linear(16, CLASSES),
    )


def _part() -> tuple[int, int]:
    text = os.environ.get(PART_ENV, "0/1")
    try:
        index, count = (int(v) for v in text.split("/"))
    except ValueError:
        raise ValueError(f"{PART_ENV}={text!r}: expected i/n, e.g. 0/3") from None
    if not 0 <= index < count:
        raise ValueError(f"{PART_ENV}={text!r}: need 0 <= i < n")
    return index, count


def share(index: int, count: int, patients: int) -> np.ndarray:
    """The patients (row numbers) of trainer ``index`` of ``count``: disjoint shares."""
    return np.array_split(np.random.default_rng(2024).permutation(patients), count)[index]


def read_records(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """A hospital's own records: features and labels from an ``.npz`` or a ``.csv``."""
    if path.suffix == ".csv":
        table = np.loadtxt(path, delimiter=",", skiprows=1, ndmin=2)
        x, y = table[:, :-1], table[:, -1]
    else:
        with np.load(path) as arrays:
            x, y = arrays["x"], arrays["y"]
    if x.ndim != 2 or x.shape[1] != FEATURES or len(x) != len(y):
        raise ValueError(f"{path}: expected {FEATURES} features and one label per patient")
    return x, y.astype(np.int64)


def load_data(path: Path | None = None) -> TrainerData:
    """This trainer's records (``--data``) or share, split 70/15/15 and standardised with
    its own statistics."""
    if path is None:
        x, y = load_breast_cancer(return_X_y=True)
        index, count = _part()
        rows = share(index, count, len(y))
    else:
        x, y = read_records(path)
        index, rows = 0, np.arange(len(y))
    order = np.random.default_rng(index).permutation(rows)
    n_train, n_val = round(0.7 * len(order)), round(0.15 * len(order))
    train, val, test = np.split(order, [n_train, n_train + n_val])
    mean, std = x[train].mean(axis=0), x[train].std(axis=0) + 1e-8
    scaled = ((x - mean) / std).astype(np.float32)
    return trainer_data_from_arrays(
        scaled[train],
        y[train],
        scaled[test],
        y[test],
        scaled[val],
        y[val],
        name="breast-cancer",
        num_classes=CLASSES,
    )


def adam_train(model: nn.Module, data: TrainerData, config: TrainConfig) -> TrainReport:
    """Own training: Adam on mini-batches, in a seeded order."""
    optimiser = torch.optim.Adam(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    generator = torch.Generator().manual_seed(config.seed)
    n = data.train_y.shape[0]
    model.train()
    started = time.perf_counter()
    loss_value = math.nan
    for _ in range(config.epochs):
        total = 0.0
        for batch in torch.randperm(n, generator=generator).split(config.batch_size):
            optimiser.zero_grad(set_to_none=True)
            loss = nn.functional.cross_entropy(model(data.train_x[batch]), data.train_y[batch])
            loss.backward()
            optimiser.step()
            total += loss.item() * batch.shape[0]
        loss_value = total / n
    validation = task.evaluate(model, data.val_x, data.val_y) if data.val_y.shape[0] else None
    return TrainReport(
        num_samples=n,
        epochs=config.epochs,
        loss=loss_value,
        seconds=time.perf_counter() - started,
        validation=validation,
    )


task = LearningTask(
    arch="breast-cancer-mlp",
    model=build_model,
    data=load_data,
    train_fn=adam_train,
    datasets=("breast-cancer",),
    description="MLP 30-32-16-2 on scikit-learn's breast-cancer data, trained with Adam",
)
"""The task, for ``--task examples/breast_cancer_mlp.py:task`` (or ``breast_cancer_mlp:task``
with ``examples/`` on ``PYTHONPATH``)."""
