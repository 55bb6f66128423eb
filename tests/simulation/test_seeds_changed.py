"""What the declared evaluation changed against the reduced report: the readings, the
"what changed" column and the count of scenarios ahead of both baselines, from figures
made here."""

from __future__ import annotations

import pytest

from mcfl_chain.simulation import seeds_changed, stats

REDUCED, EVALUATION = (0, 1, 2), tuple(range(100, 110))


def figures(values: list[float], metric: str = "accuracy") -> stats.RunFigures:
    key = "accuracy" if metric == "accuracy" else "loss"
    return stats.run_figures(
        [
            {"round": 1, "trainer_index": i, key: v, "group": "g", "model": "m"}
            for i, v in enumerate(values)
        ],
        metric,
    )


def campaign(seeds, mcfl, fedavg, local, file="s", stem="s", metric="accuracy"):
    """MCFL at ``mcfl(seed)`` on both trainers, each baseline at its own function."""
    return {
        (name, method): {seed: figures([f(seed)] * 2, metric) for seed in seeds}
        for name, method, f in (
            (file, "mcfl", mcfl),
            (stem, "fedavg", fedavg),
            (stem, "local", local),
        )
    }


def wobble(seed: int) -> float:
    return 0.01 * (seed % 3 - 1)


def test_a_reading_follows_the_interval_and_the_metrics_direction():
    ahead = stats.mean_interval([0.02, 0.03, 0.025])
    level = stats.mean_interval([0.02, -0.03, 0.0])
    assert seeds_changed.reading(ahead, "accuracy") == "MCFL ahead"
    assert seeds_changed.reading(ahead, "MSE") == "MCFL behind"  # a higher loss
    assert seeds_changed.reading(level, "accuracy") == "not resolved"
    assert seeds_changed.reading(stats.mean_interval([0.1]), "accuracy") == "one seed"
    assert seeds_changed.reading(None, "accuracy") == "not run"


def test_each_campaign_counts_on_its_own_seeds_and_the_change_is_named():
    # Reduced: MCFL level with FedAvg, behind local. Declared: ahead of both. A declared
    # run on the tuning seeds (0-2) must not enter the declared figures.
    reduced = campaign(
        REDUCED, lambda s: 0.8 + wobble(s), lambda s: 0.8 - wobble(s), lambda s: 0.9 + wobble(s)
    )
    declared = campaign(EVALUATION, lambda s: 0.9 + wobble(s) / 5, lambda s: 0.8, lambda s: 0.85)
    for key, runs in campaign(REDUCED, lambda s: 0.1, lambda s: 0.9, lambda s: 0.9).items():
        declared[key].update(runs)
    (change,) = seeds_changed.changes(
        [("s", "s", "s")],
        reduced,
        declared,
        REDUCED,
        EVALUATION,
        {"s": ("1", "mixed")},
        {"s": "MCFL ahead"},
    )
    assert change.declared["fedavg"].seeds == list(EVALUATION)
    assert change.declared["fedavg"].mean_diff.mean == pytest.approx(0.1)
    assert change.readings("fedavg") == ("not resolved", "MCFL ahead")
    assert change.readings("local") == ("MCFL behind", "MCFL ahead")
    assert seeds_changed.what_changed(change) == (
        "FedAvg: not resolved → MCFL ahead; local: MCFL behind → MCFL ahead"
    )
    assert change.ahead_of_both(declared=True) and not change.ahead_of_both(declared=False)
    lines = seeds_changed.changes_table([change])
    assert "| s | 1 → mixed | +0.0 ± " in lines[2]
    assert lines[-2].endswith("reduced report 0 (none); declared evaluation 1 (s).")
    # A declared evaluation stopped part-way (local training at 9 of 10 seeds) shows
    # nothing yet for that baseline, as the corrected synthesis does.
    del declared["s", "local"][109]
    (partial,) = seeds_changed.changes(
        [("s", "s", "s")], reduced, declared, REDUCED, EVALUATION, {"s": ("1", "mixed")}, {}
    )
    assert partial.readings("local") == ("MCFL behind", "not run")
    assert partial.declared["fedavg"].seeds == list(EVALUATION)


def test_a_scenario_not_evaluated_yet_keeps_its_reduced_figures_and_counts_nowhere():
    reduced = campaign(
        REDUCED, lambda s: 0.9 + wobble(s), lambda s: 0.8, lambda s: 0.8, file="s-tolmixed"
    )
    (change,) = seeds_changed.changes(
        [("s", "s-tolmixed", "s")], reduced, {}, REDUCED, EVALUATION, {"s": ("mixed", "mixed")}, {}
    )
    assert change.readings("fedavg") == ("MCFL ahead", "not run")
    row = seeds_changed.changes_table([change])[2]
    assert row.endswith("| not run | not run yet | not run yet |")
    assert seeds_changed.changes_table([change])[-2].startswith(
        "Ahead of the better of FedAvg and local training (both intervals clear of 0 in "
        "MCFL's favour), over the 0 scenarios"
    )
