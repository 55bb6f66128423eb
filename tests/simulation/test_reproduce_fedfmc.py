"""FedFMC's own experiment (:mod:`mcfl_chain.simulation.fedfmc_experiment`, its command
line ``scripts/reproduce_fedfmc.py``) and :mod:`mcfl_chain.simulation.fedfmc_figures`: the
runs it plans, the measures on hand-computed metrics lines, its table, last line and
figures on hand-made run directories, its resumption, and one real small run."""

from __future__ import annotations

import dataclasses
import json
import math
import re
import time

import pytest
from click.testing import CliRunner

from mcfl_chain.simulation import experiment
from mcfl_chain.simulation import fedfmc_experiment as fx
from mcfl_chain.simulation import fedfmc_figures as ff
from mcfl_chain.simulation.experiment import ExperimentError
from mcfl_chain.simulation.runner import SimulationConfig

SCENARIO = """name = "{name}"
dataset = "digits"
scenario = "groups"
scenario_params = {{ n_groups = 3, num_classes = 3 }}
n_trainers = 3
rounds = {rounds}
epochs = 1
samples = 60
strategy = "fedfmc"
fork_rounds = 2
merge_rounds = 1
fork_start = 1
fork_gap = 1
fork_end = 0
ewc = "{ewc}"
phase_duration = 120
round_timeout = 300
"""
"""Three trainers, one per archetype; T = 2 (round 1 the only fork round), two merge
steps of M = 1 (rounds 2 and 3): the merges end in round 4."""

# Hand-made runs: trainer i is archetype "class i"; per round its accuracy and its
# deployed model. FedFMC: everybody on the shared model, then each on its own, class 0
# and 1 merged in round 2 (class 2 still on its own model), everybody merged from round 3.
FEDFMC_MODELS = (["r"] * 3, ["g0", "g1", "g2"], ["m1", "m1", "g2b"], ["m2"] * 3, ["m3"] * 3)
EWC = ((1, 1, 1, 0, 1), (0, 1, 0, 1, 1), (0, 1, 1, 0, 0.5))
NO_EWC = ((1, 1, 0, 1, 0), (0, 1, 1, 0, 1), (0, 1, 0, 1, 0))
FEDAVG = ((1, 0, 1, 0, 1), (0, 1, 0, 1, 0), (0, 0, 0, 0, 0.5))


def _lines(values, models):
    """Metrics lines: trainer i scores values[i][r] with models[r][i]."""
    return [
        {"round": r, "trainer_index": i, "group": f"class {i}", "accuracy": values[i][r],
         "model": models[r][i]}
        for r in range(len(values[0]))
        for i in range(len(values))
    ]  # fmt: skip


@pytest.fixture
def script(load_script):
    return load_script("reproduce_fedfmc")


@pytest.fixture
def scenarios(tmp_path):
    """A scenarios folder holding the pair, 5 rounds each."""
    folder = tmp_path / "scenarios"
    folder.mkdir()
    for file, ewc in (("three-labels.toml", "on"), ("three-labels-no-ewc.toml", "off")):
        name = "three" if ewc == "on" else "three-no-ewc"
        (folder / file).write_text(SCENARIO.format(name=name, rounds=5, ewc=ewc))
    return folder


# -- planning ----------------------------------------------------------------------------


