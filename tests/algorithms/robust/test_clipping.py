"""Norm clipping before FedAvg: bound, factors and the clipped mean by hand."""

from __future__ import annotations

import math

import pytest
import torch

from mcfl_chain.algorithms.robust import NormClipping, rule_from_chain
from mcfl_chain.algorithms.robust.clipping import clip_factors, delta_norms, norm_clipped_fedavg

PARENT = {"w": torch.tensor([1.0, 1.0]), "steps": torch.tensor(3)}
# Deltas from the parent: (3, 4) norm 5, (0, 1) norm 1, (30, 40) norm 50 (a boosted update).
UPDATES = [
    (7, 1, {"w": torch.tensor([4.0, 5.0]), "steps": torch.tensor(5)}),
    (2, 1, {"w": torch.tensor([1.0, 2.0]), "steps": torch.tensor(4)}),
    (9, 2, {"w": torch.tensor([31.0, 41.0]), "steps": torch.tensor(4)}),
]


def test_norms_and_median_bound_factors() -> None:
    # Execute
    norms = delta_norms(UPDATES, PARENT)
    factors = clip_factors(norms)

    # Assert: median norm τ = 5; only the boosted update is scaled, by 5 / 50.
    assert norms == {7: 5.0, 2: 1.0, 9: 50.0}
    assert factors == {7: 1.0, 2: 1.0, 9: 0.1}


def test_clipped_fedavg_with_the_median_bound_by_hand() -> None:
    # Clipped deltas (3, 4), (0, 1), (3, 4) with samples 1, 1, 2:
    # Σ nᵢΔᵢ = (3 + 0 + 6, 4 + 1 + 8) = (9, 13); / 4 = (2.25, 3.25); + parent = (3.25, 4.25).
    # Unclipped FedAvg would give (1·4 + 1·1 + 2·31) / 4 = 16.75 on the first coordinate.
    result = norm_clipped_fedavg(UPDATES, PARENT)
    assert torch.equal(result["w"], torch.tensor([3.25, 4.25]))
    assert result["steps"].item() == 5 and result["steps"].dtype == torch.int64


def test_a_fixed_bound_caps_every_delta() -> None:
    # Factors 1/5, 1, 1/50: clipped deltas (0.6, 0.8), (0, 1), (0.6, 0.8), each of norm <= 1;
    # Σ nᵢΔᵢ = (1.8, 3.4); / 4 = (0.45, 0.85); + parent = (1.45, 1.85).
    result = norm_clipped_fedavg(UPDATES, PARENT, bound=1.0)["w"]
    assert torch.allclose(result, torch.tensor([1.45, 1.85]), rtol=0, atol=1e-6)
    single = norm_clipped_fedavg([UPDATES[2]], PARENT, bound=1.0)["w"]
    assert math.isclose(float(torch.linalg.norm(single - PARENT["w"])), 1.0, rel_tol=1e-6)


def test_updates_within_the_bound_are_plain_fedavg() -> None:
    # Bound 100 clips nothing: (1·4 + 1·1 + 2·31) / 4 = 16.75, (5 + 2 + 82) / 4 = 22.25.
    result = norm_clipped_fedavg(UPDATES, PARENT, bound=100.0)["w"]
    assert torch.equal(result, torch.tensor([16.75, 22.25]))


def test_parameter_word_round_trips_the_bound() -> None:
    # Prepare
    median_rule, fixed = NormClipping(), NormClipping(bound=2.5)

    # Execute
    rebuilt = rule_from_chain(3, fixed.parameter)

    # Assert: 2.5 = 0x4004000000000000 as a float64.
    assert median_rule.parameter == 0 and fixed.parameter == 0x4004000000000000
    assert isinstance(rebuilt, NormClipping) and rebuilt.bound == 2.5
    median_again = rule_from_chain(3, 0)
    assert isinstance(median_again, NormClipping) and median_again.bound is None


def test_errors_are_clear() -> None:
    with pytest.raises(ValueError, match="finite number > 0"):
        NormClipping(bound=0.0)
    with pytest.raises(ValueError, match="pass the parent"):
        NormClipping().aggregate(UPDATES)
    wrong = {"w": torch.zeros(3), "steps": torch.tensor(0)}
    with pytest.raises(ValueError, match="parent's is"):
        norm_clipped_fedavg(UPDATES, wrong)
