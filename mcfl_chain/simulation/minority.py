"""The minority at the true 30:2 (``docs/results/minority-30-2.toml``, issue 37's first
target): its plan, its test and its table.

The declared rotation-30-2 file keeps FACADE's ratio at 16 trainers, so its minority is
one trainer, who has nobody to share with. The target is stated at the true 30:2: 32
trainers, two of them rotated. This stage runs that network with the settings the reduced
size chose (nothing is chosen here) and asks one question, declared before its runs: is
the judged method's minority at least the reference's (MCFL-plus against local
training)? The test is a one-sided paired t test of non-inferiority at the protocol's
margin (the lower test of :func:`~mcfl_chain.simulation.inference.tost_paired`), and
the target also asks the mean difference to be at least 0. Nothing here runs a
simulation: ``scripts/run_experiments.py --declared minority-30-2`` does, and
``scripts/report_results.py`` makes the table.

Each declaration is a stage of its own, named after its file (:data:`DECLARATIONS`):
``minority-30-2`` ran MCFL-plus with the first clean declaration's options on the
evaluation seeds; ``minority-30-2-confirmatory`` names its MCFL-plus options itself (the
configuration the confirmatory clean stage and the fifth defence declaration judge) and
runs on fresh seeds.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from mcfl_chain.simulation import campaign, inference, plus_clean, protocol, stats, sweep
from mcfl_chain.simulation.paper_scale import SETTABLE
from mcfl_chain.simulation.runner import SimulationConfig, SimulationError

DECLARATIONS = {
    stem: Path("docs") / "results" / f"{stem}.toml"
    for stem in ("minority-30-2", "minority-30-2-confirmatory")
}
"""Stage name → its declaration, relative to the repository root; in the order they were
declared. Runs go to ``runs/declared/<stage>/``, records to ``results/declared/<stage>/``."""
STAGE = "minority-30-2"
MINORITY = DECLARATIONS[STAGE]
"""The first declaration."""
TITLE = "The minority at the true 30:2"
"""The report's heading for a declaration that names no title."""


def folders(stage: str) -> tuple[Path, Path]:
    """The run and record folders of the declared ``stage``."""
    return protocol.DECLARED_RUNS / stage, protocol.DECLARED_RECORDS / stage


@dataclass(frozen=True)
class MinorityStudy:
    """The declaration: the protocol's scenario it starts from, the name and settings of
    the network it runs, the judged method, its reference, the methods shown beside them,
    the seeds, the non-inferiority margin (accuracy points), the test's level, MCFL-plus's
    options (None: the first clean declaration's) and the report's heading."""

    scenario: str
    name: str
    settings: Mapping[str, Any]
    judged: str
    reference: str
    also: tuple[str, ...]
    seeds: tuple[int, ...]
    margin_points: float
    alpha: float
    options: tuple[tuple[str, Any], ...] | None = None
    title: str = TITLE

    @property
    def methods(self) -> tuple[str, ...]:
        """Every method run, the judged one first, then the reference."""
        return (self.judged, self.reference, *self.also)


def parse_minority(text: str, where: str = "minority-30-2") -> MinorityStudy:
    """:class:`MinorityStudy` from the text of its declaration.

    Raises
    ------
    ProtocolError
        For invalid TOML, a missing or mistyped key, an unknown method or one named
        twice, a field a run's configuration does not have, a margin <= 0, an alpha
        outside (0, 0.5), or ``options`` that MCFL-plus does not have (or values it
        refuses) or in a study that does not run it.
    """
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise protocol.ProtocolError(f"{where}: {exc}") from exc
    head = protocol._require(data, "minority_30_2", dict, where)
    place = f"{where} [minority_30_2]"
    settings = protocol._require(head, "settings", dict, place)
    unknown = sorted(set(settings) - SETTABLE)
    if unknown:
        raise protocol.ProtocolError(
            f"{place}: settings names {', '.join(unknown)}, not a field a run's "
            "configuration can be given (see SimulationConfig)"
        )
    also = protocol._require(head, "also", list, place)
    methods = [
        protocol._require(head, "judged", str, place),
        protocol._require(head, "reference", str, place),
        *also,
    ]
    strangers = [m for m in methods if m not in campaign.CAMPAIGN_METHODS]
    if strangers or len(set(methods)) != len(methods):
        raise protocol.ProtocolError(
            f"{place}: judged, reference and also must name distinct methods (known: "
            f"{', '.join(campaign.CAMPAIGN_METHODS)}), got {methods!r}"
        )
    margin = protocol._require(head, "margin_points", (int, float), place)
    alpha = protocol._require(head, "alpha", float, place)
    if margin <= 0 or not 0 < alpha < 0.5:
        raise protocol.ProtocolError(
            f"{place}: margin_points must be > 0 and alpha in (0, 0.5), got {margin} and {alpha}"
        )
    options = None
    if "options" in head:
        if plus_clean.METHOD not in methods:
            raise protocol.ProtocolError(
                f"{place}: options are {plus_clean.METHOD}'s, and it runs no "
                f"{plus_clean.METHOD}: name it in judged or also, or drop the options"
            )
        options = plus_clean.checked_options(protocol._require(head, "options", dict, place), place)
    title = protocol._require(head, "title", str, place) if "title" in head else TITLE
    return MinorityStudy(
        options=options,
        title=title,
        scenario=protocol._require(head, "scenario", str, place),
        name=protocol._require(head, "name", str, place),
        settings=dict(settings),
        judged=methods[0],
        reference=methods[1],
        also=tuple(also),
        seeds=protocol._seeds(head, "seeds", place),
        margin_points=float(margin),
        alpha=alpha,
    )


