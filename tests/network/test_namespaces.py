"""Across hosts: a chain node and three organisations, each in its own Linux network
namespace, with its own IPFS node and its own data, connected only through a bridge.

The test builds everything itself and removes it at the end: five namespaces
(``<prefix>-br`` holds the bridge; ``-chain`` the Anvil node; ``-t1..-t3`` one trainer
each), veth pairs from each to the bridge, and addresses of one /24 it picks. No link
leaves these namespaces (the bridge has no uplink, no namespace has a default route),
so nothing is reachable from or to the rest of the machine: the test checks it.

Each trainer runs ``mcfl-chain ipfs up`` (swarm on its namespace's address, the other
trainers' nodes as peers, API on the namespace's own loopback) and ``mcfl-chain worker``
joining with ``--deployment ipfs://CID``: the deployment, the genesis weights and every
peer's update reach it through its own node over bitswap. There is no directory the
trainers share. Needs root (network namespaces); fails with the reason otherwise.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from mcfl_chain.chain._tx import dev_account
from mcfl_chain.chain.accounts import PASSWORD_ENV, PRIVATE_KEY_ENV
from mcfl_chain.chain.devnet import find_anvil
from mcfl_chain.storage.daemon import stop_ipfs

pytestmark = pytest.mark.slow

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "breast_cancer_mlp.py"
TASK = f"{EXAMPLE}:task"
TRAINERS = ("t1", "t2", "t3")
RPC_PORT, API_PORT, SWARM_PORT = 8545, 5001, 4001
ROUNDS = 3


def _host(index: int) -> int:
    """Last byte of a member's address: the chain .1, trainer i .(10+i)."""
    return 1 if index == 0 else 10 + index


@dataclass
class Lab:
    """The namespaces of one test, their addresses and the processes started in them."""

    prefix: str
    subnet: str  # "10.A.B"
    folder: Path
    members: list[str] = field(default_factory=lambda: ["chain", *TRAINERS])
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def ns(self, member: str) -> str:
        return f"{self.prefix}-{member}"

    def address(self, member: str) -> str:
        return f"{self.subnet}.{_host(self.members.index(member))}"

    @property
    def rpc(self) -> str:
        return f"http://{self.address('chain')}:{RPC_PORT}"

    def command(self, member: str, *argv: str) -> list[str]:
        return ["ip", "netns", "exec", self.ns(member), *argv]

    def run(self, member: str, *argv: str, env=None, timeout: float = 300):
        return subprocess.run(
            self.command(member, *argv),
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env or _env(),
        )

    def cli(self, member: str, *args: str, env=None, timeout: float = 300):
        return self.run(member, sys.executable, "-m", "mcfl_chain", *args, env=env, timeout=timeout)

    def start(self, member: str, name: str, argv: list[str], env=None) -> subprocess.Popen[bytes]:
        log = open(self.folder / f"{name}.log", "wb")  # noqa: SIM115 - the process owns it
        proc = subprocess.Popen(
            self.command(member, *argv),
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env or _env(),
            start_new_session=True,
        )
        log.close()
        self.processes.append(proc)
        return proc


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True)


def _env(**extra: str) -> dict[str, str]:
    secret = (PASSWORD_ENV, PRIVATE_KEY_ENV, "MCFL_KEY", "MCFL_EXAMPLE_PART")
    env = {k: v for k, v in os.environ.items() if k not in secret}
    return {**env, "PYTHONWARNINGS": "ignore", **extra}


