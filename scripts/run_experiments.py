"""Run the experiment campaign: every paper scenario × method × seed.

Each scenario file of ``scenarios/paper/`` is run with MCFL as written and with the
baselines on the same data, chain code and seeds: decentralized FedAvg, local training
alone, IFCA and, where the data has true groups, an oracle (FedAvg inside each group);
on ``groups`` and ``autoencoders`` also the MCFL ablations (each deviation from the
authors' code toggled alone, and all together). Scenario files differing only in their
MCFL options share the baselines. See ``mcfl_chain/simulation/campaign.py``.

Run directories are ``<out>/<scenario>-<method>-s<seed>``, made seed by seed (every
scenario and method at seed 0 before any at seed 1). The campaign resumes: a run with
a summary.json is skipped, an unfinished one is removed and made again. As each run
ends, its small record (no weights) is kept in results/experiments (``--records``), to
commit; on a fresh clone, the runs recorded there with the planned options are copied
back into ``--out`` as finished, so the campaign goes on where it stopped. Then
``python scripts/report_results.py`` turns the runs into docs/RESULTS.md.

Usage: python scripts/run_experiments.py [--list] [--only NAME ...] [--methods M ...]
       [--seeds 0,1,2] [--no-ablation] [--published-size [--max-rounds N]] [--out DIR]
       python scripts/run_experiments.py --comparison [--seeds 0,1,2]   # issue 14
       python scripts/run_experiments.py --fidelity [--seeds 0,1,2]   # issue 36, item 5
       python scripts/run_experiments.py --declared sweep|tuning|evaluation|paper-scale [--list]
           [--only SCENARIO] [--until HH:MM]
       python scripts/run_experiments.py --declared mcfl-plus [--list]   # issue 37, item 4
       python scripts/run_experiments.py --declared autoencoder-epochs [--list]   # issue 36, item 4
       python scripts/run_experiments.py --declared minority-30-2 [--list]   # issue 37, target 1
       python scripts/run_experiments.py --declared minority-30-2-confirmatory [--list]
       python scripts/run_experiments.py --declared mcfl-plus-confirmatory [--list]

The declared campaign (issue 36) runs in three stages: ``sweep``, the common optimiser
sweep of docs/results/sweep.toml (every method at every grid point on the tuning seeds,
chosen on validation splits; the choices go to docs/results/tuned.toml as each
(scenario, method) completes), then ``tuning`` and ``evaluation`` of
docs/results/protocol.toml, each method with its chosen settings. A tuning run is the
sweep's run at its method's chosen point under another name: where that sweep run is
finished (in ``<out>/sweep`` or ``<records>/sweep``, where the sweep puts them by default)
and its recorded configuration equals the tuning run's in every field but the name (a
field added since, left at its default, counts as equal), it is copied, not run again,
its summary naming the sweep run and such fields (``reused_from``); ``--list``
shows it as ``reuse`` (to copy) or ``reused``. A fourth stage, ``paper-scale``
(docs/results/paper-scale.toml), runs MCFL, each scenario's comparator and the paper's
baselines again at the paper's size on a few seeds, with what the tuning stage chose.
A fifth, ``mcfl-plus`` (docs/results/mcfl-plus-clean.toml), puts MCFL-plus into the
declared evaluation as a method: scenario by scenario, its own run of the optimiser
sweep (choices in docs/results/tuned-mcfl-plus.toml), then the evaluation seeds with the
chosen point, beside MCFL's and the comparator's runs. A sixth, ``autoencoder-epochs``
(docs/results/autoencoder-epochs.toml), reruns the autoencoder experiment on fresh seeds
at several numbers of local epochs (MCFL, local training and FedAvg), to see whether the
6 epochs chosen on seeds 0-2 was fitted to them. A seventh, ``minority-30-2``
(docs/results/minority-30-2.toml), runs the true 30:2 rotation (32 trainers, two rotated)
with MCFL-plus, local training and MCFL on the evaluation seeds, with the settings the
reduced size chose, for issue 37's first target (the minority at least local training's).
An eighth, ``mcfl-plus-confirmatory`` (docs/results/mcfl-plus-confirmatory.toml), judges
one named configuration of MCFL-plus against each scenario's comparator on fresh seeds;
a ninth, ``minority-30-2-confirmatory`` (docs/results/minority-30-2-confirmatory.toml),
asks the first target again of that configuration, on fresh seeds.
The declared stages run on the batched engine unless ``--engine`` says otherwise.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TypeVar

import click
from rich.console import Console

from mcfl_chain.cli._campaign_options import UNTIL
from mcfl_chain.compute.device import resolve_device
from mcfl_chain.simulation import (
    autoencoder_epochs,
    campaign,
    experiment,
    minority,
    paper_scale,
    plus_clean,
    plus_confirmatory,
    protocol,
    results_report,
    stats,
    sweep,
)
from mcfl_chain.simulation.engines import ENGINES
from mcfl_chain.simulation.runner import SimulationConfig

R = TypeVar("R", campaign.PlannedRun, sweep.SweepRun)

DECLARED_STAGES = (
    sweep.STAGE,
    *protocol.STAGES,
    paper_scale.STAGE,
    plus_clean.STAGE,
    autoencoder_epochs.STAGE,
    *minority.DECLARATIONS,
    plus_confirmatory.STAGE,
)

STAGE_FOLDERS = {
    sweep.STAGE: (sweep.SWEEP_RUNS, sweep.SWEEP_RECORDS),
    paper_scale.STAGE: (paper_scale.PAPER_SCALE_RUNS, paper_scale.PAPER_SCALE_RECORDS),
    autoencoder_epochs.STAGE: (autoencoder_epochs.EPOCHS_RUNS, autoencoder_epochs.EPOCHS_RECORDS),
    **{stage: minority.folders(stage) for stage in minority.DECLARATIONS},
    plus_confirmatory.STAGE: (
        plus_confirmatory.CONFIRMATORY_RUNS,
        plus_confirmatory.CONFIRMATORY_RECORDS,
    ),
}
"""The declared stages whose runs and records have folders of their own (the others':
runs/declared and results/declared)."""


def parse_seeds(values: tuple[str, ...]) -> list[int]:
    """:func:`experiment.parse_seeds`, its refusal as a usage error."""
    try:
        return experiment.parse_seeds(values)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="'--seeds'") from exc


def describe(run: campaign.PlannedRun, out: Path, source: Path | None = None) -> str:
    """One line of ``--list``: the run, its state, its oracle groups, and what differs
    from a finished run; ``reuse`` and the sweep run where it will be copied from
    ``source`` (:func:`sweep.reusable_runs`), ``reused`` and the sweep run where it was."""
    if source is not None:
        return experiment.listing(
            run, out, "reuse", f"  (copied from the sweep run {source}, not run)"
        )
    origin = experiment.reused_from(out / run.name)
    if origin is not None:
        detail = f"  (the sweep run {origin.get('run')})"
        # listing() checks the options of "done" runs only: a reused run is one too.
        differences = experiment.config_differences(out / run.name, run.config)
        if differences:
            detail += "  [made with other options: " + ", ".join(differences) + "]"
        return experiment.listing(run, out, "reused", detail)
    groups = "; ".join(f"{g}: {list(i)}" for g, i in run.parts)
    return experiment.listing(run, out, detail=f"  ({groups})" if groups else "")


def declared_plan(
    protocol_path: Path,
    scenarios: Path,
    stage: str,
    out: Path,
    records: Path,
    console: Console,
    tuned_path: Path = sweep.TUNED,
    paper_path: Path = paper_scale.PAPER_SCALE,
    epochs_path: Path = autoencoder_epochs.EPOCHS_DECLARATION,
    minority_paths: Mapping[str, Path] = minority.DECLARATIONS,
    plus_path: Path = plus_clean.PLUS_CLEAN,
    plus_tuned_path: Path = plus_clean.PLUS_TUNED,
    confirmatory_path: Path = plus_confirmatory.CONFIRMATORY,
) -> campaign.Plan:
    """The declared campaign's plan at ``stage``, each method with the optimiser settings
    of ``tuned_path``; the comparators are chosen from the tuning runs finished in
    ``out`` or recorded in ``records`` (for ``paper-scale``, in the declared campaign's
    default folders). Prints the test-split figures of the declared rule.
    ``autoencoder-epochs`` reads ``epochs_path`` alone: it chooses nothing.
    A minority stage (``minority-30-2``, ``minority-30-2-confirmatory``) reads its file
    in ``minority_paths``, MCFL-plus's settings from ``plus_tuned_path`` and, where the
    file names no options, MCFL-plus's options from ``plus_path``: it chooses nothing
    either.
    ``mcfl-plus-confirmatory`` reads ``confirmatory_path`` and the settings of
    ``tuned_path`` and ``plus_tuned_path``; its comparators come from the tuning runs in
    runs/declared and results/declared, as paper-scale's do."""
    if stage == autoencoder_epochs.STAGE:
        return autoencoder_epochs.epochs_plan(
            autoencoder_epochs.load_epochs_sweep(epochs_path), campaign.load_scenarios(scenarios)
        )
    declaration = protocol.load_protocol(protocol_path)
    configs = campaign.load_scenarios(scenarios)
    tuned = sweep.load_tuned(tuned_path)
    if stage in minority_paths:
        study = minority.load_minority(minority_paths[stage])
        return minority.files_plan(
            study, declaration, configs, tuned_path, plus_path, plus_tuned_path
        )
    figures: dict[tuple[str, str], dict[int, stats.RunFigures]] = {}
    tuning_folders = (
        (protocol.DECLARED_RECORDS, protocol.DECLARED_RUNS)
        if stage in (paper_scale.STAGE, plus_confirmatory.STAGE)
        else (records, out)
    )
    for folder in tuning_folders:  # a run directory wins over its record
        for key, seeds in results_report.load_runs(folder).items():
            figures.setdefault(key, {}).update(results_report.figures_of(seeds))
    if stage == paper_scale.STAGE:
        paper = paper_scale.load_paper_scale(paper_path)
        return paper_scale.paper_scale_plan(paper, declaration, configs, figures, tuned)
    if stage == plus_confirmatory.STAGE:
        return plus_confirmatory.confirmatory_plan(
            plus_confirmatory.load_confirmatory(confirmatory_path),
            declaration,
            configs,
            figures,
            minority.merged_tuned(tuned_path, plus_tuned_path),
        )
    for line in protocol.split_size_lines(declaration, configs):
        console.print(f"test split: {line}")
    return protocol.declared_plan(declaration, configs, stage, figures, tuned=tuned)


