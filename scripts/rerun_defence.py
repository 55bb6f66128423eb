"""Runs of a declared defence matrix again at another learning rate (exploratory).

The declared defence benchmark (``scripts/bench_adversaries.py``, ``docs/results/defence-v3.toml``)
runs every method with the scenario file's optimiser: SGD at lr 0.05, momentum 0.9. Some
of its 40 % runs end with one honest trainer at chance. This script asks whether that is
the optimiser: it makes the runs whose names match ``--select`` (shell patterns over the
declared matrix's run names, e.g. ``'groups-mcfl-plus-sybil0.4*'``) again with ``--lr``,
everything else as declared (same seeds, placements, options and engine), into
``runs/<declaration stem>-lr<lr>`` with records in ``results/<declaration stem>-lr<lr>``
(finished runs are skipped, so it resumes). It then prints, for every attacked run with
a record at both learning rates and its clean run at both, the worst honest trainer's
accuracy and its drop against the same seed's clean run, and per attack and placement
the mean drop over seeds, as the declared table computes it.

Nothing here is declared: it is a diagnosis, not the benchmark's verdict, and the
declared table (``docs/results/defence-v3.md``) stays the one the issue is judged on.

Usage: python scripts/rerun_defence.py --lr 0.01 --select 'groups-mcfl-plus-sybil0.4*'
       --select 'groups-*-clean-*' [--report-only]
"""

from __future__ import annotations

import dataclasses
import fnmatch
import statistics
from collections import defaultdict
from pathlib import Path

import click
from rich.console import Console

from mcfl_chain.simulation import adversarial, experiment
from mcfl_chain.simulation import defence_benchmark as declared
from mcfl_chain.simulation.attack_benchmark import (
    CLEAN,
    Record,
    Run,
    finished,
    keep_record,
    read_records,
)


def worst_and_drop(found: dict[str, tuple[Run, Record]], run: Run) -> tuple[float, float] | None:
    """(worst honest accuracy, its drop against the same seed's clean run), in points,
    from the records ``found``; None where either record is missing."""
    if run.name not in found or run.clean not in found:
        return None
    attacked, clean = found[run.name][1].honest, found[run.clean][1].honest
    return 100 * attacked.worst, adversarial.drop_points(clean, attacked)[0]


def local_worst(found: dict[str, tuple[Run, Record]], run: Run, comparator: str) -> str:
    """Clean ``comparator``'s worst accuracy over ``run``'s honest trainers, or "–"."""
    alone = found.get(dataclasses.replace(run, method=comparator).clean)
    if alone is None:
        return "–"
    attacked = found[run.name][1].honest.accuracies
    return f"{100 * min(alone[1].honest.accuracies[k] for k in attacked):.1f} %"


@click.command(help=__doc__.split("\n\n")[0])
@click.option(
    "--lr",
    type=click.FloatRange(min=0, min_open=True),
    required=True,
    help="The learning rate the selected runs are made with.",
)
@click.option(
    "--select",
    "patterns",
    multiple=True,
    required=True,
    help="Shell pattern over the declared run names (repeatable); include the "
    "clean runs ('groups-*-clean-*') to get drops.",
)
@click.option(
    "--declaration",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=Path("docs/results/defence-v3.toml"),
    show_default=True,
    help="The declared matrix whose runs are made again.",
)
@click.option(
    "--scenarios",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    default=Path("scenarios/paper"),
    show_default=True,
    help="Scenario files.",
)
@click.option("--report-only", is_flag=True, help="Print the comparison; run nothing.")
def main(
    lr: float, patterns: tuple[str, ...], declaration: Path, scenarios: Path, report_only: bool
) -> None:
    console = Console()
    decl = declared.Declaration.load(declaration)
    planned = declared.plan(decl, scenarios, None, None)
    chosen = [r for r in planned if any(fnmatch.fnmatch(r.name, p) for p in patterns)]
    if not chosen:
        raise click.ClickException(f"no run of {declaration.name} matches {list(patterns)}")
    stem = f"{declaration.stem}-lr{lr:g}"
    out, records = Path("runs") / stem, Path("results") / stem
    runs = [
        dataclasses.replace(
            r, config=dataclasses.replace(r.config, lr=lr, name=f"{r.name}-lr{lr:g}")
        )
        for r in chosen
    ]
    if not report_only:
        todo = [r for r in runs if not finished(r, out, records)]
        console.print(f"{len(todo)} of {len(runs)} runs to make at lr {lr:g} in {out}")
        experiment.execute(
            todo,
            out,
            console,
            keep=lambda run, run_dir: keep_record(run, out, records),
            kinds=lambda run: ((run.method, run.attack == CLEAN), run.method),
            finished=experiment.progress(runs, out).finished,
        )
    found = (read_records(Path("results") / declaration.stem), read_records(records))
    drops: dict[tuple[str, str], list[tuple[float, float]]] = defaultdict(list)
    console.print(
        "worst honest trainer (its drop against the same seed's clean run; clean local "
        f"training's worst over the same trainers), declared lr vs lr {lr:g}:"
    )
    for run in runs:
        if run.attack == CLEAN:
            continue
        before, after = (worst_and_drop(records_of, run) for records_of in found)
        if before is None or after is None:
            continue
        drops[run.attack, run.placement].append((before[1], after[1]))
        local = [local_worst(records_of, run, decl.comparator) for records_of in found]
        console.print(
            f"  {run.name}: {before[0]:.1f} % ({before[1]:+.1f}; local {local[0]}) vs "
            f"{after[0]:.1f} % ({after[1]:+.1f}; local {local[1]})"
        )
    for (attack, placement), pairs in sorted(drops.items()):
        console.print(
            f"{attack} {placement}: mean drop {statistics.mean(d for d, _ in pairs):.1f} pts "
            f"at the declared lr, {statistics.mean(r for _, r in pairs):.1f} at lr {lr:g} "
            f"({len(pairs)} seeds)"
        )


if __name__ == "__main__":
    main()
