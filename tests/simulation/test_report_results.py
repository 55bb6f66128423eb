"""The results report (``mcfl_chain/simulation/results_report.py``, its command line
``scripts/report_results.py``) on a small synthetic campaign: tables, statistics, gaps."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from mcfl_chain.simulation import results_report
from mcfl_chain.simulation.runner import SimulationConfig

GROUPS = dict(
    dataset="digits",
    scenario="groups",
    scenario_params={"n_groups": 2},
    n_trainers=4,
    rounds=2,
    samples=300,
)
AUTOENCODERS = dict(
    dataset="fashion-mnist",
    scenario="two-datasets",
    scenario_params={"other_dataset": "digits"},
    n_trainers=4,
    rounds=2,
    samples=300,
    arch="lenet-cae",
)
FINAL = {  # each trainer's figure at the last round, by run
    "groups-mcfl-s0": [0.9, 0.8, 0.7, 0.6],
    "groups-mcfl-s1": [0.8, 0.8, 0.8, 0.8],
    "groups-fedavg-s0": [0.5, 0.6, 0.7, 0.4],
    "groups-fedavg-s1": [0.6, 0.6, 0.6, 0.6],
    "groups-local-s0": [0.7, 0.7, 0.7, 0.7],
    "groups-mcfl-v1-s0": [0.5, 0.5, 0.5, 0.5],
    "autoencoders-mcfl-s0": [0.002, 0.002, 0.008, 0.008],
    "autoencoders-fedavg-s0": [0.0025, 0.0025, 0.009, 0.009],
}


@pytest.fixture
def campaign_dir(tmp_path, run_writer):
    runs = tmp_path / "runs"
    for name, final in FINAL.items():
        autoencoder = name.startswith("autoencoders")
        strategy = "mcfl" if "-mcfl" in name else name.split("-")[1]
        config = SimulationConfig(
            name=name,
            strategy=strategy,
            tolerance=3.0 if autoencoder else 1.0,
            **(AUTOENCODERS if autoencoder else GROUPS),
        )
        run_writer(
            runs / name,
            config,
            lambda i, r, final=final: final[i] if r == 1 else final[i] / 2,
            (lambda i: "fashion-mnist" if i < 2 else "digits")  # MSE 0.002 / 0.008
            if autoencoder
            else (lambda i: "ab"[i % 2]),
            metric="MSE" if autoencoder else "accuracy",
        )
    (runs / "notes").mkdir()  # not a run: ignored
    (runs / "iid-mcfl-s0").mkdir()  # unfinished: ignored
    docs = tmp_path / "docs"
    (docs / "results").mkdir(parents=True)
    (docs / "results" / "claims.toml").write_text(
        '[groups]\ntitle = "Three groups"\nclaim = """\nGroups split.\n"""\nverdict = "supported"\n'
    )
    return runs, docs


def _section(text: str, title: str) -> str:
    start = text.index(f"## {title}")
    end = text.find("\n## ", start + 1)
    return text[start : end if end > 0 else None]


def test_run_names_are_parsed_with_methods_containing_dashes():
    pattern = results_report.RUN_NAME
    assert pattern.match("groups-mcfl-shared-s0").group("scenario", "method", "seed") == (
        "groups",
        "mcfl-shared",
        "0",
    )
    assert pattern.match("gaussian-tol1-mcfl-s12").group("scenario", "method") == (
        "gaussian-tol1",
        "mcfl",
    )
    assert pattern.match("dirichlet-0.1-oracle-s2").group("scenario") == "dirichlet-0.1"
    assert pattern.match("groups") is None


def test_the_report_gives_means_intervals_and_paired_differences(campaign_dir, load_script):
    # Prepare
    runs, docs = campaign_dir
    script = load_script("report_results")

    # Execute
    records = docs.parent / "records"
    result = CliRunner().invoke(
        script.main,
        ["--runs", str(runs), "--out", str(docs), "--records", str(records)]
        + ["--fidelity-runs", str(docs.parent / "none"), "--fidelity-records", str(records)],
    )

    # Assert
    assert result.exit_code == 0, result.output
    text = (docs / "RESULTS.md").read_text()
    groups = _section(text, "Three groups")
    assert "**What the paper claims.** Groups split." in groups
    assert "**Verdict.** supported" in groups
    # worst 0.6 / 0.8: mean 70, half-width t(1)·sd/√2 = 12.706·0.1; fair 0.8 / 0.8667
    assert "| MCFL | 2 | 70.0 ± 127.1 | 77.5 ± 31.8 | 85.0 ± 63.5 | 83.3 ± 42.4 | 2.0 ± 0.0 |" in (
        groups
    )
    assert "| local | 1 | 70.0 | 70.0 | 70.0 | 80.0 | 2.0 |" in groups
    assert "| IFCA | 0 | not run | not run |" in groups
    assert "| oracle | 0 | not run |" in groups  # the scenario has two groups
    # paired: +0.2 per trainer and for the worst trainer in both seeds
    assert "| MCFL − FedAvg | 2 | +20.0 ± 0.0 | yes, better | +20.0 ± 0.0 | yes, better |" in groups
    assert "| MCFL − local | 1 | +5.0 | – (1 seed) | -10.0 | – (1 seed) |" in groups
    assert "| MCFL − oracle | 0 | not run | – | not run | – |" in groups
    assert "![groups](results/groups.png)" in groups
    assert (docs / "results" / "groups.png").exists()

    autoencoders = _section(text, "autoencoders")
    assert "_No claim recorded in docs/results/claims.toml._" in autoencoders
    assert "**Verdict.** pending" in autoencoders
    assert "| method | seeds | worst | average | best | MSE digits | MSE fashion-mnist |" in (
        autoencoders
    )
    assert "| MCFL, tolerance 3.0 | 1 | 0.0080 | 0.0050 | 0.0020 | 0.0080 | 0.0020 | 2.0 |" in (
        autoencoders
    )
    assert "| MCFL, tolerance 1.0 | 0 | not run |" in autoencoders  # from its scenario file
    assert "| MCFL, tolerance 3.0 | digits | 0.0080 | 0.0090 | +12.5 % | +11.1 % |" in (
        autoencoders
    )
    assert "| MCFL, tolerance 3.0 | fashion-mnist | 0.0020 | 0.0025 | +25.0 % | +20.0 % |" in (
        autoencoders
    )
    # (−0.0005 − 0.0005 − 0.001 − 0.001)/4 and 0.008 − 0.009
    assert "| MCFL, tolerance 3.0 − FedAvg | 1 | -0.0007 | – (1 seed) | -0.0010 |" in (autoencoders)
    assert "MCFL, tolerance 1.0 − FedAvg" not in autoencoders

    ablation = _section(text, "Ablation")
    # v1 − MCFL on seed 0: (−0.4 − 0.3 − 0.2 − 0.1)/4
    assert "| v1: all three | start = shared, aggregate_on = all, selection = ceil | 1 |" in (
        ablation
    )
    assert "| 50.0 | 50.0 | 2.0 | -25.0 |" in ablation
    assert "| MCFL (authors' defaults) | – | 1 | 0.0080 | 0.0050 | 0.0080 | 0.0020 | 2.0 | – |" in (
        ablation
    )
    assert "| ⌈√n⌉ parents | selection = ceil | 0 | not run |" in ablation
    assert "rerun beside the deviations" not in ablation  # no --fidelity run

    summary = _section(text, "Summary")
    assert "| groups | +20.0 ± 0.0 * | +20.0 ± 0.0 * | +5.0 | not run |" in summary
    assert "| iid | not run | not run | not run | not run |" in summary
    assert "Not run yet (`python scripts/run_experiments.py --only iid`)." in text
    assert "| groups mcfl | 2 | 4 |" in _section(text, "Performance")

    record = records / "groups-mcfl-s0"
    lines = [json.loads(x) for x in (record / "metrics.jsonl").read_text().splitlines()]
    assert [(x["round"], x["trainer_index"], x["accuracy"]) for x in lines] == [
        (1, i, v) for i, v in enumerate(FINAL["groups-mcfl-s0"])
    ]
    assert "aggregations" not in lines[0]
    assert (record / "summary.json").exists() and (record / "config.json").exists()
    assert not (records / "iid-mcfl-s0").exists()


def test_the_report_can_be_made_again_from_its_records(campaign_dir):
    # Prepare
    runs, docs = campaign_dir
    records = docs.parent / "records"
    results_report.write_report(runs, docs, docs / "results" / "claims.toml", records=records)
    first = (docs / "RESULTS.md").read_text()

    # Execute
    results_report.write_report(records, docs, docs / "results" / "claims.toml")

    # Assert: the same tables (the records hold the final-round lines)
    again = (docs / "RESULTS.md").read_text()
    assert _section(again, "Summary") == _section(first, "Summary")
    assert _section(again, "Ablation") == _section(first, "Ablation")


def test_a_scenario_without_groups_has_no_oracle_row(tmp_path, run_writer):
    # Prepare: IID data has one group, so the oracle is FedAvg itself.
    runs = tmp_path / "runs"
    for name in ("iid-mcfl-s0", "iid-fedavg-s0"):
        config = SimulationConfig(
            name=name,
            scenario="iid",
            **{k: v for k, v in GROUPS.items() if k not in ("scenario", "scenario_params")},
        )
        run_writer(runs / name, config, lambda i, r: 0.5, lambda i: "iid")

    # Execute
    text = results_report.write_report(
        runs, tmp_path / "docs", tmp_path / "claims.toml"
    ).read_text()

    # Assert
    iid = _section(text, "iid")
    assert "No oracle run for `iid`: a single data group (the oracle is FedAvg)." in iid
    assert "| oracle |" not in iid and "MCFL − oracle" not in iid
    assert "| iid | +0.0 ± 0.0 |" not in text  # one seed: no interval
    assert "| iid | +0.0 | +0.0 | not run | n/a |" in _section(text, "Summary")


def test_an_empty_campaign_is_reported_as_not_run(tmp_path):
    # Execute
    path = results_report.write_report(
        tmp_path / "none", tmp_path / "docs", tmp_path / "claims.toml"
    )

    # Assert
    text = path.read_text()
    # 11 tables, 3 ablation scenarios, FedFMC's own experiment, the paper's size
    assert text.count("Not run yet") == 11 + 3 + 1 + 1
    assert "Not run yet (`python scripts/reproduce_fedfmc.py`)." in text
    assert "_No run finished yet._" in text


def test_fedfmc_one_step_appears_under_the_default_experiment_once_run(tmp_path):
    # Prepare: both tables with their figures, and the one-step discussion
    module = results_report
    docs = tmp_path / "docs"
    (docs / "results").mkdir(parents=True)
    (docs / "discussion").mkdir()
    for stem in ("fedfmc", "fedfmc-one-step"):
        (docs / "results" / f"{stem}.md").write_text(f"| table of {stem} |\n")
        (docs / "results" / f"{stem}-ewc.png").write_bytes(b"png")
    (docs / "discussion" / "fedfmc-one-step.md").write_text("One step learns.\n")

    # Execute
    with_one_step = "\n".join(module.fedfmc_section(docs))
    (docs / "results" / "fedfmc-one-step.md").unlink()
    without = "\n".join(module.fedfmc_section(docs))

    # Assert
    default_at = with_one_step.index("| table of fedfmc |")
    one_step_at = with_one_step.index("### One full-batch step a round")
    assert default_at < with_one_step.index("(results/fedfmc-ewc.png)") < one_step_at
    assert one_step_at < with_one_step.index("One step learns.")
    assert with_one_step.index("One step learns.") < with_one_step.index(
        "| table of fedfmc-one-step |"
    )
    assert (
        "![FedFMC + EWC, per archetype (the paper's Fig. 1), one step a round]"
        "(results/fedfmc-one-step-ewc.png)"
    ) in with_one_step
    assert "fedfmc-no-ewc.png" not in with_one_step  # figures that were not drawn
    assert "One full-batch step" not in without and "| table of fedfmc |" in without


def test_a_broken_claims_file_is_named(tmp_path, load_script):
    (tmp_path / "claims.toml").write_text("[groups\n")
    result = CliRunner().invoke(
        load_script("report_results").main,
        [
            "--runs",
            str(tmp_path),
            "--out",
            str(tmp_path / "docs"),
            "--claims",
            str(tmp_path / "claims.toml"),
            "--records",
            str(tmp_path / "records"),
        ],
    )
    assert result.exit_code == 1 and "claims.toml" in result.output


def test_the_clustered_methods_are_compared_with_minority_fair_accuracy_and_costs(
    tmp_path, run_writer
):
    # Prepare: rotation-30-2 at 3 trainers, trainer 2 the minority; MCFL serves it
    # (0.8), FedAvg does not (0.2); MCFL's trainers store 1 kB and fetch 3 kB a round.
    runs = tmp_path / "runs"
    params = {k: v for k, v in GROUPS.items() if k not in ("scenario_params", "n_trainers")}
    for name, minority in (("rotation-30-2-mcfl-s0", 0.8), ("rotation-30-2-fedavg-s0", 0.2)):
        config = SimulationConfig(
            name=name,
            n_trainers=3,
            scenario_params={"n_groups": 2, "group_sizes": [2, 1]},
            **params,
        )
        costs = {
            "traffic": {
                "stored_blobs": 1,
                "stored_bytes": 1000,
                "fetched_blobs": 3,
                "fetched_bytes": 3000,
            },
            "gas": 150_000,
        }
        run_writer(
            runs / name,
            config,
            lambda i, r, minority=minority: minority if i == 2 else 0.9,
            lambda i: "rotation 180°" if i == 2 else "rotation 0°",
            extra=(lambda i, r, costs=costs: costs) if "mcfl" in name else None,
        )

    # Execute
    records = tmp_path / "records"
    text = results_report.write_report(
        runs, tmp_path / "docs", tmp_path / "claims.toml", records=records
    ).read_text()
    again = results_report.write_report(
        records, tmp_path / "docs", tmp_path / "claims.toml"
    ).read_text()

    # Assert: fair = 2/3·mean + 1/3·(1 − gap); costs only where the run reported them
    section = _section(text, "Clustered methods compared")
    fair = 100 * (2 / 3 * (0.9 + 0.8) / 2 + 1 / 3 * (1 - 0.1))
    assert f"| MCFL | 1 | 80.0 | 86.7 | {fair:.1f} | 80.0 | 4 | 150000 |" in section
    assert "| FedAvg | 1 | 20.0 | 66.7 |" in section and "| 20.0 | – | – |" in section
    assert "| FedFMC | 0 | not run |" in section
    assert f"MCFL 80.0 / {fair:.1f}; FedFMC not run" in section
    assert _section(again, "Clustered methods compared") == section


def test_the_paper_size_runs_get_their_own_table_and_records(tmp_path, run_writer):
    # Prepare: a 4-trainer "paper-size" MCFL run sharing all samples (samples=None), 3 of
    # 5 rounds made, 600 s in all, 8,000 gas and 2 MB a trainer-round.
    published = tmp_path / "published"
    config = SimulationConfig(name="groups-mcfl-s0", **{**GROUPS, "samples": None, "rounds": 3})
    run_writer(
        published / "groups-mcfl-s0",
        config,
        lambda i, r: [0.5, 0.6, 0.7, 0.8][i],
        seconds=600.0,
        extra=lambda i, r: {
            "samples": 1000 + 100 * i,
            "gas": 8000,
            "traffic": {"stored_bytes": 1_500_000, "fetched_bytes": 500_000},
        },
    )
    summary_path = published / "groups-mcfl-s0" / "summary.json"
    summary = json.loads(summary_path.read_text())
    summary["config"]["rounds"] = 5  # planned 5, stopped after 3
    summary_path.write_text(json.dumps(summary))
    docs = tmp_path / "docs"

    # Execute
    text = results_report.write_report(
        tmp_path / "none",
        docs,
        tmp_path / "claims.toml",
        published,
        published_records=tmp_path / "published-records",
    ).read_text()

    # Assert: the training samples as the lines say; the round time is the summary's
    section = _section(text, "The paper's size, once")
    rounds = [r["seconds"] for r in summary["rounds"] if r["round"] > 0]
    assert (
        f"| groups MCFL | 0 | 4 | 1,150 | 3 of 5 | 10 min | {sum(rounds) / len(rounds):.0f} s "
        "| 8,000 | 2,000 | 50.0 | 65.0 | 80.0 | 2 |"
    ) in section
    assert (tmp_path / "published-records" / "groups-mcfl-s0" / "summary.json").exists()


def test_the_status_counts_the_planned_runs_done_and_names_the_rest(tmp_path, run_writer):
    # Prepare: a one-scenario folder (iid: no oracle) whose MCFL seed 0 is done
    scenarios = tmp_path / "scenarios"
    scenarios.mkdir()
    (scenarios / "iid.toml").write_text(
        'name = "iid"\ndataset = "digits"\nscenario = "iid"\nn_trainers = 2\nsamples = 300\n'
    )
    runs = tmp_path / "runs"
    config = SimulationConfig(name="iid-mcfl-s0", dataset="digits", scenario="iid",
                              n_trainers=2, samples=300)  # fmt: skip
    run_writer(runs / "iid-mcfl-s0", config, lambda i, r: 0.5)

    # Execute
    text = results_report.write_report(
        runs, tmp_path / "docs", tmp_path / "claims.toml", scenarios=scenarios
    ).read_text()

    # Assert: 4 methods × 3 seeds planned; the comparison names no scenario of this folder
    assert (
        "**Campaign status** (from the finished runs when this report was made): "
        "`python scripts/run_experiments.py`: 1 of 12 runs done (to run: iid fedavg s0/1/2, "
        "local s0/1/2, ifca s0/1/2, mcfl s1/2)."
    ) in text


def test_a_fresh_clone_reports_from_the_kept_records(campaign_dir, load_script, tmp_path):
    # Prepare: a report made once (which keeps the records); then no run directories
    runs, docs = campaign_dir
    script = load_script("report_results")
    records = tmp_path / "records"
    results_report.write_report(runs, docs, docs / "results" / "claims.toml", records=records)
    first = (docs / "RESULTS.md").read_text()

    # Execute
    result = CliRunner().invoke(
        script.main,
        ["--runs", str(tmp_path / "gone"), "--published-runs", str(tmp_path / "gone-too"),
         "--out", str(docs), "--records", str(records),
         "--published-records", str(tmp_path / "no-published-records")],
    )  # fmt: skip

    # Assert
    assert result.exit_code == 0, result.output
    assert f"{tmp_path / 'gone'} does not exist: reporting from the records" in result.output
    assert _section((docs / "RESULTS.md").read_text(), "Summary") == _section(first, "Summary")


def test_the_deviations_are_paired_with_methods_rerun_beside_them(campaign_dir, run_writer):
    # Prepare: the --fidelity campaign, whose MCFL and FedAvg differ from the main ones
    runs, docs = campaign_dir
    fidelity = docs.parent / "fidelity"
    for name, final in {
        "groups-mcfl-s0": [0.9, 0.8, 0.7, 0.4],  # main MCFL: 0.9, 0.8, 0.7, 0.6
        "groups-fedavg-s0": [0.5, 0.5, 0.5, 0.5],
        "groups-mcfl-elementwise-s0": [0.9, 0.8, 0.7, 0.8],
        "groups-fedavg-first-one-s0": [0.4, 0.4, 0.4, 0.4],
    }.items():
        strategy = "fedavg" if "fedavg" in name else "mcfl"
        config = SimulationConfig(name=name, strategy=strategy, tolerance=1.0, **GROUPS)
        run_writer(fidelity / name, config, lambda i, r, final=final: final[i])

    # Execute
    results_report.write_report(runs, docs, docs / "results" / "claims.toml", fidelity_dir=fidelity)

    # Assert: rerun MCFL − main MCFL = −0.05, rerun FedAvg − main FedAvg = −0.05;
    # element-wise − rerun MCFL = +0.1; FedAvg's first round − rerun FedAvg = −0.1
    ablation = _section((docs / "RESULTS.md").read_text(), "Ablation")
    groups = ablation[ablation.index("### groups") : ablation.index("### autoencoders")]
    rows = {line.split(" | ")[0][2:]: line for line in groups.splitlines() if "|" in line}
    assert rows["MCFL, rerun beside the deviations below"].endswith("| -5.0 |")
    assert rows["FedAvg, rerun beside the deviations below"].endswith("| -5.0 |")
    assert rows["authors' element-wise divergence"].endswith("| +10.0 |")
    assert rows["FedAvg, authors' first round (one trainer)"].endswith("| -10.0 |")
    assert rows["authors' Algorithm 2 statistics"].endswith("| not run |")
