"""The DAG rebuilt from events: indexes, candidates, lineage and JSON round trip."""

import io

from rich.console import Console

from mcfl_chain.dag.graph import ROOT_ID, ModelDAG, UpdateRecord
from mcfl_chain.dag.render import dag_document, text_tree, to_dot

A = bytes.fromhex("aa" * 32)
B = bytes.fromhex("bb" * 32)
C = bytes.fromhex("cc" * 32)


def _network() -> ModelDAG:
    dag = ModelDAG(genesis_cid="bafkroot")
    for uid, who in ((7, "0x1"), (3, "0x2"), (9, "0x3")):
        dag.add_update(UpdateRecord(uid, who, ROOT_ID, 0, f"cid{uid}", 100 + uid))
    dag.add_aggregation(A, ROOT_ID, 0, (3, 7), "0x1", 1, "bafkA", "0xt1", 5)
    dag.add_aggregation(A, ROOT_ID, 0, (3, 7), "0x2", 2, None, "0xt2", 6)
    dag.add_aggregation(B, ROOT_ID, 0, (3, 7, 9), "0x3", 1, "bafkB", "0xt3", 7)
    dag.add_update(UpdateRecord(11, "0x1", A, 1, "cid11", 50))
    dag.add_aggregation(C, A, 1, (11,), "0x1", 1, None, "0xt4", 9)
    return dag


def test_updates_are_indexed_by_parent_and_round_in_ascending_id_order():
    dag = _network()
    assert [u.update_id for u in dag.updates_for(ROOT_ID, 0)] == [3, 7, 9]
    assert dag.updates_for(ROOT_ID, 1) == []


def test_repeated_model_ids_raise_popularity_and_keep_the_first_weights_cid():
    dag = _network()
    assert dag.models[A].popularity == 2
    assert dag.models[A].aggregators == ["0x1", "0x2"]
    assert dag.models[A].weights_cid == "bafkA"


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


def test_own_proposals_and_aggregations_are_found_by_address():
    dag = _network()
    assert dag.proposal_by("0x2", ROOT_ID, 0).update_id == 3
    assert dag.proposal_by("0x2", ROOT_ID, 1) is None
    assert dag.aggregated_by("0x3", ROOT_ID, 0)
    assert not dag.aggregated_by("0x3", A, 1)
    assert dag.aggregated_by("0x1", A, 1)


M = bytes.fromhex("dd" * 32)


def _merged() -> ModelDAG:
    """The network above plus, in round 1, a merge of updates trained from A and B."""
    dag = _network()
    dag.add_update(UpdateRecord(21, "0x2", B, 1, "cid21", 40))
    dag.add_update(UpdateRecord(12, "0x3", A, 1, "cid12", 40))
    dag.add_aggregation(M, (B, A), 1, (12, 21), "0x3", 1, None, "0xt5", 10)
    return dag


def test_a_merge_records_every_parent_in_ascending_order():
    # Execute
    dag = _merged()

    # Assert
    merge = dag.models[M]
    assert merge.parents == (A, B) and merge.is_merge and merge.parent == A
    assert not dag.models[C].is_merge and dag.models[C].parents == (A,)
    assert dag.models[ROOT_ID].parents == () and dag.models[ROOT_ID].parent is None
    assert dag.ancestors(M) == {A, B, ROOT_ID}
    assert dag.aggregated_by("0x3", B, 1) and dag.aggregated_by("0x3", A, 1)


def test_a_merge_survives_the_json_round_trip():
    dag = _merged()

    again = ModelDAG.from_json(dag.to_json())

    assert again.models[M].parents == (A, B)
    assert again.to_json() == dag.to_json()


def test_renderings_draw_an_edge_from_each_parent_of_a_merge():
    # Prepare
    dag = _merged()
    status = {"started": True, "round": 2, "phase": "PROPOSE", "votes": 0, "quorum": 3}
    doc = dag_document(dag, network={}, status=status, trainers={})

    # Execute
    dot = to_dot(doc)
    text = _plain(text_tree(doc))

    # Assert
    merge = next(m for m in doc["models"] if m["id"] == "0x" + M.hex())
    assert merge["merge"] and merge["parents"] == ["0x" + A.hex(), "0x" + B.hex()]
    assert f'"0x{A.hex()}" -> "0x{M.hex()}"' in dot and f'"0x{B.hex()}" -> "0x{M.hex()}"' in dot
    assert "parents aaaaaaaa, bbbbbbbb" in text and "merge" in text
    assert "0x" + M.hex() in next(m for m in doc["models"] if m["id"] == "0x" + B.hex())["children"]


def _plain(renderable) -> str:
    console = Console(width=200, record=True, file=io.StringIO())
    console.print(renderable)
    return console.export_text()
