"""Options declared once: a strategy's in its module, a network's in chain/deploy.py.

The worker's options and files, the simulator's scenarios, `simulate` and the campaign
take the strategies' options from the declarations; `deploy` and `devnet up` take the
network settings from theirs.
"""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import textwrap

import click
import pytest
from click.testing import CliRunner

from mcfl_chain.chain.deploy import NETWORK_SETTINGS, check_parameters
from mcfl_chain.cli import main
from mcfl_chain.simulation import campaign
from mcfl_chain.simulation.runner import SimulationConfig, SimulationError
from mcfl_chain.strategies import STRATEGIES, Strategy, make_strategy
from mcfl_chain.strategies.base import StrategyOption, strategy_options
from mcfl_chain.strategies.fedavg import FedAvgStrategy
from mcfl_chain.worker.config import OPTIONS, WorkerConfig

simulate_cli = importlib.import_module("mcfl_chain.cli.simulate")


def _compact(text: str) -> str:
    return "".join(text.split())


def test_every_strategy_option_is_a_worker_and_scenario_option_with_its_declared_default():
    # Prepare
    declared = strategy_options()
    worker = {option.name: option for option in OPTIONS}

    # Assert: clusters is IFCA's and FACADE's both, once
    names = [option.name for option in declared]
    assert len(names) == len(set(names)) and {"clusters", "tolerance", "ewc"} <= set(names)
    for option in declared:
        spec = option.spec.spelled()
        assert worker[spec.name].default == spec.default == getattr(WorkerConfig(), spec.name)
        assert worker[spec.name].help == spec.help
        assert worker[spec.name].choices == spec.choices
        assert getattr(SimulationConfig(), spec.name) == spec.default
    assert "IFCA:" in worker["clusters"].help and "FACADE:" in worker["clusters"].help


def test_simulate_offers_every_strategy_option_with_its_declared_help_and_default():
    # Execute
    shown = _compact(CliRunner().invoke(simulate_cli.simulate, ["--help"]).output)

    # Assert
    for option in strategy_options():
        spec = option.spec.spelled()
        assert _compact(spec.flag + " ") in shown
        assert _compact(f"{spec.help}") in shown
        assert _compact(f"[default: {spec.describe(spec.default)}]") in shown


def test_a_scenario_hands_each_trainer_its_strategy_options():
    # Prepare
    config = SimulationConfig(
        n_trainers=4, strategy="fedfmc", tolerance="mixed", fork_rounds=9, ewc="off"
    )

    # Execute
    trainers = [config.trainer_config(i) for i in range(4)]

    # Assert: "mixed" goes round the declared values; the others go as they are
    assert [t.tolerance for t in trainers] == [1.0, 2.0, 3.0, 1.0]
    assert {(t.fork_rounds, t.ewc) for t in trainers} == {(9, "off")}
    strategy = make_strategy("fedfmc", **trainers[0].strategy_options())
    assert (strategy.fork_rounds, strategy.ewc) == (9, False)  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "args, message",
    [
        (["--tolerance", "fast"], "'fast' is not a number nor 'mixed'"),
        (["--clusters", "0"], "0 is not in the range x>=1"),
        (["--ewc", "maybe"], "'maybe' is not one of 'on', 'off'"),
    ],
)
def test_simulate_refuses_a_bad_strategy_option_naming_it(monkeypatch, args, message):
    # Prepare: no network may start
    monkeypatch.setattr(simulate_cli, "run_simulation", pytest.fail)

    # Execute
    result = CliRunner().invoke(simulate_cli.simulate, args)

    # Assert
    assert result.exit_code == 2
    assert message in " ".join(result.output.split()), result.output


def test_a_scenario_value_a_strategy_refuses_is_named_before_anything_starts():
    # Execute / Assert
    with pytest.raises(SimulationError, match="scenario 'bad': fork_threshold must be at least 0"):
        SimulationConfig(name="bad", fork_threshold=-1.0).validate()


def test_baselines_reset_the_options_of_other_strategies_only():
    # Prepare
    config = SimulationConfig(
        name="x", rounds=30, tolerance=3.0, start="shared", clusters=5, fork_threshold=1.5
    )

    # Execute
    fedavg = campaign.method_config(config, "fedavg")
    fedfmc = campaign.method_config(config, "fedfmc")

    # Assert: FedAvg declares none, FedFMC keeps its own
    defaults = SimulationConfig()
    assert (fedavg.tolerance, fedavg.start, fedavg.clusters, fedavg.fork_threshold) == (
        defaults.tolerance,
        defaults.start,
        defaults.clusters,
        defaults.fork_threshold,
    )
    assert (fedfmc.tolerance, fedfmc.fork_threshold) == (defaults.tolerance, 1.5)


