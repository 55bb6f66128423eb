"""Gas benchmark of the MCFL contracts on a real EVM (Anvil), next to the thesis' contracts.

Every figure is a transaction's full ``gasUsed``: the 21,000 base of each transaction
included (so fewer transactions count). Measured, in steady state (every trainer has
voted, proposed and owned tokens before, as after a few rounds):

(a) consensus round: 10 trainers, one parent; each proposes one update and votes
    (``submitProposals``), then all aggregate the same 10 updates and vote
    (``submitAggregations``): one creates the model, nine repeat it.
(b) forking round: 12 trainers in 3 groups of 4; each group has its own 2 parents;
    each trainer proposes on both, then aggregates, for each parent, its own update
    and the next two of its group: every selection differs, so every aggregation
    creates a model (the worst case).
(c) one aggregation (with its vote) of 1, 10, 100 and 256 updates, and merges of two
    parents with 2, 10, 100 and 256 updates (half each); and aggregations of 10 updates
    with an aggregation rule (median: code stored; trimmed mean: code and parameter
    word stored), against FedAvg's 10 (nothing stored).
(d) cohort rounds (PROTOCOL §4, "Cohorts"): 40 trainers (``--cohort-trainers``), a
    quarter drawn for each round (``--cohort``); the drawn ones propose on the last
    model and all aggregate the same list of the round's updates, as in (a). Rounds 8
    to 12 are measured, in steady state as (a) (by then nearly every trainer has played
    once, so its vote stamp and token balances are written): gas per drawn trainer
    (propose + aggregate, with the draw of its next round) against the thesis' (a), and
    the whole round's gas (empty calls ending a phase without members included) over
    every trainer of the network. The
    draw's seed comes from the deployment's block, so these figures move a little from
    run to run: they are printed and checked against the 0.5 goal, not snapshotted.

The thesis contracts (Vyper 0.3, SPEC §2) do the same work with one transaction per
call: ``propose`` 117,283, ``aggregate`` ~134,000 and ``nextRound`` 26,182 execution
gas, plus 21,000 per transaction: (a) one of each = 340,465; (b) two proposals, two
aggregations and one ``nextRound`` = 633,748.

    python scripts/bench_gas.py                    # print the figures
    python scripts/bench_gas.py --write-snapshot   # also refresh the snapshot

The last line reads
``per-trainer-round gas ratio vs thesis (worst case, base included): R``.
"""

from __future__ import annotations

import hashlib
import json
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click
from eth_utils import keccak, to_checksum_address
from multiformats import CID, multihash
from rich.console import Console
from rich.table import Table
from web3 import Web3
from web3.exceptions import ContractLogicError, Web3RPCError
from web3.types import RPCEndpoint

from mcfl_chain._utils.process import free_port
from mcfl_chain.chain.cids import cid_to_bytes
from mcfl_chain.chain.client import connect
from mcfl_chain.chain.deploy import deploy_network
from mcfl_chain.chain.devnet import start_devnet, stop_devnet
from mcfl_chain.dag.model_id import ROOT_MODEL_ID, model_id, update_id

SNAPSHOT = Path(__file__).resolve().parent.parent / "tests" / "contracts" / "gas-snapshot.json"

BASE_GAS = 21_000
THESIS_PROPOSE = 117_283
THESIS_AGGREGATE = 134_000
THESIS_NEXT_ROUND = 26_182

SIZES = (1, 10, 100, 256)
MERGE_SIZES = (2, 10, 100, 256)

TASK = "lenet:fashion-mnist"
PHASE_DURATION = 3_600
"""Long enough that no phase of a measured round ends by its deadline."""
GAS_LIMIT = 12_000_000


def thesis_round(proposals: int, aggregations: int) -> int:
    """Gas per trainer and round of the thesis contracts, one transaction per call.

    ``proposals`` calls of ``propose``, ``aggregations`` of ``aggregate`` and one
    ``nextRound`` (its contract had no vote ending the proposal phase), each paying
    the 21,000 base.
    """
    execution = proposals * THESIS_PROPOSE + aggregations * THESIS_AGGREGATE + THESIS_NEXT_ROUND
    return execution + (proposals + aggregations + 1) * BASE_GAS


