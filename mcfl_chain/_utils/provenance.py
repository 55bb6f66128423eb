"""Which code made a record: the checkout's commit, as the benchmark scripts write it."""

from __future__ import annotations

import subprocess
from pathlib import Path


def source_commit(root: Path, *, mark_dirty: bool = False) -> str:
    """The short hash of ``root``'s checked-out commit, or ``"?"`` where there is none
    (not a git checkout, or no git). With ``mark_dirty``, ``"+dirty"`` is appended when
    the tree has uncommitted changes (a record written into the tree itself makes it
    so)."""

    def git(*args: str) -> str:
        try:
            done = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True)
        except OSError:
            return ""
        return done.stdout if done.returncode == 0 else ""

    commit = git("rev-parse", "--short", "HEAD").strip()
    if not commit:
        return "?"
    return commit + ("+dirty" if mark_dirty and git("status", "--porcelain") else "")