def test_each_seed_gets_the_three_variants_on_the_same_data(scenarios):
    # Execute
    planned = fx.plan(scenarios, [0, 1])

    # Assert: names, seed by seed; EWC on and off; FedAvg keeps FedFMC's schedule
    assert [r.name for r in planned.runs] == [
        "fedfmc-ewc-s0", "fedfmc-no-ewc-s0", "fedavg-s0",
        "fedfmc-ewc-s1", "fedfmc-no-ewc-s1", "fedavg-s1",
    ]  # fmt: skip
    configs = {r.name: r.config for r in planned.runs}
    assert [
        (configs[n].strategy, configs[n].ewc) for n in ("fedfmc-ewc-s0", "fedfmc-no-ewc-s0")
    ] == [
        ("fedfmc", "on"),
        ("fedfmc", "off"),
    ]
    assert configs["fedavg-s1"].strategy == "fedavg"
    assert all(c.name == n for n, c in configs.items())
    assert [configs[f"fedavg-s{s}"].seed for s in (0, 1)] == [0, 1]
    same = {(c.dataset, c.n_trainers, c.samples, c.rounds, c.fork_rounds, c.merge_rounds,
             str(c.scenario_params)) for c in configs.values()}  # fmt: skip
    assert len(same) == 1
    assert planned.notes == []


def test_a_rounds_cap_keeps_T_notes_cut_merges_and_refuses_to_leave_no_merge(scenarios):
    # Execute
    cut = fx.plan(scenarios, [0], rounds=3)
    above = fx.plan(scenarios, [0], rounds=99)
    with pytest.raises(ExperimentError) as refused:
        fx.plan(scenarios, [0], rounds=2)

    # Assert: T = 2 kept; 3 rounds start one merge step of the two; a cap above the
    # scenario's rounds is no cap; 2 rounds = T leave no merge round
    assert {(r.config.rounds, r.config.fork_rounds) for r in cut.runs} == {(3, 2)}
    assert cut.notes == [
        "3 rounds cut the merges short: T = 2 then 2 merge steps of M = 1 need 4; 1 of them starts"
    ]
    assert {r.config.rounds for r in above.runs} == {5}
    message = str(refused.value)
    assert "--rounds 2 leave no merge round" in message
    assert "give --rounds 3 or more (4 for every merge to finish)" in message


def test_the_pair_must_differ_in_ewc_only(scenarios):
    # Prepare: the file without EWC trains with more samples
    path = scenarios / "three-labels-no-ewc.toml"
    path.write_text(path.read_text().replace("samples = 60", "samples = 90"))

    # Execute
    with pytest.raises(ExperimentError) as refused:
        fx.plan(scenarios, [0])

    # Assert
    assert "differs in samples" in str(refused.value)


def test_a_missing_scenario_file_says_which_folder_to_give(tmp_path):
    with pytest.raises(ExperimentError) as refused:
        fx.plan(tmp_path, [0])
    assert "three-labels.toml" in str(refused.value) and "--scenarios" in str(refused.value)


# -- measures ----------------------------------------------------------------------------


def test_the_schedule_places_the_merge_steps_within_the_run():
    # Execute
    full = ff.Schedule(fork_rounds=4, merge_rounds=2, groups=3, rounds=9)
    short = ff.Schedule(fork_rounds=4, merge_rounds=2, groups=3, rounds=5)

    # Assert
    assert (full.planned_end, full.merge_end, full.merge_starts) == (8, 8, [4, 6])
    assert list(full.merge_stage) == [4, 5, 6, 7] and full.complete
    assert (short.merge_end, short.merge_starts, list(short.merge_stage)) == (5, [4], [4])
    assert not short.complete


def test_archetype_curves_average_the_trainers_of_each_archetype():
    # Prepare: two trainers of class 2 (0.5 and 1.0 in round 0); class 10 after class 2;
    # a round sat out (no accuracy) counts for nothing.
    lines = [
        {"round": 0, "group": "class 2", "accuracy": 0.5},
        {"round": 0, "group": "class 2", "accuracy": 1.0},
        {"round": 0, "group": "class 10", "accuracy": 0.2},
        {"round": 1, "group": "class 2", "accuracy": 1.0},
        {"round": 1, "group": "class 2", "accuracy": None},
        {"round": 1, "group": "class 10", "accuracy": 0.6},
    ]

    # Execute
    curves = ff.archetype_curves(lines)

    # Assert
    assert list(curves) == ["class 2", "class 10"]
    assert curves == {"class 2": {0: 0.75, 1: 1.0}, "class 10": {0: 0.2, 1: 0.6}}


