"""A classifier's output bias fitted to one trainer's label mix (MCFL-plus's
``plus_calibrate``).

A model trained on pooled data predicts with the pool's label mix; a trainer whose own
labels are skewed scores it low, though its features serve that trainer well. Shifting
the output layer's bias by the per-class vector ``b`` that minimises the trainer's
cross-entropy over its own samples, with the model's logits held fixed, corrects for the
mix alone: ``b`` estimates ``log pₜ(y) − log pₛ(y)`` (the label-shift correction of
Saerens et al., Neural Computation 2002, here fitted by maximum likelihood on labelled
samples instead of by EM on unlabelled ones). On a model the trainer trained alone, the
mix is already its own and ``b`` stays near 0.

The problem is convex in ``b`` (a multinomial logistic regression on fixed offsets), so
L-BFGS finds its optimum in a few steps, and the same inputs give the same bits.
"""

from __future__ import annotations

import torch

BIAS_L2 = 1e-3
"""Weight of ``½‖b‖²`` in the fit: it keeps the shift finite for a class the trainer has
no sample of (unpenalised, its bias would go to −∞); against a loss of order 1, it
moves a class with samples by well under 1 % of its shift."""
CALIBRATION_SAMPLES = 512
"""At most this many of the trainer's training samples (the first of its shuffled
split) are fitted on: 10 parameters need far fewer, and each scored model costs one
forward pass over them."""
BIAS_STEPS = 50
"""L-BFGS iterations: the fit of 10 classes converges in about 10."""


def fit_class_bias(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """The per-class bias ``b`` that minimises ``CE(logits + b, labels) + BIAS_L2·½‖b‖²``.

    Parameters
    ----------
    logits
        N×C outputs of one model on the trainer's samples (held fixed).
    labels
        N class indices in ``[0, C)``.

    Raises
    ------
    ValueError
        Shapes that do not match, or no samples.
    """
    if logits.ndim != 2 or labels.shape != (logits.shape[0],):
        raise ValueError(
            f"logits must be N x C and labels N, got {tuple(logits.shape)} and "
            f"{tuple(labels.shape)}"
        )
    if logits.shape[0] == 0:
        raise ValueError("fitting a class bias needs at least one sample")
    z = logits.detach().double()
    y = labels.long()
    b = torch.zeros(z.shape[1], dtype=torch.float64, requires_grad=True)
    opt = torch.optim.LBFGS([b], max_iter=BIAS_STEPS, line_search_fn="strong_wolfe")

    def closure() -> torch.Tensor:
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(z + b, y) + BIAS_L2 * 0.5 * (b * b).sum()
        loss.backward()
        return loss

    with torch.enable_grad():
        opt.step(closure)
    shift = b.detach()
    return (shift - shift.mean()).to(logits.dtype)  # softmax ignores a common offset
