"""The declared tuning stage takes the optimiser sweep's finished run at the chosen point
instead of making it twice (``sweep.reusable_runs``, ``experiment.reuse_run``), only when
the two configurations are equal field by field but for the name, and says so in the
copy's summary; on run directories written here (no simulation)."""

from __future__ import annotations

import datetime
import json
from dataclasses import asdict, replace
from pathlib import Path

import pytest
from click.testing import CliRunner

from mcfl_chain.simulation import campaign, experiment, protocol, results_report, sweep
from mcfl_chain.simulation.runner import SimulationConfig

SMALL = dict(dataset="digits", scenario="iid", n_trainers=3, rounds=2, samples=300)
SCENARIO = (
    'name = "a"\ndataset = "digits"\nscenario = "iid"\nn_trainers = 3\nrounds = 2\nsamples = 300\n'
)
GRID = """
[sweep]
[[sweep.points]]
name = "sgd-0.05"
settings = { optimiser = "sgd", lr = 0.05 }

[[sweep.points]]
name = "adam-steplr"
settings = { optimiser = "adam-steplr" }
"""
# Each method's best point, and the test accuracy its runs reach there and elsewhere: at
# the chosen points local training beats FedAvg, at the others FedAvg beats local, so a
# comparator chosen from runs of the wrong point would come out FedAvg.
BEST = {"mcfl": "sgd-0.05", "fedavg": "sgd-0.05", "local": "adam-steplr"}
ACCURACY = {("fedavg", True): 0.6, ("local", True): 0.8, ("fedavg", False): 0.9}


def write_sweep(plan: experiment.Plan[sweep.SweepRun], folder: Path, run_writer) -> None:
    """Every run of the sweep's ``plan``, finished in ``folder``: the method's best point
    (:data:`BEST`) scores higher on validation, the test accuracy is :data:`ACCURACY`."""
    for run in plan.runs:
        chosen = run.point == BEST[run.method]
        validation = 0.8 if chosen else 0.6
        level = ACCURACY.get((run.method, chosen), 0.7)
        run_writer(
            folder / run.name,
            run.config,
            lambda i, r, level=level: level,
            extra=lambda i, r, v=validation: {
                "aggregations": [{"model": "0xm", "selection_metric": v, "accuracy": v}]
            },
        )


@pytest.fixture
def staged(tmp_path, run_writer, protocol_text):
    """The sweep of one declared scenario finished in ``<tmp>/sweep``, its choices made
    and the tuning stage planned with them, on the sweep's engine and device."""
    declaration = protocol.parse_protocol(protocol_text(["a"]))
    configs = [SimulationConfig(name="a", **SMALL)]
    grid = sweep.parse_grid(GRID)
    plan = sweep.sweep_plan(declaration, grid, configs, check=False)
    folder = tmp_path / "sweep"
    write_sweep(plan, folder, run_writer)
    choices = sweep.sweep_choices(declaration, grid, plan, sweep.sweep_figures(plan, [folder]))
    tuned = sweep.parse_tuned(sweep.tuned_text(grid, choices))
    tuning = protocol.declared_plan(declaration, configs, "tuning", check=False, tuned=tuned)
    runs = [
        replace(r, config=replace(r.config, engine="batched", device="cpu")) for r in tuning.runs
    ]
    return declaration, configs, grid, folder, runs


def test_equal_configurations_but_the_name_are_the_same_run():
    planned = SimulationConfig(name="a-local-s0", **SMALL)
    recorded = json.loads(json.dumps(asdict(replace(planned, name="a-local-sgd-0.05-s0"))))

    assert experiment.same_run_differences(recorded, planned) == []
    assert experiment.same_run_differences({**recorded, "lr": 0.01}, planned) == [
        "lr=0.01 (planned 0.05)"
    ]
    # A field added since the run was made: equal while the plan leaves it at its
    # default (the behaviour the run had), a difference once the plan sets it.
    del recorded["hosts"]
    assert experiment.added_since(recorded, planned) == ["hosts"]
    assert experiment.same_run_differences(recorded, planned) == []
    assert experiment.same_run_differences(recorded, replace(planned, hosts=2)) == [
        "hosts='(absent)' (planned 2)"
    ]
    # A field the plan no longer knows is a difference.
    assert experiment.same_run_differences({**recorded, "old": 1}, planned) == [
        "old=1 (planned '(absent)')"
    ]


def test_each_tuning_run_is_the_sweep_run_at_its_methods_chosen_point(staged):
    _, _, grid, folder, runs = staged

    found = sweep.reusable_runs(runs, grid, [folder / "none", folder])

    assert len(runs) == 6  # MCFL, FedAvg and local training on the tuning seeds 0 and 1
    assert found == {r.name: folder / f"a-{r.method}-{BEST[r.method]}-s{r.seed}" for r in runs}


