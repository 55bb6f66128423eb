"""The command-line reference, docs/CLI.md, generated from the click commands themselves.

``python -m mcfl_chain.cli.reference`` rewrites it; ``--check`` exits 1 when the file
differs from what the commands say (a test runs that check, so the reference cannot go
stale). Each command's section is its ``--help`` text at a fixed width, so the file is
the same on every machine.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import click

from mcfl_chain.cli import main as mcfl_chain

WIDTH = 100
REFERENCE = Path(__file__).resolve().parents[2] / "docs" / "CLI.md"


def _commands(
    command: click.Command, path: tuple[str, ...], parent: click.Context | None
) -> Iterator[tuple[tuple[str, ...], click.Context]]:
    ctx = click.Context(
        command,
        info_name=path[-1],
        parent=parent,
        terminal_width=WIDTH,
        max_content_width=WIDTH,
    )
    yield path, ctx
    if isinstance(command, click.Group):
        for name in sorted(command.list_commands(ctx)):
            sub = command.get_command(ctx, name)
            if sub is not None and not sub.hidden:
                yield from _commands(sub, (*path, name), ctx)


def render() -> str:
    """The reference: a table of contents, then every command's ``--help``."""
    entries = list(_commands(mcfl_chain, ("mcfl-chain",), None))
    lines = [
        "# Command-line reference",
        "",
        "Generated from the commands' own help by `python -m mcfl_chain.cli.reference`; "
        "do not edit by hand (a test fails when this file is stale). The manual is "
        "[USAGE.md](USAGE.md).",
        "",
    ]
    for path, _ctx in entries:
        name = " ".join(path)
        anchor = "-".join(path)
        lines.append(f"{'  ' * (len(path) - 1)}- [`{name}`](#{anchor})")
    for path, ctx in entries:
        lines += ["", f'<a id="{"-".join(path)}"></a>', "", f"## `{' '.join(path)}`", ""]
        lines += ["```text", ctx.command.get_help(ctx).rstrip(), "```"]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    text = render()
    if args == ["--check"]:
        if not REFERENCE.exists() or REFERENCE.read_text() != text:
            print(
                f"{REFERENCE} is stale: run `python -m mcfl_chain.cli.reference` and commit it",
                file=sys.stderr,
            )
            return 1
        return 0
    if args:
        print("usage: python -m mcfl_chain.cli.reference [--check]", file=sys.stderr)
        return 2
    REFERENCE.write_text(text)
    print(f"wrote {REFERENCE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
