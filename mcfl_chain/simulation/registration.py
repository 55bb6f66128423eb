"""Who may register in a simulated network, and what the registration policy cost a Sybil
coalition (docs/PROTOCOL.md §3).

Under ``allowlist`` the simulator's admin (dev account 0) plays a consortium that admits
one identity per organisation: every honest trainer, every adversary acting alone (a
member gone bad) and exactly one identity of each colluding coalition
(:func:`admitted_trainers`); the coalition's other identities try to register and the
contract refuses them. Under ``deposit`` everyone registers, each paying the deposit,
so a coalition of ``k`` identities locks ``k`` deposits.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass

from mcfl_chain.adversaries import AdversarySpec, adversary_parameters
from mcfl_chain.chain.deployment import REGISTRATION_POLICIES

POLICIES = tuple(REGISTRATION_POLICIES)
"""Registration policies a simulation may run under: open, allowlist, deposit."""

ETHER = 10**18
"""Wei in one ether."""

DEFAULT_DEPOSIT = ETHER
"""Wei a registration takes under ``deposit`` unless the scenario says otherwise."""

DEV_ACCOUNT_BALANCE = 10_000 * ETHER
"""What Anvil gives each dev account: a deposit must leave some for gas."""

REGISTER_GAS = 300_000
"""Gas limit of a refused identity's registration (one that opens round 0 uses ~129k).
Given, the transaction is sent without an estimate, so the refusal happens on chain."""


@dataclass(frozen=True)
class Refusal:
    """A registration the contract refused: whose, and its revert reason."""

    trainer_index: int
    address: str
    reason: str

    def to_json(self) -> dict[str, object]:
        return asdict(self)


def colludes(spec: AdversarySpec) -> bool:
    """Whether ``spec``'s adversary plays in a coalition (its constructor takes one)."""
    return "coalition" in adversary_parameters(spec.name)


def coalitions(trainers: Sequence[int], assignment: Mapping[int, AdversarySpec]) -> list[list[int]]:
    """The colluding coalitions among ``trainers``: the trainers assigned the same
    colluding spec form one (as :func:`~mcfl_chain.adversaries.with_coalitions` tells
    them), each ascending, ordered by their first member."""
    members: dict[AdversarySpec, list[int]] = {}
    for index in sorted(trainers):
        spec = assignment.get(index)
        if spec is not None and colludes(spec):
            members.setdefault(spec, []).append(index)
    return sorted(members.values())


def admitted_trainers(
    trainers: Sequence[int], assignment: Mapping[int, AdversarySpec]
) -> list[int]:
    """The trainers an allowlist's admin admits, in the order of ``trainers``.

    A coalition is one organisation, and the admin admits one identity per
    organisation: its lowest trainer index. Honest trainers and adversaries acting
    alone are members gone bad or not, each admitted.

    Parameters
    ----------
    trainers : Sequence[int]
        The run's trainer indices.
    assignment : Mapping[int, AdversarySpec]
        Trainer index → adversary (honest trainers absent).
    """
    refused = {index for members in coalitions(trainers, assignment) for index in members[1:]}
    return [index for index in trainers if index not in refused]
