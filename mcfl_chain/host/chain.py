"""The chain as the trainers of one host read it: events decoded once, statuses read
together, for all of them.

Every hosted trainer keeps its own :class:`~mcfl_chain.chain.client.ChainClient`: its
key, its nonce, its votes, its two transactions a round, so nothing on chain tells a
hosted trainer from a separate process. What they share is what they would otherwise
read N times over:

- the protocol's events: :class:`SharedReads` fetches and decodes each block's logs once
  and hands every trainer the records of the range it syncs;
- their statuses: a waiting trainer polls ``Models.statusOf`` many times a second, and on
  a devnet every transaction is a new block. The host reads the head at most every
  ``refresh`` seconds and, when it moved, the round state once (which updates every
  hosted trainer's votes), and every hosted trainer's status in one JSON-RPC batch
  request when the phase moved; a trainer that sent a transaction since reads its own
  status directly and tells the host, so it never acts on a snapshot older than its
  own vote;
- their waits: a trainer with nothing to do sleeps until the host's reads show its status
  changed in what it acts on (round, phase, its vote, its membership, a full quorum),
  or for at most ``WAIT_AT_MOST`` seconds (deadlines are times, not chain changes): 500
  trainers polling ten times a second each kept a host's interpreter busy with wake-ups.

Only for a node that acts on the latest block (no confirmations, a devnet's case): with
confirmations, a client reads views at its own depth and keeps the base behaviour.
"""

from __future__ import annotations

import bisect
import threading
import time
from typing import Any

from web3.types import BlockIdentifier

from mcfl_chain.chain.client import ChainClient, ChainEvent, ProtocolLimits, TrainerStatus
from mcfl_chain.dag.events import SharedRecord, event_record

WAIT_AT_MOST = 1.0
"""Longest sleep of a hosted trainer waiting for news (its deadlines are checked then)."""


def _news(status: TrainerStatus) -> tuple[object, ...]:
    """What a waiting trainer acts on: a change of any of these wakes it."""
    return (
        status.started,
        status.round,
        status.phase,
        status.voted,
        status.member,
        status.votes >= status.quorum,
    )


def _phase_of(status: TrainerStatus) -> tuple[bool, int, int]:
    return status.started, status.round, int(status.phase)


