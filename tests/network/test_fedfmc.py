"""End to end: FedFMC forks, then merges the groups into a model with two parents.

Four worker processes on scikit-learn's digits over a real Anvil chain, with the
schedule shrunk to five rounds: one shared round, a fork round (round 1), a round in
groups, the merge (round 3) and a consolidation round (round 4).
"""

from __future__ import annotations

import json
from collections import Counter

import pytest
from click.testing import CliRunner
from rich.console import Console

from mcfl_chain.chain.devnet import stop_devnet
from mcfl_chain.cli import main
from mcfl_chain.dag.graph import ROOT_ID, ModelDAG
from mcfl_chain.simulation.runner import SimulationConfig, run_simulation

pytestmark = pytest.mark.slow


def test_fedfmc_forks_then_merges_the_groups_into_a_model_with_two_parents(tmp_path):
    # Prepare: T = 3 (round 1 the only fork round), h_f = 0 (every member above the
    # smallest drift is poorly served and, with one model to go to, forks), M = 2
    config = SimulationConfig(
        name="fedfmc",
        dataset="digits",
        scenario="groups",
        scenario_params={"n_groups": 2},
        n_trainers=4,
        rounds=5,
        samples=440,
        epochs=2,
        round_timeout=240,
        strategy="fedfmc",
        fork_rounds=3,
        fork_start=1,
        fork_gap=1,
        fork_end=1,
        fork_threshold=0.0,
        merge_rounds=2,
    )
    # Execute
    run_simulation(config, tmp_path, Console(quiet=True), keep_running=True)
    try:
        dag = ModelDAG.from_json(json.loads((tmp_path / "dag.json").read_text()))
        result = CliRunner(mix_stderr=False).invoke(
            main,
            [
                "dag",
                "--deployment",
                str(tmp_path / "devnet" / "deployment.json"),
                "--format",
                "json",
                "--check",
                "--no-cache",
            ],
        )
    finally:
        stop_devnet(tmp_path / "devnet")
    lines = [json.loads(raw) for raw in (tmp_path / "metrics.jsonl").read_text().splitlines()]

    # Assert: round 0, one shared model of everybody's updates on the root
    (shared,) = dag.models_of_round(0)
    assert shared.parents == (ROOT_ID,) and len(shared.update_ids) == 4
    # round 1 forks it: the least drifted trainer stays alone, the three others leave
    # together; both models are children of the shared one
    forked = dag.models_of_round(1)
    assert sorted(len(m.update_ids) for m in forked) == [1, 3]
    assert all(m.parents == (shared.model_id,) for m in forked)
    # round 2: each group on its own model
    groups = dag.models_of_round(2)
    assert sorted(m.popularity for m in groups) == [1, 3]
    # round 3: the merge, one model whose parents are both groups' models, holding every
    # update on either (each trainer trained both) and submitted by all four
    (merge,) = dag.models_of_round(3)
    assert merge.is_merge
    assert merge.parents == tuple(sorted(m.model_id for m in groups))
    proposals = Counter(dag.updates[u].trainer_id for u in merge.update_ids)
    assert proposals == {1: 2, 2: 2, 3: 2, 4: 2}
    assert sorted(merge.aggregator_ids) == [1, 2, 3, 4]
    # round 4: everybody consolidates the merged model
    (consolidated,) = dag.models_of_round(4)
    assert consolidated.parents == (merge.model_id,) and consolidated.popularity == 4
    # the metrics name the merge's parents; `dag --check` agrees with the contract views
    in_round_3 = [line for line in lines if line["round"] == 3]
    assert len(in_round_3) == 4
    assert all(len(line["aggregations"][0]["parents"]) == 2 for line in in_round_3)
    assert result.exit_code == 0, result.output + result.stderr
    document = json.loads(result.stdout)
    assert document["check"] == []
    (shown,) = [m for m in document["models"] if m["id"] == "0x" + merge.model_id.hex()]
    assert len(shown["parents"]) == 2
