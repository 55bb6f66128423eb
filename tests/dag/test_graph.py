"""The DAG rebuilt from events: indexes, candidates, lineage and JSON round trip."""

from mcfl_chain.dag.graph import ROOT_ID, ModelDAG, UpdateRecord

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
