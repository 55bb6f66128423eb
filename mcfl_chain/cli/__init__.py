"""The ``mcfl-chain`` command: one module per subcommand, on top of every other package.

The packages below know nothing of the command line; these modules parse options,
wire the packages together and turn their errors into one readable line.
"""

from __future__ import annotations

import click

from mcfl_chain import __version__
from mcfl_chain.cli.account import account
from mcfl_chain.cli.admin import admin
from mcfl_chain.cli.dag import dag
from mcfl_chain.cli.deploy import deploy
from mcfl_chain.cli.devnet import devnet
from mcfl_chain.cli.explorer import explorer
from mcfl_chain.cli.ipfs import ipfs
from mcfl_chain.cli.simulate import demo, simulate
from mcfl_chain.cli.worker import worker


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
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


for command in (devnet, deploy, admin, ipfs, account, worker, simulate, demo, dag, explorer):
    main.add_command(command)
