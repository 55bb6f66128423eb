"""The CID IPFS gives a blob, computed locally: how IPFS reads are verified.

``ipfs add --cid-version 1 --raw-leaves --chunker size-262144`` cuts a blob into
256 KiB chunks stored as raw blocks. One chunk is the whole answer: the CID is the raw
block's (:func:`mcfl_chain.storage.cid.cid_for_bytes`). More chunks are linked by
``dag-pb`` nodes carrying UnixFS ``File`` metadata, in the *balanced* layout (at most
174 links per node, filled left to right, level by level), and the CID is the root's.

So CIDs of blobs over 256 KiB differ between the IPFS store (dag-pb root) and the
local store (one raw CID over the whole blob). Both verify every read: the IPFS store
re-derives the root from the bytes it received with :func:`unixfs_cid_for_bytes` and
compares. Only the encoder is needed, no protobuf library: the two messages involved
are tiny and their canonical byte layout is fixed by the dag-pb and UnixFS specs.
"""

from __future__ import annotations

from dataclasses import dataclass

from multiformats import CID, multihash

from mcfl_chain.storage.cid import DAG_PB, SHA2_256, cid_for_bytes

#: ``--chunker size-262144``: the IPFS default, spelled out so every node agrees.
CHUNK_SIZE = 262_144
#: Links per dag-pb node in the balanced layout (IPFS default).
MAX_LINKS = 174
#: The ``ipfs add`` options that make the node produce :func:`unixfs_cid_for_bytes`.
IMPORT_OPTIONS = {
    "cid-version": 1,
    "raw-leaves": True,
    "chunker": f"size-{CHUNK_SIZE}",
    "hash": SHA2_256,
}

_UNIXFS_FILE = 2


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _field(number: int, wire_type: int) -> bytes:
    return _varint(number << 3 | wire_type)


def _length_delimited(number: int, payload: bytes) -> bytes:
    return _field(number, 2) + _varint(len(payload)) + payload


@dataclass(frozen=True)
class _Node:
    """A node of the import DAG: its CID, file bytes below it, and Tsize (block bytes)."""

    cid: CID
    file_size: int
    tree_size: int


def _raw_leaf(chunk: bytes) -> _Node:
    return _Node(CID.decode(cid_for_bytes(chunk)), len(chunk), len(chunk))


def _parent(children: list[_Node]) -> _Node:
    # UnixFS Data: Type=File (1), filesize (3), blocksizes (4, repeated, not packed).
    unixfs = _field(1, 0) + _varint(_UNIXFS_FILE)
    file_size = sum(child.file_size for child in children)
    unixfs += _field(3, 0) + _varint(file_size)
    for child in children:
        unixfs += _field(4, 0) + _varint(child.file_size)
    # dag-pb PBNode, canonical order: Links (2) first, then Data (1). Each PBLink has
    # Hash (1), an empty Name (2) and Tsize (3).
    block = b""
    for child in children:
        link = (
            _length_delimited(1, bytes(child.cid))
            + _length_delimited(2, b"")
            + _field(3, 0)
            + _varint(child.tree_size)
        )
        block += _length_delimited(2, link)
    block += _length_delimited(1, unixfs)
    cid = CID("base32", 1, DAG_PB, multihash.digest(block, SHA2_256))
    return _Node(cid, file_size, len(block) + sum(child.tree_size for child in children))


def unixfs_cid_for_bytes(
    data: bytes, chunk_size: int = CHUNK_SIZE, max_links: int = MAX_LINKS
) -> str:
    """CIDv1 (base32) that IPFS gives ``data`` when added with :data:`IMPORT_OPTIONS`.

    Parameters
    ----------
    data
        The blob.
    chunk_size
        Bytes per leaf (``--chunker size-N``).
    max_links
        Links per node of the balanced layout.

    Returns
    -------
    str
        A raw CID (``bafkrei...``) for a blob of at most one chunk, else the dag-pb root
        CID (``bafybei...``).
    """
    data = bytes(data)
    if len(data) <= chunk_size:
        return cid_for_bytes(data)
    level = [
        _raw_leaf(data[start : start + chunk_size]) for start in range(0, len(data), chunk_size)
    ]
    while len(level) > 1:
        level = [
            _parent(level[start : start + max_links]) for start in range(0, len(level), max_links)
        ]
    return level[0].cid.encode("base32")
