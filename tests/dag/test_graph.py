"""The DAG rebuilt from events: indexes, candidates, lineage and JSON round trip."""

import io

from rich.console import Console

from mcfl_chain.dag.graph import ROOT_ID, ModelDAG, UpdateRecord
from mcfl_chain.dag.render import dag_document, text_tree, to_dot
from mcfl_chain.dag.trainers import ZERO_ADDRESS, trainers_map, transfer_record

A = bytes.fromhex("aa" * 32)
B = bytes.fromhex("bb" * 32)
C = bytes.fromhex("cc" * 32)


def _aggregate(dag, mid, parents, round_, ids, trainer, popularity, cid, tx, block, index=None):
    """A ModelCreated (for a new id) then its ModelAppended, as one transaction logs them."""
    if mid not in dag.models:
        dag.add_creation(mid, parents, round_, ids, index, f"0x{trainer}", cid, block)
    dag.add_appended(mid, trainer, popularity, tx, block)


def _network() -> ModelDAG:
    dag = ModelDAG(genesis_cid="bafkroot")
    for uid, trainer in ((7, 1), (3, 2), (9, 3)):
        dag.add_update(UpdateRecord(uid, f"0x{trainer}", trainer, ROOT_ID, 0, f"cid{uid}", 100))
    _aggregate(dag, A, ROOT_ID, 0, (3, 7), 1, 1, "bafkA", "0xt1", 5, index=1)
    _aggregate(dag, A, ROOT_ID, 0, (3, 7), 2, 2, None, "0xt2", 6)
    _aggregate(dag, B, ROOT_ID, 0, (3, 7, 9), 3, 1, "bafkB", "0xt3", 7, index=2)
    dag.add_update(UpdateRecord(11, "0x1", 1, A, 1, "cid11", 50))
    _aggregate(dag, C, A, 1, (11,), 1, 1, None, "0xt4", 9, index=3)
    return dag


def test_updates_are_indexed_by_parent_and_round_in_ascending_id_order():
    dag = _network()
    assert [u.update_id for u in dag.updates_for(ROOT_ID, 0)] == [3, 7, 9]
    assert dag.updates_for(ROOT_ID, 1) == []


def test_repeated_model_ids_raise_popularity_and_keep_the_first_weights_cid():
    dag = _network()
    assert dag.models[A].popularity == 2
    assert dag.models[A].aggregator_ids == [1, 2]
    assert dag.models[A].tx_hashes == ["0xt1", "0xt2"]
    assert dag.models[A].weights_cid == "bafkA" and dag.models[A].creator == "0x1"


def test_candidates_are_the_previous_rounds_models_or_the_root():
    dag = _network()
    assert [m.model_id for m in dag.candidates(0)] == [ROOT_ID]
    assert [m.model_id for m in dag.candidates(1)] == [A, B]
    assert [m.model_id for m in dag.candidates(2)] == [C]
    # A round that appended nothing falls back to the latest one that did.
    assert [m.model_id for m in dag.candidates(5)] == [C]


def test_lineage_walks_up_to_the_root():
    assert _network().lineage(C) == [C, A, ROOT_ID]


def test_json_round_trip_preserves_everything():
    dag = _network()
    again = ModelDAG.from_json(dag.to_json())
    assert again.to_json() == dag.to_json()
    assert [u.update_id for u in again.updates_for(ROOT_ID, 0)] == [3, 7, 9]
    assert [m.model_id for m in again.candidates(1)] == [A, B]


def test_own_proposals_and_aggregations_are_found_by_trainer_id():
    dag = _network()
    assert dag.proposal_by(2, ROOT_ID, 0).update_id == 3
    assert dag.proposal_by(2, ROOT_ID, 1) is None
    assert dag.aggregated_by(3, ROOT_ID, 0)
    assert not dag.aggregated_by(3, A, 1)
    assert dag.aggregated_by(1, A, 1)


M = bytes.fromhex("dd" * 32)


def _merged() -> ModelDAG:
    """The network above plus, in round 1, a merge of updates trained from A and B."""
    dag = _network()
    dag.add_update(UpdateRecord(21, "0x2", 2, B, 1, "cid21", 40))
    dag.add_update(UpdateRecord(12, "0x3", 3, A, 1, "cid12", 40))
    dag.add_update(UpdateRecord(22, "0x3", 3, B, 1, "cid22", 40))
    _aggregate(dag, M, (B, A), 1, (22, 12, 21), 3, 1, None, "0xt5", 10, index=4)
    return dag