def test_two_strategies_declaring_one_option_differently_are_refused(monkeypatch):
    # Prepare: two strategies, one name, two defaults
    class One(FedAvgStrategy):
        width = StrategyOption(int, 1, "One: width.")

    class Two(FedAvgStrategy):
        width = StrategyOption(int, 2, "Two: width.")

    monkeypatch.setitem(STRATEGIES, "one", One)
    monkeypatch.setitem(STRATEGIES, "two", Two)

    # Execute / Assert
    with pytest.raises(TypeError, match="'one' and 'two' both declare the option 'width'"):
        strategy_options()


def test_a_strategy_refuses_an_option_it_does_not_declare():
    # Execute / Assert
    with pytest.raises(ValueError, match="FedAvgStrategy has no option tolerance"):
        FedAvgStrategy(tolerance=1.0)
    assert repr(make_strategy("ifca", clusters=2)) == "IFCAStrategy(clusters=2)"
    assert isinstance(make_strategy("ifca", clusters=2), Strategy)


NEW_STRATEGY = '''
"""A strategy of one's own, in a module of its own: its option is declared here alone."""
from mcfl_chain.strategies.base import StrategyOption, register_strategy
from mcfl_chain.strategies.fedavg import FedAvgStrategy


@register_strategy("greedy")
class GreedyStrategy(FedAvgStrategy):
    appetite = StrategyOption(int, 7, "Greedy: how many models to eat.", minimum=2)
'''

CHECK = """
import greedy  # before the configuration and the commands are made
from click.testing import CliRunner
from mcfl_chain.cli import main
from mcfl_chain.simulation.runner import SimulationConfig, SimulationError
from mcfl_chain.strategies import make_strategy
from mcfl_chain.worker.config import WorkerConfig

config = WorkerConfig.from_mapping({"strategy": "greedy", "appetite": 9})
print("worker", make_strategy(config.strategy, **config.strategy_options()))
print("scenario", SimulationConfig(strategy="greedy").trainer_config(0).appetite)
for command in ("worker", "simulate"):
    shown = " ".join(CliRunner().invoke(main, [command, "--help"]).output.split())
    print(command, "--appetite" in shown and "Greedy: how many models to eat." in shown)
print(" ".join(CliRunner().invoke(main, ["worker", "--appetite", "1"]).output.split()))
"""


def test_a_new_strategy_declares_its_options_in_its_own_module(tmp_path):
    # Prepare: the module, outside the package; a fresh interpreter imports it first
    (tmp_path / "greedy.py").write_text(NEW_STRATEGY)

    # Execute
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(CHECK)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])},
    )

    # Assert
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[:4] == [
        "worker GreedyStrategy(fedavg_start='all', appetite=9)",  # FedAvg's option inherited
        "scenario 7",
        "worker True",
        "simulate True",
    ]
    assert "Invalid value for '--appetite': 1 is not in the range x>=2" in done.stdout


@pytest.mark.parametrize("command", [("deploy",), ("devnet", "up")])
def test_deploy_and_devnet_up_offer_the_network_settings_as_declared(command):
    # Prepare
    found: click.Command | None = main
    for name in command:
        assert isinstance(found, click.Group)
        found = found.get_command(click.Context(found), name)
    assert found is not None
    params = {param.name: param for param in found.params}

    # Assert
    for spec in NETWORK_SETTINGS:
        option = params[spec.name]
        assert isinstance(option, click.Option)
        assert option.opts == [spec.flag] and (option.help or "").startswith(spec.help)


@pytest.mark.parametrize(
    "command", [["deploy", "--rpc", "http://127.0.0.1:9"], ["devnet", "up", "--port", "9"]]
)
def test_a_phase_without_deadline_is_refused_alike_by_both_commands(command):
    # Execute
    result = CliRunner().invoke(main, [*command, "--phase-duration", "0"])

    # Assert: refused before any chain is reached
    assert result.exit_code == 2
    assert "0 s: deadlines are mandatory" in " ".join(result.output.split())


def test_check_parameters_refuses_with_the_declarations_messages():
    # Execute / Assert
    with pytest.raises(ValueError, match="min_trainers must be between 1 and 2\\*\\*32 - 1"):
        check_parameters("lenet5:digits", min_trainers=0)
    with pytest.raises(ValueError, match="cooldown must be between 0 and 31536000 s"):
        check_parameters("lenet5:digits", registration="deposit", deposit=1, cooldown=10**9)
    with pytest.raises(TypeError, match="no network setting named min_trainer;"):
        check_parameters("lenet5:digits", min_trainer=3)
