"""The explorer's HTTP API on a real devnet: what it serves, and what it refuses."""

from __future__ import annotations

import http.client
import json

import torch

from mcfl_chain._utils.process import free_port
from mcfl_chain.algorithms.fedavg import fedavg
from mcfl_chain.chain.client import AggregationArg, ChainClient, ProposalArg
from mcfl_chain.chain.devnet import start_devnet, stop_devnet
from mcfl_chain.dag.graph import ROOT_ID
from mcfl_chain.explorer.server import ExplorerServer, NetworkView
from mcfl_chain.learning.codec import decode_weights, encode_weights
from mcfl_chain.learning.descriptor import Task
from mcfl_chain.learning.fingerprint import layout_fingerprint, model_layout
from mcfl_chain.learning.models import create_model
from mcfl_chain.storage import cid_for_bytes, open_storage


def _get(server, path, host=None):
    port = server.server_address[1]
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request("GET", path, headers={"Host": host or f"127.0.0.1:{port}"})
    response = conn.getresponse()
    body = response.read()
    conn.close()
    return response.status, dict(response.getheaders()), body


def test_api_serves_the_dag_weights_and_static_files_only(tmp_path):
    # Prepare: genesis weights in a local store, a devnet, two trainers.
    storage = open_storage(f"local:{tmp_path / 'blobs'}")
    genesis_blob = b"genesis weights blob"
    genesis = storage.put(genesis_blob)
    _, deployment = start_devnet(
        tmp_path / "devnet", free_port(), genesis_cid=genesis, task="lenet5:digits", min_trainers=2
    )
    server = None
    try:
        a, b = (ChainClient(deployment, account_index=i) for i in (1, 2))
        a.register()
        b.register()
        view = NetworkView(ChainClient.read_only(deployment), storage)
        server = ExplorerServer(view, port=0, poll_seconds=3600)  # refreshed by hand here
        server.start()
        # Execute / Assert: the document and its version
        status, _, body = _get(server, "/api/dag")
        first = json.loads(body)
        assert status == 200 and len(first["models"]) == 1 and first["status"]["round"] == 0
        assert [(t["trainer_id"], t["holder"]) for t in first["trainers"]] == [
            (1, a.address),
            (2, b.address),
        ]
        update = a.submit_proposals([ProposalArg(ROOT_ID, cid_for_bytes(b"never stored"), 10)])[
            ROOT_ID
        ]
        assert view.refresh() and not view.refresh()
        status, _, body = _get(server, "/api/version")
        assert json.loads(body)["version"] == first["version"] + 1
        second = json.loads(_get(server, "/api/dag")[2])
        (row,) = second["updates"]
        assert (row["id"], row["proposer"], row["trainer_id"]) == (str(update), a.address, 1)
        assert (second["status"]["votes"], second["status"]["voters"]) == (1, 1)
        assert [t["voted"] for t in second["trainers"]] == [True, False]
        # the root's weights are the genesis blob; a missing blob is a 404 saying why
        status, headers, body = _get(server, f"/api/models/0x{ROOT_ID.hex()}/weights")
        assert status == 200 and body == genesis_blob
        assert headers["X-Weights-Source"] == "published"
        status, _, body = _get(server, f"/api/updates/{update}/weights")
        assert status == 404 and "unreachable" in json.loads(body)["error"]
        assert _get(server, f"/api/models/0x{'ab' * 32}/weights")[0] == 404
        # the page and its vendored library; nothing outside the static folder
        status, headers, body = _get(server, "/")
        assert status == 200 and b"/static/vendor/cytoscape.min.js" in body
        assert headers["Content-Security-Policy"].startswith("default-src 'self'")
        assert _get(server, "/static/vendor/cytoscape.min.js")[0] == 200
        assert _get(server, "/static/../server.py")[0] == 404
        assert _get(server, "/static/%2e%2e/server.py")[0] == 404
        # a request for another host name (DNS rebinding) is refused
        assert _get(server, "/api/dag", host="attacker.example:80")[0] == 403
        assert server.url.startswith("http://127.0.0.1:")
    finally:
        if server is not None:
            server.stop()
        storage.close()
        stop_devnet(tmp_path / "devnet")


