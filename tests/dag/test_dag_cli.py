"""``mcfl-chain dag`` on a real devnet where three trainers script a DAG with a merge.

The trainers send real protocol v2 transactions through :class:`ChainClient` (fake
weights CIDs: nothing is trained), so the expected DAG is known exactly: a merge, forks,
a repeated aggregation, a dead branch, a key rotation and an exit.

round 0 (root)  1: {a0} -> M1      2: {b0} -> M2 (CID)      3: {b0, c0} -> M3
round 1         1 trains M1 and M2 and merges them with 2's update of M2:
                   {a1@M1, a1@M2, b1@M2} -> M4 (parents M1, M2; CID)
                2: {b1@M2} -> M6 (dead)   2 and 3: {b1@M3, c1@M3} -> M5 (popularity 2)
round 2         trainer 1 rotates its key to A'; A': {a2} -> M7 (from M4)
                2 only votes;  3: {c2} -> M8 (from M5); then 3 exits (its token is burnt)
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner

from mcfl_chain._utils.process import free_port
from mcfl_chain.algorithms.fedavg import fedavg
from mcfl_chain.chain.client import AggregationArg, ChainClient, ProposalArg
from mcfl_chain.chain.devnet import deployment_file, start_devnet, stop_devnet
from mcfl_chain.cli import main
from mcfl_chain.dag.events import RECORD_KINDS
from mcfl_chain.dag.graph import ROOT_ID, short_id
from mcfl_chain.dag.model_id import model_id, update_id
from mcfl_chain.dag.sync import (
    CACHE_FORMAT,
    CacheError,
    EventCache,
    build_dag,
    check_against_chain,
    sync_events,
)
from mcfl_chain.dag.trainers import TRANSFER
from mcfl_chain.learning.tasks import load_task
from mcfl_chain.storage import LocalStorage, cid_for_bytes

# A devnet and the CLI, as the folders of tests/conftest.py's INTEGRATION_FOLDERS.
pytestmark = pytest.mark.integration

GENESIS = cid_for_bytes(b"genesis weights")
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "breast_cancer_mlp.py"
NAMES = ("M1", "M2", "M3", "M4", "M5", "M6", "M7", "M8")


def _cid(label: str) -> str:
    return cid_for_bytes(label.encode())


def _send_raw(client: ChainClient, call) -> None:
    """A Trainers call the client has no method for, from a dev account Anvil unlocks."""
    tx = call.transact({"from": client.address})
    assert client.w3.eth.wait_for_transaction_receipt(tx)["status"] == 1


@pytest.fixture(scope="module")
def scripted(tmp_path_factory):
    """The devnet, the trainers' clients, the expected model ids and block marks."""
    state_dir = tmp_path_factory.mktemp("devnet")
    # A deadline no test reaches: a vote after it would also end the phase, and the
    # events would then depend on how long the module took to get there.
    _, deployment = start_devnet(
        state_dir,
        free_port(),
        genesis_cid=GENESIS,
        task="lenet5:digits",
        min_trainers=3,
        phase_duration=3600,
    )
    try:
        a, b, c = (ChainClient(deployment, account_index=i) for i in (1, 2, 3))
        for t in (a, b, c):
            t.register()

        def propose(t, round_, *parents):
            return t.submit_proposals(
                [
                    ProposalArg(p, _cid(f"{round_}-{t.address}-{p.hex()}"), 100 + i)
                    for i, p in enumerate(parents)
                ]
            )

        # round 0: two trainers each aggregate only their own update; a third joins one
        u = {t: propose(t, 0, ROOT_ID)[ROOT_ID] for t in (a, b, c)}
        (m1,) = a.submit_aggregations([AggregationArg((ROOT_ID,), (u[a],))])
        (m2,) = b.submit_aggregations([AggregationArg((ROOT_ID,), (u[b],), _cid("w M2"))])
        (m3,) = c.submit_aggregations([AggregationArg((ROOT_ID,), (u[c], u[b]))])
        end_of_round_0 = a.block_number()
        # round 1: trainer 1 proposes on M1 and M2 and merges them
        pa, pb, pc = propose(a, 1, m1, m2), propose(b, 1, m2, m3), propose(c, 1, m3)
        (m4,) = a.submit_aggregations(
            [AggregationArg((m2, m1), (pb[m2], pa[m2], pa[m1]), _cid("w M4"))]
        )
        m6, m5 = b.submit_aggregations(
            [AggregationArg((m2,), (pb[m2],)), AggregationArg((m3,), (pb[m3], pc[m3]))]
        )
        assert c.submit_aggregations([AggregationArg((m3,), (pc[m3], pb[m3]))]) == [m5]
        # round 2: trainer 1 moves to a new key, which proposes with its trainer id
        a2 = ChainClient(deployment, account_index=5)
        _send_raw(a, a.trainers.functions.transferFrom(a.address, a2.address, 1))
        qa, _, qc = propose(a2, 2, m4), b.submit_proposals([]), propose(c, 2, m5)
        (m7,) = a2.submit_aggregations([AggregationArg((m4,), (qa[m4],))])
        assert b.submit_aggregations([]) == []
        (m8,) = c.submit_aggregations([AggregationArg((m5,), (qc[m5],))])
        _send_raw(c, c.trainers.functions.exit())
        yield {
            "deployment": deployment,
            "path": deployment_file(state_dir),
            "trainers": (a, b, c, a2),
            "round0_end": end_of_round_0,
            "models": dict(zip(NAMES, (m1, m2, m3, m4, m5, m6, m7, m8), strict=True)),
            "merge_updates": sorted([pa[m1], pa[m2], pb[m2]]),
        }
    finally:
        stop_devnet(state_dir)


