"""FedFMC's own experiment (its paper's §4.2, Figures 1-3) measured from metrics lines.

The paper's proof of concept: three archetypes of one label each, FedFMC with and
without EWC during the merges, and FedAvg on the same data. Its Figures 1 and 2 plot,
over the rounds, each fork group's accuracy with the consolidated model; their claim
is that with EWC the groups' accuracies stay steady (and vary together) while the
other groups are merged in, and without EWC they drop or oscillate. Figure 3 sets
FedFMC against FedAvg, which it says oscillates where FedFMC's archetypes stay in line.

What a run records (``scripts/reproduce_fedfmc.py`` reads it): one line per trainer
per round whose ``accuracy`` is the trainer's deployed model on its own held-out test
split, that is on its own archetype's label, ``group`` the archetype's label and
``model`` the deployed model. Hence the measures here:

- :func:`archetype_curves`: per round, each archetype's mean accuracy over its trainers;
- :func:`on_consolidated`: the rounds in which all of an archetype's trainers deploy
  the round's consolidated model. Until its group is merged in, an archetype's
  trainers deploy their group's own model, so its figure is that model's, not the
  consolidated model's as in the paper's figures: the distinction is kept;
- :class:`Schedule`: the fork stage's end T and each merge step's rounds, as the run's
  configuration plans them (FedAvg runs keep FedFMC's options, ignored by their
  strategy, so that they are measured over the same rounds);
- :func:`mean_abs_change`: the mean absolute round-to-round change of the archetypes'
  accuracies over some rounds (lower: steadier), the stability figure;
- :func:`measure_run` gathers them for one run, :func:`summarise` averages runs
  (seeds) of one variant.

Every function is pure: lines and configurations in, figures out.
"""

from __future__ import annotations

import math
import re
import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from mcfl_chain.simulation.campaign import true_group_count
from mcfl_chain.simulation.runner import SimulationConfig

NAN = float("nan")
Curves = dict[str, dict[int, float]]
"""Archetype label → round → mean accuracy of its trainers (in [0, 1])."""


