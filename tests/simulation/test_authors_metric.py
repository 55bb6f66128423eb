"""The authors' metric (best candidate, redrawn test data) on hand-made run directories."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from mcfl_chain.learning.codec import encode_weights
from mcfl_chain.learning.models import create_model
from mcfl_chain.learning.scenario import build_trainer_data, scenario_specs
from mcfl_chain.simulation.authors_metric import (
    authors_figure,
    best_candidate,
    gaps,
    redraw,
    run_figures,
)
from mcfl_chain.storage import open_storage

CONFIG = {"scenario": "iid", "n_trainers": 2, "dataset": "digits", "samples": 120,
          "scenario_params": {}, "arch": "lenet5"}  # fmt: skip


def _constant(cls: int) -> dict:
    """LeNet-5 weights that answer class ``cls`` whatever the image."""
    state = create_model("lenet5", seed=0).state_dict()
    state["classifier.5.weight"] = torch.zeros_like(state["classifier.5.weight"])
    state["classifier.5.bias"] = torch.zeros_like(state["classifier.5.bias"])
    state["classifier.5.bias"][cls] = 10.0
    return state


def _run(path, strategy: str, seed: int, classes: list[int], ours: float = 0.5):
    """A finished two-trainer digits run whose round 1 appended one model per class in
    ``classes`` (each answering that class), every trainer reporting ``ours``."""
    path.mkdir(parents=True)
    store = open_storage(f"local:{path / 'blobs'}")
    models = [{"id": "root", "round": None, "weights_cid": "x"}]
    for cls in classes:
        cid = store.put(encode_weights("lenet5", _constant(cls)))
        models.append({"id": f"m{cls}", "round": 1, "weights_cid": cid})
    (path / "dag.json").write_text(json.dumps({"models": models, "updates": []}))
    (path / "config.json").write_text(json.dumps(CONFIG | {"seed": seed, "strategy": strategy}))
    lines = [{"round": 1, "trainer_index": i, "accuracy": ours, "adversary": None} for i in (0, 1)]
    (path / "metrics.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def _share(seed: int, index: int, cls: int) -> float:
    """The share of class ``cls`` in trainer ``index``'s test split."""
    spec = scenario_specs("iid", 2, seed, dataset="digits", samples_per_trainer=120)[index]
    return float((build_trainer_data(spec).test_y == cls).float().mean())


def test_best_candidate_is_the_highest_accuracy_or_the_lowest_mse():
    assert best_candidate([0.2, 0.9, 0.5], "classifier") == 0.9
    assert best_candidate([0.02, 0.01, 0.05], "autoencoder") == 0.01
    with pytest.raises(ValueError, match="no candidate"):
        best_candidate([], "classifier")


def test_redraw_is_with_replacement_and_fixed_by_its_seed():
    first = redraw(200, (0, 1, 2, 3))
    assert np.array_equal(first, redraw(200, (0, 1, 2, 3)))
    assert not np.array_equal(first, redraw(200, (0, 1, 2, 4)))
    assert len(first) == 200 and first.min() >= 0 and first.max() < 200
    assert len(set(first.tolist())) < 200  # some samples drawn twice
    with pytest.raises(ValueError, match="empty"):
        redraw(0, (0,))


def test_the_best_of_redrawn_equal_candidates_is_biased_upwards_and_one_is_not():
    # Prepare: a model right on half of 200 test samples, and a copy of it.
    half = np.tile([1.0, 0.0], 100)

    # Execute
    alone = authors_figure([half], "classifier", (0, 0, 1), draws=400)
    two = authors_figure([half, half.copy()], "classifier", (0, 0, 1), draws=400)

    # Assert: one model's redrawn figure is unbiased (0.5 within 4 standard errors of the
    # mean of 400 draws, 0.035 / 20); the best of two equal models gains about
    # 0.56 standard deviations of one draw (0.035 × 0.56 ≈ 2 points).
    assert alone == pytest.approx(0.5, abs=0.007)
    assert 0.012 < two - 0.5 < 0.03
    with pytest.raises(ValueError, match="at least 1"):
        authors_figure([half], "classifier", (0,), draws=0)


def test_the_best_of_the_candidates_on_the_fixed_split_is_the_best_class_share(tmp_path):
    # Prepare: round 1 appended two models, one answering class 0, one class 1.
    run = _run(tmp_path / "mcfl", "mcfl", 0, [0, 1])

    # Execute
    figures = run_figures(run)

    # Assert: each trainer's best on its own split is the larger of the two class shares;
    # the redrawn figure is one of the candidates' scores on a draw, repeatable.
    for index in (0, 1):
        got = figures.rounds[1][index]
        assert got.ours == 0.5 and got.candidates == 2
        assert got.fixed == pytest.approx(max(_share(0, index, 0), _share(0, index, 1)))
        assert 0.0 <= got.redrawn <= 1.0
    assert run_figures(run).rounds == figures.rounds


def test_gaps_pair_mcfl_with_the_baseline_of_the_same_scenario_and_seed(tmp_path):
    # Prepare: MCFL (two candidates) and FedAvg (one, class 0) on seed 0; an unpaired
    # MCFL run on seed 1.
    mcfl = run_figures(_run(tmp_path / "a", "mcfl", 0, [0, 1], ours=0.6))
    fedavg = run_figures(_run(tmp_path / "b", "fedavg", 0, [0], ours=0.5))
    lone = run_figures(_run(tmp_path / "c", "mcfl", 1, [0], ours=0.5))

    # Execute
    [gap] = gaps([mcfl, fedavg, lone])

    # Assert: one pair (seed 0), MCFL − FedAvg in points under each metric; under ours
    # the reported 0.6 − 0.5.
    assert (gap.scenario, gap.baseline, gap.round, gap.seeds) == ("iid", "fedavg", 1, [0])
    assert gap.ours == [pytest.approx(10.0)]
    expected = 100 * (mcfl.mean(1, "fixed") - fedavg.mean(1, "fixed"))
    assert gap.fixed == [pytest.approx(expected)] and expected >= 0


def test_a_run_without_its_blobs_is_refused_with_what_to_do(tmp_path):
    run = _run(tmp_path / "r", "mcfl", 0, [0])
    for blob in sorted((run / "blobs").rglob("*"), reverse=True):
        blob.unlink() if blob.is_file() else blob.rmdir()
    (run / "blobs").rmdir()
    with pytest.raises(FileNotFoundError, match="rerun it"):
        run_figures(run)
