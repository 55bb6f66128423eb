"""The paper's scale (``mcfl_chain/simulation/paper_scale.py``): its declaration and its
plan, on the committed files and on figures made here (no simulation)."""

from __future__ import annotations

from pathlib import Path

import pytest

from mcfl_chain.simulation import campaign, paper_scale, protocol, stats

ROOT = Path(__file__).resolve().parents[2]
HEAD = """[paper_scale]
seeds = [100, 101]
also = ["fedavg"]
order = ["groups", "iid"]
settings = { n_trainers = 38, rounds = 102, samples = "all" }
"""


def final_figures(best: bool, metric: str) -> stats.RunFigures:
    """Two trainers' last-round figures, the best of the scenario's candidates or not."""
    key, value = (
        ("accuracy", 0.9 if best else 0.5)
        if metric == "accuracy"
        else ("loss", 0.1 if best else 0.5)
    )
    lines = [{"round": 1, "trainer_index": i, key: value, "group": "g"} for i in range(2)]
    return stats.run_figures(lines, metric)


@pytest.fixture(scope="module")
def committed():
    """The committed protocol and paper-scale declarations, the paper's scenario files,
    tuning figures in which FedProx is best everywhere, and every method tuned."""
    declaration = protocol.load_protocol(ROOT / protocol.PROTOCOL)
    paper = paper_scale.load_paper_scale(ROOT / paper_scale.PAPER_SCALE)
    configs = campaign.load_scenarios(ROOT / "scenarios" / "paper")
    figures = {
        (campaign.baseline_stem(config), method): {
            seed: final_figures(method == "fedprox", protocol.metric_of(config))
            for seed in declaration.tuning_seeds
        }
        for config in protocol.declared_configs(declaration, configs).values()
        for method in declaration.candidates
    }
    chosen = {"optimiser": "adam-steplr"}
    tuned = {
        s.name: {m: chosen for m in ("mcfl", *declaration.candidates)}
        for s in declaration.scenarios
    }
    return declaration, paper, configs, figures, tuned


def test_the_committed_plan_runs_every_paper_experiment_at_the_paper_size(committed):
    declaration, paper, configs, figures, tuned = committed

    plan = paper_scale.paper_scale_plan(paper, declaration, configs, figures, tuned)

    names = protocol.declared_scenario_names(declaration, configs)
    by_scenario: dict[str, list[campaign.PlannedRun]] = {}
    for run in plan.runs:
        by_scenario.setdefault(names[run.scenario], []).append(run)
    assert list(by_scenario) == list(paper.order)  # largest effect first
    assert not {"dirichlet-0.1", "dirichlet-0.5"} & set(by_scenario)
    for scenario, runs in by_scenario.items():
        assert [r.seed for r in runs] == [s for s in paper.seeds for _ in range(4)], scenario
        assert {(r.seed, r.method) for r in runs} == {
            (s, m) for s in paper.seeds for m in ("mcfl", "fedprox", "fedavg", "local")
        }
        assert {r.config.rounds for r in runs} == {102}
        assert {r.config.samples for r in runs} == {None}
        assert {r.config.optimiser for r in runs} == {"adam-steplr"}
    assert all(r.config.tolerance == "mixed" for r in plan.runs if r.method == "mcfl")
    assert {r.config.n_trainers for r in by_scenario["groups"]} == {38}
    minority = by_scenario["rotation-30-2"][0].config
    assert minority.n_trainers == 32
    assert minority.scenario_params["group_sizes"] == [30, 2]
    assert {r.config.scenario_params["other_dataset"] for r in by_scenario["two-datasets"]} == {
        "mnist"
    }
    assert {r.config.epochs for r in by_scenario["autoencoders"]} == {6}


def test_a_scenario_without_a_comparator_is_left_out_with_a_note(committed):
    declaration, paper, configs, figures, tuned = committed
    stem = campaign.baseline_stem(protocol.declared_configs(declaration, configs)["groups"])
    missing = {key: runs for key, runs in figures.items() if key != (stem, "local")}

    plan = paper_scale.paper_scale_plan(paper, declaration, configs, missing, tuned, check=False)

    assert all(r.scenario not in ("groups", stem) for r in plan.runs)
    assert any(n.startswith("groups: not planned at the paper's size") for n in plan.notes)


