"""Headless Chromium driven over the Chrome DevTools Protocol (a small client for tests).

Debian's ``chromium`` is started with a throw-away profile and every background service
off, so it talks to nothing but the loopback page under test; nothing is downloaded.
"""

from __future__ import annotations

import base64
import itertools
import json
import shutil
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any

from websockets.sync.client import ClientConnection, connect

from mcfl_chain._utils.process import free_port

CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--disable-extensions",
    "--mute-audio",
)


def find_chromium() -> str:
    """Path of the chromium binary; fails with what to install when there is none."""
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    raise AssertionError(
        "the explorer's browser test needs Debian's chromium: run "
        "`make system` (apt-get install chromium)"
    )


class Browser:
    """One headless Chromium with one page, closed by :meth:`close` (by its PID)."""

    def __init__(
        self, url: str, profile: Path, width: int = 1500, height: int = 900, timeout: float = 30.0
    ) -> None:
        profile.mkdir(parents=True, exist_ok=True)
        self.log_path = profile / "chromium.log"
        port = free_port()
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                [
                    find_chromium(),
                    *CHROMIUM_FLAGS,
                    f"--user-data-dir={profile}",
                    f"--window-size={width},{height}",
                    "--remote-debugging-address=127.0.0.1",
                    f"--remote-debugging-port={port}",
                    url,
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        self._ws: ClientConnection | None = None
        try:
            self._ws = self._page_socket(port, url, timeout)
        except BaseException:
            self.close()
            raise
        self._ids = itertools.count(1)

    def _page_socket(self, port: int, url: str, timeout: float) -> ClientConnection:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(
                    f"chromium exited with code {self.proc.returncode}; see {self.log_path}"
                )
            try:
                with urllib.request.urlopen(
                    f"http://127.0.0.1:{port}/json/list", timeout=5
                ) as response:
                    targets = json.loads(response.read())
            except OSError:
                time.sleep(0.2)
                continue
            pages = [t for t in targets if t.get("type") == "page" and t["url"].startswith(url)]
            if pages:
                return connect(
                    pages[0]["webSocketDebuggerUrl"], max_size=None, open_timeout=timeout
                )
            time.sleep(0.2)
        raise AssertionError(f"chromium opened no page at {url}; see {self.log_path}")

    def send(self, method: str, **params: Any) -> dict[str, Any]:
        """One CDP command; returns its result (events in between are skipped)."""
        message_id = next(self._ids)
        self._ws.send(json.dumps({"id": message_id, "method": method, "params": params}))
        while True:
            reply = json.loads(self._ws.recv(timeout=60))
            if reply.get("id") == message_id:
                if "error" in reply:
                    raise AssertionError(f"{method} failed: {reply['error']}")
                return dict(reply["result"])

    def evaluate(self, expression: str) -> Any:
        """The JSON value of a JavaScript expression in the page (promises awaited)."""
        result = self.send(
            "Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True
        )
        if "exceptionDetails" in result:
            raise AssertionError(f"{expression!r} threw {result['exceptionDetails']}")
        return result["result"].get("value")

    def wait_for(self, expression: str, timeout: float = 60.0) -> Any:
        """Poll ``expression`` until it is truthy; returns its value."""
        deadline = time.monotonic() + timeout
        value = None
        while time.monotonic() < deadline:
            value = self.evaluate(expression)
            if value:
                return value
            time.sleep(0.2)
        raise AssertionError(f"timed out waiting for {expression!r} (last value {value!r})")

    def click(self, x: float, y: float) -> None:
        """A real left click at page coordinates (press then release)."""
        for kind in ("mousePressed", "mouseReleased"):
            self.send("Input.dispatchMouseEvent", type=kind, x=x, y=y, button="left", clickCount=1)

    def screenshot(self, path: Path) -> Path:
        """Save a PNG of the viewport."""
        data = self.send("Page.captureScreenshot", format="png")["data"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(data))
        return path

    def close(self) -> None:
        if self._ws is not None:
            self._ws.close()
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
