"""What a hosted trainer costs in memory: one batched host at two sizes, and the slope.

Runs a real MCFL network (Anvil, the contracts, the local store) of LeNet-5 trainers on
Fashion-MNIST's `groups` scenario under the batched engine with one host
(``threads=1``), once per size, and reads the host's log: its resident memory once its
trainers are built, and its peak when they are done. A trainer's cost is the slope
between the sizes, not a host's total over its trainers, which would count the host's
transients (a chunk's training, a scoring) as each trainer's.

Usage: python scripts/host_memory.py [--sizes 10,38] [--rounds 2] [--samples 600]
"""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

import click
from rich.console import Console

from mcfl_chain.simulation.runner import SimulationConfig, run_simulation

_MEMORY = re.compile(r"(built|done): resident memory (\d+) MB, peak (\d+) MB")


def host_memory(trainers: int, rounds: int, samples: int, out: Path) -> dict[str, int]:
    """Resident MB after the build, and peak MB of the run, of one host of ``trainers``."""
    config = SimulationConfig(
        name=f"host-memory-{trainers}",
        dataset="fashion-mnist",
        scenario="groups",
        n_trainers=trainers,
        rounds=rounds,
        samples=samples,
        arch="lenet5",
        strategy="mcfl",
        engine="batched",
        threads=1,
        phase_duration=3600,
    )
    run_dir = out / config.name
    run_simulation(config, run_dir, Console(quiet=True))
    found = {m[1]: m for m in _MEMORY.finditer((run_dir / "host-0.log").read_text())}
    if set(found) != {"built", "done"}:
        raise click.ClickException(f"{run_dir / 'host-0.log'} has no memory lines")
    return {"built": int(found["built"][2]), "peak": int(found["done"][3])}


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--sizes", default="10,38", show_default=True, help="Trainers, two sizes.")
@click.option("--rounds", default=2, show_default=True)
@click.option("--samples", default=600, show_default=True, help="Samples a trainer.")
def main(sizes: str, rounds: int, samples: int) -> None:
    small, large = sorted(int(n) for n in sizes.split(","))
    with tempfile.TemporaryDirectory(prefix="host-memory-") as tmp:
        figures = {n: host_memory(n, rounds, samples, Path(tmp)) for n in (small, large)}
    for n, f in figures.items():
        print(f"{n} trainers: built {f['built']} MB, peak {f['peak']} MB")
    for key in ("built", "peak"):
        slope = (figures[large][key] - figures[small][key]) / (large - small)
        print(f"{key}: {slope:.1f} MB a trainer")


if __name__ == "__main__":
    main()
