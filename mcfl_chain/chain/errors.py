"""Errors raised by the chain package."""

from __future__ import annotations


class ChainError(RuntimeError):
    """A chain call failed; ``reason`` holds the contract's revert reason when there is one."""

    def __init__(self, message: str, reason: str | None = None) -> None:
        super().__init__(message)
        self.reason = reason


class ProtocolLimitError(ChainError):
    """A submission the contracts would refuse, caught before anything is sent.

    Raised for what the contracts refuse without a reason (too many proposals,
    aggregations, parents or update ids for one call, an over-long CID) and for
    what they would refuse at a gas cost (a sample count above the network's cap,
    a malformed CID, a parent twice in the call). ``limit`` names the rule, e.g.
    ``"MAX_PROPOSALS"``; ``reason`` is None (nothing reached the chain).
    """

    def __init__(self, message: str, limit: str) -> None:
        super().__init__(message)
        self.limit = limit


class FeeCapExceeded(ChainError):
    """The network's base fee is above the fee cap the user set; nothing was sent."""


class DeploymentError(RuntimeError):
    """A deployment file is missing, unreadable or inconsistent."""


class ChainUnusable(RuntimeError):
    """The chain cannot be used by this account at all, whatever the call.

    Not a :class:`ChainError`: callers that treat a refused call as one trainer's bad
    luck (and carry on) must not swallow these.
    """


class ChainUnavailable(ChainUnusable):
    """The node did not answer for longer than the caller was willing to wait."""


class AccountUnfunded(ChainUnusable):
    """The account cannot pay the gas of its transactions."""
