"""Blob store backed by an IPFS node, through its HTTP RPC API (``/api/v0``).

Blobs are added as ``ipfs add --cid-version 1 --raw-leaves --chunker size-262144``
would (see :mod:`mcfl_chain.storage.unixfs`) and pinned. Reads (``cat``) are bounded
and verified locally: a raw CID by hashing the bytes, a dag-pb root by rebuilding the
DAG from the bytes and comparing root CIDs, so a lying or broken node cannot hand us
other content.

Failures are told apart: a node that cannot be reached (:class:`StorageUnavailable`:
"your IPFS node is down") or does not answer (:class:`StorageTimeout`) is retried with
bounded backoff; a node that could not find the blob within its fetch timeout gives
:class:`NoPeers` when none of its peers answers a ping ("your IPFS node has no peers":
its link is cut, nobody was asked) and :class:`BlobNotFound` otherwise ("not found on
the network"); any other error answer is permanent (:class:`StorageError`).

One store may be used from several threads at once (:attr:`IpfsStorage.parallel_reads`
of them read in parallel): each request borrows an HTTP session of its own.
"""

from __future__ import annotations

import re
import threading
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any, TypeVar
from urllib.parse import urlsplit

import ipfshttpclient
from ipfshttpclient import exceptions as ipfs_errors

from mcfl_chain._utils.errors import short_reason
from mcfl_chain.storage.base import (
    DEFAULT_MAX_BLOB_BYTES,
    ExchangeStats,
    PeerHealth,
    RetryPolicy,
    Storage,
)
from mcfl_chain.storage.cid import SHA2_256, format_cid, parse_cid, verify_raw
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
from mcfl_chain.storage.unixfs import IMPORT_OPTIONS, unixfs_cid_for_bytes

T = TypeVar("T")
R = TypeVar("R")

# ipfshttpclient 0.8.0a2 passes urllib3 an argument it has deprecated: harmless noise.
warnings.filterwarnings(
    "ignore", message="The 'strict' parameter is no longer needed", category=FutureWarning
)

_MULTIADDR = re.compile(r"^/(ip4|ip6|dns|dns4|dns6)/([^/]+)/tcp/(\d+)(?:/(http|https))?/?$")
# How js-ipfs and Kubo word "gave up waiting for the content".
_NOT_FOUND = re.compile(
    r"request timed out|context deadline exceeded|not found|"
    r"block was not found",
    re.IGNORECASE,
)
# A peer's address as a node's bootstrap list holds it: .../p2p/<peer id>.
_PEER_ADDRESS = re.compile(r"^/(?:ip4|ip6|dns4|dns6|dns)/[^/]+/tcp/\d{1,5}/(?:p2p|ipfs)/(\w+)$")
_PEER_ID = re.compile(r"^\w{1,128}$")


def parse_api_address(address: str) -> str:
    """Turn a node address into the multiaddr ``ipfshttpclient`` expects.

    Parameters
    ----------
    address
        ``/ip4/127.0.0.1/tcp/5001`` (optionally ending in ``/http``) or a URL such as
        ``http://127.0.0.1:5001``.

    Returns
    -------
    str
        A multiaddr ending in ``/http`` or ``/https``.

    Raises
    ------
    StorageError
        If ``address`` is neither form.
    """
    text = address.strip()
    match = _MULTIADDR.match(text)
    if match:
        proto, host, port, scheme = match.groups()
        return f"/{proto}/{host}/tcp/{port}/{scheme or 'http'}"
    url = urlsplit(text)
    if url.scheme in ("http", "https") and url.hostname and url.port:
        host = url.hostname
        proto = "ip4" if re.fullmatch(r"[\d.]+", host) else "ip6" if ":" in host else "dns"
        return f"/{proto}/{host}/tcp/{url.port}/{url.scheme}"
    raise StorageError(
        f"cannot read the IPFS API address {address!r}: expected "
        f"/ip4/127.0.0.1/tcp/PORT or http://127.0.0.1:PORT"
    )


