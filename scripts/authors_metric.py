"""The MCFL authors' metric next to ours, on finished runs (issue 36, item 4).

For each run directory given: per round, the mean over honest trainers of our figure (the
deployed model on the held-out test split) and of the authors' (the best candidate of
the round, each scored on a fresh draw with replacement of the trainer's test split,
averaged over ``--draws`` repetitions; also the best on the split as it is, to separate
the maximum from the redrawing).
Where the runs hold MCFL and a baseline on the same scenario and seed, it pairs them and
prints MCFL − baseline under both metrics: whether the authors' metric makes a gap that
ours does not (the paper's IID table: MCFL 99.2 % against FedAvg 98.2 %, +1.0 point).

It reads only the run directories (see :mod:`mcfl_chain.simulation.authors_metric`), so
the runs must keep their blobs. ``--record FILE`` appends one JSON line per run. Last
line: ``authors' metric, MCFL − BASELINE on SCENARIO at round R: ours X, authors' Y
(best on the fixed split Z), N seeds`` for the first scenario paired (iid if present).

Usage: python scripts/authors_metric.py RUN_DIR... [--baseline fedavg] [--record FILE]
"""

from __future__ import annotations

import datetime
import json
from pathlib import Path

import click
from rich.console import Console
from rich.progress import track
from rich.table import Table

from mcfl_chain.simulation.authors_metric import DRAWS, RunFigures, gaps, run_figures, summary


def _row(run: RunFigures, round_: int) -> list[str]:
    scale, unit = (100.0, "%") if run.kind == "classifier" else (1.0, " MSE")
    figures = [f"{scale * run.mean(round_, w):.4g}{unit}" for w in ("ours", "fixed", "redrawn")]
    candidates = max(f.candidates for f in run.rounds[round_].values())
    return [run.scenario, run.strategy, str(run.seed), str(round_), *figures, str(candidates)]


@click.command()
@click.argument(
    "runs", nargs=-1, required=True, type=click.Path(file_okay=False, exists=True, path_type=Path)
)
@click.option("--baseline", default="fedavg", show_default=True, help="Paired against MCFL.")
@click.option(
    "--round",
    "round_",
    default=-1,
    show_default=True,
    help="The round compared (-1: each pair's last).",
)
@click.option(
    "--draws",
    default=DRAWS,
    show_default=True,
    type=click.IntRange(1),
    help="Repetitions of the authors' redrawn test averaged per trainer and round.",
)
@click.option(
    "--record",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Append one JSON line per run (every round's means) to this file.",
)
def main(
    runs: tuple[Path, ...], baseline: str, round_: int, draws: int, record: Path | None
) -> None:
    """Recompute the MCFL authors' metric on finished runs, next to ours."""
    console = Console()
    measured: list[RunFigures] = []
    for run_dir in track(runs, description="scoring every candidate", console=console):
        try:
            figures = run_figures(run_dir, None if round_ == -1 else [round_], draws)
        except (FileNotFoundError, ValueError) as exc:
            raise click.ClickException(str(exc)) from exc
        except KeyError as exc:
            raise click.ClickException(f"{run_dir}: a record lacks {exc}") from exc
        if not figures.rounds:
            raise click.ClickException(f"{run_dir}: no round with both metrics and candidates")
        measured.append(figures)
        if record is not None:
            config = json.loads((run_dir / "config.json").read_text())
            line = {
                "run": str(run_dir),
                "scenario": figures.scenario,
                "strategy": figures.strategy,
                "seed": figures.seed,
                "engine": config.get("engine"),
                "device": config.get("device"),
                "draws": draws,
                "measured": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
                "rounds": {
                    r: {w: figures.mean(r, w) for w in ("ours", "fixed", "redrawn")}
                    for r in sorted(figures.rounds)
                },
            }
            with record.open("a") as out:
                out.write(json.dumps(line) + "\n")

    table = Table(title="Per run, mean over honest trainers")
    for column in ("scenario", "method", "seed", "round", "ours", "best, fixed split"):
        table.add_column(column)
    table.add_column("best, redrawn (authors')")
    table.add_column("candidates")
    for run in measured:
        table.add_row(*_row(run, run.last if round_ == -1 else round_))
    console.print(table)

    paired = gaps(measured, baseline=baseline, round_=round_)
    if not paired:
        console.print(f"No MCFL run is paired with a {baseline} run of the same scenario and seed.")
        return
    table = Table(title=f"MCFL − {baseline}, paired by seed (points of accuracy; MSE as is)")
    for column in ("scenario", "round", "seeds", "ours", "authors' (redrawn)", "best, fixed"):
        table.add_column(column)
    for gap in paired:
        means = summary(gap)
        table.add_row(
            gap.scenario,
            str(gap.round),
            ", ".join(map(str, gap.seeds)),
            " ".join(f"{v:+.2f}" for v in gap.ours) + f" (mean {means['ours']:+.2f})",
            " ".join(f"{v:+.2f}" for v in gap.redrawn) + f" (mean {means['redrawn']:+.2f})",
            " ".join(f"{v:+.2f}" for v in gap.fixed) + f" (mean {means['fixed']:+.2f})",
        )
    console.print(table)
    head = next((g for g in paired if g.scenario == "iid"), paired[0])
    means = summary(head)
    console.print(
        f"authors' metric, MCFL − {baseline} on {head.scenario} at round {head.round}: "
        f"ours {means['ours']:+.2f}, authors' {means['redrawn']:+.2f} (best on the fixed "
        f"split {means['fixed']:+.2f}), {len(head.seeds)} seeds",
        soft_wrap=True,
    )


if __name__ == "__main__":
    main()
