"""How a simulated network's trainers are run: one module per engine, by name.

- ``process``: one ``mcfl-chain worker`` process per trainer (:mod:`.process`);
- ``batched``: every trainer in one host process, over shared chain reads and one
  batched compute on the CPU or a GPU (:mod:`.batched`).

The chain cannot tell them apart: each trainer signs and sends its own transactions.
"""

from __future__ import annotations

from mcfl_chain.simulation.engines.base import Engine
from mcfl_chain.simulation.engines.batched import BatchedEngine
from mcfl_chain.simulation.engines.process import ProcessEngine

ENGINES: dict[str, type[Engine]] = {e.name: e for e in (ProcessEngine, BatchedEngine)}
"""Engine name → class; adding an engine means adding a module and an entry."""

__all__ = ["ENGINES", "Engine"]
