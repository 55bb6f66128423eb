"""The optimisers of local training, by preset name, for both compute paths.

A preset is one optimiser with its schedule. Each round's training builds a fresh one
(a round starts from a new parent model), so a schedule restarts every round. The
presets:

- ``sgd``: mini-batch SGD with the configured learning rate and momentum (classical, not
  Nesterov). This project's default: lr 0.05, momentum 0.9.
- ``adam-steplr``: the MCFL authors' optimiser (their code: ``torch.optim.Adam(lr=1e-3)``
  with ``StepLR(step_size=1)``, stepped once per epoch by PyTorch Lightning; StepLR's
  default γ = 0.1). Epoch e (from 0) of a round trains at ``1e-3 · 0.1^e``. The
  configured learning rate and momentum do not apply: the preset fixes them.

Every preset exists twice, with the same maths. :meth:`Optimiser.build` builds the
``torch.optim`` optimiser (and its schedule) that :func:`~mcfl_chain.learning.training.
train` steps for one model. :meth:`Optimiser.init` and :meth:`Optimiser.step` are the
same update as a pure function of stacked tensors (one leading row per model). The
batched compute (:mod:`mcfl_chain.compute.batched`) applies them to many models at once.
There each model keeps its own step count, since models of one computation take
different numbers of steps. Adding a preset is one :func:`register_optimiser` call.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import torch

Slots = dict[str, torch.Tensor]
"""An optimiser's state of one (stacked) parameter, e.g. its momentum buffer."""


@dataclass(frozen=True)
class Settings:
    """The configured settings of one step, as tensors shaped to broadcast over the
    stacked models (or plain numbers for one model)."""

    lr: torch.Tensor | float
    momentum: torch.Tensor | float
    weight_decay: torch.Tensor | float


class Optimiser(ABC):
    """One preset: its ``torch.optim`` form and its functional form."""

    name: str = ""
    help: str = ""

    @abstractmethod
    def build(
        self,
        params: Iterable[torch.nn.Parameter],
        *,
        lr: float,
        momentum: float,
        weight_decay: float,
    ) -> tuple[torch.optim.Optimizer, Callable[[], None] | None]:
        """The optimiser for one model's ``params``, and what to call after each epoch
        (its schedule's step; None: nothing)."""

    @abstractmethod
    def init(self, param: torch.Tensor) -> Slots:
        """The state of a (stacked) parameter before its first step."""

    @abstractmethod
    def step(
        self,
        param: torch.Tensor,
        grad: torch.Tensor,
        slots: Slots,
        settings: Settings,
        count: torch.Tensor,
        epoch: int,
    ) -> tuple[torch.Tensor, Slots]:
        """One update: the new parameter and state (new tensors; the inputs are kept).

        Parameters
        ----------
        param, grad : torch.Tensor
            The stacked parameter and its gradient (the loss's, penalties included).
        slots : dict
            Its state, as :meth:`init` made it and earlier steps left it.
        settings : Settings
            The configured learning rate, momentum and weight decay.
        count : torch.Tensor
            Per model, how many steps it has taken with this one (from 1), shaped to
            broadcast like ``settings``.
        epoch : int
            The epoch of the step, from 0 (schedules restart with every training).
        """


OPTIMISERS: dict[str, Optimiser] = {}
"""Registry: preset name → :class:`Optimiser`."""


def register_optimiser(optimiser: Optimiser) -> Optimiser:
    """Add ``optimiser`` to :data:`OPTIMISERS` under its name (once)."""
    if optimiser.name in OPTIMISERS:
        raise ValueError(f"optimiser preset {optimiser.name!r} is registered twice")
    OPTIMISERS[optimiser.name] = optimiser
    return optimiser


def get_optimiser(name: str) -> Optimiser:
    """The preset ``name``.

    Raises
    ------
    ValueError
        If no preset has that name (the message lists them).
    """
    try:
        return OPTIMISERS[name]
    except KeyError:
        raise ValueError(
            f"unknown optimiser preset {name!r}; known: {', '.join(sorted(OPTIMISERS))}"
        ) from None


