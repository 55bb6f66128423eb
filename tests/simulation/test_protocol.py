"""The declared evaluation (``mcfl_chain/simulation/protocol.py``): the declaration file,
the comparator rule, the plan of ``run_experiments.py --declared``, the verdicts and the
table "MCFL against the best alternative", on figures made here (no simulation)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from mcfl_chain.simulation import protocol, results_report, stats
from mcfl_chain.simulation.runner import SimulationConfig

ROOT = Path(__file__).resolve().parents[2]
EVALUATION = list(range(100, 110))
SMALL = dict(
    dataset="digits",
    scenario="groups",
    scenario_params={"n_groups": 2},
    n_trainers=4,
    rounds=2,
    samples=300,
)


def declaration_text(scenarios: dict[str, str], **head: object) -> str:
    """A protocol file: ``scenarios`` maps each name (its file too) to its hypothesis."""
    values = {
        "alpha": 0.05,
        "tuning_seeds": [0, 1, 2],
        "evaluation_seeds": EVALUATION,
        "primary_endpoint": "mean-over-trainers",
        "comparator_rule": "best-mean-on-tuning-seeds",
        "candidates": ["fedavg", "local"],
        "evaluation_also": ["fedavg"],
        "correction": "holm",
        "equivalence_test": "tost",
        "margin_points": 1.0,
        "margin_mse": 0.0005,
        "tolerance": "mixed",
        "max_standard_error_points": 1.5,
        **head,
    }
    lines = ["[protocol]"]
    lines += [f"{k} = {v!r}".replace("'", '"') for k, v in values.items() if v is not None]
    for name, hypothesis in scenarios.items():
        lines += [
            f'[scenarios."{name}"]',
            f'file = "{name}"',
            f'hypothesis = "{hypothesis}"',
            "paper_claim = true",
        ]
    return "\n".join(lines) + "\n"


def figures(values: list[float], metric: str = "accuracy", gas: float | None = None):
    """A run's final figures: trainer i scores ``values[i]``."""
    key = "accuracy" if metric == "accuracy" else "loss"
    lines = [
        {"round": 1, "trainer_index": i, key: v, "group": "g", "model": "m", "gas": gas}
        for i, v in enumerate(values)
    ]
    return stats.run_figures(lines, metric)


def alternating(amplitude: float, seed: int) -> float:
    return amplitude if seed % 2 else -amplitude


# MCFL minus the comparator, per evaluation seed, for each verdict the rule can give.
DESIGNS = {
    "ahead": lambda s: 0.05 + alternating(0.002, s) * (s % 3 + 1),
    "behind": lambda s: -0.05 + alternating(0.002, s) * (s % 3 + 1),
    "level": lambda s: alternating(0.001, s),
    "within": lambda s: -0.003 + alternating(0.0005, s),  # behind, within the margin
    "unresolved": lambda s: 0.005 + alternating(0.05, s) * (s % 3 + 1),
}


@pytest.fixture
def design():
    """Declared scenarios (one per design, one with tuning runs only, one with none),
    their configurations and the finished runs' figures; on ``ahead`` local training is
    the best candidate, FedAvg elsewhere."""
    names = [*DESIGNS, "tuned-only", "untouched"]
    declaration = protocol.parse_protocol(
        declaration_text({n: "equivalence" if n == "level" else "superiority" for n in names})
    )
    configs = [SimulationConfig(name=n, **SMALL) for n in names]
    found: dict[tuple[str, str], dict[int, stats.RunFigures]] = {}
    for name in names[:-1]:
        best = "local" if name == "ahead" else "fedavg"
        for seed in (0, 1, 2):
            for method in ("fedavg", "local"):
                level = 0.8 if method == best else 0.7
                found.setdefault((name, method), {})[seed] = figures([level] * 4)
    for name, difference in DESIGNS.items():
        best = "local" if name == "ahead" else "fedavg"
        for seed in EVALUATION:
            base = [0.6, 0.7, 0.8, 0.9]
            found.setdefault((name, best), {})[seed] = figures(base, gas=2e5)
            mine = [b + difference(seed) for b in base]
            found.setdefault((name, "mcfl"), {})[seed] = figures(mine, gas=3e5)
    return declaration, configs, found


