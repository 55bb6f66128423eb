"""A deterministic stand-in for training: the update is a fixed function of the trainer,
the parent and the round, and no gradient is computed.

For one purpose: checking that two ways of running a network (the process and the
batched engines) build the same DAG. Real training on two engines agrees only to float
rounding, and a rounding difference can flip a close model choice and fork the DAG;
with this stand-in, every engine must produce the identical model ids, parents and
popularity. Scoring stays real (:class:`~mcfl_chain.compute.local.LocalCompute`), so
Algorithms 1 and 2 run on the stand-in weights as they would on trained ones.

Never a result: a run made with it learns nothing, and its metrics say
``training = "stand-in"``.
"""

from __future__ import annotations

import hashlib

import numpy as np
import torch

from mcfl_chain.compute.local import LocalCompute, Penalty, StateDict
from mcfl_chain.learning.scenario import TrainerData

STEP = 0.02
"""Scale of the stand-in's move: of the order of one round of SGD on LeNet."""


class StandInCompute(LocalCompute):
    """:class:`LocalCompute` whose ``train`` returns ``start`` plus a pseudo-random step
    drawn from a hash of the trainer's data, the starting weights and the seed (which
    names the round)."""

    def train(
        self,
        arch: str,
        start: StateDict,
        data: TrainerData,
        *,
        epochs: int,
        batch_size: int,
        lr: float,
        momentum: float,
        seed: int,
        penalty: Penalty | None = None,
        optimiser: str = "sgd",
        sampling: str = "shuffle",
    ) -> StateDict:
        digest = hashlib.sha256()
        digest.update(np.ascontiguousarray(data.indices).tobytes())
        digest.update(data.train_y.numpy().tobytes())
        for name in sorted(start):
            digest.update(name.encode())
            digest.update(start[name].detach().cpu().contiguous().numpy().tobytes())
        digest.update(str((seed, epochs, batch_size, lr, momentum)).encode())
        if optimiser != "sgd":  # the digests of SGD runs stay as they were
            digest.update(optimiser.encode())
        if sampling != "shuffle":
            digest.update(sampling.encode())
        rng = np.random.default_rng(int.from_bytes(digest.digest()[:8], "little"))
        out: StateDict = {}
        for name in sorted(start):
            value = start[name].detach().cpu()
            if value.is_floating_point():
                step = rng.standard_normal(value.shape).astype(np.float32) * STEP
                value = value + torch.from_numpy(step)
            out[name] = value.clone()
        return out