class SharedReads:
    """The event log, head and trainers' statuses of one chain, read once for a host.

    Parameters
    ----------
    reader
        A client of the chain (read-only is enough) that fetches logs and views.
    refresh
        Seconds for which a head read is good for every trainer. None: 1 ms per member,
        at least 0.05 s and at most 0.25 s. Each new head means one batch of every
        member's status, and every transaction mines a block on a devnet: 100 trainers
        re-reading on every 0.05 s head held their host's interpreter 10 % of the time.
    """

    def __init__(self, reader: ChainClient, refresh: float | None = None) -> None:
        self._reader = reader
        self._refresh_given = refresh
        self._lock = threading.Lock()
        self._head = -1
        self._head_read = -float("inf")
        self._records: list[ChainEvent] = []
        self._blocks: list[int] = []
        self._first: int | None = None
        self._last = -1
        self._members: list[str] = []
        self._statuses: dict[str, TrainerStatus] = {}
        self._status_head = -1
        self._status_read = -1.0
        """When (monotonic) the statuses in hand started to be read."""
        self._wakes: dict[str, threading.Event] = {}
        """Per member, set when its status changed in what it acts on."""
        self._versions: dict[str, int] = {}
        """Per member, how many times its status changed in what it acts on."""
        self._poller: threading.Thread | None = None
        self._closed = threading.Event()
        self.fetches = 0
        """Log requests sent so far (how much the host saved, for its report)."""
        self.status_batches = 0
        """Status refreshes so far (a round-state read, or every member's)."""
        self.full_reads = 0
        """Refreshes that read every member's status (the phase had moved)."""
        self._common: TrainerStatus | None = None
        """The round state at the last refresh."""
        self._all_read = False
        """Whether every member's status was read since the last member joined."""

    def limits(self) -> ProtocolLimits:
        """The contracts' bounds (:meth:`ChainClient.limits`), read once for the host."""
        with self._lock:
            return self._reader.limits()

    def cohort(self) -> tuple[int, bytes]:
        """The cohort share and seed (fixed at deployment), read once for the host."""
        with self._lock:
            return self._reader.cohort_bps(), self._reader.cohort_seed()

    @property
    def contracts(self) -> tuple[Any, Any, Any]:
        """The reader's Trainers, Models and Updates contract objects."""
        return self._reader.trainers, self._reader.models, self._reader.updates

    def head(self) -> int:
        """The latest block number, at most ``refresh`` seconds old."""
        with self._lock:
            return self._head_now()

    @property
    def _refresh(self) -> float:
        if self._refresh_given is not None:
            return self._refresh_given
        return min(0.25, max(0.05, 0.001 * len(self._members)))

    def _head_now(self) -> int:
        now = time.monotonic()
        if now - self._head_read >= self._refresh:
            self._head = self._reader.latest_block()
            self._head_read = now
        return self._head

    def add_member(self, address: str) -> None:
        """Read ``address``'s status with the others from now on."""
        with self._lock:
            self._members.append(address)
            self._wakes[address] = threading.Event()
            self._versions[address] = 0
            self._status_head = -1  # the next look reads everyone's, this one's too
            self._all_read = False

    def status(self, address: str) -> tuple[float, TrainerStatus, int]:
        """The status of member ``address``, when (monotonic) its read started and its
        version (see :meth:`wait`); every member's status is read again, in one batch
        request, once the head moved."""
        with self._lock:
            self._refresh_statuses()
            return self._status_read, self._statuses[address], self._versions[address]

    def _refresh_statuses(self) -> None:
        """The members' statuses again once the head moved (under the lock); wakes the
        members whose news changed.

        What is a member's own in a status (``voted``, ``member``) changes only when
        the phase does, or by the member's own transaction, after which it reads its
        status itself and tells (:meth:`note`). So while the phase stays, one read of
        the round state (``statusOf`` of nobody) updates everyone's votes; every
        member's status is read, in one batch request, only when the phase moved."""
        head = self._head_now()
        if head == self._status_head:
            return
        started = time.monotonic()
        before = self._statuses
        last = self._common
        # The round state (only its round fields are used), when it may do.
        common = self._reader.status() if last is not None and self._all_read else None
        if common is not None and last is not None and _phase_of(common) == _phase_of(last):
            self._statuses = {
                member: status._replace(
                    deadline=common.deadline,
                    votes=common.votes,
                    quorum=common.quorum,
                    voters=common.voters,
                )
                for member, status in before.items()
            }
        else:
            values = self._reader.statuses(self._members)
            self._statuses = dict(zip(self._members, values, strict=True))
            # A phase that moved amid the batch: every member's status again next time.
            self._all_read = len({_phase_of(v) for v in values}) <= 1
            common = values[0] if values else None
            self.full_reads += 1
        self._common = common
        self._status_head, self._status_read = head, started
        self.status_batches += 1
        for member, status in self._statuses.items():
            old = before.get(member)
            if old is None or _news(old) != _news(status):
                self._versions[member] += 1
                self._wakes[member].set()

    def note(self, address: str, status: TrainerStatus) -> None:
        """Member ``address`` read ``status`` itself, after its own transaction: keep
        its own part (``voted``, ``member``) while the phase is the one in hand."""
        with self._lock:
            held = self._statuses.get(address)
            if held is not None and _phase_of(held) == _phase_of(status):
                self._statuses[address] = held._replace(voted=status.voted, member=status.member)

    def wait(self, address: str, version: int, seconds: float) -> None:
        """Return once member ``address``'s status changed in what it acts on
        (:func:`_news`) since its version ``version`` (as :meth:`status` gave it), or
        after ``seconds``."""
        wake = self._wakes[address]
        with self._lock:
            if self._poller is None:
                self._poller = threading.Thread(
                    target=self._poll, name="host-chain-reads", daemon=True
                )
                self._poller.start()
        deadline = time.monotonic() + seconds
        while self._versions[address] == version and not self._closed.is_set():
            wake.clear()  # then look again: a change in between still counts
            if self._versions[address] != version:
                return
            left = deadline - time.monotonic()
            if left <= 0 or not wake.wait(left):
                return

    def _poll(self) -> None:
        """Reads the head every ``refresh`` seconds, and the statuses when it moved, for
        the waiting members (until :meth:`close`)."""
        while not self._closed.wait(self._refresh):
            try:
                with self._lock:
                    self._refresh_statuses()
            except Exception:  # a trainer's own read will say what failed
                for wake in self._wakes.values():
                    wake.set()
                self._closed.wait(WAIT_AT_MOST)

    def close(self) -> None:
        """Stop the reads for waiting members; wake them all."""
        self._closed.set()
        for wake in self._wakes.values():
            wake.set()

    def events(self, from_block: int, to_block: int) -> list[ChainEvent]:
        """The decoded events of ``[from_block, to_block]``, fetched once per block."""
        with self._lock:
            if self._first is None:
                self._first, self._last = from_block, from_block - 1
            if from_block < self._first:
                earlier = self._fetch(from_block, self._first - 1)
                self._records[:0] = earlier
                self._blocks[:0] = [e.block_number for e in earlier]
                self._first = from_block
            if to_block > self._last:
                later = self._fetch(self._last + 1, to_block)
                self._records += later
                self._blocks += [e.block_number for e in later]
                self._last = to_block
            lo = bisect.bisect_left(self._blocks, from_block)
            hi = bisect.bisect_right(self._blocks, to_block)
            return self._records[lo:hi]

    def _fetch(self, start: int, stop: int) -> list[ChainEvent]:
        self.fetches += 1
        return self._reader.events(start, stop)