def every_method_tuned(declaration: protocol.Declaration) -> protocol.Tuned:
    """The sweep's choices with every (scenario, method) chosen: SGD at lr 0.05."""
    chosen = {"optimiser": "sgd", "lr": 0.05}
    methods = ("mcfl", *declaration.candidates)
    return {s.name: {m: chosen for m in methods} for s in declaration.scenarios}


def tuned_file(path: Path, declaration: protocol.Declaration) -> Path:
    """A choices file (docs/results/tuned.toml's form) with every method chosen."""
    lines = []
    for scenario, methods in every_method_tuned(declaration).items():
        for method, fields in methods.items():
            lines += [f'["{scenario}".{method}]']
            lines += [f"{k} = {v!r}".replace("'", '"') for k, v in fields.items()]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_the_committed_declaration_loads_and_plans_every_scenario():
    declaration = protocol.load_protocol(ROOT / protocol.PROTOCOL)

    assert len(declaration.evaluation_seeds) >= 10
    assert not set(declaration.evaluation_seeds) & set(declaration.tuning_seeds)
    assert declaration.family_size == 2 * len(declaration.scenarios)
    files = {p.stem for p in (ROOT / "scenarios" / "paper").glob("*.toml")}
    assert {s.file for s in declaration.scenarios} <= files


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[protocol\n", "Expected ']'"),
        (declaration_text({"a": "superiority"}, evaluation_seeds=[2, *EVALUATION]), "both tuning"),
        (declaration_text({"a": "superiority"}, evaluation_seeds=EVALUATION[:9]), "at least 10"),
        (declaration_text({"a": "better"}), "hypothesis must be one of"),
        (declaration_text({"a": "superiority"}, candidates=["fedavg", "nope"]), "not a baseline"),
        (declaration_text({"a": "superiority"}, candidates=["oracle"]), "not a baseline"),
        (declaration_text({"a": "superiority"}, margin_points=0), "margins must be > 0"),
        (declaration_text({"a": "superiority"}, alpha=None), "missing 'alpha'"),
        (declaration_text({"a": "superiority"}, correction="bonferroni"), "only one implemented"),
        (declaration_text({}), "missing 'scenarios'"),
    ],
    ids=[
        "toml",
        "overlap",
        "few-seeds",
        "hypothesis",
        "method",
        "oracle",
        "margin",
        "alpha",
        "holm",
        "no-scenario",
    ],
)
def test_a_malformed_declaration_says_what_is_wrong(text, message):
    with pytest.raises(protocol.ProtocolError, match=message):
        protocol.parse_protocol(text)


def test_a_missing_declaration_is_named(tmp_path):
    with pytest.raises(protocol.ProtocolError, match="no protocol file"):
        protocol.load_protocol(tmp_path / "protocol.toml")


def test_the_comparator_is_the_best_mean_on_the_tuning_seeds():
    runs = {
        "fedavg": {s: figures([0.70, 0.72]) for s in (0, 1, 2)},
        "local": {0: figures([0.9, 0.9]), 1: figures([0.5, 0.5]), 2: figures([0.6, 0.6])},
    }
    mse = {m: {s: figures([v, v], "MSE") for s in (0, 1)} for m, v in (("a", 0.02), ("b", 0.01))}

    chosen = protocol.choose_comparator(["fedavg", "local"], runs, [0, 1, 2], "accuracy")
    waiting = protocol.choose_comparator(["fedavg", "local"], runs, [0, 1, 2, 3], "accuracy")

    assert chosen.method == "fedavg"  # 0.71 on average against local's 0.667
    assert chosen.means == pytest.approx({"fedavg": 0.71, "local": 2 / 3})
    assert protocol.choose_comparator(["a", "b"], mse, [0, 1], "MSE").method == "b"
    assert waiting.method is None and waiting.missing == ["fedavg s3", "local s3"]


