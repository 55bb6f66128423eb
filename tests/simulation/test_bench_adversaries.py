"""The adversaries benchmark (``mcfl_chain/simulation/ab.py`` and its command
line, ``scripts/bench_adversaries.py``) on hand-made run directories: the runs it plans under
``--registration``, its table of registration policies and its sample-inflation note."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest
from click.testing import CliRunner

from mcfl_chain.simulation import adversarial
from mcfl_chain.simulation import attack_benchmark as ab
from mcfl_chain.storage.errors import BlobNotFound

HONEST = (0, 1, 2)
ETH = 10**18


def _record(policy: str, registered: list[int], deposit: int = 0) -> dict:
    """A summary's ``registration``, for Sybils 3 and 4."""
    return {"policy": policy, "deposit_wei": deposit, "trainers": 3 + len(registered),
            "refused": [], "sybils": [3, 4], "sybils_registered": registered,
            "deposit_locked_wei": deposit * len(registered),
            "deposits_held_wei": deposit * (3 + len(registered))}  # fmt: skip


def _write_run(
    run: Path,
    accuracies: tuple[float, ...],
    adversary: str | None = None,
    adversaries: tuple[int, ...] = (),
    adopters: tuple[int, ...] = (),
    registration: dict | None = None,
    declared: int | None = None,
) -> None:
    """A finished two-round run: honest trainers 0-2 score ``accuracies`` in round 1,
    ``adversaries`` play ``adversary``; in round 1 the ``adopters`` train model S, made
    only of the adversaries' updates, the others model H. Honest updates declare 200
    samples, adversarial ones ``declared`` (default 200)."""
    run.mkdir(parents=True)
    lines = []
    for round_ in (0, 1):
        for index in (*HONEST, *adversaries):
            honest = index in HONEST
            lines.append({
                "round": round_, "trainer_index": index, "trainer_id": index + 1,
                "trainer": f"0x{index:040x}", "adversary": None if honest else adversary,
                "accuracy": accuracies[index] if honest else 0.1,
                "trained": ["S" if index in adopters or not honest else "H"],
            })  # fmt: skip
    (run / "metrics.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    updates = [
        {"id": str(10 + index), "trainer_id": index + 1,
         "num_samples": 200 if index in HONEST else (declared or 200)}
        for index in (*HONEST, *adversaries)
    ]  # fmt: skip
    models = [
        {"id": "S", "updates": [str(10 + i) for i in adversaries]},
        {"id": "H", "updates": [str(10 + i) for i in HONEST]},
    ]
    (run / "dag.json").write_text(json.dumps({"models": models, "updates": updates}))
    (run / "deployment.json").write_text(json.dumps({"max_samples": 1_000_000}))
    summary = {"seconds": 1.0} if registration is None else {"registration": registration}
    (run / "summary.json").write_text(json.dumps(summary))


@pytest.fixture
def bench(load_script, tmp_path):
    """The script, a scenarios folder with ``groups`` (5 trainers) and an output folder."""
    scenarios = tmp_path / "scenarios"
    scenarios.mkdir()
    (scenarios / "groups.toml").write_text(
        'name = "groups"\ndataset = "digits"\nscenario = "iid"\nn_trainers = 5\n'
        "rounds = 2\nsamples = 300\n"
    )
    return load_script("bench_adversaries"), scenarios, tmp_path / "runs"


def _plan(script, scenarios, policies=("allowlist", "deposit")):
    return ab.plan(
        scenarios, ("groups",), ("mcfl-tol1",),
        ("label-flip:0.2", "sample-inflation:0.2", "sybil:0.4"), [0], 2, policies,
    )  # fmt: skip


