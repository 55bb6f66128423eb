"""The output bias fitted to a trainer's label mix (MCFL-plus's ``plus_calibrate``)."""

from __future__ import annotations

import pytest
import torch

from mcfl_chain.algorithms.calibration import BIAS_L2, fit_class_bias


def _skewed(n: int = 2000) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Labels drawn from a skewed mix, and the logits of a model that knows each
    sample's class evidence but assumes uniform classes: log p(x|y) + noise."""
    gen = torch.Generator().manual_seed(0)
    prior = torch.tensor([0.6, 0.25, 0.1, 0.05])
    y = torch.multinomial(prior, n, replacement=True, generator=gen)
    evidence = torch.randn(n, 4, generator=gen)
    evidence[torch.arange(n), y] += 1.0  # weak features: the mix matters
    return evidence, y, prior


def test_fit_class_bias_recovers_the_label_shift_and_lowers_the_loss() -> None:
    # Prepare
    logits, labels, prior = _skewed()
    ce = torch.nn.functional.cross_entropy

    # Execute
    shift = fit_class_bias(logits, labels)

    # Assert: the shift is the log prior (up to a constant, which softmax ignores) within
    # sampling noise, centred, and it fits the labels better than no shift at all
    expected = prior.log() - prior.log().mean()
    assert torch.allclose(shift, expected, atol=0.25), (shift, expected)
    assert abs(float(shift.mean())) < 1e-6
    assert float(ce(logits + shift, labels)) < float(ce(logits, labels)) - 0.05
    assert shift.dtype == logits.dtype


def test_fit_class_bias_stays_finite_for_a_class_without_samples_and_checks_shapes() -> None:
    # Prepare: three classes, the third never seen
    logits = torch.zeros(30, 3)
    labels = torch.tensor([0, 1] * 15)

    # Execute
    shift = fit_class_bias(logits, labels)

    # Assert: pushed down, but finite (the L2 term), the two seen classes level
    assert torch.isfinite(shift).all()
    assert float(shift[2]) < float(shift[0]) - 2
    assert float(shift[0]) == pytest.approx(float(shift[1]), abs=1e-4)
    with pytest.raises(ValueError, match="N x C"):
        fit_class_bias(torch.zeros(4, 3), torch.zeros(5, dtype=torch.long))
    with pytest.raises(ValueError, match="at least one sample"):
        fit_class_bias(torch.zeros(0, 3), torch.zeros(0, dtype=torch.long))


def _objective(logits: torch.Tensor, labels: torch.Tensor, shift: torch.Tensor) -> float:
    z, b = logits.double(), shift.double()
    ce = torch.nn.functional.cross_entropy(z + b, labels)
    return float(ce + BIAS_L2 * 0.5 * torch.dot(b, b))


def test_newton_reaches_at_least_lbfgs_optimum_and_repeats_its_bits() -> None:
    # Prepare: the skewed mix above, and ten classes with two nearly absent (the flat
    # directions where L-BFGS stops early)
    gen = torch.Generator().manual_seed(1)
    prior = torch.tensor([0.3, 0.2, 0.15, 0.1, 0.1, 0.05, 0.05, 0.04, 0.005, 0.005])
    y = torch.multinomial(prior, 512, replacement=True, generator=gen)
    z = 3 * torch.randn(512, 10, generator=gen)
    z[torch.arange(512), y] += 2
    problems = [_skewed()[:2], (z, y)]

    for logits, labels in problems:
        # Execute
        lbfgs = fit_class_bias(logits, labels, "lbfgs")
        newton = fit_class_bias(logits, labels, "newton")
        again = fit_class_bias(logits.clone(), labels.clone(), "newton")

        # Assert: the same optimum to L-BFGS's tolerance, never a worse objective,
        # centred, in the logits' dtype, and the same bits again
        assert torch.allclose(newton, lbfgs, atol=5e-3), (newton, lbfgs)
        assert _objective(logits, labels, newton) <= _objective(logits, labels, lbfgs) + 1e-12
        assert abs(float(newton.mean())) < 1e-6 and newton.dtype == logits.dtype
        assert torch.equal(again, newton)
    with pytest.raises(ValueError, match="unknown class-bias solver"):
        fit_class_bias(z, y, "adam")
