"""Write docs/RESULTS.md and docs/results/*.png from the experiment campaign's runs.

The report is :mod:`mcfl_chain.simulation.results_report`; this script is its command
line. It reads the run directories of ``scripts/run_experiments.py``
(``runs/experiments``; ``runs/experiments-published`` for ``--published-size``), keeps
each finished run's record in ``results/experiments/`` (``--records``) and, on a fresh
clone without the run directories, reports from those records.

Usage: python scripts/report_results.py [--runs runs/experiments] [--out docs]
"""

from __future__ import annotations

from pathlib import Path

import click

from mcfl_chain.simulation import campaign, protocol
from mcfl_chain.simulation.experiment import ExperimentError
from mcfl_chain.simulation.results_report import write_report


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--runs",
    "runs_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("runs/experiments"),
    show_default=True,
    help="The campaign's run directories.",
)
@click.option(
    "--published-runs",
    "published_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("runs/experiments-published"),
    show_default=True,
    help="The run directories of run_experiments.py --published-size.",
)
@click.option(
    "--out",
    "docs",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("docs"),
    show_default=True,
    help="Where RESULTS.md and results/*.png are written.",
)
@click.option(
    "--claims",
    "claims_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="The paper's claims and our verdicts.  [default: <out>/results/claims.toml]",
)
@click.option(
    "--records",
    type=click.Path(file_okay=False, path_type=Path),
    default=campaign.RECORDS,
    show_default=True,
    help="Each finished run's record is kept here; the report is made from them when "
    "--runs does not exist (a fresh clone).",
)
@click.option(
    "--published-records",
    type=click.Path(file_okay=False, path_type=Path),
    default=campaign.PUBLISHED_RECORDS,
    show_default=True,
    help="The same for --published-runs.",
)
@click.option(
    "--declared-runs",
    "declared_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=protocol.DECLARED_RUNS,
    show_default=True,
    help="The run directories of run_experiments.py --declared (the table 'MCFL against "
    "the best alternative', by docs/results/protocol.toml).",
)
@click.option(
    "--declared-records",
    type=click.Path(file_okay=False, path_type=Path),
    default=protocol.DECLARED_RECORDS,
    show_default=True,
    help="The same for --declared-runs.",
)
@click.option(
    "--fidelity-runs",
    "fidelity_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("runs/fidelity"),
    show_default=True,
    help="The run directories of run_experiments.py --fidelity (the last rows of the "
    "ablation tables).",
)
@click.option(
    "--fidelity-records",
    type=click.Path(file_okay=False, path_type=Path),
    default=campaign.FIDELITY_RECORDS,
    show_default=True,
    help="The same for --fidelity-runs.",
)
def main(
    runs_dir: Path,
    published_dir: Path,
    docs: Path,
    claims_path: Path | None,
    records: Path,
    published_records: Path,
    declared_dir: Path,
    declared_records: Path,
    fidelity_dir: Path,
    fidelity_records: Path,
) -> None:
    """Generate docs/RESULTS.md and docs/results/*.png from the run directories."""
    sources = []
    for given, kept in (
        (runs_dir, records),
        (published_dir, published_records),
        (declared_dir, declared_records),
        (fidelity_dir, fidelity_records),
    ):
        if not given.is_dir() and kept.is_dir():
            # A fresh clone: report from the kept records rather than from nothing.
            print(f"{given} does not exist: reporting from the records in {kept}")
            given = kept
        sources.append(given)
    try:
        path = write_report(
            sources[0],
            docs,
            claims_path or docs / "results" / "claims.toml",
            sources[1],
            records=records,
            published_records=published_records,
            declared_dir=sources[2],
            declared_records=declared_records,
            fidelity_dir=sources[3],
        )
    except ExperimentError as exc:
        raise click.ClickException(str(exc)) from exc
    print(f"written {path}")


if __name__ == "__main__":
    main()
