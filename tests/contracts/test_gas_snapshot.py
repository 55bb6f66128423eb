"""Gas against the committed snapshot (scripts/bench_gas.py --write-snapshot refreshes it).

Fails when a call costs more than TOLERANCE above its recorded figure, so a gas change
shows in review; a large saving also fails, as a reminder to refresh the snapshot.
"""

import json
from pathlib import Path

from mcfl_chain._utils.process import free_port
from mcfl_chain.chain.client import connect
from mcfl_chain.chain.devnet import start_devnet, stop_devnet
from mcfl_chain.chain.gas import fake_cid, measure_aggregate_sizes, measure_round_gas

SNAPSHOT = Path(__file__).with_name("gas-snapshot.json")
TOLERANCE = 0.02


def _compare(section, measured, recorded):
    problems = []
    for name, gas in measured.items():
        before = recorded[name]
        if abs(gas - before) > TOLERANCE * before:
            problems.append(f"{section}/{name}: {before:,} -> {gas:,}")
    return problems


def test_gas_matches_the_snapshot(tmp_path):
    # Prepare
    recorded = json.loads(SNAPSHOT.read_text())
    port = free_port()
    start_devnet(tmp_path, port, genesis_cid=fake_cid("genesis"), min_trainers=1, accounts=1)
    try:
        w3 = connect(f"http://127.0.0.1:{port}")
        # Execute (the 100- and 256-update figures need 256 trainers: benchmark only)
        report = measure_round_gas(w3, 10)
        sizes = measure_aggregate_sizes(w3, (1, 10))
    finally:
        stop_devnet(tmp_path)
    # Assert
    assert set(report.calls) == set(recorded["calls"])
    assert set(report.per_trainer_round) == set(recorded["per_trainer_round"])
    shared_sizes = {k: v for k, v in sizes.items() if k in recorded["aggregate_by_size"]}
    assert set(shared_sizes) == {"1 (new model)", "10 (new model)"}
    problems = (
        _compare("calls", report.calls, recorded["calls"])
        + _compare("per_trainer_round", report.per_trainer_round, recorded["per_trainer_round"])
        + _compare("aggregate_by_size", shared_sizes, recorded["aggregate_by_size"])
    )
    assert not problems, (
        "gas changed; if intended, run scripts/bench_gas.py "
        "--write-snapshot:\n" + "\n".join(problems)
    )
    assert report.ratio <= 0.7
