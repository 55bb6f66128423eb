"""Checks a worker makes before its first round, each failing with one line to act on.

- The deployment: a file, or ``ipfs://CID`` fetched from the worker's storage (which
  verifies the bytes against the CID) — :func:`load_deployment`.
- The chain: the RPC URL is well formed and answers (retried for ``give_up_after`` s),
  its chain id is the deployment's, the addresses hold this package's contracts (their
  runtime code, not just any code), linked to each other, and the network's settings
  on chain (task, genesis CID, quorum, deadline, registration, sample cap) are the
  file's: fresh devnets deploy to the same addresses, so a worker given another
  devnet's URL would otherwise join it without a word, and a deployment file from
  storage is only trusted once the chain confirms it.
- The account: it can pay for gas (an Anvil account index past the devnet's funded
  accounts is named as such).
- The storage: a small probe blob can be written and read back (an IPFS node is
  retried for ``give_up_after`` s, as it is later during the rounds).
- The state: the local state is a cache of the chain, checked against it. A state of
  another chain (a devnet started again) or an unreadable state file is set aside and
  rebuilt from the deployment block; an events log that lost events is set aside and
  read again from the chain.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from pathlib import Path
from typing import NamedTuple

from eth_account.signers.local import LocalAccount
from web3.exceptions import Web3Exception

from mcfl_chain.chain._rpc import redact_url
from mcfl_chain.chain._tx import FeePolicy
from mcfl_chain.chain.artifacts import load_artifacts
from mcfl_chain.chain.client import ChainClient, ChainError, connect
from mcfl_chain.chain.deployment import Deployment, DeploymentError
from mcfl_chain.chain.errors import ChainUnusable
from mcfl_chain.chain.events import DEFAULT_MAX_LOG_RANGE
from mcfl_chain.dag.events import apply_events
from mcfl_chain.dag.graph import ModelDAG
from mcfl_chain.storage import IpfsStorage, RetryPolicy, Storage, open_storage
from mcfl_chain.storage.errors import (
    BlobNotFound,
    CorruptBlob,
    InvalidCID,
    NoPeers,
    StorageError,
)
from mcfl_chain.worker.state import StateError, WorkerState, lock_state_dir

log = logging.getLogger("mcfl_chain.worker")

STORAGE_PROBE = b"mcfl-chain storage probe\n"
"""Written and read back at start: a content-addressed store keeps one copy of it."""
DEFAULT_STATE_ROOT = Path(".mcfl") / "workers"
"""Where a worker keeps its state without --state-dir: one folder per network, one per
address in it (:func:`default_state_dir`)."""


DEPLOYMENT_URI = "ipfs://"
"""Prefix of a deployment published in storage: ``ipfs://<CID>``."""
MAX_DEPLOYMENT_BYTES = 4 * 1024 * 1024
"""Largest deployment file fetched from storage (ABIs included, they take ~100 KB)."""


class WorkerSetupError(RuntimeError):
    """The worker cannot start; the message says what to change."""


@dataclass(frozen=True)
class ChainOptions:
    """How the worker talks to its chain node (see ``mcfl-chain worker --help``)."""

    give_up_after: float = 120.0
    confirmations: int = 0
    max_log_range: int = DEFAULT_MAX_LOG_RANGE
    fees: FeePolicy = FeePolicy()


def deployment_uri(cid: str) -> str:
    """How a deployment stored under ``cid`` is named: ``ipfs://<cid>``."""
    return f"{DEPLOYMENT_URI}{cid}"


def publish_deployment(deployment: Deployment, storage: Storage) -> str:
    """Put the deployment file in ``storage``; its ``ipfs://CID``."""
    return deployment_uri(storage.put(deployment.to_json().encode("utf-8")))


