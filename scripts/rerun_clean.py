"""Declared clean runs of MCFL-plus made again with other options (exploratory).

The clean campaign (``docs/results/mcfl-plus-clean.toml``, ``run_experiments.py
--declared mcfl-plus``) ran MCFL-plus with the third defence declaration's options, and
the fourth declared defence (``docs/results/defence-v4.toml``) adds the chance floor
(``plus_chance=on``). This script asks what such a change costs where nobody attacks: it
makes the declared evaluation runs of MCFL-plus whose names match ``--select`` (shell
patterns, e.g. ``'rotation-30-2-mcfl-plus-s10[0-4]'``) again with ``--option NAME=VALUE``,
everything else as declared (scenario file, tolerance rule, the optimiser its sweep
chose, seed, engine), into ``runs/declared-<variant>`` with records in
``results/declared-<variant>``, the variant being ``<name>-<value>`` per option. With
``--remake`` it also makes the declared runs themselves again (``runs/declared-remade``,
``results/declared-remade``), so that both sides of every pair computed on this CPU's
kernels: a batched run repeats bit for bit only on one CPU type, and across types the
same run's worst trainer moved by up to 1.7 points (docs/discussion/mcfl-plus.md).
Finished runs are skipped, so it resumes.

It then prints, per run, the mean and the worst trainer's final accuracy with and
without the change, and per scenario the paired difference over seeds (the mean over
trainers paired by trainer, and the worst trainer), taken against the remade runs where
every selected seed has one and against the declared records otherwise, with the CPU
kernels each side's records name.

Nothing here is declared: the declared table stays the one issue 37 is judged on.

Usage: python scripts/rerun_clean.py --option plus_chance=on
       --select 'rotation-30-2-mcfl-plus-s10[0-2]' [--remake] [--until HH:MM] [--report-only]
"""

from __future__ import annotations

import dataclasses
import fnmatch
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
from rich.console import Console

from mcfl_chain.cli._campaign_options import REPORT_ONLY, SCENARIOS, UNTIL, parse_option
from mcfl_chain.simulation import campaign, experiment, plus_clean, protocol, report, stats, sweep
from mcfl_chain.simulation.adversarial import cpu_capability, cpu_kinds

DECLARED = Path("declared")
"""The declared evaluation's folder under runs/ and results/."""
REMADE = "remade"


def metrics_lines(folder: Path, name: str) -> list[dict[str, Any]]:
    """The metrics lines of run ``name``'s record (or run) in ``folder`` ([] if none)."""
    return report.read_metrics([folder / name / "metrics.jsonl"])


def figures(lines: list[dict[str, Any]]) -> stats.RunFigures | None:
    """A run's final-round figures from its metrics ``lines``."""
    return stats.run_figures(lines) if lines else None


def floor_acts(lines: list[dict[str, Any]]) -> str:
    """What MCFL-plus's chance floor did in a run, from its trainers' last metrics lines
    (totals over the run, ``personal`` labels); "" where they do not say."""
    last = max((line["round"] for line in lines), default=None)
    labels = [line.get("personal") or {} for line in lines if line["round"] == last]
    if not any("chance_set_aside" in got for got in labels):
        return ""
    aside = sum(got.get("chance_set_aside", 0) for got in labels)
    alone = sum(got.get("chance_alone_rounds", 0) for got in labels)
    return f" (the floor set aside {aside} candidates; {alone} trainer-rounds on their own)"


def kernels(folder: Path, names: list[str]) -> str:
    """The CPU kernels the runs ``names`` in ``folder`` computed with."""
    return cpu_kinds(
        cpu_capability(folder / n) for n in names if (folder / n / "summary.json").exists()
    )


