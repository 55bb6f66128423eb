"""One trainer's access to an MCFL network: transactions, views and events.

A trainer sends two transactions per round (docs/PROTOCOL.md §5-6):
:meth:`ChainClient.submit_proposals` (all its updates and its PROPOSE vote) and
:meth:`ChainClient.submit_aggregations` (all its aggregations and its AGGREGATE vote);
after the deadline a trainer that voted ends a stalled phase with
:meth:`ChainClient.end_phase`; a trainer out of the quorum gets back in with
:meth:`ChainClient.join`. What the contracts would refuse without a reason (or at a gas
cost) is refused here first, with :class:`ProtocolLimitError`, and a submission the
latest block says would revert is not sent.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import re
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import Any, NamedTuple, cast
from urllib.parse import urlsplit

from eth_abi import decode as abi_decode
from eth_abi import encode as abi_encode
from eth_abi.exceptions import DecodingError
from eth_account.signers.local import LocalAccount
from eth_typing import ChecksumAddress
from eth_utils import event_abi_to_log_topic, keccak
from eth_utils.abi import get_abi_input_types
from hexbytes import HexBytes
from multiformats import CID
from web3 import Web3
from web3.exceptions import (
    ContractCustomError,
    ContractLogicError,
    TransactionNotFound,
    Web3Exception,
    Web3RPCError,
)
from web3.types import BlockIdentifier, FilterParams, RPCEndpoint, TxReceipt

from mcfl_chain.chain._logs import EventDecoder
from mcfl_chain.chain._rpc import REQUEST_TIMEOUT, PatientHTTPProvider, redact_url
from mcfl_chain.chain._tx import FeePolicy, Transactor, as_account, revert_reason
from mcfl_chain.chain.cids import cid_from_bytes, cid_to_bytes
from mcfl_chain.chain.deployment import ALL_TRAINERS_BPS, REGISTRATION_POLICIES, Deployment
from mcfl_chain.chain.errors import ChainError, ChainUnavailable, ProtocolLimitError
from mcfl_chain.chain.events import DEFAULT_MAX_LOG_RANGE, EVENT_SOURCES, ChainEvent

MAX_RULE = 255
"""Highest aggregation rule code the contracts accept (``Models.MAX_RULE``)."""
_VOTE_GAS = 300_000
"""Gas limit of an empty call ending a phase (one uses ~50k-90k). Sent without
estimate: nodes estimate against the latest block, whose timestamp may still be before
the deadline that the new block will be past."""

_UINT256 = 2**256

# How nodes and providers say a log query spans too much: the range is then halved.
_RANGE_REFUSED = re.compile(
    r"block range|range (is )?too (large|wide|big)|too many|more than \d+ results|"
    r"exceed|limit|response size",
    re.I,
)

log = logging.getLogger("mcfl_chain.chain")


def _proposals_gas(count: int) -> int:
    """Gas limit of a ``submitProposals`` of ``count`` proposals (unused gas is refunded).

    Measured (docs/PROTOCOL.md §12): ~87k for one proposal and its vote, ~34k per
    further proposal; a trainer's first call writes fresh slots (+~40k).
    """
    return 200_000 + 80_000 * count


def _aggregations_gas(aggregations: int, parents: int, update_ids: int) -> int:
    """Gas limit of a ``submitAggregations`` call of this size.

    Measured: a new model of 1 / 256 updates with the vote ~124k / ~1.07M, a merge of
    two parents with 256 updates ~1.09M (about 3.7k per update id).
    """
    return 200_000 + 120_000 * aggregations + 30_000 * parents + 8_000 * update_ids


class Phase(IntEnum):
    """The two phases of a round."""

    PROPOSE = 0
    AGGREGATE = 1


_NOBODY = "0x0000000000000000000000000000000000000000"


class TrainerStatus(NamedTuple):
    """One atomic reading of the round state for one trainer (``Models.statusOf``)."""

    started: bool
    """Whether round 0 has opened."""
    round: int
    phase: Phase
    voted: bool
    """Whether the trainer voted in this phase (its transaction of the phase was mined)."""
    member: bool
    """Whether its vote counts (or counted) in this phase's quorum."""
    deadline: int
    """Unix time from which any vote or empty call ends the phase; 0 before round 0."""
    votes: int
    """Counted votes so far in this phase."""
    quorum: int
    """Counted votes that end the phase before its deadline."""
    voters: int
    """Trainers that voted in this phase (members or not): the next phase's quorum."""


@dataclass(frozen=True)
class ProposalArg:
    """One update of a ``submitProposals`` call.

    Attributes
    ----------
    parent
        The 32-byte id of the model the update was trained from.
    cid
        CIDv1 string of the update's weights (raw or dag-pb codec, sha2-256).
    num_samples
        Training samples behind the update (its FedAvg weight), 1 to
        :meth:`ChainClient.max_samples`.
    """

    parent: bytes
    cid: str
    num_samples: int


@dataclass(frozen=True)
class AggregationArg:
    """One aggregation of a ``submitAggregations`` call (any order: the client sorts).

    Attributes
    ----------
    parents
        Ids of the aggregated models: one for an ordinary aggregation, several for a
        merge. The caller must have proposed an update of each in this round.
    update_ids
        Updates of this round on those parents, the caller's own of each included.
    weights_cid
        CIDv1 of the averaged weights, recorded when the model is new; None for none.
    rule
        Code of the aggregation rule that computed the weights (0: the network's
        default, FedAvg or the architecture's rule), 0 to ``Models.MAX_RULE``; the
        model id commits to it (:func:`~mcfl_chain.dag.model_id.model_id`).
    rule_parameter
        The rule's parameter word, a uint256 (0 for rule 0).
    """

    parents: tuple[bytes, ...]
    update_ids: tuple[int, ...]
    weights_cid: str | None = None
    rule: int = 0
    rule_parameter: int = 0


class ProtocolLimits(NamedTuple):
    """The bounds a submission must respect, as the deployed contracts state them."""

    max_proposals: int
    """Proposals per ``submitProposals`` (``Models.MAX_PROPOSALS``)."""
    max_aggregations: int
    """Aggregations per ``submitAggregations`` (``Models.MAX_AGGREGATIONS``)."""
    max_parents: int
    """Parents per ``submitAggregations``, all aggregations together (``MAX_PARENTS``)."""
    max_updates: int
    """Update ids of one aggregation (``Models.MAX_UPDATES``)."""
    max_call_updates: int
    """Update ids per ``submitAggregations`` (``Models.MAX_CALL_UPDATES``)."""
    cid_length: int
    """Bytes of a binary CID (``Models.CID_LENGTH``)."""
    max_samples: int
    """Largest sample count of one update (``Updates.maxSamples``)."""


