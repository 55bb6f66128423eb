"""Per-round summaries, tables and plots of a run directory's metrics.

Input: the JSON lines every worker writes once per round (its aggregated model's
metric on its own test split, the round's time split). Output: the per-round table the
simulator prints, ``rounds.csv``, ``summary.json`` and PNG plots.
"""

from __future__ import annotations

import csv
import json
import statistics
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from mcfl_chain.worker.timing import CATEGORIES

FAIR_ALPHA = 2 / 3
"""FACADE's weight of mean accuracy against the spread between groups."""


@dataclass
class RoundSummary:
    round: int
    trainers: int
    metric_min: float | None
    metric_avg: float | None
    metric_max: float | None
    models: int
    seconds: float
    fair_accuracy: float | None
    split: dict[str, float]


def read_metrics(paths: Iterable[Path]) -> list[dict[str, Any]]:
    """All metrics lines of the given JSONL files (a torn last line is ignored)."""
    lines: list[dict[str, Any]] = []
    for path in paths:
        if not path.exists():
            continue
        for raw in path.read_text().splitlines():
            try:
                lines.append(json.loads(raw))
            except ValueError:
                continue
    return sorted(lines, key=lambda m: (m["round"], str(_who(m))))


def metric_of(line: dict[str, Any]) -> float | None:
    """Accuracy for classifiers, MSE (the loss) for autoencoders."""
    return line["accuracy"] if line.get("accuracy") is not None else line.get("loss")


def fair_accuracy(by_group: dict[Any, list[float]], alpha: float = FAIR_ALPHA) -> float | None:
    """FACADE's fair accuracy: α·mean_c(acc_c) + (1−α)(1 − (max_c acc_c − min_c acc_c))."""
    means = [statistics.fmean(v) for v in by_group.values() if v]
    if not means:
        return None
    return alpha * statistics.fmean(means) + (1 - alpha) * (1 - (max(means) - min(means)))


def summarize(
    lines: Sequence[dict[str, Any]], models_per_round: dict[int, int]
) -> list[RoundSummary]:
    """One summary per round over every trainer's line for that round."""
    by_round: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for line in lines:
        by_round[line["round"]].append(line)
    out = []
    ended: float | None = None
    """When the last trainer reported the round before (wall clock)."""
    reported: set[Any] = set()
    """The trainers that reported the round before."""
    for round_, rows in sorted(by_round.items()):
        values = [v for v in (metric_of(r) for r in rows) if v is not None]
        groups: dict[Any, list[float]] = defaultdict(list)
        for r in rows:
            if r.get("accuracy") is not None:
                groups[r.get("group", 0)].append(r["accuracy"])
        split = {c: statistics.fmean(r["split"].get(c, 0.0) for r in rows) for c in CATEGORIES}
        out.append(
            RoundSummary(
                round=round_,
                trainers=len(rows),
                metric_min=min(values) if values else None,
                metric_avg=statistics.fmean(values) if values else None,
                metric_max=max(values) if values else None,
                models=models_per_round.get(round_, 0),
                seconds=max(_round_seconds(r, reported, ended) for r in rows),
                fair_accuracy=fair_accuracy(groups),
                split=split,
            )
        )
        times = [r["time"] for r in rows if isinstance(r.get("time"), (int, float))]
        ended = max(times) if times else None
        reported = {_who(r) for r in rows}
    return out


def _who(line: dict[str, Any]) -> Any:
    return line.get("trainer_index", line.get("trainer"))


def _round_seconds(line: dict[str, Any], reported: set[Any], ended: float | None) -> float:
    """A trainer's time in its round. Its line counts from its report of the round before;
    a trainer that did not report that round (one sitting rounds out in a cohort
    network, or a late joiner) counts from when the last trainer reported it, not from
    its own last report rounds ago."""
    seconds = float(line["seconds"])
    if ended is None or _who(line) in reported or not isinstance(line.get("time"), (int, float)):
        return seconds
    return min(seconds, max(0.0, float(line["time"]) - ended))


def write_csv(summaries: Sequence[RoundSummary], path: Path) -> None:
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(
            [
                "round",
                "trainers",
                "min",
                "avg",
                "max",
                "models",
                "seconds",
                "fair_accuracy",
                *[f"{c}_s" for c in CATEGORIES],
            ]
        )
        for s in summaries:
            writer.writerow(
                [
                    s.round,
                    s.trainers,
                    s.metric_min,
                    s.metric_avg,
                    s.metric_max,
                    s.models,
                    round(s.seconds, 3),
                    s.fair_accuracy,
                    *[round(s.split[c], 4) for c in CATEGORIES],
                ]
            )


def time_split(summaries: Sequence[RoundSummary]) -> dict[str, float]:
    """Share of a trainer's round time spent in each category, over the whole run."""
    totals = {c: sum(s.split[c] for s in summaries) for c in CATEGORIES}
    whole = sum(totals.values()) or 1.0
    return {c: totals[c] / whole for c in CATEGORIES}


def grouping(lines: Sequence[dict[str, Any]], last_round: int) -> dict[str, list[Any]]:
    """Which data groups share a model at ``last_round``: model id → sorted groups."""
    out: dict[str, set[Any]] = defaultdict(set)
    for line in lines:
        if line["round"] == last_round and line.get("model"):
            out[line["model"]].add(line.get("group", 0))
    return {m: sorted(g) for m, g in out.items()}


def write_summary(
    run_dir: Path,
    lines: Sequence[dict[str, Any]],
    summaries: Sequence[RoundSummary],
    extra: dict[str, Any],
) -> dict[str, Any]:
    last = summaries[-1] if summaries else None
    summary = {
        **extra,
        "rounds": [asdict(s) for s in summaries],
        "final": None if last is None else asdict(last),
        "time_split": time_split(summaries),
        "grouping": {} if last is None else grouping(lines, last.round),
    }
    (run_dir / "summary.json").write_text(json.dumps(summary, indent=1))
    return summary


def plot(
    run_dir: Path,
    lines: Sequence[dict[str, Any]],
    summaries: Sequence[RoundSummary],
    metric_name: str,
) -> list[Path]:
    """accuracy.png (per trainer and min/avg/max) and models.png (models per round)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    fig, ax = plt.subplots(figsize=(7, 4))
    per_trainer: dict[Any, list[tuple[int, float]]] = defaultdict(list)
    for line in lines:
        value = metric_of(line)
        if value is not None:
            per_trainer[line.get("trainer_index", line["trainer"])].append((line["round"], value))
    for points in per_trainer.values():
        xs, ys = zip(*points, strict=True)
        ax.plot(xs, ys, color="0.8", linewidth=0.7)
    rounds = [s.round for s in summaries if s.metric_avg is not None]
    for attr, style in (("metric_min", "--"), ("metric_avg", "-"), ("metric_max", ":")):
        ax.plot(
            rounds,
            [getattr(s, attr) for s in summaries if s.metric_avg is not None],
            style,
            color="C0",
            label=attr.split("_")[1],
        )
    ax.set_xlabel("round")
    ax.set_ylabel(metric_name)
    ax.set_title(f"{metric_name} of each trainer's aggregated model on its test split")
    ax.legend()
    fig.tight_layout()
    path = run_dir / "accuracy.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    written.append(path)

    fig, ax = plt.subplots(figsize=(7, 3))
    ax.step([s.round for s in summaries], [s.models for s in summaries], where="mid")
    ax.set_xlabel("round")
    ax.set_ylabel("models appended")
    ax.set_title("number of models (clusters) per round")
    ax.set_ylim(bottom=0)
    fig.tight_layout()
    path = run_dir / "models.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    written.append(path)
    return written