def test_registration_policies_add_runs_of_the_sybil_attacks_only(bench):
    # Prepare
    script, scenarios, _ = bench

    # Execute
    runs = _plan(script, scenarios)

    # Assert: the policies as suffixes of the Sybil runs, set in their configs; one clean
    # run with open registration, against which every drop is measured.
    assert [(r.name, r.config.registration) for r in runs] == [
        ("groups-mcfl-tol1-clean-s0", "open"),
        ("groups-mcfl-tol1-label-flip0.2-s0", "open"),
        ("groups-mcfl-tol1-sample-inflation0.2-s0", "open"),
        ("groups-mcfl-tol1-sybil0.4-s0", "open"),
        ("groups-mcfl-tol1-sybil0.4-allowlist-s0", "allowlist"),
        ("groups-mcfl-tol1-sybil0.4-deposit-s0", "deposit"),
    ]
    assert all(r.config.name == r.name for r in runs)
    assert {r.clean for r in runs} == {"groups-mcfl-tol1-clean-s0"}
    assert [r.name for r in _plan(script, scenarios, ())] == [r.name for r in runs[:4]]


def test_the_policy_table_sets_the_sybil_runs_side_by_side(bench):
    # Prepare: clean 0.9/0.8/0.85; the open Sybils (2 registered) are adopted by two
    # honest trainers and cost 30 points at worst; under the allowlist one identity
    # registered and nobody adopted it; under deposit both paid 1 ETH, 2 locked (a run made
    # before the record existed stands for open: its Sybils' metrics count).
    script, scenarios, out = bench
    runs = _plan(script, scenarios)
    _write_run(out / "groups-mcfl-tol1-clean-s0", (0.9, 0.8, 0.85))
    sybil = dict(adversary="sybil", adversaries=(3, 4))
    _write_run(out / "groups-mcfl-tol1-sybil0.4-s0", (0.9, 0.5, 0.6), adopters=(0, 1), **sybil)
    _write_run(
        out / "groups-mcfl-tol1-sybil0.4-allowlist-s0",
        (0.9, 0.8, 0.8),
        registration=_record("allowlist", [3]),
        adversary="sybil",
        adversaries=(3,),
    )
    _write_run(
        out / "groups-mcfl-tol1-sybil0.4-deposit-s0",
        (0.9, 0.7, 0.85),
        adopters=(2,),
        registration=_record("deposit", [3, 4], ETH),
        **sybil,
    )

    # Execute
    lines, drops = ab.measure(runs, ab.gather(runs, out, out.parent / "records"))

    # Assert: the first table keeps one Sybil row, the open one; the second has a row
    # per policy, in the order open, allowlist, deposit.
    first = [line for line in lines[2:] if line.startswith("| groups")][:2]
    assert [line.split(" | ")[2] for line in first] == ["clean", "sybil:0.4"]
    start = lines.index("### Registration policies against Sybils")
    assert lines[start + 2 : start + 7] == [
        "| scenario | method | attack | policy | seeds | Sybil identities registered | "
        "stake locked (ETH) | Sybil adoption % | honest worst drop (pts) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
        "| groups | mcfl-tol1 | sybil:0.4 | open | 1 | 2 of 2 | 0 | 66.7 | +30.0 |",
        "| groups | mcfl-tol1 | sybil:0.4 | allowlist | 1 | 1 of 2 | 0 | 0.0 | +0.0 |",
        "| groups | mcfl-tol1 | sybil:0.4 | deposit | 1 | 2 of 2 | 2 | 33.3 | +10.0 |",
    ]
    # and only the open run's drop counts among the benchmark's drops
    assert {key: value for key, value in drops.items() if value} == {
        ("mcfl-tol1", "sybil:0.4"): [pytest.approx(30.0)]
    }


