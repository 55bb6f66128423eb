"""The explorer's HTTP API on a real devnet: what it serves, and what it refuses."""

from __future__ import annotations

import http.client
import json

from mcfl_chain._utils.process import free_port
from mcfl_chain.chain.client import ChainClient
from mcfl_chain.chain.devnet import start_devnet, stop_devnet
from mcfl_chain.dag.graph import ROOT_ID
from mcfl_chain.explorer.server import ExplorerServer, NetworkView
from mcfl_chain.learning.codec import decode_weights, encode_weights
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
        update = a.propose(ROOT_ID, cid_for_bytes(b"never stored"), 10)
        assert view.refresh() and not view.refresh()
        status, _, body = _get(server, "/api/version")
        assert json.loads(body)["version"] == first["version"] + 1
        (row,) = json.loads(_get(server, "/api/dag")[2])["updates"]
        assert row["id"] == str(update) and row["proposer"] == a.address
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


def test_a_model_without_published_weights_is_recomputed_for_an_aliased_task(tmp_path):
    # Prepare: the task names the architecture by its alias "lenet" (the devnet's default
    # spelling); two trainers propose real weights and one aggregates without publishing.
    storage = open_storage(f"local:{tmp_path / 'blobs'}")
    genesis = storage.put(encode_weights("lenet5", create_model("lenet5", seed=0).state_dict()))
    _, deployment = start_devnet(
        tmp_path / "devnet", free_port(), genesis_cid=genesis, task="lenet:digits", min_trainers=2
    )
    server = None
    try:
        a, b = (ChainClient(deployment, account_index=i) for i in (1, 2))
        a.register()
        b.register()
        ids = []
        for seed, client in ((1, a), (2, b)):
            weights = create_model("lenet5", seed=seed).state_dict()
            ids.append(client.propose(ROOT_ID, storage.put(encode_weights("lenet5", weights)), 10))
        a.finish_proposals()
        b.finish_proposals()
        model = a.aggregate(ids, None)
        view = NetworkView(ChainClient.read_only(deployment), storage)
        server = ExplorerServer(view, port=0, poll_seconds=3600)
        server.start()

        # Execute
        status, headers, body = _get(server, f"/api/models/0x{model.hex()}/weights")

        # Assert: recomputed with the network's FedAvg, decoded as lenet5
        assert status == 200, body[:200]
        assert headers["X-Weights-Source"] == "recomputed"
        assert set(decode_weights(body, "lenet5")) == set(create_model("lenet5", 0).state_dict())
    finally:
        if server is not None:
            server.stop()
        stop_devnet(tmp_path / "devnet")
        storage.close()
