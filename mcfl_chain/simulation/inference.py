"""Hypothesis tests over seeds for the declared endpoints (``docs/results/protocol.toml``).

Pure functions on per-seed paired differences (``method − comparator``, one value per
seed, as :func:`~mcfl_chain.simulation.stats.seed_difference` gives them): the paired
two-sided t test, the two one-sided tests of equivalence (TOST) within a margin, Holm's
step-down adjustment across a family of p-values, Sarle's bimodality coefficient, and
the standard error of one trainer's accuracy on a test split of n images. The t
distribution is scipy's; nothing here reads files.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from scipy.stats import kurtosis, skew, t


def _checked(differences: Sequence[float]) -> list[float]:
    data = [float(d) for d in differences]
    if len(data) < 2:
        raise ValueError(f"a paired test needs at least 2 seeds, got {len(data)}")
    return data


@dataclass(frozen=True)
class PairedTTest:
    """A two-sided one-sample t test of the paired differences against 0.

    ``p`` is 0 when every difference is equal and non-zero (a spread of 0), 1 when
    every difference is 0.
    """

    mean: float
    standard_error: float
    df: int
    statistic: float
    p: float


def paired_t_test(differences: Sequence[float]) -> PairedTTest:
    """The paired t test of ``differences`` (H0: mean difference = 0), two-sided; the
    same as ``scipy.stats.ttest_rel(a, b)`` on the values the differences come from.

    Raises
    ------
    ValueError
        With fewer than 2 differences.
    """
    data = _checked(differences)
    mean = statistics.fmean(data)
    se = statistics.stdev(data) / math.sqrt(len(data))
    df = len(data) - 1
    if se == 0:  # no spread: certain when the differences are not 0, void when they are
        statistic = math.copysign(math.inf, mean) if mean else 0.0
        return PairedTTest(mean, 0.0, df, statistic, 0.0 if mean else 1.0)
    statistic = mean / se
    return PairedTTest(mean, se, df, statistic, float(2 * t.sf(abs(statistic), df)))


@dataclass(frozen=True)
class EquivalenceTest:
    """TOST of the paired differences within ``±margin``.

    ``p`` is the larger of the two one-sided p-values (H0: mean <= −margin, H0: mean >=
    +margin); equivalence at level α is ``p < α``, the same as the ``1 − 2α`` interval
    ``(low, high)`` lying inside ``(−margin, +margin)``.
    """

    mean: float
    margin: float
    p_lower: float
    p_upper: float
    low: float
    high: float
    alpha: float

    @property
    def p(self) -> float:
        return max(self.p_lower, self.p_upper)


def tost_paired(
    differences: Sequence[float], margin: float, alpha: float = 0.05
) -> EquivalenceTest:
    """Two one-sided t tests that the mean of ``differences`` lies within ``±margin``,
    with the ``1 − 2α`` (90 % at α = 0.05) t interval of the mean.

    Raises
    ------
    ValueError
        With fewer than 2 differences, a margin <= 0 or α outside (0, 0.5).
    """
    if margin <= 0:
        raise ValueError(f"an equivalence margin must be > 0, got {margin}")
    if not 0 < alpha < 0.5:
        raise ValueError(f"alpha must lie in (0, 0.5), got {alpha}")
    data = _checked(differences)
    mean = statistics.fmean(data)
    se = statistics.stdev(data) / math.sqrt(len(data))
    df = len(data) - 1
    if se == 0:
        p_lower = 0.0 if mean > -margin else 1.0
        p_upper = 0.0 if mean < margin else 1.0
        return EquivalenceTest(mean, margin, p_lower, p_upper, mean, mean, alpha)
    p_lower = float(t.sf((mean + margin) / se, df))  # H0: mean <= −margin
    p_upper = float(t.cdf((mean - margin) / se, df))  # H0: mean >= +margin
    half = float(t.ppf(1 - alpha, df)) * se
    return EquivalenceTest(mean, margin, p_lower, p_upper, mean - half, mean + half, alpha)


def noninferiority_p(test: EquivalenceTest, higher_is_better: bool = True) -> float:
    """The p of the one-sided test of H0 "worse than the comparator by the margin or
    more": TOST's lower test where higher is better, its upper one where lower is (an
    MSE)."""
    return test.p_lower if higher_is_better else test.p_upper


def holm_adjusted(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values, in the order given: the i-th smallest p
    times (m − i + 1), made non-decreasing in that order, capped at 1. A hypothesis
    is rejected at family-wise level α when its adjusted p is < α.

    Raises
    ------
    ValueError
        For a p-value outside [0, 1].
    """
    bad = [p for p in p_values if not 0.0 <= p <= 1.0]
    if bad:
        raise ValueError(f"p-values lie in [0, 1], got {bad[0]}")
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    adjusted = [0.0] * m
    running = 0.0
    for rank, index in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p_values[index]))
        adjusted[index] = running
    return adjusted