def load_deployment(source: str | Path, storage: str, give_up_after: float) -> Deployment:
    """The deployment a worker is given: a file, or ``ipfs://CID`` fetched from ``storage``.

    A fetched file is verified against its CID by the store; what it says is trusted only
    once :func:`check_network` found it on the chain.

    Raises
    ------
    WorkerSetupError
        Missing or malformed file, a CID not in the store, bytes not matching the CID,
        an unreachable store.
    """
    text = str(source)
    if not text.startswith(DEPLOYMENT_URI):
        try:
            return _own_abis(Deployment.load(text))
        except DeploymentError as exc:
            raise WorkerSetupError(str(exc)) from exc
    cid = text.removeprefix(DEPLOYMENT_URI).strip("/")
    try:
        store = open_storage(storage)
    except StorageError as exc:
        raise WorkerSetupError(f"cannot open storage {storage!r}: {exc}") from exc
    if isinstance(store, IpfsStorage):
        store.retry = RetryPolicy.for_duration(give_up_after)
    try:
        blob = store.get(cid, max_bytes=MAX_DEPLOYMENT_BYTES)
    except InvalidCID as exc:
        raise WorkerSetupError(f"--deployment {text}: {cid!r} is not a CID ({exc})") from exc
    except NoPeers as exc:
        raise WorkerSetupError(
            f"cannot fetch the deployment {text}: {exc}; the CID may well be right: start "
            f"the node with the other organisations' addresses (`mcfl-chain ipfs up --peer "
            f"...`) or connect it (`mcfl-chain ipfs connect`)"
        ) from exc
    except BlobNotFound as exc:
        raise WorkerSetupError(
            f"the deployment {text} is not in storage {storage}: publish it there "
            f"(`mcfl-chain deploy --publish`), or check the CID and --storage ({exc})"
        ) from exc
    except CorruptBlob as exc:
        raise WorkerSetupError(
            f"storage {storage} returned bytes that do not match {text}: refused ({exc})"
        ) from exc
    except StorageError as exc:
        raise WorkerSetupError(f"cannot fetch the deployment {text}: {exc}") from exc
    finally:
        store.close()
    try:
        return _own_abis(Deployment.from_json(blob, text))
    except DeploymentError as exc:
        raise WorkerSetupError(str(exc)) from exc


def _own_abis(deployment: Deployment) -> Deployment:
    """The deployment with this package's ABIs instead of the file's.

    A file from elsewhere could pair the right addresses with a doctored ABI (a
    function's name on another's selector); :func:`check_network` verifies that the code
    at the addresses is this package's, whose ABIs are therefore the right ones.
    """
    try:
        artifacts = load_artifacts()
    except (FileNotFoundError, ImportError) as exc:  # no contract sources: keep the file's
        log.warning("cannot load this package's contract ABIs (%s): using the file's", exc)
        return deployment
    return replace(deployment, abis={name: list(a.abi) for name, a in artifacts.items()})


class Prepared(NamedTuple):
    """A worker's checked services and its state, rebuilt from the chain if need be."""

    chain: ChainClient
    storage: Storage
    state: WorkerState
    dag: ModelDAG


def chain_url(rpc: str | None, deployment: Deployment) -> str:
    """The node a worker talks to: ``rpc`` (--rpc), else the deployment file's URL,
    which the log names (a silent default would leave a person guessing for minutes).

    Raises
    ------
    WorkerSetupError
        No ``rpc`` and the file's URL lost its secret part when it was written.
    """
    if rpc:
        return rpc
    url = deployment.rpc_url
    if "***" in url:
        raise WorkerSetupError(
            f"give --rpc: the deployment's RPC URL {url} was written without its API key "
            f"or password; pass your own node's or provider's URL"
        )
    log.info("no --rpc: using the deployment's RPC URL %s", url)
    return url


def connect_chain(
    dep: Deployment,
    rpc: str,
    *,
    account: LocalAccount | int,
    options: ChainOptions | None = None,
) -> ChainClient:
    """A client for this trainer's account (a signing account or an Anvil dev-account
    index) on ``rpc``, every request retried for ``options.give_up_after`` s while the
    node does not answer."""
    options = options or ChainOptions()
    try:
        w3 = connect(rpc, give_up_after=options.give_up_after)
    except ChainError as exc:
        raise WorkerSetupError(f"cannot reach the chain: {exc}") from exc
    try:
        return ChainClient(
            dep,
            account,
            rpc_url=rpc,
            w3=w3,
            confirmations=options.confirmations,
            max_log_range=options.max_log_range,
            fees=options.fees,
        )
    except ChainError as exc:
        raise WorkerSetupError(str(exc)) from exc


