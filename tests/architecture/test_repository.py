"""What git keeps: experiment records under results/ are committed, scratch runs are not."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _ignored(path: str) -> bool:
    done = subprocess.run(["git", "check-ignore", "-q", "--no-index", path], cwd=ROOT)
    assert done.returncode in (0, 1), "git check-ignore failed"
    return done.returncode == 0


@pytest.mark.parametrize(
    "path",
    [
        "results/experiments/groups-mcfl-s0/metrics.jsonl",
        "results/adversaries/groups-fedavg-clean-s0.json",
    ],
)
def test_the_committed_records_are_kept(path):
    assert not _ignored(path)


@pytest.mark.parametrize(
    "path", ["runs/demo-1/metrics.jsonl", ".venv/bin/python", ".mcfl/devnet/deployment.json"]
)
def test_scratch_output_is_ignored(path):
    assert _ignored(path)


def _commits_touching(*paths: str) -> list[tuple[str, set[str]]]:
    """Newest first: each commit that touches ``paths`` and the files it touches."""
    done = subprocess.run(
        ["git", "log", "--format=@%H", "--name-only", "--", *paths],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    commits: list[tuple[str, set[str]]] = []
    for line in done.stdout.splitlines():
        if line.startswith("@"):
            commits.append((line[1:], set()))
        elif line:
            commits[-1][1].add(line)
    return commits


@pytest.mark.parametrize(
    ("declaration", "records"),
    [
        # issue 36: the evaluation protocol, and the optimiser sweep's grid
        ("docs/results/protocol.toml", "results/declared"),
        ("docs/results/sweep.toml", "results/declared/sweep"),
        # issue 37: the declared defence benchmark, its second to fifth declarations
        ("docs/results/defence.toml", "results/defence"),
        ("docs/results/defence-v2.toml", "results/defence-v2"),
        ("docs/results/defence-v3.toml", "results/defence-v3"),
        ("docs/results/defence-v4.toml", "results/defence-v4"),
        ("docs/results/defence-v5.toml", "results/defence-v5"),
        ("docs/results/defence-ablation.toml", "results/defence-ablation"),
        # issue 37: MCFL-plus on the clean scenarios, on fresh seeds
        ("docs/results/mcfl-plus-confirmatory.toml", "results/declared/mcfl-plus-confirmatory"),
    ],
)
def test_a_declaration_predates_the_runs_it_judges(declaration, records):
    # Every change to a declaration is older than the first record of its campaign (a
    # change after it is a deviation: name it in RESULTS.md and here).
    commits = _commits_touching(declaration, records)
    declared = [i for i, (_, files) in enumerate(commits) if declaration in files]
    recorded = [
        i for i, (_, files) in enumerate(commits) if any(f.startswith(records + "/") for f in files)
    ]

    assert declared, f"{declaration} is not in the git history"
    if recorded:
        first_record, last_change = max(recorded), min(declared)
        assert last_change > first_record, (
            f"{declaration} changed in {commits[last_change][0]}, after the first record of "
            f"its campaign ({commits[first_record][0]})"
        )
