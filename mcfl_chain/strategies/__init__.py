"""Trainer strategies: one module per strategy behind :class:`~.base.Strategy`.

- ``mcfl``    MultiConfederated Learning (Algorithms 1 and 2) as its authors ran it, with
              the earlier readings as options (own/shared start, aggregate on best/all,
              percentile/ceil/floor selection)
- ``mcfl-plus`` MCFL whose trainers trust their own evidence (ours, issue 37): a guard
              on their own validation, agreement-weighted popularity, a divergence cap
              from their own history, a robust rule inside their group
- ``fedavg``  the decentralized FedAvg baseline: most popular model, accept every update
- ``local``   local training alone, on the same chain (the lower bracket)
- ``ifca``    IFCA (Ghosh et al. 2020): k models, each trainer trains its lowest-loss one
- ``facade``  FACADE (thesis 2024): one core and k heads, each trainer its lowest-loss
              head; the core averaged over all, each head over those that chose it
- ``fedfmc``  FedFMC (Kopparapu & Lin 2020): fork into groups, then merge the groups'
              models one at a time into one consolidated model, with EWC
- ``fedprox`` FedProx (Li et al. 2020): FedAvg with a proximal term in local training
- ``ditto``   Ditto (Li et al. 2021): FedAvg's global model and a personal model per
              trainer, pulled towards it, reported (off chain)
- ``fedavg-ft`` FedAvg with local fine-tuning before the trainer reports the model

``personal`` is no strategy: the personal model's step that Ditto and MCFL-plus's
``plus_personal`` share.

``make_strategy(name, **options)`` builds one by name.
"""

from mcfl_chain.strategies import (
    ditto,
    facade,
    fedavg,
    fedavg_ft,
    fedfmc,
    fedprox,
    ifca,
    local,
    mcfl,
    mcfl_plus,
)
from mcfl_chain.strategies.base import (
    STRATEGIES,
    Candidate,
    ModelInfo,
    Strategy,
    StrategyContext,
    UpdateInfo,
    make_strategy,
    own_branch_seed,
)
from mcfl_chain.strategies.ditto import DittoStrategy
from mcfl_chain.strategies.facade import FACADEStrategy
from mcfl_chain.strategies.fedavg import FedAvgStrategy
from mcfl_chain.strategies.fedavg_ft import FedAvgFTStrategy
from mcfl_chain.strategies.fedfmc import FedFMCStrategy
from mcfl_chain.strategies.fedprox import FedProxStrategy
from mcfl_chain.strategies.ifca import IFCAStrategy
from mcfl_chain.strategies.local import LocalStrategy
from mcfl_chain.strategies.mcfl import MCFLStrategy
from mcfl_chain.strategies.mcfl_plus import MCFLPlusStrategy

__all__ = [
    "STRATEGIES",
    "Candidate",
    "DittoStrategy",
    "FACADEStrategy",
    "FedAvgFTStrategy",
    "FedAvgStrategy",
    "FedFMCStrategy",
    "FedProxStrategy",
    "IFCAStrategy",
    "LocalStrategy",
    "MCFLPlusStrategy",
    "MCFLStrategy",
    "ModelInfo",
    "Strategy",
    "StrategyContext",
    "ditto",
    "facade",
    "UpdateInfo",
    "fedavg",
    "fedavg_ft",
    "fedfmc",
    "fedprox",
    "ifca",
    "local",
    "make_strategy",
    "mcfl",
    "mcfl_plus",
    "own_branch_seed",
]
