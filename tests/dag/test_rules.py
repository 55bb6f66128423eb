"""Aggregation rules off chain: the id formula, and models rebuilt with the rule recorded."""

from __future__ import annotations

import pytest
import torch
from eth_abi import encode
from eth_utils import keccak

from mcfl_chain.algorithms.fedavg import fedavg
from mcfl_chain.algorithms.robust import make_aggregation_rule
from mcfl_chain.dag.graph import ROOT_ID, ModelDAG, UpdateRecord, short_id
from mcfl_chain.dag.model_id import model_id, update_id
from mcfl_chain.dag.weights import WeightsBook, check_published_weights
from mcfl_chain.learning.codec import encode_weights
from mcfl_chain.learning.models import create_model
from mcfl_chain.storage.cid import cid_for_bytes

ARCH = "lenet-light"


def test_rule_zero_keeps_the_ids_of_before_rules_and_others_hash_them_again():
    parent, ids = bytes.fromhex("ab" * 32), [5, 8, 13]
    base = keccak(encode(["bytes32", "uint256[]"], [parent, ids]))
    assert model_id(parent, ids) == model_id(parent, ids, 0, 0) == base
    word = (2).to_bytes(32, "big") + (2000).to_bytes(32, "big")
    assert model_id(parent, ids, 2, 2000) == keccak(base + word)
    merge = [bytes(32), parent]
    merge_base = keccak(encode(["bytes32[]", "uint256[]"], [merge, ids]))
    assert model_id(merge, ids, 2, 2000) == keccak(merge_base + word)


def test_the_same_ids_under_two_rules_are_two_models():
    # Two trainers keep the same ids; one aggregates with the median, one with a trimmed mean
    ids = [update_id(t, ROOT_ID, 0) for t in (1, 2, 3)]
    ids.sort()
    median = make_aggregation_rule("median")
    trimmed = make_aggregation_rule("trimmed-mean", beta=0.2)
    made = {
        model_id(ROOT_ID, ids),
        model_id(ROOT_ID, ids, median.code, median.parameter),
        model_id(ROOT_ID, ids, trimmed.code, trimmed.parameter),
        model_id(ROOT_ID, ids, trimmed.code, trimmed.parameter + 1),
    }
    assert len(made) == 4


@pytest.mark.parametrize(
    ("rule", "parameter", "message"),
    [
        (256, 0, "rule code must be 0 to 255"),
        (-1, 0, "rule code must be 0 to 255"),
        (1, 2**256, "not a uint256"),
        (0, 7, "rule 0 .* takes parameter 0"),
    ],
)
def test_rules_the_contract_refuses_are_refused(rule: int, parameter: int, message: str):
    with pytest.raises(ValueError, match=message):
        model_id(ROOT_ID, [1], rule, parameter)


def _network(
    n: int, rule: tuple[int, int], arch: str = ARCH, publish: bool = True
) -> tuple[ModelDAG, dict[str, bytes], dict[int, dict[str, torch.Tensor]], bytes]:
    """Root, ``n`` updates on it, and one model of all of them with ``rule``."""
    store: dict[str, bytes] = {}
    genesis = encode_weights(arch, create_model(arch, seed=0).state_dict())
    store[cid_for_bytes(genesis)] = genesis
    dag = ModelDAG(genesis_cid=cid_for_bytes(genesis))
    trained = {}
    for trainer in range(1, n + 1):
        weights = create_model(arch, seed=trainer).state_dict()
        blob = encode_weights(arch, weights)
        store[cid_for_bytes(blob)] = blob
        uid = update_id(trainer, ROOT_ID, 0)
        trained[uid] = weights
        dag.add_update(
            UpdateRecord(uid, f"0x{trainer}", trainer, ROOT_ID, 0, cid_for_bytes(blob), 10)
        )
    ids = tuple(sorted(trained))
    model = model_id(ROOT_ID, ids, *rule)
    dag.add_creation(
        model, (ROOT_ID,), 0, ids, 1, "0x1", None, rule=rule[0], rule_parameter=rule[1]
    )
    dag.add_appended(model, 1, 1, "0xt")
    return dag, store, trained, model


@pytest.mark.parametrize(
    "spec",
    [("median", {}), ("trimmed-mean", {"beta": 0.2}), ("norm-clipping", {"bound": 0.5})],
)
def test_a_model_is_rebuilt_with_the_rule_the_chain_records(spec):
    # Prepare
    rule = make_aggregation_rule(spec[0], **spec[1])
    dag, store, trained, model = _network(5, (rule.code, rule.parameter))
    book = WeightsBook(store.__getitem__, ARCH, dag)
    updates = [(uid, 10, trained[uid]) for uid in sorted(trained)]
    parent = book.model(ROOT_ID)

    # Execute
    weights = book.model(model)

    # Assert: bit for bit the rule's aggregate, not FedAvg (the book's default)
    expected = rule.aggregate(updates, parent)
    assert book.rule.name == "fedavg" and book.rule_of(dag.models[model]).name == rule.name
    assert all(torch.equal(weights[k], expected[k]) for k in expected)
    mean = fedavg(updates)
    assert not all(torch.equal(weights[k], mean[k]) for k in mean)


def test_an_unknown_rule_code_cannot_be_rebuilt():
    dag, store, _, model = _network(2, (200, 0))
    book = WeightsBook(store.__getitem__, ARCH, dag)
    with pytest.raises(Exception, match="unknown aggregation rule code 200"):
        book.model(model)


def test_published_weights_of_a_rule_model_are_checked_with_its_rule():
    # Prepare: a median model whose first aggregator published the median, and a
    # trimmed-mean model whose first aggregator published FedAvg instead
    median = make_aggregation_rule("median")
    dag, store, trained, honest = _network(5, (median.code, 0))  # β = 0.2 trims one each side
    updates = [(uid, 10, trained[uid]) for uid in sorted(trained)]
    ids = tuple(sorted(trained))
    for rule, weights in (
        ((median.code, 0), median.aggregate(updates)),
        ((2, 2000), fedavg(updates)),
    ):
        blob = encode_weights(ARCH, weights)
        store[cid_for_bytes(blob)] = blob
        made = model_id(ROOT_ID, ids, *rule)
        dag.add_creation(
            made, (ROOT_ID,), 0, ids, 1, "0x1", cid_for_bytes(blob), rule=rule[0],
            rule_parameter=rule[1],
        )  # fmt: skip
        dag.models[made].weights_cid = cid_for_bytes(blob)  # the median's was created bare
    book = WeightsBook(store.__getitem__, ARCH, dag)

    # Execute
    checked, problems = check_published_weights(dag, book, store.__getitem__, ARCH)

    # Assert
    cheat = dag.models[model_id(ROOT_ID, ids, 2, 2000)]
    assert checked == 1
    assert problems == [
        f"model {short_id(cheat.model_id)}: its published weights {cheat.weights_cid} "
        "are not the trimmed-mean of its 5 updates"
    ]
    assert honest in dag.models


def test_the_rule_survives_the_json_round_trip_and_old_pictures_read_as_rule_zero():
    dag, _, _, model = _network(2, (3, 2**64 - 1))
    picture = dag.to_json()

    again = ModelDAG.from_json(picture)

    assert (again.models[model].rule, again.models[model].rule_parameter) == (3, 2**64 - 1)
    for m in picture["models"]:
        del m["rule"], m["rule_parameter"]
    assert ModelDAG.from_json(picture).models[model].rule == 0