def on_engine(plan: campaign.Plan, engine: str, device: str) -> campaign.Plan:
    """``plan`` with every run on ``engine`` and ``device`` (recorded in its config.json)."""
    runs = [replace(r, config=replace(r.config, engine=engine, device=device)) for r in plan.runs]
    return campaign.Plan(runs, plan.notes)


def select(
    runs: Sequence[R],
    only: Sequence[str],
    labels: Callable[[R], set[str]],
    stage: str,
    declared: Sequence[str] = (),
) -> list[R]:
    """The ``runs`` of the scenarios ``only`` names (all of them when it names none),
    ``labels`` giving the names a run answers to. A ``declared`` scenario that the stage
    does not plan yet selects nothing (its plan's notes say why).

    Raises
    ------
    click.UsageError
        For a name that is neither declared nor answered to by a run of the stage.
    """
    if not only:
        return list(runs)
    known = {label for run in runs for label in labels(run)} | set(declared)
    strangers = [name for name in only if name not in known]
    if strangers:
        raise click.UsageError(
            f"--only {', '.join(strangers)}: no scenario of --declared {stage} has that "
            f"name; its scenarios: {', '.join(sorted(known))}"
        )
    return [run for run in runs if labels(run) & set(only)]


def about(notes: Sequence[str], only: Sequence[str]) -> list[str]:
    """The plan's ``notes`` on the scenarios ``only`` names (all when it names none): a
    note opens with its scenario's name and a colon."""
    return [n for n in notes if not only or n.split(":", 1)[0] in only]


