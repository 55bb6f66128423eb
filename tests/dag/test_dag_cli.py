"""``mcfl-chain dag`` on a real devnet where four trainers script a DAG with forks.

The trainers send real transactions (fake weights CIDs: nothing is trained), so the
expected DAG is known exactly: two forks, a dead branch, shared and lone models.

round 0 (parent root)  A,B: {a0,b0} -> M1 (popularity 2)   C,D: {c0,d0} -> M2 (popularity 2)
round 1                A: {a1,b1} -> M3   B: {b1} -> M4 (dead)   C,D: {c1,d1} -> M5 (CID by C)
round 2                A: {a2} -> M6 (from M3)   C: {c2} -> M7 (from M5)
"""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from mcfl_chain._utils.process import free_port
from mcfl_chain.chain.client import ChainClient
from mcfl_chain.chain.devnet import deployment_file, start_devnet, stop_devnet
from mcfl_chain.cli import main
from mcfl_chain.dag.graph import ROOT_ID, short_id
from mcfl_chain.dag.model_id import model_id
from mcfl_chain.dag.sync import CacheError, EventCache, build_dag, sync_events
from mcfl_chain.storage import cid_for_bytes

GENESIS = cid_for_bytes(b"genesis weights")


def _cid(label: str) -> str:
    return cid_for_bytes(label.encode())


@pytest.fixture(scope="module")
def scripted(tmp_path_factory):
    """The devnet, the four trainers' clients, the expected model ids and block marks."""
    state_dir = tmp_path_factory.mktemp("devnet")
    _, deployment = start_devnet(
        state_dir, free_port(), genesis_cid=GENESIS, task="lenet5:digits", min_trainers=4
    )
    try:
        a, b, c, d = (ChainClient(deployment, account_index=i) for i in (1, 2, 3, 4))
        everyone = (a, b, c, d)
        for t in everyone:
            t.register()

        def propose(round_, plan):
            ids = {
                t: t.propose(parent, _cid(f"{round_}-{t.address}"), 100 + i)
                for i, (t, parent) in enumerate(plan)
            }
            for t in everyone:
                t.finish_proposals()
            return ids

        def close_round():
            for t in everyone:
                t.next_round()

        u = propose(0, [(t, ROOT_ID) for t in everyone])
        m1 = a.aggregate([u[a], u[b]])
        assert b.aggregate([u[a], u[b]]) == m1
        m2 = c.aggregate([u[c], u[d]])
        assert d.aggregate([u[c], u[d]]) == m2
        close_round()
        end_of_round_0 = a.block_number()
        u = propose(1, [(a, m1), (b, m1), (c, m2), (d, m2)])
        m3 = a.aggregate([u[a], u[b]])
        m4 = b.aggregate([u[b]])
        m5 = c.aggregate([u[c], u[d]], _cid("weights of M5"))
        assert d.aggregate([u[c], u[d]]) == m5
        close_round()
        u = propose(2, [(a, m3), (c, m5)])
        m6 = a.aggregate([u[a]])
        m7 = c.aggregate([u[c]])
        close_round()
        yield {
            "deployment": deployment,
            "path": deployment_file(state_dir),
            "trainers": everyone,
            "round0_end": end_of_round_0,
            "models": {"M1": m1, "M2": m2, "M3": m3, "M4": m4, "M5": m5, "M6": m6, "M7": m7},
        }
    finally:
        stop_devnet(state_dir)


def _dag(args, scripted, tmp_path):
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
    assert result.exit_code == 0, result.output + result.stderr
    return result.stdout


def test_json_output_matches_the_chain(scripted, tmp_path):
    # Execute
    doc = json.loads(_dag(["--format", "json", "--check"], scripted, tmp_path))
    # Assert: the contract views agree with every model read from events
    assert doc["check"] == []
    chain = ChainClient.read_only(scripted["deployment"])
    m = {name: "0x" + mid.hex() for name, mid in scripted["models"].items()}
    models = {entry["id"]: entry for entry in doc["models"]}
    assert set(models) == {"0x" + ROOT_ID.hex(), *m.values()}
    assert len(models) == chain.model_count()
    for entry in models.values():
        if entry["parent"] is None:
            continue
        # ids are keccak(parent, sorted update ids), each update of that parent and round
        mid, parent = bytes.fromhex(entry["id"][2:]), bytes.fromhex(entry["parent"][2:])
        assert model_id(parent, [int(x) for x in entry["updates"]]) == mid
        assert entry["short"] == short_id(mid)
        assert chain.popularity_of(mid) == entry["popularity"] == len(entry["aggregations"])
        for uid in entry["updates"]:
            assert chain.update_cid(int(uid)) == next(
                x["cid"] for x in doc["updates"] if x["id"] == uid
            )
    assert [models[m[k]]["popularity"] for k in ("M1", "M2", "M3", "M4", "M5", "M6", "M7")] == [
        2,
        2,
        1,
        1,
        2,
        1,
        1,
    ]
    # forks, the dead branch and the frontier
    assert {k for k, v in m.items() if models[v]["fork"]} == {"M1"}
    assert models["0x" + ROOT_ID.hex()]["fork"]
    assert {k: models[v]["state"] for k, v in m.items()} == {
        "M1": "inner",
        "M2": "inner",
        "M3": "inner",
        "M4": "dead",
        "M5": "inner",
        "M6": "frontier",
        "M7": "frontier",
    }
    # who did what, and the transactions that did it
    a, b, c, d = scripted["trainers"]
    assert [x["aggregator"] for x in models[m["M1"]]["aggregations"]] == [a.address, b.address]
    assert (
        models[m["M5"]]["weights_cid"]
        == _cid("weights of M5")
        == chain.weights_cid_of(scripted["models"]["M5"])
    )
    assert models[m["M1"]]["weights_cid"] is None
    for update in doc["updates"]:
        receipt = chain.w3.eth.get_transaction_receipt(update["tx_hash"])
        assert receipt["from"] == update["proposer"] and receipt["blockNumber"] == update["block"]
    for entry in models.values():
        for agg in entry["aggregations"]:
            assert chain.w3.eth.get_transaction_receipt(agg["tx"])["from"] == agg["aggregator"]
    assert len(doc["updates"]) == 10
    assert [
        (t["trainer_id"], t["address"], t["updates"], t["aggregations"]) for t in doc["trainers"]
    ] == [(1, a.address, 3, 3), (2, b.address, 2, 2), (3, c.address, 3, 3), (4, d.address, 2, 2)]
    assert doc["status"] | {"deadline": 0} == {
        "started": True,
        "round": 3,
        "phase": "PROPOSE",
        "votes": 0,
        "quorum": 4,
        "trainers": 4,
        "block": chain.block_number(),
        "deadline": 0,
    }
    assert [(r["round"], r["models"], r["updates"]) for r in doc["rounds"]] == [
        (0, 2, 4),
        (1, 3, 4),
        (2, 2, 2),
    ]