def test_the_declaration_parses_its_settings():
    paper = paper_scale.parse_paper_scale(
        HEAD + '[paper_scale.scenarios.iid]\nsettings = { n_trainers = 32 }\nwhy = "x"\n'
    )

    assert paper.seeds == (100, 101) and paper.also == ("fedavg",)
    assert paper.settings_of("groups") == {"n_trainers": 38, "rounds": 102, "samples": None}
    assert paper.settings_of("iid")["n_trainers"] == 32


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (HEAD.replace("n_trainers = 38", "n_trainer = 38"), "not a field"),
        (HEAD.replace("n_trainers = 38", "seed = 3"), "not a field"),
        (HEAD.replace('"all"', '"most"'), "whole number or 'all'"),
        (HEAD.replace('"iid"]', '"groups"]'), "twice"),
        (HEAD.replace('["fedavg"]', '["oracle"]'), "not a deployable baseline"),
        (HEAD.replace("seeds = [100, 101]", "seeds = []"), "whole numbers"),
        (HEAD + "[paper_scale.scenarios.gaussian]\nsettings = {}\n", "not in order"),
        ("[paper_scale\n", "paper-scale"),
    ],
)
def test_a_bad_declaration_is_refused_with_what_to_change(text, message):
    with pytest.raises(protocol.ProtocolError, match=message):
        paper_scale.parse_paper_scale(text)


def test_an_order_naming_an_undeclared_scenario_is_refused(committed):
    declaration, _, configs, figures, tuned = committed
    paper = paper_scale.parse_paper_scale(HEAD.replace('"iid"]', '"mnist-only"]'))

    with pytest.raises(protocol.ProtocolError, match="not scenarios of the protocol"):
        paper_scale.paper_scale_plan(paper, declaration, configs, figures, tuned)


def test_the_status_names_what_is_left_to_run(committed):
    declaration, paper, configs, figures, tuned = committed
    stem = campaign.baseline_stem(protocol.declared_configs(declaration, configs)["iid"])
    partial = {key: runs for key, runs in figures.items() if key[0] != stem}
    plan = paper_scale.paper_scale_plan(paper, declaration, configs, partial, tuned, check=False)
    first = [r for r in plan.runs if r.scenario == "groups"][:2]

    lines = paper_scale.status_lines(plan, {r.name for r in first})

    assert lines[0] == f"2 of {len(plan.runs)} planned runs done."
    groups = next(line for line in lines if line.startswith("To run, groups:"))
    assert f"{first[0].method} s101/102" in groups
    assert lines[-1].startswith("iid: not planned at the paper's size")


def test_the_paper_size_table_pairs_by_seed_beside_the_reduced_size(committed):
    declaration, paper, configs, figures, tuned = committed
    plan = paper_scale.paper_scale_plan(paper, declaration, configs, figures, tuned, check=False)
    stem = campaign.baseline_stem(protocol.declared_configs(declaration, configs)["groups"])
    made = {
        ("groups", "mcfl"): {100: 0.9, 101: 0.8},
        (stem, "fedprox"): {100: 0.85, 101: 0.8},
        (stem, "fedavg"): {100: 0.5},
    }
    at_paper_size = {
        key: {s: final_figures(False, "accuracy") for s in seeds} for key, seeds in made.items()
    }
    for key, seeds in made.items():
        for seed, value in seeds.items():
            lines = [{"round": 1, "trainer_index": i, "accuracy": value} for i in range(2)]
            at_paper_size[key][seed] = stats.run_figures(lines, "accuracy")
    reduced = {
        **figures,
        ("groups", "mcfl"): {100: final_figures(True, "accuracy")},
        (stem, "fedprox"): {**figures[stem, "fedprox"], 100: final_figures(False, "accuracy")},
    }

    rows = paper_scale.scale_rows(plan, declaration, configs, reduced, at_paper_size)
    table = paper_scale.scale_table(rows)

    assert [r.scenario for r in rows] == ["groups"]  # the only scenario with an MCFL run
    assert table[2] == (
        "| groups | 38 × 102 | FedProx | +2.5 [-29.3, +34.3] (+5.0, +0.0) | +40.0 (+40.0) "
        "| +40.0 (+40.0) | not run |"
    )


def test_a_finished_run_names_its_figures_time_and_machine():
    lines = [{"round": 3, "trainer_index": i, "accuracy": a} for i, a in enumerate((0.9, 0.8))]
    summary = {
        "seconds": 600.0,
        "config": {"engine": "batched", "device": "cuda", "n_trainers": 2, "rounds": 50},
        "platform": {"cpu": "EPYC", "cores": 16, "torch": "2.5.1"},
    }

    line = paper_scale.run_line("groups-mcfl-s100", summary, stats.run_figures(lines, "accuracy"))

    assert line == (
        "groups-mcfl-s100: average 85.0 %, worst 80.0 %; 10 min, 6.00 s a trainer-round; "
        "batched engine on cuda (EPYC, 16 cores, torch 2.5.1)."
    )
    assert paper_scale.run_line("x", {}, None) == "x: unknown engine on unknown."