def test_a_differing_field_or_an_unfinished_sweep_run_is_not_reused(staged):
    _, _, grid, folder, runs = staged
    by_name = {r.name: r for r in runs}
    # The sweep's local run at seed 0 was made with other rounds; FedAvg's at seed 1 did
    # not finish; every tuning run at seed 1 is planned on another device.
    path = folder / "a-local-adam-steplr-s0" / "config.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "rounds": 3}))
    (folder / "a-fedavg-sgd-0.05-s1" / "summary.json").unlink()
    on_cuda = replace(by_name["a-mcfl-s1"].config, device="cuda")

    found = sweep.reusable_runs(
        [*runs, replace(by_name["a-mcfl-s1"], name="cuda", config=on_cuda)], grid, [folder]
    )

    assert sorted(found) == ["a-fedavg-s0", "a-local-s1", "a-mcfl-s0", "a-mcfl-s1"]


def test_the_reused_record_names_the_sweep_run_and_the_comparator_is_chosen_from_it(
    staged, tmp_path
):
    declaration, configs, grid, folder, runs = staged
    out, records = tmp_path / "out", campaign.records(tmp_path / "records")
    (out / "a-local-s0").mkdir(parents=True)  # an interrupted run: replaced

    by_name = {r.name: r for r in runs}
    for run_name, source in sweep.reusable_runs(runs, grid, [folder]).items():
        origin = sweep.reuse_origin(source, by_name[run_name])
        experiment.reuse_run(source, out / run_name, run_name, origin)
        records.keep(run_name, out / run_name)

    kept = tmp_path / "records" / "a-local-s0"
    origin = json.loads((kept / "summary.json").read_text())[experiment.REUSED_FROM]
    assert origin["run"] == "a-local-adam-steplr-s0" and origin["stage"] == "sweep"
    assert origin["added_since"] == []
    assert json.loads((kept / "config.json").read_text())["name"] == "a-local-s0"
    assert not list(out.glob("*.reusing"))
    # The copies are the planned runs: resuming refuses none of them.
    experiment.refuse_other_options(runs, out, "")
    for source in (out, tmp_path / "records"):
        loaded = results_report.load_runs(source)
        figures = {key: results_report.figures_of(seeds) for key, seeds in loaded.items()}
        choice = protocol.scenario_choices(declaration, configs, figures)["a"]
        assert choice.method == "local"
        assert choice.means == pytest.approx({"fedavg": 0.6, "local": 0.8})


def test_a_reused_run_needs_its_origin_and_a_complete_source(staged, tmp_path):
    _, _, _, folder, _ = staged
    source = folder / "a-local-adam-steplr-s0"

    with pytest.raises(experiment.ExperimentError, match="must name the run"):
        experiment.reuse_run(source, tmp_path / "a-local-s0", "a-local-s0", {})
    (source / "metrics.jsonl").unlink()
    with pytest.raises(experiment.ExperimentError, match="it has no metrics.jsonl"):
        experiment.reuse_run(source, tmp_path / "a-local-s0", "a-local-s0", {"run": "x"})
    assert not (tmp_path / "a-local-s0").exists()


def test_declared_tuning_lists_then_copies_the_sweeps_runs(
    load_script, tmp_path, run_writer, protocol_text
):
    script = load_script("run_experiments")
    scenarios = tmp_path / "scenarios"
    scenarios.mkdir()
    (scenarios / "a.toml").write_text(SCENARIO)
    (tmp_path / "protocol.toml").write_text(protocol_text(["a"]))
    (tmp_path / "sweep.toml").write_text(GRID)
    files = ["--scenarios", str(scenarios), "--protocol", str(tmp_path / "protocol.toml")]
    files += ["--tuned", str(tmp_path / "tuned.toml"), "--sweep-grid", str(tmp_path / "sweep.toml")]
    declaration = protocol.parse_protocol(protocol_text(["a"]))
    plan = sweep.sweep_plan(
        declaration, sweep.parse_grid(GRID), campaign.load_scenarios(scenarios), check=False
    )
    # The sweep's records only (a fresh clone), where --declared sweep keeps them; one
    # made before the option `hosts` existed.
    write_sweep(plan, tmp_path / "r" / "sweep", run_writer)
    path = tmp_path / "r" / "sweep" / "a-fedavg-sgd-0.05-s1" / "config.json"
    path.write_text(
        json.dumps({k: v for k, v in json.loads(path.read_text()).items() if k != "hosts"})
    )
    folders = ["--out", str(tmp_path / "o"), "--records", str(tmp_path / "r")]
    sweep.write_tuned(  # what --declared sweep writes once its runs are done
        tmp_path / "tuned.toml",
        sweep.tuned_text(
            sweep.parse_grid(GRID),
            sweep.sweep_choices(
                declaration,
                sweep.parse_grid(GRID),
                plan,
                sweep.sweep_figures(plan, [tmp_path / "r" / "sweep"]),
            ),
        ),
    )
    tuning = ["--declared", "tuning", *files, *folders]

    before = CliRunner().invoke(script.main, [*tuning, "--list"])
    made = CliRunner().invoke(script.main, tuning)
    after = CliRunner().invoke(script.main, [*tuning, "--list"])

    assert before.exit_code == 0, before.output
    assert "reuse    a-local-s1  (copied from the sweep run" in before.output
    assert "6 pending (6 to reuse from the sweep)" in before.output
    assert made.exit_code == 0, made.output
    assert "a-mcfl-s0: reused the sweep run" in made.output
    assert "0 to run" in made.output
    assert "reused   a-local-s1  (the sweep run a-local-adam-steplr-s1)" in after.output
    assert "6 done (6 reused from the sweep)" in after.output
    summary = json.loads((tmp_path / "r" / "a-fedavg-s1" / "summary.json").read_text())
    assert summary[experiment.REUSED_FROM]["run"] == "a-fedavg-sgd-0.05-s1"
    assert summary[experiment.REUSED_FROM]["added_since"] == ["hosts"]
    declared = results_report.load_runs(tmp_path / "o")
    configs = campaign.load_scenarios(scenarios)
    rows = results_report.declared_synthesis(declaration, declared, configs)
    report = results_report.synthesis_section(declaration, declared, configs, rows)
    assert "6 of these runs are the optimiser sweep's runs at the chosen point" in " ".join(report)


