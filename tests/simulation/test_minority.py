"""The minority at the true 30:2 (``mcfl_chain/simulation/minority.py``): its declaration,
its plan from the committed files and its declared test, on figures made here (no
simulation)."""

from __future__ import annotations

from pathlib import Path

import pytest
from scipy import stats as scipy_stats

from mcfl_chain.simulation import campaign, minority, plus_clean, protocol, stats, sweep

ROOT = Path(__file__).resolve().parents[2]
HEAD = """[minority_30_2]
scenario = "rotation-30-2"
name = "rotation-30-2-true"
settings = { n_trainers = 32, scenario_params = { n_groups = 2, group_sizes = [30, 2] } }
judged = "mcfl-plus"
reference = "local"
also = ["mcfl"]
seeds = [100, 101, 102]
margin_points = 1.0
alpha = 0.05
"""


def _tuned() -> protocol.Tuned:
    return minority.merged_tuned(ROOT / sweep.TUNED, ROOT / plus_clean.PLUS_TUNED)


def test_the_committed_declaration_plans_the_true_ratio_with_the_reduced_sizes_choices():
    study = minority.load_minority(ROOT / minority.MINORITY)
    declaration = protocol.load_protocol(ROOT / "docs" / "results" / "protocol.toml")
    configs = campaign.load_scenarios(ROOT / "scenarios" / "paper")
    tuned = _tuned()
    plus = plus_clean.load_plus_clean(ROOT / plus_clean.PLUS_CLEAN)

    plan = minority.minority_plan(
        study, declaration, configs, tuned, {"mcfl-plus": dict(plus.options)}
    )

    assert study.seeds == tuple(declaration.evaluation_seeds)
    assert len(plan.runs) == len(study.methods) * len(study.seeds)
    # Seed by seed: a campaign stopped early leaves complete pairs.
    assert [r.seed for r in plan.runs] == sorted(r.seed for r in plan.runs)
    for run in plan.runs:
        config = run.config
        assert run.name == f"rotation-30-2-true-{run.method}-s{run.seed}"
        assert (config.n_trainers, config.scenario_params["group_sizes"]) == (32, [30, 2])
        chosen = tuned["rotation-30-2"][run.method]
        assert all(getattr(config, key) == value for key, value in chosen.items())
        assert config.strategy == run.method
    plus_runs = [r for r in plan.runs if r.method == "mcfl-plus"]
    assert plus_runs and all(r.config.plus_direction == "on" for r in plus_runs)
    local = next(r for r in plan.runs if r.method == "local")
    assert local.config.optimiser == tuned["rotation-30-2"]["local"]["optimiser"]


def test_a_later_declaration_runs_its_own_options_on_seeds_no_other_stage_has_used():
    declaration = protocol.load_protocol(ROOT / "docs" / "results" / "protocol.toml")
    first = minority.load_minority(ROOT / minority.MINORITY)
    later = minority.load_minority(ROOT / minority.DECLARATIONS["minority-30-2-confirmatory"])
    shipped = dict(later.options or ())

    plan = minority.files_plan(
        later,
        declaration,
        campaign.load_scenarios(ROOT / "scenarios" / "paper"),
        ROOT / sweep.TUNED,
        ROOT / plus_clean.PLUS_CLEAN,
        ROOT / plus_clean.PLUS_TUNED,
    )

    assert not set(later.seeds) & (set(first.seeds) | set(declaration.evaluation_seeds))
    assert {r.method for r in plan.runs} == {"mcfl-plus", "local"}
    assert shipped["plus_direction_floor"] == -0.3
    for run in plan.runs:
        if run.method == "mcfl-plus":
            assert all(getattr(run.config, k) == v for k, v in shipped.items())
        else:  # the options are MCFL-plus's alone
            assert run.config.plus_calibrate == "off"
    assert minority.folders("minority-30-2-confirmatory")[1].name == "minority-30-2-confirmatory"


def test_a_method_without_tuned_settings_plans_nothing_and_says_which():
    study = minority.parse_minority(HEAD)
    declaration = protocol.load_protocol(ROOT / "docs" / "results" / "protocol.toml")
    configs = campaign.load_scenarios(ROOT / "scenarios" / "paper")
    tuned = _tuned()
    del tuned["rotation-30-2"]["mcfl-plus"]

    plan = minority.minority_plan(study, declaration, configs, tuned)

    assert plan.runs == [] and "mcfl-plus" in plan.notes[0]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (('judged = "mcfl-plus"', 'judged = "local"'), "distinct methods"),
        (('also = ["mcfl"]', 'also = ["nope"]'), "distinct methods"),
        (("n_trainers = 32", "n_trainer = 32"), "not a field"),
        (("margin_points = 1.0", "margin_points = 0"), "margin_points must be > 0"),
        (("alpha = 0.05", "alpha = 0.5"), "alpha in"),
        (("[minority_30_2]", "[minority]"), "missing 'minority_30_2'"),
        (('name = "rotation-30-2-true"', "name = 3"), "wrong type"),
        (("alpha = 0.05", 'alpha = 0.05\noptions = { plus_nope = "on" }'), "plus_nope"),
        (
            ('judged = "mcfl-plus"', 'judged = "fedavg"\noptions = { plus_chance = "on" }'),
            "runs no mcfl-plus",
        ),
    ],
)
def test_a_declaration_that_cannot_be_run_as_declared_is_refused(change, message):
    with pytest.raises(protocol.ProtocolError, match=message):
        minority.parse_minority(HEAD.replace(*change))


