"""MCFL-plus confirmed on fresh seeds (``mcfl_chain/simulation/plus_confirmatory.py``):
the committed declaration, the plan, the non-inferiority test and its table, on figures
made here (no simulation)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from mcfl_chain.simulation import campaign, plus_confirmatory, protocol
from mcfl_chain.simulation.runner import SimulationConfig

from .test_protocol import DESIGNS, SMALL, alternating, declaration_text, figures
from .test_sweep import finish

ROOT = Path(__file__).resolve().parents[2]
FRESH = list(range(110, 120))


def confirmatory_text(order: list[str], seeds: list[int] = FRESH, **extra: str) -> str:
    values = {"options": '{ plus_chance = "on" }', "seeds": str(seeds), "also": "[]", **extra}
    values["order"] = str(order).replace("'", '"')
    return "[mcfl_plus_confirmatory]\n" + "".join(f"{k} = {v}\n" for k, v in values.items())


def tuning_figures(names: list[str]) -> dict:
    """Tuning runs on seeds 0-2 where FedAvg beats local training on every scenario."""
    found: dict = {}
    for name in names:
        for seed in (0, 1, 2):
            for method, level in (("fedavg", 0.8), ("local", 0.7)):
                found.setdefault((name, method), {})[seed] = figures([level] * 4)
    return found


def test_the_committed_declaration_plans_fresh_seeds_beside_the_comparator():
    declaration = protocol.load_protocol(ROOT / protocol.PROTOCOL)
    confirm = plus_confirmatory.load_confirmatory(ROOT / plus_confirmatory.CONFIRMATORY)
    configs = campaign.load_scenarios(ROOT / "scenarios" / "paper")
    groups = protocol.declared_configs(declaration, configs)["groups"]
    stem = campaign.baseline_stem(groups)
    found = {  # Ditto best on groups' tuning seeds, every candidate run
        (stem, m): {s: figures([0.9 if m == "ditto" else 0.8] * 4) for s in (0, 1, 2)}
        for m in declaration.candidates
    }
    tuned = {"groups": {"mcfl-plus": {"optimiser": "sgd", "lr": 0.01}, "ditto": {"lr": 0.02}}}

    plan = plus_confirmatory.confirmatory_plan(confirm, declaration, configs, found, tuned)

    assert set(confirm.seeds).isdisjoint({*declaration.evaluation_seeds, *declaration.tuning_seeds})
    assert len(confirm.seeds) >= 10  # the minimum for a primary endpoint
    assert {r.name for r in plan.runs[:2]} == {  # seed by seed
        f"{groups.name}-mcfl-plus-s{confirm.seeds[0]}",
        f"{stem}-ditto-s{confirm.seeds[0]}",
    }
    assert len(plan.runs) == 2 * len(confirm.seeds)
    plus = [r for r in plan.runs if r.method == "mcfl-plus"]
    assert all(r.config.plus_chance == "on" and r.config.lr == 0.01 for r in plus)
    assert all(r.config.tolerance == declaration.tolerance for r in plus)
    assert {r.config.lr for r in plan.runs if r.method == "ditto"} == {0.02}
    assert sum("not planned" in note for note in plan.notes) == len(confirm.order) - 1


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (confirmatory_text(["a"], options='{ nope = "on" }'), "not an option"),
        (confirmatory_text(["a", "a"]), "twice"),
        (confirmatory_text(["a"], also='["mcfl-plus"]'), "distinct methods other than"),
        (confirmatory_text(["a"], seeds="[]"), "seeds"),
        ("[mcfl_plus_confirmatory]\nseeds = [1]\n", "missing 'options'"),
    ],
    ids=["option", "twice", "also", "no-seeds", "missing"],
)
def test_a_bad_declaration_is_refused_with_what_to_change(text, message):
    with pytest.raises(protocol.ProtocolError, match=message):
        plus_confirmatory.parse_confirmatory(text)


def test_seeds_the_protocol_used_or_scenarios_it_does_not_declare_are_refused():
    declaration = protocol.parse_protocol(declaration_text({"a": "superiority"}))
    configs = [SimulationConfig(name="a", **SMALL)]
    used = plus_confirmatory.parse_confirmatory(confirmatory_text(["a"], seeds=[2, 110]))
    stranger = plus_confirmatory.parse_confirmatory(confirmatory_text(["b"]))

    with pytest.raises(protocol.ProtocolError, match=r"seeds \[2\] are the protocol's"):
        plus_confirmatory.confirmatory_plan(used, declaration, configs, {}, {})
    with pytest.raises(protocol.ProtocolError, match="not declared in the protocol"):
        plus_confirmatory.confirmatory_plan(stranger, declaration, configs, {}, {})


def test_non_inferiority_is_judged_on_every_declared_seed_with_holm_over_the_rows():
    """MCFL-plus minus FedAvg as in test_protocol's designs, and ``above``: 0.7 points
    ahead with a spread; ``partial`` misses one seed; ``untuned`` has no comparator."""
    designs = {
        **DESIGNS,
        "above": lambda s: 0.007 + alternating(0.012, s),
        "partial": DESIGNS["level"],
    }
    names = [*designs, "untuned"]
    declaration = protocol.parse_protocol(declaration_text({n: "superiority" for n in names}))
    configs = [SimulationConfig(name=n, **SMALL) for n in names]
    confirm = plus_confirmatory.parse_confirmatory(confirmatory_text(names))
    found: dict = {}
    for name, difference in designs.items():
        for seed in FRESH[:-1] if name == "partial" else FRESH:
            base = [0.6, 0.7, 0.8, 0.9]
            found.setdefault((name, "fedavg"), {})[seed] = figures(base)
            mine = [b + difference(seed) for b in base]
            found.setdefault((name, "mcfl-plus"), {})[seed] = figures(mine)

    rows = plus_confirmatory.confirmatory_rows(
        confirm, declaration, configs, tuning_figures(list(designs)), found
    )
    by_name = {row.scenario: row for row in rows}
    text = "\n".join(plus_confirmatory.confirmatory_table(confirm, declaration, rows))

    readings = {n: plus_confirmatory.reading(r, declaration.alpha) for n, r in by_name.items()}
    assert readings == {
        "ahead": "met",
        "behind": "not shown",
        "level": "met",
        "within": "met",  # behind by less than the margin
        "unresolved": "not shown",
        "above": "met",  # neither ahead nor equivalent by the first declaration's rule
        "partial": "not judged yet",  # judged on every declared seed or not at all
        "untuned": "not run",
    }
    assert by_name["untuned"].comparator is None and by_name["partial"].test is None
    assert by_name["behind"].p_holm == pytest.approx(1.0)
    # Holm over the eight rows: the smallest raw p is multiplied by 8
    smallest = min(r.p_raw for r in rows)
    assert min(r.p_holm for r in rows if r.p_holm is not None) == pytest.approx(8 * smallest)
    assert (
        "| above | FedAvg | 10 of 10 |" in text and "| untuned | not chosen yet | 0 of 10 |" in text
    )
    assert "| partial | FedAvg | 9 of 10 |" in text
    assert "- ahead: s110 +4.4, s111 +5.2," in text


def test_the_stage_lists_its_runs(load_script, tmp_path, protocol_text, monkeypatch):
    script = load_script("run_experiments")
    monkeypatch.chdir(tmp_path)  # the tuning runs are read from runs/ and results/declared
    scenarios = tmp_path / "scenarios"
    scenarios.mkdir()
    (scenarios / "a.toml").write_text(
        'name = "a"\ndataset = "digits"\nscenario = "iid"\nn_trainers = 3\nrounds = 2\n'
        "samples = 300\n"
    )
    (tmp_path / "protocol.toml").write_text(protocol_text(["a"]))
    declaration = protocol.load_protocol(tmp_path / "protocol.toml")
    tuning = protocol.candidate_plan(declaration, campaign.load_scenarios(scenarios))
    for run in tuning.runs:  # FedAvg the best candidate: the comparator
        finish(run, tmp_path / protocol.DECLARED_RUNS, 0.8 if run.method == "fedavg" else 0.6)
    (tmp_path / "confirm.toml").write_text(confirmatory_text(["a"]))
    (tmp_path / "tuned.toml").write_text('["a"."fedavg"]\noptimiser = "sgd"\nlr = 0.05\n')
    (tmp_path / "plus.toml").write_text('["a"."mcfl-plus"]\noptimiser = "sgd"\nlr = 0.01\n')
    args = ["--scenarios", str(scenarios), "--protocol", str(tmp_path / "protocol.toml")]
    args += ["--out", str(tmp_path / "o"), "--records", str(tmp_path / "r")]
    args += ["--mcfl-plus-confirmatory", str(tmp_path / "confirm.toml")]
    args += [
        "--tuned",
        str(tmp_path / "tuned.toml"),
        "--mcfl-plus-tuned",
        str(tmp_path / "plus.toml"),
    ]

    listed = CliRunner().invoke(
        script.main, ["--declared", "mcfl-plus-confirmatory", *args, "--list"]
    )

    assert listed.exit_code == 0, listed.output
    output = " ".join(listed.output.split())
    assert "pending a-mcfl-plus-s110" in output and "pending a-fedavg-s119" in output
    assert "a-local-s110" not in output  # the comparator only