def test_a_merge_without_published_weights_is_recomputed_from_all_its_updates(tmp_path):
    # Prepare: the task names the architecture by its alias "lenet" (the devnet's default
    # spelling). Round 0: two trainers each aggregate their own update of the root (M1,
    # M2); round 1: trainer 1 trains both and merges them with trainer 2's update of M2,
    # publishing no weights.
    storage = open_storage(f"local:{tmp_path / 'blobs'}")
    genesis = storage.put(encode_weights("lenet5", create_model("lenet5", seed=0).state_dict()))
    _, deployment = start_devnet(
        tmp_path / "devnet", free_port(), genesis_cid=genesis, task="lenet:digits", min_trainers=2
    )
    server = None
    trained: dict[int, tuple[int, dict[str, torch.Tensor]]] = {}
    seeds = iter(range(1, 100))

    def propose(client, *parents):
        args = []
        for i, parent in enumerate(parents):
            weights = create_model("lenet5", seed=next(seeds)).state_dict()
            args.append(ProposalArg(parent, storage.put(encode_weights("lenet5", weights)), 10 + i))
        ids = client.submit_proposals(args)
        for arg in args:
            trained[ids[arg.parent]] = (
                arg.num_samples,
                decode_weights(storage.get(arg.cid), "lenet5"),
            )
        return ids

    try:
        a, b = (ChainClient(deployment, account_index=i) for i in (1, 2))
        a.register()
        b.register()
        ua, ub = propose(a, ROOT_ID)[ROOT_ID], propose(b, ROOT_ID)[ROOT_ID]
        (m1,) = a.submit_aggregations([AggregationArg((ROOT_ID,), (ua,))])
        (m2,) = b.submit_aggregations([AggregationArg((ROOT_ID,), (ub,))])
        pa, pb = propose(a, m1, m2), propose(b, m2)
        merged = (pa[m1], pa[m2], pb[m2])
        (merge,) = a.submit_aggregations([AggregationArg((m1, m2), merged)])
        b.submit_aggregations([AggregationArg((m2,), (pb[m2],))])
        view = NetworkView(ChainClient.read_only(deployment), storage)
        server = ExplorerServer(view, port=0, poll_seconds=3600)
        server.start()

        # Execute
        document = json.loads(_get(server, "/api/dag")[2])
        status, headers, body = _get(server, f"/api/models/0x{merge.hex()}/weights")

        # Assert: the merge with both parents, its aggregator as a trainer id and holder
        (entry,) = [m for m in document["models"] if m["id"] == "0x" + merge.hex()]
        assert entry["merge"] and entry["parents"] == sorted(["0x" + m1.hex(), "0x" + m2.hex()])
        assert entry["aggregations"] == [
            {"trainer_id": 1, "holder": a.address, "exited": False, "tx": entry["tx_hashes"][0]}
        ]
        assert [r["merges"] for r in document["rounds"]] == [0, 1]
        # its weights: the network's FedAvg of the three updates, whatever their parent
        assert status == 200, body[:200]
        assert headers["X-Weights-Source"] == "recomputed"
        weights = decode_weights(body, "lenet5")
        expected = fedavg([(uid, *trained[uid]) for uid in sorted(merged)])
        assert set(weights) == set(expected)
        assert all(torch.equal(weights[k], expected[k]) for k in expected)
    finally:
        if server is not None:
            server.stop()
        stop_devnet(tmp_path / "devnet")
        storage.close()


def _mlp(seed: int) -> dict[str, torch.Tensor]:
    torch.manual_seed(seed)
    net = torch.nn.Sequential(torch.nn.Linear(6, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    return {k: v.detach().clone() for k, v in net.state_dict().items()}


def test_a_model_of_a_tasks_own_architecture_is_recomputed_against_its_fingerprint(tmp_path):
    # Prepare: a network whose task is a model this process cannot build (an MLP named
    # "clinic-mlp"); the descriptor carries its fingerprint, the genesis blob its layout.
    # Two trainers each aggregate their own update; trainer 1 publishes no weights.
    storage = open_storage(f"local:{tmp_path / 'blobs'}")
    layout = model_layout(_mlp(0))
    task = Task("clinic-mlp", ("clinics",), layout_fingerprint(layout)).format()
    genesis = storage.put(encode_weights("clinic-mlp", _mlp(0), registered=False))
    _, deployment = start_devnet(
        tmp_path / "devnet", free_port(), genesis_cid=genesis, task=task, min_trainers=2
    )
    server = None
    try:
        a, b = (ChainClient(deployment, account_index=i) for i in (1, 2))
        a.register()
        b.register()
        updates = {}
        for seed, client in ((1, a), (2, b)):
            cid = storage.put(encode_weights("clinic-mlp", _mlp(seed), registered=False))
            updates[seed] = client.submit_proposals([ProposalArg(ROOT_ID, cid, 5)])[ROOT_ID]
        (model,) = a.submit_aggregations([AggregationArg((ROOT_ID,), (updates[1],))])
        b.submit_aggregations([AggregationArg((ROOT_ID,), (updates[2],))])
        server = ExplorerServer(NetworkView(ChainClient.read_only(deployment), storage), 0, 3600)
        server.start()

        # Execute
        status, headers, body = _get(server, f"/api/models/0x{model.hex()}/weights")

        # Assert: recomputed (FedAvg of one update: the update itself), in the task's layout.
        assert status == 200, body[:300]
        assert headers["X-Weights-Source"] == "recomputed"
        weights = decode_weights(body, "clinic-mlp", layout=layout)
        assert all(torch.equal(weights[k], v) for k, v in _mlp(1).items())
    finally:
        if server is not None:
            server.stop()
        stop_devnet(tmp_path / "devnet")
        storage.close()
