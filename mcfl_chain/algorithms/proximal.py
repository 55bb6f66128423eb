"""Quadratic penalties towards anchor weights: FedProx's proximal term, Ditto's pull of
the personal model towards the global one, FedFMC's EWC term.

Each of them has the form ``Σₙ Σᵢ cₙ,ᵢ (θₙ,ᵢ − aₙ,ᵢ)²`` over some parameters n of the
model, with a coefficient per parameter (a number, or one per element as EWC's λF).
:class:`QuadraticPenalty` is that form. It is a strategy's regulariser: called on a
model, it gives the penalty as a differentiable scalar that per-model training adds to
the loss. Its anchor and coefficients are also plain data, so the batched compute can
add its gradient ``2 cₙ (θₙ − aₙ)`` to many stacked models at once. For that compute a
penalty is any object with ``anchor`` and ``coefficients`` mappings and this meaning.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import torch
from torch import nn


@dataclass(frozen=True, eq=False)
class QuadraticPenalty:
    """``Σₙ Σᵢ cₙ,ᵢ (θₙ,ᵢ − aₙ,ᵢ)²`` over the parameters that ``coefficients`` names.

    Attributes
    ----------
    anchor : Mapping[str, torch.Tensor]
        aₙ, the weights to stay near (a state dict holding every named parameter).
    coefficients : Mapping[str, torch.Tensor | float]
        cₙ per parameter name: a number, or a tensor of the parameter's shape.
    """

    anchor: Mapping[str, torch.Tensor]
    coefficients: Mapping[str, torch.Tensor | float]

    def __call__(self, model: nn.Module) -> torch.Tensor:
        """The penalty of ``model``'s parameters, differentiable in them.

        Raises
        ------
        KeyError
            If a named parameter is missing from the model or the anchor.
        """
        params = dict(model.named_parameters())
        total = torch.zeros((), dtype=torch.float32)
        for name, coefficient in self.coefficients.items():
            if name not in params or name not in self.anchor:
                raise KeyError(
                    f"penalty: parameter {name!r} is missing from the "
                    f"{'model' if name not in params else 'anchor weights'}"
                )
            param = params[name]
            difference = param - self.anchor[name].to(param.device, param.dtype)
            if isinstance(coefficient, torch.Tensor):
                coefficient = coefficient.to(param.device)
            total = total.to(param.device) + (coefficient * difference.square()).sum()
        return total


def proximal_penalty(anchor: Mapping[str, torch.Tensor], mu: float) -> QuadraticPenalty:
    """``(μ/2) ‖θ − a‖²`` over every floating-point entry of the state dict ``anchor``
    (the parameters; integer buffers such as ``head_choice`` are not weights): FedProx's
    proximal term (Li et al. 2020, Eq. 2), and Ditto's with λ for μ (Li et al. 2021).

    Its gradient is ``μ (θ − a)``.

    Raises
    ------
    ValueError
        If ``mu`` is negative.
    """
    if mu < 0:
        raise ValueError(f"a proximal weight must be >= 0, got {mu}")
    return QuadraticPenalty(
        anchor,
        {name: mu / 2 for name, value in anchor.items() if value.is_floating_point()},
    )
