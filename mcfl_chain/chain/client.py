"""One trainer's access to an MCFL network: transactions, views and events."""

from __future__ import annotations

from collections.abc import Sequence
from enum import IntEnum
from typing import Any, Literal, NamedTuple
from urllib.parse import urlsplit

from eth_account.signers.local import LocalAccount
from eth_utils import event_abi_to_log_topic
from web3 import Web3
from web3.exceptions import ContractCustomError, ContractLogicError, Web3RPCError
from web3.types import TxReceipt

from mcfl_chain.chain._rpc import REQUEST_TIMEOUT, PatientHTTPProvider
from mcfl_chain.chain._tx import Transactor, as_account, revert_reason
from mcfl_chain.chain.cids import cid_from_bytes, cid_to_bytes
from mcfl_chain.chain.deployment import Deployment
from mcfl_chain.chain.errors import ChainError, ChainUnavailable
from mcfl_chain.chain.events import EVENT_SOURCES, ChainEvent

_VOTE_GAS = 300_000
"""Gas limit of a vote sent without estimate (a vote that opens a round uses ~45k)."""
_PROPOSE_GAS = 400_000
"""Gas limit of a proposal sent without estimate (one uses ~70k-115k): a bounded call
made every round, whose preconditions the worker checks before sending."""


class Phase(IntEnum):
    """The two phases of a round."""

    PROPOSE = 0
    AGGREGATE = 1


_NOBODY = "0x0000000000000000000000000000000000000000"


class TrainerStatus(NamedTuple):
    """One atomic reading of the round state (``Models.statusOf``)."""

    started: bool
    round: int
    phase: Phase
    voted: bool
    deadline: int
    """Unix time after which any vote ends the phase; 0 without deadline."""
    votes: int
    quorum: int


__all__ = [
    "ChainClient",
    "ChainError",
    "ChainEvent",
    "ChainUnavailable",
    "Phase",
    "TrainerStatus",
    "connect",
]


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
    w3 = Web3(provider)
    if not w3.is_connected():
        raise ChainError(
            f"no JSON-RPC node answers at {rpc_url}: start one with "
            f"`mcfl-chain devnet up` or check the URL"
        )
    return w3


