"""``python -m MODULE ARGS`` started as a fork of a warm interpreter.

A worker's interpreter spends about 4 s of CPU importing torch, web3 and this package
before it does anything; a 16-trainer simulation pays that 16 times, about a tenth of a
run's CPU on two cores. The standard library's forkserver imports those modules once
and forks each process from that state, so a simulation's workers start in a few
milliseconds. Each one then runs the module exactly as ``python -m`` would, with its own
arguments, environment, working directory and log file; the modules' code cannot tell
the difference (what a fork shares: the imported modules, and torch's default random
generator state, which a fresh interpreter also starts from; Python's ``random``
reseeds itself after a fork).

Where the platform has no forkserver (Windows), each process is a new interpreter.
"""

from __future__ import annotations

import multiprocessing
import os
import runpy
import signal
import subprocess
import sys
import warnings
from collections.abc import Mapping, Sequence
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Protocol

_FORKSERVER = "forkserver" in multiprocessing.get_all_start_methods()


class ChildProcess(Protocol):
    """What callers may do with a started process: the part of
    :class:`subprocess.Popen` they use, which Popen itself satisfies."""

    @property
    def pid(self) -> int: ...

    @property
    def returncode(self) -> int | None: ...

    def poll(self) -> int | None: ...

    def wait(self, timeout: float | None = None) -> int: ...

    def send_signal(self, sig: int) -> None: ...

    def kill(self) -> None: ...


class ForkedProcess:
    """A process forked by the forkserver, seen through Popen's interface.

    Exit codes follow Popen's: the code passed to ``sys.exit``, 1 after an uncaught
    exception (its traceback goes to the log), ``-N`` when signal N ended it.
    """

    def __init__(self, process: BaseProcess, command: Sequence[str]) -> None:
        self._process = process
        self._command = list(command)

    @property
    def pid(self) -> int:
        assert self._process.pid is not None  # set once started
        return self._process.pid

    @property
    def returncode(self) -> int | None:
        return self._process.exitcode

    def poll(self) -> int | None:
        return self._process.exitcode

    def wait(self, timeout: float | None = None) -> int:
        """Wait for the exit code; :class:`subprocess.TimeoutExpired` after ``timeout``."""
        self._process.join(timeout)
        code = self._process.exitcode
        if code is None:
            raise subprocess.TimeoutExpired(self._command, timeout or 0.0)
        return code

    def send_signal(self, sig: int) -> None:
        if self._process.exitcode is None:
            os.kill(self.pid, sig)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


def start_module(
    module: str,
    args: Sequence[str],
    *,
    log: Path,
    env: Mapping[str, str],
    cwd: Path | None = None,
    preload: Sequence[str] = (),
) -> ChildProcess:
    """Start ``python -m module *args`` with stdout and stderr appended to ``log``,
    stdin from /dev/null, exactly the environment ``env`` and working directory ``cwd``
    (default: the current one).

    ``preload`` names the modules the forkserver imports before its first fork; it
    takes effect on the first call of the process only (the forkserver then runs until
    this process exits).
    """
    command = [sys.executable, "-m", module, *args]
    directory = str(cwd or Path.cwd())
    if not _FORKSERVER:
        with open(log, "ab") as out:
            return subprocess.Popen(
                command,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=dict(env),
                cwd=directory,
            )
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(list(preload))
    process = context.Process(
        target=_run_module,
        args=(module, list(args), str(log), dict(env), directory),
        name=f"{module} {' '.join(args[:1])}".strip(),
        # A daemon is terminated, not waited for, when its parent's interpreter exits
        # without stopping it (a simulation that fails with an exception).
        daemon=True,
    )
    process.start()
    return ForkedProcess(process, command)


def _run_module(module: str, args: list[str], log: str, env: dict[str, str], cwd: str) -> None:
    """In the forked child: become ``python -m module *args``."""
    descriptor = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    os.dup2(descriptor, 1)
    os.dup2(descriptor, 2)
    os.close(descriptor)
    os.environ.clear()
    os.environ.update(env)
    os.chdir(cwd)
    # An interpreter reads PYTHONWARNINGS when it starts; this one started earlier, with
    # its parent's options. Apply the child's own, as its start-up would have.
    warnings.resetwarnings()
    options = [option for option in env.get("PYTHONWARNINGS", "").split(",") if option]
    warnings._processoptions(options)  # type: ignore[attr-defined]
    sys.argv = [module, *args]  # run_module puts the module's file first, as -m does
    runpy.run_module(module, run_name="__main__", alter_sys=True)
