"""End to end: real Anvil chains, real contracts, real storage, worker processes.

Each test runs a small network of `mcfl-chain worker` processes on scikit-learn's
digits (bundled, so these run anywhere) and checks what the chain recorded.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections import Counter

import pytest
from rich.console import Console

from mcfl_chain.chain.client import ChainClient
from mcfl_chain.chain.deployment import Deployment
from mcfl_chain.chain.devnet import DEFAULT_PHASE_DURATION, stop_devnet
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
    """Every model's id, round, creation index and popularity agree with the contract
    views, parents come from earlier rounds, and each update of a model was trained from
    one of its parents in its round."""
    for model in dag.models.values():
        if model.model_id == ROOT_ID:
            continue
        assert chain.model_exists(model.model_id)
        assert chain.round_of(model.model_id) == model.round
        assert chain.index_of(model.model_id) == model.index
        assert chain.popularity_of(model.model_id) == model.popularity == len(model.aggregator_ids)
        assert model_id(list(model.parents), list(model.update_ids)) == model.model_id
        for parent in model.parents:
            round_ = dag.models[parent].round
            assert round_ is None or round_ < model.round
        for uid in model.update_ids:
            update = dag.updates[uid]
            assert update.parent in model.parents and update.round == model.round


def _transactions_to(chain: ChainClient, contract: str) -> dict[str, list[int]]:
    """The gas of each mined transaction sent to one of the network's contracts, per
    sender."""
    w3, to = chain.w3, chain.deployment.addresses[contract]
    sent: dict[str, list[int]] = {}
    for n in range(chain.deployment.deployment_block, w3.eth.block_number + 1):
        for tx in w3.eth.get_block(n, full_transactions=True)["transactions"]:
            if tx["to"] == to:
                gas = w3.eth.get_transaction_receipt(tx["hash"])["gasUsed"]
                sent.setdefault(tx["from"], []).append(gas)
    return sent


def test_four_trainers_three_rounds(tmp_path):
    # Execute
    summary = run_simulation(_config(), tmp_path, Console(quiet=True), keep_running=True)
    try:
        deployment = Deployment.load(tmp_path / "devnet" / "deployment.json")
        chain = ChainClient.read_only(deployment)
        dag = ModelDAG.from_json(json.loads((tmp_path / "dag.json").read_text()))
        status = chain.status()
        # Assert: every round advanced with every trainer
        assert status.started and status.round == 3
        rounds = summary["rounds"]
        assert [(r["round"], r["trainers"]) for r in rounds] == [(0, 4), (1, 4), (2, 4)]
        assert all(r["models"] >= 1 for r in rounds)
        # the DAG is valid on chain
        _assert_dag_matches_chain(dag, chain)
        assert len(dag.updates) >= 12
        # two transactions per trainer and round, whatever the number of models trained
        trainers = [ChainClient(deployment, account_index=i + 1).address for i in range(4)]
        sent = _transactions_to(chain, "Models")
        assert {a: len(sent[a]) for a in trainers} == {a: 2 * 3 for a in trainers}
        # each round's metrics carry its gas (those transactions', registration apart)
        # and the blobs the trainer stored and fetched
        lines = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
        # the simulator registered the trainers in index order: ids follow indices
        assert {line["trainer_index"]: line["trainer_id"] for line in lines} == {
            i: i + 1 for i in range(4)
        }
        reported: Counter[str] = Counter()
        for line in lines:
            reported[line["trainer"]] += line["gas"]
            assert line["traffic"]["stored_blobs"] >= 1 and line["traffic"]["stored_bytes"] > 0
        assert reported == {a: sum(sent[a]) for a in trainers}
        assert all(
            sum(line["traffic"]["fetched_blobs"] for line in lines if line["trainer"] == a) >= 1
            for a in trainers
        )
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
        _wait_for(lambda: chain.status().started, what="round 0")
        victim_id = chain.trainer_id(victim)
        # Execute: kill -9 right after its round-1 proposals, then right after its
        # round-1 aggregations (each with the phase's vote, in one transaction),
        # restarting it each time with the same state directory.
        for event in ("UpdateProposed", "ModelAppended"):

            def acted(event: str = event) -> bool:
                return any(
                    e.args["trainerId"] == victim_id and e.args["round"] == 1
                    for e in _events(chain, event)
                )

            _wait_for(acted, what=f"{event} by the victim in round 1")
            os.kill(net.procs[1].pid, signal.SIGKILL)
            net.procs[1].wait()
            net.procs[1] = net.spawn(1)
        net.wait()
        # Assert: the network finished; one proposal per (trainer, parent, round), one
        # aggregation per (trainer, model, round) and one vote per (trainer, phase); the
        # restarted worker never had a transaction refused (it asked the chain first)
        # and wrote every round's metrics, the one it was killed in included.
        assert chain.status().round == 3
        proposals = [
            (e.args["trainerId"], e.args["parent"], e.args["round"])
            for e in _events(chain, "UpdateProposed")
        ]
        aggregations = [
            (e.args["trainerId"], e.args["modelId"], e.args["round"])
            for e in _events(chain, "ModelAppended")
        ]
        votes = [
            (e.args["trainerId"], e.args["round"], e.args["phase"])
            for e in _events(chain, "TrainerVoted")
        ]
        assert len(proposals) == len(set(proposals))
        assert len(aggregations) == len(set(aggregations))
        assert len(votes) == len(set(votes)) == 4 * 3 * 2
        assert sum(1 for p in proposals if p[0] == victim_id) >= 3
        log = (tmp_path / "trainers" / "001" / "worker.log").read_text()
        assert "refused" not in log
        rounds = [
            json.loads(line)["round"]
            for line in (tmp_path / "trainers" / "001" / "metrics.jsonl").read_text().splitlines()
        ]
        assert sorted(rounds) == [0, 1, 2]
    finally:
        net.stop()


def test_a_silent_registrant_costs_two_deadlines_and_the_others_finish(tmp_path):
    # Prepare: the deadline of `mcfl-chain devnet up` (30 s); 3 workers and a 4th trainer
    # that registers first, so it is a member of round 0's first phase, and never acts.
    config = _config(
        n_trainers=3, rounds=2, samples=300, epochs=2, phase_duration=DEFAULT_PHASE_DURATION
    )
    net = Network(config, tmp_path, Console(quiet=True))
    net.start(min_trainers=4)
    try:
        silent_id = ChainClient(net.deployment, account_index=config.n_trainers + 1).register()
        chain = ChainClient.read_only(net.deployment)
        # Execute
        net.spawn_workers()
        net.wait()
        # Assert: every phase from the timestamps of the blocks that logged its events.
        stamp = _block_times(chain)
        starts = [
            (e.args["round"], e.args["phase"], e.args["quorum"], stamp[e.block_number])
            for e in _events(chain, "PhaseChanged")
        ]
        votes = _events(chain, "TrainerVoted")
        assert [s[:3] for s in starts] == [(0, 0, 4), (0, 1, 4), (1, 0, 3), (1, 1, 3), (2, 0, 3)]
        timings = []
        for (round_, phase, quorum, start), (*_, end) in zip(starts, starts[1:], strict=False):
            mine = [e for e in votes if (e.args["round"], e.args["phase"]) == (round_, phase)]
            last_vote = stamp[mine[-1].block_number]
            timings.append((round_, phase, quorum, end - start, end - last_vote))
        print("\n(round, phase, quorum, seconds, seconds after the last vote):", timings)
        # Round 0's two phases waited for the silent member until their deadlines (it
        # was carried over into the second one, in case it was on its way), and no
        # longer than the grace and one transaction after them...
        waited, later = timings[:2], timings[2:]
        for _, _, _, seconds, _ in waited:
            assert DEFAULT_PHASE_DURATION <= seconds <= DEFAULT_PHASE_DURATION + 8
        # ...then it was no member: each later phase ended with its last member's vote,
        # well before a deadline.
        for _, _, _, seconds, after_last_vote in later:
            assert after_last_vote == 0 and seconds < DEFAULT_PHASE_DURATION
        assert all(e.args["trainerId"] != silent_id for e in votes)
        # The others played both rounds.
        for index in range(3):
            lines = (tmp_path / "trainers" / f"{index:03d}" / "metrics.jsonl").read_text()
            assert [json.loads(line)["round"] for line in lines.splitlines()] == [0, 1]
    finally:
        net.stop()


def _block_times(chain: ChainClient) -> dict[int, int]:
    """Block number → timestamp, from the deployment to the head."""
    return {
        n: int(chain.w3.eth.get_block(n)["timestamp"])
        for n in range(chain.deployment.deployment_block, chain.block_number() + 1)
    }


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
        bad = {
            chain.trainer_id(ChainClient(net.deployment, account_index=i + 1).address)
            for i in (2, 3, 4)
        }
        proposed = [e for e in _events(chain, "UpdateProposed") if e.args["trainerId"] in bad]
        bad_updates = {e.args["updateId"] for e in proposed}
        update_ids = {
            e.args["modelId"]: e.args["updateIds"] for e in _events(chain, "ModelCreated")
        }
        honest = [e for e in _events(chain, "ModelAppended") if e.args["trainerId"] not in bad]
        # Each bad trainer published in both rounds; how many models it trained in round 1
        # (one or two) depends on how the round-0 models scored on its data.
        assert {(e.args["trainerId"], e.args["round"]) for e in proposed} == {
            (trainer, round_) for trainer in bad for round_ in (0, 1)
        }
        assert len(honest) >= 4
        assert all(not bad_updates & set(update_ids[e.args["modelId"]]) for e in honest)
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