def _build(lab: Lab) -> None:
    bridge = lab.ns("br")
    _ip("netns", "add", bridge)
    _ip("-n", bridge, "link", "add", "br0", "type", "bridge")
    _ip("-n", bridge, "link", "set", "br0", "up")
    for index, member in enumerate(lab.members):
        ns = lab.ns(member)
        _ip("netns", "add", ns)
        # Both ends are created inside the namespaces: nothing appears on the host.
        _ip("-n", bridge, "link", "add", f"v{index}", "type", "veth", "peer", "name", "eth0",
            "netns", ns)  # fmt: skip
        _ip("-n", bridge, "link", "set", f"v{index}", "master", "br0", "up")
        _ip("-n", ns, "addr", "add", f"{lab.address(member)}/24", "dev", "eth0")
        _ip("-n", ns, "link", "set", "eth0", "up")
        _ip("-n", ns, "link", "set", "lo", "up")


def _teardown(lab: Lab) -> None:
    """Stop every process by PID, then remove the namespaces (and with them the links)."""
    for member in TRAINERS:
        try:
            stop_ipfs(lab.folder / member / "ipfs")
        except OSError:
            pass
    for proc in lab.processes:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    for member in [*lab.members, "br"]:
        subprocess.run(["ip", "netns", "del", lab.ns(member)], capture_output=True)


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[Lab]:
    if os.geteuid() != 0 or shutil.which("ip") is None:
        pytest.fail("this test builds network namespaces: run the suite as root with iproute2")
    # Names and a /24 of the test's own, so concurrent runs do not meet.
    tag = os.getpid() % 10_000
    prefix, subnet = f"mcfl{tag}", f"10.{200 + tag % 50}.{tag % 250}"
    built = Lab(prefix, subnet, tmp_path)
    try:
        _build(built)
        yield built
    finally:
        _teardown(built)


def _wait_for_line(path: Path, pattern: str, timeout: float) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = path.read_text(errors="replace") if path.exists() else ""
        if re.search(pattern, text):
            return text
        time.sleep(0.2)
    raise AssertionError(f"{path.name}: no {pattern!r} within {timeout:g} s:\n{text[-2000:]}")


def _listeners(lab: Lab, member: str) -> set[str]:
    """Local addresses of the TCP sockets listening in a member's namespace."""
    lines = lab.run(member, "ss", "-ltnH").stdout.splitlines()
    return {line.split()[3] for line in lines if line.strip()}


def _ipfs_up(lab: Lab, member: str, peers: list[str]) -> str:
    """Start the member's node; its swarm address with peer id, as `ipfs up` prints it."""
    swarm = f"/ip4/{lab.address(member)}/tcp/{SWARM_PORT}"
    args = ["ipfs", "up", "--repo", str(lab.folder / member / "ipfs"), "--port", str(API_PORT)]
    args += ["--swarm", swarm, *(a for p in peers for a in ("--peer", p))]
    up = lab.cli(member, *args, timeout=300)
    assert up.returncode == 0, up.stderr[-2000:]
    printed = re.findall(r"--peer (/ip4/\S+/p2p/\S+)", up.stdout)
    assert printed == [printed[0]] and printed[0].startswith(swarm), up.stdout
    return printed[0]


