"""The host's memory helpers on this machine's C library."""

from __future__ import annotations

import os
import sys

import pytest

from mcfl_chain._utils.memory import SharedCollector, limit_malloc_arenas, resident_mb


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc, sets glibc")
def test_resident_memory_is_read_and_the_arena_limit_is_taken() -> None:
    memory = resident_mb()
    assert memory is not None
    now, peak = memory
    assert 0 < now <= peak
    # 8 per core is glibc's own default, so this changes nothing for later tests
    assert limit_malloc_arenas(8 * (os.cpu_count() or 1))


def test_a_shared_collector_collects_for_all_threads_at_most_once_an_interval():
    # Prepare: an unreachable cycle, and a collector of a long interval
    import gc
    import threading
    import weakref

    class Node:
        pass

    def cycle() -> weakref.ref[Node]:
        a, b = Node(), Node()
        a.other, b.other = b, a  # type: ignore[attr-defined]
        return weakref.ref(a)

    collect = SharedCollector(interval=3600.0)
    gc.disable()  # only the collector collects here
    try:
        first = cycle()

        # Execute: many threads at once, then a new cycle
        threads = [threading.Thread(target=collect) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        second = cycle()
        collect()

        # Assert: one collection freed the first cycle; the second waits for the interval
        assert collect.runs == 1 and first() is None and second() is not None
    finally:
        gc.enable()


def test_a_hosts_trainers_share_one_record_an_event_and_their_dags_keep_it():
    # Prepare: the same decoded events, as a host's shared reads hand them to each trainer
    from types import MappingProxyType

    from mcfl_chain.chain.events import ChainEvent
    from mcfl_chain.dag.events import apply_events, event_record
    from mcfl_chain.dag.graph import ModelDAG
    from mcfl_chain.host.chain import SharedRecords

    tx = "0x" + "77" * 32
    events = [
        ChainEvent("PhaseChanged", 7, 0, tx, {"round": 1, "phase": 1, "quorum": 2}),
        ChainEvent(
            "TrainerVoted",
            7,
            1,
            tx,
            {"round": 1, "trainerId": 2, "phase": 1, "counted": True, "votes": 1, "voters": 1},
        ),
        ChainEvent(
            "UpdateProposed",
            7,
            2,
            tx,
            {
                "updateId": 9,
                "parent": b"\x00" * 32,
                "trainerId": 2,
                "round": 1,
                "proposer": "0x" + "22" * 20,
                "cid": "bafy-update",
                "numSamples": 30,
            },
        ),
    ]
    records = SharedRecords()

    # Execute: two trainers sync the same blocks, one of them twice over
    first, second = records(events), records(list(events))
    again = records(events[1:])
    dags = [ModelDAG(), ModelDAG()]
    apply_events(dags[0], first)
    apply_events(dags[1], second)

    # Assert: the records are event_record's, made once: the same objects in both DAGs
    assert first == [event_record(e) for e in events]
    assert all(a is b for a, b in zip(first, second, strict=True))
    assert again[0] is first[1]
    assert dags[0].votes[0] is dags[1].votes[0] is first[1]
    assert dags[0].phases[0] is dags[1].phases[0] is first[0]
    # and one proposal object for every DAG of the host, the one a plain record gives
    assert dags[0].updates[9] is dags[1].updates[9]
    alone = ModelDAG()
    apply_events(alone, [dict(first[2])])
    assert alone.updates[9] == dags[0].updates[9] and alone.updates[9] is not dags[0].updates[9]
    # a mapping of another kind is still copied into a dict of the DAG's own
    frozen = MappingProxyType(event_record(events[1]))
    apply_events(dags[0], [frozen])
    assert type(dags[0].votes[1]) is dict and dags[0].votes[1] == dict(frozen)


def test_a_shared_records_json_line_is_made_once_and_reads_back_as_the_record(tmp_path):
    # Prepare: a host's record of an event, and a plain one
    import json

    from mcfl_chain.dag.events import SharedRecord, record_line
    from mcfl_chain.worker.state import WorkerState

    shared = SharedRecord({"event": "NewRound", "block": 3, "prev_round": 0, "round": 1})
    plain = {"event": "PhaseChanged", "block": 4, "round": 1, "phase": 0, "quorum": 2}

    # Execute: two trainers' states record both
    states = [WorkerState.open(tmp_path / name, "0x" + "11" * 20, 0) for name in "ab"]
    for state in states:
        state.record([shared, plain], head=4)

    # Assert: one line object for every trainer, json.dumps' text; both logs replay it
    assert record_line(shared) is record_line(shared) == json.dumps(dict(shared))
    assert record_line(plain) == json.dumps(plain)
    for name in "ab":
        replayed = WorkerState.open(tmp_path / name, "0x" + "11" * 20, 0).replay()
        assert replayed == [dict(shared), plain]
