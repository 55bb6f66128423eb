"""Statistics over seeds: t intervals, final-round figures, paired differences, MSE gains."""

from __future__ import annotations

import math

import pytest

from mcfl_chain.simulation import stats


def _line(round_, index, value, group="g", model="m", metric="accuracy"):
    return {
        "round": round_,
        "trainer_index": index,
        "group": group,
        "accuracy": value if metric == "accuracy" else None,
        "loss": value if metric == "MSE" else 0.1,
        "model": model,
    }


def _figures(values, metric="accuracy", groups=None):
    """A run whose last round gives trainer i the value values[i]."""
    return stats.run_figures(
        [_line(1, i, v, (groups or {}).get(i, "g"), f"m{i}", metric) for i, v in values.items()]
    )


def test_t_quantile_matches_the_tables():
    assert stats.t_quantile(2) == pytest.approx(4.302652730)
    assert stats.t_quantile(9) == pytest.approx(2.262157163)
    with pytest.raises(ValueError, match="at least 1 degree of freedom"):
        stats.t_quantile(0)


def test_mean_interval_by_hand():
    # mean 2, sample sd 1, n 3: half-width t_{0.975,2} / sqrt(3) = 4.3027 / 1.7321
    interval = stats.mean_interval([1.0, 2.0, 3.0])
    assert interval.mean == 2.0 and interval.n == 3
    assert interval.half_width == pytest.approx(4.302652730 / math.sqrt(3))
    assert interval.excludes_zero is False
    assert interval.format() == "2.0 ± 2.5"
    assert interval.format(scale=100, digits=0) == "200 ± 248"
    assert interval.format(signed=True) == "+2.0 ± 2.5"
    assert stats.Interval(-0.5, None, 1).format(signed=True) == "-0.5"


def test_mean_interval_edge_cases():
    assert stats.mean_interval([]) is None
    single = stats.mean_interval([0.25])
    assert (single.mean, single.half_width, single.excludes_zero) == (0.25, None, None)
    assert single.format(scale=100) == "25.0"
    same = stats.mean_interval([0.1, 0.1])
    assert same.half_width == 0.0 and same.excludes_zero is True
    assert stats.mean_interval([-0.3, -0.2, -0.25]).excludes_zero is True


def test_run_figures_of_a_classifier_use_the_last_round():
    # Prepare: round 0 must be ignored; trainer 3 has no model at the end.
    lines = [
        _line(0, 0, 0.1, "a"),
        _line(1, 0, 0.8, "a", "m1"),
        _line(1, 1, 0.6, "a", "m1"),
        _line(1, 2, 0.9, "b", "m2"),
        _line(1, 3, 0.5, "b", None),
    ]

    # Execute
    figures = stats.run_figures(lines)

    # Assert: groups a and b both average 0.7, so fair = 2/3·0.7 + 1/3·(1 − 0)
    assert figures.metric == "accuracy" and figures.round == 1
    assert figures.per_trainer == {0: 0.8, 1: 0.6, 2: 0.9, 3: 0.5}
    assert (figures.worst, figures.best) == (0.5, 0.9)
    assert figures.average == pytest.approx(0.7)
    assert figures.by_group == pytest.approx({"a": 0.7, "b": 0.7})
    assert figures.fair == pytest.approx(2 / 3 * 0.7 + 1 / 3)
    assert figures.models == 2


def test_run_figures_of_autoencoders_take_the_highest_mse_as_worst():
    # Prepare: accuracy is None for autoencoders; the metric is the loss (MSE).
    lines = [
        _line(2, 0, 0.004, "digits", metric="MSE"),
        _line(2, 1, 0.002, "digits", metric="MSE"),
        _line(2, 2, 0.009, "fashion-mnist", metric="MSE"),
    ]

    # Execute
    figures = stats.run_figures(lines)

    # Assert
    assert figures.metric == "MSE"
    assert (figures.worst, figures.best) == (0.009, 0.002)
    assert figures.by_group == pytest.approx({"digits": 0.003, "fashion-mnist": 0.009})
    assert figures.fair is None
    assert stats.run_figures([]) is None


