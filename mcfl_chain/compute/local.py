"""One model at a time on one device: the compute a lone worker uses.

A :class:`Compute` is what a trainer asks to train and score models; the trainer never
touches a device itself. :class:`LocalCompute` runs :func:`~mcfl_chain.learning.training.
train` and :func:`~mcfl_chain.learning.training.evaluate` on the device it was given,
moving a trainer's data there once and every result back to the CPU, where weights are
encoded and stored. The simulator's batched engine gives its hosted trainers a compute
that gathers their requests into one batched computation instead
(:mod:`mcfl_chain.host.compute`); the trainer cannot tell the two apart.
"""

from __future__ import annotations

import copy
import threading
import weakref
from collections.abc import Callable
from dataclasses import replace
from typing import Protocol

import torch
from torch import nn

from mcfl_chain.learning.models import ModelKind, create_model, scores_faster_channels_last
from mcfl_chain.learning.scenario import Images, SharedImages, TrainerData
from mcfl_chain.learning.training import Evaluation, evaluate, train

StateDict = dict[str, torch.Tensor]
Penalty = Callable[[nn.Module], torch.Tensor]


class Compute(Protocol):
    """What a trainer asks of its compute backend. Weights in and out are CPU tensors."""

    device: torch.device

    def train_many(
        self,
        arch: str,
        starts: list[StateDict],
        data: TrainerData,
        *,
        epochs: int,
        batch_size: int,
        lr: float,
        momentum: float,
        seed: int,
        penalties: list[Penalty | None],
        optimiser: str = "sgd",
        sampling: str = "shuffle",
    ) -> list[StateDict]:
        """:meth:`train` from each of ``starts`` (with its penalty), in order: a trainer's
        every update of a phase in one request, which a batching compute runs at once.
        ``optimiser`` names the preset (:mod:`mcfl_chain.learning.optimisers`),
        ``sampling`` how an epoch draws its samples
        (:data:`~mcfl_chain.learning.training.SAMPLINGS`)."""
        ...

    def evaluate(
        self, arch: str, weights: StateDict, x: torch.Tensor, y: torch.Tensor, kind: ModelKind
    ) -> Evaluation:
        """:func:`~mcfl_chain.learning.training.evaluate` of ``weights`` on ``(x, y)``."""
        ...

    def evaluate_many(
        self,
        arch: str,
        weights: list[StateDict],
        x: torch.Tensor,
        y: torch.Tensor,
        kind: ModelKind,
    ) -> list[Evaluation]:
        """:meth:`evaluate` of each of ``weights`` on the same ``(x, y)``, in order: a
        trainer's candidates of a round in one request, which a batching compute scores
        at once."""
        ...


