"""The ray engine: its relay (without Ray), then the batched engine's hosts as Ray actors
on a local cluster that the run starts on 127.0.0.1, and on a cluster of two nodes in
network namespaces that the test builds and removes.

Ray listens on every interface unless its node's address is a loopback one (its gRPC
servers bind 0.0.0.0 or 127.0.0.1, nothing else), and rewrites 127.0.0.1 to the
machine's routable address unless told it cannot form a cluster. So:

- the local cluster must hold every Ray server on loopback: the test samples the
  listening sockets of its own process and its descendants (the driver, GCS, raylet,
  agents, workers and actors) with ``ss`` while the network runs;
- a cluster of two nodes cannot keep to the host's namespace: both nodes run in
  namespaces of the test (``-h``: the head, the driver and its devnet; ``-w``: the second
  node), joined by one veth pair, each with only ``lo`` and its end of the pair up, no
  route out. There Ray's sockets listen on the namespace's addresses, which are loopback
  and the one the test gave it; the test checks both, and that none of the cluster's
  processes has a socket in the host's namespace. The second node's host reaches the
  devnet, on the head namespace's loopback, through the engine's relay over Ray.

Needs root and iproute2 for the second test; fails with the reason otherwise.
"""

from __future__ import annotations

import http.client
import ipaddress
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import psutil
import pytest

from mcfl_chain.chain.devnet import stop_devnet
from mcfl_chain.simulation.engines.ray import _Proxy, _Relay, _targets
from mcfl_chain.worker.config import WorkerConfig

from .test_engines import _config, _run_and_check

pytestmark = pytest.mark.slow

RAY = str(Path(sys.executable).with_name("ray"))
HEAD_PORT = 6379
# No metrics agent (a minimal install has none); workers at the default priority, as the
# engine's local cluster has them (Ray's nice 15 starves them beside the rest of the suite).
SYSTEM_CONFIG = '{"enable_metrics_collection": false, "worker_niceness": 0}'


@dataclass(frozen=True)
class Listener:
    namespace: str  # "" for the host's
    process: str
    pid: int
    address: str  # as ss prints the local address, port stripped


def _listeners(namespace: str = "") -> list[Listener]:
    """Every listening TCP and UDP socket of a namespace, one per owning process."""
    command = ["ss", "-ltnupH"]
    if namespace:
        command = ["ip", "netns", "exec", namespace, *command]
    out = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    found = []
    for line in out.splitlines():
        fields = line.split()
        if len(fields) < 5:
            continue
        local = fields[4].rsplit(":", 1)[0].strip("[]")
        for name, pid in re.findall(r'\("([^"]*)",pid=(\d+)', line):
            found.append(Listener(namespace, name, int(pid), local))
    return found


def _loopback(address: str) -> bool:
    if "%" in address:  # an interface's scope: 127.0.0.1%lo
        address = address.split("%")[0]
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    mapped = getattr(ip, "ipv4_mapped", None)
    return ip.is_loopback or (mapped is not None and mapped.is_loopback)


class Sampler:
    """Samples ``sample()`` every half second on a thread while in its block."""

    def __init__(self, sample: Callable[[], list[Any]]) -> None:
        self.sample = sample
        self.seen: set[Any] = set()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._done.wait(0.5):
            self.seen.update(self.sample())

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join()


def _own_listeners() -> list[Listener]:
    """The listening sockets of this process and its descendants: the driver, a local
    Ray cluster's processes, its actors, the devnet."""
    me = psutil.Process()
    pids = {me.pid} | {child.pid for child in me.children(recursive=True)}
    return [s for s in _listeners() if s.pid in pids]


def _ray_processes() -> list[psutil.Process]:
    def ray(proc: psutil.Process) -> bool:
        try:
            return proc.name() in ("gcs_server", "raylet") or proc.name().startswith("ray::")
        except psutil.Error:
            return False

    return [p for p in psutil.Process().children(recursive=True) if ray(p)]


def _priorities() -> list[tuple[str, int]]:
    """Each running Ray worker (``ray::…``) process's name and nice value."""
    found = []
    for proc in _ray_processes():
        try:
            name = proc.name()
            if name.startswith("ray::"):
                found.append((name, proc.nice()))
        except psutil.Error:
            pass
    return found


