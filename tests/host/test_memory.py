"""The host's memory helpers on this machine's C library."""

from __future__ import annotations

import os
import sys

import pytest

from mcfl_chain._utils.memory import limit_malloc_arenas, resident_mb


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc, sets glibc")
def test_resident_memory_is_read_and_the_arena_limit_is_taken() -> None:
    memory = resident_mb()
    assert memory is not None
    now, peak = memory
    assert 0 < now <= peak
    # 8 per core is glibc's own default, so this changes nothing for later tests
    assert limit_malloc_arenas(8 * (os.cpu_count() or 1))
