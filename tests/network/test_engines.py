"""The simulator's engines are interchangeable: the protocol is their invariant.

Real Anvil chains, real contracts, the embedded store. With training replaced by the
deterministic stand-in (:mod:`mcfl_chain.compute.stand_in`), the process engine (a
worker process per trainer) and the batched engine (trainers in host processes, one per
core on the CPU) must build the identical DAG; with real training, the batched engine's
network must pass ``dag --check``, report every trainer's rounds, and (with the CPU's
loop kernel) compute the process engine's weights to the bit.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from rich.console import Console

from mcfl_chain.chain.client import ChainClient
from mcfl_chain.chain.deployment import Deployment
from mcfl_chain.chain.devnet import stop_devnet
from mcfl_chain.cli import main
from mcfl_chain.dag.cohort import drawn_in
from mcfl_chain.simulation.runner import SimulationConfig, run_simulation

pytestmark = pytest.mark.slow


def _config(**overrides: Any) -> SimulationConfig:
    base: dict[str, Any] = dict(
        name="engines",
        dataset="digits",
        scenario="groups",
        n_trainers=4,
        rounds=3,
        samples=200,
        arch="lenet-light",
        phase_duration=120,
    )
    return SimulationConfig(**{**base, **overrides})


def _run_and_check(config: SimulationConfig, run_dir: Path, on_chain: Any = None) -> dict[str, Any]:
    """Run ``config``, then `dag --check` against its chain (and ``on_chain(client)``
    before the chain stops); returns the DAG document."""
    run_simulation(config, run_dir, Console(quiet=True), keep_running=True)
    try:
        if on_chain is not None:
            deployment = Deployment.load(run_dir / "devnet" / "deployment.json")
            on_chain(ChainClient.read_only(deployment))
        result = CliRunner(mix_stderr=False).invoke(
            main,
            [
                "dag",
                "--deployment",
                str(run_dir / "devnet" / "deployment.json"),
                "--format",
                "json",
                "--check",
                "--no-cache",
            ],
        )
    finally:
        stop_devnet(run_dir / "devnet")
    assert result.exit_code == 0, result.output + result.stderr
    assert json.loads(result.output)["check"] == []
    return json.loads((run_dir / "dag.json").read_text())


def _protocol_view(dag: dict[str, Any]) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """What the protocol fixes, without blocks, times and transaction hashes."""
    models = sorted(
        (
            m["id"],
            tuple(m["parents"]),
            m["round"],
            tuple(m["updates"]),
            m["popularity"],
            m["weights_cid"],
        )
        for m in dag["models"]
    )
    updates = sorted(
        (u["id"], u["trainer_id"], u["parent"], u["round"], u["cid"], u["num_samples"])
        for u in dag["updates"]
    )
    return models, updates


def test_process_and_batched_engines_build_the_identical_dag(tmp_path: Path) -> None:
    # Execute
    dags = {
        engine: _run_and_check(_config(engine=engine, training="stand-in"), tmp_path / engine)
        for engine in ("process", "batched")
    }

    # Assert: model ids, parents, update lists, popularity and every update's CID
    process, batched = (_protocol_view(dags[e]) for e in ("process", "batched"))
    assert len(process[0]) > 4 and len(process[1]) >= 12
    assert batched == process
    lines = [
        json.loads(raw) for raw in (tmp_path / "batched" / "metrics.jsonl").read_text().splitlines()
    ]
    assert {(line["engine"], line["training"]) for line in lines} == {("batched", "stand-in")}


def test_the_batched_engine_repeats_bit_for_bit_and_on_the_cpu_is_the_process_engine(
    tmp_path: Path, compute_device: Any
) -> None:
    # Execute: the same real-training network twice on the batched engine, on a dataset
    # of bytes (the hosts keep it once and read the trainers' shares from it), on the
    # tested device (the CPU in CI; a GPU's vmap kernel with MCFL_TEST_DEVICE=cuda), and
    # on the CPU once on the process engine
    device = compute_device.type
    config = _config(
        engine="batched", n_trainers=3, rounds=2, dataset="fashion-mnist", device=device
    )
    dags = [_run_and_check(config, tmp_path / f"run{k}") for k in range(2)]

    # Assert: the same weights to the bit (every update's and model's CID), whatever
    # the timing of the trainers' threads
    assert _protocol_view(dags[0]) == _protocol_view(dags[1])
    if device == "cpu":
        # with the CPU's loop kernel, the weights a worker process computes (a GPU's
        # batched kernels sum in another order: equal to float rounding, not to the bit)
        process = _run_and_check(replace(config, engine="process"), tmp_path / "process")
        assert _protocol_view(dags[0]) == _protocol_view(process)
    # every trainer reported every round, with the engine and device named
    run = tmp_path / "run0"
    lines = [json.loads(raw) for raw in (run / "metrics.jsonl").read_text().splitlines()]
    assert sorted((line["round"], line["trainer_index"]) for line in lines) == [
        (r, i) for r in range(2) for i in range(3)
    ]
    assert {(line["engine"], line["device"]) for line in lines} == {("batched", device)}
    assert all(line["accuracy"] is not None for line in lines)
    # host processes (one per core on the CPU, one per 4 cores on a GPU, at most one per
    # trainer), whose logs name the device's kernel (on the CPU each trainer's models one
    # by one)
    hosts = sorted(run.glob("host-*.log"))
    assert 1 <= len(hosts) <= 3
    kernel = "loop" if device == "cpu" else "vmap"
    assert all(f"training ({kernel} kernel)" in log.read_text() for log in hosts)
    assert all("trainer(s) built: resident memory" in log.read_text() for log in hosts)
    assert "Traceback" not in (run / "trainers" / "000" / "worker.log").read_text()


def test_a_cohort_network_plays_its_drawn_trainers_only(tmp_path: Path) -> None:
    # Execute: six trainers, half of them drawn for each round (stand-in training)
    seen: dict[str, Any] = {}

    def read(client: ChainClient) -> None:
        seen["seed"] = bytes(client.models.functions.cohortSeed().call())
        seen["bps"] = client.cohort_bps()

    config = _config(engine="batched", training="stand-in", n_trainers=6, cohort=0.5)
    dag = _run_and_check(config, tmp_path / "cohort", read)

    # Assert: a cohort network, whose every update came from a trainer drawn for its
    # round (the chain refuses the others; the workers did not try), and rounds played
    assert seen["bps"] == 5_000
    updates = [(u["trainer_id"], u["round"]) for u in dag["updates"]]
    assert updates and all(drawn_in(seen["seed"], t, r, 5_000) for t, r in updates)
    assert max(r for _, r in updates) >= 1
    log = (tmp_path / "cohort" / "trainers" / "000" / "worker.log").read_text()
    assert "Traceback" not in log
