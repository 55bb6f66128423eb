"""The declared optimiser sweep (``mcfl_chain/simulation/sweep.py``): the grid file, the
plan, the validation figure, the choice, the choices file and how the declared stages
apply it, on figures made here (no simulation)."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import pytest
from click.testing import CliRunner

from mcfl_chain.simulation import protocol, report, sweep
from mcfl_chain.simulation.runner import SimulationConfig

ROOT = Path(__file__).resolve().parents[2]
SMALL = dict(dataset="digits", scenario="iid", n_trainers=3, rounds=2, samples=300)
GRID = """
[sweep]
scenario_order = ["b", "a"]
method_order = ["local"]

[[sweep.points]]
name = "sgd-0.05"
settings = { optimiser = "sgd", lr = 0.05 }

[[sweep.points]]
name = "adam-steplr"
settings = { optimiser = "adam-steplr" }
"""


@pytest.fixture
def declared(protocol_text):
    """Two declared scenarios, their configurations, the grid and the sweep's plan."""
    declaration = protocol.parse_protocol(protocol_text(["a", "b"]))
    configs = [SimulationConfig(name=n, **SMALL) for n in ("a", "b")]
    grid = sweep.parse_grid(GRID)
    plan = sweep.sweep_plan(declaration, grid, configs, check=False)
    return declaration, configs, grid, plan


def test_the_committed_grid_loads_and_plans_every_declared_scenario():
    declaration = protocol.load_protocol(ROOT / protocol.PROTOCOL)
    grid = sweep.load_grid(ROOT / sweep.GRID)

    assert {p.settings["optimiser"] for p in grid.points} == {"sgd", "adam-steplr"}
    assert set(grid.scenario_order) <= {s.name for s in declaration.scenarios}
    assert all(p.why for p in grid.points)


@pytest.mark.parametrize(
    ("points", "message"),
    [
        ("", "at least one"),
        ('name = "x"\nsettings = { momentum = 0.5 }', r"settings \['momentum'\] cannot be swept"),
        ('name = "x"\nsettings = { optimiser = "rmsprop" }', "unknown optimiser preset"),
        ('name = "x"\nsettings = { lr = -1 }', "lr must be a number > 0"),
        ('name = "X y"\nsettings = { lr = 0.1 }', "'name' must be lower-case"),
        (
            'name = "x"\nsettings = { lr = 0.1 }\n[[sweep.points]]\nname = "x"\n'
            "settings = { lr = 0.2 }",
            "two points are named 'x'",
        ),
        (
            'name = "x"\nsettings = { lr = 0.1 }\n[[sweep.points]]\nname = "y"\n'
            "settings = { lr = 0.1 }",
            "'y' has the settings of 'x'",
        ),
    ],  # fmt: skip
    ids=["empty", "momentum", "optimiser", "lr", "name", "twice", "same"],
)
def test_a_malformed_grid_says_what_is_wrong(points, message):
    text = "[sweep]\n" + ("[[sweep.points]]\n" + points if points else "")

    with pytest.raises(sweep.SweepError, match=message):
        sweep.parse_grid(text)


def test_the_plan_runs_every_method_at_every_point_on_the_tuning_seeds_only(declared):
    declaration, _, grid, plan = declared

    assert len(plan.runs) == 2 * 3 * 2 * 2  # scenarios × methods × points × seeds
    assert {r.seed for r in plan.runs} == {0, 1}  # never an evaluation seed
    assert len({r.name for r in plan.runs}) == len(plan.runs)
    for run in plan.runs:
        assert run.name == f"{run.label}-{run.method}-{run.point}-s{run.seed}"
        assert run.config.name == run.name and run.config.seed == run.seed
        assert run.config.optimiser == grid.point(run.point).settings["optimiser"]
        assert (run.config.engine, run.config.device) == ("batched", "cpu")
        assert run.config.strategy == run.method
    # The grid's scenario order, its methods first, then seed by seed, point by point.
    order = [(r.scenario, r.method, r.seed, r.point) for r in plan.runs]
    assert order[:5] == [
        ("b", "local", 0, "sgd-0.05"),
        ("b", "local", 0, "adam-steplr"),
        ("b", "local", 1, "sgd-0.05"),
        ("b", "local", 1, "adam-steplr"),
        ("b", "mcfl", 0, "sgd-0.05"),
    ]
    assert [r.scenario for r in plan.runs] == ["b"] * 12 + ["a"] * 12