def test_the_declared_plan_tunes_every_candidate_then_evaluates_the_chosen_one(design):
    declaration, configs, found = design

    tuned = every_method_tuned(declaration)
    tuning = protocol.declared_plan(declaration, configs, "tuning", check=False, tuned=tuned)
    evaluation = protocol.declared_plan(
        declaration, configs, "evaluation", found, check=False, tuned=tuned
    )

    assert {(r.method, r.seed) for r in tuning.runs if r.scenario == "ahead"} == {
        (m, s) for m in ("mcfl", "fedavg", "local") for s in (0, 1, 2)
    }
    assert all(r.config.tolerance == "mixed" for r in tuning.runs if r.method == "mcfl")
    ahead = {(r.method, r.seed) for r in evaluation.runs if r.scenario == "ahead"}
    assert ahead == {(m, s) for m in ("mcfl", "local", "fedavg") for s in EVALUATION}
    assert {r.method for r in evaluation.runs if r.scenario == "level"} == {"mcfl", "fedavg"}
    assert [r.seed for r in evaluation.runs] == sorted(r.seed for r in evaluation.runs)
    assert not [r for r in evaluation.runs if r.scenario == "untouched"]
    assert any(n.startswith("untouched: not planned") for n in evaluation.notes)


@pytest.mark.parametrize(
    ("different", "equivalent", "mean", "wording", "outcome"),
    [
        (True, False, 0.02, "MCFL ahead", protocol.Outcome.AHEAD),
        (True, False, -0.02, "MCFL behind", protocol.Outcome.BEHIND),
        (True, True, -0.002, "MCFL behind, by less than the ±1 point margin", "BEHIND"),
        (False, True, 0.001, "level (equivalent within ±1 point)", protocol.Outcome.LEVEL),
        (False, False, 0.001, "not resolved", protocol.Outcome.NOT_RESOLVED),
    ],
)
def test_the_verdict_wording(different, equivalent, mean, wording, outcome):
    result = protocol.verdict(
        "superiority",
        mean,
        0.01 if different else 0.2,
        0.01 if equivalent else 0.2,
        0.05,
        "1 point",
    )

    assert result.wording == wording
    assert result.outcome is (protocol.Outcome[outcome] if isinstance(outcome, str) else outcome)
    assert result.supported == (result.outcome is protocol.Outcome.AHEAD)


def test_for_mse_a_negative_difference_is_mcfl_ahead_and_equivalence_is_supported_by_tost():
    lower_mse = protocol.verdict("superiority", -0.001, 0.001, 0.5, 0.05, "0.0005 MSE", False)
    level = protocol.verdict("equivalence", 0.0, 0.5, 0.001, 0.05, "0.0005 MSE", False)

    assert lower_mse.outcome is protocol.Outcome.AHEAD and lower_mse.supported
    assert level.outcome is protocol.Outcome.LEVEL and level.supported
    with pytest.raises(ValueError, match="hypothesis"):
        protocol.verdict("better", 0.0, 0.5, 0.5, 0.05, "1 point")


def test_every_verdict_matches_its_corrected_interval_or_equivalence_result(design):
    declaration, configs, found = design

    rows = protocol.synthesis(declaration, configs, found)

    by_name = {row.scenario.name: row for row in rows}
    expected = {
        "ahead": "MCFL ahead",
        "behind": "MCFL behind",
        "level": "level",
        "within": "MCFL behind",
        "unresolved": "not resolved",
    }
    for name, outcome in expected.items():
        assert by_name[name].verdict.outcome.value == outcome, name
    assert by_name["ahead"].choice.method == "local"
    for row in rows:
        if row.verdict is None:
            assert row.scenario.name in ("tuned-only", "untouched")
            continue
        assert_wording_matches(row, declaration)


