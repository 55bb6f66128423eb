"""Each trainer its own IPFS node: two js-ipfs daemons on 127.0.0.1 exchange blobs by CID.

Node A and node B have separate repos, API ports and swarm ports; B knows A only as
its peer. A blob put on A is fetched from B over bitswap and verified against its CID.
"""

from __future__ import annotations

import json
import logging
import os
import re
import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner
from multiformats import multibase

from mcfl_chain._utils.process import ServiceError, ServiceState, free_port, pid_alive
from mcfl_chain.cli.ipfs import ipfs
from mcfl_chain.storage import (
    BlobNotFound,
    ExchangeStats,
    IpfsStorage,
    NoPeers,
    RetryPolicy,
    StorageUnavailable,
    unixfs_cid_for_bytes,
)
from mcfl_chain.storage.daemon import (
    _check_exchange_fix,
    check_peer_address,
    connect_peer,
    connected_peers,
    ipfs_status,
    parse_swarm_address,
    peer_id,
    start_ipfs,
    stop_ipfs,
    storage_spec,
    swarm_addresses,
)
from mcfl_chain.worker.blobs import Blobs
from mcfl_chain.worker.timing import RoundClock

pytestmark = [
    pytest.mark.filterwarnings("ignore:The 'strict' parameter:FutureWarning"),
    # Two daemons exchanging blocks over bitswap: about 90 s of CPU in all, so the
    # workers start these first.
    pytest.mark.slow,
]

LOOPBACK_ANY_PORT = "/ip4/127.0.0.1/tcp/0"


@dataclass
class Node:
    repo: Path
    state: ServiceState

    def store(self, fetch_timeout: float = 20.0, has_timeout: float = 2.0) -> IpfsStorage:
        return IpfsStorage(
            storage_spec(self.state).removeprefix("ipfs:"),
            timeout=fetch_timeout + 10,
            fetch_timeout=fetch_timeout,
            has_timeout=has_timeout,
            retry=RetryPolicy(attempts=2, initial_delay=0.1),
            ping_timeout=1.5,
        )


@pytest.fixture(scope="module")
def nodes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Node, Node]]:
    """Node A alone; node B started with A as its only peer. Stopped by PID at the end."""
    base = tmp_path_factory.mktemp("two-nodes")
    a_repo, b_repo = base / "a", base / "b"
    a = start_ipfs(a_repo, swarm=LOOPBACK_ANY_PORT)
    try:
        b = start_ipfs(b_repo, swarm=LOOPBACK_ANY_PORT, peers=swarm_addresses(a_repo))
        try:
            yield Node(a_repo, a), Node(b_repo, b)
        finally:
            stop_ipfs(b_repo)
    finally:
        stop_ipfs(a_repo)


def test_the_nodes_are_peers_on_loopback_only(nodes: tuple[Node, Node]) -> None:
    # Prepare
    a, b = nodes

    # Execute
    a_addresses, b_addresses = swarm_addresses(a.repo), swarm_addresses(b.repo)
    a_peers, b_peers = connected_peers(a.state), connected_peers(b.state)

    # Assert: one loopback listener each, on different ports, each the other's peer.
    assert len(a_addresses) == len(b_addresses) == 1
    assert re.fullmatch(rf"/ip4/127\.0\.0\.1/tcp/\d+/p2p/{peer_id(a.repo)}", a_addresses[0])
    assert a_addresses[0].split("/")[4] != b_addresses[0].split("/")[4]
    assert a_peers == [peer_id(b.repo)] and b_peers == [peer_id(a.repo)]
    for node in (a, b):
        log = Path(node.state.log).read_text()
        listeners = re.findall(r"(?:Swarm|API) listening on (\S+)", log)
        assert listeners and all(addr.startswith("/ip4/127.0.0.1/") for addr in listeners)


def test_nothing_is_configured_to_leave_the_machine(nodes: tuple[Node, Node]) -> None:
    # Prepare
    a, b = nodes

    # Execute
    config = json.loads((b.repo / "ipfs-repo" / "config").read_text())

    # Assert: the only peer is A; no DHT, mDNS, UPnP, delegates, gateway, preload.
    assert config["Bootstrap"] == swarm_addresses(a.repo)
    assert config["Routing"] == {"Type": "none"}
    assert config["Discovery"]["MDNS"]["Enabled"] is False
    assert config["Discovery"]["webRTCStar"]["Enabled"] is False
    assert config["Swarm"]["DisableNatPortMap"] is True
    assert config["Addresses"]["Delegates"] == [] and config["Addresses"]["Gateway"] == ""
    assert "--enable-preload=false" in b.state.command
    assert "--offline" not in b.state.command