def test_sample_caps_add_runs_of_the_inflation_attacks_only(bench):
    # Prepare
    script, scenarios, _ = bench

    # Execute
    runs = ab.plan(
        scenarios, ("groups",), ("mcfl-tol1",), ("label-flip:0.2", "sample-inflation:0.2"),
        [0], 2, (), (250,),
    )  # fmt: skip

    # Assert: the cap as a suffix and in the config; drops against the default-cap clean run
    assert [(r.name, r.config.max_samples) for r in runs] == [
        ("groups-mcfl-tol1-clean-s0", None),
        ("groups-mcfl-tol1-label-flip0.2-s0", None),
        ("groups-mcfl-tol1-sample-inflation0.2-s0", None),
        ("groups-mcfl-tol1-sample-inflation0.2-cap250-s0", 250),
    ]
    assert {r.clean for r in runs} == {"groups-mcfl-tol1-clean-s0"}
    assert [r.variant for r in runs] == [False, False, False, True]


def test_the_sample_cap_table_gives_the_claims_the_weight_and_the_drops(bench):
    # Prepare: trainer 4 declares the cap, the honest trainers 200 samples each; under
    # the default cap the honest trainers lose 40 points, under a cap of 250 nothing.
    script, scenarios, out = bench
    runs = ab.plan(
        scenarios, ("groups",), ("mcfl-tol1",), ("sample-inflation:0.2",), [0], 2, (), (250,)
    )
    _write_run(out / "groups-mcfl-tol1-clean-s0", (0.9, 0.8, 0.85))
    _write_run(
        out / "groups-mcfl-tol1-sample-inflation0.2-s0",
        (0.5, 0.4, 0.45),
        adversary="sample-inflation",
        adversaries=(4,),
        declared=1_000_000,
    )
    capped = out / "groups-mcfl-tol1-sample-inflation0.2-cap250-s0"
    _write_run(
        capped, (0.9, 0.8, 0.85), adversary="sample-inflation", adversaries=(4,), declared=250
    )
    (capped / "deployment.json").write_text(json.dumps({"max_samples": 250}))

    # Execute
    lines, drops = ab.measure(runs, ab.gather(runs, out, out.parent / "records"))

    # Assert: the capped run is in the cap table only
    table = lines[lines.index("### Sample cap against inflation") :]
    assert (
        "| groups | mcfl-tol1 | sample-inflation:0.2 | 250 | 1 | 250 | 200 | 1.2 | +0.0 | +0.0 |"
        in table
    )
    assert (
        "| groups | mcfl-tol1 | sample-inflation:0.2 | 1,000,000 | 1 | 1,000,000 | 200 | "
        "5,000.0 | +40.0 | +40.0 |"
    ) in table
    assert drops[("mcfl-tol1", "sample-inflation:0.2")] == [pytest.approx(40.0)]
    assert "### Registration policies against Sybils" not in lines


def test_list_and_report_only_keep_working_and_the_last_line_is_unchanged(bench, tmp_path):
    # Prepare: a label-flip run and its clean run, and an allowlisted Sybil run.
    script, scenarios, out = bench
    _write_run(out / "groups-mcfl-tol1-clean-s0", (0.9, 0.8, 0.85))
    _write_run(
        out / "groups-mcfl-tol1-label-flip0.2-s0",
        (0.9, 0.7, 0.85),
        adversary="label-flip",
        adversaries=(4,),
    )
    _write_run(
        out / "groups-mcfl-tol1-sybil0.4-allowlist-s0",
        (0.9, 0.8, 0.8),
        registration=_record("allowlist", [3]),
        adversary="sybil",
        adversaries=(3,),
    )
    table = tmp_path / "adversaries.md"
    common = ["--matrix", "exploratory", "--scenarios", str(scenarios), "--only", "groups",
              "--methods", "mcfl-tol1",
              "--attacks", "label-flip:0.2", "--attacks", "sybil:0.4", "--seeds", "0",
              "--registration", "allowlist", "--out", str(out), "--table", str(table),
              "--records", str(tmp_path / "records")]  # fmt: skip

    # Execute
    listed = CliRunner().invoke(script.main, [*common, "--list"])
    reported = CliRunner().invoke(script.main, [*common, "--report-only"])

    # Assert
    assert listed.exit_code == 0, listed.output
    assert "done     groups-mcfl-tol1-sybil0.4-allowlist-s0" in listed.output
    assert "4 runs planned" in listed.output and "3 done" in listed.output
    assert reported.exit_code == 0, reported.output
    assert reported.output.splitlines()[-1] == (
        "worst honest accuracy drop, MCFL best defence, 20% label-flip: 10.0 pts"
    )
    written = table.read_text()
    assert "| groups | mcfl-tol1 | sybil:0.4 | allowlist | 1 | 1 of 2 | 0 | 0.0 | +0.0 |" in (
        written
    )