def _dag(args, scripted, tmp_path, exit_code=0):
    result = CliRunner(mix_stderr=False).invoke(
        main,
        [
            "dag",
            "--deployment",
            str(scripted["path"]),
            "--cache-dir",
            str(tmp_path / "cache"),
            *args,
        ],
    )
    assert result.exit_code == exit_code, result.output + result.stderr
    return result.stdout if exit_code == 0 else result


def _hex(mid: bytes) -> str:
    return "0x" + mid.hex()


def test_records_of_every_event_kind_come_from_the_chain(scripted):
    # Execute
    log = sync_events(ChainClient.read_only(scripted["deployment"]))

    # Assert: every kind, in chain order, with the fields of the record format
    records = log.records
    assert {r["event"] for r in records} == {*RECORD_KINDS, TRANSFER}
    assert records == sorted(records, key=lambda r: (r["block"], r["log"]))
    a, b, c, a2 = scripted["trainers"]
    m = scripted["models"]
    (merge,) = [
        r for r in records if r["event"] == "ModelCreated" and r["model_id"] == _hex(m["M4"])
    ]
    assert merge | {"block": 0, "tx": "", "log": 0} == {
        "event": "ModelCreated",
        "block": 0,
        "tx": "",
        "log": 0,
        "model_id": _hex(m["M4"]),
        "round": 1,
        "trainer_id": 1,
        "index": 4,
        "parents": sorted([_hex(m["M1"]), _hex(m["M2"])]),
        "update_ids": [str(u) for u in scripted["merge_updates"]],
        "rule": 0,
        "rule_parameter": "0",
        "aggregator": a.address,
        "weights_cid": _cid("w M4"),
    }
    appended = [r for r in records if r["event"] == "ModelAppended"]
    assert [
        (r["model_id"], r["trainer_id"], r["popularity"]) for r in appended if r["round"] == 1
    ] == [
        (_hex(m["M4"]), 1, 1),
        (_hex(m["M6"]), 2, 1),
        (_hex(m["M5"]), 2, 1),
        (_hex(m["M5"]), 3, 2),
    ]
    (first,) = [
        r
        for r in records
        if r["event"] == "UpdateProposed" and r["round"] == 2 and r["trainer_id"] == 1
    ]
    assert (first["proposer"], first["parent"]) == (a2.address, _hex(m["M4"]))
    assert int(first["update_id"]) == update_id(1, m["M4"], 2)
    phases = [
        (r["round"], r["phase"], r["quorum"]) for r in records if r["event"] == "PhaseChanged"
    ]
    assert phases == [(0, 0, 3), (0, 1, 3), (1, 0, 3), (1, 1, 3), (2, 0, 3), (2, 1, 3), (3, 0, 3)]
    rounds = [(r["prev_round"], r["round"]) for r in records if r["event"] == "NewRound"]
    assert rounds == [(0, 1), (1, 2), (2, 3)]
    votes = [r for r in records if r["event"] == "TrainerVoted"]
    assert len(votes) == 18 and all(v["counted"] for v in votes)
    assert [(v["trainer_id"], v["votes"], v["voters"]) for v in votes[:3]] == [
        (1, 1, 1),
        (2, 2, 2),
        (3, 3, 3),
    ]
    transfers = [
        (r["trainer_id"], r["sender"], r["receiver"]) for r in records if r["event"] == TRANSFER
    ]
    zero = "0x" + "00" * 20
    assert [(t, s.lower(), r.lower()) for t, s, r in transfers] == [
        (1, zero, a.address.lower()),
        (2, zero, b.address.lower()),
        (3, zero, c.address.lower()),
        (1, a.address.lower(), a2.address.lower()),
        (3, c.address.lower(), zero),
    ]
    trainers = log.trainers
    assert (trainers[1].holder, trainers[1].holders) == (a2.address, [a.address, a2.address])
    assert (
        trainers[3].exited and trainers[3].holder is None and trainers[3].last_holder == c.address
    )


