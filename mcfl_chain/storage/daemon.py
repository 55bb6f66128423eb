"""A trainer's own IPFS node (js-ipfs), run in the background and stopped by its PID.

The node keeps everything in one directory: its repo (``ipfs-repo/``), the JSON state
file recording its PID (``daemon.json``) and its log (``daemon.log``). Its HTTP RPC API
listens on loopback only. Two modes:

- **offline** (``swarm=None``, what tests and single-machine simulations use): no
  swarm, gateway or gRPC listener, ``--offline``;
- **online** (``swarm="/ip4/127.0.0.1/tcp/4001"``): the node listens for other nodes
  on that address and exchanges blocks with them (bitswap), so each trainer keeps its
  blobs on its own node and fetches the peers' by CID. It knows only the peers it is
  given (``peers``, multiaddrs ending in ``/p2p/<peer id>``, dialled at start and
  redialled by libp2p): no public bootstrap list, no DHT, no mDNS, no UPnP port
  mapping, no delegate routers, no preload nodes — nothing leaves for the public
  network.

The ``jsipfs`` program comes from the npm package ``ipfs`` that ``make node`` installs
into ``node_modules`` (pinned in package.json; ``MCFL_JSIPFS`` overrides its path).
Two nodes exchange blocks only with ``@libp2p/peer-record`` pinned to 5.0.2 (later
versions break identify in libp2p 0.42); :func:`start_ipfs` checks it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from mcfl_chain._utils.process import (
    LOOPBACK,
    ServiceError,
    ServiceState,
    free_port,
    is_running,
    node_binary,
    port_in_use,
    start_service,
    stop_service,
)

#: Where ``mcfl-chain ipfs up`` keeps the node when no ``--repo`` is given.
DEFAULT_REPO = Path(".mcfl/ipfs")
#: The API port of ``mcfl-chain ipfs up`` when no ``--port`` is given (Kubo's default).
DEFAULT_PORT = 5001
#: The swarm address of ``mcfl-chain ipfs up`` when no ``--swarm`` is given.
DEFAULT_SWARM = f"/ip4/{LOOPBACK}/tcp/4001"

_SWARM = re.compile(r"^/ip4/(\d{1,3}(?:\.\d{1,3}){3})/tcp/(\d{1,5})/?$")
_PEER = re.compile(r"^/(ip4|ip6|dns4|dns6|dns)/[^/]+/tcp/\d{1,5}/(p2p|ipfs)/[A-Za-z0-9]+$")

_SERVICE = "ipfs"


def _paths(repo_dir: Path) -> tuple[Path, Path, Path]:
    """(IPFS repo, state file, log file) inside ``repo_dir``."""
    return repo_dir / "ipfs-repo", repo_dir / "daemon.json", repo_dir / "daemon.log"


def jsipfs_binary() -> Path:
    """Path of the ``jsipfs`` program.

    Raises
    ------
    ServiceError
        If Node.js or the npm package ``ipfs`` is not installed (says how to install).
    """
    if shutil.which("node") is None:
        raise ServiceError(
            "Node.js is not installed (no `node` on PATH); install it, then "
            "run `make node` in the mcfl-chain checkout"
        )
    binary = node_binary(".bin/jsipfs", "MCFL_JSIPFS")
    if binary is None or not binary.is_file():
        where = f" ({binary} does not exist)" if binary is not None else ""
        raise ServiceError(
            f"the js-ipfs node is not installed{where}: run `make node` in the "
            f"mcfl-chain checkout (or set MCFL_JSIPFS to a jsipfs executable)"
        )
    return binary


def parse_swarm_address(address: str) -> tuple[str, int]:
    """(host, port) of a swarm listen multiaddr ``/ip4/A.B.C.D/tcp/PORT``.

    Raises
    ------
    ServiceError
        Any other form.
    """
    match = _SWARM.match(address.strip())
    if not match or int(match.group(2)) > 65535:
        raise ServiceError(
            f"cannot read the swarm address {address!r}: expected /ip4/A.B.C.D/tcp/PORT, "
            f"e.g. {DEFAULT_SWARM} (PORT 0 picks a free one)"
        )
    return match.group(1), int(match.group(2))


def check_peer_address(address: str) -> str:
    """Check a peer's multiaddr (``/ip4/HOST/tcp/PORT/p2p/PEER_ID``) and return it.

    Raises
    ------
    ServiceError
        It does not end with ``/p2p/<peer id>`` after a TCP address.
    """
    text = address.strip().rstrip("/")
    if not _PEER.match(text):
        raise ServiceError(
            f"cannot read the peer address {address!r}: expected "
            f"/ip4/HOST/tcp/PORT/p2p/PEER_ID, as `mcfl-chain ipfs up` prints for its node"
        )
    return text


def _configure(
    ipfs_repo: Path, port: int, swarm: str | None = None, peers: Sequence[str] = ()
) -> None:
    """Rewrite an initialised repo's config with :func:`_settings`."""
    config_file = ipfs_repo / "config"
    config = _settings(json.loads(config_file.read_text()), port, swarm, peers)
    tmp = config_file.with_suffix(".tmp")
    tmp.write_text(json.dumps(config, indent=2))
    tmp.replace(config_file)


