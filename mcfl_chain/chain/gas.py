"""Gas of every protocol call on a real EVM (Anvil), for the benchmark and the snapshot test.

Figures are execution gas as the thesis reports it: ``receipt.gasUsed - 21,000`` (the
intrinsic transaction cost), which still includes the calldata cost.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, cast

from eth_account import Account
from eth_account.signers.local import LocalAccount
from eth_utils import keccak
from multiformats import CID, multihash
from web3 import Web3
from web3.types import RPCEndpoint

from mcfl_chain.chain.client import ChainClient
from mcfl_chain.chain.deploy import deploy_network

ROOT_MODEL_ID = bytes(32)
"""The root model's id (Models' genesis token 0)."""

BASE_GAS = 21_000

# Thesis contracts (Vyper 0.3), SPEC §2: execution gas per trainer and round.
THESIS_PROPOSE = 117_283
THESIS_AGGREGATE = 134_000
THESIS_VOTE = 26_182
THESIS_PER_TRAINER_ROUND = THESIS_PROPOSE + THESIS_AGGREGATE + THESIS_VOTE

AGGREGATE_SIZES = (1, 10, 100, 256)


@dataclass
class GasReport:
    """Gas figures of one benchmark run (execution gas, without the 21,000 base)."""

    calls: dict[str, int] = field(default_factory=dict)
    per_trainer_round: dict[str, int] = field(default_factory=dict)
    aggregate_by_size: dict[str, int] = field(default_factory=dict)

    @property
    def per_trainer_round_total(self) -> int:
        return self.per_trainer_round["total"]

    @property
    def ratio(self) -> float:
        """Per-trainer-round gas relative to the thesis contracts."""
        return self.per_trainer_round_total / THESIS_PER_TRAINER_ROUND

    def as_dict(self) -> dict[str, dict[str, int]]:
        return {
            "calls": self.calls,
            "per_trainer_round": self.per_trainer_round,
            "aggregate_by_size": self.aggregate_by_size,
        }


def fake_cid(label: str) -> str:
    """A well-formed CIDv1 (raw, sha2-256) of ``label``: content need not exist for gas."""
    digest = hashlib.sha256(label.encode()).digest()
    return str(CID("base32", 1, "raw", multihash.wrap(digest, "sha2-256")))


def _funded_accounts(w3: Web3, count: int, salt: str) -> list[LocalAccount]:
    # Fresh keys funded through Anvil's cheat code: deriving hundreds of mnemonic
    # accounts would dominate the run time.
    accounts = [Account.from_key(keccak(text=f"mcfl-gas-{salt}-{i}")) for i in range(count)]
    for account in accounts:
        w3.provider.make_request(RPCEndpoint("anvil_setBalance"), [account.address, hex(10**21)])
    return accounts


def _gas(receipt: Mapping[str, Any]) -> int:
    return int(receipt["gasUsed"]) - BASE_GAS


def _last_gas(client: ChainClient) -> int:
    block = client.w3.eth.get_block("latest", full_transactions=True)
    # web3 types a block's transactions as hashes or dicts; full_transactions gives dicts.
    txs = cast(list[Mapping[str, Any]], block["transactions"])
    (tx,) = [t for t in txs if t["from"] == client.address]
    return _gas(client.w3.eth.get_transaction_receipt(tx["hash"]))


def _measured(client: ChainClient, action: Callable[[], object]) -> int:
    action()
    return _last_gas(client)


def measure_round_gas(w3: Web3, trainers: int = 10) -> GasReport:
    """Deploy a network of ``trainers`` and measure two full rounds.

    Every trainer proposes one update of the same parent, all aggregate the same list
    of every update, every trainer votes in both phases. Round 1 (steady state: vote
    slots and balances already written) gives the per-trainer-round figure.
    """
    report = GasReport()
    deployment = deploy_network(
        w3, 0, fake_cid("genesis"), "lenet:fashion-mnist", min_trainers=trainers, phase_duration=0
    )
    clients = [
        ChainClient(deployment, account, w3=w3)
        for account in _funded_accounts(w3, trainers, "round")
    ]
    registers = [_measured(c, c.register) for c in clients]
    report.calls["register (first trainer)"] = registers[0]
    report.calls["register (opens round 0)"] = registers[-1]
    parent = ROOT_MODEL_ID
    for round_ in (0, 1):
        proposes, finishes, aggregates, nexts = [], [], [], []
        ids = []
        for i, c in enumerate(clients):
            uid = c.propose(parent, fake_cid(f"update-{round_}-{i}"), 1000 + i)
            ids.append(uid)
            proposes.append(_last_gas(c))
        finishes = [_measured(c, c.finish_proposals) for c in clients]
        model = b""
        for i, c in enumerate(clients):
            model = c.aggregate(ids, fake_cid(f"model-{round_}-{i}"))
            aggregates.append(_last_gas(c))
        nexts = [_measured(c, c.next_round) for c in clients]
        if round_ == 1:
            report.calls["propose"] = proposes[0]
            report.calls["finishProposals (vote)"] = finishes[0]
            report.calls["finishProposals (vote that advances)"] = finishes[-1]
            report.calls[f"aggregate {trainers} updates (new model)"] = aggregates[0]
            report.calls[f"aggregate {trainers} updates (existing model)"] = aggregates[1]
            report.calls["nextRound (vote)"] = nexts[0]
            report.calls["nextRound (vote that opens the next round)"] = nexts[-1]
            means = {
                "propose": sum(proposes),
                "finishProposals": sum(finishes),
                "aggregate": sum(aggregates),
                "nextRound": sum(nexts),
            }
            report.per_trainer_round = {k: round(v / trainers) for k, v in means.items()}
            report.per_trainer_round["total"] = round(sum(means.values()) / trainers)
        parent = model
    owner = clients[0]
    some_update = ids[0]
    other = clients[1].address
    report.calls["Updates.transferFrom"] = _measured(
        owner,
        lambda: owner._send(
            "transfer", owner.updates.functions.transferFrom(owner.address, other, some_update)
        ),
    )
    report.calls["Models.approve"] = _measured(
        owner,
        lambda: owner._send(
            "approve", owner.models.functions.approve(other, int.from_bytes(parent, "big"))
        ),
    )
    return report


def measure_aggregate_sizes(w3: Web3, sizes: tuple[int, ...] = AGGREGATE_SIZES) -> dict[str, int]:
    """Gas of `aggregate` creating a new model from each count of updates in ``sizes``.

    ``max(sizes)`` trainers propose on the root in round 0; only the first counts in
    its quorum (``minTrainers`` = 1), so its vote alone ends the PROPOSE phase. The
    largest list is then submitted a second time, by another trainer.
    """
    largest = max(sizes)
    deployment = deploy_network(
        w3, 0, fake_cid("genesis"), "lenet:fashion-mnist", min_trainers=1, phase_duration=0
    )
    clients = [
        ChainClient(deployment, account, w3=w3)
        for account in _funded_accounts(w3, largest, "sizes")
    ]
    for c in clients:
        c.register()
    ids = sorted(
        (c.propose(ROOT_MODEL_ID, fake_cid(f"u{i}"), 100), c) for i, c in enumerate(clients)
    )
    clients[0].finish_proposals()
    figures = {}
    # The k-th list starts at (or, for the largest, contains) the k-th update, whose
    # proposer submits it: every list holds its aggregator's own update and nobody
    # aggregates twice on the same parent in a round.
    for k, size in enumerate(sizes):
        start = min(k, largest - size)
        chosen = ids[start : start + size]
        aggregator = ids[k][1]
        aggregator.aggregate([uid for uid, _ in chosen], fake_cid(f"m{size}"))
        figures[f"{size} (new model)"] = _last_gas(aggregator)
    repeat = ids[len(sizes)][1]
    repeat.aggregate([uid for uid, _ in ids], None)
    figures[f"{largest} (existing model)"] = _last_gas(repeat)
    return figures
