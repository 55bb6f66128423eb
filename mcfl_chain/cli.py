"""The ``mcfl-chain`` command. Each subcommand lives beside the code it drives."""

from __future__ import annotations

import click

from mcfl_chain import __version__
from mcfl_chain.chain.cli import devnet
from mcfl_chain.dag.cli import dag
from mcfl_chain.explorer.cli import explorer
from mcfl_chain.simulation.cli import demo, simulate
from mcfl_chain.storage.cli import ipfs
from mcfl_chain.worker.cli import worker


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="mcfl-chain")
def main() -> None:
    """MultiConfederated Learning on a blockchain.

    Sovereign trainers train many models at once; model versions form a DAG recorded by
    smart contracts; each trainer aggregates only the peers' updates whose weights diverge
    little from its own. Start with `mcfl-chain demo`, or `mcfl-chain devnet up` then one
    `mcfl-chain worker` per trainer, or `mcfl-chain simulate` for a whole network.
    """


for command in (devnet, ipfs, worker, simulate, demo, dag, explorer):
    main.add_command(command)
