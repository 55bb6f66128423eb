"""Shared test settings: hypothesis profiles sized for this 2-core machine, a user cache
of the run's own; ``fake_cid``, ``FakeClock``, ``tiny_disk``; the
``restore_architectures`` fixture."""

import atexit
import contextlib
import gc
import itertools
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

# Four xdist workers share this machine's 2 cores: torch's default of one thread per
# core makes their threads spin against each other (3x the CPU for the same training
# here). One thread per test process and per process a test starts; tests about
# threads set their own.
os.environ.setdefault("OMP_NUM_THREADS", "1")

# One user cache for the whole run (XDG_CACHE_HOME: decoded datasets, npm packages
# installed outside a checkout), made by the first process and inherited by pytest-xdist
# workers and every process a test starts: the tests neither read the user's own cache
# nor leave anything in it, and a dataset is decoded once per run, not once per process.
_RUN_CACHE = "MCFL_TEST_RUN_CACHE"
if not os.environ.get(_RUN_CACHE):
    os.environ[_RUN_CACHE] = os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp(
        prefix="mcfl-test-cache-"
    )
    atexit.register(shutil.rmtree, os.environ[_RUN_CACHE], ignore_errors=True)

import pytest  # noqa: E402


def _controller(config: pytest.Config) -> bool:
    """Whether this process only hands tests to pytest-xdist workers (it runs none)."""
    return bool(getattr(config.option, "tx", None)) and not hasattr(config, "workerinput")


def pytest_configure(config: pytest.Config) -> None:
    if _controller(config):
        # Under pytest-xdist every worker loads ape's project manifest
        # (.build/__local__.json) when it starts, and one that finds it stale compiles and
        # rewrites it, unlocked, while the others read it. The controller compiles first,
        # so workers only read. It imports nothing the tests need (torch, hypothesis:
        # ~4 s before the workers can start).
        from ape import project

        project.load_contracts()
        return
    import torch
    from hypothesis import HealthCheck, settings

    torch.set_num_threads(1)
    # Chain calls take milliseconds each and vary with load: no per-example deadline.
    settings.register_profile(
        "mcfl",
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    settings.load_profile("mcfl")


def fake_cid(label: str) -> str:
    """A well-formed CIDv1 (raw, sha2-256, base32) of ``label``; its content need not exist.

    Import it with ``from conftest import fake_cid`` (``tests/`` is on ``sys.path``).
    """
    from mcfl_chain.storage.cid import cid_for_bytes

    return cid_for_bytes(label.encode())


class FakeClock:
    """Time that moves only when the code under test sleeps (retry and backoff tests).

    Call it for the time; pass ``sleep`` as the sleep function; ``waits`` lists the pauses.
    Import it with ``from conftest import FakeClock``.
    """

    def __init__(self) -> None:
        self.now = 0.0
        self.waits: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.waits.append(seconds)
        self.now += seconds


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node) -> None:
    # pytest-xdist sets a worker's own --dist to "no": the controller passes its value.
    node.workerinput["dist"] = node.config.getoption("dist")


# The folders whose tests drive outside programs (devnets, IPFS daemons, worker
# processes, browsers, whole CLI commands) rather than a pure layer or the contracts:
# `make check`, the inner loop, leaves them to `make test` (`-m "not integration"`).
# A test elsewhere that does the same sets ``pytestmark = pytest.mark.integration``.
INTEGRATION_FOLDERS = frozenset(
    {"chain", "storage", "worker", "host", "simulation", "network", "explorer", "cli"}
)
_TESTS = Path(__file__).resolve().parent


def _leaves_out_integration(markexpr: str) -> bool:
    """Whether ``-m markexpr`` deselects every integration test, whatever its other marks."""
    if "integration" not in markexpr:
        return False
    try:  # pytest's own parser (private: on any change, collect and let -m deselect)
        from _pytest.mark.expression import Expression

        expression = Expression.compile(markexpr)
    except Exception:
        return False
    others = sorted(set(re.findall(r"[A-Za-z_]\w*", markexpr)) - {"and", "or", "not"})
    others.remove("integration")
    for values in itertools.product((False, True), repeat=len(others)):
        marks = {**dict(zip(others, values, strict=True)), "integration": True}
        if expression.evaluate(_has(marks)):
            return False
    return True


