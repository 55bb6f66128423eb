"""Event records of every protocol v2 event kind, and how each changes the DAG.

The events are built by hand as :class:`ChainEvent` decodes them (contract argument
names, bytes32 as bytes, lists as tuples, CIDs as strings); ``test_dag_cli.py`` reads
the same kinds from a real devnet.
"""

from __future__ import annotations

import json

import pytest

from mcfl_chain.chain.events import EVENT_SOURCES, ChainEvent
from mcfl_chain.dag.events import RECORD_KINDS, apply_events, event_record
from mcfl_chain.dag.graph import ROOT_ID, ModelDAG
from mcfl_chain.dag.model_id import model_id, update_id
from mcfl_chain.dag.trainers import ZERO_ADDRESS, trainers_map, transfer_record
from mcfl_chain.storage.cid import cid_for_bytes

ALICE = "0x" + "a1" * 20
BOB = "0x" + "b2" * 20
ALICE_NEW = "0x" + "a3" * 20
TX = "0x" + "77" * 32


def _event(name: str, block: int, log: int, **args) -> ChainEvent:
    return ChainEvent(name=name, block_number=block, log_index=log, tx_hash=TX, args=args)


def _proposal(trainer: int, who: str, parent: bytes, round_: int, block: int, samples: int = 10):
    uid = update_id(trainer, parent, round_)
    event = _event(
        "UpdateProposed",
        block,
        1,
        updateId=uid,
        parent=parent,
        trainerId=trainer,
        round=round_,
        proposer=who,
        cid=cid_for_bytes(f"{trainer}-{round_}".encode()),
        numSamples=samples,
    )
    return uid, event


def _creation(parents, uids, round_, trainer, who, index, block, weights=None, rule=(0, 0)):
    mid = model_id(parents, uids, *rule)
    created = _event(
        "ModelCreated",
        block,
        2,
        round=round_,
        modelId=mid,
        trainerId=trainer,
        index=index,
        parents=tuple(parents),
        updateIds=tuple(uids),
        rule=rule[0],
        ruleParameter=rule[1],
        aggregator=who,
        weightsCid=weights,
    )
    return mid, created


def _appended(mid, round_, trainer, popularity, block):
    return _event(
        "ModelAppended",
        block,
        3,
        round=round_,
        modelId=mid,
        trainerId=trainer,
        popularity=popularity,
    )


def test_the_records_cover_every_event_the_client_decodes():
    assert set(RECORD_KINDS) == set(EVENT_SOURCES)


def test_an_update_proposed_record_holds_json_types_only():
    # Prepare
    uid, event = _proposal(2, BOB, ROOT_ID, 0, block=7, samples=300)

    # Execute
    record = event_record(event)

    # Assert
    assert record == {
        "event": "UpdateProposed",
        "block": 7,
        "tx": TX,
        "log": 1,
        "update_id": str(uid),
        "parent": "0x" + "00" * 32,
        "trainer_id": 2,
        "round": 0,
        "proposer": BOB,
        "cid": cid_for_bytes(b"2-0"),
        "num_samples": 300,
    }
    assert json.loads(json.dumps(record)) == record


def test_a_model_created_record_lists_every_parent_and_update():
    # Prepare: a merge of two parents
    a, b = sorted([bytes.fromhex("aa" * 32), bytes.fromhex("bb" * 32)])
    uids = sorted([update_id(1, a, 1), update_id(1, b, 1), update_id(2, b, 1)])
    weights = cid_for_bytes(b"merged weights")
    rule = (3, 2**64 - 1)  # a parameter word beyond JSON's safe integers
    mid, event = _creation((a, b), uids, 1, 1, ALICE, index=3, block=12, weights=weights, rule=rule)

    # Execute
    record = event_record(event)

    # Assert
    assert record == {
        "event": "ModelCreated",
        "block": 12,
        "tx": TX,
        "log": 2,
        "model_id": "0x" + mid.hex(),
        "round": 1,
        "trainer_id": 1,
        "index": 3,
        "parents": ["0x" + a.hex(), "0x" + b.hex()],
        "update_ids": [str(u) for u in uids],
        "rule": 3,
        "rule_parameter": str(2**64 - 1),
        "aggregator": ALICE,
        "weights_cid": weights,
    }
    # applied, the DAG records the rule the id commits to
    dag = ModelDAG()
    apply_events(dag, [record])
    assert (dag.models[mid].rule, dag.models[mid].rule_parameter) == rule
    # a record written before rules existed reads as rule 0
    old = {k: v for k, v in record.items() if k not in ("rule", "rule_parameter")}
    old["model_id"] = "0x" + model_id((a, b), uids).hex()
    apply_events(dag, [old])
    assert dag.models[model_id((a, b), uids)].rule == 0
    # without weights the CID is None
    _, bare = _creation((a,), uids[:1], 1, 1, ALICE, index=4, block=12)
    assert event_record(bare)["weights_cid"] is None


