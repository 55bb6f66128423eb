"""`unwind_on_termination`: a kill unwinds the simulator instead of ending it mid-air."""

from __future__ import annotations

import signal
import threading

import pytest

from mcfl_chain._utils.process import unwind_on_termination


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_a_termination_signal_raises_inside_the_block_and_its_cleanup_runs(signum):
    before = signal.getsignal(signum)
    cleaned = []
    with pytest.raises(KeyboardInterrupt, match=f"stopped by {signal.Signals(signum).name}"):
        with unwind_on_termination():
            try:
                signal.raise_signal(signum)
            finally:
                cleaned.append(True)
    assert cleaned == [True]
    assert signal.getsignal(signum) is before  # the caller's handler is back


def test_outside_the_main_thread_the_block_runs_unchanged():
    seen: list[object] = []

    def target() -> None:
        with unwind_on_termination():
            seen.append(signal.getsignal(signal.SIGTERM))

    before = signal.getsignal(signal.SIGTERM)
    thread = threading.Thread(target=target)
    thread.start()
    thread.join(10)
    assert seen == [before]