class SharedRecords:
    """Each event's record (:func:`~mcfl_chain.dag.events.event_record`), made once for
    the trainers of a host.

    Every hosted trainer turns the same events into the same records, and its DAG keeps
    its votes and phases as records: 100 trainers a host each kept their own copy of
    every vote (42 MB at 200 trainers after 4 rounds, and growing with every round).
    They now share one record an event, which nobody mutates. Worker.event_records takes
    it.
    """

    def __init__(self) -> None:
        self._made: dict[tuple[int, int], dict[str, Any]] = {}

    def __call__(self, events: list[ChainEvent]) -> list[dict[str, Any]]:
        made = self._made
        out = []
        for event in events:
            key = (event.block_number, event.log_index)
            record = made.get(key)
            if record is None:
                # Two threads may both make one: the same record, the second kept.
                record = made[key] = SharedRecord(event_record(event))
            out.append(record)
        return out


class HostedChainClient(ChainClient):
    """A trainer's own client whose reads go through its host's :class:`SharedReads`.

    Build it with :meth:`adopt` from the client the worker was set up with.
    """

    shared: SharedReads
    _own: tuple[float, TrainerStatus] | None
    _version: int
    _sent: int
    _seen: int
    _head_seen: int

    @classmethod
    def adopt(cls, client: ChainClient, shared: SharedReads) -> HostedChainClient:
        """``client`` itself, now reading through ``shared`` (same account, nonce and
        connection: the instance is kept, only its class changes)."""
        if client.confirmations:
            raise ValueError(
                "a host shares its reads only on a chain acted on at the latest block "
                "(confirmations 0); run trainers that wait for confirmations as processes"
            )
        client.__class__ = cls
        assert isinstance(client, HostedChainClient)
        # One set of contract objects for the host: web3 builds a class for every entry
        # of a contract's ABI, some 0.9 MB a client, 90 MB for a host of 100 trainers.
        # Transactions still go through the client's own connection; the few views it
        # calls through a contract object go through the host's reader, as its status
        # and event reads do.
        client.trainers, client.models, client.updates = shared.contracts
        client.shared = shared
        client._own = None
        client._version = 0
        client._sent = client._seen = client._head_seen = 0
        shared.add_member(client.address)
        return client

    def _send(
        self,
        description: str,
        call: Any,
        gas: int | None = None,
        value: int = 0,
        *,
        dry_run: bool = False,
    ) -> Any:
        try:
            return super()._send(description, call, gas, value, dry_run=dry_run)
        finally:
            self._sent += 1  # its own transaction changes its status: read it itself

    def status(self, trainer: str | None = None) -> TrainerStatus:
        if trainer is not None:
            return super().status(trainer)
        if self._sent != self._seen:
            # Its own transaction since the last look: the snapshot may predate it.
            self._seen = self._sent
            started = time.monotonic()
            self._own = (started, super().status())
            self.shared.note(self.address, self._own[1])
            return self._own[1]
        read, status, self._version = self.shared.status(self.address)
        if self._own is not None and self._own[0] > read:
            return self._own[1]  # its own read is newer than the host's snapshot
        return status

    # Fixed at deployment: read once for the host (seven views a trainer otherwise).
    def limits(self) -> ProtocolLimits:
        return self.shared.limits()

    def max_samples(self) -> int:
        return self.shared.limits().max_samples

    def cohort_bps(self) -> int:
        return self.shared.cohort()[0]

    def cohort_seed(self) -> bytes:
        return self.shared.cohort()[1]

    def block_number(self) -> int:
        if self._sent != self._head_seen:
            # Its own transaction since the last look: the host's head may predate it.
            self._head_seen = self._sent
            return super().block_number()
        return self.shared.head()  # confirmations are 0 (adopt)

    def wait_for_news(self, status: TrainerStatus, seconds: float, stop: threading.Event) -> None:
        if stop.is_set():
            return
        # Its host's reads wake it when its status changes; at the latest after
        # WAIT_AT_MOST seconds (its deadlines), or sooner when it stops (Host.stop
        # closes the shared reads).
        self.shared.wait(self.address, self._version, max(seconds, WAIT_AT_MOST))

    def events(self, from_block: int, to_block: BlockIdentifier = "latest") -> list[ChainEvent]:
        if isinstance(to_block, int) and not isinstance(to_block, bool):
            return self.shared.events(int(from_block), to_block)
        return super().events(from_block, to_block)
