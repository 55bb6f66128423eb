"""FedFMC's own experiment, reproduced at small size: its paper's Figures 1-3 (§4.2).

Three archetypes of one label each (classes 0, 1 and 2 of ``scenarios/fedfmc/``), per
seed three runs of the same data, each an ordinary ``mcfl-chain simulate`` network
(real chain, real workers) kept in ``--out``:

- ``fedfmc-ewc-s<seed>``: ``three-labels.toml``, FedFMC with EWC during the merges
  (the paper's Fig. 1);
- ``fedfmc-no-ewc-s<seed>``: ``three-labels-no-ewc.toml``, the same without EWC (Fig. 2);
- ``fedavg-s<seed>``: ``three-labels.toml`` with FedAvg (Fig. 3). It keeps FedFMC's
  schedule options, which FedAvg ignores, so that it is measured over the same rounds.

Finished runs are skipped and an interrupted one is made again, so the command resumes
where it stopped. ``--rounds N`` caps every run's rounds; the fork stage keeps its T,
so a cap must leave at least one merge round (one that cuts the merges short is noted).

Measures (:mod:`mcfl_chain.simulation.fedfmc_figures`), from each run's metrics lines:
per round, each archetype's mean accuracy (its trainers' deployed model on their own
label); the final accuracy per archetype, the worst of them and their spread (max −
min); the mean absolute round-to-round change over the merge stage (lower = steadier),
over all archetypes and over the rounds an archetype spends on the consolidated model,
and over the whole run; the groups the fork stage formed. Averaged over seeds. Written:
the table, with what the paper claims next to what the numbers show, to
``docs/results/fedfmc.md`` (``report_results.py`` puts it in docs/RESULTS.md, section
"FedFMC's own experiment"), and three figures next to it, named after the table:
``fedfmc-ewc.png``, ``fedfmc-no-ewc.png`` and ``fedfmc-vs-fedavg.png``. The table
starts with the local work per round, which the paper does not give: the default is
ours (2 epochs in batches of 32); ``scenarios/fedfmc-one-step/`` trains one
full-batch step a round, close to FedSGD, where one-label trainers do not end up as
constant predictors. Each finished run's configuration, summary and accuracy lines are
copied to ``results/<table name>/`` (``--records``), to be committed: ``--report-only
--out`` that folder makes the table again. The plan, the records, the table and the
figures are :mod:`mcfl_chain.simulation.fedfmc_experiment`; this script is their command
line. The last line
printed is

    FedFMC three labels, worst archetype at the end: EWC X %, no EWC Y %, FedAvg Z %

    python scripts/reproduce_fedfmc.py --list
    python scripts/reproduce_fedfmc.py                     # seed 0, 50 rounds a run
    python scripts/reproduce_fedfmc.py --seeds 0,1,2       # more seeds (resumes)
    python scripts/reproduce_fedfmc.py --rounds 30 --out runs/fedfmc-30
    python scripts/reproduce_fedfmc.py --report-only       # measure what finished
    python scripts/reproduce_fedfmc.py --report-only --seeds 0,1,2 \
        --out results/fedfmc                               # the same from the kept records
    python scripts/reproduce_fedfmc.py --seeds 0,1,2 --scenarios scenarios/fedfmc-one-step \
        --out runs/fedfmc-one-step --table docs/results/fedfmc-one-step.md
"""

from __future__ import annotations

from pathlib import Path

import click
from rich.console import Console

from mcfl_chain.simulation import experiment
from mcfl_chain.simulation.fedfmc_experiment import (
    EWC_FILE,
    NO_EWC_FILE,
    draw_figures,
    keep_records,
    last_line,
    local_work,
    measure,
    plan,
    records_folder,
    table_lines,
)