def test_the_consolidated_model_spans_the_most_archetypes():
    # Prepare: round 2, classes 0 and 1 on m1, class 2 on its own model, one trainer of
    # class 0 elsewhere; round 3, class 2 alone on m2 with more trainers
    lines = [
        {"round": 2, "group": "class 0", "accuracy": 1, "model": "m1"},
        {"round": 2, "group": "class 0", "accuracy": 1, "model": "x"},
        {"round": 2, "group": "class 1", "accuracy": 1, "model": "m1"},
        {"round": 2, "group": "class 2", "accuracy": 1, "model": "c"},
        {"round": 3, "group": "class 0", "accuracy": 1, "model": "m2"},
        {"round": 3, "group": "class 1", "accuracy": 1, "model": "m2"},
        {"round": 3, "group": "class 2", "accuracy": 1, "model": "c"},
        {"round": 3, "group": "class 2", "accuracy": 1, "model": "c"},
        {"round": 3, "group": "class 2", "accuracy": 1, "model": "c"},
    ]

    # Execute
    first = ff.consolidated_model([line for line in lines if line["round"] == 2])
    rounds = ff.on_consolidated(lines, since=2)

    # Assert: class 0 is not on it in round 2 (one of its trainers is elsewhere)
    assert first == "m1"
    assert rounds == {
        "class 0": frozenset({3}),
        "class 1": frozenset({2, 3}),
        "class 2": frozenset(),
    }


def test_mean_abs_change_over_rounds_and_over_the_kept_rounds_only():
    # Prepare
    curves = {"a": {0: 0.0, 1: 0.5, 2: 0.5, 3: 1.0}, "b": {0: 1.0, 1: 1.0, 2: 0.0, 3: 0.0}}

    # Execute
    every = ff.mean_abs_change(curves, range(2, 4))
    kept = ff.mean_abs_change(
        curves, range(2, 4), {"a": frozenset({2, 3}), "b": frozenset({1, 2, 3})}
    )
    none = ff.mean_abs_change(curves, range(5, 7))

    # Assert: (0 + .5 + 1 + 0) / 4; with the kept rounds a's change into round 2 (from
    # round 1, not kept) is left out: (.5 + 1 + 0) / 3
    assert every == pytest.approx(0.375)
    assert kept == pytest.approx(0.5)
    assert math.isnan(none)


def test_a_run_is_measured_per_archetype_with_its_merge_stage():
    # Prepare: T = 2, M = 1, three archetypes, five rounds (merges in rounds 2 and 3)
    schedule = ff.Schedule(fork_rounds=2, merge_rounds=1, groups=3, rounds=5)

    # Execute
    measures = ff.measure_run(_lines(EWC, FEDFMC_MODELS), schedule)

    # Assert
    assert measures.curves["class 2"] == {0: 0, 1: 1, 2: 1, 3: 0, 4: 0.5}
    assert measures.final == {"class 0": 1, "class 1": 1, "class 2": 0.5}
    assert (measures.worst, measures.spread) == (0.5, 0.5)
    assert measures.fork_groups == (
        frozenset({"class 0"}),
        frozenset({"class 1"}),
        frozenset({"class 2"}),
    )
    assert measures.forked_as_archetypes
    assert measures.consolidated == {
        "class 0": frozenset({2, 3, 4}),
        "class 1": frozenset({2, 3, 4}),
        "class 2": frozenset({3, 4}),
    }
    # merge rounds 2, 3: class 0 |1−1|, |0−1|; class 1 1, 1; class 2 0, 1 → 4/6
    assert measures.merge_change == pytest.approx(4 / 6)
    # on the consolidated model in both rounds: only round 3 of classes 0 and 1 → 1
    assert measures.merged_change == pytest.approx(1.0)
    # rounds 1-4: class 0 0+0+1+1, class 1 1+1+1+0, class 2 1+0+1+.5 → 7.5/12
    assert measures.run_change == pytest.approx(7.5 / 12)


