"""Every published table remakes identically from the committed records in ``results/``.

The tables of docs/ (docs/RESULTS.md and docs/results/*.md) are made by the experiment
framework from the records, never by hand: each is made again here, from the records
alone and into a scratch folder, through the command that published it, and must equal
the committed file byte for byte. A change to a measure, a table's layout or a record
that the committed tables do not reflect fails here.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from matplotlib.figure import Figure

from mcfl_chain.simulation import (
    attack_benchmark,
    campaign,
    defence_ablation,
    defence_benchmark,
    protocol,
    results_report,
)

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
RESULTS = ROOT / "results"
TABLES = sorted(p.name for p in (DOCS / "results").glob("*.md"))
REMADE_HERE = {
    "adversaries.md",
    "defence.md",
    "defence-v2.md",
    "defence-v3.md",
    "defence-v4.md",
    "defence-v5.md",
    "defence-ablation.md",
    "fedfmc.md",
    "fedfmc-one-step.md",
}
"""The tables of docs/results/ and the test below that remakes each; RESULTS.md quotes
them, and is remade from them and the campaign's records."""


@pytest.fixture(autouse=True)
def _figures_left_undrawn(monkeypatch):
    """The figures are not what is checked here (the tests of each experiment draw
    them): their files are written empty, which spares 17 renderings (~25 s)."""
    monkeypatch.setattr(Figure, "savefig", lambda self, path, **_: Path(path).write_bytes(b""))


def test_every_published_table_is_remade_by_a_test_here():
    assert set(TABLES) == REMADE_HERE, "a new table in docs/results/: remake it in this file"


def test_results_md_is_remade_from_the_campaign_records(tmp_path):
    # Prepare: a docs folder holding what the report reads besides the records (the
    # hand-written discussion and claims, the other experiments' tables and figures)
    docs = tmp_path / "docs"
    shutil.copytree(DOCS / "discussion", docs / "discussion")
    (docs / "results").mkdir()
    for path in (DOCS / "results").iterdir():
        if path.suffix in (".md", ".toml") or path.name.startswith("fedfmc"):
            shutil.copyfile(path, docs / "results" / path.name)

    # Execute
    results_report.write_report(
        ROOT / campaign.RECORDS,
        docs,
        docs / "results" / "claims.toml",
        ROOT / campaign.PUBLISHED_RECORDS,
        declared_dir=ROOT / protocol.DECLARED_RECORDS,
        fidelity_dir=ROOT / campaign.FIDELITY_RECORDS,
    )

    # Assert
    assert (docs / "RESULTS.md").read_text() == (DOCS / "RESULTS.md").read_text()


@pytest.mark.parametrize("stem", ["fedfmc", "fedfmc-one-step"])
def test_the_fedfmc_tables_are_remade_from_their_records(stem, tmp_path, load_script):
    # Prepare
    table = tmp_path / f"{stem}.md"
    records = RESULTS / stem
    seeds = sorted({name.rsplit("-s", 1)[1] for name in (p.name for p in records.iterdir())})

    # Execute: the records are the run directories; nothing is run or copied
    result = CliRunner().invoke(
        load_script("reproduce_fedfmc").main,
        ["--report-only", "--scenarios", str(ROOT / "scenarios" / stem), "--seeds",
         ",".join(seeds), "--out", str(records), "--records", str(records),
         "--table", str(table)],
    )  # fmt: skip

    # Assert
    assert result.exit_code == 0, result.output
    assert table.read_text() == (DOCS / "results" / f"{stem}.md").read_text()
    assert result.output.splitlines()[-1].startswith(
        "FedFMC three labels, worst archetype at the end: EWC "
    )


def test_the_adversaries_tables_are_remade_from_their_records(tmp_path, load_script):
    # Prepare
    table = tmp_path / "adversaries.md"

    # Execute: no run directory; every recorded run is in the tables
    result = CliRunner().invoke(
        load_script("bench_adversaries").main,
        ["--matrix", "exploratory", "--report-only", "--scenarios",
         str(ROOT / "scenarios" / "paper"), "--out",
         str(tmp_path / "no-runs"), "--records", str(ROOT / attack_benchmark.RECORDS),
         "--table", str(table)],
    )  # fmt: skip

    # Assert
    assert result.exit_code == 0, result.output
    assert table.read_text() == (DOCS / "results" / "adversaries.md").read_text()
    assert result.output.splitlines()[-1].startswith(
        "worst honest accuracy drop, MCFL best defence, 20% label-flip: "
    )


@pytest.mark.parametrize("declaration", defence_benchmark.DECLARATIONS, ids=lambda p: p.stem)
def test_the_declared_defence_tables_are_remade_from_their_records(
    declaration, tmp_path, load_script
):
    # Prepare
    table = tmp_path / "defence.md"

    # Execute: each declared matrix, no run directory
    result = CliRunner().invoke(
        load_script("bench_adversaries").main,
        ["--report-only", "--declaration", str(ROOT / declaration),
         "--scenarios", str(ROOT / "scenarios" / "paper"), "--out", str(tmp_path / "no-runs"),
         "--records", str(ROOT / defence_benchmark.records_of(declaration)), "--table",
         str(table)],
    )  # fmt: skip

    # Assert
    assert result.exit_code == 0, result.output
    assert table.read_text() == (ROOT / defence_benchmark.table_of(declaration)).read_text()
    assert result.output.splitlines()[-1].startswith(
        "worst honest accuracy drop, declared defence (MCFL-plus), worst 20% attack, "
        "worst-case placement: "
    )


def test_the_ablation_table_is_remade_from_its_records_and_the_declared_ones(tmp_path, load_script):
    # Prepare
    table = tmp_path / "defence-ablation.md"

    # Execute: no run directory; the full defence's records are the base declaration's
    result = CliRunner().invoke(
        load_script("bench_adversaries").main,
        ["--matrix", "ablation", "--report-only", "--ablation",
         str(ROOT / defence_ablation.ABLATION), "--scenarios", str(ROOT / "scenarios" / "paper"),
         "--out", str(tmp_path / "no-runs"), "--records", str(ROOT / defence_ablation.RECORDS),
         "--table", str(table)],
    )  # fmt: skip

    # Assert
    assert result.exit_code == 0, result.output
    assert table.read_text() == (ROOT / defence_ablation.TABLE).read_text()