def test_a_merge_records_every_parent_in_ascending_order():
    # Execute
    dag = _merged()

    # Assert
    merge = dag.models[M]
    assert merge.parents == (A, B) and merge.is_merge and merge.parent == A
    assert not dag.models[C].is_merge and dag.models[C].parents == (A,)
    assert dag.models[ROOT_ID].parents == () and dag.models[ROOT_ID].parent is None
    assert merge.update_ids == (12, 21, 22)
    assert dag.ancestors(M) == {A, B, ROOT_ID}
    assert dag.aggregated_by(3, B, 1) and dag.aggregated_by(3, A, 1)
    assert not dag.aggregated_by(2, B, 1)


def test_a_merge_survives_the_json_round_trip():
    dag = _merged()

    again = ModelDAG.from_json(dag.to_json())

    assert again.models[M].parents == (A, B)
    assert again.to_json() == dag.to_json()


def _trainers():
    """Trainer 1 rotated its key to 0x1b, trainer 3 exited; trainer 2 is as registered."""
    z = ZERO_ADDRESS
    return trainers_map(
        [
            transfer_record(block=1, tx="0x", log=0, trainer_id=1, sender=z, receiver="0x1"),
            transfer_record(block=1, tx="0x", log=1, trainer_id=2, sender=z, receiver="0x2"),
            transfer_record(block=1, tx="0x", log=2, trainer_id=3, sender=z, receiver="0x3"),
            transfer_record(block=8, tx="0x", log=0, trainer_id=1, sender="0x1", receiver="0x1b"),
            transfer_record(block=11, tx="0x", log=0, trainer_id=3, sender="0x3", receiver=z),
        ]
    )


def test_renderings_draw_an_edge_from_each_parent_of_a_merge():
    # Prepare
    dag = _merged()
    status = {"started": True, "round": 2, "phase": "PROPOSE", "votes": 0, "quorum": 3}
    doc = dag_document(dag, network={}, status=status, trainers=_trainers())

    # Execute
    dot = to_dot(doc)
    text = _plain(text_tree(doc))

    # Assert
    merge = next(m for m in doc["models"] if m["id"] == "0x" + M.hex())
    assert merge["merge"] and merge["parents"] == ["0x" + A.hex(), "0x" + B.hex()]
    assert f'"0x{A.hex()}" -> "0x{M.hex()}" [label="1 of 3 updates"' in dot
    assert f'"0x{B.hex()}" -> "0x{M.hex()}" [label="2 of 3 updates"' in dot
    assert dot.count("peripheries=2") == 1
    assert "parents aaaaaaaa, bbbbbbbb" in text and "merge" in text
    assert "0x" + M.hex() in next(m for m in doc["models"] if m["id"] == "0x" + B.hex())["children"]
    assert [r["merges"] for r in doc["rounds"]] == [0, 1]


def test_aggregators_are_trainer_ids_with_the_address_holding_them():
    # Prepare
    dag = _merged()
    status = {"started": True, "round": 2, "phase": "PROPOSE", "votes": 0, "quorum": 3}

    # Execute
    doc = dag_document(dag, network={}, status=status, trainers=_trainers())
    text = _plain(text_tree(doc))

    # Assert: trainer 1 is shown with its new key, trainer 3 with its last one, exited
    models = {m["id"]: m for m in doc["models"]}
    assert models["0x" + A.hex()]["aggregations"] == [
        {"trainer_id": 1, "holder": "0x1b", "exited": False, "tx": "0xt1"},
        {"trainer_id": 2, "holder": "0x2", "exited": False, "tx": "0xt2"},
    ]
    assert models["0x" + M.hex()]["aggregations"] == [
        {"trainer_id": 3, "holder": "0x3", "exited": True, "tx": "0xt5"}
    ]
    rows = {t["trainer_id"]: t for t in doc["trainers"]}
    assert (rows[1]["holder"], rows[1]["holders"]) == ("0x1b", ["0x1", "0x1b"])
    assert (rows[3]["holder"], rows[3]["address"], rows[3]["exited"]) == (None, "0x3", True)
    assert [(t, rows[t]["updates"], rows[t]["aggregations"]) for t in rows] == [
        (1, 2, 2),
        (2, 2, 1),
        (3, 3, 2),
    ]
    assert "#1 0x1b  tx 0xt1" in text and "#3 0x3 (exited)  tx 0xt5" in text
    assert "trainer #1 0x1b sent by 0x1" in text  # proposed before the key rotation
    assert "held before by 0x1" in text


def _plain(renderable) -> str:
    console = Console(width=200, record=True, file=io.StringIO())
    console.print(renderable)
    return console.export_text()