def declared_labels(
    declaration: protocol.Declaration, configs: Sequence[SimulationConfig]
) -> Callable[[campaign.PlannedRun], set[str]]:
    """The names a declared run answers to with ``--only``: its scenario file's or
    baselines' name, and the declared scenario's name where one declares that file."""
    by_label: dict[str, set[str]] = {}
    for name, config in protocol.declared_configs(declaration, configs).items():
        for label in (config.name, campaign.baseline_stem(config)):
            by_label.setdefault(label, set()).add(name)
    return lambda run: {run.scenario, *by_label.get(run.scenario, ())}


def choice_lines(
    choices: dict[tuple[str, str], sweep.PointChoice], metric_of: dict[tuple[str, str], str]
) -> list[str]:
    """One line per (scenario, method) of the sweep: its point and the means per point."""
    out = []
    for (scenario, method), choice in choices.items():
        metric = metric_of[scenario, method]
        means = ", ".join(
            f"{p} {'failed' if m is None else figure_text(m, metric)}"
            for p, m in choice.means.items()
        )
        chosen = choice.point or f"not chosen ({choice.reason})"
        out.append(f"{scenario} {method}: {chosen}" + (f"  [{means}]" if means else ""))
    return out


def figure_text(value: float, metric: str) -> str:
    """A mean validation figure as the tables give it: accuracy in %, MSE to 5 places."""
    return f"{100 * value:.1f} %" if metric == "accuracy" else f"{value:.5f} MSE"