def assert_wording_matches(row: protocol.SynthesisRow, declaration: protocol.Declaration):
    """The verdict's words against the row's Holm-corrected results: "ahead" / "behind"
    only with a rejected difference whose corrected interval excludes 0 on that side,
    "level" only with a rejected TOST whose interval lies within the margin (and a
    difference not rejected), "margin" only with that TOST, "not resolved" with neither."""
    interval, tost, outcome = row.interval, row.equivalence_interval, row.verdict.outcome
    margin = declaration.margin(row.metric)
    better = 1 if stats.higher_is_better(row.metric) else -1
    within = -margin < tost.low and tost.high < margin
    different, equivalent = row.p_difference < 0.05, row.p_equivalence < 0.05
    assert different == (outcome in (protocol.Outcome.AHEAD, protocol.Outcome.BEHIND))
    if outcome is protocol.Outcome.AHEAD:
        assert row.verdict.wording.startswith("MCFL ahead")
        assert interval.low > 0 if better > 0 else interval.high < 0
    if outcome is protocol.Outcome.BEHIND:
        assert row.verdict.wording.startswith("MCFL behind")
        assert interval.high < 0 if better > 0 else interval.low > 0
    if outcome is protocol.Outcome.LEVEL:
        assert equivalent and within and interval.low <= 0 <= interval.high
        assert row.verdict.wording.startswith("level (equivalent within ±")
    if "margin" in row.verdict.wording or "level" in row.verdict.wording:
        assert equivalent and within
    if outcome is protocol.Outcome.NOT_RESOLVED:
        assert row.verdict.wording == "not resolved"
        assert not equivalent and interval.low <= 0 <= interval.high


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["accuracy", "MSE"]),
            st.lists(st.integers(-500, 500), min_size=2, max_size=12),
        ),
        min_size=1,
        max_size=5,
    )
)
def test_every_wording_matches_its_results_whatever_the_differences(drawn):
    declaration = protocol.parse_protocol(
        declaration_text({f"s{i}": "superiority" for i in range(len(drawn))})
    )
    rows = []
    for scenario, (metric, steps) in zip(declaration.scenarios, drawn, strict=True):
        unit = 1e-4 if metric == "accuracy" else 1e-6  # up to ±5 points, ±0.0005 MSE
        per_seed = {100 + j: (k * unit, k * unit) for j, k in enumerate(steps)}
        choice = protocol.Choice("fedavg", "drawn", {})
        rows.append(
            protocol.tested(declaration, protocol.SynthesisRow(scenario, metric, choice, per_seed))
        )

    # A row is judged once every declared evaluation seed is paired, never on a subset.
    for row in protocol.judged(declaration, rows):
        if len(row.per_seed) < len(declaration.evaluation_seeds):
            assert row.verdict is None and row.p_difference == 1.0
            waiting = f"| {len(row.per_seed)} of 10 seeds run |"
            assert waiting in "\n".join(protocol.synthesis_table(declaration, [row]))
            continue
        assert_wording_matches(row, declaration)


def test_the_table_says_not_run_and_gives_the_costs_and_the_bimodal_seeds(design):
    declaration, configs, found = design

    text = "\n".join(
        protocol.synthesis_table(declaration, protocol.synthesis(declaration, configs, found))
    )

    assert "| tuned-only | superiority | FedAvg | 0 | not run |" in text
    assert "| untouched | superiority | not chosen yet (6 of 6 tuning runs missing) |" in text
    assert "| ahead | superiority: supported | local | 10 | +5.0 [" in text
    assert "300,000 / 200,000" in text
    assert "| level (equivalent within ±1 point) |" in text
    # Two values across seeds (Sarle's b > 5/9): shown seed by seed; one spread: not.
    assert "- level: s100 -0.1, s101 +0.1, s102 -0.1" in text
    assert "- unresolved:" not in text
    # Each choice shows the candidates' tuning means, best first.
    assert "- ahead, tuning seeds: local 80.0, FedAvg 70.0" in text
    assert "- tuned-only, tuning seeds: FedAvg 80.0, local 70.0" in text
    assert "- untouched, tuning seeds" not in text
    declared = replace(
        declaration,
        scenarios=tuple(replace(s, bimodal=s.name == "unresolved") for s in declaration.scenarios),
    )
    rows = protocol.synthesis(declared, configs, found)
    assert "- unresolved: s100 " in "\n".join(protocol.synthesis_table(declared, rows))


def test_the_report_opens_with_the_declared_table(tmp_path, run_writer):
    docs = tmp_path / "docs"
    (docs / "results").mkdir(parents=True)
    (docs / "results" / "protocol.toml").write_text(declaration_text({"groups": "superiority"}))
    declared = tmp_path / "declared"
    for method in ("fedavg", "local"):
        for seed in (0, 1, 2):
            name = f"groups-{method}-s{seed}"
            config = SimulationConfig(name=name, strategy=method, seed=seed, **SMALL)
            level = 0.8 if method == "local" else 0.7
            run_writer(declared / name, config, lambda i, r, level=level: level)

    results_report.write_report(
        tmp_path / "none",
        docs,
        docs / "results" / "claims.toml",
        declared_dir=declared,
        declared_records=tmp_path / "records",
    )

    text = (docs / "RESULTS.md").read_text()
    assert text.index("## MCFL against the best alternative") < text.index("## How the figures")
    assert "| groups | superiority | local | 0 | not run |" in text
    assert "- groups: 225 test images per trainer (rule: 1112)" in text
    assert (tmp_path / "records" / "groups-local-s2" / "summary.json").exists()


