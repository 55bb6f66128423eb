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


def test_every_command_module_is_reachable_and_loaded_only_when_run():
    # Prepare: the subcommands' modules, and a fresh interpreter that asks for the version
    import pkgutil

    import click

    from mcfl_chain import cli

    modules = {m.name for m in pkgutil.iter_modules(cli.__path__) if not m.name.startswith("_")} - {
        "reference"
    }
    version = subprocess.run(
        [sys.executable, "-c", "import sys; from mcfl_chain.cli import main\n"
         "main(['--version'], standalone_mode=False)\n"
         "print(sorted(m for m in ('torch', 'web3') if m in sys.modules))"],
        capture_output=True,
        text=True,
    )  # fmt: skip

    # Assert: each module holds a command that `mcfl-chain` lists, and `--version` loads
    # neither torch nor web3
    assert set(cli.COMMANDS.values()) == modules
    ctx = click.Context(cli.main)
    for name in cli.main.list_commands(ctx):
        assert isinstance(cli.main.get_command(ctx, name), click.Command), name
    assert version.returncode == 0 and version.stdout.splitlines()[-1] == "[]", version.stderr
