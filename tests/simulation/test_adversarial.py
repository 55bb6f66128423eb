"""The adversaries benchmark's measures on hand-made run directories."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from mcfl_chain.learning.codec import encode_weights
from mcfl_chain.learning.models import create_model
from mcfl_chain.simulation.adversarial import (
    HonestFinal,
    SampleClaims,
    SybilRegistration,
    backdoor_success,
    cpu_capability,
    drop_points,
    honest_final,
    sample_claims,
    sybil_adoption,
    sybil_registration,
)
from mcfl_chain.storage import open_storage


def _write(run: Path, lines: list[dict], dag: dict | None = None, config: dict | None = None):
    run.mkdir(parents=True, exist_ok=True)
    (run / "metrics.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    if dag is not None:
        (run / "dag.json").write_text(json.dumps(dag))
    if config is not None:
        (run / "config.json").write_text(json.dumps(config))


def _line(round_: int, index: int, accuracy: float, adversary: str | None = None, **extra):
    return {"round": round_, "trainer": f"0x{index:040x}", "trainer_index": index,
            "trainer_id": index + 1, "accuracy": accuracy, "adversary": adversary,
            **extra}  # fmt: skip


def test_honest_final_keeps_the_last_round_and_leaves_adversaries_out(tmp_path):
    # Prepare: round 1 is the last; trainer 2 is a label flipper with a low accuracy.
    _write(
        tmp_path,
        [_line(0, 0, 0.1), _line(1, 0, 0.8), _line(1, 1, 0.6), _line(1, 2, 0.05, "label-flip")],
    )

    # Execute
    final = honest_final(tmp_path)

    # Assert
    assert final.round == 1 and final.accuracies == {0: 0.8, 1: 0.6} and final.stale == {}
    assert final.worst == 0.6 and final.average == pytest.approx(0.7)


def test_honest_final_counts_a_trainer_without_a_last_model_with_its_latest_one(tmp_path):
    # Prepare: round 2 is the last; honest trainer 1's aggregation failed from round 1
    # on (no accuracy), as when every update it receives is NaN.
    _write(
        tmp_path,
        [_line(0, 0, 0.5), _line(0, 1, 0.4), _line(1, 0, 0.7), _line(1, 1, None),
         _line(2, 0, 0.9), _line(2, 1, None), _line(2, 2, 0.1, "sign-flip")],
    )  # fmt: skip

    # Execute
    final = honest_final(tmp_path)

    # Assert: trainer 1 is not dropped; it counts with its round-0 model
    assert final.round == 2 and final.accuracies == {0: 0.9, 1: 0.4}
    assert final.stale == {1: 0} and final.worst == 0.4


def test_honest_final_without_honest_figures_says_so(tmp_path):
    _write(tmp_path, [_line(0, 0, 0.5, "sybil")])
    with pytest.raises(ValueError, match="no honest trainer"):
        honest_final(tmp_path)


def test_drop_points_are_clean_minus_attacked_in_points():
    clean = HonestFinal(3, {0: 0.90, 1: 0.80})
    attacked = HonestFinal(3, {0: 0.85, 1: 0.70})
    worst, average = drop_points(clean, attacked)
    assert worst == pytest.approx(10.0) and average == pytest.approx(7.5)


def test_drop_points_compare_the_same_trainers_in_both_runs():
    # Prepare: trainer 2 is the clean run's worst; it is the adversary when attacked.
    clean = HonestFinal(3, {0: 0.90, 1: 0.80, 2: 0.40})
    attacked = HonestFinal(3, {0: 0.85, 1: 0.70})

    # Execute
    worst, average = drop_points(clean, attacked)

    # Assert: measured on trainers 0 and 1 only (else the worst would "gain" 30 points)
    assert worst == pytest.approx(10.0) and average == pytest.approx(7.5)
    with pytest.raises(ValueError, match=r"no accuracy for honest trainer\(s\) \[5\]"):
        drop_points(clean, HonestFinal(3, {0: 0.5, 5: 0.5}))


def test_sybil_adoption_counts_honest_rounds_training_a_coalition_only_model(tmp_path):
    # Prepare: trainers 3 and 4 (ids) are Sybils. Model A holds only their updates,
    # model B mixes one of theirs with an honest one. From round 1 on, honest trainer 1
    # trains A in round 1 only; honest trainer 2 trains B both rounds.
    updates = [
        {"id": "11", "trainer_id": 3}, {"id": "12", "trainer_id": 4},
        {"id": "13", "trainer_id": 1}, {"id": "14", "trainer_id": 3},
    ]  # fmt: skip
    models = [{"id": "A", "updates": ["11", "12"]}, {"id": "B", "updates": ["13", "14"]}]
    lines = [
        _line(0, 0, 0.5, trained=["A"]),
        _line(1, 0, 0.5, trained=["A", "B"]),
        _line(2, 0, 0.5, trained=["B"]),
        _line(1, 1, 0.5, trained=["B"]),
        _line(2, 1, 0.5, trained=["B"]),
        _line(1, 2, 0.5, "sybil", trained=["A"]),
        _line(1, 3, 0.5, "sybil", trained=["A"]),
    ]
    _write(tmp_path, lines, {"models": models, "updates": updates})

    # Execute / Assert: 1 of the 4 honest (trainer, round ≥ 1) pairs trained A.
    assert sybil_adoption(tmp_path) == 0.25


def test_sybil_adoption_of_a_run_without_sybils_is_refused(tmp_path):
    _write(tmp_path, [_line(1, 0, 0.5)], {"models": [], "updates": []})
    with pytest.raises(ValueError, match="no Sybil"):
        sybil_adoption(tmp_path)


@pytest.mark.parametrize("favoured, expected", [(0, 1.0), (1, 0.0)])
def test_backdoor_success_of_models_that_always_answer_one_class(tmp_path, favoured, expected):
    # Prepare: two honest trainers of an IID digits network deploy a model whose last
    # layer answers class `favoured` whatever the image; the backdoor's target is 0.
    config = {"scenario": "iid", "n_trainers": 2, "seed": 0, "dataset": "digits",
              "samples": 120, "scenario_params": {}, "arch": "lenet5"}  # fmt: skip
    state = create_model("lenet5", seed=0).state_dict()
    state["classifier.5.weight"] = torch.zeros_like(state["classifier.5.weight"])
    bias = torch.zeros_like(state["classifier.5.bias"])
    bias[favoured] = 10.0
    state["classifier.5.bias"] = bias
    store = open_storage(f"local:{tmp_path / 'blobs'}")
    cid = store.put(encode_weights("lenet5", state))
    _write(
        tmp_path,
        [_line(1, 0, 0.1, model="M"), _line(1, 1, 0.1, model="M")],
        {"models": [{"id": "M", "updates": [], "weights_cid": cid}], "updates": []},
        config,
    )

    # Execute
    rates = backdoor_success(tmp_path, target=0)

    # Assert: every triggered non-target image goes to class 0, or none does.
    assert rates == {0: expected, 1: expected}


def test_sybil_registration_reads_the_summary_record(tmp_path):
    # Prepare: Sybils 3 and 4 under deposit, both registered at 0.5 ETH each.
    record = {"policy": "deposit", "deposit_wei": 5 * 10**17, "trainers": 5, "refused": [],
              "sybils": [3, 4], "sybils_registered": [3, 4], "deposit_locked_wei": 10**18,
              "deposits_held_wei": 25 * 10**17}  # fmt: skip
    _write(tmp_path, [_line(0, 3, 0.5, "sybil")])
    (tmp_path / "summary.json").write_text(json.dumps({"registration": record}))

    # Execute / Assert
    assert sybil_registration(tmp_path) == SybilRegistration("deposit", 2, 2, 10**18)


def test_sybil_registration_of_a_run_before_the_record_is_open_registration(tmp_path):
    # Prepare: no record; trainers 2 and 3 played Sybils.
    _write(tmp_path, [_line(0, 1, 0.5), _line(0, 2, 0.5, "sybil"), _line(0, 3, 0.5, "sybil")])
    (tmp_path / "summary.json").write_text(json.dumps({"seconds": 1}))

    # Execute / Assert
    assert sybil_registration(tmp_path) == SybilRegistration("open", 2, 2, 0)


def test_cpu_capability_is_read_from_the_summary_and_none_before_it_was_kept(tmp_path):
    assert cpu_capability(tmp_path) is None  # no summary at all
    (tmp_path / "summary.json").write_text(json.dumps({"seconds": 1}))
    assert cpu_capability(tmp_path) is None
    (tmp_path / "summary.json").write_text(json.dumps({"platform": {"cpu_capability": "AVX2"}}))
    assert cpu_capability(tmp_path) == "AVX2"


def test_sample_claims_tell_the_inflators_count_from_the_honest_ones(tmp_path):
    # Prepare: trainer 2 (id 3) declares the cap of 5,000, honest trainers 100 to 300;
    # the run's deployment file sets the cap.
    updates = [{"id": "1", "trainer_id": 1, "num_samples": 100},
               {"id": "2", "trainer_id": 2, "num_samples": 300},
               {"id": "3", "trainer_id": 3, "num_samples": 5000},
               {"id": "4", "trainer_id": 2, "num_samples": 200}]  # fmt: skip
    lines = [_line(0, 0, 0.5), _line(0, 1, 0.5), _line(0, 2, 0.5, "sample-inflation")]
    _write(tmp_path, lines, {"models": [], "updates": updates})
    (tmp_path / "deployment.json").write_text(json.dumps({"max_samples": 5000}))

    # Execute
    claims = sample_claims(tmp_path)

    # Assert
    assert claims == SampleClaims(cap=5000, adversary=5000, honest=200)
    assert claims.weight_ratio == 25


def test_sample_claims_without_an_adversarys_update_say_so(tmp_path):
    updates = [{"id": "1", "trainer_id": 1, "num_samples": 100}]
    _write(tmp_path, [_line(0, 0, 0.5)], {"models": [], "updates": updates})
    with pytest.raises(ValueError, match="no update of an adversary trainer"):
        sample_claims(tmp_path)