def test_seeds_are_averaged_worst_per_seed_first():
    # Prepare: seed 0 worst is class 2 (0.5), seed 1 worst is class 0 (0.0); two groups
    # formed in seed 1 (classes 0 and 1 together)
    schedule = ff.Schedule(fork_rounds=2, merge_rounds=1, groups=3, rounds=5)
    other_models = (["r"] * 3, ["g0", "g0", "g2"], *FEDFMC_MODELS[2:])
    other = ((1, 1, 1, 0, 0), (0, 1, 0, 1, 1), (0, 1, 1, 0, 1))
    seeds = [ff.measure_run(_lines(EWC, FEDFMC_MODELS), schedule),
             ff.measure_run(_lines(other, other_models), schedule)]  # fmt: skip

    # Execute
    summary = ff.summarise(seeds)

    # Assert: the worst of the mean curves would be 0.5 (class 0); per seed it is 0.25
    assert summary.runs == 2
    assert summary.final == {"class 0": 0.5, "class 1": 1.0, "class 2": 0.75}
    assert summary.worst == pytest.approx(0.25)
    assert summary.spread == pytest.approx(0.75)
    assert summary.curves["class 0"][4] == 0.5
    assert summary.fork_groups[1] == (frozenset({"class 0", "class 1"}), frozenset({"class 2"}))
    assert not ff.forked_as_archetypes(summary.fork_groups[1], summary.archetypes)


def test_a_fork_into_other_groups_than_the_archetypes_is_noted():
    # Prepare: classes 0 and 1 stayed together through the fork stage
    schedule = ff.Schedule(fork_rounds=2, merge_rounds=1, groups=3, rounds=5)
    models = (["r"] * 3, ["g0", "g0", "g2"], *FEDFMC_MODELS[2:])
    together = ff.summarise([ff.measure_run(_lines(EWC, models), schedule)])
    apart = ff.summarise([ff.measure_run(_lines(EWC, FEDFMC_MODELS), schedule)])

    # Execute
    noted = fx.table_lines({"fedfmc-ewc": together})
    clean = fx.table_lines({"fedfmc-ewc": apart})

    # Assert
    assert "| FedFMC + EWC | 1 | 2: class 0 + class 1 / class 2 |" in "\n".join(noted)
    assert "forked otherwise than into the archetypes" in "\n".join(noted)
    assert "forked otherwise" not in "\n".join(clean)


# -- the table, the last line and the figures --------------------------------------------


def _write_finished(scenarios, out, run_writer, variants=("fedfmc-ewc", "fedfmc-no-ewc", "fedavg")):
    """Finished runs of seed 0 for ``variants``, made with the planned configs."""
    values = {"fedfmc-ewc": EWC, "fedfmc-no-ewc": NO_EWC, "fedavg": FEDAVG}
    for run in fx.plan(scenarios, [0]).runs:
        if run.variant not in variants:
            continue
        table = values[run.variant]
        models = FEDFMC_MODELS if run.variant != "fedavg" else [[f"avg{r}"] * 3 for r in range(5)]
        run_writer(
            out / run.name,
            run.config,
            lambda i, r, table=table: table[i][r],
            lambda i: f"class {i}",
            extra=lambda i, r, models=models: {"model": models[r][i]},
        )


