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
