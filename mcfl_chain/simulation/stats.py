"""Statistics over seeds for the experiment campaign (``scripts/report_results.py``).

Pure functions on the metrics lines of run directories (one JSON object per trainer
per round, as the workers write them): each run's final-round figures (worst, average
and best trainer, mean by data group, FACADE's fair accuracy, distinct final models),
means over seeds with a 95 % Student-t interval, and paired differences between two
methods run on the same data and seeds (pairs by ``trainer_index`` within a seed, then
an interval over seeds).

For accuracy higher is better (worst = lowest); for the autoencoders' MSE lower is
better (worst = highest). A difference is always ``method − baseline``, in the metric's
own unit, so a positive accuracy difference and a negative MSE difference both favour
the method.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from scipy.stats import t

from mcfl_chain.simulation.report import fair_accuracy

CONFIDENCE = 0.95


def t_quantile(df: int, confidence: float = CONFIDENCE) -> float:
    """Two-sided Student-t quantile: ``t`` such that P(|T| <= t) = ``confidence``.

    Raises
    ------
    ValueError
        If ``df < 1``.
    """
    if df < 1:
        raise ValueError(f"a t interval needs at least 1 degree of freedom, got {df}")
    return float(t.ppf(0.5 + confidence / 2, df))


@dataclass(frozen=True)
class Interval:
    """A mean over ``n`` values and the half-width of its Student-t interval.

    ``half_width`` is None for a single value (no spread to estimate).
    """

    mean: float
    half_width: float | None
    n: int

    @property
    def low(self) -> float | None:
        return None if self.half_width is None else self.mean - self.half_width

    @property
    def high(self) -> float | None:
        return None if self.half_width is None else self.mean + self.half_width

    @property
    def excludes_zero(self) -> bool | None:
        """Whether the interval lies wholly on one side of 0 (None with one value)."""
        if self.low is None or self.high is None:
            return None
        return self.low > 0 or self.high < 0

    def format(self, scale: float = 1.0, digits: int = 1, signed: bool = False) -> str:
        """``"mean ± half-width"`` (``"mean"`` alone for one value), values × ``scale``;
        ``signed`` writes the mean's sign (``+1.2 ± 0.8``)."""
        text = f"{self.mean * scale:{'+' if signed else ''}.{digits}f}"
        if self.half_width is not None:
            text += f" ± {self.half_width * scale:.{digits}f}"
        return text


def scale_of(metric: str) -> tuple[float, int]:
    """How a figure of ``metric`` is shown: accuracy in % with one decimal, MSE as is
    with four (scale, digits)."""
    return (100.0, 1) if metric == "accuracy" else (1.0, 4)


def favours(interval: Interval, metric: str) -> int | None:
    """On which side of 0 a ``method − baseline`` interval lies: +1 wholly on the
    method's better side (by the metric's direction), −1 on its worse side, 0 across 0,
    None for a single value (no interval)."""
    if interval.excludes_zero is None:
        return None
    if not interval.excludes_zero:
        return 0
    return 1 if (interval.mean > 0) == higher_is_better(metric) else -1


def mean_interval(values: Iterable[float], confidence: float = CONFIDENCE) -> Interval | None:
    """Mean and ``confidence`` Student-t interval (sample standard deviation, n − 1).

    None for no values; an interval of half-width 0 when all values are equal.
    """
    data = [float(v) for v in values]
    if not data:
        return None
    mean = statistics.fmean(data)
    if len(data) == 1:
        return Interval(mean, None, 1)
    half = t_quantile(len(data) - 1, confidence) * statistics.stdev(data) / math.sqrt(len(data))
    return Interval(mean, half, len(data))


# -- one run ---------------------------------------------------------------------------


def metric_name(lines: Sequence[Mapping[str, Any]]) -> str:
    """``"accuracy"`` when any line has an accuracy, else ``"MSE"`` (autoencoders)."""
    return "accuracy" if any(line.get("accuracy") is not None for line in lines) else "MSE"


def value_of(line: Mapping[str, Any], metric: str) -> float | None:
    value = line.get("accuracy") if metric == "accuracy" else line.get("loss")
    return None if value is None else float(value)


def higher_is_better(metric: str) -> bool:
    return metric == "accuracy"


def worst_of(values: Iterable[float], metric: str) -> float:
    return min(values) if higher_is_better(metric) else max(values)


