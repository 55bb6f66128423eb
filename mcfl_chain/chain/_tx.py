"""Sending transactions for one account: signing, nonces, receipts and revert reasons."""

from __future__ import annotations

import re
import threading
import time
from dataclasses import dataclass
from typing import Any, cast

from eth_account import Account
from eth_account.signers.local import LocalAccount
from hexbytes import HexBytes
from web3 import Web3
from web3._utils.method_formatters import receipt_formatter
from web3.datastructures import AttributeDict
from web3.exceptions import ContractCustomError, ContractLogicError, Web3RPCError
from web3.types import RPCEndpoint, TxParams, TxReceipt

from mcfl_chain.chain.errors import AccountUnfunded, ChainError, FeeCapExceeded

# Anvil's default dev accounts derive from this mnemonic (path m/44'/60'/0'/0/i).
ANVIL_MNEMONIC = "test test test test test test test test test test test junk"

FEE_REFRESH = 30.0
"""Seconds a base-fee reading is trusted for new transactions."""
DROPPED_AFTER = 5.0
"""Seconds a sent transaction may stay unknown to the node (neither mined nor pending)
before it counts as dropped."""

_REASON = re.compile(r"execution reverted(?::\s*(.*))?", re.S)
_UNFUNDED = re.compile(r"insufficient funds|not enough funds|lack of funds", re.I)
# A resent transaction the node already holds or mined (the first try reached it, its
# answer did not reach us).
_ALREADY_SENT = re.compile(r"already known|already imported|known transaction", re.I)
_NONCE_USED = re.compile(r"nonce too low", re.I)


GWEI = 10**9


@dataclass(frozen=True)
class FeePolicy:
    """How the fees of a transaction are set (EIP-1559, or a gas price on older chains).

    ``maxFeePerGas`` is twice the latest base fee plus the tip (so a transaction stays
    valid while the base fee rises for a few blocks), never above ``max_fee_per_gas``;
    while the base fee itself is above that cap, transactions are refused with
    :class:`~mcfl_chain.chain.errors.FeeCapExceeded` instead of being sent.

    Attributes
    ----------
    max_fee_per_gas
        Cap on the fee per gas, in wei; None: no cap.
    priority_fee_per_gas
        Tip per gas for the block producer, in wei (1 wei by default: enough where
        blocks are not full, as on devnets; raise it on a congested chain).
    """

    max_fee_per_gas: int | None = None
    priority_fee_per_gas: int = 1

    def __post_init__(self) -> None:
        if self.max_fee_per_gas is not None and self.max_fee_per_gas < 1:
            raise ValueError(f"the fee cap must be above 0 wei, got {self.max_fee_per_gas}")
        if self.priority_fee_per_gas < 0:
            raise ValueError(f"the tip must be >= 0 wei, got {self.priority_fee_per_gas}")

    @classmethod
    def from_gwei(
        cls, max_fee: float | None = None, priority_fee: float | None = None
    ) -> FeePolicy:
        """A policy from amounts in gwei (None: no cap / the default tip)."""
        return cls(
            max_fee_per_gas=None if max_fee is None else round(max_fee * GWEI),
            priority_fee_per_gas=1 if priority_fee is None else round(priority_fee * GWEI),
        )


def gwei(wei: int) -> str:
    """``wei`` in gwei, for messages: ``"12.5"``."""
    return f"{wei / GWEI:.9g}"


def dev_account(index: int, mnemonic: str = ANVIL_MNEMONIC) -> LocalAccount:
    """The ``index``-th account of ``mnemonic`` (by default one of Anvil's dev accounts)."""
    if index < 0:
        raise ValueError(f"account index must be >= 0, got {index}")
    Account.enable_unaudited_hdwallet_features()
    return Account.from_mnemonic(mnemonic, account_path=f"m/44'/60'/0'/0/{index}")


def as_account(key_or_index: str | int | LocalAccount) -> LocalAccount:
    """A signing account from a hex private key, a dev-account index or an account."""
    if isinstance(key_or_index, LocalAccount):
        return key_or_index
    if isinstance(key_or_index, int):
        return dev_account(key_or_index)
    try:
        return Account.from_key(key_or_index)
    except (ValueError, TypeError) as exc:
        raise ValueError("the private key is not a 32-byte hex string") from exc


def revert_reason(exc: Exception) -> str | None:
    """The revert reason string carried by a web3 exception, if any."""
    if isinstance(exc, ContractLogicError | ContractCustomError):
        text = str(exc.message if getattr(exc, "message", None) else exc)
    else:
        text = str(exc)
    match = _REASON.search(text)
    if match is None:
        return None
    reason = (match.group(1) or "").strip().strip("'\"")
    return reason or None


