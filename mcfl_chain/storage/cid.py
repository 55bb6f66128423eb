"""Content identifiers (CIDs) as used by the stores and on chain.

Blobs are named by CIDv1 in base32 (``bafk...``), the form ``ipfs add --cid-version 1
--raw-leaves`` prints. A blob of at most one IPFS chunk (256 KiB) is a single ``raw``
block, so its CID is simply ``CIDv1(raw, sha2-256(data))`` and every backend agrees on
it. Larger blobs stored in IPFS get a ``dag-pb`` root instead (see
:mod:`mcfl_chain.storage.unixfs`).

The chain keeps CIDs in binary form (:func:`cid_to_bytes`, 36 bytes for a raw CIDv1),
or only the digest plus the codec (:func:`cid_digest`, :func:`cid_codec`).
"""

from __future__ import annotations

import base64
import hashlib
from functools import lru_cache

from multiformats import CID

from mcfl_chain.storage.errors import InvalidCID

RAW = "raw"
DAG_PB = "dag-pb"
SHA2_256 = "sha2-256"
_BASE = "base32"


def parse_cid(cid: str | bytes | CID) -> CID:
    """Parse a CID given as text (any multibase, v0 or v1) or in binary form.

    Parameters
    ----------
    cid
        The CID to parse.

    Returns
    -------
    CID
        The parsed CID.

    Raises
    ------
    InvalidCID
        If ``cid`` is not a CID (the message quotes it and says why).
    """
    if isinstance(cid, CID):
        return cid
    text: str | bytes
    if isinstance(cid, str):
        text = cid.strip()
        if not text:
            raise InvalidCID("empty CID string: expected a CID such as 'bafkrei...'")
    elif isinstance(cid, (bytes, bytearray, memoryview)):
        text = bytes(cid)
    else:
        raise InvalidCID(f"a CID must be str or bytes, not {type(cid).__name__}")
    try:
        return _decode(text)
    except (ValueError, KeyError, TypeError) as exc:
        raise InvalidCID(f"{cid!r} is not a valid CID ({exc}); expected e.g. 'bafkrei...'") from exc


# Every event and blob names CIDs again and again, and multiformats validates each call's
# types at run time; CIDs are immutable values, so each text is decoded (and each CID
# encoded) once. Failures are not cached: they raise anew.
@lru_cache(maxsize=8192)
def _decode(text: str | bytes) -> CID:
    return CID.decode(text)


@lru_cache(maxsize=8192)
def format_cid(cid: CID) -> str:
    """Canonical text form: base32 for CIDv1 (``bafy...``/``bafk...``), base58 for CIDv0."""
    if cid.version == 0:
        return str(cid)
    return cid.encode(_BASE)


def normalize_cid(cid: str | bytes | CID) -> str:
    """Parse ``cid`` and return its canonical text form (see :func:`format_cid`)."""
    return format_cid(parse_cid(cid))


def cid_for_bytes(data: bytes) -> str:
    """CIDv1 of ``data`` as one raw block: codec ``raw``, hash sha2-256, base32.

    Equals what ``ipfs add --cid-version 1 --raw-leaves`` prints for a blob of at most
    256 KiB (one chunk).
    """
    return _raw_cid_text(hashlib.sha256(data).digest())


# Every CIDv1(raw, sha2-256) starts with these four bytes: version 1, codec raw (0x55),
# hash sha2-256 (0x12), 32 bytes of digest (0x20). multiformats builds the same CID in
# about 0.2 ms (validating every part at run time); a host writing and reading some 400
# blobs a round paid that on each. Its text form is multibase base32: a "b", then RFC
# 4648 base32, lower case, unpadded (a test compares it with multiformats' encoding).
_RAW_SHA256_PREFIX = b"\x01\x55\x12\x20"


def _raw_cid_text(digest: bytes) -> str:
    encoded = base64.b32encode(_RAW_SHA256_PREFIX + digest).decode("ascii")
    return "b" + encoded.rstrip("=").lower()


def cid_for_digest(digest: bytes, codec: str = RAW) -> str:
    """CIDv1 (base32) from a 32-byte sha2-256 digest and a codec name (inverse of
    :func:`cid_digest` and :func:`cid_codec`)."""
    if len(digest) != 32:
        raise InvalidCID(f"a sha2-256 digest has 32 bytes, got {len(digest)}")
    if codec not in (RAW, DAG_PB):
        raise InvalidCID(f"unsupported codec {codec!r}: expected {RAW!r} or {DAG_PB!r}")
    return CID(_BASE, 1, codec, (SHA2_256, bytes(digest))).encode(_BASE)


def cid_to_bytes(cid: str | CID) -> bytes:
    """Binary form of a CID (version, codec and multihash; 36 bytes for a raw CIDv1)."""
    return bytes(parse_cid(cid))


def cid_from_bytes(data: bytes) -> str:
    """Text form (see :func:`format_cid`) of a binary CID made by :func:`cid_to_bytes`."""
    return format_cid(parse_cid(bytes(data)))


def cid_codec(cid: str | bytes | CID) -> str:
    """Name of the content codec of ``cid``: ``"raw"`` or ``"dag-pb"`` for our blobs."""
    return str(parse_cid(cid).codec.name)


def cid_digest(cid: str | bytes | CID) -> bytes:
    """The 32-byte sha2-256 digest inside ``cid``.

    Raises
    ------
    InvalidCID
        If ``cid`` does not parse or is hashed with something other than sha2-256.
    """
    return _sha256_digest(parse_cid(cid))


# Reading a CID's digest through multiformats costs some 50 µs; a CID is immutable, and a
# blob store asks for the same ones again and again. Failures are not cached.
@lru_cache(maxsize=8192)
def _sha256_digest(parsed: CID) -> bytes:
    if parsed.hashfun.name != SHA2_256:
        raise InvalidCID(
            f"{format_cid(parsed)} uses hash {parsed.hashfun.name}; "
            f"only {SHA2_256} CIDs are supported"
        )
    return bytes(parsed.raw_digest)


def verify_raw(cid: str | CID, data: bytes) -> bool:
    """True when ``data`` is the raw-block content of ``cid`` (its sha2-256 matches)."""
    return hashlib.sha256(data).digest() == cid_digest(cid)
