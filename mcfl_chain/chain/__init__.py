"""Chain access: compiled contracts, deployment files, the local devnet, the trainer client."""

from mcfl_chain.chain.client import (
    AggregationArg,
    ChainClient,
    Phase,
    ProposalArg,
    ProtocolLimits,
    TrainerStatus,
)
from mcfl_chain.chain.deployment import Deployment
from mcfl_chain.chain.errors import ChainError, DeploymentError, ProtocolLimitError

__all__ = [
    "AggregationArg",
    "ChainClient",
    "ChainError",
    "Deployment",
    "DeploymentError",
    "Phase",
    "ProposalArg",
    "ProtocolLimitError",
    "ProtocolLimits",
    "TrainerStatus",
]
