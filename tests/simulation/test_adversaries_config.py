"""``SimulationConfig.adversaries`` and ``defence``: which trainers misbehave, and what
each worker is told."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from rich.console import Console

from mcfl_chain.adversaries import AdversarySpec, assign_adversaries
from mcfl_chain.chain._tx import dev_account
from mcfl_chain.simulation import runner
from mcfl_chain.simulation.runner import Network, SimulationConfig, SimulationError


def _config(**overrides) -> SimulationConfig:
    base = dict(name="adv", dataset="digits", scenario="iid", n_trainers=8, samples=300, seed=3)
    base.update(overrides)
    return SimulationConfig(**base)


def test_adversaries_are_drawn_from_the_seed_and_honest_trainers_get_the_defence():
    # Prepare: 0.25 of 8 trainers -> 2 sign flippers.
    config = _config(adversaries="sign-flip:0.25:scale=10", defence="multi-krum:f=1")

    # Execute
    config.validate()
    workers = {i: config.trainer_config(i) for i in config.trainer_indices()}

    # Assert
    bad = sorted(assign_adversaries("sign-flip:0.25:scale=10", 8, seed=3))
    assert len(bad) == 2 and config.adversary_assignment() == {
        i: AdversarySpec("sign-flip", (("scale", 10),)) for i in bad
    }
    for index, worker in workers.items():
        if index in bad:
            assert (worker.adversary, worker.defence) == ("sign-flip:scale=10", None)
        else:
            assert (worker.adversary, worker.defence) == (None, "multi-krum:f=1")


def test_without_adversaries_every_trainer_is_honest():
    config = _config(defence="krum")
    assert config.adversary_assignment() == {}
    assert {config.trainer_config(i).defence for i in range(8)} == {"krum"}
    assert _config().trainer_config(0).adversary is None


def test_concentrated_adversaries_sit_in_one_data_group_of_the_scenario(tmp_path):
    # Prepare: the groups scenario, 12 trainers in 3 class groups of 4 (i mod 3), from a
    # scenario file as a campaign names it.
    path = tmp_path / "s.toml"
    path.write_text(
        'name = "s"\ndataset = "digits"\nscenario = "groups"\nn_trainers = 12\n'
        'adversaries = "filter-aware:0.2"\nplacement = "concentrated"\nseed = 4\n'
    )
    config = SimulationConfig.load_file(path)

    # Execute
    config.validate()
    seats = config.adversary_assignment()
    groups = [spec.group for spec in config.data_specs()]

    # Assert: both adversaries in the classes-0-3 group (the group of trainer 0), where
    # random placement with this seed spreads them over two groups
    assert len(seats) == 2 and {groups[i] for i in seats} == {groups[0]}
    spread = SimulationConfig.load_file(path)
    spread.placement = "random"
    assert len({groups[i] for i in spread.adversary_assignment()}) == 2


def test_a_scenario_file_names_adversaries_and_a_defence(tmp_path):
    path = tmp_path / "s.toml"
    path.write_text(
        'name = "s"\nn_trainers = 4\nadversaries = "label-flip:0.25"\ndefence = "krum"\n'
    )
    config = SimulationConfig.load_file(path)
    assert (config.adversaries, config.defence) == ("label-flip:0.25", "krum")
    assert len(config.adversary_assignment()) == 1


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"adversaries": "label-flip:0.6,backdoor:0.5"}, "adversaries: adversary shares add up"),
        ({"adversaries": "label-flip"}, "adversaries: .*needs one share"),
        ({"defence": "fedavg"}, "defence: 'fedavg' is no defence but a network's own"),
        ({"placement": "clustered"}, "placement must be one of random, concentrated"),
    ],
)
def test_wrong_adversaries_or_defences_are_refused_before_anything_starts(overrides, message):
    with pytest.raises(SimulationError, match=f"scenario 'adv': {message}"):
        _config(**overrides).validate()


def test_sybils_are_told_their_coalition_and_honest_trainers_the_defence(monkeypatch, tmp_path):
    # Prepare: a network whose services are faked; the process starter records the
    # workers' arguments (`mcfl_chain worker ...`).
    started: list[list[str]] = []

    def start_module(module, args, **kwargs):
        assert module == "mcfl_chain" and args[0] == "worker"
        started.append(list(args))
        return SimpleNamespace(poll=lambda: 0)

    monkeypatch.setattr(runner, "start_module", start_module)
    config = _config(n_trainers=6, adversaries="sybil:0.34:payload=label-flip", defence="krum")
    network = Network(config, tmp_path, Console(quiet=True))
    network.deployment = SimpleNamespace(rpc_url="http://127.0.0.1:1")  # type: ignore[assignment]
    network.storage_spec = "local:/nowhere"

    # Execute
    network.spawn_workers()

    # Assert: two Sybils, each knowing both accounts; the others honest with the defence.
    sybils = sorted(config.adversary_assignment())
    coalition = "+".join(str(dev_account(i + 1).address) for i in sybils)
    assert len(started) == 6
    for index, command in enumerate(started):
        args = dict(zip(command[1::2], command[2::2], strict=True))
        if index in sybils:
            assert args["--adversary"] == f"sybil:coalition={coalition}:payload=label-flip"
            assert "--defence" not in args
        else:
            assert "--adversary" not in args and args["--defence"] == "krum"
