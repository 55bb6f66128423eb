"""Storage fixtures: a real js-ipfs daemon for the session, stores opened on it.

To share the daemon with other suites, move ``ipfs_node`` to ``tests/conftest.py``; to
run one of their own, they call ``mcfl_chain.storage.daemon.running_ipfs``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from mcfl_chain._utils.process import ServiceState
from mcfl_chain.storage import IpfsStorage, LocalStorage, RetryPolicy
from mcfl_chain.storage.daemon import start_ipfs, stop_ipfs, storage_spec

# Short waits keep the failure tests quick (a missing blob costs FETCH_TIMEOUT), yet long
# enough for the node to find its own blocks on a machine the other workers load.
FETCH_TIMEOUT = 2.0
FAST_RETRY = RetryPolicy(attempts=3, initial_delay=0.05, max_delay=0.1)


@pytest.fixture(scope="session")
def ipfs_node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServiceState]:
    """A real, offline js-ipfs daemon on a free loopback port, stopped by PID at the end."""
    repo = tmp_path_factory.mktemp("ipfs-node")
    state = start_ipfs(repo)
    try:
        yield state
    finally:
        stop_ipfs(repo)


@pytest.fixture(scope="session")
def ipfs_repo(ipfs_node: ServiceState) -> Path:
    """The session daemon's IPFS repository (where its blocks live on disk)."""
    return Path(ipfs_node.log).parent / "ipfs-repo"


@pytest.fixture
def ipfs_store(ipfs_node: ServiceState) -> Iterator[IpfsStorage]:
    """An IPFS store on the session daemon with short timeouts."""
    with IpfsStorage(
        storage_spec(ipfs_node).removeprefix("ipfs:"),
        timeout=10.0,
        fetch_timeout=FETCH_TIMEOUT,
        has_timeout=1.0,
        retry=FAST_RETRY,
    ) as store:
        yield store


@pytest.fixture
def local_store(tmp_path: Path) -> LocalStorage:
    """A local store in a fresh directory."""
    return LocalStorage(tmp_path / "blobs")
