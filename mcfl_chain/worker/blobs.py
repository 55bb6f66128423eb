"""A trainer's blobs: what it stores and fetches through its storage, what it keeps
pinned, and how many bytes each round moved.

Kept apart from the round logic: a trainer asks for bytes by CID and publishes bytes;
this service times the storage, counts the traffic, pins the peers' blobs it works on
for as long as it needs them (so its own node also serves them), and turns a storage
that is gone into :class:`~mcfl_chain.worker.errors.WorkerHalted`.

Peers' blobs a step needs are read ahead together (:meth:`Blobs.prefetch`), a few at
once, so that missing ones cost one fetch timeout, not one each. When its IPFS node has
no peer that answers (:class:`~mcfl_chain.storage.errors.NoPeers`), the trainer says so,
redials the peers the node is configured with in the background (every
:data:`REDIAL_INTERVAL` seconds, and says when one answers again), and meanwhile skips
at once the blobs its node does not hold instead of waiting on each.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from mcfl_chain.storage.base import Storage
from mcfl_chain.storage.errors import NoPeers, StorageError, StorageUnavailable
from mcfl_chain.worker.errors import WorkerHalted
from mcfl_chain.worker.timing import RoundClock

log = logging.getLogger("mcfl_chain.worker")

#: Most blobs read ahead in one batch (the others are read when asked for): bounds the
#: memory a list of CIDs from the chain can make a trainer hold at once.
MAX_READ_AHEAD = 32
#: Seconds between two redials while the node has no peer that answers.
REDIAL_INTERVAL = 10.0


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
        self._read_ahead: dict[str, bytes | StorageError] = {}
        self.cut_off = False
        """Whether its node has no peer that answers (set by a read, cleared by the
        redialling thread once a peer answers again)."""
        self._redialler: threading.Thread | None = None
        self._closed = threading.Event()

    def prefetch(self, cids: Iterable[str]) -> None:
        """Read ``cids`` now, up to the store's ``parallel_reads`` at once, for the
        :meth:`fetch` calls that follow (each read still bounded by the store's fetch
        timeout and checked against its CID). Does nothing for a store read one blob at
        a time (the local directory) or for fewer than two blobs."""
        wanted = [c for c in dict.fromkeys(cids) if self._stale(c)][:MAX_READ_AHEAD]
        threads = min(self.storage.parallel_reads, len(wanted))
        if threads < 2:
            return
        with self.clock.measure("storage"):
            with ThreadPoolExecutor(threads, thread_name_prefix="blob-fetch") as pool:
                results = list(pool.map(self._read, wanted))
            self._read_ahead.update(zip(wanted, results, strict=True))
            self._notice(results)

    def fetch(self, cid: str) -> bytes:
        """The bytes of ``cid`` (a peer's blob is pinned for this round and the next)."""
        with self.clock.measure("storage"):
            got = self._read_ahead.pop(cid, None) if not self._stale(cid) else None
            if got is None:
                got = self._read(cid)
                self._notice([got])
            if isinstance(got, StorageUnavailable):
                # Not the blob's fault (WeightsBook would exclude it): our store is gone.
                raise WorkerHalted(f"storage: {got}") from got
            if isinstance(got, StorageError):
                raise got
            if cid not in self._published:
                self.traffic.fetched(len(got))
                self._keep(cid)
            return got

    def _stale(self, cid: str) -> bool:
        """Whether ``cid`` has to be read (again): not read ahead, or read while the
        node had no peer, which it has again."""
        got = self._read_ahead.get(cid)
        return got is None or (isinstance(got, NoPeers) and not self.cut_off)

    def _read(self, cid: str) -> bytes | StorageError:
        """One verified read; its failure returned, not raised (reads run in threads)."""
        try:
            if self.cut_off and not self.storage.has(cid):
                # Nobody to ask: waiting the whole fetch timeout would change nothing.
                return NoPeers(
                    f"your IPFS node has no peers (none answered at the last redial): "
                    f"blob {cid}, which it does not hold, was not fetched"
                )
            return self.storage.get(cid)
        except StorageError as exc:
            return exc

    def _notice(self, results: list[bytes | StorageError]) -> None:
        """Say so when a read found that the node has no peer, and start redialling."""
        lost = next((r for r in results if isinstance(r, NoPeers)), None)
        if lost is None or self.cut_off:
            return
        log.warning("storage: %s; redialling the peers it is configured with", lost)
        self.cut_off = True
        if self._redialler is None or not self._redialler.is_alive():
            self._redialler = threading.Thread(
                target=self._redial_until_back, name="ipfs-redial", daemon=True
            )
            self._redialler.start()

    def _redial_until_back(self) -> None:
        """In the background, so that the trainer goes on meanwhile: redial now, then
        every :data:`REDIAL_INTERVAL` seconds, until a peer answers or :meth:`close`."""
        first = True
        while True:
            try:
                health = self.storage.redial()
            except StorageError as exc:
                health = None
                if first:
                    log.warning("storage: cannot redial the peers of its node: %s", exc)
            if health is not None and health.answering:
                log.info(
                    "storage: your IPFS node reaches its peers again: %s (redialled)",
                    health.describe(),
                )
                self.cut_off = False
                return
            if first and health is not None:
                log.warning(
                    "storage: your IPFS node has no peers after redialling (%s): blobs it "
                    "does not hold are skipped at once until a peer answers (redialled "
                    "every %g s)",
                    health.describe(),
                    REDIAL_INTERVAL,
                )
            first = False
            if self._closed.wait(REDIAL_INTERVAL):
                return

    def close(self) -> None:
        """Stop redialling (the trainer is done with its storage)."""
        self._closed.set()

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
        self._read_ahead.clear()

    def log_round(self, round_: int, traffic: dict[str, int]) -> None:
        """One log line: what the round stored and fetched, and what the node counts."""
        exchanged = "; your IPFS node has no peers" if self.cut_off else ""
        try:
            stats = self.storage.exchange_stats()
        except StorageError as exc:
            stats = None
            exchanged += f"; bitswap counters unreadable: {exc}"
        if stats is not None:
            # js-ipfs recomputes these counters once the exchange has been quiet for a
            # second: they may trail this round's fetches.
            exchanged += (
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
