"""Hand freed heap memory back to the operating system.

A host's trainers allocate and free large tensors from many threads (a phase's batched
training, every trainer's scoring). glibc keeps what they free in its heaps for reuse,
so a host's resident memory stays at the highest it has been: a 10-trainer host held
1.9 GB after its first MCFL round for 0.6 GB of live data. Pinning the allocator's
mmap threshold returned it, but made batched training 1.5 x slower (every large
temporary became an mmap and a page-zeroing); trimming once after each heavy step
costs a few milliseconds.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import gc
import threading
import time


@functools.cache
def _malloc_trim() -> ctypes._CFuncPtr | None:  # type: ignore[name-defined]
    name = ctypes.util.find_library("c")
    try:
        return ctypes.CDLL(name).malloc_trim if name else None
    except (OSError, AttributeError):  # not glibc (musl, macOS): nothing to trim
        return None


def release_freed_memory() -> None:
    """``malloc_trim(0)`` where the C library has it; nothing elsewhere."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


def resident_mb() -> tuple[float, float] | None:
    """This process's resident memory now and at its highest, in MB (Linux's
    ``VmRSS`` and ``VmHWM``); None where ``/proc`` does not tell."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            fields = dict(line.split(":", 1) for line in status if ":" in line)
        now, peak = (int(fields[key].split()[0]) / 1024 for key in ("VmRSS", "VmHWM"))
    except (OSError, KeyError, ValueError):
        return None
    return now, peak


_M_ARENA_MAX = -8
"""glibc's ``mallopt`` parameter for the most malloc arenas."""


def limit_malloc_arenas(count: int) -> bool:
    """At most ``count`` malloc arenas from now on (glibc; nothing elsewhere). Returns
    whether the limit was set.

    glibc gives threads that contend for the heap arenas of their own, up to eight per
    core, and each arena keeps the fragments of what its threads freed: a host's dozens
    of trainer threads, each decoding blobs and scoring models in turn, spread the same
    live memory over many more resident pages. Threads of one interpreter take turns
    anyway, so a few arenas cost them next to nothing.
    """
    name = ctypes.util.find_library("c")
    try:
        mallopt = ctypes.CDLL(name).mallopt if name else None
    except (OSError, AttributeError):
        return False
    return mallopt is not None and bool(mallopt(_M_ARENA_MAX, max(1, count)))


class SharedCollector:
    """``gc.collect()`` for the threads of one process, run at most once every
    ``interval`` seconds, and so that collecting takes at most ``share`` of the time (a
    call in between returns at once).

    Why: a worker collects after every phase (reference cycles hold decoded weights,
    see ``Worker``). A full collection walks every tracked object of the process, so a
    host whose 19 trainers each collected after each phase spent 11 % of its CPU in
    ``gc.collect`` (a 38-trainer FedAvg network); one collection covers them all. With
    100 trainers a host, one a second still held the interpreter 17 % of the time.
    """

    def __init__(self, interval: float = 1.0, share: float = 0.02) -> None:
        self.interval = interval
        self.share = share
        self._next = -float("inf")
        self._lock = threading.Lock()
        self.runs = 0

    def __call__(self) -> None:
        with self._lock:
            started = time.monotonic()
            if started < self._next:
                return
            gc.collect()
            ended = time.monotonic()
            self._next = ended + max(self.interval, (ended - started) / self.share)
            self.runs += 1
