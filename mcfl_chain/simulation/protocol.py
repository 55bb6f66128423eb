"""The declared evaluation (``docs/results/protocol.toml``): its plan, its verdicts, its table.

Issue 36 asks that the primary endpoints, the hypotheses, the seeds, the comparator's
rule, the equivalence margins and the correction be committed before the runs they
judge. This module reads that declaration (:func:`load_protocol`), plans its two stages
(:func:`declared_plan`: every candidate on the tuning seeds, then MCFL and the chosen
comparator on the evaluation seeds), each method with the optimiser settings the
declared sweep chose for it (:func:`with_tuned_settings`; the sweep itself is
:mod:`~mcfl_chain.simulation.sweep`, whose finished runs at the chosen points serve as
the tuning stage's, their summaries naming them), picks each scenario's comparator by
the declared rule (:func:`choose_comparator`), turns the Holm-corrected tests into the
declared wording (:func:`verdict`) and builds the table "MCFL against the best
alternative" (:func:`synthesis`, :func:`synthesis_table`) from finished runs' figures. A
scenario without runs reads "not run"; nothing here runs a simulation. The statistical tests are in
:mod:`~mcfl_chain.simulation.inference`.
"""

from __future__ import annotations

import math
import statistics
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import Enum
from pathlib import Path
from typing import Any

from mcfl_chain.learning.models import ARCHITECTURES
from mcfl_chain.learning.scenario import DEFAULT_SPLIT
from mcfl_chain.simulation import campaign, inference, stats
from mcfl_chain.simulation.experiment import RESULTS, ExperimentError
from mcfl_chain.simulation.runner import SimulationConfig

PROTOCOL = Path("docs") / "results" / "protocol.toml"
"""The declaration, relative to the repository root."""
DECLARED_RUNS = Path("runs") / "declared"
"""Where ``run_experiments.py --declared`` makes its run directories."""
DECLARED_RECORDS = RESULTS / "declared"
"""Where their records are kept, to commit (after the protocol, never before)."""
HYPOTHESES = ("superiority", "equivalence")
STAGES = ("tuning", "evaluation")
NOT_RUN = "not run"


class ProtocolError(ExperimentError):
    """The declaration file is malformed, or cannot be applied; the message says what to
    change."""


@dataclass(frozen=True)
class ScenarioDeclaration:
    """One primary endpoint: the scenario MCFL runs and what is claimed of it."""

    name: str
    file: str
    """The scenario file of ``scenarios/paper/`` (without ``.toml``)."""
    hypothesis: str
    paper_claim: bool
    bimodal: bool = False
    comparator: str | None = None
    """Set only to freeze a choice already made by the rule."""
    why: str = ""


@dataclass(frozen=True)
class Declaration:
    alpha: float
    tuning_seeds: tuple[int, ...]
    evaluation_seeds: tuple[int, ...]
    candidates: tuple[str, ...]
    margin_points: float
    margin_mse: float
    bimodal_coefficient_above: float
    tolerance: float | str
    max_standard_error_points: float
    scenarios: tuple[ScenarioDeclaration, ...]
    evaluation_also: tuple[str, ...] = ()

    @property
    def family_size(self) -> int:
        """Hypotheses corrected together: a difference test and a TOST per scenario."""
        return 2 * len(self.scenarios)

    def margin(self, metric: str) -> float:
        """The equivalence margin in the metric's own unit (accuracy as a fraction)."""
        return self.margin_points / 100 if metric == "accuracy" else self.margin_mse


