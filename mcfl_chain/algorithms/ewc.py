"""Elastic Weight Consolidation (Kirkpatrick et al. 2017), as FedFMC's merges use it.

Training task B after task A with EWC minimises (FedFMC paper, Eq. 1)

    L(θ) = L_B(θ) + λ Σᵢ Fᵢ (θᵢ − θ*_A,ᵢ)²

where θ*_A are the weights learned for A and F the diagonal of the Fisher information
at θ*_A, estimated on the trainer's own samples:

- for a classifier, the Fisher itself (:func:`expected_fisher_diagonal`): the mean over
  samples of ``E_{y ~ p(y|x)} (∂ log p(y|x) / ∂θᵢ)²``, the label drawn from the model's
  own prediction as Kirkpatrick et al. do. The *empirical* Fisher, with the samples'
  true labels, is no substitute here: a FedFMC trainer of the group being merged
  computes F at a model that never saw its classes, which is confidently wrong on them,
  so their squared gradients are huge (thousands) and ``λF`` makes SGD diverge (seen:
  NaN weights in the first merge round). The Fisher is bounded there, since
  ``E_y (onehot(y) − p)ₖ² = pₖ(1 − pₖ) ≤ 1/4`` on the logits;
- for an autoencoder (no labels), the empirical Fisher of its MSE
  (:func:`fisher_diagonal`; a Gaussian likelihood up to a constant factor).

The paper writes Eq. 1 without the factor ½ of Kirkpatrick et al.; so does this module.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import torch
from torch import nn
from torch.func import functional_call, grad, vmap

Loss = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
"""``(model output, target) → mean loss``, e.g. ``torch.nn.functional.cross_entropy``."""


def ewc_lambda(groups: int) -> float:
    """FedFMC's EWC weight: λ = 1 / number of groups (paper §4.1).

    Raises
    ------
    ValueError
        If ``groups`` is not a positive integer.
    """
    if isinstance(groups, bool) or not isinstance(groups, int) or groups < 1:
        raise ValueError(f"the number of groups must be a positive integer, got {groups!r}")
    return 1.0 / groups


def fisher_diagonal(
    model: nn.Module,
    inputs: torch.Tensor,
    targets: torch.Tensor,
    loss: Loss,
    *,
    batch_size: int = 256,
) -> dict[str, torch.Tensor]:
    """The diagonal of the empirical Fisher information of ``model`` on some samples
    (the samples' own targets; for a classifier see :func:`expected_fisher_diagonal`).

    ``Fᵢ = (1/N) Σₛ (∂ℓₛ/∂θᵢ)²`` with ``ℓₛ`` the loss of sample s alone, per-sample
    gradients being computed together (``torch.func.vmap``) a batch at a time.

    Parameters
    ----------
    model : torch.nn.Module
        The model at the weights θ* to protect; left unchanged, evaluated in eval mode.
    inputs, targets : torch.Tensor
        N samples and their targets (labels; the inputs themselves for an autoencoder).
    loss : callable
        ``(output, target) → mean loss`` over a batch (a batch of one here).
    batch_size : int, default 256
        Samples whose gradients are computed at once (memory bound only).

    Returns
    -------
    dict[str, torch.Tensor]
        Parameter name → its Fisher diagonal, same shape and dtype as the parameter.

    Raises
    ------
    ValueError
        If there is no sample or the batch size is below one.
    """
    n = _checked_sample_count(inputs, batch_size)
    params = {name: p.detach() for name, p in model.named_parameters()}
    per_sample = _per_sample_gradients(model, loss)
    totals = {name: torch.zeros_like(p) for name, p in params.items()}
    was_training = model.training
    model.eval()
    try:
        for start in range(0, n, batch_size):
            grads = per_sample(
                params, inputs[start : start + batch_size], targets[start : start + batch_size]
            )
            for name, g in grads.items():
                totals[name] += (g.detach() ** 2).sum(dim=0)
    finally:
        model.train(was_training)
    return {name: total / n for name, total in totals.items()}


def expected_fisher_diagonal(
    model: nn.Module, inputs: torch.Tensor, *, batch_size: int = 256
) -> dict[str, torch.Tensor]:
    """The diagonal of a classifier's Fisher information on some inputs.

    ``Fᵢ = (1/N) Σₛ Σ_c p(c | xₛ) (∂ log p(c | xₛ) / ∂θᵢ)²``: the expectation over the
    model's own predictive distribution (softmax of its outputs), computed exactly, one
    per-sample gradient pass per class.

    Parameters
    ----------
    model : torch.nn.Module
        A classifier (outputs are logits) at the weights θ* to protect; left unchanged.
    inputs : torch.Tensor
        N samples.
    batch_size : int, default 256
        Samples whose gradients are computed at once (memory bound only).

    Returns
    -------
    dict[str, torch.Tensor]
        Parameter name → its Fisher diagonal, same shape and dtype as the parameter.

    Raises
    ------
    ValueError
        If there is no sample or the batch size is below one.
    """
    n = _checked_sample_count(inputs, batch_size)
    params = {name: p.detach() for name, p in model.named_parameters()}
    totals = {name: torch.zeros_like(p) for name, p in params.items()}
    per_sample = _per_sample_gradients(model, nn.functional.cross_entropy)
    was_training = model.training
    model.eval()
    try:
        for start in range(0, n, batch_size):
            batch = inputs[start : start + batch_size]
            with torch.no_grad():
                probabilities = torch.softmax(model(batch), dim=1)
            for c in range(probabilities.shape[1]):
                labels = torch.full((batch.shape[0],), c, dtype=torch.int64)
                grads = per_sample(params, batch, labels)
                weight = probabilities[:, c]
                for name, g in grads.items():
                    shaped = weight.reshape(-1, *([1] * (g.dim() - 1)))
                    totals[name] += (shaped * g.detach() ** 2).sum(dim=0)
    finally:
        model.train(was_training)
    return {name: total / n for name, total in totals.items()}


def _checked_sample_count(inputs: torch.Tensor, batch_size: int) -> int:
    """N, the number of samples the Fisher diagonal averages over (both estimators)."""
    n = int(inputs.shape[0])
    if n == 0:
        raise ValueError("the Fisher information needs at least one sample; the split is empty")
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    return n


def _per_sample_gradients(model: nn.Module, loss: Loss) -> Callable[..., dict[str, torch.Tensor]]:
    """``(params, inputs, targets) → {name: per-sample gradients}`` of ``loss``."""
    buffers = {name: b.detach() for name, b in model.named_buffers()}

    def sample_loss(
        weights: dict[str, torch.Tensor], x: torch.Tensor, target: torch.Tensor
    ) -> torch.Tensor:
        output = functional_call(model, (weights, buffers), (x.unsqueeze(0),))
        return loss(output, target.unsqueeze(0))

    return vmap(grad(sample_loss), in_dims=(None, 0, 0))  # type: ignore[no-any-return]


def ewc_penalty(
    model: nn.Module,
    anchor: Mapping[str, torch.Tensor],
    fisher: Mapping[str, torch.Tensor],
    lam: float,
) -> torch.Tensor:
    """``λ Σᵢ Fᵢ (θᵢ − θ*ᵢ)²`` over the parameters ``fisher`` names (paper Eq. 1).

    Parameters
    ----------
    model : torch.nn.Module
        The model being trained (θ); the result is differentiable in its parameters.
    anchor : Mapping[str, torch.Tensor]
        θ*, the weights to stay near (a state dict holding every parameter of ``fisher``).
    fisher : Mapping[str, torch.Tensor]
        F, from :func:`fisher_diagonal` at θ*.
    lam : float
        λ, the penalty's weight (FedFMC: :func:`ewc_lambda`).

    Raises
    ------
    KeyError
        If ``fisher`` names a parameter the model or the anchor lacks.
    """
    params = dict(model.named_parameters())
    total = torch.zeros((), dtype=torch.float32)
    for name, weight in fisher.items():
        if name not in params or name not in anchor:
            raise KeyError(
                f"EWC: parameter {name!r} of the Fisher information is missing from the "
                f"{'model' if name not in params else 'anchor weights'}"
            )
        difference = params[name] - anchor[name].to(params[name].dtype)
        total = total + (weight * difference**2).sum()
    return lam * total
