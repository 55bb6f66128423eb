"""End to end: a network with an adversary, read back from what the chain recorded.

Four worker processes on scikit-learn's digits over a real Anvil chain; one of them,
drawn by ``SimulationConfig.adversaries``, publishes sign-flipped updates amplified ten
times. The three honest trainers run FedAvg with Multi-Krum as their defence.

Multi-Krum's parameters: with n = 4 updates on a parent, Krum's guarantee (n > 2f + 2)
allows only f = 0, and the default f = 1 would keep each trainer's own update alone (no
collaboration left to check). With f = 0 an update's score is the sum of its squared
distances to its two nearest others; m = 3 keeps the three lowest, which drops the one
update far from all the others.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rich.console import Console

from mcfl_chain.dag.graph import ModelDAG
from mcfl_chain.simulation.runner import SimulationConfig, run_simulation

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
