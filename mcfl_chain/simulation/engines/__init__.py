"""How a simulated network's trainers are run: one module per engine, by name.

- ``process``: one ``mcfl-chain worker`` process per trainer (:mod:`.process`);
- ``batched``: trainers in host processes (one per core on the CPU, one per 4 cores on a
  GPU), over shared chain reads and one batched compute (:mod:`.batched`);
- ``ray``: the batched engine's hosts as actors on a Ray cluster, a local one on
  127.0.0.1 by default (:mod:`.ray`).

The chain cannot tell them apart: each trainer signs and sends its own transactions.
"""

from __future__ import annotations

from mcfl_chain.simulation.engines.base import Engine
from mcfl_chain.simulation.engines.batched import BatchedEngine
from mcfl_chain.simulation.engines.process import ProcessEngine
from mcfl_chain.simulation.engines.ray import RayEngine

ENGINES: dict[str, type[Engine]] = {e.name: e for e in (ProcessEngine, BatchedEngine, RayEngine)}
"""Engine name → class; adding an engine means adding a module and an entry."""

__all__ = ["ENGINES", "Engine"]
