"""Chain access: compiled contracts, deployment files, the local devnet, the trainer client."""

from mcfl_chain.chain.client import ChainClient, Phase
from mcfl_chain.chain.deployment import Deployment
from mcfl_chain.chain.errors import ChainError, DeploymentError

__all__ = ["ChainClient", "ChainError", "Deployment", "DeploymentError", "Phase"]