def _report(script, scenarios, out, records, table, *extra):
    args = ["--matrix", "exploratory", "--scenarios", str(scenarios), "--only", "groups",
            "--methods", "mcfl-tol1",
            "--attacks", "label-flip:0.2", "--attacks", "sybil:0.4", "--seeds", "0",
            "--out", str(out), "--table", str(table), "--records", str(records),
            *extra]  # fmt: skip
    return CliRunner().invoke(script.main, args)


def test_the_tables_are_made_again_from_the_records_without_the_run_directories(bench, tmp_path):
    # Prepare: three finished runs, reported once (which keeps their records), then the
    # run directories removed, as on a fresh clone.
    script, scenarios, out = bench
    _write_run(out / "groups-mcfl-tol1-clean-s0", (0.9, 0.8, 0.85))
    _write_run(
        out / "groups-mcfl-tol1-label-flip0.2-s0",
        (0.9, 0.6, 0.85),
        adversary="label-flip",
        adversaries=(4,),
    )
    _write_run(
        out / "groups-mcfl-tol1-sybil0.4-s0",
        (0.9, 0.5, 0.6),
        adopters=(0, 1),
        adversary="sybil",
        adversaries=(3, 4),
    )
    records, table = tmp_path / "records", tmp_path / "adversaries.md"
    first = _report(script, scenarios, out, records, table, "--report-only")
    written = table.read_text()
    shutil.rmtree(out)

    # Execute
    again = _report(script, scenarios, out, records, table, "--report-only")
    listed = _report(script, scenarios, out, records, table, "--list")

    # Assert: one record per finished run, the same table and last line from them, and
    # the runs count as done (not made again).
    assert first.exit_code == 0, first.output
    assert sorted(p.name for p in records.iterdir()) == [
        "groups-mcfl-tol1-clean-s0.json",
        "groups-mcfl-tol1-label-flip0.2-s0.json",
        "groups-mcfl-tol1-sybil0.4-s0.json",
    ]
    assert again.exit_code == 0, again.output
    assert table.read_text() == written
    assert "| groups | mcfl-tol1 | sybil:0.4 | 1 | 50.0 | 66.7 | +30.0 | +18.3 | – | 66.7 |" in (
        written
    )
    assert (
        again.output.splitlines()[-1]
        == first.output.splitlines()[-1]
        == ("worst honest accuracy drop, MCFL best defence, 20% label-flip: 20.0 pts")
    )
    assert "3 runs planned" in listed.output and "3 done" in listed.output


def test_a_record_keeps_every_measure_through_json(bench):
    # Prepare: a record with every optional measure set
    script, _, _ = bench
    record = ab.Record(
        adversarial.HonestFinal(9, {0: 0.75, 2: 0.5}, stale={2: 3}),
        backdoor={0: 0.125, 2: 0.0},
        sybil_adoption=0.25,
        registration=adversarial.SybilRegistration("deposit", 2, 1, ETH),
        claims=adversarial.SampleClaims(1500, 1500, 600.0),
    )
    run = ab.Run("groups", "mcfl-tol1", "backdoor:0.2", 0, None)

    # Execute
    text = record.to_json(run)

    # Assert
    assert json.loads(text)["run"] == "groups-mcfl-tol1-backdoor0.2-s0"
    assert ab.Record.from_json(text) == record


