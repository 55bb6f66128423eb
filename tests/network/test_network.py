"""End to end: real Anvil chains, real contracts, real storage, worker processes.

Each test runs a small network of `mcfl-chain worker` processes on scikit-learn's
digits (bundled, so these run anywhere) and checks what the chain recorded.
"""

from __future__ import annotations

import json
import os
import signal
import time

import pytest
from rich.console import Console

from mcfl_chain.chain.client import ChainClient
from mcfl_chain.chain.deployment import Deployment
from mcfl_chain.chain.devnet import stop_devnet
from mcfl_chain.dag.graph import ROOT_ID, ModelDAG
from mcfl_chain.dag.model_id import model_id
from mcfl_chain.dag.weights import WeightsBook
from mcfl_chain.learning.codec import encode_weights
from mcfl_chain.simulation.runner import Network, SimulationConfig, run_simulation
from mcfl_chain.storage import open_storage
from mcfl_chain.storage.cid import cid_for_bytes

pytestmark = pytest.mark.slow


def _config(**overrides) -> SimulationConfig:
    base = dict(
        name="test",
        dataset="digits",
        scenario="iid",
        n_trainers=4,
        rounds=3,
        samples=440,
        epochs=5,
        round_timeout=240,
    )
    base.update(overrides)
    return SimulationConfig(**base)


def _assert_dag_matches_chain(dag: ModelDAG, chain: ChainClient) -> None:
    """Every model's id, parent, round and popularity agree with the contract views,
    parents come from earlier rounds, and the updates of a model share its parent."""
    for model in dag.models.values():
        if model.model_id == ROOT_ID:
            continue
        assert chain.model_exists(model.model_id)
        assert chain.parent_of(model.model_id) == model.parent
        assert chain.round_of(model.model_id) == model.round
        assert chain.popularity_of(model.model_id) == model.popularity == len(model.aggregators)
        assert model_id(model.parent, list(model.update_ids)) == model.model_id
        parent = dag.models[model.parent]
        assert parent.round is None or parent.round < model.round
        for uid in model.update_ids:
            update = dag.updates[uid]
            assert (update.parent, update.round) == (model.parent, model.round)


def test_four_trainers_three_rounds(tmp_path):
    # Execute
    summary = run_simulation(_config(), tmp_path, Console(quiet=True), keep_running=True)
    try:
        deployment = Deployment.load(tmp_path / "devnet" / "deployment.json")
        chain = ChainClient.read_only(deployment)
        dag = ModelDAG.from_json(json.loads((tmp_path / "dag.json").read_text()))
        started, round_, _ = chain.round_state()
        # Assert: every round advanced with every trainer
        assert started and round_ == 3
        rounds = summary["rounds"]
        assert [(r["round"], r["trainers"]) for r in rounds] == [(0, 4), (1, 4), (2, 4)]
        assert all(r["models"] >= 1 for r in rounds)
        # the DAG is valid on chain
        _assert_dag_matches_chain(dag, chain)
        assert len(dag.updates) >= 12
        # accuracy rises
        assert rounds[-1]["metric_avg"] > rounds[0]["metric_avg"]
        assert rounds[-1]["metric_avg"] > 0.6
        # run directory
        for name in ("metrics.jsonl", "rounds.csv", "summary.json", "accuracy.png", "models.png"):
            assert (tmp_path / name).stat().st_size > 0
        # A model's published weights are bit-identical to a FedAvg recomputed here,
        # in another process than the aggregator's.
        storage = open_storage(f"local:{tmp_path / 'blobs'}")
        book = WeightsBook(storage.get, "lenet5", dag)
        published = [m for m in dag.models.values() if m.weights_cid and m.model_id != ROOT_ID]
        assert published
        for model in published:
            good, bad = book.usable_updates(list(model.update_ids))
            assert not bad
            recomputed = encode_weights("lenet5", book.aggregate(list(model.update_ids), good))
            assert cid_for_bytes(recomputed) == model.weights_cid
            assert storage.get(model.weights_cid) == recomputed
    finally:
        stop_devnet(tmp_path / "devnet")