def best_of(values: Iterable[float], metric: str) -> float:
    return max(values) if higher_is_better(metric) else min(values)


@dataclass(frozen=True)
class RunFigures:
    """One run's figures at its last round (the last round any trainer reported a value).

    Attributes
    ----------
    metric : str
        ``"accuracy"`` or ``"MSE"``.
    round : int
        The final round.
    per_trainer : dict
        Each trainer's value, by ``trainer_index``.
    worst, average, best : float
        Over trainers.
    by_group : dict
        Mean over each data group's trainers, by group label.
    fair : float or None
        FACADE's fair accuracy over the groups (accuracy only).
    models : int
        Distinct models the trainers hold (deploy) at the final round.
    minority : float or None
        Mean over the trainers of the smallest data group, when one group is smaller
        than every other (None otherwise: one group, or a tie for the smallest).
    traffic : float or None
        Bytes a trainer stored plus fetched per round, mean over every trainer-round
        that reports them (all rounds, not only the last); None if none does.
    gas : float or None
        Gas a trainer paid per round, mean over every trainer-round that reports it.
    """

    metric: str
    round: int
    per_trainer: dict[int, float]
    worst: float
    average: float
    best: float
    by_group: dict[str, float]
    fair: float | None
    models: int
    minority: float | None = None
    traffic: float | None = None
    gas: float | None = None


def minority_group(sizes: Mapping[str, int]) -> str | None:
    """The one group with fewer trainers than every other; None without one."""
    if len(sizes) < 2:
        return None
    smallest = min(sizes.values())
    below = [g for g, n in sizes.items() if n == smallest]
    return below[0] if len(below) == 1 else None


def per_trainer_round(lines: Sequence[Mapping[str, Any]], key: str) -> float | None:
    """Mean of ``key`` (a number, or the stored plus fetched bytes of ``traffic``) over
    the lines that have it."""
    values = [
        line[key]["stored_bytes"] + line[key]["fetched_bytes"] if key == "traffic" else line[key]
        for line in lines
        if line.get(key) is not None
    ]
    return statistics.fmean(values) if values else None


def run_figures(lines: Sequence[Mapping[str, Any]], metric: str | None = None) -> RunFigures | None:
    """The final-round figures of one run's metrics lines; None if no line has a value."""
    metric = metric or metric_name(lines)
    valued = [line for line in lines if value_of(line, metric) is not None]
    if not valued:
        return None
    last = max(line["round"] for line in valued)
    final = [line for line in valued if line["round"] == last]
    per_trainer: dict[int, float] = {}
    groups: dict[str, list[float]] = defaultdict(list)
    for line in final:
        value = value_of(line, metric)
        assert value is not None
        per_trainer[int(line.get("trainer_index", len(per_trainer)))] = value
        groups[str(line.get("group", ""))].append(value)
    values = list(per_trainer.values())
    minority = minority_group({g: len(v) for g, v in groups.items()})
    return RunFigures(
        metric=metric,
        round=last,
        per_trainer=per_trainer,
        worst=worst_of(values, metric),
        average=statistics.fmean(values),
        best=best_of(values, metric),
        by_group={g: statistics.fmean(v) for g, v in sorted(groups.items())},
        fair=fair_accuracy(dict(groups)) if metric == "accuracy" else None,
        models=len({line["model"] for line in final if line.get("model")}),
        minority=None if minority is None else statistics.fmean(groups[minority]),
        traffic=per_trainer_round(lines, "traffic"),
        gas=per_trainer_round(lines, "gas"),
    )


# -- over seeds ------------------------------------------------------------------------


@dataclass(frozen=True)
class SeedSummary:
    """A method's final-round figures over seeds: each a mean and its interval."""

    metric: str
    seeds: list[int]
    worst: Interval
    average: Interval
    best: Interval
    fair: Interval | None
    models: Interval
    by_group: dict[str, Interval]
    minority: Interval | None = None
    traffic: Interval | None = None
    gas: Interval | None = None


