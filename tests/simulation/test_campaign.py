"""The experiment campaign: its plan, resuming, the oracle's parts merged into one run."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner
from rich.console import Console

from mcfl_chain.simulation import campaign
from mcfl_chain.simulation.runner import SimulationConfig

PAPER = Path(__file__).resolve().parents[2] / "scenarios" / "paper"


@pytest.fixture(scope="module")
def paper():
    return campaign.load_scenarios(PAPER)


def _scenario(**overrides) -> SimulationConfig:
    base = dict(
        name="groups",
        dataset="digits",
        scenario="groups",
        scenario_params={"n_groups": 2},
        n_trainers=4,
        rounds=2,
        samples=300,
    )
    base.update(overrides)
    return SimulationConfig(**base)


def test_the_default_campaign_runs_every_scenario_method_and_seed(paper):
    # Execute
    plan = campaign.plan(paper)
    no_ablation = campaign.plan(paper, ablation=False)

    # Assert: 15 MCFL files, 11 shared baselines × (fedavg, local, ifca), 7 oracles
    # (groups, two-datasets, the two autoencoder stems, the three rotation ratios),
    # 3 × 4 ablations; all × 3 seeds.
    assert len(no_ablation.runs) == 3 * (15 + 11 * 3 + 7)
    assert len(plan.runs) == len(no_ablation.runs) + 3 * 12
    names = [r.name for r in plan.runs]
    assert len(set(names)) == len(names)
    assert [r.seed for r in plan.runs] == sorted(r.seed for r in plan.runs)
    assert "gaussian-fedavg-s0" in names and "gaussian-tol2-fedavg-s0" not in names
    assert "autoencoders-mcfl-v1-s2" in names and "iid-mcfl-v1-s0" not in names
    assert not any(
        n.startswith(("iid-oracle", "gaussian-oracle", "dirichlet")) and "oracle" in n
        for n in names
    )
    assert any("gaussian" in note and "one trainer per data group" in note for note in plan.notes)
    assert "rotation-30-2-oracle-s0" in names
    ifca = next(r for r in plan.runs if r.name == "rotation-24-8-ifca-s0")
    assert ifca.config.clusters == 2


def test_methods_are_configured_on_the_same_data(paper):
    # Prepare
    runs = {r.name: r for r in campaign.plan(paper, seeds=[1]).runs}

    # Assert: the scenario file as written, seed replaced
    mcfl = runs["gaussian-tol3-mcfl-s1"].config
    assert (mcfl.strategy, mcfl.tolerance, mcfl.seed, mcfl.name) == (
        "mcfl",
        3.0,
        1,
        "gaussian-tol3-mcfl-s1",
    )
    # baselines reset the MCFL-only options (so tolerance variants share them)
    fedavg = runs["gaussian-fedavg-s1"].config
    assert (fedavg.strategy, fedavg.tolerance, fedavg.n_trainers, fedavg.samples) == (
        "fedavg",
        1.0,
        10,
        1500,
    )
    # IFCA's k: the groups the scenario declares, 3 where it declares none
    assert runs["groups-ifca-s1"].config.clusters == 3  # n_groups
    assert runs["two-datasets-ifca-s1"].config.clusters == 2  # two datasets
    assert runs["autoencoders-ifca-s1"].config.clusters == 2
    assert runs["iid-ifca-s1"].config.clusters == 1  # one distribution
    assert runs["gaussian-ifca-s1"].config.clusters == 3  # a mean class per trainer
    assert runs["dirichlet-0.1-ifca-s1"].config.clusters == 3
    assert runs["iid-local-s1"].config.strategy == "local"
    # ablations toggle one option each, v1 all three
    shared = runs["groups-mcfl-shared-s1"].config
    assert (shared.start, shared.aggregate_on, shared.selection) == ("shared", "best", "percentile")
    v1 = runs["autoencoders-mcfl-v1-s1"].config
    assert (v1.start, v1.aggregate_on, v1.selection, v1.tolerance) == ("shared", "all", "ceil", 3.0)
    assert runs["groups-mcfl-ceil-s1"].config.selection == "ceil"
    assert runs["groups-mcfl-all-s1"].config.aggregate_on == "all"


def test_a_method_is_added_by_one_registry_entry(paper, monkeypatch):
    # Prepare: FedAvg at a tenth of the learning rate, a baseline run only when named,
    # and a method limited to one scenario file that has no run where its data is IID
    def tenth(config):
        if config.scenario == "iid":
            raise campaign.NotApplicable("IID data has nothing to cluster")
        return replace(campaign.baseline(config, "fedavg"), lr=config.lr / 10)

    monkeypatch.setitem(
        campaign.CAMPAIGN_METHODS,
        "fedavg-slow",
        campaign.Method("fedavg-slow", "FedAvg, lr / 10", tenth, default=False),
    )

    # Execute
    default = {r.method for r in campaign.plan(paper, seeds=[0]).runs}
    asked = campaign.plan(paper, seeds=[0], methods=["fedavg-slow"], only=["iid", "groups"])

    # Assert: planned only when named, filed under the baselines' stem, noted where it
    # does not apply
    assert "fedavg-slow" not in default
    assert [r.name for r in asked.runs] == ["groups-fedavg-slow-s0"]
    config = asked.runs[0].config
    assert (config.strategy, config.name) == ("fedavg", "groups-fedavg-slow-s0")
    assert config.lr == pytest.approx(0.005)
    assert asked.notes == ["iid: no FedAvg, lr / 10 run, IID data has nothing to cluster"]


def test_the_oracle_runs_fedavg_inside_each_true_group(paper):
    # Prepare
    run = next(r for r in campaign.plan(paper, seeds=[0]).runs if r.name == "groups-oracle-s0")

    # Execute
    parts = run.part_configs()

    # Assert: the groups of the scenario's data specs (trainer i in group i mod 3)
    assert run.parts == (
        ("classes 0-3", (0, 3, 6, 9)),
        ("classes 4-6", (1, 4, 7, 10)),
        ("classes 7-9", (2, 5, 8, 11)),
    )
    assert [name for name, _ in parts] == ["classes-0-3", "classes-4-6", "classes-7-9"]
    config = parts[1][1]
    assert (config.strategy, config.trainers, config.n_trainers) == ("fedavg", [1, 4, 7, 10], 12)
    assert config.name == "groups-oracle-s0-classes-4-6"


def test_filters_and_sizes(paper):
    # Execute
    plan = campaign.plan(
        paper, seeds=[4], methods=["fedavg", "mcfl-v1"], only=["gaussian", "groups"]
    )
    published = campaign.plan(paper, seeds=[0], only=["iid"], published=True)
    capped = campaign.plan(paper, seeds=[0], only=["iid"], published=True, max_rounds=50)

    # Assert
    assert [r.name for r in plan.runs] == [
        "gaussian-fedavg-s4",
        "groups-fedavg-s4",
        "groups-mcfl-v1-s4",
    ]
    config = published.runs[0].config
    assert (config.n_trainers, config.samples, config.rounds, config.name) == (
        38,
        None,
        30,
        "iid-mcfl-s0",
    )
    assert capped.runs[0].config.rounds == 50
    assert campaign.plan(paper, seeds=[0], only=["iid"], max_rounds=3).runs[0].config.rounds == 3
    assert not campaign.plan(paper, seeds=[0], methods=["mcfl-v1"], ablation=False).runs


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"methods": ["krum"]}, "unknown method 'krum'; known: mcfl, fedavg"),
        ({"only": ["gauss"]}, "no scenario named 'gauss'; known: autoencoders"),
        ({"seeds": []}, "give at least one seed"),
        ({"seeds": [0, 0]}, "seeds must be distinct and >= 0"),
        ({"max_rounds": 0}, "--max-rounds must be at least 1"),
    ],
)
def test_wrong_options_are_refused(paper, kwargs, message):
    with pytest.raises(campaign.CampaignError, match=message):
        campaign.plan(paper, **kwargs)


def test_scenarios_sharing_a_baseline_must_agree_on_its_data():
    # Prepare: two tolerance variants whose data differ
    scenarios = [_scenario(name="g-tol1"), _scenario(name="g-tol2", samples=400)]

    # Execute / Assert
    with pytest.raises(campaign.CampaignError, match="different runs named 'g-fedavg-s0'"):
        campaign.plan(scenarios, seeds=[0])


def test_a_run_that_cannot_start_is_refused_when_planning():
    with pytest.raises(campaign.CampaignError, match="run g-mcfl-s0: scenario 'g-mcfl-s0'"):
        campaign.plan([_scenario(name="g", epochs=0)], seeds=[0])


def test_load_scenarios_errors(tmp_path):
    with pytest.raises(campaign.CampaignError, match="no scenario file"):
        campaign.load_scenarios(tmp_path)
    (tmp_path / "a.toml").write_text('name = "x"\n')
    (tmp_path / "b.toml").write_text('name = "x"\n')
    with pytest.raises(campaign.CampaignError, match="two scenario files .* named 'x'"):
        campaign.load_scenarios(tmp_path)
    (tmp_path / "b.toml").write_text('name = "y"\nepoch = 2\n')
    with pytest.raises(campaign.CampaignError, match="unknown key 'epoch'"):
        campaign.load_scenarios(tmp_path)


def test_estimate_prefers_the_same_scenario_and_method():
    # Prepare
    config = _scenario()

    def run(scenario, method, seed):
        return campaign.PlannedRun(f"{scenario}-{method}-s{seed}", scenario, method, seed, config)

    finished = [
        (run("a", "mcfl", 0), 100.0),
        (run("b", "mcfl", 0), 300.0),
        (run("a", "fedavg", 0), 20.0),
    ]

    # Execute / Assert: a-mcfl 100, b-fedavg like fedavg 20, c-local like any (140)
    assert campaign.estimate_seconds([run("a", "mcfl", 1)], finished) == 100.0
    assert campaign.estimate_seconds(
        [run("a", "mcfl", 1), run("b", "fedavg", 1), run("c", "local", 1)], finished
    ) == pytest.approx(100 + 20 + 140)
    assert campaign.estimate_seconds([run("a", "mcfl", 1)], []) is None


def test_states_and_differences(tmp_path, run_writer):
    # Prepare
    config = _scenario()
    run_writer(tmp_path / "done", config, lambda i, r: 0.5)
    (tmp_path / "partial").mkdir()

    # Execute / Assert
    assert campaign.state_of(tmp_path / "done") == "done"
    assert campaign.state_of(tmp_path / "partial") == "partial"
    assert campaign.state_of(tmp_path / "none") == "pending"
    assert campaign.config_differences(tmp_path / "done", config) == []
    assert campaign.config_differences(tmp_path / "done", replace(config, rounds=9)) == [
        "rounds=2 (planned 9)"
    ]
    assert campaign.config_differences(tmp_path / "done", replace(config, device="cuda")) == []
    assert campaign.recorded_seconds(tmp_path / "done") == 60.0


def test_an_unfinished_oracle_keeps_its_finished_groups(tmp_path, run_writer):
    # Prepare
    run = campaign.PlannedRun(
        "g-oracle-s0",
        "g",
        "oracle",
        0,
        _scenario(strategy="fedavg"),
        (("a", (0, 2)), ("b", (1, 3))),
    )
    run_writer(tmp_path / "parts" / "a", _scenario(trainers=[0, 2]), lambda i, r: 0.5)
    (tmp_path / "parts" / "b").mkdir(parents=True)
    (tmp_path / "config.json").write_text("{}")

    # Execute
    campaign.clear_unfinished(run, tmp_path)

    # Assert
    assert [p.name for p in tmp_path.rglob("*") if p.parent == tmp_path] == ["parts"]
    assert [p.name for p in (tmp_path / "parts").iterdir()] == ["a"]


def test_the_oracle_runs_each_group_then_merges_them(tmp_path, monkeypatch, run_writer):
    # Prepare: run_simulation writes a fake run; group "a" finished before.
    config = _scenario(strategy="fedavg", name="g-oracle-s0")
    run = campaign.PlannedRun(
        "g-oracle-s0", "g", "oracle", 0, config, (("a", (0, 2)), ("b", (1, 3)))
    )
    started = []

    def fake_simulation(part_config, run_dir, console):
        started.append(part_config.trainers)
        return run_writer(run_dir, part_config, lambda i, r: 0.1 * i + 0.1 * r, seconds=10.0)

    monkeypatch.setattr(campaign, "run_simulation", fake_simulation)
    run_writer(
        tmp_path / "parts" / "a",
        replace(config, trainers=[0, 2]),
        lambda i, r: 0.1 * i + 0.1 * r,
        lambda i: "a",
        seconds=5.0,
    )

    # Execute
    summary = campaign.make_run(run, tmp_path, Console(quiet=True))

    # Assert: one run of trainers 0-3, models of the two chains kept apart
    assert started == [[1, 3]]
    lines = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [(x["round"], x["trainer_index"]) for x in lines] == [
        (r, i) for r in range(2) for i in range(4)
    ]
    assert {x["model"].split("/")[0] for x in lines} == {"a", "b"}
    assert {x["oracle_part"] for x in lines} == {"a", "b"}
    assert summary["seconds"] == 15.0
    assert [r["models"] for r in summary["rounds"]] == [4, 4]
    assert summary["final"]["metric_max"] == pytest.approx(0.4)
    assert summary["parts"]["b"]["trainers"] == [1, 3]
    assert json.loads((tmp_path / "config.json").read_text())["trainers"] is None
    assert (tmp_path / "rounds.csv").exists() and (tmp_path / "accuracy.png").exists()


def _iid_folder(tmp_path: Path) -> Path:
    """A scenarios folder holding one small IID scenario, ``iid``."""
    scenarios = tmp_path / "scenarios"
    scenarios.mkdir()
    (scenarios / "iid.toml").write_text(
        'name = "iid"\ndataset = "digits"\nscenario = "iid"\nn_trainers = 2\nsamples = 300\n'
    )
    return scenarios


def test_the_script_lists_resumes_and_refuses_runs_made_otherwise(
    tmp_path, monkeypatch, load_script, run_writer
):
    # Prepare: a one-scenario folder; make_run() writes a fake finished run.
    script = load_script("run_experiments")
    scenarios = _iid_folder(tmp_path)
    out = tmp_path / "out"
    made = []

    def fake_execute(run, run_dir, console):
        made.append(run.name)
        return run_writer(run_dir, run.config, lambda i, r: 0.5)

    monkeypatch.setattr(campaign, "make_run", fake_execute)
    args = ["--scenarios", str(scenarios), "--out", str(out), "--seeds", "0,1",
            "--records", str(tmp_path / "no-records")]  # fmt: skip
    run_writer(
        out / "iid-local-s0",
        campaign.plan(campaign.load_scenarios(scenarios), seeds=[0]).runs[2].config,
        lambda i, r: 0.5,
    )
    (out / "iid-mcfl-s1").mkdir(parents=True)
    (out / "iid-mcfl-s1" / "junk").write_text("x")

    # Execute
    listed = CliRunner().invoke(script.main, [*args, "--list"])
    ran = CliRunner().invoke(script.main, args)
    made_first, made[:] = list(made), []
    again = CliRunner().invoke(script.main, [*args, "--seeds", "2"])

    # Assert
    assert listed.exit_code == 0, listed.output
    assert "   3  done     iid-local-s0" in listed.output
    assert "   5  partial  iid-mcfl-s1" in listed.output
    assert "8 runs planned" in listed.output and "1 done, 1 partial, 6 pending" in listed.output
    assert "iid: no oracle run" in listed.output
    assert ran.exit_code == 0, ran.output
    assert made_first == [
        "iid-mcfl-s0",
        "iid-fedavg-s0",
        "iid-ifca-s0",
        "iid-mcfl-s1",
        "iid-fedavg-s1",
        "iid-local-s1",
        "iid-ifca-s1",
    ]
    assert not (out / "iid-mcfl-s1" / "junk").exists()
    assert "[7/7] iid-ifca-s1" in ran.output and "ETA" in ran.output
    assert again.exit_code == 0 and made == [
        "iid-mcfl-s2",
        "iid-fedavg-s2",
        "iid-local-s2",
        "iid-ifca-s2",
    ]
    (scenarios / "iid.toml").write_text(
        'name = "iid"\ndataset = "digits"\nscenario = "iid"\nn_trainers = 2\nsamples = 400\n'
    )
    changed = CliRunner().invoke(script.main, args)
    assert changed.exit_code == 1
    assert "was made with other options than planned: samples=300 (planned 400)" in changed.output


def test_runs_exported_here_are_made_elsewhere_from_the_file_alone(
    tmp_path, monkeypatch, load_script, run_writer
):
    # Prepare: the first two runs still to make, exported; then the scenarios folder gone,
    # as on a machine that cannot plan them.
    script = load_script("run_experiments")
    scenarios, plan_file = _iid_folder(tmp_path), tmp_path / "plan.json"
    made = []

    def fake_execute(run, run_dir, console):
        made.append((run.name, run.config.engine, run.config.samples))
        return run_writer(run_dir, run.config, lambda i, r: 0.5)

    monkeypatch.setattr(campaign, "make_run", fake_execute)
    common = ["--out", str(tmp_path / "out"), "--records", str(tmp_path / "records")]

    # Execute
    exported = CliRunner().invoke(
        script.main,
        ["--scenarios", str(scenarios), "--seeds", "0", "--first", "2", "--export",
         str(plan_file), *common],
    )  # fmt: skip
    made_on_export = list(made)
    shutil.rmtree(scenarios)
    from_file = ["--from", str(plan_file)]
    ran = CliRunner().invoke(script.main, [*from_file, "--engine", "batched", *common])
    refused = CliRunner().invoke(script.main, [*from_file, "--only", "iid"])
    broken = tmp_path / "broken.json"
    broken.write_text('[{"name": "x"}]')
    unreadable = CliRunner().invoke(script.main, ["--from", str(broken), *common])

    # Assert
    assert exported.exit_code == 0, exported.output
    assert "2 runs written" in exported.output and made_on_export == []
    assert ran.exit_code == 0, ran.output
    assert made == [("iid-mcfl-s0", "batched", 300), ("iid-fedavg-s0", "batched", 300)]
    assert (tmp_path / "records" / "iid-fedavg-s0" / "summary.json").exists()
    assert refused.exit_code == 2 and "--from makes the runs of its file" in refused.output
    assert unreadable.exit_code == 1 and "run 1: KeyError('config')" in unreadable.output


def test_a_fresh_clone_resumes_from_the_kept_records_made_with_the_planned_options(
    tmp_path, monkeypatch, load_script, run_writer
):
    # Prepare: kept records of two seed-0 runs, one made with the planned options and one
    # with other samples; no run directory yet.
    script = load_script("run_experiments")
    scenarios = _iid_folder(tmp_path)
    planned = {r.name: r for r in campaign.plan(campaign.load_scenarios(scenarios), seeds=[0]).runs}
    records, out = tmp_path / "records", tmp_path / "out"
    run_writer(records / "iid-fedavg-s0", planned["iid-fedavg-s0"].config, lambda i, r: 0.5)
    other = replace(planned["iid-local-s0"].config, samples=400)
    run_writer(records / "iid-local-s0", other, lambda i, r: 0.5)
    made = []
    monkeypatch.setattr(
        campaign,
        "make_run",
        lambda run, run_dir, console: (
            made.append(run.name) or run_writer(run_dir, run.config, lambda i, r: 0.5)
        ),
    )
    args = ["--scenarios", str(scenarios), "--out", str(out), "--seeds", "0"]

    # Execute
    ran = CliRunner().invoke(script.main, [*args, "--records", str(records)])

    # Assert: the matching record is copied back and counts as done; the other run, and
    # the runs without a record, are made
    assert ran.exit_code == 0, ran.output
    assert "1 finished runs restored from their records" in ran.output
    assert "4 runs planned in" in ran.output and "1 done before, 3 to run" in ran.output
    assert made == ["iid-mcfl-s0", "iid-local-s0", "iid-ifca-s0"]
    assert (out / "iid-fedavg-s0" / "summary.json").read_text() == (
        records / "iid-fedavg-s0" / "summary.json"
    ).read_text()
    # ... and each run made keeps its record at once, the stale one replaced
    for name in made:
        assert (records / name / "summary.json").read_text() == (
            out / name / "summary.json"
        ).read_text()
        assert (records / name / "metrics.jsonl").stat().st_size > 0
    kept = json.loads((records / "iid-local-s0" / "config.json").read_text())
    assert kept["samples"] == planned["iid-local-s0"].config.samples


def test_facade_runs_only_when_asked_for_with_k_the_true_groups(paper):
    # Execute
    default = {r.method for r in campaign.plan(paper, seeds=[0]).runs}
    asked = {r.name: r for r in campaign.plan(paper, seeds=[0], methods=["facade"]).runs}

    # Assert: k heads = the scenario's groups (2 rotations, 3 class groups)
    assert "facade" not in default
    assert asked["rotation-30-2-facade-s0"].config.strategy == "facade"
    assert asked["rotation-30-2-facade-s0"].config.clusters == 2
    assert asked["groups-facade-s0"].config.clusters == 3
    assert asked["rotation-30-2-facade-s0"].config.network_arch == "lenet5-heads2"
    assert "autoencoders-facade-s0" not in asked


def test_fedfmc_runs_only_when_asked_for_with_its_schedule_fitted_to_the_rounds(paper):
    # Execute
    default = {r.method for r in campaign.plan(paper, seeds=[0]).runs}
    asked = {r.name: r.config for r in campaign.plan(paper, seeds=[0], methods=["fedfmc"]).runs}

    # Assert: 25 rounds; 3 class groups → two merges of 5 rounds after 15 fork rounds,
    # 2 rotations → one merge after 20
    assert "fedfmc" not in default
    groups, rotation = asked["groups-fedfmc-s0"], asked["rotation-30-2-fedfmc-s0"]
    assert (groups.strategy, groups.fork_rounds, groups.merge_rounds) == ("fedfmc", 15, 5)
    assert (rotation.fork_rounds, rotation.merge_rounds) == (20, 5)
    assert groups.tolerance == SimulationConfig().tolerance  # MCFL's options reset


def test_fedfmc_is_left_out_with_a_note_when_its_schedule_does_not_fit():
    # Prepare: 12 rounds, 3 groups: 10 merge rounds leave 2 fork rounds, none eligible
    short = _scenario(name="short", rounds=12, scenario_params={"n_groups": 3}, n_trainers=6)

    # Execute
    plan = campaign.plan([short], seeds=[0], methods=["fedfmc"])

    # Assert
    assert plan.runs == []
    assert plan.notes == [
        "short: no FedFMC run, short: FedFMC needs more than 20 rounds (a fork stage with "
        "a fork-eligible round, then 10 merge rounds); the scenario has 12"
    ]
    with pytest.raises(campaign.CampaignError, match="FedFMC needs more than 20 rounds"):
        campaign.method_config(short, "fedfmc")


def test_the_comparison_plans_every_clustered_method_on_its_scenarios(paper, load_script):
    # Execute
    plan = campaign.plan(
        paper,
        seeds=[0],
        methods=campaign.COMPARISON_METHODS,
        only=campaign.COMPARISON_SCENARIOS,
        ablation=False,
    )
    result = CliRunner().invoke(
        load_script("run_experiments").main, ["--comparison", "--only", "iid", "--list"]
    )

    # Assert: 5 scenarios × 7 methods, but no oracle on gaussian (one trainer a group)
    names = {r.name for r in plan.runs}
    assert len(names) == 5 * 7 - 1 and "gaussian-oracle-s0" not in names
    assert {"gaussian-tol1-mcfl-s0", "gaussian-fedfmc-s0", "rotation-24-8-facade-s0"} <= names
    assert result.exit_code == 2 and "--comparison chooses the scenarios" in result.output


def test_seeds_are_parsed_from_commas_spaces_and_repeats(load_script):
    # Execute
    seeds = campaign.parse_seeds(("0,1", " 2  3 ", "4,"))
    refused = CliRunner().invoke(
        load_script("bench_adversaries").main,
        ["--matrix", "exploratory", "--seeds", "0,x", "--list"],
    )

    # Assert
    assert seeds == [0, 1, 2, 3, 4]
    with pytest.raises(ValueError, match="'-1' is not a seed"):
        campaign.parse_seeds(["0,-1"])
    assert refused.exit_code == 2 and "'x' is not a seed (a whole number >= 0)" in refused.output


def test_the_authors_remaining_deviations_run_on_request_each_alone(paper):
    # Execute: the default plan, and the four deviations named.
    default = {r.name for r in campaign.plan(paper, seeds=[0]).runs}
    named = {
        r.name: r.config
        for r in campaign.plan(
            paper, seeds=[0], methods=list(campaign.FIDELITY_ABLATIONS), only=["groups"]
        ).runs
    }

    # Assert: none is in the default campaign; named, each changes one thing of its
    # method's run on groups: MCFL's divergence, statistics or sampling, FedAvg's start.
    assert not any(m in name for name in default for m in campaign.FIDELITY_ABLATIONS)
    assert set(named) == {f"groups-{m}-s0" for m in campaign.FIDELITY_ABLATIONS}
    mcfl = named["groups-mcfl-elementwise-s0"]
    assert (mcfl.strategy, mcfl.divergence, mcfl.sampling) == ("mcfl", "elementwise", "shuffle")
    assert named["groups-mcfl-authors-statistics-s0"].filter_statistics == "authors"
    resampled = named["groups-mcfl-resampled-s0"]
    assert (resampled.strategy, resampled.sampling) == ("mcfl", "replacement")
    fedavg = named["groups-fedavg-first-one-s0"]
    assert (fedavg.strategy, fedavg.fedavg_start, fedavg.tolerance) == ("fedavg", "one", 1.0)


def test_the_fidelity_campaign_reruns_its_references_beside_the_deviations(load_script, tmp_path):
    # Execute
    script = load_script("run_experiments").main
    listed = CliRunner().invoke(
        script,
        ["--fidelity", "--seeds", "0", "--out", str(tmp_path / "runs"), "--list"]
        + ["--records", str(tmp_path / "records")],
    )
    refused = CliRunner().invoke(script, ["--fidelity", "--methods", "mcfl", "--list"])

    # Assert: MCFL and FedAvg beside the four deviations, on groups only
    assert refused.exit_code == 2 and "--fidelity chooses its scenarios" in refused.output
    assert listed.exit_code == 0, listed.output
    rows = [line.split() for line in listed.output.splitlines()]
    planned = {row[2] for row in rows if len(row) == 3 and row[1] == "pending"}
    assert planned == {f"groups-{m}-s0" for m in campaign.FIDELITY_METHODS}
