"""The IPFS store against a real js-ipfs daemon (started once per session)."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from mcfl_chain._utils.process import ServiceState, free_port
from mcfl_chain.storage import (
    BlobNotFound,
    BlobTooLarge,
    CorruptBlob,
    InvalidCID,
    IpfsStorage,
    LocalStorage,
    RetryPolicy,
    StorageTimeout,
    StorageUnavailable,
    cid_codec,
    cid_for_bytes,
    unixfs_cid_for_bytes,
)
from mcfl_chain.storage.daemon import storage_spec
from mcfl_chain.storage.unixfs import CHUNK_SIZE, MAX_LINKS

from .conftest import FETCH_TIMEOUT

# ipfshttpclient 0.8.0a2 passes urllib3 a deprecated argument (pytest resets the filter
# mcfl_chain.storage.ipfs installs for users).
pytestmark = pytest.mark.filterwarnings("ignore:The 'strict' parameter:FutureWarning")


def block_file(ipfs_repo: Path, content: bytes) -> Path:
    """The file in the daemon's block store holding exactly ``content``."""
    digest = hashlib.sha256(content).digest()
    matches = [
        path
        for path in (ipfs_repo / "blocks").rglob("*.data")
        if path.stat().st_size == len(content)
        and hashlib.sha256(path.read_bytes()).digest() == digest
    ]
    assert len(matches) == 1, f"expected one block file with this content, found {matches}"
    return matches[0]


@pytest.mark.parametrize(
    "size",
    [
        0,
        1,
        250_000,
        CHUNK_SIZE,  # the largest single-block blob
        CHUNK_SIZE + 1,  # the smallest dag-pb one
        5_000_000,
        MAX_LINKS * CHUNK_SIZE + 1,  # a root over intermediate nodes (two levels)
    ],
)
def test_round_trip(ipfs_store: IpfsStorage, size: int) -> None:
    # Prepare
    data = os.urandom(size)

    # Execute
    cid = ipfs_store.put(data)

    # Assert: the node agreed with the locally computed CID, and the read verifies.
    assert cid == unixfs_cid_for_bytes(data)
    assert cid_codec(cid) == ("raw" if size <= CHUNK_SIZE else "dag-pb")
    assert ipfs_store.has(cid)
    assert ipfs_store.get(cid) == data


@pytest.mark.parametrize("size", [0, 1, 1000, 250_000, CHUNK_SIZE])
def test_small_blobs_have_the_same_cid_in_both_backends(
    ipfs_store: IpfsStorage, local_store: LocalStorage, size: int
) -> None:
    # Prepare
    data = os.urandom(size)

    # Execute
    ipfs_cid, local_cid = ipfs_store.put(data), local_store.put(data)

    # Assert
    assert ipfs_cid == local_cid == cid_for_bytes(data)


def test_large_blobs_have_different_cids_in_the_two_backends(
    ipfs_store: IpfsStorage, local_store: LocalStorage
) -> None:
    data = os.urandom(CHUNK_SIZE * 2)
    ipfs_cid, local_cid = ipfs_store.put(data), local_store.put(data)
    assert ipfs_cid != local_cid
    assert (cid_codec(ipfs_cid), cid_codec(local_cid)) == ("dag-pb", "raw")


def test_a_second_process_reads_what_the_first_wrote(
    ipfs_node: ServiceState, ipfs_store: IpfsStorage
) -> None:
    # Prepare: another process adds a multi-chunk blob through the same node.
    script = textwrap.dedent("""
        import sys
        from mcfl_chain.storage import open_storage
        with open_storage(sys.argv[1]) as store:
            print(store.put(bytes(range(256)) * 4096))
    """)
    result = subprocess.run(
        [sys.executable, "-c", script, storage_spec(ipfs_node)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr

    # Execute
    data = ipfs_store.get(result.stdout.strip())

    # Assert
    assert data == bytes(range(256)) * 4096


def test_missing_blob(ipfs_store: IpfsStorage) -> None:
    # The node looks for FETCH_TIMEOUT seconds, then says it cannot find the blob.
    cid = cid_for_bytes(os.urandom(32))
    with pytest.raises(BlobNotFound, match=f"could not find blob {cid} within {FETCH_TIMEOUT:g} s"):
        ipfs_store.get(cid)
    assert not ipfs_store.has(cid)


@pytest.mark.parametrize("cid", ["", "Qm-not-a-cid", "bafkreibm6jg3ux5qumhcn2b3flc3tyu6dmlb4x"])
def test_invalid_cid(ipfs_store: IpfsStorage, cid: str) -> None:
    with pytest.raises(InvalidCID):
        ipfs_store.get(cid)


@pytest.mark.parametrize("size", [10_000, 3 * CHUNK_SIZE])
def test_read_bound(ipfs_store: IpfsStorage, size: int) -> None:
    # Prepare
    data = os.urandom(size)
    cid = ipfs_store.put(data)

    # Execute / Assert: the bound is inclusive.
    assert ipfs_store.get(cid, max_bytes=size) == data
    with pytest.raises(BlobTooLarge, match="read bound"):
        ipfs_store.get(cid, max_bytes=size - 1)


@pytest.mark.parametrize("size", [1000, 3 * CHUNK_SIZE])
def test_content_altered_in_the_node_is_detected(
    ipfs_store: IpfsStorage, ipfs_repo: Path, size: int
) -> None:
    # Prepare: flip one byte of the (first leaf) block in the daemon's own block store,
    # so the real node serves wrong content.
    data = os.urandom(size)
    cid = ipfs_store.put(data)
    leaf = data[:CHUNK_SIZE]
    path = block_file(ipfs_repo, leaf)
    path.write_bytes(bytes([leaf[0] ^ 0xFF]) + leaf[1:])

    # Execute / Assert
    with pytest.raises(CorruptBlob, match="do not match it"):
        ipfs_store.get(cid)


def test_unreachable_node_is_retried_then_reported() -> None:
    # Prepare: nothing listens on this loopback port.
    store = IpfsStorage(
        f"/ip4/127.0.0.1/tcp/{free_port()}",
        timeout=5,
        fetch_timeout=1,
        retry=RetryPolicy(attempts=3, initial_delay=0.01, max_delay=0.02),
    )

    # Execute / Assert
    with store, pytest.raises(StorageUnavailable, match="after 3 attempt") as caught:
        store.put(b"update")
    assert not isinstance(caught.value, StorageTimeout)
    assert "mcfl-chain ipfs up" in str(caught.value)


def test_hung_node_times_out_after_retries(ipfs_node: ServiceState) -> None:
    # Prepare: freeze the real daemon; it still accepts connections but never answers.
    store = IpfsStorage(
        storage_spec(ipfs_node).removeprefix("ipfs:"),
        timeout=1.0,
        fetch_timeout=0.5,
        has_timeout=0.5,
        retry=RetryPolicy(attempts=2, initial_delay=0.01, max_delay=0.02),
    )
    os.kill(ipfs_node.pid, signal.SIGSTOP)
    try:
        # Execute / Assert
        with store, pytest.raises(StorageTimeout, match="after 2 attempt.*did not answer"):
            store.get(cid_for_bytes(b"anything"))
    finally:
        os.kill(ipfs_node.pid, signal.SIGCONT)