def test_json_output_shows_the_merge_and_agrees_with_the_chain(scripted, tmp_path):
    # Execute
    doc = json.loads(_dag(["--format", "json", "--check"], scripted, tmp_path))

    # Assert: the contract views and the id formulas agree with every record
    assert doc["check"] == []
    chain = ChainClient.read_only(scripted["deployment"])
    m = {name: _hex(mid) for name, mid in scripted["models"].items()}
    models = {entry["id"]: entry for entry in doc["models"]}
    assert set(models) == {_hex(ROOT_ID), *m.values()}
    assert len(models) == chain.model_count()
    merge = models[m["M4"]]
    assert merge["merge"] and merge["parents"] == sorted([m["M1"], m["M2"]])
    assert merge["parent"] == merge["parents"][0]
    assert merge["updates"] == [str(u) for u in scripted["merge_updates"]]
    assert m["M4"] in models[m["M1"]]["children"] and m["M4"] in models[m["M2"]]["children"]
    assert [name for name, mid in m.items() if models[mid]["merge"]] == ["M4"]
    for entry in models.values():
        if entry["id"] == _hex(ROOT_ID):
            continue
        mid = bytes.fromhex(entry["id"][2:])
        parents = [bytes.fromhex(p[2:]) for p in entry["parents"]]
        assert model_id(parents, [int(x) for x in entry["updates"]]) == mid
        assert entry["short"] == short_id(mid)
        assert chain.popularity_of(mid) == entry["popularity"] == len(entry["aggregations"])
        assert chain.index_of(mid) == entry["index"]
    assert [models[m[k]]["popularity"] for k in NAMES] == [1, 1, 1, 1, 2, 1, 1, 1]
    assert [models[m[k]]["index"] for k in NAMES] == [1, 2, 3, 4, 6, 5, 7, 8]
    # forks, the dead branch and the frontier
    assert {k for k, v in m.items() if models[v]["fork"]} == {"M2"}
    assert models[_hex(ROOT_ID)]["fork"]
    assert {k: models[v]["state"] for k, v in m.items()} == {
        "M1": "inner",
        "M2": "inner",
        "M3": "inner",
        "M4": "inner",
        "M5": "inner",
        "M6": "dead",
        "M7": "frontier",
        "M8": "frontier",
    }
    # aggregators are trainer ids with the address holding them now
    a, b, c, a2 = scripted["trainers"]
    assert models[m["M5"]]["aggregations"] == [
        {
            "trainer_id": 2,
            "holder": b.address,
            "exited": False,
            "tx": models[m["M5"]]["tx_hashes"][0],
        },
        {
            "trainer_id": 3,
            "holder": c.address,
            "exited": True,
            "tx": models[m["M5"]]["tx_hashes"][1],
        },
    ]
    assert [x["trainer_id"] for x in merge["aggregations"]] == [1]
    assert merge["aggregations"][0]["holder"] == a2.address and merge["creator"] == a.address
    assert models[m["M4"]]["weights_cid"] == _cid("w M4") and models[m["M1"]]["weights_cid"] is None
    rows = {t["trainer_id"]: t for t in doc["trainers"]}
    for entry in models.values():
        for agg in entry["aggregations"]:
            sender = chain.w3.eth.get_transaction_receipt(agg["tx"])["from"]
            assert sender in rows[agg["trainer_id"]]["holders"]
    for update in doc["updates"]:
        receipt = chain.w3.eth.get_transaction_receipt(update["tx_hash"])
        assert receipt["from"] == update["proposer"] and receipt["blockNumber"] == update["block"]
        uid = update_id(update["trainer_id"], bytes.fromhex(update["parent"][2:]), update["round"])
        assert str(uid) == update["id"]
    assert len(doc["updates"]) == 10
    assert [
        (t["trainer_id"], t["address"], t["holder"], t["exited"], t["updates"], t["aggregations"])
        for t in doc["trainers"]
    ] == [
        (1, a2.address, a2.address, False, 4, 3),
        (2, b.address, b.address, False, 3, 3),
        (3, c.address, None, True, 3, 3),
    ]
    assert rows[1]["holders"] == [a.address, a2.address] and rows[3]["exited_block"] is not None
    status = doc["status"]
    assert status | {"deadline": 0} == {
        "started": True,
        "round": 3,
        "phase": "PROPOSE",
        "votes": 0,
        "quorum": 2,  # trainer 3, a member, exited: it left the quorum
        "voters": 0,
        "trainers": 2,
        "block": chain.block_number(),
        "deadline": 0,
    }
    assert status["deadline"] > 0
    assert [
        (r["round"], r["models"], r["merges"], r["updates"], r["trainers"]) for r in doc["rounds"]
    ] == [
        (0, 3, 0, 3, 3),
        (1, 3, 1, 5, 3),
        (2, 2, 0, 2, 2),
    ]


