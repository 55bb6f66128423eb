"""A local web page that draws the model DAG and follows the chain live.

The server reads only public data: contract events and views through a read-only
client, and weights blobs from the storage trainers publish to. It binds to 127.0.0.1,
serves its own static files (the graph library is vendored: nothing is fetched at run
time) and a small JSON API:

- ``GET /api/version``: ``{"version": n, "block": b}``; ``n`` grows when the document
  changes, so the page polls this and reloads the document only then;
- ``GET /api/dag``: the :func:`~mcfl_chain.dag.render.dag_document` plus ``version``;
- ``GET /api/models/<0x id>/weights``: a model's weights (safetensors): the published
  blob when there is one, else the deterministic FedAvg recomputed from its updates;
- ``GET /api/updates/<id>/weights``: an update's weights blob.
"""

from __future__ import annotations

import json
import logging
import mimetypes
import re
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from pathlib import Path
from typing import Any

from mcfl_chain._utils.process import LOOPBACK
from mcfl_chain.chain.client import ChainClient
from mcfl_chain.dag.graph import ModelDAG, short_id
from mcfl_chain.dag.render import dag_document
from mcfl_chain.dag.sync import (
    EventCache,
    EventLog,
    build_dag,
    network_facts,
    network_status,
    read_events,
)
from mcfl_chain.dag.weights import Unavailable, WeightsBook
from mcfl_chain.learning.codec import Layout, WeightsError, encode_weights, read_layout
from mcfl_chain.learning.descriptor import Task, TaskError
from mcfl_chain.learning.fingerprint import layout_fingerprint
from mcfl_chain.storage import Storage, StorageError

log = logging.getLogger(__name__)

STATIC = resources.files("mcfl_chain.explorer") / "static"
_MODEL_WEIGHTS = re.compile(r"^/api/models/0x([0-9a-fA-F]{64})/weights$")
_UPDATE_WEIGHTS = re.compile(r"^/api/updates/([0-9]{1,78})/weights$")
_STATIC_NAME = re.compile(r"^[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+)*$")


class NetworkView:
    """The explorer's picture of one deployment, refreshed from the chain.

    Parameters
    ----------
    client
        A read-only client of the deployment.
    storage
        Where the weights live; None disables the weights downloads.
    cache_dir
        Optional event cache (see :class:`~mcfl_chain.dag.sync.EventCache`).
    """

    def __init__(
        self, client: ChainClient, storage: Storage | None = None, cache_dir: Path | None = None
    ) -> None:
        self.client = client
        self.storage = storage
        self._cache = EventCache(cache_dir) if cache_dir is not None else None
        start = client.deployment.deployment_block
        self._log = self._cache.load(client, start) if self._cache else EventLog(start, start - 1)
        self._lock = threading.Lock()
        self.version = 0
        self.dag = ModelDAG(genesis_cid=client.deployment.genesis_cid)
        self.document: dict[str, Any] = {}
        self._status: dict[str, Any] = {}
        self.refresh()

    def refresh(self) -> bool:
        """Read the blocks mined since the last call; True when the picture changed.

        Only one thread (the constructor, then the poller) calls this, so reads and
        rebuilds never overlap.
        """
        head = self.client.block_number()
        moved = head > self._log.last_block
        new = read_events(self.client, self._log, head) if moved else []
        if self._cache is not None and moved:
            self._cache.save(self.client, self._log, new)
        status = network_status(self.client, max(head, self._log.from_block))

        def phase(s: dict[str, Any]) -> dict[str, Any]:
            return {k: v for k, v in s.items() if k != "block"}

        if self.version and not new and phase(status) == phase(self._status):
            with self._lock:  # only the head moved: no new version, no redraw
                self.document = {
                    **self.document,
                    "status": status,
                    "network": {**self.document["network"], "last_block": head},
                }
                self._status = status
            return False
        dag = build_dag(self._log, self.client.deployment.genesis_cid)
        document = dag_document(
            dag,
            network=network_facts(self.client, self._log),
            status=status,
            trainers=self._log.trainers,
        )
        with self._lock:
            self.dag, self.document, self._status = dag, document, status
            self.version += 1
        return True

    def snapshot(self) -> tuple[int, dict[str, Any]]:
        """The current version number and document."""
        with self._lock:
            return self.version, self.document

    def model_weights(self, model_id: bytes) -> tuple[bytes, str]:
        """A model's weights blob and where it came from ("published" or "recomputed").

        Raises
        ------
        Unavailable
            Without storage, for an unknown model, or when the blobs cannot be had.
        """
        if self.storage is None:
            raise Unavailable("the explorer was started without --storage: no weights to serve")
        with self._lock:
            dag = self.dag
        model = dag.models.get(model_id)
        if model is None:
            raise Unavailable(f"model {short_id(model_id)} is not in the DAG")
        if model.weights_cid:
            try:
                return self.storage.get(model.weights_cid), "published"
            except StorageError as exc:
                log.info(
                    "published weights %s unreachable (%s); recomputing", model.weights_cid, exc
                )
        try:
            task = Task.parse(self.client.deployment.task, registered_only=False)
        except TaskError as exc:
            raise Unavailable(str(exc)) from exc
        layout = None if task.registered else self._custom_layout(task)
        book = WeightsBook(self.storage.get, task.arch, dag, layout=layout)
        weights = book.model(model_id)
        return encode_weights(task.arch, weights, registered=task.registered), "recomputed"

    def _custom_layout(self, task: Task) -> Layout:
        """A task's own model, which this process cannot build: its layout is the
        genesis blob's, accepted once it matches the fingerprint the chain records."""
        assert self.storage is not None
        genesis = self.client.deployment.genesis_cid
        try:
            layout = read_layout(self.storage.get(genesis))
        except (StorageError, WeightsError) as exc:
            raise Unavailable(f"genesis weights {genesis} unusable: {exc}") from exc
        if task.fingerprint is None or not task.fingerprint_matches(layout_fingerprint(layout)):
            raise Unavailable(
                f"the network's task {task} has no fingerprint matching its genesis weights: "
                f"cannot check recomputed weights of its own model"
            )
        return layout

    def update_weights(self, update_id: int) -> bytes:
        """An update's weights blob, fetched by the CID its proposer put on chain."""
        if self.storage is None:
            raise Unavailable("the explorer was started without --storage: no weights to serve")
        with self._lock:
            update = self.dag.updates.get(update_id)
        if update is None:
            raise Unavailable(f"update {update_id} is not in the DAG")
        try:
            return self.storage.get(update.cid)
        except StorageError as exc:
            raise Unavailable(f"update {update_id}: CID {update.cid} unreachable: {exc}") from exc


