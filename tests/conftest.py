"""Shared test settings: hypothesis profiles sized for this 2-core machine; ``fake_cid``,
``FakeClock``; the ``restore_architectures`` fixture."""

import pytest
from hypothesis import HealthCheck, settings

from mcfl_chain.storage.cid import cid_for_bytes

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
