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

A second test breaks things on the way: one organisation's IPFS node loses its peers
for a round (its swarm packets dropped, its chain link up), then every worker is paused
while the chain's clock moves past two phase deadlines.
"""

from __future__ import annotations

import json
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


def _network(lab: Lab, phase_duration: int) -> tuple[str, str]:
    """The chain node and each organisation's IPFS node up, the network deployed from t1
    and published on t1's node only: (its ipfs://CID, the --storage every member uses)."""
    # The chain node in its namespace, listening on its namespace address only, mining a
    # block every 2 s as DEPLOY.md's private chain does.
    anvil = [str(find_anvil()), "--host", lab.address("chain"), "--port", str(RPC_PORT)]
    anvil += ["--chain-id", "4245", "--accounts", "6", "--block-time", "2"]
    # Its home (where it spills old states) in the lab's folder, not the user's.
    lab.start("chain", "anvil", anvil, env=_env(HOME=str(lab.folder / "anvil-home")))
    _wait_for_line(lab.folder / "anvil.log", r"Listening on", timeout=60)
    # Each organisation's IPFS node: t2 peers with t1, t3 with both.
    addresses: dict[str, str] = {}
    for member in TRAINERS:
        addresses[member] = _ipfs_up(lab, member, list(addresses.values()))
    storage = f"ipfs:/ip4/127.0.0.1/tcp/{API_PORT}"  # each namespace's own loopback
    deployed = lab.cli(
        "t1", "deploy", "--rpc", lab.rpc, "--storage", storage, "--publish", storage,
        "--out", str(lab.folder / "deployment.json"), "--task-from", TASK,
        "--min-trainers", "3", "--phase-duration", str(phase_duration),
        env=_env(**{PRIVATE_KEY_ENV: dev_account(0).key.hex()}),
    )  # fmt: skip
    assert deployed.returncode == 0, deployed.stderr[-3000:]
    uri = deployed.stdout.strip()
    assert uri.startswith("ipfs://")
    return uri, storage


def _start_workers(lab: Lab, uri: str, storage: str, rounds: int) -> list[subprocess.Popen[bytes]]:
    """One worker per organisation, its key in its environment, its own share of the
    patients, its own node as its only store."""
    workers = []
    for i, member in enumerate(TRAINERS):
        argv = [sys.executable, "-m", "mcfl_chain", "worker", "--rpc", lab.rpc,
                "--deployment", uri, "--storage", storage, "--task", TASK,
                "--rounds", str(rounds), "--lr", "0.01", "--state-dir",
                str(lab.folder / member / "state"), "--wait-log-interval", "10"]  # fmt: skip
        env = _env(**{PRIVATE_KEY_ENV: dev_account(i + 1).key.hex()}, MCFL_EXAMPLE_PART=f"{i}/3")
        workers.append(lab.start(member, member, argv, env))
    return workers


def test_three_organisations_in_their_own_namespaces_train_over_the_bridge(lab: Lab):
    # Prepare
    uri, storage = _network(lab, phase_duration=120)

    # Execute
    workers = _start_workers(lab, uri, storage, ROUNDS)
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


# A chain probe run in the chain's namespace (nothing outside reaches it): the round
# state, the phase changes with their block times, the votes and the reverted
# transactions; with a third argument, the chain's clock is first moved by that many s.
_PROBE = """
import json, sys
from mcfl_chain.chain.client import ChainClient
from mcfl_chain.chain.deployment import Deployment
chain = ChainClient.read_only(Deployment.load(sys.argv[1]), rpc_url=sys.argv[2])
w3 = chain.w3
if len(sys.argv) > 3:
    w3.provider.make_request("evm_increaseTime", [int(sys.argv[3])])
head = chain.block_number()
events = chain.events(0, head)
time_of = {}
def at(n):
    if n not in time_of:
        time_of[n] = int(w3.eth.get_block(n)["timestamp"])
    return time_of[n]
status = chain.status()
print(json.dumps({
    "now": [status.round, int(status.phase)],
    "phases": [[e.args["round"], e.args["phase"], at(e.block_number)]
               for e in events if e.name == "PhaseChanged"],
    "votes": [[e.args["round"], e.args["phase"], e.args["trainerId"], e.args["counted"]]
              for e in events if e.name == "TrainerVoted"],
    "proposed": [[e.args["round"], e.args["trainerId"]]
                 for e in events if e.name == "UpdateProposed"],
    "reverted": sum(
        1 for n in range(chain.deployment.deployment_block, head + 1)
        for tx in w3.eth.get_block(n)["transactions"]
        if w3.eth.get_transaction_receipt(tx)["status"] != 1),
}))
"""


def _probe(lab: Lab, advance: int | None = None) -> dict:
    argv = [sys.executable, "-c", _PROBE, str(lab.folder / "deployment.json"), lab.rpc]
    probed = lab.run("chain", *argv, *([str(advance)] if advance else []), timeout=120)
    assert probed.returncode == 0, probed.stderr[-2000:]
    return json.loads(probed.stdout)