def _settings(
    config: dict[str, Any], port: int, swarm: str | None = None, peers: Sequence[str] = ()
) -> dict[str, Any]:
    """``config`` with the API on ``LOOPBACK:port`` only and a swarm listener on
    ``swarm`` when online.

    Whatever the mode, the node discovers and routes through nothing public: its only
    peers are ``peers`` (as its bootstrap list), no DHT, mDNS, UPnP or delegates.
    """
    addresses = config.setdefault("Addresses", {})
    addresses.update(
        {
            "API": f"/ip4/{LOOPBACK}/tcp/{port}",
            "Gateway": "",
            "RPC": "",
            "Swarm": [swarm] if swarm else [],
            "Announce": [],
            "Delegates": [],
        }
    )
    config["Bootstrap"] = list(peers)
    discovery = config.setdefault("Discovery", {})
    discovery.setdefault("MDNS", {})["Enabled"] = False
    discovery.setdefault("webRTCStar", {})["Enabled"] = False
    config.setdefault("Swarm", {})["DisableNatPortMap"] = True
    config["Routing"] = {"Type": "none"}
    return config


def _check_exchange_fix(binary: Path) -> None:
    """Refuse an npm install whose libp2p cannot identify peers (so never exchanges)."""
    modules = binary.resolve().parents[2]
    record = modules / "@libp2p" / "peer-record" / "package.json"
    try:
        meta = json.loads(record.read_text())
    except (OSError, ValueError):
        return
    multiaddr = meta.get("dependencies", {}).get("@multiformats/multiaddr", "")
    if not multiaddr.startswith("^11"):
        raise ServiceError(
            f"the js-ipfs install in {modules} has @libp2p/peer-record "
            f"{meta.get('version')} (multiaddr {multiaddr}), with which two nodes cannot "
            f"identify each other nor exchange blocks; run `make node` (package.json pins "
            f"@libp2p/peer-record 5.0.2), or use --offline for a node of one"
        )