class SGD(Optimiser):
    """``torch.optim.SGD``: ``g += wd·p; buf = momentum·buf + g`` (``buf = g`` on the
    first step, which a zero buffer gives exactly); ``p -= lr·buf``."""

    name = "sgd"
    help = "SGD at the configured learning rate (lr, default 0.05), momentum 0.9"

    def build(
        self,
        params: Iterable[torch.nn.Parameter],
        *,
        lr: float,
        momentum: float,
        weight_decay: float,
    ) -> tuple[torch.optim.Optimizer, Callable[[], None] | None]:
        return torch.optim.SGD(params, lr=lr, momentum=momentum, weight_decay=weight_decay), None

    def init(self, param: torch.Tensor) -> Slots:
        return {"momentum": torch.zeros_like(param)}

    def step(
        self,
        param: torch.Tensor,
        grad: torch.Tensor,
        slots: Slots,
        settings: Settings,
        count: torch.Tensor,
        epoch: int,
    ) -> tuple[torch.Tensor, Slots]:
        grad = grad + settings.weight_decay * param
        buffer = settings.momentum * slots["momentum"] + grad
        return param - settings.lr * buffer, {"momentum": buffer}


class AdamStepLR(Optimiser):
    """``torch.optim.Adam`` (β 0.9 and 0.999, ε 1e-8; L2 weight decay added to the
    gradient) at ``lr · gamma^epoch``: ``StepLR(step_size=1, gamma)`` stepped per epoch.
    The functional step follows PyTorch's single-tensor Adam operation by operation."""

    def __init__(self, name: str, lr: float, gamma: float, help: str) -> None:
        self.name, self.lr, self.gamma, self.help = name, lr, gamma, help
        self.betas = (0.9, 0.999)
        self.eps = 1e-8

    def build(
        self,
        params: Iterable[torch.nn.Parameter],
        *,
        lr: float,
        momentum: float,
        weight_decay: float,
    ) -> tuple[torch.optim.Optimizer, Callable[[], None] | None]:
        optimiser = torch.optim.Adam(
            params, lr=self.lr, betas=self.betas, eps=self.eps, weight_decay=weight_decay
        )
        schedule = torch.optim.lr_scheduler.StepLR(optimiser, step_size=1, gamma=self.gamma)
        return optimiser, schedule.step

    def init(self, param: torch.Tensor) -> Slots:
        return {"exp_avg": torch.zeros_like(param), "exp_avg_sq": torch.zeros_like(param)}

    def step(
        self,
        param: torch.Tensor,
        grad: torch.Tensor,
        slots: Slots,
        settings: Settings,
        count: torch.Tensor,
        epoch: int,
    ) -> tuple[torch.Tensor, Slots]:
        beta1, beta2 = self.betas
        lr = self.lr * self.gamma**epoch
        grad = grad + settings.weight_decay * param
        exp_avg = slots["exp_avg"].lerp(grad, 1 - beta1)
        exp_avg_sq = slots["exp_avg_sq"] * beta2 + (1 - beta2) * grad * grad
        # In float64 like PyTorch's Python-float bias corrections, then cast once.
        steps = count.to(torch.float64)
        step_size = (lr / (1 - beta1**steps)).to(param.dtype)
        correction2_sqrt = ((1 - beta2**steps) ** 0.5).to(param.dtype)
        denominator = exp_avg_sq.sqrt() / correction2_sqrt + self.eps
        new_param = param - step_size * (exp_avg / denominator)
        return new_param, {"exp_avg": exp_avg, "exp_avg_sq": exp_avg_sq}


register_optimiser(SGD())
register_optimiser(
    AdamStepLR(
        "adam-steplr",
        lr=1e-3,
        gamma=0.1,
        help="the MCFL authors' Adam, lr 1e-3, times 0.1 after every epoch of a round "
        "(StepLR(step_size=1)); the configured learning rate does not apply",
    )
)

OPTIMISER_NAMES = tuple(OPTIMISERS)
"""The presets' names, the default (``sgd``) first."""
