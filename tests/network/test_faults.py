"""Faults injected into small real networks: damaged state, late joiners, services gone,
the wrong network, setup mistakes, and deadlines.

Each test runs `mcfl-chain worker` processes on real Anvil chains (and js-ipfs where
storage is the point) with scikit-learn's digits, and checks what the chain recorded
and what each worker said. Options are added to a worker's command line (the last
occurrence of a flag wins); MCFL_* variables only set options the simulator leaves
unset (it writes every option that has a value, so that the command alone decides).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import psutil
import pytest
from rich.console import Console

from mcfl_chain._utils.forked import start_module
from mcfl_chain._utils.process import free_port
from mcfl_chain.chain.client import ChainClient, Phase
from mcfl_chain.chain.devnet import DEFAULT_PHASE_DURATION, start_devnet, stop_devnet
from mcfl_chain.simulation.runner import WORKER_PRELOAD, Network
from mcfl_chain.storage import LocalStorage, cid_for_bytes
from mcfl_chain.storage.daemon import stop_ipfs
from mcfl_chain.worker.preflight import STORAGE_PROBE

from .test_network import _config, _events, _wait_for

pytestmark = pytest.mark.slow


def small(**overrides):
    """A network that plays a round in a few seconds on 2 cores."""
    base = dict(n_trainers=3, rounds=3, samples=300, epochs=2, round_timeout=90)
    base.update(overrides)
    return _config(**base)


def log_of(run_dir, index: int) -> str:
    return (run_dir / "trainers" / f"{index:03d}" / "worker.log").read_text(errors="replace")


def address_of(net: Network, index: int) -> str:
    return ChainClient(net.deployment, account_index=index + 1).address


def proposed_in(chain: ChainClient, who: str, round_: int) -> bool:
    return any(
        e.args["proposer"] == who and e.args["round"] == round_
        for e in _events(chain, "UpdateProposed")
    )


def kill(net: Network, index: int) -> None:
    os.kill(net.procs[index].pid, signal.SIGKILL)
    net.procs[index].wait()


# -- local state is a cache of the chain ---------------------------------------------------


def test_a_worker_whose_events_log_was_cut_short_reads_the_chain_again(tmp_path):
    # Prepare
    net = Network(small(), tmp_path, Console(quiet=True))
    net.start()
    try:
        chain = ChainClient.read_only(net.deployment)
        victim = address_of(net, 1)
        net.spawn_workers()
        _wait_for(lambda: proposed_in(chain, victim, 1), what="the victim's round-1 proposal")
        kill(net, 1)
        # Execute: its events log loses all but its first lines; it restarts.
        log = tmp_path / "trainers" / "001" / "state" / "events.jsonl"
        log.write_text("".join(log.read_text().splitlines(keepends=True)[:3]))
        net.procs[1] = net.spawn(1)
        net.wait()
        # Assert: the network finished, the victim aggregated its round-1 update (which
        # the cut log had lost) without a refused transaction, and the log is kept aside.
        assert chain.round_state()[1] == 3
        victim_id = chain.trainer_id(victim)
        assert any(
            e.args["trainerId"] == victim_id and e.args["round"] == 1
            for e in _events(chain, "ModelAppended")
        )
        text = log_of(tmp_path, 1)
        assert "Traceback" not in text and "refused" not in text
        assert "reading the chain again" in text
        assert len(list(log.parent.glob("events.jsonl.damaged-*"))) == 1
    finally:
        net.stop()


@pytest.mark.parametrize("damage", ["half-written", "lost"])
def test_a_worker_whose_state_was_damaged_rebuilds_it_and_stops_with_the_network(tmp_path, damage):
    # Prepare
    net = Network(small(), tmp_path, Console(quiet=True))
    net.start()
    try:
        chain = ChainClient.read_only(net.deployment)
        victim = address_of(net, 1)
        net.spawn_workers()
        _wait_for(lambda: proposed_in(chain, victim, 1), what="the victim's round-1 proposal")
        kill(net, 1)
        # Execute: its state file cut in the middle of a write, or its whole state gone
        # (then it restarts in round 1 knowing nothing).
        state_dir = tmp_path / "trainers" / "001" / "state"
        if damage == "half-written":
            text = (state_dir / "state.json").read_text()
            (state_dir / "state.json").write_text(text[: len(text) // 2])
            (state_dir / "events.jsonl").unlink()
        else:
            for path in state_dir.iterdir():
                path.unlink()
        net.procs[1] = net.spawn(1)
        net.wait()
        # Assert: every worker exited 0 at the same last round: the rebuilt one counted
        # its --rounds from round 0, where the chain says it first played.
        assert chain.round_state()[1] == 3
        assert [p.returncode for p in net.procs] == [0, 0, 0]
        assert proposed_in(chain, victim, 2)
        assert "Traceback" not in log_of(tmp_path, 1)
        aside = list(state_dir.glob("state.json.damaged-*"))
        assert len(aside) == (damage == "half-written")
    finally:
        net.stop()


def test_a_late_joiner_given_the_last_round_stops_with_the_network(tmp_path, monkeypatch):
    # Prepare: two workers and a hand-driven trainer H open a 3-round network with the
    # devnet's 30 s deadline. H votes (bare) in both phases of round 0, so it is a
    # member of round 1's PROPOSE phase, where it stays silent: that phase lasts until
    # its deadline, long enough for a third trainer, registered during round 0, to
    # bring its worker up in round 1 whatever the machine's load.
    net = Network(small(phase_duration=DEFAULT_PHASE_DURATION), tmp_path, Console(quiet=True))
    net.start(min_trainers=3)
    try:
        chain = ChainClient.read_only(net.deployment)
        hand = ChainClient(net.deployment, account_index=4)
        net.procs = [net.spawn(0), net.spawn(1)]
        hand.register()
        _wait_for(lambda: chain.status().started, what="round 0")
        hand.submit_proposals([])
        joiner_id = ChainClient(net.deployment, account_index=3).register()
        _wait_for(lambda: chain.status().phase is Phase.AGGREGATE, what="round 0 aggregate")
        hand.submit_aggregations([])
        _wait_for(lambda: chain.status().round >= 1, what="round 1")
        # Execute: told the network ends with round 2 (its own --rounds 3, counted from
        # round 1, would run on to round 3, which nobody else plays).
        monkeypatch.setenv("MCFL_LAST_ROUND", "2")
        net.procs.append(net.spawn(2))
        net.wait()
        # Assert: all three exited 0 after round 2, the joiner having played rounds 1, 2.
        assert chain.status().round == 3
        assert [p.returncode for p in net.procs] == [0, 0, 0]
        joiner = address_of(net, 2)
        assert not proposed_in(chain, joiner, 0)
        assert proposed_in(chain, joiner, 1) and proposed_in(chain, joiner, 2)
        # Its first vote was recorded but not counted (round 1's quorum was round 0's
        # voters); from the next phase on, it was a member.
        counted = [
            (e.args["round"], e.args["phase"], e.args["counted"])
            for e in _events(chain, "TrainerVoted")
            if e.args["trainerId"] == joiner_id
        ]
        assert counted == [(1, 0, False), (1, 1, True), (2, 0, True), (2, 1, True)]
    finally:
        net.stop()


# -- coming back after a pause, and joining late ------------------------------------------


def votes_of(chain: ChainClient) -> dict[tuple[int, int], dict[int, bool]]:
    """(round, phase) -> {trainer id: whether its vote counted}."""
    votes: dict[tuple[int, int], dict[int, bool]] = {}
    for e in _events(chain, "TrainerVoted"):
        votes.setdefault((e.args["round"], e.args["phase"]), {})[e.args["trainerId"]] = e.args[
            "counted"
        ]
    return votes


def reverted_transactions(chain: ChainClient, net: Network) -> list[str]:
    w3 = chain.w3
    return [
        tx.hex()
        for n in range(net.deployment.deployment_block, w3.eth.block_number + 1)
        for tx in w3.eth.get_block(n)["transactions"]
        if w3.eth.get_transaction_receipt(tx)["status"] != 1
    ]


def test_organisations_stopped_past_a_deadline_are_all_back_in_the_next_phase(tmp_path):
    # Prepare: three workers play round 0 and stop (--rounds 1): round 1's PROPOSE phase
    # is open and nobody has voted in it. The pause outlasts its deadline (the chain's
    # clock is moved past it).
    duration = 120  # room for two workers to start on a loaded machine
    config = small(rounds=1, phase_duration=duration, round_timeout=300)
    net = Network(config, tmp_path, Console(quiet=True))
    net.start()
    try:
        chain = ChainClient.read_only(net.deployment)
        net.spawn_workers()
        net.wait()
        assert chain.round_state() == (True, 1, Phase.PROPOSE)
        chain.w3.provider.make_request("evm_increaseTime", [duration + 1])
        ids = [chain.trainer_id(address_of(net, i)) for i in range(3)]
        # Execute: the first organisation back ends the overdue phase alone and votes in
        # the next one; only then do the two others come back.
        again = ["--rounds", "3"]
        net.procs = [net.spawn(0, again)]
        _wait_for(
            lambda: ids[0] in votes_of(chain).get((1, Phase.AGGREGATE), {}),
            what="the first one back voting in round 1's aggregate phase",
        )
        net.procs += [net.spawn(1, again), net.spawn(2, again)]
        net.wait()
        # Assert: the phase after the overdue one waited for the two others, whose votes
        # counted, and all three proposed in round 2; no transaction reverted.
        votes = votes_of(chain)
        assert votes[(1, Phase.PROPOSE)] == {ids[0]: True}
        assert votes[(1, Phase.AGGREGATE)] == dict.fromkeys(ids, True)
        assert all(proposed_in(chain, address_of(net, i), 2) for i in range(3))
        assert chain.round_state()[1] == 3
        assert [p.returncode for p in net.procs] == [0, 0, 0]
        assert reverted_transactions(chain, net) == []
    finally:
        net.stop()


def test_a_late_joiner_slower_than_the_members_phases_gets_in_and_plays_its_rounds(tmp_path):
    # Prepare: two workers (they play until stopped) and a hand-driven trainer H open the
    # network; H votes (bare) in round 0, so round 1's PROPOSE phase waits for it. A third
    # trainer, J, registered during round 0, starts in that phase with --rounds 1. The
    # test holds J (SIGSTOP) once it trains, until the members have left round 1: its
    # training outlasts their phase by a condition, not by how slow 2 cores are. (J's
    # 20 epochs take a few seconds, far longer than the test takes to stop it.)
    config = small(rounds=1000, phase_duration=180)
    net = Network(config, tmp_path, Console(quiet=True))
    net.start(min_trainers=3)
    try:
        chain = ChainClient.read_only(net.deployment)
        hand = ChainClient(net.deployment, account_index=4)
        net.procs = [net.spawn(0), net.spawn(1)]
        hand.register()
        _wait_for(lambda: chain.status().started, what="round 0")
        hand.submit_proposals([])
        joiner_id = ChainClient(net.deployment, account_index=3).register()
        _wait_for(lambda: chain.status().phase is Phase.AGGREGATE, what="round 0 aggregate")
        hand.submit_aggregations([])
        _wait_for(lambda: chain.status().round >= 1, what="round 1")
        joiner = net.spawn(2, ["--rounds", "1", "--epochs", "20"])
        net.procs.append(joiner)
        # Execute: J is held as soon as it trains; once both workers proposed, H votes and
        # the members play on at their pace; H leaves in round 2, and J goes on.
        _wait_for(
            lambda: (
                (tmp_path / "trainers" / "002" / "worker.log").exists()
                and any(
                    "round 1: " in line and "candidates, training" in line
                    for line in log_of(tmp_path, 2).splitlines()
                )
            ),
            what="J choosing its round-1 models",
        )
        os.kill(joiner.pid, signal.SIGSTOP)
        try:
            _wait_for(
                lambda: all(proposed_in(chain, address_of(net, i), 1) for i in range(2)),
                what="both workers' round-1 proposals",
            )
            hand.submit_proposals([])
            _wait_for(lambda: chain.status().phase is Phase.AGGREGATE, what="round 1 aggregate")
            hand.submit_aggregations([])
            _wait_for(lambda: chain.status().round >= 2, what="round 2")
            left = chain.trainers.functions.exit().transact({"from": hand.address})
            assert chain.w3.eth.wait_for_transaction_receipt(left)["status"] == 1
        finally:
            os.kill(joiner.pid, signal.SIGCONT)
        code = joiner.wait(timeout=240)
        # Assert: J exited 0 having played its round, a member from the phase after its
        # first vote (the one that came too late for round 1 was never sent) and
        # proposing in the first PROPOSE phase it was a member of; nothing reverted.
        text = log_of(tmp_path, 2)
        assert code == 0 and "played 1 round(s)" in text, text[-2000:]
        mine = [
            (e.args["round"], e.args["phase"], e.args["counted"])
            for e in _events(chain, "TrainerVoted")
            if e.args["trainerId"] == joiner_id
        ]
        assert mine[0][2] is False and all(counted for _, _, counted in mine[1:])
        proposed = [
            r for r in range(1, chain.status().round) if proposed_in(chain, address_of(net, 2), r)
        ]
        assert proposed == [mine[0][0] + 1]
        assert reverted_transactions(chain, net) == []
    finally:
        net.stop()


# -- services that go away -----------------------------------------------------------------


def assert_one_line_exit(net: Network, index: int, service: str, timeout: float = 90) -> str:
    """The worker exits non-zero; its last line names the service; no traceback."""
    code = net.procs[index].wait(timeout=timeout)
    text = log_of(net.run_dir, index)
    last = text.strip().splitlines()[-1]
    assert code not in (0, None), text[-2000:]
    assert "Traceback" not in text, text[-2000:]
    assert last.startswith(f"Error: {service}: "), last
    assert "played" not in text
    return text


def test_workers_stop_with_one_line_when_the_chain_node_is_gone(tmp_path):
    # Prepare
    net = Network(small(n_trainers=2, rounds=6), tmp_path, Console(quiet=True))
    net.start()
    try:
        chain = ChainClient.read_only(net.deployment)
        net.spawn_workers({i: ["--give-up-after", "4"] for i in (0, 1)})
        _wait_for(lambda: chain.round_state()[1] >= 1, what="round 1")
        # Execute: the node goes away for good.
        stop_devnet(tmp_path / "devnet")
        # Assert: each retried (and said so), then stopped with one line naming the node.
        for index in (0, 1):
            text = assert_one_line_exit(net, index, "chain")
            assert "has not answered" in text.splitlines()[-1]
            assert "retry 1 in" in text
    finally:
        net.stop()


def test_workers_stop_with_one_line_when_the_ipfs_node_is_gone(tmp_path):
    # Prepare: phases of 30 s, so that a worker which stored its round-1 update before
    # the node went, and then waits for the other one (gone), ends the phase and needs
    # its storage again within the wait below, rather than after the default 600 s.
    net = Network(
        small(n_trainers=2, rounds=6, storage="ipfs", phase_duration=30),
        tmp_path,
        Console(quiet=True),
    )
    net.start()
    try:
        chain = ChainClient.read_only(net.deployment)
        net.spawn_workers({i: ["--give-up-after", "4"] for i in (0, 1)})
        _wait_for(lambda: chain.round_state()[1] >= 1, what="round 1")
        # Execute
        stop_ipfs(tmp_path / "ipfs")
        # Assert
        for index in (0, 1):
            text = assert_one_line_exit(net, index, "storage")
            assert "IPFS node" in text.splitlines()[-1]
    finally:
        net.stop()


def test_a_worker_started_with_its_ipfs_node_down_plays_nothing_and_exits_non_zero(tmp_path):
    # Prepare: a two-trainer network whose second worker points at a dead IPFS node.
    net = Network(small(n_trainers=2, rounds=1), tmp_path, Console(quiet=True))
    net.start()
    try:
        dead = f"ipfs:/ip4/127.0.0.1/tcp/{free_port()}"
        # Execute
        net.procs = [net.spawn(0), net.spawn(1, ["--storage", dead, "--give-up-after", "2"])]
        # Assert: it says the storage cannot be reached, and plays no round.
        text = assert_one_line_exit(net, 1, "storage")
        assert "cannot connect to the IPFS node" in text
    finally:
        net.stop()


# -- the wrong network, and setup mistakes -------------------------------------------------


@pytest.fixture(scope="module")
def network(tmp_path_factory):
    """A started two-trainer network whose workers the tests below start by hand."""
    run_dir = tmp_path_factory.mktemp("network")
    net = Network(small(n_trainers=2), run_dir, Console(quiet=True))
    net.start()
    yield net
    net.stop()


def run_worker(
    net: Network, log: Path, *args: str, timeout: float = 60, env: dict[str, str] | None = None
) -> tuple[int, str]:
    """Trainer 0's `mcfl-chain worker` with ``args`` added, with a key in ``env``
    (MCFL_PRIVATE_KEY) instead of ``--account-index``: its exit code and what it wrote
    (stdout and stderr, in ``log``). Forked as the simulator forks its workers, which
    behave as `python -m` would (tests/simulation/test_forked_workers.py); a fresh
    interpreter would spend seconds importing torch for each of these one-line errors."""
    worker_args = net.worker_args(0)
    if env and "MCFL_PRIVATE_KEY" in env:
        at = worker_args.index("--account-index")
        del worker_args[at : at + 2]
    process = start_module(
        "mcfl_chain",
        [*worker_args, "--give-up-after", "2", *args],
        log=log,
        env={**os.environ, "PYTHONWARNINGS": "ignore", **(env or {})},
        preload=WORKER_PRELOAD,
    )
    code = process.wait(timeout=timeout)
    return code, log.read_text()


def test_a_worker_given_another_networks_node_refuses_to_join(network, tmp_path):
    # Prepare: a second devnet at the same addresses, with other genesis weights.
    other = tmp_path / "other"
    _, deployment = start_devnet(
        other, free_port(), genesis_cid=cid_for_bytes(b"other"), task=network.deployment.task
    )
    try:
        assert deployment.addresses == network.deployment.addresses
        # Execute
        code, said = run_worker(
            network,
            tmp_path / "worker.log",
            "--rpc",
            deployment.rpc_url,
            "--state-dir",
            str(tmp_path),
            timeout=40,
        )
        # Assert: refused in one line, and not registered there.
        assert code == 1
        assert said.strip().splitlines() == [said.strip()]
        assert "runs another network than" in said
        stranger = ChainClient(deployment, account_index=1)
        assert not stranger.is_registered()
    finally:
        stop_devnet(other)


def _no_code_deployment(net: Network, path) -> list[str]:
    data = json.loads(net.deployment_path.read_text())
    data["addresses"] = {k: "0x" + f"{i + 1:040x}" for i, k in enumerate(data["addresses"])}
    path.write_text(json.dumps(data))
    return ["--deployment", str(path)]


def _blocked_store(path) -> list[str]:
    LocalStorage(path).path_for(cid_for_bytes(STORAGE_PROBE)).parent.write_text("")
    return ["--storage", f"local:{path}"]


KEYS = {
    "unfunded key": {"MCFL_PRIVATE_KEY": "0x" + "5a" * 32},
    "malformed key": {"MCFL_PRIVATE_KEY": "0x1234" + "5a" * 20},
}
"""Mistakes made through the environment (the key is never on the command line)."""

MISTAKES = {
    "unfunded key": (lambda net, tmp: [], "has no native currency to pay for gas"),
    "account index": (lambda net, tmp: ["--account-index", "9"], "--account-index 9 is past"),
    "malformed key": (lambda net, tmp: [], "MCFL_PRIVATE_KEY is not a private key"),
    "no contract code": (
        lambda net, tmp: _no_code_deployment(net, tmp / "d.json"),
        "no contract code at Trainers",
    ),
    "unwritable store": (lambda net, tmp: _blocked_store(tmp / "blobs"), "cannot write blob"),
    "state dir": (
        lambda net, tmp: ["--state-dir", str(net.deployment_path / "state")],
        "cannot create the state directory",
    ),
    "rpc without scheme": (
        lambda net, tmp: ["--rpc", net.deployment.rpc_url.removeprefix("http://")],
        "lacks its scheme",
    ),
    "no deployment file": (
        lambda net, tmp: ["--deployment", str(tmp / "nowhere.json")],
        "no deployment file at",
    ),
}


@pytest.mark.parametrize("mistake", list(MISTAKES))
def test_setup_mistakes_are_one_line_errors(network, tmp_path, mistake):
    # Prepare
    make_args, expected = MISTAKES[mistake]
    args = ["--state-dir", str(tmp_path / "state"), *make_args(network, tmp_path)]

    # Execute
    code, said = run_worker(
        network, tmp_path / "worker.log", *args, timeout=40, env=KEYS.get(mistake)
    )

    # Assert: exit 1, one line saying what to change, no traceback, no key, hint once.
    lines = said.strip().splitlines()
    assert code == 1, said[-2000:]
    assert len(lines) == 1 and lines[0].startswith("Error: "), said[-2000:]
    assert expected in lines[0]
    assert "5a" * 20 not in said
    assert lines[0].count("mcfl-chain devnet up") <= 1


# -- deadlines -----------------------------------------------------------------------------


def test_deadlines_leave_no_reverted_transaction_and_waiting_trainers_say_for_whom(tmp_path):
    # Prepare: 3 workers and a registered trainer that never acts, so round 0's first
    # phase ends by its deadline. Trainer 2 is held by the test (SIGSTOP) once it trains
    # and let go only when the chain shows that phase ended, so its proposals are ready
    # after the deadline whatever the machine's speed. Its epochs only make it train long
    # enough to be caught training (200: about 5 s on an idle core).
    net = Network(small(rounds=1, phase_duration=20), tmp_path, Console(quiet=True))
    net.start(min_trainers=4)
    try:
        silent = ChainClient(net.deployment, account_index=4)
        silent.register()
        chain = ChainClient.read_only(net.deployment)
        talk = ["--wait-log-interval", "1"]
        net.spawn_workers({0: talk, 1: talk, 2: [*talk, "--epochs", "200"]})
        held = net.procs[2]
        _wait_for(
            lambda: (
                (tmp_path / "trainers" / "002" / "worker.log").exists()
                and any(
                    "round 0: " in line and "candidates, training" in line
                    for line in log_of(tmp_path, 2).splitlines()
                )
            ),
            what="trainer 2 training for round 0",
        )
        # Execute: hold it until the first phase ends without it, then let it finish.
        os.kill(held.pid, signal.SIGSTOP)
        try:
            assert not proposed_in(chain, address_of(net, 2), 0), "held too late"
            _wait_for(
                lambda: chain.status().phase is Phase.AGGREGATE or chain.status().round >= 1,
                what="round 0's first phase ended by its deadline",
            )
        finally:
            os.kill(held.pid, signal.SIGCONT)
        net.wait()
        # Assert: the round ended (its first phase by the deadline, without trainer 2's
        # proposals), and not one transaction reverted.
        assert chain.round_state()[1] == 1
        first_phase = [e for e in _events(chain, "TrainerVoted") if e.args["phase"] == 0]
        assert len(first_phase) == 2 and first_phase[-1].args["votes"] == 2
        assert not proposed_in(chain, address_of(net, 2), 0)
        assert reverted_transactions(chain, net) == []
        assert "not proposing them" in log_of(tmp_path, 2)
        # The waiting trainers said whom they waited for, and that a deadline ends it.
        waits = [line for line in log_of(tmp_path, 0).splitlines() if "waited" in line]
        silent_id = str(silent.trainer_id())
        assert any(f"trainer(s) {silent_id}" in w and "deadline" in w for w in waits)
    finally:
        net.stop()


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_a_simulation_killed_by_a_signal_stops_its_workers_and_chain(tmp_path, signum):
    # A plain `kill` (a CI timeout, a closed terminal) once ended the simulator without
    # unwinding: its forked workers and its Anvil kept running as orphans.
    run_dir = tmp_path / "run"
    command = ["mcfl-chain", "simulate", "--dataset", "digits", "--scenario", "iid", "-n", "2"]
    command += ["--rounds", "50"]
    command += ["--samples", "200", "--epochs", "1", "--out", str(run_dir)]
    simulator = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=tmp_path
    )
    try:
        logs = [run_dir / "trainers" / f"{i:03d}" / "worker.log" for i in range(2)]

        def playing() -> bool:
            assert simulator.poll() is None, simulator.communicate()[0].decode()
            return all(log.exists() and "round 1:" in log.read_text() for log in logs)

        _wait_for(playing, 180, "both workers in round 1")
        started = psutil.Process(simulator.pid).children(recursive=True)
        names = " ".join(" ".join(p.cmdline()) for p in started)
        assert "anvil" in names and "forkserver" in names and len(started) >= 4
        simulator.send_signal(signum)
        output = simulator.communicate(timeout=90)[0].decode()
    finally:
        if simulator.poll() is None:
            simulator.kill()
    assert simulator.returncode == 130 and "stopped by SIG" in output, output
    assert "workers and chain stopped" in output, output
    _, alive = psutil.wait_procs(started, timeout=15)  # a child may still be exiting
    left = [p for p in alive if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    assert not left, [" ".join(p.cmdline()) for p in left]
    for log in logs:  # each worker was told to stop, and said how far it got
        assert "played " in log.read_text().rsplit("round 1:", 1)[1]