class Transactor:
    """Signs and sends the transactions of one account, one at a time.

    The nonce is tracked locally from the chain's pending count and re-read after a
    failed send, so concurrent callers of the same instance never reuse a nonce.
    """

    def __init__(
        self,
        w3: Web3,
        account: LocalAccount,
        receipt_timeout: float = 120.0,
        fees: FeePolicy | None = None,
    ) -> None:
        self.w3 = w3
        self.account = account
        self.receipt_timeout = receipt_timeout
        self.fees = fees or FeePolicy()
        self._lock = threading.Lock()
        self._nonce: int | None = None
        self._base_fee: int | None = 0
        self._fee_checked = 0.0
        self._chain_id = w3.eth.chain_id
        self.gas_used = 0
        """Gas of every mined transaction this account sent, reverted ones included
        (they are paid for too)."""

    @property
    def address(self) -> str:
        return str(self.account.address)

    def send(self, description: str, tx: dict[str, Any]) -> TxReceipt:
        """Estimate, sign and send ``tx``, wait for its receipt.

        Raises
        ------
        FeeCapExceeded
            The network's base fee is above the policy's cap: nothing was sent.
        ChainError
            With the contract's revert reason when the call reverts (at estimation or
            on chain), or with the node's error when sending fails.
        """
        with self._lock:
            tx = {**tx, "from": self.address, "chainId": self._chain_id}
            try:
                if "gas" not in tx:
                    # Generous: the estimate is made against the current state, and another
                    # trainer's transaction mined first can put this one on a costlier path
                    # (the registration that opens round 0, the vote that ends a phase).
                    # Unused gas is refunded, so the margin costs nothing.
                    tx["gas"] = int(self.w3.eth.estimate_gas(cast(TxParams, tx)) * 1.3) + 150_000
            except (ContractLogicError, ContractCustomError, Web3RPCError, ValueError) as exc:
                self._check_funded(exc, description)
                reason = revert_reason(exc)
                raise ChainError(
                    f"{description} from {self.address} was refused: {reason or exc}", reason
                ) from exc
            if self._nonce is None:
                self._nonce = self.w3.eth.get_transaction_count(self.account.address, "pending")
            tx["nonce"] = self._nonce
            if "maxFeePerGas" not in tx and "gasPrice" not in tx:
                tx.update(self._fee_fields(description))
            try:
                tx_hash = self._send_signed(tx)
            except (Web3RPCError, ValueError) as exc:
                if "base fee" not in str(exc).lower():
                    self._nonce = None
                    self._check_funded(exc, description)
                    raise ChainError(
                        f"{description} from {self.address} could not be sent: {exc}"
                    ) from exc
                # The base fee rose past the cached bound: read it again, retry once.
                self._fee_checked = 0.0
                for key in ("maxFeePerGas", "maxPriorityFeePerGas", "gasPrice"):
                    tx.pop(key, None)
                tx.update(self._fee_fields(description))
                try:
                    tx_hash = self._send_signed(tx)
                except (Web3RPCError, ValueError) as exc2:
                    self._nonce = None
                    raise ChainError(
                        f"{description} from {self.address} could not be sent: {exc2}"
                    ) from exc2
            self._nonce += 1
        receipt = self._wait_for_receipt(tx_hash, description)
        self.gas_used += int(receipt["gasUsed"])
        if receipt["status"] != 1:
            reason = self._replay_reason(tx, receipt["blockNumber"])
            raise ChainError(
                f"{description} from {self.address} reverted in block "
                f"{receipt['blockNumber']}: {reason or 'no reason given'}",
                reason,
            )
        return receipt

    def _wait_for_receipt(self, tx_hash: Any, description: str) -> TxReceipt:
        """The receipt of ``tx_hash`` once mined.

        Raises
        ------
        ChainError
            The node stopped knowing the transaction (neither mined nor pending for
            ``DROPPED_AFTER`` s: a reorg dropped it, or the pool evicted it), or it was
            not mined within ``receipt_timeout`` s. The nonce is read again next time.
        """
        started = time.monotonic()
        tx_hex = Web3.to_hex(tx_hash)
        unknown_since: float | None = None
        # A devnet mines within milliseconds (its receipt was missing at the first look
        # for about one transaction in four, beside a busy machine): look again soon.
        # Doubling from 5 ms makes one look more in the first 3 s than 1.5x from 50 ms did.
        delay = 0.005
        while True:
            found = self._request("eth_getTransactionReceipt", [tx_hex])
            if found is not None:
                return cast(TxReceipt, AttributeDict.recursive(receipt_formatter(found)))
            now = time.monotonic()
            if self._known(tx_hash):
                unknown_since = None
            elif unknown_since is None:
                unknown_since = now
            elif now - unknown_since >= DROPPED_AFTER:
                self.forget_nonce()
                raise ChainError(
                    f"{description} from {self.address} was dropped before it was mined "
                    f"(transaction {tx_hex}: a reorg, or the node's pool "
                    f"evicted it); it was not carried out"
                )
            if now - started > self.receipt_timeout:
                self.forget_nonce()  # it may be gone: let the node say what comes next
                raise ChainError(
                    f"{description} from {self.address} was not mined within "
                    f"{self.receipt_timeout:g} s (transaction {tx_hex}); fees "
                    f"too low for the network, or the node dropped it"
                )
            time.sleep(delay)
            delay = min(delay * 2, 1.0)

    def forget_nonce(self) -> None:
        """Read the next nonce from the node again before the next transaction (after a
        transaction was dropped, e.g. by a reorg, the one kept here is too high)."""
        with self._lock:
            self._nonce = None

    def _request(self, method: str, params: list[Any]) -> Any:
        """The result of one JSON-RPC request made straight through the provider.

        The transaction path of a trainer (send, receipt, pending check) skips web3's
        middleware and formatters: they cost 0.25-0.3 ms of CPU a call on top of a
        0.08 ms request, and a host of 200 trainers makes some 1,000 such calls a round.
        An error answer is raised as :class:`Web3RPCError`, as web3 raises it.
        """
        answer = self.w3.provider.make_request(RPCEndpoint(method), params)
        error = answer.get("error")
        if error:
            raise Web3RPCError(str(error), rpc_response=answer)
        return answer.get("result")

    def _send_signed(self, tx: dict[str, Any]) -> Any:
        signed = self.account.sign_transaction(tx)
        try:
            return HexBytes(
                self._request("eth_sendRawTransaction", [Web3.to_hex(signed.raw_transaction)])
            )
        except Web3RPCError as exc:
            if _ALREADY_SENT.search(str(exc)):
                return signed.hash
            if _NONCE_USED.search(str(exc)) and self._known(signed.hash):
                return signed.hash
            raise

    def _known(self, tx_hash: Any) -> bool:
        """Whether the node holds the transaction ``tx_hash`` (pending or mined)."""
        return self._request("eth_getTransactionByHash", [Web3.to_hex(tx_hash)]) is not None

    def _check_funded(self, exc: Exception, description: str) -> None:
        """Raise :class:`AccountUnfunded` when the node refused for lack of funds."""
        if _UNFUNDED.search(str(exc)):
            raise AccountUnfunded(
                f"account {self.address} has too little native currency to pay the gas "
                f"of {description}: send it some (or use a funded account)"
            ) from exc

    def _fee_fields(self, description: str) -> dict[str, int]:
        """The fee fields of a transaction under :attr:`fees`.

        The base fee is read at most every ``FEE_REFRESH`` seconds (one request saved per
        transaction); a base fee that outgrew the bound makes the node refuse the
        transaction, and ``send`` then reads it again.

        Raises
        ------
        FeeCapExceeded
            The base fee (or, on a chain without one, the gas price) is above the cap.
        """
        now = time.monotonic()
        if now - self._fee_checked > FEE_REFRESH:
            read = self.w3.eth.get_block("latest").get("baseFeePerGas")
            self._base_fee = None if read is None else int(read)
            self._fee_checked = now
        cap = self.fees.max_fee_per_gas
        tip = self.fees.priority_fee_per_gas
        if self._base_fee is None:  # a chain before EIP-1559 (London): a gas price
            price = int(self.w3.eth.gas_price)
            if cap is not None and price > cap:
                raise self._over_cap(description, "gas price", price, cap)
            return {"gasPrice": price}
        base: int = self._base_fee
        if cap is not None and base > cap:
            raise self._over_cap(description, "base fee", base, cap)
        max_fee = 2 * base + tip
        if cap is not None and max_fee > cap:
            max_fee = cap
            tip = min(tip, cap - base)
        return {"maxPriorityFeePerGas": tip, "maxFeePerGas": max_fee}

    def _over_cap(self, description: str, what: str, fee: int, cap: int) -> FeeCapExceeded:
        return FeeCapExceeded(
            f"{description} from {self.address} not sent: the network's {what} is "
            f"{gwei(fee)} gwei per gas, above the cap of {gwei(cap)} gwei (--max-fee-gwei); "
            f"raise the cap or wait for fees to fall"
        )

    def _replay_reason(self, tx: dict[str, Any], block: int) -> str | None:
        call = {k: tx[k] for k in ("from", "to", "data", "value") if k in tx}
        try:
            self.w3.eth.call(cast(TxParams, call), block - 1)
        except Exception as exc:  # any failure here only serves to explain the revert
            return revert_reason(exc)
        return None