def test_report_only_writes_the_table_the_verdicts_the_last_line_and_the_figures(
    script, scenarios, tmp_path, run_writer
):
    # Prepare
    out, table = tmp_path / "runs", tmp_path / "results" / "fedfmc.md"
    _write_finished(scenarios, out, run_writer)
    args = ["--scenarios", str(scenarios), "--out", str(out), "--table", str(table),
            "--records", str(tmp_path / "records")]  # fmt: skip

    # Execute
    result = CliRunner().invoke(script.main, [*args, "--report-only"])

    # Assert
    assert result.exit_code == 0, result.output
    text = table.read_text()
    assert (
        "| FedFMC + EWC | 1 | 3 = archetypes | 100.0 | 100.0 | 50.0 | 50.0 | 50.0 | 66.7 | "
        "100.0 | 62.5 |"
    ) in text
    assert (
        "| FedFMC without EWC | 1 | 3 = archetypes | 0.0 | 100.0 | 0.0 | 0.0 | 100.0 | 83.3 | "
        "100.0 | 83.3 |"
    ) in text
    assert "| FedAvg | 1 | – | 100.0 | 0.0 | 50.0 | 0.0 | 100.0 | 66.7 | 66.7 | 70.8 |" in text
    assert "EWC steadier than no EWC during the merges: yes (mean abs. Δ 66.7 vs 83.3" in text
    assert "on the consolidated model only: no (within 1 pt), 100.0 vs 100.0" in text
    assert "FedFMC + EWC steadier than FedAvg over the run: yes (mean abs. Δ 62.5 vs 70.8" in text
    assert "archetypes closer at the end: yes (spread 50.0 vs 100.0 pts)" in text
    assert "merge steps of M = 1 round starting in rounds 2, 3" in text
    assert result.output.splitlines()[-1] == (
        "FedFMC three labels, worst archetype at the end: EWC 50.0 %, no EWC 0.0 %, FedAvg 0.0 %"
    )
    for name in ("fedfmc-ewc.png", "fedfmc-no-ewc.png", "fedfmc-vs-fedavg.png"):
        assert (table.parent / name).stat().st_size > 10_000


def test_variants_not_run_are_reported_as_such(script, scenarios, tmp_path, run_writer):
    # Prepare: only FedFMC with EWC finished
    out, table = tmp_path / "runs", tmp_path / "fedfmc.md"
    _write_finished(scenarios, out, run_writer, variants=("fedfmc-ewc",))
    args = ["--scenarios", str(scenarios), "--out", str(out), "--table", str(table),
            "--records", str(tmp_path / "records")]  # fmt: skip

    # Execute
    listed = CliRunner().invoke(script.main, [*args, "--list"])
    result = CliRunner().invoke(script.main, [*args, "--report-only"])

    # Assert
    assert listed.exit_code == 0, listed.output
    assert re.search(r"1\s+done\s+fedfmc-ewc-s0", listed.output)
    assert re.search(r"3\s+pending\s+fedavg-s0", listed.output)
    assert "3 runs planned" in listed.output and "1 done" in listed.output
    assert result.exit_code == 0, result.output
    text = table.read_text()
    assert "| FedAvg | 0 | not run |" in text
    assert "EWC steadier than no EWC during the merges: n/a" in text
    assert result.output.splitlines()[-1] == (
        "FedFMC three labels, worst archetype at the end: EWC 50.0 %, no EWC n/a, FedAvg n/a"
    )
    assert (tmp_path / "fedfmc-ewc.png").exists() and (tmp_path / "fedfmc-vs-fedavg.png").exists()
    assert not (tmp_path / "fedfmc-no-ewc.png").exists()


@pytest.mark.parametrize(
    ("lower", "higher", "expected"),
    [
        (0.072, 0.073, "no (within 1 pt)"),  # 7.2 vs 7.3 points: noise, not "yes"
        (0.5, 0.509, "no (within 1 pt)"),
        (0.5, 0.51, "yes"),
        (0.51, 0.5, "no"),
        (math.nan, 0.5, "n/a"),
    ],
)
def test_a_verdict_needs_a_gap_of_a_point(lower, higher, expected):
    assert fx._compare(lower, higher) == expected