def test_over_seeds_gives_an_interval_per_figure():
    # Prepare
    runs = {
        0: _figures({0: 0.8, 1: 0.6}, groups={1: "b"}),
        1: _figures({0: 0.6, 1: 0.4}, groups={1: "b"}),
    }

    # Execute
    summary = stats.over_seeds(runs)

    # Assert: worst 0.6 and 0.4 → mean 0.5, sd 0.1414, half-width 12.706·0.1414/√2
    assert summary.seeds == [0, 1]
    assert summary.worst.mean == pytest.approx(0.5)
    assert summary.worst.half_width == pytest.approx(12.706204736 * 0.1)
    assert summary.average.mean == pytest.approx(0.6)
    assert summary.best.mean == pytest.approx(0.7)
    assert set(summary.by_group) == {"g", "b"}
    assert summary.by_group["b"].mean == pytest.approx(0.5)
    assert summary.models.mean == 2.0
    assert stats.over_seeds({}) is None


def test_paired_difference_by_hand():
    # Prepare: seed 0 diffs 0.1, 0, 0.4 (mean 1/6), worst 0.6 − 0.5 = 0.1;
    # seed 1 diffs 0.3, 0, 0 (mean 0.1), worst 0.7 − 0.6 = 0.1.
    mcfl = {0: _figures({0: 0.8, 1: 0.6, 2: 0.9}), 1: _figures({0: 0.9, 1: 0.7, 2: 0.8})}
    fedavg = {0: _figures({0: 0.7, 1: 0.6, 2: 0.5}), 1: _figures({0: 0.6, 1: 0.7, 2: 0.8})}

    # Execute
    diff = stats.paired_difference(mcfl, fedavg)

    # Assert
    assert diff.seeds == [0, 1]
    assert diff.per_seed[0] == pytest.approx((1 / 6, 0.1))
    assert diff.per_seed[1] == pytest.approx((0.1, 0.1))
    assert diff.mean_diff.mean == pytest.approx((1 / 6 + 0.1) / 2)
    sd = abs(1 / 6 - 0.1) / math.sqrt(2)
    assert diff.mean_diff.half_width == pytest.approx(12.706204736 * sd / math.sqrt(2))
    assert diff.mean_diff.excludes_zero is False
    assert diff.worst_diff.mean == pytest.approx(0.1)
    assert diff.worst_diff.excludes_zero is True


def test_paired_difference_pairs_trainers_and_seeds_present_in_both():
    # Prepare: trainer 2 only in the method's run; seed 1 only in the baseline's.
    method = {0: _figures({0: 0.8, 1: 0.6, 2: 0.1})}
    baseline = {0: _figures({0: 0.5, 1: 0.7}), 1: _figures({0: 0.5, 1: 0.5})}

    # Execute
    diff = stats.paired_difference(method, baseline)

    # Assert: (0.3 − 0.1)/2 = 0.1; worst over the paired trainers 0.6 − 0.5
    assert diff.seeds == [0]
    assert diff.per_seed[0] == pytest.approx((0.1, 0.1))
    assert diff.mean_diff.half_width is None
    assert stats.paired_difference(method, {}) is None
    with pytest.raises(ValueError, match="no trainer_index in common"):
        stats.seed_difference(_figures({5: 0.5}), _figures({6: 0.5}))


def test_paired_difference_of_mse_is_method_minus_baseline():
    mcfl = {0: _figures({0: 0.002, 1: 0.004}, metric="MSE")}
    fedavg = {0: _figures({0: 0.003, 1: 0.006}, metric="MSE")}
    diff = stats.paired_difference(mcfl, fedavg)
    assert diff.per_seed[0] == pytest.approx((-0.0015, -0.002))