def _metrics(run: Path) -> list[dict]:
    return [json.loads(raw) for raw in (run / "metrics.jsonl").read_text().splitlines()]


class _Echo(BaseHTTPRequestHandler):
    """Answers every POST with its method, path, one header and body, as JSON."""

    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        reply = json.dumps(
            {"path": self.path, "tag": self.headers.get("X-Tag"), "body": body.decode()}
        ).encode()
        self.send_response(201)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, *args: object) -> None:
        pass


def test_the_relay_carries_requests_to_the_named_service_only():
    # Prepare: a service on loopback, the proxy naming it, a relay handing requests to
    # the proxy directly (over Ray, on the driver's node, in a run)
    service = ThreadingHTTPServer(("127.0.0.1", 0), _Echo)
    threading.Thread(target=service.serve_forever, daemon=True).start()
    proxy = _Proxy({"rpc": f"http://127.0.0.1:{service.server_address[1]}/base"})
    relay = _Relay(lambda *request: proxy.forward("rpc", *request))
    try:
        # Execute: one request with a length, one chunked (as ipfshttpclient sends files)
        answers = []
        for body in (b'{"id": 1}', iter([b"part one, ", b"part two"])):
            connection = http.client.HTTPConnection("127.0.0.1", relay.port, timeout=30)
            connection.request("POST", "/x?y=1", body=body, headers={"X-Tag": "t"})
            response = connection.getresponse()
            answers.append((response.status, json.loads(response.read())))
            connection.close()
    finally:
        relay.close()
        service.shutdown()
        service.server_close()
    down = proxy.forward("rpc", "POST", "/", {}, b"")  # nothing listens there any more

    # Assert
    assert answers == [
        (201, {"path": "/base/x?y=1", "tag": "t", "body": '{"id": 1}'}),
        (201, {"path": "/base/x?y=1", "tag": "t", "body": "part one, part two"}),
    ]
    assert down[0] == 502
    with pytest.raises(KeyError):
        proxy.forward("elsewhere", "POST", "/", {}, b"")
    # what a host on another node relays: the chain, and IPFS's API when it is the store
    config = WorkerConfig(rpc="http://127.0.0.1:8545", storage="ipfs:/ip4/127.0.0.1/tcp/5001")
    assert _targets(config) == {"rpc": "http://127.0.0.1:8545", "ipfs": "http://127.0.0.1:5001"}
    assert _targets(replace(config, storage="local:/run/blobs")) == {"rpc": config.rpc}


def test_a_local_ray_cluster_runs_the_network_with_every_server_on_loopback(tmp_path: Path):
    # Execute: the engine starts (and stops) the cluster; sockets sampled meanwhile
    run = tmp_path / "run"
    with Sampler(_own_listeners) as sockets, Sampler(_priorities) as priorities:
        _run_and_check(_config(engine="ray", n_trainers=3, rounds=2), run)

    # Assert: the cluster's servers were seen, and every one listened on loopback
    names = {s.process for s in sockets.seen}
    assert {"gcs_server", "raylet"} <= names, sockets.seen
    assert any(name.startswith("ray::") for name in names), sockets.seen
    outside = sorted({(s.process, s.address) for s in sockets.seen if not _loopback(s.address)})
    assert not outside, f"listening outside loopback: {outside}"
    # every trainer played every round, in a host actor on the loopback node
    lines = _metrics(run)
    assert sorted((line["round"], line["trainer_index"]) for line in lines) == [
        (r, i) for r in range(2) for i in range(3)
    ]
    assert {line["engine"] for line in lines} == {"ray"}
    # ... at this process's priority (Ray's default, nice 15, starves them beside others)
    assert any(name.startswith("ray::_HostActor") for name, _ in priorities.seen), priorities.seen
    assert {nice for _, nice in priorities.seen} == {psutil.Process().nice()}, priorities.seen
    hosts = sorted(run.glob("host-*.log"))
    assert len(hosts) == min(3, os.cpu_count() or 1)
    assert all("on node 127.0.0.1 " in h.read_text() for h in hosts)
    # and the cluster is gone with the run
    deadline = time.monotonic() + 30
    while _ray_processes() and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not _ray_processes()


