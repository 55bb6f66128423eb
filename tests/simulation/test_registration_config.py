"""``SimulationConfig.registration`` and ``deposit``: which trainers the allowlist admits,
what each worker is told, and the values refused before anything starts."""

from __future__ import annotations

import importlib
from types import SimpleNamespace

import pytest
from click.testing import CliRunner
from rich.console import Console

from mcfl_chain.adversaries import AdversarySpec
from mcfl_chain.chain._tx import dev_account
from mcfl_chain.simulation import runner
from mcfl_chain.simulation.registration import admitted_trainers, coalitions
from mcfl_chain.simulation.runner import Network, SimulationConfig, SimulationError

simulate_cli = importlib.import_module("mcfl_chain.cli.simulate")

SYBIL = AdversarySpec("sybil")
SYBIL_BACKDOOR = AdversarySpec("sybil", (("payload", "backdoor"),))
FLIP = AdversarySpec("label-flip")


def _config(**overrides) -> SimulationConfig:
    base = dict(name="reg", dataset="digits", scenario="iid", n_trainers=6, samples=300, seed=3)
    base.update(overrides)
    return SimulationConfig(**base)


@pytest.mark.parametrize(
    ("trainers", "assignment", "admitted"),
    [
        # Nobody colludes: everyone is admitted, label flippers (members gone bad) too.
        ([0, 1, 2, 3], {}, [0, 1, 2, 3]),
        ([0, 1, 2, 3], {1: FLIP, 3: FLIP}, [0, 1, 2, 3]),
        # One coalition of three: its lowest index only.
        ([0, 1, 2, 3, 4], {4: SYBIL, 1: SYBIL, 3: SYBIL}, [0, 1, 2]),
        # Two coalitions (different specs) and a lone label flipper: one of each.
        (
            [0, 1, 2, 3, 4, 5, 6],
            {2: SYBIL, 5: SYBIL, 1: SYBIL_BACKDOOR, 6: SYBIL_BACKDOOR, 3: FLIP},
            [0, 1, 2, 3, 4],
        ),
        # A partial run: the coalition's lowest index among the run's trainers, in the
        # run's order.
        ([5, 3, 0], {1: SYBIL, 3: SYBIL, 5: SYBIL}, [3, 0]),
    ],
)
def test_the_admin_admits_everyone_but_one_identity_per_coalition(trainers, assignment, admitted):
    assert admitted_trainers(trainers, assignment) == admitted


def test_coalitions_group_the_identities_of_one_colluding_spec():
    assignment = {2: SYBIL, 5: SYBIL, 1: SYBIL_BACKDOOR, 6: SYBIL_BACKDOOR, 3: FLIP}
    assert coalitions(range(7), assignment) == [[1, 6], [2, 5]]


def test_the_config_refuses_the_identities_the_allowlist_leaves_out():
    # Prepare: 0.5 of 6 trainers -> a coalition of three, drawn from the seed.
    config = _config(adversaries="sybil:0.5", registration="allowlist")
    first, *others = sorted(config.adversary_assignment())

    # Execute
    config.validate()

    # Assert
    assert len(others) == 2
    assert config.admitted_trainers() == [i for i in range(6) if i not in others]
    assert config.refused_trainers() == others
    assert _config(adversaries="sybil:0.5").refused_trainers() == []
    assert (config.deposit_wei, _config(registration="deposit").deposit_wei) == (0, 10**18)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"registration": "whitelist"}, "registration must be one of 'open', 'allowlist', "
         "'deposit', not 'whitelist'"),
        ({"deposit": 10**18}, "deposit only applies to registration 'deposit', not 'open': "
         "remove it, or set registration = 'deposit'"),
        ({"registration": "deposit", "deposit": 0}, "deposit must be above 0 and below the "
         "10,000 ETH each dev account holds"),
        ({"registration": "deposit", "deposit": 10_000 * 10**18}, "deposit must be above 0"),
        ({"registration": "deposit", "deposit": 1.5}, "deposit must be a whole number of wei"),
        ({"registration": "deposit", "deposit": True}, "deposit must be a whole number of wei"),
        ({"max_samples": 0}, "max_samples must be a whole number >= 1"),
        ({"max_samples": 2.5}, "max_samples must be a whole number >= 1"),
    ],
)  # fmt: skip
def test_wrong_registration_settings_are_refused_before_anything_starts(overrides, message):
    with pytest.raises(SimulationError, match=f"scenario 'reg': {message}"):
        _config(**overrides).validate()


def test_a_scenario_file_and_the_command_line_set_the_policy(monkeypatch, tmp_path):
    # Prepare: a scenario file under deposit; run_simulation records what it is given.
    path = tmp_path / "s.toml"
    path.write_text('name = "s"\nn_trainers = 4\nregistration = "deposit"\ndeposit = 5000\n')
    given: list[SimulationConfig] = []
    monkeypatch.setattr(
        simulate_cli, "run_simulation", lambda config, *a, **k: given.append(config) or {}
    )

    # Execute
    from_file = SimulationConfig.load_file(path)
    CliRunner().invoke(simulate_cli.simulate, ["--config", str(path), "--deposit", str(7 * 10**18)])
    CliRunner().invoke(
        simulate_cli.simulate, ["--registration", "allowlist", "--max-samples", "900"]
    )
    refused = CliRunner().invoke(simulate_cli.simulate, ["--registration", "bond"])

    # Assert: the file's policy is kept under an override of its deposit.
    assert (from_file.registration, from_file.deposit_wei) == ("deposit", 5000)
    assert [(c.registration, c.deposit, c.max_samples) for c in given] == [
        ("deposit", 7 * 10**18, None),
        ("allowlist", None, 900),
    ]
    assert refused.exit_code == 2 and "'bond' is not one of 'open', 'allowlist'" in refused.output


def test_the_admitted_sybil_is_told_a_coalition_of_one_and_the_others_start_no_worker(
    monkeypatch, tmp_path
):
    # Prepare: a network whose services are faked; the process starter records the
    # workers' arguments (`mcfl_chain worker ...`).
    started: list[list[str]] = []

    def start_module(module, args, **kwargs):
        assert module == "mcfl_chain" and args[0] == "worker"
        started.append(list(args))
        return SimpleNamespace(poll=lambda: 0)

    monkeypatch.setattr(runner, "start_module", start_module)
    config = _config(adversaries="sybil:0.5:payload=label-flip", registration="allowlist")
    first, *others = sorted(config.adversary_assignment())
    network = Network(config, tmp_path, Console(quiet=True))
    network.deployment = SimpleNamespace(rpc_url="http://127.0.0.1:1")  # type: ignore[assignment]
    network.storage_spec = "local:/nowhere"

    # Execute
    network.spawn_workers()

    # Assert: workers for the admitted trainers only; the Sybil among them knows itself.
    def flag(command, name):
        return command[command.index(name) + 1] if name in command else None

    assert [int(flag(c, "--trainer-index")) for c in started] == network.trainers
    assert network.trainers == [i for i in range(6) if i not in others]
    adversaries = {int(flag(c, "--trainer-index")): flag(c, "--adversary") for c in started}
    assert adversaries == {
        i: f"sybil:coalition={dev_account(first + 1).address}:payload=label-flip"
        if i == first
        else None
        for i in network.trainers
    }