def test_mse_gains_both_percentages():
    # Prepare: the thesis' bars: global 0.0036 / 0.0093, specialised 0.0029 / 0.0080.
    groups = {0: "mnist", 1: "fmnist"}
    mcfl = {0: _figures({0: 0.0029, 1: 0.0080}, "MSE", groups)}
    fedavg = {0: _figures({0: 0.0036, 1: 0.0093}, "MSE", groups)}

    # Execute
    gains = stats.mse_gains(mcfl, fedavg)

    # Assert: the paper's 24 % / 16 % and the reductions 19 % / 14 %
    assert gains["mnist"].ratio.mean == pytest.approx(0.0036 / 0.0029 - 1)
    assert gains["mnist"].reduction.mean == pytest.approx((0.0036 - 0.0029) / 0.0036)
    assert gains["fmnist"].ratio.mean == pytest.approx(0.0093 / 0.0080 - 1)
    assert gains["fmnist"].reduction.mean == pytest.approx(0.0013 / 0.0093)


def _costs(line, stored, fetched, gas):
    return {
        **line,
        "traffic": {
            "stored_blobs": 1,
            "stored_bytes": stored,
            "fetched_blobs": 2,
            "fetched_bytes": fetched,
        },
        "gas": gas,
    }


def test_run_figures_give_the_minority_and_the_costs_per_trainer_round():
    # Prepare: two trainers in "big", one in "small"; costs in rounds 0 and 1, and a
    # line without costs (a run made before they were reported) that must not count.
    lines = [
        _costs(_line(0, 0, 0.1, "big"), 100, 300, 1_000),
        _costs(_line(0, 2, 0.1, "small"), 100, 0, 3_000),
        _line(0, 1, 0.1, "big"),
        _costs(_line(1, 0, 0.9, "big"), 200, 600, 2_000),
        _costs(_line(1, 1, 0.7, "big"), 100, 100, 2_000),
        _costs(_line(1, 2, 0.4, "small"), 0, 0, 2_000),
    ]

    # Execute
    figures = stats.run_figures(lines)

    # Assert: bytes 400, 100, 800, 200, 0 → 300; gas 1000, 3000, 2000 ×3 → 2000
    assert figures.minority == pytest.approx(0.4)
    assert figures.traffic == pytest.approx(300)
    assert figures.gas == pytest.approx(2_000)


def test_no_minority_without_a_single_smallest_group_and_no_costs_unreported():
    # Execute
    tie = stats.run_figures([_line(1, 0, 0.9, "a"), _line(1, 1, 0.7, "b")])
    one = stats.run_figures([_line(1, 0, 0.9, "a"), _line(1, 1, 0.7, "a")])

    # Assert
    assert tie.minority is None and one.minority is None
    assert tie.traffic is None and tie.gas is None
    assert stats.minority_group({"a": 3, "b": 1, "c": 2}) == "b"
    assert stats.minority_group({"a": 1, "b": 1, "c": 2}) is None


def test_over_seeds_reports_minority_and_costs_only_when_every_seed_has_them():
    # Prepare
    with_costs = [
        _costs(_line(1, 0, 0.8, "a"), 10, 20, 100),
        _costs(_line(1, 1, 0.6, "a"), 10, 20, 100),
        _costs(_line(1, 2, 0.5, "b"), 10, 20, 100),
    ]
    without = [_line(1, 0, 0.8, "a"), _line(1, 1, 0.6, "a"), _line(1, 2, 0.3, "b")]

    # Execute
    both = stats.over_seeds({0: stats.run_figures(with_costs), 1: stats.run_figures(without)})
    one = stats.over_seeds({0: stats.run_figures(with_costs)})

    # Assert: the minority (group b) is known at both seeds; the costs at one only
    assert both.minority.mean == pytest.approx(0.4)
    assert both.traffic is None and both.gas is None
    assert one.traffic.mean == pytest.approx(30) and one.gas.mean == pytest.approx(100)