def test_a_damaged_record_or_an_unwritable_records_folder_ends_in_one_line(bench, tmp_path):
    # Prepare: a clean run whose record cannot be read, and a records folder inside
    # a file.
    script, scenarios, out = bench
    records, table = tmp_path / "records", tmp_path / "adversaries.md"
    records.mkdir()
    (records / "groups-mcfl-tol1-clean-s0.json").write_text("{not json")
    blocked = tmp_path / "a-file"
    blocked.write_text("")

    # Execute
    damaged = _report(script, scenarios, out, records, table, "--report-only")
    _write_run(out / "groups-mcfl-tol1-clean-s0", (0.9, 0.8, 0.85))
    unwritable = _report(script, scenarios, out, blocked / "records", table, "--report-only")

    # Assert: each a usage message naming the file or folder and what to do
    assert damaged.exit_code == 1
    assert "groups-mcfl-tol1-clean-s0.json is not a record" in damaged.output
    assert "delete it to make the run again" in damaged.output
    assert unwritable.exit_code == 1
    assert "cannot write the record of groups-mcfl-tol1-clean-s0" in unwritable.output
    assert "give --records a folder you can write to" in unwritable.output
    assert "Traceback" not in damaged.output + unwritable.output


def test_a_slice_of_the_benchmark_writes_the_whole_table_from_the_records(bench, tmp_path):
    # Prepare: label flipping reported (so recorded) with its clean run; then only a
    # Sybil run is in the run folder, and the command is limited to the Sybil attack.
    script, scenarios, out = bench
    records, table = tmp_path / "records", tmp_path / "adversaries.md"
    _write_run(out / "groups-mcfl-tol1-clean-s0", (0.9, 0.8, 0.85))
    _write_run(
        out / "groups-mcfl-tol1-label-flip0.2-s0",
        (0.9, 0.6, 0.85),
        adversary="label-flip",
        adversaries=(4,),
    )
    _report(script, scenarios, out, records, table, "--report-only")
    shutil.rmtree(out)
    _write_run(
        out / "groups-mcfl-tol1-sybil0.4-s0",
        (0.9, 0.5, 0.6),
        adopters=(0, 1),
        adversary="sybil",
        adversaries=(3, 4),
    )
    args = ["--matrix", "exploratory", "--scenarios", str(scenarios), "--only", "groups",
            "--methods", "mcfl-tol1",
            "--attacks", "sybil:0.4", "--seeds", "0", "--out", str(out), "--table",
            str(table), "--records", str(records), "--report-only"]  # fmt: skip

    # Execute
    result = CliRunner().invoke(script.main, args)

    # Assert: the recorded label flipping keeps its row, in the attacks' order, and the
    # last line still measures it
    assert result.exit_code == 0, result.output
    first_table = table.read_text().split("\n\n")[0].splitlines()[2:]
    rows = [line.split(" | ")[2] for line in first_table]
    assert rows == ["clean", "label-flip:0.2", "sybil:0.4"]
    assert result.output.splitlines()[-1] == (
        "worst honest accuracy drop, MCFL best defence, 20% label-flip: 20.0 pts"
    )


def test_a_record_under_another_name_is_refused(bench, tmp_path):
    # Prepare: a record renamed by hand
    script, scenarios, out = bench
    records, table = tmp_path / "records", tmp_path / "adversaries.md"
    _write_run(out / "groups-mcfl-tol1-clean-s0", (0.9, 0.8, 0.85))
    _report(script, scenarios, out, records, table, "--report-only")
    shutil.rmtree(out)
    (records / "groups-mcfl-tol1-clean-s0.json").rename(records / "groups-fedavg-clean-s0.json")

    # Execute
    result = _report(script, scenarios, out, records, table, "--report-only")

    # Assert
    assert result.exit_code == 1
    assert "holds the record of groups-mcfl-tol1-clean-s0" in result.output
    assert "rename it groups-mcfl-tol1-clean-s0.json" in result.output


