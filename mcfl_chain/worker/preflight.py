"""Checks a worker makes before its first round, each failing with one line to act on.

- The chain: the RPC URL is well formed and answers (retried for ``give_up_after`` s),
  the contracts of the deployment file hold code there, and the chain's task and
  genesis CID are the file's: fresh devnets deploy to the same addresses, so a worker
  given another devnet's URL would otherwise join it without a word.
- The account: the key parses, and the account can pay for gas (an Anvil account index
  past the devnet's funded accounts is named as such).
- The storage: a small probe blob can be written and read back (an IPFS node is
  retried for ``give_up_after`` s, as it is later during the rounds).
- The state: the local state is a cache of the chain, checked against it. A state of
  another chain (a devnet started again) or an unreadable state file is set aside and
  rebuilt from the deployment block; an events log that lost events is set aside and
  read again from the chain.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import NamedTuple

from web3.exceptions import Web3Exception

from mcfl_chain.chain.client import ChainClient, ChainError, connect
from mcfl_chain.chain.deployment import Deployment
from mcfl_chain.chain.errors import ChainUnusable
from mcfl_chain.dag.events import apply_events
from mcfl_chain.dag.graph import ModelDAG
from mcfl_chain.storage import IpfsStorage, RetryPolicy, Storage, open_storage
from mcfl_chain.storage.errors import StorageError
from mcfl_chain.worker.state import StateError, WorkerState

log = logging.getLogger("mcfl_chain.worker")

STORAGE_PROBE = b"mcfl-chain storage probe\n"
"""Written and read back at start: a content-addressed store keeps one copy of it."""
DEFAULT_STATE_ROOT = Path(".mcfl") / "workers"
"""Where a worker keeps its state without --state-dir (one folder per address)."""


class WorkerSetupError(RuntimeError):
    """The worker cannot start; the message says what to change."""


class Prepared(NamedTuple):
    """A worker's checked services and its state, rebuilt from the chain if need be."""

    chain: ChainClient
    storage: Storage
    state: WorkerState
    dag: ModelDAG


def connect_chain(
    dep: Deployment,
    rpc: str,
    *,
    key: str | None,
    account_index: int | None,
    give_up_after: float,
) -> ChainClient:
    """A client for this trainer's account on ``rpc``, every request retried for
    ``give_up_after`` s while the node does not answer."""
    try:
        w3 = connect(rpc, give_up_after=give_up_after)
    except ChainError as exc:
        raise WorkerSetupError(f"cannot reach the chain: {exc}") from exc
    try:
        return ChainClient(dep, private_key=key, account_index=account_index, rpc_url=rpc, w3=w3)
    except ValueError:
        if key is not None:
            # Never echo the key, not even in a chained exception.
            raise WorkerSetupError(
                "--key (or MCFL_KEY) is not a private key: expected 64 hex digits, "
                "with or without 0x"
            ) from None
        raise
    except ChainError as exc:
        raise WorkerSetupError(str(exc)) from exc


def check_network(chain: ChainClient, deployment_path: str | Path, rpc: str) -> None:
    """Refuse a chain that does not hold the network the deployment file describes."""
    dep = chain.deployment
    head = chain.block_number()
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
        task, genesis = chain.task(), chain.genesis_cid()
    except (ChainError, Web3Exception, ValueError) as exc:
        raise WorkerSetupError(
            f"the contracts at {rpc} are not the MCFL network of {deployment_path} "
            f"({exc}); pass the matching --rpc and --deployment"
        ) from exc
    if (task, genesis) != (dep.task, dep.genesis_cid):
        raise WorkerSetupError(
            f"the chain at {rpc} runs another network than {deployment_path}: task "
            f"{task!r} and genesis weights {genesis} there, {dep.task!r} and "
            f"{dep.genesis_cid} in the file; pass the matching --rpc and --deployment"
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


def open_state(chain: ChainClient, state_dir: str | Path | None) -> tuple[WorkerState, ModelDAG]:
    """This trainer's state and DAG, checked against the chain.

    The state is rebuilt from the deployment block when it belongs to another chain,
    cannot be read, or its events log disagrees with its count or with the chain.
    """
    dep = chain.deployment
    folder = Path(state_dir) if state_dir else DEFAULT_STATE_ROOT / chain.address.lower()
    try:
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
        try:
            apply_events(dag, state.replay())
        except (KeyError, ValueError, TypeError, AttributeError) as exc:
            state.rewind(f"{state.events_path} holds a malformed record ({exc!r})")
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
    key: str | None,
    account_index: int | None,
    storage: str,
    state_dir: str | Path | None,
    give_up_after: float,
) -> Prepared:
    """Every check above, in order; the services and state of a worker ready to run.

    Raises
    ------
    WorkerSetupError
        With one line saying what is wrong and what to do.
    """
    try:
        chain = connect_chain(
            dep, rpc, key=key, account_index=account_index, give_up_after=give_up_after
        )
        check_network(chain, deployment_path, rpc)
        check_account(chain, account_index, rpc)
        store = open_store(storage, give_up_after)
        try:
            state, dag = open_state(chain, state_dir)
        except BaseException:
            store.close()
            raise
    except ChainUnusable as exc:
        raise WorkerSetupError(f"chain: {exc}") from exc
    return Prepared(chain, store, state, dag)
