"""Where a round's wall time goes: training, evaluation, chain, storage, waiting."""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager

CATEGORIES = ("training", "evaluation", "aggregation", "chain", "storage", "waiting")


class RoundClock:
    """Accumulates seconds per category; ``split()`` returns and resets them."""

    def __init__(self) -> None:
        self._seconds: dict[str, float] = defaultdict(float)

    @contextmanager
    def measure(self, category: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self._seconds[category] += time.perf_counter() - start

    def add(self, category: str, seconds: float) -> None:
        self._seconds[category] += seconds

    def split(self) -> dict[str, float]:
        out = {c: round(self._seconds.get(c, 0.0), 4) for c in CATEGORIES}
        self._seconds.clear()
        return out