def holm_levels(p_values: Sequence[float], alpha: float) -> list[float]:
    """The level each hypothesis's interval is given at, in the order given, so that the
    interval agrees with Holm's decision (:func:`holm_adjusted`).

    Holm tests the i-th smallest p at α / (m − i + 1) and stops at the first it cannot
    reject. A rejected hypothesis gets its own step's level: its raw p is below it, so
    its interval at confidence 1 − level excludes the null. Every hypothesis from the
    stopping step on gets the stopping step's level: each of their raw p is at least
    that level, so each interval holds the null. (Giving a later hypothesis its own,
    larger level could make its interval exclude the null while Holm did not reject it.)
    """
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    levels = [0.0] * m
    stopped: float | None = None
    for rank, index in enumerate(order):
        level = alpha / (m - rank)
        # the same arithmetic as holm_adjusted's, so that both decide alike
        if stopped is None and (m - rank) * p_values[index] >= alpha:
            stopped = level
        levels[index] = level if stopped is None else stopped
    return levels


BIMODAL_ABOVE = 5 / 9
"""Sarle's bimodality coefficient of a uniform distribution: values above it suggest
two modes (or a heavy skew), and the per-seed values are shown."""


def bimodality_coefficient(values: Sequence[float]) -> float | None:
    """Sarle's b = (g² + 1) / (k + 3(n − 1)² / ((n − 2)(n − 3))), g the sample skewness
    and k the sample excess kurtosis (both bias-corrected); None below 4 values or with
    no spread."""
    data = [float(v) for v in values]
    n = len(data)
    if n < 4 or statistics.pstdev(data) == 0:
        return None
    g = float(skew(data, bias=False))
    k = float(kurtosis(data, fisher=True, bias=False))
    return (g * g + 1) / (k + 3 * (n - 1) ** 2 / ((n - 2) * (n - 3)))


def accuracy_standard_error(test_images: int, accuracy: float = 0.5) -> float:
    """Standard error of one trainer's accuracy measured on ``test_images`` images
    (binomial: sqrt(p(1 − p)/n)); p = 0.5 is the worst case.

    Raises
    ------
    ValueError
        For no image or an accuracy outside [0, 1].
    """
    if test_images < 1:
        raise ValueError(f"a test split has at least 1 image, got {test_images}")
    if not 0.0 <= accuracy <= 1.0:
        raise ValueError(f"an accuracy lies in [0, 1], got {accuracy}")
    return math.sqrt(accuracy * (1 - accuracy) / test_images)


def min_test_images(standard_error: float, accuracy: float = 0.5) -> int:
    """The fewest test images that bring :func:`accuracy_standard_error` to at most
    ``standard_error`` (a fraction: 0.015 for 1.5 points)."""
    if standard_error <= 0:
        raise ValueError(f"a standard error must be > 0, got {standard_error}")
    return max(1, math.ceil(accuracy * (1 - accuracy) / standard_error**2 - 1e-9))
