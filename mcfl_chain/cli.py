"""The ``mcfl-chain`` command. Each subcommand lives beside the code it drives."""

from __future__ import annotations

import click

from mcfl_chain import __version__


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="mcfl-chain")
def main() -> None:
    """MultiConfederated Learning on a blockchain.

    Sovereign trainers train many models at once; model versions form a DAG recorded by
    smart contracts; each trainer aggregates only the peers' updates whose weights diverge
    little from its own. Start with `mcfl-chain devnet up`, then one `mcfl-chain worker`
    per trainer, or `mcfl-chain simulate` for a whole network.
    """


from mcfl_chain.simulation.cli import demo, simulate  # noqa: E402
from mcfl_chain.worker.cli import worker  # noqa: E402

main.add_command(worker)
main.add_command(simulate)
main.add_command(demo)
from mcfl_chain.storage.cli import ipfs  # noqa: E402
main.add_command(ipfs)
from mcfl_chain.chain.cli import devnet  # noqa: E402
main.add_command(devnet)
