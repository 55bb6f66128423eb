"""Why a worker stops."""

from __future__ import annotations


class WorkerHalted(RuntimeError):
    """The worker cannot go on: a service stayed unreachable past its retries, the
    account cannot pay for gas, or the state cannot be written. One line, naming it."""
