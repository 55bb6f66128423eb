"""mcfl-chain: MultiConfederated Learning coordinated by smart contracts.

Packages, arrows pointing one way (the worker uses the others; the algorithms know
nothing of the chain):

- ``algorithms``  pure functions from the paper: model selection, update selection, FedAvg
- ``learning``    datasets, non-IID masks, models, training, the weights codec
- ``storage``     content-addressed blobs: an embedded local store and IPFS over its RPC API
- ``chain``       contracts access, deployment files, the local devnet
- ``dag``         the model DAG: deterministic model ids, rebuilding it from chain events
- ``worker``      one sovereign trainer's round state machine
- ``cli``         the ``mcfl-chain`` command
"""

__version__ = "0.1.0"