def _require(table: Mapping[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
    if key not in table:
        raise ProtocolError(f"{where}: missing {key!r}")
    value = table[key]
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
        raise ProtocolError(f"{where}: {key!r} has the wrong type ({value!r})")
    return value


def _whole_numbers(
    table: Mapping[str, Any], key: str, where: str, least: int = 0
) -> tuple[int, ...]:
    """``table[key]``: a non-empty list of distinct whole numbers, each at least ``least``."""
    values = _require(table, key, list, where)
    if not values or any(
        not isinstance(v, int) or isinstance(v, bool) or v < least for v in values
    ):
        raise ProtocolError(f"{where}: {key!r} must list whole numbers >= {least}, got {values!r}")
    if len(set(values)) != len(values):
        raise ProtocolError(f"{where}: {key!r} lists a value twice: {values!r}")
    return tuple(values)


def _seeds(table: Mapping[str, Any], key: str, where: str) -> tuple[int, ...]:
    return _whole_numbers(table, key, where, least=0)


def parse_protocol(text: str, where: str = "protocol") -> Declaration:
    """:class:`Declaration` from the text of a protocol file.

    Raises
    ------
    ProtocolError
        For invalid TOML, a missing or mistyped key, evaluation seeds that overlap the
        tuning seeds or are fewer than 10, an unknown method or hypothesis, a margin <= 0.
    """
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ProtocolError(f"{where}: {exc}") from exc
    head = _require(data, "protocol", dict, where)
    place = f"{where} [protocol]"
    tuning = _seeds(head, "tuning_seeds", place)
    evaluation = _seeds(head, "evaluation_seeds", place)
    if set(tuning) & set(evaluation):
        raise ProtocolError(
            f"{place}: seeds {sorted(set(tuning) & set(evaluation))} are both tuning and "
            "evaluation seeds; an evaluation seed must never have served a choice"
        )
    if len(evaluation) < 10:
        raise ProtocolError(f"{place}: declare at least 10 evaluation seeds, got {len(evaluation)}")
    alpha = float(_require(head, "alpha", (int, float), place))
    if not 0 < alpha < 0.5:
        raise ProtocolError(f"{place}: alpha must lie in (0, 0.5), got {alpha}")
    for key, expected in (
        ("primary_endpoint", "mean-over-trainers"),
        ("correction", "holm"),
        ("equivalence_test", "tost"),
    ):
        if head.get(key) != expected:
            raise ProtocolError(f"{place}: {key} = {expected!r} is the only one implemented")
    if head.get("comparator_rule") != "best-mean-on-tuning-seeds":
        raise ProtocolError(
            f"{place}: comparator_rule = 'best-mean-on-tuning-seeds' is the only rule implemented"
        )
    methods = []
    # Oracles need the true groups, which no deployment has: never an alternative.
    alternatives = [m for m in campaign.BASELINES if m != "oracle"]
    for key in ("candidates", "evaluation_also"):
        named = head.get(key, [])
        if not isinstance(named, list):
            raise ProtocolError(f"{place}: {key} must be a list of methods, got {named!r}")
        unknown = [m for m in named if m not in alternatives]
        if unknown:
            raise ProtocolError(
                f"{place}: {key} names {unknown}, not a baseline that can be deployed; "
                "one of " + ", ".join(alternatives)
            )
        methods.append(tuple(named))
    if not methods[0]:
        raise ProtocolError(f"{place}: list at least one candidate")
    margins = [
        float(_require(head, k, (int, float), place)) for k in ("margin_points", "margin_mse")
    ]
    if min(margins) <= 0:
        raise ProtocolError(f"{place}: equivalence margins must be > 0, got {margins}")
    tolerance = _require(head, "tolerance", (int, float, str), place)
    scenarios = []
    for name, table in _require(data, "scenarios", dict, where).items():
        at = f"{where} [scenarios.{name}]"
        if not isinstance(table, dict):
            raise ProtocolError(f"{at}: a table is expected")
        hypothesis = _require(table, "hypothesis", str, at)
        if hypothesis not in HYPOTHESES:
            raise ProtocolError(f"{at}: hypothesis must be one of {HYPOTHESES}, got {hypothesis!r}")
        comparator = table.get("comparator")
        if comparator is not None and comparator not in methods[0]:
            raise ProtocolError(f"{at}: comparator {comparator!r} is not a declared candidate")
        scenarios.append(
            ScenarioDeclaration(
                name=name,
                file=_require(table, "file", str, at),
                hypothesis=hypothesis,
                paper_claim=bool(_require(table, "paper_claim", bool, at)),
                bimodal=bool(table.get("bimodal", False)),
                comparator=comparator,
                why=str(table.get("why", "")),
            )
        )
    if not scenarios:
        raise ProtocolError(f"{where}: declare at least one [scenarios.NAME]")
    return Declaration(
        alpha=alpha,
        tuning_seeds=tuning,
        evaluation_seeds=evaluation,
        candidates=methods[0],
        evaluation_also=methods[1],
        margin_points=margins[0],
        margin_mse=margins[1],
        bimodal_coefficient_above=float(head.get("bimodal_coefficient_above", 5 / 9)),
        tolerance=tolerance,
        max_standard_error_points=float(
            _require(head, "max_standard_error_points", (int, float), place)
        ),
        scenarios=tuple(scenarios),
    )


def load_protocol(path: Path) -> Declaration:
    """:func:`parse_protocol` of the file at ``path``.

    Raises
    ------
    ProtocolError
        If the file is absent or malformed.
    """
    if not path.is_file():
        raise ProtocolError(f"no protocol file at {path}")
    return parse_protocol(path.read_text(), str(path))


def metric_of(config: SimulationConfig) -> str:
    """``"MSE"`` for an autoencoder, else ``"accuracy"`` (as the runs report them)."""
    arch = ARCHITECTURES.get(config.arch)
    return "MSE" if arch is not None and arch.kind == "autoencoder" else "accuracy"


# -- the plan -----------------------------------------------------------------------------


def declared_configs(
    declaration: Declaration, scenarios: Sequence[SimulationConfig]
) -> dict[str, SimulationConfig]:
    """Each declared scenario's file, with the declared tolerance rule applied.

    Raises
    ------
    ProtocolError
        If a declared file is not among ``scenarios``.
    """
    by_name = {c.name: c for c in scenarios}
    # A strategy option, so a field of SimulationConfig only once the options are added.
    tolerance: dict[str, Any] = {"tolerance": declaration.tolerance}
    out = {}
    for scenario in declaration.scenarios:
        if scenario.file not in by_name:
            raise ProtocolError(
                f"scenario {scenario.name!r} declares file {scenario.file!r}, which is not "
                f"among the scenario files ({', '.join(sorted(by_name))})"
            )
        out[scenario.name] = replace(by_name[scenario.file], **tolerance)
    return out


def candidate_plan(
    declaration: Declaration, scenarios: Sequence[SimulationConfig], check: bool = True
) -> campaign.Plan:
    """MCFL and every candidate on every declared scenario, over the tuning seeds, with the
    scenario files' own training settings (the runs the optimiser sweep repeats at each of
    its grid points; :func:`tuning_plan` is this plan with the sweep's choices)."""
    configs = declared_configs(declaration, scenarios)
    return campaign.plan(
        list(configs.values()),
        seeds=declaration.tuning_seeds,
        methods=("mcfl", *declaration.candidates),
        ablation=False,
        check=check,
    )


Tuned = Mapping[str, Mapping[str, Mapping[str, Any]]]
"""The optimiser sweep's choices (``docs/results/tuned.toml``): declared scenario → method
→ the configuration fields it runs with (``optimiser``, ``lr``)."""


def declared_scenario_names(
    declaration: Declaration, scenarios: Sequence[SimulationConfig]
) -> dict[str, str]:
    """A planned run's ``scenario`` (MCFL's scenario file, or the baselines' stem) → the
    declared scenario it belongs to."""
    out = {}
    for name, config in declared_configs(declaration, scenarios).items():
        out[config.name] = name
        out[campaign.baseline_stem(config)] = name
    return out


def with_tuned_settings(
    declaration: Declaration,
    scenarios: Sequence[SimulationConfig],
    plan: campaign.Plan,
    tuned: Tuned,
) -> campaign.Plan:
    """``plan`` with each run's training settings replaced by the sweep's choice for its
    (declared scenario, method). A declared scenario where some planned method has no
    choice yet is left out whole, with a note: its runs would be made with settings the
    sweep may still overturn, and the comparator would be chosen among untuned methods."""
    names = declared_scenario_names(declaration, scenarios)
    waiting: dict[str, list[str]] = {}
    for run in plan.runs:
        scenario = names[run.scenario]
        if run.method not in tuned.get(scenario, {}):
            methods = waiting.setdefault(scenario, [])
            if run.method not in methods:
                methods.append(run.method)
    runs = [
        replace(run, config=replace(run.config, **tuned[names[run.scenario]][run.method]))
        for run in plan.runs
        if names[run.scenario] not in waiting
    ]
    notes = [
        f"{scenario}: not planned, the optimiser sweep has not chosen the settings of "
        + ", ".join(methods)
        + " yet (run --declared sweep until it has; its choices are in docs/results/tuned.toml)"
        for scenario, methods in waiting.items()
    ]
    return campaign.Plan(runs, [*notes, *plan.notes])


def tuning_plan(
    declaration: Declaration,
    scenarios: Sequence[SimulationConfig],
    tuned: Tuned,
    check: bool = True,
) -> campaign.Plan:
    """MCFL and every candidate on every declared scenario, over the tuning seeds, each with
    the optimiser settings the sweep chose for it (``tuned``); a scenario the sweep has not
    finished is left out, with a note. Each run is the sweep's run at its method's chosen
    point under another name: ``run_experiments.py`` copies the finished ones whose
    configuration it finds equal but for the name
    (:func:`~mcfl_chain.simulation.sweep.reusable_runs`) instead of making them again."""
    plan = candidate_plan(declaration, scenarios, check)
    return with_tuned_settings(declaration, scenarios, plan, tuned)


Figures = Mapping[tuple[str, str], Mapping[int, stats.RunFigures]]
"""(scenario or baselines' stem, method) → seed → a finished run's figures."""


@dataclass(frozen=True)
class Choice:
    """A scenario's comparator, or None and why none is chosen yet."""

    method: str | None
    reason: str
    means: dict[str, float]
    """Each candidate's mean primary figure over the tuning seeds."""
    missing: list[str] = field(default_factory=list)
    """The tuning runs (``method sSEED``) the choice waits for."""


def choose_comparator(
    candidates: Sequence[str],
    figures: Mapping[str, Mapping[int, stats.RunFigures]],
    tuning_seeds: Sequence[int],
    metric: str,
) -> Choice:
    """The declared rule: the candidate with the best mean, over the tuning seeds, of its
    mean over trainers (the first in ``candidates`` order on a tie). No choice while any
    candidate lacks a tuning seed: a choice among some would be revised later.
    ``figures``: each candidate's runs by seed."""
    missing = [f"{m} s{s}" for m in candidates for s in tuning_seeds if s not in figures.get(m, {})]
    if missing:
        total = len(candidates) * len(tuning_seeds)
        return Choice(None, f"{len(missing)} of {total} tuning runs missing", {}, missing)
    means = {m: statistics.fmean(figures[m][s].average for s in tuning_seeds) for m in candidates}
    pick = max if stats.higher_is_better(metric) else min
    best = pick(candidates, key=lambda m: means[m])
    return Choice(best, "best mean over the tuning seeds", means)


def applicable_candidates(plan: campaign.Plan, config: SimulationConfig) -> list[str]:
    """The candidates the tuning plan has on ``config``'s baselines (the others have no
    run there: the plan's notes say why)."""
    stem = campaign.baseline_stem(config)
    return sorted({r.method for r in plan.runs if r.scenario == stem and r.method != "mcfl"})


def scenario_choices(
    declaration: Declaration, scenarios: Sequence[SimulationConfig], figures: Figures
) -> dict[str, Choice]:
    """Each declared scenario's comparator by the rule (or its frozen choice)."""
    configs = declared_configs(declaration, scenarios)
    plan = candidate_plan(declaration, scenarios, check=False)
    out = {}
    for scenario in declaration.scenarios:
        config = configs[scenario.name]
        if scenario.comparator is not None:
            out[scenario.name] = Choice(scenario.comparator, "frozen in the protocol", {})
            continue
        stem = campaign.baseline_stem(config)
        candidates = [c for c in declaration.candidates if c in applicable_candidates(plan, config)]
        metric = metric_of(config)
        out[scenario.name] = choose_comparator(
            candidates,
            {m: figures.get((stem, m), {}) for m in candidates},
            declaration.tuning_seeds,
            metric,
        )
    return out


def declared_plan(
    declaration: Declaration,
    scenarios: Sequence[SimulationConfig],
    stage: str,
    figures: Figures | None = None,
    check: bool = True,
    *,
    tuned: Tuned,
) -> campaign.Plan:
    """The declared campaign's runs at ``stage``: ``tuning`` (MCFL and every candidate,
    tuning seeds) or ``evaluation`` (MCFL, the comparator chosen from the tuning runs'
    ``figures`` and the ``evaluation_also`` methods, evaluation seeds, seed by seed), each
    run with the optimiser settings the sweep chose for its method (``tuned``). A
    scenario whose comparator, or one of whose methods' settings, is not chosen yet is
    left out, with a note.

    Raises
    ------
    ProtocolError
        For an unknown stage or a declared file missing from ``scenarios``.
    """
    if stage not in STAGES:
        raise ProtocolError(f"unknown stage {stage!r}; one of {', '.join(STAGES)}")
    if stage == "tuning":
        return tuning_plan(declaration, scenarios, tuned, check)
    configs = declared_configs(declaration, scenarios)
    choices = scenario_choices(declaration, scenarios, figures or {})
    runs: list[campaign.PlannedRun] = []
    notes: list[str] = []
    for scenario in declaration.scenarios:
        choice = choices[scenario.name]
        if choice.method is None:
            notes.append(
                f"{scenario.name}: not planned, no comparator yet ({choice.reason}: "
                + ", ".join(choice.missing)
                + "; run --declared tuning first)"
            )
            continue
        methods = dict.fromkeys(("mcfl", choice.method, *declaration.evaluation_also))
        part = campaign.plan(
            [configs[scenario.name]],
            seeds=declaration.evaluation_seeds,
            methods=tuple(methods),
            ablation=False,
            check=check,
        )
        notes.append(f"{scenario.name}: comparator {choice.method} ({choice.reason})")
        runs += part.runs
        notes += part.notes
    order = {seed: i for i, seed in enumerate(declaration.evaluation_seeds)}
    plan = campaign.Plan(sorted(runs, key=lambda r: order[r.seed]), notes)
    return with_tuned_settings(declaration, scenarios, plan, tuned)


def split_size_lines(declaration: Declaration, scenarios: Sequence[SimulationConfig]) -> list[str]:
    """Per declared scenario, its test split and the standard errors the rule bounds."""
    bound = declaration.max_standard_error_points
    out = []
    for name, config in declared_configs(declaration, scenarios).items():
        if metric_of(config) == "MSE":
            out.append(f"{name}: MSE, the accuracy rule does not apply")
            continue
        if config.samples is None:
            out.append(f"{name}: all samples, split size depends on the dataset")
            continue
        # The split the scenario code makes (every simulated trainer takes the default).
        train, validation, _ = DEFAULT_SPLIT
        n = config.samples - round(train * config.samples) - round(validation * config.samples)
        one = 100 * inference.accuracy_standard_error(n)
        mean = one / math.sqrt(config.n_trainers)
        out.append(
            f"{name}: {n} test images per trainer (rule: {inference.min_test_images(bound / 100)}"
            f"), one trainer {one:.1f} points ({'met' if one <= bound else 'not met'}), the "
            f"mean over {config.n_trainers} trainers {mean:.2f} "
            f"({'met' if mean <= bound else 'not met'})"
        )
    return out


# -- verdicts -----------------------------------------------------------------------------


class Outcome(Enum):
    AHEAD = "MCFL ahead"
    BEHIND = "MCFL behind"
    LEVEL = "level"
    NOT_RESOLVED = "not resolved"


@dataclass(frozen=True)
class Verdict:
    outcome: Outcome
    wording: str
    supported: bool
    """Whether the declared hypothesis holds: superiority needs MCFL ahead, equivalence
    a TOST rejection."""


def verdict(
    hypothesis: str,
    mean_difference: float,
    p_difference: float,
    p_equivalence: float,
    alpha: float,
    margin: str,
    higher_is_better: bool = True,
    subject: str = "MCFL",
) -> Verdict:
    """The declared wording from Holm-adjusted p-values: a rejected difference is "MCFL
    ahead" or "behind" (``subject`` in MCFL's place; by its sign and the metric's
    direction), noting when TOST also puts it within ``±margin``; otherwise a rejected
    TOST is "level (equivalent within ±margin)"; otherwise "not resolved".
    Never "level" without a TOST rejection.

    Raises
    ------
    ValueError
        For an unknown hypothesis.
    """
    if hypothesis not in HYPOTHESES:
        raise ValueError(f"hypothesis must be one of {HYPOTHESES}, got {hypothesis!r}")
    different, equivalent = p_difference < alpha, p_equivalence < alpha
    if different:
        better = (mean_difference > 0) == higher_is_better
        outcome = Outcome.AHEAD if better else Outcome.BEHIND
        wording = f"{subject} {'ahead' if better else 'behind'}" + (
            f", by less than the ±{margin} margin" if equivalent else ""
        )
    elif equivalent:
        outcome, wording = Outcome.LEVEL, f"level (equivalent within ±{margin})"
    else:
        outcome, wording = Outcome.NOT_RESOLVED, Outcome.NOT_RESOLVED.value
    supported = outcome is Outcome.AHEAD if hypothesis == "superiority" else equivalent
    return Verdict(outcome, wording, supported)


# -- the synthesis ----------------------------------------------------------------------------


@dataclass(frozen=True)
class SynthesisRow:
    """One declared scenario's line of "MCFL against the best alternative"."""

    scenario: ScenarioDeclaration
    metric: str
    choice: Choice
    per_seed: dict[int, tuple[float, float]]
    """Evaluation seed → (mean over trainers, worst trainer) of MCFL − comparator."""
    difference: inference.PairedTTest | None = None
    equivalence: inference.EquivalenceTest | None = None
    p_difference: float = 1.0
    p_equivalence: float = 1.0
    """Holm-adjusted over the declared family."""
    interval: stats.Interval | None = None
    """The difference's interval at its Holm level (excludes 0 exactly when rejected:
    :func:`~mcfl_chain.simulation.inference.holm_levels`)."""
    equivalence_interval: stats.Interval | None = None
    """The TOST interval (1 − 2 × the step's level) that a rejection puts inside ±margin."""
    verdict: Verdict | None = None
    bimodal: bool = False
    costs: dict[str, tuple[float | None, float | None]] | None = None
    """gas, bytes and seconds a trainer-round (MCFL, comparator), means over seeds."""


def _mean(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.fmean(present) if present and len(present) == len(values) else None


def synthesis(
    declaration: Declaration,
    scenarios: Sequence[SimulationConfig],
    figures: Figures,
    round_seconds: Mapping[tuple[str, str], Mapping[int, float]] | None = None,
    method: str = "mcfl",
) -> list[SynthesisRow]:
    """The declared table's rows from finished runs' ``figures`` (and each run's mean
    round time, ``round_seconds``): comparator by the rule, per-seed paired differences
    over the evaluation seeds, both tests, Holm over the declared family (a scenario not
    run counts with p = 1, so the correction is always the declared one), verdicts.
    ``method``: the one judged against the comparator, run on the scenario files as MCFL
    is (``mcfl-plus`` for issue 37's table; its rows are a family of their own)."""
    configs = declared_configs(declaration, scenarios)
    choices = scenario_choices(declaration, scenarios, figures)
    seconds = round_seconds or {}
    rows: list[SynthesisRow] = []
    for scenario in declaration.scenarios:
        config, choice = configs[scenario.name], choices[scenario.name]
        metric = metric_of(config)
        if choice.method is None:
            rows.append(SynthesisRow(scenario, metric, choice, {}))
            continue
        keys = (scenario.file, method), (campaign.baseline_stem(config), choice.method)
        mine, theirs = (
            {s: f for s, f in figures.get(k, {}).items() if s in declaration.evaluation_seeds}
            for k in keys
        )
        seeds = sorted(mine.keys() & theirs.keys())
        per_seed = {s: stats.seed_difference(mine[s], theirs[s]) for s in seeds}
        costs: dict[str, tuple[float | None, float | None]] = {
            "gas": (_mean([mine[s].gas for s in seeds]), _mean([theirs[s].gas for s in seeds])),
            "traffic": (
                _mean([mine[s].traffic for s in seeds]),
                _mean([theirs[s].traffic for s in seeds]),
            ),
            "seconds": (
                _mean([seconds.get(keys[0], {}).get(s) for s in seeds]),
                _mean([seconds.get(keys[1], {}).get(s) for s in seeds]),
            ),
        }
        rows.append(
            tested(declaration, SynthesisRow(scenario, metric, choice, per_seed, costs=costs))
        )
    return judged(declaration, rows, campaign.LABELS.get(method, method))


def tested(declaration: Declaration, row: SynthesisRow) -> SynthesisRow:
    """``row`` with its paired t test, its TOST and its bimodality flag, from its
    per-seed differences: only once every declared evaluation seed is paired (a campaign
    stopped part-way is judged on no subset of its seeds, so its records can be kept and
    resumed)."""
    if len(row.per_seed) < max(2, len(declaration.evaluation_seeds)):
        return row
    differences = [d[0] for d in row.per_seed.values()]
    coefficient = inference.bimodality_coefficient(differences)
    flagged = coefficient is not None and coefficient > declaration.bimodal_coefficient_above
    return replace(
        row,
        difference=inference.paired_t_test(differences),
        equivalence=inference.tost_paired(
            differences, declaration.margin(row.metric), declaration.alpha
        ),
        bimodal=row.scenario.bimodal or flagged,
    )


def judged(
    declaration: Declaration, rows: Sequence[SynthesisRow], subject: str = "MCFL"
) -> list[SynthesisRow]:
    """``rows`` (one per declared scenario, :func:`tested`) with Holm's adjusted
    p-values over the family of both tests of every row (an untested row counts with p =
    1), each interval at its hypothesis's Holm level, and the verdict (worded for
    ``subject``)."""
    raw = [r.difference.p if r.difference else 1.0 for r in rows]
    raw += [r.equivalence.p if r.equivalence else 1.0 for r in rows]
    adjusted = inference.holm_adjusted(raw)
    levels = inference.holm_levels(raw, declaration.alpha)
    out = []
    for i, row in enumerate(rows):
        if row.difference is None or row.equivalence is None:
            out.append(row)
            continue
        differences = [d[0] for d in row.per_seed.values()]
        p_difference, p_equivalence = adjusted[i], adjusted[len(rows) + i]
        margin = declaration.margin(row.metric)
        out.append(
            replace(
                row,
                p_difference=p_difference,
                p_equivalence=p_equivalence,
                interval=stats.mean_interval(differences, 1 - levels[i]),
                equivalence_interval=stats.mean_interval(
                    differences, 1 - 2 * levels[len(rows) + i]
                ),
                verdict=verdict(
                    row.scenario.hypothesis,
                    row.difference.mean,
                    p_difference,
                    p_equivalence,
                    declaration.alpha,
                    margin_text(margin, row.metric),
                    stats.higher_is_better(row.metric),
                    subject,
                ),
            )
        )
    return out


def margin_text(margin: float, metric: str) -> str:
    if metric != "accuracy":
        return f"{margin:g} MSE"
    return f"{100 * margin:g} point" + ("" if 100 * margin == 1 else "s")


def _value(value: float, metric: str, signed: bool = True) -> str:
    sign = "+" if signed else ""
    return f"{100 * value:{sign}.1f}" if metric == "accuracy" else f"{value:{sign}.4f}"


def _bracket(interval: stats.Interval | None, metric: str) -> str:
    if interval is None or interval.low is None or interval.high is None:
        return ""
    return f" [{_value(interval.low, metric)}, {_value(interval.high, metric)}]"


def _pair(values: tuple[float | None, float | None], scale: float, digits: int) -> str:
    return " / ".join("–" if v is None else f"{v * scale:,.{digits}f}" for v in values)


def not_judged(declaration: Declaration, row: SynthesisRow) -> str:
    """What a row without a verdict shows: ``not run``, or how many of the declared
    evaluation seeds are paired so far (:func:`tested` waits for all of them)."""
    if not row.per_seed:
        return NOT_RUN
    return f"{len(row.per_seed)} of {len(declaration.evaluation_seeds)} seeds run"


def synthesis_table(declaration: Declaration, rows: Sequence[SynthesisRow]) -> list[str]:
    """The markdown of "MCFL against the best alternative", and the per-seed values of
    the bimodal outcomes."""
    header = [
        "scenario", "hypothesis", "best alternative", "paired seeds",
        "MCFL − best: mean over trainers [Holm-level interval]", "p (Holm)",
        "TOST p (Holm) [its interval]", "verdict", "worst trainer (95 %)",
        "gas / trainer-round (MCFL / best)", "kB / trainer-round (MCFL / best)",
        "s / round (MCFL / best)",
    ]  # fmt: skip
    lines, per_seed = [], []
    for row in rows:
        scenario = row.scenario
        claim = scenario.hypothesis + ("" if scenario.paper_claim else " (no paper claim)")
        best = row.choice.method
        label = campaign.LABELS.get(best, best) if best else f"not chosen yet ({row.choice.reason})"
        costs = row.costs or {}
        compute = [
            _pair(costs.get("gas", (None, None)), 1.0, 0),
            _pair(costs.get("traffic", (None, None)), 1e-3, 0),
            _pair(costs.get("seconds", (None, None)), 1.0, 1),
        ]
        if row.verdict is None or row.difference is None or row.equivalence is None:
            seeds, waiting = str(len(row.per_seed)), not_judged(declaration, row)
            lines.append(
                [scenario.name, claim, label, seeds, waiting, "–", "–", waiting, "–", *compute]
            )
            continue
        worst = stats.mean_interval(d[1] for d in row.per_seed.values())
        margin = margin_text(declaration.margin(row.metric), row.metric)
        lines.append(
            [
                scenario.name,
                claim + (": supported" if row.verdict.supported else ": not supported"),
                label,
                str(len(row.per_seed)),
                _value(row.difference.mean, row.metric) + _bracket(row.interval, row.metric),
                f"{row.p_difference:.3g}",
                f"±{margin}: {row.p_equivalence:.3g}"
                + _bracket(row.equivalence_interval, row.metric),
                row.verdict.wording,
                "–" if worst is None else worst.format(*stats.scale_of(row.metric), signed=True),
                *compute,
            ]
        )
        if row.bimodal:
            values = ", ".join(
                f"s{s} {_value(d[0], row.metric)}" for s, d in sorted(row.per_seed.items())
            )
            per_seed.append(f"- {scenario.name}: {values}")
    out = [
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
        *("| " + " | ".join(line) + " |" for line in lines),
        "",
    ]
    if per_seed:
        out += ["Per seed (MCFL − best, mean over trainers), where the outcome is bimodal:", ""]
        out += [*per_seed, ""]
    chosen = [row for row in rows if row.choice.method is not None and row.choice.means]
    if chosen:
        out += [
            "How each comparator was chosen: every candidate's mean over trainers on the "
            "tuning seeds, best first (the evaluation seeds play no part):",
            "",
        ]
        for row in chosen:
            ranked = sorted(
                row.choice.means.items(),
                key=lambda item: item[1],
                reverse=stats.higher_is_better(row.metric),
            )
            listed = ", ".join(
                f"{campaign.LABELS.get(m, m)} {_value(v, row.metric, signed=False)}"
                for m, v in ranked
            )
            out.append(f"- {row.scenario.name}, tuning seeds: {listed}")
        out.append("")
    return out