def test_tree_and_dot_show_the_merge_with_both_parents(scripted, tmp_path):
    # Execute
    tree = _dag([], scripted, tmp_path)
    brief = _dag(["--brief"], scripted, tmp_path)
    dot = _dag(["--format", "dot"], scripted, tmp_path)

    # Assert: the text tree, by round
    ids = scripted["models"]
    lines = brief.splitlines()
    headers = [i for i, line in enumerate(lines) if line.lstrip("├└─│ ").startswith("round ")]
    assert len(headers) == 3 and len(lines) == 1 + 2 + 3 + 8
    for name, round_ in zip(NAMES, (0, 0, 0, 1, 1, 1, 2, 2), strict=True):
        (row,) = [i for i, line in enumerate(lines) if short_id(ids[name]) + "  parent" in line]
        assert headers[round_] < row and (round_ == 2 or row < headers[round_ + 1])
    (merge_line,) = [line for line in lines if short_id(ids["M4"]) + "  parents" in line]
    first, second = sorted([ids["M1"], ids["M2"]])
    assert f"parents {short_id(first)}, {short_id(second)}" in merge_line
    assert merge_line.rstrip().endswith("merge") and "by #1" in merge_line
    assert "dead" in next(line for line in lines if short_id(ids["M6"]) + "  parent" in line)
    assert "by #2 #3" in next(line for line in lines if short_id(ids["M5"]) + "  parent" in line)
    for mid in ids.values():
        assert _hex(mid) in tree
    a, b, c, a2 = scripted["trainers"]
    assert _cid("w M4") in tree and tree.count("aggregators") == 8
    assert f"#3 {c.address} (exited)" in tree and f"#1 {a2.address}  tx" in tree
    assert f"held before by {a.address}" in tree
    # and the DOT graph: an edge from each parent of the merge
    assert dot.startswith("digraph mcfl {") and dot.count(" -> ") == 9
    assert f'"{_hex(ids["M1"])}" -> "{_hex(ids["M4"])}" [label="1 of 3 updates"' in dot
    assert f'"{_hex(ids["M2"])}" -> "{_hex(ids["M4"])}" [label="2 of 3 updates"' in dot
    assert dot.count("cluster_round") == 3 and dot.count("peripheries=2") == 1
    assert sum("style=dashed" in line for line in dot.splitlines() if " -> " in line) == 1


def test_a_block_range_shows_the_dag_and_the_trainers_as_they_were(scripted, tmp_path):
    # Execute
    doc = json.loads(
        _dag(
            ["--format", "json", "--check", "--to-block", str(scripted["round0_end"])],
            scripted,
            tmp_path / "to",
        )
    )

    # Assert: after round 0, only M1..M3 existed, round 1 was proposing, no key had moved
    assert doc["check"] == []
    assert {x["id"] for x in doc["models"]} == {_hex(ROOT_ID)} | {
        _hex(scripted["models"][k]) for k in ("M1", "M2", "M3")
    }
    assert (doc["status"]["round"], doc["status"]["phase"]) == (1, "PROPOSE")
    assert {x["state"] for x in doc["models"] if x["parents"]} == {"frontier"}
    a, b, c, _ = scripted["trainers"]
    assert [(t["trainer_id"], t["holder"]) for t in doc["trainers"]] == [
        (1, a.address),
        (2, b.address),
        (3, c.address),
    ]


