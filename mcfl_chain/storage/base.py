"""The interface every blob store implements, and the bounded retry they share."""

from __future__ import annotations

import itertools
import logging
import random
import sys
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from types import TracebackType
from typing import Self, TypeVar

from mcfl_chain.storage.errors import (
    BlobNotFound,
    BlobTooLarge,
    CorruptBlob,
    InvalidCID,
    NoPeers,
    StorageError,
    StorageTimeout,
    StorageUnavailable,
)

__all__ = [
    "DEFAULT_MAX_BLOB_BYTES",
    "BlobNotFound",
    "BlobTooLarge",
    "CorruptBlob",
    "ExchangeStats",
    "InvalidCID",
    "NoPeers",
    "PeerHealth",
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
log = logging.getLogger("mcfl_chain.storage")


@dataclass(frozen=True)
class ExchangeStats:
    """Blocks an IPFS node received from other nodes since it started (bitswap)."""

    blocks_received: int
    bytes_received: int
    peers: int


@dataclass(frozen=True)
class PeerHealth:
    """The other nodes an IPFS node is linked to, as it says and as they answer.

    A connection can outlive its link: cut the cable (or drop the packets) and the node
    keeps listing the peer until TCP gives up, hours later. Only a peer that answers a
    ping now can serve a blob.
    """

    connected: tuple[str, ...]
    """Peer ids the node lists as connected (``swarm/peers``), sorted."""
    answering: tuple[str, ...]
    """Those of them that answered a ping within the check's timeout, sorted."""

    @property
    def silent(self) -> tuple[str, ...]:
        """Connected peers that did not answer: a link cut, or a peer frozen."""
        return tuple(p for p in self.connected if p not in self.answering)

    def describe(self) -> str:
        """One phrase for people: how many peers answer, and how many only seem to."""
        if not self.connected:
            return "no connected peer"
        text = f"{len(self.answering)} of {len(self.connected)} connected peer(s) answer"
        if self.silent:
            text += f" ({len(self.silent)} silent: their link is cut or they are frozen)"
        return text


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
    give_up_after
        When set, also stop once the next try would start more than this many seconds
        after the first one (see :meth:`for_duration`).
    """

    attempts: int = 4
    initial_delay: float = 0.2
    multiplier: float = 2.0
    max_delay: float = 2.0
    jitter: float = 0.25
    give_up_after: float | None = None

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ValueError(f"RetryPolicy.attempts must be >= 1, got {self.attempts}")
        if self.initial_delay < 0 or self.max_delay < 0 or self.multiplier < 1:
            raise ValueError("RetryPolicy delays must be >= 0 and the multiplier >= 1")
        if self.give_up_after is not None and self.give_up_after < 0:
            raise ValueError(f"RetryPolicy.give_up_after must be >= 0, got {self.give_up_after}")

    @classmethod
    def for_duration(
        cls, seconds: float, initial_delay: float = 0.5, max_delay: float = 10.0
    ) -> RetryPolicy:
        """Retry for ``seconds`` whatever the number of tries (a service gone a while)."""
        return cls(
            attempts=sys.maxsize,
            initial_delay=initial_delay,
            max_delay=max_delay,
            give_up_after=seconds,
        )

    def _waits(self) -> Iterator[float]:
        delay = self.initial_delay
        while True:
            yield min(delay, self.max_delay) * (1 + self.jitter * random.random())
            delay = min(delay * self.multiplier, self.max_delay)

    def delays(self) -> list[float]:
        """The waits between tries (``attempts - 1`` of them), jitter included."""
        return list(itertools.islice(self._waits(), self.attempts - 1))

    def run(
        self,
        operation: Callable[[], T],
        what: str,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> T:
        """Call ``operation`` until it succeeds, retrying only transient failures.

        Each retry is logged (``mcfl_chain.storage``, warning) with its reason and wait.

        Parameters
        ----------
        operation
            The call to make; it signals a transient failure by raising
            :class:`StorageUnavailable` (or :class:`StorageTimeout`).
        what
            What is being attempted, for the log and the final error message.
        sleep, clock
            The waiting and time functions (``time.sleep``, ``time.monotonic``).

        Returns
        -------
        T
            What ``operation`` returned.

        Raises
        ------
        StorageUnavailable
            The last transient failure, of the same class, once the tries or the time
            are spent; its message says how many tries were made over how long.
        StorageError
            Any permanent failure, raised at the first occurrence.
        """
        start = clock()
        waits = self._waits()
        attempt = 1
        while True:
            try:
                return operation()
            except StorageUnavailable as exc:
                wait = next(waits)
                elapsed = clock() - start
                out_of_time = self.give_up_after is not None and (
                    elapsed + wait > self.give_up_after
                )
                if attempt >= self.attempts or out_of_time:
                    raise type(exc)(
                        f"{what} failed after {attempt} attempt(s) over {elapsed:.0f} s: {exc}"
                    ) from exc
                log.warning(
                    "%s: %s; retry %d in %.1f s%s",
                    what,
                    exc,
                    attempt,
                    wait,
                    ""
                    if self.give_up_after is None
                    else f", giving up after {self.give_up_after:g} s",
                )
                sleep(wait)
                attempt += 1


class Storage(ABC):
    """A content-addressed blob store.

    Blobs are named by the CID of their content (CIDv1, base32). Every read verifies
    that the bytes match the CID and is bounded in size: data from a store is
    untrusted. Stores are context managers; :meth:`close` releases connections.
    """

    #: Largest blob :meth:`get` returns when the caller passes no ``max_bytes``.
    max_blob_bytes: int = DEFAULT_MAX_BLOB_BYTES
    #: How many :meth:`get` calls a caller may run at once from as many threads: 1 for
    #: a store where reads are local and quick, more where each may wait on the network.
    parallel_reads: int = 1

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
            The store does not have the blob (:class:`NoPeers`, a subclass: an IPFS
            node that does not have it could ask no other node).
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

    def unpin(self, cid: str) -> None:  # noqa: B027 - a store that never drops blobs has no pins
        """Let the store drop the blob named ``cid`` again (an IPFS node's garbage
        collection may then remove it). A blob that was not pinned is no error."""

    def exchange_stats(self) -> ExchangeStats | None:
        """What the store received from other nodes so far, or ``None`` for a store
        that exchanges nothing (the local directory store)."""
        return None

    def peer_health(self) -> PeerHealth | None:
        """The other nodes the store can fetch from now, or ``None`` for a store that
        exchanges nothing (the local directory store)."""
        return None

    def redial(self) -> PeerHealth | None:
        """Connect again to the peers the store's node is configured with (its
        bootstrap list) that do not answer, and say who answers then; ``None`` for a
        store that exchanges nothing."""
        return None

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
