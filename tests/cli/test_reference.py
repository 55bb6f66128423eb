"""docs/CLI.md is what the commands' help says today."""

from __future__ import annotations

from mcfl_chain.cli import reference


def test_the_cli_reference_is_not_stale(capsys):
    # Execute
    code = reference.main(["--check"])

    # Assert: regenerate with `python -m mcfl_chain.cli.reference` when this fails
    assert code == 0, capsys.readouterr().err
    text = reference.REFERENCE.read_text()
    assert "## `mcfl-chain simulate`" in text and "--engine" in text
