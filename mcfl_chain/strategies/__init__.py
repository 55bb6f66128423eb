"""Trainer strategies: one module per strategy behind :class:`~.base.Strategy`.

- ``mcfl``    MultiConfederated Learning (Algorithms 1 and 2), L2 or cosine divergence
- ``fedavg``  the decentralized FedAvg baseline: most popular model, accept every update

``make_strategy(name, **options)`` builds one by name.
"""

from mcfl_chain.strategies import fedavg, mcfl
from mcfl_chain.strategies.base import STRATEGIES, Candidate, Strategy, make_strategy
from mcfl_chain.strategies.fedavg import FedAvgStrategy
from mcfl_chain.strategies.mcfl import MCFLStrategy

__all__ = [
    "STRATEGIES",
    "Candidate",
    "FedAvgStrategy",
    "MCFLStrategy",
    "Strategy",
    "fedavg",
    "make_strategy",
    "mcfl",
]
