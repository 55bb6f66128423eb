"""CIDs: parsing, binary and compact forms, and the locally computed IPFS DAG root."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given
from hypothesis import strategies as st
from multiformats import CID, multihash

from mcfl_chain.storage import (
    InvalidCID,
    cid_codec,
    cid_digest,
    cid_for_bytes,
    cid_for_digest,
    cid_from_bytes,
    cid_to_bytes,
    normalize_cid,
    parse_cid,
    unixfs_cid_for_bytes,
)
from mcfl_chain.storage.unixfs import CHUNK_SIZE


def test_cid_for_bytes_is_cidv1_raw_sha256_base32() -> None:
    # Prepare
    data = b"hello"

    # Execute
    cid = cid_for_bytes(data)

    # Assert: the well-known CIDv1 of "hello" as one raw block.
    assert cid == "bafkreibm6jg3ux5qumhcn2b3flc3tyu6dmlb4xa7u5bf44yegnrjhc4yeq"
    assert cid_codec(cid) == "raw"
    assert cid_digest(cid) == hashlib.sha256(data).digest()


@given(st.binary(max_size=4096))
def test_cid_for_bytes_equals_multiformats_encoding(data: bytes) -> None:
    # cid_for_bytes encodes with the standard library's base32 for speed; multiformats
    # is the reference.
    expected = CID("base32", 1, "raw", multihash.digest(data, "sha2-256")).encode("base32")

    assert cid_for_bytes(data) == expected
    assert cid_digest(expected) == hashlib.sha256(data).digest()


def test_binary_and_compact_forms_round_trip() -> None:
    # Prepare
    cid = cid_for_bytes(b"weights")

    # Execute
    binary = cid_to_bytes(cid)
    digest, codec = cid_digest(cid), cid_codec(cid)

    # Assert
    assert len(binary) == 36
    assert cid_from_bytes(binary) == cid
    assert cid_for_digest(digest, codec) == cid


def test_other_encodings_normalise_to_base32() -> None:
    # Prepare: the same CID written in base58btc.
    cid = cid_for_bytes(b"weights")
    base58 = CID.decode(cid).encode("base58btc")

    # Execute
    normalised = normalize_cid(base58)

    # Assert
    assert base58 != cid
    assert normalised == cid


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   ",
        "hello",
        "bafkreibm6jg3ux5qumhcn2b3flc3tyu6dmlb4xa7u5bf44yegnrjhc4ye",  # truncated
        "bafkreibm6jg3ux5qumhcn2b3flc3tyu6dmlb4xa7u5bf44yegnrjhc4yeq1",  # junk appended
        b"\x01\x55",
        42,
    ],
)
def test_parse_cid_rejects_garbage(text: object) -> None:
    with pytest.raises(InvalidCID):
        parse_cid(text)  # type: ignore[arg-type]


def test_digest_of_a_non_sha256_cid_is_refused() -> None:
    # Prepare
    blake = CID("base32", 1, "raw", multihash.digest(b"x", "blake2b-256")).encode("base32")

    # Execute / Assert
    with pytest.raises(InvalidCID, match="sha2-256"):
        cid_digest(blake)


def test_cid_for_digest_checks_its_input() -> None:
    with pytest.raises(InvalidCID, match="32 bytes"):
        cid_for_digest(b"short")
    with pytest.raises(InvalidCID, match="codec"):
        cid_for_digest(bytes(32), "dag-cbor")


@pytest.mark.parametrize("size", [0, 1, CHUNK_SIZE])
def test_unixfs_cid_of_one_chunk_is_the_raw_cid(size: int) -> None:
    data = bytes(range(256)) * (size // 256) + bytes(size % 256)
    assert unixfs_cid_for_bytes(data) == cid_for_bytes(data)


def test_unixfs_cid_of_several_chunks_is_a_dag_pb_root() -> None:
    # Prepare
    data = b"\x07" * (CHUNK_SIZE + 1)

    # Execute
    root = unixfs_cid_for_bytes(data)

    # Assert: a dag-pb root, that depends on every byte and on the chunking.
    assert cid_codec(root) == "dag-pb"
    assert root.startswith("bafybei")
    assert root != unixfs_cid_for_bytes(data[:-1] + b"\x08")
    assert root != unixfs_cid_for_bytes(data, chunk_size=CHUNK_SIZE // 2)
