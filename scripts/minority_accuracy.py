"""The rotated (minority) trainers' and the others' accuracy at each run's last round.

    python scripts/minority_accuracy.py RUN_DIR [RUN_DIR ...]

Reads each run's ``metrics.jsonl`` (a run folder of ``mcfl-chain simulate`` or of
``results/``); prints one line a run: the minority's and the majority's accuracy at the
last round, the number of models the trainers ended on, and the minority's accuracy by
round. The minority is the group named ``rotation 180°`` (the rotation scenarios).
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

MINORITY = "rotation 180°"


def summarise(run: Path) -> str:
    """One line for ``run``; raises ``ValueError`` when it has no minority."""
    lines = [json.loads(raw) for raw in (run / "metrics.jsonl").read_text().splitlines()]
    scored = [line for line in lines if line.get("accuracy") is not None and "group" in line]
    if not any(line["group"] == MINORITY for line in scored):
        raise ValueError(f"{run}: no trainer of group {MINORITY!r} has an accuracy")
    last = max(line["round"] for line in scored)
    final = [line for line in scored if line["round"] == last]
    minority = [line["accuracy"] for line in final if line["group"] == MINORITY]
    majority = [line["accuracy"] for line in final if line["group"] != MINORITY]
    by_round = [
        round(100 * line["accuracy"], 1)
        for line in sorted(scored, key=lambda line: line["round"])
        if line["group"] == MINORITY
    ]
    models = len({line["model"] for line in final})
    return (
        f"{run}: last round {last}; minority {100 * statistics.mean(minority):.1f} %; "
        f"majority mean {100 * statistics.mean(majority):.1f} % "
        f"(min {100 * min(majority):.1f}); models {models}; minority by round {by_round}"
    )


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    for folder in argv:
        try:
            print(summarise(Path(folder)))
        except (OSError, ValueError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
