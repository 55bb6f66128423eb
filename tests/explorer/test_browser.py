"""The explorer in a real browser: a real network of worker processes followed live, and
a scripted merge.

In the first test the page is loaded before the trainers start, so the graph it finally
shows was built from the events that arrived while it was open. Saves
``test-artifacts/explorer-dag.png`` and ``test-artifacts/explorer-merge.png``.
"""

from __future__ import annotations

import json
import urllib.request

import pytest
from click.testing import CliRunner
from rich.console import Console

from mcfl_chain._utils.process import free_port, project_root
from mcfl_chain.chain.client import AggregationArg, ChainClient, ProposalArg
from mcfl_chain.chain.devnet import start_devnet, stop_devnet
from mcfl_chain.cli import main
from mcfl_chain.dag.graph import ROOT_ID, short_id
from mcfl_chain.dag.sync import build_dag, sync_events
from mcfl_chain.explorer.server import ExplorerServer, NetworkView
from mcfl_chain.simulation.runner import Network, SimulationConfig
from mcfl_chain.storage import cid_for_bytes, open_storage

from .headless import Browser

pytestmark = pytest.mark.slow

SCREENSHOT = project_root() / "test-artifacts" / "explorer-dag.png"
MERGE_SCREENSHOT = project_root() / "test-artifacts" / "explorer-merge.png"


def test_explorer_draws_the_network_live_and_shows_a_models_updates(tmp_path):
    # Prepare: a devnet with no trainer yet, the explorer, and the page open on it.
    config = SimulationConfig(
        name="explorer",
        dataset="digits",
        scenario="groups",
        n_trainers=5,
        rounds=3,
        samples=300,
        epochs=3,
        tolerance=1.0,
        round_timeout=240,
    )
    net = Network(config, tmp_path, Console(quiet=True))
    net.start()
    storage = open_storage(net.storage_spec)
    client = ChainClient.read_only(net.deployment)
    server = ExplorerServer(NetworkView(client, storage), port=0, poll_seconds=0.3)
    server.start()
    browser = None
    try:
        browser = Browser(server.url, tmp_path / "chromium")
        browser.wait_for("window.explorer && window.explorer.state.doc !== null")
        assert browser.evaluate("explorer.cy.nodes('.model').length") == 1  # the root alone

        # Execute: the trainers play their rounds while the page is open.
        net.spawn_workers()
        net.wait()
        models_on_chain = client.model_count()
        browser.wait_for(
            f"explorer.cy.nodes('.model').length === {models_on_chain} && "
            f"explorer.state.doc.status.round === {config.rounds}"
        )

        # Assert: one node per model and one edge from each parent of each model.
        log = sync_events(client)
        dag = build_dag(log, net.deployment.genesis_cid)
        drawn = browser.evaluate(
            "({nodes: explorer.cy.nodes('.model').map(n => n.id()).sort(),"
            "  edges: explorer.cy.edges().map(e => [e.source().id(), e.target().id()]).sort(),"
            "  counts: document.getElementById('counts').textContent,"
            "  phase: document.getElementById('phase').textContent,"
            "  voters: document.querySelectorAll('#trainers tbody tr').length})"
        )
        assert drawn["nodes"] == sorted("0x" + m.hex() for m in dag.models)
        edges = sorted(
            ["0x" + p.hex(), "0x" + m.model_id.hex()]
            for m in dag.models.values()
            for p in m.parents
        )
        assert drawn["edges"] == edges and len(edges) >= models_on_chain - 1
        assert drawn["counts"].startswith(f"{models_on_chain} models · {len(edges)} edges")
        assert drawn["phase"] == "PROPOSE" and drawn["voters"] == config.n_trainers

        # Execute: click the model with the most updates, where the graph drew it.
        model = max(
            (m for m in dag.models.values() if m.model_id != ROOT_ID),
            key=lambda m: (len(m.update_ids), m.popularity),
        )
        model_hex = "0x" + model.model_id.hex()
        x, y = browser.evaluate(
            f"(() => {{ const p = explorer.cy.getElementById('{model_hex}').renderedPosition();"
            f" const r = explorer.cy.container().getBoundingClientRect();"
            f" return [r.left + p.x, r.top + p.y]; }})()"
        )
        browser.click(x, y)
        browser.wait_for(f"document.getElementById('model-id')?.textContent === '{model_hex}'")
        shown = browser.evaluate(
            "({updates: [...document.querySelectorAll('#model-updates tr.update-row')]"
            "   .map(r => [r.cells[0].title, r.cells[1].title, r.cells[1].dataset.trainer,"
            "              r.cells[3].textContent]),"
            "  aggregators: [...document.querySelectorAll('#model-aggregators tbody tr')]"
            "   .map(r => [r.cells[0].textContent, r.cells[1].title]),"
            "  download: document.getElementById('download').getAttribute('href')})"
        )
        browser.screenshot(SCREENSHOT)

        # Assert: the panel lists the model's updates (id, proposer, trainer id, CID) and
        # its aggregators (trainer id, the address holding it).
        assert shown["updates"] == [
            [str(u), dag.updates[u].proposer, str(dag.updates[u].trainer_id), dag.updates[u].cid]
            for u in sorted(model.update_ids)
        ]
        holders = log.trainers
        assert shown["aggregators"] == [[f"#{t}", holders[t].holder] for t in model.aggregator_ids]
        # and its download link serves the weights the aggregator published
        with urllib.request.urlopen(server.url.rstrip("/") + shown["download"]) as response:
            blob = response.read()
        assert model.weights_cid is not None and cid_for_bytes(blob) == model.weights_cid
        assert SCREENSHOT.stat().st_size > 10_000

        # `mcfl-chain dag` on the same network agrees with the contract views.
        result = CliRunner(mix_stderr=False).invoke(
            main,
            [
                "dag",
                "--deployment",
                str(net.deployment_path),
                "--format",
                "json",
                "--check",
                "--cache-dir",
                str(tmp_path / "dag-cache"),
            ],
        )
        assert result.exit_code == 0, result.output
        document = json.loads(result.stdout)
        assert document["check"] == []
        assert sorted(m["id"] for m in document["models"]) == drawn["nodes"]
    finally:
        if browser is not None:
            browser.close()
        server.stop()
        storage.close()
        net.stop()


