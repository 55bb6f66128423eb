"""The contract of :class:`~mcfl_chain.storage.base.Storage`, run on every backend: the
local directory store and an IPFS store on a real js-ipfs node (the session daemon of
``tests/storage/conftest.py``).

Each test takes the ``backend`` fixture, parametrised over both; what legitimately
differs between them (how a blob over one chunk is named, where the bytes lie on disk,
the wording of an error) is held in :class:`Backend`. Checks of one backend alone stay
in ``test_local.py`` and ``test_ipfs.py``.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from multiformats import CID, multihash

from mcfl_chain.storage import (
    BlobNotFound,
    BlobTooLarge,
    CorruptBlob,
    InvalidCID,
    IpfsStorage,
    LocalStorage,
    Storage,
    cid_codec,
    cid_for_bytes,
    normalize_cid,
    open_storage,
    parse_cid,
    unixfs_cid_for_bytes,
)
from mcfl_chain.storage.unixfs import CHUNK_SIZE

from .conftest import FETCH_TIMEOUT

# ipfshttpclient 0.8.0a2 passes urllib3 a deprecated argument (pytest resets the filter
# mcfl_chain.storage.ipfs installs for users).
pytestmark = pytest.mark.filterwarnings("ignore:The 'strict' parameter:FutureWarning")


@dataclass
class Backend:
    """A store under test and what is particular to its backend."""

    name: str
    store: Storage
    cid_of: Callable[[bytes], str]
    """The CID the backend names ``data`` by, computed without it."""
    large_codec: str
    """Codec of the CID of a blob over one chunk (256 KiB)."""
    blob_file: Callable[[str, bytes], Path]
    """The file on disk whose bytes the store serves first for blob ``(cid, data)``."""
    missing: Callable[[str], str]
    """Pattern of the message of ``get(cid)`` for a blob the store lacks."""
    corrupt: Callable[[Path], str]
    """Pattern of the message of ``get`` for a blob whose file was altered."""
    too_large: Callable[[int], str]
    """Pattern of the message of ``get`` for a ``size``-byte blob over the bound."""
    bounded: Callable[[int], Storage]
    """Another store on the same blobs, opened with a default read bound."""


def ipfs_block_file(ipfs_repo: Path, content: bytes) -> Path:
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


def _local(store: LocalStorage) -> Backend:
    return Backend(
        name="local",
        store=store,
        cid_of=cid_for_bytes,
        large_codec="raw",
        blob_file=lambda cid, _data: store.path_for(cid),
        missing=lambda _cid: "not in the local store",
        corrupt=lambda path: re.escape(str(path)),
        too_large=lambda size: f"has {size} bytes",
        bounded=lambda bound: LocalStorage(store.root, max_blob_bytes=bound),
    )


def _ipfs(store: IpfsStorage, repo: Path) -> Backend:
    return Backend(
        name="ipfs",
        store=store,
        cid_of=unixfs_cid_for_bytes,
        large_codec="dag-pb",
        # The first leaf: the whole blob when it fits one chunk.
        blob_file=lambda _cid, data: ipfs_block_file(repo, data[:CHUNK_SIZE]),
        missing=lambda cid: f"could not find blob {cid} within {FETCH_TIMEOUT:g} s",
        corrupt=lambda _path: "do not match it",
        too_large=lambda _size: "read bound",
        bounded=lambda bound: IpfsStorage(
            store.address,
            timeout=store.timeout,
            fetch_timeout=store.fetch_timeout,
            has_timeout=store.has_timeout,
            retry=store.retry,
            max_blob_bytes=bound,
        ),
    )


@pytest.fixture(params=["local", "ipfs"])
def backend(request: pytest.FixtureRequest) -> Backend:
    """Each backend in turn: a fresh local store, or an IPFS store on the session node."""
    if request.param == "local":
        return _local(request.getfixturevalue("local_store"))
    return _ipfs(request.getfixturevalue("ipfs_store"), request.getfixturevalue("ipfs_repo"))


@pytest.mark.parametrize(
    "size",
    [
        0,
        1,
        250_000,
        CHUNK_SIZE,  # the largest single-block blob
        CHUNK_SIZE + 1,  # the smallest that IPFS gives a dag-pb root
        5_000_000,
    ],
)
def test_round_trip(backend: Backend, size: int) -> None:
    # Prepare
    data = os.urandom(size)

    # Execute
    cid = backend.store.put(data)

    # Assert: named as computed locally, canonical CIDv1 base32 with sha2-256; a blob of
    # one chunk is the same raw CID on every backend; the read verifies.
    assert cid == backend.cid_of(data)
    parsed = parse_cid(cid)
    assert normalize_cid(cid) == cid and cid.startswith("b") and parsed.version == 1
    assert parsed.hashfun.name == "sha2-256"
    if size <= CHUNK_SIZE:
        assert cid == cid_for_bytes(data) and cid_codec(cid) == "raw"
    else:
        assert cid_codec(cid) == backend.large_codec
    assert backend.store.has(cid)
    assert backend.store.get(cid) == data


@settings(max_examples=15, derandomize=True, database=None)
@given(data=st.binary(max_size=4096))
def test_same_bytes_same_cid_and_put_is_idempotent(backend: Backend, data: bytes) -> None:
    # Execute
    first = backend.store.put(data)
    again = backend.store.put(data)

    # Assert: the CID is a function of the bytes alone; a second put changes nothing.
    assert first == again == cid_for_bytes(data)
    assert backend.store.get(first) == data
    assert backend.store.has(first) and backend.store.is_pinned(first)


def test_what_was_put_is_kept(backend: Backend) -> None:
    # put pins (IPFS) or never drops (local); pinning again is no error.
    cid = backend.store.put(b"an update this trainer published")
    backend.store.pin(cid)
    assert backend.store.is_pinned(cid)


def test_the_spec_opens_the_same_store(backend: Backend) -> None:
    cid = backend.store.put(b"weights of a model")
    with open_storage(backend.store.spec) as reopened:
        assert type(reopened) is type(backend.store)
        assert reopened.spec == backend.store.spec
        assert reopened.get(cid) == b"weights of a model"


def test_missing_blob(backend: Backend) -> None:
    # Prepare: a well-formed CID of content nobody stored (IPFS looks FETCH_TIMEOUT s).
    cid = cid_for_bytes(os.urandom(32))

    # Execute / Assert
    assert not backend.store.has(cid)
    with pytest.raises(BlobNotFound, match=backend.missing(cid)):
        backend.store.get(cid)
    with pytest.raises(BlobNotFound):
        backend.store.pin(cid)
    backend.store.unpin(cid)  # releasing a blob that was never kept is no error
    assert not backend.store.is_pinned(cid)


@pytest.mark.parametrize(
    "cid",
    [
        "",
        "not-a-cid",
        "Qm-not-a-cid",
        "bafkreibm6jg3ux5qumhcn2b3flc3tyu6dmlb4x",  # truncated
    ],
)
def test_invalid_cid(backend: Backend, cid: str) -> None:
    # The message quotes the CID (or says it is empty).
    message = re.escape(repr(cid)) if cid else "empty CID string"
    with pytest.raises(InvalidCID, match=message):
        backend.store.get(cid)
    with pytest.raises(InvalidCID, match=message):
        backend.store.has(cid)


def test_a_cid_whose_hash_cannot_be_verified_is_refused(backend: Backend) -> None:
    # A well-formed CIDv1 hashed with sha2-512: a store cannot check bytes against it.
    cid = CID("base32", 1, "raw", multihash.digest(b"weights", "sha2-512")).encode("base32")
    with pytest.raises(InvalidCID, match="sha2-256"):
        backend.store.get(cid)


@pytest.mark.parametrize("size", [10_000, 3 * CHUNK_SIZE])
def test_read_bound(backend: Backend, size: int) -> None:
    # Prepare
    data = os.urandom(size)
    cid = backend.store.put(data)

    # Execute / Assert: the bound is inclusive; the store's default bound applies when
    # the caller gives none; a negative bound is a mistake.
    assert backend.store.get(cid, max_bytes=size) == data
    with pytest.raises(BlobTooLarge, match=backend.too_large(size)):
        backend.store.get(cid, max_bytes=size - 1)
    with backend.bounded(size - 1) as bounded, pytest.raises(BlobTooLarge):
        bounded.get(cid)
    with pytest.raises(ValueError, match="max_bytes must be >= 0"):
        backend.store.get(cid, max_bytes=-1)


@pytest.mark.parametrize(
    ("size", "damage"),
    [(1000, "flip"), (1000, "truncate"), (1000, "append"), (3 * CHUNK_SIZE, "flip")],
)
def test_content_altered_in_the_store_is_detected(backend: Backend, size: int, damage: str) -> None:
    # Prepare: change the bytes behind the store's back (the local file, or the first
    # leaf block in the real node's own block store), so that it serves wrong content.
    data = os.urandom(size)
    cid = backend.store.put(data)
    path = backend.blob_file(cid, data)
    stored = path.read_bytes()
    altered = {
        "flip": bytes([stored[0] ^ 0xFF]) + stored[1:],
        "truncate": stored[:-1],
        "append": stored + b"\0",
    }[damage]
    path.write_bytes(altered)

    # Execute / Assert
    with pytest.raises(CorruptBlob, match=backend.corrupt(path)):
        backend.store.get(cid)


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
