"""Do the process and batched engines learn the same? Real training, several seeds.

The stand-in test (tests/network/test_engines.py) shows both engines build the identical
DAG when training is a fixed function; real training on two engines agrees only to float
rounding, and one flipped model choice forks the DAG, so what can be asked is that the
outcomes agree statistically. For each scenario and seed, one MCFL network per engine
(the same data, chain code and options); the final round's worst and average test
accuracies of each engine's seeds give a 95 % Student-t interval, and each engine's
mean must fall inside the other's interval.

Every run is appended to ``results/engine-equivalence.jsonl`` as it ends (engine,
device, machine, commit); a (scenario, engine, seed) already recorded with the same
options is not run again, so the script resumes. The table is remade from the records.

Usage: python scripts/engine_equivalence.py [--seeds 0,1,2,3,4] [--scenarios groups,iid]
       [--report-only]
Last line: ``engines agree on N of M (scenario, figure) pairs``.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click
import psutil
import torch
from rich.console import Console
from rich.table import Table

from mcfl_chain._utils.provenance import source_commit
from mcfl_chain.host.compute import default_kernel
from mcfl_chain.simulation.experiment import JsonLines, parse_seeds
from mcfl_chain.simulation.runner import SimulationConfig, run_simulation
from mcfl_chain.simulation.stats import mean_interval

ROOT = Path(__file__).resolve().parents[1]
RECORDS = ROOT / "results" / "engine-equivalence.jsonl"
ENGINES = ("process", "batched")
FIGURES = {"worst": "final_min", "average": "final_avg"}


def config_of(scenario: str, engine: str, seed: int) -> SimulationConfig:
    """The network every (scenario, engine, seed) runs: 8 trainers of 600 samples (420
    trained on), LeNet-5 on Fashion-MNIST, 12 rounds of MCFL as written."""
    return SimulationConfig(
        name=f"eq-{scenario}-{engine}-s{seed}",
        dataset="fashion-mnist",
        scenario=scenario,
        n_trainers=8,
        rounds=12,
        samples=600,
        arch="lenet5",
        strategy="mcfl",
        engine=engine,
        device="cpu",
        seed=seed,
        phase_duration=3600,
    )


def _options(config: SimulationConfig) -> dict[str, Any]:
    """What must match for a record to stand for a planned run (not its name)."""
    options = asdict(config)
    options.pop("name", None)
    return json.loads(json.dumps(options, default=str))


def run_one(config: SimulationConfig, out: Path) -> dict[str, Any]:
    run_dir = out / config.name
    if run_dir.exists():
        shutil.rmtree(run_dir)  # an unfinished run
    started = time.monotonic()
    summary = run_simulation(config, run_dir, Console(quiet=True))
    final = summary["final"]
    return {
        "scenario": config.scenario,
        "engine": config.engine,
        "seed": config.seed,
        "device": "cpu",
        # the batched engine's kernel on the CPU (records without one: vmap, before b86ee58)
        **({"kernel": default_kernel("cpu")} if config.engine == "batched" else {}),
        "final_min": final["metric_min"],
        "final_avg": final["metric_avg"],
        "wall_s": round(time.monotonic() - started, 1),
        "options": _options(config),
        "machine": f"{os.cpu_count()} cores, {psutil.virtual_memory().total / 2**30:.0f} GiB",
        "torch": torch.__version__,
        "commit": source_commit(ROOT),
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
    }


def report(records: list[dict[str, Any]], scenarios: list[str], console: Console) -> str:
    """The table of intervals per scenario, engine and figure; returns the last line."""
    table = Table(title="final accuracy by engine (mean ± 95 % t-interval over seeds)")
    for column in ("scenario", "figure", "seeds", *ENGINES, "each mean in the other's"):
        table.add_column(column, justify="right")
    agree = pairs = 0
    for scenario in scenarios:
        for figure, key in FIGURES.items():
            values = {
                engine: {
                    r["seed"]: r[key]
                    for r in records
                    if r["scenario"] == scenario and r["engine"] == engine
                }
                for engine in ENGINES
            }
            seeds = sorted(set(values["process"]) & set(values["batched"]))
            intervals = {e: mean_interval(values[e][s] for s in seeds) for e in ENGINES}
            verdict = "-"
            if len(seeds) >= 2:
                a, b = intervals["process"], intervals["batched"]
                assert a is not None and b is not None
                assert a.low is not None and a.high is not None
                assert b.low is not None and b.high is not None
                inside = a.low <= b.mean <= a.high and b.low <= a.mean <= b.high
                pairs += 1
                agree += inside
                verdict = "yes" if inside else "NO"
            table.add_row(
                scenario,
                figure,
                str(len(seeds)),
                *(
                    "-" if intervals[e] is None else intervals[e].format(100)  # type: ignore[union-attr]
                    for e in ENGINES
                ),
                verdict,
            )
    console.print(table)
    return f"engines agree on {agree} of {pairs} (scenario, figure) pairs"


@click.command()
@click.option("--seeds", default="0,1,2,3,4", show_default=True, help="Seeds, comma-separated.")
@click.option(
    "--scenarios", default="groups,iid", show_default=True, help="Scenarios, comma-separated."
)
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=ROOT / "runs" / "engine-equivalence",
    show_default=True,
    help="Where the run directories go.",
)
@click.option(
    "--records",
    type=click.Path(dir_okay=False, path_type=Path),
    default=RECORDS,
    show_default=True,
    help="JSON-lines file the runs are appended to.",
)
@click.option("--report-only", is_flag=True, help="Print the table from the records; run none.")
def main(seeds: str, scenarios: str, out: Path, records: Path, report_only: bool) -> None:
    """Run MCFL on both engines over seeds and compare the final accuracies."""
    console = Console()
    try:
        seed_list = parse_seeds(seeds)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="'--seeds'") from exc
    scenario_list = [s.strip() for s in scenarios.split(",") if s.strip()]
    if not report_only:
        out.mkdir(parents=True, exist_ok=True)
        recorded = JsonLines(records).load()
        for seed in seed_list:
            for scenario in scenario_list:
                for engine in ENGINES:
                    config = config_of(scenario, engine, seed)
                    key, options = (scenario, engine, seed), _options(config)
                    if any(
                        (r["scenario"], r["engine"], r["seed"]) == key
                        # an option added since a record was made does not void it
                        and all(options.get(k) == v for k, v in r["options"].items())
                        for r in recorded
                    ):
                        continue
                    console.print(f"{scenario} seed {seed} on {engine}: running")
                    record = run_one(config, out)
                    recorded.append(record)
                    JsonLines(records).append(record)
                    console.print(
                        f"  worst {record['final_min']:.3f}, average {record['final_avg']:.3f} "
                        f"in {record['wall_s']:.0f} s"
                    )
    console.print(report(JsonLines(records).load(), scenario_list, console))


if __name__ == "__main__":
    main()
