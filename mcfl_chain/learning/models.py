"""The paper's models (§5.1, thesis §5.1), by name, with a seeded initialisation.

- ``lenet5``: LeNet-5 for 1×28×28 inputs — conv 5×5 (6 channels, padding 2), ReLU,
  max-pool 2; conv 5×5 (16 channels), ReLU, max-pool 2; fully connected 400→120→84→10.
  (Each block pools before its ReLU: the same function, see :func:`_lenet_features`.)
- ``lenet-light``: the same with 3 and 9 convolution channels (thesis §5.1).
- ``lenet-cae``: convolutional autoencoder: LeNet's two convolution blocks as encoder
  (latent 16×5×5) and their mirror as decoder (nearest up-sampling and transposed
  convolutions), sigmoid output in [0, 1]; trained with MSE.
- ``<base>-heads<k>`` (``lenet5-heads2``, ``lenet-light-heads3``, k from 1 to
  :data:`MAX_HEADS`): FACADE's model (thesis §4.1.1, "we designate the last fully
  connected layer as the head"): the LeNet ``base`` whose last layer is ``k`` heads
  ``heads.<j>`` over one shared core, and a 0-d int64 buffer ``head_choice`` naming the
  head it predicts with. Built on first use of the name; its models are aggregated by
  the rule ``per-head-fedavg`` (:attr:`Architecture.aggregation`).

Initialisation rule (the same weights on every machine and every PyTorch version): the
parameters are visited in ``state_dict`` key order, sorted; each is filled from one
NumPy ``PCG64`` generator seeded with ``seed`` by ``uniform(-b, b)`` in float64, cast to
float32, with ``b = 1 / sqrt(fan_in)`` (fan_in = input channels × kernel area for
convolutions, input features for linear layers; for transposed convolutions the
output channels × kernel area). This is the distribution of PyTorch's default
initialisers, drawn without PyTorch's global random state.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache, partial
from typing import Any, Literal

import numpy as np
import torch
from torch import nn

ModelKind = Literal["classifier", "autoencoder"]


class MaxPool2x2(nn.MaxPool2d):
    """``nn.MaxPool2d(2)`` whose forward pass outside autograd (scoring, the label-mix
    fit's logits) is the element-wise maximum of the four strided quarters of the map.

    A maximum is exact, so every value equals ``max_pool2d``'s, and a window holding NaN
    gives NaN (a test compares the two, ties, NaN and infinities included). Only the sign
    of a zero or of a NaN may differ, and nothing after the pooling in these models
    (ReLU, convolutions, linear layers, sums with a bias) can turn that into another
    value: a model's outputs are equal either way (tested), so the records made with
    ``max_pool2d`` stay reproducible. ``max_pool2d``'s CPU kernel for the default layout
    walks the windows one by one: on one core, 512 LeNet-5 maps of 6×28×28 pooled in
    about 14 ms against 1.5 ms here, which halves a LeNet-5 forward pass over them (torch
    2.13). Training, where autograd needs the argmax, keeps ``max_pool2d``: an exact
    argmax written in tensor operations cost more than it saved at 32 images a step.
    """

    def __init__(self) -> None:
        super().__init__(2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """The 2×2 maximum of each window (see the class for which path runs when)."""
        if torch.is_grad_enabled() or x.shape[-1] % 2 or x.shape[-2] % 2:
            return super().forward(x)
        top = torch.maximum(x[..., 0::2, 0::2], x[..., 0::2, 1::2])
        return torch.maximum(top, torch.maximum(x[..., 1::2, 0::2], x[..., 1::2, 1::2]))


def _lenet_features(channels: tuple[int, int]) -> nn.Sequential:
    """LeNet's two convolution blocks (28×28 in, ``channels[1]``×5×5 out); the
    classifiers and the autoencoder's encoder share them.

    Each block pools, then applies ReLU: ReLU is monotone, so the max of the ReLUs is the
    ReLU of the max, and the gradient reaches the same input (or none) either way; the
    outputs and gradients are those of conv → ReLU → pool bit for bit (a test checks it),
    while ReLU and its backward pass touch a quarter of the values. LeNet-5's training
    took about 5 % less time for it (38 trainers, two threads, idle machine, torch 2.13;
    docs/discussion/performance.md).
    """
    first, second = channels
    return nn.Sequential(
        nn.Conv2d(1, first, kernel_size=5, padding=2),
        MaxPool2x2(),
        nn.ReLU(),
        nn.Conv2d(first, second, kernel_size=5),
        MaxPool2x2(),
        nn.ReLU(),
    )


def _lenet_core(channels: tuple[int, int]) -> tuple[nn.Sequential, list[nn.Module]]:
    """LeNet's convolutions, and its fully connected layers up to the 84 units (the last
    layer, the single or multiple heads, is the caller's): one definition, so that LeNet
    and its multi-head version keep the same parameter names and shapes."""
    second = channels[1]
    features = _lenet_features(channels)
    core: list[nn.Module] = [
        nn.Flatten(),
        nn.Linear(second * 5 * 5, 120),
        nn.ReLU(),
        nn.Linear(120, 84),
        nn.ReLU(),
    ]
    return features, core


class LeNet(nn.Module):
    """LeNet-5 classifier with configurable convolution widths (6/16, or 3/9 for light)."""

    kind: ModelKind = "classifier"

    def __init__(self, channels: tuple[int, int] = (6, 16), num_classes: int = 10) -> None:
        super().__init__()
        self.features, core = _lenet_core(channels)
        self.classifier = nn.Sequential(*core, nn.Linear(84, num_classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Class logits, shape N×num_classes."""
        return self.classifier(self.features(x))


HEAD_CHOICE = "head_choice"
"""The buffer naming the head a multi-head model predicts with (the name
:mod:`mcfl_chain.algorithms.facade` reads)."""


class MultiHeadLeNet(nn.Module):
    """LeNet whose last fully connected layer is ``heads`` heads over a shared core.

    The core is LeNet up to the 84-unit layer (``features``, ``classifier``); head ``j``
    is ``heads.<j>``, a Linear 84→num_classes. The buffer ``head_choice`` says which
    head :meth:`forward` uses; training then moves the core and that head only (the
    other heads get no gradient, so SGD leaves them bit for bit as they were).
    """

    kind: ModelKind = "classifier"

    def __init__(
        self, channels: tuple[int, int] = (6, 16), num_classes: int = 10, heads: int = 2
    ) -> None:
        super().__init__()
        if heads < 1:
            raise ValueError(f"a multi-head model needs at least one head, got {heads}")
        self.features, core = _lenet_core(channels)
        self.classifier = nn.Sequential(*core)
        self.heads = nn.ModuleList(nn.Linear(84, num_classes) for _ in range(heads))
        self.register_buffer(HEAD_CHOICE, torch.tensor(0, dtype=torch.int64))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Class logits of the chosen head, shape N×num_classes."""
        head = self.heads[int(self.get_buffer(HEAD_CHOICE))]
        return head(self.classifier(self.features(x)))  # type: ignore[no-any-return]


class LeNetAutoencoder(nn.Module):
    """LeNet convolutional autoencoder: LeNet's convolutions, then their mirror."""

    kind: ModelKind = "autoencoder"

    def __init__(self, channels: tuple[int, int] = (6, 16)) -> None:
        super().__init__()
        first, second = channels
        self.encoder = _lenet_features(channels)
        self.decoder = nn.Sequential(
            nn.Upsample(scale_factor=2, mode="nearest"),
            nn.ConvTranspose2d(second, first, kernel_size=5),
            nn.ReLU(),
            nn.Upsample(scale_factor=2, mode="nearest"),
            nn.ConvTranspose2d(first, 1, kernel_size=5, padding=2),
            nn.Sigmoid(),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Reconstruction of the input, same shape, values in [0, 1]."""
        return self.decoder(self.encoder(x))


@dataclass(frozen=True)
class Architecture:
    """A registered architecture: its name, kind, a factory and a one-line description.

    The built-in LeNets need nothing more. A task of one's own
    (:meth:`mcfl_chain.learning.tasks.LearningTask.register`) also brings how its model
    is initialised, trained and scored; :func:`create_model`,
    :func:`~mcfl_chain.learning.training.train` and
    :func:`~mcfl_chain.learning.training.evaluate` then use them for models built here.
    """

    name: str
    kind: ModelKind
    build: Callable[[], nn.Module]
    description: str
    create: Callable[[int], nn.Module] | None = None
    """``create(seed) -> model``: the seeded model; None: ``build()`` then :func:`initialise`."""
    train: Callable[..., Any] | None = None
    """Own training, ``train(model, data, *, epochs, batch_size, lr, momentum, weight_decay,
    seed) -> TrainReport``; None: the package's SGD."""
    evaluate: Callable[..., Any] | None = None
    """Own scoring, ``evaluate(model, x, y) -> Evaluation``; None: the package's."""
    aggregation: str = "fedavg"
    """The aggregation rule (:mod:`mcfl_chain.algorithms.robust` registry name) that
    rebuilds a model from its updates: ``fedavg``, or ``per-head-fedavg`` for heads."""
    heads: int | None = None
    """Number of heads of a multi-head model (``<base>-heads<k>``); None: one model."""
    check: Callable[[Mapping[str, torch.Tensor]], None] | None = None
    """Checks a decoded state dict's values beyond its layout, raising ``ValueError``
    (a multi-head model's ``head_choice`` must name one of its heads); None: nothing."""


ARCHITECTURES: dict[str, Architecture] = {
    arch.name: arch
    for arch in (
        Architecture("lenet5", "classifier", LeNet, "LeNet-5, conv channels 6 and 16"),
        Architecture(
            "lenet-light", "classifier", lambda: LeNet((3, 9)), "LeNet with conv channels 3 and 9"
        ),
        Architecture(
            "lenet-cae", "autoencoder", LeNetAutoencoder, "LeNet convolutional autoencoder (MSE)"
        ),
    )
}
"""Registry: architecture name → :class:`Architecture` (the built-ins, then any task's
model registered with :func:`register_architecture`)."""

BUILTIN_ARCHITECTURES = frozenset(ARCHITECTURES)
"""Names of the architectures this package defines; no task may take one of them."""

MAX_HEADS = 16
"""Most heads a ``<base>-heads<k>`` architecture may have."""

MULTI_HEAD_BASES: dict[str, tuple[int, int]] = {"lenet5": (6, 16), "lenet-light": (3, 9)}
"""Architectures with a multi-head version, and their convolution channels."""

_MULTI_HEAD_NAME = re.compile(r"(?P<base>[a-z0-9.-]+?)-heads(?P<heads>[1-9][0-9]*)")


def multi_head_arch(base: str, heads: int) -> str:
    """The name of ``base`` with its last layer as ``heads`` heads: ``lenet5-heads2``.

    Raises
    ------
    ValueError
        If ``base`` has no multi-head version or ``heads`` is not in 1..:data:`MAX_HEADS`.
    """
    if base not in MULTI_HEAD_BASES:
        raise ValueError(
            f"{base!r} has no multi-head version; those that have: "
            f"{', '.join(sorted(MULTI_HEAD_BASES))}"
        )
    if not 1 <= heads <= MAX_HEADS:
        raise ValueError(f"a model has 1 to {MAX_HEADS} heads, not {heads}")
    return f"{base}-heads{heads}"


def _head_choice_checker(heads: int) -> Callable[[Mapping[str, torch.Tensor]], None]:
    def check(state: Mapping[str, torch.Tensor]) -> None:
        choice = int(state[HEAD_CHOICE].item())
        if not 0 <= choice < heads:
            raise ValueError(
                f"{HEAD_CHOICE} is {choice}, but the model's heads are 0 to {heads - 1}"
            )

    return check


@cache
def _multi_head_architecture(name: str) -> Architecture | None:
    """The ``<base>-heads<k>`` architecture ``name`` stands for, or None (built once per
    name, kept out of :data:`ARCHITECTURES`, which lists what was registered)."""
    match = _MULTI_HEAD_NAME.fullmatch(name)
    if match is None or match["base"] not in MULTI_HEAD_BASES:
        return None
    heads = int(match["heads"])
    if heads > MAX_HEADS:
        return None
    base = ARCHITECTURES[match["base"]]
    return Architecture(
        name,
        "classifier",
        partial(MultiHeadLeNet, MULTI_HEAD_BASES[match["base"]], heads=heads),
        f"{base.description}; last layer as {heads} heads over a shared core (FACADE)",
        aggregation="per-head-fedavg",
        heads=heads,
        check=_head_choice_checker(heads),
    )


ARCH_ATTRIBUTE = "mcfl_arch"
"""Attribute :func:`create_model` sets on a model: the name of its architecture."""


def register_architecture(architecture: Architecture) -> None:
    """Add (or replace) a task's architecture in :data:`ARCHITECTURES`.

    Raises
    ------
    ValueError
        The name is one of :data:`BUILTIN_ARCHITECTURES`.
    """
    if architecture.name in BUILTIN_ARCHITECTURES:
        raise ValueError(
            f"{architecture.name!r} is a built-in architecture; a task's model needs a name "
            f"of its own"
        )
    ARCHITECTURES[architecture.name] = architecture


def architecture_of(model: nn.Module) -> Architecture | None:
    """The registered architecture :func:`create_model` built ``model`` from, if any."""
    name = getattr(model, ARCH_ATTRIBUTE, None)
    return get_architecture(name) if isinstance(name, str) and is_architecture(name) else None


def is_architecture(arch: str) -> bool:
    """Whether ``arch`` names a registered architecture or a ``<base>-heads<k>`` one."""
    return arch in ARCHITECTURES or _multi_head_architecture(arch) is not None


def get_architecture(arch: str) -> Architecture:
    """Look an architecture up by name (registered, or ``<base>-heads<k>``), with an
    error listing the known ones."""
    found = ARCHITECTURES.get(arch) or _multi_head_architecture(arch)
    if found is None:
        raise ValueError(
            f"unknown architecture {arch!r}; known: {', '.join(sorted(ARCHITECTURES))}, "
            f"and <base>-heads<k> for base {' or '.join(sorted(MULTI_HEAD_BASES))}"
        )
    return found


def _fan_in(name: str, module: nn.Module, shape: torch.Size) -> int:
    if isinstance(module, nn.ConvTranspose2d):
        return module.out_channels * math.prod(module.kernel_size)
    if isinstance(module, nn.Conv2d):
        return module.in_channels * math.prod(module.kernel_size)
    if isinstance(module, nn.Linear):
        return module.in_features
    raise TypeError(f"no initialisation rule for parameter {name!r} of {type(module).__name__}")


def initialise(model: nn.Module, seed: int) -> nn.Module:
    """Fill every parameter by the documented rule (see the module docstring), in place.

    Parameters
    ----------
    model : torch.nn.Module
        A model made of Conv2d, ConvTranspose2d and Linear layers.
    seed : int
        Seed of the NumPy generator.

    Returns
    -------
    torch.nn.Module
        ``model`` itself.
    """
    rng = np.random.Generator(np.random.PCG64(seed))
    modules = dict(model.named_modules())
    parameters = dict(model.named_parameters())
    with torch.no_grad():
        for name in sorted(parameters):
            parameter = parameters[name]
            owner = modules[name.rpartition(".")[0]]
            bound = 1.0 / math.sqrt(_fan_in(name, owner, parameter.shape))
            values = rng.uniform(-bound, bound, size=tuple(parameter.shape))
            parameter.copy_(torch.from_numpy(values.astype(np.float32)))
    return model


def create_model(arch: str, seed: int) -> nn.Module:
    """Build an architecture by name with the deterministic initialisation from ``seed``.

    Parameters
    ----------
    arch : str
        Name in :data:`ARCHITECTURES`: ``"lenet5"``, ``"lenet-light"`` or ``"lenet-cae"``.
    seed : int
        Initialisation seed; the same seed gives bit-identical weights everywhere.

    Returns
    -------
    torch.nn.Module
        The model in training mode; its ``kind`` attribute is ``"classifier"`` or
        ``"autoencoder"``, its ``mcfl_arch`` attribute the architecture's name.
    """
    architecture = get_architecture(arch)
    if architecture.create is not None:
        model = architecture.create(seed)
    else:
        # Building a module runs PyTorch's default initialisers, which draw from the global
        # generator: fork it so that creating a model never changes the caller's stream.
        with torch.random.fork_rng(devices=[]):
            model = architecture.build()
        model = initialise(model, seed)
    model.__dict__[ARCH_ATTRIBUTE] = architecture.name
    return model


def scores_faster_channels_last(model: nn.Module) -> bool:
    """Whether ``model`` is one of the package's LeNets, which score (forward passes only)
    faster on the CPU with channels-last weights: 1.5 times the images a second for
    LeNet-5 and 2.7 times for the autoencoder on one core (225 images, torch 2.13), the
    same figures to float rounding. A task's own model is not assumed to allow that
    layout (a ``view`` of its activations would fail). Training keeps the default layout:
    there the gain was within noise, and it would change the trained bits."""
    return type(model) in (LeNet, MultiHeadLeNet, LeNetAutoencoder)


def model_kind(model: nn.Module) -> ModelKind:
    """The kind (``"classifier"`` or ``"autoencoder"``) of a model built here."""
    kind = getattr(model, "kind", None)
    if kind not in ("classifier", "autoencoder"):
        raise ValueError(
            f"{type(model).__name__} has no kind: build models with create_model(), or pass kind="
        )
    return kind  # type: ignore[return-value]
