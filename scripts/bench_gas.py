"""Gas benchmark of the MCFL contracts on a real EVM (Anvil), next to the thesis' figures.

Prints the gas of each call, the gas per trainer per round in a 10-trainer round (every
trainer proposes one update of the same parent, all aggregate the same 10 updates, all
vote in both phases), and `aggregate` for 1, 10, 100 and 256 updates. Gas is execution
gas: receipt.gasUsed - 21,000 (calldata included), as the thesis reports it.

    .venv/bin/python scripts/bench_gas.py                    # print the figures
    .venv/bin/python scripts/bench_gas.py --write-snapshot   # also refresh the snapshot

The last line reads `per-trainer-round gas ratio vs thesis: R`.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from mcfl_chain._utils.process import free_port
from mcfl_chain.chain.client import connect
from mcfl_chain.chain.devnet import start_devnet, stop_devnet
from mcfl_chain.chain.gas import (
    THESIS_AGGREGATE,
    THESIS_PER_TRAINER_ROUND,
    THESIS_PROPOSE,
    THESIS_VOTE,
    fake_cid,
    measure_aggregate_sizes,
    measure_round_gas,
)

SNAPSHOT = Path(__file__).resolve().parent.parent / "tests" / "contracts" / "gas-snapshot.json"


@click.command()
@click.option(
    "--write-snapshot",
    is_flag=True,
    help=f"Write the figures to {SNAPSHOT.relative_to(SNAPSHOT.parents[2])}, which "
    "the test suite compares against.",
)
@click.option(
    "--trainers",
    type=click.IntRange(min=2),
    default=10,
    show_default=True,
    help="Trainers in the measured round.",
)
def main(write_snapshot: bool, trainers: int) -> None:
    """Measure the gas of every protocol call on a throw-away Anvil devnet."""
    console = Console()
    with tempfile.TemporaryDirectory() as state_dir:
        start_devnet(
            Path(state_dir),
            free_port(),
            genesis_cid=fake_cid("genesis"),
            min_trainers=1,
            accounts=1,
        )
        try:
            w3 = connect(f"http://127.0.0.1:{_port(Path(state_dir))}")
            with console.status("measuring a round of trainers..."):
                report = measure_round_gas(w3, trainers)
            with console.status("measuring aggregations of up to 256 updates..."):
                report.aggregate_by_size = measure_aggregate_sizes(w3)
        finally:
            stop_devnet(Path(state_dir))
    calls = Table(title="Gas per call (receipt.gasUsed - 21,000)")
    calls.add_column("call")
    calls.add_column("gas", justify="right")
    for name, gas in report.calls.items():
        calls.add_row(name, f"{gas:,}")
    console.print(calls)
    per = Table(title=f"Per trainer and round ({trainers} trainers, steady state)")
    for column in ("step", "this project", "thesis"):
        per.add_column(column, justify="right" if column != "step" else "left")
    thesis = {
        "propose": THESIS_PROPOSE,
        "finishProposals": 0,
        "aggregate": THESIS_AGGREGATE,
        "nextRound": THESIS_VOTE,
        "total": THESIS_PER_TRAINER_ROUND,
    }
    for step, gas in report.per_trainer_round.items():
        per.add_row(step, f"{gas:,}", f"{thesis[step]:,}" if thesis[step] else "-")
    console.print(per)
    sizes = Table(title="aggregate by number of updates")
    sizes.add_column("updates")
    sizes.add_column("gas", justify="right")
    for size, gas in report.aggregate_by_size.items():
        sizes.add_row(size, f"{gas:,}")
    console.print(sizes)
    if write_snapshot:
        SNAPSHOT.write_text(json.dumps(report.as_dict(), indent=2) + "\n")
        console.print(f"snapshot written to {SNAPSHOT}")
    print(f"per-trainer-round gas ratio vs thesis: {report.ratio:.3f}")


def _port(state_dir: Path) -> int:
    return int(json.loads((state_dir / "anvil.json").read_text())["port"])


if __name__ == "__main__":
    main()
