"""The worker's persistent state: atomic saves, ownership checks, crash-safe event log."""

import errno
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import mcfl_chain
from mcfl_chain.worker.state import StateError, WorkerState, lock_state_dir

ME = "0x00000000000000000000000000000000000000a1"


def test_state_survives_a_reopen(tmp_path):
    # Prepare
    state = WorkerState.open(tmp_path, ME, deployment_block=4)
    state.set_chosen(2, [b"\x01" * 32])
    state.set_uploaded(2, b"\x01" * 32, "bafkcid")
    state.record([{"event": "X", "block": 5}], head=6)
    # Execute
    again = WorkerState.open(tmp_path, ME, deployment_block=4)
    # Assert
    assert again.chosen_for(2) == [b"\x01" * 32]
    assert again.chosen_for(3) is None
    assert again.uploaded_cid(2, b"\x01" * 32) == "bafkcid"
    assert again.last_block == 6
    assert again.replay() == [{"event": "X", "block": 5}]


def test_a_state_dir_of_another_trainer_is_refused(tmp_path):
    # Prepare
    WorkerState.open(tmp_path, ME, deployment_block=4)

    # Execute / Assert: another trainer's directory is in use by someone else.
    with pytest.raises(StateError, match="use another --state-dir"):
        WorkerState.open(tmp_path, "0x" + "b2" * 20, deployment_block=4)


def test_a_state_of_another_deployment_is_set_aside_and_started_over(tmp_path):
    # Prepare: a state that read up to block 40 of the deployment made at block 4.
    old = WorkerState.open(tmp_path, ME, deployment_block=4)
    old.set_chosen(2, [b"\x01" * 32])
    old.record([{"event": "X", "block": 5}], head=40)

    # Execute
    state = WorkerState.open(tmp_path, ME, deployment_block=9)

    # Assert: a fresh state that reads the new deployment from its block; the old
    # files are kept aside, renamed.
    assert (state.last_block, state.chosen, state.replay()) == (8, {}, [])
    assert len(list(tmp_path.glob("state.json.damaged-*"))) == 1
    assert len(list(tmp_path.glob("events.jsonl.damaged-*"))) == 1


def test_replay_drops_events_past_last_block_and_a_torn_line(tmp_path):
    # Prepare: a crash after appending events but before moving last_block,
    # and a line cut in the middle.
    state = WorkerState.open(tmp_path, ME, deployment_block=0)
    state.record([{"event": "A", "block": 1}], head=1)
    with open(state.events_path, "a") as f:
        f.write(json.dumps({"event": "B", "block": 2}) + "\n")
        f.write('{"event": "C", "blo')
    # Execute
    kept = WorkerState.open(tmp_path, ME, deployment_block=0).replay()
    state.record([{"event": "D", "block": 2}], head=2)
    # Assert: B (past last_block) and the torn C are gone; D follows cleanly.
    assert kept == [{"event": "A", "block": 1}]
    assert state.replay() == [{"event": "A", "block": 1}, {"event": "D", "block": 2}]


@pytest.mark.parametrize(
    "text",
    ["", "{not json", '{"address": "0x00000000000000000000000000000000000000a1", "deploy', "[]"],
    ids=["empty", "invalid", "half-written", "not-a-state"],
)
def test_an_unreadable_state_file_is_set_aside_and_rebuilt(tmp_path, text):
    # Prepare: a state file cut short by a crash (or never a state), and its events log.
    (tmp_path / "state.json").write_text(text)
    (tmp_path / "events.jsonl").write_text(json.dumps({"event": "A", "block": 3}) + "\n")

    # Execute
    state = WorkerState.open(tmp_path, ME, deployment_block=3)

    # Assert: the worker starts over from the deployment block; nothing is deleted.
    assert state.last_block == 2 and state.replay() == []
    (aside,) = tmp_path.glob("state.json.damaged-*")
    assert aside.read_text() == text
    assert len(list(tmp_path.glob("events.jsonl.damaged-*"))) == 1


@pytest.mark.parametrize("damage", ["cut", "lost"])
def test_an_events_log_that_lost_events_is_set_aside_and_read_again(tmp_path, damage):
    # Prepare: two batches of events recorded, then the log cut short or deleted.
    state = WorkerState.open(tmp_path, ME, deployment_block=1)
    state.record([{"event": "A", "block": 2}, {"event": "B", "block": 2}], head=3)
    state.record([{"event": "C", "block": 5}], head=6)
    if damage == "cut":
        lines = state.events_path.read_text().splitlines(keepends=True)
        state.events_path.write_text(lines[0])
    else:
        state.events_path.unlink()

    # Execute
    again = WorkerState.open(tmp_path, ME, deployment_block=1)
    replayed = again.replay()

    # Assert: nothing partial is replayed, the position goes back to the deployment,
    # and a cut log is kept aside.
    assert replayed == []
    assert (again.last_block, again.events_recorded) == (0, 0)
    assert WorkerState.open(tmp_path, ME, deployment_block=1).last_block == 0
    assert len(list(tmp_path.glob("events.jsonl.damaged-*"))) == (damage == "cut")


