"""The worker's configuration: one declaration feeds the command line, files and simulator.

The command is run with click's CliRunner up to ``build_worker``, which is replaced by
a stand-in that records the configuration it is given: no chain or storage is started.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from click.testing import CliRunner
from rich.console import Console

from mcfl_chain.adversaries import Adversary
from mcfl_chain.adversaries.sign_flip import SignFlip
from mcfl_chain.algorithms.robust import MultiKrumSelection
from mcfl_chain.chain.deployment import Deployment
from mcfl_chain.simulation.runner import Network, SimulationConfig
from mcfl_chain.worker import launch
from mcfl_chain.worker.config import OPTIONS, ConfigError, WorkerConfig

# The package ``mcfl_chain.cli`` exports the command under the module's name.
worker_cli = importlib.import_module("mcfl_chain.cli.worker")
STOPPED = "stopped before the network"


@pytest.fixture
def parse(monkeypatch):
    """``parse(args, env)``: the WorkerConfig that ``mcfl-chain worker ARGS`` would run."""
    for name in ["MCFL_CONFIG", *(f"MCFL_{o.name.upper()}" for o in OPTIONS)]:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(worker_cli, "_setup_logging", lambda verbose: None)
    received: list[WorkerConfig] = []

    def build_worker(config: WorkerConfig, prompt=None) -> None:
        received.append(config)
        raise launch.WorkerSetupError(STOPPED)

    monkeypatch.setattr(launch, "build_worker", build_worker)

    def run(args: list[str], env: dict[str, str] | None = None) -> WorkerConfig:
        result = CliRunner().invoke(worker_cli.worker, args, env=env)
        assert STOPPED in result.output, result.output
        return received[-1]

    return run


def _compact(text: str) -> str:
    return "".join(text.split())


def test_the_command_line_defaults_are_the_configs(parse):
    # Execute
    config = parse([])

    # Assert
    assert config == WorkerConfig()
    assert config.epochs == 2 and config.tolerance == 1.0 and config.scenario_params == {}


def test_a_waiting_worker_says_whom_it_waits_for_within_a_default_phase():
    # The default deadline of a phase: a worker waiting a whole phase says so twice.
    from mcfl_chain.chain.devnet import DEFAULT_PHASE_DURATION
    from mcfl_chain.worker.rounds import WorkerOptions

    assert WorkerConfig().wait_log_interval * 2 < DEFAULT_PHASE_DURATION
    (option,) = [f for f in dataclasses.fields(WorkerOptions) if f.name == "wait_log_interval"]
    assert option.default == WorkerConfig().wait_log_interval


def test_help_shows_every_options_help_default_and_choices():
    # Execute
    result = CliRunner().invoke(worker_cli.worker, ["--help"])

    # Assert: whitespace is dropped, as the help wraps lines wherever it fits.
    shown = _compact(result.output)
    assert result.exit_code == 0
    for option in OPTIONS:
        assert _compact(option.flag + " ") in shown
        assert _compact(option.help) in shown
        if option.default is not None:
            assert _compact(f"{option.help} [default: {option.format(option.default)}") in shown
        if option.choices:
            assert f"{option.flag}[{'|'.join(option.choices)}]" in shown


@pytest.mark.parametrize(
    "key, meant",
    [("epoch", "epochs"), ("tolerence", "tolerance"), ("n-trainer", "n-trainers")],
)
def test_a_misspelled_key_is_refused_naming_the_option_meant(key, meant):
    # Execute
    with pytest.raises(ConfigError) as raised:
        WorkerConfig.from_mapping({key: 3}, source="worker.toml")

    # Assert
    assert str(raised.value) == f"worker.toml: unknown key {key!r} (did you mean {meant!r}?)"


def test_a_key_like_no_option_lists_the_valid_ones():
    # Execute
    with pytest.raises(ConfigError) as raised:
        WorkerConfig.from_mapping({"colour": "blue"})

    # Assert
    assert (
        "unknown key 'colour' (known keys: account, account_index, adversary, aggregate_on"
        in str(raised.value)
    )


def test_dash_case_snake_case_and_flag_names_set_the_same_options():
    # Execute
    config = WorkerConfig.from_mapping(
        {"n-trainers": 3, "trainer_index": 2, "poll-interval": 1, "model": "lenet5"}
    )

    # Assert
    assert config == WorkerConfig(n_trainers=3, trainer_index=2, poll_interval=1.0, arch="lenet5")


def test_an_option_given_twice_is_refused():
    # Execute / Assert
    with pytest.raises(ConfigError, match="'arch' and 'model' both set 'arch', keep one"):
        WorkerConfig.from_mapping({"arch": "lenet5", "model": "lenet5"})


@pytest.mark.parametrize(
    "values, message",
    [
        ({"epochs": 0}, "epochs must be at least 1, not 0"),
        ({"lr": "fast"}, "lr must be a number, not 'fast'"),
        ({"threads": True}, "threads must be an integer, not True"),
        ({"scenario": "ring"}, "scenario must be one of iid, groups, .*, not 'ring'"),
        ({"scenario_params": "[3]"}, "scenario_params must be a JSON object"),
        ({"deployment": None}, "deployment must be a string; it cannot be unset"),
    ],
)
def test_a_value_of_the_wrong_type_or_range_is_refused_naming_the_option(values, message):
    # Execute / Assert
    with pytest.raises(ConfigError, match=f"^w.toml: {message}"):
        WorkerConfig.from_mapping(values, source="w.toml")


def test_toml_and_json_files_give_the_same_config(tmp_path):
    # Prepare
    toml = tmp_path / "worker.toml"
    toml.write_text(
        'scenario = "groups"\nscenario-params = { n_groups = 3 }\n'
        'tolerance = 2\naccount_index = 4\nstate_dir = "s"\n'
    )
    as_json = tmp_path / "worker.json"
    as_json.write_text(
        json.dumps(
            {
                "scenario": "groups",
                "scenario_params": '{"n_groups": 3}',
                "tolerance": 2.0,
                "account-index": 4,
                "state-dir": "s",
            }
        )
    )
    expected = WorkerConfig(
        scenario="groups",
        scenario_params={"n_groups": 3},
        tolerance=2.0,
        account_index=4,
        state_dir=Path("s"),
    )

    # Execute
    from_toml, from_json = WorkerConfig.load_file(toml), WorkerConfig.load_file(as_json)

    # Assert
    assert from_toml == expected and from_json == expected


def test_an_unreadable_file_is_refused_naming_it(tmp_path):
    # Prepare
    path = tmp_path / "worker.toml"
    path.write_text("epochs = = 3\n")

    # Execute / Assert
    with pytest.raises(ConfigError, match=f"cannot read {path}"):
        WorkerConfig.load_file(path)


def test_a_flag_beats_the_environment_which_beats_the_file(parse, tmp_path):
    # Prepare
    path = tmp_path / "worker.toml"
    path.write_text("epochs = 3\nlr = 0.5\nseed = 7\n")

    # Execute
    config = parse(
        ["--config", str(path), "--epochs", "5"],
        env={"MCFL_EPOCHS": "4", "MCFL_LR": "0.25"},
    )

    # Assert: epochs from the flag, lr from the environment, seed from the file.
    assert (config.epochs, config.lr, config.seed, config.rounds) == (5, 0.25, 7, None)


def test_an_unknown_key_in_the_workers_file_stops_the_command_with_the_suggestion(parse, tmp_path):
    # Prepare
    path = tmp_path / "worker.toml"
    path.write_text("tolerence = 3\n")

    # Execute
    result = CliRunner().invoke(worker_cli.worker, ["--config", str(path)])

    # Assert: a usage error, before anything is built.
    assert result.exit_code == 2
    assert "unknown key 'tolerence' (did you mean 'tolerance'?)" in result.output
    assert STOPPED not in result.output


def test_to_args_round_trips_through_the_command_line(parse, tmp_path):
    # Prepare
    config = WorkerConfig(
        rpc="http://127.0.0.1:9001",
        account_index=3,
        deployment=tmp_path / "deployment.json",
        storage="ipfs:/ip4/127.0.0.1/tcp/5009",
        dataset="digits",
        scenario="dirichlet",
        scenario_params={"alpha": 0.3, "classes": [1, 2]},
        n_trainers=5,
        trainer_index=4,
        samples=300,
        seed=11,
        arch="lenet5",
        strategy="fedavg",
        tolerance=2.5,
        divergence="cosine",
        epochs=3,
        batch_size=16,
        lr=0.1 + 0.2,
        rounds=7,
        state_dir=tmp_path / "state",
        metrics=tmp_path / "metrics.jsonl",
        threads=2,
        poll_interval=0.25,
        adversary="nan-weights",
    )

    # Execute
    parsed = parse(config.to_args())

    # Assert
    assert parsed == config


def test_no_option_takes_a_private_key():
    # Execute
    names = {option.name for option in OPTIONS}
    flags = {option.flag for option in OPTIONS}

    # Assert: keys come from keystores, ape accounts or MCFL_PRIVATE_KEY only.
    assert {"keystore", "account", "password_file", "account_index"} <= names
    assert "key" not in names and "--key" not in flags


def test_the_removed_key_flag_is_refused_without_echoing_the_key(parse):
    # Prepare
    key = "0x" + "ab" * 32

    # Execute
    result = CliRunner().invoke(worker_cli.worker, ["--key", key])

    # Assert: a usage error naming what to use instead; the key is not repeated.
    assert result.exit_code == 2
    assert "--key is no longer accepted" in result.output
    assert "MCFL_PRIVATE_KEY" in result.output and "--keystore" in result.output
    assert "ab" * 32 not in result.output and STOPPED not in result.output


def test_help_names_the_key_sources_and_no_secret(monkeypatch):
    # Prepare: secrets in the environment must never reach the help text.
    key, password = "0x" + "cd" * 32, "hunter2-correct-horse"
    monkeypatch.setenv("MCFL_PRIVATE_KEY", key)
    monkeypatch.setenv("MCFL_KEYSTORE_PASSWORD", password)

    # Execute
    result = CliRunner().invoke(worker_cli.worker, ["--help"])

    # Assert
    assert result.exit_code == 0
    for flag in ("--keystore", "--account", "--password-file", "MCFL_PRIVATE_KEY"):
        assert flag in result.output
    assert "--key " not in result.output
    assert "cd" * 32 not in result.output and password not in result.output


def test_the_simulators_command_for_a_trainer_names_its_share_and_services(parse, tmp_path):
    # Prepare: a network whose devnet and storage are said to be up.
    scenario = SimulationConfig(
        dataset="digits",
        scenario="groups",
        scenario_params={"n_groups": 3},
        n_trainers=4,
        rounds=3,
        epochs=5,
        samples=None,
        tolerance="mixed",
    )
    net = Network(scenario, tmp_path, Console(quiet=True))
    net.deployment = Deployment(
        chain_id=31337,
        rpc_url="http://127.0.0.1:9100",
        addresses={},
        abis={},
        deployment_block=1,
        genesis_cid="bafkgenesis",
        task="lenet5:digits",
        min_trainers=4,
        phase_duration=0,
    )
    net.storage_spec = f"local:{tmp_path / 'blobs'}"

    # Execute
    command = net.worker_command(2)
    pairs = dict(zip(command[4::2], command[5::2], strict=True))
    config = parse(command[4:])

    # Assert
    assert command[:4] == [sys.executable, "-m", "mcfl_chain", "worker"]
    assert pairs["--account-index"] == "3" and pairs["--trainer-index"] == "2"
    assert pairs["--tolerance"] == "3.0"  # "mixed": 1, 2, 3 in turn
    assert "--samples" not in pairs and "--key" not in pairs
    assert config == WorkerConfig(
        rpc="http://127.0.0.1:9100",
        account_index=3,
        deployment=tmp_path / "devnet" / "deployment.json",
        storage=f"local:{tmp_path / 'blobs'}",
        dataset="digits",
        scenario="groups",
        scenario_params={"n_groups": 3},
        n_trainers=4,
        trainer_index=2,
        seed=0,
        arch="lenet5",
        tolerance=3.0,
        epochs=5,
        rounds=3,
        state_dir=tmp_path / "trainers" / "002" / "state",
        metrics=tmp_path / "trainers" / "002" / "metrics.jsonl",
    )


def test_an_adversary_and_a_defence_with_parameters_round_trip(parse):
    # Prepare
    config = WorkerConfig(adversary="sign-flip:scale=4", defence="multi-krum:f=2:m=3")

    # Execute
    parsed = parse(config.to_args())

    # Assert
    assert parsed == config
    assert parse(["--adversary", "sybil:coalition=0xA1+0xB2:payload=label-flip"]).adversary == (
        "sybil:coalition=0xA1+0xB2:payload=label-flip"
    )


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"adversary": "label-flop"}, "adversary: unknown adversary 'label-flop'"),
        ({"adversary": "sign-flip:scale=-1"}, "adversary: scale λ must be a finite number > 0"),
        ({"defence": "krum:f=-1"}, "defence: Krum: f is a number of Byzantine updates >= 0"),
        (
            {"defence": "per-head-fedavg"},
            "defence: 'per-head-fedavg' is no defence but a network's own aggregation "
            "(rule code 4)",
        ),
    ],
)
def test_an_adversary_or_defence_nobody_can_play_is_refused_naming_why(values, message):
    with pytest.raises(ConfigError) as raised:
        WorkerConfig.from_mapping(values, source="worker.toml")
    assert str(raised.value).startswith(f"worker.toml: {message}")


def test_an_aggregation_rule_is_a_defence_a_trainer_can_name():
    config = WorkerConfig.from_mapping({"defence": "trimmed-mean:beta=0.2"}, source="w.toml")
    assert config.defence == "trimmed-mean:beta=0.2"


def test_the_command_line_refuses_a_defence_that_is_the_networks_own_rule(monkeypatch):
    # Prepare
    for name in ["MCFL_CONFIG", *(f"MCFL_{o.name.upper()}" for o in OPTIONS)]:
        monkeypatch.delenv(name, raising=False)

    # Execute
    result = CliRunner().invoke(worker_cli.worker, ["--defence", "fedavg"])

    # Assert: a usage error before anything is built.
    assert result.exit_code == 2
    assert "isnodefencebutanetwork'sownaggregation" in _compact(result.output)


@pytest.fixture
def built(monkeypatch, tmp_path):
    """``built(**options)``: the Worker ``build_worker`` makes for a digits network, with
    the chain, storage and state checks replaced by stand-ins."""
    path = tmp_path / "deployment.json"
    Deployment(
        chain_id=31337,
        rpc_url="http://127.0.0.1:9100",
        addresses={name: "0x" + "00" * 20 for name in ("Trainers", "Models", "Updates")},
        abis={name: [] for name in ("Trainers", "Models", "Updates")},
        deployment_block=1,
        genesis_cid="bafkgenesis",
        task="lenet5:digits",
        min_trainers=4,
        phase_duration=30,
    ).save(path)
    monkeypatch.setattr(
        launch,
        "prepare",
        lambda *a, **k: (
            SimpleNamespace(address="0x" + "a1" * 20),
            SimpleNamespace(close=lambda: None),
            SimpleNamespace(path=tmp_path / "s" / "state.json"),
            None,
        ),
    )

    def build(**options):
        config = WorkerConfig(
            deployment=path, account_index=1, n_trainers=4, samples=100, **options
        )
        return launch.build_worker(config)

    return build


def test_the_worker_is_built_with_its_adversary_defence_and_their_labels(built):
    # Execute
    adversary = built(adversary="sign-flip:scale=4")
    honest = built(defence="multi-krum:f=1", strategy="fedavg")

    # Assert: metrics lines carry the adversary's name (None: honest) and the defence.
    assert isinstance(adversary.adversary, SignFlip) and adversary.adversary.scale == 4.0
    assert adversary.options.labels["adversary"] == "sign-flip"
    assert adversary.options.labels["defence"] is None and adversary.strategy.defence is None
    assert honest.honest and type(honest.adversary) is Adversary  # every hook honest
    assert honest.options.labels["adversary"] is None
    assert honest.options.labels["defence"] == "multi-krum:f=1"
    assert isinstance(honest.strategy.defence, MultiKrumSelection)


def test_an_adversary_that_cannot_poison_this_trainers_data_stops_the_setup(built):
    with pytest.raises(launch.WorkerSetupError, match="--adversary backdoor:target=12: .*classes"):
        built(adversary="backdoor:target=12")