THESIS_CONSENSUS = thesis_round(1, 1)
THESIS_FORKING = thesis_round(2, 2)


@dataclass
class RoundGas:
    """Mean gas per trainer of one round's two transactions (base included)."""

    trainers: int
    submit_proposals: int
    submit_aggregations: int
    thesis: int

    @property
    def total(self) -> int:
        return self.submit_proposals + self.submit_aggregations

    @property
    def ratio(self) -> float:
        return self.total / self.thesis

    def as_dict(self) -> dict[str, int]:
        return {
            "submitProposals": self.submit_proposals,
            "submitAggregations": self.submit_aggregations,
            "total": self.total,
        }


@dataclass
class GasReport:
    """All figures of one run (gasUsed of whole transactions, base included)."""

    calls: dict[str, int] = field(default_factory=dict)
    consensus: RoundGas | None = None
    forking: RoundGas | None = None
    aggregate_by_size: dict[str, int] = field(default_factory=dict)
    cohort: CohortGas | None = None
    """Not in the snapshot: the draw differs from run to run (see (d))."""

    @property
    def ratio(self) -> float:
        """The worst of the measured rounds' ratios to the thesis contracts."""
        return max(r.ratio for r in (self.consensus, self.forking, self.cohort) if r is not None)

    def as_dict(self) -> dict[str, Any]:
        per_round = {
            name: r.as_dict()
            for name, r in (("consensus", self.consensus), ("forking", self.forking))
            if r
        }
        return {
            "calls": self.calls,
            "per_trainer_round": per_round,
            "aggregate_by_size": self.aggregate_by_size,
        }


def fake_cid(label: str) -> bytes:
    """A well-formed binary CIDv1 (raw, sha2-256) of ``label``; content need not exist."""
    digest = hashlib.sha256(label.encode()).digest()
    return cid_to_bytes(str(CID("base32", 1, "raw", multihash.wrap(digest, "sha2-256"))))


class Network:
    """A fresh deployment on the devnet, driven from impersonated, funded addresses."""

    def __init__(self, w3: Web3, min_trainers: int, salt: str, cohort_bps: int = 10_000) -> None:
        deployment = deploy_network(
            w3,
            0,
            _base32(fake_cid("genesis")),
            TASK,
            min_trainers=min_trainers,
            phase_duration=PHASE_DURATION,
            cohort=cohort_bps / 10_000,
        )
        self.w3 = w3
        self.trainers, self.models, self.updates = (
            w3.eth.contract(
                address=to_checksum_address(deployment.addresses[n]), abi=deployment.abis[n]
            )
            for n in ("Trainers", "Models", "Updates")
        )
        self.salt = salt
        self.accounts: list[str] = []
        self.trainer_ids: dict[str, int] = {}
        self.registrations: list[int] = []

    def add_trainers(self, count: int) -> list[str]:
        """Register ``count`` new trainers; returns their addresses."""
        start = len(self.accounts)
        new: list[str] = [
            to_checksum_address(keccak(text=f"mcfl-gas-{self.salt}-{i}")[12:])
            for i in range(start, start + count)
        ]
        for address in new:
            self.w3.provider.make_request(RPCEndpoint("anvil_impersonateAccount"), [address])
            self.w3.provider.make_request(RPCEndpoint("anvil_setBalance"), [address, hex(10**21)])
            self.registrations.append(self.send(address, self.trainers.functions.register()))
            self.trainer_ids[address] = self.trainers.functions.trainerId(address).call()
        self.accounts += new
        return new

    def send(self, sender: str, call: Any) -> int:
        """Send ``call`` from ``sender``; its gasUsed, base included."""
        try:
            tx_hash = call.transact({"from": sender, "gas": GAS_LIMIT})
        except (ContractLogicError, Web3RPCError, ValueError) as exc:
            raise RuntimeError(f"{call.fn_name} from {sender} was refused: {exc}") from exc
        receipt = self.w3.eth.wait_for_transaction_receipt(tx_hash)
        if receipt["status"] != 1:
            raise RuntimeError(f"{call.fn_name} from {sender} reverted")
        return int(receipt["gasUsed"])

    def propose(self, sender: str, proposals: Sequence[tuple[bytes, bytes, int]]) -> int:
        return self.send(
            sender,
            self.models.functions.submitProposals(
                [(p, cid, samples) for p, cid, samples in proposals]
            ),
        )

    def aggregate(
        self,
        sender: str,
        aggregations: Sequence[tuple[Sequence[bytes], Sequence[int], bytes]],
        rule: tuple[int, int] = (0, 0),
    ) -> int:
        """``submitAggregations`` of (parents, update ids, weights CID) triples, all with
        aggregation rule ``rule`` (code, parameter word)."""
        return self.send(
            sender,
            self.models.functions.submitAggregations(
                [(len(parents), len(ids), *rule, cid) for parents, ids, cid in aggregations],
                [p for parents, _, _ in aggregations for p in parents],
                [u for _, ids, _ in aggregations for u in ids],
            ),
        )

    def uid(self, sender: str, parent: bytes) -> int:
        return update_id(self.trainer_ids[sender], parent, self.round())

    def round(self) -> int:
        return int(self.models.functions.round().call())

    def end_phase_by_deadline(self, voter: str) -> None:
        """Move time past the deadline; ``voter`` (who voted already) ends the phase."""
        self.w3.provider.make_request(RPCEndpoint("evm_increaseTime"), [PHASE_DURATION])
        phase = self.models.functions.phase().call()
        call = (
            self.models.functions.submitProposals([])
            if phase == 0
            else self.models.functions.submitAggregations([], [], [])
        )
        self.send(voter, call)


