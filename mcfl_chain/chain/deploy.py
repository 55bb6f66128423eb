"""Deploy and link Trainers, Models and Updates with web3.py."""

from __future__ import annotations

from typing import Any

from eth_account.signers.local import LocalAccount
from web3 import Web3

from mcfl_chain.chain._rpc import redact_url
from mcfl_chain.chain._tx import FeePolicy, Transactor, as_account
from mcfl_chain.chain.artifacts import load_artifacts
from mcfl_chain.chain.cids import cid_to_bytes
from mcfl_chain.chain.deployment import (
    ALL_TRAINERS_BPS,
    DEFAULT_MAX_SAMPLES,
    MIN_COHORT_BPS,
    REGISTRATION_POLICIES,
    Deployment,
)

__all__ = [
    "DEFAULT_MAX_SAMPLES",
    "MAX_COOLDOWN",
    "REGISTRATION_POLICIES",
    "check_parameters",
    "deploy_network",
]

MAX_SAMPLES_BOUND = 2**32 - 1
"""Largest sample cap the Updates contract accepts (the 32 bits of its record)."""

MAX_COOLDOWN = 365 * 86_400
"""Longest refund cooldown the Trainers contract accepts, in seconds."""


def deploy_network(
    w3: Web3,
    deployer: str | int | LocalAccount,
    genesis_cid: str,
    task: str,
    min_trainers: int,
    phase_duration: int,
    *,
    registration: str = "open",
    admin: str | None = None,
    deposit: int = 0,
    cooldown: int = 0,
    max_samples: int = DEFAULT_MAX_SAMPLES,
    cohort_bps: int = ALL_TRAINERS_BPS,
    fees: FeePolicy | None = None,
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
        Task descriptor, e.g. "lenet:fashion-mnist": 1 to 128 printable ASCII
        characters without quotes or backslashes.
    min_trainers
        Registered trainers needed before round 0 opens (>= 1).
    phase_duration
        Seconds after which any vote ends a phase; at least 1, since a network
        without deadlines can be stalled by one silent trainer. Recommended: 30 on
        a local devnet, 10 to 30 minutes on a public chain (docs/PROTOCOL.md).
    registration
        Who may register: "open" (anyone), "allowlist" (addresses ``admin``
        allows) or "deposit" (anyone paying ``deposit`` wei, refunded ``cooldown``
        seconds after the trainer exits).
    admin
        Keeper of the allowlist; required with "allowlist", refused otherwise.
    deposit
        Wei per registration; required (> 0) with "deposit", refused otherwise.
    cooldown
        Seconds between a trainer's exit and its refund, with "deposit" only
        (0 to one year).
    max_samples
        Cap on the sample count an update may declare (1 to 2**32 - 1), so that
        no trainer outweighs the others in FedAvg by declaring a huge count.
    cohort_bps
        Basis points of the trainers drawn for each round: 10,000 (default) has every
        trainer take part in every round; 100 to 9,999 draws a cohort a round, for
        networks larger than an aggregation (docs/PROTOCOL.md §4, "Cohorts").
    fees
        Fee cap and tip of the deployment's transactions (default: no cap, 1 wei tip).

    Returns
    -------
    Deployment
        Addresses, ABIs and parameters; save it for the workers.

    Raises
    ------
    ValueError
        If a parameter is out of range or does not fit the registration policy
        (the contracts would refuse it too, with a less specific message).
    """
    policy = check_parameters(
        task,
        min_trainers,
        phase_duration,
        registration=registration,
        admin=admin,
        deposit=deposit,
        cooldown=cooldown,
        max_samples=max_samples,
        cohort_bps=cohort_bps,
    )
    if admin is not None:
        admin = Web3.to_checksum_address(admin)
    cid = cid_to_bytes(genesis_cid)
    sender = Transactor(w3, as_account(deployer), fees=fees)
    artifacts = load_artifacts()
    first_block = w3.eth.block_number + 1

    def create(name: str, *args: Any) -> str:
        factory = w3.eth.contract(abi=artifacts[name].abi, bytecode=artifacts[name].bytecode)
        data = factory.constructor(*args).data_in_transaction
        receipt = sender.send(f"deploying {name}", {"data": data, "value": 0})
        return str(receipt["contractAddress"])

    zero = "0x" + "00" * 20
    trainers = create("Trainers", policy, admin or zero, deposit, cooldown)
    models = create("Models", trainers, cid, task, min_trainers, phase_duration, cohort_bps)
    updates = create("Updates", models, max_samples)
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
        registration=registration,
        admin=admin,
        deposit=deposit,
        cooldown=cooldown,
        max_samples=max_samples,
        cohort_bps=cohort_bps,
    )


def check_parameters(
    task: str,
    min_trainers: int,
    phase_duration: int,
    *,
    registration: str = "open",
    admin: str | None = None,
    deposit: int = 0,
    cooldown: int = 0,
    max_samples: int = DEFAULT_MAX_SAMPLES,
    cohort_bps: int = ALL_TRAINERS_BPS,
) -> int:
    """Check the deployment parameters as the constructors would; the policy's code.

    Raises
    ------
    ValueError
        Naming the parameter out of range or not fitting the registration policy.
    """
    if min_trainers < 1:
        raise ValueError(f"min_trainers must be at least 1, got {min_trainers}")
    if not 1 <= phase_duration < 2**32:
        raise ValueError(
            f"phase_duration must be between 1 and 2**32 - 1 seconds, got "
            f"{phase_duration}: deadlines cannot be disabled (a silent trainer "
            f"would stall the network); use e.g. 30 on a local devnet"
        )
    if not 0 < len(task) <= 128:
        raise ValueError(f"the task descriptor must have 1 to 128 characters, got {task!r}")
    if not 1 <= max_samples <= MAX_SAMPLES_BOUND:
        raise ValueError(f"max_samples must be between 1 and 2**32 - 1, got {max_samples}")
    if not MIN_COHORT_BPS <= cohort_bps <= ALL_TRAINERS_BPS:
        raise ValueError(
            f"cohort_bps must be between {MIN_COHORT_BPS} and {ALL_TRAINERS_BPS} basis "
            f"points of the trainers drawn for each round ({ALL_TRAINERS_BPS}: all of "
            f"them), got {cohort_bps}"
        )
    if admin is not None and not Web3.is_address(admin):
        raise ValueError(f"the admin {admin!r} is not an address")
    return _check_policy(registration, admin, deposit, cooldown)


def _check_policy(registration: str, admin: str | None, deposit: int, cooldown: int) -> int:
    """The on-chain code of ``registration`` after checking the parameters it uses."""
    if registration not in REGISTRATION_POLICIES:
        raise ValueError(
            f"registration must be one of {', '.join(REGISTRATION_POLICIES)}, got {registration!r}"
        )
    if (registration == "allowlist") != (admin is not None):
        raise ValueError(
            "an admin address is required with registration='allowlist' and "
            "refused with the other policies"
        )
    if registration == "deposit":
        if deposit <= 0:
            raise ValueError(f"registration='deposit' needs a deposit above 0 wei, got {deposit}")
        if not 0 <= cooldown <= MAX_COOLDOWN:
            raise ValueError(
                f"cooldown must be between 0 and {MAX_COOLDOWN} seconds (a year), got {cooldown}"
            )
    elif deposit or cooldown:
        raise ValueError("deposit and cooldown only apply to registration='deposit'")
    return REGISTRATION_POLICIES[registration]


def _endpoint(w3: Web3) -> str:
    """The node's URL as the deployment file records it: without API keys (the file is
    published), see :func:`~mcfl_chain.chain._rpc.redact_url`."""
    return redact_url(str(getattr(w3.provider, "endpoint_uri", "") or ""))
