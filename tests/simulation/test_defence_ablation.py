"""The ablation of the declared defence (``mcfl_chain/simulation/defence_ablation.py``,
``scripts/bench_adversaries.py --matrix ablation``) on hand-written files and records: no
network is run."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from mcfl_chain.simulation import adversarial
from mcfl_chain.simulation import attack_benchmark as ab
from mcfl_chain.simulation import defence_ablation as da
from mcfl_chain.simulation import defence_benchmark as db
from mcfl_chain.simulation.experiment import ExperimentError

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = ROOT / "scenarios" / "paper"
BASE = """
defence = "mcfl-plus"
tolerance = 1.0
comparator = "local"
scenarios = ["groups"]
rounds = 3
samples = 200
seeds = [210, 211]
attacks = ["label-flip", "sybil"]
engine = "batched"
device = "cpu"
[[block]]
share = 0.2
placement = "concentrated"
[headline]
share = 0.2
placement = "concentrated"
"""
ABLATION = """
base = "base.toml"
seeds = [210]
[[variant]]
name = "no-agreement"
options = { plus_agreement = "off" }
[[variant]]
name = "no-robust"
options = { plus_robust = "off" }
[[condition]]
attack = "clean"
[[condition]]
attack = "label-flip"
share = 0.2
placement = "concentrated"
"""


def _files(folder: Path, ablation: str = ABLATION) -> Path:
    (folder / "base.toml").write_text(BASE)
    (folder / "ablation.toml").write_text(ablation)
    return folder / "ablation.toml"


def _honest(accuracies: dict[int, float]) -> ab.Record:
    return ab.Record(adversarial.HonestFinal(2, accuracies))


def test_the_committed_ablation_switches_off_each_mechanism_of_the_declared_defence():
    # Execute
    ablation = da.Ablation.load(ROOT / da.ABLATION)

    # Assert: its base is the second declaration (MCFL-plus with its defaults; the third
    # adds the direction check, which this ablation predates), every mechanism on in it
    # is switched off by one variant, and the first condition is clean
    assert ablation.base_path.name == "defence-v2.toml"
    assert ablation.base_path.name in {path.name for path in db.DECLARATIONS}
    switched = {name for variant in ablation.variants for name in variant.options}
    assert switched == {
        "plus_guard",
        "plus_trained_guard",
        "plus_own_update",
        "plus_agreement",
        "plus_history",
        "plus_robust",
    }
    assert all(len(variant.options) == 1 for variant in ablation.variants)
    assert ablation.conditions[0] == da.Condition("clean", None)


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ("seeds = [210]", "seeds = [7]", "seeds must be some of the base declaration's"),
        ('plus_robust = "off"', 'plus_robust = "mean"', "variant 'no-robust'"),
        ('plus_robust = "off"', 'plus_teleport = "on"', "variant 'no-robust'"),
        ('"label-flip"', '"backdoor"', "'backdoor, 20 % concentrated' is not in the base"),
        ('base = "base.toml"', 'base = "nowhere.toml"', "cannot read the declaration"),
        ('name = "no-robust"', 'name = "no-agreement"', "give each [[variant]] once"),
    ],
)
def test_a_refused_ablation_names_what_to_change(tmp_path, old, new, message):
    # Prepare
    path = _files(tmp_path, ABLATION.replace(old, new))

    # Execute / Assert
    with pytest.raises(ExperimentError, match=message.replace("[", r"\[")):
        da.Ablation.load(path)


def test_the_plan_runs_each_variant_clean_and_attacked_on_the_bases_configuration(tmp_path):
    # Prepare
    ablation = da.Ablation.load(_files(tmp_path))

    # Execute
    runs = da.plan(ablation, SCENARIOS)
    bases = da.base_runs(ablation, SCENARIOS)

    # Assert: the variant's option alone differs from the base's run of the same seed
    assert [run.name for run in runs] == [
        "groups-mcfl-plus-no-agreement-clean-s210",
        "groups-mcfl-plus-no-robust-clean-s210",
        "groups-mcfl-plus-no-agreement-label-flip0.2-concentrated-s210",
        "groups-mcfl-plus-no-robust-label-flip0.2-concentrated-s210",
    ]
    assert [run.name for run in bases] == [
        "groups-mcfl-plus-clean-s210",
        "groups-local-clean-s210",
        "groups-mcfl-plus-label-flip0.2-concentrated-s210",
    ]
    assert {run.config.strategy for run in runs} == {"mcfl-plus"}
    assert runs[0].config.plus_agreement == "off" and runs[0].config.adversaries is None
    base = bases[2].config
    variant = runs[3].config
    assert (variant.name, variant.plus_robust, base.plus_robust) == (
        runs[3].name,
        "off",
        "trimmed-mean",
    )
    assert {**vars(variant), "name": "", "plus_robust": ""} == {
        **vars(base),
        "name": "",
        "plus_robust": "",
    }


def test_the_table_pairs_each_variant_with_the_full_defence_by_seed(tmp_path):
    # Prepare: the full defence keeps trainer 1 at 80 % under label flipping; without the
    # robust rule it falls to 50 %, and its own clean run had it at 85 %
    ablation = da.Ablation.load(_files(tmp_path))
    runs, bases = da.plan(ablation, SCENARIOS), da.base_runs(ablation, SCENARIOS)
    found = {
        "groups-mcfl-plus-clean-s210": _honest({0: 0.9, 1: 0.85, 2: 0.9}),
        "groups-local-clean-s210": _honest({0: 0.6, 1: 0.5, 2: 0.7}),
        "groups-mcfl-plus-label-flip0.2-concentrated-s210": _honest({0: 0.9, 1: 0.8}),
        "groups-mcfl-plus-no-robust-clean-s210": _honest({0: 0.9, 1: 0.85, 2: 0.9}),
        "groups-mcfl-plus-no-robust-label-flip0.2-concentrated-s210": _honest({0: 0.9, 1: 0.5}),
    }

    # Execute
    lines = da.table(ablation, runs, bases, found)

    # Assert: worst 50 % is 30 points below the full defence's 80 %, and 35 below the
    # variant's own clean run; the variant without runs says 0 of 1 seeds
    assert "| label-flip, 20 % concentrated | MCFL-plus (all on) | 1 | 80.0 | 85.0 |  |  |" in (
        "\n".join(lines)
    )
    assert (
        "| label-flip, 20 % concentrated | no-robust | 1 | 50.0 | 70.0 | -30.0 | -15.0 | +35.0 |"
        in "\n".join(lines)
    )
    assert "| clean | no-agreement | 0 of 1 | – | – | – | – | – |" in "\n".join(lines)
    assert "2 of 4 ablation runs finished" in lines[-1]


def test_the_script_lists_and_reports_the_ablation_and_refuses_other_options(load_script, tmp_path):
    # Prepare
    path = _files(tmp_path)
    script = load_script("bench_adversaries").main
    common = ["--matrix", "ablation", "--ablation", str(path), "--out", str(tmp_path / "runs")]
    common += ["--records", str(tmp_path / "records"), "--table", str(tmp_path / "a.md")]

    # Execute
    listed = CliRunner().invoke(script, [*common, "--list"])
    reported = CliRunner().invoke(script, [*common, "--report-only"])
    refused = CliRunner().invoke(script, [*common, "--device", "cuda", "--list"])

    # Assert
    assert listed.exit_code == 0, listed.output
    assert "pending  groups-mcfl-plus-no-robust-clean-s210" in listed.output
    assert "4 ablation runs" in listed.output
    assert reported.exit_code == 0, reported.output
    assert reported.output.splitlines()[-1] == "MCFL-plus ablation: 0 of 4 runs finished"
    assert "| clean | no-robust | 0 of 1 |" in (tmp_path / "a.md").read_text()
    assert refused.exit_code == 2 and "--engine and --device only apply" in refused.output
