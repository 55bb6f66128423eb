"""The declared evaluation's tests (``mcfl_chain/simulation/inference.py``) against scipy's
own tests and hand-checked values."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as scipy_stats

from mcfl_chain.simulation import inference

SEEDS = st.lists(
    st.floats(min_value=-1, max_value=1, allow_nan=False).map(lambda x: round(x, 4)),
    min_size=3,
    max_size=12,
).filter(lambda xs: len(set(xs)) > 1)


def test_paired_t_test_is_scipys_ttest_rel():
    mcfl = [0.81, 0.84, 0.79, 0.88, 0.83]
    best = [0.80, 0.80, 0.80, 0.85, 0.81]

    result = inference.paired_t_test([a - b for a, b in zip(mcfl, best, strict=True)])

    expected = scipy_stats.ttest_rel(mcfl, best)
    assert result.statistic == pytest.approx(expected.statistic)
    assert result.p == pytest.approx(expected.pvalue)
    assert result.df == 4 and result.mean == pytest.approx(0.018)


@settings(max_examples=40, deadline=None)
@given(SEEDS)
def test_paired_t_test_matches_scipy_on_any_differences(differences):
    expected = scipy_stats.ttest_1samp(differences, 0.0)

    assert inference.paired_t_test(differences).p == pytest.approx(expected.pvalue, abs=1e-9)


def test_paired_t_test_without_spread_and_with_too_few_seeds():
    assert inference.paired_t_test([0.02, 0.02, 0.02]).p == 0.0
    assert inference.paired_t_test([0.0, 0.0]).p == 1.0
    with pytest.raises(ValueError, match="at least 2 seeds"):
        inference.paired_t_test([0.1])


def test_tost_is_two_one_sided_scipy_tests_and_a_90_percent_interval():
    differences = [0.002, -0.004, 0.001, 0.003, -0.001, 0.0, 0.002, -0.002, 0.004, 0.001]

    result = inference.tost_paired(differences, margin=0.01)

    lower = scipy_stats.ttest_1samp(differences, -0.01, alternative="greater").pvalue
    upper = scipy_stats.ttest_1samp(differences, 0.01, alternative="less").pvalue
    assert (result.p_lower, result.p_upper) == pytest.approx((lower, upper))
    assert result.p == pytest.approx(max(lower, upper)) and result.p < 0.05
    mean = sum(differences) / len(differences)
    low, high = scipy_stats.t.interval(
        0.90, len(differences) - 1, loc=mean, scale=scipy_stats.sem(differences)
    )
    assert (result.low, result.high) == pytest.approx((low, high))


@settings(max_examples=40, deadline=None)
@given(SEEDS, st.floats(min_value=0.01, max_value=1))
def test_tost_passes_exactly_when_its_interval_lies_within_the_margin(differences, margin):
    result = inference.tost_paired(differences, margin)

    inside = -margin < result.low and result.high < margin
    if not math.isclose(abs(result.p - 0.05), 0, abs_tol=1e-9):
        assert (result.p < 0.05) == inside


def test_tost_refuses_a_margin_or_alpha_it_cannot_use():
    with pytest.raises(ValueError, match="margin must be > 0"):
        inference.tost_paired([0.1, 0.2], 0)
    with pytest.raises(ValueError, match="alpha"):
        inference.tost_paired([0.1, 0.2], 1, alpha=0.5)
    assert inference.tost_paired([0.0, 0.0], 0.01).p == 0.0  # no spread, inside
    assert inference.tost_paired([0.02, 0.02], 0.01).p == 1.0  # no spread, outside


def test_holm_on_the_textbook_example():
    # Four hypotheses at α = 0.05 (Holm 1979, as Wikipedia's "Holm-Bonferroni method"
    # works it): 0.005 × 4, 0.01 × 3, 0.03 × 2, then 0.04 × 1 raised to 0.06.
    adjusted = inference.holm_adjusted([0.01, 0.04, 0.03, 0.005])

    assert adjusted == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert [p < 0.05 for p in adjusted] == [True, False, False, True]


def test_holm_as_r_p_adjust_gives_it():
    # p.adjust(c(0.01, 0.02, 0.03, 0.04, 0.05), "holm")
    assert inference.holm_adjusted([0.01, 0.02, 0.03, 0.04, 0.05]) == pytest.approx(
        [0.05, 0.08, 0.09, 0.09, 0.09]
    )
    assert inference.holm_adjusted([0.9, 0.8]) == [1.0, 1.0]
    assert inference.holm_adjusted([]) == []
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        inference.holm_adjusted([1.5])


@settings(max_examples=30, deadline=None)
@given(st.lists(st.floats(min_value=0, max_value=1), min_size=1, max_size=20))
def test_a_holm_rejection_is_a_raw_p_below_its_level_and_only_a_rejection_is(p_values):
    adjusted = inference.holm_adjusted(p_values)
    levels = inference.holm_levels(p_values, 0.05)

    # Assert: an interval at confidence 1 - level excludes the null exactly when Holm
    # rejects (to float rounding at the boundary), and every level is a step's, α / k
    steps = [0.05 / k for k in range(1, len(p_values) + 1)]
    for raw, adj, level in zip(p_values, adjusted, levels, strict=True):
        assert raw <= adj <= 1
        if adj < 0.05:
            assert raw < level * (1 + 1e-9)
        else:
            assert raw >= level * (1 - 1e-9)
        assert any(level == pytest.approx(step) for step in steps)


def test_holm_levels_after_the_stop_are_the_stopping_steps():
    # p = 0.001 is rejected at 0.05/3; 0.03 is not at 0.05/2, where Holm stops; 0.04
    # gets that level too (at its own, 0.05, its interval would exclude 0).
    assert inference.holm_levels([0.04, 0.001, 0.03], 0.05) == pytest.approx(
        [0.025, 0.05 / 3, 0.025]
    )


def test_bimodality_coefficient_by_hand():
    # Five seeds at 0 and five at 1: skewness 0, bias-corrected excess kurtosis
    # ((n + 1)(−2) + 6)(n − 1)/((n − 2)(n − 3)) = −144/56, so b = 1 / (−144/56 + 243/56).
    two_modes = inference.bimodality_coefficient([0.0] * 5 + [1.0] * 5)
    # 1..10: excess kurtosis of the sample −1.2242 → b = 0.3185.
    spread = inference.bimodality_coefficient([float(i) for i in range(1, 11)])

    assert two_modes == pytest.approx(56 / 99)
    assert two_modes > inference.BIMODAL_ABOVE
    assert spread == pytest.approx(0.3185, abs=1e-4)
    assert inference.bimodality_coefficient([1.0, 2.0, 3.0]) is None
    assert inference.bimodality_coefficient([1.0] * 6) is None


def test_the_test_split_rule():
    assert inference.accuracy_standard_error(225) == pytest.approx(1 / 30)
    assert inference.accuracy_standard_error(100, 0.9) == pytest.approx(0.03)
    assert inference.min_test_images(0.015) == 1112
    assert (
        inference.accuracy_standard_error(1112) <= 0.015 < inference.accuracy_standard_error(1111)
    )
    with pytest.raises(ValueError, match="at least 1 image"):
        inference.accuracy_standard_error(0)


def test_non_inferiority_tests_the_worse_side_of_the_metric():
    # An MSE about 0.001 lower than the comparator's: far better, so non-inferior at a
    # 0.0005 margin where lower is better, and "worse by the margin" for an accuracy.
    differences = [-0.0010, -0.0012, -0.0009, -0.0011, -0.0010]
    test = inference.tost_paired(differences, margin=0.0005)

    assert inference.noninferiority_p(test, higher_is_better=False) < 1e-4
    assert inference.noninferiority_p(test, higher_is_better=True) > 0.99
