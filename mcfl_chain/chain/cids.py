"""CIDs as the contracts take them: the 36-byte binary CIDv1 (raw or dag-pb, sha2-256).

CIDs cross the Python API as strings (multibase, usually base32 ``bafk...``); the
contracts store the digest and emit the binary form in events.
"""

from __future__ import annotations

import base64

from multiformats import CID

RAW = 0x55
DAG_PB = 0x70
SHA2_256 = 0x12


def cid_to_bytes(cid: str) -> bytes:
    """Binary form of ``cid`` for a contract call.

    Parameters
    ----------
    cid
        A CIDv1 string with the raw or dag-pb codec and a sha2-256 multihash.

    Returns
    -------
    bytes
        The 36-byte binary CID.

    Raises
    ------
    ValueError
        If ``cid`` is not such a CID.
    """
    try:
        parsed = CID.decode(cid)
    except Exception as exc:
        raise ValueError(f"{cid!r} is not a CID: {exc}") from exc
    if (
        parsed.version != 1
        or parsed.codec.code not in (RAW, DAG_PB)
        or parsed.hashfun.code != SHA2_256
    ):
        raise ValueError(
            f"{cid!r}: the contracts accept CIDv1 with the raw or dag-pb codec and a "
            f"sha2-256 digest (got v{parsed.version}, {parsed.codec.name}, "
            f"{parsed.hashfun.name}); add the file with cid-version 1"
        )
    return bytes(parsed)


def cid_from_bytes(data: bytes) -> str | None:
    """Base32 CIDv1 string of a binary CID read from the chain, None for empty bytes."""
    if not data:
        return None
    data = bytes(data)
    if len(data) == 36 and data[:4] in _CONTRACT_FORMS:
        # Every event carries one: spelled out here, it costs about 1 % of multiformats'
        # generic decoding (tests check both agree). Multibase base32 is "b" + RFC 4648
        # base32, lower case, unpadded.
        return "b" + base64.b32encode(data).decode("ascii").lower().rstrip("=")
    return str(CID.decode(data).set(base="base32"))


# The contracts' binary CIDs (cid_to_bytes): version 1, raw or dag-pb, sha2-256, 32 bytes;
# each varint below 0x80, so one byte each.
_CONTRACT_FORMS = frozenset(bytes([1, codec, SHA2_256, 32]) for codec in (RAW, DAG_PB))
