"""Adversaries against MCFL-plus, FedAvg, MCFL and MCFL with each defence: what they cost
honest trainers.

Two matrices (``--matrix``), each an experiment of the framework whose runs are ordinary
``mcfl-chain simulate`` networks (real chain, real workers) kept in ``--out``; finished
runs are skipped, so the command resumes where it stopped, and each finished run leaves
a small record in ``--records`` (one JSON file per run: the honest trainers' final
accuracies and the run's attack measures), from which ``--report-only`` remakes the
tables without the run directories.

**declared** (the default; issue 37, deliverable 3): the matrix
``docs/results/defence-v5.toml`` declared before its runs
(:mod:`mcfl_chain.simulation.defence_benchmark`): MCFL-plus with its defaults but for
the direction check at the floor -0.3, the chance floor and the label-mix correction
(the declaration's ``[options]``: the configuration of the confirmatory clean
declaration) under every attack at 20 % and 40 % of the trainers, the adversaries
placed at random and concentrated in one data group (the worst case), on fresh seeds,
beside clean local training; the declared engine (``--engine``/``--device`` run it
elsewhere, and records say where). A declaration names its campaign by its file's
stem: runs in ``runs/defence-v5``, records in ``results/defence-v5/``, table in
``docs/results/defence-v5.md``. The fourth, ``docs/results/defence-v4.toml`` (the
direction check at the floor 0 and the chance floor), was the default until the fifth's
headline block was done; it and the third and second declarations,
``docs/results/defence-v3.toml`` (the direction check on, the chance floor off) and
``docs/results/defence-v2.toml`` (MCFL-plus with its defaults), stay open:
``--declaration`` with any of them resumes it. ``--until TIME`` starts no run that would end
after TIME (every matrix), so a campaign stops between runs.
The first, ``docs/results/defence.toml`` (MCFL-plus before its trained-update guard), is
closed: ``--declaration`` with it and ``--report-only`` remake its table, and it refuses
new runs. Per attack × share × placement the table gives the honest worst and average
accuracy, their drop against the same seed's clean MCFL-plus run, local training's
figures over the same trainers, backdoor success, Sybil adoption and the fallback share
(aggregations that kept only the trainer's own update while others were proposed). The
last line printed is (one line)

    worst honest accuracy drop, declared defence (MCFL-plus), worst 20% attack,
    worst-case placement: X pts

X the largest mean worst-trainer drop over the 20 % attacks with concentrated placement
(over the declared seeds finished; the line before names the attack and its seeds;
``n/a`` before any). The matrix is the declaration's alone: the exploratory options
below are refused with it.

**ablation** (issue 37, item 2): ``docs/results/defence-ablation.toml``, committed before
its runs (:mod:`mcfl_chain.simulation.defence_ablation`): MCFL-plus with one mechanism
switched off at a time (``--plus-guard off``, …), clean and under the attacks each
mechanism was argued against, on some seeds of the declaration it ablates, whose own
runs of the full defence it is paired with by seed (never run again here). Runs in
``runs/defence-ablation``, records in ``results/defence-ablation/``, table in
``docs/results/defence-ablation.md``: per condition and variant the honest worst and
average accuracy, their difference to the full defence, the drop against the variant's
own clean run, Sybil adoption and the fallback share. Last line:
``MCFL-plus ablation: N of M runs finished``.

**exploratory** (issue 13's matrix): for each scenario (``groups``: 12 trainers in 3
class groups; ``iid``), seed and method (FedAvg, MCFL at tolerance 1 and 2, MCFL with
each defence), a clean run and one run per attack with a share of the trainers
adversarial (20 %, and 40 % for the two strongest, label and sign flipping), placed at
random. ``--registration allowlist`` (or ``deposit``; repeatable) adds the Sybil attacks
under that registration policy of protocol v2 (``simulate --registration``), named with
the policy as a suffix (``groups-mcfl-tol1-sybil0.2-allowlist-s0``); every other run,
and the clean run their drops are measured against, registers openly. ``--sample-cap N``
(repeatable) likewise adds the sample-inflation attacks on a network whose contracts cap
a declared sample count at N (``simulate --max-samples``), named ``…-capN``. Records in
``results/adversaries/``; tables in ``docs/results/adversaries.md`` (which
``report_results.py`` puts in docs/RESULTS.md, section "Adversaries"): the honest
trainers' worst and average accuracy and their drops against the clean run of the same
scenario, method and seed over the same trainers; backdoor success; Sybil adoption; a
second table sets the Sybil runs of each registration policy side by side, a third the
sample-inflation runs of each cap. The tables hold every run planned by the command or
recorded in ``--records`` (a slice rewrites the whole table). Its last line is

    worst honest accuracy drop, MCFL best defence, 20% label-flip: X pts

where the best defence is the MCFL variant with the smallest mean worst-trainer drop
under 20 % label flippers, over the seeds and scenarios run.

The plans, the records and the tables are :mod:`mcfl_chain.simulation.attack_benchmark`
and :mod:`mcfl_chain.simulation.defence_benchmark`; this script is their command line.

    python scripts/bench_adversaries.py --list                   # the declared matrix
    python scripts/bench_adversaries.py                          # run (or resume) it
    python scripts/bench_adversaries.py --report-only            # its table from records
    python scripts/bench_adversaries.py --matrix ablation        # MCFL-plus's ablation
    python scripts/bench_adversaries.py --matrix exploratory --seeds 0,1
    python scripts/bench_adversaries.py --matrix exploratory --only groups \\
        --attacks label-flip:0.2 --methods fedavg --methods mcfl-multi-krum --seeds 0
    python scripts/bench_adversaries.py --matrix exploratory --attacks sybil:0.2 \\
        --registration allowlist --registration deposit --methods mcfl-tol1 --seeds 0
    python scripts/bench_adversaries.py --matrix exploratory \\
        --attacks sample-inflation:0.2 --sample-cap 1500 --methods fedavg --methods mcfl-tol1
"""