def test_appended_phase_round_and_vote_records():
    # Prepare
    mid = bytes.fromhex("cd" * 32)
    events = [
        _appended(mid, 4, 3, 2, block=20),
        _event("PhaseChanged", 21, 0, round=5, phase=0, quorum=3),
        _event("NewRound", 21, 1, prevRound=4, round=5),
        _event(
            "TrainerVoted", 22, 0, round=5, trainerId=3, phase=0, counted=False, votes=1, voters=2
        ),
    ]

    # Execute
    records = [event_record(e) for e in events]

    # Assert
    where = [{"block": e.block_number, "tx": TX, "log": e.log_index} for e in events]
    assert records == [
        {"event": "ModelAppended", **where[0], "model_id": "0x" + mid.hex(), "round": 4}
        | {"trainer_id": 3, "popularity": 2},
        {"event": "PhaseChanged", **where[1], "round": 5, "phase": 0, "quorum": 3},
        {"event": "NewRound", **where[2], "prev_round": 4, "round": 5},
        {"event": "TrainerVoted", **where[3], "round": 5, "trainer_id": 3, "phase": 0}
        | {"counted": False, "votes": 1, "voters": 2},
    ]


def test_an_unknown_event_keeps_its_arguments_in_snake_case_and_is_ignored():
    # Prepare
    event = _event("SomethingNew", 3, 0, modelId=b"\x01" * 32, someList=(1, 2))

    # Execute
    record = event_record(event)
    dag = ModelDAG()
    apply_events(dag, [record])

    # Assert
    assert record["model_id"] == "0x" + "01" * 32 and record["some_list"] == [1, 2]
    assert len(dag.models) == 1 and not dag.updates and not dag.phases


def _two_rounds() -> tuple[list[dict], dict[str, bytes]]:
    """Records of two rounds. Round 0: trainers 1 and 2 each aggregate only their own
    update of the root (M1, M2). Round 1: 1 proposes on M1 and M2 and merges both with
    2's update of M2 (the merge); 2, which trained M2 only, aggregates its update (M3)."""
    records = []
    u1, e = _proposal(1, ALICE, ROOT_ID, 0, block=10)
    records.append(event_record(e))
    u2, e = _proposal(2, BOB, ROOT_ID, 0, block=11)
    records.append(event_record(e))
    m1, e = _creation((ROOT_ID,), [u1], 0, 1, ALICE, index=1, block=12)
    records += [event_record(e), event_record(_appended(m1, 0, 1, 1, 12))]
    m2, e = _creation((ROOT_ID,), [u2], 0, 2, BOB, index=2, block=13, weights="bafkm2")
    records += [event_record(e), event_record(_appended(m2, 0, 2, 1, 13))]
    a1, e = _proposal(1, ALICE, m1, 1, block=15)
    records.append(event_record(e))
    a2, e = _proposal(1, ALICE, m2, 1, block=15)
    records.append(event_record(e))
    b2, e = _proposal(2, BOB, m2, 1, block=16)
    records.append(event_record(e))
    parents = tuple(sorted((m1, m2)))
    merge, e = _creation(parents, sorted([a1, a2, b2]), 1, 1, ALICE, index=3, block=17)
    records += [event_record(e), event_record(_appended(merge, 1, 1, 1, 17))]
    m3, e = _creation((m2,), [b2], 1, 2, BOB, index=4, block=18)
    records += [event_record(e), event_record(_appended(m3, 1, 2, 1, 18))]
    return records, {"M1": m1, "M2": m2, "merge": merge, "M3": m3}


def test_creations_and_appends_build_the_models_with_trainer_ids_and_merges():
    # Prepare
    records, ids = _two_rounds()
    dag = ModelDAG(genesis_cid="bafkroot")

    # Execute
    apply_events(dag, records)

    # Assert
    merge = dag.models[ids["merge"]]
    assert merge.parents == tuple(sorted((ids["M1"], ids["M2"]))) and merge.is_merge
    assert (merge.round, merge.index, merge.popularity, merge.creator) == (1, 3, 1, ALICE)
    assert merge.aggregator_ids == [1] and merge.tx_hashes == [TX]
    assert {dag.updates[u].parent for u in merge.update_ids} == {ids["M1"], ids["M2"]}
    assert dag.models[ids["M2"]].weights_cid == "bafkm2"
    assert dag.models[ids["M1"]].weights_cid is None
    assert [dag.models[ids[k]].index for k in ("M1", "M2", "merge", "M3")] == [1, 2, 3, 4]
    assert dag.models[ROOT_ID].index == 0 and dag.models[ROOT_ID].weights_cid == "bafkroot"
    assert [m.model_id for m in dag.candidates(2)] == [ids["merge"], ids["M3"]]
    assert dag.ancestors(ids["merge"]) == {ids["M1"], ids["M2"], ROOT_ID}
    # the worker's queries take trainer ids
    assert dag.proposal_by(1, ids["M2"], 1).proposer == ALICE
    assert dag.proposal_by(2, ids["M1"], 1) is None
    assert dag.aggregated_by(1, ids["M1"], 1) and dag.aggregated_by(1, ids["M2"], 1)
    assert dag.aggregated_by(2, ids["M2"], 1) and not dag.aggregated_by(2, ids["M1"], 1)