class _Handler(BaseHTTPRequestHandler):
    server: ExplorerServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s %s", self.address_string(), format % args)

    def _send(
        self,
        status: HTTPStatus,
        body: bytes,
        content_type: str,
        headers: dict[str, str] | None = None,
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header(
            "Content-Security-Policy", "default-src 'self'; style-src 'self' 'unsafe-inline'"
        )
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(body)

    def _json(self, data: Any, status: HTTPStatus = HTTPStatus.OK) -> None:
        self._send(status, json.dumps(data).encode(), "application/json")

    def _error(self, status: HTTPStatus, message: str) -> None:
        self._json({"error": message}, status)

    def do_GET(self) -> None:  # noqa: N802 (the http.server hook name)
        # A page of another origin that resolves its name to 127.0.0.1 (DNS rebinding)
        # sends its own Host: refuse anything but this server's loopback names.
        port = self.server.server_address[1]
        if self.headers.get("Host") not in (f"{LOOPBACK}:{port}", f"localhost:{port}"):
            self._error(
                HTTPStatus.FORBIDDEN,
                f"this explorer only answers requests for http://{LOOPBACK}:{port}",
            )
            return
        path = self.path.split("?", 1)[0]
        view = self.server.view
        try:
            if path in ("/", "/index.html"):
                self._static("index.html")
            elif path.startswith("/static/"):
                self._static(path[len("/static/") :])
            elif path == "/api/version":
                version, document = view.snapshot()
                self._json({"version": version, "block": document["status"]["block"]})
            elif path == "/api/dag":
                version, document = view.snapshot()
                self._json({**document, "version": version})
            elif match := _MODEL_WEIGHTS.match(path):
                blob, source = view.model_weights(bytes.fromhex(match.group(1)))
                name = f"model-{match.group(1)[:8].lower()}.safetensors"
                self._send(
                    HTTPStatus.OK,
                    blob,
                    "application/octet-stream",
                    {
                        "Content-Disposition": f'attachment; filename="{name}"',
                        "X-Weights-Source": source,
                    },
                )
            elif match := _UPDATE_WEIGHTS.match(path):
                blob = view.update_weights(int(match.group(1)))
                name = f"update-{match.group(1)[:10]}.safetensors"
                self._send(
                    HTTPStatus.OK,
                    blob,
                    "application/octet-stream",
                    {"Content-Disposition": f'attachment; filename="{name}"'},
                )
            else:
                self._error(HTTPStatus.NOT_FOUND, f"nothing at {path}")
        except Unavailable as exc:
            self._error(HTTPStatus.NOT_FOUND, str(exc))

    def _static(self, name: str) -> None:
        # Only plain relative names inside the package's static folder, never "..".
        if not _STATIC_NAME.match(name) or ".." in name.split("/"):
            self._error(HTTPStatus.NOT_FOUND, f"no static file {name}")
            return
        resource = STATIC.joinpath(*name.split("/"))
        if not resource.is_file():
            self._error(HTTPStatus.NOT_FOUND, f"no static file {name}")
            return
        kind = mimetypes.guess_type(name)[0] or "application/octet-stream"
        if kind.startswith("text/") or kind == "application/javascript":
            kind += "; charset=utf-8"
        self._send(HTTPStatus.OK, resource.read_bytes(), kind)


class ExplorerServer(ThreadingHTTPServer):
    """The HTTP server on 127.0.0.1 and the thread that follows the chain.

    Parameters
    ----------
    view
        The network picture to serve.
    port
        TCP port on loopback (0 picks a free one; see :attr:`url`).
    poll_seconds
        Pause between two looks at the chain head.
    """

    daemon_threads = True

    def __init__(self, view: NetworkView, port: int = 0, poll_seconds: float = 1.0) -> None:
        super().__init__((LOOPBACK, port), _Handler)
        self.view = view
        self.poll_seconds = poll_seconds
        self._stop = threading.Event()
        self._poller = threading.Thread(target=self._follow, name="explorer-poller", daemon=True)

    @property
    def url(self) -> str:
        """The page's address."""
        return f"http://{LOOPBACK}:{self.server_address[1]}/"

    def start(self) -> None:
        """Follow the chain and serve requests, both in background threads."""
        self._poller.start()
        threading.Thread(target=self.serve_forever, name="explorer-http", daemon=True).start()

    def _follow(self) -> None:
        while not self._stop.wait(self.poll_seconds):
            try:
                self.view.refresh()
            except Exception as exc:  # a node restart must not end the page
                log.warning(
                    "reading the chain failed (%s); retrying in %.0f s", exc, self.poll_seconds
                )

    def stop(self) -> None:
        """Stop following the chain and serving."""
        self._stop.set()
        self.shutdown()
        self.server_close()
        if self._poller.is_alive():
            self._poller.join(timeout=10)