class LocalCompute:
    """Each request runs alone, now, on ``device`` (the CPU by default).

    Parameters
    ----------
    device
        Where models train and are scored. A trainer's data is copied there on its first
        use and kept (a handful of megabytes for a LeNet share).
    """

    def __init__(self, device: torch.device | str = "cpu") -> None:
        self.device = torch.device(device)
        self._templates: dict[str, nn.Module] = {}
        self._on_device: dict[int, tuple[weakref.ref[torch.Tensor], torch.Tensor]] = {}
        self._lock = threading.Lock()
        self._scorers = threading.local()

    def model(self, arch: str, weights: StateDict) -> nn.Module:
        """A fresh model of ``arch`` holding ``weights``, on this compute's device."""
        with self._lock:
            template = self._templates.get(arch)
            if template is None:
                template = self._templates[arch] = create_model(arch, seed=0)
        net = copy.deepcopy(template)
        net.load_state_dict(weights)
        return net.to(self.device)

    def placed(self, tensor: torch.Tensor) -> torch.Tensor:
        """``tensor`` on this compute's device (itself on the CPU)."""
        return tensor if tensor.device == self.device else self._cached(tensor)

    def _cached(self, tensor: torch.Tensor) -> torch.Tensor:
        # Keyed by identity: a trainer's splits are built once and live as long as it.
        # Held weakly: floats read anew from shared bytes (a host's test split, once a
        # round) leave the cache with the tensor they came from.
        key = id(tensor)
        with self._lock:
            hit = self._on_device.get(key)
            if hit is not None and hit[0]() is tensor:
                return hit[1]
            moved = tensor.to(self.device)
            self._on_device[key] = (weakref.ref(tensor, self._forget(key)), moved)
            return moved

    def _forget(self, key: int) -> Callable[[weakref.ref[torch.Tensor]], None]:
        entries = self._on_device

        def forget(dead: weakref.ref[torch.Tensor]) -> None:
            # Runs where the tensor is freed, perhaps under the lock: no lock here (one
            # dict operation is atomic), and only the dead tensor's own entry goes.
            if (hit := entries.get(key)) is not None and hit[0] is dead:
                entries.pop(key, None)

        return forget

    def _images(self, images: Images) -> Images:
        if isinstance(images, SharedImages):
            # The dataset's bytes go once to the device; floats are made there when read.
            return replace(
                images,
                pixels=self.placed(images.pixels),
                values=self.placed(images.values),
                rows=self.placed(images.rows),
            )
        return self.placed(images)

    def _data(self, data: TrainerData) -> TrainerData:
        if self.device.type == "cpu":
            return data
        return replace(
            data,
            train_images=self._images(data.train_images),
            train_y=self.placed(data.train_y),
            val_images=self._images(data.val_images),
            val_y=self.placed(data.val_y),
            test_images=self._images(data.test_images),
            test_y=self.placed(data.test_y),
        )

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
        if penalty is not None and self.device.type != "cpu":
            # A strategy's penalty closes over CPU tensors (FedFMC's Fisher information).
            return LocalCompute("cpu").train(
                arch,
                start,
                data,
                epochs=epochs,
                batch_size=batch_size,
                lr=lr,
                momentum=momentum,
                seed=seed,
                penalty=penalty,
                optimiser=optimiser,
                sampling=sampling,
            )
        net = self.model(arch, start)
        train(
            net,
            self._data(data),
            epochs=epochs,
            batch_size=batch_size,
            lr=lr,
            momentum=momentum,
            seed=seed,
            penalty=penalty,
            validate=False,  # the trainer scores its models itself
            optimiser=optimiser,
            sampling=sampling,
        )
        return {name: value.detach().cpu() for name, value in net.state_dict().items()}

    def train_many(
        self,
        arch: str,
        starts: list[StateDict],
        data: TrainerData,
        *,
        epochs: int,
        batch_size: int,
        lr: float,
        momentum: float,
        seed: int,
        penalties: list[Penalty | None],
        optimiser: str = "sgd",
        sampling: str = "shuffle",
    ) -> list[StateDict]:
        return [
            self.train(
                arch,
                start,
                data,
                epochs=epochs,
                batch_size=batch_size,
                lr=lr,
                momentum=momentum,
                seed=seed,
                penalty=penalty,
                optimiser=optimiser,
                sampling=sampling,
            )
            for start, penalty in zip(starts, penalties, strict=True)
        ]

    def evaluate(
        self, arch: str, weights: StateDict, x: torch.Tensor, y: torch.Tensor, kind: ModelKind
    ) -> Evaluation:
        return evaluate(self._scorer(arch, weights), self.placed(x), self.placed(y), kind)

    def evaluate_many(
        self,
        arch: str,
        weights: list[StateDict],
        x: torch.Tensor,
        y: torch.Tensor,
        kind: ModelKind,
    ) -> list[Evaluation]:
        return [self.evaluate(arch, w, x, y, kind) for w in weights]

    def _scorer(self, arch: str, weights: StateDict) -> nn.Module:
        """A model of ``arch`` holding ``weights``, kept per thread and architecture and
        loaded again for each score: scoring never changes it, and a deep copy of the
        template per candidate cost more than the forward pass."""
        kept: dict[str, nn.Module] = self._scorers.__dict__.setdefault("models", {})
        net = kept.get(arch)
        if net is None:
            net = kept[arch] = self.model(arch, weights)
            if self.device.type == "cpu" and scores_faster_channels_last(net):
                # Loading weights copies into these strides: converted once, kept.
                net.to(memory_format=torch.channels_last)  # type: ignore[call-overload]
        else:
            net.load_state_dict(weights)
        return net
