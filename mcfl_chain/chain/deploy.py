"""Deploy and link Trainers, Models and Updates with web3.py."""

from __future__ import annotations

from typing import Any

from eth_account.signers.local import LocalAccount
from web3 import Web3

from mcfl_chain.chain._tx import Transactor, as_account
from mcfl_chain.chain.artifacts import load_artifacts
from mcfl_chain.chain.cids import cid_to_bytes
from mcfl_chain.chain.deployment import Deployment


def deploy_network(
    w3: Web3,
    deployer: str | int | LocalAccount,
    genesis_cid: str,
    task: str,
    min_trainers: int,
    phase_duration: int,
) -> Deployment:
    """Deploy the three contracts, link them, and describe the result.

    Parameters
    ----------
    w3
        A connected web3 instance.
    deployer
        Hex private key, Anvil dev-account index, or signing account; it owns the root
        model token and is the only one allowed to link the contracts (done here).
    genesis_cid
        CIDv1 (raw or dag-pb, sha2-256) of the initial weights.
    task
        Task descriptor, e.g. "lenet:fashion-mnist" (1 to 128 characters).
    min_trainers
        Registered trainers needed before round 0 opens (>= 1).
    phase_duration
        Seconds after which any vote ends a phase; 0 for no deadline.

    Returns
    -------
    Deployment
        Addresses, ABIs and parameters; save it for the workers.
    """
    if min_trainers < 1:
        raise ValueError(f"min_trainers must be at least 1, got {min_trainers}")
    if phase_duration < 0:
        raise ValueError(f"phase_duration must be >= 0 seconds, got {phase_duration}")
    if not 0 < len(task) <= 128:
        raise ValueError(f"the task descriptor must have 1 to 128 characters, got {task!r}")
    cid = cid_to_bytes(genesis_cid)
    sender = Transactor(w3, as_account(deployer))
    artifacts = load_artifacts()
    first_block = w3.eth.block_number + 1

    def create(name: str, *args: Any) -> str:
        factory = w3.eth.contract(abi=artifacts[name].abi, bytecode=artifacts[name].bytecode)
        data = factory.constructor(*args).data_in_transaction
        receipt = sender.send(f"deploying {name}", {"data": data, "value": 0})
        return str(receipt["contractAddress"])

    trainers = create("Trainers")
    models = create("Models", trainers, cid, task, min_trainers, phase_duration)
    updates = create("Updates", trainers, models)
    for name, address, setter, target in (
        ("Trainers", trainers, "setModels", models),
        ("Models", models, "setUpdates", updates),
    ):
        contract = w3.eth.contract(
            address=Web3.to_checksum_address(address), abi=artifacts[name].abi
        )
        call = getattr(contract.functions, setter)(target)
        sender.send(f"{name}.{setter}", {"to": address, "data": call._encode_transaction_data()})
    return Deployment(
        chain_id=w3.eth.chain_id,
        rpc_url=_endpoint(w3),
        addresses={"Trainers": trainers, "Models": models, "Updates": updates},
        abis={name: artifacts[name].abi for name in ("Trainers", "Models", "Updates")},
        deployment_block=first_block,
        genesis_cid=genesis_cid,
        task=task,
        min_trainers=min_trainers,
        phase_duration=phase_duration,
    )


def _endpoint(w3: Web3) -> str:
    return str(getattr(w3.provider, "endpoint_uri", "") or "")