from __future__ import annotations

from pathlib import Path

import click
from rich.console import Console

from mcfl_chain.cli._campaign_options import UNTIL
from mcfl_chain.simulation import attack_benchmark as exploratory
from mcfl_chain.simulation import defence_ablation as ablated
from mcfl_chain.simulation import defence_benchmark as declared
from mcfl_chain.simulation import experiment
from mcfl_chain.simulation.attack_benchmark import (
    ATTACKS,
    HEADLINE_ATTACK,
    OPEN,
    best_defence,
    finished,
    keep_record,
    plan,
    tables,
)
from mcfl_chain.simulation.engines import ENGINES
from mcfl_chain.simulation.registration import POLICIES

MATRICES = ("declared", "exploratory", "ablation")
EXPLORATORY_ONLY = ("only", "chosen_methods", "attacks", "policies", "caps", "seeds", "rounds")
"""Options that slice or size the exploratory matrix; the declared one is the
declaration's alone, so they are refused with it."""


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--matrix",
    type=click.Choice(MATRICES),
    default="declared",
    show_default=True,
    help="declared: the matrix of --declaration (MCFL-plus under every attack, placement "
    "and share, local training beside); exploratory: every MCFL variant, FedAvg and MCFL "
    "under issue 13's attacks (the options marked [exploratory]); ablation: MCFL-plus "
    "with one mechanism off at a time, as --ablation declares.",
)
@click.option(
    "--ablation",
    "ablation_file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=ablated.ABLATION,
    show_default=True,
    help="[ablation] The ablation's file, committed before its runs.",
)
@click.option(
    "--declaration",
    type=click.Path(dir_okay=False, path_type=Path),
    default=declared.DECLARATION,
    show_default=True,
    help="The declared matrix's file, committed before its runs (the newest by default; "
    "docs/results/defence.toml, the first, is closed: --report-only only).",
)
@click.option(
    "--scenarios",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("scenarios/paper"),
    show_default=True,
    help="Folder of scenario files (groups.toml, and iid.toml for the exploratory matrix).",
)
@click.option(
    "--engine",
    type=click.Choice(sorted(ENGINES)),
    default=None,
    help="[declared] Run on this engine instead of the declared one (records name it).",
)
@click.option(
    "--device",
    default=None,
    help="[declared] Run on this device (cpu, cuda, cuda:N) instead of the declared one.",
)
@click.option(
    "--only", multiple=True, help="[exploratory] Only this scenario (groups or iid); repeatable."
)
@click.option(
    "--methods",
    "chosen_methods",
    multiple=True,
    help="[exploratory] Only this method; repeatable.",
)
@click.option(
    "--attacks",
    multiple=True,
    help="[exploratory] Only this attack, NAME:SHARE as in simulate --adversaries "
    f"(repeatable). [default: {', '.join(ATTACKS)}]",
)
@click.option(
    "--registration",
    "policies",
    multiple=True,
    type=click.Choice([p for p in POLICIES if p != OPEN]),
    help="[exploratory] Also run the Sybil attacks under this registration policy "
    "(repeatable); every run registers openly besides.",
)
@click.option(
    "--sample-cap",
    "caps",
    multiple=True,
    type=click.IntRange(min=1),
    help="[exploratory] Also run the sample-inflation attacks on a network capping a "
    "declared sample count at this (repeatable; e.g. the scenario's samples per trainer); "
    "every run has the contracts' default cap besides.",
)
@click.option("--seeds", default=None, help="[exploratory] Seeds, comma-separated. [default: 0,1]")
@click.option(
    "--rounds",
    type=click.IntRange(min=1),
    default=None,
    help="[exploratory] Rounds per run (at most the scenario's). [default: 10]",
)
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="One run directory per run is made here. [default: runs/<declaration's stem> "
    "(declared), runs/adversaries (exploratory)]",
)
@click.option(
    "--table",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Where the table is written. [default: the declaration's path with .md "
    f"(declared: {declared.TABLE}), "
    f"{exploratory.TABLE} (exploratory: every run planned here or recorded in --records)]",
)
@click.option(
    "--records",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Where each finished run's record goes (the tables are made from these; a run "
    f"with a record is not run again). [default: results/<declaration's stem> (declared: "
    f"{declared.RECORDS}), "
    f"{exploratory.RECORDS} (exploratory)]",
)
@UNTIL
@click.option("--list", "list_only", is_flag=True, help="Print the planned runs and exit.")
@click.option("--report-only", is_flag=True, help="Measure the finished runs; run nothing.")
@click.pass_context
def main(
    ctx: click.Context,
    matrix: str,
    ablation_file: Path,
    declaration: Path,
    scenarios: Path,
    engine: str | None,
    device: str | None,
    only: tuple[str, ...],
    chosen_methods: tuple[str, ...],
    attacks: tuple[str, ...],
    policies: tuple[str, ...],
    caps: tuple[int, ...],
    seeds: str | None,
    rounds: int | None,
    out: Path | None,
    table: Path | None,
    records: Path | None,
    list_only: bool,
    report_only: bool,
    until: float | None,
) -> None:
    """Run (or resume) the adversaries benchmark, then print and write its table."""
    console = Console(highlight=False, soft_wrap=True)
    if matrix != "exploratory":
        given = [
            f"--{name.replace('_', '-').replace('chosen-', '')}"
            for name in EXPLORATORY_ONLY
            if ctx.get_parameter_source(name) == click.core.ParameterSource.COMMANDLINE
        ]
        if given:
            raise click.UsageError(
                f"{', '.join(given)} only apply to --matrix exploratory; the declared matrix "
                "is its declaration's (edit nothing there once its runs started)"
            )
        if matrix == "ablation":
            if engine is not None or device is not None:
                raise click.UsageError(
                    "--engine and --device only apply to --matrix declared; the ablation "
                    "runs where its base declaration says"
                )
            try:
                run_ablation(
                    console,
                    ablation_file,
                    scenarios,
                    out or ablated.OUT,
                    table or ablated.TABLE,
                    records or ablated.RECORDS,
                    list_only,
                    report_only,
                    until,
                )
            except experiment.ExperimentError as exc:
                raise click.ClickException(str(exc)) from exc
            return
        try:
            run_declared(
                console,
                declaration,
                scenarios,
                engine,
                device,
                out or declared.out_of(declaration),
                table or declared.table_of(declaration),
                records or declared.records_of(declaration),
                list_only,
                report_only,
                until,
            )
        except experiment.ExperimentError as exc:
            raise click.ClickException(str(exc)) from exc
        return
    if engine is not None or device is not None:
        raise click.UsageError("--engine and --device only apply to --matrix declared")
    run_exploratory(
        console,
        scenarios,
        only,
        chosen_methods,
        attacks,
        policies,
        caps,
        "0,1" if seeds is None else seeds,
        10 if rounds is None else rounds,
        out or Path("runs/adversaries"),
        table or exploratory.TABLE,
        records or exploratory.RECORDS,
        list_only,
        report_only,
        until,
    )


def run_declared(
    console: Console,
    declaration_file: Path,
    scenarios: Path,
    engine: str | None,
    device: str | None,
    out: Path,
    table: Path,
    records: Path,
    list_only: bool,
    report_only: bool,
    until: float | None,
) -> None:
    """The declared matrix: list, run (or resume) and report it; the last line is the
    headline (module docstring)."""
    declaration = declared.Declaration.load(declaration_file)
    runs = declared.plan(declaration, scenarios, engine, device)
    todo = [r for r in runs if not finished(r, out, records)]
    if todo and declaration.closed and not (list_only or report_only):
        raise experiment.ExperimentError(
            f"{declaration_file} is closed: {declaration.closed}; --report-only remakes its "
            "table from its records"
        )
    if _list_or_run(console, "declared", runs, out, records, list_only, report_only, until):
        return
    lines, worst = declared.report(declaration, runs, out, records)
    _write_table(console, table, lines)
    *before, last = declared.closing_lines(declaration, worst)
    console.print("\n".join(before))
    print(last)


def _list_or_run(
    console: Console,
    kind: str,
    runs: list[exploratory.Run],
    out: Path,
    records: Path,
    list_only: bool,
    report_only: bool,
    until: float | None,
) -> bool:
    """List the runs (then True: nothing more to do), or make those without a record
    unless ``report_only`` (then False: report them)."""
    todo = [r for r in runs if not finished(r, out, records)]
    if list_only:
        for index, run in enumerate(runs, 1):
            state = "done" if finished(run, out, records) else None
            console.print(f"{index:4}  {experiment.listing(run, out, state)}")
        console.print(f"{len(runs)} {kind} runs in {out}: {len(runs) - len(todo)} done")
        return True
    if not report_only:
        console.print(
            f"{len(todo)} of {len(runs)} {kind} runs to make in {out} (records in {records})"
        )
        experiment.execute(
            todo,
            out,
            console,
            keep=lambda run, run_dir: keep_record(run, out, records),
            kinds=lambda run: ((run.method, run.attack == "clean"), run.method),
            finished=experiment.progress(runs, out).finished,
            until=until,
        )
    return False


def _write_table(console: Console, table: Path, lines: list[str]) -> None:
    table.parent.mkdir(parents=True, exist_ok=True)
    table.write_text("\n".join(lines) + "\n")
    console.print("\n".join(lines))
    console.print(f"table written to {table}")


def run_ablation(
    console: Console,
    ablation_file: Path,
    scenarios: Path,
    out: Path,
    table: Path,
    records: Path,
    list_only: bool,
    report_only: bool,
    until: float | None,
) -> None:
    """The ablation: list, run (or resume) and report it; the last line counts its runs."""
    ablation = ablated.Ablation.load(ablation_file)
    runs = ablated.plan(ablation, scenarios)
    if _list_or_run(console, "ablation", runs, out, records, list_only, report_only, until):
        return
    _, lines = ablated.report(ablation, scenarios, out, records)
    _write_table(console, table, lines)
    done = len(runs) - sum(1 for r in runs if not finished(r, out, records))
    print(f"MCFL-plus ablation: {done} of {len(runs)} runs finished")


def run_exploratory(
    console: Console,
    scenarios: Path,
    only: tuple[str, ...],
    chosen_methods: tuple[str, ...],
    attacks: tuple[str, ...],
    policies: tuple[str, ...],
    caps: tuple[int, ...],
    seeds: str,
    rounds: int,
    out: Path,
    table: Path,
    records: Path,
    list_only: bool,
    report_only: bool,
    until: float | None,
) -> None:
    """The exploratory matrix, as before the declared one existed (module docstring)."""
    try:
        seed_list = experiment.parse_seeds(seeds)
    except ValueError as exc:
        raise click.BadParameter(f"{exc}; give e.g. 0,1", param_hint="'--seeds'") from exc
    try:
        runs = plan(scenarios, only, chosen_methods, attacks, seed_list, rounds, policies, caps)
        todo = [r for r in runs if not finished(r, out, records)]
        if list_only:
            for index, run in enumerate(runs, 1):
                state = "done" if finished(run, out, records) else None
                console.print(f"{index:4}  {experiment.listing(run, out, state)}")
            console.print(f"{len(runs)} runs planned in {out}: {len(runs) - len(todo)} done")
            return
        if not report_only:
            experiment.execute(
                todo,
                out,
                console,
                keep=lambda run, run_dir: keep_record(run, out, records),
                kinds=lambda run: ((run.scenario, run.method, run.attack), run.method),
                until=until,
            )
        lines, drops = tables(runs, out, records, table)
    except experiment.ExperimentError as exc:
        raise click.ClickException(str(exc)) from exc
    table.parent.mkdir(parents=True, exist_ok=True)
    table.write_text("\n".join(lines) + "\n")
    console.print("\n".join(lines))
    console.print(f"table written to {table}")
    best = best_defence(drops)
    if best is None:
        console.print(
            f"worst honest accuracy drop, MCFL best defence, 20% label-flip: n/a "
            f"(no finished MCFL run with {HEADLINE_ATTACK} and its clean run)"
        )
        return
    console.print(f"best MCFL variant under {HEADLINE_ATTACK}: {best[0]}")
    print(f"worst honest accuracy drop, MCFL best defence, 20% label-flip: {best[1]:.1f} pts")


if __name__ == "__main__":
    main()
