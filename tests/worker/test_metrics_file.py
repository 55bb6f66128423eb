"""Metrics lines are appended whole: a full disk or a torn line never glues two records."""

import errno
import json
import os

import pytest
from conftest import tiny_disk

from mcfl_chain.worker.metrics_file import append_line
from mcfl_chain.worker.state import StateError


def test_a_full_disk_leaves_no_torn_line_and_says_so_in_one_line(tmp_path):
    # Prepare: a metrics file with one line, on a disk then filled up; the next record
    # (10 KB) fits in part only in the file's last page.
    metrics = tmp_path / "disk" / "metrics.jsonl"
    big = {"round": 1, "aggregations": ["x" * 10_000]}
    with tiny_disk(tmp_path / "disk") as fill:
        append_line(metrics, {"round": 0})
        filler = fill()

        # Execute
        with pytest.raises(StateError) as refused:
            append_line(metrics, big)
        after_failure = metrics.read_text()
        filler.unlink()
        append_line(metrics, big)

        # Assert: one line naming the file and the full disk; the file as it was; once
        # space is freed the record follows the first on a line of its own.
        message = str(refused.value)
        assert str(metrics) in message and "the disk is full" in message
        assert "\n" not in message
        assert after_failure == '{"round": 0}\n'
        assert [json.loads(line) for line in metrics.read_text().splitlines()] == [
            {"round": 0},
            big,
        ]


def test_a_write_cut_short_is_taken_back(tmp_path, monkeypatch):
    # Prepare: writes that put half the line on disk, then find the disk full.
    metrics = tmp_path / "metrics.jsonl"
    append_line(metrics, {"round": 0})
    real_write = os.write

    def half_then_full(fd, data):
        if len(data) > 4:
            return real_write(fd, data[: len(data) // 2])
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "write", half_then_full)

    # Execute / Assert
    with pytest.raises(StateError, match="the disk is full"):
        append_line(metrics, {"round": 1, "accuracy": 0.5})
    assert metrics.read_text() == '{"round": 0}\n'


@pytest.mark.parametrize(
    "tail, kept",
    [('{"round": 1, "acc', [{"round": 0}, {"round": 2}]), ('{"round": 1}', None)],
    ids=["torn", "whole-without-newline"],
)
def test_a_torn_last_line_is_set_aside_before_the_next_append(tmp_path, tail, kept):
    # Prepare: a file whose last line was cut by a crash (or lacks only its newline).
    metrics = tmp_path / "metrics.jsonl"
    metrics.write_text('{"round": 0}\n' + tail)

    # Execute
    append_line(metrics, {"round": 2})

    # Assert: the new record is on a line of its own; a torn tail is kept aside.
    lines = [json.loads(line) for line in metrics.read_text().splitlines()]
    torn = list(tmp_path.glob("metrics.jsonl.torn-*"))
    if kept is None:
        assert lines == [{"round": 0}, {"round": 1}, {"round": 2}] and torn == []
    else:
        assert lines == kept and [p.read_text() for p in torn] == [tail]