def test_a_scenario_the_protocol_does_not_declare_is_refused_by_name():
    study = minority.parse_minority(HEAD.replace('"rotation-30-2"', '"nope"', 1))
    declaration = protocol.load_protocol(ROOT / "docs" / "results" / "protocol.toml")
    with pytest.raises(protocol.ProtocolError, match="'nope', not a scenario of the protocol"):
        minority.minority_plan(
            study, declaration, campaign.load_scenarios(ROOT / "scenarios" / "paper"), _tuned()
        )


def figures(majority: float, rotated: tuple[float, float]) -> stats.RunFigures:
    """A 32-trainer run's last round: 30 upright trainers at ``majority``, 2 rotated."""
    lines = [
        {"round": 24, "trainer_index": i, "accuracy": majority, "group": "rotation 0°"}
        for i in range(30)
    ] + [
        {"round": 24, "trainer_index": 30 + i, "accuracy": a, "group": "rotation 180°"}
        for i, a in enumerate(rotated)
    ]
    return stats.run_figures(lines, "accuracy")


def _result(study, plus: dict[int, tuple[float, float]], local: dict[int, tuple[float, float]]):
    by_method = {
        (study.name, "mcfl-plus"): {s: figures(0.85, r) for s, r in plus.items()},
        (study.name, "local"): {s: figures(0.80, r) for s, r in local.items()},
        (study.name, "mcfl"): {s: figures(0.86, (0.3, 0.3)) for s in plus},
        ("other", "local"): {s: figures(0.1, (0.1, 0.1)) for s in plus},
    }
    return minority.minority_result(study, by_method)


def test_the_declared_test_is_the_one_sided_paired_t_test_against_minus_the_margin():
    study = minority.parse_minority(HEAD)
    plus = {100: (0.80, 0.82), 101: (0.78, 0.80), 102: (0.83, 0.81), 999: (0.0, 0.0)}
    local = {100: (0.79, 0.80), 101: (0.77, 0.78), 102: (0.80, 0.80)}

    result = _result(study, plus, local)

    # Only the declared seeds where both finished; the rotated pair's mean differences.
    assert result.differences == pytest.approx({100: 0.015, 101: 0.015, 102: 0.02})
    shifted = [d + 0.01 for d in result.differences.values()]
    expected = scipy_stats.ttest_1samp(shifted, 0.0, alternative="greater").pvalue
    assert result.test is not None and result.test.p_lower == pytest.approx(expected)
    assert result.verdict == "met"
    assert result.minority["mcfl"] == pytest.approx({100: 0.3, 101: 0.3, 102: 0.3})
    table = "\n".join(minority.minority_table(study, result))
    assert "| +1.7 ± " in table and "| met |" in table
    assert "s100 +1.5, s101 +1.5, s102 +2.0" in table


@pytest.mark.parametrize(
    ("plus", "verdict"),
    [
        # Level within the margin but below 0 on average: non-inferior, yet not "at least".
        ({100: (0.795, 0.795), 101: (0.77, 0.77), 102: (0.795, 0.80)}, "open"),
        # Local training clearly ahead: the 90 % interval lies below 0.
        (
            {100: (0.70, 0.71), 101: (0.69, 0.70), 102: (0.71, 0.70)},
            "missed (local training ahead)",
        ),
    ],
)
def test_the_verdict_reads_the_test_and_the_sign_as_declared(plus, verdict):
    study = minority.parse_minority(HEAD)
    local = {100: (0.79, 0.80), 101: (0.77, 0.78), 102: (0.80, 0.80)}
    assert _result(study, plus, local).verdict == verdict


def test_before_every_declared_seed_is_paired_the_reading_is_interim():
    study = minority.parse_minority(HEAD)
    plus = {100: (0.80, 0.82), 101: (0.78, 0.80)}
    local = {100: (0.79, 0.80), 101: (0.77, 0.78), 102: (0.80, 0.80)}
    verdict = _result(study, plus, local).verdict
    assert verdict.startswith("interim, 2 of 3 declared seeds")


def test_below_two_paired_seeds_nothing_is_judged():
    study = minority.parse_minority(HEAD)
    result = _result(study, {100: (0.8, 0.8)}, {100: (0.7, 0.7)})
    assert result.test is None and result.verdict.startswith("not judged")