def run_sweep(
    protocol_path: Path,
    grid_path: Path,
    tuned_path: Path,
    scenarios: Path,
    out: Path,
    records: Path,
    engine: str,
    device: str,
    list_only: bool,
    console: Console,
    only: Sequence[str] = (),
    until: float | None = None,
) -> None:
    """``--declared sweep``: plan the sweep, list it or make its unfinished runs (skipping
    those finished in ``out`` or recorded in ``records``), and rewrite ``tuned_path``
    with the choices after each run. ``only`` restricts the runs listed or made to these
    declared scenarios; ``until`` stops between runs (:func:`experiment.execute`).

    Raises
    ------
    experiment.ExperimentError
        When the grid or protocol cannot be read, or a run fails.
    """
    declaration = protocol.load_protocol(protocol_path)
    grid = sweep.load_grid(grid_path)
    plan = sweep.sweep_plan(
        declaration, grid, campaign.load_scenarios(scenarios), engine=engine, device=device
    )
    kept = sweep.records(records)
    restored = kept.restore(plan.runs, out)
    if restored:
        console.print(f"{restored} finished sweep runs restored from their records in {records}")
    runs = select(
        plan.runs,
        only,
        lambda run: {run.scenario, run.label},
        sweep.STAGE,
        [s.name for s in declaration.scenarios],
    )
    metric_of = {(r.scenario, r.method): protocol.metric_of(r.config) for r in plan.runs}

    def choose(write: bool = True) -> dict[tuple[str, str], sweep.PointChoice]:
        """The choices from every finished run, written to ``tuned_path`` if ``write``."""
        figures = sweep.sweep_figures(plan, [out, records])
        choices = sweep.sweep_choices(declaration, grid, plan, figures)
        if write:
            sweep.write_tuned(tuned_path, sweep.tuned_text(grid, choices))
        return choices

    now = experiment.progress(runs, out)
    points = ", ".join(f"{p.name} ({dict(p.settings)})" for p in grid.points)
    console.print(
        f"sweep: {len(plan.runs)} runs ({len(grid.points)} grid points: {points}; seeds "
        f"{', '.join(map(str, declaration.tuning_seeds))}) on engine {engine}, device {device}"
        + (f"; {len(runs)} of them on {', '.join(only)} (--only)" if only else "")
    )
    if list_only:
        for index, run in enumerate(runs, 1):
            console.print(f"{index:4}  {experiment.listing(run, out)}")
        for note in about(plan.notes, only):
            console.print(f"note: {note}")
        selected = {run.scenario for run in runs}
        choices = {k: c for k, c in choose(write=False).items() if k[0] in selected}
        started = {
            k: c
            for k, c in choices.items()
            if c.point or len(c.missing) < len(grid.points) * len(declaration.tuning_seeds)
        }
        for line in choice_lines(started, metric_of):
            console.print(f"choice: {line}")
        waiting = sum(c.point is None for c in choices.values())
        console.print(f"{len(choices) - waiting} of {len(choices)} (scenario, method)s chosen")
        states = list(now.states.values())
        estimate = experiment.estimate_seconds(now.todo, now.finished, sweep.kinds)
        console.print(
            f"{len(runs)} sweep runs planned in {out}: {len(now.done)} done, "
            f"{states.count('partial')} partial, {states.count('pending')} pending"
            + (f"; about {experiment.duration(estimate)} to go" if estimate and now.todo else "")
            + f"; choices in {tuned_path}"
        )
        return
    experiment.refuse_other_options(
        now.done, out, "give another --out, or remove that directory to make it again"
    )
    for note in about(plan.notes, only):
        console.print(f"note: {note}")
    console.print(f"{len(now.done)} done before, {len(now.todo)} to run; choices in {tuned_path}")
    choose()

    def keep(run: sweep.SweepRun, run_dir: Path) -> None:
        kept.keep(run.name, run_dir)
        sweep.drop_weights(run_dir)
        choice = choose()[run.scenario, run.method]
        if choice.point is not None:
            console.print(f"sweep: {run.scenario} {run.method} chose {choice.point}")

    started = time.monotonic()
    left = experiment.execute(
        now.todo, out, console, keep=keep, kinds=sweep.kinds, finished=now.finished, until=until
    )
    if left:
        return
    console.print(
        f"sweep finished in {experiment.duration(time.monotonic() - started)}; choices in "
        f"{tuned_path}; now run: python scripts/run_experiments.py --declared tuning"
    )


