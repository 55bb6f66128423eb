"""Deploy and link Trainers, Models and Updates with web3.py."""

from __future__ import annotations

from typing import Any

from eth_account.signers.local import LocalAccount
from web3 import Web3

from mcfl_chain._utils.options import OptionSpec
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
    cohort_bps,
)
from mcfl_chain.chain.devnet import DEFAULT_PHASE_DURATION

__all__ = [
    "DEFAULT_MAX_SAMPLES",
    "MAX_COOLDOWN",
    "NETWORK_SETTINGS",
    "REGISTRATION_POLICIES",
    "check_parameters",
    "deploy_network",
    "check_settings",
]

UINT32_MAX = 2**32 - 1
"""Largest count, duration or sample cap the contracts accept (their 32-bit records)."""

MAX_COOLDOWN = 365 * 86_400
"""Longest refund cooldown the Trainers contract accepts, in seconds."""

NETWORK_SETTINGS = (
    OptionSpec(
        "min_trainers",
        int,
        2,
        "Registered trainers needed before round 0 opens.",
        minimum=1,
        maximum=UINT32_MAX,
    ),
    OptionSpec(
        "phase_duration",
        int,
        DEFAULT_PHASE_DURATION,
        "Seconds from a phase's start after which any trainer's vote ends it without the "
        "full quorum (deadlines are mandatory). Must exceed the slowest honest trainer's "
        "phase: 600-1800 on a public chain (docs/PROTOCOL.md §2).",
        minimum=1,
        maximum=UINT32_MAX,
        unit="s",
        why=f"deadlines are mandatory (a silent trainer would stall the network); "
        f"{DEFAULT_PHASE_DURATION} s suits a local devnet",
    ),
    OptionSpec(
        "registration",
        str,
        "open",
        "Who may register: anyone (open), addresses the admin admits (allowlist), or "
        "anyone paying --deposit (deposit).",
        choices=tuple(REGISTRATION_POLICIES),
    ),
    OptionSpec(
        "deposit",
        int,
        0,
        "Wei a registration takes (deposit only, then required above 0).",
        minimum=0,
    ),
    OptionSpec(
        "cooldown",
        int,
        0,
        "Seconds between a trainer's exit and its deposit refund (deposit only; at most a year).",
        minimum=0,
        maximum=MAX_COOLDOWN,
        unit="s",
    ),
    OptionSpec(
        "max_samples",
        int,
        DEFAULT_MAX_SAMPLES,
        "Largest sample count one update may declare (caps a trainer's FedAvg weight).",
        minimum=1,
        maximum=UINT32_MAX,
    ),
    OptionSpec(
        "cohort",
        float,
        1.0,
        "Share of the trainers drawn for each round (like Flower's fraction_fit): only "
        "they train, propose and aggregate in it, and no phase waits for the others; for "
        "networks larger than an aggregation (docs/PROTOCOL.md §4, Cohorts). 1: every "
        "trainer in every round.",
        minimum=MIN_COHORT_BPS / ALL_TRAINERS_BPS,
        maximum=1.0,
        why="the contracts draw in basis points, from 1 % to all of the trainers",
    ),
)
"""The parameters a deployment records on chain, declared once: `deploy`, `devnet up`
and ``scripts/deploy.py`` make their options from them, :func:`check_parameters` checks
values with them."""

SETTINGS = {spec.name: spec for spec in NETWORK_SETTINGS}


def check_settings(**given: Any) -> dict[str, Any]:
    """Every network setting (:data:`NETWORK_SETTINGS`) by name: those ``given``,
    checked, and the others at their defaults.

    Raises
    ------
    TypeError
        For a name that is no network setting.
    ValueError
        Naming a setting whose value is refused.
    """
    unknown = sorted(set(given) - set(SETTINGS))
    if unknown:
        raise TypeError(
            f"no network setting named {', '.join(unknown)}; the settings: {', '.join(SETTINGS)}"
        )
    return {
        spec.name: spec.convert(given.get(spec.name, spec.default)) for spec in NETWORK_SETTINGS
    }


def deploy_network(
    w3: Web3,
    deployer: str | int | LocalAccount,
    genesis_cid: str,
    task: str,
    *,
    admin: str | None = None,
    fees: FeePolicy | None = None,
    **settings: Any,
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
    admin
        Keeper of the allowlist; required with ``registration="allowlist"``, refused
        otherwise.
    fees
        Fee cap and tip of the deployment's transactions (default: no cap, 1 wei tip).
    **settings
        The network settings, each at its default unless given (:data:`NETWORK_SETTINGS`
        says what each means): ``min_trainers``, ``phase_duration`` (at least 1 s: a
        network without deadlines can be stalled by one silent trainer; 30 on a local
        devnet, 10 to 30 minutes on a public chain), ``registration`` (``"open"``,
        ``"allowlist"`` or ``"deposit"``), ``deposit`` (wei, required above 0 with
        ``"deposit"`` and refused otherwise), ``cooldown`` and ``max_samples``.

    Returns
    -------
    Deployment
        Addresses, ABIs and parameters; save it for the workers.

    Raises
    ------
    ValueError
        If a parameter is out of range or does not fit the registration policy
        (the contracts would refuse it too, with a less specific message).
    TypeError
        For a keyword that is no network setting.
    """
    values = check_settings(**settings)
    policy = check_parameters(task, admin=admin, **values)
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
    trainers = create("Trainers", policy, admin or zero, values["deposit"], values["cooldown"])
    # The contracts take the cohort's share in basis points, and so does the file.
    bps = cohort_bps(values.pop("cohort"))
    models = create(
        "Models", trainers, cid, task, values["min_trainers"], values["phase_duration"], bps
    )
    updates = create("Updates", models, values["max_samples"])
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
        admin=admin,
        cohort_bps=bps,
        **values,
    )


def check_parameters(task: str, *, admin: str | None = None, **settings: Any) -> int:
    """Check the deployment parameters as the constructors would; the policy's code.

    ``settings`` are network settings (:func:`check_settings`), the others at their
    defaults.

    Raises
    ------
    ValueError
        Naming the parameter out of range (:data:`NETWORK_SETTINGS`) or not fitting the
        registration policy.
    TypeError
        For a keyword that is no network setting.
    """
    values = check_settings(**settings)
    if not 0 < len(task) <= 128:
        raise ValueError(f"the task descriptor must have 1 to 128 characters, got {task!r}")
    if admin is not None and not Web3.is_address(admin):
        raise ValueError(f"the admin {admin!r} is not an address")
    return _check_policy(values["registration"], admin, values["deposit"], values["cooldown"])


def _check_policy(registration: str, admin: str | None, deposit: int, cooldown: int) -> int:
    """The on-chain code of ``registration`` after checking the parameters it uses (each
    alone is in range: :data:`NETWORK_SETTINGS`)."""
    if (registration == "allowlist") != (admin is not None):
        raise ValueError(
            "an admin address is required with registration='allowlist' and "
            "refused with the other policies"
        )
    if registration == "deposit":
        if deposit <= 0:
            raise ValueError(f"registration='deposit' needs a deposit above 0 wei, got {deposit}")
    elif deposit or cooldown:
        raise ValueError("deposit and cooldown only apply to registration='deposit'")
    return REGISTRATION_POLICIES[registration]


def _endpoint(w3: Web3) -> str:
    """The node's URL as the deployment file records it: without API keys (the file is
    published), see :func:`~mcfl_chain.chain._rpc.redact_url`."""
    return redact_url(str(getattr(w3.provider, "endpoint_uri", "") or ""))