def load_minority(path: Path) -> MinorityStudy:
    """:func:`parse_minority` of the file at ``path``.

    Raises
    ------
    ProtocolError
        If the file is absent or malformed.
    """
    if not path.is_file():
        raise protocol.ProtocolError(f"no minority declaration at {path}")
    return parse_minority(path.read_text(), str(path))


def merged_tuned(*paths: Path) -> protocol.Tuned:
    """The optimiser choices of every sweep file in ``paths`` (the common sweep's
    ``tuned.toml``, then MCFL-plus's own), as one (scenario → method → settings) map."""
    tuned: dict[str, dict[str, Mapping[str, Any]]] = {}
    for path in paths:
        for scenario, chosen in sweep.load_tuned(path).items():
            tuned.setdefault(scenario, {}).update(chosen)
    return tuned


def minority_plan(
    study: MinorityStudy,
    declaration: protocol.Declaration,
    scenarios: Sequence[SimulationConfig],
    tuned: protocol.Tuned,
    options: Mapping[str, Mapping[str, Any]] | None = None,
    check: bool = True,
) -> campaign.Plan:
    """Seed by seed, every method on the declared scenario's file (the protocol's
    tolerance rule applied) with the declared settings and name, each with the optimiser
    settings ``tuned`` holds for the declared scenario and method, and a method's
    ``options`` (MCFL-plus's declared options). While some method has no tuned settings,
    nothing is planned and a note says which.

    Raises
    ------
    ProtocolError
        If the protocol does not declare the scenario, or a run cannot start.
    """
    configs = protocol.declared_configs(declaration, scenarios)
    if study.scenario not in configs:
        raise protocol.ProtocolError(
            f"the minority declaration starts from {study.scenario!r}, not a scenario of the "
            f"protocol ({', '.join(configs)})"
        )
    chosen = tuned.get(study.scenario, {})
    waiting = [m for m in study.methods if m not in chosen]
    if waiting:
        return campaign.Plan(
            [],
            [
                f"{study.name}: not planned, no optimiser settings chosen yet for "
                f"{', '.join(waiting)} on {study.scenario}"
            ],
        )
    try:
        config = replace(configs[study.scenario], **study.settings, name=study.name)
    except TypeError as exc:
        raise protocol.ProtocolError(f"minority settings: {exc}") from exc
    try:
        # Seed by seed, as the campaign plans them.
        part = campaign.plan(
            [config], seeds=study.seeds, methods=study.methods, ablation=False, check=False
        )
    except campaign.CampaignError as exc:
        raise protocol.ProtocolError(f"{study.name}: {exc}") from exc
    runs: list[campaign.PlannedRun] = []
    for run in part.runs:
        extra = {**chosen[run.method], **(options or {}).get(run.method, {})}
        run = replace(run, config=replace(run.config, **extra))
        if check:
            try:
                run.config.validate()
            except SimulationError as exc:
                raise protocol.ProtocolError(f"run {run.name}: {exc}") from exc
        runs.append(run)
    return campaign.Plan(runs)


def files_plan(
    study: MinorityStudy,
    declaration: protocol.Declaration,
    scenarios: Sequence[SimulationConfig],
    tuned_path: Path,
    plus_path: Path,
    plus_tuned_path: Path,
    check: bool = True,
) -> campaign.Plan:
    """:func:`minority_plan` with the settings of the common sweep (``tuned_path``) and
    MCFL-plus's (``plus_tuned_path``), and MCFL-plus's options: the study's own, or else
    the first clean declaration's (``plus_path``). What the campaign runs and the report
    counts."""
    options = study.options
    if options is None:
        options = plus_clean.load_plus_clean(plus_path).options
    return minority_plan(
        study,
        declaration,
        scenarios,
        merged_tuned(tuned_path, plus_tuned_path),
        {plus_clean.METHOD: dict(options)},
        check,
    )


