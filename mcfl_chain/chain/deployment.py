"""The deployment file workers read: where the contracts are and how the network is set."""

from __future__ import annotations

import json
import os
from dataclasses import MISSING, asdict, dataclass, fields
from pathlib import Path
from typing import Any

from eth_utils import is_checksum_address, is_hex_address, to_checksum_address

from mcfl_chain.chain.errors import DeploymentError

CONTRACT_KEYS = ("Trainers", "Models", "Updates")

REGISTRATION_POLICIES = {"open": 0, "allowlist": 1, "deposit": 2}
"""Registration policies of the Trainers contract, by name, and their on-chain code."""

ALL_TRAINERS_BPS = 10_000
"""``cohort_bps`` of a network without cohorts: every trainer takes part in every round."""

MIN_COHORT_BPS = 100
"""Smallest cohort a network may draw each round, in basis points (1 %)."""


def cohort_bps(share: float) -> int:
    """A share of the trainers (0.25) as the basis points the contracts take (2,500)."""
    return round(share * ALL_TRAINERS_BPS)


DEFAULT_MAX_SAMPLES = 1_000_000
"""Default cap on an update's declared sample count: above any dataset of the thesis
(MNIST has 60,000 training samples) while bounding one trainer's FedAvg weight."""


@dataclass
class Deployment:
    """A deployed MCFL network.

    Attributes
    ----------
    chain_id
        EIP-155 chain id of the network.
    rpc_url
        JSON-RPC endpoint the contracts were deployed through.
    addresses
        Checksummed address per contract: keys "Trainers", "Models", "Updates".
    abis
        ABI per contract, same keys.
    deployment_block
        Block of the first deployment transaction: read events from here.
    genesis_cid
        CID of the root model's weights.
    task
        Task descriptor, e.g. "lenet:fashion-mnist".
    min_trainers
        Registered trainers needed before round 0 opens.
    phase_duration
        Seconds after which any vote ends a phase (at least 1: deadlines are mandatory).
    registration
        Who may register: "open", "allowlist" or "deposit".
    admin
        Checksummed address of the allowlist's admin (None but under "allowlist").
    deposit
        Wei a registration takes under "deposit" (0 otherwise).
    cooldown
        Seconds between a trainer's exit and its refund under "deposit" (0 otherwise).
    max_samples
        Largest sample count an update may declare (``Updates.maxSamples``).
    cohort_bps
        Basis points of the trainers drawn for each round (``Models.cohortBps``):
        10,000, every trainer in every round, or 100 to 9,999 (docs/PROTOCOL.md §4,
        "Cohorts").

    Files written before the last six fields existed load with their defaults
    (an open network with the default sample cap and no cohorts), which is what those
    networks were.
    """

    chain_id: int
    rpc_url: str
    addresses: dict[str, str]
    abis: dict[str, list[Any]]
    deployment_block: int
    genesis_cid: str
    task: str
    min_trainers: int
    phase_duration: int
    registration: str = "open"
    admin: str | None = None
    deposit: int = 0
    cooldown: int = 0
    max_samples: int = DEFAULT_MAX_SAMPLES
    cohort_bps: int = ALL_TRAINERS_BPS

    @property
    def network(self) -> str:
        """The network's name in state folders and metrics lines: ``<chain id>-<Models
        address>`` in lower case, distinct for every deployment on every chain."""
        return f"{self.chain_id}-{self.addresses['Models'].lower()}"

    def to_json(self) -> str:
        """The deployment file's text (what :meth:`save` writes and publishing stores)."""
        return json.dumps(asdict(self), indent=2)

    def save(self, path: str | Path) -> Path:
        """Write the deployment as JSON atomically (readers never see half a file)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(self.to_json())
        tmp.replace(path)
        return path

    @classmethod
    def load(cls, path: str | Path) -> Deployment:
        """Read a deployment file written by :meth:`save`.

        Raises
        ------
        DeploymentError
            If the file is missing, not JSON, or lacks a field or a contract.
        """
        path = Path(path)
        try:
            text = path.read_text()
        except FileNotFoundError:
            raise DeploymentError(
                f"no deployment file at {path}: start a network with "
                f"`mcfl-chain devnet up` or pass the file it wrote"
            ) from None
        except (OSError, UnicodeDecodeError) as exc:
            raise DeploymentError(f"cannot read deployment file {path}: {exc}") from exc
        return cls.from_json(text, str(path))

    @classmethod
    def from_json(cls, text: str | bytes, where: str = "the deployment") -> Deployment:
        """Read a deployment from its JSON text; ``where`` names it in errors.

        Raises
        ------
        DeploymentError
            Not JSON, or a field or a contract missing or of the wrong kind.
        """
        try:
            data = json.loads(text)
        except (ValueError, UnicodeDecodeError) as exc:
            raise DeploymentError(f"cannot read deployment file {where}: {exc}") from exc
        required = {f.name for f in fields(cls) if f.default is MISSING}
        if not isinstance(data, dict) or not required <= data.keys():
            missing = sorted(required - set(data)) if isinstance(data, dict) else sorted(required)
            raise DeploymentError(
                f"{where} is not an mcfl-chain deployment file (missing {', '.join(missing)})"
            )
        for key in ("addresses", "abis"):
            if not isinstance(data[key], dict):
                raise DeploymentError(f"{where}: '{key}' is not an object")
            absent = [c for c in CONTRACT_KEYS if c not in data[key]]
            if absent:
                raise DeploymentError(f"{where}: '{key}' lacks {', '.join(absent)}")
        if data.get("registration", "open") not in REGISTRATION_POLICIES:
            raise DeploymentError(
                f"{where}: unknown registration policy {data['registration']!r} (expected "
                f"{', '.join(REGISTRATION_POLICIES)})"
            )
        for key in ("chain_id", "deployment_block", "min_trainers", "phase_duration"):
            if isinstance(data[key], bool) or not isinstance(data[key], int):
                raise DeploymentError(f"{where}: '{key}' is not an integer")
        data["addresses"] = {
            name: _address(value, f"{where}: '{name}' address")
            for name, value in data["addresses"].items()
        }
        if data.get("admin") is not None:
            data["admin"] = _address(data["admin"], f"{where}: 'admin' address")
        known = {f.name for f in fields(cls)}
        return cls(**{name: value for name, value in data.items() if name in known})


def _address(value: object, what: str) -> str:
    """``value`` checksummed; one line naming ``what`` when it is no address.

    Lower or upper case carries no checksum and is accepted as written; mixed case is
    a checksum (EIP-55), and one that fails it is a typo, refused.
    """
    if not isinstance(value, str) or not is_hex_address(value):
        raise DeploymentError(f"{what} {value!r} is not an address (0x and 40 hex digits)")
    digits = value[2:]
    if digits != digits.lower() and digits != digits.upper() and not is_checksum_address(value):
        raise DeploymentError(
            f"{what} {value} fails its checksum (mixed case that is not EIP-55: a typo?); "
            f"correct it, or write it in lower case if you are sure of it"
        )
    return str(to_checksum_address(value))
