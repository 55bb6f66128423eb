"""``python -m mcfl_chain`` is the ``mcfl-chain`` command."""

from mcfl_chain.cli import main

main()
