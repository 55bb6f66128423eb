"""Runs of a declared defence matrix again with another learning rate or defence
option (exploratory).

The declared defence benchmark (``scripts/bench_adversaries.py``, by default
``docs/results/defence-v5.toml``) runs every method with the scenario file's optimiser
(SGD at lr 0.05, momentum 0.9) and the defence with its declared options. Some of its
runs at 40 % end with one honest trainer at chance. This script asks what changes that: it
makes the runs whose names match ``--select`` (shell patterns over the declared matrix's
run names, e.g. ``'groups-mcfl-plus-sybil0.4*'``) again with ``--lr`` (every selected
run) and/or ``--option NAME=VALUE`` (the defence's runs only; MCFL-plus's options, e.g.
``plus_chance=on``), everything else as declared (same seeds, placements, options and
engine), into ``runs/<declaration stem><variant>`` with records in
``results/<declaration stem><variant>``, the variant being ``-lr<lr>`` then
``-<name>-<value>`` per option (finished runs are skipped, so it resumes). Without
``--lr``, the comparator's runs are the declared ones and are not made again. It then
prints, for every attacked run with a record in both campaigns and its clean run in
both, the worst honest trainer's accuracy and its drop against the same seed's clean
run, and per attack and placement the mean drop over seeds, as the declared table
computes it. It says first which CPU kernels each side's records computed with: a
batched run repeats bit for bit only on one CPU type, so a comparison across types (or
with records made before the type was kept) mixes the option's effect with the CPU's.

Nothing here is declared: it is a diagnosis, not the benchmark's verdict, and the
declared table (the declaration's, e.g. ``docs/results/defence-v5.md``) stays the one
the issue is judged on.

Usage: python scripts/rerun_defence.py --lr 0.01 --select 'groups-mcfl-plus-sybil0.4*'
       --select 'groups-*-clean-*' [--option plus_chance=on] [--report-only]
"""

from __future__ import annotations

import dataclasses
import fnmatch
import statistics
from collections import defaultdict
from pathlib import Path

import click
from rich.console import Console

from mcfl_chain.cli._campaign_options import REPORT_ONLY, SCENARIOS, UNTIL, parse_option
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


def cpu_types(found: dict[str, tuple[Run, Record]], names: set[str]) -> str:
    """The CPU kernels (:attr:`Record.cpu_capability`) the records of ``names`` in
    ``found`` computed with, e.g. "AVX2" or "AVX2, unrecorded"; "none" without records."""
    return adversarial.cpu_kinds(found[n][1].cpu_capability for n in names if n in found)


@click.command(help=__doc__.split("\n\n")[0])
@click.option(
    "--lr",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help="The learning rate the selected runs are made with (default: the declared one).",
)
@click.option(
    "--option",
    "options",
    multiple=True,
    help="NAME=VALUE: a defence option set for the defence's runs (repeatable), e.g. "
    "plus_chance=on.",
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
    default=declared.DECLARATION,
    show_default=True,
    help="The declared matrix whose runs are made again.",
)
@SCENARIOS
@UNTIL
@REPORT_ONLY
def main(
    lr: float | None,
    options: tuple[str, ...],
    patterns: tuple[str, ...],
    declaration: Path,
    scenarios: Path,
    until: float | None,
    report_only: bool,
) -> None:
    console = Console()
    changes = [parse_option(text) for text in options]
    if lr is None and not changes:
        raise click.UsageError("give --lr, --option or both: there is nothing to change")
    decl = declared.Declaration.load(declaration)
    planned = declared.plan(decl, scenarios, None, None)
    chosen = [r for r in planned if any(fnmatch.fnmatch(r.name, p) for p in patterns)]
    if lr is None:  # the comparator's runs would be the declared ones, bit for bit
        chosen = [r for r in chosen if r.method == decl.defence]
    if not chosen:
        raise click.ClickException(f"no run of {declaration.name} matches {list(patterns)}")
    variant = ("" if lr is None else f"-lr{lr:g}") + "".join(f"-{n}-{v}" for n, v in changes)
    label = ", ".join([*([] if lr is None else [f"lr {lr:g}"]), *(f"{n} {v}" for n, v in changes)])
    stem = f"{declaration.stem}{variant}"
    out, records = Path("runs") / stem, Path("results") / stem

    def changed(run: Run) -> Run:
        fields: dict[str, object] = {"name": f"{run.name}{variant}"}
        if lr is not None:
            fields["lr"] = lr
        if run.method == decl.defence:
            fields.update(changes)
        try:
            return dataclasses.replace(run, config=dataclasses.replace(run.config, **fields))
        except TypeError as exc:
            raise click.BadParameter(
                f"{exc}: not an option of the runs", param_hint="--option"
            ) from exc

    runs = [changed(r) for r in chosen]
    if not report_only:
        todo = [r for r in runs if not finished(r, out, records)]
        console.print(f"{len(todo)} of {len(runs)} runs to make with {label} in {out}")
        experiment.execute(
            todo,
            out,
            console,
            keep=lambda run, run_dir: keep_record(run, out, records),
            kinds=lambda run: ((run.method, run.attack == CLEAN), run.method),
            finished=experiment.progress(runs, out).finished,
            until=until,
        )
    before = read_records(Path("results") / declaration.stem)
    after = read_records(records)
    if lr is None:
        after = {
            **{name: got for name, got in before.items() if got[0].method != decl.defence},
            **after,
        }
    names = {r.name for r in runs} | {r.name for r in chosen}
    kinds = [cpu_types(found, names) for found in (before, after)]
    console.print(f"CPU kernels: declared runs {kinds[0]}; these runs {kinds[1]}")
    if kinds[0] != kinds[1] or "unrecorded" in kinds[0]:
        console.print(
            "  [yellow]a batched run repeats bit for bit only on one CPU type: where these "
            "differ or are unrecorded, a difference below may be the CPU's, not the "
            "option's; remake the declared runs here (--option with the declared value) "
            "to pair them[/]"
        )
    drops: dict[tuple[str, str], list[tuple[float, float]]] = defaultdict(list)
    console.print(
        "worst honest trainer (its drop against the same seed's clean run; clean local "
        f"training's worst over the same trainers), as declared vs with {label}:"
    )
    for run in runs:
        if run.attack == CLEAN:
            continue
        was, now = (worst_and_drop(records_of, run) for records_of in (before, after))
        if was is None or now is None:
            continue
        drops[run.attack, run.placement].append((was[1], now[1]))
        local = [local_worst(records_of, run, decl.comparator) for records_of in (before, after)]
        console.print(
            f"  {run.name}: {was[0]:.1f} % ({was[1]:+.1f}; local {local[0]}) vs "
            f"{now[0]:.1f} % ({now[1]:+.1f}; local {local[1]})"
        )
    for (attack, placement), pairs in sorted(drops.items()):
        console.print(
            f"{attack} {placement}: mean drop {statistics.mean(d for d, _ in pairs):.1f} pts "
            f"as declared, {statistics.mean(r for _, r in pairs):.1f} with {label} "
            f"({len(pairs)} seeds)"
        )


if __name__ == "__main__":
    main()
