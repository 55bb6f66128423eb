"""Errors raised by every blob store.

Each failure a caller may want to handle differently has its own class; all derive
from :class:`StorageError`. :class:`StorageUnavailable` (and its subclass
:class:`StorageTimeout`) are the only transient ones: the stores retry them with a
bounded backoff before raising, the others are raised at once. :class:`NoPeers` is
a :class:`BlobNotFound` whose cause is the node's own isolation, not the blob.
"""

from __future__ import annotations


class StorageError(Exception):
    """Base class of every storage failure."""


class InvalidCID(StorageError, ValueError):
    """A CID string or binary CID does not parse, or uses a codec/hash we cannot verify."""


class BlobNotFound(StorageError, KeyError):
    """The store has no blob for this CID."""

    def __str__(self) -> str:
        # KeyError quotes its argument; keep the message readable.
        return str(self.args[0]) if self.args else "blob not found"


class NoPeers(BlobNotFound):
    """The store's node could not look for a blob on the network: no peer of its answers.

    Not the blob's fault, and it may pass: the node's link to the other nodes is cut,
    or they are all down. A caller should not hold it against the blob (retry once the
    node reaches a peer again, see :meth:`~mcfl_chain.storage.base.Storage.redial`).
    """


class CorruptBlob(StorageError):
    """The bytes read do not hash to the CID they were stored under."""


class BlobTooLarge(StorageError):
    """A blob is larger than the bound the caller allowed for the read."""


class StorageUnavailable(StorageError):
    """The backend cannot be reached (still failing after the bounded retries)."""


class StorageTimeout(StorageUnavailable):
    """The backend accepted the request but did not answer in time (after retries)."""