def measure_consensus_round(w3: Web3, trainers: int = 10) -> tuple[RoundGas, dict[str, int]]:
    """Round (a): all train one parent and aggregate the same updates (round 1 measured)."""
    net = Network(w3, trainers, "consensus")
    accounts = net.add_trainers(trainers)
    calls = {
        "register (first trainer)": net.registrations[0],
        "register (opens round 0)": net.registrations[-1],
    }
    parent = ROOT_MODEL_ID
    figures: dict[str, list[int]] = {}
    for round_ in (0, 1):
        proposals = [
            net.propose(a, [(parent, fake_cid(f"a{round_}-{i}"), 1000 + i)])
            for i, a in enumerate(accounts)
        ]
        ids = sorted(update_id(net.trainer_ids[a], parent, round_) for a in accounts)
        aggregations = [
            net.aggregate(a, [([parent], ids, fake_cid(f"m{round_}-{i}"))])
            for i, a in enumerate(accounts)
        ]
        figures = {"proposals": proposals, "aggregations": aggregations}
        parent = model_id(parent, ids)
    proposals, aggregations = figures["proposals"], figures["aggregations"]
    calls["submitProposals: 1 update + vote"] = proposals[0]
    calls["submitProposals: 1 update + vote that ends the phase"] = proposals[-1]
    calls[f"submitAggregations: new model of {trainers} updates + vote"] = aggregations[0]
    calls[f"submitAggregations: existing model of {trainers} updates + vote"] = aggregations[1]
    calls[
        f"submitAggregations: existing model of {trainers} updates + vote that opens the next round"
    ] = aggregations[-1]
    result = RoundGas(
        trainers,
        round(sum(proposals) / trainers),
        round(sum(aggregations) / trainers),
        THESIS_CONSENSUS,
    )
    return result, calls