def test_a_range_starting_later_shows_unknown_parents_and_checks_what_it_read(scripted, tmp_path):
    # Execute: from the first block after round 0
    doc = json.loads(
        _dag(
            ["--format", "json", "--check", "--from-block", str(scripted["round0_end"] + 1)],
            scripted,
            tmp_path / "from",
        )
    )

    # Assert: the models of rounds 1 and 2, whose round-0 parents were not read, and
    # no disagreement (the model count is not compared on a partial range)
    m = scripted["models"]
    assert doc["check"] == []
    assert {x["id"] for x in doc["models"]} == {_hex(ROOT_ID)} | {
        _hex(m[k]) for k in ("M4", "M5", "M6", "M7", "M8")
    }
    (merge,) = [x for x in doc["models"] if x["id"] == _hex(m["M4"])]
    assert merge["parents"] == sorted([_hex(m["M1"]), _hex(m["M2"])]) and merge["index"] == 4
    assert len(doc["updates"]) == 7
    # trainers registered before the range are known from their later transfers only
    assert [(t["trainer_id"], t["registered_block"]) for t in doc["trainers"]][0] == (1, None)


def test_the_check_names_each_disagreement(scripted):
    # Prepare: a DAG read from the chain, then altered as a buggy reader or a
    # tampered cache would
    client = ChainClient.read_only(scripted["deployment"])
    log = sync_events(client)
    dag = build_dag(log, scripted["deployment"].genesis_cid)
    m = scripted["models"]
    assert check_against_chain(dag, client, block=log.last_block, trainers=log.trainers) == []
    dag.models[m["M5"]].popularity = 3
    dag.models[m["M4"]].parents = (m["M1"],)
    some_update = dag.updates[scripted["merge_updates"][0]]
    dag.updates[some_update.update_id] = replace(
        some_update, num_samples=some_update.num_samples + 1
    )
    trainers = log.trainers
    trainers[2].holders.append("0x" + "99" * 20)

    # Execute
    problems = check_against_chain(dag, client, block=log.last_block, trainers=trainers)

    # Assert
    m4, m5 = short_id(m["M4"]), short_id(m["M5"])
    assert f"model {m5}: popularity on chain 2, from events 3" in problems
    assert any(
        p.startswith(f"model {m4}: id recomputed from its parents, updates and rule")
        for p in problems
    )
    assert any(
        p.startswith(f"model {m4}: update ") and "not from one of its parents" in p
        for p in problems
    )
    assert any(p.startswith("update ") and "samples on chain" in p for p in problems)
    assert any(p.startswith("trainer #2: holder on chain") for p in problems)
    assert len(problems) == 6  # the two updates of M2 in M4 count once each


def test_dag_check_fails_on_a_tampered_cache(scripted, tmp_path):
    # Prepare: a cache whose record of the merge's creation claims another index
    _dag(["--format", "json"], scripted, tmp_path)
    (events,) = (tmp_path / "cache").glob("*/events.jsonl")
    merge = _hex(scripted["models"]["M4"])
    lines = []
    for line in events.read_text().splitlines():
        record = json.loads(line)
        if record["event"] == "ModelCreated" and record["model_id"] == merge:
            record["index"] = 9
        lines.append(json.dumps(record))
    events.write_text("\n".join(lines) + "\n")

    # Execute
    result = _dag(["--format", "json", "--check"], scripted, tmp_path, exit_code=1)

    # Assert
    assert (
        f"model {short_id(scripted['models']['M4'])}: creation index on chain 4, from events 9"
        in result.stderr
    )
    assert json.loads(result.stdout)["check"] != []


class _Spy:
    """A real client whose ``events`` calls are recorded (block ranges asked)."""

    def __init__(self, client):
        self._client, self.ranges = client, []

    def __getattr__(self, name):
        return getattr(self._client, name)

    def events(self, low, high):
        self.ranges.append((low, high))
        return self._client.events(low, high)


def test_a_cache_of_another_format_is_read_again(scripted, tmp_path):
    # Prepare: a cache as the protocol v1 tools wrote it (no format, a trainers field)
    client = ChainClient.read_only(scripted["deployment"])
    sync_events(client, cache_dir=tmp_path)
    position = json.loads((tmp_path / "position.json").read_text())
    assert position["format"] == CACHE_FORMAT
    del position["format"], position["anchor"]
    (tmp_path / "position.json").write_text(json.dumps({**position, "trainers": {"1": "0x1"}}))
    spy = _Spy(client)

    # Execute
    log = sync_events(spy, cache_dir=tmp_path)

    # Assert: everything read again from the deployment block, the cache rewritten
    assert spy.ranges[0][0] == scripted["deployment"].deployment_block
    assert log.records == sync_events(client).records
    assert json.loads((tmp_path / "position.json").read_text())["format"] == CACHE_FORMAT