def parse_seeds(text: str) -> list[int]:
    """:func:`experiment.parse_seeds`, distinct and at least one, or a usage error."""
    try:
        seeds = experiment.parse_seeds(text)
        experiment.check_seeds(seeds)
    except ValueError as exc:
        raise click.BadParameter(
            f"{text!r}: {exc}; give e.g. 0,1,2", param_hint="'--seeds'"
        ) from exc
    return seeds


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--scenarios",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("scenarios/fedfmc"),
    show_default=True,
    help=f"Folder holding {EWC_FILE} (FedFMC with EWC; also FedAvg's data) and "
    f"{NO_EWC_FILE} (the same without EWC).",
)
@click.option("--seeds", default="0", show_default=True, help="Seeds, comma-separated.")
@click.option(
    "--rounds",
    type=click.IntRange(min=1),
    help="Cap every run's rounds (the fork stage keeps its T, so give more than T).  "
    "[default: the scenario's, 50]",
)
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("runs/fedfmc"),
    show_default=True,
    help="One run directory per run is made here.",
)
@click.option(
    "--table",
    type=click.Path(dir_okay=False, path_type=Path),
    default=Path("docs/results/fedfmc.md"),
    show_default=True,
    help="Where the table is written; the three figures go to the same folder.",
)
@click.option(
    "--records",
    type=click.Path(file_okay=False, path_type=Path),
    help="Where each finished run's configuration, summary and accuracy lines are copied, "
    "to be committed; --report-only --out DIR makes the table again from them.  "
    "[default: results/<table name>]",
)
@click.option("--list", "list_only", is_flag=True, help="Print the planned runs and exit.")
@click.option("--report-only", is_flag=True, help="Measure the finished runs; run nothing.")
def main(
    scenarios: Path,
    seeds: str,
    rounds: int | None,
    out: Path,
    table: Path,
    records: Path | None,
    list_only: bool,
    report_only: bool,
) -> None:
    """Run (or resume) FedFMC's three-label experiment with and without EWC and FedAvg,
    then write its table and its three figures."""
    console = Console(highlight=False, soft_wrap=True)
    try:
        planned = plan(scenarios, parse_seeds(seeds), rounds)
        now = experiment.progress(planned.runs, out)
        if list_only:
            for index, run in enumerate(planned.runs, 1):
                console.print(f"{index:4}  {experiment.listing(run, out)}", markup=False)
            for note in planned.notes:
                console.print(f"note: {note}")
            console.print(f"{len(planned.runs)} runs planned in {out}: {len(now.done)} done")
            return
        # Figures averaged over runs of different rounds or data would mean nothing.
        experiment.refuse_other_options(
            planned.runs,
            out,
            "give another --out (or the same --rounds), or remove that directory",
        )
        for note in planned.notes:
            console.print(f"note: {note}")
        if not report_only:
            console.print(
                f"{len(planned.runs)} runs planned in {out}: "
                f"{len(now.done)} done before, {len(now.todo)} to run"
            )
            experiment.execute(now.todo, out, console, finished=now.finished)
        summaries = measure(planned.runs, out)
    except experiment.ExperimentError as exc:
        raise click.ClickException(str(exc)) from exc
    setting = local_work(planned.runs[0].config)
    lines = [f"Local training: {setting}.", "", *table_lines(summaries)]
    table.parent.mkdir(parents=True, exist_ok=True)
    table.write_text("\n".join(lines) + "\n")
    console.print("\n".join(lines))
    console.print(f"table written to {table}")
    for path in draw_figures(summaries, table.parent, table.stem, setting):
        console.print(f"figure written to {path}")
    records = records or records_folder(table)
    try:
        copied = keep_records(planned.runs, out, records)
    except OSError as exc:
        raise click.ClickException(
            f"the runs' records could not be kept in {records} ({exc.strerror or exc}); "
            "give a writable folder with --records (the table and figures are written)"
        ) from exc
    if copied:
        console.print(f"records of {copied} runs kept in {records}")
    print(last_line(summaries))


if __name__ == "__main__":
    main()