@click.command(help=__doc__.split("\n\n")[0])
@click.option(
    "--option",
    "options",
    multiple=True,
    help="NAME=VALUE: an MCFL-plus option set for the selected runs (repeatable), e.g. "
    "plus_chance=on.",
)
@click.option(
    "--select",
    "patterns",
    multiple=True,
    required=True,
    help="Shell pattern over the declared MCFL-plus evaluation runs' names (repeatable), "
    "e.g. 'groups-mcfl-plus-s10[0-4]'.",
)
@click.option(
    "--remake",
    is_flag=True,
    help="Also make the selected declared runs again, unchanged, on this machine, so that "
    "each pair computed on one CPU type.",
)
@SCENARIOS
@UNTIL
@REPORT_ONLY
def main(
    options: tuple[str, ...],
    patterns: tuple[str, ...],
    remake: bool,
    scenarios: Path,
    until: float | None,
    report_only: bool,
) -> None:
    console = Console()
    changes = [parse_option(text) for text in options]
    if not changes:
        raise click.UsageError("give --option: there is nothing to change")
    declaration = protocol.load_protocol(protocol.PROTOCOL)
    plus = plus_clean.load_plus_clean(plus_clean.PLUS_CLEAN)
    tuned = sweep.load_tuned(plus_clean.PLUS_TUNED)
    plan = plus_clean.evaluation_plan(plus, declaration, campaign.load_scenarios(scenarios), tuned)
    chosen = [
        # As the declared runs were made: the batched engine, on the CPU.
        dataclasses.replace(r, config=dataclasses.replace(r.config, engine="batched", device="cpu"))
        for r in plan.runs
        if any(fnmatch.fnmatch(r.name, p) for p in patterns)
    ]
    if not chosen:
        raise click.ClickException(
            f"no declared MCFL-plus evaluation run matches {list(patterns)} (names such as "
            f"{plan.runs[0].name if plan.runs else 'groups-mcfl-plus-s100'})"
        )
    variant = "-".join(f"{n}-{v}" for n, v in changes)
    label = ", ".join(f"{n} {v}" for n, v in changes)
    declared_records = Path("results") / DECLARED
    for run in chosen:  # the declared record must be the run remade here, option for option
        recorded = experiment.recorded_config(declared_records / run.name)
        differences = (
            [] if recorded is None else experiment.same_run_differences(recorded, run.config)
        )
        if differences:
            raise click.ClickException(
                f"{run.name}'s declared record was made with {', '.join(differences)}: the "
                "plan no longer makes that run, so nothing here would pair with it"
            )

    def renamed(run: campaign.PlannedRun, suffix: str, **fields: object) -> campaign.PlannedRun:
        name = f"{run.name}-{suffix}"
        try:
            config = dataclasses.replace(run.config, name=name, **fields)  # type: ignore[arg-type]
        except TypeError as exc:
            raise click.BadParameter(
                f"{exc}: not an option of MCFL-plus", param_hint="--option"
            ) from exc
        return dataclasses.replace(run, name=name, config=config)

    sides = {variant: [renamed(r, variant, **dict(changes)) for r in chosen]}
    if remake:
        sides[REMADE] = [renamed(r, REMADE) for r in chosen]
    for side, runs in sides.items() if not report_only else ():
        out, kept = (
            Path("runs") / f"declared-{side}",
            campaign.records(Path("results") / f"declared-{side}"),
        )
        kept.restore(runs, out)
        now = experiment.progress(runs, out)
        console.print(f"{len(now.todo)} of {len(runs)} runs to make in {out} ({side})")
        if experiment.execute(
            now.todo,
            out,
            console,
            make=campaign.make_run,
            clear=campaign.clear_unfinished,
            keep=keeper(kept),
            kinds=campaign.kinds,
            finished=now.finished,
            until=until,
        ):
            break
    report_pairs(console, chosen, variant, label)


def keeper(kept: experiment.RunCopies) -> Callable[[campaign.PlannedRun, Path], object]:
    """What keeps a finished run's record in ``kept``."""
    return lambda run, run_dir: kept.keep(run.name, run_dir)


def report_pairs(
    console: Console, chosen: list[campaign.PlannedRun], variant: str, label: str
) -> None:
    """Per run and per scenario, the variant's figures against the remade runs (where
    every seed of the scenario has one) or the declared records."""
    folders = {side: Path("results") / f"declared-{side}" for side in (variant, REMADE)} | {
        "declared": Path("results") / DECLARED
    }
    by_scenario: dict[str, list[campaign.PlannedRun]] = {}
    for run in chosen:
        by_scenario.setdefault(run.scenario, []).append(run)
    for scenario, runs in by_scenario.items():
        variant_lines = {
            r.seed: metrics_lines(folders[variant], f"{r.name}-{variant}") for r in runs
        }
        changed = {seed: figures(lines) for seed, lines in variant_lines.items()}
        remade = {
            r.seed: figures(metrics_lines(folders[REMADE], f"{r.name}-{REMADE}")) for r in runs
        }
        declared = {r.seed: figures(metrics_lines(folders["declared"], r.name)) for r in runs}
        base_side = REMADE if all(remade.values()) else "declared"
        base = remade if base_side == REMADE else declared
        names = {
            variant: [f"{r.name}-{variant}" for r in runs],
            REMADE: [f"{r.name}-{REMADE}" for r in runs],
            "declared": [r.name for r in runs],
        }
        console.print(
            f"[bold]{scenario}[/]: with {label} against the {base_side} runs; CPU kernels: "
            + "; ".join(f"{side} {kernels(folders[side], names[side])}" for side in names)
        )
        metric = next((f.metric for f in declared.values() if f is not None), "accuracy")
        scale, digits = stats.scale_of(metric)
        for run in runs:
            cells = []
            for side, got in (("declared", declared), (REMADE, remade), (variant, changed)):
                figure = got[run.seed]
                if figure is not None:
                    cells.append(
                        f"{side} {scale * figure.average:.{digits}f} / "
                        f"{scale * figure.worst:.{digits}f}"
                    )
            acts = floor_acts(variant_lines[run.seed])
            console.print(f"  seed {run.seed}, {metric} (mean / worst): " + ", ".join(cells) + acts)
        pairs = stats.paired_difference(
            {s: f for s, f in changed.items() if f is not None},
            {s: f for s, f in base.items() if f is not None},
        )
        if pairs is None:
            console.print("  no seed has both runs yet")
            continue
        per_seed = {s: [round(scale * d, digits) for d in ds] for s, ds in pairs.per_seed.items()}
        console.print(
            f"  with {label} − {base_side}, over {len(pairs.seeds)} seeds: mean "
            f"{pairs.mean_diff.format(scale, digits, signed=True)}, worst trainer "
            f"{pairs.worst_diff.format(scale, digits, signed=True)}; per seed (mean, worst) "
            + json.dumps(per_seed)
        )


if __name__ == "__main__":
    main()
