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
       python scripts/run_experiments.py --declared tuning|evaluation [--list]   # issue 36
"""

from __future__ import annotations

import time
from pathlib import Path

import click
from rich.console import Console

from mcfl_chain.simulation import campaign, experiment, protocol, results_report, stats


def parse_seeds(values: tuple[str, ...]) -> list[int]:
    """:func:`experiment.parse_seeds`, its refusal as a usage error."""
    try:
        return experiment.parse_seeds(values)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="'--seeds'") from exc


def describe(run: campaign.PlannedRun, out: Path) -> str:
    """One line of ``--list``: the run, its state, its oracle groups, and what differs
    from a finished run."""
    groups = "; ".join(f"{g}: {list(i)}" for g, i in run.parts)
    return experiment.listing(run, out, detail=f"  ({groups})" if groups else "")


def declared_plan(
    protocol_path: Path, scenarios: Path, stage: str, out: Path, records: Path, console: Console
) -> campaign.Plan:
    """The declared campaign's plan at ``stage``; the evaluation's comparators are chosen
    from the tuning runs finished in ``out`` or recorded in ``records``. Prints the
    test-split figures of the declared rule."""
    declaration = protocol.load_protocol(protocol_path)
    configs = campaign.load_scenarios(scenarios)
    figures: dict[tuple[str, str], dict[int, stats.RunFigures]] = {}
    for folder in (records, out):  # a run directory wins over its record
        for key, seeds in results_report.load_runs(folder).items():
            figures.setdefault(key, {}).update(results_report.figures_of(seeds))
    for line in protocol.split_size_lines(declaration, configs):
        console.print(f"test split: {line}")
    return protocol.declared_plan(declaration, configs, stage, figures)


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
    "'gaussian' for all gaussian-tol* files); repeatable.",
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
    type=click.Choice(protocol.STAGES),
    help="The declared campaign of docs/results/protocol.toml (issue 36): 'tuning' runs "
    "MCFL and every candidate on the tuning seeds, 'evaluation' MCFL, each scenario's "
    "comparator (chosen from the tuning runs by the declared rule) and the paper's "
    "baselines on the evaluation seeds; MCFL with the declared tolerance. Not with "
    "--only, --methods, --seeds, --comparison or --published-size.  [default: out "
    "runs/declared, records results/declared]",
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
    published_size: bool,
    max_rounds: int | None,
    records: Path | None,
    declared: str | None,
    protocol_path: Path,
    list_only: bool,
) -> None:
    """Run every scenario with MCFL and the baselines over seeds; skip finished runs."""
    console = Console(highlight=False, soft_wrap=True)
    seeds = parse_seeds(seed_values) if seed_values else list(campaign.DEFAULT_SEEDS)
    if declared and (only or methods or seed_values or comparison or published_size or max_rounds):
        raise click.UsageError(
            "--declared takes its scenarios, methods, seeds and size from the protocol file"
        )
    default_out, default_records = (
        (protocol.DECLARED_RUNS, protocol.DECLARED_RECORDS)
        if declared
        else (Path("runs/experiments-published"), campaign.PUBLISHED_RECORDS)
        if published_size
        else (Path("runs/experiments"), campaign.RECORDS)
    )
    out = out or default_out
    kept = campaign.records(records or default_records)
    if comparison:
        if only or methods:
            raise click.UsageError("--comparison chooses the scenarios and methods itself")
        only, methods = campaign.COMPARISON_SCENARIOS, campaign.COMPARISON_METHODS
    try:
        if declared:
            plan = declared_plan(protocol_path, scenarios, declared, out, kept.folder, console)
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
        if list_only:
            for index, run in enumerate(plan.runs, 1):
                console.print(f"{index:4}  {describe(run, out)}")
            for note in plan.notes:
                console.print(f"note: {note}")
            states = list(now.states.values())
            estimate = campaign.estimate_seconds(now.todo, now.finished)
            console.print(
                f"{len(plan.runs)} runs planned in {out}: {len(now.done)} done, "
                f"{states.count('partial')} partial, {states.count('pending')} pending"
                + (
                    f"; about {experiment.duration(estimate)} to go"
                    if now.finished and now.todo
                    else ""
                )
            )
            return
        experiment.refuse_other_options(
            now.done, out, "give another --out, or remove that directory to make it again"
        )
        for note in plan.notes:
            console.print(f"note: {note}")
        console.print(
            f"{len(plan.runs)} runs planned in {out}: {len(now.done)} done before, "
            f"{len(now.todo)} to run"
        )
        started = time.monotonic()
        experiment.execute(
            now.todo,
            out,
            console,
            make=campaign.make_run,
            clear=campaign.clear_unfinished,
            keep=lambda run, run_dir: kept.keep(run.name, run_dir),
            kinds=campaign.kinds,
            finished=now.finished,
        )
    except experiment.ExperimentError as exc:
        raise click.ClickException(str(exc)) from exc
    option = "--declared-runs" if declared else "--published-runs" if published_size else "--runs"
    console.print(
        f"campaign finished in {experiment.duration(time.monotonic() - started)}; "
        f"now run: python scripts/report_results.py {option} {out}"
    )


if __name__ == "__main__":
    main()