def start_ipfs(
    repo_dir: str | os.PathLike[str] = DEFAULT_REPO,
    port: int | None = None,
    ready_timeout: float = 90.0,
    *,
    swarm: str | None = None,
    peers: Sequence[str] = (),
) -> ServiceState:
    """Start a js-ipfs node serving its HTTP RPC API on loopback.

    Parameters
    ----------
    repo_dir
        Directory for the node's repo, state file and log; created and initialised
        (js-ipfs's ``test`` profile) on first use, reused afterwards.
    port
        API port on 127.0.0.1; a free one when ``None``.
    ready_timeout
        Seconds to wait for the API to listen.
    swarm
        ``None``: offline, a node of one (the default). Otherwise the multiaddr its
        swarm listens on for other nodes, e.g. ``/ip4/127.0.0.1/tcp/4001`` (port 0: a
        free one); :func:`swarm_addresses` gives what peers dial.
    peers
        Other nodes' multiaddrs ``/ip4/HOST/tcp/PORT/p2p/PEER_ID`` (online only): its
        only bootstrap peers, dialled now (:func:`connect_peer`) and redialled by
        libp2p when they come up later.

    Returns
    -------
    ServiceState
        The PID and API port; :func:`storage_spec` turns it into a ``--storage`` value.

    Raises
    ------
    ServiceError
        If js-ipfs is not installed (or, online, cannot exchange blocks), the node
        already runs, a port is taken, an address is malformed, or the node does not
        come up (the message includes the end of its log).
    """
    repo = Path(repo_dir).expanduser().resolve()
    ipfs_repo, state_file, log_file = _paths(repo)
    previous = ServiceState.load(state_file)
    if previous is not None and is_running(previous):
        raise ServiceError(
            f"an IPFS node already runs for {repo} (pid {previous.pid}, port "
            f"{previous.port}); stop it with `mcfl-chain ipfs down`"
        )
    peer_addresses = [check_peer_address(p) for p in peers]
    if swarm is None and peer_addresses:
        raise ServiceError("an offline node has no peers: give a swarm address to use --peer")
    binary = jsipfs_binary()
    listen = None
    if swarm is not None:
        host, swarm_port = parse_swarm_address(swarm)
        if swarm_port == 0:
            swarm_port = free_port(host)
        elif port_in_use(swarm_port, host):
            raise ServiceError(
                f"the swarm port {swarm_port} on {host} is already in use; choose another "
                f"with --swarm or stop what listens there"
            )
        listen = f"/ip4/{host}/tcp/{swarm_port}"
        _check_exchange_fix(binary)
    env = {**os.environ, "IPFS_PATH": str(ipfs_repo)}
    port = free_port() if port is None else port
    # No preload: js-ipfs would otherwise announce every added block to ipfs.io's nodes.
    command = [str(binary), "daemon", "--enable-preload=false"]
    if (ipfs_repo / "config").is_file():
        _configure(ipfs_repo, port, listen, peer_addresses)
    else:
        # The daemon initialises a new repo itself (the `test` profile, then these
        # settings over it): one Node.js start instead of two (`jsipfs init` alone
        # loads every module, about 5 s of CPU).
        ipfs_repo.mkdir(parents=True, exist_ok=True)
        settings = repo / "init-config.json"
        settings.write_text(json.dumps(_settings({}, port, listen, peer_addresses), indent=2))
        command += ["--init-config", str(settings), "--init-profile", "test"]
    # A node killed without shutting down leaves its lock (a directory) and its API file
    # behind; no node of ours runs on this repo (checked above), so they are stale.
    shutil.rmtree(ipfs_repo / "repo.lock", ignore_errors=True)
    (ipfs_repo / "api").unlink(missing_ok=True)
    if listen is None:
        command.append("--offline")
    # js-ipfs renames its process "ipfs" (process.title): record that name for PID checks.
    state = start_service(
        _SERVICE,
        command,
        port,
        state_file,
        log_file,
        env=env,
        cwd=repo,
        ready_timeout=ready_timeout,
        title="ipfs",
    )
    (repo / "init-config.json").unlink(missing_ok=True)  # in the repo's config now
    for peer in peer_addresses:
        try:
            connect_peer(state, peer, timeout=5.0)
        except ServiceError:
            pass  # not up yet: libp2p dials its bootstrap peers again later
    return state


def stop_ipfs(
    repo_dir: str | os.PathLike[str] = DEFAULT_REPO, timeout: float = 15.0
) -> ServiceState | None:
    """Stop the node started by :func:`start_ipfs` for ``repo_dir`` (by its PID).

    Returns
    -------
    ServiceState | None
        What was stopped, or ``None`` when no node was recorded.
    """
    _, state_file, _ = _paths(Path(repo_dir).expanduser().resolve())
    return stop_service(state_file, timeout=timeout)