def test_the_cache_reads_only_new_blocks_and_refuses_another_network(scripted, tmp_path):
    # Prepare (runs last: it adds a round 3 proposal to the shared devnet)
    deployment = scripted["deployment"]
    spy = _Spy(ChainClient.read_only(deployment))
    first_head = spy.block_number()
    first = sync_events(spy, cache_dir=tmp_path)
    a2 = scripted["trainers"][3]
    a2.submit_proposals([ProposalArg(scripted["models"]["M7"], _cid("round 3 by A'"), 50)])

    # Execute
    spy.ranges.clear()
    second = sync_events(spy, cache_dir=tmp_path)

    # Assert: only the new block was read, and the result is what a full read gives
    assert spy.ranges == [(first_head + 1, spy.block_number())]
    full = sync_events(ChainClient.read_only(deployment))
    assert second.records == full.records
    assert len(second.records) == len(first.records) + 2  # the update and the vote
    assert second.trainers == full.trainers
    dag = build_dag(second, deployment.genesis_cid)
    assert len(dag.updates) == 11 and len(dag.models) == 9
    # a cache written for another start block is refused with what to do
    with pytest.raises(CacheError, match="another --cache-dir"):
        EventCache(tmp_path).load(spy, deployment.deployment_block + 1)


def test_a_network_of_its_own_task_is_verified_with_that_task(tmp_path, restore_architectures):
    # Prepare: the example task's network (descriptor with fingerprint); two trainers
    # propose its real weights, the first publishes their FedAvg; a task with wider layers.
    example = load_task(f"{EXAMPLE}:task")
    storage = LocalStorage(tmp_path / "blobs")
    genesis = storage.put(example.encode_weights(example.create_model(0).state_dict()))
    devnet = tmp_path / "devnet"
    _, deployment = start_devnet(
        devnet, free_port(), genesis_cid=genesis, task=str(example.descriptor()),
        min_trainers=2, phase_duration=3600, accounts=3,
    )  # fmt: skip
    (tmp_path / "wide.py").write_text(
        EXAMPLE.read_text()
        .replace("nn.Linear(FEATURES, 32)", "nn.Linear(FEATURES, 48)")
        .replace("nn.Linear(32, 16)", "nn.Linear(48, 16)")
    )
    try:
        a, b = (ChainClient(deployment, account_index=i) for i in (1, 2))
        a.register(), b.register()
        updates = []
        for trainer, seed, samples in ((a, 1, 30), (b, 2, 10)):
            weights = example.create_model(seed).state_dict()
            cid = storage.put(example.encode_weights(weights))
            proposal = trainer.submit_proposals([ProposalArg(ROOT_ID, cid, samples)])
            updates.append((proposal[ROOT_ID], samples, weights))
        averaged = example.encode_weights(fedavg(updates))
        ids = tuple(sorted(u for u, _, _ in updates))
        a.submit_aggregations([AggregationArg((ROOT_ID,), ids, storage.put(averaged))])

        def run(command: str, *args: str):
            where = ["--deployment", str(deployment_file(devnet)), "--no-cache"]
            if command == "explorer":
                where = ["--deployment", str(deployment_file(devnet)), "--port", "0"]
            return CliRunner(mix_stderr=False).invoke(main, [command, *where, *args])

        # Execute: without its task, with another model's, with its own.
        blobs = ["--check-weights", f"local:{tmp_path / 'blobs'}"]
        without = run("dag", *blobs)
        wide = run("dag", *blobs, "--task", f"{tmp_path / 'wide.py'}:task")
        explorer = run("explorer", "--task", f"{tmp_path / 'wide.py'}:task")
        checked = run("dag", *blobs, "--task", f"{EXAMPLE}:task")
    finally:
        stop_devnet(devnet)

    # Assert: one line saying what to give; another model refused by its fingerprint,
    # by the explorer too; the network's own task rebuilds the model bit for bit.
    assert without.exit_code == 1 and "give its task with --task" in without.stderr
    for refused in (wide, explorer):
        assert refused.exit_code == 1, refused.stderr
        assert "not the network's model" in refused.stderr
        assert len(refused.stderr.strip().splitlines()) == 1
    assert checked.exit_code == 0, checked.stderr
    assert "rebuilt 1 models with published weights from their updates: bit-identical" in (
        " ".join(checked.stderr.split())
    )
