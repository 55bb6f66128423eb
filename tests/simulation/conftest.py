"""Synthetic run directories, laid out as ``run_simulation`` writes them, and scripts."""

from __future__ import annotations

import importlib.util
import json
import sys
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest

from mcfl_chain.simulation import report
from mcfl_chain.simulation.runner import SimulationConfig

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"
SPLIT = {"training": 1.0, "evaluation": 0.2, "aggregation": 0.1, "chain": 0.3}


def metrics_line(round_: int, index: int, value: float, group: str, metric: str) -> dict:
    """One worker's line for one round (the keys the report reads)."""
    return {
        "round": round_,
        "trainer": f"0x{index:040x}",
        "trainer_id": index + 1,
        "trainer_index": index,
        "group": group,
        "strategy": "mcfl",
        "tolerance": 1.0,
        "accuracy": value if metric == "accuracy" else None,
        "loss": value if metric == "MSE" else 1 - value,
        "model": f"0xmodel{index % 2}",
        "aggregations": [],
        "seconds": 2.0,
        "split": SPLIT,
    }


def write_run(
    run_dir: Path,
    config: SimulationConfig,
    value: Callable[[int, int], float],
    groups: Callable[[int], str] = lambda i: "g",
    metric: str = "accuracy",
    seconds: float = 60.0,
    trainers: list[int] | None = None,
    extra: Callable[[int, int], dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """A finished run: trainer ``i`` scores ``value(i, round)`` in every round, its lines
    carrying ``extra(i, round)`` too."""
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "config.json").write_text(json.dumps(asdict(config), indent=1))
    indices = trainers if trainers is not None else config.trainer_indices()
    lines = [
        {**metrics_line(r, i, value(i, r), groups(i), metric), **(extra(i, r) if extra else {})}
        for r in range(config.rounds)
        for i in indices
    ]
    with open(run_dir / "metrics.jsonl", "w") as f:
        for line in lines:
            f.write(json.dumps(line) + "\n")
    summaries = report.summarize(lines, {r: 2 for r in range(config.rounds)})
    report.write_csv(summaries, run_dir / "rounds.csv")
    return report.write_summary(
        run_dir,
        lines,
        summaries,
        {
            "config": asdict(config),
            "seconds": seconds,
            "metric": metric,
            "models_total": 2 * config.rounds,
            "updates_total": len(lines),
        },
    )


@pytest.fixture
def load_script():
    """Import ``scripts/<name>.py`` as a module."""

    def load(name: str):
        spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        return module

    return load


@pytest.fixture
def run_writer():
    """:func:`write_run`, for tests to make synthetic run directories."""
    return write_run


def _protocol_text(names: list[str]) -> str:
    """An evaluation protocol declaring ``names`` (each its own scenario file, a
    superiority hypothesis of the paper), FedAvg and local training as candidates."""
    lines = [
        "[protocol]",
        "alpha = 0.05",
        "tuning_seeds = [0, 1]",
        f"evaluation_seeds = {list(range(100, 110))}",
        'primary_endpoint = "mean-over-trainers"',
        'comparator_rule = "best-mean-on-tuning-seeds"',
        'candidates = ["fedavg", "local"]',
        'correction = "holm"',
        'equivalence_test = "tost"',
        "margin_points = 1.0",
        "margin_mse = 0.0005",
        'tolerance = "mixed"',
        "max_standard_error_points = 1.5",
    ]
    for name in names:
        lines += [f"[scenarios.{name}]", f'file = "{name}"', 'hypothesis = "superiority"']
        lines += ["paper_claim = true"]
    return "\n".join(lines) + "\n"


@pytest.fixture
def protocol_text():
    """The text of a small evaluation protocol (``docs/results/protocol.toml``'s form) for
    the scenarios named: ``protocol_text(["a", "b"])``."""
    return _protocol_text
