"""End to end: a network with an adversary, read back from what the chain recorded.

Four worker processes on scikit-learn's digits over a real Anvil chain; one of them,
drawn by ``SimulationConfig.adversaries``, publishes sign-flipped updates amplified ten
times. The three honest trainers run FedAvg with Multi-Krum as their defence (a
selection rule), or with the coordinate-wise median (an aggregation rule). Last, an
adaptive attacker against MCFL: it reads the round's honest updates from the chain and
places its own inside their Algorithm 2 tolerance.

Multi-Krum's parameters: with n = 4 updates on a parent, Krum's guarantee (n > 2f + 2)
allows only f = 0, and the default f = 1 would keep each trainer's own update alone (no
collaboration left to check). With f = 0 an update's score is the sum of its squared
distances to its two nearest others; m = 3 keeps the three lowest, which drops the one
update far from all the others.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from rich.console import Console

from mcfl_chain.adversaries.filter_aware import as_published, filter_aware_update
from mcfl_chain.algorithms.divergence import flatten_state, weight_divergence
from mcfl_chain.algorithms.robust import AggregationRule, parse_defence, rule_from_chain
from mcfl_chain.algorithms.update_selection import select_updates
from mcfl_chain.chain.devnet import stop_devnet
from mcfl_chain.dag.graph import ROOT_ID, ModelDAG
from mcfl_chain.dag.weights import WeightsBook
from mcfl_chain.learning.codec import encode_weights
from mcfl_chain.simulation.runner import SimulationConfig, run_simulation
from mcfl_chain.storage import open_storage

pytestmark = pytest.mark.slow

ROUNDS = 3


def test_honest_trainers_defence_excludes_a_sign_flippers_updates(tmp_path: Path):
    # Prepare
    config = SimulationConfig(
        name="adversary",
        dataset="digits",
        scenario="iid",
        n_trainers=4,
        rounds=ROUNDS,
        samples=440,
        epochs=5,
        strategy="fedavg",
        adversaries="sign-flip:0.25:scale=10",
        defence="multi-krum:f=0:m=3",
        round_timeout=240,
    )
    (adversary_index,) = config.adversary_assignment()

    # Execute
    summary = run_simulation(config, tmp_path, Console(quiet=True))
    dag = ModelDAG.from_json(json.loads((tmp_path / "dag.json").read_text()))
    lines = [json.loads(raw) for raw in (tmp_path / "metrics.jsonl").read_text().splitlines()]

    # Assert: the network completed its rounds, every trainer in every round.
    assert [(r["round"], r["trainers"]) for r in summary["rounds"]] == [
        (round_, 4) for round_ in range(ROUNDS)
    ]
    # metrics lines tell the adversary from the honest trainers
    labels = {(line["trainer_index"], line["adversary"], line["defence"]) for line in lines}
    assert labels == {
        (i, "sign-flip", None) if i == adversary_index else (i, None, "multi-krum:f=0:m=3")
        for i in range(4)
    }
    adversary = {line["trainer_id"] for line in lines if line["adversary"]}
    honest = {line["trainer_id"] for line in lines} - adversary
    assert len(adversary) == 1 and len(honest) == 3
    for round_ in range(ROUNDS):
        # the adversary proposed in every round (on the honest model after round 0) ...
        proposers = [u.trainer_id for u in dag.updates.values() if u.round == round_]
        assert sorted(proposers) == sorted([*honest, *adversary])
        # ... and no honest trainer's model holds its update, yet each holds the three
        # honest ones: the honest trainers agree on one model
        honest_models = [m for m in dag.models_of_round(round_) if honest & set(m.aggregator_ids)]
        assert len(honest_models) == 1
        (model,) = honest_models
        assert sorted(model.aggregator_ids) == sorted(honest)
        assert {dag.updates[uid].trainer_id for uid in model.update_ids} == honest
    # the honest trainers learned
    honest_accuracy = {
        round_: [
            line["accuracy"]
            for line in lines
            if line["round"] == round_ and line["adversary"] is None
        ]
        for round_ in (0, ROUNDS - 1)
    }
    assert sum(honest_accuracy[ROUNDS - 1]) > sum(honest_accuracy[0])
    assert min(honest_accuracy[ROUNDS - 1]) > 0.5


def test_honest_trainers_aggregate_with_the_median_and_anyone_rebuilds_it(tmp_path: Path):
    """The same network with the coordinate-wise median as the honest trainers' defence:
    an aggregation rule, so their models' ids commit to rule 1 and a second process
    rebuilds them from the ids and the blobs alone."""
    # Prepare
    config = SimulationConfig(
        name="median",
        dataset="digits",
        scenario="iid",
        n_trainers=4,
        rounds=ROUNDS,
        samples=440,
        epochs=5,
        strategy="fedavg",
        adversaries="sign-flip:0.25:scale=10",
        defence="median",
        round_timeout=240,
    )
    median = parse_defence("median")
    assert isinstance(median, AggregationRule)

    # Execute
    try:
        summary = run_simulation(config, tmp_path, Console(quiet=True), keep_running=True)
        checked = subprocess.run(
            [
                sys.executable,
                "-m",
                "mcfl_chain",
                "dag",
                "--deployment",
                str(tmp_path / "devnet" / "deployment.json"),
                "--check",
                "--check-weights",
                f"local:{tmp_path / 'blobs'}",
                "--no-cache",
                "--format",
                "json",
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        stop_devnet(tmp_path / "devnet")
    dag = ModelDAG.from_json(json.loads((tmp_path / "dag.json").read_text()))
    lines = [json.loads(raw) for raw in (tmp_path / "metrics.jsonl").read_text().splitlines()]

    # Assert: every round completed with every trainer
    assert [(r["round"], r["trainers"]) for r in summary["rounds"]] == [
        (round_, 4) for round_ in range(ROUNDS)
    ]
    adversary = {line["trainer_id"] for line in lines if line["adversary"]}
    honest = {line["trainer_id"] for line in lines} - adversary
    assert len(adversary) == 1 and len(honest) == 3
    # the honest trainers' models commit to the median (code 1), the adversary's to rule 0
    for round_ in range(ROUNDS):
        for model in dag.models_of_round(round_):
            expected = (median.code, 0) if honest & set(model.aggregator_ids) else (0, 0)
            assert (model.rule, model.rule_parameter) == expected
        assert any(m.rule == median.code for m in dag.models_of_round(round_))
    # a second process checked ids, rules and views against the chain, and rebuilt every
    # model with published weights, the median ones included, bit-identically
    assert checked.returncode == 0, checked.stderr
    assert json.loads(checked.stdout)["check"] == []
    published = [m for m in dag.models.values() if m.weights_cid and m.model_id != ROOT_ID]
    assert f"rebuilt {len(published)} models with published weights" in " ".join(
        checked.stderr.split()
    )
    # and here, from the chain's record alone: the rule from its code, the blobs by CID
    storage = open_storage(f"local:{tmp_path / 'blobs'}")
    book = WeightsBook(storage.get, "lenet5", dag)
    for model in published:
        if model.rule != median.code:
            continue
        rule = rule_from_chain(model.rule, model.rule_parameter)
        updates = [
            (uid, dag.updates[uid].num_samples, book.update(uid)) for uid in model.update_ids
        ]
        rebuilt = encode_weights("lenet5", rule.aggregate(updates))
        assert rebuilt == storage.get(model.weights_cid)


def test_a_filter_aware_attackers_update_passes_mcfls_filter_where_a_sign_flip_would_not(
    tmp_path: Path,
):
    """MCFL with tolerance 1 from a shared start: round 0's four updates all sit on the
    root and every trainer runs Algorithm 2 on them. One trainer is the filter-aware
    attacker: it proposes only once the three honest updates are on chain, reads them
    (events and blob store) and publishes the honest mean pushed against the mean step
    as far as each honest trainer's filter keeps it."""
    # Prepare
    config = SimulationConfig(
        name="filter-aware",
        dataset="digits",
        scenario="iid",
        n_trainers=4,
        rounds=2,
        samples=300,
        epochs=2,
        strategy="mcfl",
        tolerance=1.0,
        start="shared",
        adversaries="filter-aware:0.25",
        round_timeout=240,
    )

    # Execute
    summary = run_simulation(config, tmp_path, Console(quiet=True))
    dag = ModelDAG.from_json(json.loads((tmp_path / "dag.json").read_text()))
    lines = [json.loads(raw) for raw in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    book = WeightsBook(open_storage(f"local:{tmp_path / 'blobs'}").get, "lenet5", dag)

    # Assert: the attacker did not stall the network
    assert [(r["round"], r["trainers"]) for r in summary["rounds"]] == [(0, 4), (1, 4)]
    (attacker,) = {line["trainer_id"] for line in lines if line["adversary"] == "filter-aware"}
    honest = {line["trainer_id"] for line in lines} - {attacker}
    on_root = {u.trainer_id: u.update_id for u in dag.updates_for(ROOT_ID, 0)}
    assert set(on_root) == honest | {attacker}
    # it published what the attack computes from the three honest updates of the round
    # (so it read every one of them), pushed beyond the mean (γ > 0)
    weights = {tid: flatten_state(book.update(uid)) for tid, uid in on_root.items()}
    parent = flatten_state(book.model(ROOT_ID))
    others = np.stack([weights[tid] for tid in sorted(honest, key=on_root.__getitem__)])
    expected, gamma, targets = filter_aware_update(others, parent, 1.0)
    assert gamma > 0 and targets == set(range(3))
    assert np.allclose(weights[attacker], as_published(expected), rtol=0, atol=1e-6)
    # every honest trainer's model of round 0 holds its update
    for trainer in honest:
        (model,) = [m for m in dag.models_of_round(0) if trainer in m.aggregator_ids]
        assert on_root[attacker] in model.update_ids
    # where a plain sign flip of the honest mean step, in its place, is rejected by every
    # honest trainer's Algorithm 2 (run here on the chain's updates)
    mean_step = others.mean(axis=0) - parent
    flipped = {tid: w for tid, w in weights.items() if tid != attacker}
    flipped[attacker] = as_published(parent - mean_step)
    for trainer in honest:
        kept = select_updates(trainer, flipped, 1.0, weight_divergence)
        assert attacker not in kept