def test_three_organisations_in_their_own_namespaces_train_over_the_bridge(lab: Lab):
    # Prepare: the chain node in its namespace, listening on its namespace address only.
    anvil = [str(find_anvil()), "--host", lab.address("chain"), "--port", str(RPC_PORT)]
    lab.start("chain", "anvil", [*anvil, "--chain-id", "4245", "--accounts", "6"])
    _wait_for_line(lab.folder / "anvil.log", r"Listening on", timeout=60)
    # Each organisation's IPFS node: t2 peers with t1, t3 with both.
    addresses: dict[str, str] = {}
    for member in TRAINERS:
        addresses[member] = _ipfs_up(lab, member, list(addresses.values()))
    storage = f"ipfs:/ip4/127.0.0.1/tcp/{API_PORT}"  # each namespace's own loopback
    # The network is deployed from t1 and published on t1's node only.
    deployed = lab.cli(
        "t1", "deploy", "--rpc", lab.rpc, "--storage", storage, "--publish", storage,
        "--out", str(lab.folder / "deployment.json"), "--task-from", TASK,
        "--min-trainers", "3", "--phase-duration", "120",
        env=_env(**{PRIVATE_KEY_ENV: dev_account(0).key.hex()}),
    )  # fmt: skip
    assert deployed.returncode == 0, deployed.stderr[-3000:]
    uri = deployed.stdout.strip()
    assert uri.startswith("ipfs://")

    # Execute: one worker per organisation, its key in its environment, its own share
    # of the patients, its own node as its only store.
    workers = []
    for i, member in enumerate(TRAINERS):
        argv = [sys.executable, "-m", "mcfl_chain", "worker", "--rpc", lab.rpc,
                "--deployment", uri, "--storage", storage, "--task", TASK,
                "--rounds", str(ROUNDS), "--lr", "0.01", "--state-dir",
                str(lab.folder / member / "state"), "--wait-log-interval", "10"]  # fmt: skip
        env = _env(**{PRIVATE_KEY_ENV: dev_account(i + 1).key.hex()}, MCFL_EXAMPLE_PART=f"{i}/3")
        workers.append(lab.start(member, member, argv, env))
    deadline = time.monotonic() + 900
    for proc in workers:
        proc.wait(timeout=max(1.0, deadline - time.monotonic()))
    logs = {m: (lab.folder / f"{m}.log").read_text(errors="replace") for m in TRAINERS}
    checked = lab.cli(
        "t3", "dag", "--deployment", uri, "--storage", storage, "--rpc", lab.rpc,
        "--check", "--no-cache", "--brief",
    )  # fmt: skip

    # Assert: every organisation played its rounds; the DAG agrees with the contracts.
    for proc, member in zip(workers, TRAINERS, strict=True):
        assert proc.returncode == 0, logs[member][-3000:]
        assert f"played {ROUNDS} round(s)" in logs[member], logs[member][-3000:]
    assert checked.returncode == 0, checked.stdout[-2000:] + checked.stderr[-2000:]
    # Each trainer fetched peers' blobs through its own node, which received them over
    # bitswap (its counters, read once the exchange is quiet).
    for member, text in logs.items():
        fetched = re.findall(r"fetched (\d+) peer blob\(s\) \(.*?\) through ([^\s;]+)", text)
        assert len(fetched) >= ROUNDS, text[-3000:]
        assert sum(int(n) for n, _ in fetched) > 0, text[-3000:]
        assert {where for _, where in fetched} == {storage}, fetched
        status = lab.cli(member, "ipfs", "status", "--repo", str(lab.folder / member / "ipfs"))
        received = re.search(r"received from peers \(bitswap\): (\d+) block", status.stdout)
        assert received and int(received.group(1)) > 0, status.stdout + status.stderr
    # Isolation: the only routes are the test's /24; the bridge has no other port.
    for member in lab.members:
        routes = [r.strip() for r in lab.run(member, "ip", "-4", "route").stdout.splitlines()]
        assert routes == [
            f"{lab.subnet}.0/24 dev eth0 proto kernel scope link src {lab.address(member)}"
        ], routes
    ports = subprocess.run(
        ["ip", "-n", lab.ns("br"), "-o", "link"], capture_output=True, text=True, check=True
    ).stdout
    names = sorted(re.findall(r"^\d+: ([^:@]+)", ports, re.MULTILINE))
    assert names == sorted(["lo", "br0", *(f"v{i}" for i in range(len(lab.members)))])
    # ... the chain listens on its namespace address only, each IPFS API on its own
    # namespace's loopback, and the host sees none of the test's addresses.
    assert _listeners(lab, "chain") == {f"{lab.address('chain')}:{RPC_PORT}"}
    for member in TRAINERS:
        assert _listeners(lab, member) == {
            f"127.0.0.1:{API_PORT}",
            f"{lab.address(member)}:{SWARM_PORT}",
        }
    host = subprocess.run(["ip", "-4", "-o", "addr"], capture_output=True, text=True).stdout
    assert f" {lab.subnet}." not in host