def _cut_swarm(lab: Lab, member: str, cut: bool) -> None:
    """Drop every packet the member's namespace sends from or to the swarm port (its IPFS
    node's links to the others), leaving its chain link alone; or lift that.

    What this kernel offers without drop actions: an HTB root whose default class lets
    everything through, and a class whose queue holds no packet, where a u32 filter
    sends the swarm's packets.
    """
    tc = ["tc", "-n", lab.ns(member)]
    if not cut:
        subprocess.run([*tc, "qdisc", "del", "dev", "eth0", "root"], check=True)
        return
    for argv in (
        ["qdisc", "add", "dev", "eth0", "root", "handle", "1:", "htb", "default", "1"],
        ["class", "add", "dev", "eth0", "parent", "1:", "classid", "1:1", "htb", "rate", "10gbit"],
        ["class", "add", "dev", "eth0", "parent", "1:", "classid", "1:2", "htb", "rate", "8bit"],
        ["qdisc", "add", "dev", "eth0", "parent", "1:2", "handle", "2:", "pfifo", "limit", "0"],
        *(
            [
                "filter",
                "add",
                "dev",
                "eth0",
                "parent",
                "1:",
                "protocol",
                "ip",
                "u32",
                "match",
                "ip",
                side,
                str(SWARM_PORT),
                "0xffff",
                "flowid",
                "1:2",
            ]  # fmt: skip
            for side in ("dport", "sport")
        ),
    ):
        subprocess.run([*tc, *argv], check=True, capture_output=True)


def test_an_organisation_cut_from_its_peers_then_everyone_paused_past_two_deadlines(lab: Lab):
    # Prepare: three organisations play five rounds with a 120 s phase deadline.
    duration = 120
    uri, storage = _network(lab, phase_duration=duration)
    workers = _start_workers(lab, uri, storage, rounds=5)
    t1_log = lab.folder / "t1.log"

    # Execute, 1: once t1 works on round 1, its IPFS node's packets are dropped (its
    # chain link stays up) until it has said so and the round after has begun.
    _wait_for_line(t1_log, r"round 1: ", timeout=600)
    _cut_swarm(lab, "t1", cut=True)
    try:
        said = _wait_for_line(t1_log, r"your IPFS node has no peers: ", timeout=4 * duration)
        before = said[: said.index("your IPFS node has no peers: ")]
        cut_round = int(re.findall(r"round (\d+): ", before)[-1])
        _wait_for_line(t1_log, rf"round {cut_round + 1}: ", timeout=2 * duration)
    finally:
        _cut_swarm(lab, "t1", cut=False)
    _wait_for_line(t1_log, r"your IPFS node reaches its peers again", timeout=2 * duration)
    # 2: every worker is paused (SIGSTOP) in round 3, while the chain's clock moves past
    # two phase deadlines; then all of them go on (SIGCONT).
    _wait_for_line(lab.folder / "t3.log", r"round 3: ", timeout=4 * duration)
    for proc in workers:
        os.killpg(proc.pid, signal.SIGSTOP)
    try:
        paused_in = _probe(lab, advance=2 * duration + 1)["now"]
    finally:
        for proc in workers:
            os.killpg(proc.pid, signal.SIGCONT)
    deadline = time.monotonic() + 900
    for proc in workers:
        proc.wait(timeout=max(1.0, deadline - time.monotonic()))
    logs = {m: (lab.folder / f"{m}.log").read_text(errors="replace") for m in TRAINERS}
    chain = _probe(lab)

    # Assert: all played to the end (one that the first one back beat into the overdue
    # phase has one round fewer: it sat out the phase it was paused in).
    for proc, member in zip(workers, TRAINERS, strict=True):
        assert proc.returncode == 0, logs[member][-3000:]
        assert re.search(r"played [45] round\(s\)", logs[member]), logs[member][-3000:]
    # (Resumed together, the two others may each have sent a vote that the first one
    # back's, ending the overdue phase, beat into the same block: at most those revert.)
    assert chain["reverted"] <= 2, chain["reverted"]
    # The cut: t1 said its node has no peers (not that a CID is wrong), redialled, and
    # said when its peers answered again; every round the cut spanned ended within one
    # phase deadline, each phase by the votes of all three.
    warned = re.search(r"storage: your IPFS node has no peers: .*redialling", logs["t1"])
    assert warned, logs["t1"][-3000:]
    assert "your IPFS node reaches its peers again" in logs["t1"]
    starts = {(r, p): t for r, p, t in chain["phases"]}
    for round_ in range(1, cut_round + 1):
        took = starts[(round_ + 1, 0)] - starts[(round_, 0)]
        assert took < duration, f"round {round_} took {took} s with t1 cut off"
        for phase in (0, 1):
            counted = {t for r, p, t, c in chain["votes"] if (r, p) == (round_, phase) and c}
            assert len(counted) == 3, (round_, phase, chain["votes"])
    # The pause: in the phase after the overdue one all three voted, counted, and all
    # three proposed in the round after the one they were paused in.
    paused_round, paused_phase = paused_in
    after = (paused_round + paused_phase, 1 - paused_phase)
    back = {t for r, p, t, c in chain["votes"] if (r, p) == after and c}
    assert len(back) == 3, (paused_in, chain["votes"])
    assert len({t for r, t in chain["proposed"] if r == paused_round + 1}) == 3