def ipfs_status(repo_dir: str | os.PathLike[str] = DEFAULT_REPO) -> ServiceState | None:
    """The running node recorded for ``repo_dir``, or ``None`` if none runs."""
    _, state_file, _ = _paths(Path(repo_dir).expanduser().resolve())
    state = ServiceState.load(state_file)
    return state if state is not None and is_running(state) else None


def storage_spec(state: ServiceState) -> str:
    """The ``--storage`` value that reaches the node described by ``state``."""
    return f"ipfs:/ip4/{LOOPBACK}/tcp/{state.port}"


def _config(repo_dir: str | os.PathLike[str]) -> dict[str, Any]:
    ipfs_repo, _, _ = _paths(Path(repo_dir).expanduser().resolve())
    try:
        return json.loads((ipfs_repo / "config").read_text())  # type: ignore[no-any-return]
    except (OSError, ValueError) as exc:
        raise ServiceError(
            f"no IPFS repo in {repo_dir} ({exc.__class__.__name__}); start the node once "
            f"with `mcfl-chain ipfs up --repo {repo_dir}`"
        ) from exc


def peer_id(repo_dir: str | os.PathLike[str] = DEFAULT_REPO) -> str:
    """The libp2p peer id of the node whose repo is in ``repo_dir`` (set at init)."""
    return str(_config(repo_dir)["Identity"]["PeerID"])


def swarm_addresses(repo_dir: str | os.PathLike[str] = DEFAULT_REPO) -> list[str]:
    """What other nodes dial to reach this one: ``<swarm address>/p2p/<peer id>``.

    Empty for an offline node. An address on ``0.0.0.0`` stands for every interface:
    peers dial the machine's own address instead.
    """
    config = _config(repo_dir)
    identity = config["Identity"]["PeerID"]
    return [f"{a}/p2p/{identity}" for a in config.get("Addresses", {}).get("Swarm", [])]


def _rpc(state: ServiceState, command: str, args: Sequence[str], timeout: float) -> Any:
    query = urllib.parse.urlencode([("arg", a) for a in args])
    url = f"http://{LOOPBACK}:{state.port}/api/v0/{command}?{query}"
    try:
        with urllib.request.urlopen(
            urllib.request.Request(url, method="POST"), timeout=timeout
        ) as answer:
            return json.loads(answer.read() or b"null")
    except urllib.error.HTTPError as exc:
        body = exc.read().decode(errors="replace")
        try:
            reason = json.loads(body).get("Message", body)
        except ValueError:
            reason = body
        raise ServiceError(f"the IPFS node refused {command}: {reason.strip()}") from None
    except (OSError, ValueError) as exc:
        raise ServiceError(
            f"the IPFS node on port {state.port} did not answer {command}: {exc}"
        ) from None


def connect_peer(state: ServiceState, address: str, timeout: float = 10.0) -> None:
    """Connect the running node to another node now (``swarm connect``).

    Raises
    ------
    ServiceError
        The address is malformed, or the peer cannot be reached within ``timeout``.
    """
    _rpc(state, "swarm/connect", [check_peer_address(address)], timeout)


def connected_peers(state: ServiceState, timeout: float = 10.0) -> list[str]:
    """Peer ids the running node is connected to, sorted."""
    answer = _rpc(state, "swarm/peers", [], timeout) or {}
    return sorted({str(p["Peer"]) for p in answer.get("Peers") or []})


@contextmanager
def running_ipfs(
    repo_dir: str | os.PathLike[str],
    port: int | None = None,
    *,
    swarm: str | None = None,
    peers: Sequence[str] = (),
) -> Iterator[str]:
    """Run a node for the duration of a ``with`` block; yields its ``--storage`` spec.

    Meant for test fixtures and simulations (``swarm`` and ``peers`` as in
    :func:`start_ipfs`)::

        with running_ipfs(tmp_path / "ipfs") as spec:
            store = open_storage(spec)
    """
    state = start_ipfs(repo_dir, port, swarm=swarm, peers=peers)
    try:
        yield storage_spec(state)
    finally:
        stop_ipfs(repo_dir)
