"""docs/CLI.md is what the commands' help says today."""

from __future__ import annotations

import os
import subprocess
import sys

from mcfl_chain.cli import reference


def test_the_cli_reference_is_not_stale():
    # Execute: in a fresh interpreter and a plain environment (state that earlier tests
    # leave in this process changed the commands' help in the full suite)
    plain = {k: os.environ[k] for k in ("PATH", "HOME", "LANG") if k in os.environ}
    done = subprocess.run(
        [sys.executable, "-m", "mcfl_chain.cli.reference", "--check"],
        capture_output=True,
        text=True,
        env=plain,
    )

    # Assert: regenerate with `python -m mcfl_chain.cli.reference` when this fails
    assert done.returncode == 0, done.stderr
    text = reference.REFERENCE.read_text()
    assert "## `mcfl-chain simulate`" in text and "--engine" in text