def natural_key(text: str) -> list[Any]:
    """Sort key putting ``"class 2"`` before ``"class 10"``."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", text)]


@dataclass(frozen=True)
class Schedule:
    """FedFMC's stages over a run, as its configuration plans them.

    Attributes
    ----------
    fork_rounds : int
        T: rounds ``0 .. T − 1`` are the fork stage.
    merge_rounds : int
        M: each merge step's rounds.
    groups : int
        The archetypes (the scenario's data groups): ``groups − 1`` merge steps fold
        them into the first. (The trainers may fork into another number of groups; the
        measures report the groups they formed, see :func:`fork_groups`.)
    rounds : int
        The run's rounds.
    """

    fork_rounds: int
    merge_rounds: int
    groups: int
    rounds: int

    @classmethod
    def of(cls, config: SimulationConfig) -> Schedule:
        """The schedule ``config`` plans (any strategy: FedAvg's ignores it)."""
        return cls(config.fork_rounds, config.merge_rounds, true_group_count(config), config.rounds)

    @property
    def planned_end(self) -> int:
        """The round after the last merge step, were the run long enough."""
        return self.fork_rounds + (self.groups - 1) * self.merge_rounds

    @property
    def merge_end(self) -> int:
        """The round after the merge stage, within the run (exclusive)."""
        return min(self.planned_end, self.rounds)

    @property
    def merge_stage(self) -> range:
        """The merge stage's rounds within the run (empty if the run stops before T)."""
        return range(min(self.fork_rounds, self.rounds), self.merge_end)

    @property
    def merge_starts(self) -> list[int]:
        """The first round of each merge step that starts within the run."""
        starts = (self.fork_rounds + step * self.merge_rounds for step in range(self.groups - 1))
        return [start for start in starts if start < self.rounds]

    @property
    def complete(self) -> bool:
        """Whether every merge step ends within the run."""
        return self.planned_end <= self.rounds


def scored(lines: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The lines with an accuracy and an archetype (a round sat out has no accuracy)."""
    return [
        line for line in lines if line.get("accuracy") is not None and line.get("group") is not None
    ]


def archetype_curves(lines: Iterable[Mapping[str, Any]]) -> Curves:
    """Per archetype (the lines' ``group``), per round, the mean accuracy of its trainers."""
    values: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    for line in scored(lines):
        values[str(line["group"])][int(line["round"])].append(float(line["accuracy"]))
    return {
        group: {round_: statistics.fmean(v) for round_, v in sorted(by_round.items())}
        for group, by_round in sorted(values.items(), key=lambda item: natural_key(item[0]))
    }


def consolidated_model(lines: Iterable[Mapping[str, Any]]) -> str | None:
    """The consolidated model of one round's lines: the deployed model whose trainers
    cover the most archetypes, then the most trainers, then the smallest id (None
    without a deployed model).

    In FedFMC's merge stage the consolidated model is the one every merged group's
    trainers share, so it spans the most archetypes; in FedAvg, the only model.
    """
    archetypes: dict[str, set[str]] = defaultdict(set)
    trainers: dict[str, int] = defaultdict(int)
    for line in scored(lines):
        if line.get("model") is None:
            continue
        model = str(line["model"])
        archetypes[model].add(str(line["group"]))
        trainers[model] += 1
    if not archetypes:
        return None
    return min(archetypes, key=lambda m: (-len(archetypes[m]), -trainers[m], m))


def on_consolidated(
    lines: Iterable[Mapping[str, Any]], since: int = 0
) -> dict[str, frozenset[int]]:
    """Archetype → the rounds (from ``since``) in which every one of its trainers with a
    figure deployed that round's :func:`consolidated_model`."""
    by_round: dict[int, list[Mapping[str, Any]]] = defaultdict(list)
    for line in scored(lines):
        by_round[int(line["round"])].append(line)
    rounds: dict[str, set[int]] = defaultdict(set)
    archetypes = {str(line["group"]) for lines_ in by_round.values() for line in lines_}
    for round_, round_lines in by_round.items():
        if round_ < since:
            continue
        model = consolidated_model(round_lines)
        deployed: dict[str, set[str]] = defaultdict(set)
        for line in round_lines:
            deployed[str(line["group"])].add(str(line.get("model")))
        for group, models in deployed.items():
            if models == {model}:
                rounds[group].add(round_)
    return {group: frozenset(rounds[group]) for group in sorted(archetypes, key=natural_key)}


def fork_groups(lines: Iterable[Mapping[str, Any]], round_: int) -> list[frozenset[str]]:
    """The archetypes on each model deployed in ``round_`` (the fork stage's last round:
    the groups FedFMC merges), ordered by their first archetype."""
    members: dict[str, set[str]] = defaultdict(set)
    for line in scored(lines):
        if int(line["round"]) == round_ and line.get("model") is not None:
            members[str(line["model"])].add(str(line["group"]))
    groups = [frozenset(archetypes) for archetypes in members.values()]
    return sorted(groups, key=lambda g: sorted(natural_key(a) for a in g))


def forked_as_archetypes(groups: Sequence[frozenset[str]], archetypes: Iterable[str]) -> bool:
    """Whether the fork groups are exactly the archetypes, one group each (the paper:
    "the fork groups are equivalent to groups of devices with the same archetype")."""
    return sorted(groups, key=sorted) == sorted((frozenset({a}) for a in archetypes), key=sorted)


def mean_abs_change(
    curves: Mapping[str, Mapping[int, float]],
    rounds: Iterable[int],
    keep: Mapping[str, frozenset[int]] | None = None,
) -> float:
    """Mean of ``|acc(r) − acc(r − 1)|`` over the archetypes and the rounds r of
    ``rounds`` where both rounds have a figure (in accuracy units; NaN without any).

    The change into a stage's first round counts: for the merge stage, the jump the
    first merge causes is part of what EWC should soften. With ``keep``, only the
    pairs whose two rounds are both among ``keep[archetype]`` count (e.g. the rounds
    the archetype spends on the consolidated model).
    """
    changes = []
    wanted = list(rounds)
    for group, curve in curves.items():
        allowed = None if keep is None else keep.get(group, frozenset())
        for round_ in wanted:
            if round_ in curve and round_ - 1 in curve:
                if allowed is not None and not {round_, round_ - 1} <= allowed:
                    continue
                changes.append(abs(curve[round_] - curve[round_ - 1]))
    return statistics.fmean(changes) if changes else NAN


def final_round(curves: Mapping[str, Mapping[int, float]]) -> int | None:
    """The last round with any archetype's figure (None without figures)."""
    return max((r for curve in curves.values() for r in curve), default=None)


def final_accuracy(curves: Mapping[str, Mapping[int, float]]) -> dict[str, float]:
    """Each archetype's figure at :func:`final_round` (NaN for one without a figure there)."""
    last = final_round(curves)
    return {
        group: curve.get(last, NAN) if last is not None else NAN for group, curve in curves.items()
    }


def worst(values: Iterable[float]) -> float:
    """The smallest figure (NaNs ignored; NaN if none)."""
    present = [v for v in values if not math.isnan(v)]
    return min(present) if present else NAN


def spread(values: Iterable[float]) -> float:
    """Largest minus smallest figure (NaNs ignored; NaN if none)."""
    present = [v for v in values if not math.isnan(v)]
    return max(present) - min(present) if present else NAN


@dataclass(frozen=True)
class RunMeasures:
    """One run's figures (accuracies and changes in [0, 1] units)."""

    schedule: Schedule
    curves: Curves
    consolidated: dict[str, frozenset[int]]
    """Archetype → merge-stage-and-later rounds on the consolidated model."""
    fork_groups: tuple[frozenset[str], ...]
    """The archetypes of each model of round T − 1."""
    final: dict[str, float]
    worst: float
    spread: float
    merge_change: float
    """Mean |Δ| per round over the merge stage, every archetype."""
    merged_change: float
    """The same, only where the archetype is on the consolidated model in both rounds."""
    run_change: float
    """Mean |Δ| per round over the whole run."""

    @property
    def forked_as_archetypes(self) -> bool:
        return forked_as_archetypes(self.fork_groups, self.curves)


def measure_run(lines: Sequence[Mapping[str, Any]], schedule: Schedule) -> RunMeasures:
    """:class:`RunMeasures` of one run's metrics lines under its ``schedule``."""
    curves = archetype_curves(lines)
    consolidated = on_consolidated(lines, since=schedule.fork_rounds)
    final = final_accuracy(curves)
    stage = schedule.merge_stage
    return RunMeasures(
        schedule=schedule,
        curves=curves,
        consolidated=consolidated,
        fork_groups=tuple(fork_groups(lines, schedule.fork_rounds - 1)),
        final=final,
        worst=worst(final.values()),
        spread=spread(final.values()),
        merge_change=mean_abs_change(curves, stage),
        merged_change=mean_abs_change(curves, stage, consolidated),
        run_change=mean_abs_change(curves, range(1, schedule.rounds)),
    )


def _mean(values: Iterable[float]) -> float:
    present = [v for v in values if not math.isnan(v)]
    return statistics.fmean(present) if present else NAN


@dataclass(frozen=True)
class VariantSummary:
    """A variant's runs (one per seed) averaged: each figure is the mean over the runs
    of that run's figure (the worst archetype of each run, not of the mean curves)."""

    runs: int
    archetypes: tuple[str, ...]
    curves: Curves
    """Per archetype and round, the mean over the runs with a figure there."""
    consolidated: dict[str, frozenset[int]]
    """Rounds on the consolidated model in every run."""
    final: dict[str, float]
    worst: float
    spread: float
    merge_change: float
    merged_change: float
    run_change: float
    schedules: tuple[Schedule, ...]
    fork_groups: tuple[tuple[frozenset[str], ...], ...]
    """Each run's fork groups, in the runs' order."""


def summarise(measures: Sequence[RunMeasures]) -> VariantSummary:
    """The mean over ``measures`` (runs of one variant, one per seed).

    Raises
    ------
    ValueError
        Without a run.
    """
    if not measures:
        raise ValueError("no finished run to summarise")
    archetypes = tuple(sorted({a for m in measures for a in m.curves}, key=natural_key))
    curves: Curves = {}
    for archetype in archetypes:
        per_round: dict[int, list[float]] = defaultdict(list)
        for m in measures:
            for round_, value in m.curves.get(archetype, {}).items():
                per_round[round_].append(value)
        curves[archetype] = {r: statistics.fmean(v) for r, v in sorted(per_round.items())}
    consolidated = {
        a: frozenset.intersection(*(m.consolidated.get(a, frozenset()) for m in measures))
        for a in archetypes
    }
    return VariantSummary(
        runs=len(measures),
        archetypes=archetypes,
        curves=curves,
        consolidated=consolidated,
        final={a: _mean(m.final.get(a, NAN) for m in measures) for a in archetypes},
        worst=_mean(m.worst for m in measures),
        spread=_mean(m.spread for m in measures),
        merge_change=_mean(m.merge_change for m in measures),
        merged_change=_mean(m.merged_change for m in measures),
        run_change=_mean(m.run_change for m in measures),
        schedules=tuple(m.schedule for m in measures),
        fork_groups=tuple(m.fork_groups for m in measures),
    )
