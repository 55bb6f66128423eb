"""Errors raised by the chain package."""

from __future__ import annotations


class ChainError(RuntimeError):
    """A chain call failed; ``reason`` holds the contract's revert reason when there is one."""

    def __init__(self, message: str, reason: str | None = None) -> None:
        super().__init__(message)
        self.reason = reason


class DeploymentError(RuntimeError):
    """A deployment file is missing, unreadable or inconsistent."""