def run_plus_clean(
    protocol_path: Path,
    grid_path: Path,
    plus_path: Path,
    plus_tuned_path: Path,
    scenarios: Path,
    out: Path,
    records: Path,
    engine: str,
    device: str,
    list_only: bool,
    console: Console,
    only: Sequence[str] = (),
    until: float | None = None,
) -> None:
    """``--declared mcfl-plus``: per declared scenario in the declaration's order,
    MCFL-plus's sweep runs (``out/mcfl-plus-sweep``), its choice (``plus_tuned_path``,
    rewritten after each run), then its evaluation runs (``out``) once the choice is made;
    finished runs (or their records in ``records``) are skipped. ``list_only`` prints
    the plan instead. ``only`` restricts the scenarios to these; ``until`` stops between
    runs (:func:`experiment.execute`).

    Raises
    ------
    experiment.ExperimentError
        When a declaration cannot be read, or a run fails.
    """
    declaration = protocol.load_protocol(protocol_path)
    grid = sweep.load_grid(grid_path)
    plus = plus_clean.load_plus_clean(plus_path)
    configs = campaign.load_scenarios(scenarios)
    sweep_out, sweep_kept = (
        out / plus_clean.PLUS_SWEEP,
        sweep.records(records / plus_clean.PLUS_SWEEP),
    )
    kept = campaign.records(records)
    whole = plus_clean.sweep_plan(plus, declaration, grid, configs, engine=engine, device=device)
    restored = sweep_kept.restore(whole.runs, sweep_out)

    def choose(write: bool = True) -> protocol.Tuned:
        """The choices from every finished sweep run, written to ``plus_tuned_path``."""
        figures = sweep.sweep_figures(whole, [sweep_out, sweep_kept.folder])
        choices = sweep.sweep_choices(declaration, grid, whole, figures)
        if write:
            sweep.write_tuned(
                plus_tuned_path, sweep.tuned_text(grid, choices, plus_clean.TUNED_HEADER)
            )
        return {
            scenario: {method: dict(grid.point(choice.point).settings)}
            for (scenario, method), choice in choices.items()
            if choice.point is not None
        }

    strangers = [name for name in only if name not in plus.order]
    if strangers:
        raise click.UsageError(
            f"--only {', '.join(strangers)}: not a scenario of --declared mcfl-plus; its "
            f"scenarios: {', '.join(plus.order)}"
        )
    order = [name for name in plus.order if not only or name in only]
    evaluation = on_engine(
        plus_clean.evaluation_plan(plus, declaration, configs, choose(write=False)), engine, device
    )
    restored += kept.restore(evaluation.runs, out)
    if restored:
        console.print(
            f"{restored} finished MCFL-plus runs restored from their records in {records}"
        )
    console.print(
        f"MCFL-plus ({', '.join(f'{k} {v}' for k, v in plus.options) or 'default options'}) "
        f"on {len(plus.order)} scenarios, engine {engine}, device {device}: "
        f"{len(whole.runs)} sweep runs, then {len(declaration.evaluation_seeds)} evaluation "
        "seeds per scenario once its point is chosen"
    )
    if list_only:
        sweep_runs = [r for r in whole.runs if r.scenario in order]
        labels = declared_labels(declaration, configs)
        evaluation_runs = [r for r in evaluation.runs if labels(r) & set(order)]
        sweep_now = experiment.progress(sweep_runs, sweep_out)
        for index, run in enumerate(sweep_runs, 1):
            console.print(f"{index:4}  {experiment.listing(run, sweep_out)}")
        for index, run in enumerate(evaluation_runs, 1):
            console.print(f"{index:4}  {experiment.listing(run, out)}")
        for note in about(evaluation.notes, only):
            console.print(f"note: {note}")
        evaluation_now = experiment.progress(evaluation_runs, out)
        console.print(
            f"sweep: {len(sweep_now.done)} of {len(sweep_runs)} runs done; evaluation: "
            f"{len(evaluation_now.done)} of {len(evaluation_runs)} planned runs done; choices "
            f"in {plus_tuned_path}"
        )
        return
    started = time.monotonic()
    for scenario in order:
        now = experiment.progress([r for r in whole.runs if r.scenario == scenario], sweep_out)
        experiment.refuse_other_options(
            now.done, sweep_out, "give another --out, or remove that directory to make it again"
        )

        def keep(run: sweep.SweepRun, run_dir: Path) -> None:
            sweep_kept.keep(run.name, run_dir)
            sweep.drop_weights(run_dir)
            choose()

        if now.todo:
            console.print(f"{scenario}: MCFL-plus sweep, {len(now.todo)} runs to make")
        if experiment.execute(
            now.todo,
            sweep_out,
            console,
            keep=keep,
            kinds=sweep.kinds,
            finished=now.finished,
            until=until,
        ):
            return
        tuned = choose()
        part_eval = on_engine(
            plus_clean.evaluation_plan(plus, declaration, configs, tuned, only=scenario),
            engine,
            device,
        )
        if not part_eval.runs:
            raise experiment.ExperimentError(
                f"{scenario}: MCFL-plus's sweep finished without a choice ("
                + "; ".join(part_eval.notes)
                + f"); see {plus_tuned_path}"
            )
        kept.restore(part_eval.runs, out)  # chosen during this call: not restored above
        now = experiment.progress(part_eval.runs, out)
        experiment.refuse_other_options(
            now.done, out, "give another --out, or remove that directory to make it again"
        )
        if now.todo:
            console.print(f"{scenario}: MCFL-plus evaluation, {len(now.todo)} runs to make")
        if experiment.execute(
            now.todo,
            out,
            console,
            make=campaign.make_run,
            clear=campaign.clear_unfinished,
            keep=lambda run, run_dir: kept.keep(run.name, run_dir),
            kinds=campaign.kinds,
            finished=now.finished,
            until=until,
        ):
            return
    console.print(
        f"MCFL-plus stage finished in {experiment.duration(time.monotonic() - started)}; now "
        "run: python scripts/report_results.py"
    )


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
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
    help="One run directory per run is made here.  "
    "[default: runs/experiments, or runs/experiments-published with --published-size]",
)
@click.option(
    "--only",
    multiple=True,
    metavar="NAME",
    help="Run only this scenario (a file's name, or a shared baselines' name such as "
    "'gaussian' for all gaussian-tol* files); repeatable. With --declared, a declared "
    "scenario (its name in the protocol, e.g. rotation-24-8): the stage's other runs stay "
    "pending, the declaration is unchanged.",
)
@click.option(
    "--methods",
    multiple=True,
    type=click.Choice(campaign.ALL_METHODS),
    help="Run only these methods (repeatable); "
    + ", ".join(campaign.ON_REQUEST)
    + " run only when named.  [default: mcfl fedavg local ifca oracle, and the ablations "
    "unless --no-ablation]",
)
@click.option(
    "--seeds",
    "seed_values",
    multiple=True,
    metavar="SEEDS",
    help="Seeds, comma- or space-separated, or repeated: --seeds 0,1,2, --seeds '0 1 2' "
    "or --seeds 0 --seeds 1.  [default: 0,1,2]",
)
@click.option(
    "--ablation/--no-ablation",
    default=True,
    show_default=True,
    help="MCFL with each deviation from the authors' code toggled alone (mcfl-shared, "
    "mcfl-all, mcfl-ceil) and all three (mcfl-v1), on groups and autoencoders.",
)
@click.option(
    "--comparison",
    is_flag=True,
    help="The clustered methods side by side (docs/RESULTS.md, 'Clustered methods "
    "compared'): MCFL, FedFMC, FACADE, IFCA, FedAvg, local and the oracle on groups, "
    "gaussian-tol1 and the three rotation ratios; not with --only or --methods.",
)
@click.option(
    "--fidelity",
    is_flag=True,
    help="Issue 36 item 5: each remaining deviation from the authors' code alone ("
    + ", ".join(campaign.FIDELITY_ABLATIONS)
    + ") on "
    + ", ".join(campaign.FIDELITY_SCENARIOS)
    + ", with MCFL and FedAvg rerun beside them by the same code and engine (batched unless "
    "--engine says otherwise), so that each pair differs by the deviation alone; into "
    "runs/fidelity, records in results/fidelity. Not with --only, --methods, --comparison, "
    "--declared or --published-size.",
)
@click.option(
    "--published-size",
    is_flag=True,
    help="The paper's size: 38 trainers, all samples, 2 epochs; rounds capped by "
    "--max-rounds (30 by default; the paper ran 102). Days on 2 cores.",
)
@click.option(
    "--max-rounds",
    type=click.IntRange(min=1),
    help="Cap every run's rounds.  [default: none; 30 with --published-size]",
)
@click.option(
    "--records",
    type=click.Path(file_okay=False, path_type=Path),
    help="Each finished run's small record is kept here (configuration, summary, the final "
    "round's metrics, the costs), and a planned run missing from --out whose record here was "
    "made with the same options is copied back as finished, not run again.  [default: "
    "results/experiments, or results/experiments-published with --published-size]",
)
@click.option(
    "--declared",
    type=click.Choice(DECLARED_STAGES),
    help="The declared campaign of docs/results/protocol.toml (issue 36): 'sweep' runs "
    "MCFL and every candidate on the tuning seeds at every point of the optimiser grid "
    "(--sweep-grid) and writes each (scenario, method)'s choice, made on validation "
    "splits, to --tuned; 'tuning' runs MCFL and every candidate on the tuning seeds "
    "(copying, not running again, each one the sweep finished with the same configuration "
    "but its name: its summary names the sweep run), "
    "'evaluation' MCFL, each scenario's comparator (chosen from the tuning runs by the "
    "declared rule) and the paper's baselines on the evaluation seeds, each method with "
    "its --tuned settings (a scenario the sweep has not finished is not planned); MCFL "
    "with the declared tolerance; 'paper-scale' MCFL, the comparator and the paper's "
    "baselines at the paper's size (--paper-scale: 38 trainers, 102 rounds, its seeds and "
    "order; comparators from the tuning runs in runs/declared and results/declared); "
    "'mcfl-plus' MCFL-plus's own sweep (into runs/declared/mcfl-plus-sweep, choices in "
    "--mcfl-plus-tuned) and its evaluation seeds, scenario by scenario (--mcfl-plus-clean); "
    "'autoencoder-epochs' MCFL, local training and FedAvg on the autoencoders at each "
    "declared number of local epochs, on fresh seeds (--autoencoder-epochs); "
    "'minority-30-2' MCFL-plus, local training and MCFL at the true 30:2 (32 trainers, two "
    "rotated; docs/results/minority-30-2.toml) on the evaluation seeds; "
    "'minority-30-2-confirmatory' MCFL-plus with the options its file names and local "
    "training at the true 30:2 on fresh seeds (docs/results/minority-30-2-confirmatory"
    ".toml); "
    "'mcfl-plus-confirmatory' MCFL-plus with one declared configuration and each "
    "scenario's comparator on fresh seeds (--mcfl-plus-confirmatory). Not "
    "with --methods, --seeds, --comparison or --published-size.  [default: out "
    "runs/declared (sweep: runs/declared/sweep, paper-scale: runs/declared/paper-scale, "
    "autoencoder-epochs: runs/declared/autoencoder-epochs, minority-30-2: "
    "runs/declared/minority-30-2 (and likewise for minority-30-2-confirmatory), "
    "mcfl-plus-confirmatory: "
    "runs/declared/mcfl-plus-confirmatory), records results/declared "
    "(likewise under results/declared)]",
)
@click.option(
    "--sweep-grid",
    "grid_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=sweep.GRID,
    show_default=True,
    help="The optimiser grid --declared sweep runs (and --declared tuning looks up the "
    "sweep's finished runs by).",
)
@click.option(
    "--tuned",
    "tuned_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=sweep.TUNED,
    show_default=True,
    help="The sweep's choices: written by --declared sweep, applied by --declared tuning "
    "and evaluation.",
)
@click.option(
    "--engine",
    type=click.Choice(tuple(ENGINES)),
    help="Run every planned run on this engine (recorded in its config.json).  [default: "
    "batched with --declared or --fidelity, else the scenario files' (process)]",
)
@click.option(
    "--device",
    type=click.Choice(("auto", "cpu", "cuda")),
    default="cpu",
    show_default=True,
    help="Where --declared runs train (auto: cuda where there is one); recorded in each "
    "run's config.json as the device used.",
)
@click.option(
    "--protocol",
    "protocol_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=protocol.PROTOCOL,
    show_default=True,
    help="The declaration --declared reads.",
)
@click.option(
    "--paper-scale",
    "paper_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=paper_scale.PAPER_SCALE,
    show_default=True,
    help="The declaration --declared paper-scale reads: the paper's size, its seeds and "
    "the order of its scenarios.",
)
@click.option(
    "--mcfl-plus-clean",
    "plus_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=plus_clean.PLUS_CLEAN,
    show_default=True,
    help="The declaration --declared mcfl-plus reads: MCFL-plus's options and the order "
    "of its scenarios.",
)
@click.option(
    "--mcfl-plus-confirmatory",
    "confirmatory_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=plus_confirmatory.CONFIRMATORY,
    show_default=True,
    help="The declaration --declared mcfl-plus-confirmatory reads: MCFL-plus's options, "
    "the fresh seeds and the order of the scenarios.",
)
@click.option(
    "--mcfl-plus-tuned",
    "plus_tuned_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=plus_clean.PLUS_TUNED,
    show_default=True,
    help="MCFL-plus's sweep choices: written and applied by --declared mcfl-plus.",
)
@click.option(
    "--autoencoder-epochs",
    "epochs_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=autoencoder_epochs.EPOCHS_DECLARATION,
    show_default=True,
    help="The declaration --declared autoencoder-epochs reads: the scenario file, the "
    "epochs values, the methods and the fresh seeds.",
)
@click.option(
    "--first",
    type=click.IntRange(min=1),
    default=None,
    help="Make only the first N runs still to make, in the plan's order (the rest stay pending).",
)
@click.option(
    "--export",
    "export_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write the runs still to make (after --only and --first), each with its whole "
    "configuration, to this JSON file and exit, for --from on a machine that cannot plan "
    "them: one without the records a declared plan is chosen from (the device machine).",
)
@click.option(
    "--from",
    "from_path",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="Make the runs of a file --export wrote instead of planning them; --declared "
    "then names only the stage's folders (--out and --records override them).",
)
@UNTIL
@click.option(
    "--list",
    "list_only",
    is_flag=True,
    help="Print the planned runs (done, partial or pending) and exit.",
)
def main(
    scenarios: Path,
    out: Path | None,
    only: tuple[str, ...],
    methods: tuple[str, ...],
    seed_values: tuple[str, ...],
    ablation: bool,
    comparison: bool,
    fidelity: bool,
    published_size: bool,
    max_rounds: int | None,
    records: Path | None,
    declared: str | None,
    grid_path: Path,
    tuned_path: Path,
    engine: str | None,
    device: str,
    protocol_path: Path,
    paper_path: Path,
    plus_path: Path,
    confirmatory_path: Path,
    plus_tuned_path: Path,
    epochs_path: Path,
    first: int | None,
    export_path: Path | None,
    from_path: Path | None,
    until: float | None,
    list_only: bool,
) -> None:
    """Run every scenario with MCFL and the baselines over seeds; skip finished runs."""
    console = Console(highlight=False, soft_wrap=True)
    seeds = parse_seeds(seed_values) if seed_values else list(campaign.DEFAULT_SEEDS)
    if declared and (methods or seed_values or comparison or published_size or max_rounds):
        raise click.UsageError(
            "--declared takes its methods, seeds and size from the protocol file (--only "
            "may pick some of its scenarios)"
        )
    if from_path and (only or methods or seed_values or comparison or fidelity or export_path):
        raise click.UsageError(
            "--from makes the runs of its file as they are: choose them with --only and "
            "--first when exporting"
        )
    if (from_path or export_path or first) and declared in (sweep.STAGE, plus_clean.STAGE):
        raise click.UsageError(
            f"--first, --export and --from do not apply to --declared {declared}: that stage "
            "chooses its later runs from its earlier ones as it goes"
        )
    if fidelity and (only or methods or comparison or declared or published_size):
        raise click.UsageError(
            "--fidelity chooses its scenarios and methods itself, at the reduced size"
        )
    default_out, default_records = (
        (protocol.DECLARED_RUNS, protocol.DECLARED_RECORDS)
        if declared
        else (Path("runs/fidelity"), campaign.FIDELITY_RECORDS)
        if fidelity
        else (Path("runs/experiments-published"), campaign.PUBLISHED_RECORDS)
        if published_size
        else (Path("runs/experiments"), campaign.RECORDS)
    )
    if declared in STAGE_FOLDERS:
        default_out, default_records = STAGE_FOLDERS[declared]
    out = out or default_out
    engine = engine or ("batched" if declared or fidelity else None)
    try:
        device = resolve_device(device).type  # the device used, not "auto", is recorded
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="'--device'") from exc
    if declared == sweep.STAGE:
        try:
            run_sweep(
                protocol_path,
                grid_path,
                tuned_path,
                scenarios,
                out,
                records or default_records,
                engine or "batched",
                device,
                list_only,
                console,
                only,
                until,
            )
        except experiment.ExperimentError as exc:
            raise click.ClickException(str(exc)) from exc
        return
    if declared == plus_clean.STAGE:
        try:
            run_plus_clean(
                protocol_path,
                grid_path,
                plus_path,
                plus_tuned_path,
                scenarios,
                out,
                records or default_records,
                engine or "batched",
                device,
                list_only,
                console,
                only,
                until,
            )
        except experiment.ExperimentError as exc:
            raise click.ClickException(str(exc)) from exc
        return
    kept = campaign.records(records or default_records)
    if comparison:
        if only or methods:
            raise click.UsageError("--comparison chooses the scenarios and methods itself")
        only, methods = campaign.COMPARISON_SCENARIOS, campaign.COMPARISON_METHODS
    if fidelity:
        only, methods = campaign.FIDELITY_SCENARIOS, campaign.FIDELITY_METHODS
        ablation = True  # the deviations are ablations limited to their scenarios
    try:
        if from_path:
            plan = campaign.Plan(campaign.plan_from_json(from_path.read_text(), str(from_path)), [])
        elif declared:
            plan = declared_plan(
                protocol_path,
                scenarios,
                declared,
                out,
                kept.folder,
                console,
                tuned_path,
                paper_path,
                epochs_path,
                plus_path=plus_path,
                plus_tuned_path=plus_tuned_path,
                confirmatory_path=confirmatory_path,
            )
        else:
            plan = campaign.plan(
                campaign.load_scenarios(scenarios),
                seeds=seeds,
                methods=methods,
                only=only,
                ablation=ablation,
                published=published_size,
                max_rounds=max_rounds,
            )
        if engine is not None:  # with --from too: the device recorded is the one used
            plan = on_engine(plan, engine, device)
        if declared and only and not from_path:
            declaration = protocol.load_protocol(protocol_path)
            labels = declared_labels(declaration, campaign.load_scenarios(scenarios))
            names = [s.name for s in declaration.scenarios]
            plan = campaign.Plan(
                select(plan.runs, only, labels, declared, names), about(plan.notes, only)
            )
        if not plan.runs:
            for note in plan.notes:
                console.print(f"note: {note}")
            raise click.ClickException("nothing to run: no planned run matches these options")
        restored = kept.restore(plan.runs, out)
        if restored:
            console.print(
                f"{restored} finished runs restored from their records in {kept.folder} (no "
                "weights: enough for the report)"
            )
        now = experiment.progress(plan.runs, out)
        if first is not None:
            now = replace(now, todo=now.todo[:first])
        if export_path is not None:
            export_path.write_text(campaign.plan_json(now.todo))
            console.print(
                f"{len(now.todo)} runs written to {export_path}: "
                + ", ".join(r.name for r in now.todo)
                + f"; make them elsewhere with --from {export_path}"
            )
            return
        # The tuning stage's runs are the sweep's at the chosen points: take those the
        # sweep finished with the same configuration rather than make them twice.
        reuses = (
            sweep.reusable_runs(
                now.todo, sweep.load_grid(grid_path), [out / "sweep", kept.folder / "sweep"]
            )
            if declared == "tuning"
            else {}
        )
        if list_only:
            for index, run in enumerate(plan.runs, 1):
                console.print(f"{index:4}  {describe(run, out, reuses.get(run.name))}")
            for note in plan.notes:
                console.print(f"note: {note}")
            states = list(now.states.values())
            reused = sum(experiment.reused_from(out / r.name) is not None for r in now.done)
            to_run = [r for r in now.todo if r.name not in reuses]
            estimate = campaign.estimate_seconds(to_run, now.finished)
            console.print(
                f"{len(plan.runs)} runs planned in {out}: {len(now.done)} done"
                + (f" ({reused} reused from the sweep)" if reused else "")
                + f", {states.count('partial')} partial, {states.count('pending')} pending"
                + (f" ({len(reuses)} to reuse from the sweep)" if reuses else "")
                + (
                    f"; about {experiment.duration(estimate)} to go"
                    if now.finished and to_run
                    else ""
                )
            )
            return
        experiment.refuse_other_options(
            now.done, out, "give another --out, or remove that directory to make it again"
        )
        for note in plan.notes:
            console.print(f"note: {note}")
        for run in now.todo:
            if run.name in reuses:
                source = reuses[run.name]
                origin = sweep.reuse_origin(source, run)
                experiment.reuse_run(source, out / run.name, run.name, origin)
                kept.keep(run.name, out / run.name)
                console.print(f"{run.name}: reused the sweep run {source} (not run again)")
        if reuses:
            now = experiment.progress(plan.runs, out)
        console.print(
            f"{len(plan.runs)} runs planned in {out}: {len(now.done)} done before, "
            f"{len(now.todo)} to run"
        )
        started = time.monotonic()
        left = experiment.execute(
            now.todo,
            out,
            console,
            make=campaign.make_run,
            clear=campaign.clear_unfinished,
            keep=lambda run, run_dir: kept.keep(run.name, run_dir),
            kinds=campaign.kinds,
            finished=now.finished,
            until=until,
        )
    except experiment.ExperimentError as exc:
        raise click.ClickException(str(exc)) from exc
    if left:
        return
    option = (
        "--declared-runs"
        if declared
        else "--published-runs"
        if published_size
        else "--fidelity-runs"
        if fidelity
        else "--runs"
    )
    console.print(
        f"campaign finished in {experiment.duration(time.monotonic() - started)}; "
        f"now run: python scripts/report_results.py {option} {out}"
    )


if __name__ == "__main__":
    main()