@pytest.mark.parametrize("size", [1_000, 600_000])
def test_a_blob_put_on_a_is_fetched_from_b_by_cid(nodes: tuple[Node, Node], size: int) -> None:
    # Prepare: a raw-leaf blob (one block) and a chunked one (dag-pb root + 3 leaves).
    a, b = nodes
    blob = os.urandom(size)

    # Execute
    with a.store() as on_a, b.store() as on_b:
        cid = on_a.put(blob)
        started = time.perf_counter()
        fetched = on_b.get(cid)
        seconds = time.perf_counter() - started
        pinned_on_a = on_a.is_pinned(cid)

    # Assert: same bytes, verified against the CID (get checks; recomputed here too).
    assert fetched == blob
    assert cid == unixfs_cid_for_bytes(blob)
    assert pinned_on_a
    assert seconds < 20, f"bitswap took {seconds:.1f} s"
    print(f"\n{size} bytes fetched by CID from the other node in {seconds:.2f} s")


def _settled(store: IpfsStorage, timeout: float = 15.0) -> ExchangeStats:
    """The counters once they stopped moving: js-bitswap recomputes them only after a
    second without exchange activity, so a read right after a fetch can be stale."""
    deadline = time.monotonic() + timeout
    last = store.exchange_stats()
    while time.monotonic() < deadline:
        time.sleep(1.5)
        now = store.exchange_stats()
        if now == last:
            return now
        last = now
    return last


def test_b_counts_what_bitswap_brought_and_releases_a_pin(nodes: tuple[Node, Node]) -> None:
    # Prepare: a 300 kB blob on A (a dag-pb root and two leaves).
    a, b = nodes
    blob = os.urandom(300_000)

    # Execute: B fetches and pins it, counting bitswap before and after; then unpins it.
    with a.store() as on_a, b.store() as on_b:
        cid = on_a.put(blob)
        before = _settled(on_b)
        on_b.pin(cid)
        after = _settled(on_b)
        pinned = on_b.is_pinned(cid)
        on_b.unpin(cid)
        on_b.unpin(cid)  # twice: not pinned any more is no error
        released = not on_b.is_pinned(cid)
        still_on_a = on_a.is_pinned(cid)

    # Assert: three blocks came over bitswap, with at least the blob's bytes.
    assert after.blocks_received - before.blocks_received == 3
    assert after.bytes_received - before.bytes_received >= len(blob)
    assert after.peers >= 1
    assert pinned and released and still_on_a


def _until(condition, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"no {what} within {timeout:g} s")
        time.sleep(0.2)


def _wait_for_peer(state: ServiceState, timeout: float) -> float:
    started = time.perf_counter()
    while time.perf_counter() - started < timeout:
        if connected_peers(state):
            return time.perf_counter() - started
        time.sleep(0.5)
    raise AssertionError(f"no peer connected within {timeout:g} s")


def test_a_late_peer_is_redialled_then_b_pins_its_blob_and_serves_it_alone(
    tmp_path: Path,
) -> None:
    # Prepare: A's identity and address exist (its repo is initialised), but A is down
    # when B starts with A as its peer.
    a_repo, b_repo = tmp_path / "a", tmp_path / "b"
    a_swarm = f"/ip4/127.0.0.1/tcp/{free_port()}"
    start_ipfs(a_repo, swarm=a_swarm)
    stop_ipfs(a_repo)
    b_state = start_ipfs(b_repo, swarm=LOOPBACK_ANY_PORT, peers=swarm_addresses(a_repo))
    try:
        alone_at_start = connected_peers(b_state)
        a_state = start_ipfs(a_repo, swarm=a_swarm)
        try:
            a, b = Node(a_repo, a_state), Node(b_repo, b_state)
            blob = os.urandom(50_000)

            # Execute: B redials A by itself; B pins A's blob (fetching it); A goes away.
            redial_seconds = _wait_for_peer(b_state, timeout=60)
            with a.store() as on_a, b.store() as on_b:
                cid = on_a.put(blob)
                before = on_b.is_pinned(cid)
                on_b.pin(cid)
                stop_ipfs(a_repo)
                after = on_b.is_pinned(cid)
                served = on_b.get(cid)
                peers_left = connected_peers(b_state)
        finally:
            stop_ipfs(a_repo)
    finally:
        stop_ipfs(b_repo)

    # Assert
    assert alone_at_start == []
    assert redial_seconds < 60
    assert not before and after
    assert served == blob
    assert not pid_alive(a_state.pid) and peers_left == []


def test_pinning_a_blob_no_node_has_is_not_found(nodes: tuple[Node, Node]) -> None:
    # Prepare: a CID nobody stored.
    _, b = nodes
    cid = unixfs_cid_for_bytes(b"never stored anywhere " + os.urandom(8))

    # Execute / Assert
    with b.store(fetch_timeout=1.0) as on_b, pytest.raises(BlobNotFound, match="could not pin"):
        on_b.pin(cid)


