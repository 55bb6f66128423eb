"""Run the paper's experiments (scenarios/paper/*.toml) and their FedAvg baselines.

Each scenario file is run as written (MCFL) and again with the decentralized FedAvg
baseline on the same chain code, data and seeds (paper §5.1); scenarios that differ
only in their MCFL tolerance share one baseline run. Finished runs (a summary.json in
their directory) are skipped, so an interrupted campaign resumes where it stopped.
Then `python scripts/report_results.py` turns the run directories into docs/RESULTS.md.

Usage: python scripts/run_experiments.py [--published-size] [--only NAME ...]
"""

from __future__ import annotations

import shutil
import time
from dataclasses import asdict, replace
from pathlib import Path

import click
from rich.console import Console

from mcfl_chain.cli.simulate import load_config
from mcfl_chain.simulation.runner import SimulationConfig, run_simulation


def baseline_of(config: SimulationConfig) -> SimulationConfig:
    """The FedAvg run on the same data: its name ignores the MCFL-only options."""
    stem = config.name.split("-tol")[0]
    return replace(config, strategy="fedavg", tolerance=1.0, name=f"{stem}-fedavg")


def campaign(scenarios: Path, published: bool, only: tuple[str, ...]) -> list[SimulationConfig]:
    """Every run to make, MCFL first then the baselines, without duplicates."""
    runs: dict[str, SimulationConfig] = {}
    for path in sorted(scenarios.glob("*.toml")):
        config = load_config(path, {})
        if only and config.name not in only:
            continue
        if published:
            config = config.published_size()
        for run in (config, baseline_of(config)):
            previous = runs.get(run.name)
            if previous is not None and asdict(previous) != asdict(run):
                raise click.ClickException(
                    f"two scenarios define different runs named {run.name!r}"
                )
            runs[run.name] = run
    return list(runs.values())


@click.command()
@click.option(
    "--scenarios",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("scenarios/paper"),
    show_default=True,
    help="Folder of scenario files.",
)
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("runs/experiments"),
    show_default=True,
    help="One run directory per run is made here.",
)
@click.option(
    "--published-size",
    is_flag=True,
    help="38 trainers, 102 rounds, 2 epochs, all samples (days on 2 cores).",
)
@click.option("--only", multiple=True, help="Run only these scenario names (repeatable).")
def main(scenarios: Path, out: Path, published_size: bool, only: tuple[str, ...]) -> None:
    """Run every scenario and its FedAvg baseline; skip runs already finished."""
    console = Console()
    runs = campaign(scenarios, published_size, only)
    if not runs:
        raise click.ClickException(f"no scenario in {scenarios} matches {list(only)}")
    started = time.monotonic()
    for index, config in enumerate(runs, 1):
        run_dir = out / config.name
        if (run_dir / "summary.json").exists():
            console.print(f"[{index}/{len(runs)}] {config.name}: done before, skipped")
            continue
        if run_dir.exists():
            # An interrupted run: its trainers' metrics would mix with the new ones.
            console.print(f"{config.name}: removing the unfinished run in {run_dir}")
            shutil.rmtree(run_dir)
        console.rule(f"[{index}/{len(runs)}] {config.name}")
        summary = run_simulation(config, run_dir, console)
        console.print(f"{config.name}: {summary['seconds']:.0f} s")
    console.print(
        f"campaign finished in {time.monotonic() - started:.0f} s; "
        f"now run: python scripts/report_results.py --runs {out}"
    )


if __name__ == "__main__":
    main()