def test_declared_only_and_until_slice_a_stage_without_changing_it(
    load_script, tmp_path, monkeypatch, run_writer, protocol_text
):
    # Prepare: two declared scenarios; a run "takes" two hours.
    script = load_script("run_experiments")
    scenarios = tmp_path / "scenarios"
    scenarios.mkdir()
    for name in ("a", "b"):
        (scenarios / f"{name}.toml").write_text(SCENARIO.replace('"a"', f'"{name}"'))
    (tmp_path / "protocol.toml").write_text(protocol_text(["a", "b"]))
    (tmp_path / "sweep.toml").write_text(GRID)
    made: list[str] = []

    def fake_simulation(config, run_dir, console):
        made.append(run_dir.name)
        return run_writer(run_dir, config, lambda i, r: 0.7, seconds=7200.0)

    monkeypatch.setattr(experiment, "run_simulation", fake_simulation)
    args = ["--declared", "sweep", "--scenarios", str(scenarios), "--out", str(tmp_path / "o")]
    args += ["--records", str(tmp_path / "r"), "--protocol", str(tmp_path / "protocol.toml")]
    args += ["--sweep-grid", str(tmp_path / "sweep.toml"), "--tuned", str(tmp_path / "t.toml")]
    in_90_min = (datetime.datetime.now() + datetime.timedelta(minutes=90)).strftime(
        "%Y-%m-%d %H:%M"
    )

    # Execute
    listed = CliRunner().invoke(script.main, [*args, "--only", "b", "--list"])
    ran = CliRunner().invoke(script.main, [*args, "--only", "b", "--until", in_90_min])
    stranger = CliRunner().invoke(script.main, [*args, "--only", "c", "--list"])
    past = CliRunner().invoke(script.main, [*args, "--until", "2020-01-01 00:00"])

    # Assert: b's 12 runs only; the first is made (no estimate yet), the second would end
    # after the deadline, so the stage stops there and the same command resumes it.
    assert listed.exit_code == 0, listed.output
    assert "b-mcfl-sgd-0.05-s0" in listed.output and "a-mcfl" not in listed.output
    assert "12 sweep runs planned" in listed.output and "12 of them on b" in listed.output
    assert ran.exit_code == 0, ran.output
    assert made == ["b-mcfl-sgd-0.05-s0"]
    assert "stopping before b-mcfl-adam-steplr-s0: about 2 h 00 min" in ran.output
    assert "11 runs left, run the same command again to resume" in ran.output
    assert "sweep finished" not in ran.output
    assert stranger.exit_code == 2 and "--only c: no scenario of --declared sweep" in (
        stranger.output
    )
    assert past.exit_code == 2 and "is already past" in past.output


def test_until_names_the_next_such_time_or_a_full_date():
    now = datetime.datetime(2026, 11, 29, 23, 0)

    assert experiment.parse_until("02:00", now) == datetime.datetime(2026, 11, 30, 2, 0)
    assert experiment.parse_until("23:30", now) == datetime.datetime(2026, 11, 29, 23, 30)
    assert experiment.parse_until("2026-12-01 08:15", now) == datetime.datetime(2026, 12, 1, 8, 15)
    with pytest.raises(ValueError, match="already past"):
        experiment.parse_until("2026-11-29T22:00", now)
    with pytest.raises(ValueError, match="not a time"):
        experiment.parse_until("soon", now)
