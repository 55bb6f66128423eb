"""A trainer's blobs: what it stores and fetches through its storage, what it keeps
pinned, and how many bytes each round moved.

Kept apart from the round logic: a trainer asks for bytes by CID and publishes bytes;
this service times the storage, counts the traffic, pins the peers' blobs it works on
for as long as it needs them (so its own node also serves them), and turns a storage
that is gone into :class:`~mcfl_chain.worker.errors.WorkerHalted`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from mcfl_chain.storage.base import Storage
from mcfl_chain.storage.errors import StorageError, StorageUnavailable
from mcfl_chain.worker.errors import WorkerHalted
from mcfl_chain.worker.timing import RoundClock

log = logging.getLogger("mcfl_chain.worker")


@dataclass
class Traffic:
    """Blobs this trainer stored and peers' blobs it fetched, per round (what a
    trainer-round costs in communication)."""

    stored_blobs: int = 0
    stored_bytes: int = 0
    fetched_blobs: int = 0
    fetched_bytes: int = 0

    def stored(self, size: int) -> None:
        self.stored_blobs += 1
        self.stored_bytes += size

    def fetched(self, size: int) -> None:
        self.fetched_blobs += 1
        self.fetched_bytes += size

    def split(self) -> dict[str, int]:
        """The counts so far, and zero them."""
        out = dict(vars(self))
        self.stored_blobs = self.stored_bytes = self.fetched_blobs = self.fetched_bytes = 0
        return out


class Blobs:
    """One trainer's traffic with its storage.

    Parameters
    ----------
    storage
        Where blobs live (the local store or an IPFS node).
    clock
        The round clock; storage time is measured as ``storage``.
    """

    def __init__(self, storage: Storage, clock: RoundClock) -> None:
        self.storage = storage
        self.clock = clock
        self.traffic = Traffic()
        self._published: set[str] = set()
        self._needed_now: set[str] = set()
        self._needed_before: set[str] = set()

    def fetch(self, cid: str) -> bytes:
        """The bytes of ``cid`` (a peer's blob is pinned for this round and the next)."""
        with self.clock.measure("storage"):
            try:
                blob = self.storage.get(cid)
            except StorageUnavailable as exc:
                # Not the blob's fault (WeightsBook would exclude it): our store is gone.
                raise WorkerHalted(f"storage: {exc}") from exc
            if cid not in self._published:
                self.traffic.fetched(len(blob))
                self._keep(cid)
            return blob

    def put(self, blob: bytes) -> str:
        """Store ``blob`` (pinned: a trainer keeps what it published); its CID."""
        with self.clock.measure("storage"):
            try:
                cid = self.storage.put(blob)
            except StorageError as exc:
                raise WorkerHalted(f"storage: {exc}") from exc
            self._published.add(cid)
            self.traffic.stored(len(blob))
            return cid

    def _keep(self, cid: str) -> None:
        """Pin a peer's blob this trainer needs, so its own node keeps (and serves) it
        while it trains or aggregates on it; :meth:`release` lets it go later."""
        if cid in self._needed_now:
            return
        self._needed_now.add(cid)
        if cid in self._needed_before:
            return  # pinned already, in the round before
        try:
            self.storage.pin(cid)
        except StorageError as exc:
            # The bytes are in hand and verified: a failed pin costs a refetch at worst.
            log.warning("storage: cannot pin %s: %s", cid, exc)

    def release(self) -> None:
        """At a round's end: unpin the peers' blobs neither this round nor the one
        before used."""
        for cid in self._needed_before - self._needed_now - self._published:
            try:
                self.storage.unpin(cid)
            except StorageError as exc:
                log.warning("storage: cannot unpin %s: %s", cid, exc)
        self._needed_before, self._needed_now = self._needed_now, set()

    def log_round(self, round_: int, traffic: dict[str, int]) -> None:
        """One log line: what the round stored and fetched, and what the node counts."""
        exchanged = ""
        try:
            stats = self.storage.exchange_stats()
        except StorageError as exc:
            stats = None
            exchanged = f"; bitswap counters unreadable: {exc}"
        if stats is not None:
            # js-ipfs recomputes these counters once the exchange has been quiet for a
            # second: they may trail this round's fetches.
            exchanged = (
                f"; the node counts {stats.blocks_received} block(s) "
                f"({size_text(stats.bytes_received)}) received over bitswap from "
                f"{stats.peers} peer(s) so far"
            )
        log.info(
            "round %d: storage: stored %d blob(s) (%s), fetched %d peer blob(s) (%s) through %s%s",
            round_,
            traffic["stored_blobs"],
            size_text(traffic["stored_bytes"]),
            traffic["fetched_blobs"],
            size_text(traffic["fetched_bytes"]),
            self.storage.spec,
            exchanged,
        )


def size_text(n: int) -> str:
    return f"{n / 1e6:.2f} MB" if n >= 100_000 else f"{n / 1e3:.1f} kB"