def _wait_for(predicate, timeout=180.0, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def _events(chain: ChainClient, name: str) -> list:
    return [e for e in chain.events(0, chain.block_number()) if e.name == name]


def test_a_worker_killed_mid_round_resumes_without_doing_anything_twice(tmp_path):
    # Prepare
    config = _config(rounds=3)
    net = Network(config, tmp_path, Console(quiet=True))
    net.start()
    try:
        chain = ChainClient.read_only(net.deployment)
        victim = ChainClient(net.deployment, account_index=2).address
        net.spawn_workers()
        # Execute: kill -9 right after its round-1 proposal, then right after its
        # round-1 aggregation, restarting it each time with the same state directory.
        for event, key in (("UpdateProposed", "proposer"), ("ModelAppended", "aggregator")):

            def acted(event: str = event, key: str = key) -> bool:
                return any(
                    e.args[key] == victim and e.args["round"] == 1 for e in _events(chain, event)
                )

            _wait_for(acted, what=f"{event} by the victim in round 1")
            os.kill(net.procs[1].pid, signal.SIGKILL)
            net.procs[1].wait()
            net.procs[1] = net.spawn(1)
        net.wait()
        # Assert: the network finished, one proposal per (trainer, parent, round) and
        # one aggregation per (trainer, parent, round), and the restarted worker never
        # had a transaction refused (it asked the chain before acting).
        assert chain.round_state()[1] == 3
        proposals = [
            (e.args["proposer"], e.args["parent"], e.args["round"])
            for e in _events(chain, "UpdateProposed")
        ]
        aggregations = [
            (e.args["aggregator"], e.args["parent"], e.args["round"])
            for e in _events(chain, "ModelAppended")
        ]
        assert len(proposals) == len(set(proposals))
        assert len(aggregations) == len(set(aggregations))
        assert sum(1 for p in proposals if p[0] == victim) >= 3
        log = (tmp_path / "trainers" / "001" / "worker.log").read_text()
        assert "refused" not in log
        rounds = [
            json.loads(line)["round"]
            for line in (tmp_path / "trainers" / "001" / "metrics.jsonl").read_text().splitlines()
        ]
        assert sorted(rounds) == [0, 1, 2]
    finally:
        net.stop()


def test_a_silent_trainer_does_not_stall_the_network_past_the_deadline(tmp_path):
    # Prepare: 3 workers and a 4th registered trainer that never acts.
    config = _config(n_trainers=3, rounds=2, phase_duration=5)
    net = Network(config, tmp_path, Console(quiet=True))
    net.start(min_trainers=4)
    try:
        silent = ChainClient(net.deployment, account_index=config.n_trainers + 1)
        silent.register()
        chain = ChainClient.read_only(net.deployment)
        # Execute
        net.spawn_workers()
        net.wait()
        # Assert: two rounds completed although the quorum of 4 was never reached.
        assert chain.round_state()[1] == 2
        assert chain.votes_and_quorum()[1] == 4
        votes = _events(chain, "TrainerVoted")
        assert votes and all(e.args["trainer"] != silent.address for e in votes)
        for index in range(3):
            lines = (tmp_path / "trainers" / f"{index:03d}" / "metrics.jsonl").read_text()
            assert len(lines.splitlines()) == 2
    finally:
        net.stop()


def test_peers_publishing_bad_weights_are_excluded(tmp_path):
    # Prepare: trainers 2, 3, 4 publish NaN weights, bytes that are no weights at all,
    # and a CID nobody stored.
    config = _config(n_trainers=5, rounds=2, samples=300)
    net = Network(config, tmp_path, Console(quiet=True))
    net.start()
    try:
        chain = ChainClient.read_only(net.deployment)
        # Execute
        net.spawn_workers(
            {
                2: ["--adversary", "nan-weights"],
                3: ["--adversary", "garbage-weights"],
                4: ["--adversary", "unreachable-cid"],
            }
        )
        net.wait()
        # Assert
        bad = {ChainClient(net.deployment, account_index=i + 1).address for i in (2, 3, 4)}
        bad_updates = {
            e.args["updateId"]
            for e in _events(chain, "UpdateProposed")
            if e.args["proposer"] in bad
        }
        honest = [e for e in _events(chain, "ModelAppended") if e.args["aggregator"] not in bad]
        assert len(bad_updates) == 6 and len(honest) >= 4
        assert all(not bad_updates & set(e.args["updateIds"]) for e in honest)
        reasons = []
        for index in (0, 1):
            for line in (
                (tmp_path / "trainers" / f"{index:03d}" / "metrics.jsonl").read_text().splitlines()
            ):
                for aggregation in json.loads(line)["aggregations"]:
                    reasons += aggregation["excluded"].values()
        assert any("non-finite" in r.lower() or "nan" in r.lower() for r in reasons)
        assert any("invalid weights" in r for r in reasons)
        assert any("unreachable CID" in r for r in reasons)
    finally:
        net.stop()


def test_fedavg_baseline_trains_one_model_accepting_every_update(tmp_path):
    # Execute
    config = _config(n_trainers=3, rounds=2, strategy="fedavg")
    summary = run_simulation(config, tmp_path, Console(quiet=True))
    dag = ModelDAG.from_json(json.loads((tmp_path / "dag.json").read_text()))
    # Assert: one model per round, made of every update, submitted by every trainer.
    assert [r["models"] for r in summary["rounds"]] == [1, 1]
    for round_ in (0, 1):
        (model,) = dag.models_of_round(round_)
        assert model.popularity == 3 and len(model.update_ids) == 3


def test_a_network_over_a_real_ipfs_node(tmp_path):
    # Execute: the same workers with every blob going through js-ipfs's RPC API
    config = _config(n_trainers=3, rounds=2, samples=300, storage="ipfs")
    summary = run_simulation(config, tmp_path, Console(quiet=True))
    # Assert: both rounds completed with every trainer, and the updates on chain are
    # IPFS CIDs of real weights (raw leaves, CIDv1 base32)
    assert [(r["round"], r["trainers"]) for r in summary["rounds"]] == [(0, 3), (1, 3)]
    dag = ModelDAG.from_json(json.loads((tmp_path / "dag.json").read_text()))
    assert len(dag.updates) >= 6
    assert all(u.cid.startswith("bafkrei") for u in dag.updates.values())
