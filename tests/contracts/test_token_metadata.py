"""``tokenURI`` of the three token kinds is a JSON data URI that wallets and block
explorers can display: a name, a description and attributes matching the views."""

from __future__ import annotations

import json

from mcfl_chain.dag.model_id import model_id

from .conftest import GENESIS, TASK, cid_bin, cid_str, propose_all, vote_all

PREFIX = "data:application/json,"


def _metadata(uri: str) -> tuple[dict, dict]:
    assert uri.startswith(PREFIX)
    document = json.loads(uri[len(PREFIX) :])
    assert set(document) == {"name", "description", "attributes"}
    assert document["name"] and document["description"]
    return document, {a["trait_type"]: a["value"] for a in document["attributes"]}


def test_trainer_token_metadata(running, people):
    # Prepare
    trainers, _, _ = running
    # Execute
    document, traits = _metadata(trainers.tokenURI(2))
    # Assert
    assert document["name"] == "MCFL trainer #2"
    assert traits == {"trainer id": 2, "holder": people[1].address.lower()}


def test_update_and_model_token_metadata(running, people):
    # Prepare: three proposals of the root, then two aggregations of the same set.
    trainers, models, updates = running
    root = bytes(32)
    ids = propose_all(updates, people[:3], root, "meta")
    vote_all(models, people[:3], 0)
    chosen = sorted(ids[:2])
    updates.aggregate(chosen, cid_bin("weights"), sender=people[0])
    updates.aggregate(chosen, b"", sender=people[1])
    mid = model_id(root, chosen)
    # Execute
    update_doc, update_traits = _metadata(updates.tokenURI(ids[2]))
    model_doc, model_traits = _metadata(models.tokenURI(int.from_bytes(mid, "big")))
    root_doc, root_traits = _metadata(models.tokenURI(0))
    # Assert
    assert update_doc["name"] == f"MCFL update 0x{ids[2]:064x}"
    assert update_traits == {
        "round": 0,
        "parent": "0x" + root.hex(),
        "samples": 102,
        "holder": people[2].address.lower(),
        "aggregated by its proposer": False,
        "CID": cid_str("meta-2"),
    }
    assert _metadata(updates.tokenURI(ids[0]))[1]["aggregated by its proposer"] is True
    assert model_doc["name"] == "MCFL model 0x" + mid.hex()
    assert TASK in model_doc["description"]
    assert model_traits == {
        "round": 0,
        "parent": "0x" + root.hex(),
        "popularity": 2,
        "index": 1,
        "holder": people[0].address.lower(),
        "weights CID": cid_str("weights"),
    }
    assert model_traits["popularity"] == models.popularityOf(mid)
    assert root_traits["weights CID"] == GENESIS and root_traits["popularity"] >= 1