def test_tree_and_dot_show_every_model_by_round(scripted, tmp_path):
    # Execute
    tree = _dag([], scripted, tmp_path)
    brief = _dag(["--brief"], scripted, tmp_path)
    dot = _dag(["--format", "dot"], scripted, tmp_path)
    # Assert
    ids = scripted["models"]
    lines = brief.splitlines()
    headers = [i for i, line in enumerate(lines) if line.lstrip("├└─│ ").startswith("round ")]
    assert len(headers) == 3 and len(lines) == 1 + 2 + 3 + 7
    for name, round_ in (
        ("M1", 0),
        ("M2", 0),
        ("M3", 1),
        ("M4", 1),
        ("M5", 1),
        ("M6", 2),
        ("M7", 2),
    ):
        (row,) = [i for i, line in enumerate(lines) if short_id(ids[name]) + "  parent" in line]
        assert headers[round_] < row and (round_ == 2 or row < headers[round_ + 1])
    assert "dead" in next(line for line in lines if short_id(ids["M4"]) + "  parent" in line)
    for mid in ids.values():
        assert "0x" + mid.hex() in tree
    assert _cid("weights of M5") in tree and tree.count("aggregators") == 7
    assert dot.startswith("digraph mcfl {") and dot.count(" -> ") == 7
    assert dot.count("cluster_round") == 3 and dot.count("dashed]") == 1


def test_a_block_range_shows_the_dag_as_it_was(scripted, tmp_path):
    # Execute
    doc = json.loads(
        _dag(
            ["--format", "json", "--to-block", str(scripted["round0_end"])],
            scripted,
            tmp_path / "to",
        )
    )
    # Assert: after round 0, only M1 and M2 existed and round 1 was proposing
    assert {x["id"] for x in doc["models"]} == {"0x" + ROOT_ID.hex()} | {
        "0x" + scripted["models"][k].hex() for k in ("M1", "M2")
    }
    assert (doc["status"]["round"], doc["status"]["phase"]) == (1, "PROPOSE")
    assert {x["state"] for x in doc["models"] if x["parent"]} == {"frontier"}


class _Spy:
    """A real client whose ``events`` calls are recorded (block ranges asked)."""

    def __init__(self, client):
        self._client, self.ranges = client, []

    def __getattr__(self, name):
        return getattr(self._client, name)

    def events(self, low, high):
        self.ranges.append((low, high))
        return self._client.events(low, high)


def test_the_cache_reads_only_new_blocks_and_refuses_another_network(scripted, tmp_path):
    # Prepare
    deployment = scripted["deployment"]
    spy = _Spy(ChainClient.read_only(deployment))
    first_head = spy.block_number()
    first = sync_events(spy, cache_dir=tmp_path)
    a = scripted["trainers"][0]
    a.propose(scripted["models"]["M6"], _cid("round 3 by A"), 50)
    # Execute
    spy.ranges.clear()
    second = sync_events(spy, cache_dir=tmp_path)
    # Assert: only the new block was read, and the result is what a full read gives
    assert spy.ranges == [(first_head + 1, spy.block_number())]
    full = sync_events(ChainClient.read_only(deployment))
    assert second.records == full.records and len(second.records) == len(first.records) + 1
    assert (
        second.trainers
        == full.trainers
        == {"1": a.address, **{str(i + 1): t.address for i, t in enumerate(scripted["trainers"])}}
    )
    dag = build_dag(second, deployment.genesis_cid)
    assert len(dag.updates) == 11 and len(dag.models) == 8
    # a cache written for another start block is refused with what to do
    with pytest.raises(CacheError, match="another --cache-dir"):
        EventCache(tmp_path).load(spy, deployment.deployment_block + 1)
