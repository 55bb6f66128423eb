"""Scenario files of ``mcfl-chain simulate --config``: unknown keys, shipped files, checks."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest
from click.testing import CliRunner

from mcfl_chain._utils.config_files import ConfigError
from mcfl_chain.cli.simulate import load_config
from mcfl_chain.simulation.runner import SimulationConfig, SimulationError

# The package ``mcfl_chain.cli`` exports the command under the module's name.
simulate_cli = importlib.import_module("mcfl_chain.cli.simulate")
SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"


def test_simulate_with_an_unknown_key_fails_with_the_suggestion(monkeypatch, tmp_path):
    # Prepare: a misspelled key; no network may start.
    path = tmp_path / "groups.toml"
    path.write_text('name = "x"\nepoch = 3\n')
    monkeypatch.setattr(simulate_cli, "run_simulation", pytest.fail)

    # Execute
    result = CliRunner().invoke(simulate_cli.simulate, ["--config", str(path)])

    # Assert
    assert result.exit_code == 2
    assert "Invalid value for '--config'" in result.output
    assert "unknown key 'epoch' (did you mean 'epochs'?)" in result.output


def test_a_scenario_file_takes_dash_case_keys_and_command_line_overrides(tmp_path):
    # Prepare
    path = tmp_path / "s.toml"
    path.write_text('name = "s"\nn-trainers = 3\nscenario_params = { n_groups = 3 }\n')

    # Execute
    config = load_config(path, {"rounds": 9, "epochs": None})

    # Assert
    assert (config.name, config.n_trainers, config.rounds, config.epochs) == ("s", 3, 9, 2)
    assert config.scenario_params == {"n_groups": 3}


def test_from_mapping_names_every_unknown_key():
    # Execute
    with pytest.raises(ConfigError) as raised:
        SimulationConfig.from_mapping({"n_trainer": 4, "tolerence": 2}, source="s.toml")

    # Assert
    assert str(raised.value) == (
        "s.toml: unknown key 'n_trainer' (did you mean 'n_trainers'?); "
        "unknown key 'tolerence' (did you mean 'tolerance'?)"
    )


@pytest.mark.parametrize("path", sorted(SCENARIOS.rglob("*.toml")), ids=lambda p: p.stem)
def test_every_shipped_scenario_loads_and_passes_the_workers_checks(path):
    # Execute
    config = SimulationConfig.load_file(path)

    # Assert
    config.validate()
    assert config.trainer_config(config.n_trainers - 1).trainer_index == config.n_trainers - 1


def test_a_scenario_value_no_worker_accepts_is_refused_before_anything_starts():
    # Prepare
    config = SimulationConfig(name="bad", epochs=0)

    # Execute / Assert
    with pytest.raises(SimulationError, match="scenario 'bad': epochs must be at least 1"):
        config.validate()


def test_facade_networks_train_the_multi_head_version_of_the_model():
    # Prepare
    facade = SimulationConfig(strategy="facade", clusters=2, dataset="digits")

    # Execute / Assert: the task, the genesis and every worker name lenet5-heads2
    assert facade.network_arch == "lenet5-heads2"
    assert facade.task == "lenet5-heads2:digits"
    assert facade.trainer_config(0).arch == "lenet5-heads2"
    assert SimulationConfig(strategy="ifca", clusters=2).network_arch == "lenet5"
    with pytest.raises(SimulationError, match="'lenet-cae' has no multi-head version"):
        SimulationConfig(strategy="facade", arch="lenet-cae").validate()


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"engine": "batched", "ray_address": "10.0.0.1:6379"}, "only applies to engine 'ray'"),
        ({"engine": "ray", "ray_address": "10.0.0.1"}, "must be HOST:PORT of a running Ray"),
        ({"engine": "ray", "ray_address": "ray://10.0.0.1:10001"}, "must be HOST:PORT"),
        ({"engine": "process", "hosts": 2}, "hosts only applies to engine 'batched'"),
        ({"engine": "batched", "hosts": 0}, "hosts must be a whole number >= 1"),
    ],
)
def test_a_ray_address_is_refused_in_one_line_unless_the_ray_engine_can_use_it(overrides, message):
    # Execute / Assert
    with pytest.raises(SimulationError, match=message) as refused:
        SimulationConfig(**overrides).validate()
    assert "\n" not in str(refused.value)
    # and the forms it takes pass
    for address in ("10.0.0.1:6379", "auto", None):
        SimulationConfig(engine="ray", ray_address=address).validate()
    SimulationConfig(engine="batched", hosts=3).validate()
