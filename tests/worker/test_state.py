"""The worker's persistent state: atomic saves, ownership checks, crash-safe event log."""

import json

import pytest

from mcfl_chain.worker.state import StateError, WorkerState

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


def test_a_state_dir_of_another_trainer_or_deployment_is_refused(tmp_path):
    WorkerState.open(tmp_path, ME, deployment_block=4)
    with pytest.raises(StateError, match="use another --state-dir"):
        WorkerState.open(tmp_path, "0x" + "b2" * 20, deployment_block=4)
    with pytest.raises(StateError, match="block 4"):
        WorkerState.open(tmp_path, ME, deployment_block=9)


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


def test_a_corrupt_state_file_says_what_to_do(tmp_path):
    (tmp_path / "state.json").write_text("{not json")
    with pytest.raises(StateError, match="move it away"):
        WorkerState.open(tmp_path, ME, deployment_block=0)
