"""End to end: each strategy's rules, read back from what the chain recorded.

Small networks of worker processes on scikit-learn's digits over a real Anvil chain;
each test checks the DAG shape its strategy must produce.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from rich.console import Console

from mcfl_chain.algorithms.facade import head_choice
from mcfl_chain.algorithms.fedavg import fedavg
from mcfl_chain.algorithms.ifca import cluster_heads
from mcfl_chain.chain.devnet import stop_devnet
from mcfl_chain.dag.graph import ROOT_ID, ModelDAG
from mcfl_chain.dag.weights import WeightsBook
from mcfl_chain.simulation.campaign import PlannedRun, make_run, method_config, oracle_parts, slug
from mcfl_chain.simulation.runner import SimulationConfig, run_simulation
from mcfl_chain.storage import open_storage

pytestmark = pytest.mark.slow


def _run(
    tmp_path: Path, keep_running: bool = False, **overrides
) -> tuple[dict, ModelDAG, list[dict]]:
    config = SimulationConfig(
        name="test",
        dataset="digits",
        scenario="groups",
        scenario_params={"n_groups": 2},
        n_trainers=4,
        rounds=3,
        samples=440,
        epochs=5,
        round_timeout=240,
    )
    config = replace(config, **{"tolerance": 2.0, **overrides})
    summary = run_simulation(config, tmp_path, Console(quiet=True), keep_running=keep_running)
    dag = ModelDAG.from_json(json.loads((tmp_path / "dag.json").read_text()))
    lines = [json.loads(raw) for raw in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    return summary, dag, lines


def _round0_branches(dag: ModelDAG) -> list:
    return [m for m in dag.models_of_round(0) if m.parents == (ROOT_ID,)]


@pytest.mark.parametrize("strategy", ["mcfl", "mcfl-plus"])
def test_mcfl_as_its_authors_ran_it(tmp_path, strategy):
    # Execute: MCFL, and MCFL-plus, which must keep its DAG's shape on clean groups
    summary, dag, lines = _run(tmp_path, strategy=strategy)
    # Assert: round 0 is a branch per trainer, each its own update alone
    branches = _round0_branches(dag)
    assert len(branches) == 4
    assert sorted(len(m.update_ids) for m in branches) == [1, 1, 1, 1]
    assert sorted(m.aggregator_ids[0] for m in branches) == [1, 2, 3, 4]
    for m in branches:
        (uid,) = m.update_ids
        assert dag.updates[uid].trainer_id == m.aggregator_ids[0]
    # every trainer aggregates once a round, on one of the models it trained (the
    # best-ranked): popularity counts trainers, one per trainer and round
    for round_ in range(3):
        models = dag.models_of_round(round_)
        assert sum(m.popularity for m in models) == 4
        aggregators = Counter(t for m in models for t in m.aggregator_ids)
        assert set(aggregators.values()) == {1}
    for line in lines:
        assert len(line["aggregations"]) == 1
        assert line["aggregations"][0]["parent"] in line["trained"]
        # the reported figure is the deployed model's, on the held-out test split
        assert line["model"] == line["aggregations"][0]["model"]
        assert line["aggregations"][0]["selection_metric"] is not None
    # the two class groups end on their own models, and learned; MCFL merges each group
    # into one model in 3 rounds, MCFL-plus (whose guards merge more slowly) never
    # puts the two groups on one model
    final = {line["trainer_index"]: line["model"] for line in lines if line["round"] == 2}
    assert {final[0], final[2]}.isdisjoint({final[1], final[3]})
    if strategy == "mcfl":
        assert final[0] == final[2] and final[1] == final[3]
    assert summary["rounds"][-1]["metric_min"] > 0.8
    # MCFL-plus aggregates inside its group with the trimmed mean (code 2, β = 0.2 in
    # basis points), which every model id commits to
    rules = {(m.rule, m.rule_parameter) for m in dag.models.values() if m.round is not None}
    assert rules == ({(2, 2000)} if strategy == "mcfl-plus" else {(0, 0)})


def test_mcfl_earlier_readings_as_options(tmp_path):
    # Execute: the shared start, aggregation on every trained model, ceil(sqrt n); at
    # tolerance 0 Algorithm 2 keeps only the peers at or below the median divergence,
    # so round 0 forks and later rounds have several candidates
    _, dag, lines = _run(
        tmp_path, start="shared", aggregate_on="all", selection="ceil", tolerance=0.0
    )
    # Assert: round 0 ran Algorithm 2 on everybody's updates of the root
    assert any(len(m.update_ids) > 1 for m in dag.models_of_round(0))
    # a trainer aggregates on every model it trained
    for line in lines:
        assert sorted(a["parent"] for a in line["aggregations"]) == sorted(line["trained"])
    assert any(len(line["trained"]) > 1 for line in lines)


def test_local_training_alone_keeps_one_lineage_per_trainer(tmp_path):
    # Execute
    _, dag, _ = _run(tmp_path, strategy="local")
    # Assert: four models a round, each the trainer's own update on its own last model
    for round_ in range(3):
        models = dag.models_of_round(round_)
        assert len(models) == 4
        for m in models:
            (uid,) = m.update_ids
            (trainer,) = m.aggregator_ids
            assert dag.updates[uid].trainer_id == trainer
            if round_ > 0:
                assert dag.models[m.parent].aggregator_ids == [trainer]


def test_ifca_trains_k_models_each_averaging_every_update_on_it(tmp_path):
    # Execute: one data group (every trainer all classes): both starting models find
    # members in round 0, then everybody moves to one, and the other goes dormant
    _, dag, lines = _run(tmp_path, strategy="ifca", clusters=2, scenario_params={"n_groups": 1})
    # Assert: at most k models a round; after round 0 every model is the FedAvg of
    # every update proposed on its parent, and submitted by each of their proposers
    for round_ in range(3):
        models = dag.models_of_round(round_)
        assert 1 <= len(models) <= 2
        for m in models:
            on_parent = {u.update_id for u in dag.updates_for(m.parent, round_)}
            proposers = sorted(dag.updates[u].trainer_id for u in m.update_ids)
            assert sorted(m.aggregator_ids) == proposers
            if round_ > 0:
                assert set(m.update_ids) == on_parent
    assert all(len(line["trained"]) == 1 for line in lines)
    # clusters persist: each round every trainer is offered the newest model of every
    # cluster on chain, the previous round's or one nobody chose since (round 2 here)
    assert len(dag.models_of_round(0)) == 2 and len(dag.models_of_round(1)) == 1
    appended: list = []
    for round_ in range(3):
        heads = cluster_heads(appended)
        offered = [
            int(found.group(1))
            for log in sorted(tmp_path.glob("trainers/*/worker.log"))
            for found in re.finditer(rf"round {round_}: (\d+) candidates", log.read_text())
        ]
        assert offered == [max(1, len(heads))] * 4
        trained = {line["trained"][0] for line in lines if line["round"] == round_}
        assert round_ == 0 or trained <= {"0x" + head.hex() for head in heads}
        appended += [(m.model_id, m.parent) for m in dag.models_of_round(round_)]


def test_facade_averages_the_core_over_all_updates_and_each_head_over_its_choosers(tmp_path):
    # Execute: three upright trainers and one rotated, FACADE with two heads
    try:
        _, dag, lines = _run(
            tmp_path,
            keep_running=True,
            strategy="facade",
            clusters=2,
            scenario="rotations",
            scenario_params={"group_sizes": [3, 1]},
        )
        # a second process rebuilds every model with published weights from its update
        # ids and the blobs alone (the rule from the task on chain) and compares bytes
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
    # Assert: the network trains the two-head LeNet; one model a round, the aggregate of
    # every update on its parent, as for FedAvg
    deployment = json.loads((tmp_path / "deployment.json").read_text())
    assert deployment["task"].startswith("lenet5-heads2:digits")
    storage = open_storage(f"local:{tmp_path / 'blobs'}")
    book = WeightsBook(storage.get, "lenet5-heads2", dag)
    for round_ in range(3):
        (model,) = dag.models_of_round(round_)
        assert set(model.update_ids) == {u.update_id for u in dag.updates_for(model.parent, round_)}
        assert sorted(model.aggregator_ids) == [1, 2, 3, 4]
        # the core is the FedAvg of every update, each chosen head that of its choosers
        updates, _ = book.usable_updates(list(model.update_ids))
        weighted = [(uid, dag.updates[uid].num_samples, w) for uid, w in updates.items()]
        weights = book.model(model.model_id)
        core = fedavg(weighted)
        assert torch.equal(weights["features.0.weight"], core["features.0.weight"])
        for head in {head_choice(w) for w in updates.values()}:
            choosers = [(uid, n, w) for uid, n, w in weighted if head_choice(w) == head]
            name = f"heads.{head}.weight"
            assert torch.equal(weights[name], fedavg(choosers)[name])
    # the second process found the three models bit-identical to what their first
    # aggregators published, and the ids and views as the chain has them
    assert checked.returncode == 0, checked.stderr
    assert json.loads(checked.stdout)["check"] == []
    assert "rebuilt 3 models with published weights from their updates: bit-identical" in (
        " ".join(checked.stderr.split())
    )
    # each cluster's trainers report, with their own head, on their own rotation
    groups = {line["group"] for line in lines}
    assert groups == {"rotation 0°", "rotation 180°"}
    assert all(line["accuracy"] is not None for line in lines)
    assert all(line["personal"]["head"] in (0, 1) for line in lines)


def test_the_oracle_runs_fedavg_inside_each_true_group(tmp_path):
    # Prepare: the oracle run of the 4-trainer, 2-group scenario
    config = SimulationConfig(
        name="groups",
        dataset="digits",
        scenario="groups",
        scenario_params={"n_groups": 2},
        n_trainers=4,
        rounds=2,
        samples=440,
        epochs=5,
        round_timeout=240,
    )
    run = PlannedRun(
        name="groups-oracle-s0",
        scenario="groups",
        method="oracle",
        seed=0,
        config=method_config(config, "oracle"),
        parts=oracle_parts(config)[0],
    )
    assert [indices for _, indices in run.parts] == [(0, 2), (1, 3)]
    # Execute
    summary = make_run(run, tmp_path, Console(quiet=True))
    # Assert: one network per group; each model is FedAvg of its group's updates only
    for label, indices in run.parts:
        part = tmp_path / "parts" / slug(label)
        dag = ModelDAG.from_json(json.loads((part / "dag.json").read_text()))
        for round_ in range(2):
            (model,) = dag.models_of_round(round_)
            assert len(model.update_ids) == len(indices)
    # the merged run reads as one run of the four trainers
    assert [(r["round"], r["trainers"], r["models"]) for r in summary["rounds"]] == [
        (0, 4, 2),
        (1, 4, 2),
    ]
    lines = [json.loads(raw) for raw in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert sorted(line["trainer_index"] for line in lines if line["round"] == 1) == [0, 1, 2, 3]
    assert all(line["strategy"] == "fedavg" for line in lines)