__all__ = [
    "AggregationArg",
    "ChainClient",
    "ChainError",
    "ChainEvent",
    "ChainUnavailable",
    "Phase",
    "ProposalArg",
    "ProtocolLimitError",
    "ProtocolLimits",
    "TrainerStatus",
    "connect",
    "status_from_view",
]

_NOT_STARTED = TrainerStatus(False, 0, Phase.PROPOSE, False, False, 0, 0, 0, 0)
"""The status of a network whose contracts are not (yet, at that block) deployed."""


def connect(rpc_url: str, timeout: float | None = None, give_up_after: float | None = None) -> Web3:
    """A web3 instance on ``rpc_url`` (HTTP), checked to answer.

    With ``give_up_after``, every request to the node is retried with backoff for that
    many seconds before :class:`ChainUnavailable` is raised, and a request unanswered
    for ``timeout`` seconds (default 15) counts as a failed try, so a frozen node is
    logged too (see :mod:`._rpc`). Without it, requests wait ``timeout`` seconds
    (default 30) and fail at once.
    """
    if "://" not in rpc_url:
        raise ChainError(
            f"the RPC URL {rpc_url!r} lacks its scheme: write http://{rpc_url.lstrip('/')}"
        )
    if urlsplit(rpc_url).scheme not in ("http", "https"):
        raise ChainError(f"the RPC URL {rpc_url!r} must start with http:// or https://")
    provider = (
        Web3.HTTPProvider(rpc_url, request_kwargs={"timeout": timeout or 30.0})
        if give_up_after is None
        else PatientHTTPProvider(
            rpc_url, give_up_after=give_up_after, timeout=timeout or REQUEST_TIMEOUT
        )
    )
    # web3's validation middleware asks the node for its chain id before every eth_call
    # and transaction: cached, a status read is one request instead of three (about 40 %
    # less CPU for a polling trainer). A node does not change chains under a URL.
    provider.cache_allowed_requests = True
    provider.cacheable_requests = {RPCEndpoint("eth_chainId")}
    w3 = Web3(provider)
    if not w3.is_connected():
        raise ChainError(
            f"no JSON-RPC node answers at {redact_url(rpc_url)}: start one with "
            f"`mcfl-chain devnet up` or check the URL"
        )
    return w3


def status_from_view(values: Sequence[Any]) -> TrainerStatus:
    """A :class:`TrainerStatus` from the values ``Models.statusOf`` returns."""
    started, round_, phase, voted, member, deadline, votes, quorum, voters = values
    return TrainerStatus(
        bool(started),
        int(round_),
        Phase(phase),
        bool(voted),
        bool(member),
        int(deadline),
        int(votes),
        int(quorum),
        int(voters),
    )


def _static_words(result: Any, types: Sequence[str]) -> list[int] | None:
    """The values of an answer made of one 32-byte word per output, each a ``bool`` or
    a ``uintN`` (``statusOf``'s), read straight from the words; None when the answer is
    not that, for eth_abi to decode or refuse. A host decodes hundreds of statuses per
    block, and eth_abi's general decoder took a fifth of its interpreter."""
    if not isinstance(result, str) or len(result) != 2 + 64 * len(types):
        return None
    values = []
    for i, kind in enumerate(types):
        value = int(result[2 + 64 * i : 2 + 64 * (i + 1)], 16)
        if kind == "bool":
            if value > 1:
                return None
        elif not kind.startswith("uint") or value >> int(kind[4:] or 256):
            return None
        values.append(value)
    return values


def _rpc_error(answer: Any) -> str | None:
    """The message of a JSON-RPC error answer, None for a result."""
    error = answer.get("error") if isinstance(answer, dict) else None
    if not error:
        return None
    return str(error.get("message", error) if isinstance(error, dict) else error)


_ERROR_STRING = bytes.fromhex("08c379a0")
"""Selector of ``Error(string)``, the ABI encoding of a revert reason."""


def _revert_reason_of(error: Any) -> str | None:
    """The revert reason of a JSON-RPC error object: decoded from its ``data`` when
    that is an ``Error(string)``, else read from its message ("execution reverted:
    ...")."""
    if not isinstance(error, dict):
        return None
    data = error.get("data")
    if isinstance(data, dict):  # some nodes nest it: {"data": {"data": "0x..."}}
        data = data.get("data")
    if isinstance(data, str) and data.startswith("0x"):
        try:
            raw = bytes.fromhex(data[2:])
            if raw[:4] == _ERROR_STRING:
                return str(abi_decode(["string"], raw[4:])[0]) or None
        except (ValueError, DecodingError):
            pass
    return revert_reason(Exception(str(error.get("message", ""))))


@functools.lru_cache(maxsize=256)
def _selector(signature: str) -> bytes:
    return keccak(text=signature)[:4]


def calldata(call: Any) -> str:
    """The transaction data of a web3 contract call (``contract.functions.f(*args)``):
    its selector and its arguments ABI-encoded by eth_abi, as web3 encodes them.

    Why not web3's ``_encode_transaction_data``: it first walks every argument through
    its normalisers, which took 7 % of a 200-trainer host's interpreter for lists of
    200 update ids; the client's calls pass canonical values (bytes, ints, tuples,
    checked before), which need none of that. A call with keyword arguments goes
    through web3.
    """
    if call.kwargs:
        return str(call._encode_transaction_data())
    types = get_abi_input_types(call.abi)
    signature = f"{call.abi['name']}({','.join(types)})"
    return "0x" + (_selector(signature) + abi_encode(types, call.args)).hex()