class IpfsStorage(Storage):
    """Blob store on an IPFS node reached through its HTTP RPC API.

    Parameters
    ----------
    address
        The node's API address (see :func:`parse_api_address`).
    timeout
        Seconds to wait for the node to answer one HTTP request before the try counts
        as a (transient) timeout.
    fetch_timeout
        Seconds the node may spend finding a blob before answering that it cannot;
        keep it below ``timeout`` so a missing blob is told apart from a hung node. Once
        found, a blob's transfer has no total bound (a large one on a slow link arrives
        whole); ``timeout`` bounds each wait for its next bytes.
    has_timeout
        Node-side wait of :meth:`has`, short because an IPFS node cannot say "absent"
        at once: it looks for the blob until this expires.
    retry
        Backoff for transient failures.
    max_blob_bytes
        Default read bound.
    ping_timeout
        Seconds a peer has to answer a ping before it counts as silent
        (:meth:`peer_health`).
    dial_timeout
        Seconds one dial of :meth:`redial` may take.
    """

    #: Reads a caller may run at once: each may wait up to ``fetch_timeout`` on the
    #: network, so a handful of missing blobs cost one wait, not one each.
    parallel_reads = 4

    def __init__(
        self,
        address: str,
        timeout: float = 60.0,
        fetch_timeout: float = 30.0,
        has_timeout: float = 2.0,
        retry: RetryPolicy | None = None,
        max_blob_bytes: int = DEFAULT_MAX_BLOB_BYTES,
        ping_timeout: float = 3.0,
        dial_timeout: float = 5.0,
    ) -> None:
        if not 0 < fetch_timeout < timeout or not 0 < has_timeout < timeout:
            raise ValueError(
                f"fetch_timeout ({fetch_timeout}) and has_timeout "
                f"({has_timeout}) must be positive and below timeout ({timeout})"
            )
        if not (ping_timeout > 0 and dial_timeout > 0):
            raise ValueError(
                f"ping_timeout ({ping_timeout}) and dial_timeout ({dial_timeout}) must be positive"
            )
        self.address = parse_api_address(address)
        self.timeout = timeout
        self.fetch_timeout = fetch_timeout
        self.has_timeout = has_timeout
        self.ping_timeout = ping_timeout
        self.dial_timeout = dial_timeout
        self.retry = retry or RetryPolicy()
        self.max_blob_bytes = max_blob_bytes
        self._lock = threading.Lock()
        self._idle: list[ipfshttpclient.Client] = [self._new_client()]
        self._open: list[ipfshttpclient.Client] = list(self._idle)
        self._diagnosis = threading.Lock()
        self._health: tuple[float, PeerHealth] | None = None

    def _new_client(self) -> ipfshttpclient.Client:
        # Client() directly: connect() refuses js-ipfs and Kubo versions newer than 0.8.
        return ipfshttpclient.Client(self.address, session=True, timeout=self.timeout)

    @contextmanager
    def _borrowed(self) -> Iterator[ipfshttpclient.Client]:
        """An HTTP session no other thread uses meanwhile (requests' are not shared)."""
        with self._lock:
            client = self._idle.pop() if self._idle else None
        if client is None:
            client = self._new_client()
            with self._lock:
                self._open.append(client)
        try:
            yield client
        finally:
            with self._lock:
                self._idle.append(client)

    @property
    def spec(self) -> str:
        return "ipfs:" + self.address.removesuffix("/http")

    def describe(self) -> str:
        return f"IPFS node at {self.address} (HTTP RPC API)"

    def close(self) -> None:
        with self._lock:
            clients, self._open, self._idle = self._open, [], []
        for client in clients:
            client.close()

    def _call(
        self,
        what: str,
        request: Callable[[ipfshttpclient.Client], T],
        on_error: Callable[[ipfs_errors.ErrorResponse], StorageError] | None = None,
    ) -> T:
        """One RPC with retries; the node's errors mapped to storage errors."""

        def attempt() -> T:
            try:
                with self._borrowed() as client:
                    return request(client)
            except ipfs_errors.TimeoutError as exc:
                raise StorageTimeout(
                    f"the IPFS node at {self.address} did not answer within "
                    f"{self.timeout:g} s ({short_reason(exc)})"
                ) from exc
            except ipfs_errors.ConnectionError as exc:
                raise StorageUnavailable(
                    f"cannot connect to the IPFS node at {self.address} ({short_reason(exc)}): "
                    f"your IPFS node is down, or listens elsewhere; start it "
                    f"(`mcfl-chain ipfs up`) or fix --storage"
                ) from exc
            except ipfs_errors.ErrorResponse as exc:
                if on_error is not None:
                    raise on_error(exc) from exc
                raise StorageError(
                    f"the IPFS node at {self.address} refused {what}: {exc}"
                ) from exc
            except (ipfs_errors.StatusError, ipfs_errors.ProtocolError) as exc:
                # An HTTP error without an IPFS error body (proxy, restart): worth a retry.
                raise StorageUnavailable(
                    f"the IPFS node at {self.address} failed {what} ({short_reason(exc)})"
                ) from exc

        return self.retry.run(attempt, what)

    def put(self, data: bytes) -> str:
        data = bytes(data)
        expected = unixfs_cid_for_bytes(data)
        opts: dict[str, Any] = {**IMPORT_OPTIONS, "cid-base": "base32", "pin": True}
        answered = self._call(
            f"adding a {len(data)}-byte blob", lambda c: c.add_bytes(data, opts=opts)
        )
        if format_cid(parse_cid(str(answered))) != expected:
            raise StorageError(
                f"the IPFS node at {self.address} named a {len(data)}-byte blob "
                f"{answered}, but it should be {expected} with the import options "
                f"{IMPORT_OPTIONS}: the node ignored them; use another node"
            )
        return expected

    def get(self, cid: str, max_bytes: int | None = None) -> bytes:
        bound = self._bound(max_bytes)
        parsed = parse_cid(cid)
        if parsed.hashfun.name != SHA2_256:
            raise InvalidCID(
                f"{cid} uses hash {parsed.hashfun.name}; only {SHA2_256} CIDs can be verified"
            )
        if parsed.codec.name not in ("raw", "dag-pb"):
            raise InvalidCID(f"{cid} has codec {parsed.codec.name}: it names no file blob")
        text = format_cid(parsed)

        def not_found(exc: ipfs_errors.ErrorResponse) -> StorageError:
            if _NOT_FOUND.search(str(exc)):
                return self._missing(text)
            return StorageError(f"the IPFS node at {self.address} refused to read {text}: {exc}")

        too_large = BlobTooLarge(
            f"blob {text} has more than {bound} bytes, the read bound; raise "
            f"max_bytes if it is expected"
        )

        def read(client: ipfshttpclient.Client) -> bytes:
            # The node's `timeout` bounds a whole request, and a stream it cuts short still
            # ends like a whole one: so it bounds only the search for the root (stat), which
            # also says how many bytes the file has. The transfer is bounded per HTTP read
            # (`timeout`), and a short one is retried, not taken for a corrupt blob.
            stat = client.files.stat(f"/ipfs/{text}", opts={"timeout": f"{self.fetch_timeout:g}s"})
            size = stat.get("Size")
            if not isinstance(size, int) or size < 0:
                raise StorageError(
                    f"the IPFS node at {self.address} gave {text} a size of {size!r}: "
                    f"not a byte count; use another node"
                )
            if size > bound:
                raise too_large
            data = bytes(client.cat(text, opts={"length": bound + 1}))
            if len(data) < size:
                raise StorageUnavailable(
                    f"the IPFS node at {self.address} cut its stream of {text} after "
                    f"{len(data)} of its {size} bytes"
                )
            return data

        data = self._call(f"reading {text}", read, not_found)
        if len(data) > bound:
            raise too_large
        if parsed.codec.name == "raw":
            genuine = verify_raw(parsed, data)
        else:
            genuine = unixfs_cid_for_bytes(data) == text
        if not genuine:
            raise CorruptBlob(
                f"the IPFS node at {self.address} returned {len(data)} bytes for "
                f"{text} that do not match it (blobs are verified against their "
                f"CID with the import options {IMPORT_OPTIONS}); the node or a "
                f"peer served wrong content"
            )
        return data

    def _missing(self, text: str) -> BlobNotFound:
        """Why the node found no copy of ``text`` in time: nobody to ask (:class:`NoPeers`),
        or nobody had it (:class:`BlobNotFound`)."""
        waited = f"within {self.fetch_timeout:g} s"
        try:
            health = self._recent_health()
        except StorageUnavailable:
            raise  # the node itself went away meanwhile
        except StorageError:
            # An offline node lists no peers (it refuses to): it only has its own blobs.
            return BlobNotFound(
                f"the IPFS node at {self.address} could not find blob {text} {waited}: "
                f"it does not hold it and has no peers to ask (offline node)"
            )
        if not health.answering:
            return NoPeers(
                f"your IPFS node has no peers: the node at {self.address} has "
                f"{health.describe()}, so it could not ask anyone for blob {text} "
                f"{waited}; check its network link to the other organisations' nodes and "
                f"its --peer addresses (`mcfl-chain ipfs status`)"
            )
        return BlobNotFound(
            f"the IPFS node at {self.address} could not find blob {text} {waited}: this CID "
            f"is not found on the network ({health.describe()}, none had it: it was never "
            f"stored, or only a node out of reach holds it)"
        )

    def _recent_health(self) -> PeerHealth:
        """:meth:`peer_health`, checked once for reads that fail together."""
        with self._diagnosis:
            now = time.monotonic()
            if self._health is not None and now - self._health[0] < 2 * self.ping_timeout:
                return self._health[1]
            health = self.peer_health()
            self._health = (time.monotonic(), health)
            return health

    def peer_health(self) -> PeerHealth:
        """The node's connected peers (``swarm/peers``) and those of them that answer a
        ping within :attr:`ping_timeout` (pinged in parallel).

        Raises
        ------
        StorageError
            The node cannot be reached, or it is offline (no swarm listener: a node of
            one, which has no peers to lose).
        """
        answer = self._call("listing its connected peers", lambda c: _rpc(c, "/swarm/peers"))
        peers = _object(answer).get("Peers")
        connected = sorted(
            {
                str(p["Peer"])
                for p in peers or []
                if isinstance(p, dict) and _PEER_ID.match(str(p.get("Peer", "")))
            }
        )
        if not connected:
            listening = self._call(
                "listing its swarm addresses", lambda c: _rpc(c, "/swarm/addrs/local")
            )
            if not _object(listening).get("Strings"):
                raise StorageError(
                    f"the IPFS node at {self.address} is offline (no swarm listener): it "
                    f"has no peers to ask"
                )
        answers = _in_parallel(self._answers, connected, self.parallel_reads)
        answering = tuple(p for p, ok in zip(connected, answers, strict=True) if ok)
        return PeerHealth(tuple(connected), answering)

    def _answers(self, peer: str) -> bool:
        """Whether ``peer`` answers one ping in time (a pong: success with no text)."""
        opts = {"count": "1", "timeout": f"{self.ping_timeout:g}s"}
        try:
            with self._borrowed() as client:
                reports = _rpc(client, "/ping", [peer], opts, timeout=self.ping_timeout + 2)
        except ipfs_errors.Error:
            return False
        reports = reports if isinstance(reports, list) else [reports]
        return any(
            isinstance(r, dict) and r.get("Success") is True and not r.get("Text") for r in reports
        )

    def configured_peers(self) -> list[str]:
        """The peers the node is configured with (its bootstrap list: `ipfs up --peer`),
        as ``/ip4/HOST/tcp/PORT/p2p/PEER_ID`` multiaddrs; others are left out."""
        answer = self._call("listing its configured peers", lambda c: _rpc(c, "/bootstrap/list"))
        listed = _object(answer).get("Peers")
        return [str(a) for a in listed or [] if _PEER_ADDRESS.match(str(a))]

    def redial(self) -> PeerHealth:
        """Dial again the configured peers that do not answer, dropping first a
        connection the node still lists for one (a link cut leaves it open but dead),
        each dial bounded by :attr:`dial_timeout`; who answers afterwards.

        Raises
        ------
        StorageError
            The node cannot be reached or refuses to list its peers.
        """
        before = self.peer_health()
        silent = set(before.silent)
        targets = [
            address
            for address in self.configured_peers()
            if address.rsplit("/", 1)[-1] not in before.answering
        ]
        opts = {"timeout": f"{self.dial_timeout:g}s"}
        wait = self.dial_timeout + 2

        def dial(address: str) -> None:
            with self._borrowed() as client:
                if address.rsplit("/", 1)[-1] in silent:
                    try:
                        _rpc(client, "/swarm/disconnect", [address], opts, wait)
                    except ipfs_errors.Error:
                        pass  # already gone
                try:
                    _rpc(client, "/swarm/connect", [address], opts, wait)
                except ipfs_errors.Error:
                    pass  # still out of reach: peer_health below says so

        _in_parallel(dial, targets, self.parallel_reads)
        with self._diagnosis:
            health = self.peer_health()
            self._health = (time.monotonic(), health)
        return health

    def pin(self, cid: str) -> None:
        """Pin ``cid`` recursively on the node, fetching it from peers if it lacks it.

        :meth:`put` pins what it adds already; this keeps a peer's blob too.

        Raises
        ------
        BlobNotFound
            Neither the node nor a peer had the blob within ``fetch_timeout``.
        """
        text = format_cid(parse_cid(cid))
        opts = {"timeout": f"{self.fetch_timeout:g}s"}

        def not_found(exc: ipfs_errors.ErrorResponse) -> StorageError:
            if _NOT_FOUND.search(str(exc)):
                return BlobNotFound(
                    f"the IPFS node at {self.address} could not pin {text}: it found no "
                    f"copy within {self.fetch_timeout:g} s"
                )
            return StorageError(f"the IPFS node at {self.address} refused to pin {text}: {exc}")

        self._call(
            f"pinning {text}",
            lambda c: c.pin.add(text, recursive=True, opts=opts),
            on_error=not_found,
        )

    def is_pinned(self, cid: str) -> bool:
        text = format_cid(parse_cid(cid))

        def unpinned(exc: ipfs_errors.ErrorResponse) -> StorageError:
            if re.search(r"not pinned|not found", str(exc), re.IGNORECASE):
                return BlobNotFound(text)
            return StorageError(f"the IPFS node at {self.address} refused to list pins: {exc}")

        try:
            answer = self._call(
                f"listing the pin of {text}",
                lambda c: c.pin.ls(text, type="recursive"),
                on_error=unpinned,
            )
        except BlobNotFound:
            return False
        keys = {format_cid(parse_cid(k)) for k in (answer or {}).get("Keys", {})}
        return text in keys

    def unpin(self, cid: str) -> None:
        text = format_cid(parse_cid(cid))

        def refused(exc: ipfs_errors.ErrorResponse) -> StorageError:
            if re.search(r"not pinned", str(exc), re.IGNORECASE):
                return BlobNotFound(text)
            return StorageError(f"the IPFS node at {self.address} refused to unpin {text}: {exc}")

        try:
            self._call(
                f"unpinning {text}",
                lambda c: c.pin.rm(text, recursive=True),
                on_error=refused,
            )
        except BlobNotFound:
            pass  # not pinned: nothing to release

    def exchange_stats(self) -> ExchangeStats:
        """The node's bitswap counters (``/api/v0/bitswap/stat``); js-ipfs recomputes
        them at most once a second, so they may lag the last fetch by that much.

        Raises
        ------
        StorageError
            The node answered something else than bitswap counters.
        """
        answer = self._call("reading the bitswap counters", lambda c: c.bitswap.stat())
        try:
            return ExchangeStats(
                blocks_received=int(answer["BlocksReceived"]),
                bytes_received=int(answer["DataReceived"]),
                peers=len(answer.get("Peers") or []),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise StorageError(
                f"the IPFS node at {self.address} answered bitswap/stat without its "
                f"counters ({exc!r})"
            ) from exc

    def has(self, cid: str) -> bool:
        text = format_cid(parse_cid(cid))
        opts = {"timeout": f"{self.has_timeout:g}s"}

        def missing(exc: ipfs_errors.ErrorResponse) -> StorageError:
            if _NOT_FOUND.search(str(exc)):
                return BlobNotFound(text)
            return StorageError(f"the IPFS node at {self.address} refused to look up {text}: {exc}")

        try:
            self._call(
                f"looking up {text}",
                lambda c: c.block.stat(text, opts=opts),
                on_error=missing,
            )
        except BlobNotFound:
            return False
        return True


def _rpc(
    client: ipfshttpclient.Client,
    path: str,
    args: Sequence[str] = (),
    opts: dict[str, str] | None = None,
    timeout: float | None = None,
) -> Any:
    """One request by path: ipfshttpclient's own ``swarm.connect`` sends its address
    character by character, and it has no ``bootstrap/list``."""
    kwargs: dict[str, Any] = {"opts": opts or {}, "decoder": "json"}
    if timeout is not None:
        kwargs["timeout"] = timeout
    return client._client.request(path, list(args), **kwargs)


def _object(answer: Any) -> dict[str, Any]:
    """The one JSON object of an answer (the decoder gives a list of the objects read)."""
    if isinstance(answer, list) and len(answer) == 1:
        answer = answer[0]
    return answer if isinstance(answer, dict) else {}


def _in_parallel(work: Callable[[T], R], items: Sequence[T], threads: int) -> list[R]:
    """``work`` over ``items`` on at most ``threads`` threads, results in order."""
    if len(items) <= 1:
        return [work(item) for item in items]
    with ThreadPoolExecutor(min(threads, len(items)), thread_name_prefix="ipfs") as pool:
        return list(pool.map(work, items))