def test_missing_blobs_are_not_found_on_the_network_in_one_parallel_wait(
    nodes: tuple[Node, Node], caplog: pytest.LogCaptureFixture
) -> None:
    # Prepare: four CIDs no node holds; B's peer A answers.
    a, b = nodes
    missing = [unixfs_cid_for_bytes(b"nobody stored " + os.urandom(8)) for _ in range(4)]

    # Execute: a trainer reads them ahead (its node waits 2 s for each), then asks.
    with b.store(fetch_timeout=2.0) as on_b:
        blobs = Blobs(on_b, RoundClock())
        started = time.perf_counter()
        blobs.prefetch(missing)
        seconds = time.perf_counter() - started
        with pytest.raises(BlobNotFound) as raised:
            blobs.fetch(missing[0])

    # Assert: one wait for the four, not four in turn; the message blames the CID, not
    # the node's links; nothing said about peers being lost.
    assert seconds < 6, f"four missing blobs took {seconds:.1f} s"
    assert not isinstance(raised.value, NoPeers)
    assert "this CID is not found on the network (1 of 1 connected peer(s) answer" in str(
        raised.value
    )
    assert not blobs.cut_off and "no peers" not in caplog.text


def test_a_node_that_is_down_is_told_apart(tmp_path: Path) -> None:
    # Prepare: an API address where no node listens.
    store = IpfsStorage(
        f"/ip4/127.0.0.1/tcp/{free_port()}", retry=RetryPolicy(attempts=2, initial_delay=0.05)
    )

    # Execute / Assert
    with store, pytest.raises(StorageUnavailable, match="your IPFS node is down"):
        store.get(unixfs_cid_for_bytes(b"anything"))


def test_a_node_whose_peers_went_silent_says_it_has_none_and_gets_them_back(
    nodes: tuple[Node, Node], caplog: pytest.LogCaptureFixture
) -> None:
    # Prepare: three blobs only A holds; then A freezes (SIGSTOP), as when B's link to
    # it is cut: B still lists the connection, but nothing comes through it.
    a, b = nodes
    runner = CliRunner(mix_stderr=False)
    contents = [os.urandom(20_000) for _ in range(3)]
    caplog.set_level(logging.INFO, logger="mcfl_chain.worker")
    with a.store() as on_a, b.store(fetch_timeout=3.0, has_timeout=1.0) as on_b:
        cids = [on_a.put(c) for c in contents]
        blobs = Blobs(on_b, RoundClock())
        os.kill(a.state.pid, signal.SIGSTOP)
        try:
            # Execute: what `ipfs status` says, a plain read, a trainer's read-ahead
            # (which starts redialling A in the background), and a read while cut off.
            status = runner.invoke(ipfs, ["status", "--repo", str(b.repo)])
            listed = connected_peers(b.state)
            with pytest.raises(NoPeers) as plain:
                on_b.get(cids[0])
            blobs.prefetch(cids[:2])
            cut_off = blobs.cut_off
            started = time.perf_counter()
            with pytest.raises(NoPeers, match="was not fetched"):
                blobs.fetch(cids[2])
            skipped_in = time.perf_counter() - started
            _until(lambda: "no peers after redialling" in caplog.text, 60, "a failed redial")
        finally:
            os.kill(a.state.pid, signal.SIGCONT)
        # ... and once A is back: the next redial reaches it, and the blobs come.
        _until(lambda: not blobs.cut_off, 60, "the redial reaching A")
        fetched = [blobs.fetch(cid) for cid in cids]
        blobs.close()
        status_after = runner.invoke(ipfs, ["status", "--repo", str(b.repo)])

    # Assert: the frozen peer was still listed, but status counted it silent and warned;
    # the reads blamed the node's links, not the CID; the trainer said so, redialled,
    # skipped the next read at once, and said when A answered again.
    assert listed == [peer_id(a.repo)]
    assert "connected peers: 0 (1 more listed but silent" in status.stdout, status.output
    assert "your IPFS node has no peers" in status.stderr
    assert "your IPFS node has no peers: " in str(plain.value)
    assert "0 of 1 connected peer(s) answer (1 silent" in str(plain.value)
    assert cut_off and skipped_in < 3.0
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("your IPFS node has no peers: " in w and "redialling" in w for w in warnings)
    assert any("no peers after redialling" in w for w in warnings)
    assert "your IPFS node reaches its peers again: 1 of 1 connected peer(s) answer" in caplog.text
    assert fetched == contents
    assert "connected peers: 1\n" in status_after.stdout, status_after.output


