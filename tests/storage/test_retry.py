"""Bounded retries: transient failures are retried with backoff, permanent ones are not."""

from __future__ import annotations

import pytest
from conftest import FakeClock

from mcfl_chain.storage import (
    BlobNotFound,
    RetryPolicy,
    StorageError,
    StorageTimeout,
    StorageUnavailable,
)


class FlakyOperation:
    """Fails with the given errors, in order, then returns "ok"."""

    def __init__(self, *errors: StorageError) -> None:
        self.errors = list(errors)
        self.calls = 0

    def __call__(self) -> str:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return "ok"


def test_transient_failures_are_retried_until_success() -> None:
    # Prepare
    policy = RetryPolicy(attempts=4, initial_delay=0.1, multiplier=2, max_delay=1, jitter=0)
    operation = FlakyOperation(StorageUnavailable("down"), StorageTimeout("slow"))
    waits: list[float] = []

    # Execute
    result = policy.run(operation, "reading x", sleep=waits.append)

    # Assert: two failures, two growing waits, then success.
    assert result == "ok"
    assert operation.calls == 3
    assert waits == [0.1, 0.2]


def test_retries_are_bounded_and_keep_the_error_class() -> None:
    # Prepare
    policy = RetryPolicy(attempts=3, initial_delay=0.5, multiplier=10, max_delay=1, jitter=0)
    operation = FlakyOperation(*[StorageTimeout("no answer")] * 5)
    waits: list[float] = []

    # Execute
    with pytest.raises(StorageTimeout, match="reading x failed after 3 attempt") as caught:
        policy.run(operation, "reading x", sleep=waits.append)

    # Assert: capped waits, no fourth try, the cause kept.
    assert operation.calls == 3
    assert waits == [0.5, 1.0]
    assert isinstance(caught.value.__cause__, StorageTimeout)


@pytest.mark.parametrize("error", [BlobNotFound("gone"), StorageError("refused")])
def test_permanent_failures_are_not_retried(error: StorageError) -> None:
    # Prepare
    operation = FlakyOperation(error)
    waits: list[float] = []

    # Execute
    with pytest.raises(type(error)):
        RetryPolicy(attempts=5).run(operation, "reading x", sleep=waits.append)

    # Assert
    assert operation.calls == 1
    assert waits == []


def test_jitter_stays_within_its_fraction() -> None:
    policy = RetryPolicy(attempts=6, initial_delay=0.1, multiplier=2, max_delay=0.5, jitter=0.25)
    for _ in range(50):
        for wait, base in zip(policy.delays(), [0.1, 0.2, 0.4, 0.5, 0.5], strict=True):
            assert base <= wait <= base * 1.25


@pytest.mark.parametrize("kwargs", [{"attempts": 0}, {"initial_delay": -1}, {"multiplier": 0.5}])
def test_invalid_policies_are_refused(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        RetryPolicy(**kwargs)  # type: ignore[arg-type]


def test_a_service_gone_is_retried_for_a_bounded_time_and_each_retry_is_logged(caplog) -> None:
    # Prepare: a node that never answers, and a policy of 10 seconds.
    policy = RetryPolicy.for_duration(10.0, initial_delay=1.0, max_delay=4.0)
    operation = FlakyOperation(*[StorageUnavailable("connection refused")] * 100)
    clock = FakeClock()

    # Execute
    with caplog.at_level("WARNING", logger="mcfl_chain.storage"):
        with pytest.raises(StorageUnavailable, match=r"adding x failed after \d+ attempt"):
            policy.run(operation, "adding x", sleep=clock.sleep, clock=clock)

    # Assert: waits grow to the cap, never run past the bound, one log line per retry.
    assert clock.waits[:3] == pytest.approx([1.0, 2.0, 4.0], rel=0.25)
    assert 6.0 <= clock.now <= 10.0
    assert operation.calls == len(clock.waits) + 1
    retries = [r.getMessage() for r in caplog.records]
    assert len(retries) == len(clock.waits)
    assert all("connection refused" in m and "giving up after 10 s" in m for m in retries)


def test_a_service_back_within_the_bound_is_used() -> None:
    # Prepare
    policy = RetryPolicy.for_duration(60.0, initial_delay=1.0)
    operation = FlakyOperation(*[StorageTimeout("frozen")] * 5)
    clock = FakeClock()

    # Execute
    result = policy.run(operation, "reading x", sleep=clock.sleep, clock=clock)

    # Assert
    assert result == "ok" and operation.calls == 6
