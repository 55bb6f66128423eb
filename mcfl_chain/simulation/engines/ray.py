"""Trainers in hosts that run as Ray actors (:mod:`mcfl_chain.host` on a Ray cluster), so
that a simulation larger than one machine runs on an existing cluster engine.

Each actor runs one :class:`~mcfl_chain.host.engine.Host` for its share of the trainers,
exactly as a host process of the batched engine does (shared chain reads, batched
training), and asks for one CPU (or one GPU), so that Ray spreads the hosts over the
cluster's nodes: as many hosts as the cluster has CPUs (at most ``--threads``, at most
one per trainer), or one per GPU.

The cluster is ``--ray-address`` (HOST:PORT of a running head, or ``auto``); by default,
a local one that the run starts and stops, every server of it on 127.0.0.1: Ray rewrites
127.0.0.1 to the machine's routable address and listens on every interface unless it
believes it cannot form a cluster (``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``, set while it
starts). Its dashboard and usage reports are off.

The chain and the storage are given to the actors by URL (the devnet's JSON-RPC URL,
``local:DIR`` or ``ipfs:ADDRESS``). Both listen on the driver's loopback only: a host on
another node reaches them through a relay, an HTTP server on its own node's loopback
whose requests travel over Ray to a proxy actor pinned to the driver's node, which sends
them to the devnet or the IPFS API there. Nothing listens on another address for them.

What else a cluster of several machines needs (a node in a network namespace of the
same machine has all of it):

- the run directory on a filesystem every node mounts at the same path: a trainer's
  state, log and metrics, the deployment file and a ``local:`` store are files there;
- this package, at the same version, in every node's Python environment, and the
  scenario's dataset where the loader looks for it;
- the nodes able to reach each other's Ray ports (Ray's own requirement).
"""

from __future__ import annotations

import contextlib
import http.client
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import traceback
import warnings
from collections.abc import Iterator
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar
from urllib.parse import urlsplit

from mcfl_chain._utils.forked import ChildProcess
from mcfl_chain._utils.process import LOOPBACK
from mcfl_chain.host.engine import HostedTrainer, write_plan
from mcfl_chain.simulation.engines.batched import host_shares, hosted_trainers
from mcfl_chain.worker.config import WorkerConfig

if TYPE_CHECKING:
    from mcfl_chain.simulation.runner import Network

_LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1", "[::1]")
_HOP_BY_HOP = frozenset(
    ("connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "host")
    + ("content-length", "proxy-authorization", "proxy-authenticate")
)
OBJECT_STORE_BYTES = 256 * 1024**2
"""The local cluster's object store: the actors exchange exit codes and relayed HTTP
bodies, not models (Ray's default is 30 % of the machine's memory)."""


def parse_ray_address(value: str) -> str:
    """``value`` if it names a Ray cluster as :func:`ray.init` takes it here: ``auto``
    or ``HOST:PORT`` (a ``ray://`` client has no node of its own to relay from).

    Raises
    ------
    ValueError
        In one line, saying what is expected.
    """
    host, sep, port = value.rpartition(":")
    if value == "auto" or (sep and host and port.isdigit() and 0 < int(port) < 65536):
        if "://" not in value:
            return value
    raise ValueError(
        f"ray_address must be HOST:PORT of a running Ray head (or 'auto'), not {value!r}"
    )


class RayEngine:
    name: ClassVar[str] = "ray"

    def __init__(self) -> None:
        self._hosts: list[RayHost] = []
        self._proxy: Any = None
        self._temp: Path | None = None
        self._connected = False

    def start(self, network: Network, extra_args: dict[int, list[str]]) -> list[ChildProcess]:
        import ray

        if any(extra_args.values()):
            raise ValueError(
                "the ray engine takes no per-trainer worker options; use the process engine"
            )
        cfg = network.config
        trainers = [_absolute(t) for t in hosted_trainers(network)]
        self._connect(cfg.ray_address, cfg.threads)
        resources = ray.cluster_resources()
        gpus = int(resources.get("GPU", 0))
        on_gpu = cfg.device == "cuda" or (cfg.device == "auto" and gpus > 0)
        if on_gpu and not gpus:
            raise _error(f"--device cuda: the Ray cluster at {self._where(cfg)} has no GPU")
        slots = gpus if on_gpu else int(resources.get("CPU", 0))
        if not slots:
            raise _error(f"the Ray cluster at {self._where(cfg)} has no CPU for a host")
        shares = host_shares(len(trainers), min(slots, cfg.threads or slots))
        driver_node = ray.get_runtime_context().get_node_id()
        targets = _targets(trainers[0].config)
        self._proxy = (
            ray.remote(_Proxy)
            .options(
                num_cpus=0,
                max_concurrency=32,
                scheduling_strategy=_on_node(driver_node),
            )
            .remote(targets)
        )
        host_class: Any = ray.remote(_HostActor)
        for k, share in enumerate(shares):
            plan = [trainers[i] for i in share]
            log = (network.run_dir / f"host-{k}.log").resolve()
            write_plan(network.run_dir / f"host-{k}.json", plan)  # for the record
            actor = host_class.options(
                num_cpus=1,
                num_gpus=1 if on_gpu else 0,
                max_concurrency=4,  # run, stop and the adapter's questions side by side
                scheduling_strategy="SPREAD",
            ).remote(
                k,
                [t.to_json() for t in plan],
                "cuda" if on_gpu else "cpu",
                str(log),
                driver_node,
                self._proxy,
                targets,
            )
            self._hosts.append(RayHost(actor, actor.run.remote(), log, f"host {k}"))
        return list(self._hosts)

    def log_of(self, network: Network, position: int) -> tuple[int | None, Path]:
        return None, network.run_dir / f"host-{position}.log"

    def stop(self, network: Network) -> None:
        """End every host still running, then leave the cluster (a local one stops)."""
        import ray

        if not self._connected:
            return
        try:
            for host in self._hosts:
                host.kill()
            if self._proxy is not None:
                ray.kill(self._proxy)
        finally:
            self._hosts, self._proxy = [], None
            ray.shutdown()
            self._connected = False
            if self._temp is not None:
                shutil.rmtree(self._temp, ignore_errors=True)
                self._temp = None

    def _where(self, cfg: Any) -> str:
        return cfg.ray_address or f"{LOOPBACK} (local)"

    def _connect(self, address: str | None, threads: int | None) -> None:
        import ray

        if ray.is_initialized():
            raise _error(
                "Ray is already initialized in this process: the ray engine connects (or "
                "starts a local cluster) itself"
            )
        options: dict[str, Any] = dict(
            include_dashboard=False,
            log_to_driver=False,
            configure_logging=False,
            namespace="mcfl-chain",
        )
        with _quiet_ray(local=address is None):
            if address is None:
                self._temp = Path(tempfile.mkdtemp(prefix="mcfl-ray-"))  # short: socket paths
                try:
                    ray.init(
                        address="local",
                        num_cpus=threads or os.cpu_count() or 1,
                        object_store_memory=OBJECT_STORE_BYTES,
                        _node_ip_address=LOOPBACK,
                        _temp_dir=str(self._temp),
                        _system_config={
                            # No metrics agent to wait for (a minimal install has none).
                            "enable_metrics_collection": False,
                            # Ray starts its workers, the hosts here, at nice 15: beside
                            # any other load they starved (a test run of 26 s took 3 to
                            # 9 min on a busy machine, or failed). The process and
                            # batched engines' trainers run at the default priority.
                            "worker_niceness": 0,
                            # Every host is an actor with a process of its own: no idle
                            # workers started for the driver to wait on.
                            "prestart_worker_first_driver": False,
                        },
                        **options,
                    )
                except BaseException:
                    shutil.rmtree(self._temp, ignore_errors=True)
                    self._temp = None
                    raise
            else:
                # The address this machine reaches the head from, as Ray itself picks
                # it, but never from the node address that another node of the same
                # machine left in the session directory they share.
                own = _address_towards(address)
                if own is not None:
                    options["_node_ip_address"] = own
                try:
                    ray.init(address=address, **options)
                except (ConnectionError, RuntimeError, ValueError) as exc:
                    first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
                    raise _error(f"cannot join the Ray cluster at {address}: {first}") from exc
        self._connected = True


def _address_towards(address: str) -> str | None:
    """This machine's IP address on the route to ``HOST:PORT`` (None for ``auto``, or
    when there is no route)."""
    host, _, port = address.rpartition(":")
    if not host:
        return None
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.connect((host, int(port)))  # UDP: nothing is sent
            return str(probe.getsockname()[0])
    except OSError:
        return None


def _error(message: str) -> Exception:
    from mcfl_chain.simulation.runner import SimulationError

    return SimulationError(message)


@contextlib.contextmanager
def _quiet_ray(local: bool) -> Iterator[None]:
    """While Ray starts or connects: no usage reports, no warnings on the console and,
    for a local cluster, every server on loopback (see the module's docstring); the
    processes started meanwhile keep that environment."""
    import ray._private.ray_constants as constants

    settings = {"RAY_USAGE_STATS_ENABLED": "0"}
    if local:
        settings[constants.ENABLE_RAY_CLUSTERS_ENV_VAR] = "0"
    saved = {name: os.environ.get(name) for name in settings}
    cluster = constants.ENABLE_RAY_CLUSTER
    os.environ.update(settings)
    if local:
        constants.ENABLE_RAY_CLUSTER = False  # read when the driver picks its address
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        constants.ENABLE_RAY_CLUSTER = cluster
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _on_node(node_id: str) -> Any:
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    return NodeAffinitySchedulingStrategy(node_id=node_id, soft=False)


def _absolute(trainer: HostedTrainer) -> HostedTrainer:
    """The trainer with every path of the run absolute: an actor's working directory
    is Ray's, not the driver's."""
    config = trainer.config
    kind, sep, target = config.storage.partition(":")
    storage = f"{kind}:{Path(target).resolve()}" if sep and kind == "local" else config.storage
    config = replace(
        config,
        deployment=str(Path(config.deployment).resolve()),
        storage=storage,
        state_dir=None if config.state_dir is None else config.state_dir.resolve(),
        metrics=None if config.metrics is None else config.metrics.resolve(),
    )
    return HostedTrainer(trainer.index, config, trainer.log.resolve())


def _targets(config: WorkerConfig) -> dict[str, str]:
    """The services a host on another node reaches through the relay, by name: the
    chain's JSON-RPC URL, and the IPFS API when the store is IPFS (both on loopback)."""
    # The simulator always names the devnet (a worker without --rpc would read it from
    # the deployment file, which the relay does not rewrite).
    targets = {} if config.rpc is None else {"rpc": config.rpc}
    kind, _, address = config.storage.partition(":")
    if kind == "ipfs":
        targets["ipfs"] = _ipfs_url(address)
    return {name: url for name, url in targets.items() if _on_loopback(url)}


def _ipfs_url(address: str) -> str:
    """``http://HOST:PORT`` of an IPFS API given as ``/ip4/HOST/tcp/PORT`` or a URL."""
    parts = address.strip("/").split("/")
    if len(parts) == 4 and parts[0] in ("ip4", "dns", "dns4") and parts[2] == "tcp":
        return f"http://{parts[1]}:{parts[3]}"
    return address


def _on_loopback(url: str) -> bool:
    return urlsplit(url).hostname in _LOOPBACK_NAMES


class RayHost:
    """A host actor seen as :class:`~mcfl_chain._utils.forked.ChildProcess` (what the
    runner polls): the exit code is what the actor's ``run`` returned; 1 when the actor
    or its node died (the reason appended to the host's log); -9 once killed."""

    def __init__(self, actor: Any, result: Any, log: Path, name: str) -> None:
        self._actor = actor
        self._result = result
        self._log = log
        self._name = name
        self._code: int | None = None
        self._pid: int | None = None

    @property
    def pid(self) -> int:
        """The actor's process id on its node (not necessarily this machine)."""
        if self._pid is None:
            import ray

            self._pid = int(ray.get(self._actor.pid.remote()))
        return self._pid

    @property
    def returncode(self) -> int | None:
        return self._code

    def poll(self) -> int | None:
        if self._code is None:
            self._collect(0)
        return self._code

    def wait(self, timeout: float | None = None) -> int:
        if self._code is None:
            self._collect(timeout)
        if self._code is None:
            raise subprocess.TimeoutExpired(self._name, timeout or 0.0)
        return self._code

    def send_signal(self, sig: int) -> None:
        """SIGTERM and SIGINT ask the host to stop its trainers; other signals kill it."""
        if self._code is not None:
            return
        if sig in (signal.SIGTERM, signal.SIGINT):
            self._actor.stop.remote()
        else:
            self.kill()

    def kill(self) -> None:
        import ray

        if self._code is None:
            ray.kill(self._actor, no_restart=True)
            self._code = -signal.SIGKILL

    def _collect(self, timeout: float | None) -> None:
        import ray

        ready, _ = ray.wait([self._result], timeout=timeout)
        if not ready:
            return
        try:
            self._code = int(ray.get(self._result))
        except Exception as exc:  # the actor, its process or its node died
            self._code = 1
            with open(self._log, "a", encoding="utf-8") as out:
                out.write(f"{self._name} ended without an exit code: {type(exc).__name__}: ")
                out.write(f"{exc}\n")


class _HostActor:
    """In the actor's process: one :class:`~mcfl_chain.host.engine.Host`, its output
    appended to the host's log as a host process's is."""

    def __init__(
        self,
        position: int,
        plan: list[dict[str, Any]],
        device: str,
        log: str,
        driver_node: str,
        proxy: Any,
        targets: dict[str, str],
    ) -> None:
        import ray

        _output_to(log)
        warnings.simplefilter("ignore")
        self.position = position
        self.device = device
        self.host: Any = None
        self.stopping = False
        self.relays: list[_Relay] = []
        self.trainers = [HostedTrainer.from_json(t) for t in plan]
        node = ray.get_runtime_context().get_node_id()
        where = f"node {ray.util.get_node_ip_address()} ({node[:12]})"
        if node != driver_node and targets:
            urls = {name: self._relay(proxy, name) for name in targets}
            self.trainers = [_through(t, urls) for t in self.trainers]
            where += ", chain and storage relayed to the driver's node: " + ", ".join(
                f"{name} {targets[name]} as {url}" for name, url in urls.items()
            )
        indices = ", ".join(str(t.index) for t in self.trainers)
        print(f"host {position} on {where}; trainers {indices}", file=sys.stderr, flush=True)

    def _relay(self, proxy: Any, name: str) -> str:
        import ray

        def send(method: str, path: str, headers: dict[str, str], body: bytes) -> Any:
            return ray.get(proxy.forward.remote(name, method, path, headers, body))

        relay = _Relay(send)
        self.relays.append(relay)
        return f"http://{LOOPBACK}:{relay.port}"

    def pid(self) -> int:
        return os.getpid()

    def run(self) -> int:
        from mcfl_chain.host.engine import Host
        from mcfl_chain.worker.launch import WorkerSetupError

        try:
            try:
                host = Host(self.trainers, device=self.device, threads=1, engine="ray")
                self.host = host
                host.build()
            except (WorkerSetupError, ValueError) as exc:
                print(f"host: {exc}", file=sys.stderr, flush=True)
                return 2
            if self.stopping:
                host.stop()
            return int(host.run())
        except BaseException:
            traceback.print_exc()
            return 1
        finally:
            sys.stderr.flush()
            for relay in self.relays:
                relay.close()

    def stop(self) -> None:
        self.stopping = True
        if self.host is not None:
            self.host.stop()


def _output_to(log: str) -> None:
    """This process's stdout and stderr appended to ``log`` (the actor owns its process)."""
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    descriptor = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    os.dup2(descriptor, 1)
    os.dup2(descriptor, 2)
    os.close(descriptor)


def _through(trainer: HostedTrainer, urls: dict[str, str]) -> HostedTrainer:
    """The trainer talking to the relays ``urls`` instead of the driver's loopback."""
    config = trainer.config
    if "rpc" in urls:
        config = replace(config, rpc=urls["rpc"])
    if "ipfs" in urls:
        config = replace(config, storage=f"ipfs:{urls['ipfs']}")
    return HostedTrainer(trainer.index, config, trainer.log)


class _Proxy:
    """On the driver's node: sends the relayed requests to the services named at its
    creation (and nowhere else)."""

    def __init__(self, targets: dict[str, str]) -> None:
        self.targets = {name: urlsplit(url) for name, url in targets.items()}

    def forward(
        self, name: str, method: str, path: str, headers: dict[str, str], body: bytes
    ) -> tuple[int, list[tuple[str, str]], bytes]:
        target = self.targets[name]
        base = target.path.rstrip("/")
        connection = http.client.HTTPConnection(
            target.hostname or LOOPBACK, target.port or 80, timeout=300
        )
        try:
            connection.request(method, base + path, body=body or None, headers=headers)
            response = connection.getresponse()
            return response.status, response.getheaders(), response.read()
        except OSError as exc:
            return 502, [("Content-Type", "text/plain")], f"relay: {exc}".encode()
        finally:
            connection.close()


class _Relay(ThreadingHTTPServer):
    """An HTTP server on this node's loopback that hands every request to ``send``
    (method, path, headers, body) and answers with what it returns."""

    daemon_threads = True

    def __init__(self, send: Any) -> None:
        super().__init__((LOOPBACK, 0), _RelayHandler)
        self.send = send
        self.port = int(self.server_address[1])
        self._thread = threading.Thread(target=self.serve_forever, name="relay", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self.shutdown()
        self.server_close()


class _RelayHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Relay

    def do_GET(self) -> None:
        self._relay()

    def do_POST(self) -> None:
        self._relay()

    def _relay(self) -> None:
        headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP_BY_HOP}
        try:
            status, reply, body = self.server.send(self.command, self.path, headers, self._body())
        except Exception as exc:  # the proxy's node or the cluster went away
            status, reply, body = 502, [], f"relay: {exc}".encode()
        self.send_response(status)
        for key, value in reply:
            if key.lower() not in _HOP_BY_HOP:
                self.send_header(key, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks: list[bytes] = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline().strip():  # trailers, then the blank line
                        pass
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (the base's name)
        pass