def _has(marks: dict[str, bool]) -> Callable[..., bool]:
    return lambda name, /, **kwargs: marks.get(name, False)


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    # Not even importing the integration folders' modules when -m leaves them out (as
    # `make check` does) saves each worker about 5 s of collection.
    if collection_path.parent == _TESTS and collection_path.name in INTEGRATION_FOLDERS:
        if _leaves_out_integration(config.getoption("markexpr", "") or ""):
            return True
    return None


def pytest_itemcollected(item: pytest.Item) -> None:
    # Here rather than in pytest_collection_modifyitems: `-m` selects in that hook.
    path = item.path.resolve()
    # The hook sees every item of the session, also any outside tests/ that a run names.
    if path.is_relative_to(_TESTS) and path.relative_to(_TESTS).parts[0] in INTEGRATION_FOLDERS:
        item.add_marker(pytest.mark.integration)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # On pytest-xdist workers, spread the end-to-end tests (`slow`) over the workers and
    # start them first. --dist worksteal first gives each of the W workers a contiguous
    # block (the k-th of the idle ones len(pending) // (W - k) tests), then lets an idle
    # worker take the second half of the busiest one's queue: so each block is its share
    # of the slow tests, then short tests that can be taken from its end. (With all slow
    # tests first, one worker ran them all in turn.) Otherwise pytest's order is kept.
    workerinput = getattr(config, "workerinput", {})
    workers = workerinput.get("workercount", 0)
    if workers < 2 or workerinput.get("dist") != "worksteal":
        return
    slow = [item for item in items if item.get_closest_marker("slow")]
    fast = iter([item for item in items if not item.get_closest_marker("slow")])
    ordered: list[pytest.Item] = []
    left = len(items)
    for k in range(workers):
        size = left // (workers - k)
        left -= size
        share = slow[k::workers]
        ordered += share + list(itertools.islice(fast, max(0, size - len(share))))
    ordered += list(fast)
    assert len(ordered) == len(items)
    items[:] = ordered


@pytest.fixture(scope="session")
def compute_device():
    """Where the batched-compute tests train and score: ``$MCFL_TEST_DEVICE``, ``cpu``
    unless set (CI has no GPU; set it to ``cuda`` to run the same tests once on a GPU
    machine). Asking for ``cuda`` where torch sees none fails, not skips."""
    from mcfl_chain.compute.device import prepare_device, resolve_device

    device = resolve_device(os.environ.get("MCFL_TEST_DEVICE", "cpu"))
    prepare_device(device)
    return device


@pytest.fixture
def restore_architectures():
    """Undo the registrations of tasks' models a test makes (the registry is global)."""
    from mcfl_chain.learning.codec import expected_layout
    from mcfl_chain.learning.models import ARCHITECTURES

    saved = dict(ARCHITECTURES)
    yield
    ARCHITECTURES.clear()
    ARCHITECTURES.update(saved)
    expected_layout.cache_clear()


@contextlib.contextmanager
def tiny_disk(path: Path) -> Iterator[Callable[[], Path]]:
    """A 64 KiB tmpfs mounted at ``path`` (created) for the block; yields ``fill``, which
    fills it up and returns the filler file (delete it to free the space). Fails the
    test where a tmpfs cannot be mounted (run the suite as root, as CI does): the suite
    never skips.

    Import it with ``from conftest import tiny_disk``.
    """
    path.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        pytest.fail("mounting a tmpfs to fill up needs root: run the suite as root")
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(path)], capture_output=True
    )
    if mounted.returncode != 0:
        pytest.fail(f"cannot mount a tmpfs: {mounted.stderr.decode().strip()}")

    def fill() -> Path:
        filler = path / "filler"
        with contextlib.suppress(OSError), open(filler, "ab", buffering=0) as f:
            while True:
                f.write(b"\0" * 1024)
        return filler

    try:
        yield fill
    finally:
        subprocess.run(["umount", str(path)], check=True)


def pytest_collection_finish(session: pytest.Session) -> None:
    # Everything imported and collected so far (torch, web3, py-evm, the test modules)
    # lives as long as the process: frozen, Python's full collections during the tests,
    # and pytest's own at the end, no longer walk it.
    gc.collect()
    gc.freeze()
