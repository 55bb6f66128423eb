"""The embedded local store: its layout on disk, several processes at once.

What every backend does (round trips, CIDs, missing, invalid and altered blobs, read
bounds) is checked in ``test_backend_contract.py``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from mcfl_chain.storage import (
    BlobNotFound,
    LocalStorage,
    StorageError,
    cid_for_bytes,
    unixfs_cid_for_bytes,
)


def run_python(code: str, *args: str) -> str:
    """Run ``code`` in a fresh interpreter (a separate process); return its stdout."""
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.mark.parametrize("size", [0, 1, 250_000, 5_000_000])
def test_a_blob_is_stored_once_in_one_file(local_store: LocalStorage, size: int) -> None:
    # Prepare
    data = os.urandom(size)

    # Execute
    cid = local_store.put(data)
    again = local_store.put(data)

    # Assert: named by its raw CID whatever its size; one shard directory, one file (the
    # round trip itself is in test_backend_contract.py, which every backend passes).
    assert cid == again == cid_for_bytes(data)
    assert len(list(local_store.root.rglob("*"))) == 2
    assert local_store.path_for(cid).read_bytes() == data


def test_dag_pb_cid_is_not_found_with_an_explanation(local_store: LocalStorage) -> None:
    # Prepare: the IPFS root CID of a big blob that the local store holds by raw CID.
    data = os.urandom(300_000)
    local_store.put(data)

    # Execute / Assert
    with pytest.raises(BlobNotFound, match="raw CIDv1 only"):
        local_store.get(unixfs_cid_for_bytes(data))


def test_a_second_process_reads_what_the_first_wrote(tmp_path: Path) -> None:
    # Prepare: another process writes a blob.
    root = tmp_path / "shared"
    cid = run_python(
        """
        import sys
        from mcfl_chain.storage import LocalStorage
        print(LocalStorage(sys.argv[1]).put(b"update weights" * 1000))
    """,
        str(root),
    ).strip()

    # Execute
    data = LocalStorage(root).get(cid)

    # Assert
    assert data == b"update weights" * 1000


def test_processes_writing_at_once_leave_a_consistent_store(tmp_path: Path) -> None:
    # Prepare: every process writes the same 20 shared blobs and 20 of its own, at once.
    root = tmp_path / "shared"
    writer = textwrap.dedent("""
        import sys
        from mcfl_chain.storage import LocalStorage
        store = LocalStorage(sys.argv[1])
        me = sys.argv[2]
        for i in range(20):
            store.put(f"shared-{i}".encode() * 20_000)
            store.put(f"own-{me}-{i}".encode() * 20_000)
    """)

    # Execute
    procs = [
        subprocess.Popen([sys.executable, "-c", writer, str(root), str(n)], stderr=subprocess.PIPE)
        for n in range(4)
    ]
    errors = [proc.communicate(timeout=120)[1] for proc in procs]

    # Assert: every blob verifies, and no temporary file is left behind.
    assert [proc.returncode for proc in procs] == [0] * 4, errors
    store = LocalStorage(root)
    expected = [f"shared-{i}".encode() * 20_000 for i in range(20)]
    expected += [f"own-{n}-{i}".encode() * 20_000 for n in range(4) for i in range(20)]
    for blob in expected:
        assert store.get(cid_for_bytes(blob)) == blob
    files = [p for p in root.rglob("*") if p.is_file()]
    assert len(files) == len(expected)
    assert not [p for p in files if p.name.startswith(".tmp-")]


def test_remove(local_store: LocalStorage) -> None:
    cid = local_store.put(b"old model")
    assert local_store.remove(cid)
    assert not local_store.has(cid)
    assert not local_store.remove(cid)


def test_pin_keeps_what_the_store_holds_and_refuses_the_rest(local_store: LocalStorage) -> None:
    # Prepare
    cid = local_store.put(b"an update this trainer published")
    absent = cid_for_bytes(b"never stored")

    # Execute
    local_store.pin(cid)

    # Assert: a local store never drops a blob, so holding it is being pinned.
    assert local_store.is_pinned(cid) and not local_store.is_pinned(absent)
    with pytest.raises(BlobNotFound, match="to pin"):
        local_store.pin(absent)


@pytest.mark.parametrize("where", ["shard", "file"])
def test_a_store_that_cannot_be_written_says_so(
    local_store: LocalStorage, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    # Prepare: the blob's shard directory cannot be created (a file holds its name), or
    # the directory refuses new files (read-only; chmod does not stop root, so the
    # refusal is simulated).
    data = b"weights"
    shard = local_store.path_for(cid_for_bytes(data)).parent
    if where == "shard":
        shard.write_text("")
    else:

        def refuse(*_args: object, **_kwargs: object) -> None:
            raise PermissionError(13, "Permission denied")

        monkeypatch.setattr("tempfile.mkstemp", refuse)

    # Execute / Assert: a StorageError naming the store and what to do, no OSError.
    with pytest.raises(StorageError, match="cannot write blob .* choose another --storage"):
        local_store.put(data)
