"""What each simulator engine costs, from 10 to 1,000 trainers.

For every size and engine asked for, runs a real network (Anvil, the contracts, the
embedded store, every trainer's two transactions a round) of LeNet-5 trainers on
Fashion-MNIST's `groups` scenario and records:

- the round time: the median of rounds 2 to 4 (round 0 pays the start-up, round 1 the
  first merges) of the slowest trainer's round (from its report of the round before),
  and of the round's wall time (from the last report of the round before to its own
  last: in a cohort network a trainer drawn in two rounds in a row can report the first
  early and the second late, so its own round spans more than one), and the time split
  of a trainer's round (training, evaluation,
  aggregation, chain, storage, waiting; under the batched engine a trainer's
  "training" includes its wait for the phase's batch);
- the peak RSS of every process of the run (this script, Anvil, the workers or the
  host), sampled every half second;
- the gas per trainer-round (every transaction the trainers sent, over the rounds);
- the final accuracy (average and worst trainer, on their own test splits).

Shares: 1,500 samples per trainer up to 38 trainers (1,050 trained on, the paper's
order), at most 300 above (210 trained on; `groups` shares each group's images among its
trainers, so 1,000 trainers get 63-84 each). Above 200 trainers a round draws a cohort of
100 trainers on average (``--cohort``, like Flower's ``fraction_fit``): the updates on
one parent must fit an aggregation of the contracts (256).
The process engine is not run above 60 trainers on a 24 GiB machine (about 330 MB a
worker process): such rows say so instead of a figure.

Records are appended to ``results/bench-engine.jsonl`` (one line a run, with the
engine, device, machine and commit that made it); a size and engine already recorded is
not run again unless ``--again``. ``--report-only`` prints the table from the records.
The last line is ``MCFL round at 38 trainers: X s batched vs Y s process (R x); largest
network on this machine: N trainers``.

Usage: python scripts/bench_engine.py [--sizes 10,38,200,1000] [--engines batched,process]
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click
import psutil
import torch
from rich.console import Console
from rich.table import Table

from mcfl_chain._utils.provenance import source_commit
from mcfl_chain.simulation.engines.batched import default_hosts
from mcfl_chain.simulation.experiment import JsonLines
from mcfl_chain.simulation.runner import SimulationConfig, run_simulation

ROOT = Path(__file__).resolve().parents[1]
RECORDS = ROOT / "results" / "bench-engine.jsonl"
PROCESS_LIMIT = 60
"""Most trainers the process engine is run with here (about 330 MB a worker)."""


class PeakRSS:
    """The peak of the summed RSS of this process and all its descendants."""

    def __init__(self, interval: float = 0.5) -> None:
        self.interval = interval
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def __enter__(self) -> PeakRSS:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()

    def _sample(self) -> None:
        me = psutil.Process()
        while not self._stop.is_set():
            total = 0
            for proc in [me, *me.children(recursive=True)]:
                try:
                    total += proc.memory_info().rss
                except psutil.Error:
                    pass  # ended between the listing and the reading
            self.peak = max(self.peak, total)
            self._stop.wait(self.interval)


def _samples(trainers: int) -> int:
    return 1500 if trainers <= 38 else 300


COHORT_ABOVE = 200
"""Above this many trainers a round draws a cohort (PROTOCOL §4, "Cohorts"): the updates
on one parent must fit an aggregation (``MAX_UPDATES``, 256)."""
COHORT_DRAWN = 100
"""Trainers drawn for a round, on average, in those networks."""


def _cohort(trainers: int) -> float:
    return 1.0 if trainers <= COHORT_ABOVE else COHORT_DRAWN / trainers


def _machine() -> str:
    """This machine, as its records name it (the report compares runs of one machine)."""
    gpu = f", {torch.cuda.get_device_name(0)}" if torch.cuda.is_available() else ""
    return f"{os.cpu_count()} cores, {psutil.virtual_memory().total / 2**30:.0f} GiB{gpu}"


def _device_type(name: str) -> str:
    """``cpu`` or ``cuda``: what ``auto`` stands for here, else the name given."""
    if name != "auto":
        return name
    return "cuda" if torch.cuda.is_available() else "cpu"


def measure(
    trainers: int,
    engine: str,
    strategy: str,
    rounds: int,
    device: str,
    out: Path,
    console: Console,
    hosts: int | None = None,
) -> dict[str, Any]:
    """Run one network and return its record."""
    config = SimulationConfig(
        name=f"bench-{strategy}-{engine}-{trainers}",
        dataset="fashion-mnist",
        scenario="groups",
        n_trainers=trainers,
        rounds=rounds,
        samples=_samples(trainers),
        cohort=_cohort(trainers),
        arch="lenet5",
        strategy=strategy,
        engine=engine,
        device=device,
        hosts=hosts if engine == "batched" else None,
        phase_duration=3600,
    )
    run_dir = out / config.name
    # A scratch folder: what an earlier (interrupted) run left there would be read as
    # this run's rounds.
    shutil.rmtree(run_dir, ignore_errors=True)
    started = time.monotonic()
    with PeakRSS() as rss:
        summary = run_simulation(config, run_dir, Console(quiet=True))
    wall = time.monotonic() - started
    measured = [r for r in summary["rounds"] if 2 <= r["round"] <= 4] or summary["rounds"][-1:]
    split_total: dict[str, float] = {}
    for r in measured:
        for name, seconds in r["split"].items():
            split_total[name] = split_total.get(name, 0.0) + seconds
    spent = sum(split_total.values()) or 1.0
    lines = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    gas = [line["gas"] for line in lines if line.get("round", 0) >= 1]
    ends: dict[int, float] = {}
    for line in lines:
        ends[line["round"]] = max(ends.get(line["round"], 0.0), float(line.get("time", 0.0)))
    walls = [ends[r] - ends[r - 1] for r in (2, 3, 4) if r in ends and r - 1 in ends]
    final = summary["final"]
    resolved = _device_type(device)
    return {
        "trainers": trainers,
        "engine": engine,
        "device": resolved,
        "hosts": len(list(run_dir.glob("host-*.json"))) or None,
        "strategy": strategy,
        "samples": config.samples,
        "cohort": config.cohort,
        "rounds": rounds,
        "round_s": statistics.median(r["seconds"] for r in measured),
        "round_wall_s": statistics.median(walls) if walls else None,
        "split": {name: seconds / spent for name, seconds in split_total.items()},
        "peak_rss_mb": rss.peak / 2**20,
        "gas_per_trainer_round": statistics.fmean(gas) if gas else None,
        "final_avg": final["metric_avg"],
        "final_min": final["metric_min"],
        "wall_s": wall,
        "machine": _machine(),
        "torch": torch.__version__,
        "commit": source_commit(ROOT),
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "run_dir": str(run_dir),
    }


Key = tuple[str, int, str, str, int | None]
"""(strategy, trainers, engine, device, hosts) of a record."""


def _key(record: dict[str, Any]) -> Key:
    return (
        record["strategy"],
        record["trainers"],
        record["engine"],
        record["device"],
        record.get("hosts"),
    )


def report(
    records: list[dict[str, Any]],
    console: Console,
    machine: str | None = None,
    device: str = "cpu",
) -> str:
    """Print the table of the newest record of each (strategy, size, engine, device,
    hosts) made on ``machine`` (None: this one); return the last line, the 38-trainer
    MCFL rounds of the batched engine on ``device`` and of the process engine."""
    machine = machine or _machine()
    newest: dict[Key, dict[str, Any]] = {}
    for record in records:
        if record.get("machine") == machine:
            newest[_key(record)] = record
    table = Table(title=f"simulator engines (LeNet-5, Fashion-MNIST groups) on {machine}")
    for column in (
        "strategy",
        "trainers",
        "engine",
        "device",
        "hosts",
        "samples",
        "drawn",
        "round s",
        "wall s",
    ):
        table.add_column(column, justify="right")
    for column in ("outside train+eval", "peak RSS MB", "MB/trainer", "gas/trainer-round"):
        table.add_column(column, justify="right")
    table.add_column("final avg / worst", justify="right")
    for (strategy, n, engine, _, _), r in sorted(
        newest.items(), key=lambda kv: (*kv[0][:4], kv[0][4] or 0)
    ):
        split = r["split"]
        outside = 1.0 - split.get("training", 0.0) - split.get("evaluation", 0.0)
        gas = r["gas_per_trainer_round"]
        table.add_row(
            strategy,
            str(n),
            engine,
            r["device"],
            "-" if r.get("hosts") is None else str(r["hosts"]),
            str(r["samples"]),
            f"{r.get('cohort', 1.0):.0%}",
            f"{r['round_s']:.1f}",
            "-" if r.get("round_wall_s") is None else f"{r['round_wall_s']:.1f}",
            f"{100 * outside:.1f} %",
            f"{r['peak_rss_mb']:.0f}",
            f"{r['peak_rss_mb'] / n:.1f}",
            "-" if gas is None else f"{gas:,.0f}",
            f"{r['final_avg']:.3f} / {r['final_min']:.3f}",
        )
    console.print(table)

    def fastest(engine: str, on: str) -> dict[str, Any] | None:
        """The fastest 38-trainer MCFL record of ``engine`` on ``on`` (any host count)."""
        rows = [r for k, r in newest.items() if k[:4] == ("mcfl", 38, engine, on)]
        return min(rows, key=lambda r: r["round_s"], default=None)

    batched = fastest("batched", device)
    process = fastest("process", "cpu")
    x = f"{batched['round_s']:.1f}" if batched else "n/a"
    y = f"{process['round_s']:.1f}" if process else "n/a"
    ratio = f"{process['round_s'] / batched['round_s']:.1f}" if batched and process else "n/a"
    largest = max((k[1] for k in newest), default=0)
    return (
        f"MCFL round at 38 trainers: {x} s batched vs {y} s process ({ratio} x); "
        f"largest network on this machine: {largest} trainers"
    )


@click.command()
@click.option(
    "--sizes", default="10,38,200,1000", show_default=True, help="Trainers, comma-separated."
)
@click.option("--engines", default="batched,process", show_default=True, help="Engines to run.")
@click.option(
    "--strategy",
    "strategies",
    multiple=True,
    default=("mcfl",),
    show_default=True,
    help="mcfl, fedavg (repeatable).",
)
@click.option("--rounds", default=5, show_default=True, help="Rounds per run (2-4 are measured).")
@click.option("--device", type=click.Choice(["auto", "cpu", "cuda"]), default="cpu")
@click.option(
    "--hosts",
    type=click.IntRange(min=1),
    help="The batched engine's host processes (simulate --hosts).  [default: one per core "
    "on the CPU, one per 4 cores on a GPU]",
)
@click.option(
    "--records",
    type=click.Path(dir_okay=False, path_type=Path),
    default=RECORDS,
    show_default=True,
    help="JSON-lines file the runs are appended to.",
)
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=ROOT / "runs" / "bench-engine",
    show_default=True,
    help="Where the run directories go.",
)
@click.option("--again", is_flag=True, help="Run sizes already recorded again.")
@click.option("--report-only", is_flag=True, help="Print the table from the records; run none.")
def main(
    sizes: str,
    engines: str,
    strategies: tuple[str, ...],
    rounds: int,
    device: str,
    hosts: int | None,
    records: Path,
    out: Path,
    again: bool,
    report_only: bool,
) -> None:
    """Run the engine benchmark and print its table (see the module docstring)."""
    console = Console()
    if not report_only:
        try:
            wanted = [int(n) for n in sizes.split(",") if n.strip()]
        except ValueError as exc:
            raise click.BadParameter(f"--sizes takes integers: {exc}") from exc
        machine = _machine()
        resolved = _device_type(device)
        # A batched record counts as done for the host count asked (or the default's;
        # records older than the option hold none and ran the default).
        done = {
            (r["strategy"], r["trainers"], r["engine"], r["device"], r.get("hosts"))
            for r in JsonLines(records).load()
            if r.get("machine") == machine
        }
        for strategy in strategies:
            for n in wanted:
                for engine in [e.strip() for e in engines.split(",") if e.strip()]:
                    on = resolved if engine != "process" else "cpu"
                    count = None
                    if engine == "batched":
                        default = default_hosts(os.cpu_count() or 1, on == "cpu")
                        count = min(n, hosts or default)
                    recorded = (strategy, n, engine, on, count) in done or (
                        hosts is None and (strategy, n, engine, on, None) in done
                    )
                    if recorded and not again:
                        console.print(f"{strategy} {n} {engine}: recorded already (--again)")
                        continue
                    if engine == "process" and n > PROCESS_LIMIT:
                        console.print(
                            f"{strategy} {n} {engine}: not run, about 330 MB a worker process "
                            f"does not fit {n} trainers in this machine's memory"
                        )
                        continue
                    console.print(f"{strategy} {n} {engine}: running {rounds} rounds ...")
                    record = measure(
                        n,
                        engine,
                        strategy,
                        rounds,
                        device if engine != "process" else "cpu",
                        out,
                        console,
                        hosts=hosts,
                    )
                    JsonLines(records).append(record)
                    console.print(
                        f"  {record['round_s']:.1f} s a round, peak "
                        f"{record['peak_rss_mb']:.0f} MB, final avg {record['final_avg']:.3f}"
                    )
    click.echo(report(JsonLines(records).load(), console, device=_device_type(device)))


if __name__ == "__main__":
    main()