@dataclass
class Cluster:
    """Two Ray nodes in namespaces of the test, joined by one veth pair."""

    head: str  # namespace of the head node, the driver and the devnet
    node: str  # namespace of the second node
    head_ip: str
    node_ip: str
    folder: Path

    @property
    def address(self) -> str:
        return f"{self.head_ip}:{HEAD_PORT}"

    def ip_of(self, namespace: str) -> str:
        return self.head_ip if namespace == self.head else self.node_ip

    def run(self, namespace: str, *argv: str, timeout: float) -> subprocess.CompletedProcess:
        return subprocess.run(
            ["ip", "netns", "exec", namespace, *argv],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=_env(),
        )


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONWARNINGS": "ignore", "RAY_USAGE_STATS_ENABLED": "0"}


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True)


def _pids(namespace: str) -> list[int]:
    out = subprocess.run(["ip", "netns", "pids", namespace], capture_output=True, text=True)
    return [int(pid) for pid in out.stdout.split()]


def _start_node(namespace: str, log: Path, *args: str) -> None:
    """``ray start --block ARGS`` in ``namespace``, returning once the node runs."""
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            ["ip", "netns", "exec", namespace, RAY, "start", "--block", *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=_env(),
            start_new_session=True,
        )
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and proc.poll() is None:
        if "Ray runtime started" in log.read_text(errors="replace"):
            return
        time.sleep(0.5)
    raise AssertionError(f"{log.name}: the node did not start:\n{log.read_text()[-3000:]}")


def _teardown(cluster: Cluster) -> None:
    """Stop every process in the two namespaces (the test started all of them), by PID,
    then remove the namespaces and with them the veth pair."""
    for sig, grace in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)):
        for namespace in (cluster.head, cluster.node):
            for pid in _pids(namespace):
                try:
                    os.kill(pid, sig)
                except ProcessLookupError:
                    pass
        deadline = time.monotonic() + grace
        while any(_pids(n) for n in (cluster.head, cluster.node)):
            if time.monotonic() > deadline:
                break
            time.sleep(0.2)
    for namespace in (cluster.head, cluster.node):
        subprocess.run(["ip", "netns", "del", namespace], capture_output=True)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    if os.geteuid() != 0 or shutil.which("ip") is None:
        pytest.fail("this test builds network namespaces: run the suite as root with iproute2")
    # Names and a /24 of the test's own (test_namespaces.py uses 10.200-249.x).
    tag = os.getpid() % 10_000
    subnet = f"10.{150 + tag % 50}.{tag % 250}"
    # Ray's session directory holds Unix sockets: a short path (107 bytes at most).
    folder = Path(tempfile.mkdtemp(prefix="mcfl-ray-"))
    built = Cluster(f"mcray{tag}-h", f"mcray{tag}-w", f"{subnet}.1", f"{subnet}.2", folder)
    try:
        _ip("netns", "add", built.head)
        _ip("netns", "add", built.node)
        # Both ends are created inside the namespaces: nothing appears on the host.
        _ip("-n", built.head, "link", "add", "eth0", "type", "veth", "peer", "name", "eth0",
            "netns", built.node)  # fmt: skip
        for namespace in (built.head, built.node):
            _ip("-n", namespace, "addr", "add", f"{built.ip_of(namespace)}/24", "dev", "eth0")
            _ip("-n", namespace, "link", "set", "eth0", "up")
            _ip("-n", namespace, "link", "set", "lo", "up")
        common = ["--num-cpus=1", "--disable-usage-stats", f"--system-config={SYSTEM_CONFIG}"]
        _start_node(
            built.head,
            tmp_path / "ray-head.log",
            "--head",
            f"--node-ip-address={built.head_ip}",
            f"--port={HEAD_PORT}",
            "--include-dashboard=false",
            f"--temp-dir={folder}",
            *common,
        )
        _start_node(
            built.node,
            tmp_path / "ray-node.log",
            f"--address={built.address}",
            f"--node-ip-address={built.node_ip}",
            *common[:-1],  # the system config is the head's
        )
        yield built
    finally:
        _teardown(built)
        shutil.rmtree(folder, ignore_errors=True)