def test_the_kept_records_are_trimmed_and_make_the_same_table(
    script, scenarios, tmp_path, run_writer
):
    # Prepare
    out, table = tmp_path / "runs", tmp_path / "results" / "fedfmc.md"
    _write_finished(scenarios, out, run_writer)
    args = ["--scenarios", str(scenarios), "--table", str(table),
            "--records", str(tmp_path / "records" / "fedfmc")]  # fmt: skip
    first = CliRunner().invoke(script.main, [*args, "--out", str(out), "--report-only"])
    made = table.read_text()
    table.unlink()
    records = tmp_path / "records" / "fedfmc"

    # Execute: from the records alone
    again = CliRunner().invoke(script.main, [*args, "--out", str(records), "--report-only"])

    # Assert
    assert first.exit_code == 0 and again.exit_code == 0, first.output + again.output
    assert "records of 3 runs kept in" in first.output
    assert "records of" not in again.output  # nothing copied onto itself
    assert table.read_text() == made
    kept = [json.loads(raw) for raw in (records / "fedfmc-ewc-s0" / "metrics.jsonl").open()]
    assert len(kept) == 15 and set(kept[0]) <= set(fx.RECORD_FIELDS)
    assert {"accuracy", "group", "model", "round"} <= set(kept[0])


def test_an_unwritable_records_folder_is_one_line_that_says_what_to_give(
    script, scenarios, tmp_path, run_writer
):
    out, table = tmp_path / "runs", tmp_path / "fedfmc.md"
    _write_finished(scenarios, out, run_writer)
    (tmp_path / "a-file").write_text("")
    args = ["--scenarios", str(scenarios), "--out", str(out), "--table", str(table),
            "--records", str(tmp_path / "records")]  # fmt: skip

    result = CliRunner().invoke(
        script.main, [*args, "--records", str(tmp_path / "a-file" / "records"), "--report-only"]
    )

    assert result.exit_code == 1
    assert "could not be kept in" in result.output and "--records" in result.output
    assert "Traceback" not in result.output and table.exists()


def test_another_table_gets_its_own_figures_and_states_the_local_work(
    script, scenarios, tmp_path, run_writer
):
    # Prepare: the default table's figures exist already and must stay untouched
    out, table = tmp_path / "runs", tmp_path / "results" / "fedfmc-one-step.md"
    _write_finished(scenarios, out, run_writer)
    table.parent.mkdir()
    kept = table.parent / "fedfmc-ewc.png"
    kept.write_bytes(b"earlier figure")
    args = ["--scenarios", str(scenarios), "--out", str(out), "--table", str(table),
            "--records", str(tmp_path / "records")]  # fmt: skip

    # Execute
    result = CliRunner().invoke(script.main, [*args, "--report-only"])

    # Assert: 60 samples → 42 training samples, batches of 32 → 2 steps in 1 epoch
    assert result.exit_code == 0, result.output
    assert table.read_text().startswith(
        "Local training: 1 local epoch in batches of 32, lr 0.05: 2 SGD steps a round.\n"
    )
    for suffix in ("-ewc.png", "-no-ewc.png", "-vs-fedavg.png"):
        assert (table.parent / f"fedfmc-one-step{suffix}").stat().st_size > 10_000
    assert kept.read_bytes() == b"earlier figure"


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        # 420 training samples: 14 batches of 32
        ({}, "2 local epochs in batches of 32, lr 0.05: 28 SGD steps a round"),
        ({"epochs": 1, "batch_size": 600},
         "1 local epoch in batches of 600, lr 0.05: 1 SGD step a round"),
        ({"batch_size": 420, "lr": 0.01},
         "2 local epochs in batches of 420, lr 0.01: 2 SGD steps a round"),
        ({"samples": None}, "2 local epochs in batches of 32, lr 0.05"),
    ],
)  # fmt: skip
def test_local_work_counts_the_steps_of_the_training_split(changes, expected):
    config = SimulationConfig(epochs=2, batch_size=32, samples=600, lr=0.05)
    assert fx.local_work(dataclasses.replace(config, **changes)) == expected


