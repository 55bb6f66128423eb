"""Appending a worker's metrics lines so that none is ever torn or glued to another.

A line is written whole or not at all: if a write comes up short or fails (a full
disk), the file is cut back to where it was. A last line left torn all the same (a
crash, a power cut, a file written by something else) is set aside, renamed
``<name>.torn-<time>``, and cut off before the next line is appended, so a restart
never appends a record onto it.
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mcfl_chain.worker.state import StateError, aside_name

log = logging.getLogger("mcfl_chain.worker")

_CHUNK = 1 << 16
_FULL = (errno.ENOSPC, errno.EDQUOT)


def append_line(path: Path, record: Mapping[str, Any]) -> None:
    """Append ``record`` to ``path`` as one JSON line, whole, and flush it to disk.

    Raises
    ------
    StateError
        When the line cannot be written (one line: a full disk says so); the file is
        left as it was.
    """
    data = (json.dumps(record) + "\n").encode()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
    except OSError as exc:
        raise StateError(_cannot(path, exc)) from exc
    try:
        _set_aside_torn_line(path, fd)
        size = os.fstat(fd).st_size
        try:
            done = 0
            while done < len(data):
                done += os.write(fd, data[done:])
            os.fsync(fd)
        except OSError:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, size)  # no half line left for the next append to glue onto
            raise
    except OSError as exc:
        raise StateError(_cannot(path, exc)) from exc
    finally:
        os.close(fd)


def _cannot(path: Path, exc: OSError) -> str:
    if exc.errno in _FULL:
        return (
            f"cannot append to {path}: the disk is full; free some space and start the "
            f"worker again (the round's metrics line is written then)"
        )
    return (
        f"cannot append to {path} ({exc.strerror or exc}); fix that or choose another "
        f"--metrics file"
    )


def _set_aside_torn_line(path: Path, fd: int) -> None:
    """End the file at its last whole line; a torn tail is kept in a file of its own."""
    size = os.fstat(fd).st_size
    if size == 0 or os.pread(fd, 1, size - 1) == b"\n":
        return
    cut = size
    while cut > 0:
        start = max(0, cut - _CHUNK)
        newline = os.pread(fd, cut - start, start).rfind(b"\n")
        if newline >= 0:
            cut = start + newline + 1
            break
        cut = start
    tail = os.pread(fd, size - cut, cut)
    try:
        whole = isinstance(json.loads(tail), dict)
    except ValueError:
        whole = False
    if whole:  # a record that lacks only its newline
        os.write(fd, b"\n")
        return
    aside = aside_name(path, "torn")
    try:
        aside.write_bytes(tail)
    except OSError:
        with contextlib.suppress(OSError):
            aside.unlink()
        raise
    os.ftruncate(fd, cut)
    log.warning(
        "%s ended with a torn line (%d bytes, a crash or a full disk); set it aside as %s",
        path,
        len(tail),
        aside.name,
    )
