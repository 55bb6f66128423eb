"""A trainer's metrics: one JSON line per round (paper §5.1; the fields in docs/USAGE.md).

The paper's metric is the aggregated model's performance on the trainer's own data,
without fine-tuning. Here the line reports the *deployed* model: among the trainer's
aggregations of the round, the one with the best selection metric (scored on the
validation split), on the held-out test split. Next to it: every aggregation, the models
trained, the round's wall time and where it went, the blob traffic and the gas of the
trainer's own transactions.

The trainer decides which rounds to report and when; this service composes the line,
appends it whole (:func:`~mcfl_chain.worker.metrics_file.append_line`) and tells
whether a round's line is already in the file.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from mcfl_chain.chain.client import ChainClient
from mcfl_chain.worker.blobs import Blobs
from mcfl_chain.worker.metrics_file import append_line
from mcfl_chain.worker.timing import RoundClock


def deployed(results: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The aggregation a trainer deploys: the best selection metric (an unscored one
    last); None without any."""
    return max(
        results,
        key=lambda r: -math.inf if r["selection_metric"] is None else r["selection_metric"],
        default=None,
    )


class Reporter:
    """Writes a trainer's round lines to ``path`` (None: nowhere) with ``labels`` in each.

    It counts a round's gas as what ``chain`` used since the previous line (or since
    :meth:`start`) and its seconds since the previous line (or since it was built).
    """

    def __init__(
        self,
        chain: ChainClient,
        clock: RoundClock,
        blobs: Blobs,
        path: Path | None,
        labels: Mapping[str, Any],
    ) -> None:
        self.chain = chain
        self.clock = clock
        self.blobs = blobs
        self.path = path
        self.labels = dict(labels)
        self._gas_counted = 0
        self._round_started = time.perf_counter()

    def start(self) -> None:
        """Count gas from now: what came before (the one-off registration) is no round's."""
        self._gas_counted = self.chain.gas_used

    def written(self, round_: int) -> bool:
        """Whether the file already has this trainer's line for ``round_`` (in this
        network: a file shared by several networks holds others' lines too)."""
        if self.path is None or not self.path.exists():
            return False
        network = self.labels.get("network")
        me = self.chain.address.lower()
        for raw in self.path.read_text().splitlines():
            try:
                line = json.loads(raw)
            except ValueError:
                continue
            if (
                line.get("round") == round_
                and str(line.get("trainer", "")).lower() == me
                and line.get("network", network) == network
            ):
                return True
        return False

    def write(
        self,
        round_: int,
        trainer_id: int,
        results: list[dict[str, Any]],
        trained: Sequence[bytes],
    ) -> dict[str, Any]:
        """Write ``round_``'s line (``results``: the evaluated aggregations, ``trained``:
        the parents trained on) and start counting the next round; returns the line.

        Raises
        ------
        StateError
            When the line cannot be written (the file is left as it was).
        """
        best = deployed(results)
        now = time.perf_counter()
        line = {
            "round": round_,
            "trainer": self.chain.address,
            "trainer_id": trainer_id,
            **self.labels,
            "accuracy": None if best is None else best["accuracy"],
            "loss": None if best is None else best["loss"],
            "model": None if best is None else best["model"],
            "personal": {} if best is None else best.get("personal", {}),
            "aggregations": results,
            "trained": ["0x" + m.hex() for m in trained],
            "seconds": round(now - self._round_started, 3),
            "split": self.clock.split(),
            "traffic": self.blobs.traffic.split(),
            "gas": self.chain.gas_used - self._gas_counted,
            "time": time.time(),
        }
        self._gas_counted = self.chain.gas_used
        self.blobs.log_round(round_, line["traffic"])
        self.blobs.release()
        self._round_started = now
        if self.path is not None:
            append_line(self.path, line)  # whole or not at all
        return line