def test_the_plan_refuses_an_order_naming_what_is_not_declared(declared):
    declaration, configs, grid, _ = declared

    with pytest.raises(sweep.SweepError, match=r"scenario_order names \['c'\]"):
        sweep.sweep_plan(declaration, sweep.Grid(grid.points, ("c",)), configs, check=False)
    with pytest.raises(sweep.SweepError, match=r"method_order names \['ifca'\]"):
        sweep.sweep_plan(declaration, sweep.Grid(grid.points, (), ("ifca",)), configs)


def line(index: int, scores: list[float | None], round_: int = 1) -> dict:
    """A worker's metrics line: its aggregations scored ``scores`` on validation."""
    aggregations = [
        {"model": f"0x{j}", "selection_metric": s, "accuracy": 0.5} for j, s in enumerate(scores)
    ]
    return {"round": round_, "trainer_index": index, "accuracy": 0.5, "aggregations": aggregations}


def test_the_validation_figure_is_the_deployed_models_after_the_last_round():
    lines = [line(0, [0.9, 0.7], 0), line(0, [0.6, 0.8]), line(1, [0.4])]

    assert sweep.run_validation(lines, "accuracy") == pytest.approx((0.8 + 0.4) / 2)
    # An autoencoder's selection metric is 1 / MSE; the figure is the MSE.
    assert sweep.run_validation(lines, "MSE") == pytest.approx((1 / 0.8 + 1 / 0.4) / 2)
    # A trainer of the last round without a scored model: no figure for the run.
    assert sweep.run_validation([*lines, line(2, [None])], "accuracy") is None
    assert sweep.run_validation([], "accuracy") is None


def test_a_record_keeps_the_deployed_validation_score_and_reads_the_same():
    lines = [line(0, [0.9], 0), line(0, [0.6, 0.8]), line(1, [0.4, 0.3])]

    kept = sweep.record_lines(lines)

    assert [k.get("selection_metric") for k in kept if k["round"] == 1] == [0.8, 0.4]
    assert all("aggregations" not in k for k in kept)
    assert sweep.run_validation(kept, "accuracy") == sweep.run_validation(lines, "accuracy")


POINTS = ["sgd-0.05", "adam-steplr", "sgd-0.01"]


def test_the_choice_is_the_best_mean_over_seeds_with_ties_to_the_grids_order():
    accuracy = {
        "sgd-0.05": {0: 0.70, 1: 0.80},
        "adam-steplr": {0: 0.90, 1: 0.70},
        "sgd-0.01": {0: 0.76, 1: 0.76},
    }
    tie = {
        "sgd-0.05": {0: 0.5, 1: 0.7},
        "adam-steplr": {0: 0.6, 1: 0.6},
        "sgd-0.01": {0: 0.1, 1: 0.1},
    }
    mse = {"sgd-0.05": {0: 0.02}, "adam-steplr": {0: 0.01}, "sgd-0.01": {0: 0.03}}

    best = sweep.choose_point(POINTS, accuracy, [0, 1], "accuracy")
    tied = sweep.choose_point(POINTS, tie, [0, 1], "accuracy")

    assert best.point == "adam-steplr"  # 0.80 against 0.76 and 0.75
    assert best.means == pytest.approx({"sgd-0.05": 0.75, "adam-steplr": 0.8, "sgd-0.01": 0.76})
    assert tied.point == "sgd-0.05" and "tied with adam-steplr" in tied.reason
    assert sweep.choose_point(POINTS, mse, [0], "MSE").point == "adam-steplr"


def test_no_choice_while_a_run_is_missing_and_a_failed_run_ranks_last():
    some = {"sgd-0.05": {0: 0.9, 1: 0.9}, "adam-steplr": {0: 0.5}}
    failed = {"sgd-0.05": {0: 0.9, 1: None}, "adam-steplr": {0: 0.2, 1: 0.2}}
    none = {"sgd-0.05": {0: None}, "adam-steplr": {0: None}}

    waiting = sweep.choose_point(POINTS[:2], some, [0, 1], "accuracy")

    assert waiting.point is None and waiting.missing == ["adam-steplr s1"]
    assert waiting.reason == "1 of 4 sweep runs missing"
    assert sweep.choose_point(POINTS[:2], failed, [0, 1], "accuracy").point == "adam-steplr"
    assert sweep.choose_point(POINTS[:2], none, [0], "accuracy").point is None