# -- the test and the table -----------------------------------------------------------------


@dataclass(frozen=True)
class MinorityResult:
    """The declared test on the finished seeds, and the figures shown beside it."""

    differences: dict[int, float]
    """Seed → the judged method's minority mean minus the reference's."""
    test: inference.EquivalenceTest | None
    """The TOST of ``differences`` at the margin: its lower test is the declared one
    (None below two seeds)."""
    verdict: str
    minority: dict[str, dict[int, float]]
    """Per method, seed → its minority mean."""
    average: dict[str, stats.Interval | None]
    """Per method, the mean over all trainers (the majority's, nearly: 30 of 32)."""
    worst: dict[str, stats.Interval | None]


def minority_result(
    study: MinorityStudy, figures: Mapping[tuple[str, str], Mapping[int, stats.RunFigures]]
) -> MinorityResult:
    """The declared test from the stage's finished runs' ``figures`` (by (file name,
    method) and seed), on the declared seeds where both the judged method and the
    reference finished."""
    of = {
        m: {s: f for s, f in figures.get((study.name, m), {}).items() if s in study.seeds}
        for m in study.methods
    }
    minority = {
        m: {s: f.minority for s, f in sorted(seeds.items()) if f.minority is not None}
        for m, seeds in of.items()
    }
    judged, reference = minority[study.judged], minority[study.reference]
    differences = {s: judged[s] - reference[s] for s in judged if s in reference}
    margin = study.margin_points / 100
    test = (
        inference.tost_paired(list(differences.values()), margin, study.alpha)
        if len(differences) >= 2
        else None
    )
    return MinorityResult(
        differences=differences,
        test=test,
        verdict=_verdict(test, study.alpha, len(differences), len(study.seeds)),
        minority=minority,
        average={
            m: stats.mean_interval(f.average for f in seeds.values()) for m, seeds in of.items()
        },
        worst={m: stats.mean_interval(f.worst for f in seeds.values()) for m, seeds in of.items()},
    )


def _verdict(
    test: inference.EquivalenceTest | None, alpha: float, paired: int, declared: int
) -> str:
    """The declared reading: met (non-inferior and the mean >= 0), missed (the one-sided
    upper bound below 0), open otherwise; not judged below two seeds. Before every
    declared seed is paired the reading is marked interim: the test is declared over all
    of them, and stopping when it first reads "met" would choose the answer."""
    if test is None:
        return "not judged yet (fewer than two paired seeds)"
    if test.p_lower < alpha and test.mean >= 0:
        reading = "met"
    elif test.high < 0:
        reading = "missed (local training ahead)"
    else:
        reading = "open"
    if paired < declared:
        return f"interim, {paired} of {declared} declared seeds (reads {reading} so far)"
    return reading


def minority_table(study: MinorityStudy, result: MinorityResult) -> list[str]:
    """The markdown of :func:`minority_result`: the declared test, then per method its
    minority, average and worst trainer, then the per-seed values."""
    label = campaign.LABELS
    judged, reference = (
        label.get(study.judged, study.judged),
        label.get(study.reference, study.reference),
    )
    test = result.test
    interval = stats.mean_interval(result.differences.values())
    lines = [
        f"| {judged} − {reference}, minority mean | paired seeds | one-sided p (H0: ≤ "
        f"−{study.margin_points:g} pt) | 90 % interval | target |",
        "|---|---|---|---|---|",
        "| "
        + " | ".join(
            [
                "–" if interval is None else interval.format(100.0, 1, signed=True),
                str(len(result.differences)),
                "–" if test is None else f"{test.p_lower:.3g}",
                "–" if test is None else f"[{100 * test.low:+.1f}, {100 * test.high:+.1f}]",
                result.verdict,
            ]
        )
        + " |",
        "",
        "| method | seeds | minority (the rotated trainers) | average | worst trainer |",
        "|---|---|---|---|---|",
    ]
    for method in study.methods:
        seeds = result.minority[method]
        cells = [
            stats.mean_interval(seeds.values()),
            result.average[method],
            result.worst[method],
        ]
        lines.append(
            f"| {label.get(method, method)} | {len(seeds)} | "
            + " | ".join("–" if c is None else c.format(100.0, 1) for c in cells)
            + " |"
        )
    lines.append("")
    if result.differences:
        values = ", ".join(f"s{s} {100 * d:+.1f}" for s, d in result.differences.items())
        lines += [f"Per seed, {judged} − {reference} (minority mean, points): {values}.", ""]
    return lines