def measure_forking_round(
    w3: Web3, groups: int = 3, size: int = 4, selection: int = 3
) -> tuple[RoundGas, dict[str, int]]:
    """Round (b): every aggregation creates a model; the second forking round is measured.

    Round 0 makes two models per group from the root; rounds 1 and 2 each train both
    models of a group and create ``size`` new ones per parent (``selection`` updates
    each). Round 1 warms up the vote stamps and token balances, round 2 is measured.
    """
    net = Network(w3, groups * size, "forking")
    members = [net.add_trainers(size) for _ in range(groups)]
    # Round 0: in each group, the first half of the trainers aggregate their updates
    # together, and the second half theirs: two models per group.
    for g, group in enumerate(members):
        for i, a in enumerate(group):
            net.propose(a, [(ROOT_MODEL_ID, fake_cid(f"f0-{g}-{i}"), 500)])
    parents: list[list[bytes]] = []
    for group in members:
        ids = [update_id(net.trainer_ids[a], ROOT_MODEL_ID, 0) for a in group]
        halves = (sorted(ids[: size // 2]), sorted(ids[size // 2 :]))
        for i, a in enumerate(group):
            half = halves[0] if i < size // 2 else halves[1]
            net.aggregate(a, [([ROOT_MODEL_ID], half, b"")])
        parents.append(sorted(model_id(ROOT_MODEL_ID, h) for h in halves))
    figures: dict[str, list[int]] = {}
    for round_ in (1, 2):
        proposals = []
        for g, group in enumerate(members):
            for i, a in enumerate(group):
                proposals.append(
                    net.propose(
                        a,
                        [
                            (p, fake_cid(f"f{round_}-{g}-{i}-{k}"), 500)
                            for k, p in enumerate(parents[g])
                        ],
                    )
                )
        aggregations = []
        created: list[list[bytes]] = []
        for g, group in enumerate(members):
            by_parent = {
                p: [update_id(net.trainer_ids[a], p, round_) for a in group] for p in parents[g]
            }
            made = []
            for i, a in enumerate(group):
                items = []
                for p in parents[g]:
                    chosen = sorted(by_parent[p][(i + k) % size] for k in range(selection))
                    items.append(([p], chosen, fake_cid(f"fm{round_}-{g}-{i}-{p.hex()}")))
                    made.append(model_id(p, chosen))
                aggregations.append(net.aggregate(a, items))
            created.append(sorted(made)[:2])
        figures = {"proposals": proposals, "aggregations": aggregations}
        parents = created
    proposals, aggregations = figures["proposals"], figures["aggregations"]
    calls = {
        "submitProposals: 2 updates + vote": proposals[0],
        f"submitAggregations: 2 new models of {selection} updates + vote": aggregations[0],
    }
    n = groups * size
    result = RoundGas(n, round(sum(proposals) / n), round(sum(aggregations) / n), THESIS_FORKING)
    return result, calls


@dataclass
class CohortGas:
    """Rounds of a cohort network: gas of the drawn trainers and of whole rounds."""

    trainers: int
    cohort_bps: int
    rounds: int
    drawn: int
    drawn_gas: int
    round_gas: int

    @property
    def per_drawn_trainer(self) -> int:
        """Mean gas of a drawn trainer's round (its two transactions)."""
        return round(self.drawn_gas / max(self.drawn, 1))

    @property
    def per_trainer_round(self) -> int:
        """The rounds' whole gas over every trainer and round."""
        return round(self.round_gas / (self.trainers * self.rounds))

    @property
    def ratio(self) -> float:
        """Gas per trainer and round against the thesis' (a), where every trainer plays
        every round: the goal's measure (at most 0.5)."""
        return self.per_trainer_round / THESIS_CONSENSUS

    @property
    def drawn_ratio(self) -> float:
        """A drawn trainer's own round against the thesis' (a)."""
        return self.per_drawn_trainer / THESIS_CONSENSUS


def measure_cohort_rounds(
    w3: Web3,
    trainers: int = 40,
    cohort_bps: int = 2_500,
    measured: Sequence[int] = (8, 9, 10, 11, 12),
) -> CohortGas:
    """Round (d): a cohort network's rounds up to ``max(measured)``, played by the drawn
    trainers (one update each on the last model, all aggregating the round's list)."""
    net = Network(w3, trainers, "cohort", cohort_bps)
    accounts = net.add_trainers(trainers)
    parent = ROOT_MODEL_ID
    result = CohortGas(trainers, cohort_bps, len(measured), 0, 0, 0)
    for round_ in range(max(measured) + 1):
        drawn = [
            a
            for a in accounts
            if tuple(net.models.functions.drawnRoundOf(net.trainer_ids[a]).call()) == (True, round_)
        ]
        if not drawn:  # a round without members: any trainer's empty calls end it
            gas = net.send(accounts[0], net.models.functions.submitProposals([]))
            gas += net.send(accounts[0], net.models.functions.submitAggregations([], [], []))
        else:
            gas = sum(
                net.propose(a, [(parent, fake_cid(f"c{round_}-{i}"), 1000)])
                for i, a in enumerate(drawn)
            )
            ids = sorted(update_id(net.trainer_ids[a], parent, round_) for a in drawn)
            gas += sum(net.aggregate(a, [([parent], ids, b"")]) for a in drawn)
            parent = model_id(parent, ids)
        assert net.round() == round_ + 1, "a cohort round did not end with its members"
        if round_ in measured:
            result.drawn += len(drawn)
            result.drawn_gas += gas if drawn else 0
            result.round_gas += gas
    return result


RULES = {"median": (1, 0), "trimmed-mean:beta=0.2": (2, 2000)}
"""Aggregation rules measured (code, parameter word), see ``measure_sizes``."""


def measure_sizes(
    w3: Web3, sizes: Sequence[int] = SIZES, merge_sizes: Sequence[int] = MERGE_SIZES
) -> dict[str, int]:
    """One aggregation (+ vote) creating a model of each size, then merges of two parents.

    ``max(sizes)`` trainers propose on the root in round 0 (``minTrainers`` = 1: only
    the first counts in round 0's first quorum, so its vote, sent last, ends the
    phase). Different trainers submit the lists, each holding its own update; the
    largest is submitted again to measure a repeat. Round 1 trains the models of the
    two smallest lists, and merges take half their updates from each.
    """
    largest = max(max(sizes), max(merge_sizes))
    net = Network(w3, 1, "sizes")
    accounts = net.add_trainers(largest)
    for i, a in enumerate(accounts[1:] + accounts[:1]):
        net.propose(a, [(ROOT_MODEL_ID, fake_cid(f"s{i}"), 100)])
    ranked = sorted(accounts, key=lambda a: net.uid(a, ROOT_MODEL_ID))
    ids = [net.uid(a, ROOT_MODEL_ID) for a in ranked]
    figures = {}
    models = []
    # The k-th list starts at (or, for the largest, contains) the k-th update, whose
    # proposer submits it: every list holds its aggregator's own update.
    for k, size in enumerate(sizes):
        start = min(k, largest - size)
        chosen = ids[start : start + size]
        figures[f"aggregate {size} (new model)"] = net.aggregate(
            ranked[k], [([ROOT_MODEL_ID], chosen, fake_cid(f"sm{size}"))]
        )
        models.append(model_id(ROOT_MODEL_ID, chosen))
    repeat = ranked[len(sizes)]
    figures[f"aggregate {largest} (existing model)"] = net.aggregate(
        repeat, [([ROOT_MODEL_ID], ids, b"")]
    )
    net.end_phase_by_deadline(repeat)
    # Round 1's quorum is round 0's aggregators: they propose last, ending the phase.
    pair = sorted(models[:2])
    members = ranked[: len(sizes) + 1]
    for i, a in enumerate([a for a in accounts if a not in members] + members):
        net.propose(a, [(p, fake_cid(f"r1-{i}-{k}"), 100) for k, p in enumerate(pair)])
    for k, size in enumerate(merge_sizes):
        merger = ranked[k]
        per_parent = []
        for p in pair:
            own = net.uid(merger, p)
            others = sorted(net.uid(a, p) for a in accounts if a != merger)
            per_parent += [own] + others[: size // 2 - 1]
        figures[f"merge 2 parents, {size} updates (new model)"] = net.aggregate(
            merger, [(pair, sorted(per_parent), fake_cid(f"mm{size}"))]
        )
    for k, (name, rule) in enumerate(RULES.items()):
        # Trainers that have not aggregated this round, 10 updates of the first parent.
        aggregator = ranked[len(merge_sizes) + k]
        own = net.uid(aggregator, pair[0])
        others = sorted(net.uid(a, pair[0]) for a in accounts if a != aggregator)
        figures[f"aggregate 10 with rule {name} (new model)"] = net.aggregate(
            aggregator, [([pair[0]], sorted([own] + others[:9]), fake_cid(f"rule{name}"))], rule
        )
    return figures


def run(
    w3: Web3,
    sizes: Sequence[int] = SIZES,
    merge_sizes: Sequence[int] = MERGE_SIZES,
    cohort_trainers: int = 40,
    cohort_bps: int = 2_500,
) -> GasReport:
    """Every measurement of this benchmark on the devnet behind ``w3``."""
    report = GasReport()
    report.consensus, calls = measure_consensus_round(w3)
    report.calls.update(calls)
    report.forking, calls = measure_forking_round(w3)
    report.calls.update(calls)
    report.aggregate_by_size = measure_sizes(w3, sizes, merge_sizes)
    report.cohort = measure_cohort_rounds(w3, cohort_trainers, cohort_bps)
    return report


def on_devnet(action: Callable[[Web3], GasReport]) -> GasReport:
    """Run ``action`` against a throw-away Anvil devnet on loopback."""
    with tempfile.TemporaryDirectory() as state_dir:
        port = free_port()
        start_devnet(
            Path(state_dir),
            port,
            genesis_cid=_base32(fake_cid("genesis")),
            min_trainers=1,
            phase_duration=PHASE_DURATION,
            accounts=1,
        )
        try:
            return action(connect(f"http://127.0.0.1:{port}"))
        finally:
            stop_devnet(Path(state_dir))


def _base32(cid: bytes) -> str:
    return str(CID.decode(cid).set(base="base32"))


@click.command()
@click.option(
    "--write-snapshot",
    is_flag=True,
    help=f"Write the figures to {SNAPSHOT.relative_to(SNAPSHOT.parents[2])}, which "
    "the test suite compares against.",
)
@click.option(
    "--cohort-trainers",
    type=click.IntRange(min=2),
    default=40,
    show_default=True,
    help="Trainers of the cohort network of (d).",
)
@click.option(
    "--cohort",
    type=click.FloatRange(min=0.01, max=0.9999),
    default=0.25,
    show_default=True,
    help="Share of them drawn for each round in (d).",
)
def main(write_snapshot: bool, cohort_trainers: int, cohort: float) -> None:
    """Measure the gas of the protocol's transactions on a throw-away Anvil devnet."""
    console = Console()
    with console.status("measuring rounds and aggregations of up to 256 updates..."):
        report = on_devnet(
            lambda w3: run(w3, cohort_trainers=cohort_trainers, cohort_bps=round(cohort * 10_000))
        )
    calls = Table(title="Transactions (gasUsed, 21,000 base included)")
    calls.add_column("transaction")
    calls.add_column("gas", justify="right")
    for name, gas in report.calls.items():
        calls.add_row(name, f"{gas:,}")
    console.print(calls)
    per = Table(title="Per trainer and round (mean, base included) vs thesis contracts")
    for column in ("round", "proposals tx", "aggregations tx", "total", "thesis", "ratio"):
        per.add_column(column, justify="left" if column == "round" else "right")
    for name, r in (("(a) consensus", report.consensus), ("(b) forking", report.forking)):
        assert r is not None
        per.add_row(
            name,
            f"{r.submit_proposals:,}",
            f"{r.submit_aggregations:,}",
            f"{r.total:,}",
            f"{r.thesis:,}",
            f"{r.ratio:.3f}",
        )
    console.print(per)
    console.print(
        "(a) 10 trainers, one parent, all aggregate the same 10 updates; thesis: "
        "propose + aggregate + nextRound = 3 transactions.\n(b) 12 trainers in 3 "
        "groups, 2 parents each, every aggregation a new model of 3 updates; "
        "thesis: 2 propose + 2 aggregate + nextRound = 5 transactions."
    )
    sizes = Table(title="One aggregation or merge, with its vote (gasUsed, base included)")
    sizes.add_column("aggregation")
    sizes.add_column("gas", justify="right")
    for name, gas in report.aggregate_by_size.items():
        sizes.add_row(name, f"{gas:,}")
    console.print(sizes)
    c = report.cohort
    assert c is not None
    console.print(
        f"(d) cohort network: {c.trainers} trainers, {c.cohort_bps / 100:g} % drawn a round; "
        f"rounds 8-12: {c.drawn} drawn trainer-rounds, {c.per_drawn_trainer:,} gas per drawn "
        f"trainer and round (thesis (a): {THESIS_CONSENSUS:,}, ratio {c.drawn_ratio:.3f}); "
        f"{c.per_trainer_round:,} gas per trainer and round over all {c.trainers} "
        f"(ratio {c.ratio:.3f})"
    )
    if write_snapshot:
        SNAPSHOT.write_text(json.dumps(report.as_dict(), indent=2) + "\n")
        console.print(f"snapshot written to {SNAPSHOT}")
    print(f"per-trainer-round gas ratio vs thesis (worst case, base included): {report.ratio:.3f}")


if __name__ == "__main__":
    main()
