"""The ``mcfl-chain`` command: one module per subcommand, on top of every other package.

The packages below know nothing of the command line; these modules parse options,
wire the packages together and turn their errors into one readable line.
"""

from __future__ import annotations

import importlib

import click

from mcfl_chain import __version__

COMMANDS = {
    "account": "account",
    "admin": "admin",
    "dag": "dag",
    "demo": "simulate",
    "deploy": "deploy",
    "devnet": "devnet",
    "explorer": "explorer",
    "ipfs": "ipfs",
    "simulate": "simulate",
    "worker": "worker",
}
"""Each subcommand's module in this package (the command is the module's attribute of
the same name)."""


class _LazyGroup(click.Group):
    """Imports a subcommand's module only when that command runs (or when the help
    lists them all): `mcfl-chain ipfs up` then starts in a fraction of a second instead
    of the ~4 s of CPU that importing torch and web3 for every command costs."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        module = COMMANDS.get(cmd_name)
        if module is None:
            return None
        command = getattr(importlib.import_module(f"{__name__}.{module}"), cmd_name)
        assert isinstance(command, click.Command)
        return command


@click.group(
    cls=_LazyGroup,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.version_option(__version__, prog_name="mcfl-chain")
def main() -> None:
    """MultiConfederated Learning on a blockchain.

    Sovereign trainers train many models at once; model versions form a DAG recorded by
    smart contracts; each trainer aggregates only the peers' updates whose weights diverge
    little from its own. Start with `mcfl-chain demo`, or `mcfl-chain devnet up` then one
    `mcfl-chain worker` per trainer, or `mcfl-chain simulate` for a whole network; on a
    real chain, `mcfl-chain deploy --rpc URL` then one worker per organisation
    (docs/DEPLOY.md).
    """