class ChainClient:
    """Contracts access for ONE trainer account.

    Every transaction waits for its receipt; a rejected call raises :class:`ChainError`
    with the contract's revert reason. Use one client per account: it tracks the nonce.

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
    ) -> None:
        given = [a for a in (account, private_key, account_index) if a is not None]
        if len(given) > 1:
            raise ValueError("give one of account, private_key and account_index, not several")
        self.deployment = deployment
        self.w3 = w3 or connect(rpc_url or deployment.rpc_url)
        chain_id = self.w3.eth.chain_id
        if chain_id != deployment.chain_id:
            raise ChainError(
                f"the node at {rpc_url or deployment.rpc_url} runs chain "
                f"{chain_id}, the deployment was made on chain "
                f"{deployment.chain_id}: wrong deployment file or node"
            )
        self._tx = Transactor(self.w3, as_account(given[0])) if given else None
        self.trainers = self._contract("Trainers")
        self.models = self._contract("Models")
        self.updates = self._contract("Updates")
        self._topics: dict[bytes, tuple[str, Any]] = {}
        for name, source in EVENT_SOURCES.items():
            contract = {"Models": self.models, "Updates": self.updates}[source]
            abi = next(
                e for e in deployment.abis[source] if e.get("type") == "event" and e["name"] == name
            )
            self._topics[event_abi_to_log_topic(abi)] = (name, contract.events[name]())

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

    def _sender(self) -> Transactor:
        if self._tx is None:
            raise ChainError(
                "this client is read-only: create it with an account to send transactions"
            )
        return self._tx

    # -- transactions --------------------------------------------------------------

    def _send(self, description: str, call: Any, gas: int | None = None) -> TxReceipt:
        tx: dict[str, Any] = {
            "to": call.address,
            "data": call._encode_transaction_data(),
            "value": 0,
        }
        if gas is not None:
            tx["gas"] = gas
        return self._sender().send(description, tx)

    def register(self) -> int:
        """Register this account as a trainer; returns its trainer id."""
        self._send("Trainers.register", self.trainers.functions.register())
        return self.trainer_id()

    def propose(self, parent: bytes, cid: str, num_samples: int) -> int:
        """Propose an update of ``parent``; returns the update id.

        Parameters
        ----------
        parent
            The 32-byte id of the model the update was trained from.
        cid
            CIDv1 string of the update's weights (raw or dag-pb codec, sha2-256).
        num_samples
            Training samples behind the update (its FedAvg weight), 1 to 2**30 - 1.
        """
        receipt = self._send(
            f"Updates.propose(parent={bytes(parent).hex()[:12]}..)",
            self.updates.functions.propose(bytes(parent), cid_to_bytes(cid), num_samples),
            gas=_PROPOSE_GAS,
        )
        (event,) = self.updates.events.UpdateProposed().process_receipt(receipt)
        return int(event["args"]["updateId"])

    def finish_proposals(self) -> TxReceipt:
        """Vote to end the PROPOSE phase (sent without a gas estimate: votes are cheap
        and bounded, and a round's votes are the bulk of its transactions)."""
        return self._send(
            "Models.finishProposals", self.models.functions.finishProposals(), gas=_VOTE_GAS
        )

    def force_advance(self, phase: Phase) -> TxReceipt:
        """After the phase deadline, vote (or vote again) to end ``phase``.

        The caller names the phase it means to end: should another trainer have ended
        it already, the phase-specific call reverts instead of voting in the next phase.
        Sent without a gas estimate: nodes estimate against the latest block, whose
        timestamp may still be before the deadline that the new block will be past.
        """
        if phase is Phase.PROPOSE:
            return self._send(
                "Models.finishProposals (deadline)",
                self.models.functions.finishProposals(),
                gas=_VOTE_GAS,
            )
        return self._send(
            "Models.nextRound (deadline)", self.models.functions.nextRound(), gas=_VOTE_GAS
        )

    def aggregate(self, update_ids: Sequence[int], weights_cid: str | None = None) -> bytes:
        """Submit an aggregation of ``update_ids`` (sorted here); returns the model id.

        Parameters
        ----------
        update_ids
            Update ids of one parent from this round, including this trainer's own.
        weights_cid
            CIDv1 of the aggregated weights, recorded when the model id is new; empty
            or None to record none.
        """
        ids = sorted(update_ids)
        cid = cid_to_bytes(weights_cid) if weights_cid else b""
        receipt = self._send(
            f"Updates.aggregate({len(ids)} updates)", self.updates.functions.aggregate(ids, cid)
        )
        (event,) = self.models.events.ModelAppended().process_receipt(receipt)
        return bytes(event["args"]["modelId"])

    def next_round(self) -> TxReceipt:
        """Vote to end the AGGREGATE phase (the last counted vote opens the next round)."""
        return self._send("Models.nextRound", self.models.functions.nextRound(), gas=_VOTE_GAS)

    # -- views ---------------------------------------------------------------------

    def _view(self, call: Any, block: int | None = None) -> Any:
        try:
            return call.call() if block is None else call.call(block_identifier=block)
        except (ContractLogicError, ContractCustomError, Web3RPCError) as exc:
            reason = revert_reason(exc)
            raise ChainError(f"{call.fn_name} failed: {reason or exc}", reason) from exc

    def is_registered(self, trainer: str | None = None) -> bool:
        """Whether ``trainer`` (default: this account) holds a trainer token."""
        return bool(self._view(self.trainers.functions.isRegistered(trainer or self.address)))

    def trainer_id(self, trainer: str | None = None) -> int:
        """Trainer id of ``trainer`` (default: this account), 0 when not registered."""
        return int(self._view(self.trainers.functions.trainerId(trainer or self.address)))

    def trainer_count(self) -> int:
        """Number of registered trainers."""
        return int(self._view(self.trainers.functions.totalSupply()))

    def round_state(self, block: int | None = None) -> tuple[bool, int, Phase]:
        """Whether rounds started, the current round and its phase.

        All three are read at one block (the latest unless ``block`` is given): read
        separately, a phase change in between would pair a round with another's phase.
        """
        at = self.block_number() if block is None else block
        return (
            bool(self._view(self.models.functions.started(), at)),
            int(self._view(self.models.functions.round(), at)),
            Phase(self._view(self.models.functions.phase(), at)),
        )

    def status(self, trainer: str | None = None) -> TrainerStatus:
        """The round state and ``trainer``'s vote (default: this account, else nobody),
        all read in one call, hence at one block."""
        who = trainer or (self.address if self._tx is not None else _NOBODY)
        started, round_, phase, voted, deadline, votes, quorum = self._view(
            self.models.functions.statusOf(who)
        )
        return TrainerStatus(
            bool(started),
            int(round_),
            Phase(phase),
            bool(voted),
            int(deadline),
            int(votes),
            int(quorum),
        )

    def votes_and_quorum(self) -> tuple[int, int]:
        """Counted votes in the current phase, and the votes needed to end it."""
        return (
            int(self._view(self.models.functions.votes())),
            int(self._view(self.models.functions.quorum())),
        )

    def phase_deadline(self, block: int | None = None) -> int:
        """Unix time after which any vote ends the phase; 0 without deadline."""
        return int(self._view(self.models.functions.phaseDeadline(), block))

    def deadline_passed(self) -> bool:
        """Whether the current phase has a deadline and the latest block is past it."""
        deadline = self.phase_deadline()
        return deadline != 0 and int(self.w3.eth.get_block("latest")["timestamp"]) >= deadline

    def has_voted(self, trainer: str | None = None, block: int | None = None) -> bool:
        """Whether ``trainer`` (default: this account) voted in the current phase."""
        return bool(self._view(self.models.functions.hasVoted(trainer or self.address), block))

    def model_exists(self, model_id: bytes) -> bool:
        """Whether ``model_id`` is in the DAG."""
        return bool(self._view(self.models.functions.modelExists(bytes(model_id))))

    def parent_of(self, model_id: bytes) -> bytes:
        """Parent id of an existing model (the root reports itself)."""
        return bytes(self._view(self.models.functions.parentOf(bytes(model_id))))

    def round_of(self, model_id: bytes) -> int:
        """Round in which an existing model was first appended."""
        return int(self._view(self.models.functions.roundOf(bytes(model_id))))

    def popularity_of(self, model_id: bytes) -> int:
        """Number of accepted aggregations with this model id."""
        return int(self._view(self.models.functions.popularityOf(bytes(model_id))))

    def weights_cid_of(self, model_id: bytes) -> str | None:
        """CID of the weights its first aggregator recorded, None when none was."""
        return cid_from_bytes(self._view(self.models.functions.weightsCidOf(bytes(model_id))))

    def model_count(self, block: int | None = None) -> int:
        """Number of models, the root included (at ``block``, default the latest)."""
        return int(self._view(self.models.functions.totalSupply(), block))

    def update_of(self, proposer: str, parent: bytes, round_: int) -> int | None:
        """Id of ``proposer``'s update of ``parent`` in ``round_``, None when it proposed none."""
        uid = int(self._view(self.updates.functions.updateIdOf(proposer, bytes(parent), round_)))
        return uid if self._view(self.updates.functions.exists(uid)) else None

    def update_cid(self, update_id: int) -> str:
        """CID of an update's weights."""
        cid = cid_from_bytes(self._view(self.updates.functions.cidOf(update_id)))
        assert cid is not None  # an existing update always has a CID
        return cid

    def num_samples_of(self, update_id: int) -> int:
        """Sample count declared with an update."""
        return int(self._view(self.updates.functions.numSamplesOf(update_id)))

    def has_aggregated(self, trainer: str, parent: bytes, round_: int) -> bool:
        """Whether ``trainer`` aggregated updates of ``parent`` in ``round_``."""
        return bool(
            self._view(self.updates.functions.hasAggregated(trainer, bytes(parent), round_))
        )

    def genesis_cid(self) -> str:
        """CID of the root model's weights, as recorded on chain."""
        cid = cid_from_bytes(self._view(self.models.functions.genesisCid()))
        assert cid is not None  # the constructor refuses an empty genesis CID
        return cid

    def task(self) -> str:
        """The network's task descriptor."""
        return str(self._view(self.models.functions.task()))

    def block_number(self) -> int:
        """The latest block number."""
        return int(self.w3.eth.block_number)

    # -- events --------------------------------------------------------------------

    def events(
        self, from_block: int, to_block: int | Literal["latest"] = "latest"
    ) -> list[ChainEvent]:
        """Decoded protocol events in ``[from_block, to_block]``, ordered by (block, log index).

        UpdateProposed, ModelAppended, PhaseChanged, NewRound and TrainerVoted; ERC-721
        events are left out.
        """
        logs = self.w3.eth.get_logs(
            {
                "fromBlock": from_block,
                "toBlock": to_block,
                "address": [
                    Web3.to_checksum_address(self.deployment.addresses["Models"]),
                    Web3.to_checksum_address(self.deployment.addresses["Updates"]),
                ],
            }
        )
        records = []
        for log in logs:
            known = self._topics.get(bytes(log["topics"][0])) if log["topics"] else None
            if known is None:
                continue
            name, decoder = known
            event = decoder.process_log(log)
            records.append(
                ChainEvent(
                    name=name,
                    block_number=int(event["blockNumber"]),
                    log_index=int(event["logIndex"]),
                    tx_hash=event["transactionHash"].to_0x_hex(),
                    args=_plain_args(event["args"]),
                )
            )
        records.sort(key=lambda r: (r.block_number, r.log_index))
        return records


def _plain_args(args: Any) -> dict[str, Any]:
    plain: dict[str, Any] = {}
    for key, value in args.items():
        if key in ("cid", "weightsCid"):
            plain[key] = cid_from_bytes(value)
        elif isinstance(value, bytes):
            plain[key] = bytes(value)
        elif isinstance(value, list | tuple):
            plain[key] = tuple(int(v) for v in value)
        else:
            plain[key] = value
    return plain