_SETTINGS = {
    "task": "task",
    "genesis_cid": "genesis weights",
    "min_trainers": "min trainers",
    "phase_duration": "phase duration",
    "registration": "registration",
    "deposit": "deposit",
    "cooldown": "cooldown",
    "max_samples": "max samples",
    "cohort_bps": "cohort (basis points)",
}
"""Deployment fields checked against the contracts, and how messages name them."""


def check_network(chain: ChainClient, deployment_path: str | Path, rpc: str) -> None:
    """Refuse a chain that does not hold the network the deployment describes."""
    dep = chain.deployment
    head = chain.latest_block()
    if head < dep.deployment_block:
        raise WorkerSetupError(
            f"the chain at {rpc} is at block {head}, but {deployment_path} was deployed at "
            f"block {dep.deployment_block}: that network is not on this chain; pass the "
            f"matching --rpc and --deployment (or start the network again)"
        )
    absent = [
        f"{name} ({address})"
        for name, address in dep.addresses.items()
        if not chain.w3.eth.get_code(address)  # type: ignore[arg-type]
    ]
    if absent:
        raise WorkerSetupError(
            f"no contract code at {', '.join(absent)} on the chain at {rpc}: the network of "
            f"{deployment_path} is not deployed there; pass the matching --rpc and "
            f"--deployment (or start the network again)"
        )
    try:
        foreign = chain.foreign_code()
    except (FileNotFoundError, ImportError) as exc:  # no contract sources to compare with
        log.warning("cannot compare the contracts' code with this package's: %s", exc)
        foreign = []
    if foreign:
        raise WorkerSetupError(
            f"the code at {', '.join(foreign)} on the chain at {rpc} is not this "
            f"mcfl-chain's contract (another contract, or another version of the protocol): "
            f"{deployment_path} does not describe a network this worker can join"
        )
    try:
        found = chain.network_parameters()
    except (ChainError, Web3Exception, ValueError) as exc:
        raise WorkerSetupError(
            f"the contracts at {rpc} are not the MCFL network of {deployment_path} "
            f"({exc}); pass the matching --rpc and --deployment"
        ) from exc
    differences = [
        f"{label} {found[field]!r} there, {getattr(dep, field)!r} in the file"
        for field, label in _SETTINGS.items()
        if found[field] != getattr(dep, field)
    ]
    if not found["links"]:
        differences.append("the three contracts are not linked to each other there")
    if differences:
        raise WorkerSetupError(
            f"the chain at {rpc} runs another network than {deployment_path}: "
            f"{'; '.join(differences)}; pass the matching --rpc and --deployment"
        )


def check_account(chain: ChainClient, account_index: int | None, rpc: str) -> None:
    """Refuse an account that cannot pay for gas, saying which one and why."""
    if chain.w3.eth.get_balance(chain.address) > 0:  # type: ignore[arg-type]
        return
    if account_index is not None:
        try:
            funded = len(chain.w3.eth.accounts)
        except (Web3Exception, ValueError):
            funded = 0  # not a dev node: it does not list accounts
        if funded and account_index >= funded:
            raise WorkerSetupError(
                f"--account-index {account_index} is past the {funded} funded dev accounts "
                f"of the node at {rpc} (0 to {funded - 1}): pick a lower index, or start "
                f"the devnet with more accounts"
            )
    raise WorkerSetupError(
        f"account {chain.address} has no native currency to pay for gas on the chain at "
        f"{rpc}: send it some, or use a funded account"
    )


def open_store(spec: str, give_up_after: float) -> Storage:
    """The store ``spec`` names, checked to take and give back a blob."""
    try:
        store = open_storage(spec)
    except StorageError as exc:
        raise WorkerSetupError(f"cannot open storage {spec!r}: {exc}") from exc
    if isinstance(store, IpfsStorage):
        store.retry = RetryPolicy.for_duration(give_up_after)
    try:
        store.get(store.put(STORAGE_PROBE))
    except StorageError as exc:
        store.close()
        raise WorkerSetupError(f"storage: {exc}") from exc
    return store


def _models_on_chain(chain: ChainClient, block: int) -> int | None:
    """Models (root included) at ``block``; None when the node cannot tell (pruned)."""
    try:
        return chain.model_count(block)
    except (ChainError, Web3Exception, ValueError) as exc:
        log.debug("cannot count the models at block %d: %s", block, exc)
        return None


