"""Choosing a backend from a --storage string."""

from __future__ import annotations

from pathlib import Path

import pytest

from mcfl_chain.storage import (
    DEFAULT_STORAGE,
    IpfsStorage,
    LocalStorage,
    StorageError,
    open_storage,
)


def test_local_spec(tmp_path: Path) -> None:
    with open_storage(f"local:{tmp_path / 'blobs'}") as store:
        assert isinstance(store, LocalStorage)
        assert store.root == (tmp_path / "blobs").resolve()
        assert store.spec == f"local:{store.root}"


def test_default_is_the_local_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with open_storage() as store:
        assert DEFAULT_STORAGE.startswith("local:")
        assert isinstance(store, LocalStorage)
        assert store.root == (tmp_path / ".mcfl" / "blobs").resolve()


@pytest.mark.parametrize(
    "spec",
    [
        "ipfs:/ip4/127.0.0.1/tcp/5001",
        "ipfs:/ip4/127.0.0.1/tcp/5001/http",
        "ipfs:http://127.0.0.1:5001",
        "IPFS: http://127.0.0.1:5001/",
    ],
)
def test_ipfs_specs(spec: str) -> None:
    # Opening does not contact the node: a missing node shows on first use.
    with open_storage(spec) as store:
        assert isinstance(store, IpfsStorage)
        assert store.spec == "ipfs:/ip4/127.0.0.1/tcp/5001"


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("blobs", "expected local:DIR"),
        ("local:", "expected local:DIR"),
        ("s3:bucket", "unknown storage backend 's3'"),
        ("ipfs:127.0.0.1:5001", "cannot read the IPFS API address"),
        ("ipfs:/ip4/127.0.0.1/udp/5001", "cannot read the IPFS API address"),
    ],
)
def test_bad_specs(spec: str, message: str) -> None:
    with pytest.raises(StorageError, match=message):
        open_storage(spec)