def test_a_broken_declaration_stops_the_report(tmp_path):
    docs = tmp_path / "docs"
    (docs / "results").mkdir(parents=True)
    (docs / "results" / "protocol.toml").write_text("[protocol]\nalpha = 2\n")

    with pytest.raises(protocol.ProtocolError, match="protocol.toml"):
        results_report.write_report(tmp_path / "none", docs, docs / "results" / "claims.toml")


def test_declared_takes_nothing_the_protocol_decides(load_script):
    script = load_script("run_experiments")

    seeds = CliRunner().invoke(script.main, ["--declared", "tuning", "--seeds", "5"])
    methods = CliRunner().invoke(script.main, ["--declared", "tuning", "--methods", "mcfl"])

    for result in (seeds, methods):
        assert result.exit_code == 2
        assert "--declared takes its methods, seeds and size" in result.output


def test_declared_lists_its_plan_and_test_splits(load_script, tmp_path):
    script = load_script("run_experiments")
    scenarios = tmp_path / "scenarios"
    scenarios.mkdir()
    (scenarios / "small.toml").write_text(
        'name = "small"\ndataset = "digits"\nscenario = "iid"\nn_trainers = 4\nrounds = 2\n'
        "samples = 300\n"
    )
    path = tmp_path / "protocol.toml"
    path.write_text(declaration_text({"small": "equivalence"}))
    tuned = tuned_file(tmp_path / "tuned.toml", protocol.load_protocol(path))
    args = ["--scenarios", str(scenarios), "--protocol", str(path), "--out", str(tmp_path / "o")]
    args += ["--records", str(tmp_path / "r"), "--tuned", str(tuned), "--list"]

    tuning = CliRunner().invoke(script.main, ["--declared", "tuning", *args])
    evaluation = CliRunner().invoke(script.main, ["--declared", "evaluation", *args])

    assert tuning.exit_code == 0, tuning.output
    assert "9 runs planned" in tuning.output and "small-local-s2" in tuning.output
    assert "test split: small: 45 test images per trainer" in tuning.output
    assert evaluation.exit_code == 1
    assert "small: not planned, no comparator yet (6 of 6 tuning runs missing" in " ".join(
        evaluation.output.split()
    )


def test_declared_evaluation_plans_the_comparator_chosen_from_the_tuning_records(
    load_script, tmp_path, run_writer
):
    script = load_script("run_experiments")
    scenarios = tmp_path / "scenarios"
    scenarios.mkdir()
    (scenarios / "groups.toml").write_text(
        'name = "groups"\ndataset = "digits"\nscenario = "groups"\nn_trainers = 4\n'
        "rounds = 2\nsamples = 300\nscenario_params = { n_groups = 2 }\n"
    )
    path = tmp_path / "protocol.toml"
    path.write_text(declaration_text({"groups": "superiority"}))
    tuned = tuned_file(tmp_path / "tuned.toml", protocol.load_protocol(path))
    for method, level in (("fedavg", 0.6), ("local", 0.7)):
        for seed in (0, 1, 2):
            name = f"groups-{method}-s{seed}"
            config = SimulationConfig(name=name, strategy=method, seed=seed, **SMALL)
            run_writer(tmp_path / "r" / name, config, lambda i, r, level=level: level)
    args = ["--scenarios", str(scenarios), "--protocol", str(path), "--out", str(tmp_path / "o")]

    args += ["--tuned", str(tuned)]
    result = CliRunner().invoke(
        script.main, ["--declared", "evaluation", *args, "--records", str(tmp_path / "r"), "--list"]
    )

    assert result.exit_code == 0, result.output
    assert "note: groups: comparator local (best mean over the tuning seeds)" in result.output
    assert "30 runs planned" in result.output  # MCFL, local and FedAvg × 10 seeds
    assert "groups-local-s109" in result.output and "groups-mcfl-s100" in result.output