def _interfaces(namespace: str) -> dict[str, set[str]]:
    """A namespace's interfaces and the addresses of each."""

    def ip(*args: str) -> list[str]:
        out = subprocess.run(
            ["ip", "-n", namespace, "-o", *args], capture_output=True, text=True, check=True
        ).stdout
        return out.splitlines()

    found: dict[str, set[str]] = {
        line.split(":")[1].strip().split("@")[0]: set() for line in ip("link")
    }
    for line in ip("addr"):
        found[line.split()[1]].add(line.split()[3].split("/")[0])
    return found


def test_a_second_ray_node_in_a_namespace_hosts_trainers(cluster: Cluster, tmp_path: Path):
    # Prepare: the scenario, for the driver in the head's namespace
    run = tmp_path / "run"
    config = _config(engine="ray", ray_address=cluster.address, n_trainers=3, rounds=2)
    scenario = tmp_path / "scenario.json"
    scenario.write_text(json.dumps(asdict(config)))
    cluster_pids: set[int] = set()

    def sample() -> list[Listener]:
        cluster_pids.update(_pids(cluster.head), _pids(cluster.node))
        return [*_listeners(), *_listeners(cluster.head), *_listeners(cluster.node)]

    # Execute: simulate, then `dag --check`, both in the head's namespace (the devnet
    # listens on its loopback); the cluster's sockets sampled meanwhile
    cli = [sys.executable, "-m", "mcfl_chain"]
    try:
        with Sampler(sample) as sockets:
            simulated = cluster.run(
                cluster.head, *cli, "simulate", "--config", str(scenario), "--out", str(run),
                "--keep-running", timeout=600,
            )  # fmt: skip
        assert simulated.returncode == 0, simulated.stdout[-3000:] + simulated.stderr[-3000:]
        checked = cluster.run(
            cluster.head, *cli, "dag", "--deployment", str(run / "devnet" / "deployment.json"),
            "--format", "json", "--check", "--no-cache", timeout=300,
        )  # fmt: skip
    finally:
        stop_devnet(run / "devnet")

    # Assert: the DAG checks out and every trainer played every round
    assert checked.returncode == 0, checked.stderr[-3000:]
    assert json.loads(checked.stdout)["check"] == []
    lines = _metrics(run)
    assert sorted((line["round"], line["trainer_index"]) for line in lines) == [
        (r, i) for r in range(2) for i in range(3)
    ]
    assert {line["engine"] for line in lines} == {"ray"}
    # one host per node (one CPU each); the second node's reached the chain by the relay
    logs = [h.read_text() for h in sorted(run.glob("host-*.log"))]
    assert len(logs) == 2
    on_node = [log for log in logs if f"on node {cluster.node_ip} " in log]
    assert len(on_node) == 1 and "relayed to the driver's node" in on_node[0], logs
    assert any(f"on node {cluster.head_ip} " in log for log in logs), logs
    # sockets: none of the cluster's in the host's namespace; in the test's namespaces,
    # only the namespace's own addresses (wildcards there cover lo and the test's veth)
    seen = sockets.seen
    assert not [s for s in seen if not s.namespace and s.pid in cluster_pids]
    names = {(s.namespace, s.process) for s in seen}
    assert {(cluster.head, "gcs_server"), (cluster.node, "raylet")} <= names, seen
    for namespace in (cluster.head, cluster.node):
        own = cluster.ip_of(namespace)
        interfaces = _interfaces(namespace)
        assert set(interfaces) == {"lo", "eth0"}, interfaces
        assert all(_loopback(a) for a in interfaces["lo"]), interfaces
        link_local = {a for a in interfaces["eth0"] if ipaddress.ip_address(a).is_link_local}
        assert interfaces["eth0"] - link_local == {own}, interfaces
        for s in seen:
            if s.namespace == namespace:
                assert _loopback(s.address) or s.address in (own, "*", "0.0.0.0", "::"), s
