"""docs/CLI.md is what the commands' help says today."""

from __future__ import annotations

import subprocess
import sys

from mcfl_chain.cli import reference


def test_the_cli_reference_is_not_stale():
    # Execute: in a fresh interpreter (tests register architectures and tasks that the
    # commands' help would then list)
    done = subprocess.run(
        [sys.executable, "-m", "mcfl_chain.cli.reference", "--check"],
        capture_output=True,
        text=True,
    )

    # Assert: regenerate with `python -m mcfl_chain.cli.reference` when this fails
    assert done.returncode == 0, done.stderr
    text = reference.REFERENCE.read_text()
    assert "## `mcfl-chain simulate`" in text and "--engine" in text
