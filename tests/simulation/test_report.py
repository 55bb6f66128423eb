"""Run summaries: min/avg/max per round, FACADE's fair accuracy, grouping, CSV and plots."""

import pytest

from mcfl_chain.simulation import report


def _line(round_, index, acc, group, model, seconds=2.0):
    return {
        "round": round_,
        "trainer": f"0x{index}",
        "trainer_index": index,
        "group": group,
        "accuracy": acc,
        "loss": 1 - acc,
        "model": model,
        "seconds": seconds,
        "split": {
            "training": 1.0,
            "evaluation": 0.5,
            "chain": 0.1,
            "storage": 0.1,
            "aggregation": 0.1,
            "waiting": 0.2,
        },
    }


LINES = [
    _line(0, 0, 0.5, "a", "m1"),
    _line(0, 1, 0.7, "b", "m1"),
    _line(1, 0, 0.8, "a", "m2"),
    _line(1, 1, 0.9, "b", "m3", seconds=3.0),
]


def test_fair_accuracy_matches_facade_formula():
    # α·mean(0.8, 0.6) + (1 − α)(1 − (0.8 − 0.6)) with α = 2/3
    value = report.fair_accuracy({"a": [0.8], "b": [0.6, 0.6]})
    assert value == pytest.approx(2 / 3 * 0.7 + 1 / 3 * 0.8)
    assert report.fair_accuracy({}) is None


def test_summaries_per_round():
    rounds = report.summarize(LINES, {0: 1, 1: 2})
    assert [(s.round, s.metric_min, s.metric_max, s.models) for s in rounds] == [
        (0, 0.5, 0.7, 1),
        (1, 0.8, 0.9, 2),
    ]
    assert rounds[1].metric_avg == pytest.approx(0.85)
    assert rounds[1].seconds == 3.0
    assert report.grouping(LINES, 1) == {"m2": ["a"], "m3": ["b"]}
    assert sum(report.time_split(rounds).values()) == pytest.approx(1.0)


def test_a_trainer_back_from_sitting_rounds_out_counts_its_round_from_the_last_ones_end():
    # Prepare: trainer 2 (a cohort network's) reports round 0, sits round 1 out and
    # reports round 2: its line counts 50 s since its own last report
    lines = [
        {**_line(0, 1, 0.5, "a", "m1", seconds=10.0), "time": 110.0},
        {**_line(0, 2, 0.5, "a", "m1", seconds=12.0), "time": 112.0},
        {**_line(1, 1, 0.6, "a", "m2", seconds=20.0), "time": 130.0},
        {**_line(2, 1, 0.7, "a", "m3", seconds=25.0), "time": 155.0},
        {**_line(2, 2, 0.7, "a", "m3", seconds=50.0), "time": 162.0},
    ]

    # Execute
    rounds = report.summarize(lines, {})

    # Assert: round 1 ended at 130; trainer 2's round 2 took 32 s, not 50; round 0's
    # trainers all count their own time (nobody reported a round before)
    assert [s.seconds for s in rounds] == [12.0, 20.0, 32.0]


def test_outputs_are_written(tmp_path):
    rounds = report.summarize(LINES, {0: 1, 1: 2})
    report.write_csv(rounds, tmp_path / "rounds.csv")
    paths = report.plot(tmp_path, LINES, rounds, "accuracy")
    assert (tmp_path / "rounds.csv").read_text().count("\n") == 3
    assert all(p.stat().st_size > 1000 for p in paths)
