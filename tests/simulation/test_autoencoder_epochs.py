"""The autoencoders' epochs on fresh seeds (``mcfl_chain/simulation/autoencoder_epochs.py``):
its declaration, its plan and its table, on the committed files and on figures made here
(no simulation)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from mcfl_chain.simulation import autoencoder_epochs as ae
from mcfl_chain.simulation import campaign, protocol, results_report, stats

ROOT = Path(__file__).resolve().parents[2]
HEAD = """[autoencoder_epochs]
scenario = "autoencoders"
epochs = [2, 6]
methods = ["mcfl", "local"]
seeds = [300, 301]
"""


def test_the_committed_declaration_plans_every_epochs_value_seed_by_seed():
    declared = ae.load_epochs_sweep(ROOT / ae.EPOCHS_DECLARATION)
    configs = campaign.load_scenarios(ROOT / "scenarios" / "paper")
    base = next(c for c in configs if c.name == declared.scenario)

    plan = ae.epochs_plan(declared, configs)

    per_seed = len(declared.epochs) * len(declared.methods)
    assert len(plan.runs) == per_seed * len(declared.seeds)
    assert [r.seed for r in plan.runs] == [s for s in declared.seeds for _ in range(per_seed)]
    assert not set(declared.seeds) & (set(ae.USED_SEEDS) | {100 + i for i in range(10)})
    for run in plan.runs:
        assert run.name == f"{declared.scenario}-epochs{run.config.epochs}-{run.method}-s{run.seed}"
        # Only the epochs (and the name) differ from the scenario file, for each method.
        same = replace(campaign.method_config(base, run.method), seed=run.seed)
        assert replace(run.config, name=same.name, epochs=base.epochs) == same
    assert {(r.config.epochs, r.method) for r in plan.runs} == {
        (e, m) for e in declared.epochs for m in declared.methods
    }
    assert {r.config.tolerance for r in plan.runs if r.method == "mcfl"} == {base.tolerance}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (("seeds = [300, 301]", "seeds = [2, 301]"), "fresh ones"),
        (("epochs = [2, 6]", "epochs = [0, 6]"), "whole numbers >= 1"),
        (("epochs = [2, 6]", "epochs = [2, 2]"), "twice"),
        (('methods = ["mcfl", "local"]', 'methods = ["local", "mcfl"]'), "mcfl first"),
        (('methods = ["mcfl", "local"]', 'methods = ["mcfl", "nope"]'), "mcfl first"),
        (('scenario = "autoencoders"', "scenario = 3"), "wrong type"),
        (("[autoencoder_epochs]", "[epochs]"), "missing 'autoencoder_epochs'"),
        (("seeds = [300, 301]", "seeds = [300"), "autoencoder-epochs"),
    ],
)
def test_a_declaration_that_cannot_be_run_as_declared_is_refused(change, message):
    with pytest.raises(protocol.ProtocolError, match=message):
        ae.parse_epochs_sweep(HEAD.replace(*change))


def test_a_scenario_without_a_file_is_refused_by_name():
    declared = ae.parse_epochs_sweep(HEAD.replace('"autoencoders"', '"nope"'))
    with pytest.raises(protocol.ProtocolError, match="'nope'.*scenario files are"):
        ae.epochs_plan(declared, campaign.load_scenarios(ROOT / "scenarios" / "paper"))


@pytest.mark.parametrize(
    ("grouping", "split"),
    [
        ({"a": ["fashion-mnist"], "b": ["digits"]}, True),
        ({"a": ["fashion-mnist"], "b": ["digits"], "c": ["digits"]}, True),
        ({"a": ["fashion-mnist", "digits"]}, False),
        ({"a": ["fashion-mnist", "digits"], "b": ["digits"]}, False),
        ({}, False),
    ],
)
def test_split_by_dataset_needs_two_models_each_held_by_one_dataset(grouping, split):
    assert ae.split_by_dataset(grouping) is split


def figures(losses: dict[str, list[float]], models: int = 2) -> stats.RunFigures:
    """A run's last round: each trainer's MSE by group, on ``models`` distinct models."""
    lines = [
        {"round": 29, "trainer_index": i, "loss": loss, "group": group, "model": f"m{i % models}"}
        for i, (group, loss) in enumerate((g, v) for g, vs in losses.items() for v in vs)
    ]
    return stats.run_figures(lines, "MSE")


def test_the_table_pairs_mcfl_with_each_method_by_seed_and_counts_the_splits(tmp_path):
    declared = ae.parse_epochs_sweep(HEAD)
    mcfl = {
        300: figures({"f": [0.010, 0.012], "d": [0.008, 0.010]}),
        301: figures({"f": [0.011, 0.013], "d": [0.009, 0.011]}, models=1),
    }
    local = {s: figures({"f": [0.012, 0.014], "d": [0.010, 0.012]}) for s in (300, 301, 999)}
    runs = {
        ("autoencoders-epochs2", "mcfl"): {
            s: results_report.Run(
                f"autoencoders-epochs2-mcfl-s{s}",
                "autoencoders-epochs2",
                "mcfl",
                s,
                tmp_path,
                {"grouping": {"x": ["f"], "y": ["d"]} if s == 300 else {"x": ["f", "d"]}},
                f,
            )
            for s, f in mcfl.items()
        },
        ("autoencoders-epochs2", "local"): {
            s: results_report.Run(
                f"autoencoders-epochs2-local-s{s}",
                "autoencoders-epochs2",
                "local",
                s,
                tmp_path,
                {},
                f,
            )  # fmt: skip
            for s, f in local.items()
        },
    }

    text = "\n".join(
        results_report.autoencoder_epochs_section(runs, ROOT / "scenarios" / "paper", ROOT / "docs")
    )
    rows = ae.epochs_rows(
        declared,
        {key: results_report.figures_of(seeds) for key, seeds in runs.items()},
        {
            (k[0], s): r.summary["grouping"]
            for k, seeds in runs.items()
            if k[1] == "mcfl"
            for s, r in seeds.items()
        },
    )

    assert [r.epochs for r in rows] == [2]  # 6 epochs: no MCFL run yet, no row
    (row,) = rows
    assert row.seeds == (300, 301)  # seed 999 is not declared
    versus = row.versus["local"]
    assert versus is not None and versus.seeds == [300, 301]
    assert versus.mean_diff.mean == pytest.approx(-0.0015)
    assert row.split == 1 and row.models is not None and row.models.mean == 1.5
    table = "\n".join(ae.epochs_table(declared, rows))
    assert (
        "| 2 | 2 | 0.0105 ± 0.0064 | 0.0120 ± 0.0000 | -0.0015 ± 0.0064 | 1.5 ± 6.4 | 1 of 2 |"
        in table
    )
    assert "- 2 epochs, MCFL − local: s300 -0.0020, s301 -0.0010" in table
    # The committed declaration plans 60 runs; four of them are finished here.
    assert "4 of 60 planned runs done; seeds with runs to make: 300, 301, 302, 303, 304." in text
