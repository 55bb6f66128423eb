"""Where a round's time goes, for a network at LeNet scale.

Runs a real network (Anvil, contracts, storage, one worker process per trainer, two
transactions per trainer and round) and prints the average split of a trainer's round
between training, evaluation, aggregation, chain, storage and waiting, excluding round
0 (which pays torch's warm-up and the registrations). Default: 10 LeNet-5 trainers on
Fashion-MNIST, 6,000 samples each (4,200 training images after the 70/15/15 split).
The goal: at most 5 % of a round outside training and evaluation. The last line is
``overhead: P% of a round outside training and evaluation``.

Usage: python scripts/bench_round.py [--trainers 10] [--rounds 4] [--samples 6000]
"""

from __future__ import annotations

import json
import statistics
import tempfile
from pathlib import Path

import click
from rich.console import Console

from mcfl_chain.learning.datasets import DatasetError, load_dataset
from mcfl_chain.simulation.runner import SimulationConfig, run_simulation
from mcfl_chain.worker.timing import CATEGORIES


@click.command()
@click.option("--trainers", default=10, show_default=True, help="Number of trainers.")
@click.option("--rounds", default=4, show_default=True, help="Rounds (round 0 is excluded).")
@click.option(
    "--samples",
    default=6000,
    show_default=True,
    help="Samples per trainer (train + validation + test; 70 % are trained on).",
)
@click.option("--epochs", default=2, show_default=True, help="Local epochs per round.")
@click.option("--scenario", default="iid", show_default=True, help="Data partition.")
@click.option("--storage", type=click.Choice(["local", "ipfs"]), default="local", show_default=True)
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Keep the run directory here (default: a temporary one).",
)
def main(
    trainers: int,
    rounds: int,
    samples: int,
    epochs: int,
    scenario: str,
    storage: str,
    out: Path | None,
) -> None:
    """Run a network and print the round-time split."""
    console = Console()
    try:
        load_dataset("fashion-mnist")
        dataset = "fashion-mnist"
    except DatasetError:
        dataset = "digits"
        samples = min(samples, 1797 // trainers)
        console.print("Fashion-MNIST is not installed: using digits (smaller, less telling)")
    config = SimulationConfig(
        name="bench-round",
        dataset=dataset,
        scenario=scenario,
        n_trainers=trainers,
        rounds=rounds,
        epochs=epochs,
        samples=samples,
        storage=storage,
        tolerance=2.0,
    )
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = out or Path(tmp)
        run_simulation(config, run_dir, console)
        lines = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    steady = [line for line in lines if line["round"] > 0]
    seconds = {c: statistics.fmean(line["split"][c] for line in steady) for c in CATEGORIES}
    total = statistics.fmean(line["seconds"] for line in steady)
    seconds["other"] = max(0.0, total - sum(seconds.values()))
    console.print(
        f"\n{trainers} trainers, {dataset}, {samples} samples each, {epochs} epochs, "
        f"storage {storage}; mean per trainer per round over rounds 1..{rounds - 1}:"
    )
    for category in seconds:
        console.print(
            f"  {category:<12} {seconds[category]:8.3f} s  {100 * seconds[category] / total:5.1f}%"
        )
    outside = 1 - (seconds["training"] + seconds["evaluation"]) / total
    console.print(f"  {'round':<12} {total:8.3f} s")
    print(f"overhead: {100 * outside:.1f}% of a round outside training and evaluation")


if __name__ == "__main__":
    main()