def test_a_state_directory_that_cannot_be_created_says_so(tmp_path):
    # Prepare: the directory's parent is a regular file.
    (tmp_path / "file").write_text("")

    # Execute / Assert
    with pytest.raises(StateError, match="cannot create the state directory .*--state-dir"):
        WorkerState.open(tmp_path / "file" / "state", ME, deployment_block=0)


@pytest.mark.parametrize(
    "content",
    [
        b'{"address": "\xff\xfe", "deployment_block": 3, "last_block": 9}',
        json.dumps(
            {"address": ME, "deployment_block": 3, "last_block": 9, "chosen": {"2": ["zz"]}}
        ).encode(),
        json.dumps(
            {"address": ME, "deployment_block": 3, "last_block": 9, "chosen": {"2": [7]}}
        ).encode(),
    ],
    ids=["not-utf8", "non-hex-model-id", "non-string-model-id"],
)
def test_a_state_file_with_bad_bytes_or_model_ids_is_set_aside_and_rebuilt(tmp_path, content):
    # Prepare: a state file that is not UTF-8, or valid JSON whose chosen model ids
    # are not hex (both used to end the worker with a traceback, at open or later).
    (tmp_path / "state.json").write_bytes(content)

    # Execute
    state = WorkerState.open(tmp_path, ME, deployment_block=3)

    # Assert: started over from the deployment block; the file kept aside, unchanged.
    assert (state.last_block, state.chosen_for(2)) == (2, None)
    (aside,) = tmp_path.glob("state.json.damaged-*")
    assert aside.read_bytes() == content


def test_temp_files_of_dead_workers_are_removed_and_a_failed_save_leaves_none(
    tmp_path, monkeypatch
):
    # Prepare: temp files a crash during a save left (a process that has ended), and
    # one of a process still running (which may be saving right now).
    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    ended.wait()
    running = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    stale = tmp_path / f".state.json.{ended.pid}.tmp"
    live = tmp_path / f".state.json.{running.pid}.tmp"
    for path in (stale, live):
        path.write_text('{"address": "0x')
    try:
        # Execute
        state = WorkerState.open(tmp_path, ME, deployment_block=0)
        kept = sorted(p.name for p in tmp_path.glob(".*.tmp"))
        monkeypatch.setattr(os, "fsync", lambda fd: _raise(OSError(errno.ENOSPC, "No space")))
        with pytest.raises(StateError, match="cannot write .*state.json"):
            state.set_chosen(1, [b"\x01" * 32])
    finally:
        running.kill()
        running.wait()

    # Assert: the ended process's temp file is gone, the running one's is kept, and the
    # failed save removed its own.
    assert kept == [live.name]
    assert sorted(p.name for p in tmp_path.glob(".*.tmp")) == [live.name]


def _raise(exc):
    raise exc


def test_a_second_worker_on_a_state_directory_in_use_is_refused_naming_the_first(tmp_path):
    # Prepare: another process (a first worker) holds the state directory.
    code = (
        "import sys, time; from pathlib import Path\n"
        "from mcfl_chain.worker.state import lock_state_dir\n"
        "lock_state_dir(Path(sys.argv[1])); print('locked', flush=True); time.sleep(60)\n"
    )
    root = str(Path(mcfl_chain.__file__).parent.parent)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])}
    first = subprocess.Popen(
        [sys.executable, "-c", code, str(tmp_path)], stdout=subprocess.PIPE, text=True, env=env
    )
    try:
        assert first.stdout is not None and first.stdout.readline() == "locked\n"

        # Execute / Assert: refused in one line naming the first worker's PID ...
        with pytest.raises(StateError) as refused:
            lock_state_dir(tmp_path)
        assert f"PID {first.pid}" in str(refused.value) and "\n" not in str(refused.value)
    finally:
        first.kill()
        first.wait()
    # ... and taken once that worker has ended; taking it again in one process is a no-op.
    lock_state_dir(tmp_path)
    lock_state_dir(tmp_path)


def test_an_events_log_that_is_not_text_is_set_aside_and_read_again(tmp_path):
    # Prepare: one event recorded, then the log overwritten with bytes that are not UTF-8.
    state = WorkerState.open(tmp_path, ME, deployment_block=1)
    state.record([{"event": "A", "block": 2}], head=3)
    state.events_path.write_bytes(b"\xff\xfe\x00garbage\n")

    # Execute
    replayed = WorkerState.open(tmp_path, ME, deployment_block=1).replay()

    # Assert: nothing replayed, read again from the deployment; the log kept aside.
    assert replayed == [] and WorkerState.open(tmp_path, ME, deployment_block=1).last_block == 0
    assert len(list(tmp_path.glob("events.jsonl.damaged-*"))) == 1
