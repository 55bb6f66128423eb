"""The host's memory helpers on this machine's C library."""

from __future__ import annotations

import os
import sys

import pytest

from mcfl_chain._utils.memory import SharedCollector, limit_malloc_arenas, resident_mb


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc, sets glibc")
def test_resident_memory_is_read_and_the_arena_limit_is_taken() -> None:
    memory = resident_mb()
    assert memory is not None
    now, peak = memory
    assert 0 < now <= peak
    # 8 per core is glibc's own default, so this changes nothing for later tests
    assert limit_malloc_arenas(8 * (os.cpu_count() or 1))


def test_a_shared_collector_collects_for_all_threads_at_most_once_an_interval():
    # Prepare: an unreachable cycle, and a collector of a long interval
    import gc
    import threading
    import weakref

    class Node:
        pass

    def cycle() -> weakref.ref[Node]:
        a, b = Node(), Node()
        a.other, b.other = b, a  # type: ignore[attr-defined]
        return weakref.ref(a)

    collect = SharedCollector(interval=3600.0)
    gc.disable()  # only the collector collects here
    try:
        first = cycle()

        # Execute: many threads at once, then a new cycle
        threads = [threading.Thread(target=collect) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        second = cycle()
        collect()

        # Assert: one collection freed the first cycle; the second waits for the interval
        assert collect.runs == 1 and first() is None and second() is not None
    finally:
        gc.enable()
