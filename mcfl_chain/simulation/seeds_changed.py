"""What the declared evaluation changed against the reduced-size report (issue 36, "done
when": the closing note lists what ten seeds changed).

The reduced-size report ran seeds 0-2 with one optimiser for every method (SGD, lr 0.05)
and each scenario file's own MCFL tolerance; the declared evaluation runs seeds 100-109
with every method at its tuned point and the protocol's tolerance. Both campaigns ran
MCFL, FedAvg and local training on every scenario, so MCFL − FedAvg and MCFL − local
exist on both. Here they are set side by side under one rule, an uncorrected 95 % t
interval over seeds (t with 2 and with 9 degrees of freedom), so that what changed is
the evidence and not the test. The corrected verdict against the best alternative is
the synthesis table's, repeated. Pure functions; ``scripts/report_results.py`` calls them.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from mcfl_chain.simulation import campaign, stats

BASELINES = ("fedavg", "local")
"""The two baselines both campaigns ran on every scenario."""
Figures = Mapping[tuple[str, str], Mapping[int, stats.RunFigures]]
"""(scenario, method) → seed → a finished run's figures."""


def reading(interval: stats.Interval | None, metric: str) -> str:
    """What an uncorrected MCFL − baseline interval says, in the report's words."""
    if interval is None:
        return "not run"
    return {None: "one seed", 0: "not resolved", 1: "MCFL ahead", -1: "MCFL behind"}[
        stats.favours(interval, metric)
    ]


@dataclass(frozen=True)
class Change:
    """One declared scenario: MCFL − each baseline on both campaigns, and the verdict
    against the best alternative (``None`` until the evaluation has run)."""

    scenario: str
    metric: str
    tolerances: tuple[str, str]
    """MCFL's tolerance in the reduced report, then in the declared evaluation."""
    reduced: Mapping[str, stats.PairedDifference | None]
    declared: Mapping[str, stats.PairedDifference | None]
    verdict: str | None

    def readings(self, baseline: str) -> tuple[str, str]:
        return tuple(  # type: ignore[return-value]
            reading(d.mean_diff if d else None, self.metric)
            for d in (self.reduced[baseline], self.declared[baseline])
        )

    def ahead_of_both(self, declared: bool) -> bool:
        """MCFL's interval clear of 0 in its favour against FedAvg and local training
        alike: ahead of the better of the two."""
        return all(self.readings(b)[declared] == "MCFL ahead" for b in BASELINES)


def _seeds(figures: Mapping[int, stats.RunFigures], seeds: Collection[int]) -> dict:
    return {s: f for s, f in figures.items() if s in seeds}


def _complete(
    mine: Mapping[int, stats.RunFigures],
    theirs: Mapping[int, stats.RunFigures],
    seeds: Collection[int],
) -> stats.PairedDifference | None:
    """The paired difference once every one of ``seeds`` is paired, as the declared
    synthesis judges (a campaign stopped part-way shows nothing yet)."""
    if not set(seeds) <= mine.keys() & theirs.keys():
        return None
    return stats.paired_difference(mine, _seeds(theirs, seeds))


def changes(
    scenarios: Sequence[tuple[str, str, str]],
    reduced: Figures,
    declared: Figures,
    reduced_seeds: Collection[int],
    evaluation_seeds: Collection[int],
    tolerances: Mapping[str, tuple[str, str]],
    verdicts: Mapping[str, str | None],
) -> list[Change]:
    """One :class:`Change` per ``(name, file, stem)`` of ``scenarios``: the declared
    scenario, MCFL's scenario file and the stem its baselines are filed under. Each
    campaign's figures count only on its own seeds; the metric is MCFL's (accuracy when
    no MCFL run exists yet)."""
    out = []
    for name, file, stem in scenarios:
        mcfl = (file, "mcfl")
        metric = next(
            (f.metric for side in (declared, reduced) for f in side.get(mcfl, {}).values()),
            "accuracy",
        )
        sides = []
        for figures, seeds in ((reduced, reduced_seeds), (declared, evaluation_seeds)):
            mine = _seeds(figures.get(mcfl, {}), seeds)
            sides.append({b: _complete(mine, figures.get((stem, b), {}), seeds) for b in BASELINES})
        out.append(Change(name, metric, tolerances[name], sides[0], sides[1], verdicts.get(name)))
    return out


def _cell(difference: stats.PairedDifference | None, metric: str) -> str:
    if difference is None:
        return "not run"
    scale, digits = stats.scale_of(metric)
    interval = difference.mean_diff
    return (
        f"{interval.format(scale, digits, signed=True)} ({len(difference.seeds)} seeds: "
        f"{reading(interval, metric)})"
    )


def what_changed(change: Change) -> str:
    """The baselines whose reading moved, ``before → after``; "no change" otherwise."""
    moved = [
        f"{campaign.LABELS[b]}: {before} → {after}"
        for b in BASELINES
        for before, after in [change.readings(b)]
        if before != after
    ]
    return "; ".join(moved) or "no change"


def changes_table(rows: Sequence[Change]) -> list[str]:
    """The markdown table, then the count of scenarios where MCFL is ahead of the better
    of FedAvg and local training on each campaign."""
    header = [
        "scenario",
        "MCFL's tolerance (reduced → declared)",
        "MCFL − FedAvg, reduced",
        "MCFL − FedAvg, declared",
        "MCFL − local, reduced",
        "MCFL − local, declared",
        "what changed",
        "declared verdict against the best alternative (Holm)",
    ]
    lines = [
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
    ]
    for row in rows:
        lines.append(
            "| "
            + " | ".join(
                [
                    row.scenario,
                    " → ".join(row.tolerances),
                    _cell(row.reduced["fedavg"], row.metric),
                    _cell(row.declared["fedavg"], row.metric),
                    _cell(row.reduced["local"], row.metric),
                    _cell(row.declared["local"], row.metric),
                    what_changed(row) if all(row.declared[b] for b in BASELINES) else "not run yet",
                    row.verdict or "not run yet",
                ]
            )
            + " |"
        )
    ran = [r for r in rows if all(r.declared[b] for b in BASELINES)]
    ahead = {
        side: [r.scenario for r in ran if r.ahead_of_both(declared=side == "declared")]
        for side in ("reduced", "declared")
    }
    lines += [
        "",
        f"Ahead of the better of FedAvg and local training (both intervals clear of 0 in "
        f"MCFL's favour), over the {len(ran)} scenarios the evaluation has run: reduced "
        f"report {len(ahead['reduced'])} ({', '.join(ahead['reduced']) or 'none'}); declared "
        f"evaluation {len(ahead['declared'])} ({', '.join(ahead['declared']) or 'none'}).",
        "",
    ]
    return lines
