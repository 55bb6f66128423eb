"""Content-addressed blob stores for update and model weights (SPEC §4).

Two backends behind one interface, :class:`Storage`:

- ``local:DIR`` — :class:`LocalStorage`, an embedded directory store shared safely by
  the processes of one machine (the default, :data:`DEFAULT_STORAGE`);
- ``ipfs:/ip4/127.0.0.1/tcp/PORT`` (or ``ipfs:http://127.0.0.1:PORT``) —
  :class:`IpfsStorage`, an IPFS node's HTTP RPC API (``mcfl-chain ipfs up`` starts one).

Both name a blob of at most 256 KiB by the same CIDv1 (raw, sha2-256, base32); larger
blobs get a dag-pb root CID in IPFS (see :mod:`mcfl_chain.storage.unixfs`). Every read
is verified against its CID and bounded in size.
"""

from __future__ import annotations

from mcfl_chain.storage.base import (
    DEFAULT_MAX_BLOB_BYTES,
    ExchangeStats,
    PeerHealth,
    RetryPolicy,
    Storage,
)
from mcfl_chain.storage.cid import (
    cid_codec,
    cid_digest,
    cid_for_bytes,
    cid_for_digest,
    cid_from_bytes,
    cid_to_bytes,
    normalize_cid,
    parse_cid,
)
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
from mcfl_chain.storage.ipfs import IpfsStorage
from mcfl_chain.storage.local import LocalStorage
from mcfl_chain.storage.unixfs import unixfs_cid_for_bytes

__all__ = [
    "DEFAULT_MAX_BLOB_BYTES",
    "DEFAULT_STORAGE",
    "BlobNotFound",
    "BlobTooLarge",
    "CorruptBlob",
    "ExchangeStats",
    "InvalidCID",
    "IpfsStorage",
    "LocalStorage",
    "NoPeers",
    "PeerHealth",
    "RetryPolicy",
    "Storage",
    "StorageError",
    "StorageTimeout",
    "StorageUnavailable",
    "cid_codec",
    "cid_digest",
    "cid_for_bytes",
    "cid_for_digest",
    "cid_from_bytes",
    "cid_to_bytes",
    "normalize_cid",
    "open_storage",
    "parse_cid",
    "unixfs_cid_for_bytes",
]

#: The embedded store used when no ``--storage`` is given: a directory under the
#: current working directory, shared by every worker started from it.
DEFAULT_STORAGE = "local:.mcfl/blobs"


def open_storage(spec: str = DEFAULT_STORAGE, **options: object) -> Storage:
    """Open the store a ``--storage`` string names.

    Parameters
    ----------
    spec
        ``local:DIR`` or ``ipfs:ADDRESS`` where ADDRESS is ``/ip4/127.0.0.1/tcp/PORT``
        or ``http://127.0.0.1:PORT``.
    **options
        Passed to the backend's constructor (e.g. ``max_blob_bytes``, ``timeout``).

    Returns
    -------
    Storage
        The opened store; close it (or use it as a context manager) when done.

    Raises
    ------
    StorageError
        If ``spec`` names no known backend or its address is malformed.
    """
    kind, sep, target = spec.partition(":")
    kind = kind.strip().lower()
    if not sep or not target.strip():
        raise StorageError(
            f"cannot read storage {spec!r}: expected local:DIR or ipfs:/ip4/127.0.0.1/tcp/PORT"
        )
    if kind == "local":
        return LocalStorage(target.strip(), **options)  # type: ignore[arg-type]
    if kind == "ipfs":
        return IpfsStorage(target.strip(), **options)  # type: ignore[arg-type]
    raise StorageError(
        f"unknown storage backend {kind!r} in {spec!r}: use local:DIR or "
        f"ipfs:/ip4/127.0.0.1/tcp/PORT"
    )
