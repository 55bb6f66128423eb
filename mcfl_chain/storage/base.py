"""The interface every blob store implements, and the bounded retry they share."""

from __future__ import annotations

import random
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType
from typing import Self, TypeVar

from mcfl_chain.storage.errors import (
    BlobNotFound,
    BlobTooLarge,
    CorruptBlob,
    InvalidCID,
    StorageError,
    StorageTimeout,
    StorageUnavailable,
)

__all__ = [
    "DEFAULT_MAX_BLOB_BYTES",
    "BlobNotFound",
    "BlobTooLarge",
    "CorruptBlob",
    "InvalidCID",
    "RetryPolicy",
    "Storage",
    "StorageError",
    "StorageTimeout",
    "StorageUnavailable",
]

#: Read bound used when a caller gives none: far above a LeNet update (~250 KB), low
#: enough that a hostile CID cannot make a trainer load gigabytes into memory.
DEFAULT_MAX_BLOB_BYTES = 256 * 1024 * 1024

T = TypeVar("T")


@dataclass(frozen=True)
class RetryPolicy:
    """Bounded exponential backoff for transient failures (:class:`StorageUnavailable`).

    Parameters
    ----------
    attempts
        Total number of tries, the first included (1 = no retry).
    initial_delay
        Seconds to wait before the second try.
    multiplier
        Factor applied to the delay after each failed try.
    max_delay
        Upper bound of a single wait, in seconds.
    jitter
        Fraction of each delay added at random, so that many workers failing together
        do not retry in lockstep.
    """

    attempts: int = 4
    initial_delay: float = 0.2
    multiplier: float = 2.0
    max_delay: float = 2.0
    jitter: float = 0.25

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ValueError(f"RetryPolicy.attempts must be >= 1, got {self.attempts}")
        if self.initial_delay < 0 or self.max_delay < 0 or self.multiplier < 1:
            raise ValueError("RetryPolicy delays must be >= 0 and the multiplier >= 1")

    def delays(self) -> list[float]:
        """The waits between tries (``attempts - 1`` of them), jitter included."""
        waits = []
        delay = self.initial_delay
        for _ in range(self.attempts - 1):
            waits.append(min(delay, self.max_delay) * (1 + self.jitter * random.random()))
            delay *= self.multiplier
        return waits

    def run(
        self, operation: Callable[[], T], what: str, sleep: Callable[[float], None] = time.sleep
    ) -> T:
        """Call ``operation`` until it succeeds, retrying only transient failures.

        Parameters
        ----------
        operation
            The call to make; it signals a transient failure by raising
            :class:`StorageUnavailable` (or :class:`StorageTimeout`).
        what
            What is being attempted, for the final error message.
        sleep
            The waiting function (``time.sleep``).

        Returns
        -------
        T
            What ``operation`` returned.

        Raises
        ------
        StorageUnavailable
            The last transient failure, of the same class, once every try has failed;
            its message says how many tries were made.
        StorageError
            Any permanent failure, raised at the first occurrence.
        """
        waits = self.delays()
        for attempt in range(1, self.attempts + 1):
            try:
                return operation()
            except StorageUnavailable as exc:
                if attempt == self.attempts:
                    raise type(exc)(f"{what} failed after {attempt} attempt(s): {exc}") from exc
                sleep(waits[attempt - 1])
        raise AssertionError("unreachable: the loop returns or raises")


class Storage(ABC):
    """A content-addressed blob store.

    Blobs are named by the CID of their content (CIDv1, base32). Every read verifies
    that the bytes match the CID and is bounded in size: data from a store is
    untrusted. Stores are context managers; :meth:`close` releases connections.
    """

    #: Largest blob :meth:`get` returns when the caller passes no ``max_bytes``.
    max_blob_bytes: int = DEFAULT_MAX_BLOB_BYTES

    @property
    @abstractmethod
    def spec(self) -> str:
        """The ``--storage`` string that opens this store again (``local:DIR``,
        ``ipfs:/ip4/127.0.0.1/tcp/PORT``)."""

    @abstractmethod
    def put(self, data: bytes) -> str:
        """Store ``data`` and return its CID.

        Parameters
        ----------
        data
            The blob. Storing a blob that is already present is a cheap no-op.

        Returns
        -------
        str
            The CIDv1 (base32) naming ``data``.
        """

    @abstractmethod
    def get(self, cid: str, max_bytes: int | None = None) -> bytes:
        """Read the blob named ``cid`` and verify it.

        Parameters
        ----------
        cid
            The blob's CID.
        max_bytes
            Largest blob accepted; :attr:`max_blob_bytes` when ``None``.

        Returns
        -------
        bytes
            The verified content.

        Raises
        ------
        InvalidCID
            ``cid`` does not parse, or names content this store cannot verify.
        BlobNotFound
            The store does not have the blob.
        BlobTooLarge
            The blob exceeds the bound.
        CorruptBlob
            The bytes read do not match ``cid``.
        StorageUnavailable
            The backend could not be reached, after the bounded retries
            (:class:`StorageTimeout` when it accepted the request but did not answer).
        """

    @abstractmethod
    def has(self, cid: str) -> bool:
        """True when the store holds the blob named ``cid`` (no content check)."""

    def pin(self, cid: str) -> None:
        """Keep the blob named ``cid`` for good (a trainer pins what it published).

        A store that never drops blobs only checks that it holds it; an IPFS node
        fetches it from its peers if needed and exempts it from garbage collection.

        Raises
        ------
        BlobNotFound
            The blob is not in the store (and, for IPFS, no peer had it in time).
        """
        if not self.has(cid):
            raise BlobNotFound(f"{self.describe()} has no blob {cid} to pin")

    def is_pinned(self, cid: str) -> bool:
        """True when the blob named ``cid`` is kept for good (see :meth:`pin`)."""
        return self.has(cid)

    def close(self) -> None:  # noqa: B027 - stores without resources need nothing here
        """Release connections or handles; the store is unusable afterwards."""

    def describe(self) -> str:
        """One line for people: the backend and where it stores blobs."""
        return self.spec

    def _bound(self, max_bytes: int | None) -> int:
        bound = self.max_blob_bytes if max_bytes is None else max_bytes
        if bound < 0:
            raise ValueError(f"max_bytes must be >= 0, got {bound}")
        return bound

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.spec}>"
