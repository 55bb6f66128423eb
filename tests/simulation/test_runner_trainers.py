"""``SimulationConfig.trainers``: a run of some of a scenario's trainers, same data shares."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from rich.console import Console

from mcfl_chain.simulation import runner
from mcfl_chain.simulation.engines.process import ProcessEngine
from mcfl_chain.simulation.runner import Network, SimulationConfig, SimulationError


def _config(**overrides) -> SimulationConfig:
    base = dict(name="part", dataset="digits", scenario="groups", n_trainers=6, samples=300)
    base.update(overrides)
    return SimulationConfig(**base)


def test_every_trainer_runs_when_none_are_named():
    assert _config().trainer_indices() == [0, 1, 2, 3, 4, 5]


def test_named_trainers_keep_their_scenario_index_and_share():
    # Prepare
    config = _config(trainers=[4, 1])

    # Execute
    config.validate()
    workers = [config.trainer_config(i) for i in config.trainer_indices()]

    # Assert: the data share is decided by (n_trainers, trainer_index) as in the full run.
    assert [(w.trainer_index, w.n_trainers) for w in workers] == [(4, 6), (1, 6)]
    assert workers[0] == _config().trainer_config(4)


def test_trainers_from_a_scenario_file(tmp_path):
    path = tmp_path / "s.toml"
    path.write_text('name = "s"\nn_trainers = 4\ntrainers = [0, 2]\n')
    assert SimulationConfig.load_file(path).trainer_indices() == [0, 2]


@pytest.mark.parametrize(
    ("trainers", "message"),
    [
        ([], "trainers must be a non-empty list of trainer indices"),
        (3, "trainers must be a non-empty list of trainer indices"),
        ([0, "1"], "trainers: '1' is not a trainer index"),
        ([0, True], "trainers: True is not a trainer index"),
        ([0, 6, -1], "trainers: 6, -1 outside 0..5 \\(the scenario has n_trainers = 6\\)"),
        ([2, 0, 2], "trainers: 2 given more than once"),
    ],
)
def test_wrong_trainer_lists_are_refused_naming_the_value(trainers, message):
    with pytest.raises(SimulationError, match=f"scenario 'part': {message}"):
        _config(trainers=trainers).validate()


def test_the_network_starts_one_worker_per_named_trainer(monkeypatch, tmp_path):
    # Prepare: a network whose services are faked; the process starter records the
    # workers' arguments (`mcfl_chain worker ...`).
    started: list[list[str]] = []

    def start_module(module, args, **kwargs):
        assert module == "mcfl_chain" and args[0] == "worker"
        started.append(list(args))
        return SimpleNamespace(poll=lambda: 0)

    monkeypatch.setattr(runner, "start_module", start_module)
    network = Network(_config(trainers=[5, 2]), tmp_path, Console(quiet=True))
    network.deployment = SimpleNamespace(rpc_url="http://127.0.0.1:1")  # type: ignore[assignment]
    network.storage_spec = "local:/nowhere"

    # Execute
    network.spawn_workers({2: ["--epochs", "9"]})

    # Assert: trainer index, account and metrics file follow the scenario's index.
    def flag(command, name):
        return command[command.index(name) + 1]

    assert [flag(c, "--trainer-index") for c in started] == ["5", "2"]
    assert [flag(c, "--n-trainers") for c in started] == ["6", "6"]
    assert [flag(c, "--account-index") for c in started] == ["6", "3"]
    assert [flag(c, "--metrics") for c in started] == [
        str(tmp_path / "trainers" / "005" / "metrics.jsonl"),
        str(tmp_path / "trainers" / "002" / "metrics.jsonl"),
    ]
    assert started[1][-2:] == ["--epochs", "9"] and "--epochs" not in started[0][-2:]
    index, log = ProcessEngine().log_of(network, 1)
    assert (index, log) == (2, tmp_path / "trainers" / "002" / "worker.log")
