from mcfl_chain.dag.model_id import ROOT_MODEL_ID, model_id
from .conftest import propose_all, vote_all


def test_round(running, people):
    trainers, models, updates = running
    ids = propose_all(updates, people[:3], ROOT_MODEL_ID, "r0")
    vote_all(models, people[:3], 0)
    r = updates.aggregate(sorted(ids), b"", sender=people[0])
    assert r.return_value == model_id(ROOT_MODEL_ID, sorted(ids))
    print(r.gas_used)
