"""Processes started by `_utils.forked`: forked from a warm interpreter, or new
interpreters where there is no forkserver; both must behave like `python -m`."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest

from mcfl_chain import __version__
from mcfl_chain._utils import forked
from mcfl_chain.simulation.runner import WORKER_PRELOAD


@pytest.fixture(params=["forkserver", "new interpreter"])
def how(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "new interpreter":
        monkeypatch.setattr(forked, "_FORKSERVER", False)
    return str(request.param)


def _start(
    module: str,
    args: list[str],
    log: Path,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
) -> forked.ChildProcess:
    # The simulation's preload: the same forkserver then serves the network tests.
    return forked.start_module(
        module,
        args,
        log=log,
        env={**os.environ, "PYTHONWARNINGS": "ignore", **(env or {})},
        cwd=cwd,
        preload=WORKER_PRELOAD,
    )


def test_the_command_runs_with_its_arguments_and_appends_to_its_log(
    how: str, tmp_path: Path
) -> None:
    log = tmp_path / "worker.log"
    log.write_text("earlier lines\n")
    process = _start("mcfl_chain", ["--version"], log)
    assert process.wait(timeout=120) == 0 and process.returncode == 0
    assert log.read_text() == f"earlier lines\nmcfl-chain, version {__version__}\n"


def test_the_child_sees_its_own_environment_not_the_servers(how: str, tmp_path: Path) -> None:
    log = tmp_path / "worker.log"
    process = _start("mcfl_chain", ["worker"], log, env={"MCFL_ROUNDS": "many"})
    assert process.wait(timeout=120) == 2  # click's usage error
    text = log.read_text()
    assert "Invalid value for '--rounds'" in text and "'many' is not a valid integer" in text


def test_relative_paths_are_read_from_the_given_directory(how: str, tmp_path: Path) -> None:
    (tmp_path / "data.json").write_text(json.dumps({"b": [1, 2]}))
    log = tmp_path / "out.log"
    process = _start("json.tool", ["--compact", "data.json"], log, cwd=tmp_path)
    assert process.wait(timeout=120) == 0
    assert log.read_text() == '{"b":[1,2]}\n'


def test_a_failing_module_exits_with_its_code_and_its_message_in_the_log(
    how: str, tmp_path: Path
) -> None:
    (tmp_path / "bad.json").write_text("{not json")
    log = tmp_path / "out.log"
    process = _start("json.tool", ["bad.json"], log, cwd=tmp_path)
    assert process.wait(timeout=120) == 1
    assert "Expecting property name" in log.read_text()


def test_wait_times_out_on_a_running_child_and_a_signal_ends_it(how: str, tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    process = _start("http.server", ["--bind", "127.0.0.1", "0"], log)
    try:
        with pytest.raises(subprocess.TimeoutExpired):
            process.wait(timeout=0.5)
        assert process.poll() is None and process.returncode is None
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=60) == -signal.SIGTERM
    finally:
        process.kill()
    process.kill()  # a finished process: nothing to signal, no error