def test_the_worker_queries_refuse_an_address():
    dag = ModelDAG()
    with pytest.raises(TypeError, match="trainer id"):
        dag.proposal_by(ALICE, ROOT_ID, 0)
    with pytest.raises(TypeError, match="trainer id"):
        dag.aggregated_by(ALICE, ROOT_ID, 0)


def test_a_repeated_aggregation_raises_popularity_and_a_replay_changes_nothing():
    # Prepare: trainer 2 repeats M1 (same parents and ids) in the same round
    records, ids = _two_rounds()
    repeat = event_record(_appended(ids["M1"], 0, 2, 2, 14))
    dag = ModelDAG()

    # Execute: everything, then everything again
    apply_events(dag, [*records, repeat])
    once = dag.to_json()
    apply_events(dag, [r for r in [*records, repeat] if r["event"] != "TrainerVoted"])

    # Assert
    m1 = dag.models[ids["M1"]]
    assert m1.popularity == 2 and m1.aggregator_ids == [1, 2] and len(m1.tx_hashes) == 2
    assert dag.to_json() == once


def test_an_aggregation_of_a_model_created_before_the_range_read_is_kept_as_such():
    # Prepare: only the repeat's ModelAppended was read, not the creation
    mid = bytes.fromhex("ee" * 32)
    dag = ModelDAG()

    # Execute
    apply_events(dag, [event_record(_appended(mid, 3, 4, 5, 40))])

    # Assert
    model = dag.models[mid]
    assert (model.round, model.popularity, model.aggregator_ids) == (3, 5, [4])
    assert model.index is None and not model.created_in_range and model.parents == ()
    assert dag.lineage(mid) == [mid]


def test_phase_and_vote_records_are_kept_in_chain_order():
    # Prepare
    records = [
        event_record(_event("PhaseChanged", 5, 0, round=0, phase=0, quorum=2)),
        event_record(
            _event(
                "TrainerVoted", 6, 0, round=0, trainerId=1, phase=0, counted=True, votes=1, voters=1
            )
        ),
    ]
    dag = ModelDAG()

    # Execute
    apply_events(dag, records)

    # Assert
    assert dag.phases == [records[0]] and dag.votes == [records[1]]
    assert dag.votes[0]["trainer_id"] == 1 and dag.votes[0]["counted"] is True


@pytest.mark.parametrize(
    "record",
    [
        # protocol v1 records: an aggregation carried its lists, updates no trainer id
        {
            "event": "ModelAppended",
            "block": 1,
            "tx": TX,
            "log": 0,
            "model_id": "0x" + "ab" * 32,
            "parents": ["0x" + "00" * 32],
            "update_ids": ["1"],
            "aggregator": ALICE,
            "popularity": 1,
            "weights_cid": None,
        },
        {
            "event": "UpdateProposed",
            "block": 1,
            "tx": TX,
            "log": 0,
            "proposer": ALICE,
            "parent": "0x" + "00" * 32,
            "update_id": "1",
            "round": 0,
            "cid": "bafk",
            "num_samples": 1,
        },
        {"event": "ModelCreated", "block": 1, "tx": TX, "log": 0, "model_id": "0xab"},
    ],
)
def test_a_record_of_another_format_is_refused(record):
    with pytest.raises((KeyError, ValueError)):
        apply_events(ModelDAG(), [record])


def test_the_trainers_map_follows_mints_rotations_and_burns():
    # Prepare: 1 and 2 register, 1 rotates its key, 2 exits
    def transfer(block, tid, sender, receiver):
        return transfer_record(
            block=block, tx=TX, log=0, trainer_id=tid, sender=sender, receiver=receiver
        )

    records = [
        transfer(3, 1, ZERO_ADDRESS, ALICE),
        transfer(4, 2, ZERO_ADDRESS, BOB),
        {"event": "PhaseChanged", "block": 4, "tx": TX, "log": 1, "round": 0},
        transfer(9, 1, ALICE, ALICE_NEW),
        transfer(11, 2, BOB, ZERO_ADDRESS),
    ]

    # Execute
    trainers = trainers_map(records)
    later = trainers_map(records[3:])  # a block range that starts after the mints

    # Assert
    assert list(trainers) == [1, 2]
    one, two = trainers[1], trainers[2]
    assert (one.holder, one.holders, one.registered_block, one.exited) == (
        ALICE_NEW,
        [ALICE, ALICE_NEW],
        3,
        False,
    )
    assert (two.holder, two.last_holder, two.exited, two.exited_block) == (None, BOB, True, 11)
    assert two.to_json() == {
        "trainer_id": 2,
        "holder": None,
        "holders": [BOB],
        "exited": True,
        "registered_block": 4,
        "exited_block": 11,
    }
    assert later[1].holders == [ALICE, ALICE_NEW] and later[1].registered_block is None
    assert later[2].last_holder == BOB and later[2].exited
    # transfer records are no DAG events
    dag = ModelDAG()
    apply_events(dag, records)
    assert len(dag.models) == 1 and len(dag.phases) == 1
