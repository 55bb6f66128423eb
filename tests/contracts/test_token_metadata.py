"""``tokenURI`` of every token kind is a base64 JSON data URL that standard data-URL readers
decode (here Python's ``urllib.request``): a name, a description and attributes matching
the views, whatever characters the task descriptor holds."""

from __future__ import annotations

from mcfl_chain.dag.model_id import ROOT_MODEL_ID, model_id, update_id

from .conftest import (
    GENESIS,
    TASK,
    aggregate,
    cid_bin,
    deploy,
    propose_all,
    read_data_url,
)

PREFIX = "data:application/json;base64,"
AWKWARD_TASK = "lenet: fashion #1 at 100% & <more> 'q' {x}"


def _metadata(uri: str) -> tuple[dict, dict]:
    assert uri.startswith(PREFIX)
    document = read_data_url(uri)
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
    # Prepare: three proposals of the root, then two aggregations of the same two.
    trainers, models, updates = running
    ids = propose_all(models, trainers, people[:3], ROOT_MODEL_ID, "meta")
    chosen = sorted(ids[:2])
    aggregate(models, people[0], [([ROOT_MODEL_ID], chosen, cid_bin("weights"))])
    aggregate(models, people[1], [([ROOT_MODEL_ID], chosen, b"")])
    mid = model_id(ROOT_MODEL_ID, chosen)
    # Execute
    update_doc, update_traits = _metadata(updates.tokenURI(ids[2]))
    model_doc, model_traits = _metadata(models.tokenURI(int.from_bytes(mid, "big")))
    root_doc, root_traits = _metadata(models.tokenURI(0))
    # Assert
    assert update_doc["name"] == f"MCFL update 0x{ids[2]:064x}"
    assert update_traits == {
        "round": 0,
        "parent index": 0,
        "samples": 102,
        "holder": people[2].address.lower(),
    }
    assert model_doc["name"] == "MCFL model 0x" + mid.hex()
    assert model_doc["description"].endswith("Task: " + TASK)
    assert model_traits == {
        "round": 0,
        "popularity": 2,
        "index": 1,
        "holder": people[0].address.lower(),
    }
    assert root_doc["name"] == "MCFL model 0x" + ROOT_MODEL_ID.hex()
    assert root_traits["weights CID"] == GENESIS and root_traits["popularity"] == 1


def test_a_task_with_url_and_json_sensitive_characters_survives(project, deployer, people):
    # Prepare
    trainers, models, updates = deploy(project, deployer, min_trainers=1, task=AWKWARD_TASK)
    trainers.register(sender=people[0])
    propose_all(models, trainers, people[:1], ROOT_MODEL_ID, "awkward")
    # Execute
    root_doc, _ = _metadata(models.tokenURI(0))
    update_doc, _ = _metadata(updates.tokenURI(update_id(1, ROOT_MODEL_ID, 0)))
    trainer_doc, _ = _metadata(trainers.tokenURI(1))
    # Assert
    assert models.task() == AWKWARD_TASK
    assert root_doc["description"].endswith("Task: " + AWKWARD_TASK)
    assert update_doc["name"].startswith("MCFL update")
    assert trainer_doc["name"] == "MCFL trainer #1"