def test_a_report_without_any_run_or_record_leaves_the_table_alone(bench, tmp_path):
    # Prepare: a table from earlier, nothing to measure
    script, scenarios, out = bench
    records, table = tmp_path / "records", tmp_path / "adversaries.md"
    table.write_text("| the table of an earlier campaign |\n")

    # Execute
    result = _report(script, scenarios, out, records, table, "--report-only")

    # Assert
    assert result.exit_code == 1
    assert "no finished run in" in result.output and "left as it is" in result.output
    assert table.read_text() == "| the table of an earlier campaign |\n"


def test_runs_with_trainers_left_without_a_last_model_are_named_under_the_table(bench):
    # Prepare: a clean run, and an attacked one in which honest trainers 0 and 1 held
    # their round-3 model to the end (round 9).
    script, _, _ = bench
    clean = ab.Run("groups", "fedavg", "clean", 1, None)
    attacked = ab.Run("groups", "fedavg", "sign-flip:0.4", 1, None)
    found = {
        clean.name: ab.Record(adversarial.HonestFinal(9, {0: 0.5, 1: 0.5, 2: 0.5})),
        attacked.name: ab.Record(
            adversarial.HonestFinal(9, {0: 0.0, 1: 0.25, 2: 0.5}, stale={0: 3, 1: 3})
        ),
    }

    # Execute
    lines, _ = ab.measure([clean, attacked], found)

    # Assert: the row keeps both trainers, and the note names the run
    assert "| groups | fedavg | sign-flip:0.4 | 1 | 0.0 | 25.0 | +50.0 | +25.0 | – | – |" in lines
    note = [line for line in lines if "without a model in the last round" in line]
    assert len(note) == 1 and (
        "`groups-fedavg-sign-flip0.4-s1` (2 of 3 honest trainers, last model in round 3, "
        "run ends in round 9)" in note[0]
    )
    clean_only, _ = ab.measure([clean], found)
    assert not any("without a model" in line for line in clean_only)


def test_a_clean_run_missing_an_honest_trainer_ends_in_one_line(bench, tmp_path):
    # Prepare: the clean run's metrics lost trainer 2, an honest trainer of the attack.
    script, scenarios, out = bench
    clean = out / "groups-mcfl-tol1-clean-s0"
    _write_run(clean, (0.9, 0.8, 0.85))
    metrics = clean / "metrics.jsonl"
    kept = [line for line in metrics.read_text().splitlines() if '"trainer_index": 2' not in line]
    metrics.write_text("\n".join(kept) + "\n")
    attacked = out / "groups-mcfl-tol1-label-flip0.2-s0"
    _write_run(attacked, (0.9, 0.6, 0.85), adversary="label-flip", adversaries=(4,))

    # Execute
    result = _report(
        script, scenarios, out, tmp_path / "records", tmp_path / "t.md", "--report-only"
    )

    # Assert: no traceback; the runs, the trainer and what to do are named
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert "groups-mcfl-tol1-label-flip0.2-s0 against groups-mcfl-tol1-clean-s0" in result.output
    assert "honest trainer(s) [2]" in result.output
    assert "delete groups-mcfl-tol1-clean-s0.json" in result.output


def test_gather_takes_the_record_of_a_finished_run_whose_blobs_were_pruned(tmp_path, monkeypatch):
    # Prepare: a finished run directory that can no longer be measured (its blobs were
    # deleted: measuring a backdoor needs them), with and without a record.
    run = SimpleNamespace(name="groups-mcfl-plus-backdoor0.2-s0")
    (tmp_path / run.name).mkdir()
    (tmp_path / run.name / "summary.json").write_text("{}")

    def pruned(*_):
        raise BlobNotFound("blob b is not in the local store")

    monkeypatch.setattr(ab, "keep_record", pruned)
    record = object()

    # Execute, assert: the record stands in; without one, the error says what is missing.
    assert ab.gather([run], tmp_path, tmp_path, {run.name: (run, record)}) == {run.name: record}
    with pytest.raises(BlobNotFound, match="not in the local store"):
        ab.gather([run], tmp_path, tmp_path, {})
