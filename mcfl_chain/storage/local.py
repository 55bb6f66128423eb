"""An embedded content-addressed store: one file per blob in a directory.

A blob is stored under its raw CIDv1 (``bafkrei...``) whatever its size, in a
sub-directory named by the CID's last two characters so no directory grows huge.
Writes go to a temporary file in the same directory and are renamed into place, so
several processes may write (even the same blob) at once and a reader never sees a
partial file. Reads re-hash the file: a file edited or truncated on disk is reported as
:class:`CorruptBlob`, never returned.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

from mcfl_chain.storage.base import DEFAULT_MAX_BLOB_BYTES, Storage
from mcfl_chain.storage.cid import RAW, cid_digest, cid_for_bytes, format_cid, parse_cid
from mcfl_chain.storage.errors import BlobNotFound, BlobTooLarge, CorruptBlob, StorageError

_TMP_PREFIX = ".tmp-"


class LocalStorage(Storage):
    """Blob store in the directory ``root`` (created if missing).

    Parameters
    ----------
    root
        Directory holding the blobs; several processes may share it.
    max_blob_bytes
        Default read bound (see :meth:`Storage.get`).
    fsync
        Flush each new blob to disk before it becomes visible (survives power loss;
        turn off only for throw-away stores).
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        max_blob_bytes: int = DEFAULT_MAX_BLOB_BYTES,
        fsync: bool = True,
    ) -> None:
        self.root = Path(root).expanduser().resolve()
        self.max_blob_bytes = max_blob_bytes
        self.fsync = fsync
        try:
            self.root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StorageError(
                f"cannot create the local blob store at {self.root}: {exc}; "
                f"choose another directory with --storage local:DIR"
            ) from exc

    @property
    def spec(self) -> str:
        return f"local:{self.root}"

    def describe(self) -> str:
        return f"local directory store at {self.root}"

    def path_for(self, cid: str) -> Path:
        """Where the blob named ``cid`` lives (whether or not it exists).

        Raises
        ------
        InvalidCID
            If ``cid`` does not parse or is not sha2-256.
        BlobNotFound
            If ``cid`` is not a raw-codec CID: this store names blobs by raw CID only.
        """
        parsed = parse_cid(cid)
        cid_digest(parsed)  # sha2-256 only: anything else cannot be verified
        if parsed.version != 1 or parsed.codec.name != RAW:
            raise BlobNotFound(
                f"{format_cid(parsed)} is a CIDv{parsed.version} {parsed.codec.name} CID; the "
                f"local store names blobs by their raw CIDv1 only (IPFS gives a dag-pb root to "
                f"blobs over 256 KiB): read it from the IPFS store that wrote it"
            )
        text = format_cid(parsed)
        return self.root / text[-2:] / text

    def put(self, data: bytes) -> str:
        data = bytes(data)
        cid = cid_for_bytes(data)
        target = self.path_for(cid)
        if target.is_file() and target.stat().st_size == len(data):
            return cid
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=_TMP_PREFIX, dir=target.parent)
        except OSError as exc:
            raise StorageError(
                f"cannot write blob {cid} to the local store {self.root} "
                f"({exc.strerror or exc}): make it writable or choose another --storage"
            ) from exc
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(data)
                if self.fsync:
                    out.flush()
                    os.fsync(out.fileno())
            os.chmod(tmp, 0o644)
            # Atomic on POSIX: concurrent writers of the same blob all rename identical
            # bytes into place; readers see the old file or the new one, never a mix.
            os.replace(tmp, target)
        except OSError as exc:
            Path(tmp).unlink(missing_ok=True)
            raise StorageError(f"cannot write blob {cid} to {target}: {exc}") from exc
        return cid

    def get(self, cid: str, max_bytes: int | None = None) -> bytes:
        bound = self._bound(max_bytes)
        path = self.path_for(cid)
        try:
            with open(path, "rb") as blob:
                size = os.fstat(blob.fileno()).st_size
                if size > bound:
                    raise BlobTooLarge(
                        f"blob {cid} has {size} bytes, more than the "
                        f"{bound}-byte bound; raise max_bytes if it is expected"
                    )
                # The file's size, not the bound: read(n) allocates n bytes up front
                # (a 256 MB buffer per LeNet blob of 250 kB, many threads at once).
                data = blob.read(size + 1)
        except FileNotFoundError:
            raise BlobNotFound(f"blob {cid} is not in the local store {self.root}") from None
        except OSError as exc:
            raise StorageError(f"cannot read blob {cid} from {path}: {exc}") from exc
        if len(data) > bound:  # grew between stat and read: a writer replaced it oddly
            raise BlobTooLarge(f"blob {cid} is larger than the {bound}-byte bound")
        if hashlib.sha256(data).digest() != cid_digest(cid):
            raise CorruptBlob(
                f"blob file {path} does not match its CID {cid} (sha2-256 "
                f"differs): the file was altered on disk; delete it and fetch "
                f"or write the blob again"
            )
        return data

    def has(self, cid: str) -> bool:
        try:
            return self.path_for(cid).is_file()
        except BlobNotFound:
            return False

    def remove(self, cid: str) -> bool:
        """Delete the blob named ``cid``; False if it was not there."""
        try:
            self.path_for(cid).unlink()
        except (FileNotFoundError, BlobNotFound):
            return False
        return True