def test_cli_up_prints_the_peer_address_and_peers_a_second_node(tmp_path: Path) -> None:
    # Prepare
    runner = CliRunner()
    a_repo, b_repo = tmp_path / "a", tmp_path / "b"
    a_port, b_port = free_port(), free_port()

    # Execute: A, then B with A's printed address as --peer.
    a_up = runner.invoke(
        ipfs, ["up", "--repo", str(a_repo), "--port", str(a_port), "--swarm", LOOPBACK_ANY_PORT]
    )
    try:
        address = re.search(r"--peer (\S+)", a_up.output)
        assert address is not None, a_up.output
        b_up = runner.invoke(
            ipfs,
            [
                "up",
                "--repo",
                str(b_repo),
                "--port",
                str(b_port),
                "--swarm",
                LOOPBACK_ANY_PORT,
                "--peer",
                address.group(1),
            ],
        )
        listed = runner.invoke(ipfs, ["peers", "--repo", str(b_repo)])
        status = runner.invoke(ipfs, ["status", "--repo", str(a_repo)])
        again = runner.invoke(ipfs, ["connect", address.group(1), "--repo", str(b_repo)])
    finally:
        b_down = runner.invoke(ipfs, ["down", "--repo", str(b_repo)])
        a_down = runner.invoke(ipfs, ["down", "--repo", str(a_repo)])

    # Assert
    assert a_up.exit_code == 0, a_up.output
    assert address.group(1) == swarm_addresses(a_repo)[0]
    assert f"use: --storage ipfs:/ip4/127.0.0.1/tcp/{a_port}" in a_up.output
    assert b_up.exit_code == 0, b_up.output
    assert "connected to 1 of 1 peer(s)" in b_up.output
    assert listed.exit_code == 0 and listed.output.split() == [peer_id(a_repo)]
    assert status.exit_code == 0 and "connected peers: 1" in status.output
    assert again.exit_code == 0 and "connected to" in again.output
    assert b_down.exit_code == 0 and a_down.exit_code == 0
    assert ipfs_status(a_repo) is None and ipfs_status(b_repo) is None


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: parse_swarm_address("/ip4/127.0.0.1/udp/4001"), "expected /ip4/A.B.C.D/tcp/PORT"),
        (lambda: check_peer_address("/ip4/127.0.0.1/tcp/4001"), "expected /ip4/HOST/tcp/PORT/p2p"),
        (
            lambda: start_ipfs("/nonexistent-repo", peers=["/ip4/127.0.0.1/tcp/1/p2p/12D3KooWx"]),
            "an offline node has no peers",
        ),
    ],
)
def test_malformed_addresses_are_refused_before_anything_starts(call, match: str) -> None:
    with pytest.raises(ServiceError, match=match):
        call()


def _unknown_peer_id() -> str:
    """An Ed25519 peer id nobody runs: identity multihash of a protobuf public key."""
    key = b"\x08\x01\x12\x20" + os.urandom(32)
    return multibase.encode(bytes([0x00, len(key)]) + key, "base58btc")[1:]


def test_connecting_to_a_node_that_is_down_says_so(nodes: tuple[Node, Node]) -> None:
    # Prepare: a peer address where nothing listens.
    _, b = nodes
    address = f"/ip4/127.0.0.1/tcp/{free_port()}/p2p/{_unknown_peer_id()}"

    # Execute / Assert
    with pytest.raises(ServiceError, match="refused swarm/connect|did not answer"):
        connect_peer(b.state, address, timeout=15.0)


def test_an_install_without_the_peer_record_pin_is_refused(tmp_path: Path) -> None:
    # Prepare: node_modules as npm lays it out, with @libp2p/peer-record 5.0.4.
    modules = tmp_path / "node_modules"
    cli = modules / "ipfs" / "src" / "cli.js"
    cli.parent.mkdir(parents=True)
    cli.write_text("")
    (modules / ".bin").mkdir()
    (modules / ".bin" / "jsipfs").symlink_to("../ipfs/src/cli.js")
    record = modules / "@libp2p" / "peer-record" / "package.json"
    record.parent.mkdir(parents=True)
    record.write_text(
        json.dumps({"version": "5.0.4", "dependencies": {"@multiformats/multiaddr": "^12.0.0"}})
    )

    # Execute / Assert
    with pytest.raises(ServiceError, match="peer-record 5.0.4 .*run `make node`"):
        _check_exchange_fix(modules / ".bin" / "jsipfs")
    record.write_text(
        json.dumps({"version": "5.0.2", "dependencies": {"@multiformats/multiaddr": "^11.0.0"}})
    )
    _check_exchange_fix(modules / ".bin" / "jsipfs")