class ChainClient:
    """Contracts access for ONE trainer account.

    Every transaction waits for its receipt; a rejected call raises :class:`ChainError`
    with the contract's revert reason, a submission the contracts would refuse raises
    :class:`ProtocolLimitError` before anything is sent. Use one client per account: it
    tracks the nonce.

    Parameters
    ----------
    deployment
        The network's deployment description.
    account
        Hex private key, Anvil dev-account index, or a signing account; or give
        ``private_key`` / ``account_index`` instead (exactly one of the three).
    rpc_url
        JSON-RPC endpoint; by default ``deployment.rpc_url``.
    w3
        A connected web3 instance to use instead of ``rpc_url``.
    confirmations
        Blocks a block must have on top of it before this client acts on it: views
        (:meth:`status`, :meth:`round_state`) are read at :meth:`block_number`, the
        latest block minus this, and a reader syncing events up to :meth:`block_number`
        never sees an event that a shallower reorg removes. This account's own vote is
        reported as soon as it is mined (or pending), so that it is not sent twice
        while it gets deep enough; a vote a reorg dropped is reported missing, to be
        sent again. 0 (the default) acts on the latest block, right for a local devnet
        that mines a block per transaction (with confirmations, it would wait for
        blocks that never come).
    max_log_range
        Most blocks one ``eth_getLogs`` request spans; :meth:`events` reads longer
        ranges in several requests (and halves the span when a provider refuses one).
    fees
        How transaction fees are set (cap, tip); see
        :class:`~mcfl_chain.chain._tx.FeePolicy`.
    """

    def __init__(
        self,
        deployment: Deployment,
        account: str | int | LocalAccount | None = None,
        *,
        private_key: str | None = None,
        account_index: int | None = None,
        rpc_url: str | None = None,
        w3: Web3 | None = None,
        confirmations: int = 0,
        max_log_range: int = DEFAULT_MAX_LOG_RANGE,
        fees: FeePolicy | None = None,
    ) -> None:
        given = [a for a in (account, private_key, account_index) if a is not None]
        if len(given) > 1:
            raise ValueError("give one of account, private_key and account_index, not several")
        if confirmations < 0:
            raise ValueError(f"confirmations must be >= 0, got {confirmations}")
        if max_log_range < 1:
            raise ValueError(f"max_log_range must be >= 1 block, got {max_log_range}")
        self.confirmations = confirmations
        self.max_log_range = max_log_range
        self.deployment = deployment
        self.w3 = w3 or connect(rpc_url or deployment.rpc_url)
        chain_id = self.w3.eth.chain_id
        if chain_id != deployment.chain_id:
            raise ChainError(
                f"the node at {redact_url(rpc_url or deployment.rpc_url)} runs chain "
                f"{chain_id}, the deployment was made on chain "
                f"{deployment.chain_id}: wrong deployment file or node"
            )
        self._tx = Transactor(self.w3, as_account(given[0]), fees=fees) if given else None
        self._my_trainer_id = 0
        self._my_draw: tuple[int, int | None] | None = None
        """This account's next draw as last read, with the count of its transactions
        then: only its own transaction (a vote, ``join``) moves it."""
        self._sends = 0
        """Transactions this client has sent or dry-run so far."""
        self._my_votes: dict[tuple[int, Phase], bytes] = {}
        """Transactions of this account that carried its vote, by (round, phase)."""
        self.trainers = self._contract("Trainers")
        self.models = self._contract("Models")
        self.updates = self._contract("Updates")
        self._max_samples: int | None = None
        self._cohort_bps: int | None = None
        self._cohort_seed: bytes | None = None
        self._limits: ProtocolLimits | None = None
        self._status_calls: dict[str, str] = {}
        """``statusOf``'s call data, by address."""
        self._status_types = [
            output["type"] for output in self.models.get_function_by_name("statusOf").abi["outputs"]
        ]
        self._topics: dict[bytes, EventDecoder] = {}
        for name, source in EVENT_SOURCES.items():
            abi = next(
                e for e in deployment.abis[source] if e.get("type") == "event" and e["name"] == name
            )
            self._topics[event_abi_to_log_topic(abi)] = EventDecoder(abi)
        self._voted_topic = next(t for t, d in self._topics.items() if d.name == "TrainerVoted")
        self._contract_of = {
            name: Web3.to_checksum_address(deployment.addresses[source])
            for name, source in EVENT_SOURCES.items()
        }
        """The address that logs each event."""

    @classmethod
    def read_only(cls, deployment: Deployment, rpc_url: str | None = None) -> ChainClient:
        """A client for views and events only (no account); transactions raise ChainError."""
        return cls(deployment, rpc_url=rpc_url)

    def _contract(self, name: str) -> Any:
        return self.w3.eth.contract(
            address=Web3.to_checksum_address(self.deployment.addresses[name]),
            abi=self.deployment.abis[name],
        )

    @property
    def address(self) -> str:
        """Checksummed address of this trainer's account."""
        return self._sender().address

    @property
    def gas_used(self) -> int:
        """Gas this client's account has paid for so far (mined transactions, reverted
        ones included); 0 for a read-only client."""
        return 0 if self._tx is None else self._tx.gas_used

    def _sender(self) -> Transactor:
        if self._tx is None:
            raise ChainError(
                "this client is read-only: create it with an account to send transactions"
            )
        return self._tx

    # -- transactions --------------------------------------------------------------

    def _send(
        self,
        description: str,
        call: Any,
        gas: int | None = None,
        value: int = 0,
        *,
        dry_run: bool = False,
    ) -> TxReceipt:
        self._sends += 1
        tx: dict[str, Any] = {
            "to": call.address,
            "data": calldata(call),
            "value": value,
        }
        if gas is not None:
            tx["gas"] = gas
            if dry_run or self.confirmations:
                # Sent without an estimate, a call that reverts is mined and paid for:
                # another trainer's transaction may have ended the phase since this one
                # was decided (acting on blocks a few deep, the latest block may be past
                # it already). Find out first.
                self._dry_run(description, tx)
        return self._sender().send(description, tx)

    def _dry_run(self, description: str, tx: dict[str, Any]) -> None:
        """Refuse ``tx`` if it reverts against the latest block (nothing is sent).

        One raw ``eth_call``, as status reads are: through web3's formatters a dry run
        cost 0.75 ms of CPU against 0.08 ms, and a host sends two a trainer and round.
        """
        call = {
            "from": self.address,
            "to": tx["to"],
            "data": tx["data"],
            "value": hex(int(tx.get("value", 0))),
        }
        answer = self.w3.provider.make_request(RPCEndpoint("eth_call"), [call, "latest"])
        error = _rpc_error(answer)
        if error is not None:
            reason = _revert_reason_of(answer["error"])
            raise ChainError(
                f"{description} from {self.address} not sent: it reverts at the latest "
                f"block ({reason or error})",
                reason,
            )

    def register(self, value: int | None = None, gas: int | None = None) -> int:
        """Register this account as a trainer; returns its trainer id.

        Parameters
        ----------
        value
            Wei sent with the registration; by default the network's deposit
            (:meth:`deposit`: 0 but under the DEPOSIT policy).
        gas
            Gas limit. Given, the transaction is sent without an estimate, so a
            registration the contract refuses is mined and reverts on chain (its
            reason read back) instead of being refused by the estimate.
        """
        if value is None:
            value = self.deposit()
        paid = f" with {value} wei" if value else ""
        self._send(
            f"Trainers.register{paid}", self.trainers.functions.register(), gas=gas, value=value
        )
        return self.trainer_id()

    def register_in_order(
        self, accounts: Sequence[LocalAccount], gas: int = 500_000, timeout: float = 300.0
    ) -> list[int]:
        """Register every account of ``accounts`` as a trainer, their trainer ids in that
        order; returns the ids.

        A simulation registers hundreds of its own dev accounts before any worker starts.
        One at a time, each waiting for its receipt, 1,000 took minutes; here each is
        signed and sent over this one connection as soon as the previous one is
        accepted, so the node mines them in that order, and the receipts are then read
        in batch requests. Every one must succeed.

        Raises
        ------
        ChainError
            A registration was refused or reverted (which one, and the reason).
        """
        if not accounts:
            return []
        value = self.deposit()
        data = self.trainers.encode_abi("register", [])
        chain_id = self.w3.eth.chain_id
        base = int(self.w3.eth.get_block("latest").get("baseFeePerGas") or 0)
        fees = {"maxPriorityFeePerGas": 1, "maxFeePerGas": 2 * base + 1}
        provider = cast(Any, self.w3.provider)
        counts = provider.make_batch_request(
            [(RPCEndpoint("eth_getTransactionCount"), [a.address, "pending"]) for a in accounts]
        )
        hashes: list[str] = []
        for account, count in zip(accounts, counts, strict=True):
            if _rpc_error(count):
                raise ChainError(f"reading {account.address}'s nonce failed: {_rpc_error(count)}")
            tx = {
                "to": self.trainers.address,
                "data": data,
                "value": value,
                "gas": gas,
                "nonce": int(count["result"], 16),
                "chainId": chain_id,
                **fees,
            }
            signed = account.sign_transaction(tx)
            try:
                hashes.append(Web3.to_hex(self.w3.eth.send_raw_transaction(signed.raw_transaction)))
            except (Web3RPCError, ValueError) as exc:
                raise ChainError(
                    f"Trainers.register from {account.address} could not be sent: {exc}"
                ) from exc
        receipts: dict[str, Any] = {}
        deadline = time.monotonic() + timeout
        while len(receipts) < len(hashes):
            missing = [h for h in hashes if h not in receipts]
            for tx_hash, answer in zip(
                missing,
                provider.make_batch_request(
                    [(RPCEndpoint("eth_getTransactionReceipt"), [h]) for h in missing[:500]]
                ),
                strict=False,
            ):
                if answer.get("result"):
                    receipts[tx_hash] = answer["result"]
            if len(receipts) < len(hashes):
                if time.monotonic() > deadline:
                    raise ChainError(
                        f"{len(hashes) - len(receipts)} registration(s) not mined within "
                        f"{timeout:g} s"
                    )
                time.sleep(0.05)
        for account, tx_hash in zip(accounts, hashes, strict=True):
            if int(receipts[tx_hash]["status"], 16) != 1:
                reason = self._replay_reason(account.address, data, value, receipts[tx_hash])
                raise ChainError(
                    f"Trainers.register from {account.address} reverted: "
                    f"{reason or 'no reason given'}",
                    reason,
                )
        ids = self.trainer_ids([a.address for a in accounts])
        if 0 in ids or any(a >= b for a, b in zip(ids, ids[1:], strict=False)):
            raise ChainError(f"the trainers were not registered in the order given: ids {ids}")
        return ids

    def _replay_reason(self, sender: str, data: str, value: int, receipt: Any) -> str | None:
        call = {"from": sender, "to": self.trainers.address, "data": data, "value": value}
        try:
            self.w3.eth.call(cast(Any, call), int(receipt["blockNumber"], 16) - 1)
        except Exception as exc:  # only to explain the revert
            return revert_reason(exc)
        return None

    def trainer_ids(self, addresses: Sequence[str]) -> list[int]:
        """The trainer id each address holds (0: none), read in one batch request."""
        answers = cast(Any, self.w3.provider).make_batch_request(
            [
                (
                    RPCEndpoint("eth_call"),
                    [
                        {
                            "to": self.trainers.address,
                            "data": self.trainers.encode_abi("trainerId", [a]),
                        },
                        "latest",
                    ],
                )
                for a in addresses
            ]
        )
        if not isinstance(answers, list):
            raise ChainError(f"trainerId failed: {_rpc_error(answers) or answers}")
        ids = []
        for address, answer in zip(addresses, answers, strict=True):
            if _rpc_error(answer):
                raise ChainError(f"trainerId({address}) failed: {_rpc_error(answer)}")
            ids.append(int(answer["result"], 16))
        return ids

    def set_allowed(self, accounts: Sequence[str], allowed: bool = True) -> TxReceipt:
        """Admit ``accounts`` for one registration each (again, if they used an earlier
        admission), or revoke their admission; only the admin may (ALLOWLIST)."""
        if not 1 <= len(accounts) <= 64:
            raise ValueError(f"give 1 to 64 accounts per call, got {len(accounts)}")
        checksummed = [Web3.to_checksum_address(a) for a in accounts]
        return self._send(
            f"Trainers.setAllowed({len(accounts)} accounts, {allowed})",
            self.trainers.functions.setAllowed(checksummed, allowed),
        )

    def submit_proposals(self, proposals: Sequence[ProposalArg]) -> dict[bytes, int]:
        """Propose all this round's updates and vote to end PROPOSE, in one transaction.

        Parameters
        ----------
        proposals
            One per parent trained (at most ``limits().max_proposals``); an empty
            sequence is a bare vote.

        Returns
        -------
        dict[bytes, int]
            Update id per parent.

        Raises
        ------
        ProtocolLimitError
            Before sending, for a list the contracts would refuse: too many proposals,
            a parent twice, a malformed or over-long CID, a sample count outside
            1..``max_samples()``.
        ChainError
            When the contracts refuse it (its reason in ``reason``).
        """
        limits = self.limits()
        if len(proposals) > limits.max_proposals:
            raise ProtocolLimitError(
                f"{len(proposals)} proposals in one call: the contracts take at most "
                f"{limits.max_proposals} (MAX_PROPOSALS)",
                "MAX_PROPOSALS",
            )
        encoded = []
        seen: set[bytes] = set()
        for i, p in enumerate(proposals, 1):
            what = f"proposal {i} of {len(proposals)}"
            parent = _bytes32(p.parent, f"{what}: the parent")
            if parent in seen:
                raise ProtocolLimitError(
                    f"{what}: parent 0x{parent.hex()} appears twice in the call: the "
                    f"contracts take one update per parent and round",
                    "ONE_UPDATE_PER_PARENT",
                )
            seen.add(parent)
            samples = p.num_samples
            if isinstance(samples, bool) or not isinstance(samples, int):
                raise ProtocolLimitError(
                    f"{what}: the sample count must be an int, got {samples!r}", "maxSamples"
                )
            if not 1 <= samples <= limits.max_samples:
                raise ProtocolLimitError(
                    f"{what}: {samples} samples in one update: the network takes 1 to "
                    f"{limits.max_samples} (Updates.maxSamples)",
                    "maxSamples",
                )
            encoded.append((parent, self._cid_arg(p.cid, what), samples))
        receipt = self._send(
            f"Models.submitProposals({len(encoded)} updates)",
            self.models.functions.submitProposals(encoded),
            gas=_proposals_gas(len(encoded)),
            dry_run=True,
        )
        self._remember_vote(receipt)
        events = self._receipt_events(receipt, "UpdateProposed")
        return {bytes(e["parent"]): int(e["updateId"]) for e in events}

    def submit_aggregations(self, aggregations: Sequence[AggregationArg]) -> list[bytes]:
        """Submit all this round's aggregations and vote to end AGGREGATE, in one transaction.

        Sorts the parents and update ids of each aggregation and builds the flat lists
        of docs/PROTOCOL.md §6.

        Parameters
        ----------
        aggregations
            At most ``limits().max_aggregations``, no parent in two of them; an empty
            sequence is a bare vote.

        Returns
        -------
        list[bytes]
            The model id of each aggregation, in the order given.

        Raises
        ------
        ProtocolLimitError
            Before sending, for lists the contracts would refuse: too many
            aggregations, parents or update ids (per aggregation or per call), an
            aggregation without parent or update, a parent twice, an update id twice
            in an aggregation, a malformed or over-long weights CID, a rule code out
            of range or rule 0 with a parameter.
        ChainError
            When the contracts refuse it (its reason in ``reason``).
        """
        limits = self.limits()
        if len(aggregations) > limits.max_aggregations:
            raise ProtocolLimitError(
                f"{len(aggregations)} aggregations in one call: the contracts take at most "
                f"{limits.max_aggregations} (MAX_AGGREGATIONS)",
                "MAX_AGGREGATIONS",
            )
        total_parents = sum(len(a.parents) for a in aggregations)
        if total_parents > limits.max_parents:
            raise ProtocolLimitError(
                f"{total_parents} parents in one call: the contracts take at most "
                f"{limits.max_parents} (MAX_PARENTS), all aggregations together",
                "MAX_PARENTS",
            )
        total_ids = sum(len(a.update_ids) for a in aggregations)
        if total_ids > limits.max_call_updates:
            raise ProtocolLimitError(
                f"{total_ids} update ids in one call: the contracts take at most "
                f"{limits.max_call_updates} (MAX_CALL_UPDATES), all aggregations together",
                "MAX_CALL_UPDATES",
            )
        heads: list[tuple[int, int, int, int, bytes]] = []
        flat_parents: list[bytes] = []
        flat_ids: list[int] = []
        seen: set[bytes] = set()
        for i, a in enumerate(aggregations, 1):
            what = f"aggregation {i} of {len(aggregations)}"
            if not a.parents:
                raise ProtocolLimitError(
                    f"{what} has no parent: an aggregation needs at least one", "parentCount"
                )
            if not a.update_ids:
                raise ProtocolLimitError(
                    f"{what} has no update id: an aggregation needs at least one", "updateCount"
                )
            if len(a.update_ids) > limits.max_updates:
                raise ProtocolLimitError(
                    f"{what} has {len(a.update_ids)} update ids: the contracts take at most "
                    f"{limits.max_updates} per aggregation (MAX_UPDATES)",
                    "MAX_UPDATES",
                )
            parents = sorted(_bytes32(p, f"{what}: a parent") for p in a.parents)
            for parent in parents:
                if parent in seen:
                    raise ProtocolLimitError(
                        f"{what}: parent 0x{parent.hex()} appears twice in the call: the "
                        f"contracts take one aggregation per parent and round",
                        "ONE_AGGREGATION_PER_PARENT",
                    )
                seen.add(parent)
            ids = sorted(_uint256(u, f"{what}: update id") for u in a.update_ids)
            for left, right in zip(ids, ids[1:], strict=False):
                if left == right:
                    raise ProtocolLimitError(
                        f"{what}: update id {left} appears twice: the ids of an aggregation "
                        f"must be distinct",
                        "ASCENDING_UPDATE_IDS",
                    )
            if not 0 <= a.rule <= MAX_RULE or not 0 <= a.rule_parameter < _UINT256:
                raise ProtocolLimitError(
                    f"{what}: aggregation rule ({a.rule}, {a.rule_parameter}): the code "
                    f"must be 0 to {MAX_RULE} and the parameter a uint256",
                    "MAX_RULE",
                )
            if a.rule == 0 and a.rule_parameter != 0:
                raise ProtocolLimitError(
                    f"{what}: rule 0 (the network's default) takes parameter 0, "
                    f"got {a.rule_parameter}",
                    "MAX_RULE",
                )
            cid = self._cid_arg(a.weights_cid, f"{what}: weights") if a.weights_cid else b""
            heads.append((len(parents), len(ids), a.rule, a.rule_parameter, cid))
            flat_parents += parents
            flat_ids += ids
        receipt = self._send(
            f"Models.submitAggregations({len(heads)} aggregations, {len(flat_ids)} updates)",
            self.models.functions.submitAggregations(heads, flat_parents, flat_ids),
            gas=_aggregations_gas(len(heads), len(flat_parents), len(flat_ids)),
            dry_run=True,
        )
        self._remember_vote(receipt)
        events = self._receipt_events(receipt, "ModelAppended")
        return [bytes(e["modelId"]) for e in events]

    def end_phase(self, phase: Phase) -> TxReceipt:
        """The empty call that ends ``phase`` once its deadline passed.

        ``submitProposals([])`` in PROPOSE, ``submitAggregations([], [], [])`` in
        AGGREGATE: the caller names the phase it means to end, so should another
        trainer have ended it already, the call reverts (with the phase reason)
        instead of voting in the next phase. Before the deadline it is this trainer's
        bare vote if it has not voted yet, else refused (``already voted``). Sent
        without a gas estimate (see ``_VOTE_GAS``).
        """
        if phase is Phase.PROPOSE:
            receipt = self._send(
                "Models.submitProposals([]) (end of phase)",
                self.models.functions.submitProposals([]),
                gas=_VOTE_GAS,
            )
        else:
            receipt = self._send(
                "Models.submitAggregations([], [], []) (end of phase)",
                self.models.functions.submitAggregations([], [], []),
                gas=_VOTE_GAS,
            )
        self._remember_vote(receipt)
        return receipt

    def join(self) -> tuple[int, Phase] | None:
        """A bare vote in whichever phase is open when it is mined (``Models.join``): a
        trainer out of the quorum is then a member of the next phase, which waits for
        it. Unlike a submission it cannot arrive after its phase ended.

        Returns
        -------
        tuple[int, Phase] | None
            The round and phase the vote went to (counted there or only recorded); None
            for a repeat after the deadline, which ends the phase and is no new vote.

        Raises
        ------
        ChainError
            Not sent when the latest block says it would revert (not registered, rounds
            not started, already voted in this phase), with the contract's reason.
        """
        receipt = self._send(
            "Models.join()", self.models.functions.join(), gas=_VOTE_GAS, dry_run=True
        )
        self._remember_vote(receipt)
        events = self._receipt_events(receipt, "TrainerVoted")
        if not events:
            return None
        return int(events[0]["round"]), Phase(int(events[0]["phase"]))

    def _remember_vote(self, receipt: TxReceipt) -> None:
        """Keep the hash of a transaction that carried this account's vote (by its
        TrainerVoted event), so that :meth:`status` knows of it before it is deep."""
        for event in self._receipt_events(receipt, "TrainerVoted"):
            key = (int(event["round"]), Phase(int(event["phase"])))
            self._my_votes[key] = bytes(receipt["transactionHash"])

    def _receipt_events(self, receipt: TxReceipt, name: str) -> list[dict[str, Any]]:
        """The arguments of every ``name`` event (a key of ``EVENT_SOURCES``) that the
        deployment's contract emitting it logged in ``receipt``, decoded as
        :meth:`events` decodes logs (web3's ``process_receipt`` took several times as
        long); a log that does not decode is skipped, as web3's ``DISCARD`` does."""
        source = self._contract_of[name]
        found = []
        for log in receipt["logs"]:
            topics = log["topics"]
            if not topics or log["address"] != source:
                continue
            decoder = self._topics.get(bytes(topics[0]))
            if decoder is None or decoder.name != name:
                continue
            with contextlib.suppress(ChainError):
                found.append(decoder.args(topics, log["data"]))
        return found

    def _cid_arg(self, cid: str, what: str) -> bytes:
        """Binary form of ``cid`` as the contracts take it, else ProtocolLimitError."""
        length = self.limits().cid_length
        try:
            data = bytes(CID.decode(cid))
        except Exception as exc:
            raise ProtocolLimitError(f"{what}: {cid!r} is not a CID ({exc})", "CID") from exc
        if len(data) > length:
            raise ProtocolLimitError(
                f"{what}: the CID {cid} has {len(data)} bytes: the contracts take at most "
                f"{length} (CID_LENGTH: a CIDv1 with a sha2-256 digest)",
                "CID_LENGTH",
            )
        try:
            return cid_to_bytes(cid)
        except ValueError as exc:
            raise ProtocolLimitError(f"{what}: {exc}", "CID") from exc

    # -- views ---------------------------------------------------------------------

    def _view(self, call: Any, block: int | None = None) -> Any:
        try:
            return call.call() if block is None else call.call(block_identifier=block)
        except (ContractLogicError, ContractCustomError, Web3RPCError) as exc:
            reason = revert_reason(exc)
            raise ChainError(f"{call.fn_name} failed: {reason or exc}", reason) from exc

    def max_samples(self) -> int:
        """Largest sample count one update may declare (``Updates.maxSamples``; read once)."""
        if self._max_samples is None:
            self._max_samples = int(self._view(self.updates.functions.maxSamples()))
        return self._max_samples

    def cohort_bps(self) -> int:
        """Basis points of the trainers drawn for each round (``Models.cohortBps``; read
        once): 10,000 when every trainer takes part in every round."""
        if self._cohort_bps is None:
            self._cohort_bps = int(self._view(self.models.functions.cohortBps()))
        return self._cohort_bps

    def cohort_seed(self) -> bytes:
        """The seed of the cohort draws (``Models.cohortSeed``; fixed at deployment, read
        once)."""
        if self._cohort_seed is None:
            self._cohort_seed = bytes(self._view(self.models.functions.cohortSeed()))
        return self._cohort_seed

    def drawn_round(self) -> int | None:
        """The round this account's trainer is drawn for next (``Models.drawnRoundOf``):
        in a cohort network it proposes there and in no round before it; None before
        its first draw (it draws with :meth:`join`). Without cohorts, the current round.
        """
        if self._my_draw is not None and self._my_draw[0] == self._sends:
            return self._my_draw[1]
        # A trainer sitting a round out asks before every look at the chain: the draw is
        # kept until this account's next transaction, the only thing that moves it.
        sends = self._sends
        if not self._my_trainer_id:
            self._my_trainer_id = self.trainer_id()
        drawn, round_ = self._view(self.models.functions.drawnRoundOf(self._my_trainer_id))
        result = int(round_) if drawn else None
        if self._my_trainer_id and self.cohort_bps() < ALL_TRAINERS_BPS:
            self._my_draw = (sends, result)
        return result

    def limits(self) -> ProtocolLimits:
        """The bounds of the two submissions, read from the contracts once."""
        if self._limits is None:
            f = self.models.functions
            self._limits = ProtocolLimits(
                max_proposals=int(self._view(f.MAX_PROPOSALS())),
                max_aggregations=int(self._view(f.MAX_AGGREGATIONS())),
                max_parents=int(self._view(f.MAX_PARENTS())),
                max_updates=int(self._view(f.MAX_UPDATES())),
                max_call_updates=int(self._view(f.MAX_CALL_UPDATES())),
                cid_length=int(self._view(f.CID_LENGTH())),
                max_samples=self.max_samples(),
            )
        return self._limits

    def is_registered(self, trainer: str | None = None) -> bool:
        """Whether ``trainer`` (default: this account) holds a trainer token."""
        return bool(self._view(self.trainers.functions.isRegistered(trainer or self.address)))

    def trainer_id(self, addr: str | None = None) -> int:
        """Trainer id held by ``addr`` (default: this account, any case), 0 when it
        holds none."""
        who = Web3.to_checksum_address(addr) if addr else self.address
        return int(self._view(self.trainers.functions.trainerId(who)))

    def holder_of(self, trainer_id: int) -> str | None:
        """Address holding trainer ``trainer_id`` now; None when no such live token."""
        try:
            return str(self._view(self.trainers.functions.ownerOf(trainer_id)))
        except ChainError:
            return None

    def deposit(self) -> int:
        """Wei a registration takes (``Trainers.deposit()``: 0 but under DEPOSIT)."""
        return int(self._view(self.trainers.functions.deposit()))

    def admin(self) -> str | None:
        """The allowlist's admin (``Trainers.admin()``); None but under ALLOWLIST."""
        keeper = str(self._view(self.trainers.functions.admin()))
        return None if int(keeper, 16) == 0 else Web3.to_checksum_address(keeper)

    def admission(self, account: str) -> str:
        """``account``'s admission under ALLOWLIST: "admitted" (it may register once),
        "used" (it registered with it; the admin must admit it again) or "none"."""
        address = Web3.to_checksum_address(account)
        if self._view(self.trainers.functions.isAllowed(address)):
            return "admitted"
        if self._view(self.trainers.functions.admissionUsed(address)):
            return "used"
        return "none"

    def last_trainer_id(self) -> int:
        """The highest trainer id minted so far (``Trainers.lastTrainerId``)."""
        return int(self._view(self.trainers.functions.lastTrainerId()))

    def trainer_count(self) -> int:
        """Number of registered (live) trainers."""
        return int(self._view(self.trainers.functions.totalSupply()))

    def round_state(self, block: int | None = None) -> tuple[bool, int, Phase]:
        """Whether rounds started, the current round and its phase.

        All three are read at one block (:meth:`block_number` unless ``block`` is
        given): read separately, a phase change in between would pair a round with
        another's phase.
        """
        at = self.block_number() if block is None else block
        status = self._status_at(_NOBODY, at)
        return status.started, status.round, status.phase

    def status(self, trainer: str | None = None) -> TrainerStatus:
        """The round state and ``trainer``'s vote (default: this account, else nobody),
        all read in one call, hence at one block.

        With ``confirmations``, read at :meth:`block_number`; this account's vote in
        that phase counts as cast as soon as its transaction is mined or pending (see
        the class docstring).
        """
        who = trainer or (self.address if self._tx is not None else _NOBODY)
        if self.confirmations == 0:
            return self._status_at(who, None)
        latest = self.latest_block()
        at = max(0, latest - self.confirmations)
        status = self._status_at(who, at)
        if (
            status.started
            and not status.voted
            and self._tx is not None
            and who == self.address
            and self._vote_on_its_way(status.round, status.phase, at, latest)
        ):
            status = status._replace(voted=True)
        return status

    def wait_for_news(self, status: TrainerStatus, seconds: float, stop: threading.Event) -> None:
        """Wait ``seconds`` before the next look at the chain (or until ``stop``): a
        trainer with nothing to do in ``status``. A host's trainers wait for a change
        instead (:class:`~mcfl_chain.host.chain.HostedChainClient`)."""
        stop.wait(seconds)

    def _status_at(self, who: str, block: int | None) -> TrainerStatus:
        try:
            values = self._read_status(who, block)
        except (ChainError, Web3Exception):
            # Before (or amid) the deployment, the confirmed block has no contracts yet.
            if block is not None and not self.w3.eth.get_code(self.models.address, block):
                return _NOT_STARTED
            raise
        return status_from_view(values)

    def statuses(self, members: Sequence[str]) -> list[TrainerStatus]:
        """The status of every address of ``members`` at the latest block, read in one
        JSON-RPC batch request (a host's trainers, all at once)."""
        if not members:
            return []
        requests = [(RPCEndpoint("eth_call"), self._status_params(m, "latest")) for m in members]
        answers = cast(Any, self.w3.provider).make_batch_request(requests)
        if not isinstance(answers, list):  # the whole batch refused: one error answer
            raise ChainError(f"statusOf failed: {_rpc_error(answers) or answers}")
        return [status_from_view(self._decoded_status(answer)) for answer in answers]

    def _status_params(self, who: str, at: str) -> list[Any]:
        """``eth_call``'s parameters for ``statusOf(who)`` at block ``at`` (the call data
        encoded once per address)."""
        data = self._status_calls.get(who)
        if data is None:
            data = self._status_calls[who] = self.models.encode_abi("statusOf", [who])
        return [{"to": self.models.address, "data": data}, at]

    def _decoded_status(self, answer: Any) -> Sequence[Any]:
        error = _rpc_error(answer)
        if error:
            raise ChainError(f"statusOf failed: {error}")
        words = _static_words(answer.get("result"), self._status_types)
        if words is not None:
            return words
        try:
            return abi_decode(self._status_types, HexBytes(answer.get("result") or "0x"))
        except DecodingError as exc:  # no contract there (yet): an empty answer
            raise ChainError(f"statusOf failed: the answer does not decode ({exc})") from exc

    def _read_status(self, who: str, block: int | None) -> Sequence[Any]:
        """``Models.statusOf(who)``'s values, through one raw ``eth_call``.

        Waiting workers poll this many times a second. Through web3's contract layer a
        call cost about 7.7 ms of CPU here, most of it validating the ABI and hashing
        every function's selector again on each call; the call data is encoded once per
        address instead, and the answer decoded with the function's output types.
        """
        at = "latest" if block is None else hex(block)
        answer = self.w3.provider.make_request(
            RPCEndpoint("eth_call"), self._status_params(who, at)
        )
        return self._decoded_status(answer)

    def _vote_on_its_way(self, round_: int, phase: Phase, confirmed: int, latest: int) -> bool:
        """Whether this account voted in (round, phase) in a block not yet confirmed, or
        has such a vote pending. A remembered vote the node no longer knows (a reorg
        dropped it) is forgotten, and the nonce read again, so that it is sent anew."""
        if not self._my_trainer_id:
            self._my_trainer_id = self.trainer_id()
        if self._my_trainer_id and latest > confirmed:
            logs = self.w3.eth.get_logs(
                {
                    "fromBlock": confirmed + 1,
                    "toBlock": latest,
                    "address": self.models.address,
                    "topics": [
                        "0x" + self._voted_topic.hex(),
                        "0x" + round_.to_bytes(32, "big").hex(),
                        "0x" + self._my_trainer_id.to_bytes(32, "big").hex(),
                    ],
                }
            )
            decoder = self._topics[self._voted_topic]
            for entry in logs:
                if int(decoder.args(entry["topics"], entry["data"])["phase"]) == phase:
                    return True
        tx_hash = self._my_votes.get((round_, phase))
        if tx_hash is None:
            return False
        try:
            found = self.w3.eth.get_transaction(tx_hash)  # type: ignore[arg-type]
        except TransactionNotFound:
            found = None
        if found is not None and found.get("blockNumber") is None:
            return True  # pending: it will be mined
        if found is None:
            log.warning(
                "my %s vote of round %d (transaction 0x%s) is no longer on chain (a reorg "
                "dropped it): sending it again",
                phase.name.lower(),
                round_,
                tx_hash.hex(),
            )
            del self._my_votes[(round_, phase)]
            self._sender().forget_nonce()
        return False

    def votes_and_quorum(self) -> tuple[int, int]:
        """Counted votes in the current phase, and the votes needed to end it."""
        status = self.status(_NOBODY)
        return status.votes, status.quorum

    def phase_deadline(self, block: int | None = None) -> int:
        """Unix time from which any vote ends the phase; 0 before round 0."""
        return int(self._view(self.models.functions.phaseDeadline(), block))

    def deadline_passed(self) -> bool:
        """Whether rounds started and the latest block is at or past the phase deadline."""
        deadline = self.phase_deadline()
        return deadline != 0 and int(self.w3.eth.get_block("latest")["timestamp"]) >= deadline

    def model_exists(self, model_id: bytes) -> bool:
        """Whether ``model_id`` is in the DAG."""
        return bool(self._view(self.models.functions.modelExists(bytes(model_id))))

    def round_of(self, model_id: bytes) -> int:
        """Round in which an existing model was created (the root: 0)."""
        return int(self._view(self.models.functions.roundOf(bytes(model_id))))

    def popularity_of(self, model_id: bytes) -> int:
        """Number of accepted aggregations with this model id."""
        return int(self._view(self.models.functions.popularityOf(bytes(model_id))))

    def index_of(self, model_id: bytes) -> int:
        """Creation index of an existing model (the root: 0)."""
        return int(self._view(self.models.functions.indexOf(bytes(model_id))))

    def model_count(self, block: int | None = None) -> int:
        """Number of models, the root included (at ``block``, default the latest)."""
        return int(self._view(self.models.functions.totalSupply(), block))

    def update_of(self, trainer_id: int, parent: bytes, round_: int) -> int | None:
        """Id of trainer ``trainer_id``'s update of ``parent`` in ``round_``, None if none."""
        uid = int(self._view(self.updates.functions.updateIdOf(trainer_id, bytes(parent), round_)))
        return uid if self.update_exists(uid) else None

    def update_exists(self, update_id: int) -> bool:
        """Whether an update with this id was proposed."""
        return bool(self._view(self.updates.functions.exists(update_id)))

    def num_samples_of(self, update_id: int) -> int:
        """Sample count declared with an update."""
        return int(self._view(self.updates.functions.numSamplesOf(update_id)))

    def update_round_of(self, update_id: int) -> int:
        """Round in which an update was proposed."""
        return int(self._view(self.updates.functions.roundOf(update_id)))

    def parent_index_of(self, update_id: int) -> int:
        """Creation index of an update's parent model."""
        return int(self._view(self.updates.functions.parentIndexOf(update_id)))

    def genesis_cid(self) -> str:
        """CID of the root model's weights, as recorded on chain."""
        cid = cid_from_bytes(self._view(self.models.functions.genesisCid()))
        assert cid is not None  # the constructor refuses an empty genesis CID
        return cid

    def task(self) -> str:
        """The network's task descriptor."""
        return str(self._view(self.models.functions.task()))

    def network_parameters(self) -> dict[str, Any]:
        """The network's settings as its contracts hold them, under the names of the
        deployment file's fields (``task``, ``genesis_cid``, ``min_trainers``,
        ``phase_duration``, ``registration``, ``deposit``, ``cooldown``,
        ``max_samples``, ``cohort_bps``), and ``links``: whether the three contracts
        point at each other.
        """
        trainers, models, updates = (self.trainers, self.models, self.updates)
        policy = int(self._view(trainers.functions.policy()))
        names = {code: name for name, code in REGISTRATION_POLICIES.items()}
        links = (
            self._view(trainers.functions.models()) == models.address
            and self._view(models.functions.trainers()) == trainers.address
            and self._view(models.functions.updates()) == updates.address
            and self._view(updates.functions.models()) == models.address
        )
        return {
            "task": self.task(),
            "genesis_cid": self.genesis_cid(),
            "min_trainers": int(self._view(models.functions.minTrainers())),
            "phase_duration": int(self._view(models.functions.phaseDuration())),
            "registration": names.get(policy, f"unknown policy {policy}"),
            "deposit": self.deposit(),
            "cooldown": int(self._view(trainers.functions.cooldown())),
            "max_samples": self.max_samples(),
            "cohort_bps": self.cohort_bps(),
            "links": bool(links),
        }

    def foreign_code(self) -> list[str]:
        """The contracts of the deployment whose code on chain is not this package's
        (none deployed there, or another contract or version), as "Name (address)"."""
        from mcfl_chain.chain.artifacts import load_artifacts

        artifacts = load_artifacts()
        foreign = []
        for name, address in self.deployment.addresses.items():
            code = bytes(self.w3.eth.get_code(Web3.to_checksum_address(address)))
            expected = bytes.fromhex(artifacts[name].runtime.removeprefix("0x"))
            if not code.startswith(expected):
                foreign.append(f"{name} ({address})")
        return foreign

    def latest_block(self) -> int:
        """The latest block number."""
        return int(self.w3.eth.block_number)

    def block_number(self) -> int:
        """The newest block this client acts on: the latest one less ``confirmations``
        (the latest one without them). Sync events up to it."""
        latest = self.latest_block()
        return max(0, latest - self.confirmations) if self.confirmations else latest

    # -- events --------------------------------------------------------------------

    def events(self, from_block: int, to_block: BlockIdentifier = "latest") -> list[ChainEvent]:
        """Decoded protocol events in ``[from_block, to_block]``, ordered by (block, log index).

        The events of :data:`~mcfl_chain.chain.events.EVENT_SOURCES`: UpdateProposed,
        ModelCreated, ModelAppended, PhaseChanged, NewRound and TrainerVoted; ERC-721
        events are left out. Read in requests of at most ``max_log_range`` blocks; a
        request the node refuses as too large is made again over half the range.
        """
        addresses: list[ChecksumAddress] = [
            Web3.to_checksum_address(self.deployment.addresses[name])
            for name in ("Models", "Updates")
        ]
        end = (
            to_block
            if isinstance(to_block, int) and not isinstance(to_block, bool)
            else int(self.w3.eth.get_block(to_block)["number"])
        )
        records = []
        start, span = int(from_block), self.max_log_range
        while start <= end:
            stop = min(end, start + span - 1)
            params: FilterParams = {"fromBlock": start, "toBlock": stop, "address": addresses}
            try:
                logs = self.w3.eth.get_logs(params)
            except Web3RPCError as exc:
                if span == 1 or not _RANGE_REFUSED.search(str(exc)):
                    raise
                span = max(1, span // 2)
                log.info(
                    "the node refused the logs of blocks %d-%d (%s); reading %d blocks at a time",
                    start,
                    stop,
                    str(exc)[:120],
                    span,
                )
                continue
            for entry in logs:
                decoder = self._topics.get(bytes(entry["topics"][0])) if entry["topics"] else None
                if decoder is None:
                    continue
                records.append(
                    ChainEvent(
                        name=decoder.name,
                        block_number=int(entry["blockNumber"]),
                        log_index=int(entry["logIndex"]),
                        tx_hash=entry["transactionHash"].to_0x_hex(),
                        args=_plain_args(decoder.args(entry["topics"], entry["data"])),
                    )
                )
            start = stop + 1
        records.sort(key=lambda r: (r.block_number, r.log_index))
        return records


def _bytes32(value: bytes, what: str) -> bytes:
    data = bytes(value)
    if len(data) != 32:
        raise ProtocolLimitError(f"{what} must be a 32-byte model id, got {len(data)} bytes", "id")
    return data


def _uint256(value: int, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < _UINT256:
        raise ProtocolLimitError(f"{what} {value!r} is not a uint256", "id")
    return value


def _plain_args(args: Any) -> dict[str, Any]:
    plain: dict[str, Any] = {}
    for key, value in args.items():
        if key in ("cid", "weightsCid"):
            plain[key] = cid_from_bytes(value)
        elif isinstance(value, bytes):
            plain[key] = bytes(value)
        elif isinstance(value, list | tuple):
            plain[key] = tuple(bytes(v) if isinstance(v, bytes) else int(v) for v in value)
        else:
            plain[key] = value
    return plain
