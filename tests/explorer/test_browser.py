"""The explorer in a real browser, following a real network of worker processes live.

The page is loaded before the trainers start, so the graph it finally shows was built
from the events that arrived while it was open. Saves ``test-artifacts/explorer-dag.png``.
"""

from __future__ import annotations

import json
import urllib.request

import pytest
from click.testing import CliRunner
from rich.console import Console

from mcfl_chain._utils.process import project_root
from mcfl_chain.chain.client import ChainClient
from mcfl_chain.cli import main
from mcfl_chain.dag.graph import ROOT_ID
from mcfl_chain.dag.sync import build_dag, sync_events
from mcfl_chain.explorer.server import ExplorerServer, NetworkView
from mcfl_chain.simulation.runner import Network, SimulationConfig
from mcfl_chain.storage import cid_for_bytes, open_storage

from .headless import Browser

pytestmark = pytest.mark.slow

SCREENSHOT = project_root() / "test-artifacts" / "explorer-dag.png"


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

        # Assert: one node per model and one edge per model but the root, as on chain.
        dag = build_dag(sync_events(client), net.deployment.genesis_cid)
        drawn = browser.evaluate(
            "({nodes: explorer.cy.nodes('.model').map(n => n.id()).sort(),"
            "  edges: explorer.cy.edges().map(e => [e.source().id(), e.target().id()]).sort(),"
            "  counts: document.getElementById('counts').textContent,"
            "  phase: document.getElementById('phase').textContent,"
            "  voters: document.querySelectorAll('#trainers tbody tr').length})"
        )
        assert drawn["nodes"] == sorted("0x" + m.hex() for m in dag.models)
        assert drawn["edges"] == sorted(
            ["0x" + m.parent.hex(), "0x" + m.model_id.hex()]
            for m in dag.models.values()
            if m.parent is not None
        )
        assert len(drawn["edges"]) == models_on_chain - 1
        assert drawn["counts"].startswith(f"{models_on_chain} models · {models_on_chain - 1} edges")
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
            "   .map(r => [r.cells[0].title, r.cells[1].title, r.cells[3].textContent]),"
            "  aggregators: [...document.querySelectorAll('#model-aggregators tbody tr')]"
            "   .map(r => r.cells[0].textContent),"
            "  download: document.getElementById('download').getAttribute('href')})"
        )
        browser.screenshot(SCREENSHOT)

        # Assert: the panel lists the model's updates (id, proposer, CID) and aggregators.
        assert shown["updates"] == [
            [str(u), dag.updates[u].proposer, dag.updates[u].cid] for u in sorted(model.update_ids)
        ]
        assert shown["aggregators"] == model.aggregators
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