def over_seeds(runs: Mapping[int, RunFigures]) -> SeedSummary | None:
    """Mean and interval over seeds of every figure of :class:`RunFigures`; None if no run."""
    if not runs:
        return None
    seeds = sorted(runs)
    figures = [runs[s] for s in seeds]

    def interval(values: Iterable[float]) -> Interval:
        result = mean_interval(values)
        assert result is not None
        return result

    groups = sorted({g for f in figures for g in f.by_group})
    fair = [f.fair for f in figures if f.fair is not None]

    def every(values: Iterable[float | None]) -> Interval | None:
        """The interval when every seed has the figure, else None."""
        present = [v for v in values if v is not None]
        return mean_interval(present) if len(present) == len(figures) else None

    return SeedSummary(
        metric=figures[0].metric,
        seeds=seeds,
        worst=interval(f.worst for f in figures),
        average=interval(f.average for f in figures),
        best=interval(f.best for f in figures),
        fair=mean_interval(fair) if len(fair) == len(figures) else None,
        models=interval(f.models for f in figures),
        by_group={g: interval(f.by_group[g] for f in figures if g in f.by_group) for g in groups},
        minority=every(f.minority for f in figures),
        traffic=every(f.traffic for f in figures),
        gas=every(f.gas for f in figures),
    )


@dataclass(frozen=True)
class PairedDifference:
    """``method − baseline`` over the seeds both were run with.

    ``mean_diff``: per seed, the mean over trainers of each trainer's difference (pairs
    by ``trainer_index``); ``worst_diff``: per seed, the worst trainer's value of the
    method minus the baseline's (over the paired trainers); then an interval over seeds.
    """

    seeds: list[int]
    mean_diff: Interval
    worst_diff: Interval
    per_seed: dict[int, tuple[float, float]]


def seed_difference(method: RunFigures, baseline: RunFigures) -> tuple[float, float]:
    """``(mean over trainers of the paired differences, worst − worst)`` for one seed.

    Raises
    ------
    ValueError
        If the two runs have no trainer in common, or different metrics.
    """
    if method.metric != baseline.metric:
        raise ValueError(f"cannot pair {method.metric} with {baseline.metric}")
    common = sorted(method.per_trainer.keys() & baseline.per_trainer.keys())
    if not common:
        raise ValueError("the two runs have no trainer_index in common")
    a = [method.per_trainer[i] for i in common]
    b = [baseline.per_trainer[i] for i in common]
    mean_diff = statistics.fmean(x - y for x, y in zip(a, b, strict=True))
    return mean_diff, worst_of(a, method.metric) - worst_of(b, baseline.metric)


def paired_difference(
    method: Mapping[int, RunFigures], baseline: Mapping[int, RunFigures]
) -> PairedDifference | None:
    """Paired ``method − baseline`` differences by seed; None if no seed has both runs."""
    seeds = sorted(method.keys() & baseline.keys())
    if not seeds:
        return None
    per_seed = {s: seed_difference(method[s], baseline[s]) for s in seeds}
    mean_diff = mean_interval(d[0] for d in per_seed.values())
    worst_diff = mean_interval(d[1] for d in per_seed.values())
    assert mean_diff is not None and worst_diff is not None
    return PairedDifference(seeds, mean_diff, worst_diff, per_seed)


@dataclass(frozen=True)
class MSEGain:
    """How much lower a method's per-dataset MSE is than the baseline's, two ways.

    ``ratio``: baseline/method − 1 (the paper's "outperformed by 24.5 %");
    ``reduction``: (baseline − method)/baseline. Both positive when the method is better;
    each an interval over seeds of the per-seed values.
    """

    ratio: Interval
    reduction: Interval


def mse_gains(
    method: Mapping[int, RunFigures], baseline: Mapping[int, RunFigures]
) -> dict[str, MSEGain]:
    """Per data group (dataset), :class:`MSEGain` of ``method`` over ``baseline``,
    over the seeds both were run with and the groups both report."""
    seeds = sorted(method.keys() & baseline.keys())
    groups = sorted({g for s in seeds for g in method[s].by_group if g in baseline[s].by_group})
    out = {}
    for group in groups:
        pairs = [
            (method[s].by_group[group], baseline[s].by_group[group])
            for s in seeds
            if group in method[s].by_group and group in baseline[s].by_group
        ]
        ratio = mean_interval(b / m - 1 for m, b in pairs)
        reduction = mean_interval((b - m) / b for m, b in pairs)
        assert ratio is not None and reduction is not None
        out[group] = MSEGain(ratio, reduction)
    return out