_QUOTE = 200
"""Characters of a damaged file's content a message quotes, at most."""


def _quoted(exc: BaseException) -> str:
    """``exc`` as a message quotes it: its start only (it may quote a whole record)."""
    text = " ".join(repr(exc).split())
    return text if len(text) <= _QUOTE else f"{text[:_QUOTE]}... ({len(text):,} characters)"


def default_state_dir(deployment: Deployment, address: str) -> Path:
    """A trainer's state folder without --state-dir: keyed by network, then address, so
    that joining a second network from the same folder leaves the first one's alone."""
    return DEFAULT_STATE_ROOT / deployment.network / address.lower()


def open_state(chain: ChainClient, state_dir: str | Path | None) -> tuple[WorkerState, ModelDAG]:
    """This trainer's state and DAG, checked against the chain.

    The state is rebuilt from the deployment block when it belongs to another chain,
    cannot be read, or its events log disagrees with its count or with the chain. The
    directory is held (locked) by this process until it exits: a second worker of the
    same trainer is refused.
    """
    dep = chain.deployment
    folder = Path(state_dir) if state_dir else default_state_dir(dep, chain.address)
    try:
        lock_state_dir(folder)  # before anything is read: a second worker is refused
        state = WorkerState.open(folder, chain.address, dep.deployment_block)
        anchor = bytes(chain.w3.eth.get_block(dep.deployment_block)["hash"]).hex()
        head = chain.block_number()
        if state.deployment_block_hash not in ("", anchor):
            state = state.start_over(
                f"{state.path} follows another chain, whose block {dep.deployment_block} "
                f"differs (a devnet started again?)"
            )
        elif state.last_block > head:
            state = state.start_over(
                f"{state.path} has read up to block {state.last_block}, past this chain's "
                f"head {head} (a devnet started again?)"
            )
        if not state.deployment_block_hash:
            state.deployment_block_hash = anchor
            state.save()
        dag = ModelDAG(genesis_cid=dep.genesis_cid)
        line = 0
        try:
            for record in state.replay():  # the log now holds just these, one a line
                line += 1
                apply_events(dag, (record,))
        except (KeyError, ValueError, TypeError, AttributeError) as exc:
            state.rewind(f"{state.events_path} line {line} is a malformed record ({_quoted(exc)})")
            dag = ModelDAG(genesis_cid=dep.genesis_cid)
        if state.last_block >= dep.deployment_block:
            on_chain = _models_on_chain(chain, state.last_block)
            if on_chain is not None and on_chain != len(dag.models):
                state.rewind(
                    f"{state.events_path} tells of {len(dag.models)} models up to block "
                    f"{state.last_block}, the chain of {on_chain}"
                )
                dag = ModelDAG(genesis_cid=dep.genesis_cid)
    except StateError as exc:
        raise WorkerSetupError(str(exc)) from exc
    return state, dag


def prepare(
    dep: Deployment,
    deployment_path: str | Path,
    *,
    rpc: str,
    account: LocalAccount | int,
    storage: str,
    state_dir: str | Path | None,
    options: ChainOptions | None = None,
    network_checked: bool = False,
) -> Prepared:
    """Every check above, in order; the services and state of a worker ready to run.

    ``network_checked``: the chain at ``rpc`` was found to hold this deployment's
    network moments ago (a host building its next trainer): :func:`check_network`'s
    dozen reads are not made again.

    Raises
    ------
    WorkerSetupError
        With one line saying what is wrong and what to do.
    """
    options = options or ChainOptions()
    try:
        chain = connect_chain(dep, rpc, account=account, options=options)
        shown = redact_url(rpc)  # messages never show an API key the URL may hold
        if not network_checked:
            check_network(chain, deployment_path, shown)
        check_account(chain, account if isinstance(account, int) else None, shown)
        store = open_store(storage, options.give_up_after)
        try:
            state, dag = open_state(chain, state_dir)
        except BaseException:
            store.close()
            raise
    except ChainUnusable as exc:
        raise WorkerSetupError(f"chain: {exc}") from exc
    return Prepared(chain, store, state, dag)
