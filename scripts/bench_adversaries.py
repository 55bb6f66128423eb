"""Adversaries against FedAvg, MCFL and MCFL with each defence: what they cost honest trainers.

For each scenario (``groups``: 12 trainers in 3 class groups; ``iid``), seed and method,
a clean run and one run per attack with a share of the trainers adversarial (20 %, and
40 % for the two strongest, label and sign flipping). Each run is an ordinary
``mcfl-chain simulate`` network (real chain, real workers) kept in ``--out``; finished
runs are skipped, so the command resumes where it stopped.

Each finished run leaves a small record in ``--records`` (``results/adversaries/``; one
JSON file per run: the honest trainers' final accuracies and the run's attack measures),
written as soon as the run ends. The tables are made from those records, so they can
be checked, and made again with ``--report-only``, without the run directories; a run
with a record is not run again.

``--registration allowlist`` (or ``deposit``; repeatable) adds the Sybil attacks under
that registration policy of protocol v2 (``simulate --registration``), named with the
policy as a suffix (``groups-mcfl-tol1-sybil0.2-allowlist-s0``); every other run, and
the clean run their drops are measured against, registers openly. ``--sample-cap N``
(repeatable) likewise adds the sample-inflation attacks on a network whose contracts
cap a declared sample count at N (``simulate --max-samples``), named ``…-capN``.

Measures (:mod:`mcfl_chain.simulation.adversarial`), over the honest trainers only, at
the last round: worst and average accuracy, and their drop against the clean run of the
same scenario, method and seed, over the same trainers; the backdoor's success rate on
triggered test images; for the Sybils, how often honest trainers trained the
coalition's model. A second table sets the Sybil runs of each registration policy side
by side: the coalition's identities that registered, the stake they locked, adoption
and the worst drop. A third sets the sample-inflation runs of each cap side by side:
what the inflators declared, the honest trainers' counts, the weight that buys in
FedAvg, and the drops. The tables hold every run planned by the command or recorded in
``--records`` (a slice of the benchmark rewrites the whole table) and go to the terminal
and to ``docs/results/adversaries.md`` (which ``report_results.py`` puts in docs/RESULTS.md,
section "Adversaries"). The last line printed is

    worst honest accuracy drop, MCFL best defence, 20% label-flip: X pts

where the best defence is the MCFL variant with the smallest mean worst-trainer drop
under 20 % label flippers, over the seeds and scenarios run.

The plan, the records and the tables are
:mod:`mcfl_chain.simulation.attack_benchmark`; this script is their command line.

    python scripts/bench_adversaries.py --list
    python scripts/bench_adversaries.py --seeds 0,1              # the whole matrix
    python scripts/bench_adversaries.py --only groups --attacks label-flip:0.2 \\
        --methods fedavg --methods mcfl-multi-krum --seeds 0     # a slice
    python scripts/bench_adversaries.py --attacks sybil:0.2 --registration allowlist \\
        --registration deposit --methods mcfl-tol1 --seeds 0     # Sybils and policies
    python scripts/bench_adversaries.py --attacks sample-inflation:0.2 --sample-cap 1500 \\
        --methods fedavg --methods mcfl-tol1                      # inflation and a cap
"""

from __future__ import annotations

from pathlib import Path

import click
from rich.console import Console

from mcfl_chain.simulation import experiment
from mcfl_chain.simulation.attack_benchmark import (
    ATTACKS,
    HEADLINE_ATTACK,
    OPEN,
    RECORDS,
    TABLE,
    best_defence,
    finished,
    keep_record,
    plan,
    tables,
)
from mcfl_chain.simulation.registration import POLICIES


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--scenarios",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("scenarios/paper"),
    show_default=True,
    help="Folder of scenario files (groups.toml and iid.toml are used).",
)
@click.option("--only", multiple=True, help="Only this scenario (groups or iid); repeatable.")
@click.option("--methods", "chosen_methods", multiple=True, help="Only this method; repeatable.")
@click.option(
    "--attacks",
    multiple=True,
    help="Only this attack, NAME:SHARE as in simulate --adversaries (repeatable). "
    f"[default: {', '.join(ATTACKS)}]",
)
@click.option(
    "--registration",
    "policies",
    multiple=True,
    type=click.Choice([p for p in POLICIES if p != OPEN]),
    help="Also run the Sybil attacks under this registration policy (repeatable); every "
    "run registers openly besides.",
)
@click.option(
    "--sample-cap",
    "caps",
    multiple=True,
    type=click.IntRange(min=1),
    help="Also run the sample-inflation attacks on a network capping a declared sample "
    "count at this (repeatable; e.g. the scenario's samples per trainer); every run has "
    "the contracts' default cap besides.",
)
@click.option("--seeds", default="0,1", show_default=True, help="Seeds, comma-separated.")
@click.option(
    "--rounds",
    type=click.IntRange(min=1),
    default=10,
    show_default=True,
    help="Rounds per run (at most the scenario's).",
)
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("runs/adversaries"),
    show_default=True,
    help="One run directory per run is made here.",
)
@click.option(
    "--table",
    type=click.Path(dir_okay=False, path_type=Path),
    default=TABLE,
    show_default=True,
    help="Where the tables are written: every run planned here or recorded in --records.",
)
@click.option(
    "--records",
    type=click.Path(file_okay=False, path_type=Path),
    default=RECORDS,
    show_default=True,
    help="Where each finished run's record goes (the tables are made from these; a run "
    "with a record is not run again).",
)
@click.option("--list", "list_only", is_flag=True, help="Print the planned runs and exit.")
@click.option("--report-only", is_flag=True, help="Measure the finished runs; run nothing.")
def main(
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
) -> None:
    """Run (or resume) the adversaries benchmark, then print and write its table."""
    console = Console(highlight=False, soft_wrap=True)
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