def test_runs_made_with_other_options_are_refused(script, scenarios, tmp_path, run_writer):
    # Prepare: runs of 5 rounds, then a report asked for 4
    out, table = tmp_path / "runs", tmp_path / "fedfmc.md"
    _write_finished(scenarios, out, run_writer)
    args = ["--scenarios", str(scenarios), "--out", str(out), "--table", str(table),
            "--records", str(tmp_path / "records")]  # fmt: skip

    # Execute
    result = CliRunner().invoke(script.main, [*args, "--rounds", "4", "--report-only"])

    # Assert
    assert result.exit_code == 1
    assert "made with other options than planned: rounds=5 (planned 4)" in result.output
    assert "give another --out" in result.output


def test_finished_runs_are_skipped_and_an_interrupted_one_made_again(
    script, scenarios, tmp_path, run_writer, monkeypatch
):
    # Prepare: EWC finished, no EWC interrupted (a stray file left), FedAvg pending;
    # run_simulation replaced by one writing the hand-made run
    out, table = tmp_path / "runs", tmp_path / "fedfmc.md"
    _write_finished(scenarios, out, run_writer, variants=("fedfmc-ewc",))
    (out / "fedfmc-no-ewc-s0").mkdir()
    (out / "fedfmc-no-ewc-s0" / "stray").write_text("left by the interrupted run")
    made = []

    def fake_run(config, run_dir, console):
        made.append((config.name, sorted(p.name for p in run_dir.glob("*"))))
        variant = config.name.removesuffix("-s0")
        table_ = {"fedfmc-no-ewc": NO_EWC, "fedavg": FEDAVG}[variant]
        return run_writer(run_dir, config, lambda i, r: table_[i][r], lambda i: f"class {i}")

    monkeypatch.setattr(experiment, "run_simulation", fake_run)
    args = ["--scenarios", str(scenarios), "--out", str(out), "--table", str(table),
            "--records", str(tmp_path / "records")]  # fmt: skip

    # Execute
    result = CliRunner().invoke(script.main, args)

    # Assert: the two unfinished runs made, the interrupted one from an empty directory
    assert result.exit_code == 0, result.output
    assert made == [("fedfmc-no-ewc-s0", []), ("fedavg-s0", [])]
    assert "removing the unfinished run" in result.output
    assert result.output.splitlines()[-1].startswith(
        "FedFMC three labels, worst archetype at the end: EWC 50.0 %, no EWC 0.0 %"
    )


# -- a real run ----------------------------------------------------------------------------


@pytest.mark.slow
def test_a_small_real_run_gives_the_three_variants(script, tmp_path):
    # Prepare: the pair at 4 rounds (fork round 1, merges in rounds 2 and 3)
    scenarios = tmp_path / "scenarios"
    scenarios.mkdir()
    for file, ewc in (("three-labels.toml", "on"), ("three-labels-no-ewc.toml", "off")):
        (scenarios / file).write_text(SCENARIO.format(name=f"three-{ewc}", rounds=4, ewc=ewc))
    out, table = tmp_path / "runs", tmp_path / "results" / "fedfmc.md"
    started = time.monotonic()

    # Execute
    result = CliRunner().invoke(
        script.main,
        ["--scenarios", str(scenarios), "--out", str(out), "--table", str(table),
         "--records", str(tmp_path / "records")],
    )  # fmt: skip

    # Assert
    assert result.exit_code == 0, result.output
    text = table.read_text()
    for label in ("FedFMC + EWC", "FedFMC without EWC", "FedAvg"):
        assert re.search(rf"^\| {re.escape(label)} \| 1 \|", text, re.M), text
    assert re.fullmatch(
        r"FedFMC three labels, worst archetype at the end: EWC \d+\.\d %, "
        r"no EWC \d+\.\d %, FedAvg \d+\.\d %",
        result.output.splitlines()[-1],
    )
    for name in ("fedfmc-ewc.png", "fedfmc-no-ewc.png", "fedfmc-vs-fedavg.png"):
        assert (table.parent / name).exists()
    print(f"three real runs in {time.monotonic() - started:.0f} s")