def finish(run: sweep.SweepRun, folder: Path, score: float) -> None:
    """A finished run directory of ``run`` whose trainers all score ``score`` on
    validation in the last round."""
    run_dir = folder / run.name
    run_dir.mkdir(parents=True)
    (run_dir / "config.json").write_text(json.dumps(asdict(run.config)))
    lines = [line(i, [score, score / 2]) for i in range(run.config.n_trainers)]
    (run_dir / "metrics.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    report.write_summary(run_dir, lines, [], {"seconds": 1.0, "metric": "accuracy"})


def test_the_choices_file_is_applied_to_the_declared_stages(declared, tmp_path):
    declaration, configs, grid, plan = declared
    # Scenario b done: adam-steplr best for local, sgd-0.05 for the others; a: partial.
    for run in plan.runs:
        if run.scenario == "b" or run.method == "local":
            best = "adam-steplr" if run.method == "local" else "sgd-0.05"
            finish(run, tmp_path / "runs", 0.8 if run.point == best else 0.6)
    figures = sweep.sweep_figures(plan, [tmp_path / "runs"])
    choices = sweep.sweep_choices(declaration, grid, plan, figures)
    path = tmp_path / "tuned.toml"
    sweep.write_tuned(path, sweep.tuned_text(grid, choices))

    tuned = sweep.load_tuned(path)
    tuning = protocol.declared_plan(declaration, configs, "tuning", check=False, tuned=tuned)

    assert tuned["b"] == {
        "local": {"optimiser": "adam-steplr"},
        "mcfl": {"optimiser": "sgd", "lr": 0.05},
        "fedavg": {"optimiser": "sgd", "lr": 0.05},
    }
    assert tuned["a"] == {"local": {"optimiser": "adam-steplr"}}
    assert "#   a mcfl: 4 of 4 sweep runs missing" in path.read_text()
    assert {r.scenario for r in tuning.runs} == {"b"}
    assert {(r.method, r.config.optimiser) for r in tuning.runs} == {
        ("local", "adam-steplr"),
        ("mcfl", "sgd"),
        ("fedavg", "sgd"),
    }
    assert any(
        n.startswith("a: not planned, the optimiser sweep has not chosen") for n in tuning.notes
    )
    assert not protocol.declared_plan(declaration, configs, "tuning", check=False, tuned={}).runs


def test_a_malformed_choices_file_says_what_is_wrong(tmp_path):
    path = tmp_path / "tuned.toml"
    path.write_text('[a.fedavg]\noptimiser = "nope"\n')

    with pytest.raises(sweep.SweepError, match="unknown optimiser preset 'nope'"):
        sweep.load_tuned(path)
    assert sweep.load_tuned(tmp_path / "absent.toml") == {}


def test_declared_sweep_lists_its_plan_and_tuning_refuses_until_it_has_chosen(
    load_script, tmp_path, protocol_text
):
    script = load_script("run_experiments")
    scenarios = tmp_path / "scenarios"
    scenarios.mkdir()
    for name in ("a", "b"):
        (scenarios / f"{name}.toml").write_text(
            f'name = "{name}"\ndataset = "digits"\nscenario = "iid"\nn_trainers = 3\n'
            "rounds = 2\nsamples = 300\n"
        )
    (tmp_path / "protocol.toml").write_text(protocol_text(["a", "b"]))
    (tmp_path / "sweep.toml").write_text(GRID)
    args = ["--scenarios", str(scenarios), "--protocol", str(tmp_path / "protocol.toml")]
    args += ["--tuned", str(tmp_path / "tuned.toml"), "--list"]

    listed = CliRunner().invoke(
        script.main,
        ["--declared", "sweep", "--sweep-grid", str(tmp_path / "sweep.toml"), *args]
        + ["--out", str(tmp_path / "o"), "--records", str(tmp_path / "r")],
    )
    tuning = CliRunner().invoke(script.main, ["--declared", "tuning", *args])

    assert listed.exit_code == 0, listed.output
    assert "24 sweep runs planned" in listed.output and "b-local-adam-steplr-s1" in listed.output
    assert "on engine batched, device cpu" in listed.output
    assert "0 of 6 (scenario, method)s chosen" in listed.output
    assert not (tmp_path / "tuned.toml").exists()  # --list writes nothing
    assert tuning.exit_code == 1
    assert "nothing to run" in tuning.output
    assert "a: not planned, the optimiser sweep has not chosen" in " ".join(tuning.output.split())
