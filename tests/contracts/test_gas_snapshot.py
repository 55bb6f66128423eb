"""Gas against the committed snapshot (scripts/bench_gas.py --write-snapshot refreshes it).

Runs both measured rounds and the small aggregations and merges on a real Anvil devnet.
Fails when a transaction costs more than TOLERANCE above its recorded figure, so a gas
change shows in review; a large saving also fails, as a reminder to refresh the snapshot.
The per-trainer-round goal (at most half the thesis contracts' gas, base included) is
checked too, for the cohort rounds (d) as well, whose figures are not snapshotted (the
draw's seed differs from run to run).
"""

import importlib.util
import json
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "bench_gas.py"
SNAPSHOT = Path(__file__).with_name("gas-snapshot.json")
TOLERANCE = 0.02
SIZES, MERGE_SIZES = (1, 10), (2, 10)


def _bench_gas():
    spec = importlib.util.spec_from_file_location("bench_gas", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("bench_gas", module)
    spec.loader.exec_module(module)
    return module


def _compare(section, measured, recorded):
    problems = []
    for name, gas in measured.items():
        before = recorded[name]
        if abs(gas - before) > TOLERANCE * before:
            problems.append(f"{section}/{name}: {before:,} -> {gas:,}")
    return problems


def test_gas_matches_the_snapshot():
    # Prepare
    bench = _bench_gas()
    recorded = json.loads(SNAPSHOT.read_text())
    # Execute (the 100- and 256-update figures need 256 trainers: benchmark only)
    report = bench.on_devnet(lambda w3: bench.run(w3, SIZES, MERGE_SIZES))
    measured = report.as_dict()
    # Assert
    assert set(measured["calls"]) == set(recorded["calls"])
    assert set(measured["per_trainer_round"]) == set(recorded["per_trainer_round"])
    sizes = {
        k: v for k, v in measured["aggregate_by_size"].items() if k in recorded["aggregate_by_size"]
    }
    assert set(sizes) == {f"aggregate {n} (new model)" for n in SIZES} | {
        f"merge 2 parents, {n} updates (new model)" for n in MERGE_SIZES
    } | {f"aggregate 10 with rule {name} (new model)" for name in bench.RULES}
    problems = _compare("calls", measured["calls"], recorded["calls"])
    for name, figures in measured["per_trainer_round"].items():
        problems += _compare(
            f"per_trainer_round/{name}", figures, recorded["per_trainer_round"][name]
        )
    problems += _compare("aggregate_by_size", sizes, recorded["aggregate_by_size"])
    assert not problems, (
        "gas changed; if intended, run scripts/bench_gas.py "
        "--write-snapshot:\n" + "\n".join(problems)
    )
    assert report.cohort is not None and report.cohort.drawn > 0
    assert report.ratio <= 0.5, f"gas per trainer and round is {report.ratio:.3f} of the thesis"
