"""How a round's cost grows with the number of trainers (10, 20, 38 by default).

For each network size N it measures, on this machine:
- the round-time split of a real network (Anvil, contracts, local store, N worker
  processes; Fashion-MNIST IID, rounds 1.. averaged, round 0 excluded);
- the gas per trainer per round when N trainers propose on one parent and all aggregate
  the N updates (``scripts/bench_gas.py``'s consensus round, base included);
- divergence filtering + FedAvg of N LeNet updates (``scripts/bench_aggregation.py``).

Writes ``<out>/scaling.json`` (read by ``scripts/report_results.py``) and prints a table.

Usage: python scripts/bench_scaling.py [--sizes 10,20,38] [--rounds 3] [--samples 1000]
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table
from web3 import Web3

from mcfl_chain.simulation.runner import SimulationConfig, run_simulation
from mcfl_chain.worker.timing import CATEGORIES

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_aggregation import measure as measure_aggregation  # noqa: E402
from bench_gas import GasReport, measure_consensus_round, on_devnet  # noqa: E402


def round_split(
    n: int, rounds: int, samples: int, run_dir: Path, console: Console
) -> dict[str, float]:
    """Mean seconds per trainer per round (rounds 1..) in each category, plus the total."""
    config = SimulationConfig(
        name=f"scale-{n}",
        dataset="fashion-mnist",
        scenario="iid",
        n_trainers=n,
        rounds=rounds,
        epochs=2,
        samples=samples,
        tolerance=2.0,
        round_timeout=1800,
    )
    run_simulation(config, run_dir, console)
    lines = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    steady = [line for line in lines if line["round"] > 0]
    split = {c: statistics.fmean(line["split"][c] for line in steady) for c in CATEGORIES}
    split["round"] = statistics.fmean(line["seconds"] for line in steady)
    split["other"] = max(0.0, split["round"] - sum(split[c] for c in CATEGORIES))
    return split


def round_gas(n: int) -> dict[str, int]:
    """Mean gasUsed per trainer of a consensus round of ``n`` trainers (base included):
    ``submitProposals``, ``submitAggregations`` and their ``total``."""

    def consensus(w3: Web3) -> GasReport:
        report = GasReport()
        report.consensus, report.calls = measure_consensus_round(w3, n)
        return report

    measured = on_devnet(consensus).consensus
    assert measured is not None
    return measured.as_dict()


@click.command()
@click.option(
    "--sizes", default="10,20,38", show_default=True, help="Comma-separated numbers of trainers."
)
@click.option("--rounds", default=3, show_default=True, help="Rounds per network.")
@click.option("--samples", default=1000, show_default=True, help="Samples per trainer.")
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("runs/scaling"),
    show_default=True,
)
def main(sizes: str, rounds: int, samples: int, out: Path) -> None:
    """Measure round time split, gas and aggregation cost for several network sizes."""
    console = Console()
    results: dict[str, dict[str, Any]] = {}
    for n in (int(s) for s in sizes.split(",")):
        console.rule(f"{n} trainers")
        aggregation = measure_aggregation(n, "lenet5", 2.0, 0.1, 5, 0)
        results[str(n)] = {
            "split": round_split(n, rounds, samples, out / f"network-{n}", console),
            "gas_per_trainer_round": round_gas(n),
            "aggregation_ms": {
                "decode": float(aggregation[2]),
                "flatten_select_fedavg": float(aggregation[8]),
            },
        }
    out.mkdir(parents=True, exist_ok=True)
    (out / "scaling.json").write_text(
        json.dumps({"rounds": rounds, "samples": samples, "sizes": results}, indent=1)
    )
    table = Table(title="per trainer per round, by network size")
    for column in (
        "trainers",
        "round s",
        "training",
        "evaluation",
        "chain",
        "storage",
        "waiting",
        "gas",
        "aggregation ms",
    ):
        table.add_column(column, justify="right")
    for size, r in results.items():
        s = r["split"]
        table.add_row(
            size,
            f"{s['round']:.1f}",
            *(
                f"{100 * s[c] / s['round']:.1f}%"
                for c in ("training", "evaluation", "chain", "storage", "waiting")
            ),
            f"{r['gas_per_trainer_round']['total']:,}",
            f"{r['aggregation_ms']['flatten_select_fedavg']:.1f}",
        )
    console.print(table)
    print(f"written {out / 'scaling.json'}")


if __name__ == "__main__":
    main()
