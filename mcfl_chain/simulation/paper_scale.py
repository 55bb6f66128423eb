"""The paper's scale (``docs/results/paper-scale.toml``, issue 36 deliverable 3): its plan.

The declared evaluation (:mod:`~mcfl_chain.simulation.protocol`) judges MCFL at a reduced
size on ten seeds. This stage runs the paper experiments again at the paper's size (38
trainers, every sample, 102 rounds; 32 trainers on FACADE's rotations), on fewer seeds,
with what the reduced size chose: each scenario's comparator (the protocol's rule on the
tuning seeds), the tolerance rule and each method's optimiser settings
(``docs/results/tuned.toml``). Nothing is chosen on these runs. A scenario whose
comparator or settings are not chosen yet is left out of the plan with a note, as the
evaluation does. Nothing here runs a simulation: ``scripts/run_experiments.py --declared
paper-scale`` does.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from mcfl_chain.simulation import campaign, experiment, protocol, stats
from mcfl_chain.simulation.runner import SimulationConfig

PAPER_SCALE = Path("docs") / "results" / "paper-scale.toml"
"""The declaration, relative to the repository root."""
PAPER_SCALE_RUNS = protocol.DECLARED_RUNS / "paper-scale"
PAPER_SCALE_RECORDS = protocol.DECLARED_RECORDS / "paper-scale"
STAGE = "paper-scale"
ALL_SAMPLES = "all"
"""``samples = "all"`` in the declaration: every sample shared out (``samples = None``)."""
SETTABLE = frozenset(f.name for f in fields(SimulationConfig)) - {"name", "seed", "strategy"}
"""Configuration fields the declaration may set (not the run's name, seed or method)."""


@dataclass(frozen=True)
class PaperScale:
    """The declaration: seeds, the methods beside MCFL and the comparator, the order of
    the scenarios, and the settings applied to each one's declared file."""

    seeds: tuple[int, ...]
    also: tuple[str, ...]
    order: tuple[str, ...]
    settings: Mapping[str, Any]
    scenarios: Mapping[str, Mapping[str, Any]]
    """Per scenario, the settings that differ from the common ones."""

    def settings_of(self, scenario: str) -> dict[str, Any]:
        """The fields ``scenario``'s runs get: the common settings, then its own."""
        merged = {**self.settings, **self.scenarios.get(scenario, {})}
        if merged.get("samples") == ALL_SAMPLES:
            merged["samples"] = None
        return merged


def _settings(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise protocol.ProtocolError(f"{where}: settings must be a table, got {value!r}")
    unknown = sorted(set(value) - SETTABLE)
    if unknown:
        raise protocol.ProtocolError(
            f"{where}: {', '.join(unknown)} not a field a run's configuration can be given; "
            "see SimulationConfig (name, seed and strategy come from the plan)"
        )
    samples = value.get("samples")
    if isinstance(samples, str) and samples != ALL_SAMPLES:
        raise protocol.ProtocolError(
            f"{where}: samples is a whole number or {ALL_SAMPLES!r}, got {samples!r}"
        )
    return dict(value)


def parse_paper_scale(text: str, where: str = "paper-scale") -> PaperScale:
    """:class:`PaperScale` from the text of its declaration.

    Raises
    ------
    ProtocolError
        For invalid TOML, a missing or mistyped key, an unknown method or field, a
        scenario listed twice in ``order``, or per-scenario settings for a scenario the
        order leaves out.
    """
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise protocol.ProtocolError(f"{where}: {exc}") from exc
    head = protocol._require(data, "paper_scale", dict, where)
    place = f"{where} [paper_scale]"
    seeds = protocol._seeds(head, "seeds", place)
    also = protocol._require(head, "also", list, place)
    unknown = [m for m in also if m not in campaign.BASELINES or m == "oracle"]
    if unknown:
        raise protocol.ProtocolError(f"{place}: also names {unknown}, not a deployable baseline")
    order = protocol._require(head, "order", list, place)
    if not order or not all(isinstance(s, str) for s in order):
        raise protocol.ProtocolError(f"{place}: order must list scenario names, got {order!r}")
    if len(set(order)) != len(order):
        raise protocol.ProtocolError(f"{place}: order lists a scenario twice: {order!r}")
    common = _settings(protocol._require(head, "settings", dict, place), f"{place} settings")
    scenarios = {}
    for name, table in head.get("scenarios", {}).items():
        at = f"{place} scenarios.{name}"
        if name not in order:
            raise protocol.ProtocolError(f"{at}: not in order, so never planned; add it there")
        if not isinstance(table, dict):
            raise protocol.ProtocolError(f"{at}: a table is expected")
        scenarios[name] = _settings(table.get("settings", {}), at)
    return PaperScale(tuple(seeds), tuple(also), tuple(order), common, scenarios)


def load_paper_scale(path: Path) -> PaperScale:
    """:func:`parse_paper_scale` of the file at ``path``.

    Raises
    ------
    ProtocolError
        If the file is absent or malformed.
    """
    if not path.is_file():
        raise protocol.ProtocolError(f"no paper-scale declaration at {path}")
    return parse_paper_scale(path.read_text(), str(path))


def paper_scale_plan(
    paper: PaperScale,
    declaration: protocol.Declaration,
    scenarios: Sequence[SimulationConfig],
    figures: protocol.Figures,
    tuned: protocol.Tuned,
    check: bool = True,
) -> campaign.Plan:
    """The paper-size runs: per scenario of ``paper.order``, seed by seed, MCFL, the
    comparator the protocol's rule chose from the tuning runs' ``figures``, and
    ``paper.also``, each at the declared size and with its ``tuned`` settings. A scenario
    without a comparator or settings yet is left out with a note.

    Raises
    ------
    ProtocolError
        If ``paper.order`` names a scenario the protocol does not declare, or a run of the
        paper's size cannot start (its configuration is invalid).
    """
    declared = {s.name for s in declaration.scenarios}
    strangers = [name for name in paper.order if name not in declared]
    if strangers:
        raise protocol.ProtocolError(
            f"paper-scale order names {strangers}, not scenarios of the protocol "
            f"({', '.join(sorted(declared))})"
        )
    configs = protocol.declared_configs(declaration, scenarios)
    choices = protocol.scenario_choices(declaration, scenarios, figures)
    runs: list[campaign.PlannedRun] = []
    notes: list[str] = []
    order = {seed: i for i, seed in enumerate(paper.seeds)}
    for name in paper.order:
        choice = choices[name]
        if choice.method is None:
            notes.append(
                f"{name}: not planned at the paper's size, no comparator yet ({choice.reason}; "
                "run --declared sweep and --declared tuning first)"
            )
            continue
        try:
            config = replace(configs[name], **paper.settings_of(name))
        except TypeError as exc:
            raise protocol.ProtocolError(f"paper-scale settings of {name}: {exc}") from exc
        methods = dict.fromkeys(("mcfl", choice.method, *paper.also))
        try:
            part = campaign.plan(
                [config], seeds=paper.seeds, methods=tuple(methods), ablation=False, check=check
            )
        except campaign.CampaignError as exc:
            raise protocol.ProtocolError(f"{name} at the paper's size: {exc}") from exc
        notes.append(f"{name}: comparator {choice.method} ({choice.reason})")
        runs += sorted(part.runs, key=lambda r: order[r.seed])
        notes += part.notes
    return protocol.with_tuned_settings(declaration, scenarios, campaign.Plan(runs, notes), tuned)


def status_lines(plan: campaign.Plan, finished: set[str]) -> list[str]:
    """Where the stage stands: runs done of those planned, per scenario the runs still to
    make, and the scenarios not planned yet (the plan's notes say why)."""
    done = [r for r in plan.runs if r.name in finished]
    pending: dict[str, dict[str, list[str]]] = {}
    for run in plan.runs:
        if run.name not in finished:
            pending.setdefault(run.scenario, {}).setdefault(run.method, []).append(str(run.seed))
    lines = [f"{len(done)} of {len(plan.runs)} planned runs done."]
    lines += [
        f"To run, {scenario}: "
        + ", ".join(f"{method} s{'/'.join(seeds)}" for method, seeds in methods.items())
        + "."
        for scenario, methods in pending.items()
    ]
    lines += [note.rstrip(".") + "." for note in plan.notes if "not planned" in note]
    return lines


def run_line(name: str, summary: Mapping[str, Any], figures: stats.RunFigures | None) -> str:
    """One finished run: its final figures, its wall time (also per trainer-round, the
    unit the plan's compute is counted in) and what made it, from its ``summary.json``,
    so that every paper-size figure carries the engine and the device behind it."""
    config, platform = summary.get("config", {}), summary.get("platform", {})
    seconds = summary.get("seconds")
    parts = []
    if figures is not None:
        unit = " %" if figures.metric == "accuracy" else " MSE"
        parts.append(
            f"average {protocol._value(figures.average, figures.metric, signed=False)}{unit}, "
            f"worst {protocol._value(figures.worst, figures.metric, signed=False)}{unit}"
        )
    if isinstance(seconds, (int, float)):
        trainer_rounds = config.get("n_trainers", 0) * config.get("rounds", 0)
        per = f", {seconds / trainer_rounds:.2f} s a trainer-round" if trainer_rounds else ""
        parts.append(f"{experiment.duration(seconds)}{per}")
    cores = platform.get("cores")
    machine = ", ".join(v for v in (platform.get("cpu"), cores and f"{cores} cores") if v)
    parts.append(
        f"{config.get('engine', 'unknown')} engine on {config.get('device', 'unknown')}"
        + (f" ({machine}, torch {platform['torch']})" if machine and "torch" in platform else "")
    )
    return f"{name}: " + "; ".join(parts) + "."


@dataclass(frozen=True)
class ScaleRow:
    """One scenario at the paper's size: MCFL against each baseline it ran beside, paired
    by seed, and the same seeds' MCFL − comparator at the reduced size."""

    scenario: str
    metric: str
    comparator: str
    size: str
    """``trainers × rounds`` of the MCFL runs."""
    against: dict[str, stats.PairedDifference | None]
    """Baseline (the comparator first) → MCFL − baseline over the finished seeds."""
    reduced: stats.PairedDifference | None
    """MCFL − comparator on the same seeds in the declared evaluation (reduced size)."""


def scale_rows(
    plan: campaign.Plan,
    declaration: protocol.Declaration,
    scenarios: Sequence[SimulationConfig],
    figures: protocol.Figures,
    paper_figures: protocol.Figures,
) -> list[ScaleRow]:
    """Per planned scenario with at least one finished MCFL run: the paired differences
    at the paper's size (``paper_figures``) and, on the same seeds, the reduced-size
    evaluation's MCFL − comparator (``figures``, the declared campaign's runs)."""
    names = protocol.declared_scenario_names(declaration, scenarios)
    configs = protocol.declared_configs(declaration, scenarios)
    choices = protocol.scenario_choices(declaration, scenarios, figures)
    rows = []
    for name in dict.fromkeys(names[r.scenario] for r in plan.runs):
        config, comparator = configs[name], choices[name].method
        if comparator is None:  # planned from other tuning figures than these
            continue
        stem = campaign.baseline_stem(config)
        runs = [r for r in plan.runs if names[r.scenario] == name]
        mcfl = paper_figures.get((config.name, "mcfl"), {})
        if not mcfl:
            continue
        baselines = dict.fromkeys(r.method for r in runs if r.method != "mcfl")
        order = [comparator, *(m for m in baselines if m != comparator)]
        against = {
            method: stats.paired_difference(mcfl, paper_figures.get((stem, method), {}))
            for method in order
        }
        reduced_mcfl = {
            s: f for s, f in figures.get((config.name, "mcfl"), {}).items() if s in mcfl
        }
        reduced = stats.paired_difference(reduced_mcfl, figures.get((stem, comparator), {}))
        size = next(f"{r.config.n_trainers} × {r.config.rounds}" for r in runs)
        rows.append(ScaleRow(name, protocol.metric_of(config), comparator, size, against, reduced))
    return rows


def _difference(paired: stats.PairedDifference | None, metric: str) -> str:
    """``mean [95 % interval] (per seed)``, in points of accuracy or MSE."""
    if paired is None:
        return "not run"
    interval = paired.mean_diff
    text = protocol._value(interval.mean, metric) + protocol._bracket(interval, metric)
    seeds = ", ".join(protocol._value(paired.per_seed[s][0], metric) for s in paired.seeds)
    return f"{text} ({seeds})"


def scale_table(rows: Sequence[ScaleRow]) -> list[str]:
    """The markdown of the paper-size comparisons (nothing while no MCFL run finished)."""
    if not rows:
        return []
    header = [
        "scenario", "size (trainers × rounds)", "comparator", "MCFL − comparator",
        "same seeds, reduced size", "MCFL − FedAvg", "MCFL − local",
    ]  # fmt: skip
    lines = [
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
    ]
    for row in rows:
        cells = [
            row.scenario,
            row.size,
            campaign.LABELS[row.comparator],
            _difference(row.against[row.comparator], row.metric),
            _difference(row.reduced, row.metric),
            *(
                _difference(row.against[m], row.metric) if m in row.against else "comparator"
                for m in ("fedavg", "local")
            ),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return [*lines, ""]