def test_explorer_draws_a_merge_with_an_edge_from_each_parent(tmp_path):
    # Prepare: a scripted network (fake weights CIDs). Round 0: trainers 1 and 2 each
    # aggregate only their own update (M1, M2); round 1: trainer 1 trains both and merges
    # them with 2's update of M2, 2 aggregates its update of M2 alone; then 2 exits.
    storage = open_storage(f"local:{tmp_path / 'blobs'}")
    genesis = storage.put(b"genesis")
    _, deployment = start_devnet(
        tmp_path / "devnet", free_port(), genesis_cid=genesis, task="lenet:digits", min_trainers=2
    )
    server = browser = None
    try:
        a, b = (ChainClient(deployment, account_index=i) for i in (1, 2))
        a.register()
        b.register()

        def propose(client, *parents):
            return client.submit_proposals(
                [ProposalArg(p, cid_for_bytes(client.address.encode() + p), 10) for p in parents]
            )

        ua, ub = propose(a, ROOT_ID)[ROOT_ID], propose(b, ROOT_ID)[ROOT_ID]
        (m1,) = a.submit_aggregations([AggregationArg((ROOT_ID,), (ua,))])
        (m2,) = b.submit_aggregations([AggregationArg((ROOT_ID,), (ub,))])
        pa, pb = propose(a, m1, m2), propose(b, m2)
        (merge,) = a.submit_aggregations([AggregationArg((m1, m2), (pa[m1], pa[m2], pb[m2]))])
        (alone,) = b.submit_aggregations([AggregationArg((m2,), (pb[m2],))])
        tx = b.trainers.functions.exit().transact({"from": b.address})
        assert b.w3.eth.wait_for_transaction_receipt(tx)["status"] == 1
        server = ExplorerServer(
            NetworkView(ChainClient.read_only(deployment), storage), port=0, poll_seconds=3600
        )
        server.start()
        browser = Browser(server.url, tmp_path / "chromium")
        browser.wait_for("window.explorer && explorer.cy.nodes('.model').length === 5")
        merge_hex = "0x" + merge.hex()

        # Execute: click the merge where the graph drew it
        drawn = browser.evaluate(
            f"({{into: explorer.cy.getElementById('{merge_hex}').incomers('edge')"
            f"   .map(e => [e.source().id(), e.hasClass('merge'), e.data('label')]).sort(),"
            f"  merges: explorer.cy.nodes('.model.merge').map(n => n.id()),"
            f"  counts: document.getElementById('counts').textContent,"
            f"  trainers: [...document.querySelectorAll('#trainers tbody tr')]"
            f"   .map(r => [r.cells[0].textContent, r.cells[1].textContent, r.className])}})"
        )
        x, y = browser.evaluate(
            f"(() => {{ const p = explorer.cy.getElementById('{merge_hex}').renderedPosition();"
            f" const r = explorer.cy.container().getBoundingClientRect();"
            f" return [r.left + p.x, r.top + p.y]; }})()"
        )
        browser.click(x, y)
        browser.wait_for(f"document.getElementById('model-id')?.textContent === '{merge_hex}'")
        panel = browser.evaluate(
            "({parents: [...document.querySelectorAll('#details dd a.model-link')]"
            "   .map(a => a.title),"
            "  badge: document.querySelector('#details .badge').textContent,"
            "  updates: [...document.querySelectorAll('#model-updates tr.update-row')]"
            "   .map(r => r.cells[1].dataset.trainer),"
            "  aggregators: [...document.querySelectorAll('#model-aggregators tbody tr')]"
            "   .map(r => [r.cells[0].textContent, r.cells[1].title])})"
        )
        browser.screenshot(MERGE_SCREENSHOT)

        # Assert: two purple edges into the merge, each counting its parent's updates
        first, second = sorted([m1, m2])
        assert drawn["into"] == sorted(
            [
                ["0x" + first.hex(), True, f"{1 if first == m1 else 2}/3 upd."],
                ["0x" + second.hex(), True, f"{1 if second == m1 else 2}/3 upd."],
            ]
        )
        assert drawn["merges"] == [merge_hex]
        assert drawn["counts"] == "5 models · 5 edges · 1 merge · 5 updates"
        assert [row[0] for row in drawn["trainers"]] == ["#1", "#2"]
        assert drawn["trainers"][1][1].endswith("(exited)") and drawn["trainers"][1][2] == "exited"
        # the panel: both parents, the merge badge, updates by trainer, the aggregator
        assert panel["parents"] == ["0x" + first.hex(), "0x" + second.hex()]  # no children
        assert panel["badge"].endswith("merge")
        assert sorted(panel["updates"]) == ["1", "1", "2"]
        assert panel["aggregators"] == [["#1", a.address]]
        assert short_id(alone) in browser.evaluate(
            "explorer.state.doc.models.map(m => m.short).join(' ')"
        )
        assert MERGE_SCREENSHOT.stat().st_size > 10_000
    finally:
        if browser is not None:
            browser.close()
        if server is not None:
            server.stop()
        stop_devnet(tmp_path / "devnet")
        storage.close()
